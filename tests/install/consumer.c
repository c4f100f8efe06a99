/* consumer.c - a program that uses grzo the way another project does: built against an
   installed prefix (pkg-config --cflags --libs grzo) or with grzo as a Meson subproject
   (tests/install/test_install.sh). It includes the headers with the documented lines,
   creates a CPU backend and a context, and takes one MeZO step on a 2-parameter quadratic
   through the ask/tell route, then checks the step against MeZO's rule computed here:
       z = (theta+ - theta) / sigma,  g = (l+ - l-) / (2 sigma),  theta' = theta - lr g z.
   With grzo-cuda's Cflags (GRZO_CUDA) it also links the CUDA backend and, where a device
   exists, takes the same step there. Exit 0 when every check holds, 1 otherwise. */
#define GRZO_IMPLEMENTATION
#include "grzo.h"
#include "backends/grzo_cpu.h"
#ifdef GRZO_CUDA
#include "backends/grzo_cuda.h"
#endif

#include <math.h>
#include <stdio.h>
#include <string.h>

enum { N_PARAMS = 2 };
static const float target[N_PARAMS] = { 1.0f, 0.5f };  /* gradient at 0: (-2, -1), never
                                                           orthogonal to a +-1 direction */

static double loss_at(const float *theta) {
    double l = 0.0;
    for (int i = 0; i < N_PARAMS; i++) l += (double)(theta[i] - target[i]) * (theta[i] - target[i]);
    return l;
}

static int fail(const char *what, grzo_status s, const grzo_ctx *ctx) {
    fprintf(stderr, "consumer: %s: %s%s%s\n", what, grzo_status_str(s),
            ctx ? ": " : "", ctx ? grzo_last_error(ctx) : "");
    return 1;
}

/* One MeZO step on the backend; 0 when theta moved by MeZO's rule and the loss fell. */
static int step_and_check(grzo_backend *be) {
    const float lr = 0.05f, sigma = 1e-3f;
    float theta0[N_PARAMS] = { 0.0f, 0.0f }, theta1[N_PARAMS], probe[2][N_PARAMS];
    float losses[2];
    void *theta = NULL, *scratch = NULL;
    grzo_ctx *ctx = NULL;
    grzo_block blk;
    grzo_step_info si;
    grzo_step_report rep;
    grzo_status s;
    int bad = 1;

    if ((s = grzo_backend_alloc(be, sizeof theta0, &theta)) != GRZO_OK ||
        (s = grzo_backend_alloc(be, sizeof theta0, &scratch)) != GRZO_OK ||
        (s = grzo_backend_upload(be, theta, theta0, sizeof theta0)) != GRZO_OK) {
        fail("backend memory", s, NULL);
        goto done;
    }
    s = grzo_create(&(grzo_desc){ .backend = be, .estimator = GRZO_ESTIMATOR_MEZO,
                                  .lr = lr, .sigma = sigma, .seed = 7 }, &ctx);
    if (s != GRZO_OK) { fail("grzo_create", s, NULL); goto done; }
    s = grzo_block_add(ctx, &(grzo_block_desc){ .kind = GRZO_BLOCK_VECTOR, .rows = N_PARAMS,
                                                .data = theta, .name = "theta" }, &blk);
    if (s != GRZO_OK) { fail("grzo_block_add", s, ctx); goto done; }

    if ((s = grzo_step_begin(ctx, 1, &si)) != GRZO_OK) { fail("grzo_step_begin", s, ctx); goto done; }
    if (si.n_passes != 2) { fprintf(stderr, "consumer: MeZO takes 2 passes, got %d\n", si.n_passes); goto done; }
    for (int p = 0; p < 2; p++) {  /* pass 0: theta + sigma z, pass 1: theta - sigma z */
        grzo_pass_info pi;
        if ((s = grzo_pass_begin(ctx, &pi)) != GRZO_OK ||
            (s = grzo_perturbed_params(ctx, blk, 0, scratch)) != GRZO_OK ||
            (s = grzo_backend_download(be, probe[p], scratch, sizeof probe[p])) != GRZO_OK) {
            fail("pass", s, ctx);
            goto done;
        }
        losses[p] = (float)loss_at(probe[p]);
        if ((s = grzo_pass_end(ctx, &losses[p])) != GRZO_OK) { fail("grzo_pass_end", s, ctx); goto done; }
    }
    if ((s = grzo_step_end(ctx, &rep)) != GRZO_OK) { fail("grzo_step_end", s, ctx); goto done; }
    if ((s = grzo_backend_download(be, theta1, theta, sizeof theta1)) != GRZO_OK) {
        fail("download", s, ctx);
        goto done;
    }

    bad = 0;
    const double g = ((double)losses[0] - losses[1]) / (2.0 * sigma);
    for (int i = 0; i < N_PARAMS; i++) {
        const double z = ((double)probe[0][i] - theta0[i]) / sigma;
        const double zm = (theta0[i] - (double)probe[1][i]) / sigma;
        const double want = theta0[i] - (double)lr * g * z;
        if (fabs(fabs(z) - 1.0) > 1e-3 || fabs(z - zm) > 1e-3) {   /* Rademacher z: +-1 */
            fprintf(stderr, "consumer: z[%d] = %g (+ pass) and %g (- pass), want equal, +-1\n", i, z, zm);
            bad = 1;
        }
        if (!(fabs(theta1[i] - want) <= 1e-3 * fabs(want) + 1e-6)) {
            fprintf(stderr, "consumer: theta[%d] = %.9g after the step, MeZO's rule gives %.9g\n", i, theta1[i], want);
            bad = 1;
        }
    }
    if (!(loss_at(theta1) < loss_at(theta0))) {
        fprintf(stderr, "consumer: loss %g after the step, %g before\n", loss_at(theta1), loss_at(theta0));
        bad = 1;
    }
    if (!bad)
        printf("consumer: %s backend, grzo %s: theta (0, 0) -> (%.6f, %.6f), loss %.4f -> %.4f\n",
               be->iface->name, grzo_version(), theta1[0], theta1[1], loss_at(theta0), loss_at(theta1));
done:
    grzo_destroy(ctx);
    grzo_backend_free(be, scratch);
    grzo_backend_free(be, theta);
    return bad;
}

int main(void) {
    grzo_backend cpu;
    grzo_status s = grzo_backend_cpu_create(&(grzo_cpu_desc){ .n_threads = 1 }, &cpu);
    if (s != GRZO_OK) return fail("grzo_backend_cpu_create", s, NULL);
    int bad = strcmp(cpu.iface->name, "cpu") != 0;
    if (bad) fprintf(stderr, "consumer: the CPU backend calls itself \"%s\"\n", cpu.iface->name);
    bad |= step_and_check(&cpu);
    grzo_backend_destroy(&cpu);
#ifdef GRZO_CUDA
    if (grzo_cuda_device_count() > 0) {
        grzo_backend gpu;
        if ((s = grzo_backend_cuda_create(&(grzo_cuda_desc){ .device = 0 }, &gpu)) != GRZO_OK)
            return fail("grzo_backend_cuda_create", s, NULL);
        bad |= step_and_check(&gpu);
        grzo_backend_destroy(&gpu);
    } else {
        printf("consumer: CUDA backend linked; no CUDA device, so no step on it\n");
    }
#endif
    return bad;
}
