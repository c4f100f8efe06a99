/* test_llm_oom.c - the LLM module (examples/llm) when memory runs out, each allocation
   failing in turn.

   Usage: test_llm_oom <data dir (tests/data)> <scratch dir>

   Linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc (tests/llm/meson.build): the
   allocations of the code compiled into this program (the module's loaders, tokenizers,
   forward, writers and export; json.c, text.c, files.c; grzo.h and its CPU backend) come to
   the wrappers of tests/oom_wrap.h, and while a run is armed its N-th one fails. The
   scenario is cut into parts, each prepared once with nothing failing (so a part's runs
   repeat only its own work):
     llama2c   stories260K.bin and tok512.bin loaded, a prompt encoded and decoded, a
               forward's logits, llm_sequence_logprob, greedy generation; the same on a model
               of that shape whose weights it makes itself (random init in backend memory);
     export_st llm_export of the llama2.c original (+ a grzo checkpoint with one weight
               moved, which the folder must hold) to a safetensors folder, and
               llm_safetensors_write_ex copying a tokenizer.json beside it;
     export_gguf llm_export of that folder to GGUF (llm_gguf_write_model: the folder's
               tokenizer.json as GGUF metadata), and of that GGUF again at q8_0 (llm_gguf_write:
               the original's metadata copied);
     gguf, hf  the GGUF (its embedded tokenizer) and the folder (config.json, safetensors,
               tokenizer.json, tokenizer_config.json) loaded back, the same forward, Unicode
               text encoded;
     tokenizer_json  the GPT-2 tokenizer.json alone (GPT-2's byte alphabet and first 255
               merges from tests/data/gpt2/vocab.bpe, with GPT-2's ids), Unicode text encoded;
     variants  the other tokenizer.json pipelines (Llama-3, add_prefix_space, SmolLM2's Digits,
               Llama-2's character BPE with byte fallback, Metaspace), a GGUF with a
               SentencePiece tokenizer and every tensor type, a GGUF with llama3 rotary
               scaling; each model and tokenizer loaded, a text encoded;
     sharded   the folder's weights named by model.safetensors.index.json;
     refusals  a tokenizer.json with a duplicate key and a truncated GGUF, each to be refused.
   The run where nothing fails must give the GGUF's and the folder's forward the llama2.c
   model's logits bit for bit (f32 throughout) and the three GPT-2 tokenizers the same ids.
   For N = 1, 2, ... until a run needs fewer than N allocations, one run of a part must:
     - either succeed with exactly the results of the run where nothing failed (a fingerprint
       of token ids, decoded text, weights, logits bits, log-probabilities, generated ids, the
       bytes of every file written, the refusals' messages), or fail with a message that says
       "out of memory" ("out of host memory" for the forward's host buffers); a malformed
       input is refused whatever fails;
     - where a forward, a scoring or a generation failed so, give the clean run's results when
       the same call is made again on the same model and state with nothing failing;
     - leave in the scratch folder only what its successful stages wrote: no temporary
       (*.tmp, *.tmp-PID-N), no half-written output (the writers promise atomic writes);
     - never crash, and leave nothing behind: no allocation (the ASan copy's leak check), no
       open file, no mapping (counted by /proc/self before and after each part's runs). */
#define _POSIX_C_SOURCE 200809L   /* mkdir, rmdir, unlink */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "grzo.h"
#include "backends/grzo_cpu.h"
#include "llm.h"
#include "llm_export.h"
#include "llm_internal.h"
#include "model.h"
#include "toy_model.h"
#include "hf_fixtures.h"

#include "../oom_wrap.h"

/* The ASan copy's leak check, run after each part (absent from the plain build). */
#if defined(__GNUC__) || defined(__clang__)
int __lsan_do_recoverable_leak_check(void) __attribute__((weak));
#define HAVE_LEAK_CHECK 1
#else
#define HAVE_LEAK_CHECK 0
#endif

/* ---- fingerprints (fnv, fnv_str, FNV0: oom_wrap.h) ------------------------------------------------ */

/* A file's bytes, read through a static buffer (nothing allocated: the wrappers would count
   it); the hash of "(missing)" when it cannot be read. */
static uint64_t fnv_file(uint64_t h, const char *path)
{
    static unsigned char buf[1 << 16];
    FILE *f = fopen(path, "rb");
    size_t n;
    if (!f) return fnv_str(h, "(missing)");
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) h = fnv(h, buf, n);
    fclose(f);
    return h;
}

#define MAX_LAYERS 16
static uint64_t fnv_weights(uint64_t h, const llm_config *c, const llm_weights *w)
{
    static llm_hf_tensor t[9 * MAX_LAYERS + 4];
    int i, n;
    h = fnv(h, c, sizeof *c);
    if (c->n_layers > MAX_LAYERS) return fnv_str(h, "(too many layers)");
    n = llm__hf_tensors(c, w, t);
    for (i = 0; i < n; i++) h = fnv(h, t[i].data, (size_t)(t[i].rows * t[i].cols) * sizeof(float));
    return h;
}

/* ---- the data every part shares (made before any run is armed) ----------------------------- */
#define MAX_VOCAB 512
#define MAX_IDS 64
#define N_OUT 2        /* logits of the prompt's last two positions */
#define GEN_NEW 4      /* tokens generated after the prompt */

static const char *const prompt = "Once upon a time, a little girl";
/* byte-level BPE on UTF-8: Latin-1 letters, a dash, CJK, an emoji, digits, a contraction */
static const char *const unicode_text = "Hello, w\xc3\xb6rld! \xc3\x9cn\xc3\xaf\x63\xc3\xb6\x64\xc3\xa9 \xe2\x80\x94 "
                                        "\xe6\x9d\xb1\xe4\xba\xac \xf0\x9f\x8e\x89 it's 2024<|endoftext|>";

