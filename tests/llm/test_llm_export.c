/* test_llm_export.c - grzo -> GGUF -> grzo (llm_export.h, gguf_write.h).

   A generated GGUF (toy_model.h: GQA, untied head, every metadata value type, alignment
   64) is loaded, its weights are changed as a fine-tune would change them, saved as a grzo
   checkpoint, exported with llm_export and loaded back with llm_load:
   - f32: every weight bit for bit; the original's metadata section byte for byte, followed
     by general.file_type = 0 (appended: the toy has none); a re-export of the export at
     q8_0 replaces that key in place (same count, value 7); greedy generation from the
     export gives the same tokens as the model it came from;
   - f16 / bf16 / q8_0: norm gains bit for bit (kept f32), matrices within the type's
     rounding: f16 |d| <= 2^-11 |x| (+2^-25 below 2^-14), bf16 |d| <= 2^-8 |x|, q8_0
     |d| <= max|block| (1/254 + 2^-11) per 32-value block; and not bit for bit (the type
     was really written); file sizes q8_0 < f16 = bf16 < f32;
   - safetensors (--format safetensors): v_proj bit for bit, q_proj's rows in HF's
     half-split order, lm_head present for the untied toy and absent for stories260K (a
     llama2.c original works here); an existing folder and q8_0 are refused; the f32, f16
     and bf16 folders load back with the same config, f32 bit for bit, f16/bf16 within the
     type's rounding (norm gains too); config.json's token ids (0 written, -1 left out);
     temporary folders another run left are skipped and kept (all 100 names taken: refused);
   - refusals, each leaving no file (and an earlier file at --out intact, no temporary left
     behind): a checkpoint of another model (the error names the first differing block when
     the checkpoint's size matches; grzo_checkpoint_load compares the size first),
     a llama2.c original (argv[1]: tests/data/stories260K.bin), an unwritable --out, a
     full disk (a file size limit) in either format and while a folder's tokenizer file is
     copied; each missing or invalid argument of each writer, alone.
   With SCRIPT PYLIB PYTHON... after the data directory, the four exports are also read by
   the `gguf` Python package (gguf_read_export.py; PYLIB is prepended to PYTHONPATH, where
   tests/run.sh installs it): skipped (77) when no interpreter imports it. */
#define _POSIX_C_SOURCE 200809L   /* mkdtemp, setenv */
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "llm_test.h"
#include "toy_model.h"
#include "grzo.h"
#include "backends/grzo_cpu.h"
#include "llm_export.h"
#include "llm_internal.h"
#include "model.h"

static char dir[256];

/* gguf_read_export.py over the original and the four exports of test_types. */
static int read_with_gguf_package(const char *script, const char *python, const char *orig)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s' '%s/f32.gguf' '%s/f16.gguf' '%s/bf16.gguf' '%s/q8_0.gguf' '%s/st_f32'", python,
             script, orig, dir, dir, dir, dir, dir);
    fflush(stdout);
    return system(cmd);
}

/* Every weight of a model as (name, values, count), in a fixed order. */
#define MAX_T 64
typedef struct tensor_list {
    char name[MAX_T][48];
    const float *p[MAX_T];
    uint64_t n[MAX_T];
    int is_vector[MAX_T];
    int count;
} tensor_list;

static void list_add(tensor_list *t, const char *name, const float *p, uint64_t n, int vec)
{
    snprintf(t->name[t->count], sizeof t->name[0], "%s", name);
    t->p[t->count] = p;
    t->n[t->count] = n;
    t->is_vector[t->count++] = vec;
}

static void list_weights(const llm_config *c, const llm_weights *w, tensor_list *t)
{
    uint64_t dim = (uint64_t)c->dim, q = (uint64_t)c->n_heads * (uint64_t)c->head_dim;
    uint64_t kv = (uint64_t)c->n_kv_heads * (uint64_t)c->head_dim, ffn = (uint64_t)c->hidden_dim * dim;
    char nm[48];
    int l;
    memset(t, 0, sizeof *t);
    list_add(t, "token_embd", w->tok_emb, (uint64_t)c->vocab_size * dim, 0);
    for (l = 0; l < c->n_layers; l++) {
        const llm_layer *L = &w->layers[l];
#define ADD(s, f, n, v) snprintf(nm, sizeof nm, "blk.%d." s, l), list_add(t, nm, L->f, n, v);
        ADD("attn_norm", attn_norm, dim, 1) ADD("attn_q", wq, q * dim, 0) ADD("attn_k", wk, kv * dim, 0)
        ADD("attn_v", wv, kv * dim, 0) ADD("attn_output", wo, q * dim, 0) ADD("ffn_norm", ffn_norm, dim, 1)
        ADD("ffn_gate", w1, ffn, 0) ADD("ffn_down", w2, ffn, 0) ADD("ffn_up", w3, ffn, 0)
#undef ADD
    }
    list_add(t, "output_norm", w->final_norm, dim, 1);
    if (!c->tied_output) list_add(t, "output", w->output, (uint64_t)c->vocab_size * dim, 0);
}

static void write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    REQUIRE(f && fwrite(p, 1, n, f) == n && fclose(f) == 0, "cannot write %s", path);
}

static int file_exists(const char *path)
{
    return access(path, F_OK) == 0;
}

static int temporaries_left(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)) != NULL) n += strstr(e->d_name, ".tmp") != NULL;   /* a file's .tmp, a folder's .tmp-PID-N */
    if (d) closedir(d);
    return n;
}

/* A grzo context over w (F32, CPU: the blocks point into w). */
typedef struct session {
    grzo_backend be;
    grzo_ctx *ctx;
    llm_model m;
} session;

static void session_open(session *s, const llm_config *cfg, llm_weights *w)
{
    grzo_desc d;
    memset(s, 0, sizeof *s);
    REQUIRE(grzo_backend_cpu_create(NULL, &s->be) == GRZO_OK, "cpu backend");
    memset(&d, 0, sizeof d);
    d.backend = &s->be;
    REQUIRE(grzo_create(&d, &s->ctx) == GRZO_OK, "grzo_create");
    REQUIRE(llm_model_register(s->ctx, &s->m, cfg, w) == GRZO_OK, "register: %s", llm_model_error(&s->m));
}

static void session_close(session *s)
{
    llm_model_free(&s->m);
    grzo_destroy(s->ctx);
    grzo_backend_destroy(&s->be);
}

/* w fine-tuned (every weight moved a little) and checkpointed at ckpt. */
static void tune_and_save(const llm_config *cfg, llm_weights *w, const char *ckpt)
{
    tensor_list t;
    session s;
    lt_rng r = {7};
    int i;
    uint64_t k;
    list_weights(cfg, w, &t);
    for (i = 0; i < t.count; i++)
        for (k = 0; k < t.n[i]; k++) ((float *)t.p[i])[k] += (float)((double)lt_below(&r, 2001) - 1000.0) * 1e-5f;
    session_open(&s, cfg, w);
    REQUIRE(grzo_checkpoint_save(s.ctx, ckpt) == GRZO_OK, "checkpoint: %s", grzo_last_error(s.ctx));
    session_close(&s);
}

