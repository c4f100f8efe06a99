/* test_tok_examples.c - examples/finetune/tok_examples.c, grzo-finetune's examples as token
   ids: the sizes a split reports, which size the run's buffers and the generation budget.

   Usage: test_tok_examples <GGUF file with a tokenizer (tests/llm/corpus/gguf_f32_spm.gguf)>

   For splits made here from texts of known token counts (the test tokenizes each text itself):
     - max_len is the longest candidate and max_total the most tokens of one example's
       candidates together (up to TASKS_MAX_CANDIDATES of them);
     - max_generate is the longest prompt + TASKS_MAX_NEW_TOKENS - 1 whatever the order of the
       examples, in particular when a later prompt is one token shorter than an earlier one
       (a condition two tokens too generous took that shorter prompt's budget: the longest
       prompt's answer was cut two tokens early);
     - a multiple-choice split has no prompt and a generation budget of 0;
     - --max-len cuts the prompt to leave room for the answer, and the budget follows;
     - one example at every max_len from none to past its length, with and without BOS,
       against MeZO's encode_prompt written out here: its tokens (the whole text's, cut on the
       left after BOS), the context's length (the continuation at least its last token, never
       all of the text), the prompt (the context's last tokens, TASKS_MAX_NEW_TOKENS left for the
       answer, half the positions where fewer than 2 would be), or a refusal that names the
       example when nothing is left to score; free_tok_split leaves an empty split;
     - (built with TOK_EXAMPLES_OOM and malloc wrapped, tests/oom_wrap.h) each allocation of a
       split's tokenization failing in turn, the tokenizer's included: "out of memory" and
       -1, never a split that looks whole (an unchecked calloc gave an empty one), nor a leak. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_examples.h"
#include "llm_test.h"
#ifdef TOK_EXAMPLES_OOM
#include "oom_wrap.h"
#endif

#define N_CONTEXTS 20   /* contexts[1..N_CONTEXTS]: "Question:" and 1..N_CONTEXTS characters more */

static const llm_tokenizer *tok;
static char contexts[N_CONTEXTS + 1][16 + N_CONTEXTS];
static int32_t n_context_tokens[N_CONTEXTS + 1];   /* with BOS */

static int32_t count_tokens(const char *text) {
    char err[256];
    int32_t n = 0;
    if (llm_tokenize(tok, text, 1, NULL, 0, &n, err, sizeof err)) {
        fprintf(stderr, "test_tok_examples: tokenizing '%s': %s\n", text, err);
        return -1;
    }
    return n;
}

/* contexts[w]: "Question:" and w more characters; their token counts */
static void make_contexts(void) {
    static const char more[] = " zqxjkvwyfbgpmuhdcltr";
    int w;
    for (w = 1; w <= N_CONTEXTS; w++) {
        snprintf(contexts[w], sizeof contexts[w], "Question:%.*s", w, more);
        n_context_tokens[w] = count_tokens(contexts[w]);
    }
}

/* two context numbers whose contexts are n and n - 1 tokens (n as large as the table has) */
static int one_shorter(int *longer, int *shorter) {
    int a, b;
    for (a = N_CONTEXTS; a >= 1; a--)
        for (b = 1; b <= N_CONTEXTS; b++)
            if (n_context_tokens[b] == n_context_tokens[a] - 1) {
                *longer = a;
                *shorter = b;
                return 1;
            }
    return 0;
}

typedef struct made {
    tasks_example ex[4];
    char text[4][TASKS_MAX_CANDIDATES][16 + N_CONTEXTS + 8 * TASKS_MAX_CANDIDATES];
    qa_answer answer;
    const char *span;
    tasks_split split;
} made;

/* a split of n examples with contexts[which[i]]; generation: one candidate (the answer), else
   n_cand candidates, continuations of 1..n_cand words */
static void make_split(made *m, const int *which, size_t n, int generation, int n_cand) {
    size_t i;
    int k;
    memset(m, 0, sizeof *m);
    m->span = "sun";
    m->answer.spans = &m->span;
    m->answer.n_spans = 1;
    for (i = 0; i < n; i++) {
        tasks_example *e = &m->ex[i];
        e->context = contexts[which[i]];
        e->n_candidates = generation ? 1 : n_cand;
        e->source_line = (long)i + 1;
        if (generation) {
            e->answers = &m->answer;
            e->n_answers = 1;
            e->id = "q";
        }
        for (k = 0; k < e->n_candidates; k++) {
            int j;
            strcpy(m->text[i][k], e->context);
            for (j = 0; j <= k; j++) strcat(m->text[i][k], " tree");
            e->cand[k].context = e->context;
            e->cand[k].text = m->text[i][k];
            e->cand[k].context_len = strlen(e->context);
            e->cand[k].continuation = m->text[i][k] + e->cand[k].context_len;
        }
    }
    m->split.ex = m->ex;
    m->split.n = n;
}

