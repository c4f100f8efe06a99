/* test_llm_model.c - the model forward over grzo, on a random tiny Llama built in memory.

   Checks that need no model file and no Python:
     - batching: a sequence's logits do not depend on the other sequences of the batch
       (plain, and inside a GRZO pass: the "+" copy of example 0 in a batch of B equals
       the batch-of-one result; another example's content never leaks in);
     - padding: left padding and different lengths do not change logits, up to a state's
       max_seq_len of real tokens (they keep positions 0..n-1);
     - perturbation: with a small sigma the "+" and "-" copies move the logits by opposite
       first-order terms, (plus - plain) = -(minus - plain) up to O(sigma) relative error,
       for GRZO and MeZO; FZOO's clean pass equals the plain forward exactly; a pass that
       is abandoned leaves the plain forward bitwise unchanged; the reference backend
       (grzo's literal SPEC) gives the CPU backend's perturbed logits;
     - scoring: llm_sequence_logprob equals the log-softmax of llm_forward's logits (one
       scored token too);
     - sampling: llm_generate draws the token model.h's uniform picks from llm_forward's logits;
     - a full grzo_step through the model runs and changes the parameters;
     - bad batches, configs, weights, capacities and arguments of every entry point are
       refused with GRZO_ERR_INVALID_ARG and a message saying what is wrong, nothing
       written; the smallest model (every size 1) runs at full capacity and generates;
     - the profile's forward time lies within the wall time around the forward.
   Exit 0 pass, 1 fail. */
#define _POSIX_C_SOURCE 200809L   /* clock_gettime */
#include <time.h>

#include "llm_test_util.h"

#define N_EX 3
#define MAX_TOK 16

typedef struct example {
    int32_t tokens[MAX_TOK];
    int32_t n_tokens;
    int32_t out_pos[4];
    int32_t n_out;
} example;

typedef struct fixture {
    tu_model tm;
    grzo_backend be;
    grzo_ctx *ctx;
    llm_model m;
    llm_state *st;
} fixture;

/* A fixture's backend and context, nothing registered yet (the model and the state zero). */
static void fx_begin(fixture *f, grzo_estimator est, float sigma, int ref_backend) {
    grzo_desc d;
    grzo_status bs;
    memset(f, 0, sizeof *f);
    bs = ref_backend ? grzo_backend_ref_create(&f->be) : grzo_backend_cpu_create(&(grzo_cpu_desc){0}, &f->be);
    if (bs != GRZO_OK) { fprintf(stderr, "backend\n"); exit(1); }
    memset(&d, 0, sizeof d);
    d.backend = &f->be;
    d.estimator = est;
    d.sigma = sigma;
    d.lr = 1e-4f;
    d.seed = 7;
    d.fzoo_probes = 2;
    if (grzo_create(&d, &f->ctx) != GRZO_OK) { fprintf(stderr, "grzo_create\n"); exit(1); }
}

static void fx_open_backend(fixture *f, int tied, grzo_estimator est, float sigma, int ref_backend) {
    llm_state_desc sd;
    llm_config cfg = tu_tiny_config(tied);
    fx_begin(f, est, sigma, ref_backend);
    tu_model_create(&f->tm, &cfg, 1234 + (uint64_t)tied);
    TU_OK(&f->m, llm_model_register(f->ctx, &f->m, &f->tm.cfg, &f->tm.w));
    memset(&sd, 0, sizeof sd);
    sd.max_rows = 256;
    sd.max_seqs = 16;
    sd.max_outputs = 64;
    sd.max_segments = 16;
    TU_OK(&f->m, llm_state_create(f->ctx, &f->m, &sd, &f->st));
}

static void fx_open(fixture *f, int tied, grzo_estimator est, float sigma) { fx_open_backend(f, tied, est, sigma, 0); }

static void fx_close(fixture *f) {
    llm_state_free(f->st);
    llm_model_free(&f->m);
    grzo_destroy(f->ctx);
    grzo_backend_destroy(&f->be);
    tu_model_free(&f->tm);
}

static void make_examples(example *ex, int32_t vocab, uint64_t seed) {
    static const int32_t lengths[N_EX] = {7, 4, 11};
    uint64_t rng = seed;
    int e, t;
    for (e = 0; e < N_EX; e++) {
        ex[e].n_tokens = lengths[e];
        for (t = 0; t < lengths[e]; t++) ex[e].tokens[t] = tu_token(&rng, vocab);
        ex[e].n_out = 2;                        /* the last two positions, and the first for e = 2 */
        ex[e].out_pos[0] = lengths[e] - 2;
        ex[e].out_pos[1] = lengths[e] - 1;
        if (e == 2) { ex[e].out_pos[2] = 0; ex[e].n_out = 3; }
    }
}

/* Forward sequences: sequence i reads example which[i] in segment seg[i] (n_segments 0: plain). */
static grzo_status forward_examples(fixture *f, const example *ex, const int *which, const int64_t *seg, int n,
                                    int64_t n_segments, float *logits) {
    llm_seq seqs[16];
    llm_batch b;
    int i;
    for (i = 0; i < n; i++) {
        const example *e = &ex[which[i]];
        memset(&seqs[i], 0, sizeof seqs[i]);
        seqs[i].tokens = e->tokens;
        seqs[i].n_tokens = e->n_tokens;
        seqs[i].out_pos = e->out_pos;
        seqs[i].n_out = e->n_out;
        seqs[i].segment = seg ? seg[i] : 0;
    }
    b.seqs = seqs;
    b.n_seqs = n;
    b.n_segments = n_segments;
    return llm_forward(f->ctx, &f->m, f->st, &b, logits);
}

static int64_t outputs_before(const example *ex, const int *which, int i) {
    int64_t n = 0;
    int k;
    for (k = 0; k < i; k++) n += ex[which[k]].n_out;
    return n;
}

/* The plain logits of each example alone. */
static void plain_alone(fixture *f, const example *ex, float *out[N_EX]) {
    int e;
    for (e = 0; e < N_EX; e++) TU_OK(&f->m, forward_examples(f, ex, &e, NULL, 1, 0, out[e]));
}

/* One pass of a GRZO-family step over B examples: segment c reads example pass.example[c]. */
static void grzo_pass_logits(fixture *f, const example *ex, int B, float *logits) {
    grzo_step_info si;
    grzo_pass_info pi;
    int which[16];
    int64_t seg[16], c;
    TU_OK(&f->m, grzo_step_begin(f->ctx, B, &si));
    TU_OK(&f->m, grzo_pass_begin(f->ctx, &pi));
    for (c = 0; c < pi.n_segments; c++) {
        which[c] = (int)pi.example[c];
        seg[c] = c;
    }
    TU_OK(&f->m, forward_examples(f, ex, which, seg, (int)pi.n_segments, pi.n_segments, logits));
    TU_OK(&f->m, grzo_step_abort(f->ctx));
}

