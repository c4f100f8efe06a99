/* bench_form_kernel.c - the FMA-forming micro-kernel of a GRZO pass on Intel's cores
   (grzo__form_ukr_fma_32xn, backends/grzo_cpu_fused.h) against BLIS's own kernel on an
   unformed weight panel (what MeZO's pass runs, once its block is formed), on 1 thread, with
   the fp32 peak of an FMA loop beside them: how far forming a copy's weight in the kernel
   sits from the unformed kernel and from the machine, and how much of that is the kernel
   and how much is where its operands live. Beside them the fused path's own loop over a
   copy's block (grzo__form_fma_block), which forms in the first X sliver only and keeps the
   weights for the others.

   Three layouts, the loops of the fused path (each X sliver of a copy against every 32-row
   weight sliver of a block):
   - in cache: K 384, one block of 96 weight rows, one copy (X slivers packed 12 wide), the
     same Y tile every call;
   - in place: K 512, 1024 weight rows in blocks of 96, 32 copies, each with its own packed
     rows and Y rows (the operands of one K block of a 1024 x 1024 GRZO linear at B = 16,
     64 rows a copy: X 4 MB and Y 8 MB, past L2);
   - in place, 2 copies: the same with X and Y small enough for L2.
   The kernels alternate round by round in one process and each figure is the best round:
   on a shared machine whose speed swings, only figures taken side by side compare.
   GFLOP/s count 2 x rows x weight rows x K (the forming FMAs not counted); BLIS's kernel runs
   copies of 72 rows in whole 12-column tiles, the forming kernel copies of 64 in its own
   split, each on its natural layout.

   Run:  ./build/bench/bench_form_kernel [--rounds N]   (N default 20; needs BLIS and an
   AVX-512 CPU, else it says why and exits 0) */
#define _POSIX_C_SOURCE 200809L
#define GRZO_IMPLEMENTATION
#include "grzo.h"
#include "backends/grzo_cpu.h"
#include "cli_args.h"
#include "../examples/common/cpu_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(GRZO_USE_BLIS) && defined(GRZO__FORM_UKR)
/* a copy's rows and its 12-wide X slivers: 64 rows as 11 x 4 and 10 x 2 for the forming kernel
   (grzo__even_split), 72 as 12 x 6 for BLIS's, whose edge tiles pay for the whole 12 columns
   (MeZO's pass gives it whole slivers but one) */
enum { ROWS = 64, BLIS_ROWS = 72, SLIVERS = 6 };

typedef struct layout {
    const char *name;
    int64_t kc, d_out, block, copies, repeat;   /* repeat: passes per timed round */
    int shared_y;                               /* every call writes the same Y tile */
} layout;

typedef struct operands {
    float *w, *u, *fsel, *x, *y;   /* block's packed W and U (+-1), scales, packed X, Y */
    float *kept;                   /* the weights grzo__form_fma_block keeps */
    uint32_t *sw;                  /* s's sign words */
} operands;

static float *floats(size_t n) {   /* 64-byte aligned: BLIS's kernels load packed panels aligned */
    void *p = NULL;
    if (posix_memalign(&p, 64, (n ? n : 1) * sizeof(float)) != 0) {
        fprintf(stderr, "bench_form_kernel: out of memory\n");
        exit(1);
    }
    return (float *)p;
}

/* W, X and the scales Gaussian, U and s Rademacher (+-1), from grzo's counter RNG; the scales
   and s's signs tabled by the fused path's own helpers */
