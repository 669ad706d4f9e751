/* sim/out.c: temporary-then-rename files and HDF5 attributes and tables
 * (see out.h). */
#define _GNU_SOURCE /* realpath's PATH_MAX */

#include "sim/out.h"

#include "model/json.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- files ------------------------------------------------------------ */

int out_begin(out_file_t *o, const char *path, char *err, int errlen)
{
    memset(o, 0, sizeof *o);
    o->err = err, o->errlen = errlen;
    const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
    if (!dot || (slash && dot < slash) || dot == (slash ? slash + 1 : path))
        dot = path + strlen(path); /* no extension */
    if (snprintf(o->path, sizeof o->path, "%s", path) >= (int)sizeof o->path ||
        snprintf(o->tmp, sizeof o->tmp, "%.*s.tmp.%ld%s", (int)(dot - path), path, (long)getpid(), dot) >=
            (int)sizeof o->tmp) {
        snprintf(err, errlen, "%.200s...: the path is too long (at most %d bytes)", path, OUT_PATH_MAX - 1);
        return -1;
    }
    return 0;
}

int out_open(out_file_t *o, const char *path, const char *mode, char *err, int errlen)
{
    if (out_begin(o, path, err, errlen))
        return -1;
    o->f = fopen(o->tmp, mode);
    if (!o->f) {
        snprintf(err, errlen, "%s: cannot create %s (%s)", path, o->tmp, strerror(errno));
        return -1;
    }
    return 0;
}

/* Flushes, syncs when durable, and closes the stream; 0 when all succeed. */
static int close_stream(out_file_t *o)
{
    int bad = ferror(o->f) != 0 || fflush(o->f) != 0 || (o->durable && fsync(fileno(o->f)) != 0);
    bad |= fclose(o->f) != 0;
    o->f = NULL;
    return bad ? -1 : 0;
}

int out_close(out_file_t *o, int rc)
{
    if (o->f && close_stream(o) && rc == 0) {
        snprintf(o->err, o->errlen, "%s: writing %s failed (%s)", o->path, o->tmp, strerror(errno));
        rc = -1;
    }
    if (rc == 0 && rename(o->tmp, o->path) != 0) {
        snprintf(o->err, o->errlen, "%s: cannot rename %s onto it (%s)", o->path, o->tmp, strerror(errno));
        rc = -1;
    }
    if (rc != 0)
        remove(o->tmp);
    return rc;
}

/* Creates (or truncates) the temporary file with stdio and closes it, so
 * that a missing folder or a permission problem is named with the system's
 * reason before another library (HDF5) writes it. */
static int create_tmp(out_file_t *o, const char *path, char *err, int errlen)
{
    if (out_open(o, path, "wb", err, errlen))
        return -1;
    fclose(o->f);
    o->f = NULL;
    return 0;
}

int out_write_json(const char *path, const cJSON *j, char *err, int errlen)
{
    char *txt = cJSON_Print(j);
    out_file_t o;
    int rc = -1;
    if (!txt)
        snprintf(err, errlen, "%s: out of memory formatting the JSON", path);
    else if (out_open(&o, path, "w", err, errlen) == 0)
        fprintf(o.f, "%s\n", txt), rc = out_close(&o, 0);
    free(txt);
    return rc;
}

int out_probe(const char *path, char *err, int errlen)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s is a directory, give a file path (e.g. %s/out.h5)", path, path);
        return -1;
    }
    out_file_t o;
    if (create_tmp(&o, path, err, errlen))
        return -1;
    remove(o.tmp);
    return 0;
}

/* PATH with its folder resolved (realpath), so that "x.h5", "./x.h5" and
 * an absolute spelling compare equal before the file exists. */
static void resolved(const char *path, char *out, size_t len)
{
    char dir[OUT_PATH_MAX], real[PATH_MAX];
    const char *slash = strrchr(path, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? (slash == path ? "/" : path) : ".");
    if (realpath(dir, real))
        snprintf(out, len, "%s/%s", real, slash ? slash + 1 : path);
    else
        snprintf(out, len, "%s", path);
}

static int same_file(const char *a, const char *real_a, const char *b, const char *real_b)
{
    struct stat sa, sb;
    return !strcmp(real_a, real_b) ||
           (stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino);
}

