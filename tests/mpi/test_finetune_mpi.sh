#!/usr/bin/env bash
# grzo-finetune under mpirun (README "Scaling out"): stories260K on the SST-2 sample.
#   1. GRZO, MeZO and FZOO at -np 2 and -np 3 (B = 5: uneven shares) end with a checkpoint
#      bitwise equal to the single-process run's (--shard-invariant), and log the same losses;
#      only rank 0 writes (one log line per step, no stray files);
#   2. a run of 2 steps at -np 2, resumed to 4 at -np 3 (every rank verifies the checkpoint),
#      ends where the single-process 4-step run ends;
#   3. SIGINT to one rank stops every rank at the same step boundary: rank 0 writes the
#      checkpoint, the job exits 130, and a resume (at -np 2) ends where one process ends;
#   4. a killed rank ends the job with an error within the timeout instead of hanging, and so
#      does a failure of rank 0 alone (MPI_Abort: the others would wait in a collective);
#   5. rank 0 alone prints (the results once, other ranks' stdout silenced) and ends with the
#      communication line (ranks.c ft_ranks_report): its exact counts at -np 2, none for one
#      process or a run of no steps.
# Skips only when mpirun is absent.
# usage: test_finetune_mpi.sh GRZO_FINETUNE DATA_DIR WORK_DIR
set -u
bin=$1 data=$2 work=$3
if ! command -v mpirun >/dev/null; then
    echo "SKIP: mpirun not found (install openmpi-bin and libopenmpi-dev)"
    exit 77
fi
rm -rf "$work" && mkdir -p "$work" || exit 1
mpi=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_oob_tcp_if_include=lo OMP_NUM_THREADS=1
# waiting ranks yield the CPU: on 2 cores, 3 spinning ranks would starve the one computing
export OMPI_MCA_mpi_yield_when_idle=1
common=(--model "$data/stories260K.bin" --tokenizer "$data/tok512.bin" --task sst2 --data "$data/tasks/SST-2"
        --n-train 8 --n-dev 4 --n-test 4 --batch 5 --lr 1e-3 --sigma 1e-3 --seed 5 --threads 1 --replica-check-every 1)
fail() { echo "FAIL: $*"; exit 1; }
strip() { sed 's/,"elapsed":[0-9.]*//' "$1"; }