static void test_batch_equals_alone(int tied) {
    fixture f;
    example ex[N_EX];
    float *alone[N_EX], batch[16 * 64];
    int which[N_EX] = {2, 0, 1}, i;
    double worst = 0.0;
    fx_open(&f, tied, GRZO_ESTIMATOR_GRZO, 1e-3f);
    make_examples(ex, f.tm.cfg.vocab_size, 11);
    for (i = 0; i < N_EX; i++) alone[i] = (float *)malloc(4 * 64 * sizeof(float));
    plain_alone(&f, ex, alone);
    TU_OK(&f.m, forward_examples(&f, ex, which, NULL, N_EX, 0, batch));
    for (i = 0; i < N_EX; i++) {
        int64_t n = (int64_t)ex[which[i]].n_out * f.tm.cfg.vocab_size;
        double d = tu_max_abs_diff(batch + outputs_before(ex, which, i) * f.tm.cfg.vocab_size, alone[which[i]], n);
        if (d > worst) worst = d;
    }
    printf("batched vs alone (plain, tied=%d): max |diff| = %.3g\n", tied, worst);
    TU_CHECK(worst <= 1e-5, "batching changes logits by %g", worst);
    for (i = 0; i < N_EX; i++) free(alone[i]);
    fx_close(&f);
}

/* Left padding: the padded sequence's logits equal the unpadded ones, plain and in a pass. */
static void test_padding(void) {
    fixture f;
    example ex[N_EX], padded;
    float ref[4 * 64], got[4 * 64], pass_ref[16 * 64], pass_pad[16 * 64];
    llm_seq seqs[2];
    llm_batch b;
    uint64_t rng = 99;
    int t;
    double d;
    fx_open(&f, 1, GRZO_ESTIMATOR_GRZO, 1e-2f);
    make_examples(ex, f.tm.cfg.vocab_size, 12);
    padded = ex[0];
    for (t = 0; t < 3; t++) padded.tokens[t] = tu_token(&rng, f.tm.cfg.vocab_size);
    memcpy(padded.tokens + 3, ex[0].tokens, (size_t)ex[0].n_tokens * sizeof(int32_t));
    padded.n_tokens = ex[0].n_tokens + 3;
    for (t = 0; t < padded.n_out; t++) padded.out_pos[t] = ex[0].out_pos[t] + 3;
    t = 0;
    TU_OK(&f.m, forward_examples(&f, ex, &t, NULL, 1, 0, ref));
    memset(seqs, 0, sizeof seqs);
    seqs[0].tokens = padded.tokens;
    seqs[0].n_tokens = padded.n_tokens;
    seqs[0].n_pad = 3;
    seqs[0].out_pos = padded.out_pos;
    seqs[0].n_out = padded.n_out;
    b.seqs = seqs;
    b.n_seqs = 1;
    b.n_segments = 0;
    TU_OK(&f.m, llm_forward(f.ctx, &f.m, f.st, &b, got));
    d = tu_max_abs_diff(ref, got, (int64_t)ex[0].n_out * f.tm.cfg.vocab_size);
    printf("left padding 3 (plain): max |diff| = %.3g\n", d);
    TU_CHECK(d <= 1e-5, "left padding changes logits by %g", d);

    /* inside a GRZO pass (B = 1: segment 0 "+", segment 1 "-"), padded vs unpadded */
    grzo_pass_logits(&f, ex, 1, pass_ref);
    {
        grzo_step_info si;
        grzo_pass_info pi;
        TU_OK(&f.m, grzo_step_begin(f.ctx, 1, &si));
        TU_OK(&f.m, grzo_pass_begin(f.ctx, &pi));
        seqs[1] = seqs[0];
        seqs[0].segment = 0;
        seqs[1].segment = 1;
        b.n_seqs = 2;
        b.n_segments = pi.n_segments;
        TU_OK(&f.m, llm_forward(f.ctx, &f.m, f.st, &b, pass_pad));
        TU_OK(&f.m, grzo_step_abort(f.ctx));
    }
    d = tu_max_abs_diff(pass_ref, pass_pad, 2 * (int64_t)ex[0].n_out * f.tm.cfg.vocab_size);
    printf("left padding 3 (GRZO pass): max |diff| = %.3g\n", d);
    TU_CHECK(d <= 1e-5, "left padding changes perturbed logits by %g", d);

    /* 8 tokens after 7 pads in a state of max_seq_len 8: the real tokens take positions 0..7,
       the last row of the RoPE table, whatever the padding */
    {
        llm_state_desc sd;
        llm_state *st8;
        int32_t toks[15], pos_pad[2] = {7, 14}, pos_plain[2] = {0, 7};
        memset(&sd, 0, sizeof sd);
        sd.max_rows = 32;
        sd.max_seqs = 1;
        sd.max_outputs = 2;
        sd.max_seq_len = 8;
        TU_OK(&f.m, llm_state_create(f.ctx, &f.m, &sd, &st8));
        for (t = 0; t < 7; t++) toks[t] = tu_token(&rng, f.tm.cfg.vocab_size);
        memcpy(toks + 7, ex[2].tokens, 8 * sizeof(int32_t));
        memset(seqs, 0, sizeof seqs);
        seqs[0].tokens = toks + 7;
        seqs[0].n_tokens = 8;
        seqs[0].out_pos = pos_plain;
        seqs[0].n_out = 2;
        b.n_seqs = 1;
        b.n_segments = 0;
        TU_OK(&f.m, llm_forward(f.ctx, &f.m, st8, &b, ref));
        seqs[0].tokens = toks;
        seqs[0].n_tokens = 15;
        seqs[0].n_pad = 7;
        seqs[0].out_pos = pos_pad;
        TU_OK(&f.m, llm_forward(f.ctx, &f.m, st8, &b, got));
        d = tu_max_abs_diff(ref, got, 2 * (int64_t)f.tm.cfg.vocab_size);
        printf("left padding 7, max_seq_len tokens: max |diff| = %.3g\n", d);
        TU_CHECK(d <= 1e-5, "left padding of a sequence of max_seq_len tokens changes logits by %g", d);
        llm_state_free(st8);
    }
    fx_close(&f);
}

/* ||(plus - plain) + (minus - plain)|| / ||plus - plain|| over all outputs of all examples */
static double antisymmetry_error(const float *plus, const float *minus, const float *plain, int64_t n, double *first_order) {
    double num = 0.0, den = 0.0;
    int64_t i;
    for (i = 0; i < n; i++) {
        double dp = (double)plus[i] - plain[i], dm = (double)minus[i] - plain[i];
        num += (dp + dm) * (dp + dm);
        den += dp * dp;
    }
    *first_order = sqrt(den / (double)n);
    return den > 0.0 ? sqrt(num / den) : INFINITY;
}

