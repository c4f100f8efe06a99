#!/usr/bin/env bash
# grzo-finetune when memory runs out: the whole process, one allocation failing at a time.
# The LD_PRELOAD shim tests/oom_shim.c fails the N-th allocation that the program's own
# code asks for (grzo.h, the backend, the LLM, task and file modules; not the C library's,
# OpenBLAS's or libgomp's). A tiny run (stories260K on the SST-2 sample, B = 2, 3 steps: a dev
# evaluation and a checkpoint at step 2, a checkpoint and results.json at the end) is made
# once clean, which tells the number of counted allocations T, then again with allocation N
# failing, for every N when T <= 150, else N = 1..60, the last 40, and an even stride in
# between (150 runs). Each armed run must either
#   - exit 0 with the clean run's outputs (stdout, run.json, indices.txt, the log and
#     results.json without their elapsed times, the checkpoint), or
#   - exit 1 (2 would say the command line is wrong), not by a signal and not hung, with one
#     line on stderr besides the clean run's own lines, and that line says "memory"; and
#     leave no *.tmp or probe file, no file the clean run does not write, and only whole
#     files: a run that stops before its first checkpoint leaves nothing, else run.json
#     parses and records the checkpoint that is there (and has the clean run's size),
#     indices.txt is the clean run's, the log is a beginning of the clean run's, and every
#     JSON(L) file parses.
# For time, gnuplot is kept off the runs' PATH (it is not grzo's code; the plot's own files
# are still made and removed) and GRZO_KERNEL_ENV_SET=1 saves the re-execution (cpu_env.h;
# it allocates nothing counted); each run is a fresh folder.
# usage: test_finetune_oom.sh GRZO_FINETUNE DATA_DIR WORK_DIR SHIM [N]
#   with N, only the run with allocation N failing (a reproduction), its folder kept.
#   GRZO_OOM_ALL=1: every N, whatever T (by hand: about T / 3 seconds on two cores).
#   GRZO_OOM_JOBS: runs at once (2).
set -u
bin=$(realpath "$1") data=$(realpath "$2") work=$3 shim=$(realpath "$4") only=${5:-}
fail() { echo "FAIL: $*"; exit 1; }
command -v python3 > /dev/null || fail "python3 is needed to check the JSON files"
mkdir -p "$work" && work=$(realpath "$work") || exit 1
ulimit -c 0   # a crash is seen by its exit status; no core files
common=(--model "$data/stories260K.bin" --tokenizer "$data/tok512.bin" --task sst2 --data "$data/tasks/SST-2"
        --n-train 4 --n-dev 2 --n-test 2 --batch 2 --lr 1e-3 --sigma 1e-3 --seed 5 --threads 1
        --steps 3 --eval-every 2 --save-every 2 --out o)
# the log without the elapsed seconds, results.json without the training seconds
strip_log() { sed 's/,"elapsed":[0-9.]*//' "$1"; }
strip_results() { sed 's/"seconds":[0-9.]*,//' "$1"; }
# stderr lines that differ between runs only by a measured speed
plain_err() { sed 's/[0-9.]* GFLOP\/s/N GFLOP\/s/' "$1"; }

# finetune DIR N: grzo-finetune in DIR with allocation N failing (0: none), count in DIR/count
finetune() {
    local dir=$1 n=$2 rc
    rm -rf "$dir" && mkdir -p "$dir" || return 1
    (cd "$dir" && timeout 60 env PATH=/nonexistent GRZO_KERNEL_ENV_SET=1 OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
        LD_PRELOAD="$shim" GRZO_OOM_PROGRAM="${bin##*/}" GRZO_OOM_FAIL_AT="$n" GRZO_OOM_COUNT_FILE="$dir/count" \
        GRZO_OOM_WHERE_FILE="$dir/where" "$bin" "${common[@]}" > out.txt 2> err.txt)
    rc=$?
    echo "$rc" > "$dir/rc"
}
# (the parallel jobs of the schedule below: this script again, one armed run each)
case "$only" in run:*) finetune "$work/n${only#run:}" "${only#run:}"; exit 0 ;; esac

