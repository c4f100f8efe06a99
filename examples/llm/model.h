/* model.h - the Llama-family transformer forward of the grzo LLM examples.

   Every weight of the model is a grzo parameter block, so one forward serves three uses:
   outside a step it is plain inference (evaluation, generation); inside a GRZO pass it is
   the fused forward of the 2B perturbed example copies; inside a MeZO/FZOO pass it is the
   forward of B copies under one shared perturbation. Blocks:
       token_embd          EMBEDDING (vocab x dim), read with grzo_embedding
       blk.L.attn_norm     VECTOR (dim), RMSNorm gain, grzo_vector(GRZO_VECTOR_MUL)
       blk.L.attn_q/k/v    MATRIX, grzo_linear        blk.L.attn_output  MATRIX
       blk.L.ffn_norm      VECTOR (dim)
       blk.L.ffn_gate/up   MATRIX (w1, w3)           blk.L.ffn_down     MATRIX (w2)
       output_norm         VECTOR (dim)
       output              MATRIX (vocab x dim); with a tied head there is no such block:
                           the head is token_embd used through grzo_linear (grzo then
                           perturbs and updates every row of it).
   Registration order is the order above (layers 0..L-1), so checkpoints of one model are
   interchangeable between programs.

   Architecture: x = E[tok]; per layer x += Wo attn(rope(Wq n1(x)), rope(Wk n1(x)), Wv n1(x)),
   x += W2 (silu(W1 n2(x)) * W3 n2(x)), n(x) = g * x / sqrt(mean(x^2) + eps); logits =
   Wout n_f(x). Rotary embeddings rotate adjacent pairs (2i, 2i+1) of each head with
   angle pos * theta^(-2i/head_dim) (Llama-3.1's rotary scaling changes these frequencies:
   llm_rope_inv_freq, llm.h). Grouped-query attention: query head h reads key/value
   head h / (n_heads / n_kv_heads). Causal.

   Batches: sequences are packed back to back as rows (no padding is needed); attention
   stays inside a sequence. A sequence may still carry left padding (n_pad): padded tokens
   are never attended to and positions count from the first real token, so a padded
   sequence gives the same logits as the unpadded one. Inside a pass each sequence belongs
   to one segment (example copy) and the sequences must be ordered by segment, so that
   the rows of segment c are contiguous; segments may be empty. The output head runs only
   on the requested positions: their rows are gathered, normalized and multiplied by the
   head in one grzo_linear whose row offsets are again split per segment.

   Memory: an llm_state owns every scratch buffer, sized once for the largest batch it will
   see; a forward allocates nothing (grzo and its backend allocate their own per-step
   transients). The attention, RMSNorm, RoPE, SwiGLU, residual, head-gather and
   log-softmax arithmetic between grzo's operations runs through an op table (ops.h) that
   follows the backend: host loops on host memory (ref, cpu), CUDA kernels on the CUDA
   backend's stream, where the activations stay in device memory for the whole forward
   and only logits (llm_forward) or one log-probability per scored token
   (llm_sequence_logprob) cross to the host.

   One training step (any estimator), one sequence per example copy:
       grzo_step_begin(ctx, B, &si);
       for (p = 0; p < si.n_passes; p++) {
           grzo_pass_begin(ctx, &pi);
           for (c = 0; c < pi.n_segments; c++)      // copy c reads example pi.example[c]
               seqs[c] = (llm_seq){ .tokens = ex[pi.example[c]].ids, .n_tokens = ...,
                                    .segment = c, .out_pos = &last[c], .n_out = 1 };
           batch = (llm_batch){ .seqs = seqs, .n_seqs = pi.n_segments, .n_segments = pi.n_segments };
           llm_forward(ctx, &model, st, &batch, logits);   // or llm_sequence_logprob
           ... one loss per copy from its logits ...
           grzo_pass_end(ctx, losses);
       }
       grzo_step_end(ctx, &report);
   batch.n_segments must be pass_info.n_segments inside a pass and 0 outside one (an
   evaluation batch); several sequences may share a segment (e.g. the candidates of one
   example), as long as they are adjacent.

   grzo's implementation: this library's grzo_impl.c defines GRZO_IMPLEMENTATION (with the
   CPU backend), so a program that links the llm library includes grzo.h WITHOUT the
   define. Errors: every function returns grzo_status; the message of the last failure is
   in llm_model_error(model) (it includes grzo_last_error when a grzo operation failed). */
#ifndef GRZO_LLM_MODEL_H
#define GRZO_LLM_MODEL_H

#include <stdint.h>

#include "grzo.h"
#include "llm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct llm_layer_blocks {
    grzo_block attn_norm, wq, wk, wv, wo, ffn_norm, w1, w2, w3;
} llm_layer_blocks;