/* GRZO: copies c and B + c of one fused pass. Returns the relative error. */
static double grzo_antisymmetry(int tied, float sigma) {
    fixture f;
    example ex[N_EX];
    float *alone[N_EX], pass[32 * 64];
    int64_t V, per_copy, off_plus = 0, off_minus, e;
    int which[6];
    double worst = 0.0, fo_min = INFINITY;
    fx_open(&f, tied, GRZO_ESTIMATOR_GRZO, sigma);
    V = f.tm.cfg.vocab_size;
    make_examples(ex, (int32_t)V, 13);
    for (e = 0; e < N_EX; e++) alone[e] = (float *)malloc(4 * 64 * sizeof(float));
    plain_alone(&f, ex, alone);
    grzo_pass_logits(&f, ex, N_EX, pass);
    for (e = 0; e < 6; e++) which[e] = (int)(e % N_EX);
    off_minus = outputs_before(ex, which, N_EX) * V;
    for (e = 0; e < N_EX; e++) {
        double fo, err;
        per_copy = ex[e].n_out * V;
        err = antisymmetry_error(pass + off_plus, pass + off_minus, alone[e], per_copy, &fo);
        if (err > worst) worst = err;
        if (fo < fo_min) fo_min = fo;
        off_plus += per_copy;
        off_minus += per_copy;
    }
    printf("GRZO tied=%d sigma=%g: rms first-order shift >= %.3g, |(p-0)+(m-0)|/|p-0| = %.3g\n", tied, (double)sigma,
           fo_min, worst);
    TU_CHECK(fo_min > 0.0, "a perturbed copy equals the plain forward (sigma %g)", (double)sigma);
    for (e = 0; e < N_EX; e++) free(alone[e]);
    fx_close(&f);
    return worst;
}

/* MeZO: pass 0 is theta + sigma z, pass 1 theta - sigma z, over the same B examples. */
static double mezo_antisymmetry(float sigma) {
    fixture f;
    example ex[N_EX];
    float plain[16 * 64], pass[2][16 * 64];
    int which[N_EX] = {0, 1, 2}, p;
    int64_t n, seg[N_EX] = {0, 1, 2};
    grzo_step_info si;
    double err, fo;
    fx_open(&f, 1, GRZO_ESTIMATOR_MEZO, sigma);
    make_examples(ex, f.tm.cfg.vocab_size, 14);
    TU_OK(&f.m, forward_examples(&f, ex, which, NULL, N_EX, 0, plain));
    TU_OK(&f.m, grzo_step_begin(f.ctx, N_EX, &si));
    for (p = 0; p < 2; p++) {
        grzo_pass_info pi;
        float losses[N_EX] = {0, 0, 0};
        TU_OK(&f.m, grzo_pass_begin(f.ctx, &pi));
        TU_OK(&f.m, forward_examples(&f, ex, which, seg, N_EX, pi.n_segments, pass[p]));
        TU_OK(&f.m, grzo_pass_end(f.ctx, losses));
    }
    TU_OK(&f.m, grzo_step_abort(f.ctx));
    n = outputs_before(ex, which, N_EX) * f.tm.cfg.vocab_size;
    err = antisymmetry_error(pass[0], pass[1], plain, n, &fo);
    printf("MeZO sigma=%g: rms first-order shift %.3g, |(p-0)+(m-0)|/|p-0| = %.3g\n", (double)sigma, fo, err);
    TU_CHECK(fo > 0.0, "MeZO's perturbed pass equals the plain forward");
    fx_close(&f);
    return err;
}

static void test_antisymmetry(void) {
    int tied;
    for (tied = 0; tied <= 1; tied++) {
        double e_big = grzo_antisymmetry(tied, 1e-3f), e_small = grzo_antisymmetry(tied, 1e-4f);
        /* second order over first order: O(sigma), so ten times smaller sigma, ~ten times smaller error */
        TU_CHECK(e_small < 0.02, "GRZO antisymmetry error %g at sigma 1e-4", e_small);
        TU_CHECK(e_small < 0.3 * e_big, "GRZO antisymmetry error does not shrink with sigma (%g -> %g)", e_big, e_small);
    }
    {
        double e_big = mezo_antisymmetry(1e-3f), e_small = mezo_antisymmetry(1e-4f);
        TU_CHECK(e_small < 0.02, "MeZO antisymmetry error %g at sigma 1e-4", e_small);
        TU_CHECK(e_small < 0.3 * e_big, "MeZO antisymmetry error does not shrink with sigma (%g -> %g)", e_big, e_small);
    }
}

/* FZOO's pass 0 is clean (sign 0): it must equal the plain forward exactly. A forward
   between two passes is refused. An abandoned step leaves the plain forward bitwise
   unchanged. */
static void test_clean_pass_and_abort(void) {
    fixture f;
    example ex[N_EX];
    float plain[16 * 64], clean[16 * 64], probe[16 * 64], again[16 * 64];
    int which[N_EX] = {0, 1, 2};
    int64_t n, seg[N_EX] = {0, 1, 2};
    grzo_step_info si;
    grzo_pass_info pi;
    float losses[N_EX] = {0, 0, 0};
    double d_clean, d_probe, d_again;
    fx_open(&f, 1, GRZO_ESTIMATOR_FZOO, 1e-3f);
    make_examples(ex, f.tm.cfg.vocab_size, 15);
    n = outputs_before(ex, which, N_EX) * f.tm.cfg.vocab_size;
    TU_OK(&f.m, forward_examples(&f, ex, which, NULL, N_EX, 0, plain));
    TU_OK(&f.m, grzo_step_begin(f.ctx, N_EX, &si));
    TU_OK(&f.m, grzo_pass_begin(f.ctx, &pi));
    TU_OK(&f.m, forward_examples(&f, ex, which, seg, N_EX, pi.n_segments, clean));
    TU_OK(&f.m, grzo_pass_end(f.ctx, losses));
    {   /* between two passes a forward would be neither plain nor perturbed: grzo refuses it */
        grzo_status s = forward_examples(&f, ex, which, NULL, N_EX, 0, again);
        TU_CHECK(s == GRZO_ERR_STATE, "a forward between passes gave %s", grzo_status_str(s));
    }
    TU_OK(&f.m, grzo_pass_begin(f.ctx, &pi));
    TU_OK(&f.m, forward_examples(&f, ex, which, seg, N_EX, pi.n_segments, probe));
    TU_OK(&f.m, grzo_step_abort(f.ctx));
    TU_OK(&f.m, forward_examples(&f, ex, which, NULL, N_EX, 0, again));
    d_clean = tu_max_abs_diff(plain, clean, n);
    d_probe = tu_max_abs_diff(plain, probe, n);
    d_again = tu_max_abs_diff(plain, again, n);
    printf("FZOO clean pass vs plain: max |diff| = %.3g (probe pass: %.3g); plain after abort: %.3g\n", d_clean, d_probe,
           d_again);
    TU_CHECK(d_clean == 0.0, "the clean pass differs from the plain forward by %g", d_clean);
    TU_CHECK(d_probe > 0.0, "the probe pass equals the plain forward");
    TU_CHECK(d_again == 0.0, "an abandoned step changed the plain forward by %g", d_again);
    fx_close(&f);
}

/* Example 0's copies in a pass of B = 3 equal those of a pass of B = 1 (same step, same
   example index, so the same perturbation); and example 1's copies do not change when
   example 2's tokens do. */
