/* bench_noise.c - the cost of regenerating perturbation noise on one CPU core: ns per element
   of grzo_noise_fill for Gaussian and Rademacher noise, and of the scalar Gaussian reference
   (grzo__noise_group + grzo__gauss4 one group of 4 at a time: what grzo_noise_fill did before
   its bulk path, and what grzo_noise_at still does). Also checks that the two Gaussian paths
   give the same bits.

   Each figure is the fastest of --rounds fills of --n elements (the same buffer, so the pages
   are touched before timing).

   Build (from the repository root):
     cc -std=c99 -O3 -I. -Iexamples/common bench/bench_noise.c examples/common/cli_args.c -lm -o bench_noise
   Run:  ./bench_noise [--n N] [--rounds R] [--quick] */
#define _POSIX_C_SOURCE 200809L
#define GRZO_IMPLEMENTATION
#include "grzo.h"
#include "cli_args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define USAGE "usage: %s [--n N] [--rounds R] [--quick] [--help]"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* the scalar reference: grzo_noise_fill's Gaussian loop before the bulk path */
static void scalar_gauss_fill(const grzo_noise *n, size_t count, float *out)
{
    size_t e;
    for (e = 0; e < count; e += 4) {
        uint32_t w[4];
        float g[4];
        size_t k;
        grzo__noise_group(n, (uint64_t)(e >> 2), w);
        grzo__gauss4(w, g);
        for (k = 0; k < 4 && e + k < count; k++) out[e + k] = g[k];
    }
}

enum { FILL_BULK, FILL_SCALAR };

/* ns per element: the fastest of `rounds` fills */
static double time_fill(int how, uint32_t dist, size_t count, int rounds, float *out)
{
    grzo_noise n;
    double best = 1e30;
    int r;
    memset(&n, 0, sizeof n);
    n.seed = 1;
    n.block = GRZO_USER_BLOCK;
    n.dist = dist;
    for (r = 0; r < rounds; r++) {
        double t0 = now_s(), t;
        if (how == FILL_BULK) grzo_noise_fill(&n, 0, count, out);
        else scalar_gauss_fill(&n, count, out);
        t = now_s() - t0;
        if (t < best) best = t;
    }
    return best / (double)count * 1e9;
}

static const char *widest_clone(void)
{
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
    if (__builtin_cpu_supports("x86-64-v4")) return "x86-64-v4 (AVX-512)";
    if (__builtin_cpu_supports("x86-64-v3")) return "x86-64-v3 (AVX2+FMA)";
    return "default (no FMA instruction: fma() is a libm call)";
#else
    return "none (one build, no run-time dispatch with this compiler)";
#endif
}

int main(int argc, char **argv)
{
    int64_t n = (int64_t)1 << 22, rounds = 5;
    size_t scalar_n;
    float *bulk, *ref;
    double g_bulk, g_scalar, rad;
    int i, same;
    char err[200];
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            printf(USAGE "\n", argv[0]);
            return 0;
        }
        if (strcmp(a, "--quick") == 0) {
            n = (int64_t)1 << 16;
            rounds = 2;
        } else if ((strcmp(a, "--n") == 0 || strcmp(a, "--rounds") == 0) && i + 1 < argc) {
            if (cli_parse_int(a, argv[++i], 1, (int64_t)1 << 30, strcmp(a, "--n") == 0 ? &n : &rounds, err, sizeof err) != 0) {
                fprintf(stderr, "bench_noise: %s\n", err);
                return 2;
            }
        } else {
            fprintf(stderr, USAGE "\n", argv[0]);
            return 2;
        }
    }
    bulk = (float *)malloc((size_t)n * sizeof(float));
    ref = (float *)malloc((size_t)n * sizeof(float));
    if (!bulk || !ref) {
        fprintf(stderr, "bench_noise: out of memory for %llu elements\n", (unsigned long long)n);
        return 1;
    }
    /* the scalar path is ~20x slower: time it on a quarter of the elements (rounded to groups) */
    scalar_n = (size_t)(n >= 16 ? (n / 4) & ~(int64_t)3 : n);
    g_bulk = time_fill(FILL_BULK, GRZO_NOISE_GAUSSIAN, (size_t)n, (int)rounds, bulk);
    g_scalar = time_fill(FILL_SCALAR, GRZO_NOISE_GAUSSIAN, scalar_n, (int)rounds, ref);
    same = memcmp(bulk, ref, scalar_n * sizeof(float)) == 0;
    rad = time_fill(FILL_BULK, GRZO_NOISE_RADEMACHER, (size_t)n, (int)rounds, bulk);
    printf("grzo_noise_fill, %llu elements, fastest of %llu, 1 thread; bulk Gaussian clone: %s\n",
           (unsigned long long)n, (unsigned long long)rounds, widest_clone());
    printf("| noise                                   | ns per element |\n");
    printf("|-----------------------------------------|----------------|\n");
    printf("| Gaussian, grzo_noise_fill (bulk)        | %14.2f |\n", g_bulk);
    printf("| Gaussian, scalar reference (4 at a time)| %14.2f |\n", g_scalar);
    printf("| Rademacher, grzo_noise_fill             | %14.2f |\n", rad);
    printf("bulk and scalar Gaussian bits: %s\n", same ? "identical" : "DIFFERENT");
    free(bulk);
    free(ref);
    return same ? 0 : 1;
}
