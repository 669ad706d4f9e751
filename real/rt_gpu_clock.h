/* real/rt_gpu_clock: the GPU runtime's clock reader (real/rt_gpu.c): a host
 * thread that reads its GPU's SM clock, board power and power-cap bit
 * through NVML (kern_clock) every RT_CLOCK_READ_MS while reading is on
 * (iter_begin to iter_end), into sums the runtime copies to rt->clock. */
#ifndef REAL_RT_GPU_CLOCK_H
#define REAL_RT_GPU_CLOCK_H

#include "kernels/kern_common.h"

typedef struct rt_clock_reader rt_clock_reader;

/* The reader of CUDA device `device`, its thread started; NULL where NVML
 * does not answer (or no thread could be made): the run goes on unread. */
rt_clock_reader *rt_clock_reader_start(int device);
/* Reads from now on (on != 0) or stops reading; NULL is a no-op. */
void rt_clock_reader_reading(rt_clock_reader *r, int on);
/* The sums so far (zero for NULL). */
kern_clock_sums rt_clock_reader_sums(rt_clock_reader *r);
/* Joins the thread and frees the reader; NULL is a no-op. */
void rt_clock_reader_stop(rt_clock_reader *r);

#endif
