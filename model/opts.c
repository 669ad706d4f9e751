/* opts: the options-table engine (see opts.h). */
#include "model/opts.h"
#include "model/curve.h"
#include "model/json.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <strings.h>

#define FIELD(obj, d, T) ((T *)((char *)(obj) + (d)->off))
#define CFIELD(obj, d, T) ((const T *)((const char *)(obj) + (d)->off))

/* "hidden-size" and "hidden_size" name the same option. */
static int name_eq(const char *a, const char *b)
{
    for (; *a && *b; a++, b++) {
        char x = *a == '_' ? '-' : *a, y = *b == '_' ? '-' : *b;
        if (x != y)
            return 0;
    }
    return *a == *b;
}

const opt_def *opts_find(const opt_table *t, const char *name)
{
    for (int i = 0; i < t->n; i++)
        if (name_eq(t->defs[i].name, name))
            return &t->defs[i];
    return NULL;
}

/* Index of `text` in "a|b|c", or -1. */
static int enum_index(const char *choices, const char *text)
{
    int idx = 0;
    size_t len = strlen(text);
    for (const char *p = choices; *p; idx++) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n == len && strncmp(p, text, n) == 0)
            return idx;
        if (!bar)
            break;
        p = bar + 1;
    }
    return -1;
}

static void enum_name(const char *choices, int idx, char *buf, size_t len)
{
    const char *p = choices;
    for (int i = 0; i < idx && p; i++) {
        p = strchr(p, '|');
        if (p)
            p++;
    }
    if (!p) {
        snprintf(buf, len, "?");
        return;
    }
    const char *bar = strchr(p, '|');
    size_t n = bar ? (size_t)(bar - p) : strlen(p);
    snprintf(buf, len, "%.*s", (int)(n < len ? n : len - 1), p);
}

static int parse_bool(const char *s, int *v)
{
    if (!strcasecmp(s, "true") || !strcmp(s, "1") || !strcasecmp(s, "yes") || !strcasecmp(s, "on"))
        *v = 1;
    else if (!strcasecmp(s, "false") || !strcmp(s, "0") || !strcasecmp(s, "no") || !strcasecmp(s, "off"))
        *v = 0;
    else
        return -1;
    return 0;
}

static int check_bounds(const opt_def *d, double v, const char *origin,
                        const char *text, char *err)
{
    int zero_ok = d->choices && !strcmp(d->choices, OPT_ZERO_OK);
    if ((v >= d->lo && v <= d->hi) || (zero_ok && v == 0))
        return 0;
    snprintf(err, OPT_ERR_LEN, "%s = %s is out of range; allowed %s%.17g to %.17g (%s)",
             origin, text, zero_ok ? "0, or " : "", d->lo, d->hi, d->help);
    return -1;
}

