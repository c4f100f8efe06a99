/* llm_test.h - shared helpers for the LLM loader/tokenizer tests (tests/llm/).

   CHECK* record a failure and go on; REQUIRE* stop the test at once. A test returns
   lt_finish("name"): exit status 0 = pass, 1 = fail (77 = skip is returned directly). */
#ifndef LLM_TEST_H
#define LLM_TEST_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm.h"

#if defined(__GNUC__) || defined(__clang__)
#define LT_UNUSED __attribute__((unused))
#else
#define LT_UNUSED
#endif

static int lt_failures = 0;
static long lt_checks = 0;

#define CHECK(cond)                                                                                  \
    do {                                                                                             \
        lt_checks++;                                                                                 \
        if (!(cond)) {                                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);                 \
            lt_failures++;                                                                           \
        }                                                                                            \
    } while (0)

#define CHECKF(cond, ...)                                                                            \
    do {                                                                                             \
        lt_checks++;                                                                                 \
        if (!(cond)) {                                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n    ", __FILE__, __LINE__, #cond);             \
            fprintf(stderr, __VA_ARGS__);                                                            \
            fputc('\n', stderr);                                                                     \
            lt_failures++;                                                                           \
        }                                                                                            \
    } while (0)

#define REQUIRE(cond, ...)                                                                           \
    do {                                                                                             \
        lt_checks++;                                                                                 \
        if (!(cond)) {                                                                               \
            fprintf(stderr, "%s:%d: REQUIRE failed: %s\n    ", __FILE__, __LINE__, #cond);           \
            fprintf(stderr, __VA_ARGS__);                                                            \
            fputc('\n', stderr);                                                                     \
            exit(1);                                                                                 \
        }                                                                                            \
    } while (0)

LT_UNUSED static int lt_finish(const char *name)
{
    if (lt_failures) {
        fprintf(stderr, "%s: %d of %ld checks failed\n", name, lt_failures, lt_checks);
        return 1;
    }
    printf("%s: all %ld checks passed\n", name, lt_checks);
    return 0;
}

/* dir + "/" + name into a static buffer */
LT_UNUSED static const char *lt_path(const char *dir, const char *name)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", dir, name);
    return buf;
}

/* Whole file into memory (malloc'd), or NULL. */
LT_UNUSED static uint8_t *lt_read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf;
    long n;
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return NULL;
    }
    buf = (uint8_t *)malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) buf[n] = 0;
    *size = (size_t)n;
    return buf;
}

/* A small deterministic generator (splitmix64) so that failures reproduce. */
typedef struct lt_rng {
    uint64_t s;
} lt_rng;

LT_UNUSED static uint64_t lt_next(lt_rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* uniform in [0, n) */
LT_UNUSED static uint32_t lt_below(lt_rng *r, uint32_t n)
{
    return (uint32_t)(lt_next(r) % n);
}

/* Tokenize into a fresh array (caller frees); REQUIREs success. */
LT_UNUSED static int32_t *lt_tokenize(const llm_tokenizer *t, const char *text, int add_bos, int32_t *n)
{
    char err[256] = "";
    int32_t *ids;
    int32_t need = 0;
    int rc = llm_tokenize(t, text, add_bos, NULL, 0, &need, err, sizeof err);
    REQUIRE(rc == 0, "tokenize(\"%s\") failed: %s", text, err);
    ids = (int32_t *)malloc(((size_t)need + 1) * sizeof *ids);
    REQUIRE(ids != NULL, "out of memory");
    rc = llm_tokenize(t, text, add_bos, ids, need, n, err, sizeof err);
    REQUIRE(rc == 0 && *n == need, "second tokenize(\"%s\") disagreed: %s", text, err);
    return ids;
}

/* Concatenated token texts (caller frees). */
LT_UNUSED static char *lt_detokenize(const llm_tokenizer *t, const int32_t *ids, int32_t n)
{
    size_t cap = 64, len = 0;
    char *out = (char *)malloc(cap);
    int32_t i, prev = -1;
    REQUIRE(out != NULL, "out of memory");
    for (i = 0; i < n; i++) {
        const char *p = llm_token_text(t, prev, ids[i]);
        size_t k = strlen(p);
        while (len + k + 1 > cap) {
            cap *= 2;
            out = (char *)realloc(out, cap);
            REQUIRE(out != NULL, "out of memory");
        }
        memcpy(out + len, p, k);
        len += k;
        prev = ids[i];
    }
    out[len] = '\0';
    return out;
}

/* Does text encode to exactly want[0..nwant)? Prints both on mismatch. */
LT_UNUSED static int lt_encodes_to(const llm_tokenizer *t, const char *text, int add_bos, const int32_t *want,
                                   int32_t nwant)
{
    int32_t n, i;
    int32_t *ids = lt_tokenize(t, text, add_bos, &n);
    int ok = n == nwant;
    for (i = 0; ok && i < n; i++) ok = ids[i] == want[i];
    if (!ok) {
        fprintf(stderr, "    encode(\"%s\") = [", text);
        for (i = 0; i < n; i++) fprintf(stderr, "%s%d", i ? ", " : "", (int)ids[i]);
        fprintf(stderr, "], expected [");
        for (i = 0; i < nwant; i++) fprintf(stderr, "%s%d", i ? ", " : "", (int)want[i]);
        fprintf(stderr, "]\n");
    }
    free(ids);
    return ok;
}

#define CHECK_ENCODES(t, text, add_bos, ...)                                                         \
    do {                                                                                             \
        static const int32_t want_[] = {__VA_ARGS__};                                                \
        CHECK(lt_encodes_to((t), (text), (add_bos), want_, (int32_t)(sizeof want_ / sizeof want_[0]))); \
    } while (0)

/* decode(encode(text)) == text (add_bos: the SentencePiece prefix space is dropped after BOS). */
LT_UNUSED static int lt_round_trips(const llm_tokenizer *t, const char *text, int add_bos)
{
    int32_t n;
    int32_t *ids = lt_tokenize(t, text, add_bos, &n);
    char *back;
    int ok;
    /* skip the BOS text itself: decoding starts after it */
    if (add_bos && n > 0 && ids[0] == llm_tokenizer_bos(t)) {
        int32_t i, prev = ids[0];
        size_t cap = 16 + strlen(text) * 4, len = 0;
        back = (char *)malloc(cap);
        REQUIRE(back != NULL, "out of memory");
        for (i = 1; i < n; i++) {
            const char *p = llm_token_text(t, prev, ids[i]);
            size_t k = strlen(p);
            if (len + k + 1 > cap) {
                cap = 2 * (len + k + 1);
                back = (char *)realloc(back, cap);
                REQUIRE(back != NULL, "out of memory");
            }
            memcpy(back + len, p, k);
            len += k;
            prev = ids[i];
        }
        back[len] = '\0';
    } else {
        back = lt_detokenize(t, ids, n);
    }
    ok = strcmp(back, text) == 0;
    if (!ok) fprintf(stderr, "    round trip of \"%s\" gave \"%s\"\n", text, back);
    free(back);
    free(ids);
    return ok;
}

/* ---- known answers of the tokenizers package (hf_tokenizer_cases.py's cases.txt) ---- */

LT_UNUSED static int lt_hexval(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* "HEX<TAB>ids" -> text (NUL-terminated) and ids; 0 on a malformed line. */
LT_UNUSED static int lt_parse_case(char *line, char *text, size_t text_cap, int32_t *ids, int32_t cap, int32_t *n)
{
    char *tab = strchr(line, '\t'), *p;
    size_t i, len;
    if (!tab) return 0;
    len = (size_t)(tab - line) / 2;
    if (len + 1 > text_cap) return 0;
    for (i = 0; i < len; i++) {
        int hi = lt_hexval(line[2 * i]), lo = lt_hexval(line[2 * i + 1]);
        if (hi < 0 || lo < 0) return 0;
        text[i] = (char)(hi * 16 + lo);
    }
    text[len] = '\0';
    *n = 0;
    for (p = tab + 1; *p && *p != '\n';) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || *n >= cap) return 0;
        ids[(*n)++] = (int32_t)v;
        p = end;
        while (*p == ' ') p++;
    }
    return 1;
}

