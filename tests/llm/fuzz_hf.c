/* fuzz_hf.c - fuzz target for Hugging Face folders (examples/llm/load_hf.c): config.json,
   safetensors headers and the shard index, all untrusted.

   A folder is one input: records (u8 name length, name, u32 little-endian size, bytes), one
   per file, read by the same loader llm_load uses (llm__hf_load) through an in-memory file
   source. Files the loader asks for and the input lacks do not exist; a record cut short
   ends the folder. A folder that loads is checked like any model (fuzz_weights.h); one that
   does not must leave a message and no memory. Every range the loader gives back
   (release) must lie inside the file it came from.

   Two builds, as fuzz_loaders.c:
     libFuzzer:  tests/fuzz/fuzz.sh hf [SECONDS]
     plain:      fuzz_hf [--runs N] [--seed S] [--max-len BYTES] CORPUS_DIR_OR_FILE...
     corpus:     fuzz_hf --write-corpus DIR   writes the seed folders that tests/llm/corpus_hf holds. */
#if !defined(_WIN32)
#define _POSIX_C_SOURCE 200809L
#endif

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_driver.h"
#include "fuzz_weights.h"
#include "llm.h"
#include "llm_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_FILES 16

typedef struct mem_file {
    char name[256];
    const uint8_t *p;
    size_t n;
} mem_file;

typedef struct mem_folder {
    mem_file f[MAX_FILES];
    int n;
} mem_folder;

static void parse_folder(const uint8_t *d, size_t n, mem_folder *m)
{
    size_t at = 0;
    m->n = 0;
    while (m->n < MAX_FILES && at < n) {
        size_t name_len = d[at], len;
        if (n - at < 1 + name_len + 4) return;
        memcpy(m->f[m->n].name, d + at + 1, name_len);
        m->f[m->n].name[name_len] = '\0';
        at += 1 + name_len;
        len = (size_t)d[at] | (size_t)d[at + 1] << 8 | (size_t)d[at + 2] << 16 | (size_t)d[at + 3] << 24;
        at += 4;
        if (len > n - at) len = n - at;
        m->f[m->n].p = d + at;
        m->f[m->n].n = len;
        at += len;
        m->n++;
    }
}

static int mem_open(void *user, const char *name, const uint8_t **data, size_t *size, char *err, size_t errlen)
{
    const mem_folder *m = (const mem_folder *)user;
    int i;
    (void)err, (void)errlen;
    for (i = 0; i < m->n; i++)
        if (!strcmp(m->f[i].name, name)) {
            *data = m->f[i].p;
            *size = m->f[i].n;
            return 0;
        }
    return 1;
}

static void mem_release(void *user, const uint8_t *p, size_t n)
{
    const mem_folder *m = (const mem_folder *)user;
    int i, inside = 0;
    for (i = 0; i < m->n && !inside; i++)
        inside = p >= m->f[i].p && n <= m->f[i].n && (size_t)(p - m->f[i].p) <= m->f[i].n - n;
    require(inside, "released range outside every file");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mem_folder m;
    llm_hf_files fs;
    llm_config c;
    llm_weights w;
    char err[512];
    parse_folder(data, size, &m);
    fs.open = mem_open;
    fs.release = mem_release;
    fs.user = &m;
    err[0] = '\0';
    if (llm__hf_load(&fs, &c, &w, err, sizeof err) == 0) {
        exercise_weights(&c, &w);
        llm_weights_free(&w);
    } else {
        require(err[0] != '\0' && w.arena == NULL, "failed load left no message or memory behind");
    }
    return 0;
}

#ifndef FUZZ_WITH_LIBFUZZER

#include "safetensors_write.h"

typedef struct blob {
    uint8_t *p;
    size_t n, cap;
} blob;