int opts_set_text(const opt_def *d, void *obj, const char *text,
                  const char *origin, char *err)
{
    char *end;
    switch (d->type) {
    case OPT_INT: {
        errno = 0;
        long long v = strtoll(text, &end, 10);
        if (errno || end == text || *end) {
            snprintf(err, OPT_ERR_LEN, "%s = '%s' is not an integer", origin, text);
            return -1;
        }
        if (check_bounds(d, (double)v, origin, text, err))
            return -1;
        *FIELD(obj, d, int) = (int)v;
        return 0;
    }
    case OPT_REAL: {
        errno = 0;
        double v = strtod(text, &end);
        if (errno || end == text || *end || !isfinite(v)) {
            snprintf(err, OPT_ERR_LEN, "%s = '%s' is not a number", origin, text);
            return -1;
        }
        if (check_bounds(d, v, origin, text, err))
            return -1;
        *FIELD(obj, d, double) = v;
        return 0;
    }
    case OPT_BOOL: {
        int v;
        if (parse_bool(text, &v)) {
            snprintf(err, OPT_ERR_LEN, "%s = '%s' is not a boolean; allowed true or false",
                     origin, text);
            return -1;
        }
        *FIELD(obj, d, int) = v;
        return 0;
    }
    case OPT_ENUM: {
        int v = enum_index(d->choices, text);
        if (v < 0) {
            snprintf(err, OPT_ERR_LEN, "%s = '%s' is not allowed; choose one of %s",
                     origin, text, d->choices);
            return -1;
        }
        *FIELD(obj, d, int) = v;
        return 0;
    }
    case OPT_STR: {
        size_t cap = (size_t)d->hi;
        if (d->lo >= 1 && !text[0]) {
            snprintf(err, OPT_ERR_LEN, "%s is empty, give a value (%s), or leave the option out", origin, d->help);
            return -1;
        }
        if (strlen(text) >= cap) {
            snprintf(err, OPT_ERR_LEN, "%s is %zu characters long; at most %zu allowed",
                     origin, strlen(text), cap - 1);
            return -1;
        }
        snprintf(FIELD(obj, d, char), cap, "%s", text);
        return 0;
    }
    case OPT_CURVE:
        snprintf(err, OPT_ERR_LEN, "%s is a curve; give it in a JSON file as [[x, y], ...]", origin);
        return -1;
    }
    return -1;
}

void opts_set_defaults(const opt_table *t, void *obj)
{
    char err[OPT_ERR_LEN];
    for (int i = 0; i < t->n; i++) {
        const opt_def *d = &t->defs[i];
        if (!d->def)
            continue;
        if (d->type == OPT_STR && !d->def[0]) { /* "" = not given; a given value must be non-empty (lo 1) */
            FIELD(obj, d, char)[0] = 0;
            continue;
        }
        if (opts_set_text(d, obj, d->def, d->name, err)) {
            /* A bad default is a programming error in a table: fail loudly. */
            fprintf(stderr, "%s:%d: bad default in %s table: %s\n", __FILE__, __LINE__, t->what, err);
            abort();
        }
    }
}

static int curve_from_json(const opt_def *d, void *obj, const cJSON *v,
                           const char *origin, char *err)
{
    curve_t c = {0};
    if (!cJSON_IsArray(v)) {
        snprintf(err, OPT_ERR_LEN, "%s must be an array of [x, y] pairs", origin);
        return -1;
    }
    const cJSON *pt;
    cJSON_ArrayForEach(pt, v)
    {
        if (c.n == CURVE_MAX || !cJSON_IsArray(pt) || cJSON_GetArraySize(pt) != 2 ||
            !cJSON_IsNumber(cJSON_GetArrayItem(pt, 0)) || !cJSON_IsNumber(cJSON_GetArrayItem(pt, 1))) {
            snprintf(err, OPT_ERR_LEN, "%s: point %d must be [x, y] with numbers (at most %d points)",
                     origin, c.n, CURVE_MAX);
            return -1;
        }
        c.x[c.n] = cJSON_GetArrayItem(pt, 0)->valuedouble;
        c.y[c.n] = cJSON_GetArrayItem(pt, 1)->valuedouble;
        c.n++;
    }
    if (curve_check(&c, d->lo, d->hi, origin, err, OPT_ERR_LEN))
        return -1;
    *FIELD(obj, d, curve_t) = c;
    return 0;
}

/* Converts one JSON value to text and reuses opts_set_text, so a file and a
 * flag go through the same checks. */
