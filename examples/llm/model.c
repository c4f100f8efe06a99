/* model.c - the Llama-family forward over grzo's operations (see model.h).

   Every weight goes through grzo (grzo_embedding, grzo_vector, grzo_linear); everything
   else (RMSNorm statistics, RoPE, attention, SwiGLU, residual adds) is host arithmetic
   on the state's buffers between those calls. That arithmetic is the same for every
   segment, so all perturbation lives in grzo, and outside a pass the forward is plain. */
#include "model.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* Parallel loops over locals `nt` (the backend's thread count) and `par` (whether the loop
   is worth a team: every parallel region ends in a barrier, and on a busy machine a barrier
   waits for descheduled threads, which costs more than a tiny loop; one-row decoding steps
   are all tiny loops). */
#define LLM_PAR_MIN_WORK 32768
#define LLM_QUERY_BLOCK 8         /* attention queries that share one pass over the keys */
/* LLM_SIMD: an inner loop without loop-carried dependences, vectorized even at -O2 (whose
   cheap cost model refuses loops that need alias checks). */
#ifdef _OPENMP
#define LLM_SIMD _Pragma("omp simd")
#define LLM_OMP_FOR _Pragma("omp parallel for schedule(static) num_threads(nt) if(par)")
#define LLM_OMP_FOR_DYNAMIC _Pragma("omp parallel for schedule(dynamic, 1) num_threads(nt) if(par)")
static int llm__thread(void) { return omp_get_thread_num(); }
#else
#define LLM_SIMD
#define LLM_OMP_FOR (void)nt; (void)par;
#define LLM_OMP_FOR_DYNAMIC (void)nt; (void)par;
static int llm__thread(void) { return 0; }
#endif

struct llm_state {
    llm_state_desc cap;           /* resolved capacity */
    const grzo_backend *be;       /* owner of the backend buffers */
    int32_t n_threads;
    /* activations, backend memory (host-addressable): rows x width */
    int32_t *ids;                 /* max_rows token ids (grzo_embedding reads backend memory) */
    float *x;                     /* residual stream, dim */
    float *xn;                    /* RMS-normalized rows before the gain; also Wo / W2 outputs */
    float *xg;                    /* normalized rows times the gain: the input of the linears */
    float *q;                     /* queries, q_dim; attention overwrites them with its output */
    float *k, *v;                 /* kv_dim */
    float *h1, *h3;               /* SwiGLU gate and up, hidden_dim */
    float *head_in, *head_tmp;    /* max_outputs x dim: gathered rows for the output head */
    /* host tables */
    float *rope_cos, *rope_sin;   /* max_seq_len x head_dim/2 */
    float *attn_scratch;          /* per thread: keys transposed (head_dim x max_seq_len), a block of
                                     scores (LLM_QUERY_BLOCK x max_seq_len) and of queries */
    int64_t attn_stride;          /* floats of attn_scratch per thread */
    int32_t n_seqs;               /* of the batch in flight */
    int64_t *seq_row0;            /* max_seqs: first row of each sequence */
    int32_t *seq_pad, *seq_len;   /* its padding and its token count */
    int32_t *row_pos;             /* position of each row, -1 for padding */
    int64_t *out_row;             /* row of each requested output */
    int64_t *tok_off, *out_off;   /* max_segments + 1: per-segment row offsets */
    /* llm_sequence_logprob */
    llm_seq *lp_seqs;
    int32_t *lp_pos;
    int32_t *lp_target;           /* the token each scored output predicts */
    double *lp_val;
    float *lp_logits;             /* max_outputs x vocab, allocated on first use */
    /* llm_generate's key/value cache: n_layers x max_seq_len x kv_dim each, allocated on first use */
    float *cache_k, *cache_v;
    int32_t past;                 /* positions already in the cache for the forward in flight (-1: no cache) */
    llm_profile prof;
};

/* ---- errors ---------------------------------------------------------------------------- */
static grzo_status llm__fail(llm_model *m, grzo_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->err, sizeof m->err, fmt, ap);
    va_end(ap);
    return s;
}

/* A grzo call failed: keep grzo's own explanation. */
static grzo_status llm__grzo_fail(llm_model *m, grzo_ctx *ctx, grzo_status s, const char *what) {
    return llm__fail(m, s, "%s: %s (%s)", what, grzo_status_str(s), grzo_last_error(ctx));
}

#define LLM_TRY(m, ctx, call, what)                                          \
    do {                                                                     \
        grzo_status s_ = (call);                                             \
        if (s_ != GRZO_OK) return llm__grzo_fail((m), (ctx), s_, (what));    \
    } while (0)

const char *llm_model_error(const llm_model *m) { return m ? m->err : "no model"; }

/* wall clock for the profile */
static double llm__now(void) {
#ifdef _OPENMP
    return omp_get_wtime();
#else
    return (double)clock() / CLOCKS_PER_SEC;   /* without OpenMP the process has one thread */
#endif
}

/* The grzo operations of the forward, timed into the state's profile. */
static grzo_status llm__linear(grzo_ctx *ctx, llm_model *m, llm_state *st, grzo_block w, const float *x, float *y,
                               const grzo_rows *rows, const char *what) {
    double t0 = llm__now();
    grzo_status s = grzo_linear(ctx, w, x, y, rows);
    st->prof.linear_s += llm__now() - t0;
    st->prof.n_linear++;
    return s == GRZO_OK ? GRZO_OK : llm__grzo_fail(m, ctx, s, what);
}

static grzo_status llm__gain(grzo_ctx *ctx, llm_model *m, llm_state *st, grzo_block g, const float *x, float *y,
                             const grzo_rows *rows, const char *what) {
    double t0 = llm__now();
    grzo_status s = grzo_vector(ctx, g, GRZO_VECTOR_MUL, x, y, rows);
    st->prof.vector_embedding_s += llm__now() - t0;
    return s == GRZO_OK ? GRZO_OK : llm__grzo_fail(m, ctx, s, what);
}

static grzo_status llm__embed(grzo_ctx *ctx, llm_model *m, llm_state *st, const grzo_rows *rows) {
    double t0 = llm__now();
    grzo_status s = grzo_embedding(ctx, m->tok_emb, st->ids, st->x, rows);
    st->prof.vector_embedding_s += llm__now() - t0;
    return s == GRZO_OK ? GRZO_OK : llm__grzo_fail(m, ctx, s, "llm: token_embd");
}

#define LLM_RET(call)                          \
    do {                                       \
        grzo_status s_ = (call);               \
        if (s_ != GRZO_OK) return s_;          \
    } while (0)

