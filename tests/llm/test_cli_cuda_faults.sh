#!/usr/bin/env bash
# grzo-generate --device cuda and grzo-finetune --device cuda when the device fails: the CLIs
# linked against the emulated CUDA runtime (tests/llm/meson.build: llm_emulated), whose
# injector (tests/cuda_emu/emu_fault.h) fails the N-th fallible CUDA runtime or cuBLAS call
# of the process (EMU_FAIL_AT=N) and reports at exit the calls made, the failed one and the
# device memory, pinned blocks and handles still held (EMU_REPORT_FILE).
#   generate: stories260K + tok512, greedy, 8 positions from the prompt
#   finetune: stories260K on the SST-2 sample, B = 2, 1 step, a checkpoint at step 1
# Each is run once clean (T calls, S call sites), then with call N failing for: generate, the
# first call of every site and every (T / 40)-th call, plain, and the first call of each
# runtime function (by name) sticky (EMU_FAIL_STICKY=1: every later call fails too);
# finetune (a run takes seconds), the first call of each function, every (T / 8)-th call
# and the last, plain, and the first launch and the first synchronization, sticky.
# GRZO_FAULTS_ALL=1: every N, plain, for both. Each armed run must either
#   - exit 0 with the clean run's stdout and files (a failure absorbed), or
#   - exit 1 (not 2, which says the command line is wrong; not a signal, not hung), with one
#     stderr line besides the clean run's, the last, that names the program and says what of
#     the device failed (cuda, CUDA, cuBLAS or device); grzo-generate's stdout a beginning of
#     the clean run's; grzo-finetune's folder holding no *.tmp or probe file, no file the
#     clean run does not write, and a checkpoint, if any, of the clean run's size;
# and in both cases: no sanitizer report, no emulator misuse report (EMU-REPORT), and no
# device memory, pinned block, stream, event or cuBLAS handle left at exit.
# usage: test_cli_cuda_faults.sh GRZO_FINETUNE GRZO_GENERATE DATA_DIR WORK_DIR [generate|finetune N [sticky]]
#   with a scenario and N: that run alone, its folder kept (a reproduction).
set -u
ft=$(realpath "$1") gen=$(realpath "$2") data=$(realpath "$3") work=$4 only=${5:-} only_n=${6:-} only_sticky=${7:-}
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p "$work" && work=$(realpath "$work") || exit 1
ulimit -c 0
start=$SECONDS

