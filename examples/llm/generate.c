/* generate.c - grzo-generate: text from a Llama-family model through the grzo forward.

   grzo-generate --model PATH [--tokenizer tok.bin] [--prompt TEXT] [--steps N]
                 [--temperature T] [--seed S] [--threads N] [--device cpu|cuda]
                 [--dtype f32|bf16|f16] [--checkpoint CKPT]

   --model      GGUF (tokenizer embedded) or llama2.c checkpoint (.bin; give --tokenizer)
   --checkpoint the weights of a grzo checkpoint of this model (grzo-finetune's
                OUT/checkpoint.grzo, saved with the same --dtype) replace the model's
   --steps      positions in all, prompt included, as llama2.c's -n (default 256)
   --temperature 0 (default) is greedy decoding; above 0 samples softmax(logits / T)
   --threads    the CPU backend's and OpenMP's thread count (default: all cores)
   --device     cpu (default) or cuda: the whole forward on the GPU (weights, activations,
                KV cache in device memory; one row of logits per token comes back)
   --dtype      weight storage: f32 (default, pedantic fp32 math on cuda), bf16 or f16 (16-bit needs
                --device cuda; it runs the fast math there: tensor cores, fp32 accumulation)
   Numbers are parsed strictly (examples/common/cli_args.h): "12abc", "inf", "-1" as a seed
   and out-of-range values are refused with a one-line error and exit status 2.
   Generation stops at BOS or EOS. The text goes to stdout, the statistics to stderr.
   The prompt runs as one forward, then each token as one row against a key/value cache.
   With stories260K.bin, tok512.bin and temperature 0 the output is llama2.c's.
   On a machine shared with other jobs, OMP_WAIT_POLICY=passive avoids OpenMP threads
   spinning in barriers while their partners are descheduled (one-row steps are many
   small parallel regions). */
#define _POSIX_C_SOURCE 200809L   /* clock_gettime */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "grzo.h"
#include "cli_args.h"
#include "llm.h"
#include "model.h"

typedef struct options {
    const char *model, *tokenizer, *prompt, *device, *checkpoint;
    int32_t steps, threads;
    float temperature;
    uint64_t seed;
    grzo_dtype dtype;
} options;

static void usage(const char *argv0) {
    fprintf(stderr,
            "usage: %s --model PATH [--tokenizer tok.bin] [--prompt TEXT] [--steps N] [--temperature T]\n"
            "          [--seed S] [--threads N] [--device cpu|cuda] [--dtype f32|bf16|f16] [--checkpoint CKPT]\n",
            argv0);
}

static int parse_dtype(const char *v, grzo_dtype *out) {
    if (!strcmp(v, "f32")) *out = GRZO_DTYPE_F32;
    else if (!strcmp(v, "bf16")) *out = GRZO_DTYPE_BF16;
    else if (!strcmp(v, "f16")) *out = GRZO_DTYPE_F16;
    else return -1;
    return 0;
}

/* One option and its value; err gets a one-line reason on refusal. */
static int parse_option(const char *a, const char *v, options *o, char *err, size_t errlen) {
    const cli_range temperature = {0.0, 1e6, 0, 0};
    int64_t n;
    if (!strcmp(a, "--model")) o->model = v;
    else if (!strcmp(a, "--tokenizer")) o->tokenizer = v;
    else if (!strcmp(a, "--prompt")) o->prompt = v;
    else if (!strcmp(a, "--checkpoint")) o->checkpoint = v;
    else if (!strcmp(a, "--steps")) {
        if (cli_parse_int(a, v, 1, 1 << 24, &n, err, errlen)) return -1;
        o->steps = (int32_t)n;
    } else if (!strcmp(a, "--temperature")) return cli_parse_float(a, v, temperature, &o->temperature, err, errlen);
    else if (!strcmp(a, "--seed")) return cli_parse_u64(a, v, &o->seed, err, errlen);
    else if (!strcmp(a, "--threads")) {
        if (cli_parse_int(a, v, 0, 4096, &n, err, errlen)) return -1;
        o->threads = (int32_t)n;
    } else if (!strcmp(a, "--device")) {
        if (strcmp(v, "cpu") && strcmp(v, "cuda")) return snprintf(err, errlen, "--device: expected cpu or cuda, got '%s'", v), -1;
        o->device = v;
    } else if (!strcmp(a, "--dtype")) {
        if (parse_dtype(v, &o->dtype)) return snprintf(err, errlen, "--dtype: expected f32, bf16 or f16, got '%s'", v), -1;
    } else return snprintf(err, errlen, "unknown option '%s'", a), -1;
    return 0;
}

