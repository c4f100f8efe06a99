/* emu_runtime.cpp - CPU stand-ins for the CUDA runtime and cuBLAS functions that
   backends/grzo_cuda.cu calls (see emu.h). Device memory is host memory whose regions are
   tracked, so that a kernel argument, a copy or a GEMM operand that is not device memory (or
   runs past its allocation) is reported; fresh allocations are filled with 0xFF bytes (NaN
   floats), so a read of never-written device memory shows. cuBLAS's GEMMs are computed in
   column-major order with cuBLAS's own argument checks. EMU_DEV_LIMIT=BYTES caps the device
   memory (out-of-memory paths); EMU_NO_DEVICE=1 reports no device. A program that made a
   misuse exits 1, whatever its own result. EMU_FAIL_AT=N fails the N-th fallible call
   (EMU_FAIL_STICKY=1: with an error that stays), EMU_COUNT_CALLS=1 reports the calls and the
   device memory left at exit: emu_fault.h says which calls count and what each one returns.

   Cooperative launches (emu.h, EMU_COOPERATIVE): each thread of a block is a coroutine on its
   own stack (allocated once, reused; a guard page below each): a hand-written context switch
   on x86-64, ucontext elsewhere, with AddressSanitizer's fiber annotations. The scheduler
   resumes every runnable thread in thread order until it waits (at __syncthreads, at a warp
   shuffle's exchange) or ends; then it releases each warp whose 32 lanes all wait at the same
   shuffle, else the block when all its threads wait at the same __syncthreads; anything else
   (a barrier that some threads skip or exit before, a shuffle that a lane does not reach,
   lanes at different shuffles) is reported and the launch abandoned. */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <map>
#include <set>
#include <vector>
#include <sys/mman.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "emu_fault.h"
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

uint3 emu_blockIdx, emu_threadIdx;
dim3 emu_blockDim, emu_gridDim;

static std::map<uintptr_t, size_t> g_dev, g_pinned;
static std::set<const void *> g_streams, g_events;
static std::map<const void *, double> g_event_ms;
static int stream_ok(cudaStream_t s) { return s == 0 || g_streams.count((const void *)s); }
static size_t g_dev_bytes;
static cudaError_t g_last = cudaSuccess;
static const size_t g_total = (size_t)80 << 30;
static int emu_reports;

void emu_report(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stdout, "EMU-REPORT: ");
    vfprintf(stdout, fmt, ap);
    fprintf(stdout, "\n");
    va_end(ap);
    emu_reports++;
}
void emu_set_launch_error(cudaError_t e) { g_last = e; }

/* ---- fault injection (emu_fault.h) ---- */
enum { FK_ALLOC, FK_CREATE, FK_LAUNCH, FK_OTHER, FK_DEVICE_COUNT, FK_SET_DEVICE, FK_BLAS_CREATE, FK_BLAS_SET, FK_BLAS_GEMM };
static long g_calls, g_fail_at, g_failed_at, g_fail_count = 1;
static const char *g_failed_name;
static int g_failed_oom;   /* the first failed call gave an out-of-memory error */
static int g_sticky_mode, g_env_read;
static cudaError_t g_sticky = cudaSuccess;   /* the dead context's error, once a sticky failure fired */
struct emu_site { const char *name; const void *where; long first; };
static std::vector<emu_site> g_sites;

static void fault_env(void) {
    if (g_env_read) return;
    g_env_read = 1;
    if (getenv("EMU_FAIL_AT")) g_fail_at = strtol(getenv("EMU_FAIL_AT"), 0, 10);
    if (getenv("EMU_FAIL_COUNT")) g_fail_count = strtol(getenv("EMU_FAIL_COUNT"), 0, 10);
    g_sticky_mode = getenv("EMU_FAIL_STICKY") && atoi(getenv("EMU_FAIL_STICKY")) != 0;
}
/* the error a GPU would give at this kind of call (plain mode: nothing stays broken) */
static cudaError_t fault_error(int kind) {
    if (g_sticky_mode) return cudaErrorIllegalAddress;
    switch (kind) {
    case FK_ALLOC: case FK_CREATE: return cudaErrorMemoryAllocation;
    case FK_LAUNCH: return cudaErrorLaunchOutOfResources;
    case FK_DEVICE_COUNT: return cudaErrorInsufficientDriver;
    case FK_SET_DEVICE: return cudaErrorDevicesUnavailable;
    default: return cudaErrorUnknown;
    }
}
/* one fallible call (where: its caller, or the kernel): counted, its site's first call noted;
   the armed one fails, and after a sticky failure every call does */
static cudaError_t emu_fault(const char *name, int kind, const void *where) {
    fault_env();
    if (g_sticky != cudaSuccess) return g_sticky;
    long n = ++g_calls;
    size_t i;
    for (i = 0; i < g_sites.size(); i++)
        if (g_sites[i].name == name && g_sites[i].where == where) break;
    if (i == g_sites.size()) g_sites.push_back(emu_site{name, where, n});
    if (g_fail_at <= 0 || n < g_fail_at || n >= g_fail_at + g_fail_count) return cudaSuccess;
    if (n == g_fail_at) {   /* the first of the calls that fail names the run */
        g_failed_at = n;
        g_failed_name = name;
        g_failed_oom = !g_sticky_mode && (kind == FK_ALLOC || kind == FK_CREATE || kind == FK_BLAS_CREATE);
    }
#if defined(__SANITIZE_ADDRESS__)
    if (getenv("EMU_FAIL_TRACE")) {   /* where the armed call was made (a sweep's reproduction) */
        fprintf(stderr, "emu: call %ld (%s) fails here:\n", n, name);
        __sanitizer_print_stack_trace();
    }
#endif
    cudaError_t e = fault_error(kind);
    if (g_sticky_mode) g_sticky = e;
    return e;
}
static cublasStatus_t emu_blas_fault(const char *name, int kind, const void *where) {
    cudaError_t e = emu_fault(name, kind, where);
    if (e == cudaSuccess) return CUBLAS_STATUS_SUCCESS;
    /* a GEMM fails when its own kernel does: that launch's error stays latched for
       cudaGetLastError, as any launch's does (a caller must clear it, or its next launch
       check reports it as its own) */
    if (kind == FK_BLAS_GEMM) g_last = g_sticky_mode ? e : cudaErrorLaunchOutOfResources;
    return kind == FK_BLAS_CREATE ? CUBLAS_STATUS_ALLOC_FAILED : kind == FK_BLAS_GEMM ? CUBLAS_STATUS_EXECUTION_FAILED
                                                                                    : CUBLAS_STATUS_INTERNAL_ERROR;
}
#define EMU_FAULT(name, kind)                                                       \
    do {                                                                            \
        cudaError_t f_ = emu_fault(name, kind, __builtin_return_address(0));        \
        if (f_ != cudaSuccess) return g_last = f_;                                  \
    } while (0)
