#!/usr/bin/env bash
# bench/gpu/lease.sh - the calls of a 15-minute device lease (bench/gpu/README.md), one command
# each, whose budgets follow from the call's own time limit: nothing is worked out by hand
# while the lease's seconds run.
#
#   bash bench/gpu/lease.sh check SECONDS OUT      Call A (cold, carrying .gpu/a): the GGUF's
#        first half to the machine's state folder, then run.sh --stages tests,bench (it builds);
#        OUT/oa.tgz
#   bash bench/gpu/lease.sh build SECONDS OUT      Call A of a lease that only fine-tunes: the
#        half, and run.sh --stages build (no tests: the commit's have passed on a GPU before)
#   bash bench/gpu/lease.sh finetune SECONDS OUT [--peer] [--jobs N] [--fit] [--cpu-bench]
#        Call B, at once (carrying .gpu/b and .gpu/data): the GGUF's halves joined and checked
#        against .gpu/b/sha256, run.sh's peer stage (--peer: ~100 s; OUT/op.tgz), then
#        finetune.sh (--jobs and --fit passed on) resuming the fine-tuning folder, which starts
#        as a copy of the committed one; OUT/ft.tgz without the checkpoints (~270 MB each).
#        --cpu-bench: after the peer stage, run.sh's cpu stage (bench_mlp and bench_llm: issue
#        10's targets on this host's CPU, which the sessions' own machines are not) on two CPUs
#        of two cores of their own (their SMT siblings left idle), while finetune.sh keeps to
#        the other cores; OUT/oc.tgz. It costs the lease no time: it ends before the
#        fine-tuning's stop. Not run (said why, the rest goes on) without taskset and lscpu or
#        with fewer than four cores
#
# SECONDS: the timeout_s the call is given; the budgets inside are cut from it, with room for a
# run to stop (finetune.sh's runs take up to 30 s after their budget), the report and the tar.
# OUT: the device tool's $OUT. The machine's state lives in $GRZO_LEASE_DIR (default /root):
# build-gpu/, smol/ (the GGUF), ft/ (the fine-tuning folder), oa/, ob/, op/; it survives
# between the calls of a lease only while the machine stays warm (a call that finds it gone
# says so).
# Exit status: 0 done; 3 fine-tuning runs are left for a later call or lease; 1 a step failed
# (the line says which); 2 usage.
set -u -o pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
L=${GRZO_LEASE_DIR:-/root}
GPU=${GRZO_LEASE_GPU_DIR:-$REPO/.gpu}                                   # what the calls carry
SEED=${GRZO_LEASE_FT_SEED:-$REPO/bench/gpu/results/2026-11-30-h200/finetune}   # the folder resumed
RUN_SH=${GRZO_RUN_SH:-$REPO/bench/gpu/run.sh}
FINETUNE_SH=${GRZO_FINETUNE_SH:-$REPO/bench/gpu/finetune.sh}
START=$(date +%s)

usage() {
    echo "usage: bash bench/gpu/lease.sh check|build SECONDS OUT | finetune SECONDS OUT [--peer] [--jobs N] [--fit] [--cpu-bench]" >&2
    exit 2
}
say() { local e=$(( $(date +%s) - START )); printf '[%02d:%02d] lease.sh: %s\n' $((e / 60)) $((e % 60)) "$*"; }
die() { say "$*" >&2; exit 1; }
is_count() { case $1 in ''|*[!0-9]*|0?*) return 1 ;; esac; [ "${#1}" -le 5 ]; }
# seconds of the call left after RESERVE more
left() { echo $(( START + SECONDS_ - $(date +%s) - $1 )); }

# the GGUF's first half, copied to the state folder (the second comes with Call B)
first_half() {
    [ -s "$GPU/a/part.00" ] || die "no $GPU/a/part.00: carry .gpu/a (bench/gpu/README.md says how to make it)"
    mkdir -p "$L/smol" && cp "$GPU/a/part.00" "$L/smol/part.00" || die "cannot copy the GGUF's half to $L/smol"
}