static int parse_options(int argc, char **argv, options *o, char *err, size_t errlen) {
    int i;
    memset(o, 0, sizeof *o);
    o->prompt = "";
    o->steps = 256;
    o->seed = 42;
    o->device = "cpu";
    o->dtype = GRZO_DTYPE_F32;
    err[0] = '\0';
    for (i = 1; i < argc; i += 2) {
        if (i + 1 >= argc) return snprintf(err, errlen, "option '%s' needs a value", argv[i]), -1;
        if (parse_option(argv[i], argv[i + 1], o, err, errlen)) return -1;
    }
    if (!o->model) return snprintf(err, errlen, "--model is required"), -1;
    if (o->dtype != GRZO_DTYPE_F32 && strcmp(o->device, "cuda") != 0)
        return snprintf(err, errlen, "--dtype bf16/f16 needs --device cuda (the CPU backend stores f32)"), -1;
    return 0;
}

/* llama2.c's safe_printf: skip lone bytes that are neither printable nor whitespace. */
static int print_token(int32_t prev, int32_t token, void *user) {
    const char *piece = llm_token_text((const llm_tokenizer *)user, prev, token);
    if (piece[0] && !piece[1] && !isprint((unsigned char)piece[0]) && !isspace((unsigned char)piece[0])) return 0;
    fputs(piece, stdout);
    fflush(stdout);
    return 0;
}

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct session {
    llm_config cfg;
    llm_weights w;
    llm_tokenizer *tok;
    grzo_backend be;
    grzo_ctx *ctx;
    llm_model m;
    llm_state *st;
} session;

static int open_session(const options *o, session *s) {
    char err[512];
    grzo_desc d;
    llm_model_desc md;
    llm_state_desc sd;
    grzo_status gs;
    memset(s, 0, sizeof *s);
    /* with --tokenizer the model's own is not wanted (a folder exported from a llama2.c or GGUF
       original has no tokenizer.json) */
    if (llm_load(o->model, &s->cfg, &s->w, o->tokenizer ? NULL : &s->tok, err, sizeof err) != 0) {
        fprintf(stderr, "grzo-generate: %s\n", err);
        return 1;
    }
    if (o->tokenizer) {
        if (llm_tokenizer_load_llama2c(o->tokenizer, s->cfg.vocab_size, &s->tok, err, sizeof err) != 0) {
            fprintf(stderr, "grzo-generate: %s\n", err);
            return 1;
        }
    }
    if (!s->tok) {
        fprintf(stderr, "grzo-generate: %s has no tokenizer; pass --tokenizer\n", o->model);
        return 1;
    }
    if (o->steps > s->cfg.max_seq_len)
        fprintf(stderr, "grzo-generate: warning: %d steps exceed the model's context of %d positions\n", o->steps,
                s->cfg.max_seq_len);
    if (llm_backend_create(o->device, o->threads, o->dtype, &s->be, err, sizeof err) != GRZO_OK) {
        fprintf(stderr, "grzo-generate: %s\n", err);
        return 1;
    }
    memset(&d, 0, sizeof d);
    d.backend = &s->be;
    if ((gs = grzo_create(&d, &s->ctx)) != GRZO_OK) {
        /* the status says why (out of memory, say): there is no context to ask */
        fprintf(stderr, "grzo-generate: cannot create the grzo context: %s\n", grzo_status_str(gs));
        return 1;
    }
    memset(&md, 0, sizeof md);
    md.dtype = o->dtype;
    gs = llm_model_register_ex(s->ctx, &s->m, &s->cfg, &s->w, &md);
    if (gs == GRZO_OK && o->checkpoint && grzo_checkpoint_load(s->ctx, o->checkpoint) != GRZO_OK) {
        fprintf(stderr, "grzo-generate: %s: %s\n", o->checkpoint, grzo_last_error(s->ctx));
        return 1;
    }
    if (gs == GRZO_OK) {
        memset(&sd, 0, sizeof sd);
        sd.max_rows = o->steps;
        sd.max_seqs = 1;
        sd.max_outputs = 1;
        sd.max_seq_len = o->steps;
        gs = llm_state_create(s->ctx, &s->m, &sd, &s->st);
    }
    if (gs != GRZO_OK) {
        fprintf(stderr, "grzo-generate: %s\n", llm_model_error(&s->m));
        return 1;
    }
    return 0;
}