static void test_batch_of_one(int tied) {
    fixture f;
    example ex[N_EX], ex2[N_EX];
    float big[32 * 64], one[8 * 64], big2[32 * 64];
    int which[6] = {0, 1, 2, 0, 1, 2};
    int64_t V, n0, minus0, minus0_one, n1, off1, minus1;
    double d_plus, d_minus, d_leak;
    uint64_t rng = 5;
    int t;
    fx_open(&f, tied, GRZO_ESTIMATOR_GRZO, 1e-2f);
    V = f.tm.cfg.vocab_size;
    make_examples(ex, (int32_t)V, 16);
    grzo_pass_logits(&f, ex, N_EX, big);
    grzo_pass_logits(&f, ex, 1, one);
    n0 = ex[0].n_out * V;
    minus0 = outputs_before(ex, which, N_EX) * V;
    minus0_one = n0;
    d_plus = tu_max_abs_diff(big, one, n0);
    d_minus = tu_max_abs_diff(big + minus0, one + minus0_one, n0);
    memcpy(ex2, ex, sizeof ex);
    for (t = 0; t < ex2[2].n_tokens; t++) ex2[2].tokens[t] = tu_token(&rng, (int32_t)V);
    grzo_pass_logits(&f, ex2, N_EX, big2);
    n1 = ex[1].n_out * V;
    off1 = n0;
    minus1 = minus0 + n0;
    d_leak = tu_max_abs_diff(big + off1, big2 + off1, n1);
    if (tu_max_abs_diff(big + minus1, big2 + minus1, n1) > d_leak) d_leak = tu_max_abs_diff(big + minus1, big2 + minus1, n1);
    printf("GRZO pass tied=%d: example 0 in B=3 vs B=1: +copy %.3g, -copy %.3g; example 1 when example 2 changes: %.3g\n",
           tied, d_plus, d_minus, d_leak);
    TU_CHECK(d_plus <= 1e-5 && d_minus <= 1e-5, "batch-of-one differs (%g, %g)", d_plus, d_minus);
    TU_CHECK(d_leak <= 1e-5, "another example's tokens leak into example 1 (%g)", d_leak);
    TU_CHECK(tu_max_abs_diff(big + (off1 + n1), big2 + (off1 + n1), ex[2].n_out * V) > 0.0, "example 2's change had no effect");
    fx_close(&f);
}

/* llm_sequence_logprob vs the log-softmax of llm_forward, plain and inside a pass. */
static void test_logprob(void) {
    fixture f;
    example ex[N_EX];
    llm_seq seqs[6];
    llm_batch b;
    int32_t ctxlen[6], pos[6][MAX_TOK];
    double sum[6], mean[6], worst = 0.0;
    float logits[64 * 64];
    int64_t V;
    int pass_mode;
    fx_open(&f, 0, GRZO_ESTIMATOR_GRZO, 1e-2f);
    V = f.tm.cfg.vocab_size;
    make_examples(ex, (int32_t)V, 17);
    for (pass_mode = 0; pass_mode <= 2; pass_mode++) {   /* plain, in a pass, one scored token */
        grzo_step_info si;
        grzo_pass_info pi;
        int n = pass_mode == 1 ? 2 * N_EX : pass_mode == 2 ? 1 : N_EX, i, t;
        int64_t o = 0;
        if (pass_mode == 1) {
            TU_OK(&f.m, grzo_step_begin(f.ctx, N_EX, &si));
            TU_OK(&f.m, grzo_pass_begin(f.ctx, &pi));
        }
        for (i = 0; i < n; i++) {
            const example *e = &ex[i % N_EX];
            memset(&seqs[i], 0, sizeof seqs[i]);
            seqs[i].tokens = e->tokens;
            seqs[i].n_tokens = e->n_tokens;
            seqs[i].segment = i;
            ctxlen[i] = pass_mode == 2 ? e->n_tokens - 1 : e->n_tokens > 4 ? e->n_tokens - 3 : 1;
        }
        b.seqs = seqs;
        b.n_seqs = n;
        b.n_segments = pass_mode == 1 ? pi.n_segments : 0;
        TU_OK(&f.m, llm_sequence_logprob(f.ctx, &f.m, f.st, &b, ctxlen, sum, mean));
        /* the same positions through llm_forward */
        for (i = 0; i < n; i++) {
            seqs[i].n_out = seqs[i].n_tokens - ctxlen[i];
            for (t = 0; t < seqs[i].n_out; t++) pos[i][t] = ctxlen[i] - 1 + t;
            seqs[i].out_pos = pos[i];
        }
        TU_OK(&f.m, llm_forward(f.ctx, &f.m, f.st, &b, logits));
        if (pass_mode == 1) TU_OK(&f.m, grzo_step_abort(f.ctx));
        for (i = 0; i < n; i++) {
            double s = 0.0;
            for (t = 0; t < seqs[i].n_out; t++, o++)
                s += llm_log_softmax_at(logits + o * V, (int32_t)V, seqs[i].tokens[pos[i][t] + 1]);
            if (fabs(s - sum[i]) > worst) worst = fabs(s - sum[i]);
            if (fabs(s / seqs[i].n_out - mean[i]) > worst) worst = fabs(s / seqs[i].n_out - mean[i]);
            TU_CHECK(sum[i] < 0.0 && isfinite(sum[i]), "log-likelihood %g is not a finite negative number", sum[i]);
        }
    }
    printf("llm_sequence_logprob vs log-softmax of llm_forward: max |diff| = %.3g\n", worst);
    TU_CHECK(worst == 0.0, "llm_sequence_logprob disagrees with llm_forward by %g", worst);
    TU_CHECK(fabs(llm_log_softmax_at((const float[]){0.0f, 0.0f}, 2, 1) - log(0.5)) < 1e-15, "log-softmax of a uniform pair");
    TU_CHECK(fabs(llm_log_softmax_at((const float[]){0.0f, 0.0f, INFINITY}, 2, 0) - log(0.5)) < 1e-15,
             "log-softmax of n = 2 logits read the third");
    fx_close(&f);
}

/* Sampling (model.h): the token after a prompt of n tokens is drawn from softmax(logits / T) of
   position n - 1 with u = grzo_uniform_at(seed, n - 1, GRZO_USER_BLOCK, 0, 0), the first token
   whose cumulative probability passes u. Computed here in double from llm_forward's logits;
   a draw within 1e-4 of a boundary is not judged (the cached forward may round otherwise). */
