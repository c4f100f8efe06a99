/* gguf_write.h - GGUF v3 output for the grzo LLM examples: a model's (fine-tuned) weights
   written with the metadata and tokenizer of the GGUF they came from (llm_gguf_write), or
   with the metadata llama.cpp's converter writes for a Hugging Face folder
   (llm_gguf_write_model). Both share the tensor types and the writing below.

   The output keeps, from the original file: every key-value pair, byte for byte and in
   order (only general.file_type is set to the written type, appended when the original
   has none), every tensor name, shape and order, and general.alignment (default 32).
   The weights of llm_weights replace the original's tensors; tensors the forward does not
   use are copied unchanged. Q and K keep the original's row order (GGUF "llama" layout:
   rotary pairs adjacent), which is the layout llm_weights holds.

   Types: matrices and the embedding are written in the requested type; 1-D tensors (the
   RMSNorm gains) stay F32, as llama.cpp's converter and quantizer keep them; with Q8_0 a
   matrix whose rows are not a multiple of 32 values is written F16 instead.
     F32   the weights bit for bit
     F16   IEEE binary16, round to nearest even (relative error <= 2^-11 in the normal range)
     BF16  the top 16 bits of binary32, round to nearest even (relative error <= 2^-8)
     Q8_0  ggml's block: 32 values, fp16 scale d = max|x| / 127, int8 q = round(x / d)
           (ggml's quantize_row_q8_0_ref); |x - d16 q| <= max|x| (1/254 + 2^-11) per block
   The file is written to a temporary name beside out_path and renamed over it at the end,
   so a failure leaves no partial file (and any earlier file at out_path intact). */
#ifndef GRZO_LLM_GGUF_WRITE_H
#define GRZO_LLM_GGUF_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "llm.h"

typedef enum llm_gguf_type {
    LLM_GGUF_F32 = 0,
    LLM_GGUF_F16 = 1,
    LLM_GGUF_BF16 = 2,
    LLM_GGUF_Q8_0 = 3
} llm_gguf_type;

/* "f32", "f16", "bf16", "q8_0" -> type (out may be NULL: only check); nonzero for anything else. */
int llm_gguf_type_parse(const char *name, llm_gguf_type *out);

/* Write cfg/w as a GGUF with the metadata of `original` (a GGUF file image that llm_load
   accepted as cfg's model). Returns 0, or nonzero with one line in err. */
int llm_gguf_write(const uint8_t *original, size_t original_size, const llm_config *cfg, const llm_weights *w,
                   llm_gguf_type type, const char *out_path, char *err, size_t errlen);

/* Write cfg/w and tok as a new GGUF (a Hugging Face folder's model): the metadata that
   llama.cpp's convert_hf_to_gguf.py writes for a Llama model: general.architecture
   "llama", general.type, general.name (name), general.file_type, general.quantization_version;
   llama.{context_length, embedding_length, block_count, feed_forward_length,
   attention.head_count, attention.head_count_kv, attention.layer_norm_rms_epsilon,
   rope.freq_base, rope.dimension_count, vocab_size}, llama.attention.key_length and
   value_length when head_dim != dim / n_heads; a llama3 rope_scaling as the F32 tensor
   rope_freqs.weight (its per-pair factors, as the converter computes them) plus
   grzo.rope.llama3.* (llm_internal.h says why); tokenizer.ggml.{model "gpt2", pre, tokens,
   token_type, merges, bos/eos/unknown/padding_token_id, add_bos_token, add_eos_token} and
   tokenizer.chat_template. Tensors: llama.cpp's names (token_embd, blk.N.attn_q, ...,
   output_norm, output when untied), Q/K rows in the adjacent-pair rotary layout of
   llm_weights (the converter's permutation of HF's rows). Types as llm_gguf_write.
   The tokenizer must be a tokenizer.json byte-level BPE whose pipeline llama.cpp has by
   name: GPT-2's regex ("gpt2"), Digits + GPT-2's regex ("smollm"), Llama-3's regex with
   ignore_merges ("llama-bpe"); anything else (character BPE / Llama-2, add_prefix_space,
   ignore_merges elsewhere, no regex) is refused with the reason, because llama.cpp would
   tokenize it differently. Returns 0, or nonzero with one line in err. */
int llm_gguf_write_model(const llm_config *cfg, const llm_weights *w, const llm_tokenizer *tok, const char *name,
                         llm_gguf_type type, const char *out_path, char *err, size_t errlen);

/* Whether llm_gguf_write_model would take cfg and tok, before any weights exist: its refusals
   that depend on the configuration and the tokenizer alone (the tokenizer's pipeline, more
   tokens than the vocabulary, a merge naming a token with a space). grzo-finetune --export
   asks before it trains. Returns 0, or nonzero with one line in err. */
int llm_gguf_check_model(const llm_config *cfg, const llm_tokenizer *tok, char *err, size_t errlen);

#endif /* GRZO_LLM_GGUF_WRITE_H */
