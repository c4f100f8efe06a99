/* ops.h - the non-perturbed operations of the Llama forward, as op tables.

   model.c runs ONE forward: the weights go through grzo (grzo_embedding, grzo_vector,
   grzo_linear), everything between those calls goes through an llm_ops table chosen from
   the backend's capabilities:
       llm_ops_cpu   host loops (OpenMP) on host-addressable backend memory (ref, cpu backends)
       llm_ops_cuda  kernels on the CUDA backend's stream (built when LLM_HAVE_CUDA is defined)
   Every pointer an op receives is backend memory of the state's backend, except where a
   comment says host. An op never synchronizes with the host unless its result goes to the
   host (token_logprob's values); the tables of a batch (positions, sequence starts, pads,
   lengths, output rows) travel once per forward, in upload_layout.

   The ops state (llm_ops_state) holds what the ops need beside their arguments: the model's
   shape, the rotary tables and the batch's layout as the ops read it (host pointers for the
   CPU table, device copies for CUDA), and scratch. One per llm_state. */
#ifndef GRZO_LLM_OPS_H
#define GRZO_LLM_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "grzo.h"
#include "model.h"   /* llm_attention */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct llm_ops_desc {
    const grzo_backend *be;
    int32_t n_threads;            /* CPU: the backend's thread count */
    int32_t n_heads, n_kv_heads, head_dim;
    int64_t max_rows, max_outputs;
    int32_t max_seqs, max_seq_len;
    const float *rope_cos, *rope_sin;   /* host, max_seq_len x head_dim/2; alive as long as the ops state */
    llm_attention attention;      /* which form of the attention (model.h) */
} llm_ops_desc;

/* The layout of one packed batch, host memory. Sequence i covers rows [seq_row0[i],
   seq_row0[i] + seq_len[i]), its first seq_pad[i] rows are left padding; row_pos is the
   rotary position of each row (-1: padding); out_row the row of each requested output. */
typedef struct llm_layout {
    int32_t n_seqs;
    int64_t n_rows, n_out;
    const int32_t *ids;           /* n_rows token ids */
    const int64_t *seq_row0;
    const int32_t *seq_pad, *seq_len;
    const int32_t *row_pos;
    const int64_t *out_row;
} llm_layout;

typedef struct llm_ops_state llm_ops_state;

typedef struct llm_ops {
    const char *name;             /* "cpu", "cuda" */
    grzo_status (*create)(const llm_ops_desc *d, llm_ops_state **out, char *err, size_t errlen);
    void (*destroy)(llm_ops_state *os);   /* NULL: nothing */
    /* The batch's tables, and its token ids into ids (backend memory, n_rows) for grzo_embedding. */
    grzo_status (*upload_layout)(llm_ops_state *os, const llm_layout *host, int32_t *ids);
    /* y = x / sqrt(mean(x^2) + eps) row by row (the gain is a grzo_vector afterwards); y may be x */
    grzo_status (*rms_normalize)(llm_ops_state *os, const float *x, float *y, int64_t n_rows, int32_t dim, float eps);
    /* rotate adjacent pairs (2i, 2i+1) of every head of every non-padding row, in place */
    grzo_status (*rope)(llm_ops_state *os, float *t, int64_t n_rows, int32_t n_heads);
    /* Causal grouped-query attention inside each sequence of the layout; the output replaces
       q; padding rows output 0. past < 0: keys and values are the batch's rows; past >= 0
       (one sequence): k and v are the layer's cache, the batch's rows appended after past rows. */
    grzo_status (*attention)(llm_ops_state *os, float *q, const float *k, const float *v, int32_t past, int64_t n_rows);
    grzo_status (*swiglu)(llm_ops_state *os, float *h1, const float *h3, int64_t n);   /* h1 = silu(h1) * h3 */
    grzo_status (*add_into)(llm_ops_state *os, float *x, const float *y, int64_t n);   /* x += y */
    /* y[i] = x[out_row[i]] for the layout's n_out output rows (dim floats each) */
    grzo_status (*gather_rows)(llm_ops_state *os, const float *x, float *y, int32_t dim);
    /* cache[first .. first + n) = src[0 .. n): a layer's keys or values after the past ones */
    grzo_status (*cache_append)(llm_ops_state *os, float *cache, int64_t first, const float *src, int64_t n);
    /* out[o] = log softmax(logits[o])[target[o]] in double for o < n (-INFINITY for a target
       outside [0, vocab)); target and out are host memory: the only transfer is n doubles. */
    grzo_status (*token_logprob)(llm_ops_state *os, const float *logits, int32_t vocab, const int32_t *target, int64_t n,
                                 double *out);
    const char *(*last_error)(const llm_ops_state *os);
} llm_ops;

extern const llm_ops llm_ops_cpu;
#ifdef LLM_HAVE_CUDA
extern const llm_ops llm_ops_cuda;
#endif

#ifdef __cplusplus
}
#endif
#endif /* GRZO_LLM_OPS_H */