struct llm_ops;

typedef struct llm_model {
    llm_config cfg;
    llm_weights *w;               /* not owned; the blocks point into it (host F32 weights on a host
                                     backend); NULL when the weights were copied into backend memory */
    grzo_block tok_emb;           /* EMBEDDING */
    grzo_block output;            /* MATRIX, or == tok_emb when cfg.tied_output */
    grzo_block final_norm;        /* VECTOR */
    llm_layer_blocks *layers;     /* n_layers; owned (llm_model_free) */
    const grzo_backend *be;       /* the context's backend */
    const struct llm_ops *ops;    /* the non-perturbed ops for that backend (ops.h) */
    grzo_dtype dtype;             /* storage type of the weights */
    void **owned;                 /* backend buffers holding the weights when they are not w's (n_owned) */
    int32_t n_owned;
    char err[320];
} llm_model;

/* Where and how the weights are stored. */
typedef struct llm_model_desc {
    grzo_dtype dtype;             /* weight storage in backend memory: GRZO_DTYPE_F32 (0), BF16, F16 */
    uint64_t random_init_seed;    /* nonzero: weights generated in backend memory from grzo's counter RNG
                                     (matrices/embedding N(0, 0.02^2), norm gains 1); w may then be NULL */
} llm_model_desc;

/* Check cfg, add every weight of w to ctx as a grzo block (names as above) and fill m.
   Call before the first step. On a host-memory backend with F32 weights the blocks point
   into w, which must outlive m and ctx; otherwise (a device-memory backend, a 16-bit
   dtype, random init) the weights are copied, converted to desc->dtype, into backend
   memory owned by m (llm_model_free releases it) and w is not used afterwards. A dtype
   the backend does not store (grzo_backend_caps.dtypes) is GRZO_ERR_UNSUPPORTED. The
   forward's non-perturbed ops follow the backend: host loops for host memory, CUDA
   kernels on the backend's stream for the "cuda" backend (a build with LLM_HAVE_CUDA).
   desc NULL: F32, weights from w. A failed registration may leave in ctx the blocks it
   added before the failure, over memory it has freed: destroy ctx after it (grzo.h has no
   way to remove a block), do not step or checkpoint it. */
grzo_status llm_model_register_ex(grzo_ctx *ctx, llm_model *m, const llm_config *cfg, llm_weights *w,
                                  const llm_model_desc *desc);
grzo_status llm_model_register(grzo_ctx *ctx, llm_model *m, const llm_config *cfg, llm_weights *w);
void llm_model_free(llm_model *m);          /* frees m->layers and the weights m owns (not w's) */
const char *llm_model_error(const llm_model *m);

/* A backend for a device name: "cpu" (n_threads: 0 = all cores) or "cuda" (device 0).
   weights: the dtype the model will store its weights in (llm_model_desc.dtype); on "cuda"
   it picks the math mode: 16-bit weights run in fast math (tensor cores, fp32 accumulation:
   what bf16/f16 storage is for), fp32 weights in pedantic fp32 (no TF32: the CPU's results
   within summation order). The CPU ignores it. On failure err gets one line: unknown
   device, a build without the CUDA backend, no CUDA device, or the CUDA backend failed to
   start. */
grzo_status llm_backend_create(const char *device, int32_t n_threads, grzo_dtype weights, grzo_backend *out, char *err,
                               size_t errlen);

/* One sequence of a batch. */
typedef struct llm_seq {
    const int32_t *tokens;        /* n_tokens ids, host memory */
    int32_t n_tokens;
    int32_t n_pad;                /* tokens[0..n_pad) are left padding (0: none) */
    int64_t segment;              /* inside a pass: the segment (copy) it belongs to; ignored outside */
    const int32_t *out_pos;       /* indices into tokens (>= n_pad) whose logits are wanted */
    int32_t n_out;                /* (predicting the token after each); may be 0 */
} llm_seq;

typedef struct llm_batch {
    const llm_seq *seqs;          /* ordered by segment inside a pass */
    int32_t n_seqs;
    int64_t n_segments;           /* inside a pass: pass_info.n_segments; outside a pass: 0 */
} llm_batch;

/* The attention of the CUDA ops, in one of two forms that compute the same thing (issue 16
   measures them against each other): a fused kernel (online softmax over key tiles, fp32 on
   the CUDA cores), or cuBLAS batched fp32 GEMMs around a masked softmax kernel, over the
   batch's sequences padded to its longest (scratch 3 S H L hd + S H L^2 floats for S
   sequences of at most L rows, H query heads; a forward with a cache, generation's, always
   runs the fused kernel). AUTO is the GEMM form, measured the faster on an H200 (23 % less
   time for SmolLM2-135M's forward, 11 % for the Llama-3-8B shape, contexts of ~256 tokens),
   while its scratch for the batch is at most 4 GiB, else the fused kernel (attention_gemm.h:
   llm_att_auto_uses_gemm); FUSED saves that memory where it matters more than the time. The
   CPU ops have one form: they take AUTO only (GRZO_ERR_UNSUPPORTED otherwise). */