# the clean run: what every armed run is held to
clean=$work/clean
if [ -z "$only" ] || [ ! -s "$clean/count" ]; then
    finetune "$clean" 0
    [ "$(cat "$clean/rc")" -eq 0 ] || fail "the clean run exited $(cat "$clean/rc"): $(tail -3 "$clean/err.txt")"
    [ -s "$clean/count" ] || fail "the shim counted nothing: is $shim preloaded?"
    [ -f "$clean/o/checkpoint.grzo" ] && [ -f "$clean/o/results.json" ] && [ "$(wc -l < "$clean/o/log.jsonl")" -eq 3 ] &&
        grep -q '"dev_acc"' "$clean/o/log.jsonl" || fail "the clean run did not write its files: $(ls "$clean/o" | tr '\n' ' ')"
    plain_err "$clean/err.txt" > "$clean/err.plain"
fi
total=$(cat "$clean/count")
[ "$total" -gt 100 ] || fail "only $total counted allocations: the shim does not see the program's own"

# oom_where DIR: the function that made the failed allocation (tests/oom_driver.sh; this
# script keeps its own schedule and checks: one scenario, run.json's JSON checks)
oom_bin=$bin
. "$(cd "$(dirname "$0")" && pwd)/../oom_driver.sh"

# check N: the verdict on the armed run N ("" when it passes)
check() {
    local n=$1 dir=$work/n$1 rc extra f
    rc=$(cat "$dir/rc")
    if [ "$rc" -eq 0 ]; then
        # (a plot that fails is a note: the results are written)
        extra=$(plain_err "$dir/err.txt" | grep -v -x -F -f "$clean/err.plain" | grep -v '^note: no .*loss\.png: ')
        [ -z "$extra" ] || { echo "exit 0 with new stderr lines: $extra"; return; }
        cmp -s "$clean/out.txt" "$dir/out.txt" || { echo "exit 0, but stdout differs: $(diff "$clean/out.txt" "$dir/out.txt" | head -3)"; return; }
        [ "$(cd "$clean/o" && ls -A)" = "$(cd "$dir/o" && ls -A)" ] || { echo "exit 0, but other files: $(ls -A "$dir/o" | tr '\n' ' ')"; return; }
        cmp -s "$clean/o/run.json" "$dir/o/run.json" && cmp -s "$clean/o/indices.txt" "$dir/o/indices.txt" &&
            cmp -s "$clean/o/checkpoint.grzo" "$dir/o/checkpoint.grzo" &&
            cmp -s <(strip_log "$clean/o/log.jsonl") <(strip_log "$dir/o/log.jsonl") &&
            cmp -s <(strip_results "$clean/o/results.json") <(strip_results "$dir/o/results.json") ||
            { echo "exit 0 with outputs that differ from the clean run's"; return; }
        return
    fi
    [ "$rc" -eq 124 ] && { echo "hung (killed after 60 s)"; return; }
    [ "$rc" -gt 2 ] && { echo "exit $rc (a signal?): $(tail -2 "$dir/err.txt")"; return; }
    [ "$rc" -eq 2 ] && { echo "exit 2, which says the command line is wrong: $(tail -1 "$dir/err.txt")"; return; }
    # the error: the one stderr line the clean run does not print, and the last one
    extra=$(plain_err "$dir/err.txt" | grep -v -x -F -f "$clean/err.plain")
    [ "$(printf '%s\n' "$extra" | grep -c .)" -eq 1 ] || { echo "exit $rc with $(printf '%s\n' "$extra" | grep -c .) new stderr lines: $extra"; return; }
    [ "$extra" = "$(plain_err "$dir/err.txt" | tail -1)" ] || { echo "the error is not the last line: $(tail -2 "$dir/err.txt")"; return; }
    case "$extra" in grzo-finetune:*memory*) ;; *) echo "exit $rc, the message does not say memory: $extra"; return ;; esac
    # what the failed run left
    f=$(cd "$dir" && find . \( -name '*.tmp' -o -name '.grzo-finetune-probe-*' -o -name loss.gp \) | head -3)
    [ -z "$f" ] || { echo "left $(echo $f)"; return; }
    [ -e "$dir/o" ] || return 0   # nothing kept: a run that stopped before its first checkpoint
    for f in $(ls -A "$dir/o"); do
        [ -e "$clean/o/$f" ] || { echo "left $f, which the clean run does not write"; return; }
    done
    [ -f "$dir/o/checkpoint.grzo" ] && [ -f "$dir/o/run.json" ] ||
        { echo "stopped with files but no checkpoint to resume: $(ls -A "$dir/o" | tr '\n' ' ')"; return; }
    cmp -s "$clean/o/indices.txt" "$dir/o/indices.txt" || { echo "indices.txt differs from the clean run's"; return; }
    [ "$(wc -c < "$dir/o/checkpoint.grzo")" -eq "$(wc -c < "$clean/o/checkpoint.grzo")" ] ||
        { echo "the checkpoint has $(wc -c < "$dir/o/checkpoint.grzo") bytes, the clean run's $(wc -c < "$clean/o/checkpoint.grzo")"; return; }
    [ ! -e "$dir/o/log.jsonl" ] || cmp -s <(strip_log "$dir/o/log.jsonl") <(strip_log "$clean/o/log.jsonl" | head -n "$(wc -l < "$dir/o/log.jsonl")") ||
        { echo "the log is not a beginning of the clean run's"; return; }
    [ ! -e "$dir/o/results.json" ] || cmp -s <(strip_results "$clean/o/results.json") <(strip_results "$dir/o/results.json") ||
        { echo "results.json differs from the clean run's"; return; }
    echo "$dir/o" >> "$work/kept"   # the JSON checks (python, once for all)
}

