/* safetensors_write.h - a model as a Hugging Face folder: model.safetensors + config.json,
   in the names and row order transformers' LlamaForCausalLM expects (Wq/Wk rows put back
   from the adjacent-pair rotary layout into HF's half-split layout; safetensors_write.c).

   The folder is built under a temporary name beside out_dir and renamed at the end: a
   failure leaves nothing; an existing out_dir is refused. Tokenizer files are copied from a
   Hugging Face original (llm_safetensors_write_ex); a GGUF original carries its tokenizer as
   GGUF metadata, not as tokenizer.json: copy them from the base model's repository. */
#ifndef GRZO_LLM_SAFETENSORS_WRITE_H
#define GRZO_LLM_SAFETENSORS_WRITE_H

#include <stdint.h>

#include "llm.h"

typedef enum llm_st_dtype { LLM_ST_F32 = 0, LLM_ST_F16 = 1, LLM_ST_BF16 = 2 } llm_st_dtype;

/* bos/eos: the token ids for config.json (-1: left out). Returns 0, or nonzero with one
   line in err. */
int llm_safetensors_write(const llm_config *cfg, const llm_weights *w, llm_st_dtype dtype, int32_t bos, int32_t eos,
                          const char *out_dir, char *err, size_t errlen);

/* The same, also copying tokenizer.json, tokenizer_config.json, special_tokens_map.json and
   generation_config.json from copy_from (a Hugging Face original; NULL: none) where they exist. */
int llm_safetensors_write_ex(const llm_config *cfg, const llm_weights *w, llm_st_dtype dtype, int32_t bos, int32_t eos,
                             const char *copy_from, const char *out_dir, char *err, size_t errlen);

#endif /* GRZO_LLM_SAFETENSORS_WRITE_H */