/* The toy GGUF at path, fine-tuned and checkpointed. */
static void make_original(const toy_opts *o, const char *gguf, const char *ckpt, llm_config *cfg, llm_weights *w)
{
    toy_model toy;
    char err[512] = "";
    toy_build(o, &toy);
    write_file(gguf, toy.file, toy.size);
    toy_free(&toy);
    REQUIRE(llm_load(gguf, cfg, w, NULL, err, sizeof err) == 0, "load %s: %s", gguf, err);
    tune_and_save(cfg, w, ckpt);
}

/* The largest error the type's rounding allows for value x (in block of max |x| amax). */
static double allowed(llm_gguf_type type, double x, double amax)
{
    switch (type) {
    case LLM_GGUF_F16: return fabs(x) * ldexp(1, -11) + ldexp(1, -25);
    case LLM_GGUF_BF16: return fabs(x) * ldexp(1, -8) + ldexp(1, -133);
    case LLM_GGUF_Q8_0: return amax * (1.0 / 254 + ldexp(1, -11)) * (1 + 1e-6);
    default: return 0;
    }
}

/* Compare b (loaded from an export of `type`) with a; returns how many values differ.
   vectors_f32: the norm gains were kept F32 (GGUF), so they must be equal. */
static uint64_t compare_as(const llm_config *c, const llm_weights *a, const llm_weights *b, llm_gguf_type type,
                           int vectors_f32)
{
    tensor_list ta, tb;
    uint64_t differ = 0, k, j;
    int i;
    list_weights(c, a, &ta);
    list_weights(c, b, &tb);
    for (i = 0; i < ta.count; i++) {
        if (type == LLM_GGUF_F32 || (vectors_f32 && ta.is_vector[i])) {
            CHECKF(memcmp(ta.p[i], tb.p[i], ta.n[i] * sizeof(float)) == 0, "%s differs (type %d)", ta.name[i], (int)type);
            continue;
        }
        for (k = 0; k < ta.n[i]; k += 32) {
            double amax = 0;
            for (j = k; j < k + 32 && j < ta.n[i]; j++) amax = fmax(amax, fabs(ta.p[i][j]));
            for (j = k; j < k + 32 && j < ta.n[i]; j++) {
                double d = fabs((double)ta.p[i][j] - tb.p[i][j]);
                differ += d != 0;
                CHECKF(d <= allowed(type, ta.p[i][j], amax), "%s[%llu]: %.9g exported as %.9g (type %d, allowed %.3g)",
                       ta.name[i], (unsigned long long)j, ta.p[i][j], tb.p[i][j], (int)type, allowed(type, ta.p[i][j], amax));
            }
        }
    }
    return differ;
}

static uint64_t compare(const llm_config *c, const llm_weights *a, const llm_weights *b, llm_gguf_type type)
{
    return compare_as(c, a, b, type, 1);
}

static size_t find_bytes(const uint8_t *hay, size_t n, const void *needle, size_t m)
{
    size_t i;
    for (i = 0; i + m <= n; i++)
        if (memcmp(hay + i, needle, m) == 0) return i;
    return (size_t)-1;
}

/* The greedy continuation of a fixed prompt. */
static int32_t greedy(session *s, int32_t *tokens)
{
    llm_state_desc sd;
    llm_state *st;
    llm_generate_desc g;
    int32_t n_total = 0;
    memset(&sd, 0, sizeof sd);
    sd.max_rows = 24;
    sd.max_seqs = 1;
    sd.max_outputs = 1;
    sd.max_seq_len = 24;
    REQUIRE(llm_state_create(s->ctx, &s->m, &sd, &st) == GRZO_OK, "state: %s", llm_model_error(&s->m));
    memset(&g, 0, sizeof g);
    g.steps = 24;
    g.stop[0] = g.stop[1] = -1;
    tokens[0] = 3, tokens[1] = 17;
    REQUIRE(llm_generate(s->ctx, &s->m, st, tokens, 2, &g, &n_total) == GRZO_OK, "generate: %s", llm_model_error(&s->m));
    llm_state_free(st);
    return n_total;
}

static void test_f32_round_trip(const char *orig, const llm_config *cfg, llm_weights *tuned, const char *ckpt)
{
    char out[512], out2[512], err[512] = "";
    llm_config c2;
    llm_weights w2;
    uint8_t *a, *b, *e;
    size_t na = 0, nb = 0, ne = 0, info, kv_len;
    static const uint8_t first_info[] = {18, 0, 0, 0, 0, 0, 0, 0, 'o', 'u', 't', 'p', 'u', 't', '_', 'n', 'o', 'r', 'm'};
    int32_t t1[25], t2[25], n1, n2;
    session s1, s2;

    snprintf(out, sizeof out, "%s/f32.gguf", dir);
    REQUIRE(llm_export(orig, ckpt, out, LLM_EXPORT_GGUF, LLM_GGUF_F32, err, sizeof err) == 0, "export: %s", err);
    REQUIRE(llm_load(out, &c2, &w2, NULL, err, sizeof err) == 0, "load export: %s", err);
    CHECK(memcmp(cfg, &c2, sizeof c2) == 0);
    CHECK(compare(cfg, tuned, &w2, LLM_GGUF_F32) == 0);

    /* metadata: the original's pairs byte for byte, then general.file_type = ALL_F32 */
    a = lt_read_file(orig, &na);
    b = lt_read_file(out, &nb);
    REQUIRE(a && b, "read back");
    info = find_bytes(a, na, first_info, sizeof first_info);   /* toy_build writes output_norm first */
    REQUIRE(info != (size_t)-1 && info > 24, "first tensor info not found");
    kv_len = info - 24;
    CHECK(memcmp(a + 8, b + 8, 8) == 0);                                   /* tensor count */
    CHECK(b[16] == (uint8_t)(a[16] + 1) && memcmp(a + 17, b + 17, 7) == 0); /* one more pair */
    CHECK(nb > 24 + kv_len && memcmp(a + 24, b + 24, kv_len) == 0);
    {
        static const uint8_t ft[] = {17, 0, 0, 0, 0, 0, 0, 0, 'g', 'e', 'n', 'e', 'r', 'a', 'l', '.', 'f', 'i', 'l', 'e',
                                     '_', 't', 'y', 'p', 'e', 4, 0, 0, 0, 0, 0, 0, 0};
        CHECK(memcmp(b + 24 + kv_len, ft, sizeof ft) == 0);
        /* an original that has general.file_type: replaced in place (same count, value 7 = Q8_0) */
        snprintf(out2, sizeof out2, "%s/q8_from_export.gguf", dir);
        REQUIRE(llm_export(out, ckpt, out2, LLM_EXPORT_GGUF, LLM_GGUF_Q8_0, err, sizeof err) == 0, "re-export: %s", err);
        e = lt_read_file(out2, &ne);
        REQUIRE(e != NULL, "read back");
        CHECK(memcmp(e + 8, b + 8, 16) == 0);
        CHECK(memcmp(e + 24, b + 24, kv_len + sizeof ft - 4) == 0);
        CHECK(e[24 + kv_len + sizeof ft - 4] == 7);
        free(e);
    }
    free(a);
    free(b);

    /* the same text: greedy tokens of the fine-tuned model and of its export */
    session_open(&s1, cfg, tuned);
    session_open(&s2, &c2, &w2);
    n1 = greedy(&s1, t1);
    n2 = greedy(&s2, t2);
    CHECK(n1 > 2 && n1 == n2 && memcmp(t1, t2, (size_t)n1 * sizeof(int32_t)) == 0);
    session_close(&s1);
    session_close(&s2);
    llm_weights_free(&w2);
}

