/* opts: one table of options (name, type, bounds, default, help) drives
 * command-line parsing, JSON input, --help and the configuration written
 * into every output, so the help text cannot drift from the parser.
 *
 * A table describes the fields of one C struct through offsetof(). The same
 * engine serves the job description (flags and experiment files) and the
 * hardware profiles (JSON only). Library code never exits: every function
 * that can fail returns -1 and writes one message naming the option, the
 * value and the rule into err. */
#ifndef MODEL_OPTS_H
#define MODEL_OPTS_H

#include <stddef.h>
#include <stdio.h>

struct cJSON;

typedef enum {
    OPT_INT,   /* int, bounds lo..hi */
    OPT_REAL,  /* double, bounds lo..hi */
    OPT_BOOL,  /* int 0/1; "--flag" sets 1, "--no-flag" or "--flag=false" sets 0 */
    OPT_ENUM,  /* int index into choices "a|b|c" */
    OPT_STR,   /* char[hi] */
    OPT_CURVE  /* curve_t (model/curve.h); JSON only: [[x, y], ...] */
} opt_type;

typedef struct {
    const char *name;    /* flag spelling without "--"; the JSON key is the
                            same with '-' turned into '_' */
    opt_type type;
    size_t off;          /* offsetof(struct, field) */
    double lo, hi;       /* INT/REAL bounds (inclusive); STR: buffer size in hi, and lo 1
                            when a given value must not be empty (a path to write or read) */
    const char *def;     /* default as text; NULL = required (no default) */
    const char *choices; /* ENUM: "none|full|selective"; INT/REAL: OPT_ZERO_OK, or NULL */
    const char *group;   /* heading in --help */
    const char *help;
} opt_def;

/* A numeric option's `choices`: 0 is allowed beside lo..hi (it means off,
 * or "the profile's"). Lower bounds are physical: a rate near zero is a
 * mistake, not a slow machine, and 0 must say so explicitly. */
#define OPT_ZERO_OK "0 or"

typedef struct {
    const opt_def *defs;
    int n;
    const char *what;    /* "job", "gpu profile", ... for messages */
} opt_table;

#define OPT_ERR_LEN 1536

/* Sets every option that has a default. Options without one are left as
 * they are (the caller must then require them). */
void opts_set_defaults(const opt_table *t, void *obj);

/* Parses text into the field; checks type and bounds. origin names where
 * the value came from ("--hidden-size", "file.json: hidden_size"). */
int opts_set_text(const opt_def *d, void *obj, const char *text,
                  const char *origin, char *err);

/* Finds by flag name ("hidden-size") or JSON key ("hidden_size"). */
const opt_def *opts_find(const opt_table *t, const char *name);

/* Applies one JSON object's members to obj. Keys in `skip` (a NULL
 * terminated list) are ignored; unknown keys are errors. With `seen` non
 * NULL, seen[i] is set for each option i that the object sets. */
int opts_apply_json(const opt_table *t, void *obj, const struct cJSON *o,
                    const char *path, const char *const *skip, char *seen,
                    char *err);

/* Reads a whole JSON file; on success *root must be freed with cJSON_Delete. */
int opts_read_json_file(const char *path, struct cJSON **root, char *err);

/* One line per option under its group heading, with type, bounds, default. */
void opts_print_help(FILE *f, const opt_table *t);

/* The effective value of every option as one JSON object. */
struct cJSON *opts_to_json(const opt_table *t, const void *obj);

/* Formats one option's value as text (for reports). */
void opts_format(const opt_def *d, const void *obj, char *buf, size_t len);

#endif
