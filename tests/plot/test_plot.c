/* test_plot: `megasim plot` end to end. Writes a small synthetic reproduce
 * file (the paper's Table 2, Table 3 and Figure 9 with made-up predictions)
 * or a small simulation file (megasim simulate --out), runs megasim plot,
 * and checks each expected .dat file's row count and, in the figures mode,
 * each PNG and SVG.
 *
 *   test_plot data     MEGASIM DIR reproduce|subset|simulation   (gnuplot hidden: PATH emptied)
 *   test_plot figures  MEGASIM DIR reproduce|simulation          (exit 77 without gnuplot)
 *   test_plot plain    FILE   (an HDF5 file that is not a megasim result, for the bad-input test) */
#include "tests/check.h"

#include <hdf5.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    int32_t system, gpus, batch;
    double paper_mfu, closed_mfu, sim_mfu, paper_iter_s, closed_iter_s, sim_iter_s;
} t2_t;
typedef struct {
    int32_t row;
    double paper_mfu, closed_mfu, sim_mfu;
} t3_t;
typedef struct {
    int32_t system, gpus;
    double paper_mfu, closed_mfu, sim_mfu;
} f9_t;

/* Paper values: /work/shared/megascale-targets.md (Table 2, Table 3,
 * Figure 9); the predictions are the paper's plus a made-up offset. */
static const int t2_gpus[8] = {256, 512, 768, 1024, 3072, 6144, 8192, 12288};
static const double t2_mfu[2][8] = {{.530, .499, .467, .447, .487, .478, .433, .412},
                                    {.653, .635, .613, .590, .591, .573, .549, .552}};
static const double t2_iter[2][8] = {{40.0, 21.2, 15.2, 11.9, 29.02, 14.78, 12.24, 8.57},
                                     {32.0, 16.5, 11.5, 8.9, 23.66, 12.21, 9.56, 6.34}};
static const double t3_mfu[9] = {.477, .523, .533, .555, .580, .595, .612, .623, .653};
static const char *t3_adds = "Megatron-LM baseline|parallel transformer block|sliding-window attention|"
                             "TP/SP communication overlap|PP communication overlap|DP communication overlap|"
                             "efficient operators (FlashAttention-2, fused LayerNorm, GeLU)|"
                             "misc (data pipeline, removed host-side stalls)|LAMB, global batch x3 (256 to 768)";
static const int f9_gpus[3] = {2240, 4480, 11200};
static const double f9_mfu[2][3] = {{.492, .488, .482}, {.543, .541, .543}};

static void attr_str(hid_t loc, const char *name, const char *v)
{
    hid_t t = H5Tcopy(H5T_C_S1), s = H5Screate(H5S_SCALAR);
    H5Tset_size(t, H5T_VARIABLE);
    hid_t a = H5Acreate2(loc, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, t, &v);
    H5Aclose(a), H5Sclose(s), H5Tclose(t);
}

typedef struct {
    const char *name;
    size_t off;
    int is_int;
} col_t;

static hid_t write_table(hid_t f, const char *name, const col_t *cols, int nc, size_t size, const void *rows,
                         hsize_t n)
{
    hid_t t = H5Tcreate(H5T_COMPOUND, size), s = H5Screate_simple(1, &n, NULL);
    for (int i = 0; i < nc; i++)
        H5Tinsert(t, cols[i].name, cols[i].off, cols[i].is_int ? H5T_NATIVE_INT32 : H5T_NATIVE_DOUBLE);
    hid_t d = H5Dcreate2(f, name, t, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows);
    H5Sclose(s), H5Tclose(t);
    return d;
}

#define C2(f, i) {#f, offsetof(t2_t, f), i}
#define C3(f, i) {#f, offsetof(t3_t, f), i}
#define C9(f, i) {#f, offsetof(f9_t, f), i}