typedef struct shared {
    char data[1024], dir[1024];            /* tests/data, this program's scratch folder */
    char model[1100], tok512[1100];        /* tests/data/stories260K.bin, tok512.bin */
    char hf_src[1100];                     /* scratch: tokenizer.json + tokenizer_config.json */
    char ckpt[1100];                       /* scratch: a grzo checkpoint of stories260K */
    char moved_ckpt[1100];                 /* scratch: the same with one weight moved */
    char st_ref[1100], gguf_ref[1100];     /* scratch: the exports every later part reads */
    llm_config cfg;                        /* stories260K */
    llm_weights w;
    int32_t bos, eos;
    int32_t ids[MAX_IDS];                  /* the prompt, encoded with tok512 */
    int32_t n_ids;
    char *dup_json;                        /* tokenizer.json with a key twice in "model" */
    size_t dup_json_len;
    uint8_t *gguf_image;                   /* gguf_ref.gguf in memory */
    size_t gguf_size;
    toy_model spm;                         /* a GGUF with a SentencePiece-style tokenizer (toy_model.h) */
    uint8_t *llama3_image;                 /* a GGUF from llm_gguf_write_model: llama3 rotary scaling */
    size_t llama3_size;
    char sharded[1100];                    /* scratch: st_ref as one shard named by an index */
    uint64_t weights_print;                /* fnv_weights of stories260K */
} shared;
static shared S;

/* ---- what one run computes --------------------------------------------------------------- */
#define MAX_MADE 4
typedef struct outcome {
    int ok;                       /* every stage succeeded */
    const char *stage;            /* the stage that failed */
    char err[1024];               /* its message */
    uint64_t print;               /* fingerprint of everything the run computed */
    const char *made[MAX_MADE];   /* what the run's successful stages wrote to the scratch folder */
    int n_made;
    /* for the checks across parts in the run where nothing fails */
    float logits[N_OUT * MAX_VOCAB];
    int32_t text_ids[256];
    int32_t n_text_ids;
} outcome;

static int fail_at(outcome *o, const char *stage) { o->ok = 0; o->stage = stage; return 1; }

static int says_out_of_memory(const char *msg)
{
    return strstr(msg, "out of memory") || strstr(msg, "out of host memory");
}

static void path_in(char *out, size_t cap, const char *dir, const char *name) { snprintf(out, cap, "%s/%s", dir, name); }

/* A call on a state that failed for want of memory is made again with nothing failing: the
   model and the state must still work (a lazily allocated buffer, the key/value cache, the
   position of a cached forward), so the run then ends as the run where nothing failed. */
static long retried;   /* such calls, per part */

static int retry_after_oom(const llm_model *m, grzo_status s)
{
    if (s != GRZO_ERR_OUT_OF_MEMORY || !oom.failed || !says_out_of_memory(llm_model_error(m))) return 0;
    oom_disarm();
    retried++;
    return 1;
}

/* The forward of (cfg, w) over the prompt's ids: logits of its last N_OUT positions (into
   logits), the log-probability of its last three tokens after the rest, and GEN_NEW greedy
   tokens. desc: NULL (the blocks point into w), or weights made by the model (random init). */
static int run_model(const llm_config *cfg, llm_weights *w, const llm_model_desc *desc, float *logits, outcome *o)
{
    grzo_backend be;
    grzo_ctx *ctx = NULL;
    grzo_desc d;
    llm_model m;
    llm_state *st = NULL;
    llm_state_desc sd;
    llm_seq seq;
    llm_batch b;
    llm_generate_desc g;
    int32_t pos[N_OUT], n_context, tokens[MAX_IDS + GEN_NEW + 2], n_total = 0, i;
    double sum = 0, mean = 0;
    grzo_status s;
    int rc = 1, have_be = 0;
    memset(&m, 0, sizeof m);   /* llm_model_free takes it as it is */
    if (cfg->vocab_size > MAX_VOCAB) {
        snprintf(o->err, sizeof o->err, "a vocabulary of %d is more than this test's %d", (int)cfg->vocab_size, MAX_VOCAB);
        return fail_at(o, "run_model");
    }
    if ((s = llm_backend_create("cpu", 1, GRZO_DTYPE_F32, &be, o->err, sizeof o->err)) != GRZO_OK) {
        fail_at(o, "llm_backend_create");
        goto done;
    }
    have_be = 1;
    memset(&d, 0, sizeof d);
    d.backend = &be;
    if ((s = grzo_create(&d, &ctx)) != GRZO_OK) {
        snprintf(o->err, sizeof o->err, "grzo_create: %s", grzo_status_str(s));
        fail_at(o, "grzo_create");
        goto done;
    }
    if ((s = llm_model_register_ex(ctx, &m, cfg, w, desc)) != GRZO_OK) {
        fail_at(o, "llm_model_register");
        goto model_failed;
    }
    memset(&sd, 0, sizeof sd);
    sd.max_rows = MAX_IDS + GEN_NEW + 2;
    sd.max_seqs = 1;
    sd.max_outputs = MAX_IDS;
    sd.max_seq_len = MAX_IDS + GEN_NEW + 2;
    if ((s = llm_state_create(ctx, &m, &sd, &st)) != GRZO_OK) {
        fail_at(o, "llm_state_create");
        goto model_failed;
    }
    memset(&seq, 0, sizeof seq);
    for (i = 0; i < N_OUT; i++) pos[i] = S.n_ids - N_OUT + i;
    seq.tokens = S.ids;
    seq.n_tokens = S.n_ids;
    seq.out_pos = pos;
    seq.n_out = N_OUT;
    b.seqs = &seq;
    b.n_seqs = 1;
    b.n_segments = 0;
    if ((s = llm_forward(ctx, &m, st, &b, logits)) != GRZO_OK && retry_after_oom(&m, s)) s = llm_forward(ctx, &m, st, &b, logits);
    if (s != GRZO_OK) {
        fail_at(o, "llm_forward");
        goto model_failed;
    }
    o->print = fnv(o->print, logits, (size_t)N_OUT * (size_t)cfg->vocab_size * sizeof(float));
    n_context = S.n_ids - 3;
    if ((s = llm_sequence_logprob(ctx, &m, st, &b, &n_context, &sum, &mean)) != GRZO_OK && retry_after_oom(&m, s))
        s = llm_sequence_logprob(ctx, &m, st, &b, &n_context, &sum, &mean);
    if (s != GRZO_OK) {
        fail_at(o, "llm_sequence_logprob");
        goto model_failed;
    }
    o->print = fnv(o->print, &sum, sizeof sum);
    o->print = fnv(o->print, &mean, sizeof mean);
    memset(&g, 0, sizeof g);
    g.steps = S.n_ids + GEN_NEW - 1;   /* llama2.c's loop: steps - n_prompt + 1 new tokens */
    g.stop[0] = g.stop[1] = -1;
    memcpy(tokens, S.ids, (size_t)S.n_ids * sizeof *tokens);
    if ((s = llm_generate(ctx, &m, st, tokens, S.n_ids, &g, &n_total)) != GRZO_OK && retry_after_oom(&m, s)) {
        memcpy(tokens, S.ids, (size_t)S.n_ids * sizeof *tokens);
        s = llm_generate(ctx, &m, st, tokens, S.n_ids, &g, &n_total);
    }
    if (s != GRZO_OK) {
        fail_at(o, "llm_generate");
        goto model_failed;
    }
    o->print = fnv(o->print, &n_total, sizeof n_total);
    o->print = fnv(o->print, tokens, (size_t)n_total * sizeof *tokens);
    rc = 0;
    goto done;
model_failed:
    snprintf(o->err, sizeof o->err, "%s (%s)", llm_model_error(&m), grzo_status_str(s));
done:
    if (st) llm_state_free(st);
    llm_model_free(&m);
    if (ctx) grzo_destroy(ctx);
    if (have_be) grzo_backend_destroy(&be);
    return rc;
}

