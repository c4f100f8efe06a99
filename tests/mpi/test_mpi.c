/* test_mpi.c - data-parallel grzo over MPI (grzo.h section 4b), run under mpirun by
   tests/mpi/run_mpi.sh. Every rank also trains a single-process copy of the same model
   (desc.comm = NULL, per_example_ops = 1) and compares bits with the sharded one, so one
   run checks "sharded == single process" on every rank.

   Cases (argv[1]):
     train    the probe MLP, every estimator, B = 5 (uneven at 2 and 3 ranks) and B = 2 (a rank
              without examples at 3 ranks): parameters and reports bitwise equal to the
              single-process run after every step; the replica guard runs every 2 steps
     align    grzo_align_begin/end sharded: the same B_eff bits as one process
     nan      the last rank's example has a NaN input: every rank gets GRZO_ERR_NONFINITE from
              the same step, no parameter moves anywhere, and training then goes on in step
     forward  a forward callback that fails on the last rank (grzo_step): every rank returns
              its status, no parameter moves
     diverge  one rank's parameter is nudged (one ulp, then more): the replica guard fails on
              every rank and names the step, on demand and inside grzo_step_end
     desc     a bad desc.comm (rank out of range, no collectives, another API version) or a bad
              per_example_ops / replica_check_every is refused; without comm the check is a no-op
     mismatch the last rank runs another estimator, then another B, than the others: every
              rank refuses the step (GRZO_ERR_COMM, naming the rank whose pass differs) and no
              parameter moves anywhere
     comm     backends/grzo_mpi.h itself: an uneven all-gather (a rank without floats) lands in
              rank order, the maximum of uint64s, the counters of both, counts MPI's ints cannot
              hold refused before any message, a collective MPI refuses returned with MPI's
              words, a duplicate communicator, a failed create leaving zeros, destroy and
              stats of NULL or of another comm
     kill     the last rank kills itself mid-training: the others must not hang (run_mpi.sh
              expects a nonzero exit within its timeout) */
#define GRZO_IMPLEMENTATION
#include "grzo.h"
#include "backends/grzo_cpu.h"

#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

#include <mpi.h>

#include "backends/grzo_mpi.h"
#include "examples/probe/probe.h"
#include "test_util.h"

static const mlp_shape SHAPE = {12, 16, 4};
enum { N_DATA = 64, STEPS = 6 };

static grzo_comm comm;

typedef struct pair { probe_model sharded, single; } pair;

static grzo_desc desc_of(grzo_estimator e) {
    grzo_desc d;
    memset(&d, 0, sizeof d);
    d.estimator = e;
    d.seed = 1234;
    d.lr = 0.05f;
    d.sigma = 1e-2f;
    d.fzoo_probes = 3;
    return d;
}

/* Both models from the same initial parameters: one sharded over the ranks, one alone. */
static void pair_create(pair *p, grzo_estimator e, int64_t check_every) {
    grzo_desc d = desc_of(e);
    float *theta0 = (float *)malloc((size_t)mlp_layout_of(SHAPE).n * sizeof(float));
    REQUIRE(theta0);
    mlp_init(SHAPE, 99, 1.0f, theta0);
    d.per_example_ops = 1;
    REQUIRE_OK(model_create(&p->single, SHAPE, &d, theta0));
    d.comm = &comm;
    d.per_example_ops = 0;   /* the default with comm: per example */
    d.replica_check_every = check_every;
    REQUIRE_OK(model_create(&p->sharded, SHAPE, &d, theta0));
    free(theta0);
}

static void pair_destroy(pair *p) {
    model_destroy(&p->sharded);
    model_destroy(&p->single);
}

static int same_params(const probe_model *a, const probe_model *b) {
    return memcmp(a->theta, b->theta, (size_t)a->lay.n * sizeof(float)) == 0;
}

static void make_data(dataset *d) {
    data_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.n = N_DATA;
    spec.shared = 0.5f;
    spec.spread = 1.0f;
    spec.labels = LABEL_TEACHER;
    REQUIRE(dataset_make(SHAPE, &spec, 7, d) == 0);
}

static void batch(uint32_t step, int B, int *idx) {
    int scratch[N_DATA];
    draw_batch(42, step, N_DATA, B, idx, scratch);
}