/* A failed creation or allocation: CUDA does not say what it leaves in the output, so a junk
   handle goes there (never a live one: passing it on, freeing or destroying it is reported) */
static char g_junk[1];
#define EMU_FAULT_OUT(name, kind, out)                                              \
    do {                                                                            \
        cudaError_t f_ = emu_fault(name, kind, __builtin_return_address(0));        \
        if (f_ != cudaSuccess) {                                                    \
            memcpy((void *)(out), &g_junk_ptr, sizeof(void *));                     \
            return g_last = f_;                                                     \
        }                                                                           \
    } while (0)
static void *const g_junk_ptr = (void *)g_junk;
#define EMU_BLAS_FAULT(name, kind)                                                              \
    do {                                                                                        \
        cublasStatus_t f_ = emu_blas_fault(name, kind, __builtin_return_address(0));            \
        if (f_ != CUBLAS_STATUS_SUCCESS) return f_;                                             \
    } while (0)
/* a release after a sticky failure: done (the memory is host memory), but reported as CUDA would */
static cudaError_t released(void) { return g_sticky != cudaSuccess ? g_sticky : cudaSuccess; }

extern "C" {
void emu_fault_arm_count(long n, long count, int sticky) {
    g_env_read = 1;
    g_fail_at = n;
    g_fail_count = count > 0 ? count : 1;
    g_sticky_mode = sticky;
    g_sticky = cudaSuccess;
    g_last = cudaSuccess;
    g_calls = g_failed_at = 0;
    g_failed_name = NULL;
    g_failed_oom = 0;
    g_sites.clear();
}
void emu_fault_arm(long n, int sticky) { emu_fault_arm_count(n, 1, sticky); }
long emu_fault_calls(void) { return g_calls; }
long emu_fault_failed(void) { return g_failed_at; }
const char *emu_fault_failed_name(void) { return g_failed_name ? g_failed_name : ""; }
int emu_fault_failed_out_of_memory(void) { return g_failed_oom; }
long emu_fault_sites(long *first, long max) {
    long i, n = (long)g_sites.size();
    for (i = 0; i < n && i < max; i++) first[i] = g_sites[(size_t)i].first;
    return n;
}
size_t emu_device_bytes(void) { return g_dev_bytes; }
long emu_report_count(void) { return emu_reports; }
size_t emu_pinned_count(void) { return g_pinned.size(); }
}
static std::set<cublasHandle_t> g_blas;   /* the live cuBLAS handles */
extern "C" size_t emu_handle_count(void) { return g_streams.size() + g_events.size() + g_blas.size(); }

/* EMU_COUNT_CALLS=1 (or EMU_FAIL_AT): the counts at exit, in EMU_REPORT_FILE or on stderr */
static void fault_report_at_exit(void) {
    if (!getenv("EMU_COUNT_CALLS") && !getenv("EMU_FAIL_AT")) return;
    const char *path = getenv("EMU_REPORT_FILE");
    FILE *f = path ? fopen(path, "w") : stderr;
    if (!f) return;
    fprintf(f, "calls %ld\nfailed %ld %s\ndevice_bytes %zu\npinned %zu\nhandles %zu\n", g_calls, g_failed_at,
            g_failed_name ? g_failed_name : "-", g_dev_bytes, g_pinned.size(), emu_handle_count());
    for (const emu_site &x : g_sites) fprintf(f, "site %ld %s\n", x.first, x.name);
    if (f != stderr) fclose(f);
}

/* at exit: a program that misused the runtime fails, even when its own checks passed */
static struct emu_verdict {
    ~emu_verdict() {
        fault_report_at_exit();
        if (emu_reports) {
            fprintf(stdout, "FAIL: %d misuse(s) of the CUDA runtime or cuBLAS (EMU-REPORT lines above)\n", emu_reports);
            fflush(stdout);
            _exit(1);
        }
    }
} emu_verdict_at_exit;

static int in_map(const std::map<uintptr_t, size_t> &m, const void *p, size_t bytes) {
    uintptr_t a = (uintptr_t)p;
    auto it = m.upper_bound(a);
    if (it == m.begin()) return 0;
    --it;
    return a >= it->first && a + bytes <= it->first + it->second;
}
int emu_is_device(const void *p, size_t bytes) { return in_map(g_dev, p, bytes); }

