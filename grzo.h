/* grzo.h - v0.1.0 - Group-Relative Zeroth-Order fine-tuning, single-header C99 library.
   License: MIT (see LICENSE at the end of this file and in the repository).

   DO THIS in exactly one C (or C++) file:

       #define GRZO_IMPLEMENTATION
       #include "grzo.h"
       #include "backends/grzo_cpu.h"     (the fast CPU backend; optional)

   and include "grzo.h" without the define everywhere else. Link -lm; for the CPU
   backend also -lopenblas (when built with GRZO_USE_OPENBLAS) and -fopenmp.

   WHAT IT IS
   grzo trains a model from forward passes only. Each step every example of the
   mini-batch gets its own perturbation of every weight matrix,
       Z_i = U (.) (r_i s_i^T)            (shared random base U, per-example sign vectors)
   the "+" and "-" copies of the batch run as one fused forward of 2B examples, the
   B loss differences are normalized by their standard deviation, and the weights are
   updated by W -= lr/(2 sigma) * U (.) (R^T diag(a) S) / B, with U and the signs
   regenerated from a counter-based RNG instead of being stored.

   TABLE OF CONTENTS
     1. Configuration macros
     2. Step by step (the recipe)
     3. Estimators
     3b. Will GRZO help? The alignment diagnostic (B_eff)
     3c. Variants: sparse, low-rank, quantized
     4. Errors, memory, threads, determinism
     4b. Data parallelism (several processes or GPUs, one communication interface)
     5. Backends
     6. Checkpoint format
     7. What grzo does not do
     8. API (declarations)
     9. Implementation (under GRZO_IMPLEMENTATION)

   1. CONFIGURATION MACROS
     GRZO_IMPLEMENTATION  define in one TU only: emits the implementation.
     GRZO_STATIC          define globally: every function becomes static (private copy).
     GRZO_ASSERT(x)       internal invariants only; default assert(); compiled out by NDEBUG.
     Host memory goes through desc.allocator (defaults to malloc/free); there are no
     allocator macros. The implementation needs IEEE arithmetic: building it with
     -ffast-math is refused at compile time (the RNG and the NaN guards rely on it).

   2. STEP BY STEP
     grzo_backend be;  grzo_backend_cpu_create(&(grzo_cpu_desc){0}, &be);
     grzo_ctx *ctx;    grzo_create(&(grzo_desc){ .backend = &be, .lr = 1e-3f }, &ctx);
     grzo_block w1;    grzo_block_add(ctx, &(grzo_block_desc){ .kind = GRZO_BLOCK_MATRIX,
                                      .rows = d_out, .cols = d_in, .data = W1, .name = "fc1" }, &w1);
     for (step...) {
         grzo_step_info si;  grzo_step_begin(ctx, B, &si);
         for (p = 0; p < si.n_passes; p++) {
             grzo_pass_info pi;  grzo_pass_begin(ctx, &pi);
             // forward over pi.n_segments = pi.n_copies * B example copies; copy c
             // reads example pi.example[c]. Rows of copy c are [off[c], off[c+1]).
             grzo_linear(ctx, w1, X, H, &(grzo_rows){ .n_rows = N });  // perturbed GEMM
             ...
             grzo_pass_end(ctx, losses);              // one loss per copy
         }
         grzo_step_report rep;  grzo_step_end(ctx, &rep);   // normalize + update
     }
     grzo_step() runs the same loop with a forward callback. Outside a step the
     operations are plain (unperturbed): the same forward serves evaluation.
     Several processes or GPUs (desc.comm, section 4b): every rank runs this same loop;
     its passes list only its own segments, and grzo_step_end applies the same update
     everywhere.

     grzo_rows: .offsets = NULL splits .n_rows evenly over the segments (every copy has
     the same number of rows); otherwise .offsets holds n_segments+1 non-decreasing row
     offsets starting at 0 and ending at n_rows. grzo_linear's x and y must not share
     memory (INVALID_ARG). Layout inside a GRZO pass: copies
     0..B-1 are the "+" copies of examples 0..B-1, copies B..2B-1 the "-" copies.
     A pass in pieces: .first_segment and .n_segments (0: through the last) say that the
     call's rows are those of segments [first_segment, first_segment + n_segments) only
     (of this rank's, with desc.comm), and .offsets/.n_rows then describe just those
     segments. A forward may so run its pass a group of copies at a time through every
     layer, to keep a group's activations in cache or to bound their memory: each row gets
     the perturbation it gets in one call over the pass (equal results within fp32
     reassociation, a backend's blocking depending on the call's rows). Segments outside
     the pass are INVALID_ARG. Outside a pass both fields are ignored, so the same forward
     in pieces serves evaluation.

   3. ESTIMATORS (desc.estimator)      passes x copies   update
     GRZO (default)   1 x 2B   Z_i = U(.)(r_i s_i^T), a_i = delta_i/(std(delta)+eps)
     CANONICAL        1 x 2B   same perturbations, a_i = delta_i (not normalized)
     SHARED           1 x 2B   GRZO without per-example perturbation: Z_i = U, a_i normalized
     MEZO             2 x B    one z = U for the batch; +sigma z pass, -sigma z pass;
                               g = (mean l+ - mean l-)/(2 sigma); theta -= lr (g z + wd theta)
     FZOO             (N+1)xB  one clean pass (l_0) and N one-sided probes theta + sigma u_j;
                               c_j = (l_j - l_0)/(N std_j(l_j)); theta -= lr sum_j c_j u_j
     MEZO_INPLACE     2 x B    MeZO's update, with the perturbation written into the
                               parameters (MeZO's memory-optimal form, see below)
     Base noise U: Rademacher (default) or Gaussian (desc.noise). Signs r_i, s_i are always
     Rademacher. Vector blocks (gains, biases) have only r_i: Z_i = U (.) r_i. Embedding
     blocks use the row index as d_out and are row-sparse: only rows gathered during the
     step are perturbed and updated (all rows when the block is also used by grzo_linear,
     e.g. a tied output head). Weight decay (desc.weight_decay) applies to matrix and
     embedding blocks, never to vector blocks (MeZO's rule), and to a block flagged no_decay
     never. GRZO's a_i divide by the population std s of the B differences plus
     desc.norm_eps. Degenerate groups: when s <= 1e-6 * rms(delta) (all deltas equal, e.g.
     B = 1), s is replaced by rms(delta), so a_i = sign(delta_i); when every delta is 0 the
     step moves no parameter along Z (weight decay, if set, still applies). FZOO's std = 0
     takes the same guard. Both are counted in the report.
     MeZO and FZOO perturb through the same operations as GRZO (a transient per-layer
     perturbed weight), so parameters are written once per step, by the update, and the
     +sigma/-2sigma/+sigma restore drift of in-place MeZO does not occur. Embedding blocks
     are row-sparse for every estimator, MeZO included (MeZO's own code perturbs all rows).
     In-place MeZO (MEZO_INPLACE) is MeZO's own memory-optimal form, for comparing memory
     against MeZO at its true optimum: grzo_pass_begin writes theta += sigma z (pass 0) and
     theta -= 2 sigma z (pass 1) into every block through the backend's update entry, the
     operations inside its passes run plain (no transient perturbed weight at all), and
     grzo_step_end writes theta += sigma z back before MeZO's update (touched embedding rows
     only, weight decay as MeZO). z is regenerated from the seed each time. Contract:
     - the update equals MEZO's up to rounding: the "-" pass sees fl(fl(theta + sigma z)
       - 2 sigma z) instead of fl(theta - sigma z), a difference of one rounding per weight;
     - restore is not bitwise: each shift rounds (fp32: round to nearest; 16-bit blocks on
       a device: stochastic rounding with independent bits per shift, streams 4..6), so a
       weight can drift by a few ulps per step (tests/test_estimators.c measures fp32,
       tests/test_cuda.c bf16). Weights whose perturbation is exact (|theta| and sigma on
       compatible binades) come back bitwise;
     - a non-finite loss, a failed forward or grzo_step_abort restores the parameters by the
       opposite shift: every weight returns to within that rounding of its value before the
       step (not bitwise), the step counter does not advance and no update is applied;
     - each block records the shift written into it, so a shift that the backend fails
       part-way (out of memory) is undone block by block. A restore that itself fails
       leaves the blocks still shifted on record, with an error that says so; the next
       grzo_step_abort, grzo_step_begin, grzo_align_begin, grzo_checkpoint_save or plain
       operation restores them first (and fails, changing nothing else, while it cannot),
       grzo_checkpoint_load replaces them, grzo_destroy tries once more;
     - the parameters are perturbed between grzo_pass_begin and grzo_step_end/abort: do not
       checkpoint or evaluate then; grzo_perturbed_params returns the current (perturbed)
       values. Embeddings are perturbed in every row (the rows a pass will read are unknown
       before it runs), so a pass costs two full sweeps over the parameters.

   3b. WILL GRZO HELP? THE ALIGNMENT DIAGNOSTIC
     GRZO's gain over MeZO depends on the data: Var(MeZO)/Var(GRZO) ~ B_eff = 1^T G 1 / tr(G)
     (SPEC's variance law), G_ij = <g_i, g_j> the Gram matrix of the per-example gradients,
     B_eff = 1 + (B-1) c_w with c_w the norm-weighted mean pairwise cosine. grzo estimates G
     from forward passes of ONE fixed batch, with parameters left bitwise unchanged:
         grzo_align_begin(ctx, B, K, &si);          // instead of grzo_step_begin
         for (k = 0; k < K; k++) {                   // K probes, each an ordinary pass
             grzo_pass_begin(ctx, &pi); ...forward the same batch... grzo_pass_end(ctx, losses);
         }
         grzo_align_end(ctx, gram_or_NULL, &rep);    // B_eff, c_w, intervals, predicted ratios
     or grzo_align(ctx, B, K, forward, user, gram, &rep) with a grzo_step-style callback.
     Probe k is the SHARED estimator's pass (Z_i = U_k for every example, "+" copies 0..B-1,
     "-" copies B..2B-1), whatever desc.estimator is (in-place MeZO too: the probes perturb
     through the operations, never the parameters). U_k is keyed (seed, step = grzo_get_step,
     block, stream = GRZO_STREAM_ALIGN0 + k): no training stream is reused and a diagnostic
     repeated at a later step draws fresh noise. Nothing is updated, the step counter does
     not move, checkpoints are refused until grzo_align_end/grzo_step_abort. Memory: B x B
     doubles for the Gram sum and 2 K doubles; nothing per parameter. Every backend works
     (the probes are plain passes). A non-finite loss ends the diagnostic (GRZO_ERR_NONFINITE).
     The estimator. delta_ki = l_i(theta + sigma U_k) - l_i(theta - sigma U_k)
     = 2 sigma <g_i, u_k> + O(sigma^3). With a_k = (1^T delta_k)^2 and b_k = |delta_k|^2:
         G_hat = sum_k delta_k delta_k^T / (4 sigma^2 K)     (unbiased up to O(sigma^2))
         B_eff_hat = sum_k a_k / sum_k b_k = 1^T G_hat 1 / tr(G_hat)   (sigma cancels).
     Moments. For z with iid entries of variance 1 and fourth moment mu4 (Gaussian 3,
     Rademacher 1), Cov(z^T A z, z^T C z) = 2 tr(A C) + (mu4 - 3) sum_d A_dd C_dd. The ratio
     estimator's residual a_k - B_eff b_k = 4 sigma^2 u^T M u with M = Gam^T (J - B_eff I) Gam
     (Gam the B x D matrix of per-example gradients, J = 1 1^T), so to first order
         Var(B_eff_hat) = [2 tr(((J - B_eff I) G)^2) + (mu4 - 3) sum_d M_dd^2] / (K tr(G)^2),
         M_dd = (sum_i g_id)^2 - B_eff sum_i g_id^2,
         bias = -Cov(a - B_eff b, b) / (K E[b]^2)
              = -[2 tr((J - B_eff I) G^2) + (mu4 - 3) sum_d M_dd sum_i g_id^2] / (K tr(G)^2).
     The Rademacher term (mu4 - 3 = -2) lowers the variance; it is a 1/D fraction of the first
     term when the gradients spread over D coordinates, and matters only for a few dominant
     coordinates. For exchangeable gradients (equal norms, pairwise cosine c, Gaussian or large
     D) both reduce to closed forms:
         relative SE   = sqrt(Var) / B_eff = (B - B_eff) sqrt(2 / (K B (B-1)))
         relative bias = -2 (B - B_eff)(B_eff - 1) / (K B (B-1))   (|.| <= 2/K: negligible)
     so K = 2 (B - B_eff)^2 / (eps^2 B (B-1)) probes give relative standard error eps: at
     B_eff = 1 (no alignment) K = 2 (B-1) / (B eps^2), about 200 for eps = 10%; never more
     than 2 B / ((B-1) eps^2) (B_eff -> 0, cancelling gradients); at B_eff = B (perfect
     alignment) the estimate is exact. The reported standard error is the delta method's,
     from the K residuals a_k - B_eff_hat b_k (sample variance, K - 1): it needs no model of
     the gradients (the jackknife over the K draws agrees with it to O(1/K) and costs the
     same; the delta method is the one with the closed form above). c_w's is B_eff's / (B-1).
     The 95% interval is B_eff_hat +- 1.96 SE clipped to [0, B]; its coverage tends to 95% as
     K grows (grzo-probe alignment measures it). Float losses add a noise floor: keep
     |delta| >> ulp(loss), i.e. sigma not too small for the loss's precision.
     Predicted ratios (SPEC): variance Var(MeZO)/Var(GRZO) = B_eff (Rademacher base noise);
     cosine with the true gradient cos(GRZO)/cos(MeZO) = sqrt(pi B_eff / B) G((B+1)/2) / G(B/2)
     for large D (G the Gamma function; MeZO's cosine is the mean of a folded normal), which
     is not sqrt(B_eff): ~1.25 sqrt(B_eff) for large B (grzo_align_cos_ratio).

   3c. VARIANTS: SPARSE, LOW-RANK, QUANTIZED (desc.sparse_density, lowrank_rank, quant_bits)
     Three axes of the perturbation, each a descriptor field (0 = off), each combining with
     every core: GRZO, CANONICAL, SHARED, MEZO, FZOO (its N probes each get their own U;
     low-rank probes share V; sparse FZOO is refused, below). Write B for the variant's base (dense: B = U). Every core
     then uses B where it used U: GRZO Z_i = B (.) (r_i s_i^T), SHARED and MeZO z = B, FZOO
     u_j = B_j, and the update is W -= lr/(2 sigma) B (.) (R^T diag(a) S)/B as before. B is
     regenerated from the counter RNG in every operation and in the update (new streams,
     section "counter-based RNG"; the dense streams' bits are unchanged), the parameters are
     written once per step, by the update, and the perturbed linear never forms B densely when
     it can avoid it. Refused, with a message: in-place MeZO with any variant (it writes the
     perturbation into theta, the variants perturb through the operations), sparse with FZOO
     (its N probe updates run one after another, so a later probe's mask would read weights
     an earlier one moved, not the step's theta), sparse with
     low-rank (a mask on U V^T is not low-rank), low-rank with quantized (rounding U V^T
     element-wise materializes it), the alignment diagnostic with any variant, and a backend
     whose grzo_backend_caps.variants lacks the axis (GRZO_ERR_UNSUPPORTED, queried at
     grzo_create and at checkpoint load). Sparse and quantized combine (B = m (.) Q(U)).
     Reference backend: element by element (materialized Z_i); CPU and CUDA backends: all
     three (the same element functions, host and device; low-rank linears as two thin GEMMs).

     SPARSE (Sparse-MeZO, arXiv 2402.15751). B = m (.) U with the magnitude mask
     m = 1[|theta| <= h_b]: only small weights are perturbed and updated. h_b is fixed at the
     block's first step as the ceil(rho n)-th smallest |theta| of the block (rho =
     sparse_density, read at float precision: 0.4f of 30 weights is 12;
     GRZO_SPARSE_DENSITY_DEFAULT 0.2 is the paper's best), so a fraction rho (more on ties)
     is perturbed then. The mask is never stored: each operation and the
     update recompute it from the unperturbed theta they read (the forward and the update of
     a step see the same theta, so the same mask), and it follows the weights as they move
     (the paper's dynamic mask). Memory: one float per block (h_b, in checkpoints); the
     first step reads each block once into a transient host copy (16-bit blocks widened). Sparse-
     GRZO: Z_i = m (.) U (.) (r_i s_i^T); the update's M = R^T diag(a) S / B is masked
     element-wise and keeps its rank-B cost. Variance: the estimator targets m (.) g, the
     gradient restricted to the masked coordinates (E[z z^T] = diag(m)); the variance law of
     section 3b holds with the per-example gradients masked. Weight decay still applies to
     every weight of a decayed block.

     LOW-RANK (LOZO, optsuite/LOZO). For matrix and embedding blocks B = U V^T / sqrt(r),
     U (d_out x r) and V (d_in x r) with entries from desc.noise; vector blocks stay dense.
     U is drawn every step (stream 0x1100 + base stream), V every nu = lowrank_every steps
     (stream 7, keyed by the refresh step floor(t / nu) nu, so a resumed run redraws the
     same V and nothing is stored); unlike LOZO's code the update regenerates exactly the
     factors the passes used, on refresh steps too. The 1/sqrt(r) makes the entries unit-
     variance like dense U (LOZO's code omits it: its sigma is sqrt(r) larger). LO-GRZO:
         Z_i = (U V^T / sqrt(r)) (.) (r_i s_i^T) = (r_i (.) U)(s_i (.) V)^T / sqrt(r),
     i.e. each example's direction is itself rank r, with the factors' rows re-signed. The
     perturbed linear of example i's rows computes
         x Z_i^T = (((x (.) s_i) V) U^T) (.) r_i / sqrt(r)
     as two thin GEMMs (n x d_in x r, then n x r x d_out): r (d_in + d_out) flops per row
     instead of d_in d_out, so the fused 2B-wide pass keeps its one-pass budget and no
     weight-sized buffer is formed. The update
         W -= lr/(2 sigma B) sum_i a_i (r_i (.) U)(s_i (.) V)^T / sqrt(r)
     is a sum of B rank-r terms: rank <= r B (MeZO's low-rank z: rank r), so the rank-B
     structure of GRZO's update is kept, multiplied by r; it is applied in one pass over W
     (each weight: r products for (U V^T)_jk, B for M_jk). Variance: entries of U V^T / sqrt(r)
     are uncorrelated with unit variance (E[z z^T] = I), so the estimator is unbiased to
     O(sigma^2) as the dense one, and Flipout's E[z_i z_j^T | U, V] = 0 still holds. The
     projection c = <G, U V^T>/sqrt(r) has Var c = |G|_F^2 as dense, but a heavier tail
     (Gaussian factors): E c^4 = 3 |G|_F^4 + 6 tr((G^T G)^2) / r, up to 3x the dense value
     for a rank-one gradient at r = 1, which raises the spread of MeZO's coefficient and of
     GRZO's loss differences; and every update lies in an r-dimensional (r B for GRZO)
     subspace per block that moves only every nu steps on the V side.

     QUANTIZED (QuZO, jmha02/QuZO; quant_bits 8 or 4). Fake quantization, in fp32:
     - weights: a matrix block read by grzo_linear is used as q(W), per output row symmetric
       b-bit: q(w) = clamp(rint(w / d_j), -Q, Q) d_j, d_j = max_k |W_jk| / Q, Q = 2^(b-1) - 1,
       the scale from the unperturbed weight of this step (so updates move the grid). Also in
       plain (evaluation) ops and in grzo_perturbed_params. Vector and embedding blocks are
       not quantized (QuZO keeps norms, biases and embeddings in full precision);
     - perturbation: B = Q_sr(U), U stochastically rounded to the grid k delta, |k| <= Q,
       delta = bound / Q with bound the largest value the base distribution can take (1 for
       Rademacher, 6.6604 for grzo's Box-Muller Gaussian), so nothing is clipped and
       E[Q_sr(U) | U] = U (unbiased; the rounding adds variance <= delta^2/4 per entry). The
       rounding bits come from stream 0x2200 + base stream at the element's index, so the
       forward and the update see the same quantized B (unlike QuZO's paper, like its code)
       and the streams never overlap (unlike QuZO's seed + 4). With Rademacher U (the default)
       the rounding is exact (+-1 are grid points): only the weights are quantized; use
       desc.noise = GAUSSIAN for QuZO's setting. Qu-GRZO is the GRZO core on this B;
     - the master weights, the update and the activations stay fp32.
     A real low-bit deployment would store q(W) as int8/int4 codes plus one scale per row,
     run x q(W)^T as an integer GEMM (int32 accumulate, rescale per row) and the perturbation
     sigma x (Q_sr(U) (.) r s^T)^T as a second low-bit GEMM on the k codes (scale sigma delta),
     quantize activations (QuZO: per-tensor 8-bit, not done here), and keep the fp32 master
     copy only where the update is applied (or round the update stochastically into the codes).

   4. ERRORS, MEMORY, THREADS, DETERMINISM
     Every public function returns grzo_status (GRZO_OK = 0, errors < 0);
     grzo_status_str() names it and grzo_last_error(ctx) explains the last failure.
     Bad input changes nothing. A pass whose losses are not all finite returns
     GRZO_ERR_NONFINITE, abandons the step and leaves every parameter bitwise unchanged
     (and the step counter too); in-place MeZO restores them within rounding (section 3).
     So does a backend failure (out of memory, say) anywhere before grzo_step_end's update:
     the step can be taken again and gives the same result. One inside the update leaves the
     step in flight with the blocks before the failing one updated, as its message says:
     grzo_step_end called again resumes at that block and ends the step exactly as an
     update without a failure would (grzo_step_begin and grzo_step refuse until then);
     grzo_step_abort instead leaves the parameters partly updated (reload a checkpoint).
     tests/test_cpu_oom.c fails each allocation of a CPU-backend run in turn.
     grzo never aborts or exits and has no mutable globals.
     Memory: parameters and activations live in backend memory (grzo_backend_alloc: the
     CPU backend's is 64-byte aligned, which its kernels run fastest on); per
     step grzo allocates only the losses and coefficients (O(B) floats; the sparse variant
     keeps one float per block and reads each block once at its first step), and a backend
     allocates per operation the sign vectors (B (d_out + d_in) floats) and a transient
     per-layer buffer bounded by its budget (CPU: 8 MiB by default). Z_i is never stored.
     Threads: one context must not be used from two threads at once; distinct contexts
     may, each with a backend of its own (a backend serves one thread at a time: the CPU
     backend keeps its packing scratch per backend). The CPU backend uses OpenMP with its
     own n_threads.
     Determinism: every random number is a pure function of (seed, step, block, stream,
     index) through Philox4x32-10, so results do not depend on the thread count, any
     element can be computed alone, and a resumed run continues bit-identically.

   4b. DATA PARALLELISM
     The only cross-example quantity of a step is the vector of losses, so ranks (processes,
     or one per GPU) share a step without ever sending parameters or gradients: every rank
     holds the full model, forwards only its share of the copies, the ranks all-gather the
     losses (O(B) floats per pass), and every rank forms the same coefficients and applies
     the same update, regenerated from the seeds. grzo.h knows no MPI: the caller supplies a
     grzo_comm (desc.comm: rank, n_ranks and a versioned vtable of two collectives, an
     all-gather of floats with per-rank counts and an element-wise max all-reduce of uint64;
     backends/grzo_mpi.h implements it on MPI). desc.comm = NULL is one process.
     The shard. Rank r takes examples [floor(r B / R), floor((r+1) B / R)) of the step and
     every copy of them, in every pass (both copies of a GRZO pair, MeZO's two passes, FZOO's
     N+1): uneven splits differ by one example, and a rank may have none (B < R; it still
     takes part in every collective). Its pass lists its segments copy by copy: the "+"
     copies of its examples, then their "-" copies (GRZO family), so the layout of section 2
     holds with B replaced by the rank's share; pass.example[] names the global examples,
     grzo_rows and grzo_pass_end's losses cover the local segments only, and step_info's
     example_begin/example_end give the share; grzo_perturbed_params's segment indexes the
     rank's segments. grzo_step_end is unchanged: every rank sees all losses in the
     single-process order. Every estimator shards, in-place MeZO included (each rank shifts
     its own copy of the parameters by the same regenerated z, so the copies stay equal),
     and so does the alignment diagnostic.
     Errors agree. grzo_pass_end sends, after the rank's losses, one float with the rank's
     status (a non-finite loss, a failed backend synchronization, a failed forward in
     grzo_step's callback, grzo_step_abort during a pass): every rank receives the same
     vector, so every rank abandons the same step with the same status and message, and no
     parameter changes anywhere. Call grzo_step_abort only inside a pass (between
     grzo_pass_begin and grzo_pass_end) in a sharded context: between passes it cannot tell
     the other ranks, which would wait for this rank in their next gather. A NULL losses
     pointer to grzo_pass_end abandons the step on every rank (they wait for this one's
     losses) instead of leaving it in flight. A failed
     collective (GRZO_ERR_COMM) abandons the step on the ranks that see the failure; whether
     the others saw it cannot be known, so stop the run (grzo-finetune exits). A second float
     folds what the ranks' passes must share (step, pass, B, copies, estimator, and whether
     the pass is a step's or the alignment diagnostic's) into 24 bits: ranks that differ (a caller's error, a checkpoint that failed to load
     on one node) all get GRZO_ERR_COMM naming a rank that differs, instead of reading each
     other's losses at the wrong places. A failure before a pass's gather (grzo_step_begin or
     grzo_align_begin out of memory, or a backend that cannot read a sparse threshold or clear
     the row maps) is this rank's alone: the others would wait in that gather, so a sharded
     program ends the job on a failure it does not recover from (MPI_Abort, as grzo-finetune
     does).
     Divergence guard. Every desc.replica_check_every steps (default 100; -1 never) grzo_step_end
     all-reduces an FNV-1a-64 checksum of every parameter (the checkpoint payload's) and fails
     with GRZO_ERR_COMM, naming the step, when any two ranks differ; grzo_check_replicas runs
     the same check on demand (after loading a checkpoint, say).
     Bitwise reproducibility across rank counts. A GEMM's rounding may depend on how many rows
     it covers (BLAS blocking, small-matrix kernels, M = 1 dispatched to GEMV, the CPU
     backend's choice of algorithm by average rows per copy), so a copy's losses could depend
     on which other copies share its batch. With desc.per_example_ops (default: on when
     desc.comm is set) every operation inside a pass runs as one backend call per segment:
     a copy's rows go through calls whose shapes and inputs depend on that copy alone, on
     any rank and in any batch, so a run sharded over any number of ranks is bitwise identical
     to a single-process run with per_example_ops = 1 (tests/test_mpi.c, tests/mpi/). The
     price: more, smaller backend calls (the CPU backend's threads then parallelize inside a
     copy's GEMM only where its path does, so prefer one rank per core group). Operations you
     write yourself (attention, norms, the loss) must compute each copy's rows on their own too.

   5. BACKENDS
     A backend is a versioned vtable (grzo_backend_i) plus a context pointer. Fallible
     entries return grzo_status. Provided: grzo_backend_ref_create (here; a naive, literal
     reading of the SPEC for tests: it forms each example's perturbed weight element by
     element), grzo_backend_cpu_create (backends/grzo_cpu.h: OpenBLAS + OpenMP, or portable
     loops without BLAS), grzo_backend_cuda_create (backends/grzo_cuda.h, when built).
     Capabilities are queried with
     grzo_backend_query (storage types; caps.variants: the variant axes of section 3c the
     backend implements, 0 for a backend that predates them, whose contexts then refuse the
     axes). A variant reaches the backend as the `variant` pointer of each op's arguments
     (NULL: dense, the paths as before). The core never dereferences parameter or activation
     memory.

   6. CHECKPOINT FORMAT (little-endian, version 1; version 2 with a variant axis on)
     bytes 0..255   header: "GRZOCKPT", u32 version, u32 header size (256), u64 payload
                    bytes, u64 FNV-1a-64 of the payload, u64 seed, u64 step, u32 estimator,
                    u32 noise, f32 lr, f32 sigma, f32 norm_eps, f32 weight_decay,
                    i64 warmup_steps, u32 schedule, u32 fzoo_probes, u32 n_blocks, u32 0,
                    u64 degenerate-step count; version 2 adds at offset 104: f32
                    sparse_density, u32 lowrank_rank, u32 lowrank_every, u32 quant_bits;
                    zero padding, u64 FNV-1a-64 of bytes 0..247 at offset 248.
     payload        per block: u32 kind, u32 dtype, i64 rows, i64 cols, char name[64];
                    then every block's data in registration order (f32 LE); version 2 with
                    sparse_density > 0: then per block u32 threshold-set (0/1), f32 h_b.
     A context without variants writes version 1, byte for byte as before; one with a
     variant writes version 2, which older readers refuse (version mismatch). This grzo
     reads both (version 1: every variant off). The low-rank V needs no state (it is keyed
     by the refresh step), the mask none (recomputed from theta), the thresholds are in the
     table, so a resumed run continues bit-identically.
     Saving writes "<path>.tmp" (whatever was there removed first, then created exclusively,
     mode 0666 less the umask: never written through a symbolic link), fsyncs it, renames it
     over <path> and syncs the folder on POSIX systems, so a crash leaves the old file or
     the new one. It reads the parameters twice (the payload's hash, then the file): if
     they differ (another thread wrote them meanwhile) the save fails, GRZO_ERR_BACKEND,
     leaving the old file. Loading checks the
     whole file (sizes, checksums, each block's kind, dtype, shape and name) before it
     writes any parameter; the
     checkpoint's optimizer settings (seed, step, schedule, lr, ...) replace the context's.

   7. grzo DOES NOT: compute gradients by backpropagation, tokenize, load models (see
     examples/), or own your parameters (it updates them in place through the backend).
*/
#ifndef GRZO_H
#define GRZO_H

