/* The shared command-line number parser (examples/common/cli_args.h): what it accepts,
   what it refuses, and that a refusal leaves the output alone and names the option. */
#include "cli_args.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int fails, checks;
#define CHECK(c, ...) do { checks++; if (!(c)) { fails++; printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } } while (0)

static void ints(void) {
    static const char *bad[] = {"", " 3", "3 ", "12abc", "2.5", "0x10", "1e3", "--1", "+", "-", "99999999999999999999",
                                "abc", "4097", "0"};
    char err[256];
    int64_t v = 42;
    size_t i;
    CHECK(cli_parse_int("--batch", "16", 1, 4096, &v, err, sizeof err) == 0 && v == 16, "16");
    CHECK(cli_parse_int("--batch", "+7", 1, 4096, &v, err, sizeof err) == 0 && v == 7, "+7");
    CHECK(cli_parse_int("--n", "-5", -10, 10, &v, err, sizeof err) == 0 && v == -5, "-5");
    CHECK(cli_parse_int("--n", "9223372036854775807", 0, INT64_MAX, &v, err, sizeof err) == 0 && v == INT64_MAX, "max");
    for (i = 0; i < sizeof bad / sizeof *bad; i++) {
        v = 42;
        err[0] = 0;
        CHECK(cli_parse_int("--batch", bad[i], 1, 4096, &v, err, sizeof err) == -1 && v == 42, "'%s' accepted", bad[i]);
        CHECK(strstr(err, "--batch") && strstr(err, "[1, 4096]"), "message for '%s': %s", bad[i], err);
    }
    CHECK(cli_parse_int("--x", NULL, 0, 1, &v, NULL, 0) == -1, "NULL text");
    /* the ends themselves are inside */
    CHECK(cli_parse_int("--batch", "1", 1, 4096, &v, err, sizeof err) == 0 && v == 1, "lower end");
    CHECK(cli_parse_int("--batch", "4096", 1, 4096, &v, err, sizeof err) == 0 && v == 4096, "upper end");
}

/* err may be NULL whatever its size says; a long value is cut at 64 characters with "..."
   (one line stays readable), a value of exactly 64 is shown whole. */
static void messages(void) {
    char err[256], text[101];
    int64_t v = 42;
    memset(text, 'x', 100);
    text[100] = 0;
    CHECK(cli_parse_int("--x", "abc", 0, 1, &v, NULL, sizeof err) == -1 && v == 42, "NULL err with a size");
    CHECK(cli_parse_int("--x", text, 0, 1, &v, err, sizeof err) == -1, "long value");
    CHECK(strstr(err, "got '") && strlen(strstr(err, "got '")) == strlen("got '") + 64 + strlen("...'") &&
              strstr(err, "...'"), "long value cut: %s", err);
    text[64] = 0;
    CHECK(cli_parse_int("--x", text, 0, 1, &v, err, sizeof err) == -1, "64 characters");
    CHECK(strstr(err, text) && !strstr(err, "..."), "64 characters shown whole: %s", err);
    CHECK(cli_parse_int("--x", "abc", 0, 1, &v, err, sizeof err) == -1 && !strstr(err, "..."), "short value: %s", err);
}

static void u64s(void) {
    static const char *bad[] = {"-1", "", "+1", "18446744073709551616", "1.0", " 1", "1e2"};
    uint64_t v = 7;
    char err[256];
    size_t i;
    CHECK(cli_parse_u64("--seed", "18446744073709551615", &v, err, sizeof err) == 0 && v == UINT64_MAX, "max seed");
    CHECK(cli_parse_u64("--seed", "0", &v, err, sizeof err) == 0 && v == 0, "0");
    for (i = 0; i < sizeof bad / sizeof *bad; i++) {
        v = 7;
        CHECK(cli_parse_u64("--seed", bad[i], &v, err, sizeof err) == -1 && v == 7, "'%s' accepted", bad[i]);
    }
}

