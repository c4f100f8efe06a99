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
static void cpu_env_reexec(char **argv)
{
    const char *name;
    char value[32];
    int i, changed = 0;
    if (getenv("GRZO_KERNEL_ENV_SET")) return;   /* this is the re-executed program */
    for (i = 0; grzo_cpu_kernel_env(i, &name, value, sizeof value); i++)
        if (setenv(name, value, 1) == 0) changed = 1;
    if (!changed) return;
    setenv("GRZO_KERNEL_ENV_SET", "1", 1);
    fflush(NULL);
    execv("/proc/self/exe", argv);
}

static double cpu_env_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* GFLOP/s of a plain linear (m x k) (n x k)^T on the backend, best of `reps`; 0 on failure */
static double cpu_env_gemm_gflops(const grzo_backend *be, int64_t m, int64_t n, int64_t k, int reps)
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
static void cpu_env_report(FILE *f, const char *prefix, const grzo_backend *be)
{
    const char *line = "", *warning = "";
    if (grzo_backend_cpu_kernels(be, &line, &warning) != GRZO_OK) return;
    fprintf(f, "%s%s; plain GEMM 512x576x576: %.1f GFLOP/s\n", prefix, line, cpu_env_gemm_gflops(be, 512, 576, 576, 5));
    if (warning[0]) fprintf(f, "%sWARNING: %s\n", prefix, warning);
}

#endif /* GRZO_CPU_ENV_H */
