/* oom_shim.c - an LD_PRELOAD shim that fails one chosen allocation of a program's own code,
   for the whole-process out-of-memory tests: finetune/test_finetune_oom.sh (grzo-finetune)
   and llm/test_tools_oom.sh (grzo-generate, grzo-export).

   Environment:
     GRZO_OOM_FAIL_AT=N      the N-th counted allocation (1-based) returns NULL; unset or 0:
                             none fails (a clean run, to learn the total)
     GRZO_OOM_COUNT_FILE=F   at exit, the number of counted allocations is written to F
     GRZO_OOM_WHERE_FILE=F   the failed allocation's caller, as an address in the executable
                             file (for addr2line -e), is written to F when it fails
     GRZO_OOM_PROGRAM=NAME   the shim acts only in a process whose executable is named NAME
                             (gnuplot, which grzo-finetune starts, inherits LD_PRELOAD)

   Counted are malloc, calloc and realloc called directly from the main executable's own
   code: grzo.h, the backend and the example modules are compiled into it. The C library's
   internals (stdio, getline), OpenBLAS, BLIS and libgomp are never counted nor failed:
   their out-of-memory paths are not the project's (libgomp exits the process). The caller
   is told by the return address, against the executable's mapped code found once with
   dl_iterate_phdr (the first object it reports is the main program).

   Each process counts from 0: a program that re-executes itself (grzo-finetune does, to set
   the GEMM libraries' environment: cpu_env.h) must make no counted allocation before that.

   The real functions come from dlsym(RTLD_NEXT, ...); glibc's dlsym itself may calloc (its
   error buffer), so the allocations made while they are being looked up are served from a
   static buffer, which free and realloc recognize. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);

/* ---- the bootstrap buffer: what dlsym allocates before the real functions are known ---- */
static unsigned char boot[8192] __attribute__((aligned(16)));
static size_t boot_used;
static int resolving;

static int in_boot(const void *p) { return (const unsigned char *)p >= boot && (const unsigned char *)p < boot + sizeof boot; }

static void *boot_alloc(size_t n) {
    size_t at = (boot_used + 15) & ~(size_t)15;
    if (n > sizeof boot - at) return NULL;
    boot_used = at + n;
    return boot + at;   /* zeroed: static storage, never reused */
}

static void resolve(void) {
    if (real_malloc || resolving) return;
    resolving = 1;
    /* POSIX's way to store dlsym's object pointer in a function pointer */
    *(void **)&real_calloc = dlsym(RTLD_NEXT, "calloc");
    *(void **)&real_realloc = dlsym(RTLD_NEXT, "realloc");
    *(void **)&real_free = dlsym(RTLD_NEXT, "free");
    *(void **)&real_malloc = dlsym(RTLD_NEXT, "malloc");   /* last: malloc tests it */
    resolving = 0;
}

/* ---- the count --------------------------------------------------------------------------- */
static uintptr_t text_lo, text_hi;   /* the executable's code; 0, 0: the shim is inert */
static uintptr_t base;               /* where the executable is loaded (PIE) */
static long fail_at;
static long counted;
static const char *count_file, *where_file;

/* the executable's lowest and highest executable PT_LOAD addresses (the first object) */
static int find_text(struct dl_phdr_info *info, size_t size, void *user) {
    int i;
    (void)size; (void)user;
    base = (uintptr_t)info->dlpi_addr;
    for (i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo, hi;
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
        lo = (uintptr_t)info->dlpi_addr + ph->p_vaddr;
        hi = lo + ph->p_memsz;
        if (!text_hi || lo < text_lo) text_lo = lo;
        if (hi > text_hi) text_hi = hi;
    }
    return 1;   /* the main program only */
}

/* whether this process's executable is named `want` (its last path component) */
static int program_is(const char *want) {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    const char *slash;
    if (n <= 0) return 0;
    self[n] = '\0';
    slash = strrchr(self, '/');
    return strcmp(slash ? slash + 1 : self, want) == 0;
}

/* Set up before the program's own code runs (the preloaded library initializes before the
   executable); not lazily inside malloc, where dl_iterate_phdr's lock may be held. */
__attribute__((constructor)) static void shim_init(void) {
    const char *at = getenv("GRZO_OOM_FAIL_AT"), *program = getenv("GRZO_OOM_PROGRAM");
    resolve();
    if (program && !program_is(program)) return;
    fail_at = at ? atol(at) : 0;
    count_file = getenv("GRZO_OOM_COUNT_FILE");
    where_file = getenv("GRZO_OOM_WHERE_FILE");
    dl_iterate_phdr(find_text, NULL);
}

__attribute__((destructor)) static void shim_report(void) {
    FILE *f;
    if (!text_hi || !count_file || !(f = fopen(count_file, "w"))) return;
    fprintf(f, "%ld\n", __atomic_load_n(&counted, __ATOMIC_SEQ_CST));
    fclose(f);
}

/* the caller's address in the executable file, to where_file: system calls only (no stdio,
   which allocates, inside malloc) */
static void tell_where(uintptr_t caller) {
    char text[32], *p = text + sizeof text;
    uintptr_t a = caller - base;
    int fd;
    *--p = '\n';
    do { *--p = "0123456789abcdef"[a & 15]; a >>= 4; } while (a);
    *--p = 'x';
    *--p = '0';
    if (!where_file || (fd = open(where_file, O_WRONLY | O_CREAT | O_TRUNC, 0666)) < 0) return;
    if (write(fd, p, (size_t)(text + sizeof text - p)) < 0) {}
    close(fd);
}

/* whether the allocation asked for from `caller` fails */
static int fails(void *caller) {
    uintptr_t c = (uintptr_t)caller;
    if (c < text_lo || c >= text_hi || __atomic_add_fetch(&counted, 1, __ATOMIC_SEQ_CST) != fail_at) return 0;
    tell_where(c - 1);   /* the call instruction, not the one after it */
    errno = ENOMEM;      /* as the C library's allocators do */
    return 1;
}

/* ---- the interposed functions --------------------------------------------------------------- */
void *malloc(size_t n) {
    resolve();
    if (!real_malloc) return boot_alloc(n);
    return fails(__builtin_return_address(0)) ? NULL : real_malloc(n);
}

void *calloc(size_t n, size_t size) {
    resolve();
    if (!real_calloc) return size && n > SIZE_MAX / size ? NULL : boot_alloc(n * size);
    return fails(__builtin_return_address(0)) ? NULL : real_calloc(n, size);
}

/* a failing realloc leaves the block as it was, as the C library's does */
void *realloc(void *p, size_t n) {
    resolve();
    if (!real_realloc || in_boot(p)) {   /* out of the bootstrap buffer: moved to the heap */
        void *q = real_malloc ? real_malloc(n) : boot_alloc(n);
        size_t room = in_boot(p) ? (size_t)(boot + sizeof boot - (unsigned char *)p) : 0;   /* the old size is not kept */
        if (q && room) memcpy(q, p, n < room ? n : room);
        return q;
    }
    return fails(__builtin_return_address(0)) ? NULL : real_realloc(p, n);
}

void free(void *p) {
    if (!p || in_boot(p)) return;
    resolve();
    if (real_free) real_free(p);
}
