/* load.c - model files for the grzo LLM examples: llama2.c checkpoints and GGUF v3
   (Hugging Face folders: load_hf.c, reached through llm_load).

   Both formats are parsed from a file image in memory (the whole file is read first), so
   every read goes through one bounds-checked cursor and a truncated or hostile file ends
   in an error message, never a read past the end. Every count, size and offset is checked
   with overflow-safe arithmetic before it is used, and memory is only allocated once the
   bytes that justify it are known to be in the file (a 1 KiB file cannot make us allocate
   more than a small multiple of 1 KiB).

   All weights are dequantized to fp32 at load into one arena (llm_weights.arena).

   GGUF references: the GGUF v3 spec (ggml docs/gguf.md) and ggml's block layouts
   (ggml-common.h, dequantize_row_* in ggml-quants.c); no code is taken from them. */
#if !defined(_WIN32)
#define _POSIX_C_SOURCE 200809L   /* fstat, fileno */
#endif

#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "llm.h"
#include "llm_internal.h"

/* ------------------------------------------------------------------------------------ */
/* Overflow-safe size arithmetic (uint64_t; a final check narrows to size_t).           */

static int mul_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    if (a != 0 && b > UINT64_MAX / a) return 1;
    *out = a * b;
    return 0;
}

static int add_u64(uint64_t a, uint64_t b, uint64_t *out)
{
    if (b > UINT64_MAX - a) return 1;
    *out = a + b;
    return 0;
}

/* ------------------------------------------------------------------------------------ */
/* Reading whole files.                                                                  */

/* The size comes from fstat, not fseek/ftell: fopen succeeds on a directory, whose
   "size" by fseek/ftell is LONG_MAX (which became "out of memory reading
   9223372036854775807 bytes"). Only regular files are read; errors name the path and
   the system's reason (permission denied, no such file, ...). */
int llm__read_file(const char *path, size_t max_bytes, uint8_t **data, size_t *size, char *err, size_t errlen)
{
    FILE *f;
    struct stat st;
    uint8_t *buf;
    size_t n;
    int e;

    *data = NULL;
    *size = 0;
    if (!path) return llm__errf(err, errlen, "no file name given");
    f = fopen(path, "rb");
    if (!f) return llm__errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fileno(f), &st) != 0) {
        e = errno;
        fclose(f);
        return llm__errf(err, errlen, "%s: cannot open: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        fclose(f);
        return llm__errf(err, errlen, "%s: %s", path, S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file");
    }
    if ((uint64_t)st.st_size > (uint64_t)max_bytes) {
        fclose(f);
        return llm__errf(err, errlen, "%s: %lld bytes is more than this loader accepts", path, (long long)st.st_size);
    }
    n = (size_t)st.st_size;
    buf = (uint8_t *)malloc(n ? n : 1);
    if (!buf) {
        fclose(f);
        return llm__errf(err, errlen, "%s: out of memory reading %zu bytes", path, n);
    }
    if (n && fread(buf, 1, n, f) != n) {
        e = ferror(f) ? errno : 0;
        free(buf);
        fclose(f);
        return llm__errf(err, errlen, "%s: cannot read: %s", path, e ? strerror(e) : "the file shrank while it was read");
    }
    fclose(f);
    *data = buf;
    *size = n;
    return 0;
}

/* ------------------------------------------------------------------------------------ */
/* A bounds-checked little-endian cursor over a file image.                              */

typedef struct reader {
    const uint8_t *p;
    size_t n;
    size_t pos;
    char *err;
    size_t errlen;
} reader;

static int rd_need(reader *r, uint64_t k, const char *what)
{
    if (k > (uint64_t)(r->n - r->pos))
        return llm__errf(r->err, r->errlen, "truncated or corrupt file: %s needs %llu bytes at offset %zu, %zu left",
                         what, (unsigned long long)k, r->pos, r->n - r->pos);
    return 0;
}

static uint32_t le32(const uint8_t *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static uint64_t le64(const uint8_t *b)
{
    return (uint64_t)le32(b) | (uint64_t)le32(b + 4) << 32;
}

static uint16_t le16(const uint8_t *b)
{
    return (uint16_t)(b[0] | b[1] << 8);
}

static int rd_u32(reader *r, uint32_t *v, const char *what)
{
    if (rd_need(r, 4, what)) return 1;
    *v = le32(r->p + r->pos);
    r->pos += 4;
    return 0;
}

static int rd_u64(reader *r, uint64_t *v, const char *what)
{
    if (rd_need(r, 8, what)) return 1;
    *v = le64(r->p + r->pos);
    r->pos += 8;
    return 0;
}

static int rd_skip(reader *r, uint64_t k, const char *what)
{
    if (rd_need(r, k, what)) return 1;
    r->pos += (size_t)k;
    return 0;
}

/* GGUF string: uint64 length, then that many bytes (no terminator). */
static int rd_gguf_str(reader *r, llm_bytes *s, const char *what)
{
    uint64_t len;
    if (rd_u64(r, &len, what) || rd_need(r, len, what)) return 1;
    s->p = (const char *)(r->p + r->pos);
    s->n = (size_t)len;
    r->pos += (size_t)len;
    return 0;
}

static int bytes_eq(llm_bytes a, const char *s)
{
    size_t n = strlen(s);
    return a.n == n && memcmp(a.p, s, n) == 0;
}

/* ------------------------------------------------------------------------------------ */
/* Number formats.                                                                       */

static float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* IEEE binary16 -> binary32, exact for every input (subnormals, inf and NaN included). */
static float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t bits;

    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13); /* inf or NaN (payload kept) */
    } else if (exp != 0) {
        bits = sign | ((exp + 112u) << 23) | (man << 13); /* rebias 15 -> 127 */
    } else if (man == 0) {
        bits = sign; /* signed zero */
    } else {
        /* subnormal: man * 2^-24, exact in binary32 */
        float f = (float)man * (1.0f / 16777216.0f);
        return sign ? -f : f;
    }
    return f32_from_bits(bits);
}

static float bf16_to_f32(uint16_t h)
{
    return llm__bf16_to_f32(h);
}

float llm__f16_to_f32(uint16_t h)
{
    return f16_to_f32(h);
}

/* binary32 -> binary16, round to nearest even; overflow to inf, NaN stays NaN. */
uint16_t llm__f32_to_f16(float f)
{
    uint32_t x, sign, mag;
    memcpy(&x, &f, sizeof x);
    sign = (x >> 16) & 0x8000u;
    mag = x & 0x7fffffffu;
    if (mag >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (mag > 0x7f800000u ? 0x200u : 0));
    if (mag >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);   /* rounds past 65504: inf */
    if (mag < 0x38800000u) {                                        /* below 2^-14: subnormal or 0 */
        uint32_t man = (mag & 0x7fffffu) | 0x800000u, e = mag >> 23, shift, half, rest, v;
        if (e < 102) return (uint16_t)sign;                         /* below half the smallest subnormal */
        shift = 126 - e;                                            /* value = man * 2^(e-150) -> units of 2^-24 */
        v = man >> shift;
        rest = man & ((1u << shift) - 1);
        half = 1u << (shift - 1);
        if (rest > half || (rest == half && (v & 1))) v++;
        return (uint16_t)(sign | v);
    }
    {
        uint32_t v = ((mag >> 13) - (112u << 10)), rest = mag & 0x1fffu;
        if (rest > 0x1000u || (rest == 0x1000u && (v & 1))) v++;   /* a carry into the exponent is right */
        return (uint16_t)(sign | v);
    }
}

/* binary32 -> bfloat16, round to nearest even; NaN stays a (quiet) NaN (ggml's rule). */
uint16_t llm__f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

static int host_is_little_endian(void)
{
    const uint16_t one = 1;
    uint8_t b;
    memcpy(&b, &one, 1);
    return b == 1;
}

static void copy_f32_le(float *dst, const uint8_t *src, uint64_t n)
{
    uint64_t i;
    if (host_is_little_endian()) {
        memcpy(dst, src, (size_t)n * sizeof(float));
        return;
    }
    for (i = 0; i < n; i++) dst[i] = f32_from_bits(le32(src + 4 * i));
}

/* ------------------------------------------------------------------------------------ */
/* ggml tensor types.                                                                    */

enum {
    GGML_F32 = 0,
    GGML_F16 = 1,
    GGML_Q4_0 = 2,
    GGML_Q4_1 = 3,
    GGML_Q8_0 = 8,
    GGML_BF16 = 30
};

typedef struct ggml_type_info {
    uint32_t type;
    const char *name;
    uint32_t block;   /* elements per block */
    uint32_t bytes;   /* bytes per block; 0: a type this loader does not dequantize */
} ggml_type_info;

/* Block layouts (ggml-common.h):
     Q8_0: fp16 d, int8 q[32]                       x[i] = d * q[i]
     Q4_0: fp16 d, uint8 qs[16]                     x[j] = d * ((qs[j] & 15) - 8), x[j+16] = d * ((qs[j] >> 4) - 8)
     Q4_1: fp16 d, fp16 m, uint8 qs[16]             x[j] = d * (qs[j] & 15) + m,   x[j+16] = d * (qs[j] >> 4) + m
   The other names are listed only so that an error can say which type a file used. */
