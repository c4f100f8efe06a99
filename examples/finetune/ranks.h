/* ranks.h - grzo-finetune's processes: one, or N under `mpirun -np N` (grzo.h section 4b).

   Every rank loads the model and runs the same loop; grzo hands each rank its share of the
   batch and all-gathers the losses through the grzo_comm of backends/grzo_mpi.h. Rank 0
   alone prints and writes files. Built without MPI (Meson option mpi), there is one rank
   and no communicator. */
#ifndef GRZO_FINETUNE_RANKS_H
#define GRZO_FINETUNE_RANKS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "grzo.h"

typedef struct ft_ranks {
    int rank, n_ranks;
    int mpi;                  /* 1: MPI is initialized */
    grzo_comm comm;           /* set when n_ranks > 1 */
} ft_ranks;

/* MPI_Init (MPI builds, when an MPI launcher started the process: ranks.c
   ft_launched_by_mpi; GRZO_MPI=1/0 overrides) and the communicator; 0, or -1 with err. */
int ft_ranks_init(int *argc, char ***argv, ft_ranks *r, char *err, size_t errlen);
/* desc.comm: NULL for one process */
const grzo_comm *ft_ranks_comm(const ft_ranks *r);
/* 1 when any rank's flag is set, 0 when none, -1 when the collective failed; every rank
   calls it at the same point */
int ft_ranks_any(ft_ranks *r, int flag);
/* rank 0, several ranks: one line on f with the bytes this rank passed through the
   collectives per training step (steps > 0) */
void ft_ranks_report(const ft_ranks *r, int64_t steps, FILE *f);
/* The end of a run that every rank reaches (success, or an agreed stop such as Ctrl-C):
   MPI_Finalize; returns code. */
int ft_ranks_exit(ft_ranks *r, int code);
/* The end after a failure: with several ranks MPI_Abort (no rank may wait for this one in a
   collective: mpirun ends them all with this code); returns code otherwise. */
int ft_ranks_fail(ft_ranks *r, int code);

#endif