static int set_from_json(const opt_def *d, void *obj, const cJSON *v,
                         const char *origin, char *err)
{
    char text[64];
    if (d->type == OPT_CURVE)
        return curve_from_json(d, obj, v, origin, err);
    if (cJSON_IsBool(v)) {
        if (d->type != OPT_BOOL) {
            snprintf(err, OPT_ERR_LEN, "%s: expected %s, got a boolean", origin,
                     d->type == OPT_ENUM ? d->choices : "a number or string");
            return -1;
        }
        return opts_set_text(d, obj, cJSON_IsTrue(v) ? "true" : "false", origin, err);
    }
    if (cJSON_IsNumber(v)) {
        if (d->type == OPT_INT) {
            double x = v->valuedouble;
            if (x != floor(x)) {
                snprintf(err, OPT_ERR_LEN, "%s = %.17g is not an integer", origin, x);
                return -1;
            }
            snprintf(text, sizeof text, "%.0f", x);
        } else if (d->type == OPT_REAL) {
            snprintf(text, sizeof text, "%.17g", v->valuedouble);
        } else {
            snprintf(err, OPT_ERR_LEN, "%s: expected %s, got a number", origin,
                     d->type == OPT_BOOL ? "true or false" : d->type == OPT_ENUM ? d->choices : "a string");
            return -1;
        }
        return opts_set_text(d, obj, text, origin, err);
    }
    if (cJSON_IsString(v)) {
        if (d->type != OPT_ENUM && d->type != OPT_STR) {
            snprintf(err, OPT_ERR_LEN, "%s: expected a %s, got the string \"%s\"", origin,
                     d->type == OPT_BOOL ? "boolean" : "number", v->valuestring);
            return -1;
        }
        return opts_set_text(d, obj, v->valuestring, origin, err);
    }
    snprintf(err, OPT_ERR_LEN, "%s: unsupported JSON value type (null, array or object)", origin);
    return -1;
}

/* Where a table's fields are listed: a profile's by `megasim hardware`, a
 * subcommand's ("CMD option") by its --help, the job's by predict's. */
static void fields_hint(const opt_table *t, char *buf, size_t size)
{
    const char *sp = strstr(t->what, " option");
    if (strstr(t->what, "profile"))
        snprintf(buf, size, "megasim hardware --gpu NAME --cluster NAME prints every one");
    else
        snprintf(buf, size, "megasim %.*s --help lists them, '-' written '_'", sp ? (int)(sp - t->what) : 7,
                 sp ? t->what : "predict");
}

int opts_apply_json(const opt_table *t, void *obj, const cJSON *o,
                    const char *path, const char *const *skip, char *seen,
                    char *err)
{
    if (!cJSON_IsObject(o)) {
        snprintf(err, OPT_ERR_LEN, "%s: expected a JSON object of %s fields", path, t->what);
        return -1;
    }
    const cJSON *m;
    cJSON_ArrayForEach(m, o)
    {
        int skipped = 0;
        for (const char *const *s = skip; s && *s; s++)
            skipped |= !strcmp(*s, m->string);
        if (skipped)
            continue;
        char origin[300];
        snprintf(origin, sizeof origin, "%s: %s", path, m->string);
        const opt_def *d = opts_find(t, m->string);
        if (!d) {
            char hint[128];
            fields_hint(t, hint, sizeof hint);
            snprintf(err, OPT_ERR_LEN, "%s: unknown %s field '%s' (the fields: %s)", path, t->what, m->string, hint);
            return -1;
        }
        if (set_from_json(d, obj, m, origin, err))
            return -1;
        if (seen)
            seen[d - t->defs] = 1;
    }
    return 0;
}

int opts_read_json_file(const char *path, cJSON **root, char *err)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    if (!f) {
        snprintf(err, OPT_ERR_LEN, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(err, OPT_ERR_LEN, "%s is a directory, expected a JSON file", path);
        fclose(f);
        return -1;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (len + 1 == cap) {
            if (cap >= (64u << 20)) {
                snprintf(err, OPT_ERR_LEN, "%s: larger than 64 MiB; not a job or profile file", path);
                free(buf), fclose(f);
                return -1;
            }
            char *nb = realloc(buf, cap *= 2);
            if (!nb)
                free(buf);
            buf = nb;
        }
    }
    fclose(f);
    if (!buf) {
        snprintf(err, OPT_ERR_LEN, "%s: out of memory", path);
        return -1;
    }
    buf[len] = 0;
    if (strspn(buf, " \t\r\n") == len) {
        snprintf(err, OPT_ERR_LEN, "%s is empty; expected a JSON object ({...})", path);
        free(buf);
        return -1;
    }
    int rc = json_parse_strict(buf, len, path, root, err, OPT_ERR_LEN);
    free(buf);
    return rc;
}

