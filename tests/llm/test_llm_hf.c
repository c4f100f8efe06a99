/* test_llm_hf.c - Hugging Face folders (load_hf.c): round trips through the safetensors
   writer, a sharded folder, and one malformed folder per check of the loader, each refused
   with its own message.

   Folders are built here by a small safetensors writer of the test's own (header text
   from a list of entries, any of whose fields a case can break), so every malformation the
   loader guards against can be made. The reference forward against transformers' layout is
   test_llm_reference --hf. The ends of the config's ranges (rope_theta FLT_MAX, a llama3
   factor of 1 and of 1e6) load. Exit 0 pass, 1 fail. */
#define _POSIX_C_SOURCE 200809L
#include <float.h>
#include <sys/stat.h>
#include <unistd.h>

#include "llm_export.h"
#include "llm_internal.h"
#include "llm_test_util.h"

static char workdir[256];
static int case_no;

/* ---- a safetensors writer of the test's own ---- */

typedef struct entry {
    char name[96];
    const char *dtype;
    int n_dims;
    uint64_t shape[2];
    const void *data;
    uint64_t bytes;
    int64_t begin, end;        /* -1: where the entries before it end */
    const char *extra_field;   /* appended inside the entry's object, e.g. ",\"x\":1" */
} entry;

typedef struct folder {
    entry e[64];
    int n;
    char config[2048];
} folder;

static void put_file(const char *dir, const char *name, const void *p, size_t n) {
    char path[512];
    FILE *f;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
}

/* header_override: the JSON text instead of the generated header (NULL: generated);
   hlen_delta is added to the true header length; trailing bytes of junk follow the data. */