static const grzo_estimator ALL[] = {GRZO_ESTIMATOR_GRZO, GRZO_ESTIMATOR_CANONICAL, GRZO_ESTIMATOR_SHARED,
                                     GRZO_ESTIMATOR_MEZO, GRZO_ESTIMATOR_FZOO, GRZO_ESTIMATOR_MEZO_INPLACE};
static const char *name_of(grzo_estimator e) {
    static const char *const names[] = {"?", "grzo", "canonical", "shared", "mezo", "fzoo", "mezo-inplace"};
    return (int)e >= 0 && (int)e < GRZO_ESTIMATOR_COUNT ? names[e] : "?";
}

static void case_train(void) {
    dataset d;
    size_t k;
    int b;
    const int Bs[] = {5, 2};
    make_data(&d);
    for (k = 0; k < sizeof ALL / sizeof ALL[0]; k++)
        for (b = 0; b < 2; b++) {
            pair p;
            uint32_t step;
            int idx[8], B = Bs[b];
            pair_create(&p, ALL[k], 2);
            for (step = 0; step < STEPS; step++) {
                grzo_step_report r1, r2;
                batch(step, B, idx);
                CHECK_OK(model_train_step(&p.sharded, &d, idx, B, &r1));
                CHECK_OK(model_train_step(&p.single, &d, idx, B, &r2));
                CHECKF(same_params(&p.sharded, &p.single), "%s B=%d rank %d/%d step %u: parameters differ from one process",
                       name_of(ALL[k]), B, (int)comm.rank, (int)comm.n_ranks, (unsigned)step);
                CHECKF(memcmp(&r1.loss, &r2.loss, sizeof r1.loss) == 0 && memcmp(&r1.coeff_rms, &r2.coeff_rms, sizeof r1.coeff_rms) == 0,
                       "%s B=%d step %u: report %.17g/%.17g vs %.17g/%.17g", name_of(ALL[k]), B, (unsigned)step,
                       r1.loss, r1.coeff_rms, r2.loss, r2.coeff_rms);
            }
            CHECK_OK(grzo_check_replicas(p.sharded.ctx));
            CHECK(grzo_get_step(p.sharded.ctx) == STEPS);
            pair_destroy(&p);
        }
    dataset_free(&d);
}

static void case_align(void) {
    dataset d;
    pair p;
    int idx[7];
    grzo_align_report a1, a2;
    make_data(&d);
    pair_create(&p, GRZO_ESTIMATOR_GRZO, 0);
    batch(0, 7, idx);
    CHECK_OK(model_align(&p.sharded, &d, idx, 7, 4, 0, &a1));
    CHECK_OK(model_align(&p.single, &d, idx, 7, 4, 0, &a2));
    CHECKF(memcmp(&a1.b_eff, &a2.b_eff, sizeof a1.b_eff) == 0 && memcmp(&a1.b_eff_se, &a2.b_eff_se, sizeof a1.b_eff_se) == 0,
           "B_eff %.17g +- %.17g sharded vs %.17g +- %.17g", a1.b_eff, a1.b_eff_se, a2.b_eff, a2.b_eff_se);
    CHECK(same_params(&p.sharded, &p.single));
    pair_destroy(&p);
    dataset_free(&d);
}