int out_check_paths(int n, const char *const *flags, const char *const *paths, char *err, int errlen)
{
    static char real[8][OUT_PATH_MAX + PATH_MAX]; /* each asked-for path resolved once */
    if (n > 8) {
        snprintf(err, errlen, "out_check_paths: %d outputs, at most 8", n);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (!paths[i] || !paths[i][0])
            continue;
        resolved(paths[i], real[i], sizeof real[i]);
        for (int j = 0; j < i; j++)
            if (paths[j] && paths[j][0] && same_file(paths[i], real[i], paths[j], real[j])) {
                snprintf(err, errlen, "%s and %s both name %s; allowed: a different file for each output", flags[j],
                         flags[i], paths[i]);
                return -1;
            }
    }
    for (int i = 0; i < n; i++)
        if (paths[i] && paths[i][0] && out_probe(paths[i], err, errlen))
            return -1;
    return 0;
}

/* ---- HDF5 ------------------------------------------------------------- */

int out_h5_fail(out_h5_t *w, const char *what, const char *name)
{
    snprintf(w->out.err, w->out.errlen, "%s: HDF5 could not %s %s", w->out.path, what, name);
    return -1;
}

int out_h5_create(out_h5_t *w, const char *path, char *err, int errlen)
{
    w->file = w->gcpl = w->dcpl = -1;
    if (create_tmp(&w->out, path, err, errlen))
        return -1;
    H5Eget_auto2(H5E_DEFAULT, &w->old_fn, &w->old_data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* our message replaces HDF5's error stack */
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
    w->gcpl = H5Pcreate(H5P_GROUP_CREATE), w->dcpl = H5Pcreate(H5P_DATASET_CREATE);
    int ok = fcpl >= 0 && w->gcpl >= 0 && w->dcpl >= 0 && H5Pset_obj_track_times(fcpl, 0) >= 0 &&
             H5Pset_obj_track_times(w->gcpl, 0) >= 0 && H5Pset_obj_track_times(w->dcpl, 0) >= 0;
    if (ok)
        w->file = H5Fcreate(w->out.tmp, H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
    if (fcpl >= 0)
        H5Pclose(fcpl);
    int rc = !ok ? out_h5_fail(w, "make property lists for", "the file")
                 : w->file < 0 ? out_h5_fail(w, "create", w->out.tmp) : 0;
    return rc ? out_h5_close(w, rc) : 0;
}

int out_h5_close(out_h5_t *w, int rc)
{
    if (w->gcpl >= 0)
        H5Pclose(w->gcpl);
    if (w->dcpl >= 0)
        H5Pclose(w->dcpl);
    if (w->file >= 0 && H5Fclose(w->file) < 0 && rc == 0)
        rc = out_h5_fail(w, "close (flush)", "the file");
    w->file = w->gcpl = w->dcpl = -1;
    H5Eset_auto2(H5E_DEFAULT, w->old_fn, w->old_data);
    return out_close(&w->out, rc);
}

static int close_dataset(out_h5_t *w, hid_t d, const char *name, int rc);

/* A scalar attribute: file type ft, memory type mt, value at buf. */
static int put_attr(out_h5_t *w, hid_t loc, const char *name, hid_t ft, hid_t mt, const void *buf)
{
    hid_t s = H5Screate(H5S_SCALAR), a = -1;
    int ok = s >= 0 && (a = H5Acreate2(loc, name, ft, s, H5P_DEFAULT, H5P_DEFAULT)) >= 0 && H5Awrite(a, mt, buf) >= 0;
    if (a >= 0 && H5Aclose(a) < 0)
        ok = 0;
    if (s >= 0)
        H5Sclose(s);
    return ok ? 0 : out_h5_fail(w, "write attribute", name);
}

int out_h5_attr_f64(out_h5_t *w, hid_t loc, const char *name, double v)
{
    return put_attr(w, loc, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v);
}

/* A fixed-length UTF-8 string type holding n bytes and the NUL. */
static hid_t str_type(size_t n)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t >= 0 && (H5Tset_size(t, n + 1) < 0 || H5Tset_strpad(t, H5T_STR_NULLTERM) < 0 ||
                   H5Tset_cset(t, H5T_CSET_UTF8) < 0)) {
        H5Tclose(t);
        t = -1;
    }
    return t;
}

