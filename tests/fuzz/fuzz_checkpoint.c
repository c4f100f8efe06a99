/* fuzz_checkpoint.c - fuzz target for grzo_checkpoint_load (grzo.h).

   Input: one flags byte, then the checkpoint file's bytes.
     flags bit 0     repair the checksums: recompute the header's FNV-1a (offset 248) and the
                     payload's (offset 24) after the mutation, so that mutated settings, block
                     tables and sizes get past the checksum to the checks behind it
     flags bits 1-3  the context's estimator (GRZO, canonical, shared, MeZO, FZOO)
     flags bits 4-6  B - 1 of the steps taken around the load
     flags bit 7     Gaussian noise (else Rademacher)
   Each input gets a fresh context on the reference backend with three blocks (a matrix, a
   vector and an embedding), which first takes one step of B examples, as a running program
   has before it resumes, so that its per-step buffers are sized. Then the file is loaded:
     - a refused load must leave an error message, the parameters, the settings and the
       step counter untouched;
     - an accepted load must leave settings that grzo_create accepts; then one more step of
       B runs (its buffers must fit the loaded settings), the context is saved and the
       saved file must load again.
   A violated invariant calls abort().

   Two builds:
     libFuzzer:  tests/fuzz/fuzz.sh checkpoint [SECONDS]
     plain:      fuzz_checkpoint [--runs N] [--seed S] CORPUS_DIR... (tests/fuzz/fuzz_driver.h)
     corpus:     fuzz_checkpoint --write-corpus DIR   writes the seed checkpoints of
                 tests/fuzz/corpus/checkpoint (one per estimator, checksums valid). */
#if !defined(_WIN32)
#define _POSIX_C_SOURCE 200809L
#endif

#define GRZO_IMPLEMENTATION
#include "grzo.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_driver.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { N_BLOCKS = 3, MAX_B = 8, HEADER = 256 };

typedef struct fixture {
    grzo_backend be;
    grzo_ctx *ctx;
    void *data[N_BLOCKS];
    size_t bytes[N_BLOCKS];
} fixture;

static const grzo_estimator ESTIMATORS[] = {GRZO_ESTIMATOR_GRZO, GRZO_ESTIMATOR_CANONICAL, GRZO_ESTIMATOR_SHARED,
                                            GRZO_ESTIMATOR_MEZO, GRZO_ESTIMATOR_FZOO};

static void require(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_checkpoint: invariant violated: %s\n", what);
        abort();
    }
}

/* A per-process scratch file: libFuzzer's -fork and -jobs run several processes at once. */
static const char *scratch_path(const char *suffix)
{
    static char buf[2][256];
    static int k;
    const char *dir = getenv("TMPDIR");
    k ^= 1;
    snprintf(buf[k], sizeof buf[k], "%s/grzo-fuzz-ckpt-%ld%s", dir && dir[0] ? dir : "/tmp", (long)getpid(), suffix);
    return buf[k];
}

