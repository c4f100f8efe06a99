/* grzo_mpi.h - grzo's communication interface (grzo_comm, grzo.h section 4b) on MPI.

   Include after grzo.h and <mpi.h> in the files that use it (the functions are static: a
   small header, no implementation macro):

       MPI_Init(&argc, &argv);
       grzo_comm comm;  grzo_mpi_comm_create(MPI_COMM_WORLD, &comm);
       grzo_create(&(grzo_desc){ .backend = &be, .comm = &comm, ... }, &ctx);
       ... train: every rank runs the same loop; grzo hands each its share ...
       grzo_destroy(ctx);  grzo_mpi_comm_destroy(&comm);  MPI_Finalize();

   The collectives run on a duplicate of the caller's communicator, so grzo's messages never
   match the caller's, with MPI_ERRORS_RETURN: a failed collective comes back as
   GRZO_ERR_COMM (with MPI's error string) instead of aborting the job. Per step grzo sends
   copies_per_pass * B + n_ranks floats per pass (MPI_Allgatherv), and every
   desc.replica_check_every steps five uint64 (MPI_Allreduce, MPI_MAX). No parameter, no
   gradient ever crosses: the update is regenerated from the seed on every rank.

   One rank per GPU works the same way: each rank creates its CUDA backend on its own
   device (select it from the node-local rank, e.g. OMPI_COMM_WORLD_LOCAL_RANK) and passes
   the same host-side grzo_comm; the losses are host floats, so no CUDA-aware MPI is needed. */
#ifndef GRZO_MPI_H
#define GRZO_MPI_H

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "../grzo.h"

#if defined(__GNUC__) || defined(__clang__)
#define GRZO_MPI__FN static __attribute__((unused))   /* a file may use only some */
#else
#define GRZO_MPI__FN static
#endif

/* What this rank has passed through the collectives (for benchmarks and logs). */
typedef struct grzo_mpi_stats {
    uint64_t calls;              /* collectives */
    uint64_t bytes_sent;         /* this rank's contributions */
    uint64_t bytes_received;     /* what it received (all-gather: every rank's floats, its own included) */
} grzo_mpi_stats;

typedef struct grzo_mpi {
    MPI_Comm comm;               /* grzo's duplicate of the caller's communicator */
    int n_ranks;
    grzo_mpi_stats stats;
    int *counts, *displs;        /* n_ranks each: MPI_Allgatherv's int arguments */
    char err[MPI_MAX_ERROR_STRING + 64];
} grzo_mpi;

GRZO_MPI__FN grzo_status grzo_mpi__fail(grzo_mpi *m, const char *what, int rc) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "MPI error %d", rc);
    snprintf(m->err, sizeof m->err, "%s: %s", what, msg);
    return GRZO_ERR_COMM;
}

GRZO_MPI__FN grzo_status grzo_mpi__allgather_f32(void *self, const float *send, float *recv, const int64_t *counts) {
    grzo_mpi *m = (grzo_mpi *)self;
    int64_t at = 0;
    int r, rc, mine;
    MPI_Comm_rank(m->comm, &mine);
    for (r = 0; r < m->n_ranks; r++) {
        if (counts[r] < 0 || counts[r] > INT_MAX || at > INT_MAX - counts[r]) {
            snprintf(m->err, sizeof m->err, "all-gather: %lld floats exceed MPI's int counts", (long long)(at + counts[r]));
            return GRZO_ERR_COMM;
        }
        m->counts[r] = (int)counts[r];
        m->displs[r] = (int)at;
        at += counts[r];
    }
    rc = MPI_Allgatherv(send, m->counts[mine], MPI_FLOAT, recv, m->counts, m->displs, MPI_FLOAT, m->comm);
    m->stats.calls++;
    m->stats.bytes_sent += (uint64_t)m->counts[mine] * sizeof(float);
    m->stats.bytes_received += (uint64_t)at * sizeof(float);
    return rc == MPI_SUCCESS ? GRZO_OK : grzo_mpi__fail(m, "MPI_Allgatherv", rc);
}

GRZO_MPI__FN grzo_status grzo_mpi__allreduce_max_u64(void *self, uint64_t *inout, int32_t n) {
    grzo_mpi *m = (grzo_mpi *)self;
    int rc = MPI_Allreduce(MPI_IN_PLACE, inout, n, MPI_UINT64_T, MPI_MAX, m->comm);
    m->stats.calls++;
    m->stats.bytes_sent += (uint64_t)n * sizeof(uint64_t);
    m->stats.bytes_received += (uint64_t)n * sizeof(uint64_t);
    return rc == MPI_SUCCESS ? GRZO_OK : grzo_mpi__fail(m, "MPI_Allreduce", rc);
}

GRZO_MPI__FN const char *grzo_mpi__last_error(void *self) { return ((grzo_mpi *)self)->err; }

static const grzo_comm_i grzo_mpi__iface = {GRZO_COMM_API_VERSION, "mpi", grzo_mpi__allgather_f32,
                                            grzo_mpi__allreduce_max_u64, grzo_mpi__last_error};

/* A grzo_comm over (a duplicate of) comm: rank and size from it. Release with
   grzo_mpi_comm_destroy before MPI_Finalize. */
GRZO_MPI__FN grzo_status grzo_mpi_comm_create(MPI_Comm comm, grzo_comm *out) {
    grzo_mpi *m;
    int rank, size;
    if (!out) return GRZO_ERR_INVALID_ARG;
    memset(out, 0, sizeof *out);
    if (MPI_Comm_rank(comm, &rank) != MPI_SUCCESS || MPI_Comm_size(comm, &size) != MPI_SUCCESS) return GRZO_ERR_COMM;
    m = (grzo_mpi *)calloc(1, sizeof *m);
    if (!m) return GRZO_ERR_OUT_OF_MEMORY;
    m->counts = (int *)calloc((size_t)size, sizeof(int));
    m->displs = (int *)calloc((size_t)size, sizeof(int));
    if (!m->counts || !m->displs) { free(m->counts); free(m->displs); free(m); return GRZO_ERR_OUT_OF_MEMORY; }
    if (MPI_Comm_dup(comm, &m->comm) != MPI_SUCCESS) { free(m->counts); free(m->displs); free(m); return GRZO_ERR_COMM; }
    MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
    m->n_ranks = size;
    out->iface = &grzo_mpi__iface;
    out->self = m;
    out->rank = rank;
    out->n_ranks = size;
    return GRZO_OK;
}

GRZO_MPI__FN void grzo_mpi_comm_destroy(grzo_comm *c) {
    grzo_mpi *m;
    if (!c || !c->self) return;
    m = (grzo_mpi *)c->self;
    MPI_Comm_free(&m->comm);
    free(m->counts);
    free(m->displs);
    free(m);
    memset(c, 0, sizeof *c);
}

/* The counters of a grzo_comm made by grzo_mpi_comm_create (zeros for anything else). */
GRZO_MPI__FN grzo_mpi_stats grzo_mpi_comm_stats(const grzo_comm *c) {
    grzo_mpi_stats none;
    memset(&none, 0, sizeof none);
    return c && c->iface == &grzo_mpi__iface ? ((const grzo_mpi *)c->self)->stats : none;
}

#endif /* GRZO_MPI_H */