extern "C" {
/* the names and texts of the errors the emulation gives (the CUDA runtime's own) */
static const struct { cudaError_t e; const char *name, *text; } g_error_names[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver", "CUDA driver version is insufficient for CUDA runtime version"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorDevicesUnavailable, "cudaErrorDevicesUnavailable", "CUDA-capable device(s) is/are busy or unavailable"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress", "an illegal memory access was encountered"},
    {cudaErrorLaunchOutOfResources, "cudaErrorLaunchOutOfResources", "too many resources requested for launch"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};
const char *cudaGetErrorName(cudaError_t e) {
    static char b[32];
    for (const auto &x : g_error_names)
        if (x.e == e) return x.name;
    snprintf(b, sizeof b, "cudaError%d", (int)e);
    return b;
}
const char *cudaGetErrorString(cudaError_t e) {
    for (const auto &x : g_error_names)
        if (x.e == e) return x.text;
    return "emulated error";
}
/* a sticky error stays: every later call returns it (the context must be destroyed) */
cudaError_t cudaGetLastError(void) {
    if (g_sticky != cudaSuccess) return g_sticky;
    cudaError_t e = g_last;
    g_last = cudaSuccess;
    return e;
}
cudaError_t cudaPeekAtLastError(void) { return g_sticky != cudaSuccess ? g_sticky : g_last; }
cudaError_t cudaSetDevice(int d) {
    EMU_FAULT("cudaSetDevice", FK_SET_DEVICE);
    return d == 0 ? cudaSuccess : (g_last = cudaErrorInvalidDevice);
}
cudaError_t cudaGetDeviceCount(int *n) {
    EMU_FAULT("cudaGetDeviceCount", FK_DEVICE_COUNT);
    *n = getenv("EMU_NO_DEVICE") ? 0 : 1;
    return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int f) {
    (void)f;
    EMU_FAULT_OUT("cudaStreamCreate", FK_CREATE, s);
    *s = (cudaStream_t)malloc(16);
    g_streams.insert((const void *)*s);
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    if (!g_streams.erase((const void *)s)) { emu_report("cudaStreamDestroy of %p: not a live stream", (void *)s); return g_last = cudaErrorInvalidResourceHandle; }
    free((void *)s);
    return released();
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    EMU_FAULT("cudaStreamSynchronize", FK_OTHER);
    if (!stream_ok(s)) { emu_report("cudaStreamSynchronize of %p: not a live stream", (void *)s); return g_last = cudaErrorInvalidResourceHandle; }
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) {
    EMU_FAULT("cudaDeviceSynchronize", FK_OTHER);
    return cudaSuccess;
}
static cudaError_t event_create(cudaEvent_t *e) {
    *e = (cudaEvent_t)malloc(16);
    g_events.insert((const void *)*e);
    return cudaSuccess;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int f) {
    (void)f;
    EMU_FAULT_OUT("cudaEventCreate", FK_CREATE, e);
    return event_create(e);
}
cudaError_t cudaEventCreate(cudaEvent_t *e) {
    EMU_FAULT_OUT("cudaEventCreate", FK_CREATE, e);
    return event_create(e);
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    if (!g_events.erase((const void *)e)) { emu_report("cudaEventDestroy of %p: not a live event", (void *)e); return g_last = cudaErrorInvalidResourceHandle; }
    g_event_ms.erase((const void *)e);
    free((void *)e);
    return released();
}
/* an event's time: the host's clock when it was recorded (all work before it is done by then) */
static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    EMU_FAULT("cudaEventRecord", FK_OTHER);
    if (!g_events.count((const void *)e) || !stream_ok(s)) {
        emu_report("cudaEventRecord: event %p or stream %p not live", (void *)e, (void *)s);
        return g_last = cudaErrorInvalidResourceHandle;
    }
    g_event_ms[(const void *)e] = now_ms();
    return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
    EMU_FAULT("cudaEventElapsedTime", FK_OTHER);
    if (!g_event_ms.count((const void *)a) || !g_event_ms.count((const void *)b) || !g_events.count((const void *)a) ||
        !g_events.count((const void *)b)) {
        emu_report("cudaEventElapsedTime: an event %p or %p not live or never recorded", (void *)a, (void *)b);
        return g_last = cudaErrorInvalidResourceHandle;
    }
    *ms = (float)(g_event_ms[(const void *)b] - g_event_ms[(const void *)a]);
    return cudaSuccess;
}
/* the host function runs at once: the stream's earlier work is done (every call is synchronous) */
cudaError_t cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *user) {
    EMU_FAULT("cudaLaunchHostFunc", FK_OTHER);
    if (!stream_ok(s)) { emu_report("cudaLaunchHostFunc on %p: not a live stream", (void *)s); return g_last = cudaErrorInvalidResourceHandle; }
    fn(user);
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d) {
    EMU_FAULT("cudaGetDeviceProperties", FK_OTHER);
    if (d != 0) return g_last = cudaErrorInvalidDevice;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "emulated device (tests/cuda_emu)");
    p->totalGlobalMem = g_total;
    p->multiProcessorCount = 132;
    p->major = 9;
    p->maxThreadsPerBlock = 1024;
    p->sharedMemPerBlock = (size_t)48 << 10;
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    EMU_FAULT("cudaEventSynchronize", FK_OTHER);
    if (!g_events.count((const void *)e)) { emu_report("cudaEventSynchronize of %p: not a live event", (void *)e); return g_last = cudaErrorInvalidResourceHandle; }
    return cudaSuccess;
}
cudaError_t cudaMalloc(void **p, size_t n) {
    static size_t limit = getenv("EMU_DEV_LIMIT") ? strtoull(getenv("EMU_DEV_LIMIT"), 0, 10) : 0;
    EMU_FAULT_OUT("cudaMalloc", FK_ALLOC, p);
    if (n == 0) { *p = NULL; return cudaSuccess; }
    if ((limit && g_dev_bytes + n > limit) || n > g_total - g_dev_bytes) {   /* as a GPU of g_total bytes would */
        g_last = cudaErrorMemoryAllocation;
        return cudaErrorMemoryAllocation;
    }
    *p = malloc(n);
    if (!*p) return g_last = cudaErrorMemoryAllocation;
    memset(*p, 0xFF, n);   /* NaN floats: reads of never-written device memory show */
    g_dev[(uintptr_t)*p] = n;
    g_dev_bytes += n;
    return cudaSuccess;
}
cudaError_t cudaFree(void *p) {
    if (!p) return cudaSuccess;
    auto it = g_dev.find((uintptr_t)p);
    if (it == g_dev.end()) { emu_report("cudaFree of %p: not a device allocation", p); return g_last = cudaErrorInvalidValue; }
    g_dev_bytes -= it->second;
    g_dev.erase(it);
    free(p);
    return released();
}
cudaError_t cudaMallocHost(void **p, size_t n) {
    EMU_FAULT_OUT("cudaMallocHost", FK_ALLOC, p);
    *p = malloc(n ? n : 1);
    g_pinned[(uintptr_t)*p] = n;
    return cudaSuccess;
}
cudaError_t cudaFreeHost(void *p) {
    if (!p) return cudaSuccess;
    auto it = g_pinned.find((uintptr_t)p);
    if (it == g_pinned.end()) { emu_report("cudaFreeHost of %p: not pinned", p); return g_last = cudaErrorInvalidValue; }
    g_pinned.erase(it);
    free(p);
    return released();
}
static cudaError_t memcpy_impl(void *dst, const void *src, size_t n, cudaMemcpyKind k, cudaStream_t s) {
    if (!stream_ok(s)) emu_report("copy on stream %p: not a live stream", (void *)s);
    if (n == 0) return cudaSuccess;
    if (k == cudaMemcpyDeviceToDevice) {
        if (!emu_is_device(dst, n)) emu_report("D2D copy of %zu bytes: dst %p is not device memory (or overruns it)", n, dst);
        if (!emu_is_device(src, n)) emu_report("D2D copy of %zu bytes: src %p is not device memory (or overruns it)", n, src);
    } else if (k != cudaMemcpyHostToDevice && k != cudaMemcpyDeviceToHost)
        emu_report("copy of kind %d: not emulated", (int)k);
    if (k == cudaMemcpyHostToDevice) {
        if (!emu_is_device(dst, n)) emu_report("H2D copy of %zu bytes: dst %p is not device memory (or overruns it)", n, dst);
        if (emu_is_device(src, 1)) emu_report("H2D copy: src %p is device memory", src);
    } else if (k == cudaMemcpyDeviceToHost) {
        if (!emu_is_device(src, n)) emu_report("D2H copy of %zu bytes: src %p is not device memory (or overruns it)", n, src);
        if (emu_is_device(dst, 1)) emu_report("D2H copy: dst %p is device memory", dst);
    }
    memmove(dst, src, n);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind k, cudaStream_t s) {
    EMU_FAULT("cudaMemcpyAsync", FK_OTHER);
    return memcpy_impl(dst, src, n, k, s);
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind k) {
    EMU_FAULT("cudaMemcpy", FK_OTHER);
    return memcpy_impl(dst, src, n, k, 0);
}
static cudaError_t memset_impl(void *p, int v, size_t n, cudaStream_t s) {
    if (!stream_ok(s)) emu_report("memset on stream %p: not a live stream", (void *)s);
    if (n && !emu_is_device(p, n)) emu_report("memset of %zu bytes at %p: not device memory", n, p);
    memset(p, v, n);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s) {
    EMU_FAULT("cudaMemsetAsync", FK_OTHER);
    return memset_impl(p, v, n, s);
}
cudaError_t cudaMemset(void *p, int v, size_t n) {
    EMU_FAULT("cudaMemset", FK_OTHER);
    return memset_impl(p, v, n, 0);
}
cudaError_t cudaMemGetInfo(size_t *f, size_t *t) {
    EMU_FAULT("cudaMemGetInfo", FK_OTHER);
    *t = g_total;
    *f = g_total - g_dev_bytes;
    return cudaSuccess;
}