static void write_st(const char *dir, const char *file, const entry *e, int n, const char *header_override, int64_t hlen_delta,
                     size_t trailing) {
    static char header[16384];
    static uint8_t buf[1 << 20];
    size_t k = 0, data = 0, total, i;
    uint64_t hlen;
    int j;
    if (header_override) {
        k = (size_t)snprintf(header, sizeof header, "%s", header_override);
    } else {
        int64_t at = 0;
        k += (size_t)snprintf(header + k, sizeof header - k, "{\"__metadata__\":{\"format\":\"pt\"}");
        for (j = 0; j < n; j++) {
            int64_t b = e[j].begin >= 0 ? e[j].begin : at, en = e[j].end >= 0 ? e[j].end : b + (int64_t)e[j].bytes;
            k += (size_t)snprintf(header + k, sizeof header - k, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", e[j].name, e[j].dtype);
            for (i = 0; i < (size_t)e[j].n_dims; i++)
                k += (size_t)snprintf(header + k, sizeof header - k, "%s%llu", i ? "," : "", (unsigned long long)e[j].shape[i]);
            k += (size_t)snprintf(header + k, sizeof header - k, "],\"data_offsets\":[%lld,%lld]%s}", (long long)b,
                                  (long long)en, e[j].extra_field ? e[j].extra_field : "");
            at = en;
        }
        k += (size_t)snprintf(header + k, sizeof header - k, "}");
    }
    for (j = 0; j < n; j++) data += e[j].bytes;
    hlen = (uint64_t)((int64_t)k + hlen_delta);
    total = 8 + k + data + trailing;
    if (total > sizeof buf) {
        fprintf(stderr, "test folder too large\n");
        exit(1);
    }
    for (i = 0; i < 8; i++) buf[i] = (uint8_t)(hlen >> (8 * i));
    memcpy(buf + 8, header, k);
    for (j = 0, i = 8 + k; j < n; j++) {
        memcpy(buf + i, e[j].data, (size_t)e[j].bytes);
        i += (size_t)e[j].bytes;
    }
    memset(buf + i, 0x5a, trailing);
    put_file(dir, file, buf, total);
}

/* ---- the model ---- */

static tu_model model;
static llm_hf_tensor tensors[64];
static int n_tensors;

static const char *config_fmt =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"hidden_size\": 32,\n"
    " \"intermediate_size\": 48, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,\n"
    " \"vocab_size\": 40, \"max_position_embeddings\": 64, \"rms_norm_eps\": 1e-05, \"rope_theta\": 10000.0,\n"
    " \"hidden_act\": \"silu\", \"tie_word_embeddings\": false, \"rope_scaling\": null%s}";

/* The good folder's entries: every tensor F32, in our rows (the permutation does not matter
   to the malformed-file checks). */
static void base_folder(folder *f, const char *config_extra) {
    int i;
    memset(f, 0, sizeof *f);
    for (i = 0; i < n_tensors; i++) {
        entry *e = &f->e[i];
        memcpy(e->name, tensors[i].name, sizeof tensors[i].name);   /* 80 bytes, NUL included */
        e->dtype = "F32";
        e->n_dims = tensors[i].rows == 1 ? 1 : 2;
        e->shape[0] = tensors[i].rows == 1 ? tensors[i].cols : tensors[i].rows;
        e->shape[1] = tensors[i].cols;
        e->data = tensors[i].data;
        e->bytes = tensors[i].rows * tensors[i].cols * 4;
        e->begin = e->end = -1;
    }
    f->n = n_tensors;
    snprintf(f->config, sizeof f->config, config_fmt, config_extra ? config_extra : "");
}

static entry *find_entry(folder *f, const char *name) {
    int i;
    for (i = 0; i < f->n; i++)
        if (!strcmp(f->e[i].name, name)) return &f->e[i];
    fprintf(stderr, "no entry %s\n", name);
    exit(1);
}

static void remove_entry(folder *f, const char *name) {
    entry *e = find_entry(f, name);
    int k = (int)(e - f->e);
    memmove(e, e + 1, (size_t)(f->n - k - 1) * sizeof *e);
    f->n--;
}

/* A new empty folder for the next case. */
static void new_dir(char *dir, size_t cap) {
    snprintf(dir, cap, "%s/case%02d", workdir, ++case_no);
    if (mkdir(dir, 0777) != 0) {
        perror(dir);
        exit(1);
    }
}

static void write_folder(const char *dir, const folder *f) {
    put_file(dir, "config.json", f->config, strlen(f->config));
    write_st(dir, "model.safetensors", f->e, f->n, NULL, 0, 0);
}

/* llm_load must refuse the folder with a message containing `want`. */
static void expect_refused(const char *what, const char *dir, const char *want, int with_tok) {
    llm_config c;
    llm_weights w;
    llm_tokenizer *tok = NULL;
    char err[512] = "";
    int rc = llm_load(dir, &c, &w, with_tok ? &tok : NULL, err, sizeof err);
    TU_CHECK(rc != 0, "%s: loaded", what);
    TU_CHECK(rc == 0 || strstr(err, want) != NULL, "%s: message '%s' does not say '%s'", what, err, want);
    TU_CHECK(rc == 0 || (w.arena == NULL && tok == NULL), "%s: a failed load left memory behind", what);
    if (rc == 0) llm_weights_free(&w);
    llm_tokenizer_free(tok);
    tok = NULL;
    /* the same refusal for a caller that takes no message (NULL, 0), and one whose buffer has
       no room (errlen 0): its byte is not a string, so a loader that read it as one (to put
       a prefix before the message) would overrun it (the sanitized build) */
    {
        char *room = (char *)malloc(1);
        TU_CHECK(room != NULL, "out of memory");
        if (!room) return;
        room[0] = 'x';
        rc = llm_load(dir, &c, &w, with_tok ? &tok : NULL, NULL, 0);
        TU_CHECK(rc != 0, "%s: loaded without a message buffer", what);
        if (rc == 0) llm_weights_free(&w);
        llm_tokenizer_free(tok);
        tok = NULL;
        rc = llm_load(dir, &c, &w, with_tok ? &tok : NULL, room, 0);
        TU_CHECK(rc != 0 && room[0] == 'x', "%s: errlen 0: rc %d, buffer byte '%c'", what, rc, room[0]);
        if (rc == 0) llm_weights_free(&w);
        llm_tokenizer_free(tok);
        free(room);
    }
    printf("refused  %-40s %s\n", what, err);
}

static void expect_config_refused(const char *what, const char *config_extra, const char *want) {
    char dir[320];
    folder f;
    base_folder(&f, config_extra);
    new_dir(dir, sizeof dir);
    write_folder(dir, &f);
    expect_refused(what, dir, want, 0);
}

static void expect_folder_refused(const char *what, const folder *f, const char *want) {
    char dir[320];
    new_dir(dir, sizeof dir);
    write_folder(dir, f);
    expect_refused(what, dir, want, 0);
}

/* ---- checks ---- */

static int same_config(const llm_config *a, const llm_config *b) {
    return a->dim == b->dim && a->hidden_dim == b->hidden_dim && a->n_layers == b->n_layers && a->n_heads == b->n_heads &&
           a->n_kv_heads == b->n_kv_heads && a->head_dim == b->head_dim && a->vocab_size == b->vocab_size &&
           a->max_seq_len == b->max_seq_len && a->norm_eps == b->norm_eps && a->rope_theta == b->rope_theta &&
           a->tied_output == b->tied_output && a->rope_scaling == b->rope_scaling && a->rope_factor == b->rope_factor &&
           a->rope_low_freq_factor == b->rope_low_freq_factor && a->rope_high_freq_factor == b->rope_high_freq_factor &&
           a->rope_original_max_pos == b->rope_original_max_pos;
}

/* Loaded weights against the model's, each value passed through `round` (NULL: bit for bit). */
static int weights_match(const llm_config *c, const llm_weights *got, float (*round)(float)) {
    llm_hf_tensor a[64], b[64];
    int n = llm__hf_tensors(c, got, a), i;
    uint64_t k;
    llm__hf_tensors(c, &model.w, b);
    for (i = 0; i < n; i++)
        for (k = 0; k < a[i].rows * a[i].cols; k++) {
            float want = round ? round(b[i].data[k]) : b[i].data[k];
            if (memcmp(&a[i].data[k], &want, 4) != 0) {
                fprintf(stderr, "%s[%llu]: %.9g, expected %.9g\n", a[i].name, (unsigned long long)k, (double)a[i].data[k],
                        (double)want);
                return 0;
            }
        }
    return 1;
}

static float round_f16(float x) { return llm__f16_to_f32(llm__f32_to_f16(x)); }
static float round_bf16(float x) { return llm__bf16_to_f32(llm__f32_to_bf16(x)); }

/* grzo -> llm_safetensors_write -> llm_load: bit for bit at f32, each type's rounding at
   f16/bf16; the config (rope_scaling included) comes back through config.json. */
static void round_trip(llm_st_dtype dtype, const char *label) {
    char dir[320];
    llm_config c;
    llm_weights w;
    char err[512];
    snprintf(dir, sizeof dir, "%s/export_%s", workdir, label);
    if (llm_safetensors_write(&model.cfg, &model.w, dtype, 1, 2, dir, err, sizeof err) != 0) {
        TU_CHECK(0, "write %s: %s", label, err);
        return;
    }
    if (llm_load(dir, &c, &w, NULL, err, sizeof err) != 0) {
        TU_CHECK(0, "load %s: %s", label, err);
        return;
    }
    TU_CHECK(same_config(&c, &model.cfg), "%s: the config changed on the way", label);
    TU_CHECK(weights_match(&c, &w, dtype == LLM_ST_F32 ? NULL : dtype == LLM_ST_F16 ? round_f16 : round_bf16),
             "%s: the weights changed on the way", label);
    printf("round trip %s: config and weights as written\n", label);
    llm_weights_free(&w);
}

/* The good folder as two shards with an index loads to the same weights as one file. */
static void sharded_loads(void) {
    char dir[320], index[8192];
    folder f;
    llm_config c;
    llm_weights w;
    char err[512];
    size_t k = 0;
    int i, half;
    base_folder(&f, NULL);
    half = f.n / 2;
    new_dir(dir, sizeof dir);
    put_file(dir, "config.json", f.config, strlen(f.config));
    write_st(dir, "model-00001-of-00002.safetensors", f.e, half, NULL, 0, 0);
    write_st(dir, "model-00002-of-00002.safetensors", f.e + half, f.n - half, NULL, 0, 0);
    k += (size_t)snprintf(index + k, sizeof index - k, "{\"metadata\": {\"total_size\": 0}, \"weight_map\": {");
    for (i = 0; i < f.n; i++)
        k += (size_t)snprintf(index + k, sizeof index - k, "%s\"%s\": \"model-0000%d-of-00002.safetensors\"", i ? ", " : "",
                              f.e[i].name, i < half ? 1 : 2);
    k += (size_t)snprintf(index + k, sizeof index - k, "}}");
    put_file(dir, "model.safetensors.index.json", index, k);
    if (llm_load(dir, &c, &w, NULL, err, sizeof err) != 0) {
        TU_CHECK(0, "sharded folder: %s", err);
        return;
    }
    /* the folder holds our rows as HF rows: compare after the loader's permutation back */
    TU_CHECK(c.n_layers == model.cfg.n_layers && c.dim == model.cfg.dim, "sharded folder: config");
    {
        llm_hf_tensor got[64];
        int n = llm__hf_tensors(&c, &w, got), same = 1;
        uint64_t r;
        for (i = 0; i < n && same; i++)
            for (r = 0; r < got[i].rows && same; r++) {
                uint64_t src = got[i].rope_heads ? llm__hf_row_of_ours(r, got[i].rows / (uint64_t)got[i].rope_heads) : r;
                same = !memcmp(got[i].data + r * got[i].cols, tensors[i].data + src * got[i].cols, (size_t)got[i].cols * 4);
            }
        TU_CHECK(same, "sharded folder: weights differ from the single file's");
        printf("sharded folder (2 shards + index): loads, rows permuted as llama.cpp does\n");
    }
    llm_weights_free(&w);
}

/* grzo-export's path from a Hugging Face original: a checkpoint of changed weights, exported
   to safetensors (bit for bit at f32, the tokenizer files copied); a GGUF export, which needs
   the tokenizer, refused for this folder's placeholder tokenizer.json (test_llm_export --hf
   covers GGUF exports of folders). */
static void export_from_folder(void) {
    char orig[320], ckpt[320], out[320], out_gguf[320], err[512], path[400];
    grzo_backend be;
    grzo_desc d;
    grzo_ctx *ctx;
    llm_model m;
    llm_config c;
    llm_weights w, got;
    struct stat sb;
    static const char tokjson[] = "{\"model\": {}}";
    snprintf(orig, sizeof orig, "%s/export_f32", workdir);   /* round_trip's folder */
    snprintf(ckpt, sizeof ckpt, "%s/tuned.grzo", workdir);
    snprintf(out, sizeof out, "%s/tuned_hf", workdir);
    snprintf(out_gguf, sizeof out_gguf, "%s/tuned.gguf", workdir);
    put_file(orig, "tokenizer.json", tokjson, sizeof tokjson - 1);
    if (llm_load(orig, &c, &w, NULL, err, sizeof err) != 0) {
        TU_CHECK(0, "export original: %s", err);
        return;
    }
    w.layers[1].wq[5] += 0.25f;   /* "fine-tuned": a weight the checkpoint changes */
    memset(&m, 0, sizeof m);
    memset(&d, 0, sizeof d);
    if (grzo_backend_cpu_create(&(grzo_cpu_desc){0}, &be) != GRZO_OK) exit(1);
    d.backend = &be;
    if (grzo_create(&d, &ctx) != GRZO_OK) exit(1);
    TU_OK(&m, llm_model_register(ctx, &m, &c, &w));
    TU_CHECK(grzo_checkpoint_save(ctx, ckpt) == GRZO_OK, "checkpoint: %s", grzo_last_error(ctx));
    llm_model_free(&m);
    grzo_destroy(ctx);
    grzo_backend_destroy(&be);

    TU_CHECK(llm_export(orig, ckpt, out_gguf, LLM_EXPORT_GGUF, LLM_GGUF_F32, err, sizeof err) != 0 &&
                 strstr(err, "tokenizer.json: a model has no \"type\"") && stat(out_gguf, &sb) != 0,
             "GGUF export of a folder with a broken tokenizer.json (the GGUF needs it): '%s'", err);
    if (llm_export(orig, ckpt, out, LLM_EXPORT_SAFETENSORS, LLM_GGUF_F32, err, sizeof err) != 0) {
        TU_CHECK(0, "export from a folder: %s", err);
    } else if (llm_load(out, &c, &got, NULL, err, sizeof err) != 0) {
        TU_CHECK(0, "load the export: %s", err);
    } else {
        float *saved = model.w.layers[1].wq;
        int same;
        model.w.layers[1].wq = w.layers[1].wq;   /* compare against the tuned weights */
        same = weights_match(&c, &got, NULL);
        model.w.layers[1].wq = saved;
        TU_CHECK(same, "the export from a folder does not hold the checkpoint's weights");
        snprintf(path, sizeof path, "%s/tokenizer.json", out);
        TU_CHECK(stat(path, &sb) == 0 && sb.st_size == (off_t)(sizeof tokjson - 1), "tokenizer.json was not copied");
        printf("export from a folder: safetensors with the checkpoint's weights and the tokenizer files; GGUF refused\n");
        llm_weights_free(&got);
    }
    llm_weights_free(&w);
}

static void sharded_refusals(void) {
    static const struct {
        const char *what, *map1, *map2, *want;   /* shard names given to the first and second half */
        int duplicate;                            /* the first tensor of shard 2 also in shard 1 */
        int unlisted;                             /* the index leaves the last tensor out */
    } cases[] = {
        {"index names a missing shard", "model-00001-of-00002.safetensors", "model-00003-of-00002.safetensors",
         "model-00003-of-00002.safetensors is not in the folder", 0, 0},
        {"index escapes the folder with ../", "model-00001-of-00002.safetensors", "../model-00002-of-00002.safetensors",
         "names shard '../model-00002-of-00002.safetensors', which is not a file name in the folder", 0, 0},
        {"index names an absolute path", "model-00001-of-00002.safetensors", "/etc/passwd", "not a file name in the folder", 0, 0},
        {"index names the folder itself", "model-00001-of-00002.safetensors", "..", "not a file name in the folder", 0, 0},
        {"index maps to the wrong shards", "model-00002-of-00002.safetensors", "model-00001-of-00002.safetensors",
         "is listed in model-00002-of-00002.safetensors but is in model-00001-of-00002.safetensors", 0, 0},
        {"index names a shard without the tensor", "model-00002-of-00002.safetensors", "model-00002-of-00002.safetensors",
         "tensor 'model.embed_tokens.weight' is not in model-00002-of-00002.safetensors", 0, 0},
        {"tensor in two shards", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "is in both", 1, 0},
        {"shard tensor not in the index", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
         "is not listed in model.safetensors.index.json", 0, 1},
    };
    size_t c;
    for (c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char dir[320], index[8192];
        folder f;
        size_t k = 0;
        int i, half, n_listed;
        base_folder(&f, NULL);
        half = f.n / 2;
        new_dir(dir, sizeof dir);
        put_file(dir, "config.json", f.config, strlen(f.config));
        write_st(dir, "model-00001-of-00002.safetensors", f.e, half + (cases[c].duplicate ? 1 : 0), NULL, 0, 0);
        write_st(dir, "model-00002-of-00002.safetensors", f.e + half, f.n - half, NULL, 0, 0);
        n_listed = cases[c].unlisted ? f.n - 1 : f.n;
        k += (size_t)snprintf(index + k, sizeof index - k, "{\"weight_map\": {");
        for (i = 0; i < n_listed; i++)
            k += (size_t)snprintf(index + k, sizeof index - k, "%s\"%s\": \"%s\"", i ? ", " : "", f.e[i].name,
                                  i < half ? cases[c].map1 : cases[c].map2);
        k += (size_t)snprintf(index + k, sizeof index - k, "}}");
        put_file(dir, "model.safetensors.index.json", index, k);
        expect_refused(cases[c].what, dir, cases[c].want, 0);
    }
    {   /* a shard "name" that is not a string is said to be one */
        char dir[320];
        static const char index[] = "{\"weight_map\": {\"model.norm.weight\": 3}}";
        folder f;
        base_folder(&f, NULL);
        new_dir(dir, sizeof dir);
        put_file(dir, "config.json", f.config, strlen(f.config));
        put_file(dir, "model.safetensors.index.json", index, sizeof index - 1);
        expect_refused("index names a number", dir,
                       "tensor 'model.norm.weight' names shard '(not a string)', which is not a file name in the folder", 0);
    }
}

/* The base config with `old` replaced by `new` (both must fit; old must be there). */
static void config_case(const char *what, const char *old, const char *new_text, const char *want) {
    char dir[320], rest[2048];
    folder f;
    char *p;
    base_folder(&f, NULL);
    p = strstr(f.config, old);
    if (!p) {
        fprintf(stderr, "%s: '%s' is not in the config\n", what, old);
        exit(1);
    }
    snprintf(rest, sizeof rest, "%s", p + strlen(old));
    snprintf(p, sizeof f.config - (size_t)(p - f.config), "%s%s", new_text, rest);
    new_dir(dir, sizeof dir);
    write_folder(dir, &f);
    expect_refused(what, dir, want, 0);
}

/* The same with the folder expected to load, its config as written. */
static void config_loads(const char *what, const char *old, const char *new_text, llm_config *out) {
    char dir[320], rest[2048], err[512] = "";
    folder f;
    llm_weights w;
    char *p;
    base_folder(&f, NULL);
    p = strstr(f.config, old);
    if (!p) {
        fprintf(stderr, "%s: '%s' is not in the config\n", what, old);
        exit(1);
    }
    snprintf(rest, sizeof rest, "%s", p + strlen(old));
    snprintf(p, sizeof f.config - (size_t)(p - f.config), "%s%s", new_text, rest);
    new_dir(dir, sizeof dir);
    write_folder(dir, &f);
    memset(out, 0, sizeof *out);
    TU_CHECK(llm_load(dir, out, &w, NULL, err, sizeof err) == 0, "%s: refused: %s", what, err);
    llm_weights_free(&w);
}

static void config_refusals(void) {
    expect_config_refused("duplicate key in config.json", ", \"model_type\": \"qwen2\"", "duplicate key");
    config_case("model_type gemma", "\"llama\"", "\"gemma\"", "model_type 'gemma' is not supported (only llama and mistral)");
    config_case("architecture", "LlamaForCausalLM", "LlamaForSequenceClassification",
                "architecture 'LlamaForSequenceClassification' is not supported");
    config_case("hidden_act gelu", "\"silu\"", "\"gelu\"", "hidden_act 'gelu' is not supported (only silu)");
    config_case("hidden_size not an integer", "\"hidden_size\": 32", "\"hidden_size\": 32.5", "'hidden_size' must be an integer");
    config_case("vocab_size missing", "\"vocab_size\": 40,", "", "'vocab_size' is missing");
    config_case("heads do not divide", "\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3",
                "bad key/value head count 3 for 4 heads");
    config_case("rope_scaling yarn", "\"rope_scaling\": null", "\"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4.0}",
                "rotary scaling 'yarn' is not supported (only llama3)");
    config_case("rope_scaling types disagree", "\"rope_scaling\": null",
                "\"rope_scaling\": {\"type\": \"linear\", \"rope_type\": \"llama3\"}", "has rope_type 'llama3' and type 'linear'");
    config_case("llama3 scaling without factor", "\"rope_scaling\": null",
                "\"rope_scaling\": {\"rope_type\": \"llama3\", \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                "\"original_max_position_embeddings\": 32}", "'factor' is missing");
    config_case("llama3 scaling low > high", "\"rope_scaling\": null",
                "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 4.0, "
                "\"high_freq_factor\": 1.0, \"original_max_position_embeddings\": 32}",
                "0 < low_freq_factor < high_freq_factor");
    expect_config_refused("attention_bias", ", \"attention_bias\": true", "attention_bias is not supported");
    expect_config_refused("mlp_bias", ", \"mlp_bias\": true", "mlp_bias is not supported");
    expect_config_refused("sliding window active", ", \"sliding_window\": 16",
                          "sliding-window attention (sliding_window 16 < max_position_embeddings 64) is not supported");
    expect_config_refused("quantization_config", ", \"quantization_config\": {\"quant_method\": \"gptq\"}",
                          "quantized checkpoints (quantization_config) are not supported");
    expect_config_refused("partial rotary", ", \"partial_rotary_factor\": 0.5", "partial_rotary_factor 0.5 is not supported");
    expect_config_refused("head_dim odd", ", \"head_dim\": 7", "config.json: bad head size 7");
    /* rope_scaling's type names must be strings: a number is refused, not taken for "no scaling" */
    config_case("rope_type a number", "\"rope_scaling\": null",
                "\"rope_scaling\": {\"rope_type\": 3, \"factor\": 8.0}", "config.json: 'rope_type' must be a string");
    config_case("type a number", "\"rope_scaling\": null", "\"rope_scaling\": {\"type\": 3, \"factor\": 8.0}",
                "config.json: 'type' must be a string");
    {   /* the ends of the ranges load: rope_theta up to FLT_MAX (the largest float,
           (2 - 2^-23) * 2^127, written with the 17 digits that give that double back), a
           llama3 factor from 1 to 1e6 */
        llm_config c;
        config_loads("rope_theta FLT_MAX", "\"rope_theta\": 10000.0", "\"rope_theta\": 3.4028234663852886e+38", &c);
        TU_CHECK(c.rope_theta == FLT_MAX, "rope_theta FLT_MAX: read as %g", (double)c.rope_theta);
        config_loads("llama3 factor 1e6", "\"rope_scaling\": null",
                     "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 1000000.0, \"low_freq_factor\": 1.0, "
                     "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 32}", &c);
        TU_CHECK(c.rope_scaling == LLM_ROPE_SCALING_LLAMA3 && c.rope_factor == 1e6f, "llama3 factor 1e6: read as %g",
                 (double)c.rope_factor);
        config_loads("llama3 factor 1", "\"rope_scaling\": null",
                     "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 1.0, \"low_freq_factor\": 1.0, "
                     "\"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 32}", &c);
        TU_CHECK(c.rope_scaling == LLM_ROPE_SCALING_LLAMA3 && c.rope_factor == 1.0f, "llama3 factor 1: read as %g",
                 (double)c.rope_factor);
    }
    {   /* an inactive window (Mistral v0.2+ style null, or one past the context) loads */
        char dir[320];
        folder f;
        llm_config c;
        llm_weights w;
        char err[512];
        base_folder(&f, ", \"sliding_window\": 64, \"head_dim\": null");
        new_dir(dir, sizeof dir);
        write_folder(dir, &f);
        TU_CHECK(llm_load(dir, &c, &w, NULL, err, sizeof err) == 0, "inactive sliding window refused: %s", err);
        llm_weights_free(&w);
    }
}

int main(void) {
    const char *tmp = getenv("TMPDIR");
    llm_config cfg = tu_tiny_config(0);
    char dir[320];
    folder f;
    snprintf(workdir, sizeof workdir, "%s/grzo_llm_hf_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(workdir)) {
        perror("mkdtemp");
        return 1;
    }
    cfg.rope_scaling = LLM_ROPE_SCALING_LLAMA3;
    cfg.rope_factor = 8.0f;
    cfg.rope_low_freq_factor = 1.0f;
    cfg.rope_high_freq_factor = 4.0f;
    cfg.rope_original_max_pos = 32;
    tu_model_create(&model, &cfg, 7);
    model.w.arena = model.mem;   /* the writer asks for a loaded model's arena */
    n_tensors = llm__hf_tensors(&model.cfg, &model.w, tensors);

    round_trip(LLM_ST_F32, "f32");
    round_trip(LLM_ST_F16, "f16");
    round_trip(LLM_ST_BF16, "bf16");
    sharded_loads();
    export_from_folder();

    /* the folder itself */
    new_dir(dir, sizeof dir);
    expect_refused("empty folder", dir, "no config.json", 0);
    base_folder(&f, NULL);
    new_dir(dir, sizeof dir);
    put_file(dir, "config.json", f.config, strlen(f.config));
    expect_refused("no weights", dir, "no model.safetensors or model.safetensors.index.json", 0);
    new_dir(dir, sizeof dir);
    write_folder(dir, &f);
    expect_refused("tokenizer wanted, no tokenizer.json", dir, "no tokenizer.json in the folder", 1);
    {   /* the same folder loads without a tokenizer */
        llm_config c;
        llm_weights w;
        char err[512];
        TU_CHECK(llm_load(dir, &c, &w, NULL, err, sizeof err) == 0, "the base folder does not load: %s", err);
        llm_weights_free(&w);
    }
    config_refusals();
    sharded_refusals();
    /* the folder's files must be regular files: a directory in their place is said to be one */
    new_dir(dir, sizeof dir);
    {
        char sub[400];
        snprintf(sub, sizeof sub, "%s/config.json", dir);
        TU_CHECK(mkdir(sub, 0777) == 0, "mkdir %s", sub);
        expect_refused("config.json a directory", dir, "config.json: not a regular file", 0);
        new_dir(dir, sizeof dir);
        put_file(dir, "config.json", f.config, strlen(f.config));
        snprintf(sub, sizeof sub, "%s/model.safetensors", dir);
        TU_CHECK(mkdir(sub, 0777) == 0, "mkdir %s", sub);
        expect_refused("model.safetensors a directory", dir, "model.safetensors: not a regular file", 0);
    }

    /* the safetensors header */
    {
        static const char *short_file = "abc";
        new_dir(dir, sizeof dir);
        put_file(dir, "config.json", f.config, strlen(f.config));
        put_file(dir, "model.safetensors", short_file, 3);
        expect_refused("file shorter than 8 bytes", dir, "shorter than the 8-byte safetensors header length", 0);
        new_dir(dir, sizeof dir);
        put_file(dir, "config.json", f.config, strlen(f.config));
        write_st(dir, "model.safetensors", f.e, f.n, NULL, 1 << 30, 0);
        expect_refused("header length past the end", dir, "runs past the end", 0);
        new_dir(dir, sizeof dir);
        put_file(dir, "config.json", f.config, strlen(f.config));
        write_st(dir, "model.safetensors", f.e, f.n, "{\"a\": [1, 2", 0, 0);
        expect_refused("header not JSON", dir, "model.safetensors: header:", 0);
        new_dir(dir, sizeof dir);
        put_file(dir, "config.json", f.config, strlen(f.config));
        write_st(dir, "model.safetensors", f.e, f.n,
                 "{\"model.norm.weight\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}, "
                 "\"model.norm.weight\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}", 0, 0);
        expect_refused("a tensor twice in one header", dir, "duplicate key \"model.norm.weight\"", 0);
        new_dir(dir, sizeof dir);
        put_file(dir, "config.json", f.config, strlen(f.config));
        write_st(dir, "model.safetensors", f.e, f.n, "[1, 2]", 0, 0);
        expect_refused("header not an object", dir, "the header is not a JSON object", 0);
        new_dir(dir, sizeof dir);
        put_file(dir, "config.json", f.config, strlen(f.config));
        write_st(dir, "model.safetensors", f.e, f.n, "{\"__metadata__\": {\"format\": 1}}", 0, 0);
        expect_refused("metadata not strings", dir, "__metadata__ value 'format' is not a string", 0);
        /* a valid header that lists no tensor: the loader once gave qsort the still-NULL
           tensor list (undefined behaviour, reported by -fsanitize=undefined) */
        new_dir(dir, sizeof dir);
        put_file(dir, "config.json", f.config, strlen(f.config));
        write_st(dir, "model.safetensors", f.e, 0, "{\"__metadata__\": {\"format\": \"pt\"}}", 0, 0);
        expect_refused("header without tensors", dir, "tensor 'model.embed_tokens.weight' is missing", 0);
    }
    base_folder(&f, NULL);
    find_entry(&f, "model.layers.0.self_attn.q_proj.weight")->dtype = "I8";
    expect_folder_refused("dtype I8", &f, "has dtype I8, which is not supported (F32, F16, BF16)");
    base_folder(&f, NULL);
    find_entry(&f, "model.norm.weight")->dtype = "F64";
    expect_folder_refused("dtype F64", &f, "has dtype F64, which is not supported");
    base_folder(&f, NULL);
    find_entry(&f, "model.layers.1.mlp.up_proj.weight")->extra_field = ",\"scale\":2";
    expect_folder_refused("entry with an extra field", &f, "must be an object of exactly dtype, shape and data_offsets");
    base_folder(&f, NULL);
    {
        entry *e = find_entry(&f, "model.layers.0.self_attn.k_proj.weight");
        e->shape[0] = 3;   /* 3 x 32 F32 is not the entry's bytes */
    }
    expect_folder_refused("shape and bytes disagree", &f, "bytes of data for a shape that needs 384");
    base_folder(&f, NULL);
    {
        entry *e = find_entry(&f, "model.layers.0.self_attn.k_proj.weight");
        e->shape[0] = 1ull << 62, e->shape[1] = 1ull << 10;
    }
    expect_folder_refused("shape overflow", &f, "shape overflows");
    base_folder(&f, NULL);
    {   /* (2^32 + 1) * (2^32 - 1) = 2^64 - 1: the element count still fits a uint64_t (no
           overflow), only its bytes do not */
        entry *e = find_entry(&f, "model.layers.0.self_attn.k_proj.weight");
        e->shape[0] = (1ull << 32) + 1, e->shape[1] = (1ull << 32) - 1;
    }
    expect_folder_refused("shape of 2^64 - 1 elements", &f, "bytes of data for a shape that needs more than 18446744073709551615");
    base_folder(&f, NULL);
    find_entry(&f, "model.layers.0.mlp.down_proj.weight")->end = 1 << 30;
    expect_folder_refused("offsets past the data", &f, "are outside the");
    base_folder(&f, NULL);
    {
        entry *e = find_entry(&f, "model.layers.1.input_layernorm.weight");
        e->begin = 0, e->end = (int64_t)e->bytes;   /* the same bytes as the embedding's start */
    }
    expect_folder_refused("overlapping tensors", &f, "tensors overlap");
    base_folder(&f, NULL);
    find_entry(&f, "model.embed_tokens.weight")->begin = 4;   /* and 4 more bytes at the end to keep the rest inside */
    new_dir(dir, sizeof dir);
    put_file(dir, "config.json", f.config, strlen(f.config));
    write_st(dir, "model.safetensors", f.e, f.n, NULL, 0, 4);
    expect_refused("gap before a tensor", dir, "a gap in the data", 0);
    new_dir(dir, sizeof dir);
    base_folder(&f, NULL);
    put_file(dir, "config.json", f.config, strlen(f.config));
    write_st(dir, "model.safetensors", f.e, f.n, NULL, 0, 16);
    expect_refused("bytes after the last tensor", dir, "the tensors cover", 0);

    /* tensors against the config */
    base_folder(&f, NULL);
    remove_entry(&f, "model.layers.1.mlp.gate_proj.weight");
    expect_folder_refused("missing tensor", &f, "tensor 'model.layers.1.mlp.gate_proj.weight' is missing");
    base_folder(&f, NULL);
    {
        entry *e = find_entry(&f, "model.layers.0.self_attn.o_proj.weight");
        e->shape[0] = 16, e->shape[1] = 64;   /* the same bytes, the wrong shape */
    }
    expect_folder_refused("wrong shape", &f, "has shape [16, 64], expected [32, 32]");
    base_folder(&f, NULL);
    {
        entry *e = &f.e[f.n++];
        *e = *find_entry(&f, "model.norm.weight");
        snprintf(e->name, sizeof e->name, "model.layers.0.self_attn.q_proj.bias");
    }
    expect_folder_refused("bias tensor", &f, "bias tensors are not supported");
    base_folder(&f, NULL);
    {
        entry *e = &f.e[f.n++];
        *e = *find_entry(&f, "model.norm.weight");
        snprintf(e->name, sizeof e->name, "model.layers.2.input_layernorm.weight");
    }
    expect_folder_refused("a third layer", &f, "is not part of a 2-layer Llama model");
    base_folder(&f, "");
    {
        char *p = strstr(f.config, "\"tie_word_embeddings\": false");
        memcpy(p, "\"tie_word_embeddings\": true ", 28);
    }
    expect_folder_refused("lm_head with tied embeddings", &f, "config.json says tie_word_embeddings: true");
    base_folder(&f, NULL);
    {   /* the rotary buffers older checkpoints carry are accepted */
        static const float inv[4] = {1.0f, 0.1f, 0.01f, 0.001f};
        entry *e = &f.e[f.n++];
        memset(e, 0, sizeof *e);
        snprintf(e->name, sizeof e->name, "model.layers.0.self_attn.rotary_emb.inv_freq");
        e->dtype = "F32", e->n_dims = 1, e->shape[0] = 4, e->data = inv, e->bytes = 16, e->begin = e->end = -1;
        new_dir(dir, sizeof dir);
        write_folder(dir, &f);
        {
            llm_config c;
            llm_weights w;
            char err[512];
            TU_CHECK(llm_load(dir, &c, &w, NULL, err, sizeof err) == 0, "rotary_emb.inv_freq refused: %s", err);
            llm_weights_free(&w);
        }
    }

    tu_model_free(&model);
    {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", workdir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", workdir);
    }
    if (tu_failures) {
        fprintf(stderr, "%d check(s) failed\n", tu_failures);
        return 1;
    }
    printf("Hugging Face folders: all checks passed\n");
    return 0;
}
