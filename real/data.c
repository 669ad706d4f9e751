/* real/data.c: byte-level batches by (seed, iteration, sample) and the
 * background loader (data.h). */
#include "real/data.h"

#include "model/layout.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void fill(data_t *d, int it, int buf)
{
    long span = d->len - d->T - 1;
    for (int mb = 0; mb < d->m; mb++)
        for (int i = 0; i < d->B; i++) {
            long k = ((long)d->dp_i * d->m + mb) * d->B + i; /* sample of the global batch */
            long at = (long)(mix(mix(d->seed ^ 0x5bd1e995u) ^ ((uint64_t)it << 32) ^ (uint64_t)k) % (uint64_t)span);
            int *tok = d->tok[buf] + ((long)mb * d->B + i) * d->Tl, *tgt = d->tgt[buf] + ((long)mb * d->B + i) * d->Tl;
            for (int t = 0; t < d->Tl; t++) {
                long p = at + layout_cp_pos(t, d->T, d->cp, d->cp_i);
                tok[t] = d->bytes[p], tgt[t] = d->bytes[p + 1];
            }
        }
    d->ready_it[buf] = it;
}

static void *loader(void *arg)
{
    data_t *d = arg;
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (!d->stop && d->want_it < 0)
            pthread_cond_wait(&d->cv, &d->mu);
        if (d->stop)
            break;
        int it = d->want_it, buf = it % 2;
        d->want_it = -1, d->busy = 1;
        pthread_mutex_unlock(&d->mu);
        fill(d, it, buf);
        pthread_mutex_lock(&d->mu);
        d->busy = 0;
        pthread_cond_broadcast(&d->cv);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

int data_open(data_t *d, const char *path, unsigned long long seed, int B, int T, int m, int dp_i, int cp, int cp_i,
              int async, char *err, int errlen)
{
    memset(d, 0, sizeof *d);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "--data %s: cannot open", path);
        return -1;
    }
    fseek(f, 0, SEEK_END);
    d->len = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (d->len < T + 2) {
        fclose(f);
        snprintf(err, errlen, "--data %s: %ld bytes; at least --seq-length + 2 = %d are needed", path, d->len, T + 2);
        return -1;
    }
    d->bytes = malloc((size_t)d->len);
    if (!d->bytes || fread(d->bytes, 1, (size_t)d->len, f) != (size_t)d->len) {
        fclose(f);
        free(d->bytes);
        snprintf(err, errlen, "--data %s: cannot read", path);
        return -1;
    }
    fclose(f);
    d->seed = seed, d->B = B, d->T = T, d->m = m, d->dp_i = dp_i, d->async = async;
    d->cp = cp, d->cp_i = cp_i, d->Tl = T / cp;
    for (int b = 0; b < 2; b++) {
        d->tok[b] = malloc(sizeof(int) * (size_t)m * B * d->Tl);
        d->tgt[b] = malloc(sizeof(int) * (size_t)m * B * d->Tl);
        d->ready_it[b] = -1;
        if (!d->tok[b] || !d->tgt[b]) {
            snprintf(err, errlen, "out of host memory for the batches");
            return -1;
        }
    }
    d->want_it = -1;
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    if (async && pthread_create(&d->thread, NULL, loader, d)) {
        snprintf(err, errlen, "cannot start the data loader thread");
        return -1;
    }
    return 0;
}

static void request(data_t *d, int it)
{
    d->want_it = it;
    pthread_cond_broadcast(&d->cv);
}

int data_get(data_t *d, int it, const int **tokens, const int **targets)
{
    int buf = it % 2;
    if (!d->async) {
        fill(d, it, buf);
    } else {
        pthread_mutex_lock(&d->mu);
        if (d->ready_it[buf] != it && !d->busy && d->want_it != it)
            request(d, it); /* the first iteration, or after a resume */
        while (d->ready_it[buf] != it || d->busy || d->want_it == it)
            pthread_cond_wait(&d->cv, &d->mu);
        request(d, it + 1); /* prepared while this iteration runs */
        pthread_mutex_unlock(&d->mu);
    }
    *tokens = d->tok[buf], *targets = d->tgt[buf];
    return 0;
}

void data_close(data_t *d)
{
    if (d->async) {
        pthread_mutex_lock(&d->mu);
        d->stop = 1;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
        pthread_join(d->thread, NULL);
    }
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv);
    for (int b = 0; b < 2; b++)
        free(d->tok[b]), free(d->tgt[b]);
    free(d->bytes);
    memset(d, 0, sizeof *d);
}