static const ggml_type_info ggml_types[] = {
    {GGML_F32, "F32", 1, 4},    {GGML_F16, "F16", 1, 2},   {GGML_Q4_0, "Q4_0", 32, 18},
    {GGML_Q4_1, "Q4_1", 32, 20}, {6, "Q5_0", 32, 0},        {7, "Q5_1", 32, 0},
    {GGML_Q8_0, "Q8_0", 32, 34}, {9, "Q8_1", 32, 0},        {10, "Q2_K", 256, 0},
    {11, "Q3_K", 256, 0},        {12, "Q4_K", 256, 0},      {13, "Q5_K", 256, 0},
    {14, "Q6_K", 256, 0},        {15, "Q8_K", 256, 0},      {GGML_BF16, "BF16", 1, 2},
};

static const ggml_type_info *ggml_type_find(uint32_t type)
{
    size_t i;
    for (i = 0; i < sizeof ggml_types / sizeof ggml_types[0]; i++)
        if (ggml_types[i].type == type) return &ggml_types[i];
    return NULL;
}

static void dequant_q8_0(float *y, const uint8_t *b, uint64_t nblocks)
{
    uint64_t i;
    int j;
    for (i = 0; i < nblocks; i++, b += 34, y += 32) {
        float d = f16_to_f32(le16(b));
        for (j = 0; j < 32; j++) y[j] = d * (float)(int8_t)b[2 + j];
    }
}

static void dequant_q4_0(float *y, const uint8_t *b, uint64_t nblocks)
{
    uint64_t i;
    int j;
    for (i = 0; i < nblocks; i++, b += 18, y += 32) {
        float d = f16_to_f32(le16(b));
        for (j = 0; j < 16; j++) {
            y[j] = d * (float)((int)(b[2 + j] & 15) - 8);
            y[j + 16] = d * (float)((int)(b[2 + j] >> 4) - 8);
        }
    }
}

static void dequant_q4_1(float *y, const uint8_t *b, uint64_t nblocks)
{
    uint64_t i;
    int j;
    for (i = 0; i < nblocks; i++, b += 20, y += 32) {
        float d = f16_to_f32(le16(b));
        float m = f16_to_f32(le16(b + 2));
        for (j = 0; j < 16; j++) {
            y[j] = d * (float)(b[4 + j] & 15) + m;
            y[j + 16] = d * (float)(b[4 + j] >> 4) + m;
        }
    }
}

/* n elements of a supported type at src -> fp32 at dst (n is a whole number of blocks). */
static void dequantize(uint32_t type, float *dst, const uint8_t *src, uint64_t n)
{
    uint64_t i;
    switch (type) {
    case GGML_F32: copy_f32_le(dst, src, n); break;
    case GGML_F16:
        for (i = 0; i < n; i++) dst[i] = f16_to_f32(le16(src + 2 * i));
        break;
    case GGML_BF16:
        for (i = 0; i < n; i++) dst[i] = bf16_to_f32(le16(src + 2 * i));
        break;
    case GGML_Q8_0: dequant_q8_0(dst, src, n / 32); break;
    case GGML_Q4_0: dequant_q4_0(dst, src, n / 32); break;
    case GGML_Q4_1: dequant_q4_1(dst, src, n / 32); break;
    default: break; /* unreachable: callers only pass types with bytes != 0 */
    }
}

/* ------------------------------------------------------------------------------------ */
/* Configuration checks and the weight arena, shared by both formats.                    */

#define LLM_MAX_DIM (1 << 20)
#define LLM_MAX_LAYERS (1 << 16)
#define LLM_MAX_SEQ (1 << 30)

/* The rotary scaling settings: none (every parameter 0), or llama3 with transformers' rules
   (factor >= 1, 0 < low_freq_factor < high_freq_factor, a positive original context). */
static int rope_scaling_check(const llm_config *c, char *err, size_t errlen)
{
    if (c->rope_scaling == LLM_ROPE_SCALING_NONE) {
        if (c->rope_factor != 0.0f || c->rope_low_freq_factor != 0.0f || c->rope_high_freq_factor != 0.0f ||
            c->rope_original_max_pos != 0)
            return llm__errf(err, errlen, "rotary scaling parameters are set but the scaling type is none");
        return 0;
    }
    if (c->rope_scaling != LLM_ROPE_SCALING_LLAMA3)
        return llm__errf(err, errlen, "unknown rotary scaling type %d", (int)c->rope_scaling);
    if (!(c->rope_factor >= 1.0f && c->rope_factor <= 1e6f))
        return llm__errf(err, errlen, "llama3 rotary scaling: factor %g is outside 1..1e6", (double)c->rope_factor);
    if (!(c->rope_low_freq_factor > 0.0f && c->rope_high_freq_factor > c->rope_low_freq_factor &&
          c->rope_high_freq_factor <= 1e6f))
        return llm__errf(err, errlen, "llama3 rotary scaling: low_freq_factor %g and high_freq_factor %g must satisfy "
                         "0 < low < high", (double)c->rope_low_freq_factor, (double)c->rope_high_freq_factor);
    if (c->rope_original_max_pos <= 0)
        return llm__errf(err, errlen, "llama3 rotary scaling: original_max_position_embeddings %d is not positive",
                         (int)c->rope_original_max_pos);
    return 0;
}

static int check_config(const llm_config *c, char *err, size_t errlen)
{
    if (c->dim <= 0 || c->dim > LLM_MAX_DIM) return llm__errf(err, errlen, "bad model width %d", (int)c->dim);
    if (c->hidden_dim <= 0 || c->hidden_dim > LLM_MAX_DIM)
        return llm__errf(err, errlen, "bad feed-forward width %d", (int)c->hidden_dim);
    if (c->n_layers <= 0 || c->n_layers > LLM_MAX_LAYERS)
        return llm__errf(err, errlen, "bad layer count %d", (int)c->n_layers);
    if (c->n_heads <= 0 || c->n_heads > LLM_MAX_DIM) return llm__errf(err, errlen, "bad head count %d", (int)c->n_heads);
    if (c->n_kv_heads <= 0 || c->n_kv_heads > c->n_heads || c->n_heads % c->n_kv_heads != 0)
        return llm__errf(err, errlen, "bad key/value head count %d for %d heads", (int)c->n_kv_heads, (int)c->n_heads);
    if (c->head_dim <= 0 || c->head_dim > LLM_MAX_DIM || c->head_dim % 2 != 0)
        return llm__errf(err, errlen, "bad head size %d (rotary embeddings need an even size)", (int)c->head_dim);
    if ((int64_t)c->n_heads * c->head_dim > LLM_MAX_DIM)
        return llm__errf(err, errlen, "bad attention width %d x %d", (int)c->n_heads, (int)c->head_dim);
    if (c->vocab_size <= 0) return llm__errf(err, errlen, "bad vocabulary size %d", (int)c->vocab_size);
    if (c->max_seq_len <= 0 || c->max_seq_len > LLM_MAX_SEQ)
        return llm__errf(err, errlen, "bad context length %d", (int)c->max_seq_len);
    if (!(c->norm_eps > 0.0f && c->norm_eps < 1.0f))
        return llm__errf(err, errlen, "bad RMSNorm epsilon %g", (double)c->norm_eps);
    if (!(c->rope_theta > 0.0f && c->rope_theta <= FLT_MAX))
        return llm__errf(err, errlen, "bad rotary base %g", (double)c->rope_theta);
    return rope_scaling_check(c, err, errlen);
}

int llm__config_check(const llm_config *c, char *err, size_t errlen)
{
    return check_config(c, err, errlen);
}

int llm_rope_inv_freq(const llm_config *c, double *inv_freq, char *err, size_t errlen)
{
    const double two_pi = 6.283185307179586476925286766559;
    int32_t half, i;
    if (!c || !inv_freq) return llm__errf(err, errlen, "llm_rope_inv_freq: missing argument");
    if (c->head_dim <= 0 || c->head_dim % 2 != 0 || !(c->rope_theta > 0.0f))
        return llm__errf(err, errlen, "bad head size %d or rotary base %g", (int)c->head_dim, (double)c->rope_theta);
    if (rope_scaling_check(c, err, errlen)) return 1;
    half = c->head_dim / 2;
    for (i = 0; i < half; i++) {
        double f = pow((double)c->rope_theta, -2.0 * (double)i / (double)c->head_dim);
        if (c->rope_scaling == LLM_ROPE_SCALING_LLAMA3) {
            double orig = (double)c->rope_original_max_pos, lo = (double)c->rope_low_freq_factor;
            double hi = (double)c->rope_high_freq_factor, factor = (double)c->rope_factor;
            double wavelen = two_pi / f;
            if (wavelen > orig / lo) {
                f /= factor;                                   /* low frequencies: interpolated */
            } else if (wavelen >= orig / hi) {                 /* the band between: blended */
                double s = (orig / wavelen - lo) / (hi - lo);
                f = (1.0 - s) * f / factor + s * f;
            }                                                  /* high frequencies: kept */
        }
        inv_freq[i] = f;
    }
    return 0;
}

void llm__rope_freq_factors(const llm_config *c, float *factors)
{
    const double two_pi = 6.283185307179586476925286766559;
    double orig = (double)c->rope_original_max_pos, lo = (double)c->rope_low_freq_factor;
    double hi = (double)c->rope_high_freq_factor, factor = (double)c->rope_factor;
    int32_t i, half = c->head_dim / 2;
    for (i = 0; i < half; i++) {
        double wavelen = two_pi / pow((double)c->rope_theta, -2.0 * (double)i / (double)c->head_dim);
        double s = (orig / wavelen - lo) / (hi - lo);
        factors[i] = wavelen < orig / hi ? 1.0f : wavelen > orig / lo ? (float)factor : (float)(1.0 / ((1.0 - s) / factor + s));
    }
}

