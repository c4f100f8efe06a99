/* load_hf.c - Hugging Face Llama-family folders for the grzo LLM examples (llm_load of a
   directory).

   A folder holds config.json (transformers' LlamaConfig or MistralConfig), the weights as
   model.safetensors or as shards listed by model.safetensors.index.json (transformers'
   order: the single file first), and tokenizer.json (tokenizer_hf.c).

   config.json: the sizes are required (hidden_size, intermediate_size, num_hidden_layers,
   num_attention_heads, vocab_size); num_key_value_heads, head_dim, max_position_embeddings,
   rms_norm_eps, rope_theta and tie_word_embeddings take LlamaConfig's defaults when absent
   or null. Anything this forward would compute differently is refused, never guessed: other
   model types, activations other than silu, attention or MLP biases, an active sliding
   window (sliding_window < max_position_embeddings), partial rotary, quantized checkpoints,
   and rotary scaling other than "llama3" (whose parameters go to llm_config).

   safetensors (the format's spec, huggingface/safetensors README): an 8-byte little-endian
   header length N, N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]}, ...,
   "__metadata__": {string: string}}, then the data. The header is untrusted: N must fit in
   the file (and under safetensors' own 100 MiB limit), every entry must have exactly those
   three fields, a dtype of F32, F16 or BF16, at most 8 non-negative dimensions whose product
   times the dtype size (overflow-checked) is end - begin, and, as the safetensors library
   requires, the entries must tile the data exactly: sorted by offset, each begins where the
   one before ended, the last ends at the end of the file (no overlap, no gap). Tensor names
   must be unique across shards; every tensor the config needs must be there with its shape,
   and no other tensor may be (a bias or an unknown tensor would be silently ignored) except
   the rotary inv_freq buffers older checkpoints carry (they are recomputed from config).
   Shard names in the index must be plain file names in the folder (no '/', '\\', "." or
   ".."); every tensor of a shard must be listed in the index under that shard, and every
   listed tensor must be in its shard. Every check runs before the weights are allocated.

   Rotary layout: transformers rotates the two halves of each head (i, i + hd/2); grzo's
   forward rotates adjacent pairs (2i, 2i + 1), GGUF's "llama" layout. The rows of q_proj and
   k_proj are permuted at load exactly as llama.cpp's convert_hf_to_gguf.py permutes them
   (llm__hf_row_from_ours, llm_internal.h), so a model loaded from its HF folder and from
   llama.cpp's GGUF of it has the same weights; safetensors_write.c applies the inverse.

   Memory: shards are memory-mapped read-only, each tensor is converted to fp32 straight
   from the map into the arena, and its pages are then given back (madvise MADV_DONTNEED),
   so the resident set at load is the fp32 arena plus about one tensor, not arena plus file.
   No code is taken from transformers, safetensors or llama.cpp. */
#if !defined(_WIN32)
#define _POSIX_C_SOURCE 200809L   /* fstat, O_CLOEXEC */
#define _DEFAULT_SOURCE           /* madvise (glibc) */
#endif

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json.h"
#include "llm.h"
#include "llm_internal.h"

#define HF_MAX_HEADER ((uint64_t)100 << 20)   /* safetensors' limit on the JSON header */
#define HF_MAX_DIMS 8
#define HF_NAME_MAX 255                      /* a shard's file name */

enum { ST_F32 = 0, ST_F16 = 1, ST_BF16 = 2 };

/* One tensor of a shard's header; name and data point into the shard (its JSON, its image). */
typedef struct hf_tensor {
    const char *name;
    int dtype;
    int n_dims;
    uint64_t shape[HF_MAX_DIMS];
    uint64_t n_elements, begin, end;   /* end - begin bytes at data + begin */
    const uint8_t *data;               /* the shard's data section */
    int32_t shard;
    int used;
} hf_tensor;

typedef struct hf_shard {
    const char *file;                  /* the name in the folder (a literal or the index's string) */
    const uint8_t *image;
    size_t size;
    json_value header;
} hf_shard;

typedef struct hf_set {
    const llm_hf_files *fs;
    hf_shard *shards;
    int32_t n_shards;
    hf_tensor *t;
    size_t n_t, cap_t;
    json_value index;                  /* model.safetensors.index.json (JSON_NULL: single file) */
    char *err;
    size_t errlen;
} hf_set;

static uint64_t rd_le64(const uint8_t *b)
{
    uint64_t v = 0;
    int i;
    for (i = 7; i >= 0; i--) v = v << 8 | b[i];
    return v;
}

static uint16_t rd_le16(const uint8_t *b)
{
    return (uint16_t)(b[0] | b[1] << 8);
}

/* ------------------------------------------------------------------------------------ */
/* config.json                                                                           */

/* A member that is present and not null, or NULL. */
static const json_value *cfg_member(const json_value *obj, const char *key)
{
    const json_value *v = json_get(obj, key);
    return v && v->type != JSON_NULL ? v : NULL;
}

static int cfg_int(const json_value *obj, const char *key, int required, long long dflt, long long lo, long long hi,
                   int32_t *out, char *err, size_t errlen)
{
    const json_value *v = cfg_member(obj, key);
    long long x = dflt;
    if (!v) {
        if (required) return llm__errf(err, errlen, "config.json: '%s' is missing", key);
    } else if (v->type != JSON_NUMBER || !v->is_integer) {
        return llm__errf(err, errlen, "config.json: '%s' must be an integer", key);
    } else {
        x = v->integer;
    }
    if (x < lo || x > hi) return llm__errf(err, errlen, "config.json: '%s' = %lld is outside %lld..%lld", key, x, lo, hi);
    *out = (int32_t)x;
    return 0;
}

