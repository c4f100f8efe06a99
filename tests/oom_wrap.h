/* oom_wrap.h - an allocator that fails on request, for the out-of-memory tests
   (test_cpu_oom.c, finetune/test_tasks_oom.c, llm/test_llm_oom.c).

   Include it in one file of a program linked with
   -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc: every call of malloc, calloc or realloc
   in the objects linked into the program (not the C library's own calls, nor a shared
   library's) then comes to the wrappers below. oom_arm(at, n) starts a count: the
   allocations at .. at + n - 1 of it fail (n = 1: just the at-th; at < 1: none, which
   counts a run's allocations in oom.calls); oom_disarm() stops it. oom.failed says how many
   have failed since arming, so a test knows whether a run reached its failure.
   fnv / fnv_str fold a run's results into the fingerprint (FNV-1a 64 from FNV0) that is
   compared with the clean run's. */
#ifndef GRZO_TESTS_OOM_WRAP_H
#define GRZO_TESTS_OOM_WRAP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);

typedef struct oom_countdown { int armed; long calls, fail_at, n_fail, failed; } oom_countdown;
static oom_countdown oom;   /* the wrappers have no other way to reach it */

static void oom_arm(long fail_at, long n_fail)
{
    oom.calls = 0;
    oom.failed = 0;
    oom.fail_at = fail_at;
    oom.n_fail = n_fail;
    oom.armed = 1;
}
static void oom_disarm(void) { oom.armed = 0; }

static int oom_fails_now(void)
{
    if (!oom.armed) return 0;
    oom.calls++;
    if (oom.fail_at < 1 || oom.calls < oom.fail_at || oom.calls >= oom.fail_at + oom.n_fail) return 0;
    oom.failed++;
    return 1;
}
void *__wrap_malloc(size_t n) { return oom_fails_now() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t size) { return oom_fails_now() ? NULL : __real_calloc(n, size); }
/* a failing realloc leaves the block as it was, as the C library's does */
void *__wrap_realloc(void *p, size_t n) { return oom_fails_now() ? NULL : __real_realloc(p, n); }

#if defined(__GNUC__) || defined(__clang__)
#define OOM_UNUSED __attribute__((unused))   /* test_cpu_oom compares floats, not fingerprints */
#else
#define OOM_UNUSED
#endif
#define FNV0 14695981039346656037ull
OOM_UNUSED static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = (const unsigned char *)p;
    size_t i;
    for (i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}
OOM_UNUSED static uint64_t fnv_str(uint64_t h, const char *s) { return fnv(h, s ? s : "(null)", s ? strlen(s) + 1 : 7); }

#endif