args() {   # SCENARIO: its program and command line in `bin` and `args`
    case $1 in
        generate) bin=$gen args=(--model "$data/stories260K.bin" --tokenizer "$data/tok512.bin" --prompt "Once upon a time"
                                 --steps 8 --device cuda) ;;
        finetune) bin=$ft args=(--model "$data/stories260K.bin" --tokenizer "$data/tok512.bin" --task sst2 --data "$data/tasks/SST-2"
                                --n-train 2 --n-dev 1 --n-test 1 --batch 2 --lr 1e-3 --sigma 1e-3 --seed 5 --threads 1 --steps 1
                                --eval-every 0 --save-every 1 --device cuda --out o) ;;
        *) fail "unknown scenario $1" ;;
    esac
}
# run SCENARIO N STICKY: the program in a fresh folder with call N failing (0: none)
run() {
    local dir=$work/$1/n$2$3 rc
    [ "$2" -eq 0 ] && dir=$work/$1/clean
    args "$1"
    rm -rf "$dir" && mkdir -p "$dir/run" || return 1
    (cd "$dir/run" && timeout 120 env PATH=/nonexistent OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=passive \
        EMU_COUNT_CALLS=1 EMU_FAIL_AT="$2" EMU_FAIL_STICKY="${3:+1}" EMU_REPORT_FILE="$dir/report" \
        "$bin" "${args[@]}" > "$dir/out.txt" 2> "$dir/err.txt")
    rc=$?
    echo "$rc" > "$dir/rc"
}
case "$only" in run:*) s=${only#run:}; IFS=: read -r sc n st <<< "$s"; run "$sc" "$n" "$st"; exit 0 ;; esac

# stderr without what the clock changes
plain_err() { sed -E -e '/^generated [0-9]+ tokens in /s/ in .*/ in (time)/' -e 's/[0-9.]+ GFLOP\/s/N GFLOP\/s/' "$1"; }
field() { sed -n "s/^$2 //p" "$1/report"; }
# prefix_of CLEAN GOT: GOT is a beginning of CLEAN, or one with a newline added (a failed
# grzo-generate ends its text with one)
prefix_of() {
    local n
    n=$(wc -c < "$2")
    cmp -s <(head -c "$n" "$1") "$2" && return 0
    [ "$n" -gt 0 ] && [ "$(tail -c 1 "$2" | od -An -c | tr -d ' ')" = '\n' ] && cmp -s <(head -c $((n - 1)) "$1") <(head -c $((n - 1)) "$2")
}

# check SCENARIO DIR: the verdict of one armed run (nothing when it passes)
check() {
    local s=$1 dir=$2 c=$work/$1/clean rc extra f
    rc=$(cat "$dir/rc")
    [ -s "$dir/report" ] || { echo "no emulator report (exit $rc: $(tail -2 "$dir/err.txt"))"; return; }
    grep -q "EMU-REPORT" "$dir/out.txt" && { echo "emulator misuse: $(grep -m2 EMU-REPORT "$dir/out.txt")"; return; }
    grep -q -E "Sanitizer|runtime error:" "$dir/err.txt" && { echo "sanitizer: $(grep -m2 -E "Sanitizer|runtime error:" "$dir/err.txt")"; return; }
    [ "$(field "$dir" device_bytes)" = 0 ] && [ "$(field "$dir" pinned)" = 0 ] && [ "$(field "$dir" handles)" = 0 ] ||
        { echo "exit $rc leaves $(field "$dir" device_bytes) device bytes, $(field "$dir" pinned) pinned blocks, $(field "$dir" handles) handles"; return; }
    if [ "$rc" -eq 0 ]; then
        extra=$(plain_err "$dir/err.txt" | grep -v -x -F -f "$c/err.plain")
        [ -z "$extra" ] || { echo "exit 0 with new stderr lines: $extra"; return; }
        cmp -s "$c/out.txt" "$dir/out.txt" || { echo "exit 0, but stdout differs"; return; }
        [ "$(cd "$c/run" && find . | sort)" = "$(cd "$dir/run" && find . | sort)" ] || { echo "exit 0, but other files"; return; }
        return
    fi
    [ "$rc" -eq 124 ] && { echo "hung (killed after 120 s)"; return; }
    [ "$rc" -eq 1 ] || { echo "exit $rc (1 expected): $(tail -2 "$dir/err.txt")"; return; }
    extra=$(plain_err "$dir/err.txt" | grep -v -x -F -f "$c/err.plain")
    [ "$(printf '%s\n' "$extra" | grep -c .)" -eq 1 ] || { echo "exit 1 with $(printf '%s\n' "$extra" | grep -c .) new stderr lines: $extra"; return; }
    [ "$extra" = "$(plain_err "$dir/err.txt" | tail -1)" ] || { echo "the error is not the last line: $(tail -2 "$dir/err.txt")"; return; }
    case "$extra" in "${bin##*/}"*) ;; grzo-*) ;; *) echo "the error does not name the program: $extra"; return ;; esac
    printf '%s\n' "$extra" | grep -q -E "cuda|CUDA|cuBLAS|device" || { echo "the error does not say the device failed: $extra"; return; }
    if [ "$s" = generate ]; then
        prefix_of "$c/out.txt" "$dir/out.txt" || { echo "stdout is not a beginning of the clean run's: $(head -c 100 "$dir/out.txt")"; return; }
        return
    fi
    f=$(cd "$dir/run" && find . \( -name '*.tmp' -o -name '.grzo-finetune-probe-*' -o -name loss.gp \) | head -3)
    [ -z "$f" ] || { echo "left $(echo $f)"; return; }
    [ -e "$dir/run/o" ] || return 0
    for f in $(ls -A "$dir/run/o"); do
        [ -e "$c/run/o/$f" ] || { echo "left $f, which the clean run does not write"; return; }
    done
    [ ! -e "$dir/run/o/checkpoint.grzo" ] || [ "$(wc -c < "$dir/run/o/checkpoint.grzo")" -eq "$(wc -c < "$c/run/o/checkpoint.grzo")" ] ||
        { echo "a checkpoint of $(wc -c < "$dir/run/o/checkpoint.grzo") bytes (the clean run's: $(wc -c < "$c/run/o/checkpoint.grzo"))"; return; }
}

