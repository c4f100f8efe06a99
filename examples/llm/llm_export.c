/* llm_export.c - the original model + a grzo checkpoint -> a model file (llm_export.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "grzo.h"
#include "llm_export.h"
#include "llm_internal.h"
#include "model.h"

int llm_export_format_parse(const char *name, llm_export_format *out)
{
    if (name && !strcmp(name, "gguf")) return *out = LLM_EXPORT_GGUF, 0;
    if (name && !strcmp(name, "safetensors")) return *out = LLM_EXPORT_SAFETENSORS, 0;
    return 1;
}

/* The checkpoint's weights in w: w's blocks are registered F32 on the CPU backend, where
   grzo's blocks point into w, so loading the checkpoint overwrites w itself. */
static int apply_checkpoint(const char *checkpoint, const llm_config *cfg, llm_weights *w, char *err, size_t errlen)
{
    grzo_backend be;
    grzo_desc d;
    grzo_ctx *ctx = NULL;
    llm_model m;
    grzo_status s;
    int rc = 1;
    memset(&m, 0, sizeof m);
    if (llm_backend_create("cpu", 1, GRZO_DTYPE_F32, &be, err, errlen) != GRZO_OK) return 1;
    memset(&d, 0, sizeof d);
    d.backend = &be;
    if ((s = grzo_create(&d, &ctx)) != GRZO_OK) {
        llm__errf(err, errlen, "cannot create a grzo context: %s", grzo_status_str(s));   /* why: out of memory, say */
    } else if (llm_model_register(ctx, &m, cfg, w) != GRZO_OK) {
        llm__errf(err, errlen, "%s", llm_model_error(&m));
    } else if (grzo_checkpoint_load(ctx, checkpoint) != GRZO_OK) {
        llm__errf(err, errlen, "%s: %s", checkpoint, grzo_last_error(ctx));
    } else {
        rc = 0;
    }
    llm_model_free(&m);
    if (ctx) grzo_destroy(ctx);
    grzo_backend_destroy(&be);
    return rc;
}

/* The weights in the requested format; tok (NULL for llama2.c) gives config.json's ids. */
static int write_format(const uint8_t *image, size_t size, const llm_config *cfg, const llm_weights *w,
                        const llm_tokenizer *tok, llm_export_format format, llm_gguf_type type, const char *out_path,
                        char *err, size_t errlen)
{
    static const llm_st_dtype st_of[] = {LLM_ST_F32, LLM_ST_F16, LLM_ST_BF16};
    if (format == LLM_EXPORT_GGUF) return llm_gguf_write(image, size, cfg, w, type, out_path, err, errlen);
    /* llama2.c's run.c: BOS 1, EOS 2 */
    return llm_safetensors_write(cfg, w, st_of[type], tok ? llm_tokenizer_bos(tok) : 1, tok ? llm_tokenizer_eos(tok) : 2,
                                 out_path, err, errlen);
}