static void test_types(const char *orig, const llm_config *cfg, const llm_weights *tuned, const char *ckpt)
{
    static const llm_gguf_type types[] = {LLM_GGUF_F32, LLM_GGUF_F16, LLM_GGUF_BF16, LLM_GGUF_Q8_0};
    static const char *const names[] = {"f32", "f16", "bf16", "q8_0"};
    size_t size[4] = {0};
    int i;
    for (i = 0; i < 4; i++) {
        char out[512], err[512] = "";
        llm_config c2;
        llm_weights w2;
        uint8_t *img;
        llm_gguf_type parsed;
        snprintf(out, sizeof out, "%s/%s.gguf", dir, names[i]);
        CHECK(llm_gguf_type_parse(names[i], &parsed) == 0 && parsed == types[i]);
        REQUIRE(llm_export(orig, ckpt, out, LLM_EXPORT_GGUF, types[i], err, sizeof err) == 0, "export %s: %s", names[i], err);
        REQUIRE(llm_load(out, &c2, &w2, NULL, err, sizeof err) == 0, "load %s: %s", names[i], err);
        CHECK(memcmp(cfg, &c2, sizeof c2) == 0);
        if (types[i] == LLM_GGUF_F32) CHECK(compare(cfg, tuned, &w2, types[i]) == 0);
        else CHECKF(compare(cfg, tuned, &w2, types[i]) > 0, "%s export equals the f32 weights: not converted", names[i]);
        img = lt_read_file(out, &size[i]);
        free(img);
        llm_weights_free(&w2);
    }
    CHECKF(size[3] < size[1] && size[1] == size[2] && size[2] < size[0], "sizes f32 %zu f16 %zu bf16 %zu q8_0 %zu", size[0],
           size[1], size[2], size[3]);
}

/* The bytes of tensor `name` in a model.safetensors image (header parsed by string search:
   the writer's own format, checked independently by gguf_read_export.py). */
static const float *st_tensor(const uint8_t *img, size_t n, const char *name)
{
    char key[128];
    const char *at;
    unsigned long long begin, end, hlen = 0;
    int i;
    for (i = 7; i >= 0; i--) hlen = hlen << 8 | img[i];
    if (n < 8 || hlen > n - 8) return NULL;
    snprintf(key, sizeof key, "\"%s\":{", name);
    at = strstr((const char *)img + 8, key);
    if (!at || !(at = strstr(at, "\"data_offsets\":[")) || sscanf(at, "\"data_offsets\":[%llu,%llu]", &begin, &end) != 2 ||
        end > n - 8 - hlen)
        return NULL;
    return (const float *)(const void *)(img + 8 + hlen + begin);
}

/* Each safetensors export loaded back as a folder (load_hf.c): the config as it was, f32 bit for
   bit, f16 and bf16 (norm gains too: one dtype for the file) within their rounding and converted. */
static void test_safetensors_load_back(const char *orig, const llm_config *c, const llm_weights *tuned, const char *ckpt)
{
    static const llm_gguf_type types[] = {LLM_GGUF_F32, LLM_GGUF_F16, LLM_GGUF_BF16};
    static const char *const names[] = {"st_f32", "st_f16", "st_bf16"};
    int i;
    for (i = 0; i < 3; i++) {
        char out[512], err[512] = "";
        llm_config c2;
        llm_weights w2;
        uint64_t differ;
        snprintf(out, sizeof out, "%s/%s", dir, names[i]);
        if (i) REQUIRE(llm_export(orig, ckpt, out, LLM_EXPORT_SAFETENSORS, types[i], err, sizeof err) == 0, "%s: %s", out, err);
        REQUIRE(llm_load(out, &c2, &w2, NULL, err, sizeof err) == 0, "load %s: %s", out, err);
        CHECKF(memcmp(c, &c2, sizeof c2) == 0, "%s: the config differs", out);
        differ = compare_as(c, tuned, &w2, types[i], 0);
        CHECKF(i ? differ > 0 : differ == 0, "%s: %llu values differ", out, (unsigned long long)differ);
        llm_weights_free(&w2);
    }
}

/* config.json's token ids: 0 is an id like any other; -1 (a folder's export, whose
   tokenizer files carry them) leaves the key out. */
static void test_safetensors_ids(const llm_config *c, const llm_weights *w)
{
    static const int32_t ids[] = {0, -1};
    int i;
    for (i = 0; i < 2; i++) {
        char out[512], err[512] = "";
        char *json;
        size_t n = 0;
        snprintf(out, sizeof out, "%s/st_ids%d", dir, i);
        REQUIRE(llm_safetensors_write(c, w, LLM_ST_F32, ids[i], ids[i], out, err, sizeof err) == 0, "%s: %s", out, err);
        json = (char *)lt_read_file(lt_path(out, "config.json"), &n);
        REQUIRE(json != NULL, "%s/config.json", out);
        json[n - 1] = '\0';   /* its last byte is a newline */
        CHECKF((strstr(json, "\"bos_token_id\": 0,") != NULL) == (ids[i] == 0), "%s", json);
        CHECKF((strstr(json, "\"eos_token_id\": 0\n") != NULL) == (ids[i] == 0), "%s", json);
        CHECKF(ids[i] == 0 || strstr(json, "_token_id") == NULL, "%s", json);
        free(json);
    }
}

/* out.tmp-PID-K, the temporary folder names of this process, in left */
static void leftover_name(char *left, size_t cap, const char *out, int k)
{
    snprintf(left, cap, "%s.tmp-%ld-%d", out, (long)getpid(), k);
}

/* Temporary folders that other runs left behind under this process's names (a killed run,
   this pid in another container) are not ours: the export takes the next name and the
   leftover stays; with all 100 names taken it gives up, naming the last. Another error
   (a missing parent folder) is not retried under the other names: the first is named. */