/* ---- registration ------------------------------------------------------------------------ */
static grzo_status llm__check_config(llm_model *m, const llm_config *c) {
    if (c->dim <= 0 || c->hidden_dim <= 0 || c->n_layers <= 0 || c->n_heads <= 0 || c->n_kv_heads <= 0 ||
        c->head_dim <= 0 || c->vocab_size <= 0)
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_model_register: config has a non-positive size");
    if (c->n_heads % c->n_kv_heads != 0)
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_model_register: n_heads (%d) is not a multiple of n_kv_heads (%d)",
                         c->n_heads, c->n_kv_heads);
    if (c->head_dim % 2 != 0)
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_model_register: head_dim %d is odd (RoPE rotates pairs)", c->head_dim);
    if (!(c->norm_eps >= 0.0f) || !(c->rope_theta > 0.0f))
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_model_register: bad norm_eps %g or rope_theta %g",
                         (double)c->norm_eps, (double)c->rope_theta);
    return GRZO_OK;
}

static grzo_status llm__check_weights(llm_model *m, const llm_config *c, const llm_weights *w) {
    int32_t l;
    if (!w->tok_emb || !w->layers || !w->final_norm || (!c->tied_output && !w->output))
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_model_register: a weight tensor is missing");
    for (l = 0; l < c->n_layers; l++) {
        const llm_layer *L = &w->layers[l];
        if (!L->attn_norm || !L->wq || !L->wk || !L->wv || !L->wo || !L->ffn_norm || !L->w1 || !L->w2 || !L->w3)
            return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_model_register: layer %d misses a weight tensor", l);
    }
    return GRZO_OK;
}

static grzo_status llm__add_block(grzo_ctx *ctx, llm_model *m, grzo_block_kind kind, int64_t rows, int64_t cols,
                                  float *data, const char *name, grzo_block *out) {
    grzo_block_desc d;
    grzo_status s;
    memset(&d, 0, sizeof d);
    d.kind = kind;
    d.rows = rows;
    d.cols = cols;
    d.data = data;
    d.name = name;
    s = grzo_block_add(ctx, &d, out);
    if (s != GRZO_OK) return llm__grzo_fail(m, ctx, s, name);
    return GRZO_OK;
}

static grzo_status llm__add_layer(grzo_ctx *ctx, llm_model *m, int32_t l) {
    const llm_config *c = &m->cfg;
    llm_layer *L = &m->w->layers[l];
    llm_layer_blocks *B = &m->layers[l];
    int64_t q_dim = (int64_t)c->n_heads * c->head_dim, kv_dim = (int64_t)c->n_kv_heads * c->head_dim;
    struct { grzo_block_kind kind; int64_t rows, cols; float *data; const char *suffix; grzo_block *out; } t[9];
    char name[64];
    int i;
    t[0].kind = GRZO_BLOCK_VECTOR; t[0].rows = c->dim;        t[0].cols = 1;             t[0].data = L->attn_norm; t[0].suffix = "attn_norm";   t[0].out = &B->attn_norm;
    t[1].kind = GRZO_BLOCK_MATRIX; t[1].rows = q_dim;         t[1].cols = c->dim;        t[1].data = L->wq;        t[1].suffix = "attn_q";      t[1].out = &B->wq;
    t[2].kind = GRZO_BLOCK_MATRIX; t[2].rows = kv_dim;        t[2].cols = c->dim;        t[2].data = L->wk;        t[2].suffix = "attn_k";      t[2].out = &B->wk;
    t[3].kind = GRZO_BLOCK_MATRIX; t[3].rows = kv_dim;        t[3].cols = c->dim;        t[3].data = L->wv;        t[3].suffix = "attn_v";      t[3].out = &B->wv;
    t[4].kind = GRZO_BLOCK_MATRIX; t[4].rows = c->dim;        t[4].cols = q_dim;         t[4].data = L->wo;        t[4].suffix = "attn_output"; t[4].out = &B->wo;
    t[5].kind = GRZO_BLOCK_VECTOR; t[5].rows = c->dim;        t[5].cols = 1;             t[5].data = L->ffn_norm;  t[5].suffix = "ffn_norm";    t[5].out = &B->ffn_norm;
    t[6].kind = GRZO_BLOCK_MATRIX; t[6].rows = c->hidden_dim; t[6].cols = c->dim;        t[6].data = L->w1;        t[6].suffix = "ffn_gate";    t[6].out = &B->w1;
    t[7].kind = GRZO_BLOCK_MATRIX; t[7].rows = c->dim;        t[7].cols = c->hidden_dim; t[7].data = L->w2;        t[7].suffix = "ffn_down";    t[7].out = &B->w2;
    t[8].kind = GRZO_BLOCK_MATRIX; t[8].rows = c->hidden_dim; t[8].cols = c->dim;        t[8].data = L->w3;        t[8].suffix = "ffn_up";      t[8].out = &B->w3;
    for (i = 0; i < 9; i++) {
        grzo_status s;
        snprintf(name, sizeof name, "blk.%d.%s", (int)l, t[i].suffix);
        s = llm__add_block(ctx, m, t[i].kind, t[i].rows, t[i].cols, t[i].data, name, t[i].out);
        if (s != GRZO_OK) return s;
    }
    return GRZO_OK;
}

/* The host loops between grzo calls read and write activations directly. */
static grzo_status llm__query_backend(grzo_ctx *ctx, llm_model *m, const grzo_backend **be, int32_t *n_threads) {
    grzo_desc d;
    grzo_backend_caps caps;
    LLM_TRY(m, ctx, grzo_get_desc(ctx, &d), "llm: grzo_get_desc");
    LLM_TRY(m, ctx, grzo_backend_query(d.backend, &caps), "llm: grzo_backend_query");
    if (caps.device_memory)
        return llm__fail(m, GRZO_ERR_UNSUPPORTED, "llm: backend '%s' keeps device memory; the model's host loops need a "
                         "host-memory backend (cpu, ref)", d.backend->iface->name);
    *be = d.backend;
    *n_threads = caps.n_threads > 0 ? caps.n_threads : 1;
    return GRZO_OK;
}

