/* fuzz_driver.h - the plain driver of the grzo fuzz targets (tests/fuzz, tests/llm), for
   builds without libFuzzer: what meson's 'fuzz' suite runs, with any compiler.

   A target defines LLVMFuzzerTestOneInput and, outside FUZZ_WITH_LIBFUZZER builds, has
       int main(int argc, char **argv) { return fuzz_main(argc, argv, "NAME", write_corpus_or_NULL); }
   fuzz_main parses
       NAME [--runs N] [--seed S] [--max-len BYTES] CORPUS_DIR_OR_FILE...
       NAME --write-corpus DIR          (only when the target can write its seed files)
   replays every corpus file, then runs N random mutations of them (bit flips, interesting
   integers over fields, truncation, insertion, deletion, chunk copies, splicing). The
   mutations are a pure function of the seed, so a failure reproduces with the same
   arguments. Each input is handed to the target in an exact-size copy, so that reads past
   its end show under AddressSanitizer. */
#ifndef GRZO_FUZZ_DRIVER_H
#define GRZO_FUZZ_DRIVER_H

#ifndef FUZZ_WITH_LIBFUZZER

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli_args.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#if defined(__GNUC__) || defined(__clang__)
#define FUZZ_UNUSED __attribute__((unused))
#else
#define FUZZ_UNUSED
#endif

typedef struct fuzz_blob {
    uint8_t *p;
    size_t n;
} fuzz_blob;

typedef struct fuzz_corpus {
    fuzz_blob *v;
    size_t n, cap;
} fuzz_corpus;

typedef struct fuzz_rng {
    uint64_t s;
} fuzz_rng;

static uint64_t fuzz_rnd(fuzz_rng *r) /* splitmix64 */
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static size_t fuzz_below(fuzz_rng *r, size_t n)
{
    return n ? (size_t)(fuzz_rnd(r) % n) : 0;
}

static void *fuzz_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        fprintf(stderr, "fuzz: out of memory\n");
        exit(2);
    }
    return q;
}

static void fuzz_corpus_add(fuzz_corpus *c, uint8_t *p, size_t n)
{
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 16;
        c->v = (fuzz_blob *)fuzz_xrealloc(c->v, c->cap * sizeof *c->v);
    }
    c->v[c->n].p = p;
    c->v[c->n].n = n;
    c->n++;
}

static int fuzz_read_into(fuzz_corpus *c, const char *path, size_t max_len)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    size_t n = 0, got;
    if (!f) return 1;
    do { /* no fseek/ftell: the size is what can be read */
        buf = (uint8_t *)fuzz_xrealloc(buf, n + 65536);
        got = fread(buf + n, 1, 65536, f);
        n += got;
    } while (got == 65536 && n <= max_len);
    if (ferror(f)) {
        free(buf);
        fclose(f);
        return 1;
    }
    fclose(f);
    if (n > max_len) { /* too big to mutate quickly: skipped */
        free(buf);
        return 0;
    }
    fuzz_corpus_add(c, buf, n);
    return 0;
}

static int fuzz_load_path(fuzz_corpus *c, const char *path, size_t max_len, const char *name)
{
    struct stat st;
    DIR *dir;
    struct dirent *e;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "%s: %s: not found\n", name, path);
        return 1;
    }
    if (!S_ISDIR(st.st_mode)) return fuzz_read_into(c, path, max_len);
    dir = opendir(path);
    if (!dir) return 1;
    while ((e = readdir(dir)) != NULL) {
        char full[4096];
        if (e->d_name[0] == '.') continue;
        snprintf(full, sizeof full, "%s/%s", path, e->d_name);
        if (stat(full, &st) == 0 && S_ISREG(st.st_mode) && fuzz_read_into(c, full, max_len)) {
            closedir(dir);
            return 1;
        }
    }
    closedir(dir);
    return 0;
}