/* subset: only /table3 (a subset run of megasim reproduce). */
static void write_reproduce(const char *path, int subset)
{
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    attr_str(f, "kind", "reproduce");
    attr_str(f, "megasim_version", "0.1.0");
    attr_str(f, "system_names", "megatron-lm,megascale");
    t2_t t2[16];
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < 8; i++)
            t2[8 * s + i] = (t2_t){s, t2_gpus[i], i < 4 ? 768 : 6144, t2_mfu[s][i], t2_mfu[s][i] + 0.05,
                                   t2_mfu[s][i] + 0.045, t2_iter[s][i], t2_iter[s][i] * 0.9, t2_iter[s][i] * 0.91};
    static const col_t c2[] = {C2(system, 1),       C2(gpus, 1),          C2(batch, 1),
                               C2(paper_mfu, 0),    C2(closed_mfu, 0),    C2(sim_mfu, 0),
                               C2(paper_iter_s, 0), C2(closed_iter_s, 0), C2(sim_iter_s, 0)};
    if (!subset)
        H5Dclose(write_table(f, "/table2", c2, 9, sizeof(t2_t), t2, 16));
    t3_t t3[9];
    for (int i = 0; i < 9; i++)
        t3[i] = (t3_t){i + 1, t3_mfu[i], t3_mfu[i] + 0.03, t3_mfu[i] + 0.025};
    static const col_t c3[] = {C3(row, 1), C3(paper_mfu, 0), C3(closed_mfu, 0), C3(sim_mfu, 0)};
    hid_t d = write_table(f, "/table3", c3, 4, sizeof(t3_t), t3, 9);
    attr_str(d, "adds", t3_adds);
    H5Dclose(d);
    f9_t f9[6];
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < 3; i++)
            f9[3 * s + i] = (f9_t){s, f9_gpus[i], f9_mfu[s][i], f9_mfu[s][i] + 0.04, f9_mfu[s][i] + 0.035};
    static const col_t c9[] = {C9(system, 1), C9(gpus, 1), C9(paper_mfu, 0), C9(closed_mfu, 0), C9(sim_mfu, 0)};
    if (!subset)
        H5Dclose(write_table(f, "/fig9", c9, 5, sizeof(f9_t), f9, 6));
    H5Fclose(f);
}

static void write_plain(const char *path)
{
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t n = 3;
    double v[3] = {1, 2, 3};
    hid_t s = H5Screate_simple(1, &n, NULL), d = H5Dcreate2(f, "/x", H5T_NATIVE_DOUBLE, s, H5P_DEFAULT, H5P_DEFAULT,
                                                            H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
    H5Dclose(d), H5Sclose(s), H5Fclose(f);
}

static long h5_rows(const char *path, const char *name)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), d = H5Dopen2(f, name, H5P_DEFAULT), s = H5Dget_space(d);
    hsize_t n = 0;
    H5Sget_simple_extent_dims(s, &n, NULL);
    H5Sclose(s), H5Dclose(d), H5Fclose(f);
    return (long)n;
}

/* Data rows: lines that are neither blank nor '#' comments; -1 if absent. */
static long dat_rows(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[4096];
    long n = 0;
    while (fgets(line, sizeof line, f))
        n += line[0] != '#' && line[0] != '\n';
    fclose(f);
    return n;
}

