/* test_llm_gguf.c - the GGUF v3 loader against small Llama models written by the test.

   - every tensor type (F32, F16, BF16, Q8_0, Q4_0, Q4_1, and all mixed in one file) reads
     back exactly the values that went into the blocks (toy_model.h computes them from the
     block contents, not by dequantizing);
   - binary16 corner cases (subnormals, infinities, NaN, signed zero) convert exactly;
   - the config comes from the llama.* metadata (GQA, explicit key_length, epsilon, rotary
     base, context, tied/untied head), whatever else the metadata holds;
   - every strict prefix of a valid file, random byte flips, and a list of hostile edits
     (absurd counts and lengths, overflowing dimensions, bad offsets and alignments,
     duplicate names, unsupported types, missing or misshapen tensors) give an error
     message, never a crash;
   - the lower bound of every size (one layer, one head, one key/value head, a context of
     one position, one token) loads, a vocabulary of INT32_MAX rows passes the config (one
     more does not), and a tensor of no elements overlaps nothing;
   - the writers' binary16 / bfloat16 encodings (llm__f32_to_f16, llm__f32_to_bf16) of
     infinities, NaN and the values next to the largest finite ones. */
#include <float.h>
#include <math.h>

#include "llm_internal.h"
#include "llm_test.h"
#include "toy_model.h"

