/* cli_args.h - strict parsing of numeric command-line values, shared by every grzo program
   (grzo-finetune, grzo-generate, grzo-probe, the demo and the benchmarks).

   A value is accepted only when the WHOLE string is one number of the asked kind inside
   the asked range: "12abc", "2.5" for an integer, "", " 3", "0x10", "1e3" for an integer,
   "-1" for an unsigned value, "nan", "inf", and anything that overflows are refused. On
   refusal the output is left unchanged and err receives one line naming the option, what
   was expected and what was given, e.g.
       --batch: expected an integer in [1, 65536], got '2.5'
   Every function returns 0 on success and -1 on refusal; err may be NULL. */
#ifndef GRZO_CLI_ARGS_H
#define GRZO_CLI_ARGS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Decimal integer in [lo, hi], an optional leading '-' or '+'. */
int cli_parse_int(const char *opt, const char *text, int64_t lo, int64_t hi, int64_t *out, char *err, size_t err_size);

/* Decimal integer in [0, 2^64 - 1] without a sign (seeds). */
int cli_parse_u64(const char *opt, const char *text, uint64_t *out, char *err, size_t err_size);

/* Finite decimal number (strtod syntax, no hex, no inf/nan) in the range whose ends are lo
   and hi; lo_open / hi_open make that end exclusive (e.g. a learning rate: lo = 0, lo_open). */
typedef struct cli_range {
    double lo, hi;
    int lo_open, hi_open;
} cli_range;
int cli_parse_double(const char *opt, const char *text, cli_range r, double *out, char *err, size_t err_size);

/* cli_parse_double, then the value must also be representable as a finite float (not 0
   when the range excludes 0). */
int cli_parse_float(const char *opt, const char *text, cli_range r, float *out, char *err, size_t err_size);

#ifdef __cplusplus
}
#endif
#endif /* GRZO_CLI_ARGS_H */
