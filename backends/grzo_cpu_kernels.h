/* grzo_cpu_kernels.h - which GEMM kernels the CPU backend runs, and whether they are older
   than the CPU supports. Included by backends/grzo_cpu.h in the implementation TU.

   Debian 12's OpenBLAS 0.3.21 (DYNAMIC_ARCH) and BLIS 0.9.0 do not know CPUs newer than
   themselves and fall back silently: on an AMD family 26 (Zen 5) OpenBLAS picks its Haswell
   (AVX2) kernels, at half its SkylakeX (AVX-512) speed, and BLIS its portable C kernel; on a
   family 25 Zen 4 BLIS picks zen3's AVX2 kernels, which grzo's forming kernel cannot use; on
   some AVX-512 Xeons OpenBLAS picks Prescott (SSE3), 4-7x slower. Both read an environment
   variable when they initialize (OpenBLAS when it is loaded, BLIS at its first call), so
   only a program can fix it: grzo_cpu_kernel_env() names the settings, and grzo's programs
   set them and re-execute themselves (examples/common/cpu_env.h). The library only reports. */
#ifndef GRZO_CPU_KERNELS__IMPLEMENTED
#define GRZO_CPU_KERNELS__IMPLEMENTED

#ifdef GRZO_USE_BLIS
#include <blis.h>
#endif

/* 3: AVX-512 (F, DQ, BW, VL), 2: AVX2 + FMA, 1: AVX, 0: older or not x86-64 */
static int grzo__cpu_simd_level(void) {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
        return 3;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 2;
    if (__builtin_cpu_supports("avx")) return 1;
#endif
    return 0;
}

#if defined(GRZO_USE_OPENBLAS) || defined(GRZO_USE_BLIS)
static const char *grzo__simd_name(int level) {
    static const char *names[4] = {"SSE", "AVX", "AVX2", "AVX-512"};
    return names[level < 0 ? 0 : level > 3 ? 3 : level];
}
#endif

#ifdef GRZO_USE_OPENBLAS
static int grzo__name_is(const char *name, const char *const *list) {
    for (; *list; list++) {
        const char *a = name, *b = *list;
        while (*a && *b && ((*a | 0x20) == (*b | 0x20))) a++, b++;
        if (!*a && !*b) return 1;
    }
    return 0;
}

/* the SIMD level of an OpenBLAS DYNAMIC_ARCH core (openblas_get_corename()) */
static int grzo__openblas_core_level(const char *core) {
    static const char *const avx512[] = {"SkylakeX", "Cooperlake", "SapphireRapids", NULL};
    static const char *const avx2[] = {"Haswell", "Zen", "Excavator", NULL};
    static const char *const avx[] = {"Sandybridge", "Bulldozer", "Piledriver", "Steamroller", NULL};
    if (grzo__name_is(core, avx512)) return 3;
    if (grzo__name_is(core, avx2)) return 2;
    if (grzo__name_is(core, avx)) return 1;
    return 0;
}
static const char *grzo__openblas_core_for(int level) {
    return level >= 3 ? "SkylakeX" : level == 2 ? "Haswell" : "Sandybridge";
}
#endif

#ifdef GRZO_USE_BLIS
/* BLIS_ARCH_TYPE takes the arch_t number of a configuration compiled into the library */
static int grzo__blis_arch_for(int level) { return level >= 3 ? (int)BLIS_ARCH_SKX : (int)BLIS_ARCH_HASWELL; }

/* The SIMD level a BLIS configuration grzo runs needs (-1: one it does not run). Debian's
   x86_64 BLIS also holds knl and the FMA4 configurations of AMD's older cores, which modern
   CPUs cannot execute, and other platforms' ids, which it does not hold. */