static int cfg_num(const json_value *obj, const char *key, int required, double dflt, double *out, char *err,
                   size_t errlen)
{
    const json_value *v = cfg_member(obj, key);
    if (!v) {
        if (required) return llm__errf(err, errlen, "config.json: '%s' is missing", key);
        *out = dflt;
        return 0;
    }
    if (v->type != JSON_NUMBER) return llm__errf(err, errlen, "config.json: '%s' must be a number", key);
    *out = v->number;
    return 0;
}

static int cfg_bool(const json_value *obj, const char *key, int dflt, int *out, char *err, size_t errlen)
{
    const json_value *v = cfg_member(obj, key);
    if (!v) {
        *out = dflt;
        return 0;
    }
    if (v->type != JSON_TRUE && v->type != JSON_FALSE) return llm__errf(err, errlen, "config.json: '%s' must be true or false", key);
    *out = v->type == JSON_TRUE;
    return 0;
}

/* A string member, or NULL when absent or null; not a string: an error. */
static int cfg_str(const json_value *obj, const char *key, const char **out, char *err, size_t errlen)
{
    const json_value *v = cfg_member(obj, key);
    *out = NULL;
    if (!v) return 0;
    if (v->type != JSON_STRING) return llm__errf(err, errlen, "config.json: '%s' must be a string", key);
    *out = v->string;
    return 0;
}

/* model_type and architectures name a Llama-family model this forward computes exactly. */
static int cfg_architecture(const json_value *root, char *err, size_t errlen)
{
    const json_value *arch = cfg_member(root, "architectures");
    const char *type;
    size_t i;
    if (cfg_str(root, "model_type", &type, err, errlen)) return 1;
    if (!type) return llm__errf(err, errlen, "config.json: 'model_type' is missing");
    if (strcmp(type, "llama") != 0 && strcmp(type, "mistral") != 0)
        return llm__errf(err, errlen, "config.json: model_type '%.64s' is not supported (only llama and mistral)", type);
    if (!arch) return 0;
    if (arch->type != JSON_ARRAY) return llm__errf(err, errlen, "config.json: 'architectures' must be an array");
    for (i = 0; i < arch->n; i++) {
        const json_value *a = &arch->items[i];
        if (a->type != JSON_STRING || (strcmp(a->string, "LlamaForCausalLM") != 0 && strcmp(a->string, "MistralForCausalLM") != 0))
            return llm__errf(err, errlen, "config.json: architecture '%.64s' is not supported (LlamaForCausalLM, "
                             "MistralForCausalLM)", a->type == JSON_STRING ? a->string : "(not a string)");
    }
    return 0;
}

/* Features this forward does not have: refused rather than ignored. */
static int cfg_refuse_features(const json_value *root, int32_t max_pos, char *err, size_t errlen)
{
    const char *act;
    int bias = 0;
    double partial = 1.0;
    const json_value *sw;
    if (cfg_str(root, "hidden_act", &act, err, errlen)) return 1;
    if (act && strcmp(act, "silu") != 0)
        return llm__errf(err, errlen, "config.json: hidden_act '%.32s' is not supported (only silu)", act);
    if (cfg_bool(root, "attention_bias", 0, &bias, err, errlen)) return 1;
    if (bias) return llm__errf(err, errlen, "config.json: attention_bias is not supported");
    if (cfg_bool(root, "mlp_bias", 0, &bias, err, errlen)) return 1;
    if (bias) return llm__errf(err, errlen, "config.json: mlp_bias is not supported");
    if (cfg_member(root, "quantization_config"))
        return llm__errf(err, errlen, "config.json: quantized checkpoints (quantization_config) are not supported");
    if (cfg_num(root, "partial_rotary_factor", 0, 1.0, &partial, err, errlen)) return 1;
    if (partial != 1.0) return llm__errf(err, errlen, "config.json: partial_rotary_factor %g is not supported (only 1)", partial);
    sw = cfg_member(root, "sliding_window");
    if (sw) {
        if (sw->type != JSON_NUMBER || !sw->is_integer || sw->integer <= 0)
            return llm__errf(err, errlen, "config.json: 'sliding_window' must be a positive integer or null");
        if (sw->integer < (long long)max_pos)
            return llm__errf(err, errlen, "config.json: sliding-window attention (sliding_window %lld < "
                             "max_position_embeddings %d) is not supported", sw->integer, (int)max_pos);
    }
    return 0;
}