int out_h5_attr_str(out_h5_t *w, hid_t loc, const char *name, const char *v)
{
    size_t n = strlen(v);
    hid_t t = str_type(n), s = -1, d = -1;
    if (t < 0)
        return out_h5_fail(w, "make a string type for", name);
    int rc;
    if (n < OUT_ATTR_MAX) {
        rc = put_attr(w, loc, name, t, t, v);
    } else { /* past what an object header holds: a scalar dataset of the same name */
        int ok = (s = H5Screate(H5S_SCALAR)) >= 0 &&
                 (d = H5Dcreate2(loc, name, t, s, H5P_DEFAULT, w->dcpl, H5P_DEFAULT)) >= 0 &&
                 H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0;
        rc = close_dataset(w, d, name, ok ? 0 : out_h5_fail(w, "write the string dataset", name));
    }
    if (s >= 0)
        H5Sclose(s);
    H5Tclose(t);
    return rc;
}

hid_t out_h5_group(out_h5_t *w, hid_t loc, const char *name)
{
    hid_t g = H5Gcreate2(loc, name, H5P_DEFAULT, w->gcpl, H5P_DEFAULT);
    if (g < 0)
        out_h5_fail(w, "create group", name);
    return g;
}

static size_t col_bytes(int type) { return type == OUT_I32 ? 4 : 8; }

static hid_t col_h5type(int type, int file)
{
    if (type == OUT_I32)
        return file ? H5T_STD_I32LE : H5T_NATIVE_INT32;
    if (type == OUT_I64)
        return file ? H5T_STD_I64LE : H5T_NATIVE_INT64;
    return file ? H5T_IEEE_F64LE : H5T_NATIVE_DOUBLE;
}

/* In memory: the C struct's layout. In the file: packed, little-endian. */
static hid_t compound_type(const out_table_t *t, int file)
{
    size_t size = 0;
    for (int i = 0; i < t->ncols; i++)
        size += col_bytes(t->cols[i].type);
    hid_t c = H5Tcreate(H5T_COMPOUND, file ? size : t->row_size);
    for (size_t i = 0, off = 0; c >= 0 && i < (size_t)t->ncols; i++) {
        const out_col_t *k = &t->cols[i];
        if (H5Tinsert(c, k->name, file ? off : k->off, col_h5type(k->type, file)) < 0) {
            H5Tclose(c);
            return -1;
        }
        off += col_bytes(k->type);
    }
    return c;
}

