#!/usr/bin/env bash
# run_mpi.sh NP EXPECT PROGRAM ARGS... - runs PROGRAM under `mpirun -np NP` for the tests.
#   EXPECT = pass: every rank must exit 0;
#   EXPECT = error: the job must end with a nonzero status (a killed rank), and within the
#            timeout: a hang is the failure this catches.
# Skips (77) only when mpirun is absent. As root OpenMPI needs --allow-run-as-root; more ranks
# than cores need --oversubscribe. Shared memory (vader) between ranks, no single-copy
# mechanism (containers forbid the ptrace it needs), no network interfaces beyond loopback.
set -u
np=$1 expect=$2
shift 2
mpirun=$(command -v mpirun || true)
if [ -z "$mpirun" ]; then
    echo "SKIP: mpirun not found (install openmpi-bin and libopenmpi-dev)"
    exit 77
fi
extra=(--oversubscribe)
[ "$(id -u)" = 0 ] && extra+=(--allow-run-as-root)
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_mpi_yield_when_idle=1
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
limit=${GRZO_MPI_TIMEOUT:-240}
start=$SECONDS
timeout -k 10 "$limit" "$mpirun" "${extra[@]}" -np "$np" "$@"
rc=$?
hung=0
[ "$rc" = 124 ] || [ $((SECONDS - start)) -ge "$limit" ] && hung=1
case "$expect" in
pass)
    [ "$rc" = 0 ] && exit 0
    [ "$hung" = 1 ] && echo "FAIL: mpirun -np $np timed out after ${limit}s (a rank hung)"
    echo "FAIL: mpirun -np $np $* exited $rc"
    exit 1 ;;
error)
    if [ "$hung" = 1 ]; then echo "FAIL: the surviving ranks hung (timeout ${limit}s)"; exit 1; fi
    if [ "$rc" = 0 ]; then echo "FAIL: the job succeeded although a rank was killed"; exit 1; fi
    echo "ok: the job ended with status $rc after a rank was killed (no hang)"
    exit 0 ;;
esac
echo "run_mpi.sh: EXPECT must be pass or error"
exit 2