/* rope_scaling: null, {"rope_type"/"type": "default"} or Llama-3.1's "llama3". */
static int cfg_rope_scaling(const json_value *root, llm_config *c, char *err, size_t errlen)
{
    const json_value *rs = cfg_member(root, "rope_scaling");
    const char *t1 = NULL, *t2 = NULL, *type;
    double factor = 0, lo = 0, hi = 0;
    int32_t orig = 0;
    if (!rs) return 0;
    if (rs->type != JSON_OBJECT) return llm__errf(err, errlen, "config.json: 'rope_scaling' must be an object or null");
    if (cfg_str(rs, "rope_type", &t1, err, errlen) || cfg_str(rs, "type", &t2, err, errlen)) return 1;
    if (t1 && t2 && strcmp(t1, t2) != 0)
        return llm__errf(err, errlen, "config.json: rope_scaling has rope_type '%.32s' and type '%.32s'", t1, t2);
    type = t1 ? t1 : t2;
    if (!type) return llm__errf(err, errlen, "config.json: rope_scaling has no rope_type");
    if (!strcmp(type, "default")) return 0;
    if (strcmp(type, "llama3") != 0)
        return llm__errf(err, errlen, "config.json: rotary scaling '%.32s' is not supported (only llama3)", type);
    if (cfg_num(rs, "factor", 1, 0, &factor, err, errlen) || cfg_num(rs, "low_freq_factor", 1, 0, &lo, err, errlen) ||
        cfg_num(rs, "high_freq_factor", 1, 0, &hi, err, errlen) ||
        cfg_int(rs, "original_max_position_embeddings", 1, 0, 1, INT32_MAX, &orig, err, errlen))
        return 1;
    if (!(factor >= 1.0 && factor <= 1e6 && lo > 0.0 && hi > lo && hi <= 1e6))
        return llm__errf(err, errlen, "config.json: llama3 rope_scaling needs factor >= 1 and 0 < low_freq_factor < "
                         "high_freq_factor (got %g, %g, %g)", factor, lo, hi);
    c->rope_scaling = LLM_ROPE_SCALING_LLAMA3;
    c->rope_factor = (float)factor;
    c->rope_low_freq_factor = (float)lo;
    c->rope_high_freq_factor = (float)hi;
    c->rope_original_max_pos = orig;
    return 0;
}

static int hf_config(const json_value *root, llm_config *c, char *err, size_t errlen)
{
    const int32_t max_dim = 1 << 20;
    double eps = 0, theta = 0;
    int32_t head_dim = 0;
    memset(c, 0, sizeof *c);
    if (root->type != JSON_OBJECT) return llm__errf(err, errlen, "config.json: not a JSON object");
    if (cfg_architecture(root, err, errlen) || cfg_int(root, "hidden_size", 1, 0, 1, max_dim, &c->dim, err, errlen) ||
        cfg_int(root, "intermediate_size", 1, 0, 1, max_dim, &c->hidden_dim, err, errlen) ||
        cfg_int(root, "num_hidden_layers", 1, 0, 1, 1 << 16, &c->n_layers, err, errlen) ||
        cfg_int(root, "num_attention_heads", 1, 0, 1, max_dim, &c->n_heads, err, errlen) ||
        cfg_int(root, "num_key_value_heads", 0, c->n_heads, 1, max_dim, &c->n_kv_heads, err, errlen) ||
        (cfg_member(root, "head_dim") && cfg_int(root, "head_dim", 1, 0, 1, max_dim, &head_dim, err, errlen)) ||
        cfg_int(root, "vocab_size", 1, 0, 1, INT32_MAX, &c->vocab_size, err, errlen) ||
        cfg_int(root, "max_position_embeddings", 0, 2048, 1, 1 << 30, &c->max_seq_len, err, errlen) ||
        cfg_num(root, "rms_norm_eps", 0, 1e-6, &eps, err, errlen) || cfg_num(root, "rope_theta", 0, 10000.0, &theta, err, errlen) ||
        cfg_bool(root, "tie_word_embeddings", 0, &c->tied_output, err, errlen) ||
        cfg_refuse_features(root, c->max_seq_len, err, errlen) || cfg_rope_scaling(root, c, err, errlen))
        return 1;
    if (!cfg_member(root, "head_dim")) {
        if (c->dim % c->n_heads != 0)
            return llm__errf(err, errlen, "config.json: hidden_size %d is not a multiple of num_attention_heads %d (and no "
                             "head_dim)", (int)c->dim, (int)c->n_heads);
        head_dim = c->dim / c->n_heads;
    }
    c->head_dim = head_dim;
    if (!(eps > 0.0 && eps < 1.0)) return llm__errf(err, errlen, "config.json: rms_norm_eps %g is outside (0, 1)", eps);
    if (!(theta > 0.0 && theta <= FLT_MAX)) return llm__errf(err, errlen, "config.json: bad rope_theta %g", theta);
    c->norm_eps = (float)eps;
    c->rope_theta = (float)theta;
    if (llm__config_check(c, err, errlen)) return llm__err_prefix(err, errlen, "config.json");
    return 0;
}

/* ------------------------------------------------------------------------------------ */
/* safetensors headers                                                                   */

static int st_dtype(const char *s, int *dtype, size_t *size)
{
    if (!strcmp(s, "F32")) return *dtype = ST_F32, *size = 4, 0;
    if (!strcmp(s, "F16")) return *dtype = ST_F16, *size = 2, 0;
    if (!strcmp(s, "BF16")) return *dtype = ST_BF16, *size = 2, 0;
    return 1;
}

/* A non-negative JSON integer. */
static int st_uint(const json_value *v, uint64_t *out)
{
    if (v->type != JSON_NUMBER || !v->is_integer || v->integer < 0) return 1;
    *out = (uint64_t)v->integer;
    return 0;
}

