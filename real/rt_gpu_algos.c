/* real/rt_gpu_algos.c: the GPU runtime's file of cuBLASLt choices
 * (`run --gemm-algos DIR`): which of the heuristic's candidates runs each
 * GEMM problem (kern_ctx.algos, kernels/matmul.cu), tuned the first time a
 * problem is met and kept, one file per rank (DIR/rank-R.txt: a rank reads
 * back exactly the choices it made, so later runs are bit-identical to one
 * another whatever the plan). Text, one problem a line:
 *
 *   megasim-gemm-algos 1
 *   device NVIDIA H100 80GB HBM3
 *   M N K ta tb batch c_fp32 epilogue lda ldb ldc rank us
 *
 * A file tuned on another device is not used (a note says so; the run
 * tunes again and writes this device's). Written whole to a temporary
 * file and renamed, so a run killed meanwhile leaves the previous one. */
#include "real/rt_gpu_int.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define ALGOS_MAGIC "megasim-gemm-algos 1"

static int bad_line(const char *path, int line, const char *what, char *err, int errlen)
{
    snprintf(err, errlen, "%s:%d: %s (a file of `run --gemm-algos`: first line '%s', then 'device NAME', then "
             "lines of 13 numbers: M N K ta tb batch c_fp32 epilogue lda ldb ldc rank us)", path, line, what,
             ALGOS_MAGIC);
    return -1;
}

/* One problem's line into *c; 0, or -1 naming what is wrong. */
static int parse_choice(const char *s, kern_algo_choice *c, const char **why)
{
    memset(c, 0, sizeof *c); /* keys compare by memcmp */
    kern_gemm_key *k = &c->key;
    int used = 0;
    if (sscanf(s, "%d %d %d %d %d %d %d %d %ld %ld %ld %d %f %n", &k->M, &k->N, &k->K, &k->ta, &k->tb, &k->batch,
               &k->c_fp32, &k->epilogue, &k->lda, &k->ldb, &k->ldc, &c->rank, &c->us, &used) != 13 || s[used])
        return *why = "expected 13 numbers", -1;
    if (k->M < 1 || k->N < 1 || k->K < 1 || k->batch < 1 || k->lda < 1 || k->ldb < 1 || k->ldc < 1 ||
        k->epilogue < 0)
        return *why = "a size, batch, leading dimension or epilogue out of range (sizes at least 1)", -1;
    if ((k->ta | k->tb | k->c_fp32) & ~1)
        return *why = "ta, tb and c_fp32 are 0 or 1", -1;
    if (c->rank < 0 || c->rank >= KERN_MAX_ALGOS || !(c->us >= 0) || !isfinite(c->us))
        return *why = "rank must be 0 to 15 and us a time of at least 0", -1;
    return 0;
}

static int load(gpu_t *g, const char *device, const char *path, char *err, int errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT)
            return 0; /* a first run: everything is tuned */
        snprintf(err, errlen, "%s: %s (run --gemm-algos)", path, strerror(errno));
        return -1;
    }
    char s[512];
    int line = 0, rc = 0, other = 0;
    while (!rc && fgets(s, sizeof s, f)) {
        line++;
        size_t n = strlen(s);
        if (n && s[n - 1] == '\n')
            s[--n] = 0;
        else if (!feof(f))
            rc = bad_line(path, line, "a line longer than 511 characters", err, errlen);
        const char *why = NULL;
        kern_algo_choice c;
        if (rc)
            break;
        if (line == 1)
            rc = strcmp(s, ALGOS_MAGIC) ? bad_line(path, line, "not a file of GEMM choices", err, errlen) : 0;
        else if (line == 2)
            rc = strncmp(s, "device ", 7) ? bad_line(path, line, "expected 'device NAME'", err, errlen)
                                           : (other = strcmp(s + 7, device) != 0, 0);
        else if (parse_choice(s, &c, &why))
            rc = bad_line(path, line, why, err, errlen);
        else if (!other && kern_algo_find(&g->algos, &c.key))
            rc = bad_line(path, line, "a problem listed twice", err, errlen);
        else if (!other && kern_algo_add(&g->algos, &c))
            rc = bad_line(path, line, "out of memory", err, errlen);
    }
    fclose(f);
    if (!rc && line < 2)
        rc = bad_line(path, line, "the header is missing", err, errlen);
    if (!rc && other)
        fprintf(stderr, "megasim run: note: %s was tuned on another device (not %s): its choices are tuned "
                "again here and the file rewritten\n", path, device);
    return rc;
}

static int save(const gpu_t *g, const char *device, const char *path, char *err, int errlen)
{
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    int ok = f != NULL && fprintf(f, "%s\ndevice %s\n", ALGOS_MAGIC, device) > 0;
    for (int i = 0; ok && i < g->algos.n; i++) {
        const kern_algo_choice *c = &g->algos.c[i];
        const kern_gemm_key *k = &c->key;
        ok = fprintf(f, "%d %d %d %d %d %d %d %d %ld %ld %ld %d %.3f\n", k->M, k->N, k->K, k->ta, k->tb, k->batch,
                     k->c_fp32, k->epilogue, k->lda, k->ldb, k->ldc, c->rank, c->us) > 0;
    }
    if (f && fclose(f))
        ok = 0;
    if (!ok || rename(tmp, path)) {
        snprintf(err, errlen, "%s: %s (writing run --gemm-algos)", path, strerror(errno ? errno : EIO));
        remove(tmp);
        return -1;
    }
    return 0;
}

int rt_gpu_gemm_algos(rt_t *rt, const char *dir, int rank, int write, char *err, int errlen)
{
    gpu_t *g = rt->impl;
    char path[1024];
    if (snprintf(path, sizeof path, "%s/rank-%d.txt", dir, rank) >= (int)sizeof path) {
        snprintf(err, errlen, "--gemm-algos %s: the path is too long", dir);
        return -1;
    }
    if (write)
        return save(g, rt->device_name, path, err, errlen);
    if (mkdir(dir, 0777) && errno != EEXIST) {
        snprintf(err, errlen, "--gemm-algos %s: %s (a directory, made when missing)", dir, strerror(errno));
        return -1;
    }
    for (int i = 0; i < g->have_kc; i++)
        g->kc[i].algos = &g->algos;
    return load(g, rt->device_name, path, err, errlen);
}