static void test_safetensors_leftovers(const llm_config *c, const llm_weights *w)
{
    char out[512], left[600], err[512] = "";
    int k;
    snprintf(out, sizeof out, "%s/st_after_leftover", dir);
    leftover_name(left, sizeof left, out, 0);
    REQUIRE(mkdir(left, 0777) == 0, "mkdir %s", left);
    CHECKF(llm_safetensors_write(c, w, LLM_ST_F16, 1, 2, out, err, sizeof err) == 0, "%s", err);
    CHECK(file_exists(lt_path(out, "model.safetensors")) && file_exists(left));
    rmdir(left);
    snprintf(out, sizeof out, "%s/st_no_name_left", dir);
    for (k = 0; k < 100; k++) {
        leftover_name(left, sizeof left, out, k);
        REQUIRE(mkdir(left, 0777) == 0, "mkdir %s", left);
    }
    CHECK(llm_safetensors_write(c, w, LLM_ST_F16, 1, 2, out, err, sizeof err) != 0);
    CHECKF(strstr(err, "cannot create the temporary folder") != NULL && strstr(err, left) != NULL, "%s", err);
    CHECK(!file_exists(out));
    for (k = 0; k < 100; k++) {
        leftover_name(left, sizeof left, out, k);
        rmdir(left);
    }
    snprintf(out, sizeof out, "%s/no_such_parent/st", dir);
    leftover_name(left, sizeof left, out, 0);
    CHECK(llm_safetensors_write(c, w, LLM_ST_F16, 1, 2, out, err, sizeof err) != 0);
    CHECKF(strstr(err, "cannot create the temporary folder") != NULL && strstr(err, left) != NULL, "%s", err);
}

static void test_safetensors(const char *orig, const llm_config *c, const llm_weights *tuned, const char *ckpt)
{
    char out[512], path[600], err[512] = "";
    uint8_t *img;
    size_t n = 0;
    const float *q, *v;
    int hd = c->head_dim;
    snprintf(out, sizeof out, "%s/st_f32", dir);
    REQUIRE(llm_export(orig, ckpt, out, LLM_EXPORT_SAFETENSORS, LLM_GGUF_F32, err, sizeof err) == 0, "safetensors: %s", err);
    snprintf(path, sizeof path, "%s/config.json", out);
    CHECK(file_exists(path));
    snprintf(path, sizeof path, "%s/model.safetensors", out);
    img = lt_read_file(path, &n);
    REQUIRE(img != NULL, "no model.safetensors");
    v = st_tensor(img, n, "model.layers.1.self_attn.v_proj.weight");
    q = st_tensor(img, n, "model.layers.0.self_attn.q_proj.weight");
    CHECK(v && memcmp(v, tuned->layers[1].wv, (size_t)c->n_kv_heads * hd * c->dim * sizeof(float)) == 0);
    /* HF row 1 of head 0 (first half, pair 1) is our row 2 (pair 1, first element); HF row
       hd/2 (second half, pair 0) is our row 1 */
    CHECK(q && memcmp(q + (size_t)c->dim, tuned->layers[0].wq + 2 * (size_t)c->dim, (size_t)c->dim * sizeof(float)) == 0);
    CHECK(q && memcmp(q + (size_t)(hd / 2) * c->dim, tuned->layers[0].wq + (size_t)c->dim, (size_t)c->dim * sizeof(float)) == 0);
    CHECK(st_tensor(img, n, "lm_head.weight") != NULL && st_tensor(img, n, "model.norm.weight") != NULL);
    free(img);
    /* refusals: the folder exists already; q8_0; neither leaves anything */
    CHECK(llm_export(orig, ckpt, out, LLM_EXPORT_SAFETENSORS, LLM_GGUF_F32, err, sizeof err) != 0);
    CHECKF(strstr(err, "exists") != NULL, "%s", err);
    snprintf(out, sizeof out, "%s/st_q8", dir);
    CHECK(llm_export(orig, ckpt, out, LLM_EXPORT_SAFETENSORS, LLM_GGUF_Q8_0, err, sizeof err) != 0);
    CHECK(!file_exists(out));
    CHECK(temporaries_left() == 0);
    test_safetensors_load_back(orig, c, tuned, ckpt);
    test_safetensors_ids(c, tuned);
    test_safetensors_leftovers(c, tuned);
    CHECK(temporaries_left() == 0);
}

/* A llama2.c original has no metadata to copy, but a safetensors folder needs none. */
static void test_safetensors_llama2c(const char *llama2c)
{
    llm_config c;
    llm_weights w;
    session s;
    char ckpt[512], out[512], path[600], err[512] = "";
    uint8_t *img;
    size_t n = 0;
    const float *e;
    REQUIRE(llm_load(llama2c, &c, &w, NULL, err, sizeof err) == 0, "%s", err);
    snprintf(ckpt, sizeof ckpt, "%s/stories.grzo", dir);
    session_open(&s, &c, &w);
    REQUIRE(grzo_checkpoint_save(s.ctx, ckpt) == GRZO_OK, "checkpoint: %s", grzo_last_error(s.ctx));
    session_close(&s);
    snprintf(out, sizeof out, "%s/st_stories", dir);
    REQUIRE(llm_export(llama2c, ckpt, out, LLM_EXPORT_SAFETENSORS, LLM_GGUF_F32, err, sizeof err) == 0, "%s", err);
    snprintf(path, sizeof path, "%s/model.safetensors", out);
    img = lt_read_file(path, &n);
    e = img ? st_tensor(img, n, "model.embed_tokens.weight") : NULL;
    CHECK(e && memcmp(e, w.tok_emb, (size_t)c.vocab_size * c.dim * sizeof(float)) == 0);
    CHECK(img && st_tensor(img, n, "lm_head.weight") == NULL);   /* stories260K ties its head */
    free(img);
    llm_weights_free(&w);
}

static void test_refusals(const char *orig, const char *ckpt, const char *llama2c)
{
    toy_opts other = toy_defaults();
    llm_config c;
    llm_weights w;
    char other_gguf[512], other_ckpt[512], out[512], err[512] = "";
    uint8_t *kept;
    size_t n = 0;

    /* a checkpoint of another model of the same payload size (one key/value head instead
       of two, 32 more tokens): refused, the error names the first differing block */
    other.kv_heads = 1;
    other.vocab = 72;
    other.untied = 1;
    snprintf(other_gguf, sizeof other_gguf, "%s/other.gguf", dir);
    snprintf(other_ckpt, sizeof other_ckpt, "%s/other.grzo", dir);
    make_original(&other, other_gguf, other_ckpt, &c, &w);
    llm_weights_free(&w);
    snprintf(out, sizeof out, "%s/refused.gguf", dir);
    CHECK(llm_export(orig, other_ckpt, out, LLM_EXPORT_GGUF, LLM_GGUF_F32, err, sizeof err) != 0);
    CHECKF(strstr(err, "'token_embd'") != NULL, "the error does not name the block: %s", err);
    CHECK(!file_exists(out));
    /* another size (wider feed-forward): refused (grzo compares the payload size first) */
    other = toy_defaults();
    other.hidden = 128;
    other.untied = 1;
    make_original(&other, other_gguf, other_ckpt, &c, &w);
    llm_weights_free(&w);
    CHECK(llm_export(orig, other_ckpt, out, LLM_EXPORT_GGUF, LLM_GGUF_F32, err, sizeof err) != 0);
    CHECK(!file_exists(out));

    /* an earlier file at --out survives a failed export */
    write_file(out, "keep", 4);
    CHECK(llm_export(orig, other_ckpt, out, LLM_EXPORT_GGUF, LLM_GGUF_Q8_0, err, sizeof err) != 0);
    kept = lt_read_file(out, &n);
    CHECK(kept && n == 4 && memcmp(kept, "keep", 4) == 0);
    free(kept);
    unlink(out);

    /* a llama2.c original: no metadata or tokenizer to copy */
    CHECK(llm_export(llama2c, ckpt, out, LLM_EXPORT_GGUF, LLM_GGUF_F32, err, sizeof err) != 0);
    CHECKF(strstr(err, "llama2.c") != NULL, "%s", err);
    CHECK(!file_exists(out));

    /* an unwritable --out */
    CHECK(llm_export(orig, ckpt, "/nonexistent-grzo-dir/x.gguf", LLM_EXPORT_GGUF, LLM_GGUF_F32, err, sizeof err) != 0);
    CHECKF(strstr(err, "/nonexistent-grzo-dir/x.gguf") != NULL, "%s", err);
    CHECK(temporaries_left() == 0);
}