/* ---- cuBLAS ---- */
struct cublasContext { cudaStream_t stream; cublasMath_t math; void *ws; size_t ws_bytes; };
cublasStatus_t cublasCreate_v2(cublasHandle_t *h) {
    cublasStatus_t f = emu_blas_fault("cublasCreate", FK_BLAS_CREATE, __builtin_return_address(0));
    if (f != CUBLAS_STATUS_SUCCESS) {
        *h = (cublasHandle_t)g_junk_ptr;   /* as EMU_FAULT_OUT: not a handle */
        return f;
    }
    *h = new cublasContext();
    g_blas.insert(*h);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy_v2(cublasHandle_t h) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!g_blas.erase(h)) {
        emu_report("cublasDestroy of %p: not a live handle", (void *)h);
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
static int blas_live(cublasHandle_t h, const char *name) {
    if (g_blas.count(h)) return 1;
    emu_report("%s on %p: not a live cuBLAS handle", name, (void *)h);
    return 0;
}
cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s) {
    if (!blas_live(h, "cublasSetStream")) return CUBLAS_STATUS_NOT_INITIALIZED;
    EMU_BLAS_FAULT("cublasSetStream", FK_BLAS_SET);
    h->stream = s;
    h->ws = NULL;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t h, void *w, size_t n) {
    if (!blas_live(h, "cublasSetWorkspace")) return CUBLAS_STATUS_NOT_INITIALIZED;
    EMU_BLAS_FAULT("cublasSetWorkspace", FK_BLAS_SET);
    if (!emu_is_device(w, n)) emu_report("cuBLAS workspace not device memory");
    h->ws = w; h->ws_bytes = n; return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m) {
    if (!blas_live(h, "cublasSetMathMode")) return CUBLAS_STATUS_NOT_INITIALIZED;
    EMU_BLAS_FAULT("cublasSetMathMode", FK_BLAS_SET);
    h->math = m;
    return CUBLAS_STATUS_SUCCESS;
}
}

static float ld_elem(const void *p, cudaDataType t, size_t i) {
    if (t == CUDA_R_32F) return ((const float *)p)[i];
    if (t == CUDA_R_16BF) return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    if (t == CUDA_R_16F) return __half2float(((const __half *)p)[i]);
    emu_report("gemm: unsupported type %d", (int)t);
    return 0;
}
static size_t tsize(cudaDataType t) { return t == CUDA_R_32F ? 4 : 2; }

