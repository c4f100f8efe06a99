/* ranks.c - see ranks.h. */
#include "ranks.h"

#include <stdio.h>
#include <string.h>

#ifdef GRZO_FINETUNE_MPI
#include <mpi.h>
#include "backends/grzo_mpi.h"

int ft_ranks_init(int *argc, char ***argv, ft_ranks *r, char *err, size_t errlen) {
    grzo_status s;
    memset(r, 0, sizeof *r);
    r->n_ranks = 1;
    if (MPI_Init(argc, argv) != MPI_SUCCESS) { snprintf(err, errlen, "MPI_Init failed"); return -1; }
    r->mpi = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &r->n_ranks);
    if (r->n_ranks > 1 && (s = grzo_mpi_comm_create(MPI_COMM_WORLD, &r->comm)) != GRZO_OK) {
        snprintf(err, errlen, "rank %d: the MPI communicator: %s", r->rank, grzo_status_str(s));
        return -1;
    }
    /* only rank 0 speaks on stdout (the accuracies, --diagnose); every rank keeps stderr for errors */
    if (r->rank != 0 && !freopen("/dev/null", "w", stdout)) { snprintf(err, errlen, "rank %d: cannot silence stdout", r->rank); return -1; }
    return 0;
}

int ft_ranks_fail(ft_ranks *r, int code) {
    if (r->mpi && r->n_ranks > 1) {
        fflush(stdout);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, code);
    }
    return ft_ranks_exit(r, code);
}

void ft_ranks_report(const ft_ranks *r, int64_t steps, FILE *f) {
    grzo_mpi_stats st = grzo_mpi_comm_stats(&r->comm);
    if (r->rank != 0 || r->n_ranks < 2 || steps <= 0) return;
    fprintf(f, "communication (rank 0, %d ranks): %.1f collectives, %.0f bytes sent, %.0f bytes received per step\n",
            r->n_ranks, (double)st.calls / (double)steps, (double)st.bytes_sent / (double)steps,
            (double)st.bytes_received / (double)steps);
}

int ft_ranks_exit(ft_ranks *r, int code) {
    if (!r->mpi) return code;
    grzo_mpi_comm_destroy(&r->comm);
    MPI_Finalize();
    r->mpi = 0;
    return code;
}
#else
int ft_ranks_init(int *argc, char ***argv, ft_ranks *r, char *err, size_t errlen) {
    (void)argc, (void)argv, (void)err, (void)errlen;
    memset(r, 0, sizeof *r);
    r->n_ranks = 1;
    return 0;
}

int ft_ranks_exit(ft_ranks *r, int code) {
    (void)r;
    return code;
}

int ft_ranks_fail(ft_ranks *r, int code) { return ft_ranks_exit(r, code); }

void ft_ranks_report(const ft_ranks *r, int64_t steps, FILE *f) { (void)r, (void)steps, (void)f; }
#endif

const grzo_comm *ft_ranks_comm(const ft_ranks *r) { return r->n_ranks > 1 ? &r->comm : NULL; }

int ft_ranks_any(ft_ranks *r, int flag) {
    uint64_t v = flag != 0;
    if (r->n_ranks < 2) return flag != 0;
    if (r->comm.iface->allreduce_max_u64(r->comm.self, &v, 1) != GRZO_OK) return -1;
    return v != 0;
}
