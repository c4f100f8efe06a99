/* test_llm_reference.c - the C forward against an independent numpy forward.

   usage: test_llm_reference LLAMA_REF_PY [PYTHON...]

   For each model variant, tests/reference/llama_ref.py writes a small random Llama GGUF;
   this test loads it with llm_load, runs a batch of sequences of different lengths through
   llm_forward (every position requested, packed in one batch) and compares the logits
   with llama_ref.py's float64 forward of the same file. Target: max |diff| <= 1e-4.
   The reference runs on the first PYTHON that imports numpy (default python3): the python3
   first on PATH may be a pyenv shim or a venv without numpy while CI installed Debian's
   python3-numpy for /usr/bin/python3, so Meson passes both.
   Exit 0 pass, 1 fail, 77 skip (no interpreter with numpy).

   usage: test_llm_reference --hf LLAMA_REF_PY [PYTHON...]

   The same for Hugging Face folders (llama_ref.py make-hf: config.json + safetensors written
   by the `safetensors` package; Llama-3 shapes with GQA and rope_scaling "llama3", tied and
   untied, F32/F16/BF16, one sharded with an index): loaded with llm_load (no tokenizer), the
   logits must match llama_ref.py's transformers-layout forward within 1e-4, and the weights
   must equal bit for bit those of the GGUF that llama_ref.py writes from the same folder with
   llama.cpp's q/k permutation. The interpreter must import numpy and safetensors (Meson
   points PYTHONPATH at build/pylib, where tests/run.sh installs the package). */
#define _POSIX_C_SOURCE 200809L
#include <sys/wait.h>
#include <unistd.h>

#include "llm_test_util.h"

#define N_SEQS 4
#define TOLERANCE 1e-4

static const char *python;
static const char *script;
static int hf_mode;            /* --hf: Hugging Face folders */
static char workdir[256];

/* run a shell command; its exit status, or -1 if it did not exit normally */
static int run(const char *cmd) {
    int rc = system(cmd);
    if (rc == -1 || !WIFEXITED(rc)) return -1;
    return WEXITSTATUS(rc);
}

static int have_numpy(const char *interpreter) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "'%s' -c 'import numpy%s' >/dev/null 2>&1", interpreter, hf_mode ? ", safetensors" : "");
    return run(cmd) == 0;
}

/* the first of the n candidates that imports numpy, or NULL */
static const char *python_with_numpy(char **candidates, int n) {
    int i;
    for (i = 0; i < n; i++)
        if (have_numpy(candidates[i])) return candidates[i];
    return NULL;
}