void opts_format(const opt_def *d, const void *obj, char *buf, size_t len)
{
    switch (d->type) {
    case OPT_INT:
        snprintf(buf, len, "%d", *CFIELD(obj, d, int));
        break;
    case OPT_REAL:
        snprintf(buf, len, "%g", *CFIELD(obj, d, double));
        break;
    case OPT_BOOL:
        snprintf(buf, len, "%s", *CFIELD(obj, d, int) ? "true" : "false");
        break;
    case OPT_ENUM:
        enum_name(d->choices, *CFIELD(obj, d, int), buf, len);
        break;
    case OPT_STR:
        snprintf(buf, len, "%s", CFIELD(obj, d, char));
        break;
    case OPT_CURVE:
        snprintf(buf, len, "curve(%d points)", CFIELD(obj, d, curve_t)->n);
        break;
    }
}

static const char *type_word(const opt_def *d)
{
    static const char *w[] = {"INT", "REAL", "", "", "TEXT", "CURVE"};
    return d->type == OPT_ENUM ? d->choices : w[d->type];
}

void opts_print_help(FILE *f, const opt_table *t)
{
    const char *group = "";
    for (int i = 0; i < t->n; i++) {
        const opt_def *d = &t->defs[i];
        if (d->type == OPT_CURVE)
            continue;
        if (strcmp(group, d->group)) {
            group = d->group;
            fprintf(f, "\n%s:\n", group);
        }
        char left[96];
        if (d->type == OPT_BOOL)
            snprintf(left, sizeof left, "  --%s", d->name);
        else
            snprintf(left, sizeof left, "  --%s %s", d->name, type_word(d));
        fprintf(f, "%-44s %s", left, d->help);
        const char *zero = d->choices && !strcmp(d->choices, OPT_ZERO_OK) ? "0 or " : "";
        if (d->type == OPT_INT)
            fprintf(f, " [%s%.0f..%.0f]", zero, d->lo, d->hi);
        else if (d->type == OPT_REAL)
            fprintf(f, " [%s%g..%g]", zero, d->lo, d->hi);
        if (d->def && *d->def)
            fprintf(f, " (default %s)", d->def);
        fputc('\n', f);
    }
}

cJSON *opts_to_json(const opt_table *t, const void *obj)
{
    cJSON *o = cJSON_CreateObject();
    char key[128], text[256];
    for (int i = 0; i < t->n; i++) {
        const opt_def *d = &t->defs[i];
        snprintf(key, sizeof key, "%s", d->name);
        for (char *p = key; *p; p++)
            if (*p == '-')
                *p = '_';
        switch (d->type) {
        case OPT_INT:
            cJSON_AddNumberToObject(o, key, *CFIELD(obj, d, int));
            break;
        case OPT_REAL:
            cJSON_AddNumberToObject(o, key, *CFIELD(obj, d, double));
            break;
        case OPT_BOOL:
            cJSON_AddBoolToObject(o, key, *CFIELD(obj, d, int));
            break;
        case OPT_ENUM:
        case OPT_STR:
            opts_format(d, obj, text, sizeof text);
            cJSON_AddStringToObject(o, key, text);
            break;
        case OPT_CURVE: {
            const curve_t *c = CFIELD(obj, d, curve_t);
            cJSON *arr = cJSON_AddArrayToObject(o, key);
            for (int k = 0; k < c->n; k++) {
                double xy[2] = {c->x[k], c->y[k]};
                cJSON_AddItemToArray(arr, cJSON_CreateDoubleArray(xy, 2));
            }
            break;
        }
        }
    }
    return o;
}