# json_check FOLDER...: every .json parses, every .jsonl line does, and run.json records the
# checkpoint that is there (its header's step, grzo.h section 6); one line per bad folder
json_check() {
    python3 - "$@" << 'EOF'
import json, os, struct, sys
for d in sys.argv[1:]:
    try:
        for name in sorted(os.listdir(d)):
            p = os.path.join(d, name)
            if name.endswith('.json'):
                json.load(open(p))
            elif name.endswith('.jsonl'):
                for line in open(p):
                    json.loads(line)
        rec = json.load(open(os.path.join(d, 'run.json')))
        with open(os.path.join(d, 'checkpoint.grzo'), 'rb') as f:
            head = f.read(256)
        step = struct.unpack_from('<Q', head, 40)[0]
        if step not in (rec.get('checkpoint_step'), rec.get('checkpoint_saving')):
            raise ValueError('the checkpoint is at step %d, run.json records %r' % (step, rec.get('checkpoint_step')))
    except Exception as e:
        print('%s: %s' % (d, e))
EOF
}

if [ -n "$only" ]; then
    rm -f "$work/kept"
    finetune "$work/n$only" "$only"
    verdict=$(check "$only")
    [ -z "$verdict" ] && [ -e "$work/kept" ] && verdict=$(json_check "$(cat "$work/kept")")
    echo "N = $only of $total: exit $(cat "$work/n$only/rc"), failed allocation: $(oom_where "$work/n$only")"
    cat "$work/n$only/err.txt"
    [ -z "$verdict" ] || fail "N = $only: $verdict"
    echo "ok"
    exit 0
fi

# the schedule
if [ "$total" -le 150 ] || [ "${GRZO_OOM_ALL:-0}" = 1 ]; then
    schedule=$(seq 1 "$total")
else
    schedule=$( (seq 1 60; seq $((total - 39)) "$total"; for i in $(seq 1 50); do echo $((60 + i * (total - 100) / 51)); done) | sort -n -u)
fi
runs=$(echo "$schedule" | wc -l)
start=$SECONDS
printf '%s\n' $schedule | xargs -P "${GRZO_OOM_JOBS:-2}" -I{} bash "$0" "$bin" "$data" "$work" "$shim" run:{} ||
    fail "a run could not be started"
rm -f "$work/kept"
bad=0
for n in $schedule; do
    verdict=$(check "$n")
    if [ -n "$verdict" ]; then
        echo "FAIL N = $n: $verdict (failed allocation: $(oom_where "$work/n$n"))"
        bad=$((bad + 1))
    fi
done
if [ -e "$work/kept" ]; then
    while read -r line; do
        echo "FAIL ${line%%/o:*}: ${line#*/o: }"
        bad=$((bad + 1))
    done < <(json_check $(cat "$work/kept"))
fi
[ "$bad" -eq 0 ] || fail "$bad of $runs runs; reproduce one: $0 $bin $data $work $shim N"
failed=$(for n in $schedule; do [ "$(cat "$work/n$n/rc")" -ne 0 ] && echo x; done | wc -l)
for n in $schedule; do rm -rf "$work/n$n"; done
echo "ok: $runs runs of $total counted allocations ($failed failed cleanly, $((runs - failed)) recovered), $((SECONDS - start)) s"
