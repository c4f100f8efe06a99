/* bench_pretok_pcre2.c - the hand-coded pre-tokenizer regexes (tokenizer.c) against PCRE2.

   usage: bench_pretok_pcre2 GPT2_DIR LLAMA3_DIR
          (folders with a tokenizer.json: test_llm_tokenizer_hf writes gpt2/ and llama3/
          under build/tests/llm/hf_tokenizer_cases)

   grzo recognises GPT-2's and Llama-3's pre-tokenizer regexes and runs hand-coded
   matchers over its Unicode tables instead of a regex engine. This prints, on the same
   text (default: bench_text.h's paragraph repeated to 1 MiB), the time PCRE2 10.x
   (UTF + UCP, JIT when available) takes only to split the text with each regex, and the
   time grzo takes to split it (a tokenizer.json with the same pre-tokenizer and a
   one-token vocabulary: every byte is looked up and dropped, nothing merges), and to
   tokenize it entirely (split + BPE merges) with each given tokenizer.json. Built only
   where libpcre2-8 is found. */
#define PCRE2_CODE_UNIT_WIDTH 8

#include <pcre2.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_text.h"
#include "llm.h"

static const char GPT2_RE[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char LLAMA3_RE[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                                "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Best of 3 seconds to split text with the regex; *pieces gets the match count. */
static double pcre2_split_s(const char *re, const char *text, size_t n, long *pieces, int *jit)
{
    int errcode, r;
    PCRE2_SIZE erroff;
    pcre2_code *code = pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &errcode, &erroff, NULL);
    pcre2_match_data *md;
    double best = 1e30;
    if (!code) {
        fprintf(stderr, "bench_pretok_pcre2: cannot compile %s\n", re);
        exit(1);
    }
    *jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
    md = pcre2_match_data_create_from_pattern(code, NULL);
    for (r = 0; r < 3; r++) {
        double t0 = now_s();
        PCRE2_SIZE pos = 0;
        *pieces = 0;
        /* the subject's UTF-8 is checked once: PCRE2 checks all of it on every call otherwise */
        while (pos < n && pcre2_match(code, (PCRE2_SPTR)text, n, pos, pos ? PCRE2_NO_UTF_CHECK : 0, md, NULL) > 0) {
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            pos = ov[1] > ov[0] ? ov[1] : ov[0] + 1;
            (*pieces)++;
        }
        if (now_s() - t0 < best) best = now_s() - t0;
    }
    pcre2_match_data_free(md);
    pcre2_code_free(code);
    return best;
}

/* The pre-tokenizers as tokenizer.json spells them (JSON-escaped regexes). */
static const char GPT2_PRE[] = "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}";
static const char LLAMA3_PRE[] =
    "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":"
    "\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+"
    "[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},\"behavior\":\"Isolated\",\"invert\":false},"
    "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}]}";

/* A tokenizer whose whole work is the pre-tokenizer's split: a one-token vocabulary. */
static llm_tokenizer *split_only(const char *pre)
{
    char json[1024], err[512];
    llm_tokenizer *t = NULL;
    snprintf(json, sizeof json, "{\"pre_tokenizer\":%s,\"model\":{\"type\":\"BPE\",\"vocab\":{\"\\u0100\":0},\"merges\":[]}}",
             pre);
    if (llm_tokenizer_load_hf_memory(json, strlen(json), NULL, 0, &t, err, sizeof err)) {
        fprintf(stderr, "bench_pretok_pcre2: %s\n", err);
        exit(1);
    }
    return t;
}

static llm_tokenizer *from_dir(const char *dir)
{
    llm_tokenizer *t = NULL;
    char err[512];
    if (llm_tokenizer_load_hf(dir, &t, err, sizeof err)) {
        fprintf(stderr, "bench_pretok_pcre2: %s\n", err);
        exit(1);
    }
    return t;
}

/* Best of 3 seconds for t to tokenize text (t is freed); *tokens gets the count. */
static double grzo_tokenize_s(llm_tokenizer *t, const char *text, int32_t *tokens)
{
    char err[512];
    int32_t *ids;
    double best = 1e30;
    int r;
    llm_tokenize(t, text, 0, NULL, 0, tokens, err, sizeof err);
    ids = (int32_t *)malloc(((size_t)*tokens + 1) * sizeof *ids);
    for (r = 0; r < 3 && ids; r++) {
        double t0 = now_s();
        llm_tokenize(t, text, 0, ids, *tokens, tokens, err, sizeof err);
        if (now_s() - t0 < best) best = now_s() - t0;
    }
    free(ids);
    llm_tokenizer_free(t);
    return best;
}

int main(int argc, char **argv)
{
    const char *names[2] = {"GPT-2", "Llama-3"}, *res[2] = {GPT2_RE, LLAMA3_RE}, *pres[2] = {GPT2_PRE, LLAMA3_PRE};
    char *text;
    size_t n = 0;
    int k;
    if (argc != 3) {
        fprintf(stderr, "usage: bench_pretok_pcre2 GPT2_DIR LLAMA3_DIR\n");
        return 2;
    }
    if (!(text = bench_default_text(&n))) return 1;
    printf("text: %.2f MB (bench_text.h)\n", (double)n / 1e6);
    for (k = 0; k < 2; k++) {
        long pieces;
        int jit;
        int32_t tokens, none;
        double split = pcre2_split_s(res[k], text, n, &pieces, &jit);
        double own = grzo_tokenize_s(split_only(pres[k]), text, &none);
        double whole = grzo_tokenize_s(from_dir(argv[1 + k]), text, &tokens);
        printf("  %-8s split: PCRE2 (%s) %6.1f ms (%ld pieces), grzo %6.1f ms | grzo whole tokenization %6.1f ms "
               "(%d tokens)\n", names[k], jit ? "JIT" : "no JIT", 1e3 * split, pieces, 1e3 * own, 1e3 * whole, (int)tokens);
    }
    free(text);
    return 0;
}
