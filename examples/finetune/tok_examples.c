/* tok_examples.c - grzo-finetune's examples as token ids (tok_examples.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_examples.h"

static int tokenize_alloc(const llm_tokenizer *t, const char *text, int bos, int32_t **ids, int32_t *n, char *err, size_t errlen) {
    int32_t need = 0;
    if (llm_tokenize(t, text, bos, NULL, 0, &need, err, errlen)) return -1;
    *ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)(need > 0 ? need : 1));
    if (!*ids) { snprintf(err, errlen, "out of memory"); return -1; }
    if (llm_tokenize(t, text, bos, *ids, need, n, err, errlen)) return -1;
    return 0;
}

/* MeZO's encode_prompt for generation: the prompt keeps its last max_len - 50 tokens (and BOS),
   leaving room for the answer; a model with at most 51 positions keeps half of them. */
static int32_t prompt_fit(int32_t *ids, int32_t n, int32_t keep_head, int32_t max_len) {
    int32_t cap = max_len > 0 ? max_len - TASKS_MAX_NEW_TOKENS : n;
    if (max_len > 0 && cap < 2) cap = max_len / 2 > 1 ? max_len / 2 : 1;
    if (n <= cap) return n;
    memmove(ids + keep_head, ids + keep_head + (n - cap), sizeof(int32_t) * (size_t)(cap - keep_head));
    return cap;
}

/* MeZO's encode_prompt: the continuation's tokens are the last n(text) - n(context) tokens of
   the tokenized text (never tokenized on their own). Sequences longer than max_len lose
   tokens from the left, after BOS. */
static int tokenize_example(const llm_tokenizer *t, int bos, int32_t max_len, const tasks_example *src, tok_example *dst,
                            char *err, size_t errlen) {
    int k;
    memset(dst, 0, sizeof *dst);
    dst->n_cand = src->n_candidates;
    dst->gold = src->gold;
    for (k = 0; k < src->n_candidates; k++) {
        int32_t *ctx_ids = NULL, n_ctx = 0, n_text = 0, opt, keep_head = bos ? 1 : 0;
        if (tokenize_alloc(t, src->cand[k].text, bos, &dst->tokens[k], &n_text, err, errlen)) return -1;
        if (tokenize_alloc(t, src->cand[k].context, bos, &ctx_ids, &n_ctx, err, errlen)) { free(ctx_ids); return -1; }
        if (src->n_answers > 0 && k == 0) {   /* a generation task: decoding starts from the context */
            dst->prompt = ctx_ids;
            dst->n_prompt = prompt_fit(ctx_ids, n_ctx, keep_head, max_len);
            ctx_ids = NULL;
        }
        free(ctx_ids);
        opt = n_text - n_ctx;
        if (opt < 1) opt = 1;             /* a continuation merged into the context: score its last token */
        if (opt >= n_text) opt = n_text - 1;
        if (max_len > 0 && n_text > max_len) {
            int32_t drop = n_text - max_len;
            memmove(dst->tokens[k] + keep_head, dst->tokens[k] + keep_head + drop, sizeof(int32_t) * (size_t)(n_text - keep_head - drop));
            n_text = max_len;
            if (opt > n_text - 1) opt = n_text - 1;
        }
        if (opt < 1) {
            if (src->id) snprintf(err, errlen, "example \"%.100s\" has nothing to score", src->id);
            else snprintf(err, errlen, "example (line %ld) has nothing to score", src->source_line);
            return -1;
        }
        dst->n_tokens[k] = n_text;
        dst->n_context[k] = n_text - opt;
    }
    return 0;
}

void free_tok_split(tok_split *s) {
    size_t i;
    int k;
    for (i = 0; i < s->n; i++) {
        for (k = 0; k < s->ex[i].n_cand; k++) free(s->ex[i].tokens[k]);
        free(s->ex[i].prompt);
    }
    free(s->ex);
    memset(s, 0, sizeof *s);
}

int tokenize_split(const llm_tokenizer *t, int bos, int32_t max_len, const tasks_split *src, tok_split *dst,
                   char *err, size_t errlen) {
    size_t i;
    memset(dst, 0, sizeof *dst);
    dst->ex = (tok_example *)calloc(src->n ? src->n : 1, sizeof *dst->ex);
    dst->src = src;
    if (!dst->ex) { snprintf(err, errlen, "out of memory"); return -1; }
    for (i = 0; i < src->n; i++) {
        int32_t total = 0;
        int k;
        dst->n = i + 1;
        if (tokenize_example(t, bos, max_len, &src->ex[i], &dst->ex[i], err, errlen)) return -1;
        for (k = 0; k < dst->ex[i].n_cand; k++) {
            total += dst->ex[i].n_tokens[k];
            if (dst->ex[i].n_tokens[k] > dst->max_len) dst->max_len = dst->ex[i].n_tokens[k];
        }
        if (total > dst->max_total) dst->max_total = total;
        if (dst->ex[i].prompt && dst->ex[i].n_prompt + TASKS_MAX_NEW_TOKENS - 1 > dst->max_generate)
            dst->max_generate = dst->ex[i].n_prompt + TASKS_MAX_NEW_TOKENS - 1;
    }
    return 0;
}