/* TF32 tensor ops (cublasSetMathMode(CUBLAS_TF32_TENSOR_OP_MATH)) multiply fp32 inputs kept to
   10 mantissa bits: each input is rounded so here, to nearest with ties away from zero as PTX's
   cvt.rna.tf32.f32 does (cuBLAS does not document its rounding; truncation would err at most
   twice as much), so that an fp32 GEMM that should be exact but runs in TF32 errs here as on
   the device. 16-bit inputs are exact in TF32. */
static int tf32_of(cublasHandle_t h) { return ((unsigned)h->math & 0xFu) == (unsigned)CUBLAS_TF32_TENSOR_OP_MATH; }
static float tf32_round(float x) {
    uint32_t b;
    memcpy(&b, &x, 4);
    if ((b & 0x7F800000u) != 0x7F800000u) b = (b + 0x1000u) & ~0x1FFFu;   /* finite: 13 low bits rounded off */
    memcpy(&x, &b, 4);
    return x;
}

static cublasStatus_t gemm(const char *name, int tf32, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           float alpha, const void *A, cudaDataType at, int lda, const void *B, cudaDataType bt, int ldb,
                           float beta, float *C, int ldc) {
    int rowsA = ta == CUBLAS_OP_N ? m : k, colsA = ta == CUBLAS_OP_N ? k : m;
    int rowsB = tb == CUBLAS_OP_N ? k : n, colsB = tb == CUBLAS_OP_N ? n : k;
    if (m < 0 || n < 0 || k < 0) { emu_report("%s: negative size", name); return CUBLAS_STATUS_INVALID_VALUE; }
    if (lda < (rowsA > 1 ? rowsA : 1) || ldb < (rowsB > 1 ? rowsB : 1) || ldc < (m > 1 ? m : 1)) {
        emu_report("%s: bad leading dimension m=%d n=%d k=%d lda=%d ldb=%d ldc=%d", name, m, n, k, lda, ldb, ldc);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
    /* extents touched */
    if (k > 0) {
        size_t ea = ((size_t)(colsA - 1) * lda + rowsA) * tsize(at), eb = ((size_t)(colsB - 1) * ldb + rowsB) * tsize(bt);
        if (!emu_is_device(A, ea)) emu_report("%s: A %p (%zu bytes) not within one device allocation", name, A, ea);
        if (!emu_is_device(B, eb)) emu_report("%s: B %p (%zu bytes) not within one device allocation", name, B, eb);
    }
    {
        size_t ec = ((size_t)(n - 1) * ldc + m) * 4;
        if (!emu_is_device(C, ec)) emu_report("%s: C %p (%zu bytes) not within one device allocation", name, (void *)C, ec);
    }
    /* op(A)'s rows and op(B)'s columns unpacked to floats first, so that each inner product
       runs over contiguous memory (the same products in the same order) */
    std::vector<float> a((size_t)m * k), b((size_t)n * k);
    for (int i = 0; i < m; i++)
        for (int l = 0; l < k; l++)
            a[(size_t)i * k + l] = ta == CUBLAS_OP_N ? ld_elem(A, at, i + (size_t)l * lda) : ld_elem(A, at, l + (size_t)i * lda);
    for (int j = 0; j < n; j++)
        for (int l = 0; l < k; l++)
            b[(size_t)j * k + l] = tb == CUBLAS_OP_N ? ld_elem(B, bt, l + (size_t)j * ldb) : ld_elem(B, bt, j + (size_t)l * ldb);
    if (tf32) {
        if (at == CUDA_R_32F)
            for (float &v : a) v = tf32_round(v);
        if (bt == CUDA_R_32F)
            for (float &v : b) v = tf32_round(v);
    }
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            const float *ai = a.data() + (size_t)i * k, *bj = b.data() + (size_t)j * k;
            float acc = 0;
            for (int l = 0; l < k; l++) acc += ai[l] * bj[l];
            float *c = &C[i + (size_t)j * ldc];
            *c = beta == 0.0f ? alpha * acc : alpha * acc + beta * *c;
        }
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" {
cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float *alpha,
                              const float *A, int lda, const float *B, int ldb, const float *beta, float *C, int ldc) {
    if (!blas_live(h, "cublasSgemm")) return CUBLAS_STATUS_NOT_INITIALIZED;
    EMU_BLAS_FAULT("cublasSgemm", FK_BLAS_GEMM);
    return gemm("cublasSgemm", tf32_of(h), ta, tb, m, n, k, *alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, *beta, C, ldc);
}
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void *alpha,
                            const void *A, cudaDataType at, int lda, const void *B, cudaDataType bt, int ldb, const void *beta,
                            void *C, cudaDataType ct, int ldc, cublasComputeType_t ctype, cublasGemmAlgo_t algo) {
    (void)algo;
    if (!blas_live(h, "cublasGemmEx")) return CUBLAS_STATUS_NOT_INITIALIZED;
    EMU_BLAS_FAULT("cublasGemmEx", FK_BLAS_GEMM);
    if (ct != CUDA_R_32F || ctype != CUBLAS_COMPUTE_32F || at != bt) { emu_report("GemmEx: unexpected types"); return CUBLAS_STATUS_NOT_SUPPORTED; }
    return gemm("cublasGemmEx", tf32_of(h), ta, tb, m, n, k, *(const float *)alpha, A, at, lda, B, bt, ldb, *(const float *)beta, (float *)C, ldc);
}
}