# The CPUs this process may use, cut in two by cores (lscpu -p: each CPU's core): BENCH_CPUS, one
# CPU on each of the two highest-numbered cores, and FT_CPUS, the CPUs of every other core (so
# the GPU work never shares a core with the benchmark, SMT sibling or not); comma lists. WHY
# says why not, where it cannot: no taskset or lscpu, or fewer than two cores left over.
split_cpus() {
    local allowed cores
    BENCH_CPUS="" FT_CPUS="" WHY=""
    command -v taskset > /dev/null && command -v lscpu > /dev/null || { WHY="no taskset or lscpu here"; return 1; }
    allowed=$(taskset -pc $$ 2> /dev/null | sed -n 's/.*: *//p')
    [ -n "$allowed" ] || { WHY="taskset could not read this process's CPUs"; return 1; }
    cores=$(lscpu -p=CPU,CORE 2> /dev/null | grep -E '^[0-9]+,[0-9]+$')
    [ -n "$cores" ] || { WHY="lscpu -p=CPU,CORE gave no CPU's core"; return 1; }
    read -r BENCH_CPUS FT_CPUS < <(echo "$cores" | awk -F, -v allowed="$allowed" '
        BEGIN { n = split(allowed, r, ",")
                for (i = 1; i <= n; i++) { m = split(r[i], ab, "-"); for (c = ab[1] + 0; c <= ab[m] + 0; c++) ok[c] = 1 } }
        !($1 in ok) { next }
        { core[$1] = $2; cpu[++k] = $1 }
        END { for (i = k; i >= 1 && nb < 2; i--) if (!(core[cpu[i]] in mine)) { mine[core[cpu[i]]] = 1; b = b (nb++ ? "," : "") cpu[i] }
              for (i = 1; i <= k; i++) if (!(core[cpu[i]] in mine)) { f = f (f != "" ? "," : "") cpu[i]; if (!(core[cpu[i]] in left)) { left[core[cpu[i]]] = 1; nf++ } }
              if (nb == 2 && nf >= 2) print b, f }')
    [ -n "$FT_CPUS" ] || { WHY="too few cores (CPUs $allowed) to keep two apart from the GPU work"; return 1; }
}

# $L/smol/smol.gguf from the two halves, checked; a GGUF joined by an earlier call stands
join_gguf() {
    local want
    [ -s "$GPU/b/sha256" ] && [ -s "$GPU/b/part.01" ] || die "no $GPU/b/part.01 or sha256: carry .gpu/b"
    want=$(cat "$GPU/b/sha256")
    if [ -s "$L/smol/smol.gguf" ] && [ "$(sha256sum "$L/smol/smol.gguf" | cut -d' ' -f1)" = "$want" ]; then return 0; fi
    [ -s "$L/smol/part.00" ] || die "the machine went cold: no GGUF half in $L/smol (start again with Call A)"
    cat "$L/smol/part.00" "$GPU/b/part.01" > "$L/smol/smol.gguf.tmp" || die "cannot join the GGUF's halves"
    [ "$(sha256sum "$L/smol/smol.gguf.tmp" | cut -d' ' -f1)" = "$want" ] ||
        { rm -f "$L/smol/smol.gguf.tmp"; die "the GGUF's halves do not join to the sha256 in $GPU/b/sha256"; }
    mv "$L/smol/smol.gguf.tmp" "$L/smol/smol.gguf"
    say "GGUF joined: $L/smol/smol.gguf"
}

[ $# -ge 3 ] || usage
MODE=$1 SECONDS_=$2 OUT=$3
shift 3
is_count "$SECONDS_" && [ "$SECONDS_" -ge 60 ] && [ "$SECONDS_" -le 600 ] || { echo "lease.sh: SECONDS: 60 to 600 (a call's limit), got '$SECONDS_'" >&2; usage; }
[ -d "$OUT" ] || { echo "lease.sh: OUT: no folder $OUT" >&2; usage; }
PEER=0 CPU_BENCH=0 FT_ARGS=()
case $MODE in
    check|build) [ $# -eq 0 ] || usage ;;
    finetune)
        while [ $# -gt 0 ]; do
            case $1 in
                --peer) PEER=1; shift ;;
                --fit) FT_ARGS+=(--fit); shift ;;
                --cpu-bench) CPU_BENCH=1; shift ;;
                --jobs) [ $# -ge 2 ] && is_count "$2" && [ "$2" -ge 1 ] || { echo "lease.sh: --jobs: a count of 1 or more" >&2; usage; }
                        FT_ARGS+=(--jobs "$2"); shift 2 ;;
                *) echo "lease.sh: unknown option $1" >&2; usage ;;
            esac
        done ;;
    *) usage ;;
esac

case $MODE in
check)
    [ "$(left 40)" -ge 60 ] || die "check: run.sh needs a budget of 60 s: give the call 100 s or more"
    first_half
    # run.sh keeps its own stage shares inside the budget; 40 s for the tar and the reply
    GRZO_GPU_BUILD=$L/build-gpu bash "$RUN_SH" --budget "$(left 40)" --stages tests,bench "$L/oa"
    rc=$?
    tar -C "$L/oa" -czf "$OUT/oa.tgz" . || die "cannot write $OUT/oa.tgz"
    say "run.sh exit $rc; $OUT/oa.tgz written"
    exit "$rc" ;;