static void case_nan(void) {
    dataset d;
    size_t k;
    const int B = 5;
    make_data(&d);
    for (k = 0; k < sizeof ALL / sizeof ALL[0]; k++) {
        pair p;
        int idx[5], i;
        float *before = (float *)malloc((size_t)mlp_layout_of(SHAPE).n * sizeof(float));
        grzo_step_report r;
        REQUIRE(before);
        pair_create(&p, ALL[k], 1);
        batch(0, B, idx);
        CHECK_OK(model_train_step(&p.sharded, &d, idx, B, &r));
        CHECK_OK(model_train_step(&p.single, &d, idx, B, &r));
        /* example B-1 of the next batch belongs to the last rank: only it sees the NaN */
        batch(1, B, idx);
        d.x[(int64_t)idx[B - 1] * SHAPE.d_in] = NAN;
        memcpy(before, p.sharded.theta, (size_t)p.sharded.lay.n * sizeof(float));
        CHECK_ST(model_train_step(&p.sharded, &d, idx, B, &r), GRZO_ERR_NONFINITE);
        CHECK_ST(model_train_step(&p.single, &d, idx, B, &r), GRZO_ERR_NONFINITE);
        CHECKF(memcmp(before, p.sharded.theta, (size_t)p.sharded.lay.n * sizeof(float)) == 0 ||
               ALL[k] == GRZO_ESTIMATOR_MEZO_INPLACE,   /* in-place MeZO restores within rounding (section 3) */
               "%s rank %d: a parameter moved in the abandoned step", name_of(ALL[k]), (int)comm.rank);
        CHECK(grzo_get_step(p.sharded.ctx) == 1);
        if (comm.rank != comm.n_ranks - 1)
            CHECKF(strstr(grzo_last_error(p.sharded.ctx), "rank") != NULL, "the message names the failing rank: %s",
                   grzo_last_error(p.sharded.ctx));
        d.x[(int64_t)idx[B - 1] * SHAPE.d_in] = 0.25f;
        for (i = 2; i < 4; i++) {   /* the ranks go on together, still equal to one process */
            batch((uint32_t)i, B, idx);
            CHECK_OK(model_train_step(&p.sharded, &d, idx, B, &r));
            CHECK_OK(model_train_step(&p.single, &d, idx, B, &r));
        }
        CHECKF(same_params(&p.sharded, &p.single), "%s: after the abandoned step the run left one process's path",
               name_of(ALL[k]));
        free(before);
        pair_destroy(&p);
    }
    dataset_free(&d);
}

/* losses from the segment alone (no model): the last rank fails at step 1 */
static grzo_status toy_forward(grzo_ctx *ctx, const grzo_pass_info *pi, float *losses, void *user) {
    int64_t c;
    (void)user;
    if (grzo_get_step(ctx) == 1 && comm.rank == comm.n_ranks - 1) return GRZO_ERR_IO;
    for (c = 0; c < pi->n_segments; c++) losses[c] = 1.0f + 0.125f * (float)pi->sign[c] + 0.01f * (float)(pi->example[c] * pi->example[c]);
    return GRZO_OK;
}

static void case_forward(void) {
    pair p;
    grzo_step_report r;
    float *before = (float *)malloc((size_t)mlp_layout_of(SHAPE).n * sizeof(float));
    REQUIRE(before);
    pair_create(&p, GRZO_ESTIMATOR_GRZO, 0);
    CHECK_OK(grzo_step(p.sharded.ctx, 4, toy_forward, NULL, &r));
    memcpy(before, p.sharded.theta, (size_t)p.sharded.lay.n * sizeof(float));
    CHECK_ST(grzo_step(p.sharded.ctx, 4, toy_forward, NULL, &r), GRZO_ERR_IO);
    CHECK(memcmp(before, p.sharded.theta, (size_t)p.sharded.lay.n * sizeof(float)) == 0);
    CHECK(grzo_get_step(p.sharded.ctx) == 1);
    CHECK_OK(grzo_check_replicas(p.sharded.ctx));
    free(before);
    pair_destroy(&p);
}

static void case_diverge(void) {
    dataset d;
    pair p;
    grzo_step_report r;
    int idx[5];
    make_data(&d);
    pair_create(&p, GRZO_ESTIMATOR_GRZO, 3);
    batch(0, 5, idx);
    CHECK_OK(model_train_step(&p.sharded, &d, idx, 5, &r));
    CHECK_OK(grzo_check_replicas(p.sharded.ctx));
    /* one ulp is enough for the checksum; a later update could round it away, so the
       change that must survive two more steps is larger */
    if (comm.rank == comm.n_ranks - 1) p.sharded.theta[3] = nextafterf(p.sharded.theta[3], INFINITY);
    CHECK_ST(grzo_check_replicas(p.sharded.ctx), GRZO_ERR_COMM);
    if (comm.rank == comm.n_ranks - 1) p.sharded.theta[3] += 0.5f;
    CHECK_ST(grzo_check_replicas(p.sharded.ctx), GRZO_ERR_COMM);
    CHECKF(strstr(grzo_last_error(p.sharded.ctx), "after 1 steps") != NULL, "names the step: %s", grzo_last_error(p.sharded.ctx));
    batch(1, 5, idx);
    CHECK_OK(model_train_step(&p.sharded, &d, idx, 5, &r));
    /* the guard inside grzo_step_end (every 3 steps) fails on every rank at step 3 */
    batch(2, 5, idx);
    {
        grzo_status s = model_train_step(&p.sharded, &d, idx, 5, &r);
        CHECK_ST(s, GRZO_ERR_COMM);
        CHECKF(strstr(grzo_last_error(p.sharded.ctx), "after 3 steps") != NULL, "names the step: %s", grzo_last_error(p.sharded.ctx));
    }
    pair_destroy(&p);
    dataset_free(&d);
}