extern "C" cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                                    int k, const float *alpha, const float *A, int lda, long long sa,
                                                    const float *B, int ldb, long long sb, const float *beta, float *C, int ldc,
                                                    long long sc, int batch) {
    if (!blas_live(h, "cublasSgemmStridedBatched")) return CUBLAS_STATUS_NOT_INITIALIZED;
    EMU_BLAS_FAULT("cublasSgemmStridedBatched", FK_BLAS_GEMM);
    if (batch < 0) { emu_report("cublasSgemmStridedBatched: batch count %d", batch); return CUBLAS_STATUS_INVALID_VALUE; }
    /* the batches' outputs must not overlap: cuBLAS computes them concurrently */
    if (batch > 1 && m > 0 && n > 0 && (sc < 0 || (unsigned long long)sc < (unsigned long long)(n - 1) * (unsigned)ldc + (unsigned)m))
        emu_report("cublasSgemmStridedBatched: stride_c %lld < the extent of one C (m=%d n=%d ldc=%d): outputs overlap", sc, m, n, ldc);
    for (int b = 0; b < batch; b++) {
        cublasStatus_t st = gemm("cublasSgemmStridedBatched", tf32_of(h), ta, tb, m, n, k, *alpha, A + b * sa, CUDA_R_32F, lda, B + b * sb,
                                 CUDA_R_32F, ldb, *beta, C + b * sc, ldc);
        if (st != CUBLAS_STATUS_SUCCESS) return st;
    }
    return CUBLAS_STATUS_SUCCESS;
}

/* ---- kernels' attributes and launch checks ---- */
static const int g_smem_default = 48 * 1024, g_smem_optin = 227 * 1024;   /* H100's per-block limits */
static std::map<const void *, int> g_max_dyn_smem;   /* cudaFuncAttributeMaxDynamicSharedMemorySize opt-ins */
static std::map<const void *, size_t> g_static_smem; /* __shared__ bytes a kernel was seen to use */

extern "C" cudaError_t cudaFuncSetAttribute(const void *f, cudaFuncAttribute a, int v) {
    EMU_FAULT("cudaFuncSetAttribute", FK_OTHER);
    if (a != cudaFuncAttributeMaxDynamicSharedMemorySize) { emu_report("cudaFuncSetAttribute: attribute %d not emulated", (int)a); return g_last = cudaErrorInvalidValue; }
    size_t st = g_static_smem.count(f) ? g_static_smem[f] : 0;
    if (v < 0 || (size_t)v + st > (size_t)g_smem_optin) {
        emu_report("cudaFuncSetAttribute: %d bytes of dynamic shared memory (+ %zu static) above the device's %d", v, st, g_smem_optin);
        return g_last = cudaErrorInvalidValue;
    }
    g_max_dyn_smem[f] = v;
    return cudaSuccess;
}
extern "C" cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *fa, const void *f) {
    EMU_FAULT("cudaFuncGetAttributes", FK_OTHER);
    memset(fa, 0, sizeof *fa);
    fa->maxThreadsPerBlock = 1024;
    fa->sharedSizeBytes = g_static_smem.count(f) ? g_static_smem[f] : 0;
    fa->maxDynamicSharedSizeBytes = g_max_dyn_smem.count(f) ? g_max_dyn_smem[f] : g_smem_default - (int)fa->sharedSizeBytes;
    return cudaSuccess;
}

int emu_check_launch(const char *name, const void *kernel, size_t smem, cudaStream_t s) {
    /* a launch that fails is not run; cudaGetLastError reports it (a sticky error: every launch) */
    cudaError_t f = emu_fault("kernel launch", FK_LAUNCH, kernel);
    if (f != cudaSuccess) {
        g_last = f;
        return 0;
    }
    if (!stream_ok(s)) {
        emu_report("kernel %s: launched on %p, not a live stream", name, (void *)s);
        g_last = cudaErrorInvalidResourceHandle;
        return 0;
    }
    size_t limit = g_max_dyn_smem.count(kernel) ? (size_t)g_max_dyn_smem[kernel] : (size_t)g_smem_default;
    size_t st = g_static_smem.count(kernel) ? g_static_smem[kernel] : 0;
    if (smem > limit || smem + st > (g_max_dyn_smem.count(kernel) ? (size_t)g_smem_optin : (size_t)g_smem_default)) {
        emu_report("kernel %s: %zu bytes of dynamic shared memory (+ %zu static) above its limit %zu (48 KiB unless "
                   "cudaFuncSetAttribute opts in)", name, smem, st, limit);
        g_last = cudaErrorInvalidValue;
        return 0;
    }
    return 1;
}

/* ---- cooperative launches: threads as coroutines ---- */
#if defined(__SANITIZE_ADDRESS__)
#define EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMU_ASAN 1
#endif
#endif
#ifdef EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if defined(__x86_64__)
/* emu_ctx_switch(&save_sp, new_sp): pushes the callee-saved registers, saves the stack
   pointer, loads the other one and pops its registers (SysV x86-64 ABI) */
extern "C" void emu_ctx_switch(void **save_sp, void *new_sp);
asm(".text\n"
    ".globl emu_ctx_switch\n"
    ".type emu_ctx_switch,@function\n"
    "emu_ctx_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  subq $8, %rsp\n  stmxcsr (%rsp)\n  fnstcw 4(%rsp)\n"
    "  movq %rsp, (%rdi)\n"
    "  movq %rsi, %rsp\n"
    "  ldmxcsr (%rsp)\n  fldcw 4(%rsp)\n  addq $8, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
    "  ret\n"
    ".size emu_ctx_switch, .-emu_ctx_switch\n");
#else
#include <ucontext.h>
#endif