#include <stddef.h>
#include <stdint.h>

#define GRZO_VERSION_MAJOR 0
#define GRZO_VERSION_MINOR 1
#define GRZO_VERSION_PATCH 0
#define GRZO_BACKEND_API_VERSION 1

#ifndef GRZO_API
#ifdef GRZO_STATIC
#define GRZO_API static
#else
#define GRZO_API extern
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status ---------------------------------------------------------------------- */
typedef enum grzo_status {
    GRZO_OK = 0,
    GRZO_ERR_INVALID_ARG = -1,   /* NULL pointer, bad size, mismatched shape, ...      */
    GRZO_ERR_OUT_OF_MEMORY = -2,
    GRZO_ERR_STATE = -3,         /* call out of order (e.g. pass_end before pass_begin) */
    GRZO_ERR_NONFINITE = -4,     /* a loss was NaN or Inf: step abandoned, nothing changed */
    GRZO_ERR_BACKEND = -5,       /* the backend failed (message in grzo_last_error)     */
    GRZO_ERR_UNSUPPORTED = -6,   /* the backend lacks a capability (dtype, operation)  */
    GRZO_ERR_IO = -7,            /* file could not be opened, written, synced, renamed  */
    GRZO_ERR_FORMAT = -8,        /* checkpoint truncated, corrupted or of another model */
    GRZO_ERR_VERSION = -9,       /* backend API or checkpoint version mismatch          */
    GRZO_ERR_COMM = -10          /* a collective failed, or the ranks disagree (section 4b) */
} grzo_status;

typedef enum grzo_estimator {
    GRZO_ESTIMATOR_DEFAULT = 0,  /* = GRZO */
    GRZO_ESTIMATOR_GRZO,
    GRZO_ESTIMATOR_CANONICAL,
    GRZO_ESTIMATOR_SHARED,
    GRZO_ESTIMATOR_MEZO,
    GRZO_ESTIMATOR_FZOO,
    GRZO_ESTIMATOR_MEZO_INPLACE, /* MeZO's memory-optimal form: parameters perturbed in place */
    GRZO_ESTIMATOR_COUNT
} grzo_estimator;

typedef enum grzo_noise_dist {
    GRZO_NOISE_DEFAULT = 0,      /* = RADEMACHER */
    GRZO_NOISE_RADEMACHER,
    GRZO_NOISE_GAUSSIAN,
    GRZO_NOISE_COUNT
} grzo_noise_dist;

typedef enum grzo_schedule {
    GRZO_SCHEDULE_DEFAULT = 0,   /* = CONSTANT */
    GRZO_SCHEDULE_CONSTANT,      /* lr, after desc.warmup_steps of linear warm-up (if any) */
    GRZO_SCHEDULE_COUNT
} grzo_schedule;

typedef enum grzo_block_kind {
    GRZO_BLOCK_INVALID = 0,
    GRZO_BLOCK_MATRIX,           /* rows = d_out, cols = d_in; used as y = x W^T    */
    GRZO_BLOCK_VECTOR,           /* rows = d, cols = 1 (or 0): gains and biases     */
    GRZO_BLOCK_EMBEDDING,        /* rows = V, cols = d; read by row, row-sparse     */
    GRZO_BLOCK_KIND_COUNT
} grzo_block_kind;

typedef enum grzo_dtype {
    GRZO_DTYPE_DEFAULT = 0,      /* = F32 */
    GRZO_DTYPE_F32,
    GRZO_DTYPE_BF16,             /* storage types for device backends; query caps */
    GRZO_DTYPE_F16,
    GRZO_DTYPE_COUNT
} grzo_dtype;

typedef enum grzo_vector_op {
    GRZO_VECTOR_MUL = 0,         /* y = x (.) v   (norm gain)  */
    GRZO_VECTOR_ADD              /* y = x + v     (bias)       */
} grzo_vector_op;

typedef enum grzo_log_level { GRZO_LOG_ERROR = 0, GRZO_LOG_WARN, GRZO_LOG_INFO } grzo_log_level;

/* ---- host allocator and logger (all fields NULL: malloc/free, silent) --------------- */
typedef struct grzo_allocator {
    void *(*alloc_fn)(size_t bytes, void *user_data);
    void (*free_fn)(void *ptr, void *user_data);
    void *user_data;
} grzo_allocator;

typedef struct grzo_logger {
    /* must be reentrant; msg is only valid during the call */
    void (*func)(grzo_log_level level, grzo_status status, const char *msg, void *user_data);
    void *user_data;
} grzo_logger;

/* ---- counter-based RNG ----------------------------------------------------------------
   A grzo_noise names one random tensor. Element `index` of it is a pure function of all
   fields: Philox4x32-10 with key = seed and counter = (group, group_hi | stream << 16,
   step, block), group = index / 128 for Rademacher (one bit per element) and index / 4
   for Gaussian (Box-Muller on two 32-bit uniforms, computed in double with explicitly
   fused operations so that every IEEE-754 platform, CPU or GPU, gets the same bits).
   Streams used by grzo: 0 = base U, 1 = r signs, 2 = s signs, 3 = stochastic rounding of
   16-bit updates (FZOO's probe k: groups k n .. k n + n - 1, n the block's elements),
   4..6 = the same for in-place MeZO's three shifts, 7 = low-rank V (keyed by the step of
   its last refresh), 16 + j = FZOO probe j, 0x1100 + s = low-rank U of base
   stream s, 0x2200 + s = stochastic-rounding bits of the quantized perturbation of base
   stream s (section 3c; s = 0 or an FZOO probe's stream, so the ranges never meet).
   Block id 0xFFFFFFFF is never a grzo block: use it for your own streams (data order). */
typedef struct grzo_noise {   /* block = registration index (grzo_block.id - 1) */
    uint64_t seed;
    uint32_t step;
    uint32_t block;
    uint32_t stream;
    uint32_t dist;               /* grzo_noise_dist; DEFAULT = Rademacher */
} grzo_noise;

#define GRZO_STREAM_BASE 0u
#define GRZO_STREAM_SIGN_R 1u
#define GRZO_STREAM_SIGN_S 2u
#define GRZO_STREAM_ROUND 3u           /* stochastic-rounding bits of the update */
#define GRZO_STREAM_ROUND_INPLACE 4u   /* 4, 5, 6: in-place MeZO's +sigma, -2 sigma, restore */
#define GRZO_STREAM_LOWRANK_V 7u        /* low-rank V of a block, at the step of its last refresh */
#define GRZO_STREAM_FZOO0 16u
#define GRZO_STREAM_LOWRANK_U 0x1100u  /* + base stream: low-rank U (section 3c) */
#define GRZO_STREAM_QUANT 0x2200u      /* + base stream: rounding bits of the quantized perturbation */
#define GRZO_STREAM_ALIGN0 0x4000u     /* alignment probe k: stream 0x4000 + k (section 3b) */
#define GRZO_ALIGN_MAX_PROBES 0xC000   /* streams 0x4000 .. 0xFFFF */
#define GRZO_ALIGN_MAX_EXAMPLES 4096   /* the Gram sum is B x B doubles */
#define GRZO_USER_BLOCK 0xFFFFFFFFu
#define GRZO_SPARSE_DENSITY_DEFAULT 0.2f  /* what tools use for "sparse" without a density */
#define GRZO_LOWRANK_RANK_DEFAULT 2
#define GRZO_LOWRANK_EVERY_DEFAULT 100
#define GRZO_LOWRANK_MAX_RANK 1024
#define GRZO_MAX_INDEX ((uint64_t)1 << 48)   /* elements per (block, stream) */

/* Philox4x32-10 itself: GRZO_ERR_INVALID_ARG for a NULL array */
GRZO_API grzo_status grzo_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);
/* element `index` of the tensor; 0 for NULL, a dist that is not a grzo_noise_dist, a stream
   above 0xFFFF, or index >= GRZO_MAX_INDEX (0 is never a Rademacher element) */
GRZO_API float grzo_noise_at(const grzo_noise *n, uint64_t index);
/* out[0..count) = elements first .. first + count - 1, each the bits of grzo_noise_at's;
   GRZO_ERR_INVALID_ARG, nothing written, for n or out NULL, a dist that is not a
   grzo_noise_dist, a stream above 0xFFFF, or a range that ends past GRZO_MAX_INDEX */
GRZO_API grzo_status grzo_noise_fill(const grzo_noise *n, uint64_t first, size_t count, float *out);
/* uniform double in [0, 1) with 53 random bits: for user-side sampling (data order). The
   words w of Philox4x32-10 at counter (index, index_hi | stream << 16, step, block), key seed
   (as a noise's group `index`; index < 2^48), give (w[0] 2^21 + floor(w[1] / 2^11)) / 2^53. */
GRZO_API double grzo_uniform_at(uint64_t seed, uint32_t step, uint32_t block, uint32_t stream,
                                uint64_t index);

/* ---- backend interface ----------------------------------------------------------------- */
typedef struct grzo_param {      /* one parameter block as the backend sees it */
    void *data;                  /* backend memory, rows x cols, row-major */
    grzo_block_kind kind;
    grzo_dtype dtype;
    int64_t rows, cols;          /* vector: cols = 1 */
} grzo_param;

/* A block's variant (section 3c) as the backend applies it; a NULL pointer in the op
   arguments means dense (every field zero). Built by the core per operation. */
typedef struct grzo_variant {
    int32_t sparse;              /* 1: perturbation and update masked by m = 1[|theta| <= sparse_threshold] */
    float sparse_threshold;      /* h_b, fixed at the block's first step */
    int32_t lowrank_rank;        /* r > 0 (matrix and embedding blocks): base = U V^T / sqrt(r) */
    uint32_t lowrank_step;       /* V's key step: the step of its last refresh */
    int32_t quant_bits;          /* 8 or 4: perturbation stochastically rounded to b bits; matrix
                                    blocks' weights fake-quantized per output row in linear ops */
} grzo_variant;

/* How the rows of one operation are perturbed. sigma = 0 or n_segments = 0: plain op.
   Segment c covers rows [offsets[c], offsets[c+1]) and adds sign[c] * sigma * Z, where
   Z = U (.) (r_e s_e^T) with e = example[c] when flipout, else Z = U. sign may be 0. */
typedef struct grzo_perturb {
    grzo_noise base;             /* U; the signs use the same key with streams 1 and 2 */
    float sigma;
    int32_t flipout;
    int64_t n_examples;          /* B: r_e = sign stream indices e*rows .. e*rows+rows-1 */
    int64_t n_segments;
    const int64_t *offsets;      /* host, n_segments + 1 */
    const int8_t *sign;          /* host, n_segments */
    const int64_t *example;      /* host, n_segments */
} grzo_perturb;

typedef struct grzo_linear_args {     /* y[n x rows] = x[n x cols] W^T (+ perturbation) */
    grzo_param w;
    const float *x;
    float *y;
    int64_t n_rows;
    const grzo_perturb *perturb;      /* NULL: plain */
    const grzo_variant *variant;      /* NULL: dense (also for plain ops: quantized weights) */
} grzo_linear_args;

typedef struct grzo_vector_args {     /* y[n x d] = x op v, v perturbed per segment */
    grzo_param v;
    grzo_vector_op op;
    const float *x;
    float *y;
    int64_t n_rows;
    const grzo_perturb *perturb;
    const grzo_variant *variant;      /* NULL: dense */
} grzo_vector_args;

typedef struct grzo_embedding_args {  /* y[n x d] = E[ids[n]] (+ perturbation) */
    grzo_param e;
    const int32_t *ids;               /* backend memory, n_rows, each in [0, rows) */
    float *y;
    int64_t n_rows;
    uint8_t *touched;                 /* backend memory, rows bytes: set to 1 per gathered row; may be NULL */
    const grzo_perturb *perturb;
    const grzo_variant *variant;      /* NULL: dense */
} grzo_embedding_args;

/* theta -= sum_e coeff[e] * Z_e + decay * theta, Z_e as in grzo_perturb (flipout: one
   Z per example; otherwise the single Z = U, i.e. theta -= (sum coeff) U + decay theta).
   Embedding with touched != NULL: only rows with touched[row] != 0 (the bytes are left
   as they are; the core clears them). decay applies to the rows updated. A backend that
   stores 16-bit blocks rounds the result stochastically (past the type's largest finite
   value the next step up is inf, one gap on, so a parameter that outgrows the type becomes
   inf rather than saturating) with bits from counter-RNG
   stream round_stream of (seed, step, block) (0 = GRZO_STREAM_ROUND), so that distinct
   updates of one step (in-place MeZO's shifts) draw independent rounding bits. Updates
   that share a stream in one step (FZOO's N probe updates) are told apart by round_draw:
   element i of draw k takes the stream's group k * rows * cols + i (the k-th run of
   rows * cols groups, as if the draws followed one another; the 48-bit group wraps, so
   draws could meet only for k * rows * cols >= 2^48, past any memory).
   An update that fails leaves the block as it was (allocate before writing): grzo_step_end
   then resumes the step's update at that block (section 4). */
typedef struct grzo_update_args {
    grzo_param p;
    grzo_noise base;
    int32_t flipout;
    int64_t n_examples;
    const float *coeff;               /* host, n_examples */
    float decay;
    uint8_t *touched;                 /* embeddings only; NULL = every row */
    uint32_t round_stream;            /* stochastic-rounding stream; 0 = GRZO_STREAM_ROUND */
    const grzo_variant *variant;      /* NULL: dense; else Z_e is the variant's (section 3c) */
    uint32_t round_draw;              /* k-th update of this step on round_stream; 0 = the first */
} grzo_update_args;

/* out = theta + sign * sigma * Z_example (the whole block, materialized: ask/tell only), in
   the block's storage type: a backend that stores 16-bit blocks rounds to nearest, ties to
   even */
typedef struct grzo_copy_args {
    grzo_param p;
    grzo_noise base;
    int32_t flipout;
    int64_t example;
    float scale;                      /* sign * sigma */
    void *out;                        /* backend memory, same size as the block */
    const grzo_variant *variant;      /* NULL: dense; quant: matrix blocks give q(theta) + scale Z */
} grzo_copy_args;

typedef struct grzo_backend_caps {
    uint32_t dtypes;                  /* bit (1 << grzo_dtype) per supported storage type */
    int32_t device_memory;            /* 1: pointers are device memory (use upload/download) */
    int32_t n_threads;
    uint32_t variants;                /* GRZO_VARIANT_* bits the backend implements (0: dense only) */
} grzo_backend_caps;

#define GRZO_VARIANT_SPARSE 1u
#define GRZO_VARIANT_LOWRANK 2u
#define GRZO_VARIANT_QUANT 4u

typedef struct grzo_backend_i {
    uint32_t api_version;             /* GRZO_BACKEND_API_VERSION */
    const char *name;                 /* "ref", "cpu", "cuda" */
    void (*destroy)(void *self);
    grzo_status (*query)(void *self, grzo_backend_caps *out);
    grzo_status (*mem_alloc)(void *self, size_t bytes, void **out);   /* zero-filled (the CPU
                                                                          backend's: 64-byte aligned) */
    void (*mem_free)(void *self, void *ptr);
    grzo_status (*upload)(void *self, void *dst, const void *src, size_t bytes);
    grzo_status (*download)(void *self, void *dst, const void *src, size_t bytes);
    grzo_status (*linear)(void *self, const grzo_linear_args *a);
    grzo_status (*vector)(void *self, const grzo_vector_args *a);
    grzo_status (*embedding)(void *self, const grzo_embedding_args *a);
    grzo_status (*update)(void *self, const grzo_update_args *a);
    grzo_status (*perturbed_copy)(void *self, const grzo_copy_args *a);
    grzo_status (*synchronize)(void *self);          /* optional: NULL = synchronous; grzo_pass_end
                                                        calls it once per pass, so an asynchronous
                                                        backend reports its operations' errors there */
    const char *(*last_error)(void *self);           /* optional: detail of the last failure */
} grzo_backend_i;

typedef struct grzo_backend {
    const grzo_backend_i *iface;
    void *self;
} grzo_backend;

GRZO_API grzo_status grzo_backend_ref_create(grzo_backend *out);
GRZO_API void grzo_backend_destroy(grzo_backend *b);
GRZO_API grzo_status grzo_backend_query(const grzo_backend *b, grzo_backend_caps *out);
GRZO_API grzo_status grzo_backend_alloc(const grzo_backend *b, size_t bytes, void **out);
GRZO_API void grzo_backend_free(const grzo_backend *b, void *ptr);
GRZO_API grzo_status grzo_backend_upload(const grzo_backend *b, void *dst, const void *src, size_t bytes);
GRZO_API grzo_status grzo_backend_download(const grzo_backend *b, void *dst, const void *src, size_t bytes);

/* ---- communication interface (section 4b) ------------------------------------------------ */
#define GRZO_COMM_API_VERSION 1

typedef struct grzo_comm_i {
    uint32_t api_version;             /* GRZO_COMM_API_VERSION */
    const char *name;                 /* "mpi", ... */
    /* Every rank sends send[0 .. counts[rank]); recv (sum of counts floats) receives every
       rank's floats in rank order. counts (n_ranks entries) is the same on every rank. */
    grzo_status (*allgather_f32)(void *self, const float *send, float *recv, const int64_t *counts);
    /* inout[0 .. n) becomes the element-wise maximum over the ranks */
    grzo_status (*allreduce_max_u64)(void *self, uint64_t *inout, int32_t n);
    const char *(*last_error)(void *self);   /* optional: detail of the last failure */
} grzo_comm_i;

typedef struct grzo_comm {
    const grzo_comm_i *iface;
    void *self;
    int32_t rank, n_ranks;            /* 0 <= rank < n_ranks */
} grzo_comm;

/* ---- context ------------------------------------------------------------------------- */
typedef struct grzo_ctx grzo_ctx;
typedef struct grzo_block { uint32_t id; } grzo_block;   /* 0 = invalid */

typedef struct grzo_desc {
    grzo_backend *backend;            /* required; not owned */
    grzo_estimator estimator;         /* default GRZO */
    grzo_noise_dist noise;            /* default Rademacher */
    uint64_t seed;                    /* run seed (0 is a valid seed) */
    float lr;                         /* default 1e-6 */
    float sigma;                      /* default 1e-3 */
    float norm_eps;                   /* default 1e-8 */
    float weight_decay;               /* default 0 */
    int64_t warmup_steps;             /* default 0: no warm-up */
    grzo_schedule schedule;           /* default constant */
    int32_t fzoo_probes;              /* N, default 8 */
    /* variant axes (section 3c), each zero = off; composable with every core but in-place MeZO */
    float sparse_density;             /* fraction of each block perturbed, (0, 1] (Sparse-MeZO: 0.2) */
    int32_t lowrank_rank;             /* rank r of 2-D blocks' base U V^T / sqrt(r) (LOZO: 1-2) */
    int32_t lowrank_every;            /* nu: V redrawn every nu steps; 0 = 100 (with lowrank_rank) */
    int32_t quant_bits;               /* 8 or 4: fake-quantized weights and perturbation (QuZO) */
    grzo_allocator allocator;
    grzo_logger logger;
    /* data parallelism (section 4b); all zero: one process */
    const grzo_comm *comm;            /* NULL: one process; not owned, outlives the context */
    int32_t per_example_ops;          /* 1: one backend call per segment (bitwise equal at any rank count);
                                         -1: batched; 0: 1 with comm, else -1 */
    int64_t replica_check_every;      /* with comm: compare a parameter checksum every K steps; 0: 100; -1: never */
} grzo_desc;

typedef struct grzo_block_desc {
    grzo_block_kind kind;
    int64_t rows, cols;               /* vector: cols 0 or 1 */
    void *data;                       /* backend memory; the caller keeps ownership */
    grzo_dtype dtype;                 /* default F32 */
    const char *name;                 /* optional, up to 63 bytes, stored in checkpoints */
    int32_t no_decay;                 /* 1: never apply weight decay */
} grzo_block_desc;

typedef struct grzo_step_info {
    int64_t step;                     /* index of the step being taken (0-based) */
    int64_t n_examples;               /* B */
    int32_t n_passes;
    int32_t copies_per_pass;          /* segments per pass = copies_per_pass * B (last pass may differ: never) */
    float lr;                         /* learning rate this step will use */
    int64_t example_begin, example_end;   /* this rank's examples (all B without desc.comm) */
} grzo_step_info;

typedef struct grzo_pass_info {
    int32_t index;                    /* 0 .. n_passes-1 */
    int32_t n_copies;                 /* 2 (GRZO family) or 1 (MeZO, FZOO, in-place MeZO) */
    int64_t n_segments;               /* n_copies * B (this rank's share of B with desc.comm): one loss per segment */
    const int64_t *example;           /* which example each segment reads (n_segments) */
    const int8_t *sign;               /* its perturbation sign: +1, -1, or 0 (clean) */
} grzo_pass_info;

typedef struct grzo_step_report {
    int64_t step;                     /* index of the step just applied */
    float lr;
    double loss;                      /* mean perturbed loss (GRZO, MeZO) or clean l_0 (FZOO) */
    double delta_std;                 /* s (GRZO family), std of l_j (FZOO), |l+ - l-| (MeZO) */
    double coeff_rms;                 /* rms of the applied coefficients (update scale)        */
    int32_t degenerate;               /* 1: the std = 0 guard was used this step */
    int64_t degenerate_total;         /* steps so far that used the guard       */
} grzo_step_report;

/* the rows of one operation (see STEP BY STEP) */
typedef struct grzo_rows {          /* zero-initialize: zero fields mean the defaults */
    int64_t n_rows;
    const int64_t *offsets;           /* NULL: even split; else (the call's segments) + 1 entries */
    int64_t first_segment;            /* the call's rows start at this segment of the pass (0) */
    int64_t n_segments;               /* 0: every segment from first_segment to the pass's last */
} grzo_rows;

typedef grzo_status (*grzo_forward_fn)(grzo_ctx *ctx, const grzo_pass_info *pass,
                                       float *losses, void *user_data);

GRZO_API const char *grzo_status_str(grzo_status s);
GRZO_API const char *grzo_version(void);
GRZO_API grzo_desc grzo_desc_resolve(const grzo_desc *desc);  /* defaults filled in */
GRZO_API grzo_status grzo_create(const grzo_desc *desc, grzo_ctx **out);
GRZO_API void grzo_destroy(grzo_ctx *ctx);
GRZO_API const char *grzo_last_error(const grzo_ctx *ctx);
GRZO_API grzo_status grzo_get_desc(const grzo_ctx *ctx, grzo_desc *out);
GRZO_API int64_t grzo_get_step(const grzo_ctx *ctx);             /* steps taken; -1 for NULL */
GRZO_API float grzo_lr_at(const grzo_ctx *ctx, int64_t step);     /* the schedule's lr; 0 for NULL or step < 0 */

GRZO_API grzo_status grzo_block_add(grzo_ctx *ctx, const grzo_block_desc *desc, grzo_block *out);
GRZO_API grzo_status grzo_block_param(const grzo_ctx *ctx, grzo_block b, grzo_param *out);

GRZO_API grzo_status grzo_step_begin(grzo_ctx *ctx, int64_t n_examples, grzo_step_info *out);
GRZO_API grzo_status grzo_pass_begin(grzo_ctx *ctx, grzo_pass_info *out);
GRZO_API grzo_status grzo_pass_end(grzo_ctx *ctx, const float *losses);
GRZO_API grzo_status grzo_step_end(grzo_ctx *ctx, grzo_step_report *out);
GRZO_API grzo_status grzo_step_abort(grzo_ctx *ctx);
GRZO_API grzo_status grzo_step(grzo_ctx *ctx, int64_t n_examples, grzo_forward_fn forward,
                               void *user_data, grzo_step_report *out);

/* perturbed building blocks (plain outside a pass) */
GRZO_API grzo_status grzo_linear(grzo_ctx *ctx, grzo_block w, const float *x, float *y,
                                 const grzo_rows *rows);
GRZO_API grzo_status grzo_vector(grzo_ctx *ctx, grzo_block v, grzo_vector_op op,
                                 const float *x, float *y, const grzo_rows *rows);
GRZO_API grzo_status grzo_embedding(grzo_ctx *ctx, grzo_block e, const int32_t *ids, float *y,
                                    const grzo_rows *rows);

/* black-box ask/tell: during a pass, write block b's perturbed values for segment
   `segment` into out (backend memory, block-sized). This materializes the perturbed
   parameters; it is the only place grzo does so. Evaluate, then grzo_pass_end. */
GRZO_API grzo_status grzo_perturbed_params(grzo_ctx *ctx, grzo_block b, int64_t segment, void *out);

/* GRZO's group-relative normalization of n loss differences (SPEC): a_i = delta_i / (s + eps),
   s the population std, with the degenerate-group guard of section 3. *degenerate (may be
   NULL) is set to 1 when the guard was used. Returns GRZO_ERR_NONFINITE for NaN/Inf input. */
GRZO_API grzo_status grzo_group_normalize(const double *delta, int64_t n, double eps, double *a,
                                          int32_t *degenerate);

/* ---- alignment diagnostic (section 3b): B_eff from K shared-perturbation probes ---- */
typedef struct grzo_align_report {
    int64_t n_examples;               /* B */
    int32_t n_probes;                 /* K */
    int64_t step;                     /* grzo_get_step at the diagnostic (keys its noise) */
    double b_eff, b_eff_se;           /* 1^T G 1 / tr(G) and its delta-method standard error */
    double b_eff_lo, b_eff_hi;        /* 95% interval: b_eff -+ 1.96 se, clipped to [0, B] */
    double c_w, c_w_se;               /* (B_eff - 1) / (B - 1): norm-weighted mean pairwise cosine */
    double var_ratio;                 /* predicted Var(MeZO) / Var(GRZO) = B_eff (Rademacher) */
    double cos_ratio;                 /* predicted cos(GRZO) / cos(MeZO), large D (section 3b) */
    double cos_ratio_lo, cos_ratio_hi;/* the B_eff interval mapped through the same formula */
    double mean_sq_grad;              /* tr(G_hat) / B: mean |g_i|^2 */
} grzo_align_report;

