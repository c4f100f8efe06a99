/* test_llm_ops_cpu.c - the CPU op table's SwiGLU (examples/llm/ops_cpu.c) against silu
   computed in double, llm.c style: the vector expf (glibc's libmvec where GCC, glibc and
   OpenMP are there) must stay within a stated bound of the exact value, and an element's
   result must depend on its value alone:
     - bound: |y - silu(g) h| <= 8 ulp of the exact value (libmvec's expf measured 5 ulp,
       libm's 4), over g in [-90, 90] (dense), edge values (0, -0, tiny, large, the
       exp overflow and underflow regions) and h of both signs; results whose exact value
       is below 1e-35 must be below it too; NaN in, NaN out;
     - the same values at every offset of buffers of n = 1, 15, 16, 17, 33 and 10007 (the
       ragged end goes through a padded block) and at 1 and 2 threads give the same bits.
   And the table's other entries at their edges: rms_normalize at widths 1..17 against the
   formula, add_into and cache_append touching exactly n floats, the attention's bits at
   threads 0 (= 1), 1, 2 and 3, destroy(NULL); test_llm_ops_cpu_asan runs it all with the op
   table itself built under AddressSanitizer (a read or write past a row, a scratch sized
   for no thread). Exit 0 pass, 1 fail. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"

static int failures;

static double silu_exact(double g) { return g / (1.0 + exp(-g)); }

/* ulps of |want| between got and want. Exact values below 1e-35 in magnitude (g < -80: for
   g < -88.72 expf(-g) overflows and the float formula gives -0, scalar libm's expf as well)
   count as 0 ulp when the result is below that too, else as the worst. */
static double ulps(float got, double want) {
    if (fabs(want) < 1e-35) return fabs((double)got) < 1e-35 ? 0.0 : HUGE_VAL;
    return fabs((double)got - want) / (fabs(want) * 5.9604644775390625e-8);   /* 2^-24 */
}

static llm_ops_state *ops_open(int32_t threads) {
    llm_ops_desc d;
    llm_ops_state *os = NULL;
    char err[256];
    memset(&d, 0, sizeof d);
    d.n_threads = threads;
    d.n_heads = d.n_kv_heads = 1;
    d.head_dim = 2;
    d.max_rows = d.max_outputs = 1;
    d.max_seqs = d.max_seq_len = 1;
    if (llm_ops_cpu.create(&d, &os, err, sizeof err) != GRZO_OK) {
        fprintf(stderr, "FATAL: %s\n", err);
        exit(1);
    }
    return os;
}

static void swiglu(llm_ops_state *os, float *h1, const float *h3, int64_t n) {
    if (llm_ops_cpu.swiglu(os, h1, h3, n) != GRZO_OK) {
        fprintf(stderr, "FATAL: swiglu: %s\n", llm_ops_cpu.last_error(os));
        exit(1);
    }
}

/* the inputs: a dense sweep of [-90, 90], then the edge values */
static int64_t make_inputs(float *g, float *h, int64_t cap) {
    static const float edge[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-45f, 3.0e-38f, 87.0f, 88.7f, 89.0f, -87.0f,
                                 -88.8f, -103.0f, -104.0f, -150.0f, 1e10f, -1e10f, 3.4e38f, -3.4e38f};
    int64_t n = 0, i;
    for (i = 0; i <= 180000 && n < cap; i++, n++) {
        g[n] = (float)(-90.0 + 0.001 * (double)i);
        h[n] = (i % 3 == 0) ? -1.5f : 0.75f;
    }
    for (i = 0; i < (int64_t)(sizeof edge / sizeof edge[0]) && n < cap; i++, n++) {
        g[n] = edge[i];
        h[n] = 1.0f;
    }
    return n;
}