enum { F_RUN, F_BAR, F_WARP, F_DONE };
struct emu_fiber {
    char *stack;                  /* usable [stack, stack + g_stack_bytes) */
    int state, site;
    unsigned shuffles;            /* the warp shuffles it has made in this block: a parity */
#if defined(__x86_64__)
    void *sp;
#else
    ucontext_t uc;
#endif
    void *fake;                   /* ASan's fake stack while switched out */
    int abandoned;                /* left mid-kernel: its whole stack may hold ASan's marks */
};
static const size_t g_stack_bytes = (size_t)256 << 10;
static std::vector<emu_fiber> g_fib;
static int g_cur = -1, g_coop_active;
static void (*g_body)(void *);
static void *g_body_arg;
static uint3 *g_tidx;                      /* each thread's threadIdx */
static unsigned long long (*g_slot)[2][32];  /* each warp's shuffle exchange, two by turns */
static const void *g_kernel;
static const char *g_kname;
static char *g_dyn;                        /* this launch's dynamic shared memory */
static size_t g_dyn_bytes;
static std::vector<void *> g_fresh;        /* __shared__ arrays filled in this block */
static size_t g_static_seen;
#if defined(__x86_64__)
static void *g_sched_sp;
#else
static ucontext_t g_sched_uc;
#endif
static const void *g_sched_bottom;
static size_t g_sched_size;
static void *g_sched_fake;

/* the running fiber gives the CPU back to the scheduler (final: it has ended) */
static void to_scheduler(int final) {
    emu_fiber *f = &g_fib[g_cur];
#ifdef EMU_ASAN
    __sanitizer_start_switch_fiber(final ? NULL : &f->fake, g_sched_bottom, g_sched_size);
#else
    (void)final;
#endif
#if defined(__x86_64__)
    emu_ctx_switch(&f->sp, g_sched_sp);
#else
    swapcontext(&f->uc, &g_sched_uc);
#endif
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(f->fake, NULL, NULL);
#endif
}

extern "C" void emu_fiber_main(void) {
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(NULL, &g_sched_bottom, &g_sched_size);
#endif
    g_body(g_body_arg);
    g_fib[g_cur].state = F_DONE;
    to_scheduler(1);
    abort();   /* never resumed */
}

static void fiber_start(emu_fiber *f) {
#ifdef EMU_ASAN
    /* an earlier thread's frames left their marks: a thread that ended returned through all
       but the few frames at the top of the stack (clearing the marks of the rest), one that
       was abandoned may have left them anywhere */
    size_t dirty = f->abandoned ? g_stack_bytes : (size_t)16 << 10;
    ASAN_UNPOISON_MEMORY_REGION(f->stack + g_stack_bytes - dirty, dirty);
    f->abandoned = 0;
#endif
#if defined(__x86_64__)
    /* the return address at a 16-byte boundary: emu_fiber_main starts as if called */
    uintptr_t top = ((uintptr_t)f->stack + g_stack_bytes) & ~(uintptr_t)15;
    void **ra = (void **)(top - 16);
    *ra = (void *)emu_fiber_main;
    void **frame = ra - 7;        /* mxcsr/fpu word, r15, r14, r13, r12, rbx, rbp */
    memset(frame, 0, 7 * sizeof(void *));
    unsigned int mx;
    unsigned short cw;
    asm volatile("stmxcsr %0" : "=m"(mx));
    asm volatile("fnstcw %0" : "=m"(cw));
    memcpy(frame, &mx, 4);
    memcpy((char *)frame + 4, &cw, 2);
    f->sp = frame;
#else
    getcontext(&f->uc);
    f->uc.uc_stack.ss_sp = f->stack;
    f->uc.uc_stack.ss_size = g_stack_bytes;
    f->uc.uc_link = NULL;
    makecontext(&f->uc, (void (*)(void))emu_fiber_main, 0);
#endif
    f->state = F_RUN;
    f->site = 0;
    f->shuffles = 0;
    f->fake = NULL;
}

static void fiber_resume(int i) {
    emu_fiber *f = &g_fib[i];
    g_cur = i;
    emu_threadIdx = g_tidx[i];
#ifdef EMU_ASAN
    __sanitizer_start_switch_fiber(&g_sched_fake, f->stack, g_stack_bytes);
#endif
#if defined(__x86_64__)
    emu_ctx_switch(&g_sched_sp, f->sp);
#else
    swapcontext(&g_sched_uc, &f->uc);
#endif
#ifdef EMU_ASAN
    __sanitizer_finish_switch_fiber(g_sched_fake, NULL, NULL);
#endif
    g_cur = -1;
}

static void fibers_reserve(int n) {
    long page = sysconf(_SC_PAGESIZE);
    while ((int)g_fib.size() < n) {
        emu_fiber f;
        memset(&f, 0, sizeof f);
        char *m = (char *)mmap(NULL, g_stack_bytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) { fprintf(stderr, "emu: cannot map a thread stack\n"); _exit(1); }
        mprotect(m, page, PROT_NONE);   /* a stack overflow faults */
        f.stack = m + page;
        g_fib.push_back(f);
    }
}

void *emu_dynamic_shared(size_t align) {
    if (g_cur < 0) { emu_report("dynamic shared memory outside a cooperative launch"); return NULL; }
    if ((uintptr_t)g_dyn % align) emu_report("kernel %s: dynamic shared memory misaligned", g_kname);
    return g_dyn;
}
void emu_shared_fresh(void *p, size_t bytes) {
    if (g_cur < 0) { emu_report("__shared__ array outside a cooperative launch"); return; }
    for (void *q : g_fresh)
        if (q == p) return;
    g_fresh.push_back(p);
    memset(p, 0xFF, bytes);   /* shared memory starts undefined: NaN floats show a read before the write */
    g_static_seen += bytes;
}
int emu_lane(void) { return g_cur % 32; }