static void path_in_workdir(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/%s", workdir, name); }

/* Write the sequences for llama_ref.py: one line of ids per sequence. */
static int write_tokens(const char *path, int32_t seqs[N_SEQS][64], const int32_t *lens) {
    FILE *f = fopen(path, "w");
    int i, t;
    if (!f) return 1;
    for (i = 0; i < N_SEQS; i++) {
        for (t = 0; t < lens[i]; t++) fprintf(f, "%s%d", t ? " " : "", (int)seqs[i][t]);
        fprintf(f, "\n");
    }
    return fclose(f) != 0;
}

static float *read_floats(const char *path, int64_t n) {
    FILE *f = fopen(path, "rb");
    float *p = (float *)malloc((size_t)n * sizeof(float));
    size_t got = 0;
    if (f && p) got = fread(p, sizeof(float), (size_t)n, f);
    if (f) fclose(f);
    if (got != (size_t)n) {   /* little-endian host assumed, as in the GGUF loader tests */
        free(p);
        return NULL;
    }
    return p;
}

/* The C side: load, register, one packed batch with every position requested. */
static float *c_logits(const char *gguf, int32_t seqs[N_SEQS][64], const int32_t *lens, int64_t *n_rows, int32_t *vocab) {
    llm_config cfg;
    llm_weights w;
    char err[256];
    grzo_backend be;
    grzo_ctx *ctx;
    grzo_desc d;
    llm_model m;
    llm_state *st;
    llm_state_desc sd;
    llm_seq bs[N_SEQS];
    llm_batch b;
    int32_t pos[N_SEQS][64];
    int64_t total = 0;
    float *logits;
    int i, t;
    memset(&w, 0, sizeof w);
    if (llm_load(gguf, &cfg, &w, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "llm_load %s: %s\n", gguf, err);
        return NULL;
    }
    printf("%s: dim %d hidden %d layers %d heads %d/%d head_dim %d vocab %d tied %d theta %g eps %g\n", gguf, cfg.dim,
           cfg.hidden_dim, cfg.n_layers, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.vocab_size, cfg.tied_output,
           (double)cfg.rope_theta, (double)cfg.norm_eps);
    if (grzo_backend_cpu_create(&(grzo_cpu_desc){0}, &be) != GRZO_OK) exit(1);
    memset(&d, 0, sizeof d);
    d.backend = &be;
    if (grzo_create(&d, &ctx) != GRZO_OK) exit(1);
    TU_OK(&m, llm_model_register(ctx, &m, &cfg, &w));
    for (i = 0; i < N_SEQS; i++) {
        memset(&bs[i], 0, sizeof bs[i]);
        bs[i].tokens = seqs[i];
        bs[i].n_tokens = lens[i];
        bs[i].n_out = lens[i];
        for (t = 0; t < lens[i]; t++) pos[i][t] = t;
        bs[i].out_pos = pos[i];
        total += lens[i];
    }
    memset(&sd, 0, sizeof sd);
    sd.max_rows = total;
    sd.max_seqs = N_SEQS;
    sd.max_outputs = total;
    TU_OK(&m, llm_state_create(ctx, &m, &sd, &st));
    b.seqs = bs;
    b.n_seqs = N_SEQS;
    b.n_segments = 0;
    logits = (float *)malloc((size_t)total * (size_t)cfg.vocab_size * sizeof(float));
    if (!logits) exit(1);
    TU_OK(&m, llm_forward(ctx, &m, st, &b, logits));
    *n_rows = total;
    *vocab = cfg.vocab_size;
    llm_state_free(st);
    llm_model_free(&m);
    grzo_destroy(ctx);
    grzo_backend_destroy(&be);
    llm_weights_free(&w);
    return logits;
}

/* Every weight of a and b equal bit for bit (same config). */
static int same_weights(const llm_config *c, const llm_weights *a, const llm_weights *b) {
    int64_t dim = c->dim, q = (int64_t)c->n_heads * c->head_dim, kv = (int64_t)c->n_kv_heads * c->head_dim;
    int64_t hid = c->hidden_dim, vocab = c->vocab_size;
    int32_t l;
    int same = !memcmp(a->tok_emb, b->tok_emb, (size_t)(vocab * dim) * 4) && !memcmp(a->final_norm, b->final_norm, (size_t)dim * 4) &&
               !memcmp(a->output, b->output, (size_t)(vocab * dim) * 4);
    for (l = 0; l < c->n_layers; l++) {
        const llm_layer *x = &a->layers[l], *y = &b->layers[l];
        same = same && !memcmp(x->attn_norm, y->attn_norm, (size_t)dim * 4) && !memcmp(x->wq, y->wq, (size_t)(q * dim) * 4) &&
               !memcmp(x->wk, y->wk, (size_t)(kv * dim) * 4) && !memcmp(x->wv, y->wv, (size_t)(kv * dim) * 4) &&
               !memcmp(x->wo, y->wo, (size_t)(dim * q) * 4) && !memcmp(x->ffn_norm, y->ffn_norm, (size_t)dim * 4) &&
               !memcmp(x->w1, y->w1, (size_t)(hid * dim) * 4) && !memcmp(x->w2, y->w2, (size_t)(dim * hid) * 4) &&
               !memcmp(x->w3, y->w3, (size_t)(hid * dim) * 4);
    }
    return same;
}

/* The folder and llama.cpp's GGUF of it load to the same weights (the q/k permutation). */
static void compare_with_gguf(const char *variant, const char *folder, const char *gguf) {
    llm_config c1, c2;
    llm_weights w1, w2;
    char err[256];
    memset(&w1, 0, sizeof w1), memset(&w2, 0, sizeof w2);
    if (llm_load(folder, &c1, &w1, NULL, err, sizeof err) != 0 || llm_load(gguf, &c2, &w2, NULL, err, sizeof err) != 0) {
        TU_CHECK(0, "%s: %s", variant, err);
    } else {
        TU_CHECK(c1.dim == c2.dim && c1.n_layers == c2.n_layers && c1.n_heads == c2.n_heads && c1.n_kv_heads == c2.n_kv_heads &&
                     c1.head_dim == c2.head_dim && c1.vocab_size == c2.vocab_size && c1.tied_output == c2.tied_output,
                 "%s: the folder's and the GGUF's configs differ", variant);
        if (c1.dim == c2.dim && c1.n_layers == c2.n_layers && c1.head_dim == c2.head_dim && c1.tied_output == c2.tied_output) {
            int same = same_weights(&c1, &w1, &w2);
            printf("%-22s folder and llama.cpp-permuted GGUF: %s weights\n", variant, same ? "the same" : "DIFFERENT");
            TU_CHECK(same, "%s: the folder's weights differ from the GGUF's", variant);
        }
    }
    llm_weights_free(&w1);
    llm_weights_free(&w2);
}

static void compare_variant(const char *variant, uint64_t seed) {
    static const int32_t lens[N_SEQS] = {1, 17, 64, 33};   /* 64: positions up to the longest here */
    int32_t seqs[N_SEQS][64], vocab = 0;
    char gguf[320], toks[320], out[320], cmd[1400];
    int64_t n_rows = 0;
    float *mine, *ref;
    uint64_t rng = seed;
    double diff, scale;
    int i, t;
    char folder[320];
    path_in_workdir(gguf, sizeof gguf, "model.gguf");
    path_in_workdir(folder, sizeof folder, "hf_model");
    path_in_workdir(toks, sizeof toks, "tokens.txt");
    path_in_workdir(out, sizeof out, "logits.f32");
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", folder);   /* what an earlier variant that failed left */
    run(cmd);
    if (hf_mode)
        snprintf(cmd, sizeof cmd, "'%s' '%s' make-hf --out '%s' --gguf '%s' --variant %s --seed %d", python, script, folder, gguf,
                 variant, (int)seed);
    else
        snprintf(cmd, sizeof cmd, "'%s' '%s' make --out '%s' --variant %s --seed %d", python, script, gguf, variant, (int)seed);
    if (run(cmd) != 0) {
        TU_CHECK(0, "%s failed", cmd);
        return;
    }
    if (hf_mode) compare_with_gguf(variant, folder, gguf);
    for (i = 0; i < N_SEQS; i++)
        for (t = 0; t < lens[i]; t++) seqs[i][t] = (int32_t)(tu_rng_next(&rng) % 256);   /* < every variant's vocab */
    mine = c_logits(hf_mode ? folder : gguf, seqs, lens, &n_rows, &vocab);
    if (!mine) {
        TU_CHECK(0, "the C forward of %s failed", variant);
        return;
    }
    if (write_tokens(toks, seqs, lens) != 0) {
        TU_CHECK(0, "cannot write %s", toks);
        free(mine);
        return;
    }
    snprintf(cmd, sizeof cmd, "'%s' '%s' logits --model '%s' --tokens '%s' --out '%s'", python, script,
             hf_mode ? folder : gguf, toks, out);
    ref = run(cmd) == 0 ? read_floats(out, n_rows * vocab) : NULL;
    if (!ref) {
        TU_CHECK(0, "the reference forward of %s failed (%s)", variant, cmd);
        free(mine);
        return;
    }
    diff = tu_max_abs_diff(mine, ref, n_rows * vocab);
    scale = 0.0;
    for (i = 0; i < n_rows * vocab; i++)
        if (fabs(ref[i]) > scale) scale = fabs(ref[i]);
    printf("%-15s %lld positions x %d logits (max |logit| %.2f): max |C - numpy| = %.3g\n", variant, (long long)n_rows, vocab,
           scale, diff);
    TU_CHECK(diff <= TOLERANCE, "%s: max |diff| %g above %g", variant, diff, TOLERANCE);
    free(mine);
    free(ref);
    remove(gguf);
    remove(toks);
    remove(out);
    if (hf_mode) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", folder);
        run(cmd);
    }
}