/* A 1-D dataset of n elements of file type ft from memory of type mt. */
static int write_dataset(out_h5_t *w, hid_t loc, const char *name, hid_t ft, hid_t mt, const void *data, size_t n,
                         hid_t *d)
{
    hsize_t dim = n;
    hid_t s = H5Screate_simple(1, &dim, NULL);
    *d = -1;
    int ok = s >= 0 && (*d = H5Dcreate2(loc, name, ft, s, H5P_DEFAULT, w->dcpl, H5P_DEFAULT)) >= 0 &&
             (n == 0 || H5Dwrite(*d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    if (s >= 0)
        H5Sclose(s);
    return ok ? 0 : out_h5_fail(w, "write dataset", name);
}

static int close_dataset(out_h5_t *w, hid_t d, const char *name, int rc)
{
    if (d >= 0 && H5Dclose(d) < 0 && !rc)
        rc = out_h5_fail(w, "close dataset", name);
    return rc;
}

int out_h5_table(out_h5_t *w, hid_t loc, const char *name, const out_table_t *t, const void *rows, size_t n,
                 const char *const *attrs)
{
    hid_t mt = compound_type(t, 0), ft = compound_type(t, 1), d = -1;
    int rc = mt < 0 || ft < 0 ? out_h5_fail(w, "make the row type of", name)
                              : write_dataset(w, loc, name, ft, mt, rows, n, &d);
    for (int i = 0; !rc && attrs && attrs[i]; i += 2)
        rc = out_h5_attr_str(w, d, attrs[i], attrs[i + 1]);
    rc = close_dataset(w, d, name, rc);
    if (ft >= 0)
        H5Tclose(ft);
    if (mt >= 0)
        H5Tclose(mt);
    return rc;
}

int out_h5_column(out_h5_t *w, hid_t loc, const char *name, const double *v, size_t n)
{
    hid_t d;
    int rc = write_dataset(w, loc, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, v, n, &d);
    return close_dataset(w, d, name, rc);
}

int out_h5_attr_json(hid_t file, const char *path, const char *name, cJSON **o, char *err, int errlen)
{
    char *s = out_h5_attr_read(file, "/", name), what[512];
    int rc = -1;
    *o = NULL;
    if (!s)
        snprintf(err, errlen, "%s: the root attribute %s is missing", path, name);
    else if (json_parse_strict(s, strlen(s), name, o, what, sizeof what))
        snprintf(err, errlen, "%s: the root attribute %s is not JSON (%s)", path, name, what);
    else
        rc = 0;
    free(s);
    return rc;
}

/* A string of the type ft read by read(obj, mt, buf) from an attribute or
 * a scalar dataset: either kind of string, a fixed length bounded by
 * OUT_STR_READ_MAX (what a file claims is checked before memory is taken). */
static char *read_str(hid_t obj, hid_t ft, int attr)
{
    char *out = NULL;
    hid_t mt = H5Tget_class(ft) == H5T_STRING ? H5Tcopy(ft) : -1;
    if (mt >= 0 && H5Tis_variable_str(ft) > 0) {
        char *s = NULL;
        if ((attr ? H5Aread(obj, mt, &s) : H5Dread(obj, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, &s)) >= 0 && s) {
            out = strdup(s);
            H5free_memory(s);
        }
    } else if (mt >= 0) {
        size_t n = H5Tget_size(ft);
        out = n > 0 && n <= OUT_STR_READ_MAX ? calloc(n + 1, 1) : NULL;
        if (out && (attr ? H5Aread(obj, mt, out) : H5Dread(obj, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, out)) < 0) {
            free(out);
            out = NULL;
        }
    }
    if (mt >= 0)
        H5Tclose(mt);
    return out;
}

/* The scalar string dataset obj/name (a long string out_h5_attr_str
 * wrote), NULL when there is none. */
static char *read_str_dataset(hid_t loc, const char *obj, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s%s%s", obj, obj[strlen(obj) - 1] == '/' ? "" : "/", name);
    if (H5Lexists(loc, path, H5P_DEFAULT) <= 0)
        return NULL;
    hid_t d = H5Dopen2(loc, path, H5P_DEFAULT), ft = d >= 0 ? H5Dget_type(d) : -1, sp = d >= 0 ? H5Dget_space(d) : -1;
    char *out = ft >= 0 && sp >= 0 && H5Sget_simple_extent_type(sp) == H5S_SCALAR ? read_str(d, ft, 0) : NULL;
    if (sp >= 0)
        H5Sclose(sp);
    if (ft >= 0)
        H5Tclose(ft);
    if (d >= 0)
        H5Dclose(d);
    return out;
}

/* ---- vetting a file in a child process ------------------------------- */

/* Reads n elements of type ft (a dataset's or an attribute's) with read(),
 * freeing what variable-length types allocate. 0, or -1. */
static int vet_read(hid_t obj, hid_t ft, hid_t space, int attr)
{
    hssize_t n = H5Sget_simple_extent_npoints(space);
    hid_t mt = H5Tget_native_type(ft, H5T_DIR_ASCEND);
    size_t size = mt >= 0 ? H5Tget_size(mt) : 0;
    int rc = -1;
    if (n >= 0 && size > 0 && (size_t)n <= OUT_H5_VET_BYTES / size) {
        void *buf = calloc((size_t)n + 1, size);
        if (buf && (attr ? H5Aread(obj, mt, buf) : H5Dread(obj, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf)) >= 0) {
            rc = 0;
            if (H5Tis_variable_str(mt) > 0) /* each string read to its end, as a reader's strdup will */
                for (hssize_t i = 0; i < n; i++)
                    if (((char **)buf)[i] && strlen(((char **)buf)[i]) > OUT_STR_READ_MAX)
                        rc = -1;
            if (H5Tdetect_class(mt, H5T_VLEN) > 0 || H5Tis_variable_str(mt) > 0)
                H5Dvlen_reclaim(mt, space, H5P_DEFAULT, buf);
        }
        free(buf);
    }
    if (mt >= 0)
        H5Tclose(mt);
    return rc;
}

static herr_t vet_attr(hid_t loc, const char *name, const H5A_info_t *info, void *data)
{
    hid_t a = H5Aopen(loc, name, H5P_DEFAULT), t = a >= 0 ? H5Aget_type(a) : -1, s = a >= 0 ? H5Aget_space(a) : -1;
    int rc = t >= 0 && s >= 0 ? vet_read(a, t, s, 1) : -1;
    if (s >= 0)
        H5Sclose(s);
    if (t >= 0)
        H5Tclose(t);
    if (a >= 0)
        H5Aclose(a);
    return rc ? -1 : 0;
}

static herr_t vet_link(hid_t g, const char *name, const H5L_info_t *info, void *depth);

/* An object: its attributes, then its data (a dataset) or members (a group). */
static int vet_object(hid_t o, int depth)
{
    if (depth > 32 || H5Aiterate2(o, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, vet_attr, NULL) < 0)
        return -1;
    H5I_type_t kind = H5Iget_type(o);
    if (kind == H5I_GROUP)
        return H5Literate(o, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, vet_link, &depth) < 0 ? -1 : 0;
    if (kind != H5I_DATASET)
        return 0;
    hid_t t = H5Dget_type(o), s = H5Dget_space(o);
    int rc = t >= 0 && s >= 0 ? vet_read(o, t, s, 0) : -1;
    if (s >= 0)
        H5Sclose(s);
    if (t >= 0)
        H5Tclose(t);
    return rc;
}

static herr_t vet_link(hid_t g, const char *name, const H5L_info_t *info, void *depth)
{
    if (info->type != H5L_TYPE_HARD)
        return -1; /* megasim writes no soft or external links */
    hid_t o = H5Oopen(g, name, H5P_DEFAULT);
    int rc = o >= 0 ? vet_object(o, *(int *)depth + 1) : -1;
    if (o >= 0)
        H5Oclose(o);
    return rc ? -1 : 0;
}

/* In a sanitized or fuzzing build, a report in the child is a crash of
 * the child, nothing more: its death callback (libFuzzer's would record the
 * input as the fuzzer's own crash) is replaced by a plain exit. */
void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));
enum { VET_OK = 0, VET_REFUSED = 3, VET_CRASHED = 4 };
static void vet_died(void) { _exit(VET_CRASHED); }