/* Encode the Unicode text (special tokens parsed) and decode it back. */
static int run_text(const llm_tokenizer *t, outcome *o)
{
    int32_t n = 0, i, prev;
    if (llm_tokenize(t, unicode_text, 0, o->text_ids, 256, &n, o->err, sizeof o->err)) return fail_at(o, "llm_tokenize");
    if (n > 256) {
        snprintf(o->err, sizeof o->err, "%d ids, more than this test's 256", (int)n);
        return fail_at(o, "llm_tokenize");
    }
    o->n_text_ids = n;
    o->print = fnv(o->print, &n, sizeof n);
    o->print = fnv(o->print, o->text_ids, (size_t)n * sizeof *o->text_ids);
    for (i = 0, prev = -1; i < n; prev = o->text_ids[i++]) o->print = fnv_str(o->print, llm_token_text(t, prev, o->text_ids[i]));
    o->print = fnv_str(o->print, llm_tokenizer_model(t));
    o->print = fnv_str(o->print, llm_tokenizer_pre(t));
    o->print = fnv_str(o->print, llm_tokenizer_chat_template(t));
    i = llm_tokenizer_vocab(t);
    o->print = fnv(o->print, &i, sizeof i);
    i = llm_token_id(t, "\xc4\xa0t");   /* "Ġt", GPT-2's first merge */
    o->print = fnv(o->print, &i, sizeof i);
    return 0;
}

/* ---- the parts ------------------------------------------------------------------------------ */

static void part_llama2c(outcome *o)
{
    static float random_logits[N_OUT * MAX_VOCAB];
    llm_model_desc desc;
    llm_config cfg;
    llm_weights w;
    llm_tokenizer *tok = NULL;
    int32_t ids[MAX_IDS], n = 0, i, prev;
    memset(&w, 0, sizeof w);
    if (llm_load(S.model, &cfg, &w, NULL, o->err, sizeof o->err)) { fail_at(o, "llm_load"); goto done; }
    o->print = fnv_weights(o->print, &cfg, &w);
    if (llm_tokenizer_load_llama2c(S.tok512, cfg.vocab_size, &tok, o->err, sizeof o->err)) {
        fail_at(o, "llm_tokenizer_load_llama2c");
        goto done;
    }
    if (llm_tokenize(tok, prompt, 1, ids, MAX_IDS, &n, o->err, sizeof o->err)) { fail_at(o, "llm_tokenize"); goto done; }
    o->print = fnv(o->print, &n, sizeof n);
    o->print = fnv(o->print, ids, (size_t)(n < MAX_IDS ? n : MAX_IDS) * sizeof *ids);
    for (i = 0, prev = -1; i < n && i < MAX_IDS; prev = ids[i++]) o->print = fnv_str(o->print, llm_token_text(tok, prev, ids[i]));
    if (run_model(&cfg, &w, NULL, o->logits, o)) goto done;
    /* and a model of cfg's shape whose weights the model makes (random init in backend memory) */
    memset(&desc, 0, sizeof desc);
    desc.random_init_seed = 5;
    run_model(&cfg, NULL, &desc, random_logits, o);
done:
    llm_tokenizer_free(tok);
    llm_weights_free(&w);
}

/* The llama2.c original + checkpoint through llm_export, then the writer copying the
   tokenizer files of hf_src. */
static void part_export_st(outcome *o)
{
    char a[1100], b[1100];
    static const char *const names[] = {"model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json"};
    char p[1200];
    size_t i;
    path_in(a, sizeof a, S.dir, "st_a");
    path_in(b, sizeof b, S.dir, "st_b");
    if (llm_export(S.model, S.moved_ckpt, a, LLM_EXPORT_SAFETENSORS, LLM_GGUF_F32, o->err, sizeof o->err))
        return (void)fail_at(o, "llm_export safetensors");
    o->made[o->n_made++] = "st_a";
    if (llm_safetensors_write_ex(&S.cfg, &S.w, LLM_ST_BF16, S.bos, S.eos, S.hf_src, b, o->err, sizeof o->err))
        return (void)fail_at(o, "llm_safetensors_write_ex");
    o->made[o->n_made++] = "st_b";
    for (i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", a, names[i]);
        o->print = fnv_file(o->print, p);
        snprintf(p, sizeof p, "%s/%s", b, names[i]);
        o->print = fnv_file(o->print, p);
    }
}

/* The folder (with tokenizer.json) to GGUF, and that GGUF again at q8_0. */
static void part_export_gguf(outcome *o)
{
    char a[1100], b[1100];
    path_in(a, sizeof a, S.dir, "a.gguf");
    path_in(b, sizeof b, S.dir, "b.gguf");
    if (llm_export(S.st_ref, S.ckpt, a, LLM_EXPORT_GGUF, LLM_GGUF_F32, o->err, sizeof o->err))
        return (void)fail_at(o, "llm_export gguf from the folder");
    o->made[o->n_made++] = "a.gguf";
    if (llm_export_as(S.gguf_ref, S.ckpt, b, "q8_0", o->err, sizeof o->err))
        return (void)fail_at(o, "llm_export_as q8_0 from the GGUF");
    o->made[o->n_made++] = "b.gguf";
    o->print = fnv_file(o->print, a);
    o->print = fnv_file(o->print, b);
}