grzo_status llm_model_register(grzo_ctx *ctx, llm_model *m, const llm_config *cfg, llm_weights *w) {
    const grzo_backend *be;
    grzo_status s;
    int32_t l, n_threads;
    if (!m) return GRZO_ERR_INVALID_ARG;
    memset(m, 0, sizeof *m);
    if (!ctx || !cfg || !w) return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_model_register: ctx, cfg and w are required");
    if ((s = llm__check_config(m, cfg)) != GRZO_OK) return s;
    if ((s = llm__check_weights(m, cfg, w)) != GRZO_OK) return s;
    if ((s = llm__query_backend(ctx, m, &be, &n_threads)) != GRZO_OK) return s;   /* refuse device memory now */
    m->cfg = *cfg;
    m->w = w;
    m->layers = (llm_layer_blocks *)calloc((size_t)cfg->n_layers, sizeof *m->layers);
    if (!m->layers) return llm__fail(m, GRZO_ERR_OUT_OF_MEMORY, "llm_model_register: out of memory");
    s = llm__add_block(ctx, m, GRZO_BLOCK_EMBEDDING, cfg->vocab_size, cfg->dim, w->tok_emb, "token_embd", &m->tok_emb);
    for (l = 0; l < cfg->n_layers && s == GRZO_OK; l++) s = llm__add_layer(ctx, m, l);
    if (s == GRZO_OK) s = llm__add_block(ctx, m, GRZO_BLOCK_VECTOR, cfg->dim, 1, w->final_norm, "output_norm", &m->final_norm);
    if (s == GRZO_OK) {
        if (cfg->tied_output) m->output = m->tok_emb;     /* the same block: one perturbation, one update */
        else s = llm__add_block(ctx, m, GRZO_BLOCK_MATRIX, cfg->vocab_size, cfg->dim, w->output, "output", &m->output);
    }
    if (s != GRZO_OK) {
        free(m->layers);
        m->layers = NULL;
    }
    return s;
}

/* ==== TEMPORARY (g2 worktree): replaced by the device-forward branch's llm_model_register_ex
   at the merge; until then device weights and random initialisation are not available. ==== */
grzo_status llm_model_register_ex(grzo_ctx *ctx, llm_model *m, const llm_config *cfg, llm_weights *w,
                                  const llm_model_desc *desc) {
    (void)ctx; (void)cfg; (void)w; (void)desc;
    if (m) snprintf(m->err, sizeof m->err, "llm_model_register_ex: not in this build (replaced by the device-forward branch)");
    return GRZO_ERR_UNSUPPORTED;
}
/* ==== end of TEMPORARY ==== */

void llm_model_free(llm_model *m) {
    if (!m) return;
    free(m->layers);
    m->layers = NULL;
}

/* ---- state --------------------------------------------------------------------------------- */
static void llm__state_release(llm_state *st) {
    void **dev[] = {(void **)&st->ids, (void **)&st->x, (void **)&st->xn, (void **)&st->xg, (void **)&st->q,
                    (void **)&st->k, (void **)&st->v, (void **)&st->h1, (void **)&st->h3, (void **)&st->head_in,
                    (void **)&st->head_tmp, (void **)&st->lp_logits,
                    (void **)&st->cache_k, (void **)&st->cache_v};
    size_t i;
    for (i = 0; i < sizeof dev / sizeof dev[0]; i++)
        if (*dev[i]) grzo_backend_free(st->be, *dev[i]);
    free(st->rope_cos);
    free(st->rope_sin);
    free(st->attn_scratch);
    free(st->seq_row0);
    free(st->seq_pad);
    free(st->seq_len);
    free(st->row_pos);
    free(st->out_row);
    free(st->tok_off);
    free(st->out_off);
    free(st->lp_seqs);
    free(st->lp_pos);
    free(st->lp_target);
    free(st->lp_val);
    free(st);
}

void llm_state_free(llm_state *st) {
    if (st) llm__state_release(st);
}

/* count x width elements of elem bytes, or 0 on overflow (counts are checked positive) */
static size_t llm__bytes(int64_t count, int64_t width, size_t elem) {
    double approx = (double)count * (double)width * (double)elem;
    if (approx > (double)((size_t)-1 / 2)) return 0;
    return (size_t)count * (size_t)width * elem;
}

static grzo_status llm__backend_buffer(llm_model *m, llm_state *st, int64_t count, int64_t width, size_t elem, void **out) {
    size_t bytes = llm__bytes(count, width, elem);
    grzo_status s;
    if (bytes == 0) return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_state_create: buffer size overflows");
    s = grzo_backend_alloc(st->be, bytes, out);
    if (s != GRZO_OK) return llm__fail(m, s, "llm_state_create: cannot allocate %zu bytes of backend memory", bytes);
    return GRZO_OK;
}

/* cos/sin of pos * theta^(-2i/head_dim), computed in double: float angles drift at large positions */
static void llm__fill_rope(const llm_config *c, int32_t max_pos, float *cos_t, float *sin_t) {
    int32_t half = c->head_dim / 2, p, i;
    for (i = 0; i < half; i++) {
        double freq = pow((double)c->rope_theta, -2.0 * (double)i / (double)c->head_dim);
        for (p = 0; p < max_pos; p++) {
            double a = (double)p * freq;
            cos_t[(size_t)p * half + i] = (float)cos(a);
            sin_t[(size_t)p * half + i] = (float)sin(a);
        }
    }
}

static grzo_status llm__resolve_capacity(llm_model *m, const llm_state_desc *d, llm_state_desc *cap) {
    *cap = *d;
    if (cap->max_seq_len == 0) cap->max_seq_len = m->cfg.max_seq_len;
    if (cap->max_segments == 0) cap->max_segments = cap->max_seqs;
    if (cap->max_rows <= 0 || cap->max_seqs <= 0 || cap->max_outputs < 0 || cap->max_seq_len <= 0 ||
        cap->max_segments <= 0)
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_state_create: capacities must be positive (rows %lld, seqs %d, "
                         "seq_len %d, segments %lld)", (long long)cap->max_rows, cap->max_seqs, cap->max_seq_len,
                         (long long)cap->max_segments);
    if (cap->max_outputs == 0) cap->max_outputs = 1;
    return GRZO_OK;
}

static grzo_status llm__alloc_activations(llm_model *m, llm_state *st) {
    const llm_config *c = &m->cfg;
    int64_t R = st->cap.max_rows, O = st->cap.max_outputs;
    int64_t q_dim = (int64_t)c->n_heads * c->head_dim, kv_dim = (int64_t)c->n_kv_heads * c->head_dim;
    struct { void **p; int64_t count, width; size_t elem; } b[11];
    int i;
    b[0].p = (void **)&st->ids;      b[0].count = R; b[0].width = 1;             b[0].elem = sizeof(int32_t);
    b[1].p = (void **)&st->x;        b[1].count = R; b[1].width = c->dim;        b[1].elem = sizeof(float);
    b[2].p = (void **)&st->xn;       b[2].count = R; b[2].width = c->dim;        b[2].elem = sizeof(float);
    b[3].p = (void **)&st->xg;       b[3].count = R; b[3].width = c->dim;        b[3].elem = sizeof(float);
    b[4].p = (void **)&st->q;        b[4].count = R; b[4].width = q_dim;         b[4].elem = sizeof(float);
    b[5].p = (void **)&st->k;        b[5].count = R; b[5].width = kv_dim;        b[5].elem = sizeof(float);
    b[6].p = (void **)&st->v;        b[6].count = R; b[6].width = kv_dim;        b[6].elem = sizeof(float);
    b[7].p = (void **)&st->h1;       b[7].count = R; b[7].width = c->hidden_dim; b[7].elem = sizeof(float);
    b[8].p = (void **)&st->h3;       b[8].count = R; b[8].width = c->hidden_dim; b[8].elem = sizeof(float);
    b[9].p = (void **)&st->head_in;  b[9].count = O; b[9].width = c->dim;        b[9].elem = sizeof(float);
    b[10].p = (void **)&st->head_tmp; b[10].count = O; b[10].width = c->dim;     b[10].elem = sizeof(float);
    for (i = 0; i < 11; i++) {
        grzo_status s = llm__backend_buffer(m, st, b[i].count, b[i].width, b[i].elem, b[i].p);
        if (s != GRZO_OK) return s;
    }
    return GRZO_OK;
}