static void case_desc(void) {
    grzo_backend be;
    grzo_ctx *ctx = NULL;
    grzo_desc d = desc_of(GRZO_ESTIMATOR_GRZO);
    grzo_comm bad = comm;
    grzo_comm_i iface = *comm.iface;
    REQUIRE_OK(grzo_backend_ref_create(&be));
    d.backend = &be;
    d.comm = &bad;
    bad.rank = comm.n_ranks;
    CHECK_ST(grzo_create(&d, &ctx), GRZO_ERR_INVALID_ARG);
    bad.rank = -1;
    CHECK_ST(grzo_create(&d, &ctx), GRZO_ERR_INVALID_ARG);
    bad = comm;
    bad.n_ranks = 0;
    CHECK_ST(grzo_create(&d, &ctx), GRZO_ERR_INVALID_ARG);
    bad = comm;
    bad.iface = NULL;
    CHECK_ST(grzo_create(&d, &ctx), GRZO_ERR_INVALID_ARG);
    bad.iface = &iface;
    iface.allgather_f32 = NULL;
    CHECK_ST(grzo_create(&d, &ctx), GRZO_ERR_INVALID_ARG);
    iface = *comm.iface;
    iface.allreduce_max_u64 = NULL;
    CHECK_ST(grzo_create(&d, &ctx), GRZO_ERR_INVALID_ARG);
    iface = *comm.iface;
    iface.api_version = GRZO_COMM_API_VERSION + 1;
    CHECK_ST(grzo_create(&d, &ctx), GRZO_ERR_VERSION);
    CHECK(ctx == NULL);
    d.comm = &comm;
    d.per_example_ops = 2;
    CHECK_ST(grzo_create(&d, &ctx), GRZO_ERR_INVALID_ARG);
    d.per_example_ops = 0;
    d.replica_check_every = -2;
    CHECK_ST(grzo_create(&d, &ctx), GRZO_ERR_INVALID_ARG);
    d.comm = NULL;
    d.replica_check_every = 0;
    REQUIRE_OK(grzo_create(&d, &ctx));
    CHECK_OK(grzo_check_replicas(ctx));   /* one process: nothing to compare */
    {
        grzo_desc r;
        memset(&r, 0, sizeof r);
        CHECK_OK(grzo_get_desc(ctx, &r));
        CHECK(r.per_example_ops == -1 && r.replica_check_every == 100);
    }
    grzo_destroy(ctx);
    grzo_backend_destroy(&be);
}

/* The counters after one call: what this rank sent and what it received. */
static void check_stats(const grzo_mpi_stats *before, uint64_t sent, uint64_t received) {
    grzo_mpi_stats now = grzo_mpi_comm_stats(&comm);
    CHECKF(now.calls == before->calls + 1 && now.bytes_sent == before->bytes_sent + sent &&
               now.bytes_received == before->bytes_received + received,
           "rank %d: stats %llu/%llu/%llu after %llu/%llu/%llu, want +1/+%llu/+%llu", (int)comm.rank,
           (unsigned long long)now.calls, (unsigned long long)now.bytes_sent, (unsigned long long)now.bytes_received,
           (unsigned long long)before->calls, (unsigned long long)before->bytes_sent,
           (unsigned long long)before->bytes_received, (unsigned long long)sent, (unsigned long long)received);
}

/* Rank r sends r floats (rank 0 none), each 100 r + i: every rank receives them in order. */
static void comm_gather(void) {
    int64_t counts[8], total = 0;
    float send[8], recv[64];
    grzo_mpi_stats before = grzo_mpi_comm_stats(&comm);
    int r, i, k = 0;
    REQUIRE(comm.n_ranks <= 8);
    for (r = 0; r < comm.n_ranks; r++) total += counts[r] = r;
    for (i = 0; i < comm.rank; i++) send[i] = (float)(100 * comm.rank + i);
    for (i = 0; i < 64; i++) recv[i] = -1;
    CHECK_OK(comm.iface->allgather_f32(comm.self, send, recv, counts));
    for (r = 0; r < comm.n_ranks; r++)
        for (i = 0; i < r; i++, k++) CHECKF(recv[k] == (float)(100 * r + i), "recv[%d] = %g", k, (double)recv[k]);
    CHECK(recv[total] == -1);
    check_stats(&before, (uint64_t)comm.rank * sizeof(float), (uint64_t)total * sizeof(float));
}