static void check_bound(void) {
    int64_t cap = 200000, n, i, worst_i = 0;
    float *g = (float *)malloc((size_t)cap * sizeof(float)), *h = (float *)malloc((size_t)cap * sizeof(float));
    float *y = (float *)malloc((size_t)cap * sizeof(float)), nan_in[2] = {NAN, 1.0f}, nan_h[2] = {1.0f, NAN};
    llm_ops_state *os = ops_open(2);
    double worst = 0.0;
    if (!g || !h || !y) { fprintf(stderr, "FATAL: out of memory\n"); exit(1); }
    n = make_inputs(g, h, cap);
    memcpy(y, g, (size_t)n * sizeof(float));
    swiglu(os, y, h, n);
    for (i = 0; i < n; i++) {
        double want = silu_exact((double)g[i]) * (double)h[i], e = ulps(y[i], want);
        if (!(e <= worst)) { worst = e; worst_i = i; }
    }
    if (!(worst <= 8.0)) {
        failures++;
        printf("FAIL: swiglu: %.2f ulp at g = %.9g (got %.9g, want %.9g)\n", worst, (double)g[worst_i],
               (double)y[worst_i], silu_exact((double)g[worst_i]) * (double)h[worst_i]);
    } else {
        printf("ok: swiglu within %.2f ulp of silu(g) h in double over %lld values (bound 8)\n", worst, (long long)n);
    }
    swiglu(os, nan_in, nan_h, 2);
    if (!isnan(nan_in[0]) || !isnan(nan_in[1])) {
        failures++;
        printf("FAIL: swiglu: NaN in gave %g, %g\n", (double)nan_in[0], (double)nan_in[1]);
    }
    llm_ops_cpu.destroy(os);
    free(g); free(h); free(y);
}

/* each of the values at every offset of a buffer of n: bit-identical to the first run */
static void check_position_free(void) {
    static const int64_t lengths[] = {1, 15, 16, 17, 33, 10007};
    enum { N_VALUES = 37 };
    float v[N_VALUES], hv[N_VALUES], want[N_VALUES];
    int64_t li, off, i, bad = 0;
    int threads;
    llm_ops_state *one = ops_open(1);
    for (i = 0; i < N_VALUES; i++) {
        v[i] = (float)(-40.0 + 2.2 * (double)i) + 0.123f;
        hv[i] = 1.0f - 0.05f * (float)i;
        want[i] = v[i];
    }
    swiglu(one, want, hv, N_VALUES);
    for (threads = 1; threads <= 2; threads++) {
        llm_ops_state *os = ops_open(threads);
        for (li = 0; li < (int64_t)(sizeof lengths / sizeof lengths[0]); li++) {
            int64_t n = lengths[li];
            float *x = (float *)malloc((size_t)n * sizeof(float)), *y = (float *)malloc((size_t)n * sizeof(float));
            if (!x || !y) { fprintf(stderr, "FATAL: out of memory\n"); exit(1); }
            for (off = 0; off < n; off += (n > 64 ? 997 : 1)) {
                for (i = 0; i < n; i++) { x[i] = v[(i + off) % N_VALUES]; y[i] = hv[(i + off) % N_VALUES]; }
                swiglu(os, x, y, n);
                for (i = 0; i < n; i++)
                    if (memcmp(&x[i], &want[(i + off) % N_VALUES], sizeof(float)) != 0 && bad++ < 5)
                        printf("FAIL: swiglu: n %lld, %d threads, element %lld: %.9g, alone %.9g\n", (long long)n, threads,
                               (long long)i, (double)x[i], (double)want[(i + off) % N_VALUES]);
            }
            free(x); free(y);
        }
        llm_ops_cpu.destroy(os);
    }
    llm_ops_cpu.destroy(one);
    if (bad) failures++;
    else printf("ok: swiglu gives an element the same bits at any offset, buffer length and thread count\n");
}

/* ---- the table's other entries, at their edges (ops.h's contract) -------------------- */
static float *floats(int64_t n, uint32_t seed) {
    float *x = (float *)malloc((size_t)n * sizeof(float));
    uint64_t st = 0x9E3779B97F4A7C15ull * (seed + 1);
    int64_t i;
    if (!x) { fprintf(stderr, "FATAL: out of memory\n"); exit(1); }
    for (i = 0; i < n; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(st >> 40) / 16777216.0) - 0.5f;
    }
    return x;
}

/* rms_normalize over rows of every width 1..17 (the sum's eight lanes and each length of
   its tail, 7 included) against the formula in double; buffers of the exact size, so that
   the ASan build reports a row read or written past its end */
static void check_rms(llm_ops_state *os) {
    int32_t dim, j;
    int bad = 0;
    for (dim = 1; dim <= 17; dim++) {
        float *x = floats(2 * dim, (uint32_t)dim), *y = (float *)malloc((size_t)(2 * dim) * sizeof(float));
        int r;
        if (!y || llm_ops_cpu.rms_normalize(os, x, y, 2, dim, 1e-5f) != GRZO_OK) { bad++; free(x); free(y); continue; }
        for (r = 0; r < 2; r++) {
            double ss = 0.0, scale;
            for (j = 0; j < dim; j++) ss += (double)x[r * dim + j] * x[r * dim + j];
            scale = 1.0 / sqrt(ss / dim + 1e-5);
            for (j = 0; j < dim; j++)
                if (fabs(y[r * dim + j] - x[r * dim + j] * scale) > 1e-6 * fabs(x[r * dim + j] * scale) + 1e-30) bad++;
        }
        free(x); free(y);
    }
    if (bad) { failures++; printf("FAIL: rms_normalize: %d elements off the formula in widths 1..17\n", bad); }
}

