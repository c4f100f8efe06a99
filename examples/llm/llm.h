/* llm.h - Llama-family language models for the grzo examples: model files, tokenizers,
   and a forward pass in which every weight is a grzo parameter block.

   This module is not part of grzo.h (grzo stays the optimizer); the LLM examples share it.

   Files (each parses defensively: every count, size and offset is checked against the
   file, and a truncated or hostile file gives an error message, never a crash):
     llama2.c checkpoints (.bin, legacy v0 header; negative vocab = untied head)
     llama2.c tokenizer.bin
     GGUF v3 with Llama metadata; tensor types F32, F16, BF16, Q8_0, Q4_0, Q4_1 are
     dequantized to fp32 at load; the embedded tokenizer (llama SentencePiece-style or
     GPT-2 byte-level BPE) is loaded with the model.
     Hugging Face folders (load_hf.c): config.json of a Llama-family model (llama, mistral),
     model.safetensors or shards named by model.safetensors.index.json (F32, F16, BF16,
     memory-mapped), tokenizer.json (tokenizer_hf.c).

   Conventions: weights are fp32, row-major, used as y = x W^T (W is d_out x d_in).
   Rotary embeddings rotate adjacent pairs (2i, 2i+1) (llama2.c and GGUF "llama" layout; a
   Hugging Face folder's q_proj/k_proj rows are permuted into it at load, as llama.cpp does).
   Functions return 0 on success and nonzero on failure, with a message in err. */
#ifndef GRZO_LLM_H
#define GRZO_LLM_H

#include <stddef.h>
#include <stdint.h>

typedef struct llm_config {
    int32_t dim;            /* model width */
    int32_t hidden_dim;     /* SwiGLU width */
    int32_t n_layers;
    int32_t n_heads;
    int32_t n_kv_heads;     /* grouped-query attention: n_heads % n_kv_heads == 0 */
    int32_t head_dim;       /* dim / n_heads unless the file says otherwise */
    int32_t vocab_size;
    int32_t max_seq_len;
    float norm_eps;         /* RMSNorm epsilon (llama2.c: 1e-5) */
    float rope_theta;       /* rotary base (llama2.c: 10000) */
    int32_t tied_output;    /* 1: the output head is the token embedding */
    /* Rotary frequency scaling (a zeroed tail means none). LLM_ROPE_SCALING_LLAMA3 is
       Llama-3.1's rope_scaling "llama3": llm_rope_inv_freq scales the frequencies. */
    int32_t rope_scaling;   /* LLM_ROPE_SCALING_NONE or LLM_ROPE_SCALING_LLAMA3 */
    float rope_factor;      /* llama3: low frequencies are divided by it (>= 1) */
    float rope_low_freq_factor, rope_high_freq_factor;   /* llama3: the band edges, 0 < low < high */
    int32_t rope_original_max_pos;                       /* llama3: the pre-training context */
} llm_config;

enum { LLM_ROPE_SCALING_NONE = 0, LLM_ROPE_SCALING_LLAMA3 = 1 };

/* The rotary inverse frequencies of c, inv_freq[i] for the pairs i < head_dim/2:
   theta^(-2i/head_dim), then for llama3 scaling (transformers' _compute_llama3_parameters)
   with wavelength L = 2 pi / f, Lo = original_max_pos / low_freq_factor and
   Hi = original_max_pos / high_freq_factor: L < Hi: f; L > Lo: f / factor; else
   (1 - s) f / factor + s f with s = (original_max_pos / L - low) / (high - low).
   The one computation of the frequencies: the forward's cos/sin tables (CPU and CUDA ops)
   are built from it. Returns 0, or nonzero with a message when c's rotary settings are
   invalid (e.g. llama3 scaling with factor < 1). */
int llm_rope_inv_freq(const llm_config *c, double *inv_freq, char *err, size_t errlen);

typedef struct llm_layer {
    float *attn_norm;       /* dim */
    float *wq;              /* n_heads*head_dim x dim */
    float *wk;              /* n_kv_heads*head_dim x dim */
    float *wv;              /* n_kv_heads*head_dim x dim */
    float *wo;              /* dim x n_heads*head_dim */
    float *ffn_norm;        /* dim */
    float *w1;              /* hidden_dim x dim   (gate) */
    float *w2;              /* dim x hidden_dim   (down) */
    float *w3;              /* hidden_dim x dim   (up)   */
} llm_layer;

typedef struct llm_weights {
    float *tok_emb;         /* vocab_size x dim */
    llm_layer *layers;      /* n_layers */
    float *final_norm;      /* dim */
    float *output;          /* vocab_size x dim; == tok_emb when tied_output */
    void *arena;            /* owner of the memory above (free with llm_weights_free) */
} llm_weights;

typedef struct llm_tokenizer llm_tokenizer;   /* opaque */

/* Load a model: a Hugging Face folder (a directory: config.json + safetensors), a GGUF
   file (by magic) or a llama2.c checkpoint. *tok receives the folder's tokenizer.json, the
   GGUF's embedded tokenizer, or NULL for llama2.c (load its tokenizer.bin separately). tok
   may be NULL if not wanted (a folder then needs no tokenizer.json). */
int llm_load(const char *path, llm_config *cfg, llm_weights *w, llm_tokenizer **tok, char *err, size_t errlen);
void llm_weights_free(llm_weights *w);

