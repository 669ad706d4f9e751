/* real/data.h: the training data of a real run: a file of bytes (one
 * token per byte, vocabulary 256) and, for every iteration, the token and
 * target sequences of each of this DP rank's micro-batches. Sample k of
 * the global batch at iteration `it` starts at a position drawn from
 * (seed, it, k), so any parallel plan sees the same global batch and a
 * resumed run sees what the uninterrupted one saw. With context
 * parallelism a rank holds T / CP tokens of each sample: its two chunks
 * of the sequence (model/layout.h, layout_cp_pos).
 *
 * With --async-data-loader a background thread prepares iteration it + 1
 * while it runs (MegaScale's asynchronous data pipeline); otherwise the
 * op program's host stall (SOP_HOST) prepares it synchronously. */
#ifndef REAL_DATA_H
#define REAL_DATA_H

#include <pthread.h>

typedef struct {
    unsigned char *bytes;
    long len;
    unsigned long long seed;
    int B, T, m, dp_i;          /* micro-batch, sequence, micro-batches, DP rank (the data replica) */
    int cp, cp_i, Tl;           /* CP size, this rank's place, tokens it holds per sample (T / cp) */
    int *tok[2], *tgt[2];       /* host (m, B, Tl) per buffer */
    int ready_it[2];            /* iteration held by each buffer, -1 none */
    /* the background loader */
    int async, stop, want_it, busy;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} data_t;

/* Reads the file; checks it holds at least T + 2 bytes. */
int data_open(data_t *d, const char *path, unsigned long long seed, int B, int T, int m, int dp_i, int cp, int cp_i,
              int async, char *err, int errlen);
void data_close(data_t *d);

/* Host arrays of iteration `it` (blocks until ready; with the loader, asks
 * it for it + 1 before returning). */
int data_get(data_t *d, int it, const int **tokens, const int **targets);

#endif