/* A file size limit for this process (SIGXFSZ ignored: a write past it fails with EFBIG),
   or with limit 0 the previous one back. */
static void limit_file_size(rlim_t limit)
{
    static struct rlimit old;
    static void (*prev)(int);
    struct rlimit lim;
    if (!limit) {
        REQUIRE(setrlimit(RLIMIT_FSIZE, &old) == 0, "setrlimit");
        signal(SIGXFSZ, prev);
        return;
    }
    prev = signal(SIGXFSZ, SIG_IGN);
    REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0, "getrlimit");
    lim = old;
    lim.rlim_cur = limit;
    REQUIRE(setrlimit(RLIMIT_FSIZE, &lim) == 0, "setrlimit");
}

/* A tokenizer file that a folder's safetensors export copies, failing only when it is closed:
   a model small enough that its files fit under the limit, and a tokenizer_config.json over
   it that still fits stdio's buffer (4096 bytes: the write succeeds, the flush fails).
   Refused with "cannot write", nothing left. */
static void test_copy_write_error(void)
{
    toy_opts o = toy_defaults();
    llm_config c;
    llm_weights w;
    char src[512], ckpt[512], out[512], err[512] = "", pad[3800];
    struct stat model, config;
    o.dim = 8, o.hidden = 8, o.layers = 1, o.heads = 1, o.kv_heads = 1, o.vocab = 4;
    snprintf(src, sizeof src, "%s/tiny.gguf", dir);
    snprintf(ckpt, sizeof ckpt, "%s/tiny.grzo", dir);
    make_original(&o, src, ckpt, &c, &w);
    snprintf(src, sizeof src, "%s/st_tiny", dir);   /* the Hugging Face original */
    REQUIRE(llm_safetensors_write(&c, &w, LLM_ST_F32, 1, 2, src, err, sizeof err) == 0, "%s", err);
    llm_weights_free(&w);
    REQUIRE(stat(lt_path(src, "model.safetensors"), &model) == 0 && stat(lt_path(src, "config.json"), &config) == 0 &&
                model.st_size + 64 < (off_t)sizeof pad && config.st_size < model.st_size,
            "the tiny model's files take %lld bytes", (long long)model.st_size);
    memset(pad, ' ', sizeof pad);
    pad[0] = '{', pad[sizeof pad - 1] = '}';
    write_file(lt_path(src, "tokenizer_config.json"), pad, sizeof pad);
    snprintf(out, sizeof out, "%s/st_tiny_out", dir);
    limit_file_size((rlim_t)model.st_size + 32);
    CHECK(llm_export(src, ckpt, out, LLM_EXPORT_SAFETENSORS, LLM_GGUF_F32, err, sizeof err) != 0);
    limit_file_size(0);
    CHECKF(strstr(err, "tokenizer_config.json: cannot write") != NULL, "%s", err);
    CHECK(!file_exists(out) && temporaries_left() == 0);
    unlink(lt_path(src, "tokenizer_config.json"));
}

/* A full disk, as a file size limit: each format refuses with "cannot write" and leaves no
   file, folder or temporary. The limit lies inside the weights, past the stdio buffer and
   the headers. */
static void test_write_errors(const char *orig, const char *ckpt)
{
    static const llm_export_format formats[] = {LLM_EXPORT_SAFETENSORS, LLM_EXPORT_GGUF};
    int i;
    limit_file_size(64 * 1024);
    for (i = 0; i < 2; i++) {
        char out[512], err[512] = "";
        snprintf(out, sizeof out, "%s/full_disk%d", dir, i);
        CHECK(llm_export(orig, ckpt, out, formats[i], LLM_GGUF_F32, err, sizeof err) != 0);
        CHECKF(strstr(err, "cannot write") != NULL, "format %d: %s", (int)formats[i], err);
        CHECK(!file_exists(out));
    }
    limit_file_size(0);
    CHECK(temporaries_left() == 0);
    test_copy_write_error();
}

/* llm_export_check_gguf (grzo-finetune --export, before training) on files, whose tokenizer it
   does not need: a GGUF original passes; a llama2.c one is refused as llm_export refuses it; a
   missing file is named; a missing argument is refused (a folder's tokenizer: test_hf_refusals) */
static void test_export_check(const char *orig, const char *ckpt, const char *llama2c)
{
    llm_config cfg;
    llm_weights w;
    char err[512] = "", late[512] = "", out[512];
    REQUIRE(llm_load(orig, &cfg, &w, NULL, err, sizeof err) == 0, "load %s: %s", orig, err);
    CHECKF(llm_export_check_gguf(orig, &cfg, NULL, err, sizeof err) == 0, "%s", err);
    CHECK(llm_export_check_gguf(llama2c, &cfg, NULL, err, sizeof err) != 0);
    snprintf(out, sizeof out, "%s/refused.gguf", dir);
    CHECK(llm_export(llama2c, ckpt, out, LLM_EXPORT_GGUF, LLM_GGUF_F32, late, sizeof late) != 0);
    CHECKF(strstr(err, "is a llama2.c checkpoint") != NULL && strcmp(err, late) == 0, "'%s' before, '%s' after", err, late);
    CHECK(llm_export_check_gguf("/nonexistent-grzo-model.gguf", &cfg, NULL, err, sizeof err) != 0);
    CHECKF(strstr(err, "/nonexistent-grzo-model.gguf") != NULL, "%s", err);
    CHECK(llm_export_check_gguf(NULL, &cfg, NULL, err, sizeof err) != 0);
    CHECK(llm_export_check_gguf(orig, NULL, NULL, err, sizeof err) != 0);
    CHECK(llm_export_check_gguf(dir, &cfg, NULL, err, sizeof err) != 0);   /* a folder without its tokenizer */
    CHECKF(strstr(err, "missing argument") != NULL, "%s", err);
    CHECK(llm_gguf_check_model(&cfg, NULL, err, sizeof err) != 0);
    llm_weights_free(&w);
}

/* rc and err of a call that must refuse a missing or invalid argument, and no file at out */
static void check_bad_argument(int rc, const char *err, const char *out, const char *what)
{
    CHECKF(rc != 0 && strstr(err, "missing or invalid argument") != NULL, "%s: rc %d, '%s'", what, rc, err);
    CHECKF(!file_exists(out), "%s: %s written", what, out);
}

/* Each writer refuses each missing or invalid argument on its own, before reading anything
   (with one operand of its check dropped, the call below would read a NULL or write a file).
   tok512.bin stands in for a GGUF tokenizer: the arguments are checked before the tokenizer. */