build)
    [ "$(left 20)" -ge 60 ] || die "build: run.sh needs a budget of 60 s: give the call 80 s or more"
    first_half
    GRZO_GPU_BUILD=$L/build-gpu bash "$RUN_SH" --budget "$(left 20)" --stages build "$L/ob" || die "the build failed ($L/ob/build.log)"
    say "built in $L/build-gpu"
    exit 0 ;;
finetune)
    [ -x "$L/build-gpu/examples/finetune/grzo-finetune" ] || die "the machine went cold: no $L/build-gpu (start again with Call A)"
    join_gguf
    [ -d "$GPU/data/SST-2" ] && [ -d "$GPU/data/RTE" ] || die "no $GPU/data/SST-2 or RTE: carry .gpu/data"
    rc=0 pin=() cpu_pid=""
    if [ "$PEER" -eq 1 ]; then
        [ "$(left 100)" -ge 60 ] || die "--peer: the call is too short for the peer stage (100 s) and a fine-tuning"
        GRZO_GPU_BUILD=$L/build-gpu GRZO_SST2_DIR=$GPU/data/SST-2 bash "$RUN_SH" --budget 100 --stages peer "$L/op" "$L/smol/smol.gguf" ||
            { rc=1; say "the peer stage failed (its report says why); going on with the fine-tuning"; }
        tar -C "$L/op" -czf "$OUT/op.tgz" . || die "cannot write $OUT/op.tgz"
    fi
    if [ "$CPU_BENCH" -eq 1 ]; then
        # after the peer stage (its GPU timings without a neighbour on the host); it ends before
        # the fine-tuning's runs stop (left 70, and up to 30 s more)
        if [ "$(left 100)" -lt 60 ]; then say "--cpu-bench: not run: the call is too short (run.sh needs 60 s)"
        elif ! split_cpus; then say "--cpu-bench: not run: $WHY"
        else
            say "--cpu-bench: run.sh --stages cpu on CPUs $BENCH_CPUS (at most $(left 100) s); the GPU work on CPUs $FT_CPUS"
            rm -rf "${L:?}/oc"
            # under timeout, in a process group of its own: a step of this call that dies stops
            # it whole (the EXIT trap), not just its shell
            GRZO_GPU_BUILD=$L/build-gpu GRZO_SST2_DIR=$GPU/data/SST-2 timeout -k 5 "$(left 70)" taskset -c "$BENCH_CPUS" \
                bash "$RUN_SH" --budget "$(left 100)" --stages cpu "$L/oc" "$L/smol/smol.gguf" > "$L/oc.log" 2>&1 &
            cpu_pid=$!
            trap 'kill "$cpu_pid" 2> /dev/null' EXIT
            pin=(taskset -c "$FT_CPUS")
        fi
    fi
    if [ ! -d "$L/ft" ]; then cp -r "$SEED" "$L/ft" || die "cannot copy $SEED to $L/ft"; fi
    # the runs stop up to 30 s after the budget (their checkpoints), then the report and the tar
    budget=$(left 70)
    [ "$budget" -ge 30 ] || die "no time left for fine-tuning ($budget s)"
    GRZO_FINETUNE=$L/build-gpu/examples/finetune/grzo-finetune \
        "${pin[@]}" bash "$FINETUNE_SH" "${FT_ARGS[@]}" --budget "$budget" "$L/smol/smol.gguf" "$GPU/data" "$L/ft"
    ft=$?
    tar -C "$L/ft" --exclude='checkpoint.grzo*' -czf "$OUT/ft.tgz" . || die "cannot write $OUT/ft.tgz"
    say "finetune.sh exit $ft (3: runs left); $OUT/ft.tgz written"
    if [ -n "$cpu_pid" ]; then
        wait "$cpu_pid"
        say "the cpu stage: run.sh exit $?"
        trap - EXIT
        mkdir -p "$L/oc" && cp "$L/oc.log" "$L/oc/run.log" && tar -C "$L/oc" -czf "$OUT/oc.tgz" . || die "cannot write $OUT/oc.tgz"
    fi
    [ "$ft" -eq 0 ] || [ "$ft" -eq 3 ] || exit 1
    [ "$rc" -eq 0 ] || exit 1
    exit "$ft" ;;
esac