static int tokenized(const made *m, int32_t max_len, tok_split *out) {
    char err[256] = "";
    if (tokenize_split(tok, 1, max_len, &m->split, out, err, sizeof err) != 0) {
        fprintf(stderr, "test_tok_examples: tokenize_split: %s\n", err);
        free_tok_split(out);
        return 0;
    }
    return 1;
}

/* max_len, max_total and max_generate against the examples' own sizes */
static void check_sizes(const tok_split *s, int generation) {
    int32_t max_len = 0, max_total = 0, max_prompt = 0;
    size_t i;
    int k;
    for (i = 0; i < s->n; i++) {
        int32_t total = 0;
        for (k = 0; k < s->ex[i].n_cand; k++) {
            total += s->ex[i].n_tokens[k];
            if (s->ex[i].n_tokens[k] > max_len) max_len = s->ex[i].n_tokens[k];
        }
        if (total > max_total) max_total = total;
        CHECK((s->ex[i].prompt != NULL) == generation);
        if (s->ex[i].n_prompt > max_prompt) max_prompt = s->ex[i].n_prompt;
    }
    CHECK(s->max_len == max_len);
    CHECK(s->max_total == max_total);
    CHECK(s->max_generate == (generation ? max_prompt + TASKS_MAX_NEW_TOKENS - 1 : 0));
}

static void test_generation_budget(void) {
    int longer = 0, shorter = 0, w;
    CHECK(one_shorter(&longer, &shorter));
    if (lt_failures) return;
    {
        /* the longest first and one a token shorter after it, then the reverse, then with a
           prompt two and three tokens shorter in between */
        int orders[4][3];
        int o, n[4] = {2, 2, 3, 3};
        orders[0][0] = longer, orders[0][1] = shorter;
        orders[1][0] = shorter, orders[1][1] = longer;
        orders[2][0] = longer, orders[2][1] = shorter, orders[2][2] = shorter > 1 ? shorter - 1 : 1;
        orders[3][0] = 1, orders[3][1] = longer, orders[3][2] = shorter;
        for (o = 0; o < 4; o++) {
            made m;
            tok_split s;
            make_split(&m, orders[o], (size_t)n[o], 1, 1);
            if (!tokenized(&m, 0, &s)) { CHECK(0); continue; }
            CHECK(s.ex[0].n_prompt == n_context_tokens[orders[o][0]]);   /* no --max-len: whole */
            CHECK(s.max_generate == n_context_tokens[longer] + TASKS_MAX_NEW_TOKENS - 1);
            check_sizes(&s, 1);
            free_tok_split(&s);
        }
    }
    /* every pair of context lengths, both orders */
    for (w = 1; w <= N_CONTEXTS; w++) {
        int v;
        for (v = 1; v <= N_CONTEXTS; v++) {
            int which[2];
            made m;
            tok_split s;
            which[0] = w, which[1] = v;
            make_split(&m, which, 2, 1, 1);
            if (!tokenized(&m, 0, &s)) { CHECK(0); continue; }
            check_sizes(&s, 1);
            free_tok_split(&s);
        }
    }
}

static void test_prompt_cut(void) {
    /* --max-len leaves TASKS_MAX_NEW_TOKENS positions for the answer; the budget is the cut
       prompt's, never past --max-len - 1 */
    int which[2] = {N_CONTEXTS, 1};
    int32_t cut = n_context_tokens[N_CONTEXTS] - 2;
    made m;
    tok_split s;
    make_split(&m, which, 2, 1, 1);
    if (!tokenized(&m, cut + TASKS_MAX_NEW_TOKENS, &s)) { CHECK(0); return; }
    CHECK(s.ex[0].n_prompt == cut);
    CHECK(s.ex[1].n_prompt == n_context_tokens[1]);
    CHECK(s.max_generate == cut + TASKS_MAX_NEW_TOKENS - 1);
    check_sizes(&s, 1);
    free_tok_split(&s);
}

/* ---- one example against MeZO's encode_prompt, written out here ------------------------- */

static int32_t *tokens_of(const char *text, int bos, int32_t *n) {
    char err[256];
    int32_t cap = (int32_t)strlen(text) + 2, *ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)cap);
    if (!ids || llm_tokenize(tok, text, bos, ids, cap, n, err, sizeof err)) {
        fprintf(stderr, "test_tok_examples: tokenizing '%s': %s\n", text, ids ? err : "out of memory");
        free(ids);
        return NULL;
    }
    return ids;
}

