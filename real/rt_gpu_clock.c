/* real/rt_gpu_clock.c: the GPU runtime's clock reader (rt_gpu_clock.h).
 * The thread sleeps RT_CLOCK_READ_MS between reads (an NVML read costs
 * tens of microseconds), so it takes no core from the rank; the sums are
 * under a mutex, taken by the thread once a read and by the runtime once
 * an iteration. */
#include "real/rt_gpu_clock.h"

#include "real/rt.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

struct rt_clock_reader {
    kern_clock clk;
    pthread_t thread;
    pthread_mutex_t mu;
    atomic_int reading, stop;
    kern_clock_sums sums; /* under mu */
};

static void *read_loop(void *p)
{
    rt_clock_reader *r = p;
    const struct timespec dt = {0, RT_CLOCK_READ_MS * 1000000L};
    while (!atomic_load(&r->stop)) {
        if (atomic_load(&r->reading)) {
            pthread_mutex_lock(&r->mu);
            kern_clock_add(&r->clk, &r->sums);
            pthread_mutex_unlock(&r->mu);
        }
        nanosleep(&dt, NULL);
    }
    return NULL;
}

rt_clock_reader *rt_clock_reader_start(int device)
{
    rt_clock_reader *r = calloc(1, sizeof *r);
    if (!r || !kern_clock_open(&r->clk, device) || pthread_mutex_init(&r->mu, NULL)) {
        free(r);
        return NULL;
    }
    if (pthread_create(&r->thread, NULL, read_loop, r)) {
        pthread_mutex_destroy(&r->mu);
        free(r);
        return NULL;
    }
    return r;
}

void rt_clock_reader_reading(rt_clock_reader *r, int on)
{
    if (r)
        atomic_store(&r->reading, on);
}

kern_clock_sums rt_clock_reader_sums(rt_clock_reader *r)
{
    kern_clock_sums s = {0};
    if (r) {
        pthread_mutex_lock(&r->mu);
        s = r->sums;
        pthread_mutex_unlock(&r->mu);
    }
    return s;
}

void rt_clock_reader_stop(rt_clock_reader *r)
{
    if (!r)
        return;
    atomic_store(&r->stop, 1);
    pthread_join(r->thread, NULL);
    pthread_mutex_destroy(&r->mu);
    free(r);
}
