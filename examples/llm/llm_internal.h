/* llm_internal.h - what load.c and tokenizer.c share; not part of the module's interface.

   The GGUF parser lives in load.c and the tokenizers in tokenizer.c. A GGUF file carries
   its tokenizer as metadata arrays, so load.c gathers those arrays into an
   llm_tokenizer_spec (pointers into the file image, nothing copied) and tokenizer.c builds
   the tokenizer from it; tokenizer.c parses llama2.c's tokenizer.bin into the same spec,
   so both formats go through one constructor. */
#ifndef GRZO_LLM_INTERNAL_H
#define GRZO_LLM_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "llm.h"

/* binary32 -> binary16 / bfloat16, rounding to nearest even (load.c, beside the readers'
   widening): the one conversion of the module, used by the GGUF and safetensors writers and
   by model.c when it stores weights in a 16-bit dtype. */
uint16_t llm__f32_to_f16(float f);
uint16_t llm__f32_to_bf16(float f);
/* ... and back, exactly (the readers' widening, shared by the GGUF and safetensors readers;
   bfloat16, the top half of a binary32, inline: its loop is most of a bf16 load). */
float llm__f16_to_f32(uint16_t h);
static inline float llm__bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Llama-3.1's "llama3" rotary scaling in GGUF (gguf_write.c writes, load.c reads): llama.cpp
   keeps it as the tensor rope_freqs.weight, F32, one factor per rotary pair i < head_dim/2,
   by which llama.cpp divides that pair's frequency; convert_hf_to_gguf.py's factors are 1
   (short wavelengths), factor (long ones), 1 / ((1 - s) / factor + s) between (s as in
   llm_rope_inv_freq). llm__rope_freq_factors computes them from c (llama3 scaling) in that
   form. The factors do not determine the four parameters (only the two wavelength edges
   matter), so grzo also writes the parameters under these keys, which llama.cpp ignores,
   and its loader takes rope_freqs.weight only when it equals the factors they give. */
#define LLM_GGUF_KEY_LLAMA3_FACTOR "grzo.rope.llama3.factor"
#define LLM_GGUF_KEY_LLAMA3_LOW "grzo.rope.llama3.low_freq_factor"
#define LLM_GGUF_KEY_LLAMA3_HIGH "grzo.rope.llama3.high_freq_factor"
#define LLM_GGUF_KEY_LLAMA3_ORIG "grzo.rope.llama3.original_max_position_embeddings"
void llm__rope_freq_factors(const llm_config *c, float *factors);

/* The checks every loader applies to a config (sizes, head layout, epsilon, rotary base and
   scaling), and the one allocation of the weights for it (load.c). */
int llm__config_check(const llm_config *c, char *err, size_t errlen);
int llm__weights_alloc(const llm_config *c, llm_weights *w, char *err, size_t errlen);

/* A Hugging Face folder's files by name, for the loader (load_hf.c), so that one loader
   reads memory-mapped files (llm_load) and file images in memory (the fuzz target, the load
   benchmark). open: 0 with the bytes (valid until the caller is done with the source),
   1 when there is no such file (no message), -1 on any other error (a message in err).
   release (may be NULL): the loader no longer needs bytes [p, p + n) (a mapped source
   gives the pages back, so that the whole file is never resident at once). */
typedef struct llm_hf_files {
    int (*open)(void *user, const char *name, const uint8_t **data, size_t *size, char *err, size_t errlen);
    void (*release)(void *user, const uint8_t *p, size_t n);
    void *user;
} llm_hf_files;

/* A Llama weight under transformers' name (LlamaForCausalLM), in transformers' order:
   model.embed_tokens, model.layers.N.{input_layernorm, self_attn.{q,k,v,o}_proj,
   post_attention_layernorm, mlp.{gate,up,down}_proj}, model.norm, lm_head (untied only).
   rows == 1: a vector of cols. data: the weight in w (NULL where w has no memory yet).
   rope_heads > 0: q_proj/k_proj, whose rows are in the rotary layout of that many heads. */
typedef struct llm_hf_tensor {
    char name[80];
    float *data;
    uint64_t rows, cols;
    int32_t rope_heads;
} llm_hf_tensor;

/* Fill t (room for 9 n_layers + 4) for c and w; returns the count. The one list of HF names,
   for the reader (load_hf.c) and the writer (safetensors_write.c). */
int llm__hf_tensors(const llm_config *c, const llm_weights *w, llm_hf_tensor *t);

/* Rotary row order of q_proj/k_proj (head size hd, rows of head h at h*hd): transformers
   rotates halves (i, i + hd/2), grzo and GGUF adjacent pairs (2i, 2i+1). llama.cpp's
   convert_hf_to_gguf.py permute() puts HF row h*hd + j*hd/2 + i at row h*hd + 2i + j
   (i < hd/2, j in {0, 1}); the loader does the same, the writer the inverse. */
