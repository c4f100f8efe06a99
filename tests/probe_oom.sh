#!/usr/bin/env bash
# grzo-probe when memory runs out: the whole process, one allocation failing at a time (as
# test_tools_oom.sh does to grzo-generate and grzo-export, with the same LD_PRELOAD shim,
# tests/oom_shim.c: the N-th allocation of the program's own code fails, not the C library's,
# OpenBLAS's or libgomp's). Each scenario is one subcommand in --quick mode, one thread (the
# count must not depend on which thread runs a unit first), gnuplot off PATH (the probe keeps
# the .gp script and notes the PNG it did not draw; the clean run is made the same way). It is
# run once clean, which tells the number of counted allocations T (10^5 to 10^6: grzo's
# buffers, step after step), then again with allocation N failing, for every N when T <= 28,
# else N = 1..20 (the data set, the units, grzo_create and its first step), the last 4 (the
# output folder's sync; the tables' rows come a few hundred before) and an even stride in
# between: CI's time is short, and a run that fails in a late unit still costs most of a clean
# run. GRZO_OOM_ALL=1 runs every N, which at these T takes days: reproduce chosen N instead
# (SCENARIO N below).
#   CI: batch (training.c), cosine, alignment, variants (its two CSVs). GRZO_OOM_SCENARIOS
#   names others, e.g. "variance quant ablation" (a second or two each clean run).
# Each armed run must either
#   - exit 0 with the clean run's stdout (the "(NAME: S s, ...)" timing line masked) and files,
#     byte for byte, or
#   - exit 3 (main.c: "3 runtime error"; not 1, a failed claim, nor 2, bad arguments), not by
#     a signal and not hung, with exactly one line on stderr (the clean run prints none) that
#     names the program and says "memory"; its stdout a beginning of the clean run's, whole
#     lines (the tables print after their work); and in the output folder only files the
#     clean run also writes, each byte for byte as it does (util.c's out_open/out_close: a
#     file appears whole or not at all), no temporary.
# usage: probe_oom.sh GRZO_PROBE WORK_DIR SHIM [SCENARIO N]
#   with SCENARIO N, only that run (a reproduction), its folder kept.
#   GRZO_OOM_ALL=1: every N, whatever T. GRZO_OOM_JOBS: runs at once (2).
set -u
probe=$(realpath "$1") work=$2 shim=$(realpath "$3") only_scen=${4:-} only_n=${5:-}
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p "$work" && work=$(realpath "$work") || exit 1
ulimit -c 0   # a crash is seen by its exit status; no core files
prog=${probe##*/}
all_scenarios="variance cosine quant batch ablation alignment variants"
scenarios=${GRZO_OOM_SCENARIOS:-batch cosine alignment variants}
for s in $scenarios ${only_scen#run:}; do
    case " $all_scenarios " in *" ${s%:*} "*) ;; *) fail "unknown scenario '$s' (one of: $all_scenarios)" ;; esac
done