static void fiber_wait(int state, int site) {
    if (g_cur < 0 || !g_coop_active) { emu_report("barrier or shuffle outside a cooperative launch"); return; }
    g_fib[g_cur].state = state;
    g_fib[g_cur].site = site;
    to_scheduler(0);
}
void emu_syncthreads_at(int line) { fiber_wait(F_BAR, line); }
void emu_syncwarp_at(int line, unsigned mask) {
    if (mask != 0xFFFFFFFFu) { emu_report("kernel %s line %d: __syncwarp mask %#x: only the full mask is emulated", g_kname, line, mask); return; }
    fiber_wait(F_WARP, line);
}
unsigned long long emu_shfl_bits(int line, unsigned mask, unsigned long long bits, int src) {
    if (g_cur < 0) { emu_report("warp shuffle outside a cooperative launch"); return bits; }
    if (mask != 0xFFFFFFFFu) { emu_report("kernel %s line %d: shuffle mask %#x: only the full mask is emulated", g_kname, line, mask); return bits; }
    /* one wait a shuffle: consecutive shuffles exchange through alternate slots, and a lane
       writes this shuffle's slot again only two shuffles on, after every lane has met it at
       the next one's wait, that is after every lane has read this one */
    int w = g_cur / 32, lane = g_cur % 32, turn = (int)(g_fib[g_cur].shuffles++ & 1u);
    g_slot[w][turn][lane] = bits;
    fiber_wait(F_WARP, line);              /* every lane has written */
    return g_slot[w][turn][src];
}

static void describe(char *out, size_t len, int i) {
    const emu_fiber *f = &g_fib[i];
    if (f->state == F_DONE) snprintf(out, len, "exited");
    else if (f->state == F_BAR) snprintf(out, len, "at __syncthreads (line %d)", f->site);
    else snprintf(out, len, "at a shuffle (line %d)", f->site);
}

/* one block; 0 when it was abandoned after a report */
static int run_block(int n, uint3 b) {
    int i, w, n_warps = (n + 31) / 32;
    for (i = 0; i < n; i++) fiber_start(&g_fib[i]);
    g_fresh.clear();
    if (g_dyn_bytes) memset(g_dyn, 0xFF, g_dyn_bytes);
    for (;;) {
        for (i = 0; i < n; i++)
            if (g_fib[i].state == F_RUN) fiber_resume(i);
        int released = 0;
        for (w = 0; w < n_warps; w++) {
            int lo = 32 * w, hi = lo + 32 < n ? lo + 32 : n, waiting = 0;
            for (i = lo; i < hi; i++) waiting += g_fib[i].state == F_WARP && g_fib[i].site == g_fib[lo].site;
            if (waiting == 32) {
                for (i = lo; i < hi; i++) g_fib[i].state = F_RUN;
                released = 1;
            }
        }
        if (released) continue;
        int n_bar = 0, n_done = 0, same = 1, site = -1;
        for (i = 0; i < n; i++) {
            n_bar += g_fib[i].state == F_BAR;
            n_done += g_fib[i].state == F_DONE;
            if (g_fib[i].state == F_BAR) {
                if (site >= 0 && g_fib[i].site != site) same = 0;
                site = g_fib[i].site;
            }
        }
        if (n_done == n) return 1;
        if (n_bar + n_done == n && n_done == 0 && same) {
            for (i = 0; i < n; i++) g_fib[i].state = F_RUN;
            continue;
        }
        /* stuck, or a barrier some threads skip: say who waits where */
        for (i = 0; i < n; i++)
            if (g_fib[i].state != g_fib[0].state || g_fib[i].site != g_fib[0].site) break;
        int j = i < n ? i : 0;
        char wa[64], wb[64];
        describe(wa, sizeof wa, 0);
        describe(wb, sizeof wb, j);
        for (i = 0; i < n; i++) g_fib[i].abandoned = 1;
        emu_report("kernel %s block (%u,%u,%u): threads do not meet: thread 0 %s, thread %d %s; %d of %d at __syncthreads, "
                   "%d exited (a barrier or full-mask shuffle not reached by all)", g_kname, b.x, b.y, b.z, wa, j, wb, n_bar, n, n_done);
        return 0;
    }
}

void emu_coop_run(const char *name, const void *kernel, dim3 grid, dim3 block, size_t smem, void (*body)(void *), void *arg) {
    struct { dim3 g, b; size_t smem; } c = {grid, block, smem};
    int n = (int)(c.b.x * c.b.y * c.b.z), i = 0;
    if (g_coop_active) { emu_report("kernel %s launched from a kernel", name); return; }
    fibers_reserve(n);
    std::vector<uint3> tidx((size_t)n);
    for (unsigned tz = 0; tz < c.b.z; tz++)
        for (unsigned ty = 0; ty < c.b.y; ty++)
            for (unsigned tx = 0; tx < c.b.x; tx++, i++) tidx[(size_t)i].x = tx, tidx[(size_t)i].y = ty, tidx[(size_t)i].z = tz;
    std::vector<unsigned long long> slots((size_t)((n + 31) / 32) * 2 * 32);
    g_tidx = tidx.data();
    g_slot = (unsigned long long(*)[2][32])slots.data();
    g_body = body;
    g_body_arg = arg;
    g_kernel = kernel;
    g_kname = name;
    g_dyn_bytes = c.smem;
    g_dyn = c.smem ? (char *)malloc(c.smem) : NULL;   /* exactly the launch's bytes: ASan sees an overrun */
    g_coop_active = 1;
    emu_gridDim = c.g;
    emu_blockDim = c.b;
    int ok = 1;
    for (unsigned bz = 0; ok && bz < c.g.z; bz++)
        for (unsigned by = 0; ok && by < c.g.y; by++)
            for (unsigned bx = 0; ok && bx < c.g.x; bx++) {
                emu_blockIdx.x = bx, emu_blockIdx.y = by, emu_blockIdx.z = bz;
                g_static_seen = 0;
                ok = run_block(n, emu_blockIdx);
                if (g_static_seen > g_static_smem[kernel]) g_static_smem[kernel] = g_static_seen;
            }
    g_coop_active = 0;
    size_t st = g_static_smem[kernel];
    size_t cap = g_max_dyn_smem.count(kernel) ? (size_t)g_smem_optin : (size_t)g_smem_default;
    if (st + c.smem > cap) emu_report("kernel %s: %zu bytes of static + %zu of dynamic shared memory above %zu", name, st, c.smem, cap);
    free(g_dyn);
    g_dyn = NULL;
    g_dyn_bytes = 0;
}