static int run(const char *cmd)
{
    printf("run: %s\n", cmd);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static int file_has(const char *path, const char *text)
{
    FILE *f = fopen(path, "r");
    char buf[8192] = "";
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = 0;
    if (f)
        fclose(f);
    return strstr(buf, text) != NULL;
}

static void check_dat(const char *dir, const char *name, long expected, const char *source)
{
    char path[2048], what[256];
    snprintf(path, sizeof path, "%s/%s.dat", dir, name);
    snprintf(what, sizeof what, "%s.dat rows", name);
    printf("%s %-52s expected %ld  got %ld  (%s)\n", dat_rows(path) == expected ? "ok  " : "FAIL", what, expected,
           dat_rows(path), source);
    dat_rows(path) == expected ? check_passed_++ : check_failed_++;
}

/* Every number of every data row of DIR/NAME.dat against want (row-major,
 * ncols numbers a row; NAN: a '?' column), within 1e-5 relative (the
 * .dat prints 6 significant digits); tokens after ncols are ignored. */
static void check_dat_values(const char *dir, const char *name, const double *want, int nrows, int ncols,
                             const char *source)
{
    char path[2048], line[4096], what[256], detail[512] = "every value as written";
    snprintf(path, sizeof path, "%s/%s.dat", dir, name);
    FILE *f = fopen(path, "r");
    int row = 0, bad = 0;
    while (f && fgets(line, sizeof line, f) && !bad) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        char *p = line;
        for (int c = 0; c < ncols && row < nrows && !bad; c++) {
            char *end;
            double w = want[row * ncols + c], got = strtod(p, &end);
            if (end == p && !strncmp(p + strspn(p, " "), "?", 1))
                got = NAN, end = strchr(p, '?') + 1;
            if (isnan(w) ? !isnan(got) : !(fabs(got - w) <= 1e-5 * fabs(w) + 1e-9)) {
                snprintf(detail, sizeof detail, "row %d column %d: expected %.6g, got %.6g", row + 1, c + 1, w, got);
                bad = 1;
            }
            p = end;
        }
        row++;
    }
    if (f)
        fclose(f);
    if (!bad && row != nrows)
        snprintf(detail, sizeof detail, "expected %d rows, got %d", nrows, row), bad = 1;
    snprintf(what, sizeof what, "%s.dat values (%s)", name, source);
    check_true(what, !bad, detail);
}

/* The synthetic reproduce file's tables as the .dat files lay them out:
 * MFU in percent, one line per GPU count with both systems side by side. */
static void check_reproduce_values(const char *out, int subset)
{
    static double t2[8 * 14], t3[9 * 4], f9[3 * 8];
    for (int i = 0; i < 9; i++) {
        double r[4] = {i + 1, 100 * t3_mfu[i], 100 * (t3_mfu[i] + 0.03), 100 * (t3_mfu[i] + 0.025)};
        memcpy(&t3[4 * i], r, sizeof r);
    }
    check_dat_values(out, "table3-ablation", t3, 9, 4, "row, paper, paper + 3, paper + 2.5 points");
    if (subset)
        return;
    for (int i = 0; i < 8; i++) {
        double *r = &t2[14 * i];
        r[0] = t2_gpus[i], r[1] = i < 4 ? 768 : 6144;
        for (int s = 0; s < 2; s++) {
            r[2 + 3 * s] = 100 * t2_mfu[s][i], r[3 + 3 * s] = 100 * (t2_mfu[s][i] + 0.05);
            r[4 + 3 * s] = 100 * (t2_mfu[s][i] + 0.045);
            r[8 + 3 * s] = t2_iter[s][i], r[9 + 3 * s] = t2_iter[s][i] * 0.9, r[10 + 3 * s] = t2_iter[s][i] * 0.91;
        }
    }
    check_dat_values(out, "table2-mfu", t2, 8, 14, "the file's paper values and offsets, both systems a line");
    for (int i = 0; i < 3; i++) {
        double *r = &f9[8 * i];
        r[0] = f9_gpus[i], r[1] = NAN;
        for (int s = 0; s < 2; s++)
            r[2 + 3 * s] = 100 * f9_mfu[s][i], r[3 + 3 * s] = 100 * (f9_mfu[s][i] + 0.04),
                      r[4 + 3 * s] = 100 * (f9_mfu[s][i] + 0.035);
    }
    check_dat_values(out, "fig9-weak-scaling", f9, 3, 8, "gpus, no batch, then both systems");
}

/* Non-empty PNG (with the 8-byte PNG signature) and SVG. */
static void check_figure(const char *dir, const char *name)
{
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    char path[2048], what[256], detail[256];
    for (int e = 0; e < 2; e++) {
        snprintf(path, sizeof path, "%s/%s.%s", dir, name, e ? "svg" : "png");
        struct stat st;
        long size = stat(path, &st) == 0 ? (long)st.st_size : -1;
        unsigned char head[8] = {0};
        FILE *f = fopen(path, "rb");
        size_t got = f ? fread(head, 1, 8, f) : 0;
        if (f)
            fclose(f);
        int ok = size > 0 && (e ? got > 0 && file_has(path, "<svg") : got == 8 && !memcmp(head, sig, 8));
        snprintf(what, sizeof what, "%s.%s", name, e ? "svg" : "png");
        snprintf(detail, sizeof detail, "expected non-empty, %s; got %ld bytes", e ? "an <svg> element" : "PNG signature",
                 size);
        check_true(what, ok, detail);
    }
}