static void test_sampling(void) {
    fixture f;
    example ex[N_EX];
    llm_generate_desc gd;
    int32_t toks[MAX_TOK + 2], n_total = 0, V;
    float logits[2 * 64];
    uint64_t seed;
    int judged = 0, t;
    fx_open(&f, 0, GRZO_ESTIMATOR_GRZO, 1e-2f);
    V = f.tm.cfg.vocab_size;
    make_examples(ex, V, 29);
    ex[0].n_tokens = 4;
    ex[0].out_pos[0] = 3;
    ex[0].n_out = 1;
    t = 0;
    TU_OK(&f.m, forward_examples(&f, ex, &t, NULL, 1, 0, logits));
    memset(&gd, 0, sizeof gd);
    gd.steps = 4;
    gd.temperature = 0.7f;
    gd.stop[0] = gd.stop[1] = -1;
    for (seed = 1; seed <= 32; seed++) {
        double u = grzo_uniform_at(seed, 3, GRZO_USER_BLOCK, 0, 0), mx = -INFINITY, sum = 0.0, acc = 0.0, margin = 1.0;
        int32_t want = V - 1, i;
        for (i = 0; i < V; i++)
            if (logits[i] > mx) mx = logits[i];
        for (i = 0; i < V; i++) sum += exp(((double)logits[i] - mx) / gd.temperature);
        for (i = 0; i < V; i++) {
            acc += exp(((double)logits[i] - mx) / gd.temperature) / sum;
            if (fabs(u - acc) < margin) margin = fabs(u - acc);
            if (u < acc) { want = i; break; }
        }
        gd.seed = seed;
        memcpy(toks, ex[0].tokens, 4 * sizeof(int32_t));
        TU_OK(&f.m, llm_generate(f.ctx, &f.m, f.st, toks, 4, &gd, &n_total));
        if (margin < 1e-4) continue;
        judged++;
        TU_CHECK(n_total == 5 && toks[4] == want, "seed %llu: sampled %d, the draw %.9f picks %d", (unsigned long long)seed,
                 toks[4], u, want);
    }
    printf("sampling: %d of 32 draws judged\n", judged);
    TU_CHECK(judged >= 24, "only %d of 32 draws far enough from a boundary", judged);
    fx_close(&f);
}

/* A whole step through grzo_step: the loss is the mean negative log-likelihood of each
   example's last three tokens. */
typedef struct step_data { fixture *f; const example *ex; double *sums; } step_data;

static grzo_status step_forward(grzo_ctx *ctx, const grzo_pass_info *pass, float *losses, void *user) {
    step_data *sd = (step_data *)user;
    llm_seq seqs[16];
    int32_t ctxlen[16];
    double mean[16];
    llm_batch b;
    int64_t c;
    grzo_status s;
    for (c = 0; c < pass->n_segments; c++) {
        const example *e = &sd->ex[pass->example[c]];
        memset(&seqs[c], 0, sizeof seqs[c]);
        seqs[c].tokens = e->tokens;
        seqs[c].n_tokens = e->n_tokens;
        seqs[c].segment = c;
        ctxlen[c] = e->n_tokens - 3;
    }
    b.seqs = seqs;
    b.n_seqs = (int32_t)pass->n_segments;
    b.n_segments = pass->n_segments;
    s = llm_sequence_logprob(ctx, &sd->f->m, sd->f->st, &b, ctxlen, NULL, mean);
    if (s != GRZO_OK) return s;
    for (c = 0; c < pass->n_segments; c++) losses[c] = (float)-mean[c];
    return GRZO_OK;
}

static void test_full_step(grzo_estimator est) {
    fixture f;
    example ex[N_EX];
    float before[16 * 64], after[16 * 64];
    int which[N_EX] = {0, 1, 2};
    grzo_step_report rep;
    step_data sd;
    double d;
    fx_open(&f, 1, est, 1e-2f);
    make_examples(ex, f.tm.cfg.vocab_size, 18);
    TU_OK(&f.m, forward_examples(&f, ex, which, NULL, N_EX, 0, before));
    sd.f = &f;
    sd.ex = ex;
    sd.sums = NULL;
    TU_OK(&f.m, grzo_step(f.ctx, N_EX, step_forward, &sd, &rep));
    TU_OK(&f.m, forward_examples(&f, ex, which, NULL, N_EX, 0, after));
    d = tu_max_abs_diff(before, after, outputs_before(ex, which, N_EX) * f.tm.cfg.vocab_size);
    printf("grzo_step (estimator %d): loss %.4f, delta_std %.3g, logits moved by %.3g\n", (int)est, rep.loss,
           rep.delta_std, d);
    TU_CHECK(isfinite(rep.loss) && rep.loss > 0.0, "step loss %g", rep.loss);
    TU_CHECK(d > 0.0, "the step did not change the model");
    TU_CHECK(grzo_get_step(f.ctx) == 1, "step counter %lld", (long long)grzo_get_step(f.ctx));
    fx_close(&f);
}

/* The same GRZO pass on the reference backend (the SPEC read literally, element by
   element) and on the CPU backend: the model drives both through the same row offsets. */
static void test_ref_backend(void) {
    fixture cpu, ref;
    example ex[N_EX];
    float a[32 * 64], b[32 * 64];
    int which[6] = {0, 1, 2, 0, 1, 2};
    double d;
    fx_open_backend(&cpu, 1, GRZO_ESTIMATOR_GRZO, 1e-2f, 0);
    fx_open_backend(&ref, 1, GRZO_ESTIMATOR_GRZO, 1e-2f, 1);
    make_examples(ex, cpu.tm.cfg.vocab_size, 20);
    grzo_pass_logits(&cpu, ex, N_EX, a);
    grzo_pass_logits(&ref, ex, N_EX, b);
    d = tu_max_abs_diff(a, b, outputs_before(ex, which, 6) * cpu.tm.cfg.vocab_size);
    printf("GRZO pass, CPU backend vs reference backend: max |diff| = %.3g\n", d);
    TU_CHECK(d <= 1e-4, "the backends disagree by %g", d);
    fx_close(&cpu);
    fx_close(&ref);
}

static void test_bad_batches(void) {
    fixture f;
    example ex[N_EX];
    float logits[16 * 64];
    int which[2] = {0, 1};
    int64_t seg_bad[2] = {1, 0};
    grzo_step_info si;
    grzo_pass_info pi;
    grzo_status s;
    fx_open(&f, 1, GRZO_ESTIMATOR_GRZO, 1e-2f);
    make_examples(ex, f.tm.cfg.vocab_size, 19);
    TU_OK(&f.m, grzo_step_begin(f.ctx, 1, &si));
    TU_OK(&f.m, grzo_pass_begin(f.ctx, &pi));
    s = forward_examples(&f, ex, which, seg_bad, 2, pi.n_segments, logits);
    TU_CHECK(s == GRZO_ERR_INVALID_ARG, "segments out of order accepted (%s)", grzo_status_str(s));
    printf("refused as expected: %s\n", llm_model_error(&f.m));
    TU_OK(&f.m, grzo_step_abort(f.ctx));
    ex[0].tokens[1] = f.tm.cfg.vocab_size;
    s = forward_examples(&f, ex, which, NULL, 1, 0, logits);
    TU_CHECK(s == GRZO_ERR_INVALID_ARG, "token out of range accepted (%s)", grzo_status_str(s));
    printf("refused as expected: %s\n", llm_model_error(&f.m));
    ex[0].tokens[1] = 0;
    ex[0].out_pos[0] = ex[0].n_tokens;
    s = forward_examples(&f, ex, which, NULL, 1, 0, logits);
    TU_CHECK(s == GRZO_ERR_INVALID_ARG, "output position out of range accepted (%s)", grzo_status_str(s));
    fx_close(&f);
}

/* The attention's forms belong to the CUDA ops: on the CPU a state takes AUTO only, and a
   value outside the enum is refused; each refusal leaves no state behind. */