/* Start the diagnostic on B examples with K probes: K passes of 2B copies follow (the pass
   API as in a step, the same batch each time); si (may be NULL) describes them (lr = 0).
   B in [2, GRZO_ALIGN_MAX_EXAMPLES], K in [2, GRZO_ALIGN_MAX_PROBES]; only between steps. */
GRZO_API grzo_status grzo_align_begin(grzo_ctx *ctx, int64_t n_examples, int32_t n_probes, grzo_step_info *si);
/* After the K-th pass: the report, and G_hat (B x B, row-major) into gram unless NULL.
   The context returns to between steps, also on failure (every delta 0: GRZO_ERR_NONFINITE). */
GRZO_API grzo_status grzo_align_end(grzo_ctx *ctx, double *gram, grzo_align_report *out);
/* begin, K passes through forward (as grzo_step), end */
GRZO_API grzo_status grzo_align(grzo_ctx *ctx, int64_t n_examples, int32_t n_probes, grzo_forward_fn forward,
                                void *user_data, double *gram, grzo_align_report *out);
/* sqrt(pi b_eff / B) Gamma((B+1)/2) / Gamma(B/2): predicted cos(GRZO)/cos(MeZO), large D */
GRZO_API double grzo_align_cos_ratio(double b_eff, int64_t n_examples);

/* Section 4b: all ranks compare a checksum of their parameters (a collective: every rank
   calls it at the same point, between steps: GRZO_ERR_STATE during a step, with or without
   ranks). GRZO_ERR_COMM when they differ; GRZO_OK without desc.comm. */
GRZO_API grzo_status grzo_check_replicas(grzo_ctx *ctx);

GRZO_API grzo_status grzo_checkpoint_save(grzo_ctx *ctx, const char *path);
GRZO_API grzo_status grzo_checkpoint_load(grzo_ctx *ctx, const char *path);

#ifdef __cplusplus
}
#endif
#endif /* GRZO_H */

/* ===================================================================================== */
/*  Counter RNG primitives. Emitted with GRZO_IMPLEMENTATION, or alone with              */
/*  GRZO_RNG_DEVICE in a CUDA TU (host and device functions from the same source, so     */
/*  the GPU produces the CPU's bits).                                                      */
/* ===================================================================================== */
#if (defined(GRZO_IMPLEMENTATION) || defined(GRZO_RNG_DEVICE)) && !defined(GRZO__RNG_EMITTED)
#define GRZO__RNG_EMITTED
#include <math.h>

#if defined(__CUDACC__)
#define GRZO__HD __host__ __device__
#else
#define GRZO__HD
#endif
#if defined(__GNUC__) || defined(__clang__)
#define GRZO__RNG_FN static GRZO__HD __attribute__((unused))   /* a device TU uses only some */
#else
#define GRZO__RNG_FN static GRZO__HD
#endif
/* GCC on x86-64 Linux (C): grzo_noise_fill's bulk Gaussian path is built for several
   instruction sets, picked at run time (target_clones); what it calls is inlined into each. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && !defined(__cplusplus) && !defined(__CUDACC__)
#define GRZO__CPU_CLONES 1
#define GRZO__INLINE_FN static inline __attribute__((always_inline, unused))
#else
#define GRZO__CPU_CLONES 0
#define GRZO__INLINE_FN GRZO__RNG_FN
#endif

/* ---- RNG ----------------------------------------------------------------------------- */
/* Philox4x32-10 (Salmon et al., SC'11): 10 rounds of a multiply-xor Feistel network. */
#define GRZO__PHILOX_M0 0xD2511F53u
#define GRZO__PHILOX_M1 0xCD9E8D57u
#define GRZO__PHILOX_W0 0x9E3779B9u
#define GRZO__PHILOX_W1 0xBB67AE85u

GRZO__INLINE_FN void grzo__philox(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                     uint32_t k0, uint32_t k1, uint32_t out[4]) {
    int r;
    for (r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)GRZO__PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)GRZO__PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += GRZO__PHILOX_W0;
        k1 += GRZO__PHILOX_W1;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

/* One Philox call of a noise tensor: `group` indexes 128 Rademacher bits or 4 normals. */
GRZO__INLINE_FN void grzo__noise_group(const grzo_noise *n, uint64_t group, uint32_t out[4]) {
    grzo__philox((uint32_t)group,
                 ((uint32_t)(group >> 32) & 0xFFFFu) | (n->stream << 16),
                 n->step, n->block, (uint32_t)n->seed, (uint32_t)(n->seed >> 32), out);
}

GRZO__RNG_FN float grzo__rademacher_bit(const uint32_t w[4], unsigned bit) {
    return ((w[bit >> 5] >> (bit & 31u)) & 1u) ? 1.0f : -1.0f;
}

/* Box-Muller in double. Every operation is either exact or a single IEEE-754 basic
   operation, and each multiply-add is an explicit fma(): no compiler can contract or
   reorder it differently on another platform, so CPU and GPU produce the same bits. */
GRZO__RNG_FN double grzo__log_unit(double u) {          /* ln u for u in (0, 1] */
    int e;
    double m = 2.0 * frexp(u, &e), f, w, p;               /* u = m 2^(e-1), m in [1,2) */
    const double c[11] = {1.0 / 23, 1.0 / 21, 1.0 / 19, 1.0 / 17, 1.0 / 15, 1.0 / 13,
                                 1.0 / 11, 1.0 / 9, 1.0 / 7, 1.0 / 5, 1.0 / 3};
    int i;
    e -= 1;
    if (m > 1.4142135623730951) { m = 0.5 * m; e += 1; }  /* m in [0.707, 1.414] */
    f = (m - 1.0) / (m + 1.0);                            /* ln m = 2 atanh f */
    w = f * f;
    p = c[0];
    for (i = 1; i < 11; i++) p = fma(p, w, c[i]);
    p = fma(p, w, 1.0);
    return fma((double)e, 0.69314718055994530942, (2.0 * f) * p);
}

GRZO__RNG_FN void grzo__sincos_turn(double t, double *s, double *c) {  /* angle 2 pi t, t in [0,1) */
    double q = 4.0 * t, fq, b, w, ps, pc, sb, cb;
    int k = (int)floor(q), swap = 0, i;
    const double sc[9] = {-1.0 / 121645100408832000.0, 1.0 / 355687428096000.0,
                                 -1.0 / 1307674368000.0, 1.0 / 6227020800.0, -1.0 / 39916800.0,
                                 1.0 / 362880.0, -1.0 / 5040.0, 1.0 / 120.0, -1.0 / 6.0};
    const double cc[10] = {1.0 / 2432902008176640000.0, -1.0 / 6402373705728000.0,
                                  1.0 / 20922789888000.0, -1.0 / 87178291200.0,
                                  1.0 / 479001600.0, -1.0 / 3628800.0, 1.0 / 40320.0,
                                  -1.0 / 720.0, 1.0 / 24.0, -0.5};
    fq = q - (double)k;                                   /* exact, in [0,1) */
    if (fq > 0.5) { fq = 1.0 - fq; swap = 1; }            /* exact (Sterbenz) */
    b = fq * 1.5707963267948966;                          /* in [0, pi/4] */
    w = b * b;
    ps = sc[0];                                           /* sin b = b + b w P(w) */
    for (i = 1; i < 9; i++) ps = fma(ps, w, sc[i]);
    sb = fma(b * w, ps, b);
    pc = cc[0];
    for (i = 1; i < 10; i++) pc = fma(pc, w, cc[i]);
    cb = fma(w, pc, 1.0);                                 /* 1 - b^2/2 + ... */
    {
        double cs = swap ? sb : cb, sn = swap ? cb : sb;  /* cos, sin of fq * pi/2 */
        switch (k & 3) {
        case 0: *c = cs; *s = sn; break;
        case 1: *c = -sn; *s = cs; break;
        case 2: *c = -cs; *s = -sn; break;
        default: *c = sn; *s = -cs; break;
        }
    }
}

GRZO__RNG_FN void grzo__gauss4(const uint32_t w[4], float out[4]) {
    int h;
    for (h = 0; h < 2; h++) {
        double u1 = ((double)w[2 * h] + 1.0) * (1.0 / 4294967296.0);  /* (0, 1] */
        double u2 = (double)w[2 * h + 1] * (1.0 / 4294967296.0);        /* [0, 1) */
        double r = sqrt(-2.0 * grzo__log_unit(u1)), s, c;
        grzo__sincos_turn(u2, &s, &c);
        out[2 * h] = (float)(r * c);
        out[2 * h + 1] = (float)(r * s);
    }
}

GRZO__RNG_FN float grzo__noise_value(const grzo_noise *n, uint64_t index) {
    uint32_t w[4];
    if (n->dist == GRZO_NOISE_GAUSSIAN) {
        float g[4];
        grzo__noise_group(n, index >> 2, w);
        grzo__gauss4(w, g);
        return g[index & 3u];
    }
    grzo__noise_group(n, index >> 7, w);
    return grzo__rademacher_bit(w, (unsigned)(index & 127u));
}

/* ---- variant primitives (section 3c), host and device ---------------------------------- */
#define GRZO__GAUSS_BOUND 6.660437107086182f   /* |Box-Muller output| <= sqrt(-2 ln 2^-32), as a float */

/* Q = 2^(b-1) - 1: the largest level of a symmetric b-bit grid (127, 7) */
GRZO__RNG_FN float grzo__quant_levels(int32_t bits) { return (float)((1 << (bits - 1)) - 1); }

/* Stochastic rounding of a base value z to the perturbation grid k * delta, |k| <= Q, delta =
   bound / Q with bound the base distribution's largest |value| (1 for Rademacher, the
   Box-Muller bound for Gaussian): nothing is clipped, so E[result | z] = z (up to the 2^-24
   resolution of u). k = floor(z / delta) + 1[u < frac], u = 24 bits of stream q at `index`
   (4 elements per Philox call). Constants go through double division and frac through an
   explicit fma, so CPU and GPU round alike. */
GRZO__RNG_FN float grzo__sround(const grzo_noise *q, uint64_t index, float z, int32_t bits) {
    uint32_t w[4];
    double bound = q->dist == GRZO_NOISE_GAUSSIAN ? (double)GRZO__GAUSS_BOUND : 1.0, levels = (double)grzo__quant_levels(bits);
    float inv = (float)(levels / bound), Q = (float)levels;
    float k = floorf(z * inv), frac = fmaf(z, inv, -k), u;
    grzo__noise_group(q, index >> 2, w);
    u = (float)(w[index & 3u] >> 8) * (1.0f / 16777216.0f);
    if (u < frac) k += 1.0f;
    if (k > Q) k = Q;
    if (k < -Q) k = -Q;
    return (float)((double)k * bound / levels);   /* k = +-Q gives +-bound exactly */
}

/* Symmetric per-row fake quantization: round-to-nearest-even of w / delta_row, clamped to
   [-Q, Q], times delta_row = amax_row / Q (amax the row's largest |w|; 0 for a zero row). */
GRZO__RNG_FN float grzo__fake_quant(float w, float amax, int32_t bits) {
    double levels = (double)grzo__quant_levels(bits);
    float inv, k, Q = (float)levels;
    if (!(amax > 0.0f)) return 0.0f;
    inv = (float)(levels / (double)amax);
    k = rintf(w * inv);
    if (k > Q) k = Q;
    if (k < -Q) k = -Q;
    return (float)((double)k * (double)amax / levels);   /* k = +-Q gives +-amax exactly */
}

/* Low-rank base element (U_j . V_k) / sqrt(r): U row j is elements j*r .. j*r+r-1 of u, V row
   k the same of v. */
GRZO__RNG_FN float grzo__lowrank_at(const grzo_noise *u, const grzo_noise *v, int32_t r, int64_t j, int64_t k) {
    float acc = 0.0f;
    int32_t l;
    for (l = 0; l < r; l++)
        acc += grzo__noise_value(u, (uint64_t)(j * r + l)) * grzo__noise_value(v, (uint64_t)(k * r + l));
    return acc * (float)(1.0 / sqrt((double)r));
}

/* The variant's noise tensors, derived from an op's base noise (section 3c). */
GRZO__RNG_FN grzo_noise grzo__lowrank_u_noise(const grzo_noise *base) {
    grzo_noise n = *base;
    n.stream = GRZO_STREAM_LOWRANK_U + base->stream;
    return n;
}
GRZO__RNG_FN grzo_noise grzo__lowrank_v_noise(const grzo_noise *base, const grzo_variant *v) {
    grzo_noise n = *base;
    n.step = v->lowrank_step;
    n.stream = GRZO_STREAM_LOWRANK_V;
    return n;
}
GRZO__RNG_FN grzo_noise grzo__quant_noise(const grzo_noise *base) {
    grzo_noise n = *base;              /* dist kept: it sets the grid (grzo__sround) */
    n.stream = GRZO_STREAM_QUANT + base->stream;
    return n;
}
GRZO__RNG_FN int grzo__variant_is_lowrank(const grzo_param *p, const grzo_variant *v) {
    return v && v->lowrank_rank > 0 && p->kind != GRZO_BLOCK_VECTOR;
}
/* quantized variants fake-quantize matrix blocks' weights (linear ops, ask/tell) */
GRZO__RNG_FN int grzo__quantizes_weights(const grzo_param *p, const grzo_variant *v) {
    return v && v->quant_bits && p->kind == GRZO_BLOCK_MATRIX;
}
GRZO__RNG_FN int grzo__variant_masked(const grzo_variant *v, float theta) {
    return v && v->sparse && !(fabsf(theta) <= v->sparse_threshold);
}

/* Element (j, k) of a variant's base B (before the Flipout signs): 0 where the sparse mask
   (from the unperturbed theta) is off, else U[j,k] or (U V^T)[j,k] / sqrt(r), then quantized. */
GRZO__RNG_FN float grzo__variant_base(const grzo_param *p, const grzo_noise *base, const grzo_variant *v,
                                      int64_t j, int64_t k, float theta) {
    uint64_t index = (uint64_t)(j * p->cols + k);
    float z;
    if (grzo__variant_masked(v, theta)) return 0.0f;
    if (grzo__variant_is_lowrank(p, v)) {
        grzo_noise u = grzo__lowrank_u_noise(base), vv = grzo__lowrank_v_noise(base, v);
        z = grzo__lowrank_at(&u, &vv, v->lowrank_rank, j, k);
    } else {
        z = grzo__noise_value(base, index);
    }
    if (v && v->quant_bits) {
        grzo_noise q = grzo__quant_noise(base);
        z = grzo__sround(&q, index, z, v->quant_bits);
    }
    return z;
}

#endif /* RNG primitives */

/* ===================================================================================== */
/*                                  IMPLEMENTATION                                       */
/* ===================================================================================== */
#if defined(GRZO_IMPLEMENTATION) && !defined(GRZO__IMPLEMENTED)
#define GRZO__IMPLEMENTED

#if defined(__FAST_MATH__)
#error "grzo: the implementation needs IEEE arithmetic (bit-identical RNG, NaN guards); do not build it with -ffast-math"
#endif

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if !defined(_WIN32)
#include <fcntl.h>    /* open, O_EXCL: a checkpoint's temporary is created exclusively */
#include <unistd.h>   /* close, unlink */
#endif

#ifndef GRZO_ASSERT
#include <assert.h>
#define GRZO_ASSERT(x) assert(x)
#endif

#ifdef GRZO_STATIC
#if defined(__GNUC__) || defined(__clang__)
#define GRZO__DEF static __attribute__((unused))   /* a private copy need not use everything */
#else
#define GRZO__DEF static
#endif
#else
#define GRZO__DEF
#endif

GRZO__DEF grzo_status grzo_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    if (!ctr || !key || !out) return GRZO_ERR_INVALID_ARG;
    grzo__philox(ctr[0], ctr[1], ctr[2], ctr[3], key[0], key[1], out);
    return GRZO_OK;
}

/* whether a user's noise names a tensor grzo defines: a known distribution (the internal
   paths read any other value as Rademacher, which a user who wrote it did not mean) and a
   stream that fits the counter's 16 bits (a larger one would alias a smaller) */
static int grzo__noise_valid(const grzo_noise *n) {
    return n && n->dist < (uint32_t)GRZO_NOISE_COUNT && n->stream <= 0xFFFFu;
}

GRZO__DEF float grzo_noise_at(const grzo_noise *n, uint64_t index) {
    if (!grzo__noise_valid(n) || index >= GRZO_MAX_INDEX) return 0.0f;
    return grzo__noise_value(n, index);
}

/* ---- Gaussian noise in bulk ------------------------------------------------------------ */
/* grzo__gauss4 over GRZO__GAUSS_BATCH groups at once, for grzo_noise_fill on the host: the
   same IEEE operations in the same order (bit-identical; the scalar functions stay the
   reference and what the GPU runs), written as loops over arrays that compilers vectorize:
   frexp as exponent bits, the if/switch as bit selects of values computed on both sides. GCC on
   x86-64 Linux builds it for AVX-512 and AVX2+FMA too (there fma() is one instruction, not a
   libm call) and picks one at run time. */
#define GRZO__GAUSS_BATCH 16                         /* groups: 64 normals */
#define GRZO__PAIRS (2 * GRZO__GAUSS_BATCH)
#if GRZO__CPU_CLONES
#ifndef GRZO__RNG_TARGETS   /* tests/meson.build narrows it to test the other builds on this CPU */
#define GRZO__RNG_TARGETS "arch=x86-64-v4", "arch=x86-64-v3", "default"
#endif
#define GRZO__RNG_CLONES __attribute__((target_clones(GRZO__RNG_TARGETS), unused))   /* unused: grzo__noise_words_at */
#elif defined(__GNUC__) || defined(__clang__)
#define GRZO__RNG_CLONES __attribute__((unused))
#else
#define GRZO__RNG_CLONES
#endif

/* Philox for up to 16 groups in the lanes of AVX-512 registers (GCC, x86-64 Linux, C). GCC 12
   vectorizes grzo__philox's 32 x 32 -> 64-bit products as 64-bit multiplies (vpmullq: three
   uops on Intel's cores, one on AMD's), where vpmuludq (one uop) multiplies the low halves of
   64-bit lanes: even and odd lanes in two of them, their halves put back in place by shifts
   and blends. The same bits as grzo__noise_group (tests/test_rng.c: kat_lanes, and every bulk
   test through grzo_noise_fill); the batches below take it where the CPU has AVX-512F.
   GRZO__PHILOX_AVX512=0 leaves it out (tests/meson.build, to test the portable loop in each
   clone on an AVX-512 CPU). */
#if GRZO__CPU_CLONES && !defined(GRZO__PHILOX_AVX512)
#define GRZO__PHILOX_AVX512 1
#endif
#if GRZO__CPU_CLONES && GRZO__PHILOX_AVX512
#include <immintrin.h>
#define GRZO__PHILOX_LANES 1
/* the high and the low 32 bits of m times each 32-bit lane of c */
__attribute__((target("avx512f"), always_inline)) static inline void grzo__mul_lanes(__m512i c, __m512i m, __m512i *hi,
                                                                                     __m512i *lo) {
    const __mmask16 odd = 0xAAAA;
    __m512i even_p = _mm512_mul_epu32(c, m), odd_p = _mm512_mul_epu32(_mm512_srli_epi64(c, 32), m);
    *hi = _mm512_mask_blend_epi32(odd, _mm512_srli_epi64(even_p, 32), odd_p);
    *lo = _mm512_mask_blend_epi32(odd, even_p, _mm512_slli_epi64(odd_p, 32));
}
/* groups g[0 .. count) of n (count <= 16), their 4 words each into w[4 i ..] */
__attribute__((target("avx512f"), noinline)) static void grzo__philox_lanes(const grzo_noise *n, const uint64_t *g,
                                                                            int count, uint32_t *w) {
    const __mmask8 lo8 = (__mmask8)(count >= 8 ? 0xFF : (1u << count) - 1u);
    const __mmask8 hi8 = (__mmask8)(count <= 8 ? 0 : count >= 16 ? 0xFF : (1u << (count - 8)) - 1u);
    const __m512i m0 = _mm512_set1_epi32((int)GRZO__PHILOX_M0), m1 = _mm512_set1_epi32((int)GRZO__PHILOX_M1);
    const __m512i g_lo = _mm512_maskz_loadu_epi64(lo8, g), g_hi = _mm512_maskz_loadu_epi64(hi8, g + 8);
    const __m512i top = _mm512_set1_epi64(0xFFFF);
    __m512i c0, c1, c2, c3, h0, l0, h1, l1, t0, t1, t2, t3, u0, u1, u2, u3, a, b;
    uint32_t k0 = (uint32_t)n->seed, k1 = (uint32_t)(n->seed >> 32), out[64];
    int r;
    /* counter: the group's low word, its bits 32-47 under the stream, the step, the block */
    c0 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi64_epi32(g_lo)), _mm512_cvtepi64_epi32(g_hi), 1);
    c1 = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi64_epi32(_mm512_and_si512(_mm512_srli_epi64(g_lo, 32), top))),
                            _mm512_cvtepi64_epi32(_mm512_and_si512(_mm512_srli_epi64(g_hi, 32), top)), 1);
    c1 = _mm512_or_si512(c1, _mm512_set1_epi32((int)(n->stream << 16)));
    c2 = _mm512_set1_epi32((int)n->step);
    c3 = _mm512_set1_epi32((int)n->block);
    for (r = 0; r < 10; r++) {   /* grzo__philox's rounds */
        grzo__mul_lanes(c0, m0, &h0, &l0);
        grzo__mul_lanes(c2, m1, &h1, &l1);
        c0 = _mm512_ternarylogic_epi32(h1, c1, _mm512_set1_epi32((int)k0), 0x96);   /* three-way xor */
        c2 = _mm512_ternarylogic_epi32(h0, c3, _mm512_set1_epi32((int)k1), 0x96);
        c1 = l1;
        c3 = l0;
        k0 += GRZO__PHILOX_W0;
        k1 += GRZO__PHILOX_W1;
    }
    /* lanes to groups: word q of group i at 4 i + q (a 4 x 16 transpose) */
    t0 = _mm512_unpacklo_epi32(c0, c1);
    t1 = _mm512_unpackhi_epi32(c0, c1);
    t2 = _mm512_unpacklo_epi32(c2, c3);
    t3 = _mm512_unpackhi_epi32(c2, c3);
    u0 = _mm512_unpacklo_epi64(t0, t2);   /* 128-bit lane L: group 4 L */
    u1 = _mm512_unpackhi_epi64(t0, t2);   /* 4 L + 1 */
    u2 = _mm512_unpacklo_epi64(t1, t3);   /* 4 L + 2 */
    u3 = _mm512_unpackhi_epi64(t1, t3);   /* 4 L + 3 */
    a = _mm512_shuffle_i32x4(u0, u1, 0x44);   /* u0 lanes 0 1, u1 lanes 0 1 */
    b = _mm512_shuffle_i32x4(u2, u3, 0x44);
    _mm512_storeu_si512(out, _mm512_shuffle_i32x4(a, b, 0x88));        /* groups 0-3 */
    _mm512_storeu_si512(out + 16, _mm512_shuffle_i32x4(a, b, 0xDD));   /* 4-7 */
    a = _mm512_shuffle_i32x4(u0, u1, 0xEE);
    b = _mm512_shuffle_i32x4(u2, u3, 0xEE);
    _mm512_storeu_si512(out + 32, _mm512_shuffle_i32x4(a, b, 0x88));   /* 8-11 */
    _mm512_storeu_si512(out + 48, _mm512_shuffle_i32x4(a, b, 0xDD));   /* 12-15 */
    memcpy(w, out, (size_t)(4 * count) * sizeof(uint32_t));
}
/* whether this CPU runs grzo__philox_lanes (libgcc's CPU model, read, not written) */
#define GRZO__PHILOX_LANES_HERE() __builtin_cpu_supports("avx512f")
#else
#define GRZO__PHILOX_LANES 0
#endif

/* Groups group0 .. group0 + count - 1 (count <= 16) into w[4 i ..] through grzo__philox_lanes
   where this CPU runs it: 1, else 0 and the caller's own loop. */
GRZO__INLINE_FN int grzo__philox_batch(const grzo_noise *n, uint64_t group0, int count, uint32_t *w) {
#if GRZO__PHILOX_LANES
    if (GRZO__PHILOX_LANES_HERE()) {
        uint64_t g[16];
        int i;
        for (i = 0; i < 16; i++) g[i] = group0 + (uint64_t)i;
        grzo__philox_lanes(n, g, count, w);
        return 1;
    }
#endif
    (void)n, (void)group0, (void)count, (void)w;
    return 0;
}

/* grzo__noise_group for groups group0 .. group0 + GRZO__GAUSS_BATCH - 1 as Box-Muller pairs:
   pair 2i + h (h = 0, 1) of group i takes u1 from word 2h (a) and u2 from word 2h + 1 (b) */
GRZO__INLINE_FN void grzo__noise_pairs(const grzo_noise *n, uint64_t group0, uint32_t a[GRZO__PAIRS], uint32_t b[GRZO__PAIRS]) {
    int i;
    uint32_t w[4 * GRZO__GAUSS_BATCH];
    if (!grzo__philox_batch(n, group0, GRZO__GAUSS_BATCH, w))
        for (i = 0; i < GRZO__GAUSS_BATCH; i++) grzo__noise_group(n, group0 + (uint64_t)i, w + 4 * i);
    for (i = 0; i < GRZO__GAUSS_BATCH; i++) {
        a[2 * i] = w[4 * i];
        b[2 * i] = w[4 * i + 1];
        a[2 * i + 1] = w[4 * i + 2];
        b[2 * i + 1] = w[4 * i + 3];
    }
}

/* Selects on the bits, without a branch that the compiler must convert (GCC does for AVX-512
   but not for AVX2): cond ? a : b, and cond ? -x : x (a sign flip, as unary minus is). */
GRZO__INLINE_FN double grzo__pick(int cond, double a, double b) {
    uint64_t ab, bb, mask = (uint64_t)0 - (uint64_t)(cond != 0);
    memcpy(&ab, &a, sizeof ab);
    memcpy(&bb, &b, sizeof bb);
    ab = (ab & mask) | (bb & ~mask);
    memcpy(&a, &ab, sizeof a);
    return a;
}
GRZO__INLINE_FN double grzo__negate_if(int cond, double x) {
    uint64_t xb;
    memcpy(&xb, &x, sizeof xb);
    xb ^= (uint64_t)(cond != 0) << 63;
    memcpy(&x, &xb, sizeof x);
    return x;
}

/* grzo__log_unit(u), u in (0, 1] normal: frexp as exponent bits, the `if` as selects. The
   polynomial is the same fma chain (its loop written out so that the caller's loop is one
   flat body). */
GRZO__INLINE_FN double grzo__log_unit_flat(double u) {
    const double two52_bias = 4503599627370496.0 + 1023.0;   /* 2^52 + the exponent bias */
    uint64_t bits, mbits, ebits;
    double m, e, half, e1, f, w, p;
    int big;
    memcpy(&bits, &u, sizeof bits);
    mbits = (bits & 0x000FFFFFFFFFFFFFull) | 0x3FF0000000000000ull;   /* m in [1, 2) */
    ebits = (bits >> 52) | 0x4330000000000000ull;                    /* 2^52 + biased e */
    memcpy(&m, &mbits, sizeof m);
    memcpy(&e, &ebits, sizeof e);
    e = e - two52_bias;                                               /* exact: u = m 2^e */
    half = 0.5 * m;
    e1 = e + 1.0;
    big = m > 1.4142135623730951;
    m = grzo__pick(big, half, m);
    e = grzo__pick(big, e1, e);
    f = (m - 1.0) / (m + 1.0);
    w = f * f;
    p = fma(1.0 / 23, w, 1.0 / 21);
    p = fma(p, w, 1.0 / 19);
    p = fma(p, w, 1.0 / 17);
    p = fma(p, w, 1.0 / 15);
    p = fma(p, w, 1.0 / 13);
    p = fma(p, w, 1.0 / 11);
    p = fma(p, w, 1.0 / 9);
    p = fma(p, w, 1.0 / 7);
    p = fma(p, w, 1.0 / 5);
    p = fma(p, w, 1.0 / 3);
    p = fma(p, w, 1.0);
    return fma(e, 0.69314718055994530942, (2.0 * f) * p);
}