static int have_gnuplot(void)
{
    return run("command -v gnuplot >/dev/null 2>&1") == 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "plain")) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s", argv[2]);
        if (strrchr(dir, '/'))
            *strrchr(dir, '/') = 0, mkdir(dir, 0777);
        write_plain(argv[2]);
        return 0;
    }
    if (argc != 5) {
        fprintf(stderr, "usage: test_plot data|figures MEGASIM DIR reproduce|subset|simulation\n");
        return 2;
    }
    const char *mode = argv[1], *bin = argv[2], *dir = argv[3], *what = argv[4];
    int figures = !strcmp(mode, "figures");
    if (figures && !have_gnuplot()) {
        printf("gnuplot is not on PATH: figure checks skipped (install gnuplot-nox)\n");
        return 77;
    }
    char h5[1024], out[1024], cmd[4096], err[1100];
    mkdir(dir, 0777);
    snprintf(h5, sizeof h5, "%s/%s-%s.h5", dir, what, mode);
    snprintf(out, sizeof out, "%s/%s-%s-plots", dir, what, mode);
    snprintf(err, sizeof err, "%s/%s-%s.stderr", dir, what, mode);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", out);
    run(cmd);
    int sim = !strcmp(what, "simulation");
    if (sim) {
        snprintf(cmd, sizeof cmd,
                 "'%s' simulate --no-fold --num-gpus 32 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 "
                 "--num-layers 16 --hidden-size 2048 --num-attention-heads 16 --global-batch-size 64 --slow-rank 5:1.3 "
                 "--out '%s' --trace-ranks 0,8,16,24 >/dev/null",
                 bin, h5);
        if (!check_true("megasim simulate --out exits 0", run(cmd) == 0, h5))
            return check_done("plot");
    } else {
        write_reproduce(h5, !strcmp(what, "subset"));
    }
    /* Default output folder: DIR/STEM-plots beside DIR/STEM.h5. */
    snprintf(cmd, sizeof cmd, "%s'%s' plot '%s' 2>'%s'", figures ? "" : "env PATH=/nonexistent-megasim ", bin, h5,
             err);
    int rc = run(cmd);
    check_true("megasim plot exits 0", rc == 0, rc == 0 ? "exit 0" : "non-zero exit");
    if (!figures)
        check_true("stderr says gnuplot not found", file_has(err, "gnuplot not found: data written to"),
                   "expected 'gnuplot not found: data written to DIR; install gnuplot-nox to draw'");
    if (sim) {
        check_dat(out, "timeline", h5_rows(h5, "/timeline"), "rows of /timeline (ops of ranks 0,8,16,24)");
        check_dat(out, "heatmap", 32, "one row per rank, unfolded 32 GPUs");
    } else if (!strcmp(what, "subset")) {
        check_dat(out, "table3-ablation", 9, "the 9 rows of Table 3");
        check_dat(out, "table2-mfu", -1, "no /table2 in the file: no .dat");
        check_dat(out, "fig9-weak-scaling", -1, "no /fig9 in the file: no .dat");
        check_reproduce_values(out, 1);
    } else {
        check_dat(out, "table2-mfu", 8, "8 GPU counts of Table 2, both systems on one line");
        check_dat(out, "table3-ablation", 9, "the 9 rows of Table 3");
        check_dat(out, "fig9-weak-scaling", 3, "3 GPU counts of Figure 9");
        check_reproduce_values(out, 0);
    }
    if (figures) {
        const char *names[] = {"timeline", "heatmap", "table2-mfu", "table3-ablation", "fig9-weak-scaling"};
        for (int i = sim ? 0 : 2; i < (sim ? 2 : 5); i++)
            check_figure(out, names[i]);
    } else {
        char png[1100];
        snprintf(png, sizeof png, "%s/%s.png", out, sim ? "timeline" : "table3-ablation");
        check_true("no PNG drawn without gnuplot", access(png, F_OK) != 0, png);
    }
    return check_done("plot");
}
