/* test_llm_register.c - llm_model_register_ex and llm_backend_create on the CPU backend.

   - a NULL desc is llm_model_register: the same logits, bit for bit;
   - random init (random_init_seed != 0, no host weights): the weights live in backend memory
     owned by the model, matrices and the embedding are N(0, 0.02^2) (sample mean and std
     checked), norm gains are exactly 1, the same seed gives the same weights and another
     seed other weights;
   - a 16-bit dtype on the CPU backend (which stores F32 only) is GRZO_ERR_UNSUPPORTED with a
     message naming the dtype; an unknown dtype and missing weights are GRZO_ERR_INVALID_ARG;
   - the host-side conversion to bf16 / f16 (what a device backend receives): through a CPU
     backend that claims 16-bit storage, every stored value must be the nearest 16-bit value
     of the fp32 weight (ties to even; f16: subnormals, 65504, overflow to infinity),
     computed here from the definition, in a tensor of edge values and in an embedding
     longer than one chunk of the conversion;
   - llm_backend_create: "cpu" works, an unknown device or weight dtype, no device or no out is refused
     with a message (and without one where err is NULL), "cuda" either works (a GPU is present) or
     says why not in one line. */
#include "llm_test_util.h"

typedef struct fixture {
    grzo_backend be;
    grzo_ctx *ctx;
    llm_model m;
} fixture;

static grzo_status fx_register(fixture *f, const llm_config *cfg, llm_weights *w, const llm_model_desc *md) {
    grzo_desc d;
    memset(f, 0, sizeof *f);
    if (grzo_backend_cpu_create(NULL, &f->be) != GRZO_OK) exit(1);
    memset(&d, 0, sizeof d);
    d.backend = &f->be;
    if (grzo_create(&d, &f->ctx) != GRZO_OK) exit(1);
    return llm_model_register_ex(f->ctx, &f->m, cfg, w, md);
}

static void fx_close(fixture *f) {
    llm_model_free(&f->m);
    grzo_destroy(f->ctx);
    grzo_backend_destroy(&f->be);
}

