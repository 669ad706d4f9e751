/* model/json.c: strict JSON (json.h). A recursive-descent check of RFC
 * 8259's grammar over the whole buffer, then cJSON builds the tree. cJSON
 * alone is lenient: it stops at a NUL byte, ignores what follows the value
 * unless asked, reads "0.e86" as a number and keeps raw control characters
 * in strings; each of those changed what a file meant without a word. */
#include "model/json.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    const char *s;
    size_t n, i;       /* buffer, length, position */
    int depth;
    const char *what;  /* what went wrong, at i */
} scan_t;

static int bad(scan_t *c, const char *what)
{
    c->what = what;
    return -1;
}

static void skip_ws(scan_t *c)
{
    while (c->i < c->n && (c->s[c->i] == ' ' || c->s[c->i] == '\t' || c->s[c->i] == '\n' || c->s[c->i] == '\r'))
        c->i++;
}

static int peek(const scan_t *c) { return c->i < c->n ? (unsigned char)c->s[c->i] : -1; }

static int is_digit(int ch) { return ch >= '0' && ch <= '9'; }

static int digits(scan_t *c)
{
    size_t start = c->i;
    while (is_digit(peek(c)))
        c->i++;
    return c->i > start ? 0 : -1;
}

/* -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static int number(scan_t *c)
{
    if (peek(c) == '-')
        c->i++;
    if (peek(c) == '0')
        c->i++;
    else if (digits(c))
        return bad(c, "a number needs a digit here");
    if (peek(c) == '.') {
        c->i++;
        if (digits(c))
            return bad(c, "a number needs a digit after its decimal point");
    }
    if (peek(c) == 'e' || peek(c) == 'E') {
        c->i++;
        if (peek(c) == '+' || peek(c) == '-')
            c->i++;
        if (digits(c))
            return bad(c, "a number needs a digit in its exponent");
    }
    return 0;
}

static int hex(int ch) { return is_digit(ch) || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F'); }

/* Bytes of the UTF-8 sequence starting with lead byte b (0: invalid). */
static int utf8_len(int b) { return b < 0x80 ? 1 : b >= 0xc2 && b < 0xe0 ? 2 : b >= 0xe0 && b < 0xf0 ? 3 : b >= 0xf0 && b < 0xf5 ? 4 : 0; }

static int string(scan_t *c)
{
    c->i++; /* the opening quote */
    for (;;) {
        int ch = peek(c);
        if (ch < 0)
            return bad(c, "a string is not closed");
        if (ch == '"') {
            c->i++;
            return 0;
        }
        if (ch < 0x20)
            return bad(c, "a control character inside a string (write it as an escape: \\n, \\t, \\u00XX)");
        if (ch == '\\') {
            c->i++;
            int e = peek(c);
            if (e == 'u') {
                for (int k = 1; k <= 4; k++)
                    if (c->i + k >= c->n || !hex((unsigned char)c->s[c->i + k]))
                        return bad(c, "\\u needs four hexadecimal digits");
                c->i += 5;
            } else if (e >= 0 && strchr("\"\\/bfnrt", e)) {
                c->i++;
            } else {
                return bad(c, "an unknown escape (allowed: \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)");
            }
            continue;
        }
        int len = utf8_len(ch);
        if (!len || c->i + len > c->n)
            return bad(c, "not UTF-8 text");
        for (int k = 1; k < len; k++)
            if (((unsigned char)c->s[c->i + k] & 0xc0) != 0x80)
                return bad(c, "not UTF-8 text");
        c->i += len;
    }
}

static int literal(scan_t *c, const char *word)
{
    size_t len = strlen(word);
    if (c->n - c->i < len || memcmp(c->s + c->i, word, len))
        return bad(c, "expected a value: an object, array, string, number, true, false or null");
    c->i += len;
    return 0;
}

static int value(scan_t *c);

/* Members or elements between open and close, separated by commas; an
 * object's are "key": value. */
static int compound(scan_t *c, int object)
{
    char close = object ? '}' : ']';
    if (++c->depth > JSON_MAX_DEPTH)
        return bad(c, "nested deeper than " JSON_MAX_DEPTH_TEXT " levels");
    c->i++;
    skip_ws(c);
    long members = 0;
    if (peek(c) == close) {
        c->i++, c->depth--;
        return 0;
    }
    for (;;) {
        skip_ws(c);
        if (object) {
            if (peek(c) != '"')
                return bad(c, "an object's key must be a string in double quotes");
            if (string(c))
                return -1;
            skip_ws(c);
            if (peek(c) != ':')
                return bad(c, "expected ':' after an object's key");
            c->i++;
            if (++members > JSON_MAX_MEMBERS)
                return bad(c, "an object with more than " JSON_MAX_MEMBERS_TEXT " members");
        }
        if (value(c))
            return -1;
        skip_ws(c);
        if (peek(c) == ',') {
            c->i++;
            continue;
        }
        if (peek(c) == close) {
            c->i++, c->depth--;
            return 0;
        }
        return bad(c, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static int value(scan_t *c)
{
    skip_ws(c);
    int ch = peek(c);
    if (ch == '{' || ch == '[')
        return compound(c, ch == '{');
    if (ch == '"')
        return string(c);
    if (ch == '-' || is_digit(ch))
        return number(c);
    if (ch == 't')
        return literal(c, "true");
    if (ch == 'f')
        return literal(c, "false");
    if (ch == 'n')
        return literal(c, "null");
    return bad(c, ch == 0 ? "a NUL byte" : ch < 0 ? "the text ends where a value should be"
                                                 : "expected a value: an object, array, string, number, true, "
                                                   "false or null");
}

/* The first key that appears twice in one object, anywhere in o (JSON
 * leaves the meaning of duplicates open; cJSON keeps both). Quadratic in
 * an object's members, which the scan bounds (JSON_MAX_MEMBERS). */
static const cJSON *duplicate_key(const cJSON *o)
{
    for (const cJSON *m = o ? o->child : NULL; m; m = m->next) {
        if (cJSON_IsObject(o))
            for (const cJSON *e = o->child; e != m; e = e->next)
                if (!strcmp(e->string, m->string))
                    return m;
        const cJSON *d = duplicate_key(m);
        if (d)
            return d;
    }
    return NULL;
}

int json_parse_strict(const char *buf, size_t len, const char *path, cJSON **root, char *err, size_t errlen)
{
    scan_t c = {buf, len, 0, 0, NULL};
    *root = NULL;
    if (value(&c) == 0) {
        skip_ws(&c);
        if (c.i < c.n)
            bad(&c, peek(&c) == 0 ? "a NUL byte after the value" : "text after the value");
    }
    if (c.what) {
        long line = 1;
        for (size_t k = 0; k < c.i && k < len; k++)
            line += buf[k] == '\n';
        snprintf(err, errlen, "%s: invalid JSON at byte %zu (line %ld): %s", path, c.i, line, c.what);
        return -1;
    }
    *root = cJSON_ParseWithLength(buf, len);
    if (!*root) {
        snprintf(err, errlen, "%s: out of memory reading the JSON", path);
        return -1;
    }
    const cJSON *dup = duplicate_key(*root);
    if (dup) {
        snprintf(err, errlen, "%s: key '%s' appears twice in one object; allowed: each key once", path, dup->string);
        cJSON_Delete(*root);
        *root = NULL;
        return -1;
    }
    return 0;
}
