/* llm_export.h - a fine-tuned model out of grzo: the original model file plus a grzo
   checkpoint of it, written as a file other tools load (grzo-export, grzo-finetune --export).

   The original is loaded (llm_load), registered as F32 blocks on the CPU backend
   (llm_model_register), the checkpoint is loaded into those blocks (grzo_checkpoint_load
   checks every block's name, kind, dtype and shape, and names the first that differs) and
   the weights are written in the requested format (gguf_write.h for GGUF, safetensors_write.h). */
#ifndef GRZO_LLM_EXPORT_H
#define GRZO_LLM_EXPORT_H

#include <stddef.h>

#include "gguf_write.h"
#include "safetensors_write.h"

typedef enum llm_export_format {
    LLM_EXPORT_GGUF = 0,
    LLM_EXPORT_SAFETENSORS = 1    /* a folder: model.safetensors + config.json (safetensors_write.h) */
} llm_export_format;

/* "gguf", "safetensors" -> format; nonzero for anything else. */
int llm_export_format_parse(const char *name, llm_export_format *out);

/* Write `model` with the weights of `checkpoint` to out_path. A GGUF export from a GGUF
   original copies its metadata and tokenizer (llm_gguf_write); from a Hugging Face folder it
   writes the metadata llama.cpp's convert_hf_to_gguf.py writes, the folder's tokenizer.json
   included (llm_gguf_write_model: tokenizers llama.cpp would encode differently are
   refused, with the reason); a llama2.c original is refused. A safetensors export takes any
   original and the types f32, f16, bf16 (q8_0 is refused); from a folder it also copies the
   tokenizer and generation files.
   Returns 0, or nonzero with one line in err; nothing is left at out_path on failure. */
int llm_export(const char *model, const char *checkpoint, const char *out_path, llm_export_format format,
               llm_gguf_type type, char *err, size_t errlen);

/* Whether llm_export can write `model` as GGUF once a checkpoint exists: the refusals that
   the weights do not decide, with the model's configuration and tokenizer as loaded (a
   llama2.c original; a Hugging Face folder whose tokenizer llama.cpp would encode
   differently, llm_gguf_check_model: a folder needs tok, a file does not read it). A GGUF
   original passes. grzo-finetune --export asks before it trains. Returns 0, or nonzero with
   one line in err. */
int llm_export_check_gguf(const char *model, const llm_config *cfg, const llm_tokenizer *tok, char *err, size_t errlen);

/* llm_export to GGUF with the type named as on the command line ("f32", "f16", "bf16",
   "q8_0"): grzo-finetune --export's one call. */
int llm_export_as(const char *model, const char *checkpoint, const char *out_path, const char *type_name, char *err,
                  size_t errlen);

#endif /* GRZO_LLM_EXPORT_H */
