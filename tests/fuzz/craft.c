/* tests/fuzz/craft.c: DIR SIM.h5 RUN.h5 REP.h5 -> DIR/NAME.h5: damaged result
 * files, one per reliability finding about the readers (F02, F04, F05,
 * F07, F08, F09), each made from a valid file by the one edit the finding
 * describes, with a NAME.h5.expect beside it where a command must refuse
 * it with a given message. check_corpus.py then runs plot, compare and
 * predict --replay on each: exit 0 or 2 with one message, never a crash or
 * a hang. Made at test time, so the repository holds no binary files and
 * each damage is written down here. */
#include "sim/out.h"

#include <hdf5.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *dir;

static void die(const char *what)
{
    fprintf(stderr, "craft: %s\n", what);
    exit(1);
}

/* DIR/NAME, a byte copy of src. */
static const char *copy_of(const char *src, const char *name)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *in = fopen(src, "rb"), *out = fopen(path, "wb");
    if (!in || !out)
        die(src);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        fwrite(buf, 1, n, out);
    fclose(in), fclose(out);
    return path;
}

static void expect(const char *path, const char *text)
{
    char p[4200];
    snprintf(p, sizeof p, "%s.expect", path);
    FILE *f = fopen(p, "w");
    if (!f)
        die(p);
    fputs(text, f);
    fclose(f);
}

/* Replaces root attribute name with a string: variable length (vlen, in
 * HDF5's global heap, as files were written before 2026-11-28) or fixed. */
static void set_root_str(hid_t f, const char *name, const char *v, int vlen)
{
    if (H5Aexists(f, name) > 0 && H5Adelete(f, name) < 0)
        die("H5Adelete");
    hid_t t = H5Tcopy(H5T_C_S1), s = H5Screate(H5S_SCALAR);
    H5Tset_size(t, vlen ? H5T_VARIABLE : strlen(v) + 1);
    H5Tset_cset(t, H5T_CSET_UTF8);
    hid_t a = H5Acreate2(f, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0 || H5Awrite(a, t, vlen ? (const void *)&v : (const void *)v) < 0)
        die("H5Awrite");
    H5Aclose(a), H5Sclose(s), H5Tclose(t);
}

/* Replaces the first occurrence of from with to in root attribute attr. */
static void edit_attr(const char *path, const char *attr, const char *from, const char *to)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    char *s = f >= 0 ? out_h5_attr_read(f, "/", attr) : NULL, *at = s ? strstr(s, from) : NULL;
    if (!at)
        die(attr);
    size_t len = strlen(s) - strlen(from) + strlen(to);
    char *e = malloc(len + 1);
    snprintf(e, len + 1, "%.*s%s%s", (int)(at - s), s, to, at + strlen(from));
    set_root_str(f, attr, e, 0);
    free(s), free(e);
    H5Fclose(f);
}

static void edit_config(const char *path, const char *from, const char *to)
{
    edit_attr(path, "config_json", from, to);
}

/* Sets one field of row `row` of a compound dataset (int32 or float64). */
static void set_field(const char *path, const char *dataset, const char *field, long row, double v)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT), d = H5Dopen2(f, dataset, H5P_DEFAULT);
    hid_t ft = d >= 0 ? H5Dget_type(d) : -1;
    int idx = ft >= 0 ? H5Tget_member_index(ft, field) : -1;
    if (idx < 0)
        die(field);
    int is_int = H5Tget_member_class(ft, (unsigned)idx) == H5T_INTEGER;
    hid_t mt = H5Tcreate(H5T_COMPOUND, 8);
    H5Tinsert(mt, field, 0, is_int ? H5T_NATIVE_INT32 : H5T_NATIVE_DOUBLE);
    hid_t fs = H5Dget_space(d);
    hsize_t start = (hsize_t)row, one = 1;
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &one, NULL);
    hid_t ms = H5Screate_simple(1, &one, NULL);
    union { int32_t i; double x; } buf = {0};
    if (is_int)
        buf.i = (int32_t)v;
    else
        buf.x = v;
    if (H5Dwrite(d, mt, ms, fs, H5P_DEFAULT, &buf) < 0)
        die("H5Dwrite");
    H5Sclose(ms), H5Sclose(fs), H5Tclose(mt), H5Tclose(ft), H5Dclose(d), H5Fclose(f);
}

/* Empties a dataset: a new one of the same type with no rows. */
static void empty_dataset(const char *path, const char *dataset)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT), d = H5Dopen2(f, dataset, H5P_DEFAULT);
    hid_t t = d >= 0 ? H5Dget_type(d) : -1;
    if (t < 0)
        die(dataset);
    H5Dclose(d);
    H5Ldelete(f, dataset, H5P_DEFAULT);
    hsize_t zero = 0;
    hid_t s = H5Screate_simple(1, &zero, NULL), e = H5Dcreate2(f, dataset, t, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (e < 0)
        die("H5Dcreate2");
    H5Dclose(e), H5Sclose(s), H5Tclose(t), H5Fclose(f);
}

/* The old format: kind and config_json as variable-length strings, so
 * their bytes live in the global heap, which the damage then hits. */