static grzo_status llm__alloc_host_tables(llm_model *m, llm_state *st) {
    const llm_config *c = &m->cfg;
    int64_t R = st->cap.max_rows, O = st->cap.max_outputs, S = st->cap.max_segments, L = st->cap.max_seq_len;
    size_t rope = llm__bytes(L, c->head_dim / 2, sizeof(float));
    st->rope_cos = (float *)malloc(rope);
    st->rope_sin = (float *)malloc(rope);
    st->attn_stride = ((int64_t)c->head_dim + LLM_QUERY_BLOCK) * L + (int64_t)LLM_QUERY_BLOCK * c->head_dim;
    st->attn_scratch = (float *)malloc(llm__bytes(st->n_threads, st->attn_stride, sizeof(float)));
    st->seq_row0 = (int64_t *)malloc(llm__bytes(st->cap.max_seqs, 1, sizeof(int64_t)));
    st->seq_pad = (int32_t *)malloc(llm__bytes(st->cap.max_seqs, 1, sizeof(int32_t)));
    st->seq_len = (int32_t *)malloc(llm__bytes(st->cap.max_seqs, 1, sizeof(int32_t)));
    st->row_pos = (int32_t *)malloc(llm__bytes(R, 1, sizeof(int32_t)));
    st->out_row = (int64_t *)malloc(llm__bytes(O, 1, sizeof(int64_t)));
    st->tok_off = (int64_t *)malloc(llm__bytes(S + 1, 1, sizeof(int64_t)));
    st->out_off = (int64_t *)malloc(llm__bytes(S + 1, 1, sizeof(int64_t)));
    st->lp_seqs = (llm_seq *)malloc(llm__bytes(st->cap.max_seqs, 1, sizeof(llm_seq)));
    st->lp_pos = (int32_t *)malloc(llm__bytes(O, 1, sizeof(int32_t)));
    st->lp_target = (int32_t *)malloc(llm__bytes(O, 1, sizeof(int32_t)));
    st->lp_val = (double *)malloc(llm__bytes(O, 1, sizeof(double)));
    if (!rope || !st->rope_cos || !st->rope_sin || !st->attn_scratch || !st->seq_row0 || !st->seq_pad || !st->seq_len || !st->row_pos ||
        !st->out_row || !st->tok_off || !st->out_off || !st->lp_seqs || !st->lp_pos || !st->lp_target || !st->lp_val)
        return llm__fail(m, GRZO_ERR_OUT_OF_MEMORY, "llm_state_create: out of host memory");
    llm__fill_rope(c, st->cap.max_seq_len, st->rope_cos, st->rope_sin);
    return GRZO_OK;
}

grzo_status llm_state_create(grzo_ctx *ctx, llm_model *m, const llm_state_desc *desc, llm_state **out) {
    llm_state *st;
    grzo_status s;
    if (out) *out = NULL;
    if (!m) return GRZO_ERR_INVALID_ARG;
    if (!ctx || !desc || !out || !m->layers) return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_state_create: ctx, a registered model, desc and out are required");
    st = (llm_state *)calloc(1, sizeof *st);
    if (!st) return llm__fail(m, GRZO_ERR_OUT_OF_MEMORY, "llm_state_create: out of memory");
    s = llm__query_backend(ctx, m, &st->be, &st->n_threads);
    if (s == GRZO_OK) s = llm__resolve_capacity(m, desc, &st->cap);
    if (s == GRZO_OK) s = llm__alloc_activations(m, st);
    if (s == GRZO_OK) s = llm__alloc_host_tables(m, st);
    st->past = -1;
    if (s != GRZO_OK) {
        if (st->be) llm__state_release(st); else free(st);
        return s;
    }
    *out = st;
    return GRZO_OK;
}

/* ---- batch layout ---------------------------------------------------------------------------- */
static grzo_status llm__check_seq(llm_model *m, const llm_state *st, const llm_seq *q, int32_t i) {
    int32_t t;
    if (!q->tokens || q->n_tokens <= 0 || q->n_pad < 0 || q->n_pad >= q->n_tokens || q->n_out < 0 ||
        (q->n_out > 0 && !q->out_pos))
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_forward: sequence %d: bad tokens/n_tokens %d/n_pad %d/out_pos", i,
                         q->n_tokens, q->n_pad);
    if (q->n_tokens - q->n_pad > st->cap.max_seq_len)
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_forward: sequence %d has %d tokens, the state holds positions up to %d", i,
                         q->n_tokens - q->n_pad, st->cap.max_seq_len);
    for (t = 0; t < q->n_tokens; t++)
        if (q->tokens[t] < 0 || q->tokens[t] >= m->cfg.vocab_size)
            return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_forward: sequence %d token %d is %d, outside [0, %d)", i, t,
                             q->tokens[t], m->cfg.vocab_size);
    for (t = 0; t < q->n_out; t++)
        if (q->out_pos[t] < q->n_pad || q->out_pos[t] >= q->n_tokens)
            return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_forward: sequence %d requests position %d outside [%d, %d)", i,
                             q->out_pos[t], q->n_pad, q->n_tokens);
    return GRZO_OK;
}

/* Check the batch against the state and count its rows and outputs. */
static grzo_status llm__check_batch(llm_model *m, const llm_state *st, const llm_batch *b, int64_t *n_rows, int64_t *n_out) {
    int64_t rows = 0, outs = 0, prev_seg = 0;
    int32_t i;
    if (b->n_seqs < 0 || (b->n_seqs > 0 && !b->seqs) || b->n_segments < 0)
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_forward: bad batch (n_seqs %d, n_segments %lld)", b->n_seqs,
                         (long long)b->n_segments);
    if (b->n_seqs > st->cap.max_seqs || b->n_segments > st->cap.max_segments)
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_forward: %d sequences / %lld segments exceed the state (%d / %lld)",
                         b->n_seqs, (long long)b->n_segments, st->cap.max_seqs, (long long)st->cap.max_segments);
    for (i = 0; i < b->n_seqs; i++) {
        const llm_seq *q = &b->seqs[i];
        grzo_status s = llm__check_seq(m, st, q, i);
        if (s != GRZO_OK) return s;
        if (b->n_segments > 0) {
            if (q->segment < prev_seg || q->segment >= b->n_segments)
                return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_forward: sequence %d has segment %lld: segments must be in "
                                 "[0, %lld) and non-decreasing over the batch", i, (long long)q->segment,
                                 (long long)b->n_segments);
            prev_seg = q->segment;
        }
        rows += q->n_tokens;
        outs += q->n_out;
    }
    if (rows > st->cap.max_rows || outs > st->cap.max_outputs)
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_forward: %lld rows / %lld outputs exceed the state (%lld / %lld)",
                         (long long)rows, (long long)outs, (long long)st->cap.max_rows, (long long)st->cap.max_outputs);
    *n_rows = rows;
    *n_out = outs;
    return GRZO_OK;
}

