/* test_llm_llama2c.c - llama2.c checkpoints.

   usage: test_llm_llama2c DATA_DIR          (DATA_DIR = tests/data)

   - stories260K.bin loads with its known config (dim 64, hidden 172, 5 layers, 8 heads,
     4 kv heads, vocab 512, seq 512, tied), and every weight array equals the bytes at the
     offset llama2.c's layout gives it (offsets computed here, independently);
   - a synthetic untied checkpoint (negative vocab) puts the classifier after the rotary
     tables, and every float lands where the layout says;
   - every prefix of a checkpoint, header edits (zero, negative and huge sizes, INT32_MIN
     vocab, heads that do not divide, llama2.c's versioned "ak42" export) and random flips
     give an error, never a crash or a huge allocation;
   - paths that are not readable files (shared by every loader: llm__read_file): a
     directory as a tokenizer gives "<path>: is a directory" (it used to give
     "out of memory reading 9223372036854775807 bytes"; as a model, llm_load reads it as a
     Hugging Face folder and says it has no config.json), a missing file and an unreadable
     one give the system's reason (no such file, permission denied; the latter is only
     checked when not running as root, whom file modes do not stop). */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "llm_test.h"
#include "toy_model.h"

static float file_float(const uint8_t *d, uint64_t index)
{
    const uint8_t *p = d + 28 + 4 * index;
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Compare n floats of the loaded array with the file's floats from float index `at`. */
static int same_as_file(const float *got, const uint8_t *d, uint64_t at, uint64_t n, const char *what)
{
    uint64_t i;
    for (i = 0; i < n; i++)
        if (memcmp(&got[i], &(float){file_float(d, at + i)}, 4) != 0) {
            fprintf(stderr, "    %s[%llu]: got %.9g, file has %.9g\n", what, (unsigned long long)i, (double)got[i],
                    (double)file_float(d, at + i));
            return 0;
        }
    return 1;
}

/* Check every weight of a loaded llama2.c model against the file, by llama2.c's layout. */
static void check_layout(const llm_config *c, const llm_weights *w, const uint8_t *d, int untied)
{
    uint64_t D = (uint64_t)c->dim, H = (uint64_t)c->hidden_dim, L = (uint64_t)c->n_layers, V = (uint64_t)c->vocab_size;
    uint64_t hs = D / (uint64_t)c->n_heads, KV = (uint64_t)c->n_kv_heads * hs, S = (uint64_t)c->max_seq_len;
    uint64_t at = 0, l;
    CHECK(same_as_file(w->tok_emb, d, at, V * D, "tok_emb"));
    at += V * D;
#define PER_LAYER(field, count)                                                              \
    for (l = 0; l < L; l++, at += (count)) CHECK(same_as_file(w->layers[l].field, d, at, (count), #field));
    PER_LAYER(attn_norm, D)
    PER_LAYER(wq, D * D)
    PER_LAYER(wk, D * KV)
    PER_LAYER(wv, D * KV)
    PER_LAYER(wo, D * D)
    PER_LAYER(ffn_norm, D)
    PER_LAYER(w1, H * D)
    PER_LAYER(w2, D * H)
    PER_LAYER(w3, H * D)
#undef PER_LAYER
    CHECK(same_as_file(w->final_norm, d, at, D, "final_norm"));
    at += D;
    at += S * hs; /* freq_cis_real and freq_cis_imag, S * hs/2 each */
    if (untied) {
        CHECK(w->output != w->tok_emb);
        CHECK(same_as_file(w->output, d, at, V * D, "output"));
    } else {
        CHECK(w->output == w->tok_emb);
    }
}

static void test_stories260k(const char *dir)
{
    const char *path = lt_path(dir, "stories260K.bin");
    llm_config c;
    llm_weights w;
    llm_tokenizer *tok = (llm_tokenizer *)&c; /* must come back NULL: llama2.c has no embedded tokenizer */
    char err[512] = "";
    size_t size;
    uint8_t *d;
    REQUIRE(llm_load(path, &c, &w, &tok, err, sizeof err) == 0, "stories260K: %s", err);
    CHECK(tok == NULL);
    CHECKF(c.dim == 64 && c.hidden_dim == 172 && c.n_layers == 5 && c.n_heads == 8 && c.n_kv_heads == 4 &&
               c.head_dim == 8 && c.vocab_size == 512 && c.max_seq_len == 512 && c.tied_output == 1,
           "config %d %d %d %d %d %d %d %d %d", (int)c.dim, (int)c.hidden_dim, (int)c.n_layers, (int)c.n_heads,
           (int)c.n_kv_heads, (int)c.head_dim, (int)c.vocab_size, (int)c.max_seq_len, (int)c.tied_output);
    CHECK(c.norm_eps == 1e-5f && c.rope_theta == 10000.0f);
    d = lt_read_file(path, &size);
    REQUIRE(d != NULL && size == 1056540, "cannot read %s (or its size changed)", path);
    check_layout(&c, &w, d, 0);
    llm_weights_free(&w);
    free(d);
}

static void test_synthetic(void)
{
    size_t size;
    uint8_t *d = toy_llama2c(16, 24, 2, 4, 2, 10, 6, 1, &size);
    llm_config c;
    llm_weights w;
    char err[256] = "";
    REQUIRE(llm_load_memory(d, size, &c, &w, NULL, err, sizeof err) == 0, "untied toy: %s", err);
    CHECK(c.tied_output == 0 && c.vocab_size == 10 && c.head_dim == 4 && c.n_kv_heads == 2);
    check_layout(&c, &w, d, 1);
    /* the classifier is the last thing in the file */
    CHECK(w.output[10 * 16 - 1] == file_float(d, (size - 28) / 4 - 1));
    llm_weights_free(&w);
    free(d);
    d = toy_llama2c(16, 24, 2, 4, 2, 10, 6, 0, &size);
    REQUIRE(llm_load_memory(d, size, &c, &w, NULL, err, sizeof err) == 0, "tied toy: %s", err);
    check_layout(&c, &w, d, 0);
    llm_weights_free(&w);
    free(d);
}

static int fails_cleanly(const uint8_t *d, size_t n, const char *want)
{
    llm_config c;
    llm_weights w;
    char err[512] = "";
    int rc = llm_load_memory(d, n, &c, &w, NULL, err, sizeof err);
    if (rc == 0) {
        llm_weights_free(&w);
        fprintf(stderr, "    loaded a damaged checkpoint (%zu bytes)\n", n);
        return 0;
    }
    if (!err[0] || w.arena) return 0;
    if (want && !strstr(err, want)) {
        fprintf(stderr, "    error \"%s\" lacks \"%s\"\n", err, want);
        return 0;
    }
    return 1;
}

static void set_header(uint8_t *d, int field, int32_t v)
{
    uint32_t u = (uint32_t)v;
    int i;
    for (i = 0; i < 4; i++) d[4 * field + i] = (uint8_t)(u >> (8 * i));
}

static void test_damage(void)
{
    size_t size, len;
    uint8_t *full = toy_llama2c(16, 24, 2, 4, 2, 10, 6, 1, &size);
    uint8_t *d = (uint8_t *)malloc(size);
    int bad = 0, it;
    lt_rng r = {7};
    static const struct {
        int field;
        int32_t value;
        const char *want;
    } edits[] = {
        {0, 0, "width"},          {0, -16, "width"},         {0, 1 << 21, "width"},      {1, 0, "feed-forward"},
        {2, -1, "layer"},         {3, 0, "head count"},      {3, 6, "head size"},        {4, 3, "key/value"},
        {4, 8, "key/value"},      {5, 0, "vocabulary"},      {5, INT32_MIN, "vocabulary"}, {6, 0, "context"},
        {6, 1 << 29, "size mismatch"}, {5, INT32_MAX, "size mismatch"}, {1, 1 << 20, "size mismatch"},
        {2, 1 << 16, "size mismatch"},
    };
    size_t i;
    REQUIRE(d != NULL, "out of memory");
    for (len = 0; len < size; len++) {
        uint8_t *cut = (uint8_t *)malloc(len ? len : 1);
        REQUIRE(cut != NULL, "out of memory");
        memcpy(cut, full, len);
        if (!fails_cleanly(cut, len, NULL)) bad++;
        free(cut);
    }
    CHECKF(bad == 0, "%d prefixes did not fail cleanly", bad);
    /* no bytes at all (llm_load_memory accepts NULL, 0): the loader once computed NULL + 28
       before its size check (undefined behaviour, clang's -fsanitize=pointer-overflow) */
    CHECK(fails_cleanly(NULL, 0, "shorter than a llama2.c header"));
    for (i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        memcpy(d, full, size);
        set_header(d, edits[i].field, edits[i].value);
        CHECKF(fails_cleanly(d, size, edits[i].want), "header field %d = %d", edits[i].field, (int)edits[i].value);
    }
    /* one more float than the header accounts for */
    {
        uint8_t *longer = (uint8_t *)malloc(size + 4);
        REQUIRE(longer != NULL, "out of memory");
        memcpy(longer, full, size);
        memset(longer + size, 0, 4);
        CHECK(fails_cleanly(longer, size + 4, "size mismatch"));
        free(longer);
    }
    memcpy(d, full, size);
    set_header(d, 0, 0x616b3432); /* llama2.c's versioned exports start with this uint32 */
    CHECK(fails_cleanly(d, size, "ak42"));
    for (it = 0; it < 3000; it++) {
        int k;
        llm_config c;
        llm_weights w;
        char err[256];
        memcpy(d, full, size);
        for (k = 0; k < 3; k++) d[lt_below(&r, 28)] ^= (uint8_t)(1u << lt_below(&r, 8));
        if (llm_load_memory(d, size, &c, &w, NULL, err, sizeof err) == 0) llm_weights_free(&w);
    }
    free(d);
    free(full);
}

/* Every loader that takes a path refuses it with an error containing want (llm_load:
   want_load, which differs for a directory: llm_load reads it as a Hugging Face folder). */
static void expect_path_refused2(const char *path, const char *want_load, const char *want)
{
    llm_config c;
    llm_weights w;
    llm_tokenizer *t = NULL;
    char err[512];
    int k;
    for (k = 0; k < 3; k++) {
        int rc;
        const char *what = k == 0 ? "llm_load" : k == 1 ? "llm_tokenizer_load_llama2c" : "llm_tokenizer_load_gguf";
        err[0] = '\0';
        t = NULL;
        if (k == 0) rc = llm_load(path, &c, &w, &t, err, sizeof err);
        else if (k == 1) rc = llm_tokenizer_load_llama2c(path, 0, &t, err, sizeof err);
        else rc = llm_tokenizer_load_gguf(path, &t, err, sizeof err);
        CHECKF(rc != 0 && t == NULL, "%s(%s) succeeded", what, path);
        CHECKF(strstr(err, path) != NULL && strstr(err, k == 0 ? want_load : want) != NULL, "%s(%s): \"%s\" lacks \"%s\"",
               what, path, err, k == 0 ? want_load : want);
        if (rc == 0 && k == 0) llm_weights_free(&w);
        llm_tokenizer_free(t);
    }
}

static void expect_path_refused(const char *path, const char *want)
{
    expect_path_refused2(path, want, want);
}

static void test_paths(const char *dir)
{
    char missing[4096], unreadable[64] = "/tmp/grzo_llm_unreadable_XXXXXX", below[128];
    int fd;
    expect_path_refused2(dir, "no config.json", "is a directory");
    snprintf(missing, sizeof missing, "%s/no-such-model.bin", dir);
    expect_path_refused(missing, strerror(ENOENT));
    fd = mkstemp(unreadable);
    REQUIRE(fd >= 0, "mkstemp: %s", strerror(errno));
    REQUIRE(write(fd, "x", 1) == 1, "write: %s", strerror(errno));
    close(fd);
    snprintf(below, sizeof below, "%s/model.bin", unreadable);   /* a file used as a folder */
    expect_path_refused(below, strerror(ENOTDIR));
    REQUIRE(chmod(unreadable, 0) == 0, "chmod: %s", strerror(errno));
    if (access(unreadable, R_OK) != 0) expect_path_refused(unreadable, strerror(EACCES));
    else printf("test_paths: running as root, file modes do not stop reads: permission denied not checked\n");
    remove(unreadable);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s DATA_DIR\n", argv[0]);
        return 1;
    }
    test_stories260k(argv[1]);
    test_synthetic();
    test_damage();
    test_paths(argv[1]);
    return lt_finish("test_llm_llama2c");
}