/* A model file with its tokenizer: the forward and the Unicode text. */
static void part_load(const char *path, outcome *o)
{
    llm_config cfg;
    llm_weights w;
    llm_tokenizer *tok = NULL;
    memset(&w, 0, sizeof w);
    if (llm_load(path, &cfg, &w, &tok, o->err, sizeof o->err)) { fail_at(o, "llm_load"); goto done; }
    o->print = fnv_weights(o->print, &cfg, &w);
    if (!tok) {
        snprintf(o->err, sizeof o->err, "no tokenizer");
        fail_at(o, "llm_load");
        goto done;
    }
    if (!run_text(tok, o)) run_model(&cfg, &w, NULL, o->logits, o);
done:
    llm_tokenizer_free(tok);
    llm_weights_free(&w);
}

static void part_gguf(outcome *o) { part_load(S.gguf_ref, o); }
static void part_hf(outcome *o) { part_load(S.st_ref, o); }

static void part_tokenizer_json(outcome *o)
{
    llm_tokenizer *tok = NULL;
    if (llm_tokenizer_load_hf(S.hf_src, &tok, o->err, sizeof o->err)) {
        fail_at(o, "llm_tokenizer_load_hf");
        return;
    }
    run_text(tok, o);
    llm_tokenizer_free(tok);
}

/* A load of a malformed input, which must be refused with its own message (`expect` in it)
   whatever fails: out of memory may stop it first, but never make it accept the input. */
static int refused(outcome *o, const char *stage, int rc, const char *expect)
{
    if (!rc) {
        snprintf(o->err, sizeof o->err, "accepted the malformed input");
        return fail_at(o, stage);
    }
    if (says_out_of_memory(o->err) || !strstr(o->err, expect)) return fail_at(o, stage);
    o->print = fnv_str(o->print, o->err);
    return 0;
}

/* tokenizer.json with a duplicate key (the JSON reader's duplicate check allocates), and the
   GGUF cut short. */
static void part_refusals(outcome *o)
{
    llm_tokenizer *tok = NULL;
    llm_config cfg;
    llm_weights w;
    int rc;
    memset(&w, 0, sizeof w);
    rc = llm_tokenizer_load_hf_memory(S.dup_json, S.dup_json_len, NULL, 0, &tok, o->err, sizeof o->err);
    llm_tokenizer_free(tok);
    if (refused(o, "tokenizer.json with a duplicate key", rc, "duplicate key \"dropout\"")) return;
    rc = llm_load_memory(S.gguf_image, S.gguf_size / 2, &cfg, &w, &tok, o->err, sizeof o->err);
    llm_tokenizer_free(tok);
    if (!rc) llm_weights_free(&w);
    refused(o, "a truncated GGUF", rc, "truncated");
}

/* ---- the variants: the other tokenizer pipelines, GGUF SentencePiece, llama3 scaling ---- */
/* (the tokenizer.json pipelines: hf_fixtures.h, fuzz_loaders.c's seeds) */

/* texts within the variants' vocabularies: the byte-level ones have no byte tokens but their
   letters, the others fall back to bytes (or <unk>) */
#define TEXT_BL "a ab ba 1'ab<x><s> 11 ba'a"
#define TEXT_CH "a ab ba 1'ab<x><s> \xc3\xa9" "b 11 a\n"

/* Encode text and fold ids and decoded pieces into the fingerprint. */
static int encode_variant(const llm_tokenizer *t, const char *text, outcome *o)
{
    int32_t ids[64], n = 0, i, prev;
    if (llm_tokenize(t, text, 1, ids, 64, &n, o->err, sizeof o->err)) return fail_at(o, "llm_tokenize");
    if (n > 64) return snprintf(o->err, sizeof o->err, "more than 64 ids"), fail_at(o, "llm_tokenize");
    o->print = fnv(o->print, &n, sizeof n);
    o->print = fnv(o->print, ids, (size_t)n * sizeof *ids);
    for (i = 0, prev = -1; i < n; prev = ids[i++]) o->print = fnv_str(o->print, llm_token_text(t, prev, ids[i]));
    o->print = fnv_str(o->print, llm_tokenizer_chat_template(t));
    return 0;
}

/* A GGUF image: the model and its tokenizer, then the tokenizer alone. */
static int load_gguf_variant(const uint8_t *image, size_t size, const char *text, outcome *o)
{
    llm_config cfg;
    llm_weights w;
    llm_tokenizer *tok = NULL;
    int rc;
    if (llm_load_memory(image, size, &cfg, &w, &tok, o->err, sizeof o->err)) return fail_at(o, "llm_load_memory");
    o->print = fnv_weights(o->print, &cfg, &w);
    llm_weights_free(&w);
    if (!tok) return snprintf(o->err, sizeof o->err, "no tokenizer"), fail_at(o, "llm_load_memory");
    rc = encode_variant(tok, text, o);
    llm_tokenizer_free(tok);
    tok = NULL;
    if (rc) return 1;
    if (llm_tokenizer_load_gguf_memory(image, size, &tok, o->err, sizeof o->err)) return fail_at(o, "llm_tokenizer_load_gguf_memory");
    rc = encode_variant(tok, text, o);
    llm_tokenizer_free(tok);
    return rc;
}

static void part_variants(outcome *o)
{
    size_t i;
    for (i = 0; i < HF_N_FIXTURES; i++) {
        const hf_fixture *c = &HF_FIXTURES[i];
        llm_tokenizer *tok = NULL;
        int rc;
        if (llm_tokenizer_load_hf_memory(c->json, strlen(c->json), c->config, c->config ? strlen(c->config) : 0, &tok, o->err,
                                         sizeof o->err))
            return (void)fail_at(o, "llm_tokenizer_load_hf_memory");
        rc = encode_variant(tok, c->byte_level ? TEXT_BL : TEXT_CH, o);
        llm_tokenizer_free(tok);
        if (rc) return;
    }
    if (load_gguf_variant(S.spm.file, S.spm.size, TEXT_CH, o)) return;
    load_gguf_variant(S.llama3_image, S.llama3_size, TEXT_BL, o);
}