/* Rows of the packed batch: token ids, positions, attention ranges, output rows, and the
   per-segment row offsets of the token rows and of the gathered output rows. */
static void llm__layout(llm_state *st, const llm_batch *b) {
    int64_t row = 0, out = 0, seg = 0;
    int32_t i, t;
    st->n_seqs = b->n_seqs;
    st->tok_off[0] = 0;
    st->out_off[0] = 0;
    for (i = 0; i < b->n_seqs; i++) {
        const llm_seq *q = &b->seqs[i];
        /* close the segments before this sequence's: they end where it starts */
        for (; b->n_segments > 0 && seg < q->segment; seg++) {
            st->tok_off[seg + 1] = row;
            st->out_off[seg + 1] = out;
        }
        st->seq_row0[i] = row;
        st->seq_pad[i] = q->n_pad;
        st->seq_len[i] = q->n_tokens;
        for (t = 0; t < q->n_tokens; t++) {
            st->ids[row + t] = q->tokens[t];
            st->row_pos[row + t] = t < q->n_pad ? -1 : t - q->n_pad + (st->past > 0 ? st->past : 0);
        }
        for (t = 0; t < q->n_out; t++) st->out_row[out++] = row + q->out_pos[t];
        row += q->n_tokens;
    }
    for (; seg < b->n_segments; seg++) {
        st->tok_off[seg + 1] = row;
        st->out_off[seg + 1] = out;
    }
}

/* ---- host arithmetic between the grzo operations ----------------------------------------------- */
/* y = x / sqrt(mean(x^2) + eps), row by row (the gain is a grzo_vector afterwards) */
static void llm__rms_normalize(int nt, const float *x, float *y, int64_t n_rows, int32_t dim, float eps) {
    int64_t r;
    int par = n_rows * dim >= LLM_PAR_MIN_WORK;
    LLM_OMP_FOR
    for (r = 0; r < n_rows; r++) {
        const float *xr = x + r * dim;
        float *yr = y + r * dim, scale;
        double ss = 0.0;
        int32_t j;
        for (j = 0; j < dim; j++) ss += (double)xr[j] * xr[j];
        scale = (float)(1.0 / sqrt(ss / dim + eps));
        LLM_SIMD
        for (j = 0; j < dim; j++) yr[j] = xr[j] * scale;
    }
}

/* rotate adjacent pairs (2i, 2i+1) of every head of every non-padding row */
static void llm__rope(int nt, const llm_state *st, float *t, int64_t n_rows, int32_t n_heads, int32_t head_dim) {
    int32_t half = head_dim / 2;
    int64_t r;
    int par = n_rows * n_heads * head_dim >= LLM_PAR_MIN_WORK;
    LLM_OMP_FOR
    for (r = 0; r < n_rows; r++) {
        int32_t p = st->row_pos[r], h, i;
        const float *cs, *sn;
        if (p < 0) continue;
        cs = st->rope_cos + (size_t)p * half;
        sn = st->rope_sin + (size_t)p * half;
        for (h = 0; h < n_heads; h++) {
            float *v = t + (r * n_heads + h) * head_dim;
            for (i = 0; i < half; i++) {
                float a = v[2 * i], b = v[2 * i + 1];
                v[2 * i] = a * cs[i] - b * sn[i];
                v[2 * i + 1] = a * sn[i] + b * cs[i];
            }
        }
    }
}

/* Keys [base, base + n) of kv head g, transposed to kt[d * n + j]: the score loop then runs
   over contiguous keys, which the compiler vectorizes (a dot product per key would not be:
   its reduction order is fixed without -ffast-math). */
static void llm__transpose_keys(const float *k, int64_t base, int32_t n, int32_t kv_stride, int32_t g, int32_t hd,
                                float *kt) {
    int32_t j, d;
    for (j = 0; j < n; j++) {
        const float *kj = k + (base + j) * kv_stride + (int64_t)g * hd;
        for (d = 0; d < hd; d++) kt[(size_t)d * n + j] = kj[d];
    }
}

/* Where one head's attention reads and writes. Query i (row q_base + i) attends keys
   0 .. past + i (rows k_base + j of the key and value buffers). */
typedef struct llm__head_task {
    float *q;                     /* queries, replaced by the attention output */
    const float *v;
    const float *kt;              /* keys transposed: n_keys = past + n_queries columns */
    int64_t q_base, k_base;
    int32_t n_queries, past;
    int32_t q_stride, kv_stride, h, g, hd;
} llm__head_task;

/* Scores of a block of nb queries against the keys [0, n_keys): S[b][j] = q_b . k_j / sqrt(hd).
   Each key row kt[d] is read once for the whole block and the loop over keys is long and
   contiguous (keys past a query's own position are computed and then ignored). */
static void llm__block_scores(const llm__head_task *t, int32_t i0, int32_t nb, int32_t n_keys, int32_t stride,
                              float *S, float *qs) {
    float scale = 1.0f / sqrtf((float)t->hd);
    int32_t b, j, d, hd = t->hd, kt_cols = t->past + t->n_queries;
    for (b = 0; b < nb; b++) {
        const float *qi = t->q + (t->q_base + i0 + b) * t->q_stride + (int64_t)t->h * hd;
        for (d = 0; d < hd; d++) qs[b * hd + d] = qi[d] * scale;
        for (j = 0; j < n_keys; j++) S[(size_t)b * stride + j] = 0.0f;
    }
    for (d = 0; d < hd; d++) {
        const float *kd = t->kt + (size_t)d * kt_cols;
        for (b = 0; b < nb; b++) {
            float qd = qs[b * hd + d], *Sb = S + (size_t)b * stride;
            LLM_SIMD
            for (j = 0; j < n_keys; j++) Sb[j] += qd * kd[j];
        }
    }
}

