/* test_failmalloc.c - a malloc that fails once on request, for a test copy of grzo-probe
   (examples/meson.build: linked with -Wl,--wrap=malloc, so that the probe's own calls come
   here). PROBE_FAIL_MALLOC_SIZE=N makes the first malloc of exactly N bytes return NULL:
   an out-of-memory path can then be reached on purpose, where it must clean up and exit
   with its one-line error instead of crashing. */
#include <stdlib.h>

void *__real_malloc(size_t n);
void *__wrap_malloc(size_t n);

void *__wrap_malloc(size_t n) {
    static long fail_size = -2;   /* -2: the variable not read yet; -1: no failure (left) */
    if (fail_size == -2) {
        const char *e = getenv("PROBE_FAIL_MALLOC_SIZE");
        fail_size = e ? atol(e) : -1;
    }
    if (fail_size >= 0 && (size_t)fail_size == n) {
        fail_size = -1;
        return NULL;
    }
    return __real_malloc(n);
}
