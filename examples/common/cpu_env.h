/* cpu_env.h - grzo's programs run the GEMM kernels of the CPU they are on.

   Debian's OpenBLAS and BLIS fall back to older kernels on CPUs newer than themselves
   (backends/grzo_cpu_kernels.h) and read the remedy from the environment only when they
   initialize. cpu_env_reexec() sets the variables grzo_cpu_kernel_env() names and re-executes
   the program once (OpenBLAS itself writes OPENBLAS_CORETYPE=<the core it chose>, so a value
   already there is replaced; set GRZO_KERNEL_ENV_SET=1 to keep your own choice); cpu_env_report() prints the kernels in use,
   any remaining warning, and a plain GEMM's measured GFLOP/s through the backend.

   Header-only: include after backends/grzo_cpu.h in a program compiled with
   _POSIX_C_SOURCE >= 200809L (setenv, execv, clock_gettime). */
#ifndef GRZO_CPU_ENV_H
#define GRZO_CPU_ENV_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Call first in main(). Returns only if no re-exec was needed or it failed (then the
   backend's warning says what to set). */
static inline void cpu_env_reexec(char **argv)
{
    const char *name;
    char value[32], self[4096];
    ssize_t len;
    int i, changed = 0;
    if (getenv("GRZO_KERNEL_ENV_SET")) return;   /* this is the re-executed program */
    for (i = 0; grzo_cpu_kernel_env(i, &name, value, sizeof value); i++)
        if (setenv(name, value, 1) == 0) changed = 1;
    if (!changed) return;
    /* exec the program's own path, not /proc/self/exe: the process keeps its name (its comm,
       which pgrep/pkill -x grzo-finetune and ps match), only its environment changes */
    len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0 || (size_t)len >= sizeof self - 1) return;
    self[len] = '\0';
    setenv("GRZO_KERNEL_ENV_SET", "1", 1);
    fflush(NULL);
    execv(self, argv);
}

static inline double cpu_env_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* GFLOP/s of a plain linear (m x k) (n x k)^T on the backend, best of `reps`; 0 on failure */
static inline double cpu_env_gemm_gflops(const grzo_backend *be, int64_t m, int64_t n, int64_t k, int reps)
{
    float *x = (float *)calloc((size_t)(m * k), sizeof(float)), *w = (float *)calloc((size_t)(n * k), sizeof(float));
    float *y = (float *)calloc((size_t)(m * n), sizeof(float));
    grzo_linear_args a;
    double best = 0.0;
    int r;
    int64_t i;
    if (x && w && y) {
        for (i = 0; i < m * k; i++) x[i] = (float)((i % 13) - 6) * 0.01f;
        for (i = 0; i < n * k; i++) w[i] = (float)((i % 7) - 3) * 0.01f;
        memset(&a, 0, sizeof a);
        a.w.data = w;
        a.w.rows = n;
        a.w.cols = k;
        a.w.kind = GRZO_BLOCK_MATRIX;
        a.w.dtype = GRZO_DTYPE_F32;
        a.x = x;
        a.y = y;
        a.n_rows = m;
        for (r = 0; r < reps; r++) {
            double t = cpu_env_now(), g;
            if (be->iface->linear(be->self, &a) != GRZO_OK) break;
            t = cpu_env_now() - t;
            g = 2.0 * (double)m * (double)n * (double)k / t * 1e-9;
            if (g > best) best = g;
        }
    }
    free(x);
    free(w);
    free(y);
    return best;
}

/* "GEMM kernel: ...; plain GEMM 512x576x576: N GFLOP/s" and the warning, if any, to `f` */
static inline void cpu_env_report(FILE *f, const char *prefix, const grzo_backend *be)
{
    const char *line = "", *warning = "";
    if (grzo_backend_cpu_kernels(be, &line, &warning) != GRZO_OK) return;
    fprintf(f, "%s%s; plain GEMM 512x576x576: %.1f GFLOP/s\n", prefix, line, cpu_env_gemm_gflops(be, 512, 576, 576, 5));
    if (warning[0]) fprintf(f, "%sWARNING: %s\n", prefix, warning);
}

/* fp32 peak: 12 independent FMA chains per thread (AVX-512, else AVX2, else 0: unknown) */
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
/* 12 named accumulators (an array would live in memory): t##0 .. t##11 */
#define CPU_ENV_FMA12(T, fmadd)                                                                   \
    T##0 = fmadd(T##0, m, c); T##1 = fmadd(T##1, m, c); T##2 = fmadd(T##2, m, c);                 \
    T##3 = fmadd(T##3, m, c); T##4 = fmadd(T##4, m, c); T##5 = fmadd(T##5, m, c);                 \
    T##6 = fmadd(T##6, m, c); T##7 = fmadd(T##7, m, c); T##8 = fmadd(T##8, m, c);                 \
    T##9 = fmadd(T##9, m, c); T##10 = fmadd(T##10, m, c); T##11 = fmadd(T##11, m, c);
#define CPU_ENV_PEAK_FN(name, tgt, vec, set1, fmadd, add, lanes)                                  \
    __attribute__((target(tgt))) static inline double name(long n)                                    \
    {                                                                                           \
        vec m = set1(0.999999f), c = set1(1e-7f), s;                                            \
        vec a0 = set1(0), a1 = set1(1), a2 = set1(2), a3 = set1(3), a4 = set1(4), a5 = set1(5); \
        vec a6 = set1(6), a7 = set1(7), a8 = set1(8), a9 = set1(9), a10 = set1(10), a11 = set1(11); \
        float out[lanes];                                                                       \
        double t = cpu_env_now();                                                               \
        long r;                                                                                 \
        for (r = 0; r < n; r++) {                                                               \
            CPU_ENV_FMA12(a, fmadd)                                                             \
            __asm__ volatile("" ::: "memory");                                                  \
        }                                                                                       \
        t = cpu_env_now() - t;                                                                  \
        s = add(add(add(add(a0, a1), add(a2, a3)), add(add(a4, a5), add(a6, a7))),              \
                add(add(a8, a9), add(a10, a11)));                                               \
        memcpy(out, &s, sizeof out);                                                            \
        return out[0] == 12345.0f ? 0.0 : (double)n * 12.0 * 2.0 * lanes / t * 1e-9;            \
    }
CPU_ENV_PEAK_FN(cpu_env_peak512, "avx512f", __m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps, 16)
CPU_ENV_PEAK_FN(cpu_env_peak256, "avx2,fma", __m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps, 8)
static inline double cpu_env_peak_thread(void)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return cpu_env_peak512(5000000);
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return cpu_env_peak256(5000000);
    return 0.0;
}
#else
static inline double cpu_env_peak_thread(void) { return 0.0; }
#endif

/* the machine's fp32 peak over `threads` threads (sum of the threads' rates, best of 8
   short runs: on a shared machine the best run is the one nobody else disturbed) */
static inline double cpu_env_peak_gflops(int threads)
{
    double best = 0.0;
    int r;
    for (r = 0; r < 8; r++) {
        double sum = 0.0;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads) reduction(+ : sum)
        sum += cpu_env_peak_thread();
#else
        (void)threads;
        sum = cpu_env_peak_thread();
#endif
        if (sum > best) best = sum;
    }
    return best;
}

#endif /* GRZO_CPU_ENV_H */