/* Element counts of each weight, from a checked config: widths are at most 2^20 and the
   vocabulary below 2^31, so only the product with the layer count needs a check. */
typedef struct weight_sizes {
    uint64_t emb, norm, wq, wkv, wo, ffn, total;
} weight_sizes;

static int weight_sizes_of(const llm_config *c, weight_sizes *s, char *err, size_t errlen)
{
    uint64_t dim = (uint64_t)c->dim, q = (uint64_t)c->n_heads * (uint64_t)c->head_dim;
    uint64_t kv = (uint64_t)c->n_kv_heads * (uint64_t)c->head_dim, per_layer, t;
    s->emb = (uint64_t)c->vocab_size * dim;
    s->norm = dim;
    s->wq = q * dim;
    s->wkv = kv * dim;
    s->wo = dim * q;
    s->ffn = (uint64_t)c->hidden_dim * dim;
    per_layer = 2 * s->norm + s->wq + 2 * s->wkv + s->wo + 3 * s->ffn;
    if (mul_u64(per_layer, (uint64_t)c->n_layers, &t) || add_u64(t, s->emb + s->norm, &t) ||
        (!c->tied_output && add_u64(t, s->emb, &t)))
        return llm__errf(err, errlen, "model too large");
    s->total = t;
    return 0;
}

/* One allocation: the layer table, then every weight (64-byte aligned from malloc's base). */
static int weights_alloc(const llm_config *c, llm_weights *w, char *err, size_t errlen)
{
    weight_sizes s;
    size_t head = ((size_t)c->n_layers * sizeof(llm_layer) + 63) / 64 * 64;
    uint64_t bytes;
    char *base;
    float *p;
    int32_t l;

    memset(w, 0, sizeof *w);
    if (weight_sizes_of(c, &s, err, errlen)) return 1;
    if (mul_u64(s.total, sizeof(float), &bytes) || add_u64(bytes, head, &bytes) || bytes > (uint64_t)SIZE_MAX)
        return llm__errf(err, errlen, "model too large for this machine");
    base = (char *)malloc((size_t)bytes);
    if (!base) return llm__errf(err, errlen, "out of memory allocating %llu bytes of weights", (unsigned long long)bytes);
    w->arena = base;
    w->layers = (llm_layer *)base;
    p = (float *)(base + head);
    w->tok_emb = p, p += s.emb;
    for (l = 0; l < c->n_layers; l++) {
        llm_layer *L = &w->layers[l];
        L->attn_norm = p, p += s.norm;
        L->wq = p, p += s.wq;
        L->wk = p, p += s.wkv;
        L->wv = p, p += s.wkv;
        L->wo = p, p += s.wo;
        L->ffn_norm = p, p += s.norm;
        L->w1 = p, p += s.ffn;
        L->w2 = p, p += s.ffn;
        L->w3 = p, p += s.ffn;
    }
    w->final_norm = p, p += s.norm;
    w->output = c->tied_output ? w->tok_emb : p;
    return 0;
}

int llm__weights_alloc(const llm_config *c, llm_weights *w, char *err, size_t errlen)
{
    return weights_alloc(c, w, err, errlen);
}

void llm_weights_free(llm_weights *w)
{
    if (!w) return;
    free(w->arena);
    memset(w, 0, sizeof *w);
}

/* ------------------------------------------------------------------------------------ */
/* llama2.c checkpoints (legacy "version 0" export).                                     */

static int is_llama2c_v1_or_later(const uint8_t *d, size_t n)
{
    return n >= 4 && le32(d) == 0x616b3432u; /* "ak42": llama2.c's versioned exports */
}

/* The config from the 7-int header, checked against the file size (exact: the header
   must account for every byte, which rejects most files that are not checkpoints). */
static int llama2c_config(const uint8_t *d, size_t n, llm_config *c, weight_sizes *s, uint64_t *freq_floats, char *err,
                          size_t errlen)
{
    int32_t h[7];
    int i;
    uint64_t floats, bytes = UINT64_MAX; /* UINT64_MAX: overflowed */

    if (is_llama2c_v1_or_later(d, n))
        return llm__errf(err, errlen, "llama2.c versioned export (magic \"ak42\") is not supported; use the legacy export");
    if (n < 28) return llm__errf(err, errlen, "not a model file: %zu bytes is shorter than a llama2.c header", n);
    for (i = 0; i < 7; i++) h[i] = (int32_t)le32(d + 4 * i);

    memset(c, 0, sizeof *c);
    c->dim = h[0];
    c->hidden_dim = h[1];
    c->n_layers = h[2];
    c->n_heads = h[3];
    c->n_kv_heads = h[4];
    /* llama2.c: a negative vocab size marks an untied classifier at the end of the file */
    if (h[5] == INT32_MIN) return llm__errf(err, errlen, "bad llama2.c vocabulary size");
    c->vocab_size = h[5] < 0 ? -h[5] : h[5];
    c->tied_output = h[5] > 0;
    c->max_seq_len = h[6];
    c->head_dim = (c->n_heads > 0 && c->dim % c->n_heads == 0) ? c->dim / c->n_heads : 0;
    c->norm_eps = 1e-5f;
    c->rope_theta = 10000.0f;
    if (check_config(c, err, errlen) || weight_sizes_of(c, s, err, errlen)) return 1;

    /* freq_cis_real and freq_cis_imag: seq_len * head_size / 2 floats each */
    *freq_floats = (uint64_t)c->max_seq_len * (uint64_t)c->head_dim;
    if (add_u64(s->total, *freq_floats, &floats) || mul_u64(floats, 4, &bytes) || add_u64(bytes, 28, &bytes) || bytes != n)
        return llm__errf(err, errlen,
                         "llama2.c checkpoint size mismatch: header (dim %d, hidden %d, layers %d, heads %d/%d, vocab %d, seq %d) "
                         "needs %llu bytes, file has %zu",
                         (int)c->dim, (int)c->hidden_dim, (int)c->n_layers, (int)c->n_heads, (int)c->n_kv_heads, (int)h[5],
                         (int)c->max_seq_len, (unsigned long long)bytes, n);
    return 0;
}

static int load_llama2c(const uint8_t *d, size_t n, llm_config *cfg, llm_weights *w, char *err, size_t errlen)
{
    llm_config c;
    weight_sizes s;
    uint64_t freq = 0;
    const uint8_t *src;
    int32_t l;

    if (llama2c_config(d, n, &c, &s, &freq, err, errlen) || weights_alloc(&c, w, err, errlen)) return 1;
    src = d + 28; /* only now: d may be NULL (n == 0) or shorter than the header */
    /* file order: each kind of weight for all layers in turn */
    copy_f32_le(w->tok_emb, src, s.emb), src += 4 * s.emb;
#define LLAMA2C_PER_LAYER(field, count)                                                                  \
    for (l = 0; l < c.n_layers; l++) copy_f32_le(w->layers[l].field, src, (count)), src += 4 * (count);
    LLAMA2C_PER_LAYER(attn_norm, s.norm)
    LLAMA2C_PER_LAYER(wq, s.wq)
    LLAMA2C_PER_LAYER(wk, s.wkv)
    LLAMA2C_PER_LAYER(wv, s.wkv)
    LLAMA2C_PER_LAYER(wo, s.wo)
    LLAMA2C_PER_LAYER(ffn_norm, s.norm)
    LLAMA2C_PER_LAYER(w1, s.ffn)
    LLAMA2C_PER_LAYER(w2, s.ffn)
    LLAMA2C_PER_LAYER(w3, s.ffn)
#undef LLAMA2C_PER_LAYER
    copy_f32_le(w->final_norm, src, s.norm), src += 4 * s.norm;
    src += 4 * freq; /* the rotary tables are recomputed by the forward pass */
    if (!c.tied_output) copy_f32_le(w->output, src, s.emb);
    *cfg = c;
    return 0;
}

/* ------------------------------------------------------------------------------------ */
/* GGUF v3: parsing.                                                                     */

enum {
    GGUF_UINT8 = 0, GGUF_INT8 = 1, GGUF_UINT16 = 2, GGUF_INT16 = 3, GGUF_UINT32 = 4, GGUF_INT32 = 5,
    GGUF_FLOAT32 = 6, GGUF_BOOL = 7, GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_UINT64 = 10, GGUF_INT64 = 11,
    GGUF_FLOAT64 = 12, GGUF_NTYPES = 13
};

#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32

typedef struct gguf_kv {
    llm_bytes name;        /* first member: name_index reads it */
    uint32_t type;
    size_t pos;            /* file offset of the value (for arrays: of the first element) */
    uint32_t elem_type;    /* arrays only */
    uint64_t count;        /* arrays only */
} gguf_kv;

typedef struct gguf_tensor {
    llm_bytes name;        /* first member: name_index reads it */
    uint32_t n_dims;
    uint64_t ne[GGUF_MAX_DIMS]; /* fastest-varying first; unused dims are 1 */
    uint32_t type;
    uint64_t offset;       /* from the start of the data section */
    uint64_t n_elements;
    uint64_t n_bytes;      /* 0 for types this loader cannot size */
} gguf_tensor;