int llm_tokenizer_load_llama2c(const char *path, int32_t vocab_size, llm_tokenizer **out, char *err, size_t errlen);
void llm_tokenizer_free(llm_tokenizer *t);
int32_t llm_tokenizer_bos(const llm_tokenizer *t);
int32_t llm_tokenizer_eos(const llm_tokenizer *t);
int32_t llm_tokenizer_vocab(const llm_tokenizer *t);
/* Encode UTF-8 text; add_bos prepends BOS. Writes at most cap ids; *n_out gets the full
   count (so a second call with a larger buffer can follow). */
int llm_tokenize(const llm_tokenizer *t, const char *text, int add_bos, int32_t *ids, int32_t cap, int32_t *n_out,
                 char *err, size_t errlen);
/* Text of token id as it appears after token prev (llama2.c strips the leading space after
   BOS; byte tokens like <0x0A> become the byte). Returns "" for ids out of range. */
const char *llm_token_text(const llm_tokenizer *t, int32_t prev, int32_t id);

/* ---- Additions (loaders/tokenizers): everything above keeps its signature. ---- */

/* llm_load from a file image in memory (the fuzz target uses this; data is not kept). */
int llm_load_memory(const void *data, size_t size, llm_config *cfg, llm_weights *w, llm_tokenizer **tok,
                    char *err, size_t errlen);
/* llama2.c tokenizer.bin from memory. For both tokenizer.bin loaders, vocab_size <= 0 means
   "every token in the file"; otherwise the file must hold exactly vocab_size tokens. */
int llm_tokenizer_load_llama2c_memory(const void *data, size_t size, int32_t vocab_size, llm_tokenizer **out,
                                      char *err, size_t errlen);
/* Only the tokenizer of a GGUF file (also works for vocab-only GGUF files). */
int llm_tokenizer_load_gguf(const char *path, llm_tokenizer **out, char *err, size_t errlen);
int llm_tokenizer_load_gguf_memory(const void *data, size_t size, llm_tokenizer **out, char *err, size_t errlen);

/* "llama2c" (tokenizer.bin), "llama" (GGUF SentencePiece-style; tokenizer.json character BPE
   with byte fallback) or "gpt2" (byte-level BPE, GGUF or tokenizer.json). */
const char *llm_tokenizer_model(const llm_tokenizer *t);
/* The GGUF pre-tokenizer name (tokenizer.ggml.pre, e.g. "gpt2", "smollm"); "" if none. For
   tokenizer.json, llama.cpp's name of the recognised pre-tokenizer ("gpt2", "llama-bpe",
   "smollm"; "" for character BPE). */
const char *llm_tokenizer_pre(const llm_tokenizer *t);
/* Whether the file asks for BOS at the start of a prompt (tokenizer.ggml.add_bos_token;
   llama2.c: yes). llm_tokenize only adds BOS when its add_bos argument says so. */
int llm_tokenizer_wants_bos(const llm_tokenizer *t);
/* The id of the token whose vocabulary entry is exactly `text` (e.g. "<|im_end|>"), or -1.
   Byte-level BPE entries are spelled in the GPT-2 byte alphabet ("Ġworld"); SentencePiece
   entries with a space where the file has U+2581 (" the"). */
int32_t llm_token_id(const llm_tokenizer *t, const char *text);
/* Special tokens in the text: GGUF tokens typed CONTROL or USER_DEFINED (e.g. "<|im_start|>",
   "<s>") found verbatim in the text are emitted as their ids rather than spelled out, as
   llama.cpp does for chat prompts. On by default; off makes them ordinary text. */
void llm_tokenizer_set_parse_special(llm_tokenizer *t, int on);

/* Hugging Face tokenizer.json (tokenizer_hf.c): DIR/tokenizer.json and, if present,
   DIR/tokenizer_config.json (bos/eos/pad tokens, add_bos_token, chat_template). Supported: model
   BPE (vocab; merges as "a b" strings or [a, b] pairs; byte_fallback, fuse_unk,
   ignore_merges), added tokens (split out of the text as special tokens; "special": false
   ones also when parse_special is off), normalizers Prepend("\u2581") and
   Replace(" ", "\u2581"), pre-tokenizers ByteLevel, Split with GPT-2's or Llama-3's
   regex, Digits(individual_digits), Metaspace, and the post-processor's leading BOS
   (TemplateProcessing). Anything else (another model, normalizer, pre-tokenizer or regex)
   is refused with an error that names it: never approximated. The vocabulary keeps the
   file's spelling: llm_token_id takes "\u0120world" (byte-level) or "\u2581the". */
int llm_tokenizer_load_hf(const char *dir, llm_tokenizer **out, char *err, size_t errlen);
/* The same from memory: tokenizer.json's text, and tokenizer_config.json's or NULL. */
int llm_tokenizer_load_hf_memory(const char *json, size_t len, const char *config_json, size_t config_len,
                                 llm_tokenizer **out, char *err, size_t errlen);
/* The chat template (a Jinja string: tokenizer_config.json's chat_template, or GGUF's
   tokenizer.chat_template), or "" if none. */
const char *llm_tokenizer_chat_template(const llm_tokenizer *t);

#endif /* GRZO_LLM_H */