/* The folder as a one-shard index (model.safetensors.index.json): the same weights. */
static void part_sharded(outcome *o)
{
    llm_config cfg;
    llm_weights w;
    if (llm_load(S.sharded, &cfg, &w, NULL, o->err, sizeof o->err)) return (void)fail_at(o, "llm_load");
    if (fnv_weights(FNV0, &cfg, &w) != S.weights_print) {
        snprintf(o->err, sizeof o->err, "the sharded folder's weights differ from stories260K's");
        fail_at(o, "llm_load");
    }
    o->print = fnv_weights(o->print, &cfg, &w);
    llm_weights_free(&w);
}

typedef struct part {
    const char *name;
    void (*run)(outcome *o);
} part;

static const part parts[] = {
    {"llama2c", part_llama2c},   {"export_st", part_export_st}, {"export_gguf", part_export_gguf},
    {"gguf", part_gguf},         {"hf", part_hf},               {"tokenizer_json", part_tokenizer_json},
    {"variants", part_variants}, {"sharded", part_sharded},    {"refusals", part_refusals},
};
#define N_PARTS ((int)(sizeof parts / sizeof parts[0]))

/* ---- the scratch folder ------------------------------------------------------------------- */
/* What the preparation leaves there, which every run must leave as it is. */
static const char *const fixed_entries[] = {"hf_src", "ckpt.grzo", "moved.grzo", "st_ref", "gguf_ref.gguf", "sharded"};
#define N_FIXED ((int)(sizeof fixed_entries / sizeof fixed_entries[0]))

