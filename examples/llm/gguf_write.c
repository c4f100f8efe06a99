/* gguf_write.c - GGUF v3 output with the original's metadata (see gguf_write.h).

   The original's layout (every key-value pair's bytes, every tensor info) comes from the
   loader's own validated GGUF parse (llm__gguf_layout in load.c), so an original is read
   by one parser, the fuzzed one.

   References: the GGUF v3 spec (ggml docs/gguf.md), ggml's Q8_0 block and
   quantize_row_q8_0_ref, llama.cpp's llama_ftype numbers; no code is taken from them. */
#if !defined(_WIN32)
#define _POSIX_C_SOURCE 200809L   /* fsync, fdopen */
#endif

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf_write.h"
#include "llm_internal.h"

enum { GGUF_UINT32 = 4 };   /* the one value type the writer emits (general.file_type) */
enum { GGML_F32 = 0, GGML_F16 = 1, GGML_Q4_0 = 2, GGML_Q4_1 = 3, GGML_Q8_0 = 8, GGML_BF16 = 30 };
/* llama.cpp's llama_ftype for general.file_type */
enum { FTYPE_ALL_F32 = 0, FTYPE_MOSTLY_F16 = 1, FTYPE_MOSTLY_Q8_0 = 7, FTYPE_MOSTLY_BF16 = 32 };

static int name_is(llm_bytes a, const char *s)
{
    return a.n == strlen(s) && memcmp(a.p, s, a.n) == 0;
}

/* ------------------------------------------------------------------------------------ */
/* Number formats.                                                                       */

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* ------------------------------------------------------------------------------------ */
/* Output tensors.                                                                       */

typedef struct out_tensor {
    uint32_t type;
    const float *src;          /* the weights to convert, or NULL: copy the original's bytes */
    const uint8_t *raw;
    uint64_t n_bytes, offset;
} out_tensor;

static uint64_t type_bytes(uint32_t type, uint64_t n_elements, uint64_t row)
{
    switch (type) {
    case GGML_F32: return 4 * n_elements;
    case GGML_F16:
    case GGML_BF16: return 2 * n_elements;
    case GGML_Q8_0: return row % 32 ? 0 : n_elements / 32 * 34;
    case GGML_Q4_0: return row % 32 ? 0 : n_elements / 32 * 18;
    case GGML_Q4_1: return row % 32 ? 0 : n_elements / 32 * 20;
    default: return 0;
    }
}

/* The weights of llm_weights behind a GGUF tensor name, with their element count. */
static const float *weight_of(llm_bytes name, const llm_config *c, const llm_weights *w, uint64_t *count)
{
    char buf[96], suffix[32];
    int layer, used = 0;
    uint64_t dim = (uint64_t)c->dim, q = (uint64_t)c->n_heads * (uint64_t)c->head_dim;
    uint64_t kv = (uint64_t)c->n_kv_heads * (uint64_t)c->head_dim, ffn = (uint64_t)c->hidden_dim * dim;
    const llm_layer *L;
    if (name.n >= sizeof buf) return NULL;
    memcpy(buf, name.p, name.n);
    buf[name.n] = '\0';
    if (!strcmp(buf, "token_embd.weight")) return *count = (uint64_t)c->vocab_size * dim, w->tok_emb;
    if (!strcmp(buf, "output_norm.weight")) return *count = dim, w->final_norm;
    if (!strcmp(buf, "output.weight")) return c->tied_output ? NULL : (*count = (uint64_t)c->vocab_size * dim, w->output);
    if (sscanf(buf, "blk.%d.%31[a-z_].weight%n", &layer, suffix, &used) != 2 || (size_t)used != name.n || layer < 0 ||
        layer >= c->n_layers)
        return NULL;
    L = &w->layers[layer];
    if (!strcmp(suffix, "attn_norm")) return *count = dim, L->attn_norm;
    if (!strcmp(suffix, "ffn_norm")) return *count = dim, L->ffn_norm;
    if (!strcmp(suffix, "attn_q")) return *count = q * dim, L->wq;
    if (!strcmp(suffix, "attn_k")) return *count = kv * dim, L->wk;
    if (!strcmp(suffix, "attn_v")) return *count = kv * dim, L->wv;
    if (!strcmp(suffix, "attn_output")) return *count = q * dim, L->wo;
    if (!strcmp(suffix, "ffn_gate")) return *count = ffn, L->w1;
    if (!strcmp(suffix, "ffn_down")) return *count = ffn, L->w2;
    if (!strcmp(suffix, "ffn_up")) return *count = ffn, L->w3;
    return NULL;
}

static uint32_t ggml_type_of(llm_gguf_type t)
{
    static const uint32_t map[] = {GGML_F32, GGML_F16, GGML_BF16, GGML_Q8_0};
    return map[t];
}