/* Values that break parsers: sizes at the edges of every integer width. */
static uint64_t fuzz_interesting(fuzz_rng *r)
{
    static const uint64_t v[] = {0, 1, 2, 3, 4, 7, 8, 16, 31, 32, 33, 63, 64, 127, 128, 255, 256, 1000, 4096,
                                 0x7fff, 0x8000, 0xffff, 0x10000, 0x7fffffff, 0x80000000u, 0xffffffffu,
                                 0x100000000ull, 0x7fffffffffffffffull, 0x8000000000000000ull, 0xffffffffffffffffull};
    return v[fuzz_below(r, sizeof v / sizeof v[0])];
}

/* Decimal numbers for text formats: counts near the edges of size_t and long. */
static const char *fuzz_interesting_text(fuzz_rng *r)
{
    static const char *const v[] = {"0", "1", "-1", "2", "4294967295", "4294967296", "9223372036854775807",
                                    "9223372036854775808", "18446744073709551615", "18446744073709551616",
                                    "2305843009213693951", "2305843009213693952", "99999999999999999999", "1e3",
                                    "\t", "\n", "\"", ",", "\\u0000", "\xff", "\xc3\xa9"};
    return v[fuzz_below(r, sizeof v / sizeof v[0])];
}

static void fuzz_insert(fuzz_blob *b, size_t pos, const uint8_t *p, size_t n)
{
    b->p = (uint8_t *)fuzz_xrealloc(b->p, b->n + n + 1);
    memmove(b->p + pos + n, b->p + pos, b->n - pos);
    memcpy(b->p + pos, p, n);
    b->n += n;
}

/* One random edit of b (which owns a malloc'd buffer). */
static void fuzz_mutate_once(fuzz_rng *r, fuzz_blob *b, const fuzz_corpus *c)
{
    size_t pos, k, n;
    uint64_t v;
    uint8_t tmp[16];
    switch (fuzz_below(r, 10)) {
    case 0: /* flip a bit */
        if (b->n) b->p[fuzz_below(r, b->n)] ^= (uint8_t)(1u << fuzz_below(r, 8));
        break;
    case 1: /* random byte */
        if (b->n) b->p[fuzz_below(r, b->n)] = (uint8_t)fuzz_rnd(r);
        break;
    case 2: /* interesting integer, 1/2/4/8 bytes, often on an aligned field */
    case 3:
        n = (size_t)1 << fuzz_below(r, 4);
        if (b->n < n) break;
        pos = fuzz_below(r, b->n - n + 1);
        if (fuzz_below(r, 2)) pos -= pos % n;
        v = fuzz_interesting(r);
        if (fuzz_below(r, 4) == 0) v = (uint64_t)b->n - fuzz_below(r, 64); /* near the file size */
        for (k = 0; k < n; k++) b->p[pos + k] = (uint8_t)(v >> (8 * k));
        break;
    case 4: /* truncate */
        if (b->n) b->n = fuzz_below(r, b->n);
        break;
    case 5: /* insert random bytes */
        n = 1 + fuzz_below(r, 16);
        for (k = 0; k < n; k++) tmp[k] = (uint8_t)fuzz_rnd(r);
        fuzz_insert(b, fuzz_below(r, b->n + 1), tmp, n);
        break;
    case 6: /* delete a range */
        if (!b->n) break;
        pos = fuzz_below(r, b->n);
        n = 1 + fuzz_below(r, b->n - pos < 64 ? b->n - pos : 64);
        memmove(b->p + pos, b->p + pos + n, b->n - pos - n);
        b->n -= n;
        break;
    case 7: /* copy a chunk over another place */
        if (b->n < 2) break;
        n = 1 + fuzz_below(r, b->n / 2);
        pos = fuzz_below(r, b->n - n + 1);
        k = fuzz_below(r, b->n - n + 1);
        memmove(b->p + k, b->p + pos, n);
        break;
    case 8: { /* insert an interesting decimal number or separator (text formats) */
        const char *s = fuzz_interesting_text(r);
        fuzz_insert(b, fuzz_below(r, b->n + 1), (const uint8_t *)s, strlen(s));
        break;
    }
    default: { /* splice: our head, another file's tail */
        const fuzz_blob *o = &c->v[fuzz_below(r, c->n)];
        size_t head = fuzz_below(r, b->n + 1), from = fuzz_below(r, o->n + 1);
        b->p = (uint8_t *)fuzz_xrealloc(b->p, head + (o->n - from) + 1);
        memcpy(b->p + head, o->p + from, o->n - from);
        b->n = head + (o->n - from);
        break;
    }
    }
}