/* grzo__sincos_turn(t), t in [0, 1): the swap and the quadrant's switch as selects; k by
   conversion to int (floor for q >= 0), which vectorizes where floor() may not */
GRZO__INLINE_FN void grzo__sincos_turn_flat(double t, double *s, double *c) {
    double q = 4.0 * t, k = (double)(int)q, fq = q - k, flip = 1.0 - fq, b, w, ps, pc, sb, cb, x, y;
    int swap = fq > 0.5, odd = (k == 1.0) | (k == 3.0), neg_c = (k == 1.0) | (k == 2.0), neg_s = k >= 2.0;
    fq = grzo__pick(swap, flip, fq);
    b = fq * 1.5707963267948966;
    w = b * b;
    ps = fma(-1.0 / 121645100408832000.0, w, 1.0 / 355687428096000.0);
    ps = fma(ps, w, -1.0 / 1307674368000.0);
    ps = fma(ps, w, 1.0 / 6227020800.0);
    ps = fma(ps, w, -1.0 / 39916800.0);
    ps = fma(ps, w, 1.0 / 362880.0);
    ps = fma(ps, w, -1.0 / 5040.0);
    ps = fma(ps, w, 1.0 / 120.0);
    ps = fma(ps, w, -1.0 / 6.0);
    sb = fma(b * w, ps, b);
    pc = fma(1.0 / 2432902008176640000.0, w, -1.0 / 6402373705728000.0);
    pc = fma(pc, w, 1.0 / 20922789888000.0);
    pc = fma(pc, w, -1.0 / 87178291200.0);
    pc = fma(pc, w, 1.0 / 479001600.0);
    pc = fma(pc, w, -1.0 / 3628800.0);
    pc = fma(pc, w, 1.0 / 40320.0);
    pc = fma(pc, w, -1.0 / 720.0);
    pc = fma(pc, w, 1.0 / 24.0);
    pc = fma(pc, w, -0.5);
    cb = fma(w, pc, 1.0);
    x = grzo__pick(swap != odd, sb, cb);   /* k = 0: (cos, sin) = (cs, sn), 1: (-sn, cs), */
    y = grzo__pick(swap != odd, cb, sb);   /* 2: (-cs, -sn), 3: (sn, -cs) */
    *c = grzo__negate_if(neg_c, x);
    *s = grzo__negate_if(neg_s, y);
}

/* sqrt of each x[i] >= -0. Under math-errno (C99's default) compilers keep sqrt() scalar
   behind a test for x < 0, even where the flag is switched off for one function; SSE2's
   exactly rounded sqrtpd (any x86-64) does two at a time. */
#if defined(__GNUC__) && defined(__x86_64__) && defined(__SSE2__)
#include <emmintrin.h>
GRZO__INLINE_FN void grzo__sqrt_pairs(double x[GRZO__PAIRS]) {
    int i;
    for (i = 0; i < GRZO__PAIRS; i += 2) _mm_storeu_pd(x + i, _mm_sqrt_pd(_mm_loadu_pd(x + i)));
}
#else
GRZO__INLINE_FN void grzo__sqrt_pairs(double x[GRZO__PAIRS]) {
    int i;
    for (i = 0; i < GRZO__PAIRS; i++) x[i] = sqrt(x[i]);
}
#endif

/* Box-Muller of pairs of words (as grzo__noise_pairs makes them): out[2p], out[2p + 1] =
   r cos, r sin of pair p, what grzo__gauss4 gives. */
GRZO__RNG_CLONES static void grzo__gauss_pairs(const uint32_t a[GRZO__PAIRS], const uint32_t b[GRZO__PAIRS], float out[2 * GRZO__PAIRS]) {
    double r[GRZO__PAIRS], s[GRZO__PAIRS], c[GRZO__PAIRS];
    int p;
    for (p = 0; p < GRZO__PAIRS; p++) {
        r[p] = -2.0 * grzo__log_unit_flat(((double)a[p] + 1.0) * (1.0 / 4294967296.0));
        grzo__sincos_turn_flat((double)b[p] * (1.0 / 4294967296.0), &s[p], &c[p]);
    }
    grzo__sqrt_pairs(r);
    for (p = 0; p < GRZO__PAIRS; p++) {
        out[2 * p] = (float)(r[p] * c[p]);
        out[2 * p + 1] = (float)(r[p] * s[p]);
    }
}

/* elements 4 group0 .. 4 group0 + 4 GRZO__GAUSS_BATCH - 1 of a Gaussian tensor */
GRZO__RNG_CLONES static void grzo__gauss_batch(const grzo_noise *n, uint64_t group0, float out[4 * GRZO__GAUSS_BATCH]) {
    uint32_t a[GRZO__PAIRS], b[GRZO__PAIRS];
    grzo__noise_pairs(n, group0, a, b);
    grzo__gauss_pairs(a, b, out);
}

#define GRZO__RADEMACHER_BATCH 16                    /* groups at most: 2048 signs */
/* The words of groups[0 .. count) (4 each, count <= GRZO__RADEMACHER_BATCH), in a loop that
   compilers vectorize across groups (a Philox call per lane): what the CPU backend's loops
   over U's sign bits read. Any groups: a batch may hold several rows' pieces of a tensor. */
GRZO__RNG_CLONES static void grzo__noise_words_at(const grzo_noise *n, const uint64_t *groups, int count, uint32_t *w) {
    const grzo_noise key = *n;   /* locals that w cannot alias: the loop vectorizes */
    uint64_t g[GRZO__RADEMACHER_BATCH];
    uint32_t v[4 * GRZO__RADEMACHER_BATCH];
    int i;
#if GRZO__PHILOX_LANES
    if (GRZO__PHILOX_LANES_HERE()) {
        grzo__philox_lanes(n, groups, count, w);
        return;
    }
#endif
    memcpy(g, groups, (size_t)count * sizeof(uint64_t));
    for (i = 0; i < count; i++) grzo__noise_group(&key, g[i], v + 4 * i);
    memcpy(w, v, (size_t)(4 * count) * sizeof(uint32_t));
}
/* Rademacher groups group0 .. group0 + n_groups - 1, n_groups <= GRZO__RADEMACHER_BATCH (128
   signs each: bit b of word q is element 32 q + b, as grzo__rademacher_bit reads it), built as
   float bits with integer shifts that compilers vectorize: the sign bit is the inverted noise
   bit. */
GRZO__RNG_CLONES static void grzo__rademacher_groups(const grzo_noise *n, uint64_t group0, int n_groups,
                                                     float *out) {
    uint32_t w[4 * GRZO__RADEMACHER_BATCH], v[32];
    int i, b;
    if (!grzo__philox_batch(n, group0, n_groups, w))
        for (i = 0; i < n_groups; i++) grzo__noise_group(n, group0 + (uint64_t)i, w + 4 * i);
    for (i = 0; i < 4 * n_groups; i++) {
        for (b = 0; b < 32; b++) v[b] = 0x3F800000u | ((~(w[i] >> b) & 1u) << 31);   /* +1.0f or -1.0f */
        memcpy(out + 32 * i, v, sizeof v);
    }
}

/* Fills out[0..count) with elements first.. of the tensor: one Philox call per 128
   Rademacher elements (or 4 normals), so it is the fast path for whole rows. */
GRZO__DEF grzo_status grzo_noise_fill(const grzo_noise *n, uint64_t first, size_t count, float *out) {
    uint64_t e = first, end;
    uint32_t w[4];
    if (!grzo__noise_valid(n) || !out || first > GRZO_MAX_INDEX || (uint64_t)count > GRZO_MAX_INDEX - first)
        return GRZO_ERR_INVALID_ARG;
    end = first + count;
    if (n->dist == GRZO_NOISE_GAUSSIAN) {
        float g[4 * GRZO__GAUSS_BATCH];
        while (e < end) {
            /* GRZO__GAUSS_BATCH groups from e's group: straight into out when all are
               wanted, else into g; what lies in one group alone, by the scalar path */
            uint64_t from = e & ~(uint64_t)3, stop = from + 4 * GRZO__GAUSS_BATCH;
            if (stop > end) stop = end;
            if (stop - from <= 4) {
                grzo__noise_group(n, e >> 2, w);
                grzo__gauss4(w, g);
            } else if (e == from && stop - e == 4 * GRZO__GAUSS_BATCH) {
                grzo__gauss_batch(n, e >> 2, out);
                out += 4 * GRZO__GAUSS_BATCH;
                e = stop;
                continue;
            } else {
                grzo__gauss_batch(n, e >> 2, g);
            }
            memcpy(out, g + (e - from), (size_t)(stop - e) * sizeof *out);
            out += stop - e;
            e = stop;
        }
        return GRZO_OK;
    }
    while (e < end) {
        uint64_t group = e >> 7, whole = (end - e) >> 7;
        if ((e & 127u) == 0 && whole > 0) {   /* whole groups, up to a batch at a time */
            int ng = whole < GRZO__RADEMACHER_BATCH ? (int)whole : GRZO__RADEMACHER_BATCH;
            grzo__rademacher_groups(n, group, ng, out);
            out += 128 * ng;
            e += 128 * (uint64_t)ng;
        } else {   /* part of one group (a range's ends): the group built whole, the part copied */
            float g[128];
            uint64_t stop = (group + 1) << 7;
            if (stop > end) stop = end;
            grzo__rademacher_groups(n, group, 1, g);
            memcpy(out, g + (e & 127u), (size_t)(stop - e) * sizeof *out);
            out += stop - e;
            e = stop;
        }
    }
    return GRZO_OK;
}

GRZO__DEF double grzo_uniform_at(uint64_t seed, uint32_t step, uint32_t block, uint32_t stream,
                                 uint64_t index) {
    uint32_t w[4];
    grzo__philox((uint32_t)index, ((uint32_t)(index >> 32) & 0xFFFFu) | (stream << 16), step,
                 block, (uint32_t)seed, (uint32_t)(seed >> 32), w);
    return (double)(((uint64_t)w[0] << 21) ^ (uint64_t)(w[1] >> 11)) * (1.0 / 9007199254740992.0);
}

/* ---- status, version ------------------------------------------------------------------- */
GRZO__DEF const char *grzo_status_str(grzo_status s) {
    switch (s) {
    case GRZO_OK: return "ok";
    case GRZO_ERR_INVALID_ARG: return "invalid argument";
    case GRZO_ERR_OUT_OF_MEMORY: return "out of memory";
    case GRZO_ERR_STATE: return "call out of order";
    case GRZO_ERR_NONFINITE: return "non-finite loss";
    case GRZO_ERR_BACKEND: return "backend failure";
    case GRZO_ERR_UNSUPPORTED: return "unsupported by the backend";
    case GRZO_ERR_IO: return "i/o error";
    case GRZO_ERR_FORMAT: return "bad checkpoint format";
    case GRZO_ERR_VERSION: return "version mismatch";
    case GRZO_ERR_COMM: return "communication failed or ranks disagree";
    }
    return "unknown status";
}

#define GRZO__STR2(x) #x
#define GRZO__STR(x) GRZO__STR2(x)
GRZO__DEF const char *grzo_version(void) {
    return GRZO__STR(GRZO_VERSION_MAJOR) "." GRZO__STR(GRZO_VERSION_MINOR) "." GRZO__STR(GRZO_VERSION_PATCH);
}

/* ---- small shared helpers ------------------------------------------------------------------ */
static int grzo__mul_overflows(int64_t a, int64_t b) {   /* a, b >= 0 */
    return a != 0 && b > INT64_MAX / a;
}

/* elements of a parameter block, or -1 if the shape is invalid or too large */
static int64_t grzo__param_elems(const grzo_param *p) {
    if (p->rows <= 0 || p->cols <= 0) return -1;
    if (grzo__mul_overflows(p->rows, p->cols)) return -1;
    if (p->rows * p->cols > (int64_t)(GRZO_MAX_INDEX / 4)) return -1;
    return p->rows * p->cols;
}

static size_t grzo__dtype_size(grzo_dtype t) {
    return (t == GRZO_DTYPE_BF16 || t == GRZO_DTYPE_F16) ? 2u : 4u;
}

/* Sign vectors of block `base` for example e: r (length rows) and s (length cols). */
static grzo_noise grzo__sign_noise(const grzo_noise *base, uint32_t stream) {
    grzo_noise n = *base;
    n.stream = stream;
    n.dist = GRZO_NOISE_RADEMACHER;
    return n;
}

/* The perturbation of element (j, k) of a block for example e, without the sigma sign:
   U[j,k] r_e[j] s_e[k] (flipout; vectors have no s) or U[j,k] (shared). The literal
   SPEC formula: used by the reference backend and by the tests. */
static float grzo__flipout_signs(const grzo_param *p, const grzo_noise *base, int64_t e, int64_t j, int64_t k) {
    grzo_noise r = grzo__sign_noise(base, GRZO_STREAM_SIGN_R), s = grzo__sign_noise(base, GRZO_STREAM_SIGN_S);
    float f = grzo__noise_value(&r, (uint64_t)(e * p->rows + j));
    return p->kind != GRZO_BLOCK_VECTOR ? f * grzo__noise_value(&s, (uint64_t)(e * p->cols + k)) : f;
}
static float grzo__z_element(const grzo_param *p, const grzo_noise *base, int flipout,
                             int64_t e, int64_t j, int64_t k) {
    float z = grzo__noise_value(base, (uint64_t)(j * p->cols + k));
    return flipout ? z * grzo__flipout_signs(p, base, e, j, k) : z;
}
/* The same under a variant (NULL: dense): B[j,k] (section 3c) times the signs; theta is the
   element's unperturbed value, which the sparse mask reads. */
static float grzo__z_variant(const grzo_param *p, const grzo_noise *base, int flipout, const grzo_variant *v,
                             int64_t e, int64_t j, int64_t k, float theta) {
    float z;
    if (!v) return grzo__z_element(p, base, flipout, e, j, k);
    z = grzo__variant_base(p, base, v, j, k, theta);
    return flipout ? z * grzo__flipout_signs(p, base, e, j, k) : z;
}
/* largest |w| of row j (the per-row fake-quantization scale) */
static float grzo__row_amax(const float *W, int64_t cols, int64_t j) {
    float m = 0.0f;
    int64_t k;
    for (k = 0; k < cols; k++) if (fabsf(W[j * cols + k]) > m) m = fabsf(W[j * cols + k]);
    return m;
}


/* segment of row n: binary search over offsets (n_segments + 1 entries) */
static int64_t grzo__segment_of(const grzo_perturb *pt, int64_t row) {
    int64_t lo = 0, hi = pt->n_segments - 1;
    while (lo < hi) {
        int64_t mid = (lo + hi + 1) / 2;
        if (pt->offsets[mid] <= row) lo = mid; else hi = mid - 1;
    }
    return lo;
}

/* ---- reference backend: the SPEC read literally, for tests ------------------------------------ */
typedef struct grzo__ref { char err[128]; } grzo__ref;

static grzo_status grzo__ref_query(void *self, grzo_backend_caps *out) {
    (void)self;
    out->dtypes = 1u << GRZO_DTYPE_F32;
    out->variants = GRZO_VARIANT_SPARSE | GRZO_VARIANT_LOWRANK | GRZO_VARIANT_QUANT;
    out->device_memory = 0;
    out->n_threads = 1;
    return GRZO_OK;
}
static grzo_status grzo__ref_alloc(void *self, size_t bytes, void **out) {
    (void)self;
    *out = calloc(1, bytes ? bytes : 1);
    return *out ? GRZO_OK : GRZO_ERR_OUT_OF_MEMORY;
}
static void grzo__ref_free(void *self, void *p) { (void)self; free(p); }
static grzo_status grzo__ref_copy(void *self, void *dst, const void *src, size_t bytes) {
    (void)self;
    if (bytes) memmove(dst, src, bytes);
    return GRZO_OK;
}
static void grzo__ref_destroy(void *self) { free(self); }

/* perturbation scale of a row: sign * sigma and the example whose signs apply */
static float grzo__row_scale(const grzo_perturb *pt, int64_t row, int64_t *example) {
    int64_t c;
    *example = 0;
    if (!pt || pt->sigma == 0.0f || pt->n_segments == 0) return 0.0f;
    c = grzo__segment_of(pt, row);
    *example = pt->example[c];
    return (float)pt->sign[c] * pt->sigma;
}

static grzo_status grzo__ref_linear(void *self, const grzo_linear_args *a) {
    const grzo_param *w = &a->w;
    const float *W = (const float *)w->data;
    int64_t n, j, k;
    (void)self;
    for (n = 0; n < a->n_rows; n++) {
        int64_t e;
        float scale = grzo__row_scale(a->perturb, n, &e);
        const float *x = a->x + n * w->cols;
        for (j = 0; j < w->rows; j++) {
            double acc = 0.0;
            int quant = grzo__quantizes_weights(w, a->variant);
            float amax = quant ? grzo__row_amax(W, w->cols, j) : 0.0f;
            for (k = 0; k < w->cols; k++) {
                float theta = W[j * w->cols + k];
                float wjk = quant ? grzo__fake_quant(theta, amax, a->variant->quant_bits) : theta;
                if (scale != 0.0f)
                    wjk += scale * grzo__z_variant(w, &a->perturb->base, a->perturb->flipout, a->variant, e, j, k, theta);
                acc += (double)x[k] * wjk;
            }
            a->y[n * w->rows + j] = (float)acc;
        }
    }
    return GRZO_OK;
}

static grzo_status grzo__ref_vector(void *self, const grzo_vector_args *a) {
    const float *v = (const float *)a->v.data;
    int64_t n, j, d = a->v.rows;
    (void)self;
    for (n = 0; n < a->n_rows; n++) {
        int64_t e;
        float scale = grzo__row_scale(a->perturb, n, &e);
        for (j = 0; j < d; j++) {
            float vj = v[j];
            if (scale != 0.0f)
                vj += scale * grzo__z_variant(&a->v, &a->perturb->base, a->perturb->flipout, a->variant, e, j, 0, v[j]);
            a->y[n * d + j] = a->op == GRZO_VECTOR_MUL ? a->x[n * d + j] * vj : a->x[n * d + j] + vj;
        }
    }
    return GRZO_OK;
}

static grzo_status grzo__ref_embedding(void *self, const grzo_embedding_args *a) {
    const float *E = (const float *)a->e.data;
    int64_t n, k, d = a->e.cols;
    grzo__ref *r = (grzo__ref *)self;
    for (n = 0; n < a->n_rows; n++)   /* every id first: a refused op writes nothing, touched maps included */
        if (a->ids[n] < 0 || a->ids[n] >= a->e.rows) {
            snprintf(r->err, sizeof r->err, "embedding: token id %lld at row %lld out of range [0, %lld)",
                     (long long)a->ids[n], (long long)n, (long long)a->e.rows);
            return GRZO_ERR_INVALID_ARG;
        }
    for (n = 0; n < a->n_rows; n++) {
        int64_t e, row = a->ids[n];
        float scale = grzo__row_scale(a->perturb, n, &e);
        if (a->touched) a->touched[row] = 1;
        for (k = 0; k < d; k++) {
            float v = E[row * d + k];
            if (scale != 0.0f)
                v += scale * grzo__z_variant(&a->e, &a->perturb->base, a->perturb->flipout, a->variant, e, row, k,
                                             E[row * d + k]);
            a->y[n * d + k] = v;
        }
    }
    return GRZO_OK;
}

static grzo_status grzo__ref_update(void *self, const grzo_update_args *a) {
    float *P = (float *)a->p.data;
    int64_t j, k, e;
    (void)self;
    for (j = 0; j < a->p.rows; j++) {
        if (a->touched && !a->touched[j]) continue;
        for (k = 0; k < a->p.cols; k++) {
            double g = 0.0;
            float *pjk = &P[j * a->p.cols + k];
            for (e = 0; e < a->n_examples; e++)
                g += (double)a->coeff[e] * grzo__z_variant(&a->p, &a->base, a->flipout, a->variant, e, j, k, *pjk);
            *pjk = *pjk - (float)g - a->decay * *pjk;
        }
    }
    return GRZO_OK;
}

static grzo_status grzo__ref_perturbed_copy(void *self, const grzo_copy_args *a) {
    const float *P = (const float *)a->p.data;
    float *out = (float *)a->out;
    int64_t j, k;
    int quant = grzo__quantizes_weights(&a->p, a->variant);
    (void)self;
    for (j = 0; j < a->p.rows; j++) {
        float amax = quant ? grzo__row_amax(P, a->p.cols, j) : 0.0f;
        for (k = 0; k < a->p.cols; k++) {
            float theta = P[j * a->p.cols + k];
            out[j * a->p.cols + k] = (quant ? grzo__fake_quant(theta, amax, a->variant->quant_bits) : theta) +
                a->scale * grzo__z_variant(&a->p, &a->base, a->flipout, a->variant, a->example, j, k, theta);
        }
    }
    return GRZO_OK;
}

static const char *grzo__ref_last_error(void *self) { return ((grzo__ref *)self)->err; }

static const grzo_backend_i grzo__ref_iface = {
    GRZO_BACKEND_API_VERSION, "ref", grzo__ref_destroy, grzo__ref_query, grzo__ref_alloc,
    grzo__ref_free, grzo__ref_copy, grzo__ref_copy, grzo__ref_linear, grzo__ref_vector,
    grzo__ref_embedding, grzo__ref_update, grzo__ref_perturbed_copy, NULL, grzo__ref_last_error};

GRZO__DEF grzo_status grzo_backend_ref_create(grzo_backend *out) {
    grzo__ref *r;
    if (!out) return GRZO_ERR_INVALID_ARG;
    r = (grzo__ref *)calloc(1, sizeof *r);
    if (!r) return GRZO_ERR_OUT_OF_MEMORY;
    out->iface = &grzo__ref_iface;
    out->self = r;
    return GRZO_OK;
}

/* ---- backend wrappers ------------------------------------------------------------------------ */
/* The entries a backend must fill (synchronize and last_error are optional): NULL if all are
   there, else the first missing one's name. */
static const char *grzo__backend_missing(const grzo_backend_i *i) {
    return !i->destroy ? "destroy" : !i->query ? "query" : !i->mem_alloc ? "mem_alloc" : !i->mem_free ? "mem_free"
         : !i->upload ? "upload" : !i->download ? "download" : !i->linear ? "linear" : !i->vector ? "vector"
         : !i->embedding ? "embedding" : !i->update ? "update" : !i->perturbed_copy ? "perturbed_copy" : NULL;
}

static int grzo__backend_ok(const grzo_backend *b) {
    return b && b->iface && b->iface->api_version == GRZO_BACKEND_API_VERSION && !grzo__backend_missing(b->iface);
}

GRZO__DEF void grzo_backend_destroy(grzo_backend *b) {
    if (b && b->iface && b->iface->destroy) b->iface->destroy(b->self);
    if (b) { b->iface = NULL; b->self = NULL; }
}
GRZO__DEF grzo_status grzo_backend_query(const grzo_backend *b, grzo_backend_caps *out) {
    if (!b || !b->iface || !out) return GRZO_ERR_INVALID_ARG;
    if (b->iface->api_version != GRZO_BACKEND_API_VERSION) return GRZO_ERR_VERSION;
    if (grzo__backend_missing(b->iface)) return GRZO_ERR_INVALID_ARG;
    memset(out, 0, sizeof *out);
    return b->iface->query(b->self, out);
}
GRZO__DEF grzo_status grzo_backend_alloc(const grzo_backend *b, size_t bytes, void **out) {
    if (!grzo__backend_ok(b) || !out) return GRZO_ERR_INVALID_ARG;
    *out = NULL;
    return b->iface->mem_alloc(b->self, bytes, out);
}
GRZO__DEF void grzo_backend_free(const grzo_backend *b, void *ptr) {
    if (grzo__backend_ok(b) && ptr) b->iface->mem_free(b->self, ptr);
}
GRZO__DEF grzo_status grzo_backend_upload(const grzo_backend *b, void *dst, const void *src, size_t bytes) {
    if (!grzo__backend_ok(b) || ((!dst || !src) && bytes)) return GRZO_ERR_INVALID_ARG;
    return bytes ? b->iface->upload(b->self, dst, src, bytes) : GRZO_OK;
}
GRZO__DEF grzo_status grzo_backend_download(const grzo_backend *b, void *dst, const void *src, size_t bytes) {
    if (!grzo__backend_ok(b) || ((!dst || !src) && bytes)) return GRZO_ERR_INVALID_ARG;
    return bytes ? b->iface->download(b->self, dst, src, bytes) : GRZO_OK;
}

/* ---- context ------------------------------------------------------------------------------- */
#define GRZO__NAME_MAX 64
#define GRZO__MAX_FZOO_PROBES 4096

typedef struct grzo__block {
    grzo_param p;
    char name[GRZO__NAME_MAX];
    int no_decay;
    uint8_t *touched;            /* embeddings: backend memory, one byte per row */
    int32_t shift;               /* in-place MeZO: the sigma z multiple now written into it */
    int full_touch;              /* embedding read as a whole this step (linear, ask/tell) */
    int sparse_ready;            /* sparse variant: sparse_h has been set (first step, or a checkpoint) */
    float sparse_h;              /* its magnitude threshold h_b */
} grzo__block;

enum { GRZO__IDLE = 0, GRZO__IN_STEP, GRZO__IN_PASS };

struct grzo_ctx {
    grzo_desc desc;              /* resolved */
    grzo_backend_caps caps;
    grzo__block *blocks;
    uint32_t n_blocks, cap_blocks;
    int64_t step;
    int64_t degenerate_total;
    /* the step in flight */
    int state;
    int64_t B;
    int32_t n_passes, copies, pass;
    float *losses;               /* n_passes * copies * B */
    int64_t *seg_example;        /* copies * B, for the current pass */
    int8_t *seg_sign;
    float *scratch_losses;       /* grzo_step's buffer handed to the forward */
    float *coeff;                /* max(copies * B, probes) */
    int64_t *even_offsets;       /* even split of the current op */
    int64_t cap_segs, cap_losses, cap_coeff;   /* what the buffers above hold */
    int align;                   /* 1: the passes in flight are alignment probes (section 3b) */
    double *align_gram;          /* B x B: sum_k delta_k delta_k^T */
    double *align_ab;            /* 2 K: probe k's (1^T delta_k)^2 and |delta_k|^2 */
    /* data parallelism (section 4b) */
    int64_t ex_lo, ex_hi;        /* this rank's examples of the step in flight */
    float *gather_send;          /* local losses + status + shape word: copies * B + 2 */
    float *gathered;             /* receive (copies * B + 2 n_ranks), then the pass in global order (copies * B) */
    int64_t *gather_counts;      /* n_ranks */
    int touched_dirty;           /* the row maps' last clearing failed: the next step clears them first */
    /* an update that failed part-way (section 4): grzo_step_end resumes it at block
       update_block, FZOO probe update_probe, with the report formed before it began */
    int updating;
    uint32_t update_block;
    int32_t update_probe;
    grzo_step_report update_report;
    char err[256];
};