static void test_attention_choice(void) {
    static const struct { int value; grzo_status want; } cases[] = {
        {LLM_ATTENTION_FUSED, GRZO_ERR_UNSUPPORTED}, {LLM_ATTENTION_GEMM, GRZO_ERR_UNSUPPORTED},
        {LLM_ATTENTION_GEMM + 1, GRZO_ERR_INVALID_ARG}, {-1, GRZO_ERR_INVALID_ARG}};
    fixture f;
    llm_state_desc sd;
    llm_state *st;
    size_t i;
    fx_open(&f, 1, GRZO_ESTIMATOR_GRZO, 1e-2f);
    memset(&sd, 0, sizeof sd);
    sd.max_rows = 16;
    sd.max_seqs = 2;
    sd.max_outputs = 4;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        grzo_status s;
        sd.attention = (llm_attention)cases[i].value;
        st = (llm_state *)&sd;   /* must come back NULL */
        s = llm_state_create(f.ctx, &f.m, &sd, &st);
        TU_CHECK(s == cases[i].want && st == NULL, "attention %d on the CPU: %s (want %s), state %p", cases[i].value,
                 grzo_status_str(s), grzo_status_str(cases[i].want), (void *)st);
        printf("attention %d refused as expected: %s\n", cases[i].value, llm_model_error(&f.m));
    }
    fx_close(&f);
}

/* Capacities whose tables' sizes overflow (or would not fit the int counts below them) are
   refused, not allocated short: max_segments of 2^61 once made an 8 x (S + 1) table of 0
   bytes that the first forward wrote past. */
static void test_capacity_limits(void) {
    static const int64_t huge[] = {(int64_t)1 << 31, (int64_t)1 << 61, INT64_MAX};
    fixture f;
    llm_state_desc sd;
    llm_state *st;
    size_t i, field;
    fx_open(&f, 1, GRZO_ESTIMATOR_GRZO, 1e-2f);
    for (field = 0; field < 3; field++)
        for (i = 0; i < sizeof huge / sizeof huge[0]; i++) {
            grzo_status s;
            memset(&sd, 0, sizeof sd);
            sd.max_rows = 16;
            sd.max_seqs = 2;
            sd.max_outputs = 4;
            if (field == 0) sd.max_segments = huge[i];
            else if (field == 1) sd.max_rows = huge[i];
            else sd.max_outputs = huge[i];
            st = (llm_state *)&sd;
            s = llm_state_create(f.ctx, &f.m, &sd, &st);
            TU_CHECK(s == GRZO_ERR_INVALID_ARG && st == NULL, "capacity %zu = %lld: %s, state %p", field, (long long)huge[i],
                     grzo_status_str(s), (void *)st);
        }
    fx_close(&f);
}

/* A registration with cfg and w through a CPU backend of its own: its status; *msg the
   model's error (a copy). */
static grzo_status try_register(const llm_config *cfg, const llm_weights *w, char *msg, size_t cap) {
    fixture fx;
    grzo_status s;
    llm_weights copy = *w;
    fx_begin(&fx, GRZO_ESTIMATOR_GRZO, 1e-2f, 0);
    s = llm_model_register(fx.ctx, &fx.m, cfg, &copy);
    snprintf(msg, cap, "%s", llm_model_error(&fx.m));
    fx_close(&fx);
    return s;
}

/* Registration: each size of the config at 0 and -1, and each weight tensor missing (the
   last layer's, the output when untied), is refused with a message saying which; the
   smallest model (every size 1, head_dim 2) registers and runs. */
static void test_register_refusals(void) {
    static const char *fields[] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "head_dim", "vocab_size"};
    llm_config cfg = tu_tiny_config(0), bad;
    tu_model tm;
    char msg[300];
    grzo_status s;
    int f, v, k;
    tu_model_create(&tm, &cfg, 77);
    TU_CHECK(try_register(&cfg, &tm.w, msg, sizeof msg) == GRZO_OK, "the untied tiny model: %s", msg);
    for (f = 0; f < 7; f++)
        for (v = 0; v >= -1; v--) {
            int32_t *field[7];
            bad = cfg;
            field[0] = &bad.dim, field[1] = &bad.hidden_dim, field[2] = &bad.n_layers, field[3] = &bad.n_heads;
            field[4] = &bad.n_kv_heads, field[5] = &bad.head_dim, field[6] = &bad.vocab_size;
            *field[f] = v;
            s = try_register(&bad, &tm.w, msg, sizeof msg);
            TU_CHECK(s == GRZO_ERR_INVALID_ARG && strstr(msg, "non-positive size"), "config %s = %d: %s (%s)", fields[f], v,
                     grzo_status_str(s), msg);
        }
    for (k = 0; k < 9; k++) {   /* the last layer's tensors, one at a time */
        llm_layer *L = &tm.w.layers[cfg.n_layers - 1], keep = *L;
        float **t[9];
        t[0] = &L->attn_norm, t[1] = &L->wq, t[2] = &L->wk, t[3] = &L->wv, t[4] = &L->wo, t[5] = &L->ffn_norm;
        t[6] = &L->w1, t[7] = &L->w2, t[8] = &L->w3;
        *t[k] = NULL;
        s = try_register(&cfg, &tm.w, msg, sizeof msg);
        *L = keep;
        TU_CHECK(s == GRZO_ERR_INVALID_ARG && strstr(msg, "layer 1 misses"), "layer 1 tensor %d missing: %s (%s)", k,
                 grzo_status_str(s), msg);
    }
    {
        float *out = tm.w.output;
        tm.w.output = NULL;
        s = try_register(&cfg, &tm.w, msg, sizeof msg);
        TU_CHECK(s == GRZO_ERR_INVALID_ARG && strstr(msg, "missing"), "untied, no output: %s (%s)", grzo_status_str(s), msg);
        tm.w.output = out;
    }
    {   /* a rope_theta of 0; no context */
        llm_model m0;
        llm_weights copy = tm.w;
        bad = cfg;
        bad.rope_theta = 0.0f;
        s = try_register(&bad, &tm.w, msg, sizeof msg);
        TU_CHECK(s == GRZO_ERR_INVALID_ARG && strstr(msg, "rope_theta 0"), "rope_theta 0: %s (%s)", grzo_status_str(s), msg);
        s = llm_model_register(NULL, &m0, &cfg, &copy);
        TU_CHECK(s == GRZO_ERR_INVALID_ARG && strstr(llm_model_error(&m0), "ctx, cfg and w"), "no ctx: %s (%s)",
                 grzo_status_str(s), llm_model_error(&m0));
        llm_model_free(&m0);
    }
    tu_model_free(&tm);
    {   /* the smallest sizes: accepted, and a forward of them finite */
        fixture fx;
        llm_config one = tu_tiny_config(1);
        llm_state_desc sd;
        llm_seq q;
        llm_batch b;
        int32_t tok[2] = {0, 0}, pos = 1;
        float logit = NAN;
        one.dim = one.hidden_dim = one.n_layers = one.n_heads = one.n_kv_heads = one.vocab_size = 1;
        one.head_dim = 2;
        fx_begin(&fx, GRZO_ESTIMATOR_GRZO, 1e-2f, 0);
        tu_model_create(&fx.tm, &one, 5);
        TU_OK(&fx.m, llm_model_register(fx.ctx, &fx.m, &one, &fx.tm.w));
        memset(&sd, 0, sizeof sd);
        sd.max_rows = 2;
        sd.max_seqs = 1;
        sd.max_outputs = 1;
        TU_OK(&fx.m, llm_state_create(fx.ctx, &fx.m, &sd, &fx.st));
        memset(&q, 0, sizeof q);
        q.tokens = tok;
        q.n_tokens = 2;
        q.out_pos = &pos;
        q.n_out = 1;
        b.seqs = &q;
        b.n_seqs = 1;
        b.n_segments = 0;
        TU_OK(&fx.m, llm_forward(fx.ctx, &fx.m, fx.st, &b, &logit));
        TU_CHECK(isfinite(logit), "the smallest model's logit is %g", (double)logit);
        {   /* greedy over a vocabulary of one: token 0 at each step */
            llm_generate_desc gd;
            int32_t gen[3] = {0, -1, -1}, n_total = 0;
            memset(&gd, 0, sizeof gd);
            gd.steps = 2;
            gd.stop[0] = gd.stop[1] = -1;
            TU_OK(&fx.m, llm_generate(fx.ctx, &fx.m, fx.st, gen, 1, &gd, &n_total));
            TU_CHECK(n_total == 3 && gen[1] == 0 && gen[2] == 0, "the smallest model generated %d tokens: %d %d", n_total,
                     gen[1], gen[2]);
        }
        fx_close(&fx);
    }
}