/* add_into and cache_append touch exactly their n floats: a float past them is a canary */
static void check_add_and_append(llm_ops_state *os) {
    int64_t n, i;
    int bad = 0;
    for (n = 1; n <= 33; n++) {
        float *x = floats(n + 1, 7), *y = floats(n + 1, 8), *x0 = floats(n + 1, 7);
        float *cache = (float *)malloc((size_t)(2 * n + 2) * sizeof(float));
        if (!cache) { fprintf(stderr, "FATAL: out of memory\n"); exit(1); }
        x[n] = x0[n] = 5.0f;
        y[n] = 1.0f;
        if (llm_ops_cpu.add_into(os, x, y, n) != GRZO_OK) bad++;
        for (i = 0; i <= n; i++)
            if (x[i] != (i < n ? x0[i] + y[i] : 5.0f)) bad++;
        for (i = 0; i < 2 * n + 2; i++) cache[i] = -7.0f;
        if (llm_ops_cpu.cache_append(os, cache, n, y, n) != GRZO_OK) bad++;
        for (i = 0; i < 2 * n + 2; i++)
            if (cache[i] != (i >= n && i < 2 * n ? y[i - n] : -7.0f)) bad++;
        free(x); free(y); free(x0); free(cache);
    }
    if (bad) { failures++; printf("FAIL: add_into / cache_append: %d floats wrong or touched past n\n", bad); }
}

/* a causal grouped-query attention over two sequences (one left-padded) with each thread
   count: threads 0 means 1 (ops.h), and every count gives the same bits */
static int attention_with(int32_t threads, const float *q0, const float *k, const float *v, float *q) {
    static const int64_t row0[2] = {0, 5};
    static const int32_t pad[2] = {0, 1}, len[2] = {5, 3}, pos[8] = {0, 1, 2, 3, 4, -1, 0, 1}, ids[8] = {0};
    int32_t ids_out[8];
    llm_ops_desc d;
    llm_layout lay;
    llm_ops_state *os = NULL;
    char err[256];
    int ok;
    memset(&d, 0, sizeof d);
    d.n_threads = threads;
    d.n_heads = 2;
    d.n_kv_heads = 1;
    d.head_dim = 4;
    d.max_rows = 8;
    d.max_outputs = 1;
    d.max_seqs = 2;
    d.max_seq_len = 5;
    memset(&lay, 0, sizeof lay);
    lay.n_seqs = 2;
    lay.n_rows = 8;
    lay.ids = ids;
    lay.seq_row0 = row0;
    lay.seq_pad = pad;
    lay.seq_len = len;
    lay.row_pos = pos;
    memcpy(q, q0, 8 * 2 * 4 * sizeof(float));
    if (llm_ops_cpu.create(&d, &os, err, sizeof err) != GRZO_OK) {
        printf("FAIL: create with %d threads: %s\n", threads, err);
        return 0;
    }
    ok = llm_ops_cpu.upload_layout(os, &lay, ids_out) == GRZO_OK && llm_ops_cpu.attention(os, q, k, v, -1, 8) == GRZO_OK;
    llm_ops_cpu.destroy(os);
    return ok;
}

static void check_attention_threads(void) {
    float *q0 = floats(64, 1), *k = floats(32, 2), *v = floats(32, 3), want[64], got[64];
    int32_t threads;
    if (!attention_with(1, q0, k, v, want)) failures++;
    for (threads = 0; threads <= 3; threads++)
        if (!attention_with(threads, q0, k, v, got) || memcmp(got, want, sizeof want) != 0) {
            failures++;
            printf("FAIL: attention with %d threads differs from 1 thread's\n", threads);
        }
    free(q0); free(k); free(v);
}

static void check_entries(void) {
    llm_ops_state *os = ops_open(2);
    llm_ops_cpu.destroy(NULL);   /* ops.h: nothing */
    check_rms(os);
    check_add_and_append(os);
    llm_ops_cpu.destroy(os);
    check_attention_threads();
    if (!failures) printf("ok: rms_normalize, add_into, cache_append and the attention at their edges\n");
}

int main(void) {
    check_bound();
    check_position_free();
    check_entries();
    printf("test_llm_ops_cpu: %s\n", failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}