static void fuzz_run_one(const uint8_t *p, size_t n)
{
    uint8_t *copy = (uint8_t *)fuzz_xrealloc(NULL, n);
    if (n) memcpy(copy, p, n);
    LLVMFuzzerTestOneInput(copy, n);
    free(copy);
}

/* For write_corpus callbacks: DIR/NAME gets the bytes. */
FUZZ_UNUSED static int fuzz_write_file(const char *dir, const char *name, const void *p, size_t n)
{
    char path[4096];
    FILE *f;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) {
        if (f) fclose(f);   /* a short write: the handle is still open */
        fprintf(stderr, "fuzz: cannot write %s\n", path);
        return 1;
    }
    if (fclose(f) != 0) {
        fprintf(stderr, "fuzz: cannot write %s\n", path);
        return 1;
    }
    printf("wrote %s (%zu bytes)\n", path, n);
    return 0;
}

static int fuzz_usage(const char *name, int can_write)
{
    fprintf(stderr, "usage: %s [--runs N] [--seed S] [--max-len BYTES] CORPUS_DIR_OR_FILE...\n", name);
    if (can_write) fprintf(stderr, "       %s --write-corpus DIR\n", name);
    return 2;
}

static int fuzz_main(int argc, char **argv, const char *name, int (*write_corpus)(const char *dir))
{
    fuzz_corpus c = {NULL, 0, 0};
    fuzz_rng rng;
    int64_t runs = 10000, max_len = 1 << 20, r;
    uint64_t seed = 1;
    size_t i;
    int a;
    char err[256];
    clock_t t0 = clock();

    for (a = 1; a < argc; a++) {
        const char *opt = argv[a], *val = a + 1 < argc ? argv[a + 1] : NULL;
        int bad = 0;
        if (opt[0] != '-') {
            if (fuzz_load_path(&c, opt, (size_t)max_len, name)) return 2;
            continue;
        }
        if (!val) return fuzz_usage(name, write_corpus != NULL);
        a++;
        if (!strcmp(opt, "--runs")) bad = cli_parse_int(opt, val, 0, INT64_MAX, &runs, err, sizeof err);
        else if (!strcmp(opt, "--seed")) bad = cli_parse_u64(opt, val, &seed, err, sizeof err);
        else if (!strcmp(opt, "--max-len")) bad = cli_parse_int(opt, val, 1, 1 << 30, &max_len, err, sizeof err);
        else if (!strcmp(opt, "--write-corpus") && write_corpus) return write_corpus(val);
        else return fuzz_usage(name, write_corpus != NULL);
        if (bad) {
            fprintf(stderr, "%s: %s\n", name, err);
            return 2;
        }
    }
    if (c.n == 0) {
        fprintf(stderr, "%s: empty corpus\n", name);
        return 2;
    }
    rng.s = seed;
    for (i = 0; i < c.n; i++) fuzz_run_one(c.v[i].p, c.v[i].n);
    for (r = 0; r < runs; r++) {
        const fuzz_blob *src = &c.v[fuzz_below(&rng, c.n)];
        fuzz_blob b;
        int k, edits = 1 + (int)fuzz_below(&rng, 4);
        b.n = src->n;
        b.p = (uint8_t *)fuzz_xrealloc(NULL, b.n + 1);
        memcpy(b.p, src->p, b.n);
        for (k = 0; k < edits; k++) fuzz_mutate_once(&rng, &b, &c);
        fuzz_run_one(b.p, b.n);
        free(b.p);
    }
    printf("%s: %zu corpus files replayed, %lld mutated inputs, seed %llu, %.1f s: no crash\n", name, c.n,
           (long long)runs, (unsigned long long)seed, (double)(clock() - t0) / CLOCKS_PER_SEC);
    for (i = 0; i < c.n; i++) free(c.v[i].p);
    free(c.v);
    return 0;
}

#endif /* FUZZ_WITH_LIBFUZZER */
#endif /* GRZO_FUZZ_DRIVER_H */
