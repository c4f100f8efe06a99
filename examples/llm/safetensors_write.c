/* safetensors_write.c - a Hugging Face folder out of llm_weights (see safetensors_write.h).

   model.safetensors: an 8-byte little-endian header length, a JSON header naming every
   tensor with its dtype, shape and [begin, end) byte offsets into the data that follows
   (padded with spaces to a multiple of 8, as the safetensors library writes it), then the
   tensors back to back. Names and layout are transformers' LlamaForCausalLM:
   model.embed_tokens, model.layers.N.{input_layernorm, self_attn.{q,k,v,o}_proj,
   post_attention_layernorm, mlp.{gate,up,down}_proj}, model.norm, lm_head (untied only).

   The names come from the one list the reader uses too (llm__hf_tensors, load_hf.c).

   Rotary pairs: llm_weights (like GGUF "llama") keeps the rows of Wq and Wk so that the
   pairs rotated together are adjacent (2i, 2i+1) within each head; transformers rotates
   the two halves of a head (i, i + head_dim/2). llama.cpp's converter permutes HF rows into
   the adjacent layout (and so does load_hf.c); this writer inverts that permutation:
       hf[h*hd + j*hd/2 + i] = ours[h*hd + 2*i + j]     (i < hd/2, j in {0, 1})
   for every query head (Wq) and key/value head (Wk) (llm__ours_row_of_hf); Wv and Wo are
   unchanged. */
#if !defined(_WIN32)
#define _POSIX_C_SOURCE 200809L   /* fsync */
#endif

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf_write.h"
#include "llm_internal.h"
#include "safetensors_write.h"

static const char *dtype_name(llm_st_dtype d)
{
    return d == LLM_ST_F32 ? "F32" : d == LLM_ST_F16 ? "F16" : "BF16";
}

static size_t dtype_size(llm_st_dtype d)
{
    return d == LLM_ST_F32 ? 4 : 2;
}

/* The JSON header (malloc'd), padded with spaces to a multiple of 8. */
static char *header_json(const llm_hf_tensor *t, int n, llm_st_dtype dt, size_t *len)
{
    size_t cap = 256 + (size_t)n * 320, k = 0;   /* an entry is under 200 bytes */
    uint64_t off = 0;
    char *h = (char *)malloc(cap);
    int i;
    if (!h) return NULL;
    k += (size_t)snprintf(h + k, cap - k, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (i = 0; i < n; i++) {
        uint64_t bytes = t[i].rows * t[i].cols * dtype_size(dt);
        if (t[i].rows == 1)
            k += (size_t)snprintf(h + k, cap - k, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%llu],\"data_offsets\":[%llu,%llu]}",
                                  t[i].name, dtype_name(dt), (unsigned long long)t[i].cols, (unsigned long long)off,
                                  (unsigned long long)(off + bytes));
        else
            k += (size_t)snprintf(h + k, cap - k,
                                  ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%llu,%llu],\"data_offsets\":[%llu,%llu]}", t[i].name,
                                  dtype_name(dt), (unsigned long long)t[i].rows, (unsigned long long)t[i].cols,
                                  (unsigned long long)off, (unsigned long long)(off + bytes));
        off += bytes;
    }
    k += (size_t)snprintf(h + k, cap - k, "}");
    while (k % 8) h[k++] = ' ';
    *len = k;
    return h;
}

static void put_value(FILE *f, float x, llm_st_dtype dt)
{
    uint8_t b[4];
    uint32_t u;
    if (dt == LLM_ST_F32) {
        memcpy(&u, &x, 4);
    } else {
        u = dt == LLM_ST_BF16 ? llm__f32_to_bf16(x) : llm__f32_to_f16(x);
    }
    b[0] = (uint8_t)u, b[1] = (uint8_t)(u >> 8), b[2] = (uint8_t)(u >> 16), b[3] = (uint8_t)(u >> 24);
    fwrite(b, 1, dtype_size(dt), f);
}

static void write_rows(FILE *f, const llm_hf_tensor *t, llm_st_dtype dt)
{
    uint64_t r, cidx, hd = t->rope_heads ? t->rows / (uint64_t)t->rope_heads : 0;
    for (r = 0; r < t->rows; r++) {
        uint64_t src_row = hd ? llm__ours_row_of_hf(r, hd) : r;
        for (cidx = 0; cidx < t->cols; cidx++) put_value(f, t->data[src_row * t->cols + cidx], dt);
    }
}