for est in grzo mezo fzoo; do
    "$bin" "${common[@]}" --estimator "$est" --steps 4 --shard-invariant --out "$work/$est-1" > "$work/$est-1.out" 2>&1 ||
        fail "$est single process: $(tail -3 "$work/$est-1.out")"
    ! grep -q "^communication" "$work/$est-1.out" || fail "$est single process: a communication line: $(cat "$work/$est-1.out")"
    for np in 2 3; do
        out=$work/$est-np$np
        timeout 300 "${mpi[@]}" -np "$np" "$bin" "${common[@]}" --estimator "$est" --steps 4 --out "$out" > "$out.out" 2>&1 ||
            fail "$est mpirun -np $np: $(tail -5 "$out.out")"
        cmp -s "$work/$est-1/checkpoint.grzo" "$out/checkpoint.grzo" || fail "$est -np $np: the checkpoint differs from the single-process run's"
        diff <(strip "$work/$est-1/log.jsonl") <(strip "$out/log.jsonl") > "$out.diff" || fail "$est -np $np: the log differs: $(head -4 "$out.diff")"
        [ "$(ls "$out" | tr '\n' ' ')" = "$(ls "$work/$est-1" | tr '\n' ' ')" ] || fail "$est -np $np: other files than one process writes: $(ls "$out")"
        [ "$(grep -c "^after 4 steps ($est," "$out.out")" = 1 ] || fail "$est -np $np: not one results line (rank 0's): $(cat "$out.out")"
        [ "$(grep -c "^communication (rank 0, $np ranks): " "$out.out")" = 1 ] ||
            fail "$est -np $np: not one communication line: $(cat "$out.out")"
    done
    echo "ok: $est at 2 and 3 ranks is bitwise the single-process run"
done
# GRZO at -np 2, B = 5 (shares 2 and 3), 4 steps: one replica check before the loop, then per
# step the all-gather (rank 0 sends 2 copies x 2 examples + status + shape word = 6 floats and
# receives 2 x 5 + 2 x 2 = 14), the replica check (5 uint64 each way) and the Ctrl-C agreement
# (1 uint64 each way): 13 collectives, 4 x 72 + 40 bytes sent, 4 x 104 + 40 received
want="communication (rank 0, 2 ranks): 3.2 collectives, 82 bytes sent, 114 bytes received per step"
grep -qxF "$want" "$work/grzo-np2.out" || fail "-np 2: want '$want': $(grep "^communication" "$work/grzo-np2.out")"
echo "ok: rank 0 alone prints, and its communication line counts what the protocol sends"

timeout 300 "${mpi[@]}" -np 2 "$bin" "${common[@]}" --steps 2 --out "$work/resume" > "$work/resume1.out" 2>&1 || fail "first half: $(tail -3 "$work/resume1.out")"
timeout 300 "${mpi[@]}" -np 3 "$bin" "${common[@]}" --steps 4 --out "$work/resume" --resume > "$work/resume2.out" 2>&1 || fail "resume at -np 3: $(tail -3 "$work/resume2.out")"
cmp -s "$work/grzo-1/checkpoint.grzo" "$work/resume/checkpoint.grzo" || fail "2 steps at -np 2 + 2 at -np 3 differ from 4 steps in one process"
# one step more (its communication line counts over that step), then resumed at its own
# --steps: the evaluation only, no step to count collectives over
timeout 300 "${mpi[@]}" -np 2 "$bin" "${common[@]}" --steps 5 --out "$work/resume" --resume > "$work/resume3.out" 2>&1 ||
    fail "one step more: $(tail -3 "$work/resume3.out")"
grep -q "^communication (rank 0, 2 ranks): " "$work/resume3.out" || fail "one step more: no communication line: $(cat "$work/resume3.out")"
timeout 300 "${mpi[@]}" -np 2 "$bin" "${common[@]}" --steps 5 --out "$work/resume" --resume > "$work/resume4.out" 2>&1 ||
    fail "resume at the same --steps: $(tail -3 "$work/resume4.out")"
grep -q "^after 5 steps" "$work/resume4.out" && ! grep -q "^communication" "$work/resume4.out" ||
    fail "resume at the same --steps: want results and no communication line: $(cat "$work/resume4.out")"
echo "ok: resumed at another rank count, still bitwise the single-process run"

# the variant axes (grzo.h section 3c) shard the same way: masks, V and the rounding bits are
# regenerated from the seeds on every rank
for variant in "--sparse-density 0.2" "--lowrank-rank 2" "--quant int8"; do
    name=$(echo "$variant" | tr -d ' -')
    # shellcheck disable=SC2086 # variant is two words
    "$bin" "${common[@]}" $variant --steps 3 --shard-invariant --out "$work/$name-1" > "$work/$name-1.out" 2>&1 ||
        fail "$variant single process: $(tail -3 "$work/$name-1.out")"
    # shellcheck disable=SC2086
    timeout 300 "${mpi[@]}" -np 2 "$bin" "${common[@]}" $variant --steps 3 --out "$work/$name-2" > "$work/$name-2.out" 2>&1 ||
        fail "$variant mpirun -np 2: $(tail -5 "$work/$name-2.out")"
    cmp -s "$work/$name-1/checkpoint.grzo" "$work/$name-2/checkpoint.grzo" || fail "$variant -np 2: the checkpoint differs from one process's"
done
echo "ok: sparse, low-rank and int8 runs at 2 ranks are bitwise the single-process runs"

# the process of rank `which` (first|last) of the job writing into $1, never another program's
# (pids in increasing order from /proc: procps's pgrep is not on every machine)
rank_pid() {
    local p found=""
    for p in $(ls /proc | grep -E '^[0-9]+$' | sort -n); do
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = grzo-finetune ] || continue
        tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | grep -q -- "$1" && { found=$p; [ "$2" = first ] && break; }
    done
    echo "$found"
}
wait_log() {   # until $1/log.jsonl has $2 lines
    for _ in $(seq 1 300); do
        [ -f "$1/log.jsonl" ] && [ "$(wc -l < "$1/log.jsonl")" -ge "$2" ] && return 0
        sleep 0.1
    done
}