static void logits_of(fixture *f, float *logits) {
    int32_t tokens[9] = {1, 5, 9, 2, 33, 7, 0, 12, 3}, pos[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
    llm_seq q;
    llm_batch b;
    llm_state_desc sd;
    llm_state *st;
    memset(&q, 0, sizeof q);
    q.tokens = tokens;
    q.n_tokens = 9;
    q.out_pos = pos;
    q.n_out = 9;
    b.seqs = &q;
    b.n_seqs = 1;
    b.n_segments = 0;
    memset(&sd, 0, sizeof sd);
    sd.max_rows = 9;
    sd.max_seqs = 1;
    sd.max_outputs = 9;
    TU_OK(&f->m, llm_state_create(f->ctx, &f->m, &sd, &st));
    TU_OK(&f->m, llm_forward(f->ctx, &f->m, st, &b, logits));
    llm_state_free(st);
}

static void test_null_desc_is_register(void) {
    llm_config cfg = tu_tiny_config(1);
    tu_model tm;
    fixture a, b;
    float la[9 * 40], lb[9 * 40];
    tu_model_create(&tm, &cfg, 3);
    TU_OK(&a.m, fx_register(&a, &cfg, &tm.w, NULL));
    logits_of(&a, la);
    fx_close(&a);
    memset(&b, 0, sizeof b);
    if (grzo_backend_cpu_create(NULL, &b.be) != GRZO_OK) exit(1);
    {
        grzo_desc d;
        memset(&d, 0, sizeof d);
        d.backend = &b.be;
        if (grzo_create(&d, &b.ctx) != GRZO_OK) exit(1);
    }
    TU_OK(&b.m, llm_model_register(b.ctx, &b.m, &cfg, &tm.w));
    TU_CHECK(b.m.n_owned == 0, "F32 weights on the CPU backend must stay in place (the model owns %d buffers)", b.m.n_owned);
    logits_of(&b, lb);
    fx_close(&b);
    TU_CHECK(memcmp(la, lb, sizeof la) == 0, "llm_model_register_ex(NULL) differs from llm_model_register");
    tu_model_free(&tm);
}

static void block_stats(fixture *f, grzo_block blk, double *mean, double *std, int64_t *n) {
    grzo_param p;
    const float *x;
    double s = 0.0, ss = 0.0;
    int64_t i;
    if (grzo_block_param(f->ctx, blk, &p) != GRZO_OK) exit(1);
    x = (const float *)p.data;   /* host-addressable on the CPU backend */
    *n = p.rows * p.cols;
    for (i = 0; i < *n; i++) {
        s += x[i];
        ss += (double)x[i] * x[i];
    }
    *mean = s / *n;
    *std = sqrt(ss / *n - *mean * *mean);
}

static void test_random_init(void) {
    llm_config cfg = tu_tiny_config(0);
    llm_model_desc md;
    fixture a, b, c;
    float la[9 * 40], lb[9 * 40], lc[9 * 40];
    double mean, std;
    int64_t n, i;
    grzo_param g;
    cfg.dim = 64;
    cfg.hidden_dim = 256;
    memset(&md, 0, sizeof md);
    md.random_init_seed = 7;
    TU_OK(&a.m, fx_register(&a, &cfg, NULL, &md));
    TU_CHECK(a.m.n_owned == 2 * 9 + 3, "the model owns %d buffers, expected one per tensor (%d)", a.m.n_owned, 2 * 9 + 3);
    block_stats(&a, a.m.layers[1].w1, &mean, &std, &n);
    printf("random init: blk.1.ffn_gate (%lld weights) mean %.3g std %.4g (want 0, 0.02)\n", (long long)n, mean, std);
    /* the sample std of n Gaussians has relative sd 1/sqrt(2n) = 0.3 %: 2 % is > 6 sd */
    TU_CHECK(fabs(std - 0.02) < 0.02 * 0.02, "blk.1.ffn_gate std %.5g, want 0.02", std);
    TU_CHECK(fabs(mean) < 5.0 * 0.02 / sqrt((double)n), "blk.1.ffn_gate mean %.3g is over 5 standard errors from 0", mean);
    block_stats(&a, a.m.tok_emb, &mean, &std, &n);
    TU_CHECK(fabs(std - 0.02) < 0.05 * 0.02, "token_embd std %.5g, want 0.02", std);
    if (grzo_block_param(a.ctx, a.m.layers[0].attn_norm, &g) != GRZO_OK) exit(1);
    for (i = 0; i < g.rows; i++) TU_CHECK(((const float *)g.data)[i] == 1.0f, "attn_norm gain %lld is not 1", (long long)i);
    logits_of(&a, la);
    TU_OK(&b.m, fx_register(&b, &cfg, NULL, &md));
    logits_of(&b, lb);
    md.random_init_seed = 8;
    TU_OK(&c.m, fx_register(&c, &cfg, NULL, &md));
    logits_of(&c, lc);
    TU_CHECK(memcmp(la, lb, sizeof la) == 0, "the same seed gave different models");
    TU_CHECK(memcmp(la, lc, sizeof la) != 0, "seeds 7 and 8 gave the same model");
    fx_close(&a);
    fx_close(&b);
    fx_close(&c);
}

static void test_refusals(void) {
    llm_config cfg = tu_tiny_config(1);
    tu_model tm;
    llm_model_desc md;
    fixture f;
    grzo_status s;
    tu_model_create(&tm, &cfg, 3);
    memset(&md, 0, sizeof md);
    md.dtype = GRZO_DTYPE_BF16;
    s = fx_register(&f, &cfg, &tm.w, &md);
    printf("bf16 on the CPU backend: %s: %s\n", grzo_status_str(s), llm_model_error(&f.m));
    TU_CHECK(s == GRZO_ERR_UNSUPPORTED && strstr(llm_model_error(&f.m), "bf16"), "bf16 on the CPU backend: %s", grzo_status_str(s));
    TU_CHECK(f.m.layers == NULL && f.m.n_owned == 0, "a refused registration left memory behind");
    fx_close(&f);
    md.dtype = GRZO_DTYPE_F16;
    s = fx_register(&f, &cfg, &tm.w, &md);
    TU_CHECK(s == GRZO_ERR_UNSUPPORTED && strstr(llm_model_error(&f.m), "f16"), "f16 on the CPU backend: %s", grzo_status_str(s));
    fx_close(&f);
    md.dtype = (grzo_dtype)42;
    s = fx_register(&f, &cfg, &tm.w, &md);
    TU_CHECK(s == GRZO_ERR_INVALID_ARG, "dtype 42: %s", grzo_status_str(s));
    fx_close(&f);
    md.dtype = GRZO_DTYPE_F32;
    s = fx_register(&f, &cfg, NULL, &md);
    TU_CHECK(s == GRZO_ERR_INVALID_ARG && strstr(llm_model_error(&f.m), "seed"), "no weights and no seed: %s: %s",
             grzo_status_str(s), llm_model_error(&f.m));
    fx_close(&f);
    tu_model_free(&tm);
}

/* ---- 16-bit conversion ------------------------------------------------------------------ */
static grzo_status (*cpu_query)(void *self, grzo_backend_caps *out);
static grzo_status wide_query(void *self, grzo_backend_caps *out) {
    grzo_status s = cpu_query(self, out);
    out->dtypes |= (1u << GRZO_DTYPE_BF16) | (1u << GRZO_DTYPE_F16);
    return s;
}

/* nearest value with p significant bits, spacing at least q_min, ties to even */
static double nearest(double x, int p, double q_min, double max) {
    int e;
    double q, r;
    if (x == 0.0) return x;
    frexp(x, &e);
    q = ldexp(1.0, e - p);
    if (q < q_min) q = q_min;
    r = nearbyint(x / q) * q;
    return fabs(r) > max ? copysign(INFINITY, r) : r;
}

static double decode16(uint16_t h, grzo_dtype t) {
    if (t == GRZO_DTYPE_BF16) {
        uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    } else {
        int e = (h >> 10) & 31, m = h & 1023;
        double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
        return (h & 0x8000) ? -v : v;
    }
}

static void test_conversion(grzo_dtype t) {
    static const float edge[] = {0.0f, -0.0f, 1.00390625f /* 1 + 2^-8: bf16 tie, to even */,
                                 1.01171875f /* 1 + 3 2^-8: tie, up */, 1.00048828125f /* 1 + 2^-11: f16 tie */,
                                 1e-6f, -3e-8f, 2.9e-8f, 1e-9f, 65519.0f, 65520.0f, -70000.0f, 3.0e38f, 1.5e-39f};
    llm_config cfg = tu_tiny_config(1);
    tu_model tm;
    llm_model_desc md;
    fixture f;
    grzo_desc d;
    grzo_backend_i wide;
    grzo_param p;
    const uint16_t *h;
    int64_t i, n, bad = 0;
    int p_bits = t == GRZO_DTYPE_BF16 ? 8 : 11, which;
    double q_min = t == GRZO_DTYPE_BF16 ? ldexp(1.0, -133) : ldexp(1.0, -24), max = t == GRZO_DTYPE_BF16 ? 3.4e38 : 65504.0;
    cfg.vocab_size = 33000;   /* an embedding of 1,056,000 weights: more than one chunk of the conversion (2^20) */
    tu_model_create(&tm, &cfg, 5);
    memcpy(tm.w.layers[0].wq, edge, sizeof edge);
    memset(&f, 0, sizeof f);
    if (grzo_backend_cpu_create(NULL, &f.be) != GRZO_OK) exit(1);
    wide = *f.be.iface;
    cpu_query = wide.query;
    wide.query = wide_query;
    f.be.iface = &wide;
    memset(&d, 0, sizeof d);
    d.backend = &f.be;
    if (grzo_create(&d, &f.ctx) != GRZO_OK) exit(1);
    memset(&md, 0, sizeof md);
    md.dtype = t;
    TU_OK(&f.m, llm_model_register_ex(f.ctx, &f.m, &cfg, &tm.w, &md));
    for (which = 0; which < 2; which++) {   /* blk.0.attn_q with the edge values; the embedding, past one chunk */
        const float *src = which == 0 ? tm.w.layers[0].wq : tm.w.tok_emb;
        if (grzo_block_param(f.ctx, which == 0 ? f.m.layers[0].wq : f.m.tok_emb, &p) != GRZO_OK) exit(1);
        h = (const uint16_t *)p.data;
        n = p.rows * p.cols;
        bad = 0;
        TU_CHECK(p.dtype == t, "the block's dtype is %d, want %d", (int)p.dtype, (int)t);
        for (i = 0; i < n; i++) {
            double want = nearest((double)src[i], p_bits, q_min, max), got = decode16(h[i], t);
            int same = want == got && signbit(want) == signbit(got);
            if (!same && bad++ < 5)
                TU_CHECK(0, "%s: %s weight %lld = %.9g stored as %.9g (0x%04x), nearest is %.9g",
                         t == GRZO_DTYPE_BF16 ? "bf16" : "f16", which == 0 ? "blk.0.attn_q" : "token_embd", (long long)i,
                         (double)src[i], got, h[i], want);
        }
        printf("%s conversion: %lld of %lld weights of %s rounded to nearest\n", t == GRZO_DTYPE_BF16 ? "bf16" : "f16",
               (long long)(n - bad), (long long)n,
               which == 0 ? "blk.0.attn_q (with the edge values)" : "token_embd (converted in chunks of 2^20)");
        TU_CHECK(bad == 0, "%lld weights converted wrongly", (long long)bad);
    }
    llm_model_free(&f.m);
    grzo_destroy(f.ctx);
    grzo_backend_destroy(&f.be);
    tu_model_free(&tm);
}

static void test_backend_create(void) {
    grzo_backend be;
    char err[256];
    grzo_status s;
    TU_CHECK(llm_backend_create("cpu", 1, GRZO_DTYPE_F32, &be, err, sizeof err) == GRZO_OK, "cpu: %s", err);
    grzo_backend_destroy(&be);
    s = llm_backend_create("tpu", 0, GRZO_DTYPE_F32, &be, err, sizeof err);
    TU_CHECK(s == GRZO_ERR_INVALID_ARG && strstr(err, "tpu"), "tpu: %s (%s)", grzo_status_str(s), err);
    s = llm_backend_create("cpu", 1, GRZO_DTYPE_COUNT, &be, err, sizeof err);
    TU_CHECK(s == GRZO_ERR_INVALID_ARG && strstr(err, "dtype"), "unknown dtype: %s (%s)", grzo_status_str(s), err);
    s = llm_backend_create(NULL, 1, GRZO_DTYPE_F32, &be, err, sizeof err);
    TU_CHECK(s == GRZO_ERR_INVALID_ARG && strstr(err, "device and out are required"), "no device: %s (%s)", grzo_status_str(s), err);
    s = llm_backend_create("cpu", 1, GRZO_DTYPE_F32, NULL, err, sizeof err);
    TU_CHECK(s == GRZO_ERR_INVALID_ARG && strstr(err, "device and out are required"), "no out: %s (%s)", grzo_status_str(s), err);
    TU_CHECK(llm_backend_create(NULL, 1, GRZO_DTYPE_F32, &be, NULL, 0) == GRZO_ERR_INVALID_ARG, "no device, no err buffer");
    s = llm_backend_create("cuda", 0, GRZO_DTYPE_BF16, &be, err, sizeof err);
    printf("llm_backend_create(\"cuda\"): %s%s%s\n", grzo_status_str(s), s ? ": " : "", s ? err : "");
    if (s == GRZO_OK) grzo_backend_destroy(&be);
    else TU_CHECK(strstr(err, "cuda") && !strchr(err, '\n'), "cuda refused without a one-line reason: '%s'", err);
}

int main(void) {
    test_null_desc_is_register();
    test_random_init();
    test_refusals();
    test_conversion(GRZO_DTYPE_BF16);
    test_conversion(GRZO_DTYPE_F16);
    test_backend_create();
    return tu_failures ? 1 : 0;
}
