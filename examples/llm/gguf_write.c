/* gguf_write.c - GGUF v3 output (see gguf_write.h): with a GGUF original's metadata
   (llm_gguf_write), or with the metadata llama.cpp's converter writes for a Hugging Face
   folder (llm_gguf_write_model). Both fill one gguf_out (the key-value pairs encoded, the
   tensor infos, the weights to convert) that one writer puts in the file.

   The original's layout (every key-value pair's bytes, every tensor info) comes from the
   loader's own validated GGUF parse (llm__gguf_layout in load.c), so an original is read
   by one parser, the fuzzed one.

   References: the GGUF v3 spec (ggml docs/gguf.md), ggml's Q8_0 block and
   quantize_row_q8_0_ref, llama.cpp's llama_ftype numbers; no code is taken from them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_write.h"
#include "files.h"
#include "llm_internal.h"

/* GGUF value types the writer emits */
enum { GGUF_UINT32 = 4, GGUF_INT32 = 5, GGUF_FLOAT32 = 6, GGUF_BOOL = 7, GGUF_STRING = 8, GGUF_ARRAY = 9 };
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
/* The file to write: key-value pairs already encoded, tensor infos, the weights.         */

typedef struct out_tensor {
    llm_bytes name;
    uint32_t n_dims, type;
    uint64_t ne[4], n_elements;
    const float *src;          /* the weights to convert, or NULL: copy raw */
    const uint8_t *raw;
    uint64_t n_bytes, offset;
} out_tensor;

typedef struct gguf_out {
    uint8_t *kv;               /* the encoded key-value pairs */
    size_t kv_len, kv_cap;
    uint64_t n_kv;
    int oom;
    out_tensor *t;
    uint64_t n_tensors, alignment;
} gguf_out;

static void gguf_out_free(gguf_out *o)
{
    free(o->kv);
    free(o->t);
}

static void kv_bytes(gguf_out *o, const void *p, size_t n)
{
    if (o->oom) return;
    if (o->kv_len + n > o->kv_cap) {
        size_t cap = (o->kv_cap ? 2 * o->kv_cap : 4096) + n;
        uint8_t *k = (uint8_t *)realloc(o->kv, cap);
        if (!k) {
            o->oom = 1;
            return;
        }
        o->kv = k;
        o->kv_cap = cap;
    }
    if (n) memcpy(o->kv + o->kv_len, p, n);
    o->kv_len += n;
}

static void kv_le(gguf_out *o, uint64_t v, int bytes)
{
    uint8_t b[8];
    int i;
    for (i = 0; i < bytes; i++) b[i] = (uint8_t)(v >> (8 * i));
    kv_bytes(o, b, (size_t)bytes);
}

static void kv_string(gguf_out *o, const char *p, size_t n)
{
    kv_le(o, n, 8);
    kv_bytes(o, p, n);
}

/* A new pair's key and value type (the value follows). */
static void kv_key(gguf_out *o, const char *key, uint32_t type)
{
    kv_string(o, key, strlen(key));
    kv_le(o, type, 4);
    o->n_kv++;
}

static void kv_u32(gguf_out *o, const char *key, uint32_t v)
{
    kv_key(o, key, GGUF_UINT32);
    kv_le(o, v, 4);
}

static void kv_f32(gguf_out *o, const char *key, float v)
{
    kv_key(o, key, GGUF_FLOAT32);
    kv_le(o, f32_bits(v), 4);
}

static void kv_bool(gguf_out *o, const char *key, int v)
{
    kv_key(o, key, GGUF_BOOL);
    kv_le(o, v != 0, 1);
}

static void kv_str(gguf_out *o, const char *key, const char *v)
{
    kv_key(o, key, GGUF_STRING);
    kv_string(o, v, strlen(v));
}

/* An array's header: its element type and count (the elements follow). */
static void kv_array(gguf_out *o, const char *key, uint32_t elem_type, uint64_t count)
{
    kv_key(o, key, GGUF_ARRAY);
    kv_le(o, elem_type, 4);
    kv_le(o, count, 8);
}

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

static uint32_t ggml_type_of(llm_gguf_type t)
{
    static const uint32_t map[] = {GGML_F32, GGML_F16, GGML_BF16, GGML_Q8_0};
    return map[t];
}