/* What each tensor becomes (see gguf_write.h: 1-D stays F32, Q8_0 falls back to F16). */
static int plan_tensors(const uint8_t *d, size_t n, const llm_gguf_layout *g, const llm_config *c, const llm_weights *w,
                        llm_gguf_type type, out_tensor *out, char *err, size_t errlen)
{
    uint64_t i, offset = 0;
    if (g->n_tensors && g->data_start > n) return llm__errf(err, errlen, "the original GGUF has no tensor data section");
    for (i = 0; i < g->n_tensors; i++) {
        const llm_gguf_tensor_info *t = &g->t[i];
        out_tensor *o = &out[i];
        uint64_t count = 0;
        o->src = weight_of(t->name, c, w, &count);
        if (o->src) {
            if (count != t->n_elements)
                return llm__errf(err, errlen, "tensor '%.*s' has %llu values in the original, the model %llu", (int)t->name.n,
                                 t->name.p, (unsigned long long)t->n_elements, (unsigned long long)count);
            o->type = t->n_dims == 1 ? GGML_F32 : ggml_type_of(type);
            if (o->type == GGML_Q8_0 && t->ne[0] % 32) o->type = GGML_F16;
        } else {
            o->type = t->type;   /* not a weight of the forward: copied as it is */
        }
        o->n_bytes = type_bytes(o->type, t->n_elements, t->ne[0]);
        if (!o->n_bytes && t->n_elements)
            return llm__errf(err, errlen, "tensor '%.*s' of the original has type %u, which the writer cannot copy",
                             (int)t->name.n, t->name.p, t->type);
        if (!o->src) {
            if (t->offset > n - g->data_start || o->n_bytes > n - g->data_start - t->offset)
                return llm__errf(err, errlen, "tensor '%.*s' lies past the end of the original", (int)t->name.n, t->name.p);
            o->raw = d + g->data_start + t->offset;
        }
        o->offset = offset;
        offset = (offset + o->n_bytes + g->alignment - 1) / g->alignment * g->alignment;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------ */
/* Writing.                                                                              */

static void put_le(FILE *f, uint64_t v, int bytes)
{
    uint8_t b[8];
    int i;
    for (i = 0; i < bytes; i++) b[i] = (uint8_t)(v >> (8 * i));
    fwrite(b, 1, (size_t)bytes, f);
}

static void put_str(FILE *f, llm_bytes s)
{
    put_le(f, s.n, 8);
    fwrite(s.p, 1, s.n, f);
}

static void pad_to(FILE *f, uint64_t *pos, uint64_t alignment)
{
    static const uint8_t zeros[64];
    uint64_t k = (alignment - *pos % alignment) % alignment;
    while (k) {
        size_t m = k > sizeof zeros ? sizeof zeros : (size_t)k;
        fwrite(zeros, 1, m, f);
        k -= m;
        *pos += m;
    }
}

static void write_q8_0(FILE *f, const float *x, uint64_t n)
{
    uint64_t b;
    int j;
    for (b = 0; b < n / 32; b++, x += 32) {
        uint8_t blk[34];
        float amax = 0.0f, d, id;
        for (j = 0; j < 32; j++) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
        d = amax / 127.0f;
        id = d != 0.0f ? 1.0f / d : 0.0f;
        blk[0] = (uint8_t)(llm__f32_to_f16(d) & 0xff);
        blk[1] = (uint8_t)(llm__f32_to_f16(d) >> 8);
        for (j = 0; j < 32; j++) blk[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
        fwrite(blk, 1, sizeof blk, f);
    }
}

static void write_tensor(FILE *f, const out_tensor *o, uint64_t n)
{
    uint64_t i;
    if (!o->src) {
        fwrite(o->raw, 1, (size_t)o->n_bytes, f);
        return;
    }
    switch (o->type) {
    case GGML_F32:
        for (i = 0; i < n; i++) put_le(f, f32_bits(o->src[i]), 4);
        break;
    case GGML_F16:
        for (i = 0; i < n; i++) put_le(f, llm__f32_to_f16(o->src[i]), 2);
        break;
    case GGML_BF16:
        for (i = 0; i < n; i++) put_le(f, llm__f32_to_bf16(o->src[i]), 2);
        break;
    default: write_q8_0(f, o->src, n); break;
    }
}

static uint32_t file_type_of(llm_gguf_type t)
{
    static const uint32_t map[] = {FTYPE_ALL_F32, FTYPE_MOSTLY_F16, FTYPE_MOSTLY_BF16, FTYPE_MOSTLY_Q8_0};
    return map[t];
}

/* Header, metadata (general.file_type replaced or appended), tensor infos, data. */
static void write_gguf(FILE *f, const uint8_t *d, const llm_gguf_layout *g, const out_tensor *out, llm_gguf_type type)
{
    static const llm_bytes file_type = {"general.file_type", 17};
    uint64_t i, pos = 0, has_ft = 0;
    for (i = 0; i < g->n_kv; i++) has_ft |= name_is(g->kv[i].name, "general.file_type");
    fwrite("GGUF", 1, 4, f);
    put_le(f, 3, 4);
    put_le(f, g->n_tensors, 8);
    put_le(f, g->n_kv + !has_ft, 8);
    pos = 24;
    for (i = 0; i < g->n_kv; i++) {
        if (name_is(g->kv[i].name, "general.file_type")) {
            put_str(f, file_type);
            put_le(f, GGUF_UINT32, 4);
            put_le(f, file_type_of(type), 4);
            pos += 8 + 17 + 8;
        } else {
            fwrite(d + g->kv[i].start, 1, g->kv[i].end - g->kv[i].start, f);
            pos += g->kv[i].end - g->kv[i].start;
        }
    }
    if (!has_ft) {
        put_str(f, file_type);
        put_le(f, GGUF_UINT32, 4);
        put_le(f, file_type_of(type), 4);
        pos += 8 + 17 + 8;
    }
    for (i = 0; i < g->n_tensors; i++) {
        const llm_gguf_tensor_info *t = &g->t[i];
        uint32_t k;
        put_str(f, t->name);
        put_le(f, t->n_dims, 4);
        for (k = 0; k < t->n_dims; k++) put_le(f, t->ne[k], 8);
        put_le(f, out[i].type, 4);
        put_le(f, out[i].offset, 8);
        pos += 8 + t->name.n + 4 + 8 * (uint64_t)t->n_dims + 4 + 8;
    }
    pad_to(f, &pos, g->alignment);
    for (i = 0; i < g->n_tensors; i++) {
        write_tensor(f, &out[i], g->t[i].n_elements);
        pos += out[i].n_bytes;
        if (i + 1 < g->n_tensors) pad_to(f, &pos, g->alignment);
    }
}

/* Write through a temporary file in out_path's directory and a rename. The temporary is
   created with open(O_EXCL) and mode 0666 rather than mkstemp, whose 0600 would make the
   export unreadable to other users whatever the umask says. */
static int write_file_atomically(const char *out_path, const uint8_t *d, const llm_gguf_layout *g, const out_tensor *out,
                                 llm_gguf_type type, char *err, size_t errlen)
{
    size_t len = strlen(out_path);
    char *tmp = (char *)malloc(len + 32);
    FILE *f = NULL;
    int fd, ok;
    if (!tmp) return llm__errf(err, errlen, "out of memory");
    snprintf(tmp, len + 32, "%s.tmp-%ld", out_path, (long)getpid());
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0666);
    if (fd < 0 || !(f = fdopen(fd, "wb"))) {
        int e = errno;
        if (fd >= 0) close(fd), unlink(tmp);
        free(tmp);
        return llm__errf(err, errlen, "%s: cannot create: %s", out_path, strerror(e));
    }
    write_gguf(f, d, g, out, type);
    ok = fflush(f) == 0 && !ferror(f) && fsync(fileno(f)) == 0;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, out_path) != 0) {
        int e = errno;
        unlink(tmp);
        free(tmp);
        return llm__errf(err, errlen, "%s: cannot write: %s", out_path, strerror(e));
    }
    free(tmp);
    return 0;
}

