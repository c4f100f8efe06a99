/* emu_fault.h - the emulated CUDA runtime's fault injector (emu_runtime.cpp), for C and C++.

   Every fallible call the code under test makes is counted, from 1: cudaMalloc, cudaMallocHost,
   cudaMemcpy(Async), cudaMemset(Async), cudaStreamCreate(WithFlags), cudaEventCreate(WithFlags),
   cudaEventRecord, cudaStreamSynchronize, cudaDeviceSynchronize, cudaEventSynchronize,
   cudaEventElapsedTime, cudaLaunchHostFunc, cudaGetDeviceProperties, cudaGetDeviceCount,
   cudaSetDevice, cudaMemGetInfo, cudaFuncGetAttributes, cudaFuncSetAttribute, each kernel
   launch (the failure is the one cudaGetLastError reports after it; the kernel does not run),
   cublasCreate, cublasSetStream, cublasSetWorkspace, cublasSetMathMode and the GEMMs
   (cublasSgemm, cublasGemmEx, cublasSgemmStridedBatched). Releases (cudaFree, cudaFreeHost,
   the destroys) and the error queries are not counted: they cannot fail but for an earlier
   sticky error.

   The armed call (the N-th) fails as a GPU's would there, and does nothing else but this: a
   failed allocation or creation (cudaMalloc, cudaMallocHost, a stream, an event, cublasCreate)
   writes a junk pointer into its output, since CUDA does not say what it leaves there; the
   junk is no live allocation or handle, so code that frees, destroys or uses it is reported.
     plain mode: cudaErrorMemoryAllocation from an allocation or a stream/event creation,
       cudaErrorLaunchOutOfResources from a launch, cudaErrorInsufficientDriver from
       cudaGetDeviceCount, cudaErrorDevicesUnavailable from cudaSetDevice, cudaErrorUnknown from
       the rest; CUBLAS_STATUS_ALLOC_FAILED from cublasCreate, CUBLAS_STATUS_EXECUTION_FAILED
       from a GEMM (its kernel's launch failed: cudaErrorLaunchOutOfResources stays latched
       for cudaGetLastError, as after a failed launch), CUBLAS_STATUS_INTERNAL_ERROR from a
       setter. Nothing stays broken: the next call succeeds (cudaGetLastError reports the
       failure once, as CUDA's does).
     sticky mode: the armed call returns cudaErrorIllegalAddress, and so does every later
       call, cudaGetLastError included (a context that a kernel's fault killed); releases
       still release (the memory is host memory) but return the error.

   Environment (a whole program, e.g. a CLI): EMU_FAIL_AT=N arms call N (counted from the
   program's start), EMU_FAIL_COUNT=K fails calls N .. N + K - 1 (plain: a retry that meets
   the failure again), EMU_FAIL_STICKY=1 picks the sticky mode; EMU_COUNT_CALLS=1 (or
   EMU_FAIL_AT) writes at exit, to EMU_REPORT_FILE or else stderr:
       calls T                 the fallible calls made
       failed N NAME           the call that failed (0 - when none did)
       device_bytes B          device memory still allocated (0 after a clean shutdown)
       pinned P                cudaMallocHost blocks still allocated
       handles H               streams, events and cuBLAS handles still alive
       site I NAME             one line per call site, in order: its first call and its
                               function (a site: the caller of a runtime function, or the
                               kernel of a launch; a sweep's schedule)
   EMU_FAIL_TRACE=1 (an ASan build) prints the stack of the call that fails, on stderr.
   In a program: the functions below (they reset the count). */
#ifndef GRZO_CUDA_EMU_FAULT_H
#define GRZO_CUDA_EMU_FAULT_H
#include <stddef.h>
#ifdef __cplusplus
extern "C" {
#endif
void emu_fault_arm(long n, int sticky);   /* from now: call n fails (0: none); counts from 0 */
void emu_fault_arm_count(long n, long count, int sticky);   /* calls n .. n + count - 1 fail (plain) */
long emu_fault_calls(void);               /* fallible calls since the arm */
long emu_fault_failed(void);              /* the call that failed (0: not reached) */
const char *emu_fault_failed_name(void);  /* its function, "" when none */
int emu_fault_failed_out_of_memory(void); /* 1: its error was out of memory (a plain failure of an
                                             allocation, a stream, an event or a cuBLAS handle) */
long emu_fault_sites(long *first, long max);  /* each site's first call since the arm; returns the number of sites */
size_t emu_device_bytes(void);            /* device memory allocated now */
size_t emu_pinned_count(void);            /* cudaMallocHost blocks now */
size_t emu_handle_count(void);            /* streams, events, cuBLAS handles now */
long emu_report_count(void);              /* misuses reported so far (EMU-REPORT lines) */
#ifdef __cplusplus
}
#endif

/* A sweep's check: counts in `checks`, and a failure in `fails`, printing only the first 40
   (a defect met by every one of thousands of runs would flood the log). The sweeps' tests
   define their CHECK on it with their own counters. */
#define EMU_SWEEP_CHECK(fails, checks, c, ...)                                 \
    do {                                                                       \
        (checks)++;                                                            \
        if (!(c) && ++(fails) <= 40) {                                         \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                        \
            printf(__VA_ARGS__);                                               \
            printf("\n");                                                      \
        }                                                                      \
    } while (0)
#endif