/* softmax(scores[0..n)) V written over the query row qi */
static void llm__softmax_values(const llm__head_task *t, float *scores, int32_t n, float *qi) {
    float mx = -INFINITY, sum = 0.0f, inv;
    int32_t j, d, hd = t->hd;
    for (j = 0; j < n; j++)
        if (scores[j] > mx) mx = scores[j];
    for (j = 0; j < n; j++) {
        scores[j] = expf(scores[j] - mx);
        sum += scores[j];
    }
    inv = 1.0f / sum;
    for (d = 0; d < hd; d++) qi[d] = 0.0f;
    for (j = 0; j < n; j++) {
        const float *vj = t->v + (t->k_base + j) * t->kv_stride + (int64_t)t->g * hd;
        float p = scores[j] * inv;
        LLM_SIMD
        for (d = 0; d < hd; d++) qi[d] += p * vj[d];
    }
}

static void llm__attend_head(const llm__head_task *t, float *scores, float *qsave, int32_t stride) {
    int32_t i0, b;
    for (i0 = 0; i0 < t->n_queries; i0 += LLM_QUERY_BLOCK) {
        int32_t nb = t->n_queries - i0 < LLM_QUERY_BLOCK ? t->n_queries - i0 : LLM_QUERY_BLOCK;
        llm__block_scores(t, i0, nb, t->past + i0 + nb, stride, scores, qsave);
        for (b = 0; b < nb; b++)   /* causal: query i0 + b sees keys up to its own position */
            llm__softmax_values(t, scores + (size_t)b * stride, t->past + i0 + b + 1,
                                t->q + (t->q_base + i0 + b) * t->q_stride + (int64_t)t->h * t->hd);
    }
}

/* Causal grouped-query attention inside each sequence; the output replaces st->q. One task
   per (sequence, query head). Padding rows attend to nothing and output 0. Keys and values
   come from the batch's rows, or (past >= 0, one sequence) from the cache of the layer,
   where the batch's rows were appended after the past ones. */
static void llm__attention(const llm_model *m, llm_state *st, const float *keys, const float *values, int32_t past,
                           int64_t n_rows) {
    const llm_config *c = &m->cfg;
    int nt = st->n_threads;
    int32_t hd = c->head_dim, group = c->n_heads / c->n_kv_heads;
    int64_t task, n_tasks = (int64_t)st->n_seqs * c->n_heads;
    int par = n_rows * ((past > 0 ? past : 0) + n_rows / st->n_seqs) * c->n_heads * hd >= LLM_PAR_MIN_WORK;
    LLM_OMP_FOR_DYNAMIC
    for (task = 0; task < n_tasks; task++) {
        int32_t sq = (int32_t)(task / c->n_heads), r;
        float *kt = st->attn_scratch + (size_t)llm__thread() * (size_t)st->attn_stride;
        float *scores = kt + (size_t)hd * st->cap.max_seq_len;
        float *qsave = scores + (size_t)LLM_QUERY_BLOCK * st->cap.max_seq_len;
        llm__head_task t;
        t.q = st->q;
        t.v = values;
        t.kt = kt;
        t.h = (int32_t)(task % c->n_heads);
        t.g = t.h / group;
        t.hd = hd;
        t.q_stride = c->n_heads * hd;
        t.kv_stride = c->n_kv_heads * hd;
        t.n_queries = st->seq_len[sq] - st->seq_pad[sq];
        t.q_base = st->seq_row0[sq] + st->seq_pad[sq];
        t.past = past > 0 ? past : 0;
        t.k_base = past >= 0 ? 0 : t.q_base;
        for (r = 0; r < st->seq_pad[sq]; r++)
            memset(st->q + (st->seq_row0[sq] + r) * t.q_stride + (int64_t)t.h * hd, 0, (size_t)hd * sizeof(float));
        llm__transpose_keys(keys, t.k_base, t.past + t.n_queries, t.kv_stride, t.g, hd, kt);
        llm__attend_head(&t, scores, qsave, st->cap.max_seq_len);
    }
}

/* Append the batch's keys and values (one sequence) to layer l's cache after `past` rows. */
static void llm__cache_append(const llm_model *m, llm_state *st, int32_t l, int64_t n_rows, float **k, float **v) {
    int64_t kv_dim = (int64_t)m->cfg.n_kv_heads * m->cfg.head_dim;
    size_t layer = (size_t)l * (size_t)st->cap.max_seq_len * (size_t)kv_dim;
    *k = st->cache_k + layer;
    *v = st->cache_v + layer;
    memcpy(*k + (size_t)st->past * kv_dim, st->k, (size_t)(n_rows * kv_dim) * sizeof(float));
    memcpy(*v + (size_t)st->past * kv_dim, st->v, (size_t)(n_rows * kv_dim) * sizeof(float));
}

static void llm__add_into(int nt, float *x, const float *y, int64_t n) {
    int64_t i;
    int par = n >= LLM_PAR_MIN_WORK;
    LLM_OMP_FOR
    for (i = 0; i < n; i++) x[i] += y[i];
}

/* h1 = silu(h1) * h3 */
static void llm__swiglu(int nt, float *h1, const float *h3, int64_t n) {
    int64_t i;
    int par = n >= LLM_PAR_MIN_WORK / 8;   /* expf makes each element dearer */
    LLM_OMP_FOR
    for (i = 0; i < n; i++) {
        float g = h1[i];
        h1[i] = g / (1.0f + expf(-g)) * h3[i];
    }
}

/* ---- the forward ------------------------------------------------------------------------------------ */
static grzo_status llm__attention_block(grzo_ctx *ctx, llm_model *m, llm_state *st, int32_t l, const grzo_rows *rows) {
    const llm_layer_blocks *L = &m->layers[l];
    float *keys = st->k, *values = st->v;
    const llm_config *c = &m->cfg;
    double t0;
    int64_t n = rows->n_rows;
    int nt = st->n_threads;
    llm__rms_normalize(nt, st->x, st->xn, n, c->dim, c->norm_eps);
    LLM_RET(llm__gain(ctx, m, st, L->attn_norm, st->xn, st->xg, rows, "llm: attn_norm"));
    LLM_RET(llm__linear(ctx, m, st, L->wq, st->xg, st->q, rows, "llm: attn_q"));
    LLM_RET(llm__linear(ctx, m, st, L->wk, st->xg, st->k, rows, "llm: attn_k"));
    LLM_RET(llm__linear(ctx, m, st, L->wv, st->xg, st->v, rows, "llm: attn_v"));
    llm__rope(nt, st, st->q, n, c->n_heads, c->head_dim);
    llm__rope(nt, st, st->k, n, c->n_kv_heads, c->head_dim);
    if (st->past >= 0) llm__cache_append(m, st, l, n, &keys, &values);
    t0 = llm__now();
    llm__attention(m, st, keys, values, st->past, n);
    st->prof.attention_s += llm__now() - t0;
    LLM_RET(llm__linear(ctx, m, st, L->wo, st->q, st->xn, rows, "llm: attn_output"));
    llm__add_into(nt, st->x, st->xn, n * c->dim);
    return GRZO_OK;
}