/* Removes path: a file, or a folder of files (the writers make no deeper ones). */
static void remove_path(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0) return;
    if (S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *e;
        char p[2048];
        while (d && (e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            snprintf(p, sizeof p, "%s/%s", path, e->d_name);
            remove_path(p);
        }
        if (d) closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

static int listed(const char *name, const char *const *names, int n)
{
    int i;
    for (i = 0; i < n; i++)
        if (!strcmp(name, names[i])) return 1;
    return 0;
}

static int failures = 0;

static void report(const char *what, long n, const char *msg)
{
    failures++;
    fprintf(stderr, "FAIL %s, allocation %ld failing: %s\n", what, n, msg);
}

/* Every entry of the scratch folder is a fixed one or one the run says it wrote (anything else,
   a temporary or a half-written output, is reported), and each of those is there; the run's
   own outputs are then removed. */
static void check_and_clean_scratch(const char *what, long n, const outcome *o)
{
    DIR *d;
    struct dirent *e;
    char p[2048], msg[2300];
    struct stat sb;
    int i;
    for (i = 0; i < o->n_made; i++) {
        snprintf(p, sizeof p, "%s/%s", S.dir, o->made[i]);
        if (stat(p, &sb) == 0) continue;
        snprintf(msg, sizeof msg, "%s was reported written but is not there", o->made[i]);
        report(what, n, msg);
    }
    d = opendir(S.dir);
    while (d && (e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || listed(e->d_name, fixed_entries, N_FIXED)) continue;
        snprintf(p, sizeof p, "%s/%s", S.dir, e->d_name);
        if (!listed(e->d_name, o->made, o->n_made)) {
            snprintf(msg, sizeof msg, "%s left %s in the scratch folder (%s)", o->ok ? "the run" : o->stage, e->d_name,
                     o->ok ? "succeeded" : o->err);
            report(what, n, msg);
        }
        remove_path(p);
    }
    if (d) closedir(d);
}

/* Open file descriptors, and mappings of the data and scratch files (a failure path that forgot
   an fclose, a close or a munmap): Linux's /proc, -1 where it is absent. Counted before and
   after a part, where a leak of any of its runs adds up. */
static long count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    long n = 0;
    if (!d) return -1;
    while ((e = readdir(d)) != NULL) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static long count_maps(void)
{
    static char line[8192];
    FILE *f = fopen("/proc/self/maps", "r");
    long n = 0;
    if (!f) return -1;
    while (fgets(line, sizeof line, f)) n += strstr(line, S.dir) != NULL || strstr(line, S.data) != NULL;
    fclose(f);
    return n;
}

/* ---- the runs ------------------------------------------------------------------------------- */

static void run_armed(const part *pt, long n, outcome *o)
{
    memset(o, 0, sizeof *o);
    o->ok = 1;
    o->print = FNV0;
    if (n != 0) oom_arm(n, 1);   /* -1: count only */
    pt->run(o);
    oom_disarm();
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Runs part pt with each of its allocations failing in turn; ref gets the run where nothing
   fails. Returns how many allocations that run makes (-1 when it fails). */
static long check_part(const part *pt, outcome *ref)
{
    static outcome o;
    long n, total, fds = count_fds(), maps = count_maps();
    char msg[1400];
    run_armed(pt, 0, ref);
    check_and_clean_scratch(pt->name, 0, ref);
    if (!ref->ok) {
        snprintf(msg, sizeof msg, "%s failed with nothing failing: %s", ref->stage, ref->err);
        report(pt->name, 0, msg);
        return -1;
    }
    run_armed(pt, -1, &o);   /* count them: armed at an index no run reaches */
    check_and_clean_scratch(pt->name, -1, &o);
    total = oom.calls;
    for (n = 1; n <= total; n++) {
        run_armed(pt, n, &o);
        if (!oom.failed) {
            report(pt->name, n, "the run made fewer allocations than the count (not deterministic?)");
        } else if (o.ok) {
            if (o.print != ref->print) report(pt->name, n, "succeeded with results other than the run where nothing failed");
        } else if (!says_out_of_memory(o.err)) {
            snprintf(msg, sizeof msg, "%s failed without saying out of memory: %s", o.stage, o.err);
            report(pt->name, n, msg);
        }
        check_and_clean_scratch(pt->name, n, &o);
    }
    if (count_fds() != fds) {
        snprintf(msg, sizeof msg, "%ld file descriptors open after its runs, %ld before", count_fds(), fds);
        report(pt->name, 0, msg);
    }
    if (count_maps() != maps) {
        snprintf(msg, sizeof msg, "%ld file mappings after its runs, %ld before", count_maps(), maps);
        report(pt->name, 0, msg);
    }
#if HAVE_LEAK_CHECK
    if (__lsan_do_recoverable_leak_check && __lsan_do_recoverable_leak_check()) report(pt->name, 0, "leaks (above)");
#endif
    return total;
}

/* ---- preparation (nothing armed) ---------------------------------------------------------- */

/* GPT-2's byte alphabet: byte b is spelled as code point alphabet[b]; ids follow GPT-2's
   encoder.json (its printable bytes first, then the others in byte order). */
static int gpt2_printable(int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); }

static void gpt2_alphabet(uint32_t cp[256], int id[256])
{
    int b, k = 0, extra = 0;
    for (b = 0; b < 256; b++)
        if (gpt2_printable(b)) cp[b] = (uint32_t)b, id[b] = k++;
    for (b = 0; b < 256; b++)
        if (!gpt2_printable(b)) cp[b] = 256u + (uint32_t)extra++, id[b] = k++;
}

/* s as a JSON string (the byte alphabet has '"' and '\\'). */
static void put_json_string(FILE *f, const char *s, size_t n)
{
    size_t i;
    fputc('"', f);
    for (i = 0; i < n; i++) {
        if (s[i] == '"' || s[i] == '\\') fputc('\\', f);
        fputc(s[i], f);
    }
    fputc('"', f);
}

static size_t utf8_of(uint32_t cp, char *out)
{
    if (cp < 0x80) return out[0] = (char)cp, 1;
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;   /* the alphabet stays below U+0800 */
}

/* left + sep + right into out (room for 2 x 31 + 2 bytes); returns the length */
static size_t merge_text(char *out, const char *left, const char *sep, const char *right)
{
    size_t a = strlen(left), b = strlen(sep), c = strlen(right);
    memcpy(out, left, a);
    memcpy(out + a, sep, b);
    memcpy(out + a + b, right, c + 1);
    return a + b + c;
}

#define N_MERGES 255
/* hf_src/tokenizer.json: GPT-2's pipeline (ByteLevel with its regex), its 256 byte tokens and
   first 255 merges (vocab.bpe) with GPT-2's ids, <|endoftext|> at 511 (512 tokens: the
   size of stories260K's vocabulary); tokenizer_config.json naming it BOS and EOS. */
static int write_gpt2_tokenizer(const char *dir, const char *data)
{
    static char merges[N_MERGES][2][32];
    char path[1200], line[256], tok[64];
    uint32_t cp[256];
    int id[256], b, i, rc;
    FILE *in, *f;
    snprintf(path, sizeof path, "%s/gpt2/vocab.bpe", data);
    if (!(in = fopen(path, "r"))) return fprintf(stderr, "cannot read %s\n", path), 1;
    if (!fgets(line, sizeof line, in) || strncmp(line, "#version", 8)) return fclose(in), fprintf(stderr, "%s: no header\n", path), 1;
    for (i = 0; i < N_MERGES; i++) {
        char *sp, *nl;
        if (!fgets(line, sizeof line, in) || !(sp = strchr(line, ' ')) || (nl = strchr(line, '\n')) == NULL)
            return fclose(in), fprintf(stderr, "%s: bad merge %d\n", path, i), 1;
        *sp = *nl = '\0';
        if (strlen(line) >= sizeof merges[i][0] || strlen(sp + 1) >= sizeof merges[i][1])
            return fclose(in), fprintf(stderr, "%s: merge %d is too long\n", path, i), 1;
        memcpy(merges[i][0], line, strlen(line) + 1);
        memcpy(merges[i][1], sp + 1, strlen(sp + 1) + 1);
    }
    fclose(in);
    gpt2_alphabet(cp, id);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    if (!(f = fopen(path, "w"))) return fprintf(stderr, "cannot write %s\n", path), 1;
    fprintf(f, "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":[{\"id\":511,\"content\":"
               "\"<|endoftext|>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":true,"
               "\"special\":true}],\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":"
               "false,\"trim_offsets\":true,\"use_regex\":true},\"post_processor\":{\"type\":\"ByteLevel\","
               "\"add_prefix_space\":true,\"trim_offsets\":false,\"use_regex\":true},\"decoder\":{\"type\":\"ByteLevel\","
               "\"add_prefix_space\":true,\"trim_offsets\":true,\"use_regex\":true},\"model\":{\"type\":\"BPE\","
               "\"dropout\":null,\"unk_token\":null,\"continuing_subword_prefix\":\"\",\"end_of_word_suffix\":\"\","
               "\"fuse_unk\":false,\"byte_fallback\":false,\"vocab\":{");
    for (b = 0; b < 256; b++) {
        size_t k = utf8_of(cp[b], tok);
        fputs(b ? "," : "", f);
        put_json_string(f, tok, k);
        fprintf(f, ":%d", id[b]);
    }
    for (i = 0; i < N_MERGES; i++) {
        fputc(',', f);
        put_json_string(f, tok, merge_text(tok, merges[i][0], "", merges[i][1]));
        fprintf(f, ":%d", 256 + i);
    }
    fprintf(f, ",\"<|endoftext|>\":511},\"merges\":[");
    for (i = 0; i < N_MERGES; i++) {
        fputs(i ? "," : "", f);
        put_json_string(f, tok, merge_text(tok, merges[i][0], " ", merges[i][1]));
    }
    fprintf(f, "]}}\n");
    rc = fclose(f) != 0;
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    if (!(f = fopen(path, "w"))) return fprintf(stderr, "cannot write %s\n", path), 1;
    fprintf(f, "{\"bos_token\":\"<|endoftext|>\",\"eos_token\":{\"content\":\"<|endoftext|>\"},\"add_bos_token\":false,"
               "\"chat_template\":\"{{ messages }}\"}\n");
    return rc | (fclose(f) != 0);
}

/* stories260K's weights as a grzo checkpoint at path (what llm_export applies: the same
   values, so the exports hold the original's weights). */
static int save_checkpoint(const char *path)
{
    grzo_backend be;
    grzo_ctx *ctx = NULL;
    grzo_desc d;
    llm_model m;
    int rc = 1;
    memset(&m, 0, sizeof m);
    if (grzo_backend_cpu_create(NULL, &be) != GRZO_OK) return 1;
    memset(&d, 0, sizeof d);
    d.backend = &be;
    if (grzo_create(&d, &ctx) == GRZO_OK && llm_model_register(ctx, &m, &S.cfg, &S.w) == GRZO_OK &&
        grzo_checkpoint_save(ctx, path) == GRZO_OK)
        rc = 0;
    else
        fprintf(stderr, "checkpoint: %s\n", ctx ? grzo_last_error(ctx) : "no context");
    llm_model_free(&m);
    if (ctx) grzo_destroy(ctx);
    grzo_backend_destroy(&be);
    return rc;
}

/* The checkpoint of part_export_st: one weight moved, so that an export which did not apply
   it (a failure of the checkpoint's own allocations taken for success) differs. */
static int save_moved_checkpoint(void)
{
    float kept = S.w.tok_emb[0];
    int rc;
    S.w.tok_emb[0] = kept + 0.25f;
    rc = save_checkpoint(S.moved_ckpt);
    S.w.tok_emb[0] = kept;
    return rc;
}

/* The refusals' inputs: the GGUF read back, tokenizer.json with "dropout" twice in "model". */
static int make_malformed(void)
{
    static const char anchor[] = "\"model\":{\"type\":\"BPE\",";
    static const char extra[] = "\"dropout\":null,";
    char path[1200], err[512];
    uint8_t *text;
    size_t n, at;
    const char *hit;
    if (llm__read_file(S.gguf_ref, SIZE_MAX, &S.gguf_image, &S.gguf_size, err, sizeof err)) return fprintf(stderr, "%s\n", err), 1;
    path_in(path, sizeof path, S.hf_src, "tokenizer.json");
    if (llm__read_file(path, SIZE_MAX, &text, &n, err, sizeof err)) return fprintf(stderr, "%s\n", err), 1;
    if (!(S.dup_json = (char *)malloc(n + sizeof extra)) || !(hit = strstr((const char *)text, anchor))) {
        free(text);
        return fprintf(stderr, "prepare: cannot make the malformed tokenizer.json\n"), 1;
    }
    at = (size_t)(hit - (const char *)text) + sizeof anchor - 1;
    memcpy(S.dup_json, text, at);
    memcpy(S.dup_json + at, extra, sizeof extra - 1);
    memcpy(S.dup_json + at + sizeof extra - 1, text + at, n - at);
    S.dup_json_len = n + sizeof extra - 1;
    free(text);
    return 0;
}

/* The variants' GGUFs: a SentencePiece vocabulary with scores and types, every tensor type,
   an untied head, metadata of every value type, alignment 64 (toy_model.h); and the Llama-3
   tokenizer with llama3 rotary scaling (rope_freqs.weight), as grzo-export writes them. */
static int make_variant_ggufs(void)
{
    static const char *const spm_tokens[] = {"<unk>", "<s>", "</s>", HF_U2581, "a", "b", HF_U2581 "a", "ab", "<0x0A>", "<x>",
                                             "<0xC3>", "<0xA9>", "1", HF_U2581 "b"};
    static const float spm_scores[] = {0, 0, 0, -1, -2, -3, -0.5f, -0.25f, 0, 0, 0, 0, -4, -0.75f};
    static const int32_t spm_types[] = {2, 3, 3, 1, 1, 1, 1, 1, 6, 4, 6, 6, 1, 1};
    toy_opts t = toy_defaults();
    llm_tokenizer *tok = NULL;
    llm_hf_tensor ht[9 + 4];
    llm_config c;
    llm_weights w;
    char path[1200], err[512];
    uint64_t k;
    int i, n, rc;
    t.dim = 32, t.hidden = 32, t.layers = 1, t.heads = 2, t.kv_heads = 1, t.vocab = 16, t.ctx = 64;
    t.wtype = TOY_MIXED, t.untied = 1, t.extra_kv = 1, t.alignment = 64;
    t.tok_model = "llama", t.n_tokens = 14, t.tokens = spm_tokens, t.scores = spm_scores, t.types = spm_types;
    t.bos = 1, t.eos = 2;
    toy_build(&t, &S.spm);
    if (llm_tokenizer_load_hf_memory(HF_LLAMA3_TOKENIZER, strlen(HF_LLAMA3_TOKENIZER), NULL, 0, &tok, err, sizeof err))
        return fprintf(stderr, "prepare: the Llama-3 tokenizer: %s\n", err), 1;
    memset(&c, 0, sizeof c);
    c.dim = 32, c.hidden_dim = 32, c.n_layers = 1, c.n_heads = 2, c.n_kv_heads = 1, c.head_dim = 8;
    c.vocab_size = llm_tokenizer_vocab(tok), c.max_seq_len = 64, c.norm_eps = 1e-5f, c.rope_theta = 10000.0f;
    c.rope_scaling = LLM_ROPE_SCALING_LLAMA3, c.rope_factor = 8.0f, c.rope_low_freq_factor = 1.0f;
    c.rope_high_freq_factor = 4.0f, c.rope_original_max_pos = 16;
    if (llm__weights_alloc(&c, &w, err, sizeof err)) return llm_tokenizer_free(tok), fprintf(stderr, "%s\n", err), 1;
    n = llm__hf_tensors(&c, &w, ht);
    for (i = 0; i < n; i++)
        for (k = 0; k < ht[i].rows * ht[i].cols; k++) ht[i].data[k] = (float)((k * 37 + (uint64_t)i) % 11) * 0.01f;
    path_in(path, sizeof path, S.dir, "llama3.gguf");
    rc = llm_gguf_write_model(&c, &w, tok, "llama3", LLM_GGUF_F32, path, err, sizeof err) ||
         llm__read_file(path, SIZE_MAX, &S.llama3_image, &S.llama3_size, err, sizeof err);
    if (rc) fprintf(stderr, "prepare: the llama3 GGUF: %s\n", err);
    remove(path);
    llm_weights_free(&w);
    llm_tokenizer_free(tok);
    return rc;
}

/* st_ref's weights as the one shard of an index, beside a copy of its config.json. */
static int make_sharded(void)
{
    static const char shard[] = "model-00001-of-00001.safetensors";
    static llm_hf_tensor t[9 * MAX_LAYERS + 4];
    char from[1200], to[1200];
    int i, n, rc = 0;
    FILE *f;
    if (mkdir(S.sharded, 0777) != 0) return fprintf(stderr, "cannot create %s\n", S.sharded), 1;
    path_in(from, sizeof from, S.st_ref, "model.safetensors");
    path_in(to, sizeof to, S.sharded, shard);
    rc |= link(from, to);
    path_in(from, sizeof from, S.st_ref, "config.json");
    path_in(to, sizeof to, S.sharded, "config.json");
    rc |= link(from, to);
    path_in(to, sizeof to, S.sharded, "model.safetensors.index.json");
    if (rc || !(f = fopen(to, "w"))) return fprintf(stderr, "cannot make %s\n", S.sharded), 1;
    n = llm__hf_tensors(&S.cfg, &S.w, t);
    fprintf(f, "{\"metadata\":{\"total_size\":0},\"weight_map\":{");
    for (i = 0; i < n; i++) fprintf(f, "%s\"%s\":\"%s\"", i ? "," : "", t[i].name, shard);
    fprintf(f, "}}\n");
    return fclose(f) != 0;
}

static int prepare(const char *data, const char *scratch, const char *prog)
{
    char err[1024];
    llm_tokenizer *tok = NULL;
    snprintf(S.data, sizeof S.data, "%s", data);
    snprintf(S.dir, sizeof S.dir, "%s/%s.d", scratch, prog);   /* the ASan copy runs beside this one */
    remove_path(S.dir);
    if (mkdir(S.dir, 0777) != 0) return fprintf(stderr, "cannot create %s\n", S.dir), 1;
    path_in(S.model, sizeof S.model, data, "stories260K.bin");
    path_in(S.tok512, sizeof S.tok512, data, "tok512.bin");
    path_in(S.hf_src, sizeof S.hf_src, S.dir, "hf_src");
    path_in(S.ckpt, sizeof S.ckpt, S.dir, "ckpt.grzo");
    path_in(S.moved_ckpt, sizeof S.moved_ckpt, S.dir, "moved.grzo");
    path_in(S.st_ref, sizeof S.st_ref, S.dir, "st_ref");
    path_in(S.gguf_ref, sizeof S.gguf_ref, S.dir, "gguf_ref.gguf");
    path_in(S.sharded, sizeof S.sharded, S.dir, "sharded");
    if (mkdir(S.hf_src, 0777) != 0 || write_gpt2_tokenizer(S.hf_src, data)) return 1;
    if (llm_load(S.model, &S.cfg, &S.w, NULL, err, sizeof err) ||
        llm_tokenizer_load_llama2c(S.tok512, S.cfg.vocab_size, &tok, err, sizeof err))
        return fprintf(stderr, "prepare: %s\n", err), 1;
    S.bos = llm_tokenizer_bos(tok);
    S.eos = llm_tokenizer_eos(tok);
    if (llm_tokenize(tok, prompt, 1, S.ids, MAX_IDS, &S.n_ids, err, sizeof err) || S.n_ids > MAX_IDS - 8)
        return fprintf(stderr, "prepare: the prompt: %s\n", err), llm_tokenizer_free(tok), 1;
    llm_tokenizer_free(tok);
    if (S.cfg.vocab_size > MAX_VOCAB || S.cfg.n_layers > MAX_LAYERS) return fprintf(stderr, "prepare: model too large\n"), 1;
    if (save_checkpoint(S.ckpt) || save_moved_checkpoint()) return 1;
    if (llm_safetensors_write_ex(&S.cfg, &S.w, LLM_ST_F32, 511, 511, S.hf_src, S.st_ref, err, sizeof err) ||
        llm_export(S.st_ref, S.ckpt, S.gguf_ref, LLM_EXPORT_GGUF, LLM_GGUF_F32, err, sizeof err))
        return fprintf(stderr, "prepare: the exports: %s\n", err), 1;
    S.weights_print = fnv_weights(FNV0, &S.cfg, &S.w);
    return make_malformed() || make_variant_ggufs() || make_sharded();
}

/* The run where nothing fails, across parts: the exports' forwards are the original's, bit
   for bit, and the three byte-level tokenizers agree. */
static void check_across(const outcome *ref)
{
    size_t bytes = (size_t)N_OUT * (size_t)S.cfg.vocab_size * sizeof(float);
    if (memcmp(ref[0].logits, ref[3].logits, bytes) != 0) report("gguf", 0, "the GGUF's logits differ from the original's");
    if (memcmp(ref[0].logits, ref[4].logits, bytes) != 0) report("hf", 0, "the folder's logits differ from the original's");
    if (ref[3].n_text_ids != ref[5].n_text_ids || ref[4].n_text_ids != ref[5].n_text_ids ||
        memcmp(ref[3].text_ids, ref[5].text_ids, (size_t)ref[5].n_text_ids * sizeof(int32_t)) != 0 ||
        memcmp(ref[4].text_ids, ref[5].text_ids, (size_t)ref[5].n_text_ids * sizeof(int32_t)) != 0)
        report("tokenizer_json", 0, "the GGUF's, the folder's and tokenizer.json's tokenizers encode the text differently");
    if (ref[5].n_text_ids < 20 || ref[5].text_ids[ref[5].n_text_ids - 1] != 511)
        report("tokenizer_json", 0, "the text did not encode as expected (<|endoftext|> last)");
}

int main(int argc, char **argv)
{
    static outcome ref[N_PARTS];
    const char *prog;
    int i;
    if (argc != 3) {
        fprintf(stderr, "usage: test_llm_oom <tests/data> <scratch dir>\n");
        return 2;
    }
    prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    if (prepare(argv[1], argv[2], prog)) return 1;
    for (i = 0; i < N_PARTS; i++) {
        double t0 = now();
        long n;
        retried = 0;
        n = check_part(&parts[i], &ref[i]);
        printf("%-15s %6ld allocations, each failed in turn (%.1f s)", parts[i].name, n, now() - t0);
        if (retried) printf("; %ld calls on a state retried after their failure", retried);
        printf("\n");
        fflush(stdout);
    }
    check_across(ref);
    llm_weights_free(&S.w);
    free(S.gguf_image);
    free(S.dup_json);
    free(S.llama3_image);
    toy_free(&S.spm);
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    remove_path(S.dir);
    printf("ok\n");
    return 0;
}
