/* test_llm_cuda.c - the LLM forward on the GPU against the CPU (llm.c's rule: every device
   kernel is checked against its plain CPU counterpart). Meson suite 'cuda'.

   usage: test_llm_cuda DATA_DIR [CASE...]   (DATA_DIR holds stories260K.bin and tok512.bin)
   Cases: ops forward gguf 16bit logprob steps generate random_init (default: all).
   Exit 0 pass, 1 fail, 77 skip (no CUDA device, or a build without CUDA).

   It also runs without a GPU as llm_cuda_emulated (suite 'llm', tests/llm/meson.build):
   ops_cuda.cu rewritten by tests/cuda_emu/launches.py --cooperative (each block's threads as
   coroutines, so __syncthreads, warp shuffles and shared memory behave as on the device) and
   the CUDA backend as cuda_emulated runs it, against tests/cuda_emu/emu_runtime.cpp's CUDA
   runtime and cuBLAS (tracked device memory, argument checks; a misuse fails the run), under
   ASan + UBSan. Same checks and tolerances; it cannot see concurrency between streams or
   blocks, the GPU's expf, TF32 or fma contraction (tests/cuda_emu/emu.h).

   Tolerances, and why:
   - ops (ops.h, llm_ops_cuda vs llm_ops_cpu): add_into, gather_rows, cache_append are
     exact; RoPE <= 1e-6 relative (the kernel keeps the CPU's separate roundings, no fma
     contraction, so it is normally exact too, unless the host compiler fuses); RMSNorm
     <= 1e-6 relative (both sum squares in double, in different orders); SwiGLU <= 1e-6
     relative (expf of the GPU and of glibc differ by an ulp or two); attention <= 1e-5
     absolute on values in [-0.5, 0.5] (online softmax over tiles vs one softmax: different
     summation orders of <= 300 fp32 terms, ~1e-7 each), the same for the attention through
     cuBLAS (LLM_ATTENTION_GEMM: batched fp32 GEMMs, one softmax); token log-probabilities <= 1e-9
     absolute (double sums in different orders); padding rows of the attention output are
     exactly 0 on both; destroying the ops states gives the backend back every device byte
     they took.
   - whole forward, fp32 weights: max |logit_gpu - logit_cpu| <= 1e-4 (issue 16): cuBLAS in
     pedantic fp32 (no TF32) and the CPU's OpenBLAS differ only in summation order.
   - bf16 and f16 weights on the GPU vs fp32 on the CPU: the difference must be explained by
     the weight rounding itself. The CPU computes the logits with every weight rounded to the
     16-bit format (nearest, ties to even, written here from the definition, independently
     of the model's converter); the distance D between those and the fp32 logits is the
     effect of the rounding. Bound: the GPU's 16-bit logits lie within 1e-4 of the CPU's on
     the rounded weights (the GPU widens 16-bit values to fp32 exactly, so only the fp32
     summation order remains), hence within D + 1e-4 of the fp32 logits; both are checked
     and D is printed.
   - llm_sequence_logprob: per scored token |delta| <= |delta logit_t| + |delta lse| <= 2e-4,
     so a sequence's sum within 2e-4 per scored token.
   - 5 GRZO steps through grzo_step: each step's loss within 1e-4 relative of the CPU's.
   - generation: the GPU's greedy text equals llama2.c's reference text byte for byte. */
#include "llm_test_util.h"
#include "llama2c_reference.h"
#include "ops.h"
#include "toy_model.h"

#ifdef LLM_HAVE_CUDA
#include "backends/grzo_cuda.h"

static grzo_backend cpu, gpu;
static const char *data_dir;

/* ---- device buffers ------------------------------------------------------------------------ */
static void *dev_alloc(size_t bytes) {
    void *p = NULL;
    if (grzo_backend_alloc(&gpu, bytes ? bytes : 4, &p) != GRZO_OK) {
        fprintf(stderr, "FATAL: cannot allocate %zu bytes of device memory\n", bytes);
        exit(1);
    }
    return p;
}
static void *dev_copy(const void *host, size_t bytes) {
    void *p = dev_alloc(bytes);
    if (bytes && grzo_backend_upload(&gpu, p, host, bytes) != GRZO_OK) {
        fprintf(stderr, "FATAL: upload failed\n");
        exit(1);
    }
    return p;
}
static void to_host(void *host, const void *dev, size_t bytes) {
    if (bytes && grzo_backend_download(&gpu, host, dev, bytes) != GRZO_OK) {
        fprintf(stderr, "FATAL: download failed: %s\n", gpu.iface->last_error(gpu.self));
        exit(1);
    }
}
static float *host_floats(int64_t n, uint64_t seed, float half_width) {
    float *x = (float *)malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    int64_t i;
    if (!x) exit(1);
    for (i = 0; i < n; i++) x[i] = tu_uniform(&seed, -half_width, half_width);
    return x;
}

static double max_abs(const float *x, int64_t n) {
    double m = 0.0;
    int64_t i;
    for (i = 0; i < n; i++) m = fmax(m, fabs((double)x[i]));
    return m;
}

/* ---- ops, one shape at a time ---------------------------------------------------------------- */
typedef struct op_case {
    const char *label;
    int32_t n_heads, n_kv_heads, head_dim, dim;
    int32_t n_seqs;
    int32_t len[6], pad[6];
    int32_t past;                 /* -1: no cache; >= 0: one sequence after `past` cached rows */
} op_case;

typedef struct op_fixture {
    const op_case *c;
    llm_ops_state *cpu_os, *gpu_os;
    llm_ops_state *gemm_os;       /* the CUDA ops with the attention through cuBLAS */
    llm_ops_state *auto_os;       /* AUTO: the GEMM form at these sizes, the fused kernel with a cache */
    int64_t n_rows, n_out;
    int32_t max_seq_len;
    float *cos_t, *sin_t;
    int32_t *ids, *row_pos, *seq_pad, *seq_len;
    int64_t *seq_row0, *out_row;
    int32_t *ids_cpu, *ids_gpu;
} op_fixture;