clean() {
    local c=$work/$1/clean
    run "$1" 0 ""
    [ "$(cat "$c/rc")" -eq 0 ] || fail "$1: the clean run exited $(cat "$c/rc"): $(tail -3 "$c/err.txt")"
    [ "$(field "$c" calls)" -gt 100 ] || fail "$1: the clean run made $(field "$c" calls) counted calls: is the injector there?"
    plain_err "$c/err.txt" > "$c/err.plain"
    [ -z "$(check "$1" "$c")" ] || fail "$1: the clean run: $(check "$1" "$c")"
}

# schedule SCENARIO: "N sticky" lines (sticky empty or s)
schedule() {
    local c=$work/$1/clean t
    t=$(field "$c" calls)
    if [ "${GRZO_FAULTS_ALL:-0}" = 1 ]; then seq 1 "$t"; return; fi
    {
        if [ "$1" = generate ]; then
            sed -n 's/^site \([0-9]*\) .*/\1/p' "$c/report"
            seq $((t / 40)) $((t / 40)) "$t"
            awk '$1 == "site" && !seen[$3]++ { print $2 " s" }' "$c/report"
        else
            awk '$1 == "site" && !seen[$3]++ { print $2 }' "$c/report"
            seq $((t / 8)) $((t / 8)) "$t"
            echo "$t"
            awk '$1 == "site" && ($3 == "kernel" || $3 == "cudaStreamSynchronize") && !seen[$3]++ { print $2 " s" }' "$c/report"
        fi
    } | sort -n -u
}

if [ -n "$only" ]; then
    [ -s "$work/$only/clean/report" ] || clean "$only"
    run "$only" "$only_n" "${only_sticky:+s}"
    d=$work/$only/n$only_n${only_sticky:+s}
    verdict=$(check "$only" "$d")
    echo "$only N = $only_n${only_sticky:+ (sticky)} of $(field "$work/$only/clean" calls): exit $(cat "$d/rc"), failed call: $(field "$d" failed)"
    cat "$d/err.txt"
    [ -z "$verdict" ] || fail "$verdict"
    echo ok
    exit 0
fi

bad=0 summary=
for s in generate finetune; do
    clean "$s"
    schedule "$s" | awk -v s="$s" '{ print "run:" s ":" $1 ":" $2 }' > "$work/$s/jobs"
    xargs -P "${GRZO_FAULTS_JOBS:-2}" -I{} bash "$0" "$1" "$2" "$3" "$4" {} < "$work/$s/jobs" || fail "a run could not be started"
    n=0 failed=0
    while IFS=: read -r _ _ num st; do
        d=$work/$s/n$num$st n=$((n + 1))
        verdict=$(check "$s" "$d")
        [ "$(cat "$d/rc")" -ne 0 ] && failed=$((failed + 1))
        if [ -n "$verdict" ]; then
            echo "FAIL $s N = $num${st:+ (sticky)}, call $(field "$d" failed): $verdict"
            bad=$((bad + 1))
        else
            rm -rf "$d"
        fi
    done < "$work/$s/jobs"
    summary="$summary $s: $n runs of $(field "$work/$s/clean" calls) calls ($failed failed cleanly);"
done
[ "$bad" -eq 0 ] || fail "$bad runs; reproduce one: $0 $1 $2 $3 $4 SCENARIO N [sticky]"
echo "ok:${summary%;} $((SECONDS - start)) s"