/* want[0..n) = the first `head` of ids, then its last n - head: a left cut that keeps BOS */
static int same_cut(const int32_t *got, int32_t n_got, const int32_t *ids, int32_t n_ids, int32_t n, int32_t head) {
    int32_t j;
    if (n_got != n) return 0;
    for (j = 0; j < n; j++)
        if (got[j] != (j < head ? ids[j] : ids[n_ids - (n - j)])) return 0;
    return 1;
}

/* context + continuation as one example (a generation example when `generation`), at this
   max_len (0: none) and BOS: the tokens, the context's length and the prompt are what the
   whole text's tokens say, or the example is refused with its id or line when nothing is
   left to score */
static void check_example(const char *context, const char *continuation, int bos, int32_t max_len, int generation) {
    char text[256], err[256] = "";
    int32_t n_full = 0, n_ctx = 0, *full, *ctx, n, opt, head = bos ? 1 : 0, cap;
    tasks_example e;
    tasks_split split;
    tok_split s;
    qa_answer answer;
    const char *span = "x";
    int rc;
    snprintf(text, sizeof text, "%s%s", context, continuation);
    full = tokens_of(text, bos, &n_full);
    ctx = tokens_of(context, bos, &n_ctx);
    if (!full || !ctx) {
        CHECK(0);
        free(full), free(ctx);
        return;
    }
    memset(&e, 0, sizeof e);
    e.context = context;
    e.n_candidates = 1;
    e.cand[0].context = context;
    e.cand[0].text = text;
    e.cand[0].context_len = strlen(context);
    e.cand[0].continuation = text + e.cand[0].context_len;
    e.source_line = 7;
    if (generation) {
        answer.spans = &span;
        answer.n_spans = 1;
        e.answers = &answer;
        e.n_answers = 1;
        e.id = "q-7";
    }
    split.ex = &e;
    split.n = 1;
    /* the reference: the continuation is the text's last n_full - n_ctx tokens, at least one
       and never all of them; a text past max_len loses tokens after BOS */
    opt = n_full - n_ctx;
    if (opt < 1) opt = 1;
    if (opt > n_full - 1) opt = n_full - 1;
    n = max_len > 0 && n_full > max_len ? max_len : n_full;
    if (opt > n - 1) opt = n - 1;
    rc = tokenize_split(tok, bos, max_len, &split, &s, err, sizeof err);
    if (opt < 1) {
        CHECKF(rc == -1 && strstr(err, "has nothing to score") && strstr(err, generation ? "\"q-7\"" : "(line 7)"),
               "'%s' + '%s', bos %d, max_len %d: want refused, got %d '%s'\n", context, continuation, bos, (int)max_len, rc, err);
    } else if (rc != 0) {
        CHECKF(0, "'%s' + '%s', bos %d, max_len %d: %s\n", context, continuation, bos, (int)max_len, err);
    } else {
        const tok_example *x = &s.ex[0];
        CHECK(s.n == 1 && s.src == &split && x->n_cand == 1 && x->gold == 0);
        CHECKF(same_cut(x->tokens[0], x->n_tokens[0], full, n_full, n, head) && x->n_context[0] == n - opt,
               "'%s' + '%s', bos %d, max_len %d: %d tokens (want %d), context %d (want %d)\n", context, continuation, bos,
               (int)max_len, (int)x->n_tokens[0], (int)n, (int)x->n_context[0], (int)(n - opt));
        /* the prompt: the context's last tokens after BOS, leaving TASKS_MAX_NEW_TOKENS for the
           answer (half the positions where max_len leaves fewer than 2) */
        cap = max_len > 0 ? max_len - TASKS_MAX_NEW_TOKENS : n_ctx;
        if (max_len > 0 && cap < 2) cap = max_len / 2 > 1 ? max_len / 2 : 1;
        if (cap > n_ctx) cap = n_ctx;
        if (generation)
            CHECKF(x->prompt && same_cut(x->prompt, x->n_prompt, ctx, n_ctx, cap, head) &&
                   s.max_generate == cap + TASKS_MAX_NEW_TOKENS - 1,
                   "'%s', bos %d, max_len %d: prompt of %d tokens (want %d)\n", context, bos, (int)max_len, (int)x->n_prompt, (int)cap);
        else
            CHECK(x->prompt == NULL && x->n_prompt == 0 && s.max_generate == 0);
        CHECK(s.max_len == n && s.max_total == n);
    }
    free_tok_split(&s);
    CHECK(s.ex == NULL && s.n == 0 && s.max_len == 0 && s.max_generate == 0);
    free(full);
    free(ctx);
}