static void reals(void) {
    static const char *bad[] = {"abc", "", "inf", "-inf", "nan", "NAN", "1e999", "0x1p3", "1.5x", " 1", "1e", ".", "-0.5", "0"};
    cli_range pos = {0.0, 1e30, 1, 0};
    double d = 3;
    float f = 3;
    char err[256];
    size_t i;
    CHECK(cli_parse_double("--lr", "1e-5", pos, &d, err, sizeof err) == 0 && d == 1e-5, "1e-5");
    CHECK(cli_parse_double("--lr", ".5", pos, &d, err, sizeof err) == 0 && d == 0.5, ".5");
    CHECK(cli_parse_double("--lr", "3.", pos, &d, err, sizeof err) == 0 && d == 3.0, "3.");
    CHECK(cli_parse_double("--t", "0", (cli_range){0, 100, 0, 0}, &d, err, sizeof err) == 0 && d == 0, "0 in closed range");
    for (i = 0; i < sizeof bad / sizeof *bad; i++) {
        d = 3;
        err[0] = 0;
        CHECK(cli_parse_double("--lr", bad[i], pos, &d, err, sizeof err) == -1 && d == 3, "'%s' accepted", bad[i]);
        CHECK(strstr(err, "--lr") && strstr(err, "(0, 1e+30]"), "message for '%s': %s", bad[i], err);
    }
    CHECK(cli_parse_double("--t", "1", (cli_range){0, 1, 0, 1}, &d, err, sizeof err) == -1, "open upper end");
    /* signs, and texts without a digit that strtod would read as 0 in a range holding 0 */
    CHECK(cli_parse_double("--t", "-0.5", (cli_range){-1, 1, 0, 0}, &d, err, sizeof err) == 0 && d == -0.5, "-0.5");
    CHECK(cli_parse_double("--t", "+2.5", (cli_range){-1, 10, 0, 0}, &d, err, sizeof err) == 0 && d == 2.5, "+2.5");
    d = 3;
    CHECK(cli_parse_double("--t", "", (cli_range){0, 100, 0, 0}, &d, err, sizeof err) == -1 && d == 3, "'' as 0");
    CHECK(cli_parse_double("--t", "e5", (cli_range){0, 100, 0, 0}, &d, err, sizeof err) == -1 && d == 3, "'e5' as 0");
    /* an overflow is refused even where the range has no finite end */
    CHECK(cli_parse_double("--t", "1e999", (cli_range){0, INFINITY, 0, 0}, &d, err, sizeof err) == -1 && d == 3,
          "1e999 in [0, inf]");
    CHECK(cli_parse_double("--t", "-1e999", (cli_range){-INFINITY, 0, 0, 0}, &d, err, sizeof err) == -1 && d == 3,
          "-1e999 in [-inf, 0]");
    /* an underflow (ERANGE) is the value it rounds to: 0 or a subnormal */
    CHECK(cli_parse_double("--t", "1e-320", (cli_range){0, 1, 0, 0}, &d, err, sizeof err) == 0 && d > 0 && d < 1e-300,
          "subnormal 1e-320");
    CHECK(cli_parse_double("--t", "1e-400", (cli_range){0, 1, 0, 0}, &d, err, sizeof err) == 0 && d == 0, "1e-400 is 0");
    CHECK(cli_parse_float("--lr", "1e-3", pos, &f, err, sizeof err) == 0 && f == 1e-3f, "float");
    f = 3;
    CHECK(cli_parse_float("--lr", "1e39", (cli_range){0, 1e300, 1, 0}, &f, err, sizeof err) == -1 && f == 3, "float overflow");
    CHECK(cli_parse_float("--lr", "1e-50", pos, &f, err, sizeof err) == -1 && f == 3, "float underflow to 0 in (0, ..]");
    CHECK(cli_parse_float("--p", "0.99999999999", (cli_range){0, 1, 0, 1}, &f, err, sizeof err) == -1 && f == 3,
          "rounds onto the open upper end");
    CHECK(strstr(err, "that a float can hold") != NULL, "message: %s", err);
    CHECK(cli_parse_float("--p", "-1e-50", (cli_range){-1, 0, 0, 1}, &f, err, sizeof err) == -1 && f == 3,
          "rounds onto the open upper end 0");
    CHECK(cli_parse_float("--p", "0.1", (cli_range){0, 0.1, 0, 0}, &f, err, sizeof err) == 0 && f == 0.1f,
          "a closed end typed exactly");
    CHECK(cli_parse_float("--p", "0.9999999", (cli_range){0, 1, 0, 1}, &f, err, sizeof err) == 0 && f < 1.0f,
          "just under an open end");
    /* 0.7f is below 0.7: a closed lower end typed exactly stays inside too */
    CHECK(cli_parse_float("--p", "0.7", (cli_range){0.7, 1, 0, 0}, &f, err, sizeof err) == 0 && f == 0.7f,
          "a closed lower end typed exactly");
    f = 3;
    CHECK(cli_parse_float("--lr", "abc", pos, &f, err, sizeof err) == -1 && f == 3, "float: a text the double parser refuses");
    CHECK(strstr(err, "--lr") && strstr(err, "'abc'"), "float message: %s", err);
}

int main(void) {
    ints();
    messages();
    u64s();
    reals();
    printf("%s (%d checks, %d failed)\n", fails ? "FAIL" : "ok", checks, fails);
    return fails ? 1 : 0;
}
