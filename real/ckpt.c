/* real/ckpt.c: two-stage checkpoints (ckpt.h). */
#include "real/ckpt.h"

#include "real/health.h"
#include "real/rt.h"
#include "sim/out.h"

#include <dirent.h>
#include <errno.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "MEGASIM-CKPT-2\n"
#define MAGIC_V1 "MEGASIM-CKPT-1\n" /* before the checksum */

typedef struct {
    char magic[16];
    int32_t step, world, rank, nextra; /* nextra: floats after the 3 x nshard (FP8's scales; 0 before) */
    int64_t nshard, config_len;
    uint64_t fnv1a; /* FNV-1a 64 over the configuration and the state, as written */
} header_t;

/* FNV-1a, 64 bits: h from a previous call (or FNV_START) over n bytes. */
#define FNV_START 0xcbf29ce484222325ULL
static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

/* The floats of a rank's state: the shard's three, then the extra ones. */
static size_t state_len(long nshard, long nextra) { return 3 * (size_t)nshard + (size_t)nextra; }

/* A shard's checksum: its configuration text, then its state's floats. */
static uint64_t shard_sum(const char *config, size_t config_len, const float *state, long nshard, long nextra)
{
    return fnv1a(fnv1a(FNV_START, config, config_len), state, sizeof(float) * state_len(nshard, nextra));
}

int ckpt_init(ckpt_t *c, const char *dir, int rank, int world, const char *config, char *err, int errlen)
{
    memset(c, 0, sizeof *c);
    snprintf(c->dir, sizeof c->dir, "%s", dir);
    c->rank = rank, c->world = world, c->config = config;
    if (mkdir(dir, 0777) && errno != EEXIST) {
        snprintf(err, errlen, "--save %s: cannot create the directory: %s", dir, strerror(errno));
        return -1;
    }
    return 0;
}

float *ckpt_buffer(ckpt_t *c, long nshard, long nextra)
{
    if (!c->state || c->nshard != nshard || c->nextra != nextra) {
        free(c->state);
        c->state = malloc(sizeof(float) * (state_len(nshard, nextra) ? state_len(nshard, nextra) : 1));
        c->nshard = nshard, c->nextra = nextra;
    }
    return c->state;
}

static void paths(const ckpt_t *c, int step, char *stepdir, size_t n1, char *file, size_t n2)
{
    snprintf(stepdir, n1, "%s/step-%06d", c->dir, step);
    snprintf(file, n2, "%s/rank-%05d.bin", stepdir, c->rank);
}

/* Stage 2, on its own thread: header, configuration, state; then rename.
 * Durable (sim/out.h): the data are on the disk, not only in the page
 * cache, before the rename makes them the file. */
static void *writer(void *arg)
{
    ckpt_t *c = arg;
    int64_t t0 = rt_now_ns();
    char stepdir[1100], file[1200], err[512];
    paths(c, c->step, stepdir, sizeof stepdir, file, sizeof file);
    header_t h = {MAGIC, c->step, c->world, c->rank, (int32_t)c->nextra, c->nshard, (int64_t)strlen(c->config), 0};
    h.fnv1a = shard_sum(c->config, (size_t)h.config_len, c->state, c->nshard, c->nextra);
    out_file_t o;
    int rc = (mkdir(stepdir, 0777) == 0 || errno == EEXIST) ? out_open(&o, file, "wb", err, sizeof err) : -1;
    if (rc == 0) {
        o.durable = 1;
        fwrite(&h, sizeof h, 1, o.f), fwrite(c->config, 1, (size_t)h.config_len, o.f);
        fflush(o.f);
        inject_in_ckpt_write(c->step); /* --inject-fault ckpt: killed here, half written */
        fwrite(c->state, sizeof(float), state_len(c->nshard, c->nextra), o.f);
        rc = out_close(&o, 0);
    }
    c->write_rc = rc;
    c->stage2_s = (rt_now_ns() - t0) * 1e-9;
    return NULL;
}

int ckpt_finish(ckpt_t *c, char *err, int errlen)
{
    int mine = 0, all = 0;
    if (c->busy) {
        pthread_join(c->thread, NULL);
        c->busy = 0;
        mine = c->write_rc ? 1 : 0;
        MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (all) {
            snprintf(err, errlen, "checkpoint of step %d: %d rank(s) could not write under %s%s", c->step, all,
                     c->dir, mine ? " (this one included)" : "");
            return -1;
        }
        if (c->rank == 0) {
            char latest[1100];
            out_file_t o;
            snprintf(latest, sizeof latest, "%s/latest", c->dir);
            if (out_open(&o, latest, "w", err, errlen))
                return -1;
            o.durable = 1;
            fprintf(o.f, "%d\n", c->step);
            if (out_close(&o, 0))
                return -1;
        }
    }
    return 0;
}