static void operands_make(const layout *l, operands *o) {
    const grzo_noise gauss = {1, 0, 0, GRZO_STREAM_BASE, GRZO_NOISE_GAUSSIAN}, signs = {1, 0, 1, GRZO_STREAM_BASE,
                                                                                       GRZO_NOISE_RADEMACHER};
    size_t xn = (size_t)l->copies * SLIVERS * 12 * (size_t)l->kc, wn = (size_t)(l->block * l->kc);
    size_t yn = (size_t)(l->shared_y ? 1 : l->copies) * BLIS_ROWS * (size_t)l->d_out;
    float *f = floats((size_t)l->block), *s = floats((size_t)l->kc);
    int64_t i;
    o->w = floats(wn);
    o->u = floats(wn);
    o->fsel = floats((size_t)(2 * l->block));
    o->kept = floats(wn);
    o->x = floats(xn);
    o->y = floats(yn);
    o->sw = (uint32_t *)malloc((size_t)l->kc * sizeof(uint32_t));
    if (!o->sw) {
        fprintf(stderr, "bench_form_kernel: out of memory\n");
        exit(1);
    }
    grzo_noise_fill(&gauss, 0, wn, o->w);
    grzo_noise_fill(&gauss, wn, xn, o->x);
    grzo_noise_fill(&signs, 0, wn, o->u);
    grzo_noise_fill(&signs, wn, (size_t)l->kc, s);
    for (i = 0; i < l->block; i++) f[i] = 1e-3f * (float)(i % 32 + 1);
    grzo__fma_scales(f, l->block / 32, o->fsel);
    grzo__s_sign_words(s, l->kc, o->sw);
    memset(o->y, 0, yn * sizeof(float));
    free(f);
    free(s);
}

static void operands_free(operands *o) {
    free(o->w); free(o->u); free(o->fsel); free(o->x); free(o->y); free(o->sw); free(o->kept);
}

enum { BLIS_UNFORMED, FORM_EVERY_SLIVER, FUSED_BLOCK, N_VARIANTS };

/* One pass over the layout: every block of weight rows, every copy, every X sliver against
   every weight sliver of the block (FUSED_BLOCK: the fused path's function does those loops) */
static void pass(const grzo__ukr *uk, const layout *l, const operands *o, int variant) {
    const int form = variant != BLIS_UNFORMED;
    float alpha = 1.0f, beta = 1.0f;
    auxinfo_t aux;
    int64_t j0, c, t, q, p;
    memset(&aux, 0, sizeof aux);
    for (j0 = 0; j0 < l->d_out; j0 += l->block) {
        int64_t jb = l->d_out - j0 < l->block ? l->d_out - j0 : l->block;
        for (c = 0; c < l->copies; c++) {
            const float *xc = o->x + (size_t)c * SLIVERS * 12 * (size_t)l->kc;
            float *yc = o->y + (size_t)(l->shared_y ? 0 : c) * BLIS_ROWS * (size_t)l->d_out + j0;
            if (variant == FUSED_BLOCK) {
                grzo__form_fma_block(o->w, o->u, o->sw, o->fsel, o->kept, 0, jb, xc, ROWS, l->kc, 1, yc, l->d_out);
                continue;
            }
            for (t = 0; t < SLIVERS; t++) {
                int64_t n = form ? grzo__even_split(ROWS, SLIVERS, t, &p) : 12;
                if (!form) p = 12 * t;
                const float *xs = xc + t * 12 * l->kc;
                for (q = 0; q < jb; q += 32) {
                    int64_t h = jb - q < 32 ? jb - q : 32;
                    float *cq = yc + p * l->d_out + q;
                    if (form)
                        grzo__form_ukr_fma_32xn[n](l->kc, o->w + q * l->kc, o->u + q * l->kc, o->sw, o->fsel + 2 * q,
                                                   xs, h, 1, cq, l->d_out);
                    else
                        uk->kernel((dim_t)h, (dim_t)n, (dim_t)l->kc, &alpha, o->w + q * l->kc, (float *)xs, &beta, cq,
                                   1, (inc_t)l->d_out, &aux, uk->cntx);
                }
            }
        }
    }
}