static int fixture_open(fixture *fx, unsigned flags)
{
    static const struct {
        grzo_block_kind kind;
        int64_t rows, cols;
        const char *name;
    } blocks[N_BLOCKS] = {{GRZO_BLOCK_MATRIX, 3, 4, "w"}, {GRZO_BLOCK_VECTOR, 3, 1, "b"},
                          {GRZO_BLOCK_EMBEDDING, 5, 4, "emb"}};
    grzo_desc d;
    int i;
    memset(fx, 0, sizeof *fx);
    require(grzo_backend_ref_create(&fx->be) == GRZO_OK, "reference backend");
    memset(&d, 0, sizeof d);
    d.backend = &fx->be;
    d.estimator = ESTIMATORS[((flags >> 1) & 7) % 5];
    d.noise = flags & 0x80 ? GRZO_NOISE_GAUSSIAN : GRZO_NOISE_RADEMACHER;
    d.fzoo_probes = 1;   /* a checkpoint with more probes needs larger per-step buffers */
    d.seed = 7;
    require(grzo_create(&d, &fx->ctx) == GRZO_OK, "grzo_create");
    for (i = 0; i < N_BLOCKS; i++) {
        grzo_block_desc bd;
        grzo_block b;
        float *init;
        size_t k, n = (size_t)(blocks[i].rows * blocks[i].cols);
        fx->bytes[i] = n * sizeof(float);
        require(grzo_backend_alloc(&fx->be, fx->bytes[i], &fx->data[i]) == GRZO_OK, "block memory");
        init = (float *)malloc(fx->bytes[i]);
        require(init != NULL, "out of memory");
        for (k = 0; k < n; k++) init[k] = 0.01f * (float)(k + 1) - 0.1f * (float)i;
        require(grzo_backend_upload(&fx->be, fx->data[i], init, fx->bytes[i]) == GRZO_OK, "upload");
        free(init);
        memset(&bd, 0, sizeof bd);
        bd.kind = blocks[i].kind;
        bd.rows = blocks[i].rows;
        bd.cols = blocks[i].cols;
        bd.data = fx->data[i];
        bd.name = blocks[i].name;
        require(grzo_block_add(fx->ctx, &bd, &b) == GRZO_OK, "grzo_block_add");
    }
    return 0;
}

static void fixture_close(fixture *fx)
{
    int i;
    grzo_destroy(fx->ctx);
    for (i = 0; i < N_BLOCKS; i++) grzo_backend_free(&fx->be, fx->data[i]);
    grzo_backend_destroy(&fx->be);
}

/* Losses that differ per segment, so that normalizations divide by a nonzero spread. */
static grzo_status forward(grzo_ctx *ctx, const grzo_pass_info *pass, float *losses, void *user)
{
    int64_t s;
    (void)ctx, (void)user;
    for (s = 0; s < pass->n_segments; s++)
        losses[s] = 1.0f + 0.125f * (float)pass->sign[s] + 0.01f * (float)(pass->example[s] + pass->index);
    return GRZO_OK;
}

static grzo_status take_step(fixture *fx, int64_t B)
{
    grzo_step_report rep;
    return grzo_step(fx->ctx, B, forward, NULL, &rep);
}

/* Parameters, settings and step: what a refused load must not change. */
typedef struct snapshot {
    uint8_t params[256];
    grzo_desc desc;
    int64_t step;
} snapshot;

static void take_snapshot(fixture *fx, snapshot *s)
{
    size_t at = 0;
    int i;
    memset(s, 0, sizeof *s);
    for (i = 0; i < N_BLOCKS; i++) {
        require(at + fx->bytes[i] <= sizeof s->params, "snapshot size");
        require(grzo_backend_download(&fx->be, s->params + at, fx->data[i], fx->bytes[i]) == GRZO_OK, "download");
        at += fx->bytes[i];
    }
    require(grzo_get_desc(fx->ctx, &s->desc) == GRZO_OK, "grzo_get_desc");
    s->step = grzo_get_step(fx->ctx);
}

static int same_desc(const grzo_desc *a, const grzo_desc *b)
{
    return a->estimator == b->estimator && a->noise == b->noise && a->seed == b->seed && a->lr == b->lr &&
           a->sigma == b->sigma && a->norm_eps == b->norm_eps && a->weight_decay == b->weight_decay &&
           a->warmup_steps == b->warmup_steps && a->schedule == b->schedule && a->fzoo_probes == b->fzoo_probes;
}