typedef enum llm_attention {
    LLM_ATTENTION_AUTO = 0,
    LLM_ATTENTION_FUSED = 1,
    LLM_ATTENTION_GEMM = 2
} llm_attention;

/* Capacity of a state: the largest batch it will run. */
typedef struct llm_state_desc {
    int64_t max_rows;             /* tokens summed over a batch's sequences (padding included) */
    int32_t max_seqs;
    int64_t max_outputs;          /* requested positions summed over a batch */
    int32_t max_seq_len;          /* longest sequence, padding included; 0: cfg.max_seq_len */
    int64_t max_segments;         /* largest pass (2B for GRZO); 0: max_seqs */
    llm_attention attention;      /* 0: AUTO */
} llm_state_desc;

typedef struct llm_state llm_state;

/* Where a state's forwards spent their time (wall clock, summed since the last reset). */
typedef struct llm_profile {
    double forward_s;             /* inside llm_forward */
    double linear_s;              /* inside grzo_linear: the GEMMs, perturbed or plain */
    double vector_embedding_s;    /* inside grzo_vector and grzo_embedding */
    double attention_s;           /* the host's attention (scores, softmax, values) */
    int64_t n_forward, n_linear, n_rows;
} llm_profile;

grzo_status llm_state_create(grzo_ctx *ctx, llm_model *m, const llm_state_desc *desc, llm_state **out);
void llm_state_free(llm_state *st);

/* Run the model over a batch and write the logits of every requested position, in batch
   order (sequence by sequence, out_pos order): logits[n_outputs x vocab], host memory. */
grzo_status llm_forward(grzo_ctx *ctx, llm_model *m, llm_state *st, const llm_batch *batch, float *logits);

void llm_state_profile(const llm_state *st, llm_profile *out);
void llm_state_profile_reset(llm_state *st);

/* Candidate scoring. Sequence s is a context tokens[0..n_context[s]) followed by the
   tokens to score, tokens[n_context[s]..n_tokens); every token t to score contributes
   log softmax(logits at t-1)[tokens[t]]. Writes the sum over its scored tokens and the
   mean (sum / count) per sequence; either output may be NULL. The sequences' out_pos and
   n_out are ignored (this call requests the positions itself). Works inside a pass, many
   sequences at once, like llm_forward. Uses a logits buffer of the state (max_outputs x
   vocab floats), allocated on first use. */
grzo_status llm_sequence_logprob(grzo_ctx *ctx, llm_model *m, llm_state *st, const llm_batch *batch,
                                 const int32_t *n_context, double *sum_out, double *mean_out);

/* log softmax(logits[0..n))[token], computed in double; -INFINITY for token out of range. */
double llm_log_softmax_at(const float *logits, int32_t n, int32_t token);

/* Text generation, outside a step (plain forward). Called with each generated token and
   the one before it; return nonzero to stop. */
typedef int (*llm_token_fn)(int32_t prev, int32_t token, void *user_data);

typedef struct llm_generate_desc {
    int32_t steps;                /* positions in all, prompt included (llama2.c's -n) */
    float temperature;            /* 0: greedy (the first maximum); else sample softmax(logits / T) */
    uint64_t seed;                /* sampling draws grzo_uniform_at(seed, position, GRZO_USER_BLOCK, 0, 0) */
    int32_t stop[2];              /* tokens that end the text (not emitted), e.g. BOS and EOS; -1: none */
    llm_token_fn on_token;        /* may be NULL */
    void *user_data;
} llm_generate_desc;

/* Extend tokens[0..n_prompt) (n_prompt >= 1, e.g. just BOS) until position steps - 1 has
   been predicted (llama2.c's loop: steps - n_prompt + 1 new tokens at most) or a stop token
   comes. tokens must have room for steps + 1 ids; *n_total receives the final length.
   The state needs max_rows and max_seq_len >= steps. The prompt runs as one forward, then
   each new token as one row against a key/value cache (n_layers x max_seq_len x kv_dim,
   two of them, allocated in the state on first use). */
grzo_status llm_generate(grzo_ctx *ctx, llm_model *m, llm_state *st, int32_t *tokens, int32_t n_prompt,
                         const llm_generate_desc *desc, int32_t *n_total);

#ifdef __cplusplus
}
#endif
#endif /* GRZO_LLM_MODEL_H */
