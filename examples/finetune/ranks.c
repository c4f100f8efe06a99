/* ranks.c - see ranks.h. */
#include "ranks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How this process was started: 1 by an MPI launcher, 0 alone, -1 (err set) for a bad
   GRZO_MPI. The launchers are told by the variables they set: Open MPI's mpirun
   (OMPI_COMM_WORLD_SIZE), PMIx launchers (PMIX_RANK: Open MPI 5, Slurm's srun --mpi=pmix)
   and PMI launchers (PMI_RANK, PMI_SIZE: MPICH's and Intel MPI's mpiexec, srun --mpi=pmi2);
   GRZO_MPI=1 or 0 says it instead. A process started alone does not initialize MPI: Open
   MPI's singleton start forks a helper daemon and resolves the host name, 1.3 s before the
   first line of output on a 2-vCPU development machine, 10-15 s where the name does
   not resolve (a chroot without /etc/hosts). */
static int ft_launched_by_mpi(char *err, size_t errlen) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"};
    const char *force = getenv("GRZO_MPI");
    size_t i;
    if (force && *force) {
        if (strcmp(force, "1") && strcmp(force, "0")) {
            snprintf(err, errlen, "GRZO_MPI: expected 1 or 0, got '%s'", force);
            return -1;
        }
        return force[0] == '1';
    }
    for (i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i])) return 1;
    return 0;
}

#ifdef GRZO_FINETUNE_MPI
#include <mpi.h>
#include "backends/grzo_mpi.h"

int ft_ranks_init(int *argc, char ***argv, ft_ranks *r, char *err, size_t errlen) {
    grzo_status s;
    int launched = ft_launched_by_mpi(err, errlen);
    memset(r, 0, sizeof *r);
    r->n_ranks = 1;
    if (launched <= 0) return launched;   /* alone: one process, as in a build without MPI */
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
/* Without MPI every process of a launcher's job would train alone and write the same files */
int ft_ranks_init(int *argc, char ***argv, ft_ranks *r, char *err, size_t errlen) {
    int launched = ft_launched_by_mpi(err, errlen);
    (void)argc, (void)argv;
    memset(r, 0, sizeof *r);
    r->n_ranks = 1;
    if (launched > 0)
        snprintf(err, errlen, "started by an MPI launcher (or GRZO_MPI=1), but this grzo-finetune was built without "
                              "MPI (meson option mpi; Debian: libopenmpi-dev)");
    return launched ? -1 : 0;
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