/* Open-addressing hash from names to item indices, so that lookups and duplicate checks
   stay linear even for files with very many keys or tensors. */
typedef struct name_index {
    const char *items;
    size_t stride;
    uint32_t mask;
    int32_t *slot; /* item index + 1; 0 = empty */
} name_index;

static uint32_t hash_bytes(const char *p, size_t n)
{
    uint32_t h = 2166136261u;
    size_t i;
    for (i = 0; i < n; i++) h = (h ^ (uint8_t)p[i]) * 16777619u;
    return h;
}

static const llm_bytes *name_at(const name_index *ix, size_t i)
{
    return (const llm_bytes *)(const void *)(ix->items + i * ix->stride);
}

static int32_t name_find(const name_index *ix, const char *p, size_t n)
{
    uint32_t h;
    if (!ix->slot) return -1;
    for (h = hash_bytes(p, n) & ix->mask; ix->slot[h]; h = (h + 1) & ix->mask) {
        const llm_bytes *b = name_at(ix, (size_t)ix->slot[h] - 1);
        if (b->n == n && memcmp(b->p, p, n) == 0) return ix->slot[h] - 1;
    }
    return -1;
}

/* Index items[0..count); fails on a duplicate name (reported through *dup). */
static int name_index_build(name_index *ix, const void *items, size_t stride, uint64_t count, int32_t *dup)
{
    uint64_t cap = 16;
    uint64_t i;
    ix->items = (const char *)items;
    ix->stride = stride;
    *dup = -1;
    while (cap < 2 * count) cap *= 2;
    if (cap > (uint64_t)INT32_MAX || cap > SIZE_MAX / sizeof(int32_t)) return 1;
    ix->slot = (int32_t *)calloc((size_t)cap, sizeof(int32_t));
    if (!ix->slot) return 1;
    ix->mask = (uint32_t)(cap - 1);
    for (i = 0; i < count; i++) {
        const llm_bytes *b = name_at(ix, (size_t)i);
        uint32_t h;
        if (name_find(ix, b->p, b->n) >= 0) {
            *dup = (int32_t)i;
            return 1;
        }
        for (h = hash_bytes(b->p, b->n) & ix->mask; ix->slot[h]; h = (h + 1) & ix->mask) {}
        ix->slot[h] = (int32_t)i + 1;
    }
    return 0;
}

typedef struct gguf_file {
    const uint8_t *data;
    size_t size;
    uint64_t n_kv, n_tensors;
    gguf_kv *kv;
    gguf_tensor *tensors;
    name_index kv_ix, t_ix;
    uint64_t alignment;
    uint64_t header_end;   /* end of the tensor infos, before the alignment padding */
    uint64_t data_start;
    char *err;
    size_t errlen;
} gguf_file;

static void gguf_free(gguf_file *g)
{
    free(g->kv);
    free(g->tensors);
    free(g->kv_ix.slot);
    free(g->t_ix.slot);
    memset(g, 0, sizeof *g);
}