/* A weight of the model as tensor t (see gguf_write.h: 1-D stays F32, Q8_0 falls back to
   F16 for rows that are not whole blocks). */
static void set_weight(out_tensor *t, const float *src, llm_gguf_type type)
{
    t->src = src;
    t->type = t->n_dims == 1 ? GGML_F32 : ggml_type_of(type);
    if (t->type == GGML_Q8_0 && t->ne[0] % 32) t->type = GGML_F16;
}

/* Byte sizes and offsets in the data section; 1 (message in err) for a type it cannot size. */
static int place_tensors(gguf_out *o, char *err, size_t errlen)
{
    uint64_t i, offset = 0;
    for (i = 0; i < o->n_tensors; i++) {
        out_tensor *t = &o->t[i];
        t->n_bytes = type_bytes(t->type, t->n_elements, t->ne[0]);
        if (!t->n_bytes && t->n_elements)
            return llm__errf(err, errlen, "tensor '%.*s' of the original has type %u, which the writer cannot copy",
                             (int)t->name.n, t->name.p, t->type);
        t->offset = offset;
        offset = (offset + t->n_bytes + o->alignment - 1) / o->alignment * o->alignment;
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

static void write_tensor(FILE *f, const out_tensor *o)
{
    uint64_t i, n = o->n_elements;
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

/* Header, the key-value pairs, tensor infos, data. */
static void write_gguf(FILE *f, const gguf_out *o)
{
    uint64_t i, pos = 24 + o->kv_len;
    fwrite("GGUF", 1, 4, f);
    put_le(f, 3, 4);
    put_le(f, o->n_tensors, 8);
    put_le(f, o->n_kv, 8);
    fwrite(o->kv, 1, o->kv_len, f);
    for (i = 0; i < o->n_tensors; i++) {
        const out_tensor *t = &o->t[i];
        uint32_t k;
        put_str(f, t->name);
        put_le(f, t->n_dims, 4);
        for (k = 0; k < t->n_dims; k++) put_le(f, t->ne[k], 8);
        put_le(f, t->type, 4);
        put_le(f, t->offset, 8);
        pos += 8 + t->name.n + 4 + 8 * (uint64_t)t->n_dims + 4 + 8;
    }
    pad_to(f, &pos, o->alignment);
    for (i = 0; i < o->n_tensors; i++) {
        write_tensor(f, &o->t[i]);
        pos += o->t[i].n_bytes;
        if (i + 1 < o->n_tensors) pad_to(f, &pos, o->alignment);
    }
}

/* Whole or not at all: files.h (out_path.tmp created exclusively, fsync, rename). */
static int write_file_atomically(const char *out_path, const gguf_out *o, char *err, size_t errlen)
{
    file_out f;
    char why[1200];
    if (file_out_begin(&f, out_path, why, sizeof why) != 0) return llm__errf(err, errlen, "%s", why);
    write_gguf(f.f, o);
    if (file_out_commit(&f, why, sizeof why) != 0) return llm__errf(err, errlen, "%s", why);
    return 0;
}

/* ------------------------------------------------------------------------------------ */
/* From a GGUF original: its key-value pairs and tensor infos.                            */

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

/* The original's pairs, general.file_type replaced (or appended when it has none). */
static void copy_metadata(gguf_out *o, const uint8_t *d, const llm_gguf_layout *g, llm_gguf_type type)
{
    uint64_t i;
    int has_ft = 0;
    for (i = 0; i < g->n_kv; i++) {
        if (name_is(g->kv[i].name, "general.file_type")) {
            kv_u32(o, "general.file_type", file_type_of(type));
            has_ft = 1;
        } else {
            kv_bytes(o, d + g->kv[i].start, g->kv[i].end - g->kv[i].start);
            o->n_kv++;
        }
    }
    if (!has_ft) kv_u32(o, "general.file_type", file_type_of(type));
}

/* The original's tensors: the model's weights in the requested type, the rest copied. */
static int copy_tensors(gguf_out *o, const uint8_t *d, size_t n, const llm_gguf_layout *g, const llm_config *c,
                        const llm_weights *w, llm_gguf_type type, char *err, size_t errlen)
{
    uint64_t i;
    if (g->n_tensors && g->data_start > n) return llm__errf(err, errlen, "the original GGUF has no tensor data section");
    for (i = 0; i < g->n_tensors; i++) {
        const llm_gguf_tensor_info *ti = &g->t[i];
        out_tensor *t = &o->t[i];
        uint64_t count = 0;
        const float *src = weight_of(ti->name, c, w, &count);
        t->name = ti->name;
        t->n_dims = ti->n_dims;
        memcpy(t->ne, ti->ne, sizeof t->ne);
        t->n_elements = ti->n_elements;
        if (src) {
            if (count != ti->n_elements)
                return llm__errf(err, errlen, "tensor '%.*s' has %llu values in the original, the model %llu",
                                 (int)ti->name.n, ti->name.p, (unsigned long long)ti->n_elements,
                                 (unsigned long long)count);
            set_weight(t, src, type);
            continue;
        }
        t->type = ti->type;   /* not a weight of the forward: copied as it is */
        t->n_bytes = type_bytes(t->type, t->n_elements, t->ne[0]);
        if (!t->n_bytes && t->n_elements)
            return llm__errf(err, errlen, "tensor '%.*s' of the original has type %u, which the writer cannot copy",
                             (int)ti->name.n, ti->name.p, ti->type);
        if (ti->offset > n - g->data_start || t->n_bytes > n - g->data_start - ti->offset)
            return llm__errf(err, errlen, "tensor '%.*s' lies past the end of the original", (int)ti->name.n, ti->name.p);
        t->raw = d + g->data_start + ti->offset;
    }
    o->n_tensors = g->n_tensors;
    return 0;
}

/* ------------------------------------------------------------------------------------ */
/* From a model and its tokenizer (a Hugging Face folder): the metadata llama.cpp's        */
/* convert_hf_to_gguf.py writes for a Llama model.                                         */

/* The llama.cpp pre-tokenizer name of a byte-level tokenizer.json pipeline, or NULL with the
   reason in err: llama.cpp's BPE has no prefix space and applies ignore_merges exactly
   with its Llama-3 pre-tokenizer, so any other combination would tokenize differently. */
static const char *pre_name_of(const llm_tokenizer_view *v, char *err, size_t errlen)
{
    const llm_tokenizer_hf *hf = v->hf;
    const char *name = NULL;
    int ignore_merges = 0;
    if (v->kind != LLM_TOK_BPE || !hf || !hf->byte_level) {
        llm__errf(err, errlen, "the tokenizer is character BPE (SentencePiece-style, Llama-2): llama.cpp's 'llama' "
                  "tokenizer merges by token score, not by merge rank, so a GGUF of it would tokenize differently "
                  "(grzo-export --format safetensors)");
        return NULL;
    }
    if (hf->pre == LLM_PRE_GPT2) name = "gpt2";
    else if (hf->pre == LLM_PRE_DIGITS_THEN_GPT2) name = "smollm";
    else if (hf->pre == LLM_PRE_LLAMA3) name = "llama-bpe", ignore_merges = 1;
    if (!name) {
        llm__errf(err, errlen, "the tokenizer's pre-tokenizer (ByteLevel without a regex) has no llama.cpp equivalent");
        return NULL;
    }
    if (hf->byte_prefix_space) {
        llm__errf(err, errlen, "the tokenizer's ByteLevel add_prefix_space has no llama.cpp equivalent");
        return NULL;
    }
    if (hf->ignore_merges != ignore_merges) {
        llm__errf(err, errlen, "the tokenizer %s ignore_merges, which llama.cpp's '%s' pre-tokenizer %s",
                  hf->ignore_merges ? "sets" : "does not set", name, ignore_merges ? "always applies" : "never applies");
        return NULL;
    }
    return name;
}

static llm_bytes token_of(const llm_tokenizer_view *v, int32_t i)
{
    llm_bytes b;
    b.p = v->pool + v->off[i];
    b.n = v->len[i];
    return b;
}

/* tokenizer.ggml.*: tokens (ids without a token, and ids past the tokenizer up to the
   model's vocabulary, become "[PAD<id>]", UNUSED, as the converter writes them), types,
   merges as "left right", the bos/eos/unknown/padding ids, add_bos/add_eos, the chat template. */
static void put_tokenizer(gguf_out *o, const llm_tokenizer_view *v, const char *pre, int32_t n_vocab)
{
    int32_t i;
    char pad[32];
    kv_str(o, "tokenizer.ggml.model", "gpt2");
    kv_str(o, "tokenizer.ggml.pre", pre);
    kv_array(o, "tokenizer.ggml.tokens", GGUF_STRING, (uint64_t)n_vocab);
    for (i = 0; i < n_vocab; i++) {
        llm_bytes t = i < v->n_tokens ? token_of(v, i) : (llm_bytes){"", 0};
        if (i < v->n_tokens && !(t.n == 0 && v->types[i] == LLM_TOKTYPE_UNUSED)) {
            kv_string(o, t.p, t.n);
        } else {
            snprintf(pad, sizeof pad, "[PAD%d]", (int)i);
            kv_string(o, pad, strlen(pad));
        }
    }
    kv_array(o, "tokenizer.ggml.token_type", GGUF_INT32, (uint64_t)n_vocab);
    for (i = 0; i < n_vocab; i++) kv_le(o, i < v->n_tokens ? v->types[i] : LLM_TOKTYPE_UNUSED, 4);
    kv_array(o, "tokenizer.ggml.merges", GGUF_STRING, (uint64_t)v->n_merges);
    for (i = 0; i < v->n_merges; i++) {
        llm_bytes a = token_of(v, v->merge_left[i]), b = token_of(v, v->merge_right[i]);
        kv_le(o, a.n + 1 + b.n, 8);
        kv_bytes(o, a.p, a.n);
        kv_bytes(o, " ", 1);
        kv_bytes(o, b.p, b.n);
    }
    if (v->bos >= 0) kv_u32(o, "tokenizer.ggml.bos_token_id", (uint32_t)v->bos);
    if (v->eos >= 0) kv_u32(o, "tokenizer.ggml.eos_token_id", (uint32_t)v->eos);
    if (v->unk >= 0) kv_u32(o, "tokenizer.ggml.unknown_token_id", (uint32_t)v->unk);
    if (v->pad >= 0) kv_u32(o, "tokenizer.ggml.padding_token_id", (uint32_t)v->pad);
    kv_bool(o, "tokenizer.ggml.add_bos_token", v->add_bos);
    kv_bool(o, "tokenizer.ggml.add_eos_token", 0);   /* grzo's tokenizer.json post-processor adds BOS only */
    if (v->chat_template) kv_str(o, "tokenizer.chat_template", v->chat_template);
}

/* llama.cpp's pre-tokenizer name for cfg's model with tokenizer v, or NULL with err set: every
   refusal of llm_gguf_write_model that the weights do not decide. */
static const char *checked_pre_name(const llm_config *cfg, const llm_tokenizer_view *v, char *err, size_t errlen)
{
    const char *pre;
    int32_t i;
    if (llm__config_check(cfg, err, errlen) || !(pre = pre_name_of(v, err, errlen))) return NULL;
    if (v->n_tokens > cfg->vocab_size) {
        llm__errf(err, errlen, "the tokenizer has %d tokens, the model's vocabulary %d", (int)v->n_tokens,
                  (int)cfg->vocab_size);
        return NULL;
    }
    for (i = 0; i < v->n_merges; i++) {
        llm_bytes a = token_of(v, v->merge_left[i]), b = token_of(v, v->merge_right[i]);
        if (memchr(a.p, ' ', a.n) || memchr(b.p, ' ', b.n)) {
            llm__errf(err, errlen, "merge %d names a token with a space, which GGUF's \"left right\" merges cannot spell",
                      (int)i);
            return NULL;
        }
    }
    return pre;
}

int llm_gguf_check_model(const llm_config *cfg, const llm_tokenizer *tok, char *err, size_t errlen)
{
    llm_tokenizer_view v;
    if (!cfg || !tok) return llm__errf(err, errlen, "llm_gguf_check_model: missing argument");
    llm__tokenizer_view(tok, &v);
    return checked_pre_name(cfg, &v, err, errlen) ? 0 : 1;
}

/* general.* and llama.* as the converter writes them; a llama3 rope_scaling also as
   grzo.rope.llama3.* (llama.cpp has no keys for it: its factors are rope_freqs.weight,
   from which the parameters cannot be recovered; llama.cpp ignores unknown keys). */
static void put_model(gguf_out *o, const llm_config *c, const char *name, llm_gguf_type type)
{
    kv_str(o, "general.architecture", "llama");
    kv_str(o, "general.type", "model");
    kv_str(o, "general.name", name);
    kv_u32(o, "llama.block_count", (uint32_t)c->n_layers);
    kv_u32(o, "llama.context_length", (uint32_t)c->max_seq_len);
    kv_u32(o, "llama.embedding_length", (uint32_t)c->dim);
    kv_u32(o, "llama.feed_forward_length", (uint32_t)c->hidden_dim);
    kv_u32(o, "llama.attention.head_count", (uint32_t)c->n_heads);
    kv_u32(o, "llama.attention.head_count_kv", (uint32_t)c->n_kv_heads);
    kv_f32(o, "llama.rope.freq_base", c->rope_theta);
    kv_f32(o, "llama.attention.layer_norm_rms_epsilon", c->norm_eps);
    if (c->head_dim * c->n_heads != c->dim) {
        kv_u32(o, "llama.attention.key_length", (uint32_t)c->head_dim);
        kv_u32(o, "llama.attention.value_length", (uint32_t)c->head_dim);
    }
    kv_u32(o, "general.file_type", file_type_of(type));
    kv_u32(o, "llama.vocab_size", (uint32_t)c->vocab_size);
    kv_u32(o, "llama.rope.dimension_count", (uint32_t)c->head_dim);
    if (c->rope_scaling == LLM_ROPE_SCALING_LLAMA3) {
        kv_f32(o, LLM_GGUF_KEY_LLAMA3_FACTOR, c->rope_factor);
        kv_f32(o, LLM_GGUF_KEY_LLAMA3_LOW, c->rope_low_freq_factor);
        kv_f32(o, LLM_GGUF_KEY_LLAMA3_HIGH, c->rope_high_freq_factor);
        kv_u32(o, LLM_GGUF_KEY_LLAMA3_ORIG, (uint32_t)c->rope_original_max_pos);
    }
    kv_u32(o, "general.quantization_version", 2);
}

/* A tensor named by printf, with GGUF dims ne0 (fastest) and ne1 (1 for a vector). */
static void put_tensor(out_tensor *t, char *name_buf, const char *fmt, int layer, uint64_t ne0, uint64_t ne1,
                       const float *src, llm_gguf_type type)
{
    snprintf(name_buf, 48, fmt, layer);
    t->name.p = name_buf;
    t->name.n = strlen(name_buf);
    t->n_dims = ne1 == 0 ? 1 : 2;
    t->ne[0] = ne0;
    t->ne[1] = ne1 ? ne1 : 1;
    t->ne[2] = t->ne[3] = 1;
    t->n_elements = ne0 * t->ne[1];
    set_weight(t, src, type);
}

/* rope_freqs.weight (llama3 scaling only), the embedding, the layers, the final norm, the
   output head (untied only): llama.cpp's names, Q/K rows as llm_weights holds them. */
static uint64_t put_weights(out_tensor *t, char (*names)[48], const llm_config *c, const llm_weights *w,
                            const float *rope_factors, llm_gguf_type type)
{
    uint64_t dim = (uint64_t)c->dim, q = (uint64_t)c->n_heads * (uint64_t)c->head_dim;
    uint64_t kv = (uint64_t)c->n_kv_heads * (uint64_t)c->head_dim, hid = (uint64_t)c->hidden_dim, n = 0;
    int32_t l;
    if (rope_factors) put_tensor(&t[n], names[n], "rope_freqs.weight", 0, (uint64_t)c->head_dim / 2, 0, rope_factors, type), n++;
    put_tensor(&t[n], names[n], "token_embd.weight", 0, dim, (uint64_t)c->vocab_size, w->tok_emb, type), n++;
    for (l = 0; l < c->n_layers; l++) {
        const llm_layer *L = &w->layers[l];
        put_tensor(&t[n], names[n], "blk.%d.attn_norm.weight", l, dim, 0, L->attn_norm, type), n++;
        put_tensor(&t[n], names[n], "blk.%d.attn_q.weight", l, dim, q, L->wq, type), n++;
        put_tensor(&t[n], names[n], "blk.%d.attn_k.weight", l, dim, kv, L->wk, type), n++;
        put_tensor(&t[n], names[n], "blk.%d.attn_v.weight", l, dim, kv, L->wv, type), n++;
        put_tensor(&t[n], names[n], "blk.%d.attn_output.weight", l, q, dim, L->wo, type), n++;
        put_tensor(&t[n], names[n], "blk.%d.ffn_norm.weight", l, dim, 0, L->ffn_norm, type), n++;
        put_tensor(&t[n], names[n], "blk.%d.ffn_gate.weight", l, dim, hid, L->w1, type), n++;
        put_tensor(&t[n], names[n], "blk.%d.ffn_down.weight", l, hid, dim, L->w2, type), n++;
        put_tensor(&t[n], names[n], "blk.%d.ffn_up.weight", l, dim, hid, L->w3, type), n++;
    }
    put_tensor(&t[n], names[n], "output_norm.weight", 0, dim, 0, w->final_norm, type), n++;
    if (!c->tied_output) put_tensor(&t[n], names[n], "output.weight", 0, dim, (uint64_t)c->vocab_size, w->output, type), n++;
    return n;
}

int llm_gguf_write_model(const llm_config *cfg, const llm_weights *w, const llm_tokenizer *tok, const char *name,
                         llm_gguf_type type, const char *out_path, char *err, size_t errlen)
{
    llm_tokenizer_view v;
    gguf_out o;
    const char *pre;
    float *factors = NULL;
    char (*names)[48] = NULL;
    size_t cap;
    int rc = 1;
    if (!cfg || !w || !w->arena || !tok || !name || !out_path || !out_path[0] || (unsigned)type > LLM_GGUF_Q8_0)
        return llm__errf(err, errlen, "llm_gguf_write_model: missing or invalid argument");
    llm__tokenizer_view(tok, &v);
    if (!(pre = checked_pre_name(cfg, &v, err, errlen))) return 1;
    memset(&o, 0, sizeof o);
    o.alignment = 32;
    cap = (size_t)cfg->n_layers * 9 + 4;
    o.t = (out_tensor *)calloc(cap, sizeof *o.t);
    names = (char (*)[48])calloc(cap, sizeof *names);
    if (cfg->rope_scaling == LLM_ROPE_SCALING_LLAMA3 && (factors = (float *)malloc((size_t)cfg->head_dim / 2 * sizeof *factors)))
        llm__rope_freq_factors(cfg, factors);
    if (!o.t || !names || (cfg->rope_scaling == LLM_ROPE_SCALING_LLAMA3 && !factors)) {
        llm__errf(err, errlen, "out of memory");
        goto done;
    }
    put_model(&o, cfg, name, type);
    put_tokenizer(&o, &v, pre, cfg->vocab_size);
    if (o.oom) {
        llm__errf(err, errlen, "out of memory");
        goto done;
    }
    o.n_tensors = put_weights(o.t, names, cfg, w, factors, type);
    rc = place_tensors(&o, err, errlen) || write_file_atomically(out_path, &o, err, errlen);
done:
    gguf_out_free(&o);
    free(names);
    free(factors);
    return rc;
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
    gguf_out o;
    int rc;
    if (!original || !cfg || !w || !w->arena || !out_path || !out_path[0] || (unsigned)type > LLM_GGUF_Q8_0)
        return llm__errf(err, errlen, "llm_gguf_write: missing or invalid argument");
    if (llm__gguf_layout(original, original_size, &g, err, errlen)) return 1;
    memset(&o, 0, sizeof o);
    o.alignment = g.alignment;
    o.t = (out_tensor *)calloc((size_t)g.n_tensors + 1, sizeof *o.t);
    if (o.t) copy_metadata(&o, original, &g, type);
    if (!o.t || o.oom) {
        rc = llm__errf(err, errlen, "out of memory");
    } else {
        rc = copy_tensors(&o, original, original_size, &g, cfg, w, type, err, errlen) ||
             place_tensors(&o, err, errlen) || write_file_atomically(out_path, &o, err, errlen);
    }
    gguf_out_free(&o);
    llm__gguf_layout_free(&g);
    return rc;
}
