/* emu_runtime.cpp - CPU stand-ins for the CUDA runtime and cuBLAS functions that
   backends/grzo_cuda.cu calls (see emu.h). Device memory is host memory whose regions are
   tracked, so that a kernel argument, a copy or a GEMM operand that is not device memory (or
   runs past its allocation) is reported; fresh allocations are filled with 0xFF bytes (NaN
   floats), so a read of never-written device memory shows. cuBLAS's GEMMs are computed in
   column-major order with cuBLAS's own argument checks. EMU_DEV_LIMIT=BYTES caps the device
   memory (out-of-memory paths); EMU_NO_DEVICE=1 reports no device. A program that made a
   misuse exits 1, whatever its own result. */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <map>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

uint3 emu_blockIdx, emu_threadIdx;
dim3 emu_blockDim, emu_gridDim;

static std::map<uintptr_t, size_t> g_dev, g_pinned;
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

/* at exit: a program that misused the runtime fails, even when its own checks passed */
static struct emu_verdict {
    ~emu_verdict() {
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
const char *cudaGetErrorName(cudaError_t e) {
    static char b[32];
    snprintf(b, sizeof b, "cudaError%d", (int)e);
    return b;
}
const char *cudaGetErrorString(cudaError_t e) { (void)e; return "emulated error"; }
cudaError_t cudaGetLastError(void) { cudaError_t e = g_last; g_last = cudaSuccess; return e; }
cudaError_t cudaPeekAtLastError(void) { return g_last; }
cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : (g_last = cudaErrorInvalidDevice); }
cudaError_t cudaGetDeviceCount(int *n) { *n = getenv("EMU_NO_DEVICE") ? 0 : 1; return cudaSuccess; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int f) { (void)f; *s = (cudaStream_t)malloc(16); return cudaSuccess; }
cudaError_t cudaStreamDestroy(cudaStream_t s) { free((void *)s); return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t s) { (void)s; return cudaSuccess; }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int f) { (void)f; *e = (cudaEvent_t)malloc(16); return cudaSuccess; }
cudaError_t cudaEventDestroy(cudaEvent_t e) { free((void *)e); return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) { (void)e; (void)s; return cudaSuccess; }
cudaError_t cudaEventSynchronize(cudaEvent_t e) { (void)e; return cudaSuccess; }
cudaError_t cudaMalloc(void **p, size_t n) {
    static size_t limit = getenv("EMU_DEV_LIMIT") ? strtoull(getenv("EMU_DEV_LIMIT"), 0, 10) : 0;
    if (n == 0) { *p = NULL; return cudaSuccess; }
    if (limit && g_dev_bytes + n > limit) { g_last = cudaErrorMemoryAllocation; return cudaErrorMemoryAllocation; }
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
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void **p, size_t n) {
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
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind k, cudaStream_t s) {
    (void)s;
    if (n == 0) return cudaSuccess;
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
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s) {
    (void)s;
    if (n && !emu_is_device(p, n)) emu_report("memset of %zu bytes at %p: not device memory", n, p);
    memset(p, v, n);
    return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t *f, size_t *t) { *t = g_total; *f = g_total - g_dev_bytes; return cudaSuccess; }

/* ---- cuBLAS ---- */
struct cublasContext { cudaStream_t stream; cublasMath_t math; void *ws; size_t ws_bytes; };
cublasStatus_t cublasCreate_v2(cublasHandle_t *h) { *h = new cublasContext(); return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasDestroy_v2(cublasHandle_t h) { delete h; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s) { h->stream = s; h->ws = NULL; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t h, void *w, size_t n) {
    if (!emu_is_device(w, n)) emu_report("cuBLAS workspace not device memory");
    h->ws = w; h->ws_bytes = n; return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m) { h->math = m; return CUBLAS_STATUS_SUCCESS; }
}

static float ld_elem(const void *p, cudaDataType t, size_t i) {
    if (t == CUDA_R_32F) return ((const float *)p)[i];
    if (t == CUDA_R_16BF) return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    if (t == CUDA_R_16F) return __half2float(((const __half *)p)[i]);
    emu_report("gemm: unsupported type %d", (int)t);
    return 0;
}
static size_t tsize(cudaDataType t) { return t == CUDA_R_32F ? 4 : 2; }

static cublasStatus_t gemm(const char *name, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha,
                           const void *A, cudaDataType at, int lda, const void *B, cudaDataType bt, int ldb, float beta,
                           float *C, int ldc) {
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
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float acc = 0;
            for (int l = 0; l < k; l++) {
                float a = ta == CUBLAS_OP_N ? ld_elem(A, at, i + (size_t)l * lda) : ld_elem(A, at, l + (size_t)i * lda);
                float b = tb == CUBLAS_OP_N ? ld_elem(B, bt, l + (size_t)j * ldb) : ld_elem(B, bt, j + (size_t)l * ldb);
                acc += a * b;
            }
            float *c = &C[i + (size_t)j * ldc];
            *c = beta == 0.0f ? alpha * acc : alpha * acc + beta * *c;
        }
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" {
cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float *alpha,
                              const float *A, int lda, const float *B, int ldb, const float *beta, float *C, int ldc) {
    (void)h;
    return gemm("cublasSgemm", ta, tb, m, n, k, *alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb, *beta, C, ldc);
}
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const void *alpha,
                            const void *A, cudaDataType at, int lda, const void *B, cudaDataType bt, int ldb, const void *beta,
                            void *C, cudaDataType ct, int ldc, cublasComputeType_t ctype, cublasGemmAlgo_t algo) {
    (void)h; (void)algo;
    if (ct != CUDA_R_32F || ctype != CUBLAS_COMPUTE_32F || at != bt) { emu_report("GemmEx: unexpected types"); return CUBLAS_STATUS_NOT_SUPPORTED; }
    return gemm("cublasGemmEx", ta, tb, m, n, k, *(const float *)alpha, A, at, lda, B, bt, ldb, *(const float *)beta, (float *)C, ldc);
}
}