static inline uint64_t llm__hf_row_of_ours(uint64_t r, uint64_t hd)
{
    uint64_t h = r / hd, within = r % hd;
    return h * hd + (within % 2) * (hd / 2) + within / 2;
}

static inline uint64_t llm__ours_row_of_hf(uint64_t r, uint64_t hd)
{
    uint64_t h = r / hd, within = r % hd;
    return h * hd + 2 * (within % (hd / 2)) + within / (hd / 2);
}

/* Load config.json and the safetensors weights (model.safetensors, else the shards of
   model.safetensors.index.json) through fs. Every header size, offset, dtype and shape is
   checked against its file and the config. No tokenizer. */
int llm__hf_load(const llm_hf_files *fs, llm_config *cfg, llm_weights *w, char *err, size_t errlen);
/* llm_load of a directory: llm__hf_load over the folder's memory-mapped files, then its
   tokenizer.json when tok is not NULL (a folder without one is then an error). */
int llm__hf_load_dir(const char *dir, llm_config *cfg, llm_weights *w, llm_tokenizer **tok, char *err, size_t errlen);

/* A byte string that is not NUL-terminated (a view into a file image). */
typedef struct llm_bytes {
    const char *p;
    size_t n;
} llm_bytes;

/* A GGUF file's byte layout, from the loader's validated parse (load.c), for the writer
   that copies the original's metadata (gguf_write.c): each key-value pair's byte range
   (key, type and value) and each tensor info. Names are views into the file image. */
typedef struct llm_gguf_kv_span {
    llm_bytes name;
    size_t start, end;
} llm_gguf_kv_span;

typedef struct llm_gguf_tensor_info {
    llm_bytes name;
    uint32_t n_dims, type;
    uint64_t ne[4], n_elements, offset;   /* ne fastest-varying first, unused dims 1; offset in the data section */
} llm_gguf_tensor_info;

typedef struct llm_gguf_layout {
    uint64_t n_kv, n_tensors, alignment, data_start;
    llm_gguf_kv_span *kv;
    llm_gguf_tensor_info *t;
} llm_gguf_layout;

int llm__gguf_layout(const uint8_t *d, size_t n, llm_gguf_layout *out, char *err, size_t errlen);
void llm__gguf_layout_free(llm_gguf_layout *g);

/* The tokenizer kinds. */
enum {
    LLM_TOK_SPM = 1,  /* SentencePiece-style BPE: merge the best-scoring adjacent pair first */
    LLM_TOK_BPE = 2   /* BPE by merge rank: merge the lowest-ranked pair first (GPT-2's byte
                         level; tokenizer.json also on characters, spec.hf) */
};

/* GGUF token types (tokenizer.ggml.token_type), as llama.cpp writes them. */
enum {
    LLM_TOKTYPE_NORMAL = 1,
    LLM_TOKTYPE_UNKNOWN = 2,
    LLM_TOKTYPE_CONTROL = 3,
    LLM_TOKTYPE_USER_DEFINED = 4,
    LLM_TOKTYPE_UNUSED = 5,
    LLM_TOKTYPE_BYTE = 6
};

/* Byte-level BPE pre-tokenizers (how the text is split into words before merging). */
enum {
    LLM_PRE_BY_NAME = 0,          /* from spec.pre, the GGUF name (the GGUF and llama2.c loaders) */
    LLM_PRE_GPT2 = 1,             /* GPT-2's regex */
    LLM_PRE_DIGITS_THEN_GPT2 = 2, /* every \p{N} on its own, then GPT-2's regex (SmolLM2) */
    LLM_PRE_LLAMA3 = 3,           /* Llama-3's regex */
    LLM_PRE_WHOLE = 4             /* no split: each fragment is one word */
};

/* Metaspace's prepend_scheme: where U+2581 is put in front of a fragment that lacks it. */
enum { LLM_META_PREFIX_NEVER = 0, LLM_META_PREFIX_ALWAYS = 1, LLM_META_PREFIX_FIRST = 2 };

/* What a Hugging Face tokenizer.json adds to the spec (tokenizer_hf.c); spec.hf is NULL
   for the GGUF and llama2.c loaders. The model is BPE with merge ranks (kind LLM_TOK_BPE);
   the fields say how the tokenizers library prepares and splits the text. */