# run SCENARIO N: the probe in a fresh folder DIR/run (--out DIR/run/out) with allocation N
# failing (0: none); stdout, stderr, exit status, count and the failed allocation's caller in DIR
run() {
    local dir=$work/$1/n$2 rc
    [ "$2" -eq 0 ] && dir=$work/$1/clean
    rm -rf "$dir" && mkdir -p "$dir/run" || return 1
    (cd "$dir/run" && timeout 30 env PATH=/nonexistent OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
        LD_PRELOAD="$shim" GRZO_OOM_PROGRAM="$prog" GRZO_OOM_FAIL_AT="$2" GRZO_OOM_COUNT_FILE="$dir/count" \
        GRZO_OOM_WHERE_FILE="$dir/where" "$probe" "$1" --quick --threads 1 --out out > "$dir/out.txt" 2> "$dir/err.txt")
    rc=$?
    echo "$rc" > "$dir/rc"
}
# (the parallel jobs of the schedule below: this script again, one armed run each)
case "$only_scen" in run:*) s=${only_scen#run:}; run "${s%:*}" "${s#*:}"; exit 0 ;; esac

# stdout without what differs between runs by the clock: the subcommand's time
plain_out() { sed -E 's/^\(([a-z]+): [0-9.]+ s, /(\1: (time), /' "$1"; }

# clean SCENARIO: the run every armed run is held to
clean() {
    local c=$work/$1/clean
    oom_clean_run "$1"
    [ ! -s "$c/err.txt" ] || fail "$1: the clean run wrote on stderr: $(head -3 "$c/err.txt")"
    ls "$c/run/out" | grep -q '\.csv$' || fail "$1: the clean run wrote no CSV"
    grep -q 'gnuplot not found' "$c/out.txt" || ! ls "$c/run/out" | grep -q '\.gp$' ||
        fail "$1: gnuplot is off PATH, but the probe did not say it drew no PNG"
    plain_out "$c/out.txt" > "$c/out.plain"
}

# check SCENARIO N: the verdict on the armed run ("" when it passes)
check() {
    local c=$work/$1/clean dir=$work/$1/n$2 rc n f
    rc=$(cat "$dir/rc")
    if [ "$rc" -eq 0 ]; then
        [ ! -s "$dir/err.txt" ] || { echo "exit 0, but stderr says: $(head -2 "$dir/err.txt")"; return; }
        cmp -s "$c/out.plain" <(plain_out "$dir/out.txt") || { echo "exit 0, but stdout differs: $(diff "$c/out.plain" <(plain_out "$dir/out.txt") | head -3)"; return; }
        diff -r -q "$c/run" "$dir/run" > /dev/null || { echo "exit 0, but the files differ: $(diff -r -q "$c/run" "$dir/run" | head -3)"; return; }
        return
    fi
    [ "$rc" -eq 124 ] && { echo "hung (killed after 30 s)"; return; }
    [ "$rc" -gt 128 ] && { echo "killed by signal $((rc - 128)): $(tail -2 "$dir/err.txt")"; return; }
    [ "$rc" -ne 3 ] && { echo "exit $rc, not 3 (a runtime error): $(tail -2 "$dir/err.txt")"; return; }
    [ "$(wc -l < "$dir/err.txt")" -eq 1 ] || { echo "exit 3 with $(wc -l < "$dir/err.txt") stderr lines: $(head -3 "$dir/err.txt" | tr '\n' '|')"; return; }
    case "$(cat "$dir/err.txt")" in "$prog: "*memory*) ;; *) echo "exit 3, the message does not say memory: $(cat "$dir/err.txt")"; return ;; esac
    # whole lines of the clean run's stdout, from its beginning
    n=$(wc -l < "$dir/out.txt")
    [ -z "$(tail -c 1 "$dir/out.txt")" ] || { echo "stdout ends in half a line"; return; }
    cmp -s <(head -n "$n" "$c/out.plain") <(plain_out "$dir/out.txt") || { echo "stdout is not a beginning of the clean run's: $(diff <(head -n "$n" "$c/out.plain") <(plain_out "$dir/out.txt") | head -3)"; return; }
    # the folder: nothing but whole files of the clean run's
    [ -d "$dir/run/out" ] || return   # failed before out_prepare: nothing written
    for f in $(ls -A "$dir/run/out"); do
        [ -e "$c/run/out/$f" ] || { echo "the failed run left '$f', which the clean run does not write"; return; }
        cmp -s "$c/run/out/$f" "$dir/run/out/$f" || { echo "the failed run left '$f' not as the clean run writes it"; return; }
    done
}

# the shared driver (tests/oom_driver.sh): which N, the parallel runs, the checks
oom_bin=$probe
oom_self=("$0" "$probe" "$work" "$shim")
. "$(cd "$(dirname "$0")" && pwd)/oom_driver.sh"
if [ -n "$only_scen" ]; then
    oom_reproduce "$only_scen" "$only_n"
    exit 0
fi
oom_run_all