timeout -k 5 120 "${mpi[@]}" -np 3 "$bin" "${common[@]}" --steps 1000000 --out "$work/intr" > "$work/intr.out" 2>&1 &
job=$!
wait_log "$work/intr" 3
victim=$(rank_pid "$work/intr" last)
[ -n "$victim" ] || { kill "$job"; fail "no rank process of the interrupted job found"; }
kill -INT "$victim"
wait "$job"
rc=$?
[ "$rc" -eq 130 ] || fail "SIGINT to one rank: the job exited $rc, want 130: $(tail -3 "$work/intr.out")"
total=$(( $(wc -l < "$work/intr/log.jsonl") + 2 ))
timeout 300 "${mpi[@]}" -np 2 "$bin" "${common[@]}" --steps "$total" --out "$work/intr" --resume > "$work/intr2.out" 2>&1 ||
    fail "resume after SIGINT: $(tail -3 "$work/intr2.out")"
"$bin" "${common[@]}" --steps "$total" --shard-invariant --out "$work/intr-1" > "$work/intr-1.out" 2>&1 || fail "single-process reference run"
cmp -s "$work/intr-1/checkpoint.grzo" "$work/intr/checkpoint.grzo" || fail "SIGINT at -np 3 + resume at -np 2 differs from one process"
echo "ok: SIGINT to one rank stopped all $((total - 2)) steps in, and the resumed run is bitwise one process's"

# rank 0 alone cannot write its --log folder (the others never check it): MPI_Abort ends every
# rank, where the others would otherwise wait for rank 0 in a collective. The status is
# usually rank 0's (1), but Open MPI 4.1's mpirun sometimes crashes (139) while relaying the
# abort: any failure but the timeout's (124, 137 after -k) is the job ending.
start=$SECONDS
timeout -k 5 60 "${mpi[@]}" -np 2 "$bin" "${common[@]}" --steps 4 --out "$work/rank0" --log /proc/grzo-log.jsonl > "$work/rank0.out" 2>&1
rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] && [ $((SECONDS - start)) -lt 60 ] &&
    grep -q "rank 0: --log '/proc/grzo-log.jsonl': cannot create a file" "$work/rank0.out" ||
    fail "a failure of rank 0 alone: exit $rc (124, 137: the other rank hung): $(tail -3 "$work/rank0.out")"
echo "ok: a failure of rank 0 alone ends the job (status $rc)"

start=$SECONDS
timeout -k 5 60 "${mpi[@]}" -np 2 "$bin" "${common[@]}" --steps 1000000 --out "$work/kill" > "$work/kill.out" 2>&1 &
job=$!
wait_log "$work/kill" 2
victim=$(rank_pid "$work/kill" last)
[ -n "$victim" ] || { kill "$job"; fail "no rank process of the job found"; }
kill -9 "$victim"
wait "$job"
rc=$?
[ "$rc" -ne 124 ] && [ $((SECONDS - start)) -lt 60 ] || fail "the surviving rank hung after a rank was killed (timeout 60 s)"
[ "$rc" -ne 0 ] || fail "the job exited 0 although a rank was killed"
echo "ok: a killed rank ends the job (status $rc) in $((SECONDS - start)) s"