int ckpt_start(ckpt_t *c, int step, char *err, int errlen)
{
    c->step = step;
    if (pthread_create(&c->thread, NULL, writer, c)) {
        snprintf(err, errlen, "cannot start the checkpoint writer thread");
        return -1;
    }
    c->busy = 1;
    return 0;
}

void ckpt_free(ckpt_t *c)
{
    if (c->busy)
        pthread_join(c->thread, NULL);
    free(c->state);
    memset(c, 0, sizeof *c);
}

/* The newest step under dir whose every rank's file exists, or -1. */
static int newest_complete(const char *dir, int world)
{
    DIR *d = opendir(dir);
    int best = -1;
    for (struct dirent *e; d && (e = readdir(d));) {
        int s, n = 0, r = 0;
        if (sscanf(e->d_name, "step-%d%n", &s, &n) != 1 || e->d_name[n] || s <= best)
            continue;
        char file[1300];
        for (r = 0; r < world; r++) {
            snprintf(file, sizeof file, "%s/%s/rank-%05d.bin", dir, e->d_name, r);
            if (access(file, R_OK))
                break;
        }
        if (r == world)
            best = s;
    }
    if (d)
        closedir(d);
    return best;
}

int ckpt_newest(const char *dir, int world)
{
    char latest[1100];
    snprintf(latest, sizeof latest, "%s/latest", dir);
    FILE *f = fopen(latest, "r");
    int s = -1;
    if (!f || fscanf(f, "%d", &s) != 1 || s < 0)
        s = -1;
    if (f)
        fclose(f);
    int newer = newest_complete(dir, world);
    return newer > s ? newer : s;
}

int ckpt_load(const char *dir, int rank, int world, const char *config, long nshard, long nextra, float **state,
              int *step,
              char *err, int errlen)
{
    char latest[1100], file[1300];
    snprintf(latest, sizeof latest, "%s/latest", dir);
    int s = ckpt_newest(dir, world);
    FILE *f;
    if (s < 0) {
        snprintf(err, errlen, "--resume: %s holds no complete checkpoint (no readable %s, and no step-N folder "
                 "with every rank's file)", dir, latest);
        return -1;
    }
    snprintf(file, sizeof file, "%s/step-%06d/rank-%05d.bin", dir, s, rank);
    header_t h;
    char *cfg = NULL;
    *state = NULL;
    f = fopen(file, "rb");
    int rc = -1;
    if (!f || fread(&h, sizeof h, 1, f) != 1 || memcmp(h.magic, MAGIC, sizeof h.magic))
        snprintf(err, errlen, "--resume: %s is %s", file,
                 f && !memcmp(h.magic, MAGIC_V1, sizeof h.magic)
                     ? "a checkpoint of an older megasim, without a checksum (allowed: this version's)"
                     : "missing or not a megasim checkpoint");
    else if (h.world != world)
        snprintf(err, errlen, "--resume: %s was written by %d ranks; this run has %d (allowed: the same plan)", file,
                 h.world, world);
    else if (h.nshard != nshard || h.nextra != nextra || h.config_len < 0 || h.config_len > (1 << 24))
        snprintf(err, errlen, "--resume: %s holds %lld parameters and %d FP8 scales for this rank; the job needs %ld "
                 "and %ld", file, (long long)h.nshard, (int)h.nextra, nshard, nextra);
    else if (!(cfg = calloc(1, (size_t)h.config_len + 1)) || fread(cfg, 1, (size_t)h.config_len, f) != (size_t)h.config_len)
        snprintf(err, errlen, "--resume: %s is truncated", file);
    else if (strcmp(cfg, config))
        snprintf(err, errlen, "--resume: %s was written for another job (its configuration differs from this "
                 "run's job, --seed or --data; allowed: the same)", file);
    else if (!(*state = malloc(sizeof(float) * (state_len(nshard, nextra) ? state_len(nshard, nextra) : 1))) ||
             fread(*state, sizeof(float), state_len(nshard, nextra), f) != state_len(nshard, nextra))
        snprintf(err, errlen, "--resume: %s is truncated", file);
    else if (shard_sum(cfg, (size_t)h.config_len, *state, nshard, nextra) != h.fnv1a)
        snprintf(err, errlen, "--resume: %s is corrupt: its checksum does not match its contents", file);
    else
        rc = 0, *step = s;
    if (rc) {
        free(*state);
        *state = NULL;
    }
    if (f)
        fclose(f);
    free(cfg);
    return rc;
}