static uint64_t rd64(const uint8_t *p)
{
    uint64_t v = 0;
    int i;
    for (i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static void wr32(uint8_t *p, uint32_t v)
{
    int i;
    for (i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void wr64(uint8_t *p, uint64_t v)
{
    int i;
    for (i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Offset just past the GGUF string s (uint64 length + bytes) in the image, or 0. */
static size_t after_string(const uint8_t *img, size_t n, const char *s)
{
    size_t len = strlen(s), i;
    for (i = 0; i + 8 + len <= n; i++)
        if (memcmp(img + i + 8, s, len) == 0 && rd64(img + i) == len) return i + 8 + len;
    return 0;
}

/* ---- loading and comparing ---- */

static float *weight_ptr(const llm_weights *w, const char *name)
{
    int l;
    char suffix[64];
    if (strcmp(name, "token_embd.weight") == 0) return w->tok_emb;
    if (strcmp(name, "output_norm.weight") == 0) return w->final_norm;
    if (strcmp(name, "output.weight") == 0) return w->output;
    if (sscanf(name, "blk.%d.%63s", &l, suffix) != 2) return NULL;
    if (strcmp(suffix, "attn_norm.weight") == 0) return w->layers[l].attn_norm;
    if (strcmp(suffix, "attn_q.weight") == 0) return w->layers[l].wq;
    if (strcmp(suffix, "attn_k.weight") == 0) return w->layers[l].wk;
    if (strcmp(suffix, "attn_v.weight") == 0) return w->layers[l].wv;
    if (strcmp(suffix, "attn_output.weight") == 0) return w->layers[l].wo;
    if (strcmp(suffix, "ffn_norm.weight") == 0) return w->layers[l].ffn_norm;
    if (strcmp(suffix, "ffn_gate.weight") == 0) return w->layers[l].w1;
    if (strcmp(suffix, "ffn_down.weight") == 0) return w->layers[l].w2;
    if (strcmp(suffix, "ffn_up.weight") == 0) return w->layers[l].w3;
    return NULL;
}

/* bitwise equal, so that NaN == NaN and -0 != +0 */
static int same_float(float a, float b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

static void check_model(const toy_opts *o, const toy_model *m, const char *label)
{
    llm_config c;
    llm_weights w;
    char err[512] = "";
    int i, hd = o->key_length ? o->key_length : o->dim / o->heads;
    int rc = llm_load_memory(m->file, m->size, &c, &w, NULL, err, sizeof err);
    CHECKF(rc == 0, "%s: load failed: %s", label, err);
    if (rc) return;
    CHECKF(c.dim == o->dim && c.hidden_dim == o->hidden && c.n_layers == o->layers && c.n_heads == o->heads &&
               c.n_kv_heads == o->kv_heads && c.head_dim == hd && c.vocab_size == o->vocab && c.max_seq_len == o->ctx,
           "%s: config %d %d %d %d %d %d %d %d", label, (int)c.dim, (int)c.hidden_dim, (int)c.n_layers, (int)c.n_heads,
           (int)c.n_kv_heads, (int)c.head_dim, (int)c.vocab_size, (int)c.max_seq_len);
    CHECKF(c.norm_eps == 1e-6f && c.rope_theta == 500000.0f, "%s: eps %g theta %g", label, (double)c.norm_eps,
           (double)c.rope_theta);
    CHECKF(c.tied_output == !o->untied, "%s: tied_output %d", label, (int)c.tied_output);
    CHECKF((w.output == w.tok_emb) == !o->untied, "%s: output/tok_emb aliasing", label);
    for (i = 0; i < m->n_t; i++) {
        const toy_tensor *t = &m->t[i];
        const float *got = weight_ptr(&w, t->name);
        uint64_t k, bad = 0, first = 0;
        CHECKF(got != NULL, "%s: no slot for %s", label, t->name);
        if (!got) continue;
        for (k = 0; k < t->n; k++)
            if (!same_float(got[k], t->want[k]) && bad++ == 0) first = k;
        CHECKF(bad == 0, "%s: %s: %llu of %llu values differ, first at %llu: got %.9g want %.9g", label, t->name,
               (unsigned long long)bad, (unsigned long long)t->n, (unsigned long long)first, (double)got[first],
               (double)t->want[first]);
    }
    llm_weights_free(&w);
    CHECK(w.arena == NULL && w.tok_emb == NULL);
}

static void test_every_type(void)
{
    static const struct {
        uint32_t wtype, norm_type;
        int untied, alignment, extra_kv, key_length;
        const char *label;
    } cases[] = {
        {GW_F32, GW_F32, 0, 0, 0, 0, "F32"},
        {GW_F16, GW_F32, 1, 64, 1, 0, "F16 untied, alignment 64, assorted metadata"},
        {GW_BF16, GW_F16, 0, 0, 1, 0, "BF16 with F16 norms"},
        {GW_Q8_0, GW_F32, 1, 0, 0, 0, "Q8_0 untied"},
        {GW_Q4_0, GW_F16, 0, 256, 0, 0, "Q4_0, alignment 256"},
        {GW_Q4_1, GW_F32, 1, 0, 1, 0, "Q4_1 untied"},
        {TOY_MIXED, GW_F32, 1, 0, 1, 0, "mixed types"},
        {TOY_MIXED, GW_F16, 0, 8, 0, 32, "mixed, key_length 32 (attention width != dim), alignment 8"},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        toy_opts o = toy_defaults();
        toy_model m;
        o.wtype = cases[i].wtype;
        o.norm_type = cases[i].norm_type;
        o.untied = cases[i].untied;
        o.alignment = (uint32_t)cases[i].alignment;
        o.extra_kv = cases[i].extra_kv;
        o.key_length = cases[i].key_length;
        o.seed = 100 + i;
        toy_build(&o, &m);
        check_model(&o, &m, cases[i].label);
        toy_free(&m);
    }
}

/* The same model through llm_load (a file on disk) and with a missing file. */
static void test_file_path(void)
{
    const char *path = "test_llm_gguf.tmp.gguf";
    toy_opts o = toy_defaults();
    toy_model m;
    llm_config c;
    llm_weights w;
    llm_tokenizer *tok = (llm_tokenizer *)&w; /* must be reset to NULL: the file has no tokenizer */
    char err[512] = "";
    FILE *f;
    o.wtype = GW_Q4_1;
    toy_build(&o, &m);
    f = fopen(path, "wb");
    REQUIRE(f != NULL, "cannot write %s", path);
    REQUIRE(fwrite(m.file, 1, m.size, f) == m.size, "short write");
    fclose(f);
    CHECKF(llm_load(path, &c, &w, &tok, err, sizeof err) == 0, "llm_load: %s", err);
    CHECK(tok == NULL);
    CHECK(c.dim == 64 && c.n_layers == 2);
    CHECK(same_float(w.layers[1].wq[5], toy_find(&m, "blk.1.attn_q.weight")->want[5]));
    llm_weights_free(&w);
    remove(path);
    err[0] = 0;
    CHECK(llm_load("no/such/file.gguf", &c, &w, NULL, err, sizeof err) != 0);
    CHECKF(strstr(err, "no/such/file.gguf") != NULL, "error should name the file: %s", err);
    toy_free(&m);
}

/* binary16 corner cases in a norm vector: bits -> expected fp32, from the IEEE 754 table */
static void test_f16_corner_cases(void)
{
    static const struct {
        uint16_t bits;
        float want;
    } cases[] = {
        {0x3C00, 1.0f},        {0xC000, -2.0f},          {0x7BFF, 65504.0f},          {0x0400, 6.103515625e-05f},
        {0x0001, 5.9604644775390625e-08f}, {0x03FF, 6.0975551605224609375e-05f}, {0x8001, -5.9604644775390625e-08f},
        {0x3555, 0.333251953125f}, {0x0000, 0.0f},   {0x8000, -0.0f},             {0x7C00, INFINITY},
        {0xFC00, -INFINITY},
    };
    toy_opts o = toy_defaults();
    toy_model m;
    size_t pos, i;
    llm_config c;
    llm_weights w;
    char err[256] = "";
    o.norm_type = GW_F16;
    toy_build(&o, &m);
    /* overwrite the start of blk.0.attn_norm's data: find its info, then its offset */
    pos = after_string(m.file, m.size, "blk.0.attn_norm.weight");
    REQUIRE(pos != 0, "tensor info not found");
    {
        uint64_t off = rd64(m.file + pos + 4 + 8 + 4);
        size_t data_start = after_string(m.file, m.size, "token_embd.weight") + 4 + 16 + 4 + 8;
        data_start = (data_start + 31) / 32 * 32;
        for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            m.file[data_start + off + 2 * i] = (uint8_t)(cases[i].bits & 0xFF);
            m.file[data_start + off + 2 * i + 1] = (uint8_t)(cases[i].bits >> 8);
        }
        /* and a NaN after them */
        m.file[data_start + off + 2 * i] = 0x00;
        m.file[data_start + off + 2 * i + 1] = 0x7E;
    }
    REQUIRE(llm_load_memory(m.file, m.size, &c, &w, NULL, err, sizeof err) == 0, "load: %s", err);
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++)
        CHECKF(same_float(w.layers[0].attn_norm[i], cases[i].want), "f16 0x%04X -> %.10g, want %.10g", cases[i].bits,
               (double)w.layers[0].attn_norm[i], (double)cases[i].want);
    CHECK(isnan(w.layers[0].attn_norm[i]));
    llm_weights_free(&w);
    toy_free(&m);
}

/* The smallest sizes: one layer, one head (head_dim = dim), one key/value head, a context
   of one position and a vocabulary of one token. Each is the lower bound of a range the
   loader checks (check_config: every size > 0), so a bound off by one refuses this file. */
static void test_smallest_model(void)
{
    toy_opts o = toy_defaults();
    toy_model m;
    o.dim = 32;   /* the block types need rows of 32 */
    o.hidden = 32;
    o.layers = 1;
    o.heads = 1;
    o.kv_heads = 1;
    o.ctx = 1;
    o.vocab = 1;
    o.wtype = TOY_MIXED;
    o.untied = 1;
    toy_build(&o, &m);
    check_model(&o, &m, "smallest sizes");
    toy_free(&m);
}

/* The writers' conversions (grzo-export's F16/BF16 and Q8_0 scales, the safetensors
   writer): binary32 -> binary16 and -> bfloat16, round to nearest even. The expected bits
   are IEEE 754's encodings, worked out by hand: an infinity keeps its sign with an all-ones
   exponent and a zero significand (binary16 0x7C00, bfloat16 0x7F80), a NaN stays a NaN
   (all-ones exponent, a non-zero significand). binary16's largest finite value is
   65504 = 0x7BFF; 65520 lies halfway to 2^16 and ties to the even significand, which is
   the infinity's; 2^-25 lies halfway between 0 and the smallest subnormal 2^-24 (ties to
   0x0000), 3 * 2^-25 halfway between 2^-24 and 2^-23 (ties to 0x0002). In bfloat16 (8
   significant bits) 1 + 2^-8 ties to 1.0 = 0x3F80, 1 + 3 * 2^-8 to 1 + 2^-6 = 0x3F82, and
   FLT_MAX = (2 - 2^-23) * 2^127 lies past the midpoint between bfloat16's largest finite
   value (2 - 2^-7) * 2^127 = 0x7F7F and 2^128: infinity. */
static int is_f16_nan(uint16_t h) { return (h & 0x7C00u) == 0x7C00u && (h & 0x3FFu) != 0; }
static int is_bf16_nan(uint16_t h) { return (h & 0x7F80u) == 0x7F80u && (h & 0x7Fu) != 0; }

static void test_half_encodings(void)
{
    static const struct {
        float x;
        uint16_t f16, bf16;
    } cases[] = {
        {INFINITY, 0x7C00, 0x7F80},     {-INFINITY, 0xFC00, 0xFF80},   {1.0f, 0x3C00, 0x3F80},
        {-2.0f, 0xC000, 0xC000},        {65504.0f, 0x7BFF, 0x4780},    {65520.0f, 0x7C00, 0x4780},
        {0x1p-24f, 0x0001, 0x3380},     {0x1p-25f, 0x0000, 0x3300},    {0x3p-25f, 0x0002, 0x33C0},
        {0x1.01p0f, 0x3C04, 0x3F80},    {0x1.03p0f, 0x3C0C, 0x3F82},   {-0.0f, 0x8000, 0x8000},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t h = llm__f32_to_f16(cases[i].x), b = llm__f32_to_bf16(cases[i].x);
        CHECKF(h == cases[i].f16, "f16 of %a: 0x%04X, want 0x%04X", (double)cases[i].x, h, cases[i].f16);
        CHECKF(b == cases[i].bf16, "bf16 of %a: 0x%04X, want 0x%04X", (double)cases[i].x, b, cases[i].bf16);
    }
    CHECKF(llm__f32_to_bf16(FLT_MAX) == 0x7F80, "bf16 of FLT_MAX: 0x%04X", llm__f32_to_bf16(FLT_MAX));
    CHECKF(is_f16_nan(llm__f32_to_f16(NAN)) && is_f16_nan(llm__f32_to_f16(-NAN)), "f16 of NaN: 0x%04X",
           llm__f32_to_f16(NAN));
    CHECKF(is_bf16_nan(llm__f32_to_bf16(NAN)) && is_bf16_nan(llm__f32_to_bf16(-NAN)), "bf16 of NaN: 0x%04X",
           llm__f32_to_bf16(NAN));
}

/* ---- damaged files ---- */

static const char *const tiny_tokens[] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81", "a", "b", "\342\226\201a" /* U+2581 a */, "ab"};
static const float tiny_scores[] = {0, 0, 0, -1, -2, -3, -0.5f, -0.25f};
static const int32_t tiny_types[] = {2, 3, 3, 1, 1, 1, 1, 1};

/* a tiny model with an embedded tokenizer, for the exhaustive damage tests */
static toy_opts tiny_opts(void)
{
    toy_opts o = toy_defaults();
    o.dim = 32;
    o.hidden = 32;
    o.layers = 1;
    o.heads = 2;
    o.kv_heads = 1;
    o.vocab = 8;
    o.wtype = TOY_MIXED;
    o.untied = 1;
    o.tok_model = "llama";
    o.n_tokens = 8;
    o.tokens = tiny_tokens;
    o.scores = tiny_scores;
    o.types = tiny_types;
    o.bos = 1;
    o.eos = 2;
    return o;
}

static int load_fails_cleanly(const uint8_t *d, size_t n, const char *label, size_t at)
{
    llm_config c;
    llm_weights w;
    llm_tokenizer *tok = NULL;
    char err[512] = "";
    int rc = llm_load_memory(d, n, &c, &w, &tok, err, sizeof err);
    if (rc == 0) {
        llm_weights_free(&w);
        llm_tokenizer_free(tok);
        fprintf(stderr, "    %s %zu: loaded\n", label, at);
        return 0;
    }
    if (err[0] == '\0' || tok != NULL || w.arena != NULL) {
        fprintf(stderr, "    %s %zu: failed without a message or leaked outputs\n", label, at);
        return 0;
    }
    return 1;
}

static void test_every_prefix(void)
{
    toy_opts o = tiny_opts();
    toy_model m;
    size_t len, bad = 0;
    llm_config c;
    llm_weights w;
    llm_tokenizer *tok = NULL;
    char err[256] = "";
    toy_build(&o, &m);
    REQUIRE(llm_load_memory(m.file, m.size, &c, &w, &tok, err, sizeof err) == 0, "tiny model: %s", err);
    CHECK(tok != NULL && llm_tokenizer_vocab(tok) == 8);
    llm_weights_free(&w);
    llm_tokenizer_free(tok);
    for (len = 0; len < m.size; len++) {
        /* a fresh copy of exactly len bytes, so that ASan sees any read past the end */
        uint8_t *cut = (uint8_t *)malloc(len ? len : 1);
        REQUIRE(cut != NULL, "out of memory");
        memcpy(cut, m.file, len);
        if (!load_fails_cleanly(cut, len, "prefix", len)) bad++;
        if (len < 2000) {
            llm_tokenizer *t2 = NULL;
            int rc = llm_tokenizer_load_gguf_memory(cut, len, &t2, err, sizeof err);
            llm_tokenizer_free(t2);
            (void)rc; /* a prefix holding the whole tokenizer may load: only no crash matters */
        }
        free(cut);
    }
    CHECKF(bad == 0, "%zu of %zu prefixes did not fail cleanly", bad, m.size);
    toy_free(&m);
}

static void test_random_flips(void)
{
    toy_opts o = tiny_opts();
    toy_model m;
    lt_rng r = {12345};
    int it, loaded = 0;
    size_t meta_end;
    toy_build(&o, &m);
    meta_end = after_string(m.file, m.size, "token_embd.weight") + 32;
    for (it = 0; it < 3000; it++) {
        uint8_t *d = (uint8_t *)malloc(m.size);
        int k, flips = 1 + (int)lt_below(&r, 8);
        llm_config c;
        llm_weights w;
        llm_tokenizer *tok = NULL;
        char err[256];
        REQUIRE(d != NULL, "out of memory");
        memcpy(d, m.file, m.size);
        for (k = 0; k < flips; k++) {
            /* mostly in the header and metadata, where the parsing happens */
            size_t pos = lt_below(&r, 4) ? lt_below(&r, (uint32_t)meta_end) : lt_below(&r, (uint32_t)m.size);
            d[pos] = lt_below(&r, 2) ? (uint8_t)(d[pos] ^ (1u << lt_below(&r, 8))) : (uint8_t)lt_next(&r);
        }
        if (llm_load_memory(d, m.size, &c, &w, &tok, err, sizeof err) == 0) {
            loaded++;
            CHECK(c.dim > 0 && c.vocab_size > 0 && w.tok_emb != NULL);
            if (tok) {
                int32_t ids[64], n;
                llm_tokenize(tok, "ab a <s>b", 1, ids, 64, &n, err, sizeof err);
            }
            llm_weights_free(&w);
            llm_tokenizer_free(tok);
        }
        free(d);
    }
    printf("random flips: %d of 3000 damaged files still loaded (flips in tensor data are harmless)\n", loaded);
    toy_free(&m);
}

/* Expect a load error whose message contains `want`. */
static void expect_error(const uint8_t *d, size_t n, const char *want, const char *label)
{
    llm_config c;
    llm_weights w;
    llm_tokenizer *tok = NULL;
    char err[512] = "";
    int rc = llm_load_memory(d, n, &c, &w, &tok, err, sizeof err);
    CHECKF(rc != 0, "%s: loaded", label);
    if (rc == 0) {
        llm_weights_free(&w);
        llm_tokenizer_free(tok);
        return;
    }
    CHECKF(strstr(err, want) != NULL, "%s: error \"%s\" lacks \"%s\"", label, err, want);
}

/* Patch a field of a tensor info: which = -1 n_dims, 0..3 ne[i], 4 type, 5 offset. */
static void patch_tensor(uint8_t *img, size_t n, const char *name, int which, uint64_t v)
{
    size_t p = after_string(img, n, name);
    uint32_t nd;
    REQUIRE(p != 0, "tensor %s not found", name);
    nd = (uint32_t)img[p] | (uint32_t)img[p + 1] << 8;
    if (which == -1) wr32(img + p, (uint32_t)v);
    else if (which <= 3) wr64(img + p + 4 + 8 * (size_t)which, v);
    else if (which == 4) wr32(img + p + 4 + 8 * nd, (uint32_t)v);
    else wr64(img + p + 8 + 8 * nd, v);
}

static void rename_string(uint8_t *img, size_t n, const char *from, const char *to)
{
    size_t p = after_string(img, n, from);
    REQUIRE(p != 0 && strlen(from) == strlen(to), "cannot rename %s", from);
    memcpy(img + p - strlen(from), to, strlen(to));
}

/* Each case edits a fresh copy of a valid model. */
static void test_hostile_tensors(void)
{
    toy_opts o = tiny_opts();
    toy_model m;
    uint8_t *d;
    toy_build(&o, &m);
    d = (uint8_t *)malloc(m.size);
    REQUIRE(d != NULL, "out of memory");
#define FRESH memcpy(d, m.file, m.size)
    FRESH, memcpy(d, "GGUG", 4);
    /* not GGUF: read as a llama2.c checkpoint, whose header is then nonsense */
    CHECK(load_fails_cleanly(d, m.size, "bad magic", 0));
    FRESH, wr32(d + 4, 2);
    expect_error(d, m.size, "version 2", "version 2");
    FRESH, wr64(d + 8, 1ull << 62);
    expect_error(d, m.size, "tensors", "huge tensor count");
    FRESH, wr64(d + 16, (uint64_t)-1);
    expect_error(d, m.size, "metadata entries", "huge metadata count");
    FRESH, wr64(d + 24, 1ull << 63); /* the first key's length */
    expect_error(d, m.size, "truncated", "huge key length");
    FRESH, patch_tensor(d, m.size, "blk.0.attn_q.weight", -1, 5);
    expect_error(d, m.size, "dimensions", "5 dimensions");
    FRESH, patch_tensor(d, m.size, "blk.0.attn_q.weight", 0, 1ull << 40), patch_tensor(d, m.size, "blk.0.attn_q.weight", 1, 1ull << 40);
    expect_error(d, m.size, "overflow", "dimension overflow");
    FRESH, patch_tensor(d, m.size, "blk.0.attn_q.weight", 1, 1ull << 20);
    expect_error(d, m.size, "past the end", "tensor larger than the file");
    FRESH, patch_tensor(d, m.size, "output_norm.weight", 5, (uint64_t)m.size / 32 * 32);
    expect_error(d, m.size, "past the end", "offset beyond the end");
    FRESH, patch_tensor(d, m.size, "output_norm.weight", 5, (uint64_t)-32);
    expect_error(d, m.size, "past the end", "offset near 2^64");
    FRESH, patch_tensor(d, m.size, "output_norm.weight", 5, 4);
    expect_error(d, m.size, "not aligned", "unaligned offset");
    { /* two tensors naming the same bytes */
        size_t a = after_string(m.file, m.size, "output_norm.weight");
        FRESH, patch_tensor(d, m.size, "blk.0.attn_norm.weight", 5, rd64(m.file + a + 4 + 8 + 4));
        expect_error(d, m.size, "overlap", "overlapping tensors");
    }
    /* metadata claiming a much bigger model than the tensors: refused before allocating */
    FRESH, wr32(d + after_string(d, m.size, "llama.block_count") + 4, 60000);
    expect_error(d, m.size, "blk.1.attn_norm.weight' is missing", "60000 layers claimed");
    FRESH, wr32(d + after_string(d, m.size, "llama.feed_forward_length") + 4, 1 << 20);
    expect_error(d, m.size, "shape", "huge feed-forward width claimed");
    FRESH, patch_tensor(d, m.size, "blk.0.attn_q.weight", 4, GW_Q4_K);
    expect_error(d, m.size, "Q4_K", "unsupported type");
    FRESH, patch_tensor(d, m.size, "blk.0.attn_q.weight", 4, 77);
    expect_error(d, m.size, "unknown type 77", "unknown type");
    { /* every type the loader names but does not dequantize (ggml's enum ggml_type: Q5_0 6,
         Q5_1 7, Q8_1 9, Q2_K..Q8_K 10..15) is refused by that name; one given a block size
         by mistake would pass, its weights never written */
        static const struct {
            uint32_t type;
            const char *name;
        } unread[] = {{6, "Q5_0"},  {7, "Q5_1"},  {9, "Q8_1"},  {10, "Q2_K"}, {11, "Q3_K"},
                      {12, "Q4_K"}, {13, "Q5_K"}, {14, "Q6_K"}, {15, "Q8_K"}};
        size_t i;
        for (i = 0; i < sizeof unread / sizeof unread[0]; i++) {
            char want[96];
            snprintf(want, sizeof want, "'blk.0.attn_q.weight' is %s, which this loader does not dequantize", unread[i].name);
            FRESH, patch_tensor(d, m.size, "blk.0.attn_q.weight", 4, unread[i].type);
            expect_error(d, m.size, want, unread[i].name);
        }
    }
    { /* a tensor of no elements takes no bytes wherever its offset points, so it overlaps
         nothing: blk.0.attn_norm.weight made [0] at data offset 32, inside the 128 bytes of
         output_norm.weight (the first tensor, at 0). The file's tokenizer loads; as a model
         the file is refused for that tensor's shape. */
        llm_tokenizer *tok = NULL;
        char err[256] = "";
        FRESH, patch_tensor(d, m.size, "blk.0.attn_norm.weight", 0, 0);
        patch_tensor(d, m.size, "blk.0.attn_norm.weight", 5, 32);
        CHECKF(llm_tokenizer_load_gguf_memory(d, m.size, &tok, err, sizeof err) == 0, "empty tensor: %s", err);
        llm_tokenizer_free(tok);
        expect_error(d, m.size, "'blk.0.attn_norm.weight' has shape [0, 1, 1, 1]", "empty tensor as a model");
    }
    { /* the vocabulary is the embedding's row count, an int32_t: up to INT32_MAX rows. As Q4_K
         (refused, so never sized: no data needed) the embedding can claim that many; at
         INT32_MAX the file is refused only for the type, one row more for the shape. */
        FRESH, rename_string(d, m.size, "llama.vocab_size", "llama.vocab_siz_");
        patch_tensor(d, m.size, "token_embd.weight", 4, GW_Q4_K);
        patch_tensor(d, m.size, "token_embd.weight", 1, (uint64_t)INT32_MAX);
        expect_error(d, m.size, "'token_embd.weight' is Q4_K", "vocabulary of INT32_MAX");
        patch_tensor(d, m.size, "token_embd.weight", 1, (uint64_t)INT32_MAX + 1);
        expect_error(d, m.size, "'token_embd.weight' is not a [dim, vocab] matrix", "vocabulary past INT32_MAX");
    }
    FRESH, patch_tensor(d, m.size, "output_norm.weight", 0, 16);
    expect_error(d, m.size, "shape", "wrong vector length");
    FRESH, rename_string(d, m.size, "blk.0.ffn_up.weight", "blk.0.ffn_xx.weight");
    expect_error(d, m.size, "blk.0.ffn_up.weight", "missing tensor");
    FRESH, rename_string(d, m.size, "blk.0.ffn_up.weight", "blk.0.ffn_gate.weig");
    CHECK(load_fails_cleanly(d, m.size, "renamed", 0));
    FRESH, rename_string(d, m.size, "blk.0.ffn_up.weight", "blk.0.ffn_up.weigh!");
    expect_error(d, m.size, "blk.0.ffn_up.weight", "missing tensor 2");
    FRESH, rename_string(d, m.size, "output_norm.weight", "output_nor.xx.bias");
    expect_error(d, m.size, "bias", "bias tensor");
    /* a tensor the forward would ignore means another model (Qwen3's q/k norms, a layer past
       llama.block_count): refused by name once every tensor it takes is found. output.weight
       renamed to q_norm.weight leaves a tied model and one tensor too many. */
    FRESH, rename_string(d, m.size, "output.weight", "q_norm.weight");
    expect_error(d, m.size, "GGUF tensor 'q_norm.weight' is not one this Llama forward uses", "an unknown tensor");
    FRESH, rename_string(d, m.size, "output.weight", "blk.0..weight");
    expect_error(d, m.size, "'blk.0..weight' is not one", "a layer tensor without its part");
    { /* a model of two layers whose llama.block_count says one */
        toy_opts o2 = tiny_opts();
        toy_model m2;
        o2.layers = 2;
        toy_build(&o2, &m2);
        wr32(m2.file + after_string(m2.file, m2.size, "llama.block_count") + 4, 1);
        expect_error(m2.file, m2.size, "'blk.1.", "a layer past llama.block_count");
        expect_error(m2.file, m2.size, "is not one this Llama forward uses", "a layer past llama.block_count");
        toy_free(&m2);
    }
    FRESH, rename_string(d, m.size, "blk.0.ffn_up.weight", "blk.00.ffn_up.weigh");
    expect_error(d, m.size, "blk.0.ffn_up.weight' is missing", "a layer number with a leading zero");
    FRESH, rename_string(d, m.size, "blk.0.attn_k.weight", "blk.0.attn_q.weight");
    expect_error(d, m.size, "duplicate tensor", "duplicate tensor");
    FRESH, rename_string(d, m.size, "general.architecture", "general.architectur_");
    expect_error(d, m.size, "general.architecture", "missing architecture");
    FRESH, rename_string(d, m.size, "llama", "gpt2!");
    expect_error(d, m.size, "architecture", "other architecture");
    FRESH, rename_string(d, m.size, "llama.block_count", "llama.block_coun_");
    expect_error(d, m.size, "llama.block_count", "missing layer count");
    FRESH, rename_string(d, m.size, "llama.vocab_size", "llama.vocab_siz_");
    { /* llama.vocab_size is optional: the embedding's row count gives it */
        llm_config c;
        llm_weights w;
        char err[256] = "";
        CHECKF(llm_load_memory(d, m.size, &c, &w, NULL, err, sizeof err) == 0 && c.vocab_size == 8, "%s", err);
        llm_weights_free(&w);
    }
    /* a value patched in place: llama.attention.head_count_kv = 3 (2 heads) */
    FRESH, wr32(d + after_string(d, m.size, "llama.attention.head_count_kv") + 4, 3);
    expect_error(d, m.size, "head count", "kv heads not dividing heads");
    FRESH, wr32(d + after_string(d, m.size, "llama.vocab_size") + 4, 9);
    expect_error(d, m.size, "llama.vocab_size", "vocab_size disagrees with the embedding");
    FRESH, wr32(d + after_string(d, m.size, "llama.rope.dimension_count") + 4, 8);
    expect_error(d, m.size, "rope.dimension_count", "partial rotary");
    /* the RMSNorm epsilon (a float32) must lie in (0, 1): both ends refused */
    FRESH, wr32(d + after_string(d, m.size, "llama.attention.layer_norm_rms_epsilon") + 4, 0);
    expect_error(d, m.size, "bad RMSNorm epsilon 0", "epsilon 0");
    FRESH, wr32(d + after_string(d, m.size, "llama.attention.layer_norm_rms_epsilon") + 4, 0x3F800000u); /* 1.0f */
    expect_error(d, m.size, "bad RMSNorm epsilon 1", "epsilon 1");
    FRESH, wr32(d + after_string(d, m.size, "llama.embedding_length"), 6); /* now a float32 */
    expect_error(d, m.size, "expected an integer", "width as a float");
    FRESH, wr32(d + after_string(d, m.size, "tokenizer.ggml.bos_token_id") + 4, 8);
    expect_error(d, m.size, "bos_token_id", "bos out of range");
#undef FRESH
    free(d);
    toy_free(&m);
}

/* llama.attention.key_length = 0 is out of its range (1..), not "absent" (head_dim =
   dim / heads): with key_length 16 = 64 / 4 the model loads, and with 0 in its place it is
   refused, although dim / heads would fit the file exactly. */
static void test_key_length_zero(void)
{
    toy_opts o = toy_defaults();
    toy_model m;
    size_t at;
    o.key_length = 16;
    toy_build(&o, &m);
    check_model(&o, &m, "key_length = dim / heads");
    at = after_string(m.file, m.size, "llama.attention.key_length");
    REQUIRE(at != 0, "no key_length");
    wr32(m.file + at + 4, 0);
    expect_error(m.file, m.size, "'llama.attention.key_length' = 0 is outside 1..", "key_length 0");
    toy_free(&m);
}

/* Metadata-level damage, on files written key by key. */
static void test_hostile_metadata(void)
{
    gguf_builder g;
    uint8_t *img;
    size_t n;
    char err[512];
    llm_tokenizer *tok = NULL;

/* PARSE: a damaged file structure, which both loaders must refuse with the same message;
   TOKENIZER: a well-formed file whose tokenizer metadata is wrong. */
#define BUILD(setup)                                                                                   \
    gb_init(&g);                                                                                       \
    setup;                                                                                             \
    img = gb_finish(&g, &n);                                                                           \
    err[0] = 0;                                                                                        \
    tok = NULL
#define TOKENIZER(setup, want)                                                                         \
    do {                                                                                               \
        BUILD(setup);                                                                                  \
        CHECKF(llm_tokenizer_load_gguf_memory(img, n, &tok, err, sizeof err) != 0, "%s: loaded", want); \
        CHECKF(strstr(err, want) != NULL, "error \"%s\" lacks \"%s\"", err, want);                     \
        CHECK(tok == NULL);                                                                            \
        free(img);                                                                                     \
        gb_free(&g);                                                                                   \
    } while (0)
#define PARSE(setup, want)                                                                             \
    do {                                                                                               \
        BUILD(setup);                                                                                  \
        expect_error(img, n, want, want);                                                              \
        free(img);                                                                                     \
        gb_free(&g);                                                                                   \
        TOKENIZER(setup, want);                                                                        \
    } while (0)

    PARSE((gb_kv_u32(&g, "a.b", 1), gb_kv_u32(&g, "a.b", 2)), "duplicate metadata key");
    PARSE(gb_kv_array(&g, "a.nested", GW_ARRAY, 1), "arrays of arrays");
    PARSE((gb_key(&g, "a.flag", GW_BOOL), gw_u8(&g.kv, 7)), "neither 0 nor 1");
    /* an array's every element is checked, not only its first */
    PARSE((gb_kv_array(&g, "a.flags", GW_BOOL, 3), gw_u8(&g.kv, 0), gw_u8(&g.kv, 1), gw_u8(&g.kv, 2)),
          "metadata 'a.flags': bool value is neither 0 nor 1");
    PARSE((gb_key(&g, "a.odd", 13), gw_u32(&g.kv, 0)), "unknown value type 13");
    PARSE((gb_kv_array(&g, "a.strings", GW_STRING, 1ull << 60)), "cannot fit");
    PARSE((gb_kv_array(&g, "a.ints", GW_UINT32, 1ull << 62)), "overflows");
    PARSE((gb_kv_array(&g, "a.ints", GW_UINT64, 1000), gw_u64(&g.kv, 1)), "truncated");
    PARSE((gb_key(&g, "a.s", GW_STRING), gw_u64(&g.kv, 1ull << 50)), "truncated");
    /* a string array whose second string runs past the end, as the file's last metadata
       (nothing after it would fail in its place) */
    PARSE((gb_kv_array(&g, "a.strings", GW_STRING, 2), gw_str(&g.kv, "x"), gw_u64(&g.kv, 1000)),
          "metadata 'a.strings' needs 1000 bytes");
    PARSE((gb_key(&g, "", GW_UINT8), gw_u8(&g.kv, 1)), "key length 0");
    PARSE(gb_kv_u32(&g, "general.alignment", 48), "power of two");
    PARSE(gb_kv_u32(&g, "general.alignment", 0), "power of two");
    PARSE(gb_kv_str(&g, "general.alignment", "32"), "uint32");
    /* metadata of the wrong type is refused as such, not read as absent */
    BUILD(gb_kv_u32(&g, "general.architecture", 1));
    expect_error(img, n, "'general.architecture' is a uint32, expected a string", "architecture as an integer");
    free(img);
    gb_free(&g);
    TOKENIZER(gb_kv_str(&g, "general.architecture", "llama"), "tokenizer.ggml.model is missing");
    TOKENIZER(gb_kv_str(&g, "tokenizer.ggml.model", "bert"), "'bert' is not supported");
    TOKENIZER(gb_kv_str(&g, "tokenizer.ggml.model", "llama"), "tokenizer.ggml.tokens' is missing");
    TOKENIZER((gb_kv_str(&g, "tokenizer.ggml.model", "llama"), gb_kv_array(&g, "tokenizer.ggml.tokens", GW_UINT32, 0)),
         "must be an array of string");
    {
        static const char *const toks[] = {"a", "b", "ab"};
        static const char *const merges_bad[] = {"ab"};
        static const float two[] = {0, 0};
        TOKENIZER((gb_kv_str(&g, "tokenizer.ggml.model", "gpt2"), gb_kv_strings(&g, "tokenizer.ggml.tokens", toks, 3)),
             "merges' is missing");
        TOKENIZER((gb_kv_str(&g, "tokenizer.ggml.model", "gpt2"), gb_kv_strings(&g, "tokenizer.ggml.tokens", toks, 3),
              gb_kv_strings(&g, "tokenizer.ggml.merges", merges_bad, 1)),
             "no space");
        TOKENIZER((gb_kv_str(&g, "tokenizer.ggml.model", "gpt2"), gb_kv_str(&g, "tokenizer.ggml.pre", "qwen9"),
              gb_kv_strings(&g, "tokenizer.ggml.tokens", toks, 3), gb_kv_strings(&g, "tokenizer.ggml.merges", toks, 0)),
             "'qwen9' is not supported");
        TOKENIZER((gb_kv_str(&g, "tokenizer.ggml.model", "llama"), gb_kv_strings(&g, "tokenizer.ggml.tokens", toks, 3),
              gb_kv_f32s(&g, "tokenizer.ggml.scores", two, 2)),
             "2 scores for 3 tokens");
        TOKENIZER((gb_kv_str(&g, "tokenizer.ggml.model", "llama"), gb_kv_strings(&g, "tokenizer.ggml.tokens", toks, 3),
              gb_kv_i32(&g, "tokenizer.ggml.eos_token_id", -2)),
             "eos_token_id");
    }
    /* a model whose tokenizer has more tokens than the model has embeddings */
    {
        static const char *const toks[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i"};
        toy_opts o = tiny_opts();
        toy_model m;
        o.n_tokens = 9;
        o.tokens = toks;
        o.scores = NULL;
        o.types = NULL;
        toy_build(&o, &m);
        expect_error(m.file, m.size, "9 tokens", "tokenizer larger than the model");
        toy_free(&m);
    }
#undef PARSE
#undef TOKENIZER
#undef BUILD
}

/* A tokenizer-only GGUF (no tensors) is not a model, but is a tokenizer. */
static void test_vocab_only_file(void)
{
    toy_opts o = tiny_opts();
    toy_model m;
    llm_tokenizer *tok = NULL;
    char err[256] = "";
    o.no_model = 1;
    toy_build(&o, &m);
    CHECKF(llm_tokenizer_load_gguf_memory(m.file, m.size, &tok, err, sizeof err) == 0, "vocab-only: %s", err);
    CHECK(tok && llm_tokenizer_vocab(tok) == 8 && llm_tokenizer_bos(tok) == 1 && llm_tokenizer_eos(tok) == 2);
    CHECK(tok && strcmp(llm_tokenizer_model(tok), "llama") == 0);
    llm_tokenizer_free(tok);
    expect_error(m.file, m.size, "architecture 'gpt2'", "vocab-only file as a model");
    toy_free(&m);
}

/* BOS may be token 0 (the files say so; no id is special): add_bos must still add it. */
static void test_bos_zero(void)
{
    toy_opts o = tiny_opts();
    toy_model m;
    llm_tokenizer *tok = NULL;
    int32_t ids[16], n = 0;
    char err[256] = "";
    o.no_model = 1;
    o.bos = 0;
    toy_build(&o, &m);
    CHECKF(llm_tokenizer_load_gguf_memory(m.file, m.size, &tok, err, sizeof err) == 0, "bos 0: %s", err);
    CHECK(tok && llm_tokenizer_bos(tok) == 0);
    CHECKF(tok && llm_tokenize(tok, "", 1, ids, 16, &n, err, sizeof err) == 0 && n == 1 && ids[0] == 0,
           "bos 0: add_bos gave %d ids, the first %d (%s)", (int)n, n > 0 ? (int)ids[0] : -1, err);
    llm_tokenizer_free(tok);
    toy_free(&m);
}

int main(void)
{
    test_every_type();
    test_bos_zero();
    test_file_path();
    test_f16_corner_cases();
    test_smallest_model();
    test_key_length_zero();
    test_half_encodings();
    test_vocab_only_file();
    test_hostile_tensors();
    test_hostile_metadata();
    test_every_prefix();
    test_random_flips();
    return lt_finish("test_llm_gguf");
}