static void close_session(session *s) {
    llm_state_free(s->st);
    llm_model_free(&s->m);
    if (s->ctx) grzo_destroy(s->ctx);
    if (s->be.iface) grzo_backend_destroy(&s->be);
    llm_tokenizer_free(s->tok);
    llm_weights_free(&s->w);
}

static int generate(const options *o, session *s) {
    char err[512];
    int32_t *tokens = (int32_t *)malloc(((size_t)o->steps + 1) * sizeof(int32_t)), n_prompt = 0, n_total = 0;
    llm_generate_desc g;
    double t0;
    grzo_status gs;
    int bos = llm_tokenizer_wants_bos(s->tok) || o->prompt[0] == '\0';   /* an empty prompt starts from BOS */
    if (!tokens) {
        fprintf(stderr, "grzo-generate: out of memory\n");
        return 1;
    }
    err[0] = '\0';
    if (llm_tokenize(s->tok, o->prompt, bos, tokens, o->steps, &n_prompt, err, sizeof err) != 0) {
        fprintf(stderr, "grzo-generate: cannot tokenize the prompt: %s\n", err[0] ? err : "no detail");
        free(tokens);
        return 1;
    }
    if (n_prompt < 1 || n_prompt > o->steps) {
        if (n_prompt < 1)
            fprintf(stderr, "grzo-generate: the prompt gives no token (the tokenizer adds no BOS and knows none of its text)\n");
        else
            fprintf(stderr, "grzo-generate: the prompt's %d tokens do not fit in %d steps (raise --steps)\n", (int)n_prompt, o->steps);
        free(tokens);
        return 1;
    }
    memset(&g, 0, sizeof g);
    g.steps = o->steps;
    g.temperature = o->temperature;
    g.seed = o->seed;
    g.stop[0] = llm_tokenizer_bos(s->tok);
    g.stop[1] = llm_tokenizer_eos(s->tok);
    g.on_token = print_token;
    g.user_data = s->tok;
    fputs(o->prompt, stdout);
    t0 = seconds();
    gs = llm_generate(s->ctx, &s->m, s->st, tokens, n_prompt, &g, &n_total);
    printf("\n");
    if (gs != GRZO_OK) {
        fprintf(stderr, "grzo-generate: %s\n", llm_model_error(&s->m));
        free(tokens);
        return 1;
    }
    {
        llm_profile p;
        double dt = seconds() - t0;
        llm_state_profile(s->st, &p);
        fprintf(stderr, "generated %d tokens in %.2f s (%.1f tok/s, KV cache; "
                "%.0f %% of the time in grzo_linear)\n", n_total - n_prompt, dt, (n_total - n_prompt) / (dt + 1e-9),
                100.0 * p.linear_s / (dt + 1e-9));
    }
    free(tokens);
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {   /* a full disk or a closed pipe: the text is lost, say so */
        fprintf(stderr, "grzo-generate: cannot write the text to standard output: %s\n", errno ? strerror(errno) : "write error");
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    options o;
    session s;
    char err[256];
    int rc;
    if (parse_options(argc, argv, &o, err, sizeof err)) {
        fprintf(stderr, "grzo-generate: %s\n", err);
        usage(argv[0]);
        return 2;
    }
#ifdef _OPENMP
    if (o.threads > 0) omp_set_num_threads(o.threads);   /* OpenBLAS (OpenMP build) follows it */
#endif
    rc = open_session(&o, &s);
    if (rc == 0) rc = generate(&o, &s);
    close_session(&s);
    return rc;
}