static void *grzo__alloc(const grzo_ctx *ctx, size_t bytes) {
    const grzo_allocator *a = &ctx->desc.allocator;
    if (bytes == 0) bytes = 1;
    return a->alloc_fn ? a->alloc_fn(bytes, a->user_data) : malloc(bytes);
}
static void grzo__free(const grzo_ctx *ctx, void *p) {
    const grzo_allocator *a = &ctx->desc.allocator;
    if (!p) return;
    if (a->free_fn) a->free_fn(p, a->user_data); else free(p);
}

static grzo_status grzo__fail(grzo_ctx *ctx, grzo_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->err, sizeof ctx->err, fmt, ap);
    va_end(ap);
    if (ctx->desc.logger.func) ctx->desc.logger.func(GRZO_LOG_ERROR, s, ctx->err, ctx->desc.logger.user_data);
    return s;
}

static grzo_status grzo__backend_fail(grzo_ctx *ctx, grzo_status s, const char *what) {
    const grzo_backend *be = ctx->desc.backend;
    const char *detail = be->iface->last_error ? be->iface->last_error(be->self) : NULL;
    return grzo__fail(ctx, s, "%s: backend '%s' failed: %s (%s)", what, be->iface->name,
                      grzo_status_str(s), detail && detail[0] ? detail : "no detail");
}

GRZO__DEF const char *grzo_last_error(const grzo_ctx *ctx) { return ctx ? ctx->err : "no context"; }

GRZO__DEF grzo_desc grzo_desc_resolve(const grzo_desc *desc) {
    grzo_desc d;
    if (desc) d = *desc; else memset(&d, 0, sizeof d);
    if (d.estimator == GRZO_ESTIMATOR_DEFAULT) d.estimator = GRZO_ESTIMATOR_GRZO;
    if (d.noise == GRZO_NOISE_DEFAULT) d.noise = GRZO_NOISE_RADEMACHER;
    if (d.schedule == GRZO_SCHEDULE_DEFAULT) d.schedule = GRZO_SCHEDULE_CONSTANT;
    if (d.lr == 0.0f) d.lr = 1e-6f;
    if (d.sigma == 0.0f) d.sigma = 1e-3f;
    if (d.norm_eps == 0.0f) d.norm_eps = 1e-8f;
    if (d.fzoo_probes == 0) d.fzoo_probes = 8;
    if (d.per_example_ops == 0) d.per_example_ops = d.comm ? 1 : -1;
    if (d.replica_check_every == 0) d.replica_check_every = 100;
    if (d.lowrank_rank > 0 && d.lowrank_every == 0) d.lowrank_every = GRZO_LOWRANK_EVERY_DEFAULT;
    return d;
}

static int grzo__finite_nonneg(float x) { return isfinite(x) && x >= 0.0f; }

static int grzo__variants_on(const grzo_desc *d) {
    return d->sparse_density > 0.0f || d->lowrank_rank > 0 || d->quant_bits > 0;
}

/* The variant axes and their combinations (section 3c). */
static grzo_status grzo__validate_variants(const grzo_desc *d, char *msg, size_t cap) {
#define GRZO__BAD(...) do { snprintf(msg, cap, __VA_ARGS__); return GRZO_ERR_INVALID_ARG; } while (0)
    if (!(isfinite(d->sparse_density) && d->sparse_density >= 0.0f && d->sparse_density <= 1.0f))
        GRZO__BAD("sparse_density must be in (0, 1], or 0 for off (got %g)", (double)d->sparse_density);
    if (d->lowrank_rank < 0 || d->lowrank_rank > GRZO_LOWRANK_MAX_RANK)
        GRZO__BAD("lowrank_rank must be in [1, %d], or 0 for off (got %d)", GRZO_LOWRANK_MAX_RANK, (int)d->lowrank_rank);
    if (d->lowrank_every < 0) GRZO__BAD("lowrank_every must be >= 1, or 0 for the default (got %d)", (int)d->lowrank_every);
    if (d->lowrank_rank == 0 && d->lowrank_every != 0) GRZO__BAD("lowrank_every is set but lowrank_rank is 0 (low-rank is off)");
    if (d->quant_bits != 0 && d->quant_bits != 8 && d->quant_bits != 4) GRZO__BAD("quant_bits must be 8 or 4, or 0 for off (got %d)", (int)d->quant_bits);
    if (!grzo__variants_on(d)) return GRZO_OK;
    if (d->estimator == GRZO_ESTIMATOR_MEZO_INPLACE)
        GRZO__BAD("the sparse, low-rank and quantized variants perturb through the operations; in-place MeZO writes the "
                  "perturbation into the parameters (use the MEZO estimator)");
    if (d->sparse_density > 0.0f && d->estimator == GRZO_ESTIMATOR_FZOO)
        GRZO__BAD("sparse does not combine with FZOO: its N probe directions are N updates in a row, and the mask of a later "
                  "one would read weights the earlier ones moved (the mask must come from the step's unperturbed weights)");
    if (d->sparse_density > 0.0f && d->lowrank_rank > 0)
        GRZO__BAD("sparse and low-rank do not combine: a magnitude mask on U V^T is no longer low-rank (the thin GEMMs "
                  "of the perturbed linear need the factored form)");
    if (d->lowrank_rank > 0 && d->quant_bits > 0)
        GRZO__BAD("low-rank and quantized do not combine: quantizing U V^T element-wise would materialize it");
    return GRZO_OK;
#undef GRZO__BAD
}

/* A backend must say that it implements each variant axis in use (grzo_backend_caps.variants). */
static grzo_status grzo__check_variant_caps(const grzo_desc *d, const grzo_backend_caps *caps, const char *backend,
                                            char *msg, size_t cap) {
    static const struct { uint32_t bit; const char *name; } axes[] = {
        {GRZO_VARIANT_SPARSE, "sparse"}, {GRZO_VARIANT_LOWRANK, "low-rank"}, {GRZO_VARIANT_QUANT, "quantized"}};
    uint32_t want = (d->sparse_density > 0.0f ? GRZO_VARIANT_SPARSE : 0u) | (d->lowrank_rank > 0 ? GRZO_VARIANT_LOWRANK : 0u) |
                    (d->quant_bits > 0 ? GRZO_VARIANT_QUANT : 0u);
    size_t i;
    for (i = 0; i < sizeof axes / sizeof axes[0]; i++)
        if ((want & axes[i].bit) && !(caps->variants & axes[i].bit)) {
            snprintf(msg, cap, "backend '%s' does not implement the %s variant (grzo_backend_caps.variants)", backend, axes[i].name);
            return GRZO_ERR_UNSUPPORTED;
        }
    return GRZO_OK;
}

static grzo_status grzo__validate_desc(const grzo_desc *d, char *msg, size_t cap) {
#define GRZO__BAD(...) do { snprintf(msg, cap, __VA_ARGS__); return GRZO_ERR_INVALID_ARG; } while (0)
    if (!d->backend || !d->backend->iface) GRZO__BAD("desc.backend is required (e.g. grzo_backend_cpu_create)");
    if (d->backend->iface->api_version != GRZO_BACKEND_API_VERSION) {
        snprintf(msg, cap, "backend API version %u, grzo expects %u",
                 (unsigned)d->backend->iface->api_version, (unsigned)GRZO_BACKEND_API_VERSION);
        return GRZO_ERR_VERSION;
    }
    if (grzo__backend_missing(d->backend->iface))
        GRZO__BAD("desc.backend: its interface has no '%s' entry (only synchronize and last_error are optional)",
                  grzo__backend_missing(d->backend->iface));
    if (d->estimator <= GRZO_ESTIMATOR_DEFAULT || d->estimator >= GRZO_ESTIMATOR_COUNT) GRZO__BAD("unknown estimator %d", (int)d->estimator);
    if (d->noise <= GRZO_NOISE_DEFAULT || d->noise >= GRZO_NOISE_COUNT) GRZO__BAD("unknown noise distribution %d", (int)d->noise);
    if (d->schedule <= GRZO_SCHEDULE_DEFAULT || d->schedule >= GRZO_SCHEDULE_COUNT) GRZO__BAD("unknown schedule %d", (int)d->schedule);
    if (!(isfinite(d->lr) && d->lr > 0.0f)) GRZO__BAD("lr must be finite and > 0 (got %g)", (double)d->lr);
    if (!(isfinite(d->sigma) && d->sigma > 0.0f)) GRZO__BAD("sigma must be finite and > 0 (got %g)", (double)d->sigma);
    if (d->sigma > FLT_MAX / 4.0f)   /* in-place MeZO moves theta by -2 sigma z: that must stay finite */
        GRZO__BAD("sigma must be at most FLT_MAX / 4 (got %g)", (double)d->sigma);
    if (!grzo__finite_nonneg(d->norm_eps)) GRZO__BAD("norm_eps must be finite and >= 0");
    if (!grzo__finite_nonneg(d->weight_decay)) GRZO__BAD("weight_decay must be finite and >= 0");
    if (d->warmup_steps < 0) GRZO__BAD("warmup_steps must be >= 0");
    if (d->fzoo_probes < 1 || d->fzoo_probes > GRZO__MAX_FZOO_PROBES) GRZO__BAD("fzoo_probes must be in [1, %d]", GRZO__MAX_FZOO_PROBES);
    if ((d->allocator.alloc_fn == NULL) != (d->allocator.free_fn == NULL)) GRZO__BAD("allocator: set both alloc_fn and free_fn, or neither");
    if (d->per_example_ops != 1 && d->per_example_ops != -1) GRZO__BAD("per_example_ops must be 1, -1 or 0 (default)");
    if (d->replica_check_every < -1) GRZO__BAD("replica_check_every must be >= 1, -1 (never) or 0 (default)");
    if (d->comm) {
        const grzo_comm *c = d->comm;
        if (!c->iface || !c->iface->allgather_f32 || !c->iface->allreduce_max_u64)
            GRZO__BAD("desc.comm: iface with allgather_f32 and allreduce_max_u64 is required");
        if (c->iface->api_version != GRZO_COMM_API_VERSION) {
            snprintf(msg, cap, "comm API version %u, grzo expects %u", (unsigned)c->iface->api_version, (unsigned)GRZO_COMM_API_VERSION);
            return GRZO_ERR_VERSION;
        }
        if (c->n_ranks < 1 || c->rank < 0 || c->rank >= c->n_ranks)
            GRZO__BAD("desc.comm: rank %d of %d ranks is out of range", (int)c->rank, (int)c->n_ranks);
    }
    return grzo__validate_variants(d, msg, cap);
#undef GRZO__BAD
}

GRZO__DEF grzo_status grzo_create(const grzo_desc *desc, grzo_ctx **out) {
    grzo_desc d;
    grzo_ctx *ctx;
    grzo_status s;
    char msg[256];
    if (!out) return GRZO_ERR_INVALID_ARG;
    *out = NULL;
    if (!desc) return GRZO_ERR_INVALID_ARG;
    d = grzo_desc_resolve(desc);
    s = grzo__validate_desc(&d, msg, sizeof msg);
    if (s != GRZO_OK) {
        if (d.logger.func) d.logger.func(GRZO_LOG_ERROR, s, msg, d.logger.user_data);
        return s;
    }
    ctx = (grzo_ctx *)(d.allocator.alloc_fn ? d.allocator.alloc_fn(sizeof *ctx, d.allocator.user_data)
                                            : malloc(sizeof *ctx));
    if (!ctx) return GRZO_ERR_OUT_OF_MEMORY;
    memset(ctx, 0, sizeof *ctx);
    ctx->desc = d;
    s = grzo_backend_query(d.backend, &ctx->caps);
    if (s == GRZO_OK) s = grzo__check_variant_caps(&d, &ctx->caps, d.backend->iface->name, msg, sizeof msg);
    if (s != GRZO_OK) {
        if (d.logger.func && s == GRZO_ERR_UNSUPPORTED) d.logger.func(GRZO_LOG_ERROR, s, msg, d.logger.user_data);
        grzo__free(ctx, ctx);
        return s;
    }
    if (d.comm) {
        ctx->gather_counts = (int64_t *)grzo__alloc(ctx, (size_t)d.comm->n_ranks * sizeof(int64_t));
        if (!ctx->gather_counts) { grzo__free(ctx, ctx); return GRZO_ERR_OUT_OF_MEMORY; }
    }
    *out = ctx;
    return GRZO_OK;
}

static void grzo__free_step_buffers(grzo_ctx *ctx) {
    grzo__free(ctx, ctx->losses);
    grzo__free(ctx, ctx->seg_example);
    grzo__free(ctx, ctx->seg_sign);
    grzo__free(ctx, ctx->scratch_losses);
    grzo__free(ctx, ctx->coeff);
    grzo__free(ctx, ctx->even_offsets);
    grzo__free(ctx, ctx->gather_send);
    grzo__free(ctx, ctx->gathered);
    ctx->gather_send = ctx->gathered = NULL;
    ctx->losses = ctx->scratch_losses = ctx->coeff = NULL;
    ctx->seg_example = ctx->even_offsets = NULL;
    ctx->seg_sign = NULL;
    ctx->cap_segs = ctx->cap_losses = ctx->cap_coeff = 0;
}

static grzo_status grzo__inplace_restore(grzo_ctx *ctx);

static void grzo__align_free(grzo_ctx *ctx) {
    grzo__free(ctx, ctx->align_gram);
    grzo__free(ctx, ctx->align_ab);
    ctx->align_gram = ctx->align_ab = NULL;
    ctx->align = 0;
}

GRZO__DEF void grzo_destroy(grzo_ctx *ctx) {
    uint32_t i;
    if (!ctx) return;
    grzo__inplace_restore(ctx);   /* destroyed mid-step: leave the parameters as they were */
    for (i = 0; i < ctx->n_blocks; i++) grzo_backend_free(ctx->desc.backend, ctx->blocks[i].touched);
    grzo__align_free(ctx);
    grzo__free(ctx, ctx->blocks);
    grzo__free_step_buffers(ctx);
    grzo__free(ctx, ctx->gather_counts);
    grzo__free(ctx, ctx);
}

GRZO__DEF grzo_status grzo_get_desc(const grzo_ctx *ctx, grzo_desc *out) {
    if (!ctx || !out) return GRZO_ERR_INVALID_ARG;
    *out = ctx->desc;
    return GRZO_OK;
}
GRZO__DEF int64_t grzo_get_step(const grzo_ctx *ctx) { return ctx ? ctx->step : -1; }

GRZO__DEF float grzo_lr_at(const grzo_ctx *ctx, int64_t step) {
    const grzo_desc *d;
    if (!ctx || step < 0) return 0.0f;
    d = &ctx->desc;
    if (d->warmup_steps > 0 && step < d->warmup_steps)
        return (float)((double)d->lr * (double)(step + 1) / (double)d->warmup_steps);
    return d->lr;
}

/* ---- blocks ---------------------------------------------------------------------------------- */
GRZO__DEF grzo_status grzo_block_add(grzo_ctx *ctx, const grzo_block_desc *desc, grzo_block *out) {
    grzo__block blk;
    grzo_status s;
    if (out) out->id = 0;
    if (!ctx) return GRZO_ERR_INVALID_ARG;
    if (!desc || !out) return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "grzo_block_add: desc and out are required");
    if (ctx->state != GRZO__IDLE) return grzo__fail(ctx, GRZO_ERR_STATE, "grzo_block_add: not allowed during a step");
    memset(&blk, 0, sizeof blk);
    blk.p.kind = desc->kind;
    blk.p.dtype = desc->dtype == GRZO_DTYPE_DEFAULT ? GRZO_DTYPE_F32 : desc->dtype;
    blk.p.rows = desc->rows;
    blk.p.cols = desc->kind == GRZO_BLOCK_VECTOR && desc->cols == 0 ? 1 : desc->cols;
    blk.p.data = desc->data;
    blk.no_decay = desc->no_decay != 0;
    if (desc->kind <= GRZO_BLOCK_INVALID || desc->kind >= GRZO_BLOCK_KIND_COUNT)
        return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "grzo_block_add: unknown block kind %d", (int)desc->kind);
    if (desc->kind == GRZO_BLOCK_VECTOR && blk.p.cols != 1)
        return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "grzo_block_add: a vector block has cols 0 or 1 (got %lld)", (long long)desc->cols);
    if (grzo__param_elems(&blk.p) < 0)
        return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "grzo_block_add: bad shape %lld x %lld", (long long)desc->rows, (long long)desc->cols);
    if (!desc->data) return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "grzo_block_add: data is NULL");
    if (blk.p.dtype <= GRZO_DTYPE_DEFAULT || blk.p.dtype >= GRZO_DTYPE_COUNT)
        return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "grzo_block_add: unknown dtype %d", (int)desc->dtype);
    if (!(ctx->caps.dtypes & (1u << blk.p.dtype)))
        return grzo__fail(ctx, GRZO_ERR_UNSUPPORTED, "grzo_block_add: backend '%s' does not store dtype %d",
                          ctx->desc.backend->iface->name, (int)blk.p.dtype);
    if (desc->name) {
        if (strlen(desc->name) >= GRZO__NAME_MAX)
            return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "grzo_block_add: name longer than %d bytes", GRZO__NAME_MAX - 1);
        strcpy(blk.name, desc->name);
    }
    if (ctx->n_blocks >= 0x7FFFFFFFu) return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "grzo_block_add: too many blocks");
    if (ctx->n_blocks == ctx->cap_blocks) {
        uint32_t cap = ctx->cap_blocks ? 2 * ctx->cap_blocks : 16;
        grzo__block *nb = (grzo__block *)grzo__alloc(ctx, cap * sizeof *nb);
        if (!nb) return grzo__fail(ctx, GRZO_ERR_OUT_OF_MEMORY, "grzo_block_add: out of memory");
        if (ctx->n_blocks) memcpy(nb, ctx->blocks, ctx->n_blocks * sizeof *nb);
        grzo__free(ctx, ctx->blocks);
        ctx->blocks = nb;
        ctx->cap_blocks = cap;
    }
    if (blk.p.kind == GRZO_BLOCK_EMBEDDING) {
        s = grzo_backend_alloc(ctx->desc.backend, (size_t)blk.p.rows, (void **)&blk.touched);
        if (s != GRZO_OK) return grzo__backend_fail(ctx, s, "grzo_block_add: row-touch map");
    }
    ctx->blocks[ctx->n_blocks++] = blk;
    out->id = ctx->n_blocks;
    return GRZO_OK;
}

static grzo__block *grzo__get_block(grzo_ctx *ctx, grzo_block b) {
    return (b.id >= 1 && b.id <= ctx->n_blocks) ? &ctx->blocks[b.id - 1] : NULL;
}

GRZO__DEF grzo_status grzo_block_param(const grzo_ctx *ctx, grzo_block b, grzo_param *out) {
    if (!ctx || !out || b.id < 1 || b.id > ctx->n_blocks) return GRZO_ERR_INVALID_ARG;
    *out = ctx->blocks[b.id - 1].p;
    return GRZO_OK;
}

/* ---- the step: passes and segments ---------------------------------------------------------------- */
static int grzo__is_grzo_family(grzo_estimator e) {
    return e == GRZO_ESTIMATOR_GRZO || e == GRZO_ESTIMATOR_CANONICAL || e == GRZO_ESTIMATOR_SHARED;
}
static int grzo__is_mezo(grzo_estimator e) {
    return e == GRZO_ESTIMATOR_MEZO || e == GRZO_ESTIMATOR_MEZO_INPLACE;
}
/* alignment probes are SHARED passes through the operations, whatever the estimator */
static int grzo__inplace(const grzo_ctx *ctx) { return !ctx->align && ctx->desc.estimator == GRZO_ESTIMATOR_MEZO_INPLACE; }
static int grzo__flipout(const grzo_ctx *ctx) {
    return !ctx->align && (ctx->desc.estimator == GRZO_ESTIMATOR_GRZO || ctx->desc.estimator == GRZO_ESTIMATOR_CANONICAL);
}

static void grzo__plan(const grzo_desc *d, int32_t *n_passes, int32_t *copies) {
    if (grzo__is_grzo_family(d->estimator)) { *n_passes = 1; *copies = 2; }
    else if (grzo__is_mezo(d->estimator)) { *n_passes = 2; *copies = 1; }
    else { *n_passes = d->fzoo_probes + 1; *copies = 1; }
}

/* Section 4b: rank r's examples [lo, hi) of a step of B; the whole batch without desc.comm. */
static void grzo__share(const grzo_ctx *ctx, int32_t rank, int64_t *lo, int64_t *hi) {
    int64_t R = ctx->desc.comm ? ctx->desc.comm->n_ranks : 1;
    *lo = (int64_t)rank * ctx->B / R;
    *hi = ((int64_t)rank + 1) * ctx->B / R;
}
static void grzo__set_share(grzo_ctx *ctx) {
    grzo__share(ctx, ctx->desc.comm ? ctx->desc.comm->rank : 0, &ctx->ex_lo, &ctx->ex_hi);
}
/* segments of the current pass on this rank: every copy of its examples */
static int64_t grzo__local_segments(const grzo_ctx *ctx) { return (int64_t)ctx->copies * (ctx->ex_hi - ctx->ex_lo); }
/* local segment c is copy c / nb of example ex_lo + c % nb: its index in the single-process layout */
static int64_t grzo__global_segment(const grzo_ctx *ctx, int64_t c) {
    int64_t nb = ctx->ex_hi - ctx->ex_lo;
    return (c / nb) * ctx->B + ctx->ex_lo + c % nb;
}

/* Which example each (local) segment of the pass reads, and with which sign. */
static void grzo__pass_layout(grzo_ctx *ctx) {
    int64_t c, n = grzo__local_segments(ctx);
    for (c = 0; c < n; c++) {
        int64_t g = grzo__global_segment(ctx, c);
        ctx->seg_example[c] = g % ctx->B;
        if (ctx->align || grzo__is_grzo_family(ctx->desc.estimator)) ctx->seg_sign[c] = g < ctx->B ? 1 : -1;
        else if (grzo__is_mezo(ctx->desc.estimator)) ctx->seg_sign[c] = ctx->pass == 0 ? 1 : -1;
        else ctx->seg_sign[c] = ctx->pass == 0 ? 0 : 1;           /* FZOO: clean, then probes */
    }
}

/* U of a block for the current step; FZOO probe j uses stream 16 + j, alignment probe k
   stream GRZO_STREAM_ALIGN0 + k. */
static grzo_noise grzo__base_noise(const grzo_ctx *ctx, uint32_t block_index, int32_t pass) {
    grzo_noise n;
    n.seed = ctx->desc.seed;
    n.step = (uint32_t)ctx->step;
    n.block = block_index;
    n.stream = GRZO_STREAM_BASE;
    if (ctx->desc.estimator == GRZO_ESTIMATOR_FZOO && pass > 0) n.stream = GRZO_STREAM_FZOO0 + (uint32_t)(pass - 1);
    if (ctx->align) n.stream = GRZO_STREAM_ALIGN0 + (uint32_t)pass;
    n.dist = (uint32_t)ctx->desc.noise;
    return n;
}

/* The step buffers are sized from the settings (estimator, FZOO probes) as well as B, and a
   checkpoint load may replace the settings between steps: compare every size, never B alone. */
static grzo_status grzo__ensure_buffers(grzo_ctx *ctx, int64_t segs, int64_t n_losses, int64_t n_coeff);
static grzo_status grzo__ensure_step_buffers(grzo_ctx *ctx, int64_t B) {
    int32_t n_passes, copies;
    int64_t segs;
    grzo__plan(&ctx->desc, &n_passes, &copies);
    segs = (int64_t)copies * B;
    /* one coefficient per example (GRZO family), per probe pass (FZOO) or one (MeZO) */
    return grzo__ensure_buffers(ctx, segs, (int64_t)n_passes * segs, segs > n_passes ? segs : n_passes);
}

static grzo_status grzo__ensure_buffers(grzo_ctx *ctx, int64_t segs, int64_t n_losses, int64_t n_coeff) {
    if (segs <= ctx->cap_segs && n_losses <= ctx->cap_losses && n_coeff <= ctx->cap_coeff) return GRZO_OK;
    /* grow only, so that alternating settings do not reallocate every step */
    if (segs < ctx->cap_segs) segs = ctx->cap_segs;
    if (n_losses < ctx->cap_losses) n_losses = ctx->cap_losses;
    if (n_coeff < ctx->cap_coeff) n_coeff = ctx->cap_coeff;
    grzo__free_step_buffers(ctx);
    ctx->losses = (float *)grzo__alloc(ctx, (size_t)n_losses * sizeof(float));
    ctx->seg_example = (int64_t *)grzo__alloc(ctx, (size_t)segs * sizeof(int64_t));
    ctx->seg_sign = (int8_t *)grzo__alloc(ctx, (size_t)segs);
    ctx->scratch_losses = (float *)grzo__alloc(ctx, (size_t)segs * sizeof(float));
    ctx->coeff = (float *)grzo__alloc(ctx, (size_t)n_coeff * sizeof(float));
    ctx->even_offsets = (int64_t *)grzo__alloc(ctx, (size_t)(segs + 1) * sizeof(int64_t));
    if (ctx->desc.comm) {
        ctx->gather_send = (float *)grzo__alloc(ctx, (size_t)(segs + 2) * sizeof(float));
        ctx->gathered = (float *)grzo__alloc(ctx, (size_t)(2 * segs + 2 * (int64_t)ctx->desc.comm->n_ranks) * sizeof(float));
    }
    if (!ctx->losses || !ctx->seg_example || !ctx->seg_sign || !ctx->scratch_losses || !ctx->coeff || !ctx->even_offsets ||
        (ctx->desc.comm && (!ctx->gather_send || !ctx->gathered))) {
        grzo__free_step_buffers(ctx);
        return GRZO_ERR_OUT_OF_MEMORY;
    }
    ctx->cap_segs = segs;
    ctx->cap_losses = n_losses;
    ctx->cap_coeff = n_coeff;
    return GRZO_OK;
}

/* In-place MeZO: move every block, every row, to theta + target sigma z, z the step's U
   regenerated from the seed, through the backend's update entry (theta -= coeff U with
   coeff = -(target - shift) sigma, exact since a move is +-1 or -2). round_stream keeps the
   16-bit rounding bits of the three moves of a step independent. Each block records its
   shift as soon as it has moved, so a move that fails part-way leaves an exact record: the
   restore then moves back the blocks that moved, and only those. */
static grzo_status grzo__inplace_move(grzo_ctx *ctx, int32_t target, uint32_t round_stream) {
    const grzo_backend *be = ctx->desc.backend;
    uint32_t i;
    for (i = 0; i < ctx->n_blocks; i++) {
        grzo__block *b = &ctx->blocks[i];
        grzo_update_args u;
        grzo_status s;
        float coeff = -(float)(target - b->shift) * ctx->desc.sigma;
        if (b->shift == target) continue;
        memset(&u, 0, sizeof u);
        u.p = b->p;
        u.base = grzo__base_noise(ctx, i, 0);
        u.n_examples = 1;
        u.coeff = &coeff;
        u.round_stream = round_stream;
        s = be->iface->update(be->self, &u);
        if (s != GRZO_OK) return s;
        b->shift = target;
    }
    return GRZO_OK;
}

/* What a failed restore says: the parameters' state and what restores them. */
#define GRZO__STILL_SHIFTED "parameters still perturbed, on record: grzo_step_abort, grzo_step_begin, grzo_checkpoint_save " \
    "and plain operations restore them first"

/* Write theta back (in-place MeZO): every block still shifted moves back. A block that
   fails to stays on record (grzo__settle tries again). */
static grzo_status grzo__inplace_restore(grzo_ctx *ctx) {
    return grzo__inplace_move(ctx, 0, GRZO_STREAM_ROUND_INPLACE + 2u);
}

/* Whether a block is still shifted. Only an in-place context shifts (a checkpoint that
   changes the estimator resets the record), so every other context, on every plain op,
   answers without looking at its blocks. */
