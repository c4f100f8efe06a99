/* bench_json.c - the one JSON reader (examples/common/json.h) against jansson, and the
   tokenizer.json loader, on a real tokenizer.json (issue 14 item 5).

   usage: bench_json TOKENIZER_JSON [--reps N] [--malformed DIR] [--text FILE]

   Prints, for the file (2-9 MB is the size of Llama-family tokenizer.json files):
     - parse time of json.h's json_parse and of jansson's json_loadb (default flags, and
       JSON_REJECT_DUPLICATES, the strictness json.h always has), best and median of N;
     - the whole tokenizer load (llm_tokenizer_load_hf_memory: parse, vocabulary index,
       merges) and the encoding speed of the loaded tokenizer on FILE (default: a built-in
       English/code/Unicode paragraph repeated to 1 MiB), in MB/s and tokens/s;
   and, with --malformed DIR (tests/data/tasks/malformed), each line of DIR/json_*.jsonl
   that json.h rejects and jansson accepts: what jansson would let through.

   Built only where jansson is found (bench/meson.build). Exit 77 (skip) when the file is
   missing. */
#if !defined(_WIN32)
#define _POSIX_C_SOURCE 200809L
#endif

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_args.h"
#include "json.h"
#include "bench_text.h"
#include "llm.h"

/* bench_json_jansson.c (jansson.h and json.h cannot share a translation unit) */
int bench_jansson_parse(const char *text, size_t n, int mode);

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static char *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    char *p = NULL;
    long size;
    if (!f) return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (p = (char *)malloc((size_t)size + 1)) != NULL) {
        *n = fread(p, 1, (size_t)size, f);
        p[*n] = '\0';
    }
    fclose(f);
    return p;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* ---- parse timing ---- */

typedef int (*parse_fn)(const char *text, size_t n, int flags);

static int parse_grzo(const char *text, size_t n, int flags)
{
    json_value v;
    char err[128];
    (void)flags;
    if (json_parse(text, n, &v, NULL, err, sizeof err)) return 1;
    json_free(&v);
    return 0;
}

static int parse_jansson(const char *text, size_t n, int mode)
{
    return bench_jansson_parse(text, n, mode);
}

static void time_parse(const char *name, parse_fn fn, int flags, const char *text, size_t n, int reps)
{
    double *t = (double *)malloc((size_t)reps * sizeof *t);
    int r, failed = 0;
    for (r = 0; r < reps; r++) {
        double t0 = now_s();
        failed |= fn(text, n, flags);
        t[r] = now_s() - t0;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_double);
    printf("  %-34s best %7.1f ms  median %7.1f ms  (%5.0f MB/s)%s\n", name, 1e3 * t[0], 1e3 * t[reps / 2],
           (double)n / 1e6 / t[0], failed ? "  PARSE FAILED" : "");
    free(t);
}

/* ---- tokenizer load and encoding ---- */

static int bench_tokenizer(const char *json, size_t n, const char *text, size_t text_n, int reps)
{
    llm_tokenizer *t = NULL;
    char err[512];
    double best = 1e30, t0;
    int32_t count = 0, *ids;
    int r;
    for (r = 0; r < reps; r++) {
        t0 = now_s();
        if (llm_tokenizer_load_hf_memory(json, n, NULL, 0, &t, err, sizeof err)) {
            fprintf(stderr, "bench_json: %s\n", err);
            return 1;
        }
        if (now_s() - t0 < best) best = now_s() - t0;
        if (r + 1 < reps) llm_tokenizer_free(t);
    }
    printf("  %-34s best %7.1f ms  (%d tokens)\n", "tokenizer load (parse + index)", 1e3 * best, (int)llm_tokenizer_vocab(t));
    llm_tokenize(t, text, 0, NULL, 0, &count, err, sizeof err);
    ids = (int32_t *)malloc(((size_t)count + 1) * sizeof *ids);
    best = 1e30;
    for (r = 0; r < 3 && ids; r++) {
        t0 = now_s();
        llm_tokenize(t, text, 0, ids, count, &count, err, sizeof err);
        if (now_s() - t0 < best) best = now_s() - t0;
    }
    printf("  %-34s %.2f MB of text -> %d tokens: %.1f MB/s, %.2f M tokens/s\n", "encoding (llm_tokenize, best of 3)",
           (double)text_n / 1e6, (int)count, (double)text_n / 1e6 / best, (double)count / 1e6 / best);
    free(ids);
    llm_tokenizer_free(t);
    return 0;
}

/* ---- strictness: malformed lines that jansson accepts ---- */

/* accepted[0]: by jansson with duplicate keys allowed (its default); [1]: rejected. */
static void check_line(const char *file, int line_no, const char *line, size_t n, int *rejected, int accepted[2])
{
    int mode;
    json_value v;
    char err[256];
    if (json_parse(line, n, &v, NULL, err, sizeof err) == 0) {
        json_free(&v);
        return; /* a valid line of the file: not a malformed case */
    }
    (*rejected)++;
    for (mode = 1; mode <= 2; mode++) {
        if (bench_jansson_parse(line, n, mode) != 0) continue;
        accepted[mode - 1]++;
        printf("    jansson%s accepts %s:%d (json.h: %s)\n", mode == 2 ? " (duplicate keys rejected)" : "", file, line_no, err);
    }
}

/* The malformed inputs of the 'json' case of tests/finetune/test_tasks.c (json.h rejects
   each; lengths given because some hold NULs). */
