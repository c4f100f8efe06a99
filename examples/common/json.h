/* json.h - the one JSON reader of grzo's programs: task files (tasks.c), run manifests
   (grzo-finetune), and the Hugging Face files (config.json, tokenizer.json and the
   safetensors header). Strict RFC 8259, because every input it reads is untrusted:

   - Strings are decoded to UTF-8 (escapes, \uXXXX, surrogate pairs); raw bytes must be
     valid UTF-8; \u0000 is rejected (the strings are C strings).
   - Duplicate keys are rejected (found in n log n, so a hostile object cannot make the
     check quadratic); nesting is limited to 128 levels.
   - Numbers are parsed with strtod (C locale assumed); is_integer says the number had no
     fraction or exponent and fits in a long long, whose exact value is in `integer`
     (safetensors offsets and token ids never go through a double).
   - Errors: a message and the byte offset of the problem; nothing is printed.

   It is the task loaders' parser, moved here so that every JSON input goes through one
   reader (issue 14). It is fuzzed (tests/fuzz). */
#ifndef GRZO_JSON_H
#define GRZO_JSON_H

#include <stddef.h>

typedef enum json_type {
    JSON_NULL, JSON_FALSE, JSON_TRUE, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT
} json_type;

typedef struct json_value json_value;
struct json_value {
    json_type type;
    double number;
    int is_integer;
    long long integer;
    char *string;                /* STRING: NUL-terminated UTF-8 */
    size_t string_len;
    size_t n;                    /* ARRAY/OBJECT: element count */
    json_value *items;           /* ARRAY: elements; OBJECT: values, in file order */
    char **keys;                 /* OBJECT: keys, in file order */
};

/* Parses exactly one value (surrounded by optional whitespace) from text[0..len).
   Returns 0, or -1 with a message in err and (if not NULL) the byte offset of the
   problem in *err_offset; *out is then empty (JSON_NULL) and needs no json_free. */
int json_parse(const char *text, size_t len, json_value *out, size_t *err_offset, char *err, size_t errlen);
void json_free(json_value *v);
/* Member of an object, or NULL (also when v is NULL or not an object). Linear: callers
   that look up many keys of one large object (a vocabulary) index it themselves. */
const json_value *json_get(const json_value *v, const char *key);

#endif