static int is_directory(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* The folder's own name (its last path component), for general.name. */
static void folder_name(const char *dir, char *out, size_t cap)
{
    size_t n = strlen(dir), start;
    while (n > 1 && dir[n - 1] == '/') n--;
    for (start = n; start > 0 && dir[start - 1] != '/'; start--) {}
    snprintf(out, cap, "%.*s", (int)(n - start), dir + start);
}

/* A Hugging Face original: a GGUF with the metadata llama.cpp's converter writes (the
   folder's tokenizer.json is needed), or a new folder with the original's tokenizer and
   generation files. */
static int export_hf(const char *model, const char *checkpoint, const char *out_path, llm_export_format format,
                     llm_gguf_type type, char *err, size_t errlen)
{
    static const llm_st_dtype st_of[] = {LLM_ST_F32, LLM_ST_F16, LLM_ST_BF16};
    llm_config cfg;
    llm_weights w;
    llm_tokenizer *tok = NULL;
    char name[256];
    int rc;
    if (llm_load(model, &cfg, &w, format == LLM_EXPORT_GGUF ? &tok : NULL, err, errlen)) return 1;
    folder_name(model, name, sizeof name);
    rc = apply_checkpoint(checkpoint, &cfg, &w, err, errlen);
    if (!rc && format == LLM_EXPORT_GGUF) {
        rc = llm_gguf_write_model(&cfg, &w, tok, name, type, out_path, err, errlen);
        if (rc) llm__err_prefix(err, errlen, model);   /* name the folder: the refusals are about its tokenizer */
    } else if (!rc) {
        rc = llm_safetensors_write_ex(&cfg, &w, st_of[type], -1, -1, model, out_path, err, errlen);
    }
    llm_tokenizer_free(tok);
    llm_weights_free(&w);
    return rc;
}

static int refuse_llama2c_gguf(const char *model, char *err, size_t errlen)
{
    return llm__errf(err, errlen, "%s is a llama2.c checkpoint: a GGUF export copies the metadata and tokenizer of a GGUF "
                     "original, which a llama2.c file does not have (grzo-export --format safetensors, or convert it to "
                     "GGUF first)", model);
}

int llm_export_check_gguf(const char *model, const llm_config *cfg, const llm_tokenizer *tok, char *err, size_t errlen)
{
    unsigned char magic[4];
    size_t got;
    FILE *f;
    if (!model || !cfg) return llm__errf(err, errlen, "llm_export_check_gguf: missing argument");
    if (is_directory(model)) {
        if (llm_gguf_check_model(cfg, tok, err, errlen) == 0) return 0;
        llm__err_prefix(err, errlen, model);   /* as llm_export names it */
        return 1;
    }
    if (!(f = fopen(model, "rb"))) return llm__errf(err, errlen, "%s: %s", model, strerror(errno));
    got = fread(magic, 1, sizeof magic, f);
    fclose(f);
    return got == sizeof magic && memcmp(magic, "GGUF", 4) == 0 ? 0 : refuse_llama2c_gguf(model, err, errlen);
}

int llm_export(const char *model, const char *checkpoint, const char *out_path, llm_export_format format,
               llm_gguf_type type, char *err, size_t errlen)
{
    uint8_t *image = NULL;
    size_t size = 0;
    llm_config cfg;
    llm_weights w;
    llm_tokenizer *tok = NULL;
    int rc, is_gguf;
    memset(&w, 0, sizeof w);
    if (!model || !checkpoint || !out_path || !out_path[0] || (unsigned)format > LLM_EXPORT_SAFETENSORS ||
        (unsigned)type > LLM_GGUF_Q8_0)
        return llm__errf(err, errlen, "llm_export: missing or invalid argument");
    if (format == LLM_EXPORT_SAFETENSORS && type == LLM_GGUF_Q8_0)
        return llm__errf(err, errlen, "safetensors holds f32, f16 or bf16 weights, not q8_0");
    if (is_directory(model)) return export_hf(model, checkpoint, out_path, format, type, err, errlen);
    if (llm__read_file(model, SIZE_MAX, &image, &size, err, errlen)) return 1;
    is_gguf = size >= 4 && memcmp(image, "GGUF", 4) == 0;
    if (format == LLM_EXPORT_GGUF && !is_gguf) {
        free(image);
        return refuse_llama2c_gguf(model, err, errlen);
    }
    rc = llm_load_memory(image, size, &cfg, &w, is_gguf ? &tok : NULL, err, errlen);
    if (rc) llm__err_prefix(err, errlen, model);
    rc = rc || apply_checkpoint(checkpoint, &cfg, &w, err, errlen) ||
         write_format(image, size, &cfg, &w, tok, format, type, out_path, err, errlen);
    llm_tokenizer_free(tok);
    llm_weights_free(&w);
    free(image);
    return rc;
}

int llm_export_as(const char *model, const char *checkpoint, const char *out_path, const char *type_name, char *err,
                  size_t errlen)
{
    llm_gguf_type type;
    if (llm_gguf_type_parse(type_name, &type))
        return llm__errf(err, errlen, "unknown export type '%s' (expected f32, f16, bf16 or q8_0)", type_name ? type_name : "");
    return llm_export(model, checkpoint, out_path, LLM_EXPORT_GGUF, type, err, errlen);
}