static void test_examples(void) {
    /* a continuation of tokens of its own, one that adds nothing (scored: its last token), a
       text that is all continuation (with no BOS nothing is context), a long context, a text of
       one token and one of none (refused without BOS: nothing to score) */
    static const char *const pairs[][2] = {
        {"Question:zqx", "jkv"}, {"Question:zqx", ""}, {"", "zqxj"}, {"Question:zqxjkvwyfbgpmuhd", "cltr"}, {"z", "q"},
        {"", "z"}, {"", ""}};
    size_t p;
    int bos, generation;
    for (p = 0; p < sizeof pairs / sizeof pairs[0]; p++)
        for (bos = 0; bos <= 1; bos++)
            for (generation = 0; generation <= 1; generation++) {
                int32_t max_len;
                for (max_len = 0; max_len <= 40; max_len++) check_example(pairs[p][0], pairs[p][1], bos, max_len, generation);
                for (max_len = TASKS_MAX_NEW_TOKENS; max_len <= TASKS_MAX_NEW_TOKENS + 30; max_len++)
                    check_example(pairs[p][0], pairs[p][1], bos, max_len, generation);
            }
}

static void test_multiple_choice(void) {
    int which[3] = {3, N_CONTEXTS, 5};
    int n_cand;
    for (n_cand = 1; n_cand <= TASKS_MAX_CANDIDATES; n_cand++) {
        made m;
        tok_split s;
        size_t i;
        make_split(&m, which, 3, 0, n_cand);
        if (!tokenized(&m, 0, &s)) { CHECK(0); continue; }
        check_sizes(&s, 0);
        CHECK(s.n == 3);
        for (i = 0; i < 3; i++) {
            int k;
            CHECK(s.ex[i].n_cand == n_cand);
            for (k = 0; k < n_cand; k++) CHECK(s.ex[i].n_tokens[k] == count_tokens(m.text[i][k]));
        }
        free_tok_split(&s);
    }
}

#ifdef TOK_EXAMPLES_OOM
static uint64_t fingerprint(const tok_split *s) {
    uint64_t h = fnv(FNV0, &s->n, sizeof s->n);
    size_t i;
    int k;
    h = fnv(h, &s->max_len, sizeof s->max_len);
    h = fnv(h, &s->max_total, sizeof s->max_total);
    h = fnv(h, &s->max_generate, sizeof s->max_generate);
    for (i = 0; i < s->n; i++) {
        const tok_example *x = &s->ex[i];
        for (k = 0; k < x->n_cand; k++) {
            h = fnv(h, x->tokens[k], sizeof(int32_t) * (size_t)x->n_tokens[k]);
            h = fnv(h, &x->n_context[k], sizeof x->n_context[k]);
        }
        if (x->prompt) h = fnv(h, x->prompt, sizeof(int32_t) * (size_t)x->n_prompt);
    }
    return h;
}

static void test_out_of_memory(void) {
    int which[3] = {3, N_CONTEXTS, 5}, generation;
    for (generation = 0; generation <= 1; generation++) {
        made m;
        tok_split s;
        char err[256];
        uint64_t clean;
        long at;
        make_split(&m, which, 3, generation, generation ? 1 : 3);
        if (!tokenized(&m, 12, &s)) { CHECK(0); continue; }
        clean = fingerprint(&s);
        free_tok_split(&s);
        for (at = 1;; at++) {
            int rc;
            err[0] = 0;
            oom_arm(at, 1);
            rc = tokenize_split(tok, 1, 12, &m.split, &s, err, sizeof err);
            oom_disarm();
            if (!oom.failed) {   /* the run needed fewer than `at` allocations */
                CHECK(rc == 0 && fingerprint(&s) == clean);
                free_tok_split(&s);
                CHECK(at > 3 * (generation ? 2 : 6));   /* two tokenizations a candidate at least */
                break;
            }
            CHECKF(rc == -1 && strstr(err, "out of memory"), "allocation %ld failing: %d '%s'\n", at, rc, err);
            free_tok_split(&s);
        }
    }
}
#endif

int main(int argc, char **argv) {
    llm_tokenizer *t = NULL;
    char err[256];
    if (argc != 2) {
        fprintf(stderr, "usage: test_tok_examples TOKENIZER.gguf\n");
        return 2;
    }
    if (llm_tokenizer_load_gguf(argv[1], &t, err, sizeof err) != 0) {
        fprintf(stderr, "test_tok_examples: %s: %s\n", argv[1], err);
        return 1;
    }
    tok = t;
    make_contexts();
    test_generation_budget();
    test_prompt_cut();
    test_multiple_choice();
    test_examples();
#ifdef TOK_EXAMPLES_OOM
    test_out_of_memory();
#endif
    llm_tokenizer_free(t);
    return lt_finish("test_tok_examples");
}