/* The child: VET_OK when every object reads, VET_REFUSED when HDF5
 * refuses one. Its stderr is closed: what libhdf5 or a sanitizer prints
 * about a damaged file is not the user's message. */
static int vet_child(const char *path)
{
    if (__sanitizer_set_death_callback)
        __sanitizer_set_death_callback(vet_died);
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0)
        dup2(null, 2);
    alarm(OUT_H5_VET_S); /* a hang ends here (SIGALRM) */
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t root = f >= 0 ? H5Gopen2(f, "/", H5P_DEFAULT) : -1;
    return root >= 0 && vet_object(root, 0) == 0 ? VET_OK : VET_REFUSED;
}

int out_h5_vet(const char *path, char *err, int errlen)
{
    fflush(stdout), fflush(stderr);
    pid_t pid = fork();
    if (pid == 0)
        _exit(vet_child(path));
    int status = 0;
    while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (pid < 0) {
        snprintf(err, errlen, "cannot check the file (fork: %s)", strerror(errno));
        return -1;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == VET_OK)
        return 0;
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
        snprintf(err, errlen, "damaged: reading it did not finish in %d s (a result file must be as megasim "
                 "wrote it)", OUT_H5_VET_S);
    else if (WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == VET_CRASHED))
        snprintf(err, errlen, "damaged: reading it crashed libhdf5 (%s; a result file must be as megasim wrote it)",
                 WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "a sanitizer report");
    else
        snprintf(err, errlen, "damaged: HDF5 cannot read all of it (a result file must be as megasim wrote it)");
    return -1;
}

char *out_h5_attr_read(hid_t loc, const char *obj, const char *name)
{
    if (H5Aexists_by_name(loc, obj, name, H5P_DEFAULT) <= 0)
        return read_str_dataset(loc, obj, name);
    hid_t a = H5Aopen_by_name(loc, obj, name, H5P_DEFAULT, H5P_DEFAULT);
    hid_t ft = a >= 0 ? H5Aget_type(a) : -1;
    char *out = ft >= 0 ? read_str(a, ft, 1) : NULL;
    if (ft >= 0)
        H5Tclose(ft);
    if (a >= 0)
        H5Aclose(a);
    return out;
}

int out_make_dir(const char *path, char *err, int errlen)
{
    char buf[OUT_PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || !*p) {
            char c = *p;
            *p = 0;
            if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
                snprintf(err, errlen, "cannot create the folder %s (%s)", buf, strerror(errno));
                return -1;
            }
            *p = c;
            if (!c)
                break;
        }
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s is not a folder", path);
        return -1;
    }
    return 0;
}