static int grzo__inplace_pending(const grzo_ctx *ctx) {
    uint32_t i;
    if (ctx->desc.estimator != GRZO_ESTIMATOR_MEZO_INPLACE) return 0;
    for (i = 0; i < ctx->n_blocks; i++)
        if (ctx->blocks[i].shift != 0) return 1;
    return 0;
}

/* Before anything that reads the parameters outside a step (a step, the diagnostic, a
   checkpoint, a plain operation): restore the in-place shifts a failed restore left. */
static grzo_status grzo__settle(grzo_ctx *ctx, const char *who) {
    char what[192];
    grzo_status s;
    if (ctx->state != GRZO__IDLE || !grzo__inplace_pending(ctx)) return GRZO_OK;
    s = grzo__inplace_restore(ctx);
    if (s == GRZO_OK) return GRZO_OK;
    snprintf(what, sizeof what, "%s: restoring in-place MeZO's parameters, which a failure left perturbed "
             "(still perturbed; nothing else done)", who);
    return grzo__backend_fail(ctx, s, what);
}

/* k-th smallest of a[0..n) (0-based), reordering a: Hoare quickselect, no NaN in a */
static float grzo__kth_smallest(float *a, int64_t n, int64_t k) {
    int64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        float x = a[lo], y = a[lo + (hi - lo) / 2], z = a[hi], pivot, t;
        int64_t i = lo, j = hi;
        pivot = x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y));   /* median of three */
        while (i <= j) {
            while (a[i] < pivot) i++;
            while (a[j] > pivot) j--;
            if (i <= j) { t = a[i]; a[i] = a[j]; a[j] = t; i++; j--; }
        }
        if (k <= j) hi = j;
        else if (k >= i) lo = i;
        else return a[k];
    }
    return a[k];
}

/* |x| of one stored element (16-bit blocks widened exactly); NaN reads as +inf */
static float grzo__stored_abs(const uint8_t *p, grzo_dtype t) {
    uint16_t h;
    float v;
    if (t == GRZO_DTYPE_F32) { memcpy(&v, p, 4); return isnan(v) ? INFINITY : fabsf(v); }
    memcpy(&h, p, 2);   /* backend memory holds native byte order */
    if (t == GRZO_DTYPE_BF16) {
        uint32_t b = (uint32_t)(h & 0x7FFFu) << 16;
        memcpy(&v, &b, 4);
        return isnan(v) ? INFINITY : v;
    }
    {   /* IEEE half: 5 exponent bits, 10 mantissa bits */
        int e = (h >> 10) & 0x1F, m = h & 0x3FF;
        if (e == 31) return INFINITY;
        return e == 0 ? ldexpf((float)m, -24) : ldexpf((float)(m | 0x400), e - 25);
    }
}

/* Sparse variant: h_b = the ceil(density n)-th smallest |theta| of each block that has none yet
   (at its first step), so that a fraction >= density of the block is perturbed then. The
   block is read once into a transient host copy (quickselect needs it whole; 16-bit blocks
   are widened). */
static grzo_status grzo__sparse_thresholds(grzo_ctx *ctx) {
    uint32_t i;
    for (i = 0; i < ctx->n_blocks; i++) {
        grzo__block *b = &ctx->blocks[i];
        int64_t n = b->p.rows * b->p.cols, k, q;
        double t;
        float *a;
        grzo_status s;
        if (b->sparse_ready) continue;
        a = (float *)grzo__alloc(ctx, (size_t)n * sizeof(float));
        if (!a) return grzo__fail(ctx, GRZO_ERR_OUT_OF_MEMORY, "sparse variant: out of memory for block %u's threshold", (unsigned)i);
        /* the stored bytes land in the buffer's first n * size bytes; widened from the back */
        s = grzo_backend_download(ctx->desc.backend, a, b->p.data, (size_t)n * grzo__dtype_size(b->p.dtype));
        if (s != GRZO_OK) { grzo__free(ctx, a); return grzo__backend_fail(ctx, s, "sparse variant: reading a block for its threshold"); }
        for (q = n - 1; q >= 0; q--) a[q] = grzo__stored_abs((const uint8_t *)a + (size_t)q * grzo__dtype_size(b->p.dtype), b->p.dtype);
        t = (double)ctx->desc.sparse_density * (double)n;
        k = (int64_t)ceil(t - t * (1.0 / 8388608.0)) - 1;   /* density at float precision: 0.4f of 30 is 12 */
        if (k < 0) k = 0;
        if (k > n - 1) k = n - 1;
        b->sparse_h = grzo__kth_smallest(a, n, k);
        b->sparse_ready = 1;
        grzo__free(ctx, a);
    }
    return GRZO_OK;
}

static grzo_status grzo__clear_stale_touched(grzo_ctx *ctx, const char *who);

GRZO__DEF grzo_status grzo_step_begin(grzo_ctx *ctx, int64_t n_examples, grzo_step_info *out) {
    if (!ctx) return GRZO_ERR_INVALID_ARG;
    if (ctx->state != GRZO__IDLE)
        return grzo__fail(ctx, GRZO_ERR_STATE, "grzo_step_begin: a step is already in flight (%s)",
                          ctx->updating ? "its update failed part-way: grzo_step_end finishes it" : "end or abort it");
    if (n_examples < 1 || n_examples > ((int64_t)1 << 30))
        return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "grzo_step_begin: n_examples must be in [1, 2^30] (got %lld)", (long long)n_examples);
    if (ctx->step >= (int64_t)UINT32_MAX)
        return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "grzo_step_begin: the RNG step counter is exhausted (2^32 steps)");
    {
        grzo_status s = grzo__settle(ctx, "grzo_step_begin");
        if (s != GRZO_OK) return s;
    }
    if (grzo__ensure_step_buffers(ctx, n_examples) != GRZO_OK)
        return grzo__fail(ctx, GRZO_ERR_OUT_OF_MEMORY, "grzo_step_begin: out of memory");
    if (grzo__clear_stale_touched(ctx, "grzo_step_begin: clearing the row maps the last step left") != GRZO_OK) return GRZO_ERR_BACKEND;
    if (ctx->desc.sparse_density > 0.0f) {
        grzo_status s = grzo__sparse_thresholds(ctx);
        if (s != GRZO_OK) return s;
    }
    ctx->B = n_examples;
    grzo__set_share(ctx);
    grzo__plan(&ctx->desc, &ctx->n_passes, &ctx->copies);
    ctx->pass = 0;
    ctx->state = GRZO__IN_STEP;
    if (out) {
        out->step = ctx->step;
        out->n_examples = n_examples;
        out->n_passes = ctx->n_passes;
        out->copies_per_pass = ctx->copies;
        out->lr = grzo_lr_at(ctx, ctx->step);
        out->example_begin = ctx->ex_lo;
        out->example_end = ctx->ex_hi;
    }
    return GRZO_OK;
}

static grzo_status grzo__abort_pass(grzo_ctx *ctx, grzo_status why);

GRZO__DEF grzo_status grzo_pass_begin(grzo_ctx *ctx, grzo_pass_info *out) {
    if (!ctx) return GRZO_ERR_INVALID_ARG;
    if (out) memset(out, 0, sizeof *out);
    if (ctx->state != GRZO__IN_STEP || ctx->pass >= ctx->n_passes)
        return grzo__fail(ctx, GRZO_ERR_STATE, "grzo_pass_begin: no pass is due (call grzo_step_begin, or grzo_step_end after the last pass)");
    if (grzo__inplace(ctx)) {   /* pass 0: theta + sigma z; pass 1: theta - sigma z */
        grzo_status s = grzo__inplace_move(ctx, ctx->pass == 0 ? 1 : -1, GRZO_STREAM_ROUND_INPLACE + (uint32_t)ctx->pass);
        if (s != GRZO_OK) {
            grzo_status r;
            grzo__pass_layout(ctx);
            ctx->state = GRZO__IN_PASS;     /* the other ranks expect this pass's gather */
            r = grzo__abort_pass(ctx, s);   /* moves back the blocks that moved */
            return grzo__backend_fail(ctx, s, r == GRZO_OK ? "grzo_pass_begin: in-place perturbation (step abandoned, parameters restored)"
                                                           : "grzo_pass_begin: in-place perturbation (step abandoned; " GRZO__STILL_SHIFTED ")");
        }
    }
    grzo__pass_layout(ctx);
    ctx->state = GRZO__IN_PASS;
    if (out) {
        out->index = ctx->pass;
        out->n_copies = ctx->copies;
        out->n_segments = grzo__local_segments(ctx);
        out->example = ctx->seg_example;
        out->sign = ctx->seg_sign;
    }
    return GRZO_OK;
}

/* Zero the row-touch maps: the step is over (applied or abandoned). */
static grzo_status grzo__clear_touched(grzo_ctx *ctx) {
    static const uint8_t zeros[4096] = {0};
    uint32_t i;
    ctx->touched_dirty = 1;
    for (i = 0; i < ctx->n_blocks; i++) {
        grzo__block *b = &ctx->blocks[i];
        int64_t done = 0;
        b->full_touch = 0;
        if (!b->touched) continue;
        while (done < b->p.rows) {
            int64_t n = b->p.rows - done > 4096 ? 4096 : b->p.rows - done;
            grzo_status s = grzo_backend_upload(ctx->desc.backend, b->touched + done, zeros, (size_t)n);
            if (s != GRZO_OK) return s;
            done += n;
        }
    }
    ctx->touched_dirty = 0;
    return GRZO_OK;
}

/* Before a step or diagnostic: rows that the last step's failed clearing left marked would
   otherwise be updated (and decayed) by this one. */
static grzo_status grzo__clear_stale_touched(grzo_ctx *ctx, const char *who) {
    grzo_status s;
    if (!ctx->touched_dirty) return GRZO_OK;
    s = grzo__clear_touched(ctx);
    return s == GRZO_OK ? GRZO_OK : grzo__backend_fail(ctx, s, who);
}

/* Abandon the step (or diagnostic) on this rank. */
static grzo_status grzo__abandon(grzo_ctx *ctx) {
    grzo_status s;
    if (ctx->state == GRZO__IDLE) return grzo__settle(ctx, "grzo_step_abort");
    ctx->state = GRZO__IDLE;
    ctx->updating = 0;   /* an update that failed part-way stays partly applied (section 4) */
    grzo__align_free(ctx);
    s = grzo__inplace_restore(ctx);
    if (s != GRZO_OK) {
        grzo__clear_touched(ctx);
        return grzo__backend_fail(ctx, s, "grzo_step_abort: restoring in-place MeZO's parameters (" GRZO__STILL_SHIFTED ")");
    }
    s = grzo__clear_touched(ctx);
    return s == GRZO_OK ? GRZO_OK : grzo__backend_fail(ctx, s, "grzo_step_abort");
}

/* What every rank's pass must agree on (step, pass, batch, copies, estimator, probe mode),
   folded into 24 bits: an exact float, sent after the status. Ranks that disagree (a caller
   error, or a checkpoint that failed to load on one node) would otherwise size the gather
   differently and read each other's losses at the wrong places. */
static float grzo__shape_word(const grzo_ctx *ctx) {
    uint64_t h = (uint64_t)ctx->step * 0x9E3779B97F4A7C15ull;
    h ^= ((uint64_t)(uint32_t)ctx->pass << 40) ^ ((uint64_t)ctx->B << 8) ^ (uint64_t)(uint32_t)ctx->copies;
    h ^= ((uint64_t)ctx->desc.estimator << 56) ^ ((uint64_t)(ctx->align != 0) << 62);
    h ^= h >> 31;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
    return (float)(uint32_t)(h >> 40);   /* < 2^24 */
}

/* Section 4b: all-gather the pass's local losses with this rank's status and shape word
   appended. Returns GRZO_OK with the pass's losses in single-process order in ctx->gathered
   + cap of the receive part, or the status of the lowest failing rank (*who = that rank), the
   same on every rank; a failed collective returns GRZO_ERR_COMM with *who = -1, ranks whose
   passes differ GRZO_ERR_COMM with *who = -2 - (the lowest such rank) and the message set. */
static grzo_status grzo__exchange(grzo_ctx *ctx, const float *losses, grzo_status local, const float **out, int32_t *who) {
    const grzo_comm *cm = ctx->desc.comm;
    int64_t n = grzo__local_segments(ctx), total = 0, c, lo, hi;
    float *dst, shape = grzo__shape_word(ctx);
    int32_t r;
    grzo_status s;
    for (c = 0; c < n; c++) ctx->gather_send[c] = local == GRZO_OK ? losses[c] : 0.0f;
    ctx->gather_send[n] = (float)local;   /* small negative integers: exact */
    ctx->gather_send[n + 1] = shape;
    for (r = 0; r < cm->n_ranks; r++) {
        grzo__share(ctx, r, &lo, &hi);
        ctx->gather_counts[r] = (int64_t)ctx->copies * (hi - lo) + 2;
        total += ctx->gather_counts[r];
    }
    for (c = 0; c < total; c++) ctx->gathered[c] = NAN;   /* what a shorter send leaves unwritten never matches */
    *who = -1;
    s = cm->iface->allgather_f32(cm->self, ctx->gather_send, ctx->gathered, ctx->gather_counts);
    if (s != GRZO_OK) return GRZO_ERR_COMM;
    dst = ctx->gathered + total;
    for (r = 0, c = 0; r < cm->n_ranks; c += ctx->gather_counts[r], r++) {
        float theirs = ctx->gathered[c + ctx->gather_counts[r] - 1];
        if (theirs != shape) {
            *who = -2 - r;
            return grzo__fail(ctx, GRZO_ERR_COMM, "grzo_pass_end: rank %d's pass differs from rank %d's (step %lld, pass %d, B %lld: the "
                              "ranks must run the same settings from the same checkpoint): step abandoned, no parameter changed",
                              (int)r, (int)cm->rank, (long long)ctx->step, (int)ctx->pass, (long long)ctx->B);
        }
    }
    for (r = 0, c = 0; r < cm->n_ranks; c += ctx->gather_counts[r], r++) {
        float st = ctx->gathered[c + ctx->gather_counts[r] - 2];
        if (st != 0.0f) {
            *who = r;
            return (st >= (float)GRZO_ERR_COMM && st < 0.0f && st == floorf(st)) ? (grzo_status)(int)st : GRZO_ERR_COMM;
        }
    }
    for (r = 0, c = 0; r < cm->n_ranks; c += ctx->gather_counts[r], r++) {
        int64_t k, nb;
        grzo__share(ctx, r, &lo, &hi);
        nb = hi - lo;
        for (k = 0; k + 2 < ctx->gather_counts[r]; k++) {
            float v = ctx->gathered[c + k];
            if (!isfinite(v)) { *who = r; return GRZO_ERR_NONFINITE; }
            dst[(k / nb) * ctx->B + lo + k % nb] = v;
        }
    }
    *out = dst;
    return GRZO_OK;
}

/* The step failed in a pass (status s, agreed by every rank): abandon it and say who failed.
   The failing rank's own message (set before the exchange) stays. */
static grzo_status grzo__pass_failed(grzo_ctx *ctx, grzo_status s, int32_t who) {
    const grzo_comm *cm = ctx->desc.comm;
    int32_t pass = ctx->pass;
    grzo__abandon(ctx);
    if (who <= -2) return s;   /* the ranks' passes differ: grzo__exchange said so */
    if (who < 0) {
        const char *detail = cm->iface->last_error ? cm->iface->last_error(cm->self) : NULL;
        return grzo__fail(ctx, GRZO_ERR_COMM, "grzo_pass_end: the all-gather of pass %d failed (comm '%s': %s): step %lld abandoned "
                          "on this rank; other ranks may not know it: stop the run", (int)pass, cm->iface->name ? cm->iface->name : "?",
                          detail && detail[0] ? detail : "no detail", (long long)ctx->step);
    }
    if (who == cm->rank) return s;
    return grzo__fail(ctx, s, "rank %d failed in pass %d (%s): step %lld abandoned on every rank, no parameter changed",
                      (int)who, (int)pass, grzo_status_str(s), (long long)ctx->step);
}

/* A pass fails on this rank (why): with desc.comm, the other ranks learn it through the pass's
   gather, so every rank abandons the same step; then abandon it here. */
static grzo_status grzo__abort_pass(grzo_ctx *ctx, grzo_status why) {
    if (ctx->desc.comm && ctx->state == GRZO__IN_PASS) {
        const float *unused;
        int32_t who;
        (void)grzo__exchange(ctx, NULL, why, &unused, &who);
    }
    return grzo__abandon(ctx);
}

GRZO__DEF grzo_status grzo_step_abort(grzo_ctx *ctx) {
    if (!ctx) return GRZO_ERR_INVALID_ARG;
    return grzo__abort_pass(ctx, GRZO_ERR_STATE);
}

/* One alignment probe: delta_i = l_i^+ - l_i^-, added to the Gram sum and the ratio's terms. */
static void grzo__align_accumulate(grzo_ctx *ctx, const float *losses) {
    int64_t B = ctx->B, i, j;
    double sum = 0.0, sq = 0.0;
    for (i = 0; i < B; i++) {
        double di = (double)losses[i] - (double)losses[B + i];
        double *row = ctx->align_gram + (size_t)i * (size_t)B;
        for (j = 0; j < B; j++) row[j] += di * ((double)losses[j] - (double)losses[B + j]);
        sum += di;
        sq += di * di;
    }
    ctx->align_ab[2 * ctx->pass] = sum * sum;
    ctx->align_ab[2 * ctx->pass + 1] = sq;
}

/* This rank's verdict on its pass: the backend's pending errors, then the losses. */
static grzo_status grzo__check_pass(grzo_ctx *ctx, const float *losses, int64_t n) {
    int64_t c;
    if (ctx->desc.backend->iface->synchronize) {
        /* the one wait of a pass: an asynchronous backend reports here what failed inside it
           (e.g. a token id out of range), so its operations need not wait one by one */
        const grzo_backend *be = ctx->desc.backend;
        grzo_status s = be->iface->synchronize(be->self);
        if (s != GRZO_OK) return grzo__backend_fail(ctx, s, "grzo_pass_end: an operation of the pass (step abandoned, no update applied)");
    }
    for (c = 0; c < n; c++)
        if (!isfinite(losses[c]))
            return grzo__fail(ctx, GRZO_ERR_NONFINITE, "grzo_pass_end: loss of segment %lld (example %lld) is %g: step %lld abandoned, "
                              "no parameter changed", (long long)c, (long long)ctx->seg_example[c], (double)losses[c], (long long)ctx->step);
    return GRZO_OK;
}

GRZO__DEF grzo_status grzo_pass_end(grzo_ctx *ctx, const float *losses) {
    int64_t n;
    grzo_status s;
    if (!ctx) return GRZO_ERR_INVALID_ARG;
    if (ctx->state != GRZO__IN_PASS) return grzo__fail(ctx, GRZO_ERR_STATE, "grzo_pass_end: no pass in flight");
    n = grzo__local_segments(ctx);
    if (!losses && (n > 0 || !ctx->desc.comm)) {   /* sharded: the other ranks wait for this pass */
        if (!ctx->desc.comm) return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "grzo_pass_end: losses is NULL");
        grzo__abort_pass(ctx, GRZO_ERR_INVALID_ARG);
        return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "grzo_pass_end: losses is NULL (step abandoned on every rank)");
    }
    s = grzo__check_pass(ctx, losses, n);
    if (ctx->desc.comm) {
        int32_t who;
        s = grzo__exchange(ctx, losses, s, &losses, &who);
        if (s != GRZO_OK) return grzo__pass_failed(ctx, s, who);
        n = (int64_t)ctx->copies * ctx->B;
    } else if (s != GRZO_OK) {
        grzo__abandon(ctx);
        return s;
    }
    if (ctx->align) grzo__align_accumulate(ctx, losses);
    else memcpy(ctx->losses + (size_t)ctx->pass * (size_t)n, losses, (size_t)n * sizeof(float));
    ctx->pass++;
    ctx->state = GRZO__IN_STEP;
    return GRZO_OK;
}

/* ---- normalization and the update ---------------------------------------------------------------- */
/* The std = 0 guard: s is replaced by rms(delta) when s <= 1e-6 rms(delta). The sums run on
   x / 2^e, 2^e the power of two just above max |x|: scaling by a power of two is exact, so the
   result is the plain formula's, but squares of inputs near DBL_MAX cannot overflow (nor tiny
   ones underflow). Returns s / 2^e and sets *e. */
static double grzo__scaled_guarded_std(const double *x, int64_t n, int *e, int32_t *degenerate) {
    double big = 0.0, mean = 0.0, var = 0.0, ms = 0.0, s, rms;
    int64_t i;
    for (i = 0; i < n; i++) if (fabs(x[i]) > big) big = fabs(x[i]);
    (void)frexp(big, e);
    for (i = 0; i < n; i++) { double y = ldexp(x[i], -*e); mean += y; ms += y * y; }
    mean /= (double)n;
    ms /= (double)n;
    for (i = 0; i < n; i++) { double y = ldexp(x[i], -*e) - mean; var += y * y; }
    s = sqrt(var / (double)n);
    rms = sqrt(ms);
    *degenerate = 0;
    if (s <= 1e-6 * rms) { s = rms; *degenerate = 1; }
    return s;
}

static double grzo__guarded_std(const double *x, int64_t n, int32_t *degenerate) {
    int e;
    double s = grzo__scaled_guarded_std(x, n, &e, degenerate);
    return ldexp(s, e);
}

GRZO__DEF grzo_status grzo_group_normalize(const double *delta, int64_t n, double eps, double *a,
                                           int32_t *degenerate) {
    int64_t i;
    int32_t deg;
    int e;
    double s;
    if (!delta || !a || n < 1 || !(eps >= 0.0) || !isfinite(eps)) return GRZO_ERR_INVALID_ARG;
    for (i = 0; i < n; i++) if (!isfinite(delta[i])) return GRZO_ERR_NONFINITE;
    /* a_i = delta_i / (s + eps), evaluated on the scale of delta / 2^e (s itself may not fit) */
    s = grzo__scaled_guarded_std(delta, n, &e, &deg) + ldexp(eps, -e);
    for (i = 0; i < n; i++) a[i] = s > 0.0 ? ldexp(delta[i], -e) / s : 0.0;
    if (degenerate) *degenerate = deg;
    return GRZO_OK;
}

/* Per-update coefficients. Returns the number of update directions per block:
   GRZO family -> 1 update with B flipout (or shared) coefficients; MeZO -> 1 with one
   coefficient; FZOO -> N updates (one per probe) with one coefficient each. */
static grzo_status grzo__coefficients(grzo_ctx *ctx, float lr, grzo_step_report *rep) {
    const grzo_desc *d = &ctx->desc;
    int64_t B = ctx->B, i;
    double sum2 = 0.0;
    int64_t n_coeff;
    rep->degenerate = 0;
    if (grzo__is_grzo_family(d->estimator)) {
        double *delta = (double *)grzo__alloc(ctx, (size_t)B * 2 * sizeof(double)), *a;
        double loss = 0.0, scale = (double)lr / (2.0 * (double)d->sigma * (double)B);
        if (!delta) return GRZO_ERR_OUT_OF_MEMORY;
        a = delta + B;   /* after the check: NULL + B is undefined */
        for (i = 0; i < B; i++) {
            delta[i] = (double)ctx->losses[i] - (double)ctx->losses[B + i];
            loss += (double)ctx->losses[i] + (double)ctx->losses[B + i];
        }
        rep->loss = loss / (double)(2 * B);
        /* losses are finite (pass_end checked), so the std is too: one computation serves
           the normalization and the report; canonical keeps a_i = delta_i */
        {
            int32_t deg;
            double sd = grzo__guarded_std(delta, B, &deg), denom = sd + (double)d->norm_eps;
            int canonical = d->estimator == GRZO_ESTIMATOR_CANONICAL;
            rep->delta_std = sd;
            rep->degenerate = canonical ? 0 : deg;
            for (i = 0; i < B; i++)
                a[i] = canonical ? delta[i] : (denom > 0.0 ? delta[i] / denom : 0.0);
        }
        for (i = 0; i < B; i++) ctx->coeff[i] = (float)(scale * a[i]);
        grzo__free(ctx, delta);
        n_coeff = B;
    } else if (grzo__is_mezo(d->estimator)) {
        double lp = 0.0, lm = 0.0, g;
        for (i = 0; i < B; i++) { lp += ctx->losses[i]; lm += ctx->losses[B + i]; }
        lp /= (double)B;
        lm /= (double)B;
        g = (lp - lm) / (2.0 * (double)d->sigma);
        rep->loss = 0.5 * (lp + lm);
        rep->delta_std = fabs(lp - lm);
        ctx->coeff[0] = (float)((double)lr * g);
        n_coeff = 1;
    } else {  /* FZOO: code's form, lr multiplies (l_j - l_0)/(N std) with no 1/sigma */
        int32_t N = d->fzoo_probes, j;
        double *l = (double *)grzo__alloc(ctx, (size_t)(N + 1) * sizeof(double)), s;
        if (!l) return GRZO_ERR_OUT_OF_MEMORY;
        for (j = 0; j <= N; j++) {
            double m = 0.0;
            for (i = 0; i < B; i++) m += ctx->losses[(size_t)j * (size_t)B + (size_t)i];
            l[j] = m / (double)B;
        }
        for (j = 1; j <= N; j++) l[j] -= l[0];    /* std(l_j) = std(l_j - l_0) */
        s = grzo__guarded_std(l + 1, N, &rep->degenerate);
        rep->loss = l[0];
        rep->delta_std = s;
        for (j = 1; j <= N; j++) ctx->coeff[j - 1] = s > 0.0 ? (float)((double)lr * l[j] / ((double)N * s)) : 0.0f;
        grzo__free(ctx, l);
        n_coeff = N;
    }
    for (i = 0; i < n_coeff; i++) {
        if (!isfinite(ctx->coeff[i])) return GRZO_ERR_NONFINITE;
        sum2 += (double)ctx->coeff[i] * ctx->coeff[i];
    }
    rep->coeff_rms = sqrt(sum2 / (double)n_coeff);
    return GRZO_OK;
}

/* Block i's variant for an operation (section 3c), or NULL when the op is dense. Plain ops
   (outside a pass) still read fake-quantized weights. */
static const grzo_variant *grzo__block_variant(const grzo_ctx *ctx, uint32_t i, int perturbed, grzo_variant *out) {
    const grzo_desc *d = &ctx->desc;
    const grzo__block *b = &ctx->blocks[i];
    memset(out, 0, sizeof *out);
    if (perturbed && d->sparse_density > 0.0f && b->sparse_ready) {
        out->sparse = 1;
        out->sparse_threshold = b->sparse_h;
    }
    if (perturbed && d->lowrank_rank > 0 && b->p.kind != GRZO_BLOCK_VECTOR) {
        out->lowrank_rank = d->lowrank_rank;
        out->lowrank_step = (uint32_t)(ctx->step - ctx->step % d->lowrank_every);   /* V of the last refresh */
    }
    out->quant_bits = d->quant_bits;
    return (out->sparse || out->lowrank_rank || out->quant_bits) ? out : NULL;
}

/* Block index's update from FZOO probe *probe on (0: all of it). On failure *probe names the
   update that failed, which left the block as it was (the backend's contract), so that the
   update can resume there; on success it is 0 again. */
