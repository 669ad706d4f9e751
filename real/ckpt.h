/* real/ckpt.h: two-stage checkpoints, as MegaScale takes them: the rank's
 * training state is copied to host memory (stage 1, the only part training
 * waits for), then a background thread writes it to DIR/step-N/rank-R.bin
 * (stage 2, written to a temporary name and renamed). A checkpoint is
 * complete when every rank's file is: the next save (or the end of the
 * run) checks that over MPI and rank 0 then points DIR/latest at it, and
 * --resume also takes a newer step whose every rank's file is there (a
 * file appears only whole, by its rename): a job killed after stage two
 * finished but before the next save loses nothing, and one killed during
 * stage two leaves the previous checkpoint loadable.
 *
 * The file holds a header (magic, step, world size, rank, shard length,
 * the count of extra floats and the job's configuration as JSON, which a
 * resume must match) and the shard's master weights and Adam moments, then
 * the extra floats (FP8's scales; none without) (exec_state_get). */
#ifndef REAL_CKPT_H
#define REAL_CKPT_H

#include <pthread.h>

typedef struct {
    char dir[1024];
    int rank, world;
    const char *config;         /* the job's options as JSON (not owned) */
    /* the write in flight */
    pthread_t thread;
    int busy, step, write_rc;
    float *state;               /* host copy (3 x nshard + nextra) */
    long nshard, nextra;
    double stage1_s, stage2_s;  /* last save: copy to host, write to file */
} ckpt_t;

int ckpt_init(ckpt_t *c, const char *dir, int rank, int world, const char *config, char *err, int errlen);

/* Stage 1 has been done by the caller into c->state (ckpt_buffer gives
 * it); starts stage 2 for `step`. Finishes the previous save first. */
float *ckpt_buffer(ckpt_t *c, long nshard, long nextra);
int ckpt_start(ckpt_t *c, int step, char *err, int errlen);

/* Waits for the write in flight, checks every rank's went through, and
 * (rank 0) points DIR/latest at it. Collective over MPI_COMM_WORLD. */
int ckpt_finish(ckpt_t *c, char *err, int errlen);

/* Reads the newest complete checkpoint (DIR/latest, or a newer step with
 * every rank's file) and this rank's file into *state (malloc'd, 3 x
 * nshard + nextra). Every mismatch (missing, other world size, other job, other
 * shard length, short file) is one message. */
int ckpt_load(const char *dir, int rank, int world, const char *config, long nshard, long nextra, float **state,
              int *step,
              char *err, int errlen);

/* The step of the newest complete checkpoint under dir for `world` ranks
 * (what ckpt_load would read), or -1 when there is none. */
int ckpt_newest(const char *dir, int world);

void ckpt_free(ckpt_t *c);

#endif