static int grzo__blis_arch_level(long id) {
#if defined(__x86_64__)
    switch (id) {
    case BLIS_ARCH_SKX: return 3;
    case BLIS_ARCH_HASWELL: case BLIS_ARCH_ZEN: case BLIS_ARCH_ZEN2: case BLIS_ARCH_ZEN3: return 2;
    case BLIS_ARCH_SANDYBRIDGE: return 1;
    case BLIS_ARCH_PENRYN: case BLIS_ARCH_GENERIC: return 0;
    default: return -1;
    }
#else
    (void)id;
    return -1;
#endif
}

/* BLIS_ARCH_TYPE: 0 when unset, 1 with its number in *id, -1 when it is not a number */
static int grzo__blis_env_id(long *id) {
    const char *v = getenv("BLIS_ARCH_TYPE");
    char *end;
    if (!v) return 0;
    *id = strtol(v, &end, 10);
    return end != v && !*end ? 1 : -1;
}

/* 1 when BLIS picks its configuration itself (BLIS_ARCH_TYPE unset or -1): a configuration
   named in the environment is the user's (or grzo's programs' after their re-exec) choice */
static int grzo__blis_detects(void) {
    long id = -1;
    int set = grzo__blis_env_id(&id);
    return set == 0 || (set == 1 && id == -1);
}

/* 1 when BLIS may be called: BLIS_ARCH_TYPE unset (or -1, BLIS's own detection), or the id of
   a configuration above that this CPU runs. BLIS reads the variable at its first call and
   aborts the process (bli_abort) for an id it does not hold, and a configuration the CPU
   lacks the instructions for dies of SIGILL: the library calls neither. */
static int grzo__blis_usable(void) {
    long id = -1;
    int level;
    if (grzo__blis_detects()) return 1;
    if (grzo__blis_env_id(&id) < 0) return 0;
    level = grzo__blis_arch_level(id);
    return level >= 0 && level <= grzo__cpu_simd_level();
}

/* The configuration BLIS runs (call only when grzo__blis_usable()). BLIS initialised first:
   with BLIS_ARCH_TYPE set, BLIS 0.9's bli_arch_query_id() looks the id up among its contexts
   and aborts the process when they do not exist yet. */
static arch_t grzo__blis_arch(void) {
    bli_init();
    return bli_arch_query_id();
}

/* 1 when BLIS picked by itself a configuration of less than the CPU's SIMD level (2 or 3). BLIS
   0.9.0 knows neither AMD's Zen 4 nor Zen 5: on Zen 4 (AVX-512) it runs zen3's AVX2 kernels,
   whose layout grzo's forming kernel does not serve, so GRZO passes store each formed sliver
   (SmolLM2, `bench_llm --threads 1 --part time`: GRZO step 3.39 s against 2.93 s with skx's);
   on Zen 5 its portable C kernel, and the fused path is off. */
static int grzo__blis_older_than_cpu(int level) {
    int have;
    if (level < 2 || !grzo__blis_usable() || !grzo__blis_detects()) return 0;
    have = grzo__blis_arch_level((long)grzo__blis_arch());
    return have >= 0 && have < level;
}
#endif

/* Setting i (0, 1, ...) that would make the GEMM libraries use the CPU's kernels: returns 1
   and fills *name and value, or 0 past the last one. */
GRZO__DEF int grzo_cpu_kernel_env(int i, const char **name, char *value, size_t value_size) {
    int level = grzo__cpu_simd_level(), n = 0;
    if (!name || !value || value_size == 0) return 0;
#ifdef GRZO_USE_OPENBLAS
    if (grzo__openblas_core_level(openblas_get_corename()) < level && level >= 1 && n++ == i) {
        *name = "OPENBLAS_CORETYPE";
        snprintf(value, value_size, "%s", grzo__openblas_core_for(level));
        return 1;
    }
#endif
#ifdef GRZO_USE_BLIS
    if (grzo__blis_older_than_cpu(level) && n++ == i) {
        *name = "BLIS_ARCH_TYPE";
        snprintf(value, value_size, "%d", grzo__blis_arch_for(level));
        return 1;
    }
#endif
    (void)level, (void)n, (void)i;
    return 0;
}

