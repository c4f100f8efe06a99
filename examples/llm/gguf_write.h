/* gguf_write.h - GGUF v3 output for the grzo LLM examples: a model's (fine-tuned) weights
   written with the metadata and tokenizer of the GGUF they came from.

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

#endif /* GRZO_LLM_GGUF_WRITE_H */