static void run_layout(const grzo__ukr *uk, const layout *l, int rounds) {
    operands o;
    double best[N_VARIANTS], flops[N_VARIANTS];
    int r, v, i;
    operands_make(l, &o);
    for (v = 0; v < N_VARIANTS; v++) best[v] = 1e30;
    for (r = 0; r < rounds; r++)
        for (v = 0; v < N_VARIANTS; v++) {
            double t0 = cpu_env_now();
            for (i = 0; i < l->repeat; i++) pass(uk, l, &o, v);
            t0 = cpu_env_now() - t0;
            if (t0 < best[v]) best[v] = t0;
        }
    for (v = 0; v < N_VARIANTS; v++)
        flops[v] = 2.0 * (double)l->repeat * (double)l->copies * (v == BLIS_UNFORMED ? BLIS_ROWS : ROWS) *
                   (double)l->d_out * (double)l->kc;
    for (v = 0; v < N_VARIANTS; v++) best[v] /= flops[v];   /* seconds a FLOP */
    printf("| %s | %.1f | %.1f | %.1f | %.3f | %.3f |\n", l->name, 1e-9 / best[FORM_EVERY_SLIVER],
           1e-9 / best[FUSED_BLOCK], 1e-9 / best[BLIS_UNFORMED], best[FORM_EVERY_SLIVER] / best[BLIS_UNFORMED],
           best[FUSED_BLOCK] / best[BLIS_UNFORMED]);
    operands_free(&o);
}
#endif

int main(int argc, char **argv) {
    int64_t rounds = 20;
    char err[256];
    int i;
    cpu_env_reexec(argv);   /* the kernels grzo's programs run: BLIS_ARCH_TYPE as they set it */
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
            if (cli_parse_int("--rounds", argv[++i], 1, 100000, &rounds, err, sizeof err) != 0) {
                fprintf(stderr, "bench_form_kernel: %s\n", err);
                return 2;
            }
        } else if (strcmp(argv[i], "--help") == 0) {
            printf("usage: %s [--rounds N]\nTimes the FMA-forming kernel against BLIS's on an unformed panel (1 thread).\n",
                   argv[0]);
            return 0;
        } else {
            fprintf(stderr, "bench_form_kernel: unknown argument '%s' (try --help)\n", argv[i]);
            return 2;
        }
    }
#if defined(GRZO_USE_BLIS) && defined(GRZO__FORM_UKR)
    {
        static const layout layouts[3] = {
            {"in cache: K 384, 96 weight rows, 1 copy, 200 passes", 384, 96, 96, 1, 200, 1},
            {"in place: K 512, 1024 weight rows in blocks of 96, 32 copies", 512, 1024, 96, 32, 1, 0},
            {"in place, 2 copies (X and Y within L2), 16 passes", 512, 1024, 96, 2, 16, 0},
        };
        grzo__ukr uk;
        if (!grzo__ukr_init(&uk) || !uk.form_in_kernel) {
            printf("bench_form_kernel: the forming kernels do not run here (needs BLIS's skx 32x12 kernel and AVX-512)\n");
            return 0;
        }
        printf("## grzo bench_form_kernel (1 thread, best of %d rounds, kernels alternated)\n\n", (int)rounds);
        printf("BLIS %s kernel %lldx%lld; grzo chooses the FMA-forming kernel on this CPU: %s; fp32 peak (FMA loop) "
               "%.1f GFLOP/s\n\n", uk.arch, (long long)uk.wp, (long long)uk.xp, uk.forming == GRZO__FORM_FMA ? "yes" : "no (AMD)",
               cpu_env_peak_gflops(1));
        printf("| layout | forming in every X sliver, GFLOP/s (64 rows a copy) | the fused path's block (forming in the "
               "first, kept after) | BLIS unformed (72 rows) | time a FLOP against BLIS's: every sliver | fused block "
               "|\n|---|---:|---:|---:|---:|---:|\n");
        for (i = 0; i < 3; i++) run_layout(&uk, &layouts[i], (int)rounds);
    }
#else
    printf("bench_form_kernel: this build has no forming kernel (it needs BLIS and x86-64)\n");
#endif
    return 0;
}