static int st_push(hf_set *s, const hf_tensor *t)
{
    if (s->n_t == s->cap_t) {
        size_t cap = s->cap_t ? 2 * s->cap_t : 64;
        hf_tensor *p = (hf_tensor *)realloc(s->t, cap * sizeof *p);
        if (!p) return llm__errf(s->err, s->errlen, "out of memory");
        s->t = p;
        s->cap_t = cap;
    }
    s->t[s->n_t++] = *t;
    return 0;
}

/* One header entry {"dtype", "shape", "data_offsets"} of a tensor in a data section of
   data_size bytes. */
static int st_entry(hf_set *s, const hf_shard *sh, const char *name, const json_value *e, const uint8_t *data,
                    uint64_t data_size, int32_t shard)
{
    const json_value *dt = json_get(e, "dtype"), *shape = json_get(e, "shape"), *off = json_get(e, "data_offsets");
    hf_tensor t;
    size_t esize = 0, i;
    memset(&t, 0, sizeof t);
    t.name = name;
    t.data = data;
    t.shard = shard;
    if (!name[0]) return llm__errf(s->err, s->errlen, "%s: a tensor has an empty name", sh->file);
    if (e->type != JSON_OBJECT || e->n != 3 || !dt || !shape || !off)
        return llm__errf(s->err, s->errlen, "%s: tensor '%.64s' must be an object of exactly dtype, shape and data_offsets",
                         sh->file, name);
    if (dt->type != JSON_STRING || st_dtype(dt->string, &t.dtype, &esize))
        return llm__errf(s->err, s->errlen, "%s: tensor '%.64s' has dtype %.16s, which is not supported (F32, F16, BF16)",
                         sh->file, name, dt->type == JSON_STRING ? dt->string : "(not a string)");
    if (shape->type != JSON_ARRAY || shape->n > HF_MAX_DIMS)
        return llm__errf(s->err, s->errlen, "%s: tensor '%.64s': shape must be an array of at most %d sizes", sh->file, name,
                         HF_MAX_DIMS);
    t.n_dims = (int)shape->n;
    t.n_elements = 1;
    for (i = 0; i < shape->n; i++) {
        if (st_uint(&shape->items[i], &t.shape[i]))
            return llm__errf(s->err, s->errlen, "%s: tensor '%.64s': shape holds something other than a size", sh->file, name);
        if (t.shape[i] != 0 && t.n_elements > UINT64_MAX / t.shape[i])
            return llm__errf(s->err, s->errlen, "%s: tensor '%.64s': shape overflows", sh->file, name);
        t.n_elements *= t.shape[i];
    }
    if (off->type != JSON_ARRAY || off->n != 2 || st_uint(&off->items[0], &t.begin) || st_uint(&off->items[1], &t.end))
        return llm__errf(s->err, s->errlen, "%s: tensor '%.64s': data_offsets must be two non-negative integers", sh->file, name);
    if (t.begin > t.end || t.end > data_size)
        return llm__errf(s->err, s->errlen, "%s: tensor '%.64s': data_offsets [%llu, %llu] are outside the %llu bytes of data",
                         sh->file, name, (unsigned long long)t.begin, (unsigned long long)t.end,
                         (unsigned long long)data_size);
    if (t.n_elements > UINT64_MAX / esize || t.n_elements * esize != t.end - t.begin)
        return llm__errf(s->err, s->errlen, "%s: tensor '%.64s': %llu bytes of data for a shape that needs %s%llu", sh->file, name,
                         (unsigned long long)(t.end - t.begin), t.n_elements > UINT64_MAX / esize ? "more than " : "",
                         (unsigned long long)(t.n_elements > UINT64_MAX / esize ? UINT64_MAX : t.n_elements * esize));
    return st_push(s, &t);
}