#define OP_OK(os, ops, call)                                                                             \
    do {                                                                                                 \
        grzo_status s_ = (call);                                                                         \
        if (s_ != GRZO_OK) {                                                                             \
            fprintf(stderr, "FATAL %s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call, grzo_status_str(s_), \
                    (ops).last_error(os));                                                               \
            exit(1);                                                                                     \
        }                                                                                                \
    } while (0)

static void op_layout(op_fixture *f) {
    const op_case *c = f->c;
    int64_t row = 0, out = 0;
    int32_t i, t, past0 = c->past > 0 ? c->past : 0, half = c->head_dim / 2, p;
    size_t n_seqs = (size_t)(c->n_seqs > 0 ? c->n_seqs : 1);
    for (i = 0; i < c->n_seqs; i++) f->n_rows += c->len[i];
    f->ids = (int32_t *)calloc((size_t)f->n_rows, 4);
    f->row_pos = (int32_t *)calloc((size_t)f->n_rows, 4);
    f->out_row = (int64_t *)calloc((size_t)f->n_rows, 8);
    f->seq_row0 = (int64_t *)calloc(n_seqs, 8);
    f->seq_pad = (int32_t *)calloc(n_seqs, 4);
    f->seq_len = (int32_t *)calloc(n_seqs, 4);
    for (i = 0; i < c->n_seqs; i++) {
        f->seq_row0[i] = row;
        f->seq_pad[i] = c->pad[i];
        f->seq_len[i] = c->len[i];
        for (t = 0; t < c->len[i]; t++) {
            f->ids[row + t] = (int32_t)((row + t) * 7 % 31);
            f->row_pos[row + t] = t < c->pad[i] ? -1 : t - c->pad[i] + past0;
            if (t >= c->pad[i] && (t + i) % 2 == 0) f->out_row[out++] = row + t;   /* every other real row */
        }
        if (c->len[i] > f->max_seq_len) f->max_seq_len = c->len[i];
        row += c->len[i];
    }
    f->n_out = out;
    f->max_seq_len += past0;
    f->cos_t = (float *)malloc((size_t)f->max_seq_len * half * 4);
    f->sin_t = (float *)malloc((size_t)f->max_seq_len * half * 4);
    for (p = 0; p < f->max_seq_len; p++)
        for (i = 0; i < half; i++) {
            double a = p * pow(10000.0, -2.0 * i / c->head_dim);
            f->cos_t[p * half + i] = (float)cos(a);
            f->sin_t[p * half + i] = (float)sin(a);
        }
}

/* what op_layout allocated */
static void op_layout_free(op_fixture *f) {
    free(f->ids); free(f->row_pos); free(f->out_row); free(f->seq_row0); free(f->seq_pad); free(f->seq_len);
    free(f->cos_t); free(f->sin_t);
}

/* the ops descriptor of a fixture's case (backend: cpu) */
static void op_desc(const op_fixture *f, llm_ops_desc *dp) {
    const op_case *c = f->c;
    llm_ops_desc d;
    memset(&d, 0, sizeof d);
    d.n_threads = 2;
    d.n_heads = c->n_heads;
    d.n_kv_heads = c->n_kv_heads;
    d.head_dim = c->head_dim;
    d.max_rows = f->n_rows;
    d.max_outputs = f->n_rows;
    d.max_seqs = c->n_seqs;
    d.max_seq_len = f->max_seq_len;
    d.rope_cos = f->cos_t;
    d.rope_sin = f->sin_t;
    d.be = &cpu;
    *dp = d;
}

static void op_open(op_fixture *f, const op_case *c) {
    llm_ops_desc d;
    llm_layout lay;
    char err[256];
    memset(f, 0, sizeof *f);
    f->c = c;
    op_layout(f);
    op_desc(f, &d);
    if (llm_ops_cpu.create(&d, &f->cpu_os, err, sizeof err) != GRZO_OK) { fprintf(stderr, "FATAL: %s\n", err); exit(1); }
    d.be = &gpu;
    if (llm_ops_cuda.create(&d, &f->auto_os, err, sizeof err) != GRZO_OK) { fprintf(stderr, "FATAL: %s\n", err); exit(1); }
    d.attention = LLM_ATTENTION_FUSED;
    if (llm_ops_cuda.create(&d, &f->gpu_os, err, sizeof err) != GRZO_OK) { fprintf(stderr, "FATAL: %s\n", err); exit(1); }
    d.attention = LLM_ATTENTION_GEMM;
    if (llm_ops_cuda.create(&d, &f->gemm_os, err, sizeof err) != GRZO_OK) { fprintf(stderr, "FATAL: %s\n", err); exit(1); }
    lay.n_seqs = c->n_seqs;
    lay.n_rows = f->n_rows;
    lay.n_out = f->n_out;
    lay.ids = f->ids;
    lay.seq_row0 = f->seq_row0;
    lay.seq_pad = f->seq_pad;
    lay.seq_len = f->seq_len;
    lay.row_pos = f->row_pos;
    lay.out_row = f->out_row;
    f->ids_cpu = (int32_t *)calloc((size_t)f->n_rows, 4);
    f->ids_gpu = (int32_t *)dev_alloc((size_t)f->n_rows * 4);
    OP_OK(f->cpu_os, llm_ops_cpu, llm_ops_cpu.upload_layout(f->cpu_os, &lay, f->ids_cpu));
    OP_OK(f->gpu_os, llm_ops_cuda, llm_ops_cuda.upload_layout(f->gpu_os, &lay, f->ids_gpu));
    OP_OK(f->gemm_os, llm_ops_cuda, llm_ops_cuda.upload_layout(f->gemm_os, &lay, f->ids_gpu));
    OP_OK(f->auto_os, llm_ops_cuda, llm_ops_cuda.upload_layout(f->auto_os, &lay, f->ids_gpu));
}

static void op_close(op_fixture *f) {
    llm_ops_cpu.destroy(f->cpu_os);
    llm_ops_cuda.destroy(f->gpu_os);
    llm_ops_cuda.destroy(f->gemm_os);
    llm_ops_cuda.destroy(f->auto_os);
    grzo_backend_free(&gpu, f->ids_gpu);
    free(f->ids_cpu);
    op_layout_free(f);
}

/* gpu (downloaded) vs cpu, n floats: report and check */
static void op_compare(const op_fixture *f, const char *op, const float *cpu_out, const void *gpu_dev, int64_t n,
                       double tol_abs, double tol_rel) {
    float *g = (float *)malloc((size_t)(n > 0 ? n : 1) * 4);
    double d, tol;
    to_host(g, gpu_dev, (size_t)n * 4);
    d = tu_max_abs_diff(cpu_out, g, n);
    tol = tol_abs + tol_rel * max_abs(cpu_out, n);
    TU_CHECK(d <= tol, "op %s, case '%s': max |gpu - cpu| = %.3g over %lld values exceeds %.3g", op, f->c->label, d,
             (long long)n, tol);
    free(g);
}

static void op_ids_and_elementwise(op_fixture *f) {
    int64_t n = f->n_rows * f->c->dim;
    float *x = host_floats(n, 11, 2.0f), *y = host_floats(n, 12, 2.0f), *cy = (float *)malloc((size_t)n * 4);
    float *dx = (float *)dev_copy(x, (size_t)n * 4), *dy = (float *)dev_copy(y, (size_t)n * 4), *dg;
    int32_t *ids = (int32_t *)malloc((size_t)f->n_rows * 4);
    int64_t n_g = f->n_out * f->c->dim;
    float *cg = (float *)malloc((size_t)(n_g > 0 ? n_g : 1) * 4);
    to_host(ids, f->ids_gpu, (size_t)f->n_rows * 4);
    TU_CHECK(memcmp(ids, f->ids_cpu, (size_t)f->n_rows * 4) == 0, "op upload_layout, case '%s': token ids differ", f->c->label);
    /* rms_normalize, out of place and in place */
    OP_OK(f->cpu_os, llm_ops_cpu, llm_ops_cpu.rms_normalize(f->cpu_os, x, cy, f->n_rows, f->c->dim, 1e-5f));
    OP_OK(f->gpu_os, llm_ops_cuda, llm_ops_cuda.rms_normalize(f->gpu_os, dx, dy, f->n_rows, f->c->dim, 1e-5f));
    op_compare(f, "rms_normalize", cy, dy, n, 0.0, 1e-6);
    OP_OK(f->gpu_os, llm_ops_cuda, llm_ops_cuda.rms_normalize(f->gpu_os, dx, dx, f->n_rows, f->c->dim, 1e-5f));
    op_compare(f, "rms_normalize (in place)", cy, dx, n, 0.0, 1e-6);
    /* gather_rows of the normalized rows */
    dg = (float *)dev_alloc((size_t)(n_g > 0 ? n_g : 1) * 4);
    OP_OK(f->cpu_os, llm_ops_cpu, llm_ops_cpu.gather_rows(f->cpu_os, cy, cg, f->c->dim));
    OP_OK(f->gpu_os, llm_ops_cuda, llm_ops_cuda.gather_rows(f->gpu_os, dx, dg, f->c->dim));
    op_compare(f, "gather_rows", cg, dg, n_g, 0.0, 1e-6);
    /* add_into and swiglu on fresh inputs */
    grzo_backend_upload(&gpu, dx, x, (size_t)n * 4);
    grzo_backend_upload(&gpu, dy, y, (size_t)n * 4);
    OP_OK(f->cpu_os, llm_ops_cpu, llm_ops_cpu.add_into(f->cpu_os, x, y, n));
    OP_OK(f->gpu_os, llm_ops_cuda, llm_ops_cuda.add_into(f->gpu_os, dx, dy, n));
    op_compare(f, "add_into", x, dx, n, 0.0, 0.0);
    OP_OK(f->cpu_os, llm_ops_cpu, llm_ops_cpu.swiglu(f->cpu_os, x, y, n));
    OP_OK(f->gpu_os, llm_ops_cuda, llm_ops_cuda.swiglu(f->gpu_os, dx, dy, n));
    op_compare(f, "swiglu", x, dx, n, 0.0, 1e-6);
    free(x); free(y); free(cy); free(cg); free(ids);
    grzo_backend_free(&gpu, dx); grzo_backend_free(&gpu, dy); grzo_backend_free(&gpu, dg);
}

/* padding rows of an attention output: 0 on the CPU (q) and on the GPU (dq, downloaded) */
static void check_padding_rows(const op_fixture *f, const float *q, const float *dq, const char *op) {
    int64_t r, j, w = (int64_t)f->c->n_heads * f->c->head_dim;
    float *g = (float *)malloc((size_t)(f->n_rows * w) * 4);
    to_host(g, dq, (size_t)(f->n_rows * w) * 4);
    for (r = 0; r < f->n_rows; r++)
        if (f->row_pos[r] < 0)
            for (j = 0; j < w; j++)
                TU_CHECK(g[r * w + j] == 0.0f && q[r * w + j] == 0.0f, "op %s, case '%s': padding row %lld is not 0", op,
                         f->c->label, (long long)r);
    free(g);
}

/* AUTO computes what the form it takes computes, bit for bit: at these sizes (scratch far
   below attention_gemm.h's bound) the GEMM form's output dq2 without a cache, the fused
   kernel's dq with one (generation). gq: the rotated queries both started from. */
static void check_auto_attention(const op_fixture *f, const float *gq, const float *dq, const float *dq2, const float *dkeys,
                                 const float *dvalues, int64_t qn) {
    const op_case *c = f->c;
    float *da = (float *)dev_copy(gq, (size_t)qn * 4), *a = (float *)malloc((size_t)qn * 4),
          *want = (float *)malloc((size_t)qn * 4);
    int64_t i, n_diff = 0;
    OP_OK(f->auto_os, llm_ops_cuda, llm_ops_cuda.attention(f->auto_os, da, dkeys, dvalues, c->past, f->n_rows));
    to_host(a, da, (size_t)qn * 4);
    to_host(want, c->past < 0 ? dq2 : dq, (size_t)qn * 4);
    for (i = 0; i < qn; i++) n_diff += memcmp(&a[i], &want[i], 4) != 0;
    TU_CHECK(n_diff == 0, "op attention (auto), case '%s': %lld of %lld values differ from the %s form's", c->label,
             (long long)n_diff, (long long)qn, c->past < 0 ? "gemm" : "fused");
    free(a); free(want);
    grzo_backend_free(&gpu, da);
}

static void op_rope_attention(op_fixture *f) {
    const op_case *c = f->c;
    int32_t past0 = c->past > 0 ? c->past : 0;
    int64_t qn = f->n_rows * c->n_heads * c->head_dim, kvd = (int64_t)c->n_kv_heads * c->head_dim;
    int64_t kn = f->n_rows * kvd, cache_n = (past0 + f->n_rows) * kvd;
    float *q = host_floats(qn, 21, 0.5f), *k = host_floats(kn, 22, 0.5f), *v = host_floats(kn, 23, 0.5f);
    float *ck = host_floats(cache_n, 24, 0.5f), *cv = host_floats(cache_n, 25, 0.5f);
    float *dq = (float *)dev_copy(q, (size_t)qn * 4), *dk = (float *)dev_copy(k, (size_t)kn * 4);
    float *dv = (float *)dev_copy(v, (size_t)kn * 4), *dck = (float *)dev_copy(ck, (size_t)cache_n * 4);
    float *dcv = (float *)dev_copy(cv, (size_t)cache_n * 4), *gq = (float *)malloc((size_t)qn * 4), *dq2;
    const float *keys = k, *values = v, *dkeys = dk, *dvalues = dv;
    OP_OK(f->cpu_os, llm_ops_cpu, llm_ops_cpu.rope(f->cpu_os, q, f->n_rows, c->n_heads));
    OP_OK(f->gpu_os, llm_ops_cuda, llm_ops_cuda.rope(f->gpu_os, dq, f->n_rows, c->n_heads));
    op_compare(f, "rope (queries)", q, dq, qn, 0.0, 1e-6);
    OP_OK(f->cpu_os, llm_ops_cpu, llm_ops_cpu.rope(f->cpu_os, k, f->n_rows, c->n_kv_heads));
    OP_OK(f->gpu_os, llm_ops_cuda, llm_ops_cuda.rope(f->gpu_os, dk, f->n_rows, c->n_kv_heads));
    op_compare(f, "rope (keys)", k, dk, kn, 0.0, 1e-6);
    if (c->past >= 0) {   /* generation: the rows go after `past` cached ones */
        OP_OK(f->cpu_os, llm_ops_cpu, llm_ops_cpu.cache_append(f->cpu_os, ck, past0 * kvd, k, kn));
        OP_OK(f->cpu_os, llm_ops_cpu, llm_ops_cpu.cache_append(f->cpu_os, cv, past0 * kvd, v, kn));
        OP_OK(f->gpu_os, llm_ops_cuda, llm_ops_cuda.cache_append(f->gpu_os, dck, past0 * kvd, dk, kn));
        OP_OK(f->gpu_os, llm_ops_cuda, llm_ops_cuda.cache_append(f->gpu_os, dcv, past0 * kvd, dv, kn));
        /* a copy: the values exactly; the keys as their rotation above, since the GPU's rotated
           keys may differ from the CPU's in the last bit (nvcc contracts a*b + c into an FMA;
           an emulated build with -mfma -ffp-contract=fast showed 6e-8) */
        op_compare(f, "cache_append (keys)", ck, dck, cache_n, 0.0, 1e-6);
        op_compare(f, "cache_append (values)", cv, dcv, cache_n, 0.0, 0.0);
        keys = ck; values = cv; dkeys = dck; dvalues = dcv;
    }
    to_host(gq, dq, (size_t)qn * 4);   /* the rotated queries, for the GEMM form */
    dq2 = (float *)dev_copy(gq, (size_t)qn * 4);
    OP_OK(f->cpu_os, llm_ops_cpu, llm_ops_cpu.attention(f->cpu_os, q, keys, values, c->past, f->n_rows));
    OP_OK(f->gpu_os, llm_ops_cuda, llm_ops_cuda.attention(f->gpu_os, dq, dkeys, dvalues, c->past, f->n_rows));
    op_compare(f, "attention", q, dq, qn, 1e-5, 0.0);
    OP_OK(f->gemm_os, llm_ops_cuda, llm_ops_cuda.attention(f->gemm_os, dq2, dkeys, dvalues, c->past, f->n_rows));
    op_compare(f, "attention (gemm)", q, dq2, qn, 1e-5, 0.0);
    check_padding_rows(f, q, dq, "attention");
    check_padding_rows(f, q, dq2, "attention (gemm)");
    check_auto_attention(f, gq, dq, dq2, dkeys, dvalues, qn);
    free(q); free(k); free(v); free(ck); free(cv); free(gq);
    grzo_backend_free(&gpu, dq); grzo_backend_free(&gpu, dq2); grzo_backend_free(&gpu, dk); grzo_backend_free(&gpu, dv);
    grzo_backend_free(&gpu, dck); grzo_backend_free(&gpu, dcv);
}

static void op_token_logprob(op_fixture *f) {
    const int32_t V = 515;   /* odd: the reduction's last chunk is partial */
    int64_t n = f->n_rows, o;
    float *logits = host_floats(n * V, 31, 8.0f), *dl = (float *)dev_copy(logits, (size_t)(n * V) * 4);
    int32_t *target = (int32_t *)malloc((size_t)n * 4);
    double *a = (double *)malloc((size_t)n * 8), *b = (double *)malloc((size_t)n * 8);
    for (o = 0; o < n; o++) target[o] = o == 0 && n > 2 ? -1 : (o == 1 && n > 2 ? V : (int32_t)(o * 37 % V));
    OP_OK(f->cpu_os, llm_ops_cpu, llm_ops_cpu.token_logprob(f->cpu_os, logits, V, target, n, a));
    OP_OK(f->gpu_os, llm_ops_cuda, llm_ops_cuda.token_logprob(f->gpu_os, dl, V, target, n, b));
    for (o = 0; o < n; o++) {
        int ok = isinf(a[o]) ? (isinf(b[o]) && a[o] < 0 && b[o] < 0) : fabs(a[o] - b[o]) <= 1e-9;
        TU_CHECK(ok, "op token_logprob, case '%s': row %lld target %d: cpu %.17g gpu %.17g", f->c->label, (long long)o,
                 target[o], a[o], b[o]);
    }
    free(logits); free(target); free(a); free(b);
    grzo_backend_free(&gpu, dl);
}

/* token_logprob at the real vocabularies (SmolLM2 49152, Llama-3 128256): reductions of
   ~500 strided elements per thread, logits around 1000 (exp overflows without the max) with
   one far above the rest, targets at both ends of the row */
static void op_token_logprob_vocab(int32_t V) {
    op_case c = {"vocab", 1, 1, 2, 1, 1, {3}, {0}, -1};
    op_fixture f;
    const int64_t n = 3;
    float *logits = host_floats(n * V, 41, 30.0f), *dl;
    int32_t target[3] = {0, V - 1, V / 2};
    double a[3], b[3];
    int64_t i, o;
    int before = tu_failures;
    for (i = 0; i < n * V; i++) logits[i] += 1000.0f;
    logits[V + 17] = 1100.0f;   /* row 1: one logit dominates */
    dl = (float *)dev_copy(logits, (size_t)(n * V) * 4);
    op_open(&f, &c);
    OP_OK(f.cpu_os, llm_ops_cpu, llm_ops_cpu.token_logprob(f.cpu_os, logits, V, target, n, a));
    OP_OK(f.gpu_os, llm_ops_cuda, llm_ops_cuda.token_logprob(f.gpu_os, dl, V, target, n, b));
    for (o = 0; o < n; o++)
        TU_CHECK(isfinite(b[o]) && fabs(a[o] - b[o]) <= 1e-9, "op token_logprob, vocab %d row %lld: cpu %.17g gpu %.17g", V,
                 (long long)o, a[o], b[o]);
    printf("ops, token_logprob at vocab %d: %s\n", V, tu_failures == before ? "gpu == cpu" : "DIFFERENT");
    op_close(&f);
    free(logits);
    grzo_backend_free(&gpu, dl);
}

/* The CUDA ops refuse what they cannot run, saying why, and leave no state: a backend that is
   not CUDA's, an unknown attention form, a head_dim past the attention kernel's 256 or more
   sequences than a grid's 65535; destroy(NULL) does nothing. */
static void op_create_refusals(const op_case *c) {
    static const char *const what[4] = {"not the CUDA backend", "attention 3", "head_dim 258", "65536 sequences"};
    op_fixture f;
    int k;
    memset(&f, 0, sizeof f);
    f.c = c;
    op_layout(&f);
    for (k = 0; k < 4; k++) {
        llm_ops_desc d;
        llm_ops_state *os = (llm_ops_state *)&f;   /* create must set it to NULL */
        char err[256] = "";
        grzo_status s;
        op_desc(&f, &d);
        d.be = &gpu;
        if (k == 0) d.be = &cpu;
        if (k == 1) d.attention = (llm_attention)3;   /* past the last form (3: within the enum's range for C++) */
        if (k == 2) d.head_dim = 258;
        if (k == 3) d.max_seqs = 65536;
        s = llm_ops_cuda.create(&d, &os, err, sizeof err);
        TU_CHECK(s == (k < 2 ? GRZO_ERR_INVALID_ARG : GRZO_ERR_UNSUPPORTED) && os == NULL && strstr(err, what[k]) != NULL,
                 "ops create, %s: %s, state %p, '%s'", what[k], grzo_status_str(s), (void *)os, err);
    }
    llm_ops_cuda.destroy(NULL);
    llm_ops_cpu.destroy(NULL);
    op_layout_free(&f);
}

static void test_ops(void) {
    static const op_case cases[] = {
        {"1 token, 1 head, head_dim 2", 1, 1, 2, 3, 1, {1}, {0}, -1},
        {"GQA group 1, head_dim 6, odd lengths, padding", 4, 4, 6, 37, 3, {1, 37, 5}, {0, 3, 4}, -1},
        {"GQA group 4, head_dim 10, length-1 beside long, 1 real token", 8, 2, 10, 65, 4, {1, 70, 1, 33}, {0, 0, 0, 32}, -1},
        {"GQA group 6, head_dim 64, 129 rows (9 key tiles)", 6, 1, 64, 256, 1, {129}, {0}, -1},
        {"head_dim 96 (3 x 32), three padded sequences", 4, 2, 96, 100, 3, {50, 2, 1}, {10, 1, 0}, -1},
        {"head_dim 128, cache: 17 rows after past 45", 4, 2, 128, 64, 1, {17}, {0}, 45},
        {"head_dim 256 (the limit, > 48 KiB shared memory), cache past 0", 2, 2, 256, 512, 1, {3}, {0}, 0},
        {"one decoding row, head_dim 34, past 100", 3, 3, 34, 17, 1, {1}, {0}, 100},
        {"GQA group 3, head_dim 8, six sequences", 6, 2, 8, 48, 6, {4, 1, 16, 17, 33, 2}, {1, 0, 15, 0, 1, 1}, -1},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        op_fixture f;
        int before = tu_failures;
        grzo_cuda_memory m0, m1;
        TU_CHECK(grzo_backend_cuda_memory(&gpu, &m0) == GRZO_OK, "memory stats");
        op_open(&f, &cases[i]);
        op_ids_and_elementwise(&f);
        op_rope_attention(&f);
        op_token_logprob(&f);
        op_close(&f);
        /* the ops states' device memory (tables, cuBLAS workspace, attention scratch) is the
           backend's: destroying them gives every byte back */
        TU_CHECK(grzo_backend_cuda_memory(&gpu, &m1) == GRZO_OK && m1.bytes_now == m0.bytes_now,
                 "ops, case '%s': the backend holds %zu device bytes after the states are destroyed, %zu before", cases[i].label,
                 m1.bytes_now, m0.bytes_now);
        printf("ops, case '%s': %s\n", cases[i].label, tu_failures == before ? "gpu == cpu" : "DIFFERENT");
    }
    {   /* the attention kernel's shared-memory opt-in belongs to the kernel: a state with head_dim
           160 (50 KiB) created after one with 256 (80 KiB) must not lower it under the first */
        static const op_case big = {"head_dim 256, before a head_dim 160 state", 2, 1, 256, 8, 2, {40, 3}, {0, 1}, -1};
        static const op_case mid = {"head_dim 160", 2, 2, 160, 8, 1, {5}, {0}, -1};
        op_fixture fb, fm;
        op_open(&fb, &big);
        op_open(&fm, &mid);
        op_rope_attention(&fb);
        op_rope_attention(&fm);
        op_close(&fm);
        op_close(&fb);
    }
    op_token_logprob_vocab(49152);
    op_token_logprob_vocab(128256);
    op_create_refusals(&cases[0]);
}

/* ---- whole models ------------------------------------------------------------------------------ */
typedef struct run {
    grzo_ctx *ctx;
    llm_model m;
    llm_state *st;
} run;

static void run_open(run *r, grzo_backend *be, const llm_config *cfg, llm_weights *w, const llm_model_desc *md,
                     int64_t max_rows, int32_t max_seqs, int32_t max_seq_len, const grzo_desc *gd) {
    grzo_desc d;
    llm_state_desc sd;
    if (gd) d = *gd; else memset(&d, 0, sizeof d);
    d.backend = be;
    memset(r, 0, sizeof *r);
    if (grzo_create(&d, &r->ctx) != GRZO_OK) { fprintf(stderr, "FATAL: grzo_create\n"); exit(1); }
    TU_OK(&r->m, llm_model_register_ex(r->ctx, &r->m, cfg, w, md));
    memset(&sd, 0, sizeof sd);
    sd.max_rows = max_rows;
    sd.max_seqs = max_seqs;
    sd.max_outputs = max_rows;
    sd.max_seq_len = max_seq_len;
    TU_OK(&r->m, llm_state_create(r->ctx, &r->m, &sd, &r->st));
}

static void run_close(run *r) {
    llm_state_free(r->st);
    llm_model_free(&r->m);
    grzo_destroy(r->ctx);
}

/* A batch that exercises packing: a long sequence, a length-1 one, a left-padded one; every
   real position requested. */
typedef struct test_batch {
    int32_t tokens[3][64], pos[3][64];
    llm_seq seqs[3];
    llm_batch b;
    int64_t n_rows, n_out;
} test_batch;

static void make_batch(test_batch *t, int32_t vocab) {
    static const int32_t len[3] = {61, 1, 29}, pad[3] = {0, 0, 7};
    uint64_t rng = 5;
    int32_t i, j;
    memset(t, 0, sizeof *t);
    for (i = 0; i < 3; i++) {
        for (j = 0; j < len[i]; j++) {
            t->tokens[i][j] = j < pad[i] ? 0 : tu_token(&rng, vocab);
            t->pos[i][j] = pad[i] + j;
        }
        t->seqs[i].tokens = t->tokens[i];
        t->seqs[i].n_tokens = len[i];
        t->seqs[i].n_pad = pad[i];
        t->seqs[i].out_pos = t->pos[i];
        t->seqs[i].n_out = len[i] - pad[i];
        t->n_rows += len[i];
        t->n_out += len[i] - pad[i];
    }
    t->b.seqs = t->seqs;
    t->b.n_seqs = 3;
}

/* logits of the test batch on backend be */
static float *batch_logits(grzo_backend *be, const llm_config *cfg, llm_weights *w, const llm_model_desc *md) {
    test_batch t;
    run r;
    float *logits;
    make_batch(&t, cfg->vocab_size);
    logits = (float *)malloc((size_t)t.n_out * (size_t)cfg->vocab_size * 4);
    if (!logits) exit(1);
    run_open(&r, be, cfg, w, md, t.n_rows, 3, 64, NULL);
    TU_OK(&r.m, llm_forward(r.ctx, &r.m, r.st, &t.b, logits));
    run_close(&r);
    return logits;
}

static int64_t batch_outputs(void) {
    test_batch t;
    make_batch(&t, 2);
    return t.n_out;
}

static int load_stories(llm_config *cfg, llm_weights *w) {
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/stories260K.bin", data_dir);
    if (llm_load(path, cfg, w, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "FAIL: cannot load %s: %s\n", path, err);
        tu_failures++;
        return 0;
    }
    return 1;
}

static void compare_forward(const char *label, const llm_config *cfg, llm_weights *w) {
    float *a = batch_logits(&cpu, cfg, w, NULL), *b = batch_logits(&gpu, cfg, w, NULL);
    int64_t n = batch_outputs() * cfg->vocab_size;
    double d = tu_max_abs_diff(a, b, n);
    printf("%s, fp32: max |logit gpu - cpu| = %.3g (logits up to %.3g)\n", label, d, max_abs(a, n));
    TU_CHECK(d <= 1e-4, "%s: GPU fp32 logits differ from the CPU's by %.3g > 1e-4", label, d);
    free(a);
    free(b);
}

static void test_forward(void) {
    llm_config cfg;
    llm_weights w;
    if (!load_stories(&cfg, &w)) return;
    compare_forward("stories260K", &cfg, &w);
    /* Llama-3.1's rotary scaling (issue 14): the device rotates by the tables model.c builds
       from llm_rope_inv_freq; with an original context of 8 stories260K's head (4 rotary pairs)
       has one pair blended and three scaled */
    cfg.rope_scaling = LLM_ROPE_SCALING_LLAMA3;
    cfg.rope_factor = 8.0f;
    cfg.rope_low_freq_factor = 1.0f;
    cfg.rope_high_freq_factor = 4.0f;
    cfg.rope_original_max_pos = 8;
    compare_forward("stories260K, rope_scaling llama3", &cfg, &w);
    llm_weights_free(&w);
}

static void test_gguf(void) {
    toy_opts o = toy_defaults();
    toy_model tm;
    llm_config cfg;
    llm_weights w;
    char err[512];
    o.untied = 1;
    o.seed = 17;
    toy_build(&o, &tm);
    if (llm_load_memory(tm.file, tm.size, &cfg, &w, NULL, err, sizeof err) != 0) {
        TU_CHECK(0, "generated GGUF does not load: %s", err);
        toy_free(&tm);
        return;
    }
    compare_forward("generated GGUF (untied head, GQA 4/2)", &cfg, &w);
    llm_weights_free(&w);
    toy_free(&tm);
}

/* A 16-bit storage type as the test sees it: p significant bits, smallest spacing q_min
   (subnormals), largest finite value. */
typedef struct fmt16 { const char *name; grzo_dtype dtype; int p; double q_min, max; } fmt16;

/* x rounded to the nearest value of the format, ties to even (nearbyint in the default
   rounding mode), written from the definition, independently of the model's converter:
   the spacing of values near x = m 2^e (m in [0.5, 1)) is 2^(e - p), never below q_min. */
static float round_to(const fmt16 *f, float x) {
    int e;
    double q, r;
    if (x == 0.0f || !isfinite(x)) return x;
    frexp((double)x, &e);
    q = ldexp(1.0, e - f->p);
    if (q < f->q_min) q = f->q_min;
    r = nearbyint((double)x / q) * q;
    return fabs(r) > f->max ? (float)copysign(INFINITY, r) : (float)r;
}

static void round_weights(const fmt16 *f, const llm_config *c, llm_weights *w) {
    int64_t qd = (int64_t)c->n_heads * c->head_dim, kvd = (int64_t)c->n_kv_heads * c->head_dim, i;
    int32_t l;
#define RB(ptr, n) for (i = 0; i < (n); i++) (ptr)[i] = round_to(f, (ptr)[i])
    RB(w->tok_emb, (int64_t)c->vocab_size * c->dim);
    RB(w->final_norm, c->dim);
    if (!c->tied_output) RB(w->output, (int64_t)c->vocab_size * c->dim);
    for (l = 0; l < c->n_layers; l++) {
        llm_layer *L = &w->layers[l];
        RB(L->attn_norm, c->dim); RB(L->ffn_norm, c->dim);
        RB(L->wq, qd * c->dim); RB(L->wk, kvd * c->dim); RB(L->wv, kvd * c->dim); RB(L->wo, c->dim * qd);
        RB(L->w1, (int64_t)c->hidden_dim * c->dim); RB(L->w2, (int64_t)c->dim * c->hidden_dim);
        RB(L->w3, (int64_t)c->hidden_dim * c->dim);
    }
#undef RB
}

/* 16-bit weights on the GPU vs fp32 on the CPU (see the header for the bound) */
static void check_16bit(const fmt16 *f) {
    llm_config cfg;
    llm_weights w;
    llm_model_desc md;
    float *fp32, *gpu16, *cpu16;
    int64_t n;
    double d_gpu, d_round, d_same;
    if (!load_stories(&cfg, &w)) return;
    n = batch_outputs() * cfg.vocab_size;
    memset(&md, 0, sizeof md);
    md.dtype = f->dtype;
    fp32 = batch_logits(&cpu, &cfg, &w, NULL);
    gpu16 = batch_logits(&gpu, &cfg, &w, &md);   /* the model converts w on its way to the GPU */
    round_weights(f, &cfg, &w);
    cpu16 = batch_logits(&cpu, &cfg, &w, NULL);  /* fp32 arithmetic on the rounded weights */
    d_gpu = tu_max_abs_diff(fp32, gpu16, n);
    d_round = tu_max_abs_diff(fp32, cpu16, n);
    d_same = tu_max_abs_diff(cpu16, gpu16, n);
    printf("stories260K, %s on the GPU: max |gpu %s - cpu fp32| = %.3g; effect of rounding the weights (cpu) = %.3g; "
           "|gpu %s - cpu on rounded weights| = %.3g; logits up to %.3g\n", f->name, f->name, d_gpu, d_round, f->name,
           d_same, max_abs(fp32, n));
    TU_CHECK(d_gpu <= d_round + 1e-4, "GPU %s logits are %.3g from fp32, more than the rounding explains (%.3g + 1e-4)",
             f->name, d_gpu, d_round);
    TU_CHECK(d_same <= 1e-4, "GPU %s logits are %.3g from the CPU's on the same rounded values (> 1e-4): the "
             "conversion to %s or the widening on the GPU is wrong", f->name, d_same, f->name);
    free(fp32); free(gpu16); free(cpu16);
    llm_weights_free(&w);
}

static void test_16bit(void) {
    const fmt16 bf16 = {"bf16", GRZO_DTYPE_BF16, 8, 1.1479437019748901e-40 /* 2^-133 */, 3.3895313892515355e38};
    const fmt16 f16 = {"f16", GRZO_DTYPE_F16, 11, 5.9604644775390625e-8 /* 2^-24 */, 65504.0};
    check_16bit(&bf16);
    check_16bit(&f16);
}

static void logprob_on(grzo_backend *be, const llm_config *cfg, llm_weights *w, double *sum, double *mean) {
    test_batch t;
    int32_t n_context[3] = {9, 0, 12};
    run r;
    make_batch(&t, cfg->vocab_size);
    t.seqs[1].n_tokens = 2;   /* a context token and one scored token */
    t.tokens[1][1] = 3;
    n_context[1] = 1;
    run_open(&r, be, cfg, w, NULL, 128, 3, 64, NULL);
    TU_OK(&r.m, llm_sequence_logprob(r.ctx, &r.m, r.st, &t.b, n_context, sum, mean));
    run_close(&r);
}

static void test_logprob(void) {
    llm_config cfg;
    llm_weights w;
    double sa[3], ma[3], sb[3], mb[3];
    static const int32_t scored[3] = {61 - 9, 1, 29 - 12};
    int i;
    if (!load_stories(&cfg, &w)) return;
    logprob_on(&cpu, &cfg, &w, sa, ma);
    logprob_on(&gpu, &cfg, &w, sb, mb);
    for (i = 0; i < 3; i++) {
        printf("llm_sequence_logprob, sequence %d (%d scored tokens): cpu %.9g gpu %.9g\n", i, scored[i], sa[i], sb[i]);
        TU_CHECK(fabs(sa[i] - sb[i]) <= 2e-4 * scored[i], "sequence %d: GPU log-likelihood %.9g vs CPU %.9g", i, sb[i], sa[i]);
        TU_CHECK(fabs(ma[i] - mb[i]) <= 2e-4, "sequence %d: GPU mean %.9g vs CPU %.9g", i, mb[i], ma[i]);
    }
    llm_weights_free(&w);
}

/* 5 GRZO steps through grzo_step: the loss of copy c is the mean negative log-likelihood of
   the last 8 tokens of its example. */
#define N_STEP_EX 4
typedef struct step_data { run *r; int32_t tokens[N_STEP_EX][40]; } step_data;

static grzo_status step_forward(grzo_ctx *ctx, const grzo_pass_info *pass, float *losses, void *user) {
    step_data *sd = (step_data *)user;
    llm_seq seqs[2 * N_STEP_EX];
    int32_t n_context[2 * N_STEP_EX];
    double mean[2 * N_STEP_EX];
    llm_batch b;
    int64_t c;
    grzo_status s;
    for (c = 0; c < pass->n_segments; c++) {
        int64_t e = pass->example[c];
        memset(&seqs[c], 0, sizeof seqs[c]);
        seqs[c].tokens = sd->tokens[e];
        seqs[c].n_tokens = 20 + (int32_t)e * 5;   /* different lengths */
        seqs[c].segment = c;
        n_context[c] = seqs[c].n_tokens - 8;
    }
    b.seqs = seqs;
    b.n_seqs = (int32_t)pass->n_segments;
    b.n_segments = pass->n_segments;
    s = llm_sequence_logprob(ctx, &sd->r->m, sd->r->st, &b, n_context, NULL, mean);
    if (s != GRZO_OK) return s;
    for (c = 0; c < pass->n_segments; c++) losses[c] = (float)-mean[c];
    return GRZO_OK;
}

static void steps_on(grzo_backend *be, double *loss) {
    llm_config cfg;
    llm_weights w;
    grzo_desc d;
    step_data sd;
    run r;
    uint64_t rng = 77;
    int i, j;
    if (!load_stories(&cfg, &w)) exit(1);
    memset(&d, 0, sizeof d);
    d.estimator = GRZO_ESTIMATOR_GRZO;
    d.seed = 1234;
    /* GRZO's step is lr / (2 sigma sqrt(B)) per coordinate whatever the gradient: 2.5e-3 here,
       so the loss falls smoothly (17.26 -> 16.78) and a loss that differs in its last bits
       (another summation order) moves the next steps by as little. At lr 1e-3 (0.25 a
       coordinate) training diverged (16 -> 29) and amplified such differences ~1e4 a step:
       the CPU against itself with one ulp added to half the losses failed the 1e-4 check. */
    d.lr = 1e-5f;
    d.sigma = 1e-3f;
    for (i = 0; i < N_STEP_EX; i++)
        for (j = 0; j < 40; j++) sd.tokens[i][j] = tu_token(&rng, cfg.vocab_size);
    run_open(&r, be, &cfg, &w, NULL, 2 * N_STEP_EX * 40, 2 * N_STEP_EX, 64, &d);
    sd.r = &r;
    for (i = 0; i < 5; i++) {
        grzo_step_report rep;
        TU_OK(&r.m, grzo_step(r.ctx, N_STEP_EX, step_forward, &sd, &rep));
        loss[i] = rep.loss;
    }
    run_close(&r);
    llm_weights_free(&w);
}

static void test_steps(void) {
    double a[5], b[5];
    int i;
    steps_on(&gpu, b);
    steps_on(&cpu, a);
    for (i = 0; i < 5; i++) {
        double rel = fabs(a[i] - b[i]) / fmax(fabs(a[i]), 1e-30);
        printf("GRZO step %d: loss cpu %.9g gpu %.9g (relative difference %.3g)\n", i, a[i], b[i], rel);
        TU_CHECK(rel <= 1e-4, "GRZO step %d: GPU loss %.9g vs CPU %.9g (relative %.3g > 1e-4)", i, b[i], a[i], rel);
    }
    TU_CHECK(a[4] != a[0], "the CPU losses did not move over 5 steps: the comparison shows nothing");
}

static void test_generate(void) {
    char path[1024], err[512];
    llm_config cfg;
    llm_weights w;
    llm_tokenizer *tok = NULL;
    llm_generate_desc g;
    int32_t tokens[201], n_total = 0;
    static text out;
    run r;
    if (!load_stories(&cfg, &w)) return;
    snprintf(path, sizeof path, "%s/tok512.bin", data_dir);
    if (llm_tokenizer_load_llama2c(path, cfg.vocab_size, &tok, err, sizeof err) != 0) {
        TU_CHECK(0, "cannot load %s: %s", path, err);
        llm_weights_free(&w);
        return;
    }
    run_open(&r, &gpu, &cfg, &w, NULL, 200, 1, 200, NULL);
    memset(&g, 0, sizeof g);
    g.steps = 200;
    g.stop[0] = llm_tokenizer_bos(tok);
    g.stop[1] = -1;
    g.on_token = collect;
    g.user_data = &out;
    out.tok = tok;
    tokens[0] = llm_tokenizer_bos(tok);
    TU_OK(&r.m, llm_generate(r.ctx, &r.m, r.st, tokens, 1, &g, &n_total));
    printf("GPU generation, %d tokens:\n%s\n", n_total - 1, out.buf);
    TU_CHECK(strcmp(out.buf, llama2c_expected) == 0, "the GPU's greedy text differs from llama2.c's reference");
    run_close(&r);
    llm_tokenizer_free(tok);
    llm_weights_free(&w);
}

/* Random init in backend memory: the same counter RNG on both backends gives the same
   fp32 weights, hence logits within the fp32 bound; bf16 random init runs and is finite. */
static void test_random_init(void) {
    llm_config cfg = tu_tiny_config(0);
    llm_model_desc md;
    float *a, *b;
    int64_t n = batch_outputs() * cfg.vocab_size, i;
    double d;
    int finite = 1;
    cfg.max_seq_len = 64;
    memset(&md, 0, sizeof md);
    md.random_init_seed = 99;
    a = batch_logits(&cpu, &cfg, NULL, &md);
    b = batch_logits(&gpu, &cfg, NULL, &md);
    d = tu_max_abs_diff(a, b, n);
    printf("random init (seed 99), fp32: max |logit gpu - cpu| = %.3g\n", d);
    TU_CHECK(d <= 1e-4, "randomly initialized models differ between GPU and CPU by %.3g", d);
    free(b);
    md.dtype = GRZO_DTYPE_BF16;
    b = batch_logits(&gpu, &cfg, NULL, &md);
    for (i = 0; i < n; i++) finite &= isfinite(b[i]) != 0;
    TU_CHECK(finite, "bf16 random init gives non-finite logits");
    md.dtype = GRZO_DTYPE_F16;
    free(b);
    b = batch_logits(&gpu, &cfg, NULL, &md);
    d = tu_max_abs_diff(a, b, n);
    printf("random init, f16 on the GPU vs fp32: max |diff| = %.3g\n", d);
    TU_CHECK(d < 0.05 * (max_abs(a, n) + 1.0), "f16 random init is far from the fp32 one (%.3g)", d);
    free(a);
    free(b);
}

static int wanted(int argc, char **argv, const char *name) {
    int i;
    if (argc <= 2) return 1;
    for (i = 2; i < argc; i++)
        if (strcmp(argv[i], name) == 0) return 1;
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DATA_DIR [CASE...]\n", argv[0]);
        return 1;
    }
    data_dir = argv[1];
    if (grzo_cuda_device_count() == 0) {
        printf("SKIP: no CUDA device\n");
        return TEST_SKIP;
    }
    if (grzo_backend_cpu_create(NULL, &cpu) != GRZO_OK || grzo_backend_cuda_create(NULL, &gpu) != GRZO_OK) {
        fprintf(stderr, "FAIL: cannot create the CPU and CUDA backends\n");
        return 1;
    }
    if (wanted(argc, argv, "ops")) test_ops();
    if (wanted(argc, argv, "forward")) test_forward();
    if (wanted(argc, argv, "gguf")) test_gguf();
    if (wanted(argc, argv, "16bit")) test_16bit();
    if (wanted(argc, argv, "logprob")) test_logprob();
    if (wanted(argc, argv, "steps")) test_steps();
    if (wanted(argc, argv, "generate")) test_generate();
    if (wanted(argc, argv, "random_init")) test_random_init();
    grzo_backend_destroy(&gpu);
    grzo_backend_destroy(&cpu);
    printf("%s\n", tu_failures ? "FAILED" : "all GPU checks passed");
    return tu_failures ? 1 : 0;
}
#else
int main(void) {
    printf("SKIP: this build has no CUDA backend\n");
    return TEST_SKIP;
}
#endif
