/* sim/out: the one way megasim writes a file, and the one way it writes
 * (and reads back) HDF5 attributes and tables. Every output of every
 * command goes through it: results, traces, CSV, profiles, checkpoints.
 *
 * Files are never half-written: a writer writes NAME.tmp.<pid>.EXT beside
 * NAME.EXT (its extension kept, for programs such as gnuplot that choose a
 * format by it) and renames it onto NAME.EXT only when every step succeeded; on any failure
 * the temporary file is removed and one message names the path and the
 * step (with the system's reason where there is one). Paths too long for
 * the temporary name are refused here, in one place.
 *
 * HDF5 files carry no timestamps (object time tracking off), so the same
 * inputs give the same bytes; HDF5's own error stack is silenced while a
 * file is written, our message replaces it. Lowest user: sim/output.c, so
 * it lives in sim/; real/, calib/ and cmd/ use it from above. */
#ifndef SIM_OUT_H
#define SIM_OUT_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define OUT_PATH_MAX 4096

/* One file being written. Owns its stream (out_open) until out_close. */
typedef struct {
    char path[OUT_PATH_MAX];     /* the destination */
    char tmp[OUT_PATH_MAX + 32]; /* NAME.tmp.<pid>.EXT, beside it */
    FILE *f;                     /* out_open's stream; NULL when another library writes tmp */
    int durable;                 /* fsync before the rename (checkpoints); set after out_begin */
    char *err;
    int errlen;
} out_file_t;

/* Names the temporary file of path; 0, or -1 ("the path is too long"). */
int out_begin(out_file_t *o, const char *path, char *err, int errlen);

/* out_begin, then opens the temporary file with fopen's mode ("w", "wb").
 * 0, or -1 with "PATH: cannot create TMP (reason)". */
int out_open(out_file_t *o, const char *path, const char *mode, char *err, int errlen);

/* Ends a file. rc: the writer's own status (0, or -1 with its message
 * already in err). With rc 0, a stream that saw a write error or fails to
 * flush, sync (durable) or close is a failure ("writing TMP failed"); then
 * the rename. Otherwise the temporary file is removed. 0, or -1. */
int out_close(out_file_t *o, int rc);

/* A JSON document (cJSON_Print's indented form and a newline): profiles. */
struct cJSON;
int out_write_json(const char *path, const struct cJSON *j, char *err, int errlen);

/* Before a long computation: can path be written? Creates and removes its
 * temporary file (a folder or a missing parent is named). 0, or -1. */
int out_probe(const char *path, char *err, int errlen);

/* mkdir -p path: every missing folder on it made. 0, or -1 with a message
 * naming the folder that could not be made, or a path that is no folder. */
int out_make_dir(const char *path, char *err, int errlen);

/* The n (at most 8) outputs of one command (flags[i] names paths[i]; "" or
 * NULL: not asked for): no two name the same file (resolved folders and
 * inodes compared), and each can be written (out_probe). 0, or -1. */
int out_check_paths(int n, const char *const *flags, const char *const *paths, char *err, int errlen);

/* ---- HDF5 ------------------------------------------------------------ */

typedef struct {
    out_file_t out;
    hid_t file, gcpl, dcpl; /* the file; group and dataset creation lists (no time tracking) */
    H5E_auto2_t old_fn;     /* HDF5's error printer, restored by out_h5_close */
    void *old_data;
} out_h5_t;

/* Creates path's temporary file as HDF5 (its folder checked first with
 * stdio, for the system's reason). 0, or -1 with a message. */
int out_h5_create(out_h5_t *w, const char *path, char *err, int errlen);

/* Closes everything (the file's close flushes: its failure counts), then
 * out_close. rc as out_close's. */
int out_h5_close(out_h5_t *w, int rc);

/* "PATH: HDF5 could not WHAT NAME"; returns -1. */
int out_h5_fail(out_h5_t *w, const char *what, const char *name);

/* Attributes on loc (the file, a group or a dataset). Strings are UTF-8
 * and fixed length: nothing of them lives in HDF5's global heap, whose
 * reader a damaged file could lead astray (reliability findings F04,
 * F05). A string of OUT_ATTR_MAX bytes or more does not fit an object
 * header: it becomes a scalar string dataset of the same name under loc,
 * which out_h5_attr_read finds the same way. Numbers are float64. 0, or -1
 * with a message. */
#define OUT_ATTR_MAX 32768
#define OUT_STR_READ_MAX ((size_t)64 << 20) /* the longest string a reader accepts */
int out_h5_attr_str(out_h5_t *w, hid_t loc, const char *name, const char *v);
int out_h5_attr_f64(out_h5_t *w, hid_t loc, const char *name, double v);

/* A group under loc; its id, or -1 with a message. */
hid_t out_h5_group(out_h5_t *w, hid_t loc, const char *name);

/* A table: a 1-D dataset of compound rows. Columns are read from C
 * structs of row_size bytes at their offsets and stored packed,
 * little-endian, in column order. */
typedef enum { OUT_I32, OUT_I64, OUT_F64 } out_col_type_t;
typedef struct {
    const char *name;
    size_t off;
    int type; /* out_col_type_t */
} out_col_t;
typedef struct {
    const out_col_t *cols;
    int ncols;
    size_t row_size;
} out_table_t;

/* Dataset name under loc with n rows (n may be 0) and string attributes
 * (name, value pairs, NULL-terminated; attrs may be NULL). 0, or -1. */
int out_h5_table(out_h5_t *w, hid_t loc, const char *name, const out_table_t *t, const void *rows, size_t n,
                 const char *const *attrs);

/* A float64 column of n values (n may be 0). 0, or -1 with a message. */
int out_h5_column(out_h5_t *w, hid_t loc, const char *name, const double *v, size_t n);

/* Reading back: attribute name of object obj (a path from loc), or the
 * scalar string dataset obj/name, a string of either kind (variable length,
 * as files written before 2026-11-28 hold them, or fixed), malloc'd; NULL when absent, not a
 * string, longer than OUT_STR_READ_MAX, or unreadable. */
char *out_h5_attr_read(hid_t loc, const char *obj, const char *name);

/* Before a reader trusts the HDF5 file at path, a child process opens it
 * and reads every group, dataset and attribute whole, within
 * OUT_H5_VET_S seconds: a damaged file that would crash libhdf5, corrupt
 * its heap or hang it (F04, F05) costs the child, and the caller gets one
 * message naming the file and what happened; libhdf5's own leaks after a
 * refused file stay in the child too (F10). Anything larger than
 * OUT_H5_VET_BYTES in one dataset or attribute is refused unread. 0, or -1
 * with what happened in err (the caller names the file). */
#define OUT_H5_VET_S 60
#define OUT_H5_VET_BYTES ((size_t)4 << 30)
int out_h5_vet(const char *path, char *err, int errlen);

/* The root attribute `name` of file as strict JSON (model/json.h) into
 * *o. 0, or -1 with "PATH: the root attribute NAME is missing" or "...
 * is not JSON: byte N: what" in err. */
struct cJSON;
int out_h5_attr_json(hid_t file, const char *path, const char *name, struct cJSON **o, char *err, int errlen);

#endif