int llm_gguf_type_parse(const char *name, llm_gguf_type *out)
{
    static const char *const names[] = {"f32", "f16", "bf16", "q8_0"};
    int i;
    for (i = 0; name && i < 4; i++)
        if (!strcmp(name, names[i])) {
            if (out) *out = (llm_gguf_type)i;
            return 0;
        }
    return 1;
}

int llm_gguf_write(const uint8_t *original, size_t original_size, const llm_config *cfg, const llm_weights *w,
                   llm_gguf_type type, const char *out_path, char *err, size_t errlen)
{
    llm_gguf_layout g;
    out_tensor *out;
    int rc;
    if (!original || !cfg || !w || !w->arena || !out_path || !out_path[0] || (unsigned)type > LLM_GGUF_Q8_0)
        return llm__errf(err, errlen, "llm_gguf_write: missing or invalid argument");
    if (llm__gguf_layout(original, original_size, &g, err, errlen)) return 1;
    out = (out_tensor *)calloc((size_t)g.n_tensors + 1, sizeof *out);
    if (!out) {
        llm__gguf_layout_free(&g);
        return llm__errf(err, errlen, "out of memory");
    }
    rc = plan_tensors(original, original_size, &g, cfg, w, type, out, err, errlen) ||
         write_file_atomically(out_path, original, &g, out, type, err, errlen);
    free(out);
    llm__gguf_layout_free(&g);
    return rc;
}