static void put(blob *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = 2 * (b->n + n);
        b->p = (uint8_t *)fuzz_xrealloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void put_record(blob *b, const char *name, const void *p, size_t n)
{
    uint8_t hdr[4];
    uint8_t len = (uint8_t)strlen(name);
    put(b, &len, 1);
    put(b, name, len);
    hdr[0] = (uint8_t)n, hdr[1] = (uint8_t)(n >> 8), hdr[2] = (uint8_t)(n >> 16), hdr[3] = (uint8_t)(n >> 24);
    put(b, hdr, 4);
    put(b, p, n);
}

/* One file of a folder written by llm_safetensors_write, as a record named `as`. */
static int put_file_record(blob *b, const char *dir, const char *file, const char *as)
{
    char path[4096], err[256];
    uint8_t *d;
    size_t n;
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if (llm__read_file(path, SIZE_MAX, &d, &n, err, sizeof err)) {
        fprintf(stderr, "fuzz_hf: %s\n", err);
        return 1;
    }
    put_record(b, as, d, n);
    free(d);
    return 0;
}

/* A tiny model: one layer, widths of a few floats, values that vary. */
static int seed_model(int tied, int llama3, llm_config *c, llm_weights *w)
{
    char err[256];
    llm_hf_tensor t[16];
    int i, n;
    uint64_t k;
    memset(c, 0, sizeof *c);
    c->dim = 8, c->hidden_dim = 12, c->n_layers = 1, c->n_heads = 2, c->n_kv_heads = 1, c->head_dim = 4;
    c->vocab_size = 10, c->max_seq_len = 32, c->norm_eps = 1e-5f, c->rope_theta = 10000.0f, c->tied_output = tied;
    if (llama3) {
        c->rope_scaling = LLM_ROPE_SCALING_LLAMA3, c->rope_factor = 8.0f, c->rope_low_freq_factor = 1.0f;
        c->rope_high_freq_factor = 4.0f, c->rope_original_max_pos = 16;
    }
    if (llm__weights_alloc(c, w, err, sizeof err)) return 1;
    n = llm__hf_tensors(c, w, t);
    for (i = 0; i < n; i++)
        for (k = 0; k < t[i].rows * t[i].cols; k++) t[i].data[k] = (float)((int)((k * 7 + (uint64_t)i) % 13) - 6) / 8.0f;
    return 0;
}

static int write_seed(const char *dir, const char *name, int tied, int llama3, llm_st_dtype dtype, int via_index)
{
    char tmp[4096], err[256];
    llm_config c;
    llm_weights w;
    blob b = {NULL, 0, 0};
    int rc;
    snprintf(tmp, sizeof tmp, "%s/%s.folder", dir, name);
    if (seed_model(tied, llama3, &c, &w)) return 1;
    rc = llm_safetensors_write(&c, &w, dtype, 1, 2, tmp, err, sizeof err);
    if (rc) fprintf(stderr, "fuzz_hf: %s\n", err);
    rc = rc || put_file_record(&b, tmp, "config.json", "config.json");
    if (!rc && via_index) {   /* the same tensors through an index and one shard */
        llm_hf_tensor t[16];
        int i, n = llm__hf_tensors(&c, &w, t);
        blob ix = {NULL, 0, 0};
        put(&ix, "{\"weight_map\": {", 16);
        for (i = 0; i < n; i++) {
            char line[160];
            int k = snprintf(line, sizeof line, "%s\"%s\": \"model-00001-of-00001.safetensors\"", i ? ", " : "", t[i].name);
            put(&ix, line, (size_t)k);
        }
        put(&ix, "}}", 2);
        put_record(&b, "model.safetensors.index.json", ix.p, ix.n);
        free(ix.p);
        rc = put_file_record(&b, tmp, "model.safetensors", "model-00001-of-00001.safetensors");
    } else if (!rc) {
        rc = put_file_record(&b, tmp, "model.safetensors", "model.safetensors");
    }
    if (!rc) rc = fuzz_write_file(dir, name, b.p, b.n);
    {   /* the temporary folder */
        char p[4200];
        snprintf(p, sizeof p, "%s/model.safetensors", tmp), remove(p);
        snprintf(p, sizeof p, "%s/config.json", tmp), remove(p);
        remove(tmp);
    }
    free(b.p);
    llm_weights_free(&w);
    return rc;
}

static int write_corpus(const char *dir)
{
    return write_seed(dir, "untied_f32.hf", 0, 0, LLM_ST_F32, 0) | write_seed(dir, "tied_llama3_bf16.hf", 1, 1, LLM_ST_BF16, 0) |
           write_seed(dir, "index_f16.hf", 0, 1, LLM_ST_F16, 1);
}

int main(int argc, char **argv)
{
    return fuzz_main(argc, argv, "fuzz_hf", write_corpus);
}

#endif /* FUZZ_WITH_LIBFUZZER */
