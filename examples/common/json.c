/* json.c - the one strict JSON reader of the examples (task files, run manifests, and
   the Hugging Face files: config.json, tokenizer.json, safetensors headers). See json.h. */
#include "json.h"
#include "text.h"

#include <float.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define JSON_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define JSON_PRINTF(a, b)
#endif

/* ======================================================================================
   JSON reader (strict RFC 8259)
   ====================================================================================== */

#define JSON_MAX_DEPTH 128

typedef struct jparser {
    const char *s;
    size_t n, pos;
    int depth;
    char *err;
    size_t errlen;
    size_t err_at;
} jparser;

static int jp_fail(jparser *p, size_t at, const char *fmt, ...) JSON_PRINTF(3, 4);
static int jp_fail(jparser *p, size_t at, const char *fmt, ...)
{
    va_list ap;
    p->err_at = at;
    if (p->err && p->errlen) {
        va_start(ap, fmt);
        vsnprintf(p->err, p->errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* A byte for an error message: printable ASCII as itself, anything else as hex. */
static const char *jp_describe_byte(unsigned char c, char buf[8])
{
    if (c >= 0x21 && c < 0x7F) { buf[0] = '\''; buf[1] = (char)c; buf[2] = '\''; buf[3] = 0; }
    else sprintf(buf, "0x%02X", c);
    return buf;
}

static void jp_skip_ws(jparser *p)
{
    while (p->pos < p->n) {
        char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

static int hex4(const char *s, uint32_t *out)
{
    uint32_t v = 0;
    int i;
    for (i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
        else return -1;
    }
    *out = v;
    return 0;
}

/* \uXXXX at p->pos (pointing at the backslash); combines a surrogate pair. */
static int jp_unicode_escape(jparser *p, sbuf *b)
{
    size_t at = p->pos;
    uint32_t cp, lo;
    if (p->n - p->pos < 6 || hex4(p->s + p->pos + 2, &cp))
        return jp_fail(p, at, "invalid \\u escape (four hex digits expected)");
    p->pos += 6;
    if (cp >= 0xDC00 && cp <= 0xDFFF)
        return jp_fail(p, at, "unpaired low surrogate \\u%04X", (unsigned)cp);
    if (cp >= 0xD800 && cp <= 0xDBFF) {
        if (p->n - p->pos < 6 || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u' ||
            hex4(p->s + p->pos + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
            return jp_fail(p, at, "unpaired high surrogate \\u%04X (a \\uDC00-\\uDFFF escape must follow)",
                           (unsigned)cp);
        p->pos += 6;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    if (cp == 0) return jp_fail(p, at, "\\u0000 is not supported (text fields are C strings)");
    utf8_put(b, cp);
    return 0;
}

/* A string starting at the opening quote; the decoded text goes to *out (malloc'd). */
static int jp_string(jparser *p, char **out, size_t *out_len)
{
    size_t start = p->pos;
    sbuf b = {0};
    p->pos++;
    for (;;) {
        unsigned char c;
        if (p->pos >= p->n) {
            sb_free(&b);
            return jp_fail(p, start, "unterminated string");
        }
        c = (unsigned char)p->s[p->pos];
        if (c == '"') {
            p->pos++;
            break;
        }
        if (c == '\\') {
            char e;
            if (p->pos + 1 >= p->n) {
                sb_free(&b);
                return jp_fail(p, start, "unterminated string");
            }
            e = p->s[p->pos + 1];
            switch (e) {
            case '"': sb_putc(&b, '"'); break;
            case '\\': sb_putc(&b, '\\'); break;
            case '/': sb_putc(&b, '/'); break;
            case 'b': sb_putc(&b, '\b'); break;
            case 'f': sb_putc(&b, '\f'); break;
            case 'n': sb_putc(&b, '\n'); break;
            case 'r': sb_putc(&b, '\r'); break;
            case 't': sb_putc(&b, '\t'); break;
            case 'u':
                if (jp_unicode_escape(p, &b)) {
                    sb_free(&b);
                    return -1;
                }
                continue;
            default: {
                char d[8];
                sb_free(&b);
                return jp_fail(p, p->pos, "invalid escape \\%s", jp_describe_byte((unsigned char)e, d));
            }
            }
            p->pos += 2;
            continue;
        }
        if (c < 0x20) {
            sb_free(&b);
            return jp_fail(p, p->pos, "control character 0x%02X in a string (must be escaped)", c);
        }
        if (c < 0x80) {
            sb_putc(&b, (char)c);
            p->pos++;
        } else {
            size_t l = utf8_seq((const unsigned char *)p->s + p->pos, p->n - p->pos, NULL);
            if (!l) {
                sb_free(&b);
                return jp_fail(p, p->pos, "invalid UTF-8 in a string");
            }
            sb_put(&b, p->s + p->pos, l);
            p->pos += l;
        }
    }
    if (!b.p) sb_put(&b, "", 0);
    if (b.oom) {
        sb_free(&b);
        return jp_fail(p, start, "out of memory");
    }
    *out = b.p;
    *out_len = b.len;
    return 0;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static int jp_number(jparser *p, json_value *out)
{
    size_t start = p->pos, len;
    int integral = 1;
    char small[64], *buf = small;
    double d;
    if (p->s[p->pos] == '-') p->pos++;
    if (p->pos >= p->n || !is_digit(p->s[p->pos]))
        return jp_fail(p, start, "invalid number (a digit must follow '-')");
    if (p->s[p->pos] == '0') {
        p->pos++;
        if (p->pos < p->n && is_digit(p->s[p->pos]))
            return jp_fail(p, start, "invalid number (leading zeros are not allowed)");
    } else {
        while (p->pos < p->n && is_digit(p->s[p->pos])) p->pos++;
    }
    if (p->pos < p->n && p->s[p->pos] == '.') {
        integral = 0;
        p->pos++;
        if (p->pos >= p->n || !is_digit(p->s[p->pos]))
            return jp_fail(p, start, "invalid number (a digit must follow '.')");
        while (p->pos < p->n && is_digit(p->s[p->pos])) p->pos++;
    }
    if (p->pos < p->n && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
        integral = 0;
        p->pos++;
        if (p->pos < p->n && (p->s[p->pos] == '+' || p->s[p->pos] == '-')) p->pos++;
        if (p->pos >= p->n || !is_digit(p->s[p->pos]))
            return jp_fail(p, start, "invalid number (a digit must follow the exponent)");
        while (p->pos < p->n && is_digit(p->s[p->pos])) p->pos++;
    }
    len = p->pos - start;
    if (len >= sizeof small) {
        buf = (char *)malloc(len + 1);
        if (!buf) return jp_fail(p, start, "out of memory");
    }
    memcpy(buf, p->s + start, len);
    buf[len] = '\0';
    d = strtod(buf, NULL);
    if (buf != small) free(buf);
    if (d > DBL_MAX || d < -DBL_MAX) return jp_fail(p, start, "number out of range");
    out->type = JSON_NUMBER;
    out->number = d;
    if (integral) {
        /* exact integer value, so labels like 1 never go through a double */
        int neg = p->s[start] == '-', ok = 1;
        unsigned long long v = 0, limit = (unsigned long long)LLONG_MAX + (neg ? 1u : 0u);
        size_t i;
        for (i = start + (size_t)neg; i < p->pos; i++) {
            unsigned digit = (unsigned)(p->s[i] - '0');
            if (v > (limit - digit) / 10) { ok = 0; break; }
            v = v * 10 + digit;
        }
        if (ok) {
            out->is_integer = 1;
            if (!neg) out->integer = (long long)v;
            else if (v == (unsigned long long)LLONG_MAX + 1u) out->integer = LLONG_MIN;
            else out->integer = -(long long)v;
        }
    }
    return 0;
}

static int jp_literal(jparser *p, const char *word, json_type type, json_value *out)
{
    size_t len = strlen(word);
    if (p->n - p->pos < len || memcmp(p->s + p->pos, word, len) != 0)
        return jp_fail(p, p->pos, "invalid literal (expected %s)", word);
    p->pos += len;
    out->type = type;
    return 0;
}

static int jp_value(jparser *p, json_value *out);

/* Growable array of values while an array or object is parsed. */
typedef struct jvec {
    json_value *v;
    char **keys;
    size_t n, cap;
} jvec;

static int jvec_push(jvec *a, int with_keys)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 8;
        json_value *nv;
        if (cap > SIZE_MAX / sizeof(json_value)) return -1;
        nv = (json_value *)realloc(a->v, cap * sizeof *nv);
        if (!nv) return -1;
        a->v = nv;
        if (with_keys) {
            char **nk = (char **)realloc(a->keys, cap * sizeof *nk);
            if (!nk) return -1;
            a->keys = nk;
        }
        a->cap = cap;
    }
    memset(&a->v[a->n], 0, sizeof a->v[a->n]);
    if (with_keys) a->keys[a->n] = NULL;
    a->n++;
    return 0;
}

static void jvec_free(jvec *a)
{
    size_t i;
    for (i = 0; i < a->n; i++) {
        json_free(&a->v[i]);
        if (a->keys) free(a->keys[i]);
    }
    free(a->v);
    free(a->keys);
    a->v = NULL;
    a->keys = NULL;
    a->n = a->cap = 0;
}

static int jp_array(jparser *p, json_value *out)
{
    jvec a = {0};
    size_t open = p->pos;
    if (++p->depth > JSON_MAX_DEPTH) return jp_fail(p, open, "nesting deeper than %d levels", JSON_MAX_DEPTH);
    p->pos++;
    jp_skip_ws(p);
    if (p->pos < p->n && p->s[p->pos] == ']') {
        p->pos++;
    } else {
        for (;;) {
            if (jvec_push(&a, 0)) { jvec_free(&a); return jp_fail(p, p->pos, "out of memory"); }
            if (jp_value(p, &a.v[a.n - 1])) { jvec_free(&a); return -1; }
            jp_skip_ws(p);
            if (p->pos >= p->n) { jvec_free(&a); return jp_fail(p, open, "unterminated array"); }
            if (p->s[p->pos] == ']') { p->pos++; break; }
            if (p->s[p->pos] != ',') {
                char d[8];
                jvec_free(&a);
                return jp_fail(p, p->pos, "expected ',' or ']' in an array, found %s",
                               jp_describe_byte((unsigned char)p->s[p->pos], d));
            }
            p->pos++;
            jp_skip_ws(p);
            if (p->pos < p->n && p->s[p->pos] == ']') { jvec_free(&a); return jp_fail(p, p->pos, "trailing comma in an array"); }
        }
    }
    p->depth--;
    out->type = JSON_ARRAY;
    out->items = a.v;
    out->n = a.n;
    return 0;
}

static int key_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorting a copy of the key pointers finds duplicates in n log n, so a hostile line with
   many keys cannot make this quadratic. Returns 1 with the key in *dup, 0 when the keys are
   distinct, -1 when the copy cannot be allocated: out of memory is an error, not "no
   duplicates" (an object with a duplicate key was once accepted when this allocation failed). */
static int find_duplicate_key(char **keys, size_t n, const char **dup)
{
    char **sorted;
    size_t i;
    *dup = NULL;
    if (n < 2) return 0;
    sorted = (char **)malloc(n * sizeof *sorted);
    if (!sorted) return -1;
    memcpy(sorted, keys, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, key_cmp);
    for (i = 1; i < n && !*dup; i++)
        if (strcmp(sorted[i - 1], sorted[i]) == 0) *dup = sorted[i];
    free(sorted);
    return *dup != NULL;
}

static int jp_object(jparser *p, json_value *out)
{
    jvec a = {0};
    size_t open = p->pos;
    if (++p->depth > JSON_MAX_DEPTH) return jp_fail(p, open, "nesting deeper than %d levels", JSON_MAX_DEPTH);
    p->pos++;
    jp_skip_ws(p);
    if (p->pos < p->n && p->s[p->pos] == '}') {
        p->pos++;
    } else {
        for (;;) {
            size_t klen;
            if (p->pos >= p->n) { jvec_free(&a); return jp_fail(p, open, "unterminated object"); }
            if (p->s[p->pos] != '"') {
                char d[8];
                jvec_free(&a);
                return jp_fail(p, p->pos, "expected a string key in an object, found %s",
                               jp_describe_byte((unsigned char)p->s[p->pos], d));
            }
            if (jvec_push(&a, 1)) { jvec_free(&a); return jp_fail(p, p->pos, "out of memory"); }
            if (jp_string(p, &a.keys[a.n - 1], &klen)) { jvec_free(&a); return -1; }
            jp_skip_ws(p);
            if (p->pos >= p->n || p->s[p->pos] != ':') { jvec_free(&a); return jp_fail(p, p->pos, "expected ':' after a key"); }
            p->pos++;
            if (jp_value(p, &a.v[a.n - 1])) { jvec_free(&a); return -1; }
            jp_skip_ws(p);
            if (p->pos >= p->n) { jvec_free(&a); return jp_fail(p, open, "unterminated object"); }
            if (p->s[p->pos] == '}') { p->pos++; break; }
            if (p->s[p->pos] != ',') {
                char d[8];
                jvec_free(&a);
                return jp_fail(p, p->pos, "expected ',' or '}' in an object, found %s",
                               jp_describe_byte((unsigned char)p->s[p->pos], d));
            }
            p->pos++;
            jp_skip_ws(p);
            if (p->pos < p->n && p->s[p->pos] == '}') { jvec_free(&a); return jp_fail(p, p->pos, "trailing comma in an object"); }
        }
    }
    {
        const char *dup;
        int found = find_duplicate_key(a.keys, a.n, &dup);
        if (found) {
            int r = found < 0 ? jp_fail(p, open, "out of memory") : jp_fail(p, open, "duplicate key \"%s\"", dup);
            jvec_free(&a);
            return r;
        }
    }
    p->depth--;
    out->type = JSON_OBJECT;
    out->items = a.v;
    out->keys = a.keys;
    out->n = a.n;
    return 0;
}

static int jp_value(jparser *p, json_value *out)
{
    char c;
    jp_skip_ws(p);
    if (p->pos >= p->n) return jp_fail(p, p->pos, "unexpected end of input (a value was expected)");
    c = p->s[p->pos];
    switch (c) {
    case '{': return jp_object(p, out);
    case '[': return jp_array(p, out);
    case '"':
        out->type = JSON_STRING;
        return jp_string(p, &out->string, &out->string_len);
    case 't': return jp_literal(p, "true", JSON_TRUE, out);
    case 'f': return jp_literal(p, "false", JSON_FALSE, out);
    case 'n': return jp_literal(p, "null", JSON_NULL, out);
    default:
        if (c == '-' || is_digit(c)) return jp_number(p, out);
        {
            char d[8];
            return jp_fail(p, p->pos, "unexpected %s (a value was expected)", jp_describe_byte((unsigned char)c, d));
        }
    }
}

int json_parse(const char *text, size_t len, json_value *out, size_t *err_offset, char *err, size_t errlen)
{
    jparser p;
    memset(out, 0, sizeof *out);
    memset(&p, 0, sizeof p);
    p.s = text;
    p.n = len;
    p.err = err;
    p.errlen = errlen;
    if (jp_value(&p, out) == 0) {
        jp_skip_ws(&p);
        if (p.pos == p.n) return 0;
        {
            char d[8];
            json_free(out);
            jp_fail(&p, p.pos, "unexpected %s after the value", jp_describe_byte((unsigned char)text[p.pos], d));
        }
    }
    memset(out, 0, sizeof *out);
    if (err_offset) *err_offset = p.err_at;
    return -1;
}

void json_free(json_value *v)
{
    size_t i;
    if (!v) return;
    if (v->type == JSON_ARRAY || v->type == JSON_OBJECT) {
        for (i = 0; i < v->n; i++) {
            json_free(&v->items[i]);
            if (v->keys) free(v->keys[i]);
        }
        free(v->items);
        free(v->keys);
    }
    free(v->string);
    memset(v, 0, sizeof *v);
}

const json_value *json_get(const json_value *v, const char *key)
{
    size_t i;
    if (!v || v->type != JSON_OBJECT) return NULL;
    for (i = 0; i < v->n; i++)
        if (strcmp(v->keys[i], key) == 0) return &v->items[i];
    return NULL;
}
