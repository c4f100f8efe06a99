/* export.c - grzo-export: a fine-tuned model out of grzo, for llama.cpp, Ollama & co.

   grzo-export --model ORIGINAL --checkpoint CKPT --out PATH [--format gguf|safetensors]
               [--type f32|f16|bf16|q8_0]

   --model       the model the run fine-tuned (grzo-finetune --model): for GGUF output a GGUF,
                 whose metadata, tokenizer and tensor names are copied, or a Hugging Face
                 folder, written with the metadata and tokenizer llama.cpp's converter writes
                 (gguf_write.h; a tokenizer llama.cpp would encode differently is refused; a
                 llama2.c original is refused: it has neither); for safetensors a GGUF or
                 llama2.c file, or a Hugging Face folder (whose tokenizer and generation files
                 are copied)
   --checkpoint  the run's checkpoint (grzo-finetune's OUT/checkpoint.grzo); it must be of
                 this model: a block whose name or shape differs is named in the error
   --out         the file (GGUF) or the new folder (safetensors) to write, through a temporary
                 name and a rename: a failed export leaves nothing (and an earlier GGUF intact)
   --format      gguf (default) or safetensors: a Hugging Face folder, model.safetensors with
                 transformers' names and Q/K row order + config.json (safetensors_write.h)
   --type        the matrices' type: f32 (default, the fine-tuned weights bit for bit), f16,
                 bf16 or q8_0 (ggml's Q8_0 blocks, GGUF only); GGUF norm gains stay f32
   Errors are one line on stderr with exit status 1 (2 for bad options). */
#include <stdio.h>
#include <string.h>

#include "llm_export.h"

typedef struct options {
    const char *model, *checkpoint, *out;
    llm_export_format format;
    llm_gguf_type type;
} options;

static void usage(void) {
    fprintf(stderr, "usage: grzo-export --model ORIGINAL --checkpoint CKPT --out PATH [--format gguf|safetensors] "
                    "[--type f32|f16|bf16|q8_0]\n");
}

static int parse_option(const char *a, const char *v, options *o, char *err, size_t errlen) {
    if (!strcmp(a, "--model")) o->model = v;
    else if (!strcmp(a, "--checkpoint")) o->checkpoint = v;
    else if (!strcmp(a, "--out")) o->out = v;
    else if (!strcmp(a, "--format")) {
        if (llm_export_format_parse(v, &o->format))
            return snprintf(err, errlen, "--format: expected gguf or safetensors, got '%s'", v), -1;
    } else if (!strcmp(a, "--type")) {
        if (llm_gguf_type_parse(v, &o->type))
            return snprintf(err, errlen, "--type: expected f32, f16, bf16 or q8_0, got '%s'", v), -1;
    } else return snprintf(err, errlen, "unknown option '%s'", a), -1;
    return 0;
}

static int parse_options(int argc, char **argv, options *o, char *err, size_t errlen) {
    int i;
    memset(o, 0, sizeof *o);
    o->format = LLM_EXPORT_GGUF;
    o->type = LLM_GGUF_F32;
    for (i = 1; i < argc; i += 2) {
        if (i + 1 >= argc) return snprintf(err, errlen, "option '%s' needs a value", argv[i]), -1;
        if (parse_option(argv[i], argv[i + 1], o, err, errlen)) return -1;
    }
    if (!o->model || !o->checkpoint || !o->out) return snprintf(err, errlen, "--model, --checkpoint and --out are required"), -1;
    return 0;
}

int main(int argc, char **argv) {
    options o;
    char err[768];
    if (parse_options(argc, argv, &o, err, sizeof err)) {
        fprintf(stderr, "grzo-export: %s\n", err);
        usage();
        return 2;
    }
    if (llm_export(o.model, o.checkpoint, o.out, o.format, o.type, err, sizeof err)) {
        fprintf(stderr, "grzo-export: %s\n", err);
        return 1;
    }
    fprintf(stderr, "grzo-export: wrote %s\n", o.out);
    return 0;
}
