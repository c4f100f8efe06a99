/* bench_llm_load.c - time and peak resident memory of loading a model (llm_load).

   usage: bench_llm_load --model PATH [--read-whole]
          bench_llm_load --convert GGUF --out DIR [--dtype f32|f16|bf16]

   --model       a GGUF or llama2.c file, or a Hugging Face folder; prints one line: the
                 load's wall time, the fp32 weights' size and the process's peak resident
                 set (getrusage ru_maxrss: run each measurement in a fresh process, as
                 bench/bench_llm_load.sh does)
   --read-whole  (a folder) read every file whole into memory first and run the same loader
                 over the images: how a loader without memory mapping would do it (the
                 figure to compare the mapped load against)
   --convert     write the GGUF's model as a Hugging Face folder (llm_safetensors_write),
                 e.g. SmolLM2 in safetensors form for the measurement
   Exit 0, 1 on an error, 2 on bad options. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "llm.h"
#include "llm_internal.h"
#include "safetensors_write.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double peak_rss_mib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;   /* KiB on Linux */
}

/* A folder's files read whole on first use (llm__read_file), kept until the load ends. */
typedef struct whole_files {
    const char *dir;
    uint8_t *data[16];
    int n;
} whole_files;

static int whole_open(void *user, const char *name, const uint8_t **data, size_t *size, char *err, size_t errlen) {
    whole_files *wf = (whole_files *)user;
    char path[4096];
    FILE *f;
    snprintf(path, sizeof path, "%s/%s", wf->dir, name);
    if (!(f = fopen(path, "rb"))) return 1;
    fclose(f);
    if (wf->n == 16) return llm__errf(err, errlen, "too many files"), -1;
    if (llm__read_file(path, SIZE_MAX, &wf->data[wf->n], size, err, errlen)) return -1;
    *data = wf->data[wf->n++];
    return 0;
}

static int load_read_whole(const char *dir, llm_config *c, llm_weights *w, char *err, size_t errlen) {
    whole_files wf;
    llm_hf_files fs;
    int rc, i;
    memset(&wf, 0, sizeof wf);
    wf.dir = dir;
    fs.open = whole_open;
    fs.release = NULL;
    fs.user = &wf;
    rc = llm__hf_load(&fs, c, w, err, errlen);
    for (i = 0; i < wf.n; i++) free(wf.data[i]);
    return rc;
}

static int convert(const char *gguf, const char *out, const char *dtype_name) {
    llm_config c;
    llm_weights w;
    llm_tokenizer *tok = NULL;
    llm_st_dtype dt = LLM_ST_F32;
    char err[512];
    int rc;
    if (dtype_name && !strcmp(dtype_name, "f16")) dt = LLM_ST_F16;
    else if (dtype_name && !strcmp(dtype_name, "bf16")) dt = LLM_ST_BF16;
    else if (dtype_name && strcmp(dtype_name, "f32") != 0) {
        fprintf(stderr, "bench_llm_load: --dtype: expected f32, f16 or bf16, got '%s'\n", dtype_name);
        return 2;
    }
    if (llm_load(gguf, &c, &w, &tok, err, sizeof err) != 0) {
        fprintf(stderr, "bench_llm_load: %s\n", err);
        return 1;
    }
    rc = llm_safetensors_write(&c, &w, dt, tok ? llm_tokenizer_bos(tok) : -1, tok ? llm_tokenizer_eos(tok) : -1, out, err,
                               sizeof err);
    if (rc) fprintf(stderr, "bench_llm_load: %s\n", err);
    else printf("wrote %s\n", out);
    llm_tokenizer_free(tok);
    llm_weights_free(&w);
    return rc ? 1 : 0;
}

int main(int argc, char **argv) {
    const char *model = NULL, *gguf = NULL, *out = NULL, *dtype = NULL;
    int read_whole = 0, i, rc;
    llm_config c;
    llm_weights w;
    char err[512];
    double t0, t1, params;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--read-whole")) { read_whole = 1; continue; }
        if (!v) { fprintf(stderr, "bench_llm_load: option '%s' needs a value\n", a); return 2; }
        if (!strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--convert")) gguf = v;
        else if (!strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--dtype")) dtype = v;
        else { fprintf(stderr, "bench_llm_load: unknown option '%s'\n", a); return 2; }
        i++;
    }
    if (gguf) {
        if (!out) { fprintf(stderr, "bench_llm_load: --convert needs --out DIR\n"); return 2; }
        return convert(gguf, out, dtype);
    }
    if (!model) {
        fprintf(stderr, "usage: bench_llm_load --model PATH [--read-whole] | --convert GGUF --out DIR [--dtype f32|f16|bf16]\n");
        return 2;
    }
    t0 = now();
    rc = read_whole ? load_read_whole(model, &c, &w, err, sizeof err) : llm_load(model, &c, &w, NULL, err, sizeof err);
    t1 = now();
    if (rc) {
        fprintf(stderr, "bench_llm_load: %s\n", err);
        return 1;
    }
    params = (double)c.vocab_size * c.dim * (c.tied_output ? 1 : 2) +
             (double)c.n_layers * ((double)c.dim * (2 + 2 * c.n_heads * c.head_dim + 2 * c.n_kv_heads * c.head_dim) +
                                   3.0 * c.hidden_dim * c.dim) + c.dim;
    printf("%-60s %-10s load %6.2f s   fp32 weights %7.1f MiB   peak RSS %7.1f MiB\n", model,
           read_whole ? "read-whole" : "llm_load", t1 - t0, params * 4.0 / 1048576.0, peak_rss_mib());
    llm_weights_free(&w);
    return 0;
}