static void comm_max(void) {
    uint64_t v[3] = {(uint64_t)comm.rank, UINT64_MAX - (uint64_t)comm.rank, 7};
    grzo_mpi_stats before = grzo_mpi_comm_stats(&comm);
    CHECK_OK(comm.iface->allreduce_max_u64(comm.self, v, 3));
    CHECK(v[0] == (uint64_t)comm.n_ranks - 1 && v[1] == UINT64_MAX && v[2] == 7);
    check_stats(&before, 3 * sizeof(uint64_t), 3 * sizeof(uint64_t));
}

/* Counts the same on every rank, so every rank refuses before the collective (none waits):
   the message names the total, and nothing is counted. */
static void comm_refused_counts(void) {
    static const struct { int64_t c0, c1; const char *total; } bad[] = {
        {-1, 0, "all-gather: -1 floats"}, {(int64_t)INT_MAX + 1, 0, "all-gather: 2147483648 floats"},
        {INT_MAX, 1, "all-gather: 2147483648 floats"}};
    int64_t counts[8] = {0};
    float buf[1] = {0};
    size_t k;
    for (k = 0; k < sizeof bad / sizeof *bad; k++) {
        grzo_mpi_stats before = grzo_mpi_comm_stats(&comm), after;
        counts[0] = bad[k].c0;
        counts[1] = bad[k].c1;
        CHECK_ST(comm.iface->allgather_f32(comm.self, buf, buf, counts), GRZO_ERR_COMM);
        CHECKF(strstr(comm.iface->last_error(comm.self), bad[k].total) &&
                   strstr(comm.iface->last_error(comm.self), "exceed MPI's int counts"),
               "case %d: %s", (int)k, comm.iface->last_error(comm.self));
        after = grzo_mpi_comm_stats(&comm);
        CHECK(after.calls == before.calls && after.bytes_sent == before.bytes_sent);
    }
}

/* A collective MPI itself refuses (a negative count, on every rank) comes back as
   GRZO_ERR_COMM with MPI's own error string, not as an abort of the job. */