static uint32_t gguf_scalar_size(uint32_t type)
{
    static const uint8_t size[GGUF_NTYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return type < GGUF_NTYPES ? size[type] : 0;
}

static const char *gguf_type_name(uint32_t type)
{
    static const char *const names[GGUF_NTYPES] = {"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
                                                   "bool", "string", "array", "uint64", "int64", "float64"};
    return type < GGUF_NTYPES ? names[type] : "unknown";
}

/* Skip one value of `type` (not an array), checking that it lies in the file. */
static int gguf_skip_scalar_or_string(reader *r, uint32_t type, const char *what)
{
    if (type == GGUF_STRING) {
        llm_bytes s;
        return rd_gguf_str(r, &s, what);
    }
    if (type == GGUF_BOOL) {
        if (rd_need(r, 1, what)) return 1;
        if (r->p[r->pos] > 1) return llm__errf(r->err, r->errlen, "%s: bool value %u is neither 0 nor 1", what, r->p[r->pos]);
        r->pos += 1;
        return 0;
    }
    if (!gguf_scalar_size(type)) return llm__errf(r->err, r->errlen, "%s: unknown value type %u", what, type);
    return rd_skip(r, gguf_scalar_size(type), what);
}

static int gguf_read_kv(reader *r, gguf_kv *kv, uint64_t index)
{
    char what[96];
    snprintf(what, sizeof what, "metadata entry %llu", (unsigned long long)index);
    if (rd_gguf_str(r, &kv->name, what) || rd_u32(r, &kv->type, what)) return 1;
    if (kv->name.n == 0 || kv->name.n > 65535)
        return llm__errf(r->err, r->errlen, "%s: key length %zu is outside 1..65535", what, kv->name.n);
    snprintf(what, sizeof what, "metadata '%.*s'", (int)(kv->name.n > 64 ? 64 : kv->name.n), kv->name.p);
    if (kv->type != GGUF_ARRAY) {
        kv->pos = r->pos;
        return gguf_skip_scalar_or_string(r, kv->type, what);
    }
    if (rd_u32(r, &kv->elem_type, what) || rd_u64(r, &kv->count, what)) return 1;
    kv->pos = r->pos;
    if (kv->elem_type == GGUF_ARRAY)
        return llm__errf(r->err, r->errlen, "%s: arrays of arrays are not supported", what);
    if (kv->elem_type == GGUF_STRING) {
        uint64_t i;
        /* each string takes at least its 8-byte length: reject absurd counts up front */
        if (kv->count > (uint64_t)(r->n - r->pos) / 8)
            return llm__errf(r->err, r->errlen, "%s: %llu strings cannot fit in the %zu bytes left", what,
                             (unsigned long long)kv->count, r->n - r->pos);
        for (i = 0; i < kv->count; i++)
            if (gguf_skip_scalar_or_string(r, GGUF_STRING, what)) return 1;
        return 0;
    }
    if (!gguf_scalar_size(kv->elem_type))
        return llm__errf(r->err, r->errlen, "%s: unknown array element type %u", what, kv->elem_type);
    {
        uint64_t bytes;
        if (mul_u64(kv->count, gguf_scalar_size(kv->elem_type), &bytes))
            return llm__errf(r->err, r->errlen, "%s: array length overflows", what);
        if (kv->elem_type == GGUF_BOOL) {
            uint64_t i;
            if (rd_need(r, bytes, what)) return 1;
            for (i = 0; i < bytes; i++)
                if (r->p[r->pos + i] > 1) return llm__errf(r->err, r->errlen, "%s: bool value is neither 0 nor 1", what);
        }
        return rd_skip(r, bytes, what);
    }
}

static int gguf_read_tensor_info(reader *r, gguf_tensor *t, uint64_t index)
{
    char what[96];
    uint32_t d;
    snprintf(what, sizeof what, "tensor info %llu", (unsigned long long)index);
    if (rd_gguf_str(r, &t->name, what) || rd_u32(r, &t->n_dims, what)) return 1;
    snprintf(what, sizeof what, "tensor '%.*s'", (int)(t->name.n > 64 ? 64 : t->name.n), t->name.p);
    if (t->n_dims < 1 || t->n_dims > GGUF_MAX_DIMS)
        return llm__errf(r->err, r->errlen, "%s: %u dimensions (1..%d supported)", what, t->n_dims, GGUF_MAX_DIMS);
    t->n_elements = 1;
    for (d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (d = 0; d < t->n_dims; d++) {
        if (rd_u64(r, &t->ne[d], what)) return 1;
        if (t->ne[d] > (uint64_t)INT64_MAX || mul_u64(t->n_elements, t->ne[d], &t->n_elements) ||
            t->n_elements > (uint64_t)INT64_MAX)
            return llm__errf(r->err, r->errlen, "%s: dimensions overflow", what);
    }
    if (rd_u32(r, &t->type, what) || rd_u64(r, &t->offset, what)) return 1;
    t->n_bytes = 0;
    {
        const ggml_type_info *ti = ggml_type_find(t->type);
        if (ti && ti->bytes) {
            if (t->ne[0] % ti->block != 0)
                return llm__errf(r->err, r->errlen, "%s: row length %llu is not a multiple of the %s block size %u", what,
                                 (unsigned long long)t->ne[0], ti->name, ti->block);
            t->n_bytes = t->n_elements / ti->block * ti->bytes; /* no overflow: bytes/block <= 34 * elements */
        }
    }
    return 0;
}

typedef struct data_range {
    uint64_t start, end;
    uint64_t tensor;
} data_range;

static int range_cmp(const void *a, const void *b)
{
    const data_range *x = (const data_range *)a, *y = (const data_range *)b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* Tensor data ranges must not overlap: otherwise a small file could name the same bytes
   for many large tensors and make us allocate far more than its size. */
static int gguf_check_overlaps(gguf_file *g)
{
    data_range *r;
    uint64_t i, n = 0;
    int rc = 0;
    r = (data_range *)malloc((g->n_tensors ? (size_t)g->n_tensors : 1) * sizeof *r);
    if (!r) return llm__errf(g->err, g->errlen, "out of memory");
    for (i = 0; i < g->n_tensors; i++) {
        if (!g->tensors[i].n_bytes) continue;
        r[n].start = g->tensors[i].offset;
        r[n].end = g->tensors[i].offset + g->tensors[i].n_bytes;
        r[n].tensor = i;
        n++;
    }
    qsort(r, (size_t)n, sizeof *r, range_cmp);
    for (i = 1; i < n && !rc; i++)
        if (r[i].start < r[i - 1].end) {
            const llm_bytes *a = &g->tensors[r[i - 1].tensor].name, *b = &g->tensors[r[i].tensor].name;
            rc = llm__errf(g->err, g->errlen, "GGUF tensors '%.*s' and '%.*s' overlap", (int)(a->n > 64 ? 64 : a->n), a->p,
                           (int)(b->n > 64 ? 64 : b->n), b->p);
        }
    free(r);
    return rc;
}

/* Parse header, metadata and tensor infos; check every tensor's data range. */
static int gguf_parse(gguf_file *g, const uint8_t *d, size_t n, char *err, size_t errlen)
{
    reader r;
    uint32_t magic, version;
    uint64_t i, data_size;
    int32_t dup;

    memset(g, 0, sizeof *g);
    g->data = d;
    g->size = n;
    g->err = err;
    g->errlen = errlen;
    r.p = d;
    r.n = n;
    r.pos = 0;
    r.err = err;
    r.errlen = errlen;

    if (rd_u32(&r, &magic, "GGUF header") || rd_u32(&r, &version, "GGUF header")) return 1;
    if (magic != 0x46554747u) return llm__errf(err, errlen, "not a GGUF file (bad magic)");
    if (version != 3) return llm__errf(err, errlen, "GGUF version %u is not supported (only version 3)", version);
    if (rd_u64(&r, &g->n_tensors, "GGUF header") || rd_u64(&r, &g->n_kv, "GGUF header")) return 1;

    /* A key-value pair takes at least 13 bytes, a tensor info at least 32: bound the
       counts by what is left before allocating anything. */
    if (g->n_kv > (uint64_t)(r.n - r.pos) / 13)
        return llm__errf(err, errlen, "GGUF header claims %llu metadata entries, more than the file can hold",
                         (unsigned long long)g->n_kv);
    if (g->n_tensors > (uint64_t)(r.n - r.pos) / 32)
        return llm__errf(err, errlen, "GGUF header claims %llu tensors, more than the file can hold",
                         (unsigned long long)g->n_tensors);
    g->kv = (gguf_kv *)calloc(g->n_kv ? (size_t)g->n_kv : 1, sizeof(gguf_kv));
    g->tensors = (gguf_tensor *)calloc(g->n_tensors ? (size_t)g->n_tensors : 1, sizeof(gguf_tensor));
    if (!g->kv || !g->tensors) return llm__errf(err, errlen, "out of memory");

    for (i = 0; i < g->n_kv; i++)
        if (gguf_read_kv(&r, &g->kv[i], i)) return 1;
    if (name_index_build(&g->kv_ix, g->kv, sizeof(gguf_kv), g->n_kv, &dup)) {
        if (dup < 0) return llm__errf(err, errlen, "out of memory");
        return llm__errf(err, errlen, "duplicate metadata key '%.*s'", (int)g->kv[dup].name.n, g->kv[dup].name.p);
    }

    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    {
        int32_t k = name_find(&g->kv_ix, "general.alignment", 17);
        if (k >= 0) {
            const gguf_kv *kv = &g->kv[k];
            if (kv->type != GGUF_UINT32) return llm__errf(err, errlen, "general.alignment must be a uint32");
            g->alignment = le32(d + kv->pos);
            if (g->alignment == 0 || (g->alignment & (g->alignment - 1)) != 0)
                return llm__errf(err, errlen, "general.alignment %llu is not a power of two",
                                 (unsigned long long)g->alignment);
        }
    }

    for (i = 0; i < g->n_tensors; i++)
        if (gguf_read_tensor_info(&r, &g->tensors[i], i)) return 1;
    if (name_index_build(&g->t_ix, g->tensors, sizeof(gguf_tensor), g->n_tensors, &dup)) {
        if (dup < 0) return llm__errf(err, errlen, "out of memory");
        return llm__errf(err, errlen, "duplicate tensor '%.*s'", (int)g->tensors[dup].name.n, g->tensors[dup].name.p);
    }

    /* the data section starts at the next multiple of the alignment */
    g->header_end = (uint64_t)r.pos;
    g->data_start = ((uint64_t)r.pos + g->alignment - 1) / g->alignment * g->alignment;
    if (g->n_tensors == 0) return 0;
    if (g->data_start > n) return llm__errf(err, errlen, "truncated GGUF file: the tensor data section is missing");
    data_size = n - g->data_start;
    for (i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        if (t->offset % g->alignment != 0)
            return llm__errf(err, errlen, "tensor '%.*s': offset %llu is not aligned to %llu", (int)t->name.n, t->name.p,
                             (unsigned long long)t->offset, (unsigned long long)g->alignment);
        if (t->n_bytes && (t->offset > data_size || t->n_bytes > data_size - t->offset))
            return llm__errf(err, errlen, "truncated GGUF file: tensor '%.*s' (%llu bytes at data offset %llu) ends past the end",
                             (int)t->name.n, t->name.p, (unsigned long long)t->n_bytes, (unsigned long long)t->offset);
    }
    return gguf_check_overlaps(g);
}

/* The byte layout of a GGUF file for a writer that copies its metadata (llm_internal.h),
   from the same validated parse the loader uses. */
int llm__gguf_layout(const uint8_t *d, size_t n, llm_gguf_layout *out, char *err, size_t errlen)
{
    gguf_file g;
    uint64_t i;
    memset(out, 0, sizeof *out);
    if (gguf_parse(&g, d, n, err, errlen)) {
        gguf_free(&g);
        return 1;
    }
    out->kv = (llm_gguf_kv_span *)calloc((size_t)g.n_kv + 1, sizeof *out->kv);
    out->t = (llm_gguf_tensor_info *)calloc((size_t)g.n_tensors + 1, sizeof *out->t);
    if (!out->kv || !out->t) {
        gguf_free(&g);
        llm__gguf_layout_free(out);
        return llm__errf(err, errlen, "out of memory");
    }
    out->n_kv = g.n_kv;
    out->n_tensors = g.n_tensors;
    out->alignment = g.alignment;
    out->data_start = g.data_start;
    /* a pair starts with its key's u64 length; it ends where the next pair, the first
       tensor info or the header ends */
    for (i = 0; i < g.n_kv; i++) {
        out->kv[i].name = g.kv[i].name;
        out->kv[i].start = (size_t)((const uint8_t *)g.kv[i].name.p - d) - 8;
        out->kv[i].end = i + 1 < g.n_kv ? (size_t)((const uint8_t *)g.kv[i + 1].name.p - d) - 8
                         : g.n_tensors ? (size_t)((const uint8_t *)g.tensors[0].name.p - d) - 8
                                       : (size_t)g.header_end;
    }
    for (i = 0; i < g.n_tensors; i++) {
        const gguf_tensor *t = &g.tensors[i];
        llm_gguf_tensor_info *o = &out->t[i];
        o->name = t->name;
        o->n_dims = t->n_dims;
        o->type = t->type;
        memcpy(o->ne, t->ne, sizeof o->ne);
        o->n_elements = t->n_elements;
        o->offset = t->offset;
    }
    gguf_free(&g);
    return 0;
}

void llm__gguf_layout_free(llm_gguf_layout *g)
{
    free(g->kv);
    free(g->t);
    memset(g, 0, sizeof *g);
}

/* ------------------------------------------------------------------------------------ */
/* GGUF: typed metadata access.                                                          */

static const gguf_kv *gguf_find(const gguf_file *g, const char *key)
{
    int32_t k = name_find(&g->kv_ix, key, strlen(key));
    return k < 0 ? NULL : &g->kv[k];
}

/* An integer of any integer type at pos. */
static int gguf_int_at(const gguf_file *g, uint32_t type, size_t pos, int64_t *v)
{
    const uint8_t *b = g->data + pos;
    switch (type) {
    case GGUF_UINT8: *v = b[0]; return 0;
    case GGUF_INT8: *v = (int8_t)b[0]; return 0;
    case GGUF_UINT16: *v = le16(b); return 0;
    case GGUF_INT16: *v = (int16_t)le16(b); return 0;
    case GGUF_UINT32: *v = le32(b); return 0;
    case GGUF_INT32: *v = (int32_t)le32(b); return 0;
    case GGUF_UINT64:
        if (le64(b) > (uint64_t)INT64_MAX) return 1;
        *v = (int64_t)le64(b);
        return 0;
    case GGUF_INT64: *v = (int64_t)le64(b); return 0;
    default: return 1;
    }
}

/* Integer key within [lo, hi]; absent: *v = dflt, or an error when required. */
static int gguf_get_int(const gguf_file *g, const char *key, int required, int64_t dflt, int64_t lo, int64_t hi,
                        int64_t *v)
{
    const gguf_kv *kv = gguf_find(g, key);
    if (!kv) {
        if (required) return llm__errf(g->err, g->errlen, "GGUF metadata '%s' is missing", key);
        *v = dflt;
        return 0;
    }
    if (gguf_int_at(g, kv->type, kv->pos, v))
        return llm__errf(g->err, g->errlen, "GGUF metadata '%s' is a %s, expected an integer", key, gguf_type_name(kv->type));
    if (*v < lo || *v > hi)
        return llm__errf(g->err, g->errlen, "GGUF metadata '%s' = %lld is outside %lld..%lld", key, (long long)*v,
                         (long long)lo, (long long)hi);
    return 0;
}

static int gguf_get_float(const gguf_file *g, const char *key, double dflt, double *v)
{
    const gguf_kv *kv = gguf_find(g, key);
    int64_t iv;
    if (!kv) {
        *v = dflt;
        return 0;
    }
    if (kv->type == GGUF_FLOAT32) {
        *v = f32_from_bits(le32(g->data + kv->pos));
    } else if (kv->type == GGUF_FLOAT64) {
        uint64_t u = le64(g->data + kv->pos);
        memcpy(v, &u, sizeof *v);
    } else if (!gguf_int_at(g, kv->type, kv->pos, &iv)) {
        *v = (double)iv;
    } else {
        return llm__errf(g->err, g->errlen, "GGUF metadata '%s' is a %s, expected a number", key, gguf_type_name(kv->type));
    }
    return 0;
}

static int gguf_get_bool(const gguf_file *g, const char *key, int dflt, int *v)
{
    const gguf_kv *kv = gguf_find(g, key);
    if (!kv) {
        *v = dflt;
        return 0;
    }
    if (kv->type != GGUF_BOOL)
        return llm__errf(g->err, g->errlen, "GGUF metadata '%s' is a %s, expected a bool", key, gguf_type_name(kv->type));
    *v = g->data[kv->pos] != 0;
    return 0;
}

/* String key; absent: s->p = NULL. */
static int gguf_get_str(const gguf_file *g, const char *key, llm_bytes *s)
{
    const gguf_kv *kv = gguf_find(g, key);
    s->p = NULL;
    s->n = 0;
    if (!kv) return 0;
    if (kv->type != GGUF_STRING)
        return llm__errf(g->err, g->errlen, "GGUF metadata '%s' is a %s, expected a string", key, gguf_type_name(kv->type));
    s->n = (size_t)le64(g->data + kv->pos);
    s->p = (const char *)g->data + kv->pos + 8;
    return 0;
}

/* Array key of the given element type; absent: NULL. */
static int gguf_get_array(const gguf_file *g, const char *key, uint32_t elem_type, const gguf_kv **out)
{
    const gguf_kv *kv = gguf_find(g, key);
    *out = NULL;
    if (!kv) return 0;
    if (kv->type != GGUF_ARRAY || kv->elem_type != elem_type)
        return llm__errf(g->err, g->errlen, "GGUF metadata '%s' must be an array of %s", key, gguf_type_name(elem_type));
    *out = kv;
    return 0;
}

/* ------------------------------------------------------------------------------------ */
/* GGUF: Llama weights.                                                                  */

static const gguf_tensor *gguf_tensor_find(const gguf_file *g, const char *name)
{
    int32_t k = name_find(&g->t_ix, name, strlen(name));
    return k < 0 ? NULL : &g->tensors[k];
}

/* Check that tensor `name` has the GGUF shape ne = [d_in, d_out] (a row-major d_out x d_in
   matrix), or [d_in] for a vector (d_out == 0), in a type this loader reads; then, if dst
   is not NULL, dequantize it there. */
static int gguf_take(const gguf_file *g, const char *name, uint64_t d_in, uint64_t d_out, float *dst)
{
    const gguf_tensor *t = gguf_tensor_find(g, name);
    const ggml_type_info *ti;
    int ok_shape;
    if (!t) return llm__errf(g->err, g->errlen, "GGUF tensor '%s' is missing", name);
    if (d_out == 0)
        ok_shape = t->n_elements == d_in && t->ne[0] == d_in;
    else
        ok_shape = t->n_elements == d_in * d_out && t->ne[0] == d_in && t->ne[1] == d_out;
    if (!ok_shape)
        return llm__errf(g->err, g->errlen, "GGUF tensor '%s' has shape [%llu, %llu, %llu, %llu], expected [%llu, %llu]", name,
                         (unsigned long long)t->ne[0], (unsigned long long)t->ne[1], (unsigned long long)t->ne[2],
                         (unsigned long long)t->ne[3], (unsigned long long)d_in, (unsigned long long)(d_out ? d_out : 1));
    ti = ggml_type_find(t->type);
    if (!ti || !ti->bytes) {
        if (ti)
            return llm__errf(g->err, g->errlen, "GGUF tensor '%s' is %s, which this loader does not dequantize "
                             "(supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1)", name, ti->name);
        return llm__errf(g->err, g->errlen, "GGUF tensor '%s' has unknown type %u", name, t->type);
    }
    /* gguf_parse checked that [offset, offset + n_bytes) lies in the data section */
    if (dst) dequantize(t->type, dst, g->data + g->data_start + t->offset, t->n_elements);
    return 0;
}
/* rope_freqs.weight: llama3 scaling, read from grzo.rope.llama3.* (llm_internal.h) and
   taken only when the tensor holds exactly the factors those parameters give, so that
   grzo's frequencies are llama.cpp's. Without the keys (llama.cpp's own converter) the
   parameters cannot be recovered from the factors: refused. */
static int gguf_llama3_scaling(const gguf_file *g, llm_config *c)
{
    const gguf_tensor *t = gguf_tensor_find(g, "rope_freqs.weight");
    double factor, low, high;
    int64_t orig;
    float *want;
    uint64_t i, half;
    int bad = 0;
    if (!gguf_find(g, LLM_GGUF_KEY_LLAMA3_FACTOR))
        return llm__errf(g->err, g->errlen, "per-frequency rotary factors (rope_freqs.weight) without the llama3 parameters "
                         "(" LLM_GGUF_KEY_LLAMA3_FACTOR " etc., written by grzo-export) are not supported: the factors "
                         "do not determine them");
    if (gguf_get_float(g, LLM_GGUF_KEY_LLAMA3_FACTOR, 0.0, &factor) || gguf_get_float(g, LLM_GGUF_KEY_LLAMA3_LOW, 0.0, &low) ||
        gguf_get_float(g, LLM_GGUF_KEY_LLAMA3_HIGH, 0.0, &high) ||
        gguf_get_int(g, LLM_GGUF_KEY_LLAMA3_ORIG, 1, 0, 1, LLM_MAX_SEQ, &orig))
        return 1;
    c->rope_scaling = LLM_ROPE_SCALING_LLAMA3;
    c->rope_factor = (float)factor;
    c->rope_low_freq_factor = (float)low;
    c->rope_high_freq_factor = (float)high;
    c->rope_original_max_pos = (int32_t)orig;
    if (rope_scaling_check(c, g->err, g->errlen)) return 1;
    half = (uint64_t)c->head_dim / 2;
    if (t->type != GGML_F32 || t->n_dims != 1 || t->ne[0] != half)
        return llm__errf(g->err, g->errlen, "GGUF tensor 'rope_freqs.weight' must be F32 [%llu]", (unsigned long long)half);
    if (!(want = (float *)malloc((size_t)half * sizeof *want))) return llm__errf(g->err, g->errlen, "out of memory");
    llm__rope_freq_factors(c, want);
    for (i = 0; i < half; i++) bad |= f32_from_bits(le32(g->data + g->data_start + t->offset + 4 * i)) != want[i];
    free(want);
    if (bad)
        return llm__errf(g->err, g->errlen, "GGUF tensor 'rope_freqs.weight' differs from the factors of its llama3 "
                         "parameters (" LLM_GGUF_KEY_LLAMA3_FACTOR " etc.)");
    return 0;
}

static int gguf_config(const gguf_file *g, llm_config *c)
{
    llm_bytes arch;
    int64_t v, head_dim_key, rope_dims;
    double f;
    const gguf_tensor *emb;
    memset(c, 0, sizeof *c);

    if (gguf_get_str(g, "general.architecture", &arch)) return 1;
    if (!arch.p) return llm__errf(g->err, g->errlen, "GGUF metadata 'general.architecture' is missing");
    if (!bytes_eq(arch, "llama"))
        return llm__errf(g->err, g->errlen, "GGUF architecture '%.*s' is not supported (only 'llama')",
                         (int)(arch.n > 64 ? 64 : arch.n), arch.p);

    if (gguf_get_int(g, "llama.embedding_length", 1, 0, 1, LLM_MAX_DIM, &v)) return 1;
    c->dim = (int32_t)v;
    if (gguf_get_int(g, "llama.feed_forward_length", 1, 0, 1, LLM_MAX_DIM, &v)) return 1;
    c->hidden_dim = (int32_t)v;
    if (gguf_get_int(g, "llama.block_count", 1, 0, 1, LLM_MAX_LAYERS, &v)) return 1;
    c->n_layers = (int32_t)v;
    if (gguf_get_int(g, "llama.attention.head_count", 1, 0, 1, LLM_MAX_DIM, &v)) return 1;
    c->n_heads = (int32_t)v;
    if (gguf_get_int(g, "llama.attention.head_count_kv", 0, c->n_heads, 1, LLM_MAX_DIM, &v)) return 1;
    c->n_kv_heads = (int32_t)v;
    if (gguf_get_int(g, "llama.context_length", 0, 2048, 1, LLM_MAX_SEQ, &v)) return 1;
    c->max_seq_len = (int32_t)v;
    if (gguf_get_int(g, "llama.attention.key_length", 0, 0, 1, LLM_MAX_DIM, &head_dim_key)) return 1;
    if (head_dim_key == 0 && c->dim % c->n_heads != 0)
        return llm__errf(g->err, g->errlen, "width %d is not a multiple of the head count %d", (int)c->dim, (int)c->n_heads);
    c->head_dim = head_dim_key ? (int32_t)head_dim_key : c->dim / c->n_heads;
    if (gguf_get_int(g, "llama.attention.value_length", 0, c->head_dim, c->head_dim, c->head_dim, &v)) return 1;
    /* every head dimension is rotated: partial rotary would need a different forward pass */
    if (gguf_get_int(g, "llama.rope.dimension_count", 0, c->head_dim, c->head_dim, c->head_dim, &rope_dims)) return 1;
    if (gguf_get_float(g, "llama.attention.layer_norm_rms_epsilon", 1e-5, &f)) return 1;
    c->norm_eps = (float)f;
    if (gguf_get_float(g, "llama.rope.freq_base", 10000.0, &f)) return 1;
    if (!(f > 0.0 && f <= FLT_MAX)) return llm__errf(g->err, g->errlen, "bad llama.rope.freq_base %g", f);
    c->rope_theta = (float)f;
    {
        llm_bytes scaling;
        if (gguf_get_str(g, "llama.rope.scaling.type", &scaling)) return 1;
        if (scaling.p && !bytes_eq(scaling, "none"))
            return llm__errf(g->err, g->errlen, "rotary scaling '%.*s' is not supported", (int)(scaling.n > 32 ? 32 : scaling.n),
                             scaling.p);
    }
    if (gguf_tensor_find(g, "rope_freqs.weight") && gguf_llama3_scaling(g, c)) return 1;

    /* the vocabulary is the embedding's row count; llama.vocab_size, when given, must agree */
    emb = gguf_tensor_find(g, "token_embd.weight");
    if (!emb) return llm__errf(g->err, g->errlen, "GGUF tensor 'token_embd.weight' is missing");
    if (emb->n_dims != 2 || emb->ne[1] < 1 || emb->ne[1] > (uint64_t)INT32_MAX)
        return llm__errf(g->err, g->errlen, "GGUF tensor 'token_embd.weight' is not a [dim, vocab] matrix");
    c->vocab_size = (int32_t)emb->ne[1];
    if (gguf_get_int(g, "llama.vocab_size", 0, c->vocab_size, c->vocab_size, c->vocab_size, &v)) return 1;
    c->tied_output = gguf_tensor_find(g, "output.weight") == NULL;
    return check_config(c, g->err, g->errlen);
}

/* Bias tensors first, by that name (the model's other tensors may be missing too); every
   other tensor the forward would ignore: gguf_check_all_known, once the weights are found. */
static int gguf_check_no_extras(const gguf_file *g)
{
    uint64_t i;
    for (i = 0; i < g->n_tensors; i++) {
        const llm_bytes *nm = &g->tensors[i].name;
        if (nm->n >= 5 && memcmp(nm->p + nm->n - 5, ".bias", 5) == 0)
            return llm__errf(g->err, g->errlen, "GGUF tensor '%.*s': bias tensors are not supported", (int)nm->n, nm->p);
    }
    return 0;
}

/* Every weight of the model: checked only (w == NULL), or dequantized into w. */
static int gguf_visit_weights(const gguf_file *g, const llm_config *c, llm_weights *w)
{
    uint64_t dim = (uint64_t)c->dim, q = (uint64_t)c->n_heads * (uint64_t)c->head_dim;
    uint64_t kv = (uint64_t)c->n_kv_heads * (uint64_t)c->head_dim, hid = (uint64_t)c->hidden_dim;
    char name[64];
    int32_t l;

    if (gguf_take(g, "token_embd.weight", dim, (uint64_t)c->vocab_size, w ? w->tok_emb : NULL)) return 1;
    /* No un-permuting of Q/K: llama.cpp's converter already permutes the rows of attn_q
       and attn_k so that rotary pairs are adjacent (2i, 2i+1), the layout llm.h uses. */
    for (l = 0; l < c->n_layers; l++) {
        llm_layer *L = w ? &w->layers[l] : NULL;
#define TAKE(suffix, din, dout, field)                                                   \
        snprintf(name, sizeof name, "blk.%d." suffix ".weight", (int)l);                 \
        if (gguf_take(g, name, (din), (dout), L ? L->field : NULL)) return 1;
        TAKE("attn_norm", dim, 0, attn_norm)
        TAKE("attn_q", dim, q, wq)
        TAKE("attn_k", dim, kv, wk)
        TAKE("attn_v", dim, kv, wv)
        TAKE("attn_output", q, dim, wo)
        TAKE("ffn_norm", dim, 0, ffn_norm)
        TAKE("ffn_gate", dim, hid, w1)
        TAKE("ffn_down", hid, dim, w2)
        TAKE("ffn_up", dim, hid, w3)
#undef TAKE
    }
    if (gguf_take(g, "output_norm.weight", dim, 0, w ? w->final_norm : NULL)) return 1;
    if (!c->tied_output && gguf_take(g, "output.weight", dim, (uint64_t)c->vocab_size, w ? w->output : NULL)) return 1;
    return 0;
}

/* Whether a tensor's name is one that gguf_visit_weights or gguf_llama3_scaling takes:
   blk.L.<part>.weight with L < n_layers written as gguf_visit_weights writes it, or a
   top-level name. */
static int gguf_tensor_known(const llm_bytes *nm, const llm_config *c)
{
    static const char *const top[] = {"token_embd.weight", "output_norm.weight", "output.weight", "rope_freqs.weight"};
    static const char *const per_layer[] = {"attn_norm", "attn_q",  "attn_k",   "attn_v", "attn_output",
                                            "ffn_norm",  "ffn_gate", "ffn_down", "ffn_up"};
    char name[64];
    size_t i, j;
    int64_t l = 0;
    for (i = 0; i < sizeof top / sizeof *top; i++)
        if (nm->n == strlen(top[i]) && memcmp(nm->p, top[i], nm->n) == 0) return 1;
    if (nm->n < 5 || memcmp(nm->p, "blk.", 4) != 0) return 0;
    for (j = 4; j < nm->n && j < 14 && nm->p[j] >= '0' && nm->p[j] <= '9'; j++) l = 10 * l + (nm->p[j] - '0');
    if (j == 4 || l >= c->n_layers) return 0;
    for (i = 0; i < sizeof per_layer / sizeof *per_layer; i++) {   /* the name as written: no leading zeros */
        int len = snprintf(name, sizeof name, "blk.%d.%s.weight", (int)l, per_layer[i]);
        if (len > 0 && nm->n == (size_t)len && memcmp(nm->p, name, nm->n) == 0) return 1;
    }
    return 0;
}

/* After every tensor the forward takes was found: any other one (a q/k norm, a second
   output head, a layer past llama.block_count) would be silently ignored, which means a
   different model. Refused by name. */
static int gguf_check_all_known(const gguf_file *g, const llm_config *c)
{
    uint64_t i;
    for (i = 0; i < g->n_tensors; i++) {
        const llm_bytes *nm = &g->tensors[i].name;
        if (!gguf_tensor_known(nm, c))
            return llm__errf(g->err, g->errlen, "GGUF tensor '%.*s' is not one this Llama forward uses: a different model",
                             (int)nm->n, nm->p);
    }
    return 0;
}

/* Check every tensor before allocating: the arena is then bounded by the tensor data
   actually in the file (tensors do not overlap), whatever the metadata claims. */
static int gguf_weights(const gguf_file *g, const llm_config *c, llm_weights *w)
{
    if (gguf_visit_weights(g, c, NULL) || gguf_check_all_known(g, c) || weights_alloc(c, w, g->err, g->errlen))
        return 1;
    if (gguf_visit_weights(g, c, w)) { /* cannot fail after the check; kept for safety */
        llm_weights_free(w);
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------ */
/* GGUF: the embedded tokenizer.                                                         */

/* Views of the n strings of a string array (the file image must outlive them). */
static int gguf_string_views(const gguf_file *g, const gguf_kv *kv, llm_bytes **out)
{
    reader r;
    uint64_t i;
    llm_bytes *v;
    *out = NULL;
    if (kv->count > (uint64_t)INT32_MAX) return llm__errf(g->err, g->errlen, "GGUF string array too long");
    v = (llm_bytes *)malloc((kv->count ? (size_t)kv->count : 1) * sizeof *v);
    if (!v) return llm__errf(g->err, g->errlen, "out of memory");
    r.p = g->data;
    r.n = g->size;
    r.pos = kv->pos;
    r.err = g->err;
    r.errlen = g->errlen;
    for (i = 0; i < kv->count; i++)
        if (rd_gguf_str(&r, &v[i], "string array")) { /* cannot fail: gguf_parse walked it */
            free(v);
            return 1;
        }
    *out = v;
    return 0;
}

static int gguf_token_id(const gguf_file *g, const char *key, int32_t n_tokens, int32_t dflt, int32_t *id)
{
    int64_t v;
    if (gguf_get_int(g, key, 0, dflt, -1, (int64_t)n_tokens - 1, &v)) return 1;
    *id = (int32_t)v;
    return 0;
}

/* Copies of the tokenizer arrays (string views point into the file image). */
typedef struct tok_arrays {
    llm_bytes *tokens, *merges;
    float *scores;
    int32_t *types;
} tok_arrays;

static void tok_arrays_free(tok_arrays *a)
{
    free(a->tokens);
    free(a->merges);
    free(a->scores);
    free(a->types);
}

/* tokenizer.ggml.tokens, scores, token_type and merges into spec (arrays owned by a). */
static int gguf_tokenizer_arrays(const gguf_file *g, llm_tokenizer_spec *spec, tok_arrays *a)
{
    const gguf_kv *tokens, *scores, *types, *merges;
    int32_t i, n;
    if (gguf_get_array(g, "tokenizer.ggml.tokens", GGUF_STRING, &tokens) ||
        gguf_get_array(g, "tokenizer.ggml.scores", GGUF_FLOAT32, &scores) ||
        gguf_get_array(g, "tokenizer.ggml.token_type", GGUF_INT32, &types) ||
        gguf_get_array(g, "tokenizer.ggml.merges", GGUF_STRING, &merges))
        return 1;
    if (!tokens) return llm__errf(g->err, g->errlen, "GGUF metadata 'tokenizer.ggml.tokens' is missing");
    if (tokens->count == 0 || tokens->count > (uint64_t)INT32_MAX)
        return llm__errf(g->err, g->errlen, "GGUF tokenizer has %llu tokens", (unsigned long long)tokens->count);
    n = (int32_t)tokens->count;
    if (scores && scores->count != tokens->count)
        return llm__errf(g->err, g->errlen, "GGUF tokenizer has %llu scores for %d tokens", (unsigned long long)scores->count,
                         (int)n);
    if (types && types->count != tokens->count)
        return llm__errf(g->err, g->errlen, "GGUF tokenizer has %llu token types for %d tokens",
                         (unsigned long long)types->count, (int)n);
    if (spec->kind == LLM_TOK_BPE && !merges)
        return llm__errf(g->err, g->errlen, "GGUF metadata 'tokenizer.ggml.merges' is missing");

    if (gguf_string_views(g, tokens, &a->tokens)) return 1;
    spec->n_tokens = n;
    spec->tokens = a->tokens;
    if (scores) {
        if (!(a->scores = (float *)malloc((size_t)n * sizeof(float)))) return llm__errf(g->err, g->errlen, "out of memory");
        for (i = 0; i < n; i++) a->scores[i] = f32_from_bits(le32(g->data + scores->pos + 4 * (size_t)i));
        spec->scores = a->scores;
    }
    if (types) {
        if (!(a->types = (int32_t *)malloc((size_t)n * sizeof(int32_t)))) return llm__errf(g->err, g->errlen, "out of memory");
        for (i = 0; i < n; i++) a->types[i] = (int32_t)le32(g->data + types->pos + 4 * (size_t)i);
        spec->types = a->types;
    }
    if (spec->kind == LLM_TOK_BPE) {
        if (gguf_string_views(g, merges, &a->merges)) return 1;
        spec->n_merges = (int32_t)merges->count;
        spec->merges = a->merges;
    }
    return 0;
}

/* Special ids and flags, with llama.cpp's defaults: SentencePiece vocabularies put <unk>,
   <s>, </s> at 0, 1, 2, start prompts with BOS and prefix a space; byte-level BPE does not. */
static int gguf_tokenizer_settings(const gguf_file *g, llm_tokenizer_spec *spec)
{
    int spm = spec->kind == LLM_TOK_SPM;
    int32_t n = spec->n_tokens;
    if (gguf_token_id(g, "tokenizer.ggml.bos_token_id", n, spm && n > 1 ? 1 : -1, &spec->bos) ||
        gguf_token_id(g, "tokenizer.ggml.eos_token_id", n, spm && n > 2 ? 2 : -1, &spec->eos) ||
        gguf_token_id(g, "tokenizer.ggml.unknown_token_id", n, spm ? 0 : -1, &spec->unk) ||
        gguf_token_id(g, "tokenizer.ggml.padding_token_id", n, -1, &spec->pad) ||
        gguf_get_bool(g, "tokenizer.ggml.add_bos_token", spm, &spec->add_bos) ||
        gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", spm, &spec->add_space_prefix) ||
        gguf_get_str(g, "tokenizer.chat_template", &spec->chat_template))
        return 1;
    spec->spm_space_is_u2581 = spm;
    if (spec->kind == LLM_TOK_BPE) {
        if (gguf_get_str(g, "tokenizer.ggml.pre", &spec->pre)) return 1;
        if (!spec->pre.p) spec->pre.n = 0;
    }
    return 0;
}

/* Build the tokenizer the GGUF describes. *tok = NULL (and success) when the file has no
   tokenizer.ggml.model at all. */
static int gguf_tokenizer(const gguf_file *g, llm_tokenizer **tok)
{
    llm_tokenizer_spec spec;
    tok_arrays arrays;
    llm_bytes model;
    int rc;

    *tok = NULL;
    memset(&spec, 0, sizeof spec);
    memset(&arrays, 0, sizeof arrays);
    if (gguf_get_str(g, "tokenizer.ggml.model", &model)) return 1;
    if (!model.p) return 0;
    if (bytes_eq(model, "llama")) {
        spec.kind = LLM_TOK_SPM;
        spec.model_name = "llama";
    } else if (bytes_eq(model, "gpt2")) {
        spec.kind = LLM_TOK_BPE;
        spec.model_name = "gpt2";
    } else {
        return llm__errf(g->err, g->errlen, "tokenizer model '%.*s' is not supported (only 'llama' and 'gpt2')",
                         (int)(model.n > 32 ? 32 : model.n), model.p);
    }
    rc = gguf_tokenizer_arrays(g, &spec, &arrays) || gguf_tokenizer_settings(g, &spec) ||
         llm__tokenizer_build(&spec, tok, g->err, g->errlen);
    tok_arrays_free(&arrays);
    return rc;
}

/* ------------------------------------------------------------------------------------ */
/* Entry points.                                                                         */

static int is_gguf(const uint8_t *d, size_t n)
{
    return n >= 4 && memcmp(d, "GGUF", 4) == 0;
}

static int load_gguf(const uint8_t *d, size_t n, llm_config *cfg, llm_weights *w, llm_tokenizer **tok, char *err,
                     size_t errlen)
{
    gguf_file g;
    llm_config c;
    llm_tokenizer *t = NULL;

    if (gguf_parse(&g, d, n, err, errlen) || gguf_config(&g, &c) || gguf_check_no_extras(&g)) goto fail;
    if (tok) {
        if (gguf_tokenizer(&g, &t)) goto fail;
        if (t && llm_tokenizer_vocab(t) > c.vocab_size) {
            llm__errf(err, errlen, "the tokenizer has %d tokens but the model only %d embeddings",
                      (int)llm_tokenizer_vocab(t), (int)c.vocab_size);
            goto fail;
        }
    }
    if (gguf_weights(&g, &c, w)) goto fail;
    gguf_free(&g);
    *cfg = c;
    if (tok) *tok = t;
    return 0;
fail:
    llm_tokenizer_free(t);
    gguf_free(&g);
    return 1;
}

int llm_load_memory(const void *data, size_t size, llm_config *cfg, llm_weights *w, llm_tokenizer **tok, char *err,
                    size_t errlen)
{
    const uint8_t *d = (const uint8_t *)data;
    if (tok) *tok = NULL;
    if (!cfg || !w || (!d && size)) return llm__errf(err, errlen, "llm_load: missing argument");
    memset(w, 0, sizeof *w);
    if (is_gguf(d, size)) return load_gguf(d, size, cfg, w, tok, err, errlen);
    return load_llama2c(d, size, cfg, w, err, errlen);
}

int llm_load(const char *path, llm_config *cfg, llm_weights *w, llm_tokenizer **tok, char *err, size_t errlen)
{
    uint8_t *d;
    size_t n;
    int rc;
    struct stat st;
    if (tok) *tok = NULL;
    if (w) memset(w, 0, sizeof *w);
    if (path && cfg && w && stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        rc = llm__hf_load_dir(path, cfg, w, tok, err, errlen);   /* a Hugging Face folder (load_hf.c) */
    } else {
        if (llm__read_file(path, SIZE_MAX, &d, &n, err, errlen)) return 1;
        rc = llm_load_memory(d, n, cfg, w, tok, err, errlen);
        free(d);
    }
    /* say which file: prefix the message with the path (unless it already starts with it) */
    if (rc && err && errlen && strncmp(err, path, strlen(path)) != 0) llm__err_prefix(err, errlen, path);
    return rc;
}

int llm_tokenizer_load_gguf_memory(const void *data, size_t size, llm_tokenizer **out, char *err, size_t errlen)
{
    gguf_file g;
    int rc;
    if (!out) return llm__errf(err, errlen, "llm_tokenizer_load_gguf: missing argument");
    *out = NULL;
    if (!data && size) return llm__errf(err, errlen, "llm_tokenizer_load_gguf: missing argument");
    if (gguf_parse(&g, (const uint8_t *)data, size, err, errlen)) {
        gguf_free(&g);
        return 1;
    }
    rc = gguf_tokenizer(&g, out);
    if (!rc && !*out) rc = llm__errf(err, errlen, "the GGUF file has no tokenizer (tokenizer.ggml.model is missing)");
    gguf_free(&g);
    return rc;
}

int llm_tokenizer_load_gguf(const char *path, llm_tokenizer **out, char *err, size_t errlen)
{
    uint8_t *d;
    size_t n;
    int rc;
    if (out) *out = NULL;
    if (llm__read_file(path, SIZE_MAX, &d, &n, err, errlen)) return 1;
    rc = llm_tokenizer_load_gguf_memory(d, n, out, err, errlen);
    free(d);
    return rc;
}