static const struct {
    const char *text;
    size_t len;
} JSON_CASE[] = {
    {"", 0}, {"   ", 3}, {"{\"a\":1,}", 8}, {"[1,]", 4}, {"[1 2]", 5}, {"{\"a\" 1}", 7}, {"{a:1}", 5},
    {"{\"a\":1,\"a\":2}", 13}, {"\"abc", 4}, {"\"a\\", 3}, {"\"\\x\"", 4}, {"\"\\u12\"", 6}, {"\"\\ud800\"", 8},
    {"\"\\ud800\\u0041\"", 14}, {"\"\\udc00\"", 8}, {"\"\\u0000\"", 8}, {"\"a\tb\"", 5}, {"\"\xc3\x28\"", 4},
    {"\"\xe0\x80\xaf\"", 5}, {"\"\xf4\x90\x80\x80\"", 6}, {"\"\xed\xb0\x80\"", 5}, {"\"\xe2\x82\"", 4}, {"01", 2},
    {"-", 1}, {"1.", 2}, {"1e+", 3}, {"+1", 2}, {".5", 2}, {"1e999", 5}, {"tru", 3}, {"nul", 3}, {"True", 4},
    {"{} {}", 5}, {"[1] x", 5}, {"[\"a\"\x00]", 5}, {"{\"a\":[1,2}", 10}, {"[", 1}, {"{\"a\":1", 6},
};

/* 129 nested arrays: json.h's limit is 128 levels, jansson's 2048. */
static void check_nesting(int *rejected, int accepted[2])
{
    char deep[258];
    memset(deep, '[', 129);
    memset(deep + 129, ']', 129);
    check_line("(129 nested arrays)", 1, deep, sizeof deep, rejected, accepted);
}

static void check_json_case(void)
{
    size_t i;
    int rejected = 0, accepted[2] = {0, 0};
    printf("  the 'json' case of tests/finetune/test_tasks.c (jansson taking any top-level value):\n");
    for (i = 0; i < sizeof JSON_CASE / sizeof JSON_CASE[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "json case %zu", i + 1);
        check_line(name, 1, JSON_CASE[i].text, JSON_CASE[i].len, &rejected, accepted);
    }
    check_nesting(&rejected, accepted);
    printf("  json.h rejects %d inputs; jansson accepts %d of them (%d with duplicate keys rejected)\n", rejected,
           accepted[0], accepted[1]);
}

static void check_malformed(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int rejected = 0, accepted[2] = {0, 0};
    if (!d) {
        printf("  (no malformed-input directory %s)\n", dir);
        return;
    }
    printf("  malformed JSON lines of %s/json_*.jsonl (jansson as above):\n", dir);
    while ((e = readdir(d)) != NULL) {
        char path[4096];
        size_t n = 0, start = 0, i;
        int line_no = 1;
        char *text;
        if (strncmp(e->d_name, "json_", 5) != 0) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (!(text = read_all(path, &n))) continue;
        for (i = 0; i <= n; i++) {
            if (i < n && text[i] != '\n') continue;
            if (i > start) check_line(e->d_name, line_no, text + start, i - start, &rejected, accepted);
            line_no++;
            start = i + 1;
        }
        free(text);
    }
    closedir(d);
    printf("  json.h rejects %d lines; jansson accepts %d of them (%d with duplicate keys rejected)\n", rejected,
           accepted[0], accepted[1]);
}

int main(int argc, char **argv)
{
    const char *path = NULL, *malformed = NULL, *text_path = NULL;
    char *json, *text;
    size_t n = 0, text_n = 0;
    int reps = 10, i, rc;
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            char err[256];
            int64_t v;
            if (cli_parse_int("--reps", argv[++i], 1, 1000, &v, err, sizeof err)) {
                fprintf(stderr, "bench_json: %s\n", err);
                return 2;
            }
            reps = (int)v;
        } else if (strcmp(argv[i], "--malformed") == 0 && i + 1 < argc) {
            malformed = argv[++i];
        } else if (strcmp(argv[i], "--text") == 0 && i + 1 < argc) {
            text_path = argv[++i];
        } else if (!path && argv[i][0] != '-') {
            path = argv[i];
        } else {
            fprintf(stderr, "usage: bench_json TOKENIZER_JSON [--reps N] [--malformed DIR] [--text FILE]\n");
            return 2;
        }
    }
    if (!path || !(json = read_all(path, &n))) {
        printf("SKIP: no tokenizer.json (%s); test_llm_tokenizer_hf writes one from GPT-2's vocabulary\n",
               path ? path : "none given");
        return 77;
    }
    text = text_path ? read_all(text_path, &text_n) : bench_default_text(&text_n);
    if (!text) {
        fprintf(stderr, "bench_json: cannot read %s\n", text_path ? text_path : "(memory)");
        return 1;
    }
    printf("%s: %.2f MB\n", path, (double)n / 1e6);
    time_parse("json.h json_parse", parse_grzo, 0, json, n, reps);
    time_parse("jansson json_loadb", parse_jansson, 0, json, n, reps);
    time_parse("jansson (reject duplicate keys)", parse_jansson, 2, json, n, reps);
    rc = bench_tokenizer(json, n, text, text_n, reps);
    check_json_case();
    if (malformed) check_malformed(malformed);
    free(json);
    free(text);
    return rc;
}