LT_UNUSED static void lt_print_ids(const char *what, const int32_t *ids, int32_t n)
{
    int32_t i;
    fprintf(stderr, "    %s:", what);
    for (i = 0; i < n && i < 40; i++) fprintf(stderr, " %d", (int)ids[i]);
    fprintf(stderr, n > 40 ? " ...\n" : "\n");
}

#if defined(_POSIX_C_SOURCE) && _POSIX_C_SOURCE >= 200112L
/* The first interpreter among candidates[0..n) that imports `modules` ("numpy, gguf") with
   PYLIB prepended to PYTHONPATH (left set for the scripts the test runs next), or NULL. */
LT_UNUSED static const char *lt_python_importing(const char *modules, const char *pylib, char **candidates, int n)
{
    static char cmd[1024];
    const char *old = getenv("PYTHONPATH");
    char path[2048];
    int i;
    snprintf(path, sizeof path, "%s%s%s", pylib, old && *old ? ":" : "", old && *old ? old : "");
    setenv("PYTHONPATH", path, 1);
    for (i = 0; i < n; i++) {
        snprintf(cmd, sizeof cmd, "'%s' -c 'import %s' >/dev/null 2>&1", candidates[i], modules);
        if (system(cmd) == 0) return candidates[i];
    }
    return NULL;
}
#endif

/* Encode every case of cases_path with t (BOS as t wants it) and check the tokenizers
   package's ids (at least 300 cases); returns the number of mismatches. */
LT_UNUSED static int lt_compare_cases(const llm_tokenizer *t, const char *cases_path, const char *name)
{
    static char line[1 << 16], text[1 << 15];
    static int32_t want[4096], got[4096];
    char err[512] = "";
    int cases = 0, bad = 0;
    FILE *f = fopen(cases_path, "r");
    CHECKF(f != NULL, "%s: cannot open", cases_path);
    while (f && fgets(line, sizeof line, f)) {
        int32_t n_want = 0, n_got = 0;
        if (!lt_parse_case(line, text, sizeof text, want, 4096, &n_want)) {
            CHECKF(0, "%s: malformed line %d", cases_path, cases + 1);
            break;
        }
        cases++;
        if (llm_tokenize(t, text, llm_tokenizer_wants_bos(t), got, 4096, &n_got, err, sizeof err) != 0 ||
            n_got != n_want || memcmp(got, want, (size_t)n_want * sizeof(int32_t)) != 0) {
            if (++bad <= 5) {
                fprintf(stderr, "%s case %d: '%s' %s\n", name, cases, text, err);
                lt_print_ids("tokenizers", want, n_want);
                lt_print_ids("grzo      ", got, n_got);
            }
        }
    }
    if (f) fclose(f);
    printf("%-12s %d strings, %d differ\n", name, cases, bad);
    CHECKF(bad == 0 && cases >= 300, "%s: %d of %d strings encode differently", name, bad, cases);
    return bad;
}

#endif /* LLM_TEST_H */