/* The state and forward entries' refusals the tests above do not reach, each with a message
   saying what is wrong and nothing written; the values just inside each bound accepted. */
static void test_api_refusals(void) {
    fixture f, g;
    example ex[N_EX];
    llm_state_desc sd;
    llm_state *st;
    llm_seq q;
    llm_batch b;
    llm_profile prof;
    float logits[16 * 64];
    int which[1] = {0};
    int32_t n_context[1], toks[MAX_TOK + 2];
    double sum = 12.5;
    grzo_status s;
    int i, k;
    fx_open(&f, 1, GRZO_ESTIMATOR_GRZO, 1e-2f);
    make_examples(ex, f.tm.cfg.vocab_size, 23);
    llm_model_free(NULL);   /* no-ops */
    llm_state_free(NULL);
    llm_state_profile_reset(NULL);
    llm_state_profile(NULL, &prof);
    /* capacities: each one out of range alone */
    for (k = 0; k < 6; k++) {
        memset(&sd, 0, sizeof sd);
        sd.max_rows = 16;
        sd.max_seqs = 2;
        sd.max_outputs = 0;   /* accepted: a state may request no outputs */
        if (k == 0) sd.max_rows = 0;
        else if (k == 1) sd.max_seqs = 0, sd.max_segments = 4;   /* not 0: that alone would be refused */
        else if (k == 2) sd.max_outputs = -1;
        else if (k == 3) sd.max_seq_len = -1;
        else if (k == 4) sd.max_segments = -1;
        st = (llm_state *)&sd;
        s = llm_state_create(f.ctx, &f.m, &sd, &st);
        if (k == 5)
            TU_CHECK(s == GRZO_OK && st != NULL, "the smallest capacities: %s (%s)", grzo_status_str(s), llm_model_error(&f.m));
        else
            TU_CHECK(s == GRZO_ERR_INVALID_ARG && st == NULL && strstr(llm_model_error(&f.m), "capacities must be positive"),
                     "capacity case %d: %s (%s)", k, grzo_status_str(s), llm_model_error(&f.m));
        if (s == GRZO_OK) llm_state_free(st);
    }
    /* a state from a context the model was not registered with */
    fx_open(&g, 1, GRZO_ESTIMATOR_GRZO, 1e-2f);
    memset(&sd, 0, sizeof sd);
    sd.max_rows = 16;
    sd.max_seqs = 2;
    sd.max_outputs = 4;
    st = (llm_state *)&sd;
    s = llm_state_create(g.ctx, &f.m, &sd, &st);
    TU_CHECK(s == GRZO_ERR_INVALID_ARG && st == NULL && strstr(llm_model_error(&f.m), "not the context"),
             "another model's context: %s (%s)", grzo_status_str(s), llm_model_error(&f.m));
    fx_close(&g);
    /* forward: a token out of range in the first and in the last position, then bad batches;
       the message is the model's own (it checks before any op runs), the logits untouched */
    for (k = 0; k < 4; k++) {
        example e = ex[0];
        if (k < 2) e.tokens[0] = k == 0 ? -1 : f.tm.cfg.vocab_size;
        else e.tokens[e.n_tokens - 1] = k == 2 ? -1 : f.tm.cfg.vocab_size;
        for (i = 0; i < 16 * 64; i++) logits[i] = 7.0f;
        s = forward_examples(&f, &e, which, NULL, 1, 0, logits);
        TU_CHECK(s == GRZO_ERR_INVALID_ARG && strstr(llm_model_error(&f.m), "llm_forward: sequence 0 token") &&
                 strstr(llm_model_error(&f.m), "outside"), "token case %d: %s (%s)", k, grzo_status_str(s), llm_model_error(&f.m));
        for (i = 0; i < 16 * 64; i++)
            if (logits[i] != 7.0f) break;
        TU_CHECK(i == 16 * 64, "token case %d: a refused forward wrote logit %d", k, i);
    }
    for (k = 0; k < 3; k++) {
        b.seqs = NULL;
        b.n_seqs = k == 0 ? 1 : k == 1 ? -1 : 0;
        b.n_segments = k == 2 ? -1 : 0;
        s = llm_forward(f.ctx, &f.m, f.st, &b, logits);
        TU_CHECK(s == GRZO_ERR_INVALID_ARG && strstr(llm_model_error(&f.m), "bad batch"), "batch case %d: %s (%s)", k,
                 grzo_status_str(s), llm_model_error(&f.m));
    }
    /* an empty batch (no sequences, seqs NULL) is a forward of nothing: accepted, nothing written */
    b.seqs = NULL;
    b.n_seqs = 0;
    b.n_segments = 0;
    for (i = 0; i < 16 * 64; i++) logits[i] = 7.0f;
    s = llm_forward(f.ctx, &f.m, f.st, &b, logits);
    for (i = 0; i < 16 * 64; i++)
        if (logits[i] != 7.0f) break;
    TU_CHECK(s == GRZO_OK && i == 16 * 64, "an empty batch: %s (%s), logit %d written", grzo_status_str(s),
             llm_model_error(&f.m), i);
    /* one output requested with out_pos NULL */
    memset(&q, 0, sizeof q);
    q.tokens = ex[0].tokens;
    q.n_tokens = ex[0].n_tokens;
    q.n_out = 1;
    b.seqs = &q;
    b.n_seqs = 1;
    s = llm_forward(f.ctx, &f.m, f.st, &b, logits);
    TU_CHECK(s == GRZO_ERR_INVALID_ARG && strstr(llm_model_error(&f.m), "bad tokens/n_tokens"), "n_out 1, out_pos NULL: %s (%s)",
             grzo_status_str(s), llm_model_error(&f.m));
    /* scoring: sequences NULL; no context token (n_context = n_pad = 0); nothing to score */
    b.seqs = NULL;
    b.n_seqs = 1;
    b.n_segments = 0;
    n_context[0] = 1;
    s = llm_sequence_logprob(f.ctx, &f.m, f.st, &b, n_context, &sum, NULL);
    TU_CHECK(s == GRZO_ERR_INVALID_ARG && strstr(llm_model_error(&f.m), "are required") && sum == 12.5,
             "scoring without sequences: %s (%s)", grzo_status_str(s), llm_model_error(&f.m));
    memset(&q, 0, sizeof q);
    q.tokens = ex[0].tokens;
    q.n_tokens = ex[0].n_tokens;
    b.seqs = &q;
    for (k = 0; k < 4; k++) {
        n_context[0] = k == 0 ? 0 : k == 1 ? q.n_tokens : k == 2 ? q.n_tokens + 1 : 1;
        s = llm_sequence_logprob(f.ctx, &f.m, f.st, &b, n_context, &sum, NULL);
        if (k == 3)
            TU_CHECK(s == GRZO_OK && isfinite(sum) && sum < 0.0, "one context token: %s, sum %g", grzo_status_str(s), sum);
        else
            TU_CHECK(s == GRZO_ERR_INVALID_ARG && strstr(llm_model_error(&f.m), "must leave a context token") && sum == 12.5,
                     "n_context %d of %d tokens: %s (%s)", n_context[0], q.n_tokens, grzo_status_str(s), llm_model_error(&f.m));
    }
    /* log-softmax at a token out of range or of no logits: -inf */
    TU_CHECK(llm_log_softmax_at(NULL, 2, 0) == -INFINITY, "log-softmax of no logits");
    TU_CHECK(llm_log_softmax_at(logits, 2, -1) == -INFINITY && llm_log_softmax_at(logits, 2, 2) == -INFINITY,
             "log-softmax at a token out of range");
    /* the profile counts the forwards since its reset */
    llm_state_profile(f.st, &prof);
    TU_CHECK(prof.n_forward > 0 && prof.n_rows > 0, "the profile counted %lld forwards", (long long)prof.n_forward);
    llm_state_profile_reset(f.st);
    llm_state_profile(f.st, &prof);
    TU_CHECK(prof.n_forward == 0 && prof.n_rows == 0 && prof.n_linear == 0 && prof.forward_s == 0.0, "the profile after its reset");
    {   /* one forward's time: within the wall time around it (a clock's reading, not a duration, would be far more) */
        struct timespec t0, t1;
        double wall;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        s = forward_examples(&f, ex, which, NULL, 1, 0, logits);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        wall = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        llm_state_profile(f.st, &prof);
        TU_CHECK(s == GRZO_OK && prof.n_forward == 1 && prof.forward_s >= 0.0 && prof.forward_s <= wall + 1e-3,
                 "one forward of %.3g s took %.3g s in the profile (%s)", wall, prof.forward_s, grzo_status_str(s));
    }
    /* generation: a negative or NaN temperature, steps before the prompt's end, no prompt;
       steps == n_prompt predicts one token */
    {
        llm_generate_desc gd;
        int32_t n_total = -5;
        memset(&gd, 0, sizeof gd);
        gd.stop[0] = gd.stop[1] = -1;
        for (k = 0; k < 5; k++) {
            memcpy(toks, ex[0].tokens, sizeof(int32_t) * 4);
            gd.steps = k == 2 ? 3 : 4;
            gd.temperature = k == 0 ? -1.0f : k == 1 ? NAN : 0.0f;
            s = llm_generate(f.ctx, &f.m, f.st, toks, k == 3 ? 0 : 4, &gd, &n_total);
            if (k == 4)
                TU_CHECK(s == GRZO_OK && n_total == 5 && toks[4] >= 0 && toks[4] < f.tm.cfg.vocab_size,
                         "steps == n_prompt: %s, %d tokens (%s)", grzo_status_str(s), n_total, llm_model_error(&f.m));
            else
                TU_CHECK(s == GRZO_ERR_INVALID_ARG && strstr(llm_model_error(&f.m), "bad arguments") &&
                         memcmp(toks, ex[0].tokens, sizeof(int32_t) * 4) == 0,
                         "generation case %d: %s (%s)", k, grzo_status_str(s), llm_model_error(&f.m));
        }
        /* no context, state, tokens or desc (the message says steps 0, temperature 0 without desc) */
        for (k = 0; k < 4; k++) {
            memcpy(toks, ex[0].tokens, sizeof(int32_t) * 4);
            gd.steps = 4;
            gd.temperature = 0.0f;
            s = llm_generate(k == 0 ? NULL : f.ctx, &f.m, k == 1 ? NULL : f.st, k == 2 ? NULL : toks, 4, k == 3 ? NULL : &gd,
                             &n_total);
            TU_CHECK(s == GRZO_ERR_INVALID_ARG && strstr(llm_model_error(&f.m), "bad arguments") &&
                         (k < 3 || strstr(llm_model_error(&f.m), "steps 0, temperature 0)")) &&
                         memcmp(toks, ex[0].tokens, sizeof(int32_t) * 4) == 0,
                     "generation without argument %d: %s (%s)", k, grzo_status_str(s), llm_model_error(&f.m));
        }
        /* steps past the state's max_seq_len alone, then past its max_rows alone */
        for (k = 0; k < 2; k++) {
            memset(&sd, 0, sizeof sd);
            sd.max_rows = k == 0 ? 16 : 8;
            sd.max_seq_len = k == 0 ? 8 : 16;
            sd.max_seqs = 1;
            sd.max_outputs = 1;
            TU_OK(&f.m, llm_state_create(f.ctx, &f.m, &sd, &st));
            memcpy(toks, ex[0].tokens, sizeof(int32_t) * 4);
            gd.steps = 10;
            s = llm_generate(f.ctx, &f.m, st, toks, 4, &gd, &n_total);
            TU_CHECK(s == GRZO_ERR_INVALID_ARG && strstr(llm_model_error(&f.m), "10 steps exceed the state") &&
                         memcmp(toks, ex[0].tokens, sizeof(int32_t) * 4) == 0,
                     "10 steps, rows %lld, seq_len %d: %s (%s)", (long long)sd.max_rows, sd.max_seq_len, grzo_status_str(s),
                     llm_model_error(&f.m));
            llm_state_free(st);
        }
    }
    fx_close(&f);
}

int main(void) {
    test_attention_choice();
    test_register_refusals();
    test_api_refusals();
    test_capacity_limits();
    test_batch_equals_alone(0);
    test_batch_equals_alone(1);
    test_padding();
    test_antisymmetry();
    test_clean_pass_and_abort();
    test_batch_of_one(0);
    test_batch_of_one(1);
    test_logprob();
    test_sampling();
    test_full_step(GRZO_ESTIMATOR_GRZO);
    test_full_step(GRZO_ESTIMATOR_MEZO);
    test_ref_backend();
    test_bad_batches();
    if (tu_failures) {
        fprintf(stderr, "%d check(s) failed\n", tu_failures);
        return 1;
    }
    printf("all model checks passed\n");
    return 0;
}
