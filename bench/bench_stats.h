/* bench_stats.h - what the CPU step benchmarks (bench_mlp.c, bench_llm.c) share: the 1- and
   2-thread set a run interleaves, medians and percentiles of per-round ratios, and the
   /proc readings (peak RSS, load average) of a run on a shared machine. */
#ifndef GRZO_BENCH_STATS_H
#define GRZO_BENCH_STATS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* The thread counts a run compares, interleaved round by round: `threads` alone when it
   is > 0, else 1 and 2 (the 2-thread speedup is one of the printed targets). */
#define BENCH_MAX_TC 2
static inline int bench_thread_counts(int32_t threads, int32_t *tc)
{
    if (threads > 0) {
        tc[0] = threads;
        return 1;
    }
    tc[0] = 1;
    tc[1] = 2;
    return 2;
}

/* grzo_cpu_desc.n_threads sizes grzo's own loops only; OpenBLAS's OpenMP build sizes its
   GEMMs by the OpenMP default instead. Setting that default too makes T threads mean T
   threads everywhere (otherwise a "1-thread" run still has 2-thread GEMMs). */
static inline void bench_use_threads(int32_t threads)
{
#ifdef _OPENMP
    if (threads > 0)
        omp_set_num_threads(threads);
#else
    (void)threads;
#endif
}

static inline int bench_compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* q-quantile (0..1) of n values with linear interpolation; v is left unchanged */
static inline double bench_quantile(const double *v, int n, double q)
{
    double *s, pos, r;
    int lo;
    if (n <= 0)
        return NAN;
    s = (double *)malloc((size_t)n * sizeof *s);
    if (s == NULL)
        return NAN;
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, bench_compare_doubles);
    pos = q * (double)(n - 1);
    lo = (int)floor(pos);
    r = (lo + 1 < n) ? s[lo] + (pos - lo) * (s[lo + 1] - s[lo]) : s[lo];
    free(s);
    return r;
}

static inline void bench_ratios(const double *num, const double *den, int n, double *out)
{
    int i;
    for (i = 0; i < n; i++)
        out[i] = num[i] / den[i];
}

/* per-round ratio a/b, printed as one line: median [p10, p90] and the target; scratch
   holds `rounds` values */
static inline void bench_print_ratio(const char *what, const double *a, const double *b, int rounds, double *scratch,
                              const char *target)
{
    bench_ratios(a, b, rounds, scratch);
    printf("%s: median %.3f [p10 %.3f, p90 %.3f]%s\n", what, bench_quantile(scratch, rounds, 0.5),
           bench_quantile(scratch, rounds, 0.1), bench_quantile(scratch, rounds, 0.9), target);
}

/* reads a "Name:   1234 kB" line of /proc/self/status; -1 if absent */
static inline long bench_proc_status_kb(const char *name)
{
    char line[256];
    size_t len = strlen(name);
    long kb = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, name, len) == 0 && line[len] == ':') {
            kb = strtol(line + len + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return kb;
}

/* the 1-minute load average: timings taken while other programs ran are not comparable
   with quiet ones, so the report says how busy the machine was */
static inline double bench_load_average(void)
{
    double l = -1.0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f != NULL) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1.0;
        fclose(f);
    }
    return l;
}

#endif