static void test_bad_arguments(const char *orig, const char *ckpt, const llm_config *cfg, const llm_weights *w,
                               const char *data_dir)
{
    char out[512], err[512] = "";
    llm_weights no_arena = *w;
    llm_tokenizer *tok = NULL;
    llm_gguf_type type;
    llm_export_format fmt;
    size_t n = 0;
    uint8_t *img = lt_read_file(orig, &n);
    REQUIRE(img != NULL, "read %s", orig);
    REQUIRE(llm_tokenizer_load_llama2c(lt_path(data_dir, "tok512.bin"), 512, &tok, err, sizeof err) == 0, "%s", err);
    no_arena.arena = NULL;
    snprintf(out, sizeof out, "%s/bad_argument", dir);
#define BAD(call) check_bad_argument(call, err, out, #call)
    BAD(llm_gguf_write(NULL, n, cfg, w, LLM_GGUF_F32, out, err, sizeof err));
    BAD(llm_gguf_write(img, n, NULL, w, LLM_GGUF_F32, out, err, sizeof err));
    BAD(llm_gguf_write(img, n, cfg, NULL, LLM_GGUF_F32, out, err, sizeof err));
    BAD(llm_gguf_write(img, n, cfg, &no_arena, LLM_GGUF_F32, out, err, sizeof err));
    BAD(llm_gguf_write(img, n, cfg, w, LLM_GGUF_F32, NULL, err, sizeof err));
    BAD(llm_gguf_write(img, n, cfg, w, LLM_GGUF_F32, "", err, sizeof err));
    BAD(llm_gguf_write(img, n, cfg, w, (llm_gguf_type)4, out, err, sizeof err));
    BAD(llm_gguf_write_model(NULL, w, tok, "m", LLM_GGUF_F32, out, err, sizeof err));
    BAD(llm_gguf_write_model(cfg, NULL, tok, "m", LLM_GGUF_F32, out, err, sizeof err));
    BAD(llm_gguf_write_model(cfg, &no_arena, tok, "m", LLM_GGUF_F32, out, err, sizeof err));
    BAD(llm_gguf_write_model(cfg, w, NULL, "m", LLM_GGUF_F32, out, err, sizeof err));
    BAD(llm_gguf_write_model(cfg, w, tok, NULL, LLM_GGUF_F32, out, err, sizeof err));
    BAD(llm_gguf_write_model(cfg, w, tok, "m", LLM_GGUF_F32, NULL, err, sizeof err));
    BAD(llm_gguf_write_model(cfg, w, tok, "m", LLM_GGUF_F32, "", err, sizeof err));
    BAD(llm_gguf_write_model(cfg, w, tok, "m", (llm_gguf_type)4, out, err, sizeof err));
    BAD(llm_safetensors_write(NULL, w, LLM_ST_F32, 1, 2, out, err, sizeof err));
    BAD(llm_safetensors_write(cfg, NULL, LLM_ST_F32, 1, 2, out, err, sizeof err));
    BAD(llm_safetensors_write(cfg, &no_arena, LLM_ST_F32, 1, 2, out, err, sizeof err));
    BAD(llm_safetensors_write(cfg, w, LLM_ST_F32, 1, 2, NULL, err, sizeof err));
    BAD(llm_safetensors_write(cfg, w, LLM_ST_F32, 1, 2, "", err, sizeof err));
    BAD(llm_safetensors_write(cfg, w, (llm_st_dtype)3, 1, 2, out, err, sizeof err));
    BAD(llm_export(NULL, ckpt, out, LLM_EXPORT_GGUF, LLM_GGUF_F32, err, sizeof err));
    BAD(llm_export(orig, NULL, out, LLM_EXPORT_GGUF, LLM_GGUF_F32, err, sizeof err));
    BAD(llm_export(orig, ckpt, NULL, LLM_EXPORT_GGUF, LLM_GGUF_F32, err, sizeof err));
    BAD(llm_export(orig, ckpt, "", LLM_EXPORT_GGUF, LLM_GGUF_F32, err, sizeof err));
    BAD(llm_export(orig, ckpt, out, (llm_export_format)2, LLM_GGUF_F32, err, sizeof err));
    BAD(llm_export(orig, ckpt, out, LLM_EXPORT_GGUF, (llm_gguf_type)4, err, sizeof err));
#undef BAD
    /* a one-character path is a path: refused for what it is, not as a missing argument */
    CHECK(llm_export(orig, ckpt, "/", LLM_EXPORT_SAFETENSORS, LLM_GGUF_F32, err, sizeof err) != 0);
    CHECKF(strstr(err, "/ already exists") != NULL, "%s", err);
    CHECK(llm_safetensors_write(cfg, w, LLM_ST_F32, 1, 2, "/", err, sizeof err) != 0);
    CHECKF(strstr(err, "/ already exists") != NULL, "%s", err);
    CHECK(llm_gguf_write_model(cfg, w, tok, "m", LLM_GGUF_F32, "x", err, sizeof err) != 0);
    CHECKF(strstr(err, "character BPE") != NULL, "%s", err);
    CHECK(llm_gguf_write(img, 16, cfg, w, LLM_GGUF_F32, "x", err, sizeof err) != 0);   /* a truncated original */
    CHECKF(strstr(err, "invalid argument") == NULL && !file_exists("x"), "%s", err);
    /* the parsers: NULL is no name; out may be NULL where only the answer is wanted */
    CHECK(llm_gguf_type_parse(NULL, &type) != 0 && llm_export_format_parse(NULL, &fmt) != 0);
    CHECK(llm_gguf_type_parse("q8_0", NULL) == 0 && llm_gguf_type_parse("q4_0", NULL) != 0);
    CHECK(llm_export_format_parse("safetensors", &fmt) == 0 && fmt == LLM_EXPORT_SAFETENSORS);
    CHECK(llm_export_as(orig, ckpt, out, "q4_0", err, sizeof err) != 0);
    CHECKF(strstr(err, "unknown export type 'q4_0'") != NULL && !file_exists(out), "%s", err);
    llm_tokenizer_free(tok);
    free(img);
}

/* ---- a Hugging Face folder -> GGUF (llm_gguf_write_model) ---- */

/* Tokenizers of hf_tokenizer_cases.py that llama.cpp has by name, each with a model of
   llama_ref.py (all with llama3 rope_scaling; untied, sharded with head_dim != dim/heads,
   tied with rows of 48 that q8_0 writes as F16); gpt2_gap has an id without a token, which
   the converter writes as "[PAD<id>]" (gguf_read_export.py --hf checks the tokens). */
static const char *const hf_pipelines[][2] = {{"gpt2", "hf_llama3_untied_f32"},
                                              {"gpt2_gap", "hf_llama3_untied_f32"},
                                              {"llama3", "hf_llama3_sharded_f16"},
                                              {"smollm", "hf_llama3_tied_bf16"}};

static void shell(const char *cmd)
{
    fflush(stdout);
    REQUIRE(system(cmd) == 0, "failed: %s", cmd);
}