static void to_vlen(const char *path)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    char *kind = out_h5_attr_read(f, "/", "kind"), *cfg = out_h5_attr_read(f, "/", "config_json");
    if (!kind || !cfg)
        die("to_vlen");
    set_root_str(f, "kind", kind, 1);
    set_root_str(f, "config_json", cfg, 1);
    free(kind), free(cfg);
    H5Fclose(f);
}

/* Overwrites bytes of the global heap collection (signature GCOL): xor 0xff
 * into `flip` bytes at offsets 16, 40, 64, ... (F04), or zeros over
 * `zero` bytes from offset 8 (F05). */
static void hit_heap(const char *path, int flip, int zero)
{
    FILE *f = fopen(path, "r+b");
    if (!f)
        die(path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    unsigned char *b = malloc((size_t)n);
    fseek(f, 0, SEEK_SET);
    if (fread(b, 1, (size_t)n, f) != (size_t)n)
        die("read");
    long at = -1;
    for (long i = 0; i + 4 <= n && at < 0; i++)
        if (!memcmp(b + i, "GCOL", 4))
            at = i;
    if (at < 0)
        die("no global heap collection");
    for (int k = 0; k < flip && at + 16 + 24 * k < n; k++)
        b[at + 16 + 24 * k] ^= 0xff;
    for (long i = at + 8; i < at + 8 + zero && i < n; i++)
        b[i] = 0;
    fseek(f, 0, SEEK_SET);
    fwrite(b, 1, (size_t)n, f);
    fclose(f);
    free(b);
}

int main(int argc, char **argv)
{
    if (argc != 6)
        die("usage: craft DIR SIM.h5 RUN.h5 REP.h5 GOODPUT.h5");
    dir = argv[1];
    const char *sim = argv[2], *run = argv[3], *rep = argv[4], *gp = argv[5];
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    const char *p;
    /* F02: a recorded plan whose TP x PP overflows int (plot divided by 0). */
    p = copy_of(sim, "f02-plan-overflow.h5");
    edit_config(p, "\"tensor_model_parallel_size\":2,", "\"tensor_model_parallel_size\":65536,");
    edit_config(p, "\"pipeline_model_parallel_size\":2,", "\"pipeline_model_parallel_size\":65536,");
    expect(p, "predict: tensor_model_parallel_size");
    /* F07: a measured op in iteration INT32_MAX (compare's tally overflowed). */
    p = copy_of(run, "f07-iteration-max.h5");
    set_field(p, "/timeline", "iteration", 0, INT32_MAX);
    expect(p, "compare: iteration 2147483647");
    /* F08: a Table 3 row numbered INT_MIN; a timeline stream of INT_MAX. */
    p = copy_of(rep, "f08-table3-row-min.h5");
    set_field(p, "/table3", "row", 0, INT32_MIN);
    p = copy_of(sim, "f08-stream-max.h5");
    set_field(p, "/timeline", "stream", 0, INT32_MAX);
    expect(p, "plot: stream 2147483647");
    /* F09: an infinite time; a measurement without ops. */
    p = copy_of(sim, "f09-inf-time.h5");
    set_field(p, "/timeline", "t_ready_s", 0, INFINITY);
    expect(p, "plot: not all finite");
    p = copy_of(run, "f09-empty-timeline.h5");
    empty_dataset(p, "/timeline");
    expect(p, "compare: /timeline has no rows");
    /* A step's expert-load CV that is not one (compare prices it). */
    p = copy_of(run, "moe-load-cv-negative.h5");
    set_field(p, "/iterations", "moe_load_cv", 1, -0.5);
    expect(p, "compare: moe_load_cv = -0.5 is not a coefficient of variation");
    /* F04, F05: the old format's global heap hit (flipped bytes; zeros). */
    p = copy_of(run, "f04-heap-flipped.h5");
    to_vlen(p);
    hit_heap(p, 4, 0);
    p = copy_of(run, "f05-heap-zeroed.h5");
    to_vlen(p);
    hit_heap(p, 0, 2048);
    /* A goodput file's figure is read back from its summary (megasim plot):
     * an ETTR of 7, a sweep emptied, negative lost hours (the keys' first
     * occurrences are the main run's; the old values kept under new keys,
     * as a strict parser refuses a key twice). */
    p = copy_of(gp, "goodput-ettr-7.h5");
    edit_attr(p, "summary_json", "\"ettr\":", "\"ettr\":7,\"x_ettr\":");
    expect(p, "plot: summary_json: ettr: not a number from 0 to 1");
    p = copy_of(gp, "goodput-sweep-empty.h5");
    edit_attr(p, "summary_json", "\"sweep\":[", "\"sweep\":[],\"x_sweep\":[");
    expect(p, "plot: a 25-point sweep");
    p = copy_of(gp, "goodput-lost-negative.h5");
    edit_attr(p, "summary_json", "\"lost_hours\":{\"detection\":", "\"lost_hours\":{\"detection\":-5,\"x\":");
    expect(p, "plot: summary_json: lost_hours.detection: not a number");
    return 0;
}