static void put_u64(uint8_t *p, uint64_t v)
{
    int i;
    for (i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
    uint64_t h = 0xCBF29CE484222325ull;
    size_t i;
    for (i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001B3ull;
    return h;
}

static void repair_checksums(uint8_t *f, size_t n)
{
    if (n < HEADER) return;
    put_u64(f + 24, fnv1a(f + HEADER, n - HEADER));
    put_u64(f + 248, fnv1a(f, 248));
}

static void write_file(const char *path, const uint8_t *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    require(f != NULL && fwrite(p, 1, n, f) == n && fclose(f) == 0, "cannot write the scratch file");
}

static void check_accepted(fixture *fx, int64_t B)
{
    grzo_desc d;
    grzo_ctx *probe = NULL;
    grzo_status s;
    const char *saved = scratch_path(".resaved");
    require(grzo_get_desc(fx->ctx, &d) == GRZO_OK, "grzo_get_desc after a load");
    d.allocator.alloc_fn = NULL, d.allocator.free_fn = NULL, d.logger.func = NULL;
    require(grzo_create(&d, &probe) == GRZO_OK, "a load accepted settings that grzo_create refuses");
    grzo_destroy(probe);
    s = take_step(fx, B);   /* may fail (e.g. non-finite update), must not overflow */
    require(s == GRZO_OK || grzo_last_error(fx->ctx)[0] != 0, "a failed step left no message");
    require(grzo_checkpoint_save(fx->ctx, saved) == GRZO_OK, "save after a load");
    require(grzo_checkpoint_load(fx->ctx, saved) == GRZO_OK, "a saved checkpoint does not load again");
    remove(saved);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fixture fx;
    snapshot before, after;
    uint8_t *file;
    unsigned flags;
    int64_t B;
    size_t n;
    grzo_status s;
    const char *path = scratch_path(".ckpt");
    if (size < 1) return 0;
    flags = data[0];
    B = 1 + ((flags >> 4) & 7);
    n = size - 1;
    file = (uint8_t *)malloc(n ? n : 1);
    require(file != NULL, "out of memory");
    if (n) memcpy(file, data + 1, n);
    if (flags & 1) repair_checksums(file, n);
    write_file(path, file, n);
    free(file);

    fixture_open(&fx, flags);
    require(take_step(&fx, B) == GRZO_OK, "first step");
    take_snapshot(&fx, &before);
    s = grzo_checkpoint_load(fx.ctx, path);
    if (s == GRZO_OK) {
        check_accepted(&fx, B);
    } else {
        take_snapshot(&fx, &after);
        require(grzo_last_error(fx.ctx)[0] != 0, "a refused load left no message");
        require(memcmp(before.params, after.params, sizeof before.params) == 0, "a refused load changed parameters");
        require(same_desc(&before.desc, &after.desc) && before.step == after.step,
                "a refused load changed the settings or the step");
    }
    fixture_close(&fx);
    remove(path);
    return 0;
}

#ifndef FUZZ_WITH_LIBFUZZER

/* Seeds: a checkpoint of each estimator after three steps, with the flags byte that
   repairs checksums (bit 0) and selects that estimator (bits 1-3). */
static int write_corpus(const char *dir)
{
    int e, rc = 0;
    for (e = 0; e < 5; e++) {
        fixture fx;
        unsigned flags = 1u | (unsigned)(e << 1) | (1u << 4);
        const char *path = scratch_path(".seed");
        uint8_t *buf;
        long n = 0;
        FILE *f;
        char name[64];
        int k;
        fixture_open(&fx, flags);
        for (k = 0; k < 3; k++) require(take_step(&fx, 2) == GRZO_OK, "seed step");
        require(grzo_checkpoint_save(fx.ctx, path) == GRZO_OK, "seed save");
        fixture_close(&fx);
        f = fopen(path, "rb");
        require(f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0, "seed read");
        buf = (uint8_t *)malloc((size_t)n + 1);
        require(buf && fread(buf + 1, 1, (size_t)n, f) == (size_t)n, "seed read");
        fclose(f);
        remove(path);
        buf[0] = (uint8_t)flags;
        snprintf(name, sizeof name, "ckpt_estimator%d.bin", e);
        rc |= fuzz_write_file(dir, name, buf, (size_t)n + 1);
        free(buf);
    }
    return rc;
}

int main(int argc, char **argv)
{
    return fuzz_main(argc, argv, "fuzz_checkpoint", write_corpus);
}

#endif /* FUZZ_WITH_LIBFUZZER */