static grzo_status grzo__update_block(grzo_ctx *ctx, uint32_t index, float lr, int32_t *probe) {
    grzo__block *b = &ctx->blocks[index];
    const grzo_backend *be = ctx->desc.backend;
    grzo_update_args u;
    grzo_variant var;
    int32_t k, n_updates = 1;
    memset(&u, 0, sizeof u);
    u.p = b->p;
    u.variant = grzo__block_variant(ctx, index, 1, &var);
    u.touched = (b->p.kind == GRZO_BLOCK_EMBEDDING && !b->full_touch) ? b->touched : NULL;
    u.flipout = grzo__flipout(ctx);
    u.n_examples = grzo__is_grzo_family(ctx->desc.estimator) ? ctx->B : 1;
    if (ctx->desc.estimator == GRZO_ESTIMATOR_FZOO) n_updates = ctx->desc.fzoo_probes;
    for (k = *probe; k < n_updates; k++) {
        grzo_status s;
        /* FZOO's probes are passes 1..N; everyone else's U is the pass-0 stream */
        u.base = grzo__base_noise(ctx, index, ctx->desc.estimator == GRZO_ESTIMATOR_FZOO ? k + 1 : 0);
        u.coeff = ctx->coeff + (ctx->desc.estimator == GRZO_ESTIMATOR_FZOO ? k : 0);
        u.decay = (k == 0 && b->p.kind != GRZO_BLOCK_VECTOR && !b->no_decay) ? lr * ctx->desc.weight_decay : 0.0f;
        u.round_draw = (uint32_t)k;   /* FZOO's probes round independently of one another */
        s = be->iface->update(be->self, &u);
        if (s != GRZO_OK) {
            *probe = k;
            return s;
        }
    }
    *probe = 0;
    return GRZO_OK;
}

/* The step's coefficients, and in-place MeZO's restore before its update; on failure the step
   is abandoned with no parameter changed. */
static grzo_status grzo__prepare_update(grzo_ctx *ctx, float lr, grzo_step_report *rep) {
    grzo_status s;
    memset(rep, 0, sizeof *rep);
    s = grzo__coefficients(ctx, lr, rep);
    if (s == GRZO_OK && !isfinite(lr * ctx->desc.weight_decay)) {   /* each accepted, their product overflows */
        grzo_step_abort(ctx);
        return grzo__fail(ctx, GRZO_ERR_NONFINITE, "grzo_step_end: the weight decay lr * weight_decay = %g * %g is not finite: "
                          "step %lld abandoned, no parameter changed", (double)lr, (double)ctx->desc.weight_decay, (long long)ctx->step);
    }
    if (s != GRZO_OK) {
        grzo_step_abort(ctx);
        return grzo__fail(ctx, s, "grzo_step_end: %s while forming the update: step %lld abandoned, no parameter changed",
                          grzo_status_str(s), (long long)ctx->step);
    }
    s = grzo__inplace_restore(ctx);
    if (s != GRZO_OK) {
        grzo_status r = grzo_step_abort(ctx);   /* tries the restore again */
        return grzo__backend_fail(ctx, s, r == GRZO_OK ? "grzo_step_end: restoring in-place MeZO's parameters (step abandoned; restored at a second try)"
                                                       : "grzo_step_end: restoring in-place MeZO's parameters (step abandoned; " GRZO__STILL_SHIFTED ")");
    }
    return GRZO_OK;
}

GRZO__DEF grzo_status grzo_step_end(grzo_ctx *ctx, grzo_step_report *out) {
    grzo_step_report rep;
    float lr;
    uint32_t i;
    grzo_status s;
    if (!ctx) return GRZO_ERR_INVALID_ARG;
    if (ctx->align) return grzo__fail(ctx, GRZO_ERR_STATE, "grzo_step_end: an alignment diagnostic is in flight (grzo_align_end)");
    if (ctx->state != GRZO__IN_STEP || ctx->pass != ctx->n_passes)
        return grzo__fail(ctx, GRZO_ERR_STATE, "grzo_step_end: %s", ctx->state == GRZO__IN_PASS ? "a pass is in flight (grzo_pass_end first)"
                          : ctx->state == GRZO__IDLE ? "no step in flight" : "passes remain to be run");
    lr = grzo_lr_at(ctx, ctx->step);
    if (!ctx->updating) {   /* else an update that failed part-way resumes where it stopped */
        s = grzo__prepare_update(ctx, lr, &rep);
        if (s != GRZO_OK) return s;
        ctx->updating = 1;
        ctx->update_block = 0;
        ctx->update_probe = 0;
        ctx->update_report = rep;
    }
    for (i = ctx->update_block; i < ctx->n_blocks; i++) {
        s = grzo__update_block(ctx, i, lr, &ctx->update_probe);
        if (s != GRZO_OK) {
            char what[200];
            ctx->update_block = i;
            snprintf(what, sizeof what, "grzo_step_end: update of block %u of %u (step %lld in flight, the blocks before it "
                     "updated: grzo_step_end again finishes it)", (unsigned)i, (unsigned)ctx->n_blocks, (long long)ctx->step);
            return grzo__backend_fail(ctx, s, what);
        }
    }
    ctx->updating = 0;
    rep = ctx->update_report;
    /* the update is applied: the step counts, whatever the clearing below does (a step not
       counted would repeat its noise) */
    ctx->state = GRZO__IDLE;
    if (rep.degenerate) ctx->degenerate_total++;
    rep.step = ctx->step;
    rep.lr = lr;
    rep.degenerate_total = ctx->degenerate_total;
    ctx->step++;
    if (out) *out = rep;
    s = grzo__clear_touched(ctx);
    /* the divergence guard (section 4b): the same step on every rank, so a collective that
       this rank joins whatever the clearing did (the others wait for it) */
    if (ctx->desc.comm && ctx->desc.replica_check_every > 0 && ctx->step % ctx->desc.replica_check_every == 0) {
        grzo_status guard = grzo_check_replicas(ctx);
        if (guard != GRZO_OK) return guard;
    }
    if (s != GRZO_OK)
        return grzo__backend_fail(ctx, s, "grzo_step_end: the step was applied and counted, but clearing its row maps failed "
                                          "(the next step begins by clearing them again)");
    return GRZO_OK;
}

/* The passes of a step or a diagnostic begun by the caller, each through the forward
   callback; on any failure the step (or diagnostic) is abandoned. who names the caller. */
static grzo_status grzo__run_passes(grzo_ctx *ctx, int32_t n_passes, grzo_forward_fn forward, void *user_data,
                                    const char *who) {
    int32_t p;
    for (p = 0; p < n_passes; p++) {
        grzo_pass_info pi;
        grzo_status s = grzo_pass_begin(ctx, &pi);
        if (s == GRZO_OK) {
            ctx->err[0] = '\0';   /* so that a failure of the callback's own is not told with an older message */
            s = forward(ctx, &pi, ctx->scratch_losses, user_data);
            if (s != GRZO_OK) {
                grzo__abort_pass(ctx, s);     /* sharded: every rank abandons the step */
                if (!ctx->err[0]) grzo__fail(ctx, s, "%s: the forward callback failed", who);
                return s;
            }
            s = grzo_pass_end(ctx, ctx->scratch_losses);
        }
        if (s != GRZO_OK) { grzo_step_abort(ctx); return s; }
    }
    return GRZO_OK;
}

GRZO__DEF grzo_status grzo_step(grzo_ctx *ctx, int64_t n_examples, grzo_forward_fn forward,
                                void *user_data, grzo_step_report *out) {
    grzo_status s;
    if (!ctx) return GRZO_ERR_INVALID_ARG;
    if (!forward) return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "grzo_step: forward is NULL");
    s = grzo_step_begin(ctx, n_examples, NULL);
    if (s != GRZO_OK) return s;
    s = grzo__run_passes(ctx, ctx->n_passes, forward, user_data, "grzo_step");
    if (s != GRZO_OK) return s;
    return grzo_step_end(ctx, out);
}

/* ---- the alignment diagnostic (section 3b) --------------------------------------------------------- */
GRZO__DEF double grzo_align_cos_ratio(double b_eff, int64_t n_examples) {
    double B = (double)n_examples;
    if (n_examples < 1 || !(b_eff >= 0.0)) return NAN;
    return sqrt(3.14159265358979323846 * b_eff / B) * exp(lgamma(0.5 * (B + 1.0)) - lgamma(0.5 * B));
}

GRZO__DEF grzo_status grzo_align_begin(grzo_ctx *ctx, int64_t n_examples, int32_t n_probes, grzo_step_info *si) {
    if (!ctx) return GRZO_ERR_INVALID_ARG;
    if (ctx->state != GRZO__IDLE) return grzo__fail(ctx, GRZO_ERR_STATE, "grzo_align_begin: a step or diagnostic is already in flight (end or abort it)");
    if (n_examples < 2 || n_examples > GRZO_ALIGN_MAX_EXAMPLES)
        return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "grzo_align_begin: n_examples must be in [2, %d] (got %lld): B_eff compares examples",
                          GRZO_ALIGN_MAX_EXAMPLES, (long long)n_examples);
    if (n_probes < 2 || n_probes > GRZO_ALIGN_MAX_PROBES)
        return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "grzo_align_begin: n_probes must be in [2, %d] (got %d): the standard error needs two draws",
                          GRZO_ALIGN_MAX_PROBES, (int)n_probes);
    if (ctx->step >= (int64_t)UINT32_MAX)
        return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "grzo_align_begin: the RNG step counter is exhausted (2^32 steps)");
    if (grzo__variants_on(&ctx->desc))
        return grzo__fail(ctx, GRZO_ERR_UNSUPPORTED, "grzo_align_begin: the diagnostic measures dense directions; it does not run with "
                          "the sparse, low-rank or quantized variant (use a context without them)");
    {
        grzo_status s = grzo__settle(ctx, "grzo_align_begin");
        if (s != GRZO_OK) return s;
    }
    ctx->align_gram = (double *)grzo__alloc(ctx, (size_t)n_examples * (size_t)n_examples * sizeof(double));
    ctx->align_ab = (double *)grzo__alloc(ctx, (size_t)n_probes * 2 * sizeof(double));
    if (!ctx->align_gram || !ctx->align_ab || grzo__ensure_buffers(ctx, 2 * n_examples, 2 * n_examples, 2 * n_examples) != GRZO_OK) {
        grzo__align_free(ctx);
        return grzo__fail(ctx, GRZO_ERR_OUT_OF_MEMORY, "grzo_align_begin: out of memory");
    }
    memset(ctx->align_gram, 0, (size_t)n_examples * (size_t)n_examples * sizeof(double));
    ctx->align = 1;
    ctx->B = n_examples;
    grzo__set_share(ctx);
    ctx->n_passes = n_probes;
    ctx->copies = 2;
    ctx->pass = 0;
    ctx->state = GRZO__IN_STEP;
    if (si) {
        si->step = ctx->step;
        si->n_examples = n_examples;
        si->n_passes = n_probes;
        si->copies_per_pass = 2;
        si->lr = 0.0f;
        si->example_begin = ctx->ex_lo;
        si->example_end = ctx->ex_hi;
    }
    return GRZO_OK;
}

/* B_eff = sum a / sum b and its delta-method standard error from the residuals a_k - B_eff b_k. */
static void grzo__align_ratio(const double *ab, int32_t K, double *r, double *se) {
    double sa = 0.0, sb = 0.0, ss = 0.0, mean_b;
    int32_t k;
    for (k = 0; k < K; k++) { sa += ab[2 * k]; sb += ab[2 * k + 1]; }
    *r = sa / sb;
    for (k = 0; k < K; k++) { double e = ab[2 * k] - *r * ab[2 * k + 1]; ss += e * e; }
    mean_b = sb / (double)K;
    *se = sqrt(ss / (double)(K - 1) / (double)K) / mean_b;
}

GRZO__DEF grzo_status grzo_align_end(grzo_ctx *ctx, double *gram, grzo_align_report *out) {
    grzo_align_report rep;
    double B, scale, tr = 0.0, half;
    int64_t i, n;
    grzo_status s;
    if (!ctx) return GRZO_ERR_INVALID_ARG;
    if (!ctx->align || ctx->state != GRZO__IN_STEP || ctx->pass != ctx->n_passes)
        return grzo__fail(ctx, GRZO_ERR_STATE, "grzo_align_end: %s", !ctx->align ? "no alignment diagnostic in flight (grzo_align_begin)"
                          : ctx->state == GRZO__IN_PASS ? "a probe is in flight (grzo_pass_end first)" : "probes remain to be run");
    memset(&rep, 0, sizeof rep);
    B = (double)ctx->B;
    n = ctx->B * ctx->B;
    for (i = 0; i < ctx->B; i++) tr += ctx->align_gram[i * ctx->B + i];
    if (!(tr > 0.0)) {
        grzo_step_abort(ctx);
        return grzo__fail(ctx, GRZO_ERR_NONFINITE, "grzo_align_end: every loss difference was 0, B_eff is undefined (the losses do not "
                          "depend on the parameters, or sigma is below the losses' precision)");
    }
    rep.n_examples = ctx->B;
    rep.n_probes = ctx->n_passes;
    rep.step = ctx->step;
    grzo__align_ratio(ctx->align_ab, ctx->n_passes, &rep.b_eff, &rep.b_eff_se);
    half = 1.959963984540054 * rep.b_eff_se;
    rep.b_eff_lo = rep.b_eff - half < 0.0 ? 0.0 : rep.b_eff - half;
    rep.b_eff_hi = rep.b_eff + half > B ? B : rep.b_eff + half;
    rep.c_w = (rep.b_eff - 1.0) / (B - 1.0);
    rep.c_w_se = rep.b_eff_se / (B - 1.0);
    rep.var_ratio = rep.b_eff;
    rep.cos_ratio = grzo_align_cos_ratio(rep.b_eff, ctx->B);
    rep.cos_ratio_lo = grzo_align_cos_ratio(rep.b_eff_lo, ctx->B);
    rep.cos_ratio_hi = grzo_align_cos_ratio(rep.b_eff_hi, ctx->B);
    scale = 1.0 / (4.0 * (double)ctx->desc.sigma * (double)ctx->desc.sigma * (double)ctx->n_passes);
    rep.mean_sq_grad = tr * scale / B;
    if (gram) for (i = 0; i < n; i++) gram[i] = ctx->align_gram[i] * scale;
    s = grzo__clear_touched(ctx);
    ctx->state = GRZO__IDLE;
    grzo__align_free(ctx);
    if (s != GRZO_OK) return grzo__backend_fail(ctx, s, "grzo_align_end: clearing row maps");
    if (out) *out = rep;
    return GRZO_OK;
}

GRZO__DEF grzo_status grzo_align(grzo_ctx *ctx, int64_t n_examples, int32_t n_probes, grzo_forward_fn forward,
                                 void *user_data, double *gram, grzo_align_report *out) {
    grzo_status s;
    if (!ctx) return GRZO_ERR_INVALID_ARG;
    if (!forward) return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "grzo_align: forward is NULL");
    s = grzo_align_begin(ctx, n_examples, n_probes, NULL);
    if (s != GRZO_OK) return s;
    s = grzo__run_passes(ctx, n_probes, forward, user_data, "grzo_align");
    if (s != GRZO_OK) return s;
    return grzo_align_end(ctx, gram, out);
}

/* ---- the perturbed building blocks ------------------------------------------------------------------ */
typedef struct grzo__op {
    grzo__block *blk;
    grzo_perturb pt;
    int perturbed;
    int per_segment;             /* section 4b: one backend call per segment of pt.offsets */
    grzo_perturb seg_pt;         /* the perturbation of one of those calls */
    int64_t seg_offsets[2];
    grzo_variant var;
    const grzo_variant *variant;   /* &var, or NULL when the variant changes nothing here */
} grzo__op;


/* Validate an operation's block and rows, and describe its perturbation. */
static grzo_status grzo__prepare_op(grzo_ctx *ctx, const char *who, grzo_block b, const grzo_rows *rows,
                                    grzo__op *op) {
    int64_t all, first, segs, c;
    memset(op, 0, sizeof *op);
    op->blk = grzo__get_block(ctx, b);
    if (!op->blk) return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "%s: invalid block handle %u", who, (unsigned)b.id);
    if (!rows) return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "%s: rows is NULL", who);
    if (rows->n_rows < 0) return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "%s: n_rows < 0", who);
    if (ctx->state == GRZO__IN_STEP) return grzo__fail(ctx, GRZO_ERR_STATE, "%s: between passes (call grzo_pass_begin)", who);
    op->variant = grzo__block_variant(ctx, b.id - 1, ctx->state == GRZO__IN_PASS, &op->var);
    if (ctx->state != GRZO__IN_PASS) return grzo__settle(ctx, who);   /* plain evaluation */
    op->per_segment = ctx->desc.per_example_ops == 1;
    all = grzo__local_segments(ctx);
    first = rows->first_segment;
    if (first < 0 || rows->n_segments < 0 || (all > 0 && first >= all) || (all == 0 && first != 0) ||
        rows->n_segments > all - first)
        return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "%s: segments from %lld (%lld of them; 0 = to the last) are not within the pass's %lld",
                          who, (long long)first, (long long)rows->n_segments, (long long)all);
    segs = rows->n_segments ? rows->n_segments : all - first;
    if (segs == 0) {   /* a rank without examples this step (section 4b) */
        if (rows->n_rows != 0) return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "%s: %lld rows, but this rank has no segments this step", who, (long long)rows->n_rows);
        op->per_segment = 0;
        return GRZO_OK;
    }
    if (rows->offsets) {
        if (rows->offsets[0] != 0 || rows->offsets[segs] != rows->n_rows)
            return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "%s: rows.offsets must start at 0 and end at n_rows (%lld), over %lld segments",
                              who, (long long)rows->n_rows, (long long)segs);
        for (c = 0; c < segs; c++)
            if (rows->offsets[c + 1] < rows->offsets[c])
                return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "%s: rows.offsets decrease at segment %lld", who, (long long)c);
        op->pt.offsets = rows->offsets;
    } else {
        if (rows->n_rows % segs != 0)
            return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "%s: %lld rows do not split evenly over %lld segments (pass rows.offsets)",
                              who, (long long)rows->n_rows, (long long)segs);
        for (c = 0; c <= segs; c++) ctx->even_offsets[c] = c * (rows->n_rows / segs);
        op->pt.offsets = ctx->even_offsets;
    }
    op->pt.n_segments = segs;
    /* in-place MeZO: the parameters themselves are perturbed; the rows (checked above, as for
       every estimator) matter only per segment */
    if (grzo__inplace(ctx)) return GRZO_OK;
    op->pt.base = grzo__base_noise(ctx, b.id - 1, ctx->pass);
    op->pt.sigma = ctx->desc.sigma;
    op->pt.flipout = grzo__flipout(ctx);
    op->pt.n_examples = ctx->B;
    op->pt.n_segments = segs;
    op->pt.sign = ctx->seg_sign + first;
    op->pt.example = ctx->seg_example + first;
    op->perturbed = 1;
    return GRZO_OK;
}

static grzo_status grzo__run(grzo_ctx *ctx, const char *who, grzo_status s) {
    return s == GRZO_OK ? GRZO_OK : grzo__backend_fail(ctx, s, who);
}

/* Per-segment calls (section 4b): segment c's rows [first, first + count) and its perturbation
   (NULL: plain), a one-segment grzo_perturb over those rows alone. */
static const grzo_perturb *grzo__segment(grzo__op *op, int64_t c, int64_t *first, int64_t *count) {
    *first = op->pt.offsets[c];
    *count = op->pt.offsets[c + 1] - *first;
    if (!op->perturbed) return NULL;
    op->seg_pt = op->pt;
    op->seg_offsets[0] = 0;
    op->seg_offsets[1] = *count;
    op->seg_pt.n_segments = 1;
    op->seg_pt.offsets = op->seg_offsets;
    op->seg_pt.sign = op->pt.sign + c;
    op->seg_pt.example = op->pt.example + c;
    return &op->seg_pt;
}

/* Whether n floats at a and m floats at b share memory (addresses compared as integers: the
   two may belong to different objects) */
static int grzo__ranges_overlap(const float *a, size_t n, const float *b, size_t m) {
    uintptr_t a0 = (uintptr_t)a, b0 = (uintptr_t)b;
    return a0 < b0 + m * sizeof(float) && b0 < a0 + n * sizeof(float);
}

GRZO__DEF grzo_status grzo_linear(grzo_ctx *ctx, grzo_block w, const float *x, float *y, const grzo_rows *rows) {
    grzo__op op;
    grzo_linear_args a;
    grzo_status s;
    const grzo_backend *be;
    if (!ctx) return GRZO_ERR_INVALID_ARG;
    s = grzo__prepare_op(ctx, "grzo_linear", w, rows, &op);
    if (s != GRZO_OK) return s;
    if (op.blk->p.kind == GRZO_BLOCK_VECTOR) return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "grzo_linear: block %u is a vector", (unsigned)w.id);
    if (!x || !y) return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "grzo_linear: x and y are required");
    if (rows->n_rows == 0) return GRZO_OK;
    if (grzo__ranges_overlap(x, (size_t)rows->n_rows * (size_t)op.blk->p.cols, y,
                             (size_t)rows->n_rows * (size_t)op.blk->p.rows))
        return grzo__fail(ctx, GRZO_ERR_INVALID_ARG,
                          "grzo_linear: x and y overlap (a product cannot be written over its own input)");
    a.w = op.blk->p;
    a.x = x;
    a.y = y;
    a.n_rows = rows->n_rows;
    a.perturb = op.perturbed ? &op.pt : NULL;
    a.variant = op.variant;
    be = ctx->desc.backend;
    if (op.per_segment) {
        int64_t c, first, count;
        for (c = 0; c < op.pt.n_segments; c++) {
            a.perturb = grzo__segment(&op, c, &first, &count);
            if (count == 0) continue;
            a.x = x + first * a.w.cols;
            a.y = y + first * a.w.rows;
            a.n_rows = count;
            s = grzo__run(ctx, "grzo_linear", be->iface->linear(be->self, &a));
            if (s != GRZO_OK) return s;
        }
    } else {
        s = grzo__run(ctx, "grzo_linear", be->iface->linear(be->self, &a));
        if (s != GRZO_OK) return s;
    }
    /* an embedding read whole (a tied head): every row takes this step's update; marked
       only once the op succeeded, so a failed one leaves the maps as they were */
    if (ctx->state == GRZO__IN_PASS && op.blk->p.kind == GRZO_BLOCK_EMBEDDING) op.blk->full_touch = 1;
    return GRZO_OK;
}

GRZO__DEF grzo_status grzo_vector(grzo_ctx *ctx, grzo_block v, grzo_vector_op opk, const float *x, float *y,
                                  const grzo_rows *rows) {
    grzo__op op;
    grzo_vector_args a;
    grzo_status s;
    const grzo_backend *be;
    if (!ctx) return GRZO_ERR_INVALID_ARG;
    s = grzo__prepare_op(ctx, "grzo_vector", v, rows, &op);
    if (s != GRZO_OK) return s;
    if (op.blk->p.kind != GRZO_BLOCK_VECTOR) return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "grzo_vector: block %u is not a vector", (unsigned)v.id);
    if (opk != GRZO_VECTOR_MUL && opk != GRZO_VECTOR_ADD) return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "grzo_vector: unknown op %d", (int)opk);
    if (!x || !y) return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "grzo_vector: x and y are required");
    if (rows->n_rows == 0) return GRZO_OK;
    a.v = op.blk->p;
    a.op = opk;
    a.x = x;
    a.y = y;
    a.n_rows = rows->n_rows;
    a.perturb = op.perturbed ? &op.pt : NULL;
    a.variant = op.variant;
    be = ctx->desc.backend;
    if (op.per_segment) {
        int64_t c, first, count;
        for (c = 0; c < op.pt.n_segments; c++) {
            a.perturb = grzo__segment(&op, c, &first, &count);
            if (count == 0) continue;
            a.x = x + first * a.v.rows;
            a.y = y + first * a.v.rows;
            a.n_rows = count;
            s = grzo__run(ctx, "grzo_vector", be->iface->vector(be->self, &a));
            if (s != GRZO_OK) return s;
        }
        return GRZO_OK;
    }
    return grzo__run(ctx, "grzo_vector", be->iface->vector(be->self, &a));
}

GRZO__DEF grzo_status grzo_embedding(grzo_ctx *ctx, grzo_block e, const int32_t *ids, float *y, const grzo_rows *rows) {
    grzo__op op;
    grzo_embedding_args a;
    grzo_status s;
    const grzo_backend *be;
    if (!ctx) return GRZO_ERR_INVALID_ARG;
    s = grzo__prepare_op(ctx, "grzo_embedding", e, rows, &op);
    if (s != GRZO_OK) return s;
    if (op.blk->p.kind != GRZO_BLOCK_EMBEDDING) return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "grzo_embedding: block %u is not an embedding", (unsigned)e.id);
    if (!ids || !y) return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "grzo_embedding: ids and y are required");
    if (rows->n_rows == 0) return GRZO_OK;
    a.e = op.blk->p;
    a.ids = ids;
    a.y = y;
    a.n_rows = rows->n_rows;
    a.touched = ctx->state == GRZO__IN_PASS ? op.blk->touched : NULL;
    a.perturb = op.perturbed ? &op.pt : NULL;
    a.variant = op.variant;
    be = ctx->desc.backend;
    if (op.per_segment) {
        int64_t c, first, count;
        /* one backend call a segment: a bad id in a later segment would be refused after the
           earlier calls marked their rows touched. Host ids are checked here first, so that a
           refused op marks nothing (a device backend checks on the device and reports at
           grzo_pass_end, which abandons the step) */
        if (!ctx->caps.device_memory && a.touched)
            for (c = 0; c < rows->n_rows; c++)
                if (ids[c] < 0 || ids[c] >= op.blk->p.rows)
                    return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "grzo_embedding: token id %lld at row %lld out of range [0, %lld)",
                                      (long long)ids[c], (long long)c, (long long)op.blk->p.rows);
        for (c = 0; c < op.pt.n_segments; c++) {
            a.perturb = grzo__segment(&op, c, &first, &count);
            if (count == 0) continue;
            a.ids = ids + first;
            a.y = y + first * a.e.cols;
            a.n_rows = count;
            s = grzo__run(ctx, "grzo_embedding", be->iface->embedding(be->self, &a));
            if (s != GRZO_OK) return s;
        }
        return GRZO_OK;
    }
    return grzo__run(ctx, "grzo_embedding", be->iface->embedding(be->self, &a));
}

GRZO__DEF grzo_status grzo_perturbed_params(grzo_ctx *ctx, grzo_block b, int64_t segment, void *out) {
    grzo__block *blk;
    grzo_copy_args a;
    grzo_variant var;
    const grzo_backend *be;
    grzo_status s;
    if (!ctx) return GRZO_ERR_INVALID_ARG;
    if (ctx->state != GRZO__IN_PASS) return grzo__fail(ctx, GRZO_ERR_STATE, "grzo_perturbed_params: no pass in flight");
    blk = grzo__get_block(ctx, b);
    if (!blk) return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "grzo_perturbed_params: invalid block handle %u", (unsigned)b.id);
    if (!out) return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "grzo_perturbed_params: out is NULL");
    if (segment < 0 || segment >= grzo__local_segments(ctx))
        return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "grzo_perturbed_params: segment %lld out of range", (long long)segment);
    {   /* out is block-sized in the block's dtype: written over the block, it would destroy theta */
        size_t bytes = (size_t)blk->p.rows * (size_t)(blk->p.cols > 1 ? blk->p.cols : 1) * grzo__dtype_size(blk->p.dtype);
        uintptr_t o = (uintptr_t)out, d = (uintptr_t)blk->p.data;
        if (o < d + bytes && d < o + bytes)
            return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "grzo_perturbed_params: out overlaps block %u's own parameters", (unsigned)b.id);
    }
    a.p = blk->p;
    a.base = grzo__base_noise(ctx, b.id - 1, ctx->pass);
    a.flipout = grzo__flipout(ctx);
    a.example = ctx->seg_example[segment];
    /* in-place MeZO: the block already holds the perturbed values */
    a.scale = grzo__inplace(ctx) ? 0.0f : (float)ctx->seg_sign[segment] * ctx->desc.sigma;
    a.out = out;
    a.variant = grzo__block_variant(ctx, b.id - 1, 1, &var);
    be = ctx->desc.backend;
    s = grzo__run(ctx, "grzo_perturbed_params", be->iface->perturbed_copy(be->self, &a));
    if (s != GRZO_OK) return s;
    if (blk->p.kind == GRZO_BLOCK_EMBEDDING) blk->full_touch = 1;   /* once it succeeded, as in grzo_linear */
    return GRZO_OK;
}

