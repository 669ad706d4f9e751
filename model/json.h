/* model/json: the one way megasim reads JSON it did not just build: job
 * files, hardware profiles, and the configurations recorded in result
 * files. Strict RFC 8259: the whole buffer is one value with nothing but
 * whitespace after it; no NUL bytes, no raw control characters in strings,
 * only JSON's escapes and numbers ("0.e86", "01", ".5" refused), UTF-8
 * text; at most JSON_MAX_DEPTH levels of nesting and JSON_MAX_MEMBERS
 * members per object; no key twice in one object. A refusal names the
 * byte offset, the line and what was expected there. */
#ifndef MODEL_JSON_H
#define MODEL_JSON_H

#include <stddef.h>

#define JSON_MAX_DEPTH 64
#define JSON_MAX_DEPTH_TEXT "64"
#define JSON_MAX_MEMBERS 4096
#define JSON_MAX_MEMBERS_TEXT "4096"

struct cJSON;

/* Parses len bytes of buf (not NUL-terminated necessarily) into *root.
 * 0, or -1 with "PATH: invalid JSON at byte N (line L): what" in err. */
int json_parse_strict(const char *buf, size_t len, const char *path, struct cJSON **root, char *err, size_t errlen);

#endif