static int finish_file(FILE *f, const char *path, char *err, size_t errlen)
{
    int ok = fflush(f) == 0 && !ferror(f) && fsync(fileno(f)) == 0;
    ok = (fclose(f) == 0) && ok;
    return ok ? 0 : llm__errf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
}

static int write_model_file(const char *path, const llm_config *c, const llm_weights *w, llm_st_dtype dt, char *err,
                            size_t errlen)
{
    llm_hf_tensor *t = (llm_hf_tensor *)calloc((size_t)c->n_layers * 9 + 4, sizeof *t);
    char *hdr;
    size_t hlen = 0;
    int n, i;
    uint8_t len8[8];
    FILE *f;
    if (!t) return llm__errf(err, errlen, "out of memory");
    n = llm__hf_tensors(c, w, t);
    if (!(hdr = header_json(t, n, dt, &hlen))) {
        free(t);
        return llm__errf(err, errlen, "out of memory");
    }
    if (!(f = fopen(path, "wb"))) {
        free(hdr), free(t);
        return llm__errf(err, errlen, "%s: cannot create: %s", path, strerror(errno));
    }
    for (i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
    fwrite(len8, 1, 8, f);
    fwrite(hdr, 1, hlen, f);
    for (i = 0; i < n; i++) write_rows(f, &t[i], dt);
    free(hdr);
    free(t);
    return finish_file(f, path, err, errlen);
}

static int write_config(const char *path, const llm_config *c, llm_st_dtype dt, int32_t bos, int32_t eos, char *err,
                        size_t errlen)
{
    FILE *f = fopen(path, "w");
    static const char *const torch[] = {"float32", "float16", "bfloat16"};
    if (!f) return llm__errf(err, errlen, "%s: cannot create: %s", path, strerror(errno));
    fprintf(f,
            "{\n  \"architectures\": [\"LlamaForCausalLM\"],\n  \"model_type\": \"llama\",\n"
            "  \"hidden_size\": %d,\n  \"intermediate_size\": %d,\n  \"num_hidden_layers\": %d,\n"
            "  \"num_attention_heads\": %d,\n  \"num_key_value_heads\": %d,\n  \"head_dim\": %d,\n"
            "  \"vocab_size\": %d,\n  \"max_position_embeddings\": %d,\n  \"rms_norm_eps\": %.9g,\n"
            "  \"rope_theta\": %.9g,\n  \"hidden_act\": \"silu\",\n  \"attention_bias\": false,\n  \"mlp_bias\": false,\n"
            "  \"tie_word_embeddings\": %s,\n  \"torch_dtype\": \"%s\"",
            (int)c->dim, (int)c->hidden_dim, (int)c->n_layers, (int)c->n_heads, (int)c->n_kv_heads, (int)c->head_dim,
            (int)c->vocab_size, (int)c->max_seq_len, (double)c->norm_eps, (double)c->rope_theta,
            c->tied_output ? "true" : "false", torch[dt]);
    if (c->rope_scaling == LLM_ROPE_SCALING_LLAMA3)
        fprintf(f, ",\n  \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": %.9g, \"low_freq_factor\": %.9g, "
                   "\"high_freq_factor\": %.9g, \"original_max_position_embeddings\": %d}",
                (double)c->rope_factor, (double)c->rope_low_freq_factor, (double)c->rope_high_freq_factor,
                (int)c->rope_original_max_pos);
    if (bos >= 0) fprintf(f, ",\n  \"bos_token_id\": %d", (int)bos);
    if (eos >= 0) fprintf(f, ",\n  \"eos_token_id\": %d", (int)eos);
    fprintf(f, "\n}\n");
    return finish_file(f, path, err, errlen);
}

/* The files of a Hugging Face original copied as they are: its tokenizer and generation
   settings, which the fine-tuned weights do not change. */
static const char *const copied_names[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                           "generation_config.json"};
#define N_COPIED ((int)(sizeof copied_names / sizeof copied_names[0]))

static void remove_folder(const char *dir)
{
    static const char *const names[] = {"model.safetensors", "config.json"};
    char p[4096];
    int i;
    for (i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    for (i = 0; i < N_COPIED; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, copied_names[i]);
        unlink(p);
    }
    rmdir(dir);
}

/* Copy from_dir's copied_names that exist into dir. */
static int copy_extras(const char *from_dir, const char *dir, char *err, size_t errlen)
{
    char src[4096], dst[4096];
    int i;
    for (i = 0; i < N_COPIED; i++) {
        uint8_t *data;
        size_t n;
        FILE *f;
        struct stat sb;
        snprintf(src, sizeof src, "%s/%s", from_dir, copied_names[i]);
        if (stat(src, &sb) != 0) continue;
        if (llm__read_file(src, SIZE_MAX, &data, &n, err, errlen)) return 1;
        snprintf(dst, sizeof dst, "%s/%s", dir, copied_names[i]);
        f = fopen(dst, "wb");
        if (!f) {
            free(data);
            return llm__errf(err, errlen, "%s: cannot create: %s", dst, strerror(errno));
        }
        if (n && fwrite(data, 1, n, f) != n) {
            free(data);
            fclose(f);
            return llm__errf(err, errlen, "%s: cannot write: %s", dst, strerror(errno));
        }
        free(data);
        if (finish_file(f, dst, err, errlen)) return 1;
    }
    return 0;
}

int llm_safetensors_write(const llm_config *cfg, const llm_weights *w, llm_st_dtype dtype, int32_t bos, int32_t eos,
                          const char *out_dir, char *err, size_t errlen)
{
    return llm_safetensors_write_ex(cfg, w, dtype, bos, eos, NULL, out_dir, err, errlen);
}

int llm_safetensors_write_ex(const llm_config *cfg, const llm_weights *w, llm_st_dtype dtype, int32_t bos, int32_t eos,
                             const char *copy_from, const char *out_dir, char *err, size_t errlen)
{
    size_t len;
    char *tmp, path[4096];
    struct stat sb;
    int attempt, made;
    if (!cfg || !w || !w->arena || !out_dir || !out_dir[0] || (unsigned)dtype > LLM_ST_BF16)
        return llm__errf(err, errlen, "llm_safetensors_write: missing or invalid argument");
    if (stat(out_dir, &sb) == 0)
        return llm__errf(err, errlen, "%s already exists: the safetensors export writes a new folder", out_dir);
    len = strlen(out_dir);
    while (len > 1 && out_dir[len - 1] == '/') len--;   /* "out/" names the folder out: its temporary is out.tmp-... */
    if (len > sizeof path - 64) return llm__errf(err, errlen, "%s: path too long", out_dir);
    /* its own message: a failed allocation once read as "path too long" */
    if (!(tmp = (char *)malloc(len + 32))) return llm__errf(err, errlen, "%s: out of memory", out_dir);
    /* not mkdtemp: its 0700 would ignore the umask; a name another run left behind (a killed
       one, with this pid in another container) is not ours to remove: take the next */
    for (attempt = 0, made = -1; attempt < 100 && made != 0; attempt++) {
        snprintf(tmp, len + 32, "%.*s.tmp-%ld-%d", (int)len, out_dir, (long)getpid(), attempt);
        made = mkdir(tmp, 0777);
        if (made != 0 && errno != EEXIST) break;
    }
    if (made != 0) {
        int e = errno;
        llm__errf(err, errlen, "%s: cannot create the temporary folder %s: %s", out_dir, tmp, strerror(e));
        free(tmp);
        return 1;
    }
    snprintf(path, sizeof path, "%s/model.safetensors", tmp);
    if (write_model_file(path, cfg, w, dtype, err, errlen)) goto fail;
    snprintf(path, sizeof path, "%s/config.json", tmp);
    if (write_config(path, cfg, dtype, bos, eos, err, errlen)) goto fail;
    if (copy_from && copy_extras(copy_from, tmp, err, errlen)) goto fail;
    if (rename(tmp, out_dir) != 0) {
        llm__errf(err, errlen, "%s: cannot write: %s", out_dir, strerror(errno));
        goto fail;
    }
    free(tmp);
    return 0;
fail:
    remove_folder(tmp);
    free(tmp);
    return 1;
}