static grzo_status llm__mlp_block(grzo_ctx *ctx, llm_model *m, llm_state *st, const llm_layer_blocks *L,
                                  const grzo_rows *rows) {
    const llm_config *c = &m->cfg;
    int64_t n = rows->n_rows;
    int nt = st->n_threads;
    llm__rms_normalize(nt, st->x, st->xn, n, c->dim, c->norm_eps);
    LLM_RET(llm__gain(ctx, m, st, L->ffn_norm, st->xn, st->xg, rows, "llm: ffn_norm"));
    LLM_RET(llm__linear(ctx, m, st, L->w1, st->xg, st->h1, rows, "llm: ffn_gate"));
    LLM_RET(llm__linear(ctx, m, st, L->w3, st->xg, st->h3, rows, "llm: ffn_up"));
    llm__swiglu(nt, st->h1, st->h3, n * c->hidden_dim);
    LLM_RET(llm__linear(ctx, m, st, L->w2, st->h1, st->xn, rows, "llm: ffn_down"));
    llm__add_into(nt, st->x, st->xn, n * c->dim);
    return GRZO_OK;
}

/* Final norm and output head on the requested rows only. */
static grzo_status llm__head(grzo_ctx *ctx, llm_model *m, llm_state *st, const grzo_rows *out_rows, float *logits) {
    const llm_config *c = &m->cfg;
    int64_t n = out_rows->n_rows, i;
    int nt = st->n_threads, par = n * c->dim >= LLM_PAR_MIN_WORK;
    LLM_OMP_FOR
    for (i = 0; i < n; i++)
        memcpy(st->head_tmp + i * c->dim, st->x + st->out_row[i] * c->dim, (size_t)c->dim * sizeof(float));
    llm__rms_normalize(nt, st->head_tmp, st->head_tmp, n, c->dim, c->norm_eps);
    LLM_RET(llm__gain(ctx, m, st, m->final_norm, st->head_tmp, st->head_in, out_rows, "llm: output_norm"));
    LLM_RET(llm__linear(ctx, m, st, m->output, st->head_in, logits, out_rows, "llm: output"));
    return GRZO_OK;
}

static grzo_status llm__forward_rows(grzo_ctx *ctx, llm_model *m, llm_state *st, const llm_batch *batch, int64_t n_rows,
                                     int64_t n_out, float *logits) {
    grzo_rows tok_rows, out_rows;
    int32_t l;
    llm__layout(st, batch);
    tok_rows.n_rows = n_rows;
    tok_rows.offsets = batch->n_segments > 0 ? st->tok_off : NULL;
    out_rows.n_rows = n_out;
    out_rows.offsets = batch->n_segments > 0 ? st->out_off : NULL;
    LLM_RET(llm__embed(ctx, m, st, &tok_rows));
    for (l = 0; l < m->cfg.n_layers; l++) {
        LLM_RET(llm__attention_block(ctx, m, st, l, &tok_rows));
        LLM_RET(llm__mlp_block(ctx, m, st, &m->layers[l], &tok_rows));
    }
    /* a pass with no requested output still runs the head (on zero rows) for its checks */
    return llm__head(ctx, m, st, &out_rows, logits);
}

grzo_status llm_forward(grzo_ctx *ctx, llm_model *m, llm_state *st, const llm_batch *batch, float *logits) {
    int64_t n_rows = 0, n_out = 0;
    double t0;
    grzo_status s;
    if (!m) return GRZO_ERR_INVALID_ARG;
    if (!ctx || !st || !batch || !m->layers) return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_forward: ctx, a registered model, state and batch are required");
    if ((s = llm__check_batch(m, st, batch, &n_rows, &n_out)) != GRZO_OK) return s;
    if (n_out > 0 && !logits) return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_forward: logits is NULL");
    if (n_rows == 0) return GRZO_OK;
    t0 = llm__now();
    st->past = -1;
    s = llm__forward_rows(ctx, m, st, batch, n_rows, n_out, logits);
    st->prof.forward_s += llm__now() - t0;
    st->prof.n_forward++;
    st->prof.n_rows += n_rows;
    return s;
}

void llm_state_profile(const llm_state *st, llm_profile *out) {
    if (!st || !out) return;
    *out = st->prof;
}

void llm_state_profile_reset(llm_state *st) {
    if (st) memset(&st->prof, 0, sizeof st->prof);
}

/* ---- scoring ------------------------------------------------------------------------------------ */
double llm_log_softmax_at(const float *logits, int32_t n, int32_t token) {
    double mx = -INFINITY, sum = 0.0;
    int32_t i;
    if (!logits || token < 0 || token >= n) return -INFINITY;
    for (i = 0; i < n; i++)
        if (logits[i] > mx) mx = logits[i];
    for (i = 0; i < n; i++) sum += exp((double)logits[i] - mx);
    return (double)logits[token] - mx - log(sum);
}

/* Copy the batch with every scored position requested: positions n_context-1 .. n_tokens-2. */
static grzo_status llm__scoring_batch(llm_model *m, llm_state *st, const llm_batch *b, const int32_t *n_context,
                                      llm_batch *out) {
    int64_t used = 0;
    int32_t i, t;
    if (b->n_seqs > st->cap.max_seqs)
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_sequence_logprob: %d sequences exceed the state (%d)", b->n_seqs,
                         st->cap.max_seqs);
    for (i = 0; i < b->n_seqs; i++) {
        llm_seq q = b->seqs[i];
        if (n_context[i] < q.n_pad + 1 || n_context[i] >= q.n_tokens)
            return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_sequence_logprob: sequence %d: n_context %d must leave a "
                             "context token and a token to score (n_pad %d, n_tokens %d)", i, n_context[i], q.n_pad,
                             q.n_tokens);
        if (used + (q.n_tokens - n_context[i]) > st->cap.max_outputs)
            return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_sequence_logprob: more scored tokens than the state's "
                             "max_outputs (%lld)", (long long)st->cap.max_outputs);
        q.out_pos = st->lp_pos + used;
        q.n_out = q.n_tokens - n_context[i];
        for (t = 0; t < q.n_out; t++) st->lp_pos[used + t] = n_context[i] - 1 + t;
        used += q.n_out;
        st->lp_seqs[i] = q;
    }
    *out = *b;
    out->seqs = st->lp_seqs;
    return GRZO_OK;
}