int main(int argc, char **argv) {
    const char *tmp = getenv("TMPDIR");
    static char *default_python[] = {"python3"};
    char **candidates;
    int i, n_candidates;
    if (argc > 1 && !strcmp(argv[1], "--hf")) {
        hf_mode = 1;
        argv++, argc--;
    }
    candidates = argc > 2 ? argv + 2 : default_python;
    n_candidates = argc > 2 ? argc - 2 : 1;
    if (argc < 2) {
        fprintf(stderr, "usage: %s [--hf] LLAMA_REF_PY [PYTHON...]\n", argv[0]);
        return 1;
    }
    script = argv[1];
    python = python_with_numpy(candidates, n_candidates);
    if (!python) {
        printf("SKIP: no python with numpy%s among", hf_mode ? " and safetensors (tests/run.sh installs it into build/pylib)" : "");
        for (i = 0; i < n_candidates; i++) printf(" '%s'", candidates[i]);
        printf("\n");
        return TEST_SKIP;
    }
    printf("reference interpreter: %s\n", python);
    snprintf(workdir, sizeof workdir, "%s/grzo_llm_ref_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(workdir)) {
        perror("mkdtemp");
        return 1;
    }
    if (hf_mode) {
        compare_variant("hf_llama3_untied_f32", 3);
        compare_variant("hf_llama3_tied_bf16", 4);
        compare_variant("hf_llama3_sharded_f16", 5);
        compare_variant("hf_llama2_mha_f32", 6);
    } else {
        compare_variant("gqa_tied_f32", 1);
        compare_variant("mha_untied_f16", 2);
    }
    rmdir(workdir);
    if (tu_failures) {
        fprintf(stderr, "%d check(s) failed\n", tu_failures);
        return 1;
    }
    printf("C forward matches the numpy reference\n");
    return 0;
}