/* work/NAME: llama_ref.py's model VARIANT with the tokenizer folder tok_dir/TOK. */
static void make_hf(const char *python, const char *ref, const char *work, const char *name, const char *variant,
                    const char *tok_dir, const char *tok)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' '%s' make-hf --out '%s/%s' --variant %s --tokenizer '%s/%s' >/dev/null", python, ref, work,
             name, variant, tok_dir, tok);
    shell(cmd);
}

/* The f32 export's metadata tampered with: rope_freqs.weight must then be refused. */
static void test_rope_freqs_refusals(const char *f32)
{
    static const char key[] = "grzo.rope.llama3.factor";
    char err[512] = "";
    llm_config c;
    llm_weights w;
    size_t n = 0, at;
    uint8_t *d = lt_read_file(f32, &n);
    REQUIRE(d != NULL, "read %s", f32);
    /* factor 8 -> 7: the tensor's factors no longer follow from the keys */
    at = find_bytes(d, n, key, sizeof key - 1);
    REQUIRE(at != (size_t)-1, "no %s", key);
    {
        float seven = 7.0f;
        memcpy(d + at + sizeof key - 1 + 4, &seven, 4);
    }
    CHECK(llm_load_memory(d, n, &c, &w, NULL, err, sizeof err) != 0);
    CHECKF(strstr(err, "rope_freqs.weight' differs") != NULL, "%s", err);
    /* the key renamed (as a file of llama.cpp's converter has no grzo keys) */
    d[at + sizeof key - 2] = 'R';
    CHECK(llm_load_memory(d, n, &c, &w, NULL, err, sizeof err) != 0);
    CHECKF(strstr(err, "without the llama3 parameters") != NULL, "%s", err);
    free(d);
}

/* The f32 export of a folder as the original of a GGUF export: its rope_freqs.weight, which
   is no weight of the forward, is copied as it is (the loader compares it with the llama3
   keys), the weights converted. */
static void test_reexport(const char *f32, const char *ckpt, const llm_config *cfg, const llm_weights *w)
{
    char out[1200], err[512] = "";
    llm_config c2;
    llm_weights w2;
    snprintf(out, sizeof out, "%s.q8_0.gguf", f32);
    REQUIRE(llm_export(f32, ckpt, out, LLM_EXPORT_GGUF, LLM_GGUF_Q8_0, err, sizeof err) == 0, "re-export %s: %s", f32, err);
    REQUIRE(llm_load(out, &c2, &w2, NULL, err, sizeof err) == 0, "load %s: %s", out, err);
    CHECKF(memcmp(cfg, &c2, sizeof c2) == 0, "%s: the config differs", out);
    CHECKF(compare(cfg, w, &w2, LLM_GGUF_Q8_0) > 0, "%s: not converted", out);
    llm_weights_free(&w2);
}

/* The folder named with a trailing slash, and relative to the working directory without
   any slash: the same file (general.name is the folder's name; gguf_read_export.py --hf
   checks it). */
static void test_folder_spellings(const char *work, const char *name, const char *ckpt, const char *f32)
{
    char cwd[1024], folder[1100], out[1200], err[512] = "";
    int i;
    REQUIRE(getcwd(cwd, sizeof cwd) != NULL, "getcwd");
    for (i = 0; i < 2; i++) {
        uint8_t *a, *b;
        size_t na = 0, nb = 0;
        if (i) {   /* the other paths are absolute: meson's build folder */
            REQUIRE(chdir(work) == 0, "chdir %s", work);
            snprintf(folder, sizeof folder, "%s", name);
        } else {
            snprintf(folder, sizeof folder, "%s/%s/", work, name);
        }
        snprintf(out, sizeof out, "%s.%d.gguf", f32, i);
        CHECKF(llm_export(folder, ckpt, out, LLM_EXPORT_GGUF, LLM_GGUF_F32, err, sizeof err) == 0, "%s: %s", folder, err);
        REQUIRE(chdir(cwd) == 0, "chdir %s", cwd);
        a = lt_read_file(f32, &na);
        b = lt_read_file(out, &nb);
        CHECKF(a && b && na == nb && memcmp(a, b, na) == 0, "%s (from %s) differs from %s", out, folder, f32);
        free(a);
        free(b);
    }
}

/* A folder fine-tuned, exported at each type and loaded back: f32 bit for bit (config with
   its rope scaling, weights, the tokenizer's ids on cases.txt), the others within the
   type's rounding; then the f32 file read by the gguf package. */
static void test_hf_pipeline(const char *python, const char *ref, const char *read_script, const char *work,
                             const char *tok_dir, const char *tok_name, const char *variant)
{
    static const char *const type_names[] = {"f32", "f16", "bf16", "q8_0"};
    char folder[1024], ckpt[1024], out[1024], path[1200], cmd[4096], err[512] = "";
    llm_config cfg, c2;
    llm_weights w, w2;
    llm_tokenizer *tok = NULL, *t2 = NULL;
    int type;
    make_hf(python, ref, work, tok_name, variant, tok_dir, tok_name);
    snprintf(folder, sizeof folder, "%s/%s", work, tok_name);
    snprintf(ckpt, sizeof ckpt, "%s/%s.grzo", work, tok_name);
    REQUIRE(llm_load(folder, &cfg, &w, &tok, err, sizeof err) == 0, "load %s: %s", folder, err);
    CHECK(cfg.rope_scaling == LLM_ROPE_SCALING_LLAMA3);
    CHECKF(llm_export_check_gguf(folder, &cfg, tok, err, sizeof err) == 0, "%s: %s", folder, err);
    tune_and_save(&cfg, &w, ckpt);
    for (type = 0; type < 4; type++) {
        uint64_t differ;
        snprintf(out, sizeof out, "%s/%s-%s.gguf", work, tok_name, type_names[type]);
        REQUIRE(llm_export(folder, ckpt, out, LLM_EXPORT_GGUF, (llm_gguf_type)type, err, sizeof err) == 0, "export %s: %s", out,
                err);
        REQUIRE(llm_load(out, &c2, &w2, &t2, err, sizeof err) == 0, "load %s: %s", out, err);
        CHECKF(memcmp(&cfg, &c2, sizeof c2) == 0, "%s: the config differs", out);
        differ = compare(&cfg, &w, &w2, (llm_gguf_type)type);
        CHECKF(type == LLM_GGUF_F32 ? differ == 0 : differ > 0, "%s: %llu values differ", out, (unsigned long long)differ);
        if (type == LLM_GGUF_F32) {
            snprintf(path, sizeof path, "%s/%s/cases.txt", tok_dir, tok_name);
            lt_compare_cases(t2, path, tok_name);
            CHECK(strcmp(llm_tokenizer_model(t2), "gpt2") == 0);
            CHECK(strcmp(llm_tokenizer_pre(t2), llm_tokenizer_pre(tok)) == 0);
            CHECK(strcmp(llm_tokenizer_chat_template(t2), llm_tokenizer_chat_template(tok)) == 0);
            CHECK(llm_tokenizer_bos(t2) == llm_tokenizer_bos(tok) && llm_tokenizer_eos(t2) == llm_tokenizer_eos(tok));
            CHECK(llm_tokenizer_wants_bos(t2) == llm_tokenizer_wants_bos(tok));
            {   /* the ids the public interface does not show: unknown and padding */
                llm_tokenizer_view a, b;
                llm__tokenizer_view(tok, &a);
                llm__tokenizer_view(t2, &b);
                CHECK(a.unk == b.unk && a.pad == b.pad);
                CHECK(strcmp(tok_name, "llama3") || a.pad >= 0);   /* its tokenizer_config.json has a pad_token */
            }
            snprintf(cmd, sizeof cmd, "'%s' '%s' --hf '%s' '%s'", python, read_script, folder, out);
            fflush(stdout);
            CHECKF(system(cmd) == 0, "the gguf package's reader disagrees on %s (above)", out);
            if (!strcmp(tok_name, "llama3")) {
                test_rope_freqs_refusals(out);
                test_reexport(out, ckpt, &cfg, &w);
                test_folder_spellings(work, tok_name, ckpt, out);
            }
        }
        llm_tokenizer_free(t2);
        llm_weights_free(&w2);
    }
    llm_tokenizer_free(tok);
    llm_weights_free(&w);
}