static int by_begin(const void *a, const void *b)
{
    const hf_tensor *x = (const hf_tensor *)a, *y = (const hf_tensor *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* The entries s->t[first..n_t) of one shard tile its data: no overlap, no gap, nothing
   after the last. A header may list no tensors, and s->t stays NULL until one does: qsort
   must not be given it. */
static int st_check_tiling(hf_set *s, const hf_shard *sh, size_t first, uint64_t data_size)
{
    hf_tensor *t = s->t;
    uint64_t at = 0;
    size_t i;
    if (s->n_t - first > 1) qsort(t + first, s->n_t - first, sizeof *t, by_begin);
    for (i = first; i < s->n_t; i++) {
        if (t[i].begin != at)
            return llm__errf(s->err, s->errlen, "%s: tensor '%.64s' starts at data offset %llu, expected %llu (%s)", sh->file,
                             t[i].name, (unsigned long long)t[i].begin, (unsigned long long)at,
                             t[i].begin < at ? "tensors overlap" : "a gap in the data");
        at = t[i].end;
    }
    if (at != data_size)
        return llm__errf(s->err, s->errlen, "%s: the tensors cover %llu of the %llu bytes of data", sh->file,
                         (unsigned long long)at, (unsigned long long)data_size);
    return 0;
}

/* Open shard k (unless its image is already there) and parse its header into s->t. */
static int st_read_shard(hf_set *s, int32_t k)
{
    hf_shard *sh = &s->shards[k];
    uint64_t hlen, data_size;
    size_t i, first = s->n_t, off = 0;
    const uint8_t *data;
    char msg[200];
    if (!sh->image) {
        int rc = s->fs->open(s->fs->user, sh->file, &sh->image, &sh->size, s->err, s->errlen);
        if (rc > 0) return llm__errf(s->err, s->errlen, "%s is not in the folder", sh->file);
        if (rc < 0) return 1;
    }
    if (sh->size < 8)
        return llm__errf(s->err, s->errlen, "%s: %zu bytes is shorter than the 8-byte safetensors header length", sh->file,
                         sh->size);
    hlen = rd_le64(sh->image);
    if (hlen > (uint64_t)(sh->size - 8))
        return llm__errf(s->err, s->errlen, "%s: header length %llu runs past the end of the %zu-byte file", sh->file,
                         (unsigned long long)hlen, sh->size);
    if (hlen > HF_MAX_HEADER)
        return llm__errf(s->err, s->errlen, "%s: header length %llu is over safetensors' 100 MiB limit", sh->file,
                         (unsigned long long)hlen);
    if (json_parse((const char *)sh->image + 8, (size_t)hlen, &sh->header, &off, msg, sizeof msg))
        return llm__errf(s->err, s->errlen, "%s: header: %s (at header byte %zu)", sh->file, msg, off);
    if (sh->header.type != JSON_OBJECT) return llm__errf(s->err, s->errlen, "%s: the header is not a JSON object", sh->file);
    data = sh->image + 8 + hlen;
    data_size = (uint64_t)sh->size - 8 - hlen;
    for (i = 0; i < sh->header.n; i++) {
        const char *name = sh->header.keys[i];
        const json_value *e = &sh->header.items[i];
        if (!strcmp(name, "__metadata__")) {
            size_t j;
            if (e->type != JSON_OBJECT) return llm__errf(s->err, s->errlen, "%s: __metadata__ is not an object", sh->file);
            for (j = 0; j < e->n; j++)
                if (e->items[j].type != JSON_STRING)
                    return llm__errf(s->err, s->errlen, "%s: __metadata__ value '%.64s' is not a string", sh->file, e->keys[j]);
            continue;
        }
        if (st_entry(s, sh, name, e, data, data_size, k)) return 1;
    }
    return st_check_tiling(s, sh, first, data_size);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const hf_tensor *)a)->name, ((const hf_tensor *)b)->name);
}

/* Sort the tensors of every shard by name; a name in two shards is an error. */
static int st_index_names(hf_set *s)
{
    size_t i;
    if (s->n_t > 1) qsort(s->t, s->n_t, sizeof *s->t, by_name);   /* s->t is NULL when no header lists a tensor */
    for (i = 1; i < s->n_t; i++)
        if (!strcmp(s->t[i - 1].name, s->t[i].name))
            return llm__errf(s->err, s->errlen, "tensor '%.64s' is in both %s and %s", s->t[i].name,
                             s->shards[s->t[i - 1].shard].file, s->shards[s->t[i].shard].file);
    return 0;
}

static hf_tensor *st_find(const hf_set *s, const char *name)
{
    hf_tensor key;
    key.name = name;
    return s->n_t ? (hf_tensor *)bsearch(&key, s->t, s->n_t, sizeof *s->t, by_name) : NULL;
}

/* ------------------------------------------------------------------------------------ */
/* Shards: one file, or the index                                                        */

static int valid_shard_name(const char *f)
{
    return f[0] && strlen(f) <= HF_NAME_MAX && strcmp(f, ".") != 0 && strcmp(f, "..") != 0 && !strchr(f, '/') &&
           !strchr(f, '\\');
}