/* cpu->kernels: one line for logs; cpu->warning: why it is slow and the remedy, or "" */
static void grzo__cpu_describe_kernels(grzo__cpu *cpu) {
    int level = grzo__cpu_simd_level();
    size_t k = 0, w = 0;
    cpu->kernels[0] = cpu->warning[0] = '\0';
    (void)level;
#ifdef GRZO_USE_OPENBLAS
    {
        const char *core = openblas_get_corename();
        k += (size_t)snprintf(cpu->kernels + k, sizeof cpu->kernels - k, "GEMM: OpenBLAS core %s (CPU: %s)", core,
                              grzo__simd_name(level));
        if (grzo__openblas_core_level(core) < level && level >= 1 && w < sizeof cpu->warning)
            w += (size_t)snprintf(cpu->warning + w, sizeof cpu->warning - w,
                                  "OpenBLAS runs its %s (%s) kernels on a CPU with %s: every GEMM runs up to 2-7x "
                                  "slower; set OPENBLAS_CORETYPE=%s (grzo's programs do it themselves). ",
                                  core, grzo__simd_name(grzo__openblas_core_level(core)), grzo__simd_name(level),
                                  grzo__openblas_core_for(level));
    }
#else
    k += (size_t)snprintf(cpu->kernels + k, sizeof cpu->kernels - k, "GEMM: portable C loops (no BLAS)");
#endif
#ifdef GRZO_USE_BLIS
    if (!grzo__blis_usable()) {
        if (k < sizeof cpu->kernels)
            snprintf(cpu->kernels + k, sizeof cpu->kernels - k, "; fused: BLIS not called (off: per-example GEMMs)");
        if (w < sizeof cpu->warning)
            snprintf(cpu->warning + w, sizeof cpu->warning - w,
                     "BLIS_ARCH_TYPE=%.32s names no BLIS configuration grzo runs on this CPU (BLIS would abort or "
                     "crash the program): the fused perturbed GEMM is off; unset it, or set one of skx %d, haswell "
                     "%d, zen3 %d that the CPU supports.",
                     getenv("BLIS_ARCH_TYPE"), (int)BLIS_ARCH_SKX, (int)BLIS_ARCH_HASWELL, (int)BLIS_ARCH_ZEN3);
        return;
    }
    if (k < sizeof cpu->kernels)
        k += (size_t)snprintf(cpu->kernels + k, sizeof cpu->kernels - k, "; fused: BLIS %s %s", bli_info_get_version_str(),
                              bli_arch_string(grzo__blis_arch()));
    if (!cpu->ukr && k < sizeof cpu->kernels)
        snprintf(cpu->kernels + k, sizeof cpu->kernels - k, " (off: per-example GEMMs)");
    if (grzo__blis_older_than_cpu(level) && w < sizeof cpu->warning) {
        const arch_t arch = grzo__blis_arch();
        const char *simd = arch == BLIS_ARCH_GENERIC ? "portable C" : grzo__simd_name(grzo__blis_arch_level((long)arch));
        snprintf(cpu->warning + w, sizeof cpu->warning - w,
                 "BLIS chose its %s (%s) kernels on a CPU with %s: %s; set BLIS_ARCH_TYPE=%d (grzo's programs do it "
                 "themselves).",
                 bli_arch_string(arch), simd, grzo__simd_name(level),
                 !cpu->ukr ? "the fused perturbed GEMM is off"
                           : "GRZO passes store every formed weight sliver (grzo's forming kernel needs skx's AVX-512 "
                             "layout): SmolLM2's GRZO step 16 % longer on a Zen 4",
                 grzo__blis_arch_for(level));
    }
#else
    (void)w;
#endif
}

#endif /* GRZO_CPU_KERNELS__IMPLEMENTED */