/* Tokenizers that llama.cpp would encode differently: refused, naming why, no file left; and
   refused the same by llm_export_check_gguf, which grzo-finetune --export asks before training. */
static void test_hf_refusals(const char *python, const char *ref, const char *work, const char *tok_dir)
{
    static const char *const cases[][3] = {{"llama2", "hf_llama2_mha_f32", "character BPE"},
                                           {"gpt2_prefix", "hf_llama3_untied_f32", "add_prefix_space"},
                                           {"gpt2_noregex", "hf_llama3_untied_f32", "without a regex"},
                                           {"gpt2_space", "hf_llama3_untied_f32", "names a token with a space"}};
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char folder[1024], ckpt[1024], out[1024], err[512] = "", early[512] = "";
        llm_config cfg;
        llm_weights w;
        llm_tokenizer *tok = NULL;
        make_hf(python, ref, work, cases[i][0], cases[i][1], tok_dir, cases[i][0]);
        snprintf(folder, sizeof folder, "%s/%s", work, cases[i][0]);
        snprintf(ckpt, sizeof ckpt, "%s/%s.grzo", work, cases[i][0]);
        snprintf(out, sizeof out, "%s/%s.gguf", work, cases[i][0]);
        REQUIRE(llm_load(folder, &cfg, &w, &tok, err, sizeof err) == 0, "load %s: %s", folder, err);
        CHECK(llm_export_check_gguf(folder, &cfg, tok, early, sizeof early) != 0);
        tune_and_save(&cfg, &w, ckpt);
        llm_tokenizer_free(tok);
        llm_weights_free(&w);
        CHECK(llm_export(folder, ckpt, out, LLM_EXPORT_GGUF, LLM_GGUF_F32, err, sizeof err) != 0);
        CHECKF(strstr(err, cases[i][2]) != NULL && strstr(err, folder) != NULL, "%s: %s", cases[i][0], err);
        CHECKF(strcmp(early, err) == 0, "%s: the check before training says '%s', the export '%s'", cases[i][0], early, err);
        CHECK(!file_exists(out));
    }
}

/* test_llm_export --hf CASES_SCRIPT LLAMA_REF READ_SCRIPT PYLIB WORK PYTHON... */
static int main_hf(int argc, char **argv)
{
    const char *python, *work = argv[6];
    char tok_dir[1024], cmd[4096];
    size_t i;
    REQUIRE(argc >= 8, "usage: test_llm_export --hf CASES_SCRIPT LLAMA_REF READ_SCRIPT PYLIB WORK PYTHON...");
    python = lt_python_importing("numpy, gguf, safetensors, tokenizers", argv[5], argv + 7, argc - 7);
    if (!python) {
        printf("SKIP: no Python with numpy, gguf, safetensors and tokenizers (tests/run.sh installs them into %s)\n", argv[5]);
        return 77;
    }
    snprintf(tok_dir, sizeof tok_dir, "%s/tok", work);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s' && '%s' '%s' '%s' >/dev/null", work, work, python, argv[2], tok_dir);
    shell(cmd);
    for (i = 0; i < sizeof hf_pipelines / sizeof hf_pipelines[0]; i++)
        test_hf_pipeline(python, argv[3], argv[4], work, tok_dir, hf_pipelines[i][0], hf_pipelines[i][1]);
    test_hf_refusals(python, argv[3], work, tok_dir);
    return lt_finish("test_llm_export --hf");
}

int main(int argc, char **argv)
{
    toy_opts o = toy_defaults();
    llm_config cfg;
    llm_weights tuned;
    char orig[512], ckpt[512], llama2c[512];
    llm_export_format fmt;
    const char *tmp = getenv("TMPDIR");

    const char *python = NULL;
    if (argc > 1 && !strcmp(argv[1], "--hf")) return main_hf(argc, argv);
    REQUIRE(argc == 2 || argc >= 5, "usage: test_llm_export DATA_DIR [SCRIPT PYLIB PYTHON...]");
    if (argc >= 5 && !(python = lt_python_importing("numpy, gguf", argv[3], argv + 4, argc - 4))) {
        printf("SKIP: no interpreter imports the gguf package (tests/run.sh installs it into %s)\n", argv[3]);
        return 77;
    }
    snprintf(llama2c, sizeof llama2c, "%s/stories260K.bin", argv[1]);
    snprintf(dir, sizeof dir, "%s/grzo_export_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    REQUIRE(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(orig, sizeof orig, "%s/original.gguf", dir);
    snprintf(ckpt, sizeof ckpt, "%s/tuned.grzo", dir);
    o.untied = 1;
    o.extra_kv = 1;
    o.alignment = 64;
    make_original(&o, orig, ckpt, &cfg, &tuned);

    CHECK(llm_export_format_parse("gguf", &fmt) == 0 && fmt == LLM_EXPORT_GGUF);
    CHECK(llm_export_format_parse("ggml", &fmt) != 0);
    test_f32_round_trip(orig, &cfg, &tuned, ckpt);
    test_types(orig, &cfg, &tuned, ckpt);
    test_safetensors(orig, &cfg, &tuned, ckpt);
    test_safetensors_llama2c(llama2c);
    test_refusals(orig, ckpt, llama2c);
    test_write_errors(orig, ckpt);
    test_export_check(orig, ckpt, llama2c);
    test_bad_arguments(orig, ckpt, &cfg, &tuned, argv[1]);
    if (python) CHECKF(read_with_gguf_package(argv[2], python, orig) == 0, "the gguf package's reader disagrees (above)");
    llm_weights_free(&tuned);
    if (!lt_failures) {
        DIR *d = opendir(dir);
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL)
            if (e->d_name[0] != '.' && unlink(lt_path(dir, e->d_name)) != 0) {   /* a safetensors folder */
                char sub[600];
                snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
                unlink(lt_path(sub, "model.safetensors"));
                unlink(lt_path(sub, "config.json"));
                rmdir(sub);
            }
        if (d) closedir(d);
        rmdir(dir);
    }
    return lt_finish("test_llm_export");
}