grzo_status llm_sequence_logprob(grzo_ctx *ctx, llm_model *m, llm_state *st, const llm_batch *batch,
                                 const int32_t *n_context, double *sum_out, double *mean_out) {
    llm_batch sb;
    int64_t n_out = 0, o, V;
    int32_t i, t;
    int nt, par;
    grzo_status s;
    if (!m) return GRZO_ERR_INVALID_ARG;
    if (!ctx || !st || !batch || !n_context || (batch->n_seqs > 0 && !batch->seqs))
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_sequence_logprob: ctx, state, batch and n_context are required");
    if (!st->lp_logits) {
        s = llm__backend_buffer(m, st, st->cap.max_outputs, m->cfg.vocab_size, sizeof(float), (void **)&st->lp_logits);
        if (s != GRZO_OK) return s;
    }
    if ((s = llm__scoring_batch(m, st, batch, n_context, &sb)) != GRZO_OK) return s;
    if ((s = llm_forward(ctx, m, st, &sb, st->lp_logits)) != GRZO_OK) return s;
    for (i = 0; i < sb.n_seqs; i++) n_out += sb.seqs[i].n_out;
    /* the token scored by output o is the one after its position */
    for (i = 0, o = 0; i < sb.n_seqs; i++)
        for (t = 0; t < sb.seqs[i].n_out; t++, o++) st->lp_target[o] = sb.seqs[i].tokens[sb.seqs[i].out_pos[t] + 1];
    nt = st->n_threads;
    V = m->cfg.vocab_size;
    par = n_out > 1;
    LLM_OMP_FOR
    for (o = 0; o < n_out; o++) st->lp_val[o] = llm_log_softmax_at(st->lp_logits + o * V, (int32_t)V, st->lp_target[o]);
    for (i = 0, o = 0; i < sb.n_seqs; i++) {
        double sum = 0.0;
        for (t = 0; t < sb.seqs[i].n_out; t++) sum += st->lp_val[o++];
        if (sum_out) sum_out[i] = sum;
        if (mean_out) mean_out[i] = sum / sb.seqs[i].n_out;
    }
    return GRZO_OK;
}

/* ---- generation ---------------------------------------------------------------------------------- */
static int32_t llm__argmax(const float *x, int32_t n) {
    int32_t i, best = 0;
    for (i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* Draw from softmax(logits / temperature) with the uniform u in [0, 1). */
static int32_t llm__sample(const float *logits, int32_t n, float temperature, double u) {
    double mx = logits[llm__argmax(logits, n)], sum = 0.0, acc = 0.0;
    int32_t i;
    for (i = 0; i < n; i++) sum += exp(((double)logits[i] - mx) / temperature);
    for (i = 0; i < n; i++) {
        acc += exp(((double)logits[i] - mx) / temperature) / sum;
        if (u < acc) return i;
    }
    return n - 1;   /* rounding left acc just below 1 */
}

/* Forward tokens[0..n) at positions past .. past+n-1 of the one sequence in the cache,
   appending their keys and values; logits of the last one. */
static grzo_status llm__forward_cached(grzo_ctx *ctx, llm_model *m, llm_state *st, const int32_t *tokens, int32_t n,
                                       int32_t past, float *logits) {
    llm_seq seq;
    llm_batch b;
    int32_t last = n - 1;
    int64_t n_rows = 0, n_out = 0;
    grzo_status s;
    memset(&seq, 0, sizeof seq);
    seq.tokens = tokens;
    seq.n_tokens = n;
    seq.out_pos = &last;
    seq.n_out = 1;
    b.seqs = &seq;
    b.n_seqs = 1;
    b.n_segments = 0;
    if ((s = llm__check_batch(m, st, &b, &n_rows, &n_out)) != GRZO_OK) return s;
    st->past = past;
    s = llm__forward_rows(ctx, m, st, &b, n_rows, n_out, logits);
    st->past = -1;
    return s;
}

static grzo_status llm__generate_buffers(llm_model *m, llm_state *st) {
    int64_t cache = (int64_t)m->cfg.n_layers * st->cap.max_seq_len;
    grzo_status s = GRZO_OK;
    if (!st->lp_logits) s = llm__backend_buffer(m, st, st->cap.max_outputs, m->cfg.vocab_size, sizeof(float), (void **)&st->lp_logits);
    if (s == GRZO_OK && !st->cache_k)
        s = llm__backend_buffer(m, st, cache, (int64_t)m->cfg.n_kv_heads * m->cfg.head_dim, sizeof(float), (void **)&st->cache_k);
    if (s == GRZO_OK && !st->cache_v)
        s = llm__backend_buffer(m, st, cache, (int64_t)m->cfg.n_kv_heads * m->cfg.head_dim, sizeof(float), (void **)&st->cache_v);
    return s;
}

grzo_status llm_generate(grzo_ctx *ctx, llm_model *m, llm_state *st, int32_t *tokens, int32_t n_prompt,
                         const llm_generate_desc *desc, int32_t *n_total) {
    int32_t pos, V;
    grzo_status s;
    if (!m) return GRZO_ERR_INVALID_ARG;
    if (n_total) *n_total = n_prompt;
    if (!ctx || !st || !tokens || !desc || n_prompt < 1 || desc->steps < n_prompt || !(desc->temperature >= 0.0f))
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_generate: bad arguments (n_prompt %d, steps %d, temperature %g)",
                         n_prompt, desc ? desc->steps : 0, desc ? (double)desc->temperature : 0.0);
    if (desc->steps > st->cap.max_rows || desc->steps > st->cap.max_seq_len)
        return llm__fail(m, GRZO_ERR_INVALID_ARG, "llm_generate: %d steps exceed the state (rows %lld, seq_len %d)",
                         desc->steps, (long long)st->cap.max_rows, st->cap.max_seq_len);
    if ((s = llm__generate_buffers(m, st)) != GRZO_OK) return s;
    V = m->cfg.vocab_size;
    /* the prompt in one forward, then one row per new token against the cache */
    if ((s = llm__forward_cached(ctx, m, st, tokens, n_prompt, 0, st->lp_logits)) != GRZO_OK) return s;
    for (pos = n_prompt - 1; pos < desc->steps; pos++) {
        int32_t next = desc->temperature == 0.0f
                           ? llm__argmax(st->lp_logits, V)
                           : llm__sample(st->lp_logits, V, desc->temperature,
                                         grzo_uniform_at(desc->seed, (uint32_t)pos, GRZO_USER_BLOCK, 0, 0));
        if (next == desc->stop[0] || next == desc->stop[1]) break;
        tokens[pos + 1] = next;
        if (n_total) *n_total = pos + 2;
        if (desc->on_token && desc->on_token(tokens[pos], next, desc->user_data)) break;
        if (pos + 1 < desc->steps &&
            (s = llm__forward_cached(ctx, m, st, tokens + pos + 1, 1, pos + 1, st->lp_logits)) != GRZO_OK)
            return s;
    }
    return GRZO_OK;
}