typedef struct llm_tokenizer_hf {
    int pre;                  /* LLM_PRE_*, used instead of spec.pre's name */
    int byte_level;           /* 1: GPT-2 byte alphabet (ByteLevel); 0: characters, with
                                 <0xXX> byte fallback and U+2581 spaces (Llama-2) */
    int byte_prefix_space;    /* ByteLevel add_prefix_space: ' ' before a fragment lacking one */
    int byte_fallback;        /* characters missing from the vocabulary become <0xXX> tokens */
    int fuse_unk;             /* consecutive unknown characters give one unk token */
    int ignore_merges;        /* a word that is itself in the vocabulary is emitted whole */
    int prepend_u2581;        /* normalizer Prepend("\u2581"): before every non-empty fragment */
    int space_to_u2581;       /* normalizer Replace(" ", "\u2581") or Metaspace */
    int meta_prefix;          /* LLM_META_PREFIX_* (Metaspace) */
    int split_u2581;          /* Metaspace split: each U+2581 starts a new word */
    const llm_bytes *merge_pairs; /* 2 * n_merges tokens (left, right), instead of spec.merges;
                                 every one must be in the vocabulary */
} llm_tokenizer_hf;

typedef struct llm_tokenizer_spec {
    int kind;                 /* LLM_TOK_SPM or LLM_TOK_BPE */
    const char *model_name;   /* "llama2c", "llama" or "gpt2": reported by llm_tokenizer_model */
    llm_bytes pre;            /* GGUF tokenizer.ggml.pre (BPE only; n == 0: none given) */
    int32_t n_tokens;
    const llm_bytes *tokens;  /* SPM from GGUF: U+2581 stands for a space (converted here) */
    const float *scores;      /* n_tokens, or NULL (all 0) */
    const int32_t *types;     /* n_tokens, or NULL (all normal) */
    int32_t n_merges;         /* BPE: "left right" strings, rank = index */
    const llm_bytes *merges;
    int32_t bos, eos, unk;    /* -1: none */
    int32_t pad;              /* -1: none (kept for the GGUF writer; a zeroed spec must set it) */
    int add_bos;              /* whether prompts start with BOS by default */
    int add_space_prefix;     /* SPM: prepend " " to the text (llama2.c's dummy prefix) */
    int spm_space_is_u2581;   /* SPM: vocab spells spaces as U+2581 (GGUF), not ' ' (llama2.c) */
    llm_bytes chat_template;  /* GGUF tokenizer.chat_template, tokenizer_config.json's (n == 0: none) */
    const llm_tokenizer_hf *hf; /* tokenizer.json's options, or NULL */
} llm_tokenizer_spec;

int llm__tokenizer_build(const llm_tokenizer_spec *spec, llm_tokenizer **out, char *err, size_t errlen);

/* What a built tokenizer holds, for the GGUF writer (gguf_write.c): views into t, valid
   while t lives. Token i is pool + off[i], len[i] bytes, in the file's spelling (byte-level
   BPE: the GPT-2 byte alphabet); merges by rank as token ids. */
typedef struct llm_tokenizer_view {
    int kind;                     /* LLM_TOK_SPM or LLM_TOK_BPE */
    const char *model_name, *pre_name;
    int32_t n_tokens;
    const char *pool;
    const size_t *off;
    const uint32_t *len;
    const float *scores;          /* SPM priorities (may be NULL for BPE) */
    const uint8_t *types;         /* LLM_TOKTYPE_* */
    int32_t n_merges;
    const int32_t *merge_left, *merge_right;
    int32_t bos, eos, unk, pad;   /* -1: none */
    int add_bos, add_space_prefix;
    const char *chat_template;    /* NULL: none */
    const llm_tokenizer_hf *hf;   /* tokenizer.json's options; NULL for GGUF and llama2.c */
} llm_tokenizer_view;

void llm__tokenizer_view(const llm_tokenizer *t, llm_tokenizer_view *v);

/* printf into err (if any); returns 1 so that callers can `return llm__errf(...)`. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((format(printf, 3, 4)))
#endif
static inline int llm__errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return 1;
}

/* Puts "prefix: " before the message a failed call left in err (if there is an err to
   hold one: callers may pass NULL, 0); returns 1 like llm__errf. */
static inline int llm__err_prefix(char *err, size_t errlen, const char *prefix)
{
    char msg[512];
    if (!err || !errlen) return 1;
    snprintf(msg, sizeof msg, "%s", err);
    snprintf(err, errlen, "%s: %s", prefix, msg);
    return 1;
}

/* Read a whole file into memory (malloc'd; caller frees): the one place the loaders read
   files. Refuses anything but a regular file ("<path>: is a directory") and files over
   max_bytes; open and read errors carry strerror ("<path>: cannot open: Permission denied"). */
int llm__read_file(const char *path, size_t max_bytes, uint8_t **data, size_t *size, char *err, size_t errlen);

#endif /* GRZO_LLM_INTERNAL_H */