static void comm_refused_by_mpi(void) {
    uint64_t v = 1;
    char want[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(MPI_ERR_COUNT, want, &len);
    CHECK_ST(comm.iface->allreduce_max_u64(comm.self, &v, -1), GRZO_ERR_COMM);
    CHECKF(strncmp(comm.iface->last_error(comm.self), "MPI_Allreduce: ", 15) == 0 &&
               strstr(comm.iface->last_error(comm.self), want),
           "%s (want MPI's '%s')", comm.iface->last_error(comm.self), want);
}

/* create and destroy at their edges */
static void comm_lifecycle(void) {
    grzo_comm c, other;
    grzo_comm_i iface = *comm.iface;
    int rank, size, same = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(comm.rank == rank && comm.n_ranks == size);
    CHECK_ST(grzo_mpi_comm_create(MPI_COMM_WORLD, NULL), GRZO_ERR_INVALID_ARG);
    /* grzo's messages go on a duplicate: the same group, another context */
    MPI_Comm_compare(MPI_COMM_WORLD, ((grzo_mpi *)comm.self)->comm, &same);
    CHECK(same == MPI_CONGRUENT);
    /* MPI_COMM_NULL: MPI reports the error (on MPI_COMM_WORLD, returning for this) */
    memset(&c, 0x5A, sizeof c);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    CHECK_ST(grzo_mpi_comm_create(MPI_COMM_NULL, &c), GRZO_ERR_COMM);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    CHECK(c.iface == NULL && c.self == NULL && c.rank == 0 && c.n_ranks == 0);
    /* destroy: NULL, a zeroed comm, a real one (then zeroed), twice */
    grzo_mpi_comm_destroy(NULL);
    grzo_mpi_comm_destroy(&c);
    REQUIRE_OK(grzo_mpi_comm_create(MPI_COMM_WORLD, &c));
    grzo_mpi_comm_destroy(&c);
    CHECK(c.iface == NULL && c.self == NULL && c.rank == 0 && c.n_ranks == 0);
    grzo_mpi_comm_destroy(&c);
    /* stats: zeros for NULL and for a comm of another implementation */
    other = comm;
    other.iface = &iface;
    other.self = &size;   /* not a grzo_mpi: must not be read as one */
    {
        grzo_mpi_stats a = grzo_mpi_comm_stats(NULL), b = grzo_mpi_comm_stats(&other);
        CHECK(!a.calls && !a.bytes_sent && !a.bytes_received && !b.calls && !b.bytes_sent && !b.bytes_received);
    }
}

static void case_comm(void) {
    comm_gather();
    comm_max();
    comm_gather();   /* the counters add up */
    comm_refused_counts();
    comm_refused_by_mpi();
    comm_lifecycle();
}

static void case_kill(void) {
    dataset d;
    pair p;
    grzo_step_report r;
    int idx[5];
    uint32_t step;
    make_data(&d);
    pair_create(&p, GRZO_ESTIMATOR_GRZO, 0);
    for (step = 0; step < 1000; step++) {
        if (step == 3 && comm.rank == comm.n_ranks - 1) raise(SIGKILL);
        batch(step, 5, idx);
        if (model_train_step(&p.sharded, &d, idx, 5, &r) != GRZO_OK) break;
    }
    /* a surviving rank returns here only if MPI reported the failure: still an error */
    fprintf(stderr, "rank %d: stopped at step %u: %s\n", (int)comm.rank, (unsigned)step, grzo_last_error(p.sharded.ctx));
    pair_destroy(&p);
    dataset_free(&d);
    tu_failures++;
}

/* Ranks whose passes differ must not read each other's losses at the wrong places: first a
   different estimator (the gather's sizes agree, only the shape word tells), then a different
   B (the sizes differ too: the collective may itself fail on some ranks). */
static void case_mismatch(void) {
    dataset d;
    int idx[8], last = comm.rank == comm.n_ranks - 1, round;
    make_data(&d);
    for (round = 0; round < 2; round++) {
        pair p;
        grzo_step_report r;
        float *before = (float *)malloc((size_t)mlp_layout_of(SHAPE).n * sizeof(float));
        int B = round == 1 && last ? 3 : 5;
        grzo_status st;
        REQUIRE(before);
        pair_create(&p, round == 0 && last ? GRZO_ESTIMATOR_CANONICAL : GRZO_ESTIMATOR_GRZO, 0);
        memcpy(before, p.sharded.theta, (size_t)p.sharded.lay.n * sizeof(float));
        batch(0, B, idx);
        st = model_train_step(&p.sharded, &d, idx, B, &r);
        CHECKF(st == GRZO_ERR_COMM, "round %d rank %d: %s (%s)", round, (int)comm.rank, grzo_status_str(st),
               grzo_last_error(p.sharded.ctx));
        if (round == 0)
            CHECKF(strstr(grzo_last_error(p.sharded.ctx), "differs") != NULL, "rank %d: %s", (int)comm.rank,
                   grzo_last_error(p.sharded.ctx));
        CHECK(memcmp(before, p.sharded.theta, (size_t)p.sharded.lay.n * sizeof(float)) == 0);
        CHECK(grzo_get_step(p.sharded.ctx) == 0);
        free(before);
        pair_destroy(&p);
    }
    dataset_free(&d);
}

int main(int argc, char **argv) {
    int rc;
    MPI_Init(&argc, &argv);
    tu_args(argc, argv);
    REQUIRE_OK(grzo_mpi_comm_create(MPI_COMM_WORLD, &comm));
    if (tu_case("train")) case_train();
    if (tu_case("align")) case_align();
    if (tu_case("nan")) case_nan();
    if (tu_case("forward")) case_forward();
    if (tu_case("diverge")) case_diverge();
    if (tu_case("desc")) case_desc();
    if (tu_case("mismatch")) case_mismatch();
    if (tu_case("comm")) case_comm();
    if (argc > 1 && tu_case("kill")) case_kill();
    grzo_mpi_comm_destroy(&comm);
    rc = tu_finish("test_mpi");
    MPI_Finalize();
    return rc;
}
