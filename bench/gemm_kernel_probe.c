/* gemm_kernel_probe.c - run by meson at configure time (cc.run) for the summary: the GEMM
   kernels the CPU backend will run on this machine and a plain GEMM's GFLOP/s (1 thread,
   1024x576x576, best of 5), with the environment grzo's programs would set first. */
#define _POSIX_C_SOURCE 200809L
#define GRZO_IMPLEMENTATION
#include "grzo.h"
#include "backends/grzo_cpu.h"
#include "examples/common/cpu_env.h"
#ifdef _OPENMP
#include <omp.h>
#endif

int main(int argc, char **argv)
{
    grzo_backend be;
    grzo_cpu_desc cd;
    const char *line = "", *warning = "";
    (void)argc;
    cpu_env_reexec(argv);
#ifdef _OPENMP
    omp_set_num_threads(1);   /* OpenBLAS's OpenMP build follows it */
#endif
    memset(&cd, 0, sizeof cd);
    cd.n_threads = 1;
    if (grzo_backend_cpu_create(&cd, &be) != GRZO_OK || grzo_backend_cpu_kernels(&be, &line, &warning) != GRZO_OK) {
        printf("no CPU backend\n");
        return 1;
    }
    printf("%s; 1 thread %.0f GFLOP/s%s\n", line, cpu_env_gemm_gflops(&be, 1024, 576, 576, 5),
           getenv("GRZO_KERNEL_ENV_SET") ? " (programs set OPENBLAS_CORETYPE/BLIS_ARCH_TYPE)" : "");
    grzo_backend_destroy(&be);
    return 0;
}
