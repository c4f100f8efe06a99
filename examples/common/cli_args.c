/* cli_args.c - see cli_args.h. */
#include "cli_args.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cli__refuse(char *err, size_t n, const char *opt, const char *text, const char *fmt, ...) {
    if (err && n) {
        char what[160];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof what, fmt, ap);
        va_end(ap);
        snprintf(err, n, "%s: expected %s, got '%.64s%s'", opt ? opt : "value", what, text ? text : "",
                 text && strlen(text) > 64 ? "..." : "");
    }
    return -1;
}

/* Digits only (after an optional sign when signs are allowed): strtoll/strtoull would
   otherwise accept leading blanks, and strtoull a '-' that wraps. */
static int cli__is_decimal(const char *s, int allow_sign) {
    if (allow_sign && (*s == '-' || *s == '+')) s++;
    if (!*s) return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s)) return 0;
    return 1;
}

int cli_parse_int(const char *opt, const char *text, int64_t lo, int64_t hi, int64_t *out, char *err, size_t err_size) {
    char *end;
    long long v;
    if (!text || !cli__is_decimal(text, 1))
        return cli__refuse(err, err_size, opt, text, "an integer in [%lld, %lld]", (long long)lo, (long long)hi);
    errno = 0;
    v = strtoll(text, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return cli__refuse(err, err_size, opt, text, "an integer in [%lld, %lld]", (long long)lo, (long long)hi);
    if (out) *out = (int64_t)v;
    return 0;
}

int cli_parse_u64(const char *opt, const char *text, uint64_t *out, char *err, size_t err_size) {
    char *end;
    unsigned long long v;
    if (!text || !cli__is_decimal(text, 0))
        return cli__refuse(err, err_size, opt, text, "an unsigned integer in [0, 18446744073709551615]");
    errno = 0;
    v = strtoull(text, &end, 10);
    if (errno || *end) return cli__refuse(err, err_size, opt, text, "an unsigned integer in [0, 18446744073709551615]");
    if (out) *out = (uint64_t)v;
    return 0;
}

/* Decimal floating-point syntax only: digits, one '.', an exponent; no hex, inf or nan. */
static int cli__is_decimal_real(const char *s) {
    int digits = 0;
    if (*s == '-' || *s == '+') s++;
    while (isdigit((unsigned char)*s)) { s++; digits++; }
    if (*s == '.') {
        s++;
        while (isdigit((unsigned char)*s)) { s++; digits++; }
    }
    if (!digits) return 0;
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '-' || *s == '+') s++;
        if (!isdigit((unsigned char)*s)) return 0;
        while (isdigit((unsigned char)*s)) s++;
    }
    return *s == '\0';
}

static int cli__in_range(double v, cli_range r) {
    return !(v < r.lo || (r.lo_open && v == r.lo) || v > r.hi || (r.hi_open && v == r.hi));
}

static int cli__range_text(cli_range r, char *buf, size_t n) {
    return snprintf(buf, n, "a number in %c%g, %g%c", r.lo_open ? '(' : '[', r.lo, r.hi, r.hi_open ? ')' : ']');
}

int cli_parse_double(const char *opt, const char *text, cli_range r, double *out, char *err, size_t err_size) {
    char *end, range[96];
    double v;
    cli__range_text(r, range, sizeof range);
    if (!text || !cli__is_decimal_real(text)) return cli__refuse(err, err_size, opt, text, "%s", range);
    errno = 0;
    v = strtod(text, &end);
    /* ERANGE on underflow is fine when the result is 0 or subnormal; overflow is not */
    if (*end || !isfinite(v) || (errno == ERANGE && fabs(v) > 1.0)) return cli__refuse(err, err_size, opt, text, "%s", range);
    if (!cli__in_range(v, r)) return cli__refuse(err, err_size, opt, text, "%s", range);
    if (out) *out = v;
    return 0;
}

int cli_parse_float(const char *opt, const char *text, cli_range r, float *out, char *err, size_t err_size) {
    double v;
    float f;
    char range[96];
    cli_range as_float;
    if (cli_parse_double(opt, text, r, &v, err, err_size) != 0) return -1;
    cli__range_text(r, range, sizeof range);
    f = (float)v;
    /* Rounding to float can land on an open end (0.99999999999 in [0, 1) becomes 1.0f, 1e-50
       in (0, 1] becomes 0) or past it; the ends are rounded too, so a closed end typed
       exactly ("0.1" in [0, 0.1]) stays inside. */
    as_float = r;
    as_float.lo = fabs(r.lo) > FLT_MAX ? r.lo : (float)r.lo;
    as_float.hi = fabs(r.hi) > FLT_MAX ? r.hi : (float)r.hi;
    if (!isfinite(f) || !cli__in_range(f, as_float))
        return cli__refuse(err, err_size, opt, text, "%s that a float can hold", range);
    if (out) *out = f;
    return 0;
}