static int by_string(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The distinct shard names of the index's weight_map, checked and opened. */
static int st_open_index(hf_set *s, const uint8_t *img, size_t n)
{
    const json_value *wm;
    const char **names;
    size_t i, off = 0, n_names = 0;
    char msg[200];
    if (json_parse((const char *)img, n, &s->index, &off, msg, sizeof msg))
        return llm__errf(s->err, s->errlen, "model.safetensors.index.json: %s (at byte %zu)", msg, off);
    wm = json_get(&s->index, "weight_map");
    if (!wm || wm->type != JSON_OBJECT || wm->n == 0)
        return llm__errf(s->err, s->errlen, "model.safetensors.index.json: 'weight_map' must be a non-empty object");
    names = (const char **)malloc(wm->n * sizeof *names);
    if (!names) return llm__errf(s->err, s->errlen, "out of memory");
    for (i = 0; i < wm->n; i++) {
        const json_value *f = &wm->items[i];
        if (f->type != JSON_STRING || !valid_shard_name(f->string)) {
            llm__errf(s->err, s->errlen, "model.safetensors.index.json: tensor '%.64s' names shard '%.64s', which is not a "
                      "file name in the folder", wm->keys[i], f->type == JSON_STRING ? f->string : "(not a string)");
            free(names);
            return 1;
        }
        names[i] = f->string;
    }
    qsort(names, wm->n, sizeof *names, by_string);
    for (i = 0; i < wm->n; i++)
        if (i == 0 || strcmp(names[i], names[n_names - 1]) != 0) names[n_names++] = names[i];
    s->shards = (hf_shard *)calloc(n_names, sizeof *s->shards);
    if (!s->shards) {
        free(names);
        return llm__errf(s->err, s->errlen, "out of memory");
    }
    for (i = 0; i < n_names; i++) s->shards[i].file = names[i];
    s->n_shards = (int32_t)n_names;
    free(names);
    for (i = 0; i < n_names; i++)
        if (st_read_shard(s, (int32_t)i)) return 1;
    return 0;
}

/* Every listed tensor is in its shard, and every tensor of a shard is listed there. */
static int st_check_index(hf_set *s)
{
    const json_value *wm = json_get(&s->index, "weight_map");
    size_t i;
    for (i = 0; i < wm->n; i++) {
        const hf_tensor *t = st_find(s, wm->keys[i]);
        if (!t)
            return llm__errf(s->err, s->errlen, "model.safetensors.index.json: tensor '%.64s' is not in %s", wm->keys[i],
                             wm->items[i].string);
        if (strcmp(s->shards[t->shard].file, wm->items[i].string) != 0)
            return llm__errf(s->err, s->errlen, "model.safetensors.index.json: tensor '%.64s' is listed in %s but is in %s",
                             wm->keys[i], wm->items[i].string, s->shards[t->shard].file);
    }
    if (s->n_t != wm->n) /* names are unique on both sides: some tensor is not listed */
        for (i = 0; i < s->n_t; i++)
            if (!json_get(wm, s->t[i].name))
                return llm__errf(s->err, s->errlen, "%s: tensor '%.64s' is not listed in model.safetensors.index.json",
                                 s->shards[s->t[i].shard].file, s->t[i].name);
    return 0;
}

static int st_open_all(hf_set *s)
{
    const uint8_t *img;
    size_t n;
    int rc = s->fs->open(s->fs->user, "model.safetensors", &img, &n, s->err, s->errlen);
    if (rc < 0) return 1;
    if (rc == 0) {
        s->shards = (hf_shard *)calloc(1, sizeof *s->shards);
        if (!s->shards) return llm__errf(s->err, s->errlen, "out of memory");
        s->shards[0].file = "model.safetensors";
        s->shards[0].image = img;
        s->shards[0].size = n;
        s->n_shards = 1;
        return st_read_shard(s, 0) || st_index_names(s);
    }
    rc = s->fs->open(s->fs->user, "model.safetensors.index.json", &img, &n, s->err, s->errlen);
    if (rc < 0) return 1;
    if (rc > 0)
        return llm__errf(s->err, s->errlen, "no model.safetensors or model.safetensors.index.json (only safetensors weights "
                         "are read)");
    return st_open_index(s, img, n) || st_index_names(s) || st_check_index(s);
}

/* ------------------------------------------------------------------------------------ */
/* The weights                                                                           */

static void convert(float *dst, const uint8_t *src, int dtype, uint64_t n)
{
    static const uint16_t one = 1;
    uint64_t i;
    if (dtype == ST_F32) {
        if (*(const uint8_t *)&one == 1) {
            memcpy(dst, src, (size_t)n * sizeof(float));
        } else {
            for (i = 0; i < n; i++) {
                uint32_t u = (uint32_t)src[4 * i] | (uint32_t)src[4 * i + 1] << 8 | (uint32_t)src[4 * i + 2] << 16 |
                             (uint32_t)src[4 * i + 3] << 24;
                memcpy(&dst[i], &u, 4);
            }
        }
    } else if (dtype == ST_F16) {
        for (i = 0; i < n; i++) dst[i] = llm__f16_to_f32(rd_le16(src + 2 * i));
    } else {
        for (i = 0; i < n; i++) dst[i] = llm__bf16_to_f32(rd_le16(src + 2 * i));
    }
}

static int is_ignored_buffer(const char *name)
{
    static const char suffix[] = ".rotary_emb.inv_freq";
    size_t n = strlen(name), k = sizeof suffix - 1;
    return n > k && !strcmp(name + n - k, suffix);
}

/* Check (dst_w NULL) or convert one expected tensor. */
static int take(hf_set *s, const llm_hf_tensor *want, llm_weights *dst_w)
{
    hf_tensor *t = st_find(s, want->name);
    uint64_t r, esize;
    int ok;
    if (!t) return llm__errf(s->err, s->errlen, "tensor '%s' is missing", want->name);
    ok = want->rows == 1 ? t->n_dims == 1 && t->shape[0] == want->cols
                         : t->n_dims == 2 && t->shape[0] == want->rows && t->shape[1] == want->cols;
    if (!ok) {
        char shape[160];
        int i, k = 0;
        for (i = 0; i < t->n_dims && k < 120; i++)
            k += snprintf(shape + k, sizeof shape - (size_t)k, "%s%llu", i ? ", " : "", (unsigned long long)t->shape[i]);
        shape[k] = '\0';
        if (want->rows == 1)
            return llm__errf(s->err, s->errlen, "tensor '%s' has shape [%s], expected [%llu]", want->name, shape,
                             (unsigned long long)want->cols);
        return llm__errf(s->err, s->errlen, "tensor '%s' has shape [%s], expected [%llu, %llu]", want->name, shape,
                         (unsigned long long)want->rows, (unsigned long long)want->cols);
    }
    t->used = 1;
    if (!dst_w) return 0;
    esize = t->dtype == ST_F32 ? 4 : 2;
    for (r = 0; r < want->rows; r++) {
        uint64_t src_row = want->rope_heads ? llm__hf_row_of_ours(r, want->rows / (uint64_t)want->rope_heads) : r;
        convert(want->data + r * want->cols, t->data + t->begin + src_row * want->cols * esize, t->dtype, want->cols);
    }
    if (s->fs->release) s->fs->release(s->fs->user, t->data + t->begin, (size_t)(t->end - t->begin));
    return 0;
}

static int take_all(hf_set *s, const llm_config *c, llm_weights *w, llm_hf_tensor *want, int n_want)
{
    size_t i;
    int k;
    for (k = 0; k < n_want; k++)
        if (take(s, &want[k], w)) return 1;
    if (w) return 0;
    for (i = 0; i < s->n_t; i++) {
        const char *nm = s->t[i].name;
        size_t len = strlen(nm);
        if (s->t[i].used || is_ignored_buffer(nm)) continue;
        if (!strcmp(nm, "lm_head.weight") && c->tied_output)
            return llm__errf(s->err, s->errlen, "tensor 'lm_head.weight' is present but config.json says "
                             "tie_word_embeddings: true");
        if (len > 5 && !strcmp(nm + len - 5, ".bias"))
            return llm__errf(s->err, s->errlen, "tensor '%.64s': bias tensors are not supported", nm);
        return llm__errf(s->err, s->errlen, "tensor '%.64s' is not part of a %d-layer Llama model (it would be ignored)", nm,
                         (int)c->n_layers);
    }
    return 0;
}

/* Check every tensor against the config, then allocate and convert. */
static int hf_weights(hf_set *s, const llm_config *c, llm_weights *w)
{
    llm_hf_tensor *want = (llm_hf_tensor *)calloc((size_t)c->n_layers * 9 + 4, sizeof *want);
    llm_weights probe;
    int n, rc;
    if (!want) return llm__errf(s->err, s->errlen, "out of memory");
    memset(&probe, 0, sizeof probe);
    n = llm__hf_tensors(c, &probe, want);   /* names and shapes only: probe has no memory */
    rc = take_all(s, c, NULL, want, n);
    if (!rc) rc = llm__weights_alloc(c, w, s->err, s->errlen);
    if (!rc) {
        llm__hf_tensors(c, w, want);
        rc = take_all(s, c, w, want, n);
    }
    free(want);
    return rc;
}

int llm__hf_load(const llm_hf_files *fs, llm_config *cfg, llm_weights *w, char *err, size_t errlen)
{
    hf_set s;
    json_value root;
    llm_config c;
    const uint8_t *img;
    size_t n, off = 0;
    char msg[200];
    int rc;
    int32_t i;
    memset(&s, 0, sizeof s);
    memset(&root, 0, sizeof root);
    memset(w, 0, sizeof *w);
    s.fs = fs;
    s.err = err;
    s.errlen = errlen;
    rc = fs->open(fs->user, "config.json", &img, &n, err, errlen);
    if (rc > 0) return llm__errf(err, errlen, "no config.json (a Hugging Face model folder has one)");
    if (rc < 0) return 1;
    if (json_parse((const char *)img, n, &root, &off, msg, sizeof msg))
        return llm__errf(err, errlen, "config.json: %s (at byte %zu)", msg, off);
    rc = hf_config(&root, &c, err, errlen) || st_open_all(&s) || hf_weights(&s, &c, w);
    json_free(&root);
    json_free(&s.index);
    for (i = 0; i < s.n_shards; i++) json_free(&s.shards[i].header);
    free(s.shards);
    free(s.t);
    if (rc) {
        llm_weights_free(w);
        return 1;
    }
    *cfg = c;
    return 0;
}

/* ------------------------------------------------------------------------------------ */
/* The tensors of a Llama model under transformers' names                                */

int llm__hf_tensors(const llm_config *c, const llm_weights *w, llm_hf_tensor *t)
{
    uint64_t dim = (uint64_t)c->dim, q = (uint64_t)c->n_heads * (uint64_t)c->head_dim;
    uint64_t kv = (uint64_t)c->n_kv_heads * (uint64_t)c->head_dim, hid = (uint64_t)c->hidden_dim;
    int n = 0, l;
    /* the arena is the caller's own (the loader fills it, the writer only reads it) */
#define HF_T(nm_fmt, p, r, cl, heads)                                                                                 \
    do {                                                                                                              \
        snprintf(t[n].name, sizeof t[n].name, nm_fmt, l);                                                             \
        t[n].data = (float *)(p), t[n].rows = (r), t[n].cols = (cl), t[n].rope_heads = (heads), n++;                  \
    } while (0)
    l = 0;
    HF_T("model.embed_tokens.weight%.0d", w->tok_emb, (uint64_t)c->vocab_size, dim, 0);
    for (l = 0; l < c->n_layers; l++) {
        const llm_layer *L = w->layers ? &w->layers[l] : NULL;
        HF_T("model.layers.%d.input_layernorm.weight", L ? L->attn_norm : NULL, 1, dim, 0);
        HF_T("model.layers.%d.self_attn.q_proj.weight", L ? L->wq : NULL, q, dim, c->n_heads);
        HF_T("model.layers.%d.self_attn.k_proj.weight", L ? L->wk : NULL, kv, dim, c->n_kv_heads);
        HF_T("model.layers.%d.self_attn.v_proj.weight", L ? L->wv : NULL, kv, dim, 0);
        HF_T("model.layers.%d.self_attn.o_proj.weight", L ? L->wo : NULL, dim, q, 0);
        HF_T("model.layers.%d.post_attention_layernorm.weight", L ? L->ffn_norm : NULL, 1, dim, 0);
        HF_T("model.layers.%d.mlp.gate_proj.weight", L ? L->w1 : NULL, hid, dim, 0);
        HF_T("model.layers.%d.mlp.up_proj.weight", L ? L->w3 : NULL, hid, dim, 0);
        HF_T("model.layers.%d.mlp.down_proj.weight", L ? L->w2 : NULL, dim, hid, 0);
    }
    l = 0;
    HF_T("model.norm.weight%.0d", w->final_norm, 1, dim, 0);
    if (!c->tied_output) HF_T("lm_head.weight%.0d", w->output, (uint64_t)c->vocab_size, dim, 0);
#undef HF_T
    return n;
}

/* ------------------------------------------------------------------------------------ */
/* A folder on disk: memory-mapped files                                                 */

typedef struct hf_map {
    void *p;
    size_t n;
} hf_map;

typedef struct hf_dir {
    const char *dir;
    hf_map *maps;
    int n_maps, cap_maps;
} hf_dir;

static int dir_open(void *user, const char *name, const uint8_t **data, size_t *size, char *err, size_t errlen)
{
    hf_dir *d = (hf_dir *)user;
    size_t len = strlen(d->dir) + strlen(name) + 2;
    char *path = (char *)malloc(len);
    struct stat st;
    void *p;
    int fd, e;
    *data = NULL;
    *size = 0;
    if (!path) return llm__errf(err, errlen, "out of memory"), -1;
    snprintf(path, len, "%s/%s", d->dir, name);
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);   /* O_NONBLOCK: a FIFO named config.json cannot hang us */
    if (fd < 0) {
        e = errno;
        free(path);
        if (e == ENOENT) return 1;
        return llm__errf(err, errlen, "%s: cannot open: %s", name, strerror(e)), -1;
    }
    free(path);
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return llm__errf(err, errlen, "%s: not a regular file", name), -1;
    }
    if ((uint64_t)st.st_size > (uint64_t)SIZE_MAX) {
        close(fd);
        return llm__errf(err, errlen, "%s: too large for this machine", name), -1;
    }
    if (d->n_maps == d->cap_maps) {
        int cap = d->cap_maps ? 2 * d->cap_maps : 8;
        hf_map *m = (hf_map *)realloc(d->maps, (size_t)cap * sizeof *m);
        if (!m) {
            close(fd);
            return llm__errf(err, errlen, "out of memory"), -1;
        }
        d->maps = m;
        d->cap_maps = cap;
    }
    if (st.st_size == 0) {   /* mmap refuses length 0; an empty file is still a (bad) file */
        close(fd);
        *data = (const uint8_t *)"";
        return 0;
    }
    p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    e = errno;
    close(fd);
    if (p == MAP_FAILED) return llm__errf(err, errlen, "%s: cannot map: %s", name, strerror(e)), -1;
    d->maps[d->n_maps].p = p;
    d->maps[d->n_maps].n = (size_t)st.st_size;
    d->n_maps++;
    *data = (const uint8_t *)p;
    *size = (size_t)st.st_size;
    return 0;
}