/* ---- checkpoints --------------------------------------------------------------------------------- */
#define GRZO__CKPT_MAGIC "GRZOCKPT"
#define GRZO__CKPT_VERSION 1u            /* dense settings */
#define GRZO__CKPT_VERSION_VARIANTS 2u   /* written when a variant axis is on (section 6) */
#define GRZO__CKPT_THRESHOLD_ENTRY 8     /* u32 set, f32 h_b */
#define GRZO__CKPT_HEADER 256
#define GRZO__CKPT_BLOCK_ENTRY (4 + 4 + 8 + 8 + GRZO__NAME_MAX)
#define GRZO__CKPT_CHUNK 65536

#if !defined(_WIN32)
/* POSIX; declared here so the header builds under strict -std=c99 */
#ifdef __cplusplus
extern "C" {
#endif
extern int fsync(int fd);
extern int fileno(FILE *stream);
extern FILE *fdopen(int fd, const char *mode);
#ifdef __cplusplus
}
#endif
#endif

/* The temporary a checkpoint is written to before its rename, "<path>.tmp": whatever is at
   that name is removed first (a stale temporary of a killed save; a folder there makes the
   save fail), then the file is created with O_EXCL, so that it is never opened through a
   symbolic link (in a shared folder such as /tmp, a link at that predictable name would make
   the save overwrite the file it points to; one made again between the removal and the
   creation makes the creation fail). Mode 0666: the umask applies, as to any file the
   caller creates. tmp holds GRZO__TEMP_EXTRA bytes more than path. */
#define GRZO__TEMP_EXTRA 8
static FILE *grzo__create_temp(const char *path, char *tmp, size_t cap) {
#if !defined(_WIN32)
    int fd;
    FILE *f;
    snprintf(tmp, cap, "%s.tmp", path);
    if (unlink(tmp) != 0 && errno != ENOENT) return NULL;
    if ((fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0666)) < 0) return NULL;
    if (!(f = fdopen(fd, "wb"))) {
        close(fd);
        unlink(tmp);
    }
    return f;
#else
    snprintf(tmp, cap, "%s.tmp", path);
    return fopen(tmp, "wb");
#endif
}

/* Syncs the folder that holds path, so that a rename into it survives a crash. Best effort:
   a system or file system that cannot open or sync a folder (Windows; some network file
   systems) keeps the rename in its own time. buf holds path's length + 2. */
static void grzo__sync_folder(const char *path, char *buf) {
#if !defined(_WIN32)
    size_t n = strlen(path);
    int fd;
    while (n > 0 && path[n - 1] != '/') n--;       /* keep up to the last slash */
    while (n > 1 && path[n - 1] == '/') n--;       /* "dir//file" -> "dir", "/file" -> "/" */
    if (n == 0) memcpy(buf, ".", 2);
    else { memcpy(buf, path, n); buf[n] = 0; }
    fd = open(buf, O_RDONLY);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
#else
    (void)path; (void)buf;
#endif
}

static uint64_t grzo__fnv1a(uint64_t h, const uint8_t *p, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) { h ^= p[i]; h *= 0x100000001B3ull; }
    return h;
}
#define GRZO__FNV_INIT 0xCBF29CE484222325ull

static void grzo__put_u32(uint8_t *p, uint32_t v) { int i; for (i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static void grzo__put_u64(uint8_t *p, uint64_t v) { int i; for (i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static uint32_t grzo__get_u32(const uint8_t *p) { uint32_t v = 0; int i; for (i = 3; i >= 0; i--) v = (v << 8) | p[i]; return v; }
static uint64_t grzo__get_u64(const uint8_t *p) { uint64_t v = 0; int i; for (i = 7; i >= 0; i--) v = (v << 8) | p[i]; return v; }
static void grzo__put_f32(uint8_t *p, float f) { uint32_t v; memcpy(&v, &f, 4); grzo__put_u32(p, v); }
static float grzo__get_f32(const uint8_t *p) { uint32_t v = grzo__get_u32(p); float f; memcpy(&f, &v, 4); return f; }

static int grzo__host_is_le(void) { const uint16_t one = 1; return *(const uint8_t *)&one == 1; }

/* f32 data <-> little-endian bytes, in place */
static void grzo__f32_to_le(uint8_t *p, size_t n_floats) {
    size_t i;
    if (grzo__host_is_le()) return;
    for (i = 0; i < n_floats; i++) { float f; memcpy(&f, p + 4 * i, 4); grzo__put_f32(p + 4 * i, f); }
}

/* payload size of the context's blocks; `sparse`: with the threshold table */
static uint64_t grzo__payload_bytes(const grzo_ctx *ctx, int sparse) {
    uint64_t n = (uint64_t)ctx->n_blocks * (GRZO__CKPT_BLOCK_ENTRY + (sparse ? GRZO__CKPT_THRESHOLD_ENTRY : 0));
    uint32_t i;
    for (i = 0; i < ctx->n_blocks; i++)
        n += (uint64_t)(ctx->blocks[i].p.rows * ctx->blocks[i].p.cols) * grzo__dtype_size(ctx->blocks[i].p.dtype);
    return n;
}

static void grzo__encode_block_entry(const grzo__block *b, uint8_t *e) {
    memset(e, 0, GRZO__CKPT_BLOCK_ENTRY);
    grzo__put_u32(e, (uint32_t)b->p.kind);
    grzo__put_u32(e + 4, (uint32_t)b->p.dtype);
    grzo__put_u64(e + 8, (uint64_t)b->p.rows);
    grzo__put_u64(e + 16, (uint64_t)b->p.cols);
    memcpy(e + 24, b->name, GRZO__NAME_MAX);
}

static void grzo__encode_header(const grzo_ctx *ctx, uint64_t payload, uint64_t sum, uint8_t *h) {
    const grzo_desc *d = &ctx->desc;
    memset(h, 0, GRZO__CKPT_HEADER);
    memcpy(h, GRZO__CKPT_MAGIC, 8);
    grzo__put_u32(h + 8, grzo__variants_on(d) ? GRZO__CKPT_VERSION_VARIANTS : GRZO__CKPT_VERSION);
    grzo__put_u32(h + 12, GRZO__CKPT_HEADER);
    grzo__put_u64(h + 16, payload);
    grzo__put_u64(h + 24, sum);
    grzo__put_u64(h + 32, d->seed);
    grzo__put_u64(h + 40, (uint64_t)ctx->step);
    grzo__put_u32(h + 48, (uint32_t)d->estimator);
    grzo__put_u32(h + 52, (uint32_t)d->noise);
    grzo__put_f32(h + 56, d->lr);
    grzo__put_f32(h + 60, d->sigma);
    grzo__put_f32(h + 64, d->norm_eps);
    grzo__put_f32(h + 68, d->weight_decay);
    grzo__put_u64(h + 72, (uint64_t)d->warmup_steps);
    grzo__put_u32(h + 80, (uint32_t)d->schedule);
    grzo__put_u32(h + 84, (uint32_t)d->fzoo_probes);
    grzo__put_u32(h + 88, ctx->n_blocks);
    grzo__put_u64(h + 96, (uint64_t)ctx->degenerate_total);
    grzo__put_f32(h + 104, d->sparse_density);        /* version 2: the variant axes */
    grzo__put_u32(h + 108, (uint32_t)d->lowrank_rank);
    grzo__put_u32(h + 112, (uint32_t)d->lowrank_every);
    grzo__put_u32(h + 116, (uint32_t)d->quant_bits);
    grzo__put_u64(h + 248, grzo__fnv1a(GRZO__FNV_INIT, h, 248));
}

/* Streams the payload (block table, then data downloaded chunk by chunk) to f (may be
   NULL) while hashing it. */
static grzo_status grzo__write_payload(grzo_ctx *ctx, FILE *f, uint8_t *buf, uint64_t *sum) {
    uint32_t i;
    uint64_t h = GRZO__FNV_INIT;
    for (i = 0; i < ctx->n_blocks; i++) {
        grzo__encode_block_entry(&ctx->blocks[i], buf);
        h = grzo__fnv1a(h, buf, GRZO__CKPT_BLOCK_ENTRY);
        if (f && fwrite(buf, 1, GRZO__CKPT_BLOCK_ENTRY, f) != GRZO__CKPT_BLOCK_ENTRY) return GRZO_ERR_IO;
    }
    for (i = 0; i < ctx->n_blocks; i++) {
        const grzo__block *b = &ctx->blocks[i];
        size_t esz = grzo__dtype_size(b->p.dtype);
        uint64_t total = (uint64_t)(b->p.rows * b->p.cols) * esz, done = 0;
        while (done < total) {
            size_t n = (size_t)(total - done > GRZO__CKPT_CHUNK ? GRZO__CKPT_CHUNK : total - done);
            grzo_status s = grzo_backend_download(ctx->desc.backend, buf, (const uint8_t *)b->p.data + done, n);
            if (s != GRZO_OK) return s;
            if (esz == 4) grzo__f32_to_le(buf, n / 4);
            h = grzo__fnv1a(h, buf, n);
            if (f && fwrite(buf, 1, n, f) != n) return GRZO_ERR_IO;
            done += n;
        }
    }
    if (ctx->desc.sparse_density > 0.0f) {
        for (i = 0; i < ctx->n_blocks; i++) {
            grzo__put_u32(buf, (uint32_t)ctx->blocks[i].sparse_ready);
            grzo__put_f32(buf + 4, ctx->blocks[i].sparse_h);
            h = grzo__fnv1a(h, buf, GRZO__CKPT_THRESHOLD_ENTRY);
            if (f && fwrite(buf, 1, GRZO__CKPT_THRESHOLD_ENTRY, f) != GRZO__CKPT_THRESHOLD_ENTRY) return GRZO_ERR_IO;
        }
    }
    *sum = h;
    return GRZO_OK;
}

GRZO__DEF grzo_status grzo_checkpoint_save(grzo_ctx *ctx, const char *path) {
    uint8_t header[GRZO__CKPT_HEADER], *buf;
    char *tmp;
    size_t plen;
    uint64_t sum = 0, payload;
    FILE *f;
    grzo_status s;
    int create_errno = 0, changed = 0;
    if (!ctx) return GRZO_ERR_INVALID_ARG;
    if (!path || !path[0]) return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "grzo_checkpoint_save: path is empty");
    if (ctx->state != GRZO__IDLE) return grzo__fail(ctx, GRZO_ERR_STATE, "grzo_checkpoint_save: not allowed during a step");
    if ((s = grzo__settle(ctx, "grzo_checkpoint_save")) != GRZO_OK) return s;
    plen = strlen(path);
    buf = (uint8_t *)grzo__alloc(ctx, GRZO__CKPT_CHUNK);
    tmp = (char *)grzo__alloc(ctx, plen + GRZO__TEMP_EXTRA);
    if (!buf || !tmp) { grzo__free(ctx, buf); grzo__free(ctx, tmp); return grzo__fail(ctx, GRZO_ERR_OUT_OF_MEMORY, "grzo_checkpoint_save: out of memory"); }
    payload = grzo__payload_bytes(ctx, ctx->desc.sparse_density > 0.0f);
    /* the header carries the payload hash, so hash first, then write header + payload */
    s = grzo__write_payload(ctx, NULL, buf, &sum);
    f = s == GRZO_OK ? grzo__create_temp(path, tmp, plen + GRZO__TEMP_EXTRA) : NULL;
    if (s == GRZO_OK && !f) {
        create_errno = errno ? errno : EIO;
        s = GRZO_ERR_IO;
    }
    if (s == GRZO_OK) {
        uint64_t sum2 = 0;
        grzo__encode_header(ctx, payload, sum, header);
        if (fwrite(header, 1, sizeof header, f) != sizeof header) s = GRZO_ERR_IO;
        if (s == GRZO_OK) s = grzo__write_payload(ctx, f, buf, &sum2);
        if (s == GRZO_OK && sum2 != sum) s = GRZO_ERR_BACKEND, changed = 1;   /* parameters changed under us */
        if (s == GRZO_OK && fflush(f) != 0) s = GRZO_ERR_IO;
#if !defined(_WIN32)
        if (s == GRZO_OK && fsync(fileno(f)) != 0) s = GRZO_ERR_IO;
#endif
    }
    if (f && fclose(f) != 0 && s == GRZO_OK) s = GRZO_ERR_IO;
#if defined(_WIN32)
    if (s == GRZO_OK) remove(path);   /* rename does not replace on Windows */
#endif
    if (s == GRZO_OK && rename(tmp, path) != 0) s = GRZO_ERR_IO;
    if (s != GRZO_OK && f) remove(tmp);
    if (s == GRZO_OK) grzo__sync_folder(path, tmp);   /* tmp is longer than path + 2 */
    grzo__free(ctx, buf);
    grzo__free(ctx, tmp);
    if (create_errno)
        return grzo__fail(ctx, s, "grzo_checkpoint_save: could not write '%s': cannot create '%s.tmp': %s; any previous file there is intact",
                          path, path, strerror(create_errno));
    if (s != GRZO_OK && s != GRZO_ERR_IO && !changed) {
        /* reading the parameters back failed: the backend's own message says why (a device
           error's name), which the status alone does not */
        char what[320];
        snprintf(what, sizeof what, "grzo_checkpoint_save: could not write '%s' (any previous file there is intact): reading "
                 "the parameters", path);
        return grzo__backend_fail(ctx, s, what);
    }
    if (changed)
        return grzo__fail(ctx, s, "grzo_checkpoint_save: could not write '%s': the parameters changed while they were read "
                          "(another thread wrote them?); any previous file there is intact", path);
    if (s != GRZO_OK)
        return grzo__fail(ctx, s, "grzo_checkpoint_save: could not write '%s' (%s); any previous file there is intact", path, grzo_status_str(s));
    return GRZO_OK;
}

typedef struct grzo__ckpt_header {
    uint64_t payload, sum, seed, step, degenerate_total;
    grzo_desc d;
    uint32_t n_blocks;
} grzo__ckpt_header;

static grzo_status grzo__parse_header(grzo_ctx *ctx, const uint8_t *h, grzo__ckpt_header *out) {
    uint32_t version;
    if (memcmp(h, GRZO__CKPT_MAGIC, 8) != 0) return grzo__fail(ctx, GRZO_ERR_FORMAT, "checkpoint: bad magic (not a grzo checkpoint)");
    if (grzo__get_u64(h + 248) != grzo__fnv1a(GRZO__FNV_INIT, h, 248)) return grzo__fail(ctx, GRZO_ERR_FORMAT, "checkpoint: header checksum mismatch (corrupted)");
    version = grzo__get_u32(h + 8);
    if (version != GRZO__CKPT_VERSION && version != GRZO__CKPT_VERSION_VARIANTS)
        return grzo__fail(ctx, GRZO_ERR_VERSION, "checkpoint: version %u, this grzo reads %u and %u", (unsigned)version,
                          GRZO__CKPT_VERSION, GRZO__CKPT_VERSION_VARIANTS);
    if (grzo__get_u32(h + 12) != GRZO__CKPT_HEADER) return grzo__fail(ctx, GRZO_ERR_FORMAT, "checkpoint: bad header size");
    out->payload = grzo__get_u64(h + 16);
    out->sum = grzo__get_u64(h + 24);
    out->d = ctx->desc;
    out->seed = grzo__get_u64(h + 32);
    out->step = grzo__get_u64(h + 40);
    out->d.seed = out->seed;
    out->d.estimator = (grzo_estimator)grzo__get_u32(h + 48);
    out->d.noise = (grzo_noise_dist)grzo__get_u32(h + 52);
    out->d.lr = grzo__get_f32(h + 56);
    out->d.sigma = grzo__get_f32(h + 60);
    out->d.norm_eps = grzo__get_f32(h + 64);
    out->d.weight_decay = grzo__get_f32(h + 68);
    out->d.warmup_steps = (int64_t)grzo__get_u64(h + 72);
    out->d.schedule = (grzo_schedule)grzo__get_u32(h + 80);
    out->d.fzoo_probes = (int32_t)grzo__get_u32(h + 84);
    out->n_blocks = grzo__get_u32(h + 88);
    out->degenerate_total = grzo__get_u64(h + 96);
    out->d.sparse_density = version == GRZO__CKPT_VERSION_VARIANTS ? grzo__get_f32(h + 104) : 0.0f;
    out->d.lowrank_rank = version == GRZO__CKPT_VERSION_VARIANTS ? (int32_t)grzo__get_u32(h + 108) : 0;
    out->d.lowrank_every = version == GRZO__CKPT_VERSION_VARIANTS ? (int32_t)grzo__get_u32(h + 112) : 0;
    out->d.quant_bits = version == GRZO__CKPT_VERSION_VARIANTS ? (int32_t)grzo__get_u32(h + 116) : 0;
    {
        char msg[256];
        if (grzo__validate_desc(&out->d, msg, sizeof msg) != GRZO_OK)
            return grzo__fail(ctx, GRZO_ERR_FORMAT, "checkpoint: invalid optimizer settings: %s", msg);
        if (out->d.lowrank_rank > 0 && out->d.lowrank_every == 0)
            return grzo__fail(ctx, GRZO_ERR_FORMAT, "checkpoint: invalid optimizer settings: lowrank_every is 0");
        if (grzo__check_variant_caps(&out->d, &ctx->caps, ctx->desc.backend->iface->name, msg, sizeof msg) != GRZO_OK)
            return grzo__fail(ctx, GRZO_ERR_UNSUPPORTED, "checkpoint: %s", msg);
    }
    /* UINT32_MAX is the exhausted counter that 2^32 - 1 steps leave (grzo_step_begin then
       refuses): a saved context in that state must load again */
    if (out->step > (uint64_t)UINT32_MAX || out->degenerate_total > out->step)
        return grzo__fail(ctx, GRZO_ERR_FORMAT, "checkpoint: invalid step counters");
    if (out->n_blocks != ctx->n_blocks)
        return grzo__fail(ctx, GRZO_ERR_FORMAT, "checkpoint: %u blocks, the context has %u", (unsigned)out->n_blocks, (unsigned)ctx->n_blocks);
    if (out->payload != grzo__payload_bytes(ctx, out->d.sparse_density > 0.0f))
        return grzo__fail(ctx, GRZO_ERR_FORMAT, "checkpoint: payload of %llu bytes, the context's blocks need %llu",
                          (unsigned long long)out->payload, (unsigned long long)grzo__payload_bytes(ctx, out->d.sparse_density > 0.0f));
    return GRZO_OK;
}

/* Pass 1 (upload = 0): check the block table and the payload hash without touching any
   parameter. Pass 2 (upload = 1): copy the data into the blocks. */
static grzo_status grzo__read_payload(grzo_ctx *ctx, FILE *f, uint8_t *buf, const grzo__ckpt_header *hd, int upload) {
    uint32_t i;
    uint64_t h = GRZO__FNV_INIT;
    for (i = 0; i < ctx->n_blocks; i++) {
        uint8_t mine[GRZO__CKPT_BLOCK_ENTRY];
        if (fread(buf, 1, GRZO__CKPT_BLOCK_ENTRY, f) != GRZO__CKPT_BLOCK_ENTRY) return grzo__fail(ctx, GRZO_ERR_FORMAT, "checkpoint: truncated block table");
        grzo__encode_block_entry(&ctx->blocks[i], mine);
        if (memcmp(mine, buf, GRZO__CKPT_BLOCK_ENTRY) != 0)
            return grzo__fail(ctx, GRZO_ERR_FORMAT, "checkpoint: block %u (kind, dtype, shape or name) differs from the context's '%s'",
                              (unsigned)i, ctx->blocks[i].name);
        h = grzo__fnv1a(h, buf, GRZO__CKPT_BLOCK_ENTRY);
    }
    for (i = 0; i < ctx->n_blocks; i++) {
        const grzo__block *b = &ctx->blocks[i];
        size_t esz = grzo__dtype_size(b->p.dtype);
        uint64_t total = (uint64_t)(b->p.rows * b->p.cols) * esz, done = 0;
        while (done < total) {
            size_t n = (size_t)(total - done > GRZO__CKPT_CHUNK ? GRZO__CKPT_CHUNK : total - done);
            if (fread(buf, 1, n, f) != n) return grzo__fail(ctx, GRZO_ERR_FORMAT, "checkpoint: truncated data of block %u", (unsigned)i);
            h = grzo__fnv1a(h, buf, n);
            if (upload) {
                grzo_status s;
                if (esz == 4) grzo__f32_to_le(buf, n / 4);   /* the swap is its own inverse */
                s = grzo_backend_upload(ctx->desc.backend, (uint8_t *)b->p.data + done, buf, n);
                if (s != GRZO_OK) return grzo__backend_fail(ctx, s, "checkpoint: upload");
            }
            done += n;
        }
    }
    if (hd->d.sparse_density > 0.0f) {   /* the threshold table */
        for (i = 0; i < ctx->n_blocks; i++) {
            uint32_t set;
            float th;
            if (fread(buf, 1, GRZO__CKPT_THRESHOLD_ENTRY, f) != GRZO__CKPT_THRESHOLD_ENTRY)
                return grzo__fail(ctx, GRZO_ERR_FORMAT, "checkpoint: truncated threshold table");
            h = grzo__fnv1a(h, buf, GRZO__CKPT_THRESHOLD_ENTRY);
            set = grzo__get_u32(buf);
            th = grzo__get_f32(buf + 4);
            if (set > 1 || !(th >= 0.0f))
                return grzo__fail(ctx, GRZO_ERR_FORMAT, "checkpoint: invalid sparse threshold of block %u", (unsigned)i);
            if (upload) {
                ctx->blocks[i].sparse_ready = (int)set;
                ctx->blocks[i].sparse_h = th;
            }
        }
    } else if (upload) {
        for (i = 0; i < ctx->n_blocks; i++) ctx->blocks[i].sparse_ready = 0;
    }
    if (fgetc(f) != EOF) return grzo__fail(ctx, GRZO_ERR_FORMAT, "checkpoint: trailing bytes after the payload");
    if (h != hd->sum) return grzo__fail(ctx, GRZO_ERR_FORMAT, "checkpoint: payload checksum mismatch (corrupted)");
    return GRZO_OK;
}

GRZO__DEF grzo_status grzo_checkpoint_load(grzo_ctx *ctx, const char *path) {
    uint8_t header[GRZO__CKPT_HEADER], *buf;
    grzo__ckpt_header hd;
    FILE *f;
    grzo_status s;
    if (!ctx) return GRZO_ERR_INVALID_ARG;
    if (!path || !path[0]) return grzo__fail(ctx, GRZO_ERR_INVALID_ARG, "grzo_checkpoint_load: path is empty");
    if (ctx->state != GRZO__IDLE) return grzo__fail(ctx, GRZO_ERR_STATE, "grzo_checkpoint_load: not allowed during a step");
    f = fopen(path, "rb");
    if (!f) return grzo__fail(ctx, GRZO_ERR_IO, "grzo_checkpoint_load: cannot open '%s'", path);
    buf = (uint8_t *)grzo__alloc(ctx, GRZO__CKPT_CHUNK);
    if (!buf) { fclose(f); return grzo__fail(ctx, GRZO_ERR_OUT_OF_MEMORY, "grzo_checkpoint_load: out of memory"); }
    if (fread(header, 1, sizeof header, f) != sizeof header) s = grzo__fail(ctx, GRZO_ERR_FORMAT, "checkpoint: truncated header");
    else s = grzo__parse_header(ctx, header, &hd);
    if (s == GRZO_OK) s = grzo__read_payload(ctx, f, buf, &hd, 0);
    if (s == GRZO_OK && fseek(f, GRZO__CKPT_HEADER, SEEK_SET) != 0) s = grzo__fail(ctx, GRZO_ERR_IO, "checkpoint: seek failed");
    if (s == GRZO_OK) s = grzo__read_payload(ctx, f, buf, &hd, 1);
    fclose(f);
    grzo__free(ctx, buf);
    if (s != GRZO_OK) return s;
    ctx->desc = hd.d;
    ctx->step = (int64_t)hd.step;
    ctx->degenerate_total = (int64_t)hd.degenerate_total;
    {   /* the loaded values replace whatever an in-place shift left in the blocks */
        uint32_t i;
        for (i = 0; i < ctx->n_blocks; i++) ctx->blocks[i].shift = 0;
    }
    return GRZO_OK;
}

/* ---- the divergence guard (section 4b) ------------------------------------------------------------- */
GRZO__DEF grzo_status grzo_check_replicas(grzo_ctx *ctx) {
    const grzo_comm *cm;
    uint8_t *buf;
    uint64_t sum = 0, v[5];
    grzo_status s;
    if (!ctx) return GRZO_ERR_INVALID_ARG;
    /* between steps with or without ranks, so that a misplaced call shows in a single process */
    if (ctx->state != GRZO__IDLE) return grzo__fail(ctx, GRZO_ERR_STATE, "grzo_check_replicas: not allowed during a step");
    cm = ctx->desc.comm;
    if (!cm) return GRZO_OK;
    s = grzo__settle(ctx, "grzo_check_replicas");   /* on failure this rank still joins the collective */
    buf = s == GRZO_OK ? (uint8_t *)grzo__alloc(ctx, GRZO__CKPT_CHUNK) : NULL;
    if (s == GRZO_OK) s = buf ? grzo__write_payload(ctx, NULL, buf, &sum) : GRZO_ERR_OUT_OF_MEMORY;
    grzo__free(ctx, buf);
    /* max over ranks of x and of ~x gives max and min: they agree iff every rank has x.
       A rank that could not read its parameters still takes part (v[2] = 1). */
    v[0] = sum; v[1] = ~sum; v[2] = s != GRZO_OK; v[3] = (uint64_t)ctx->step; v[4] = ~(uint64_t)ctx->step;
    if (cm->iface->allreduce_max_u64(cm->self, v, 5) != GRZO_OK) {
        const char *detail = cm->iface->last_error ? cm->iface->last_error(cm->self) : NULL;
        return grzo__fail(ctx, GRZO_ERR_COMM, "grzo_check_replicas: the all-reduce failed at step %lld (%s)", (long long)ctx->step,
                          detail && detail[0] ? detail : "no detail");
    }
    if (v[2]) return grzo__fail(ctx, GRZO_ERR_COMM, "grzo_check_replicas: a rank could not read its parameters at step %lld", (long long)ctx->step);
    if (v[3] != ~v[4]) return grzo__fail(ctx, GRZO_ERR_COMM, "grzo_check_replicas: the ranks are at different steps (%llu .. %llu)",
                                         (unsigned long long)~v[4], (unsigned long long)v[3]);
    if (v[0] != ~v[1])
        return grzo__fail(ctx, GRZO_ERR_COMM, "grzo_check_replicas: the parameters differ between ranks after %lld steps (checksums "
                          "%016llx .. %016llx; rank %d has %016llx): the replicas diverged", (long long)ctx->step,
                          (unsigned long long)~v[1], (unsigned long long)v[0], (int)cm->rank, (unsigned long long)sum);
    return GRZO_OK;
}

#endif /* GRZO_IMPLEMENTATION */

/*
LICENSE (MIT)
Copyright (c) 2026 the grzo authors
Permission is hereby granted, free of charge, to any person obtaining a copy of this software
and associated documentation files (the "Software"), to deal in the Software without
restriction, including without limitation the rights to use, copy, modify, merge, publish,
distribute, sublicense, and/or sell copies of the Software, and to permit persons to whom the
Software is furnished to do so, subject to the following conditions: The above copyright
notice and this permission notice shall be included in all copies or substantial portions of
the Software. THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A
PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE
LIABLE FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR
OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER
DEALINGS IN THE SOFTWARE.
*/