/* Give back the whole pages inside [p, p + n): they were read once, into the arena. */
static void dir_release(void *user, const uint8_t *p, size_t n)
{
#ifdef MADV_DONTNEED
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = ((uintptr_t)p + page - 1) / page * page;
    uintptr_t b = ((uintptr_t)p + n) / page * page;
    (void)user;
    if (b > a) madvise((void *)a, (size_t)(b - a), MADV_DONTNEED);
#else
    (void)user, (void)p, (void)n;
#endif
}

static int hf_tokenizer(const char *dir, int32_t vocab, llm_tokenizer **tok, char *err, size_t errlen)
{
    size_t len = strlen(dir) + 32;
    char *path = (char *)malloc(len);
    struct stat st;
    int have;
    if (!path) return llm__errf(err, errlen, "out of memory");
    snprintf(path, len, "%s/tokenizer.json", dir);
    have = stat(path, &st) == 0;
    free(path);
    if (!have)
        return llm__errf(err, errlen, "no tokenizer.json in the folder (the tokenizer of a Hugging Face model; load "
                         "without a tokenizer or add the file)");
    if (llm_tokenizer_load_hf(dir, tok, err, errlen)) return 1;
    if (llm_tokenizer_vocab(*tok) > vocab) {
        llm__errf(err, errlen, "the tokenizer has %d tokens but the model only %d embeddings", (int)llm_tokenizer_vocab(*tok),
                  (int)vocab);
        llm_tokenizer_free(*tok);
        *tok = NULL;
        return 1;
    }
    return 0;
}

int llm__hf_load_dir(const char *dir, llm_config *cfg, llm_weights *w, llm_tokenizer **tok, char *err, size_t errlen)
{
    hf_dir d;
    llm_hf_files fs;
    int rc, i;
    memset(&d, 0, sizeof d);
    d.dir = dir;
    fs.open = dir_open;
    fs.release = dir_release;
    fs.user = &d;
    rc = llm__hf_load(&fs, cfg, w, err, errlen);
    for (i = 0; i < d.n_maps; i++) munmap(d.maps[i].p, d.maps[i].n);
    free(d.maps);
    if (!rc && tok && hf_tokenizer(dir, cfg->vocab_size, tok, err, errlen)) {
        llm_weights_free(w);
        rc = 1;
    }
    return rc;
}
