# oom_driver.sh - what the whole-process out-of-memory scripts share (tests/llm/test_tools_oom.sh,
# tests/probe_oom.sh; tests/finetune/test_finetune_oom.sh takes oom_where): which allocations
# to fail, and the driver that makes each scenario's clean run, runs the armed ones in
# parallel and checks them. Sourced (bash) by a script that
# has defined: work (its folder, absolute), scenarios (the names), oom_bin (the program, for
# addr2line), oom_self (an array: the script and its arguments before SCENARIO N), and the
# functions fail MESSAGE, run SCENARIO N (N = 0: the clean run), clean SCENARIO and check
# SCENARIO N (prints the verdict, nothing when the run passes).

# oom_schedule T: the N to fail of T counted allocations: every one when T <= 28 or
# GRZO_OOM_ALL=1, else the first 20 (the loaders' and grzo_create's), the last 4 (the
# writers') and 4 in between; each run starts a process (one that loads cuBLAS where CUDA is
# built), and CI's time is short
oom_schedule() {
    local t=$1
    if [ "$t" -le 28 ] || [ "${GRZO_OOM_ALL:-0}" = 1 ]; then
        seq 1 "$t"
    else
        (seq 1 20; seq $((t - 3)) "$t"; for i in $(seq 1 4); do echo $((20 + i * (t - 24) / 5)); done) | sort -n -u
    fi
}

# oom_clean_run SCENARIO: its run without a failure (the one every armed run is held to),
# which must succeed, with the shim counting the program's own allocations
oom_clean_run() {
    local c=$work/$1/clean
    run "$1" 0
    [ "$(cat "$c/rc")" -eq 0 ] || fail "$1: the clean run exited $(cat "$c/rc"): $(tail -3 "$c/err.txt")"
    [ -s "$c/count" ] || fail "$1: the shim counted nothing: is it preloaded?"
    [ "$(cat "$c/count")" -gt 10 ] || fail "$1: only $(cat "$c/count") counted allocations: the shim does not see the program's own"
}

# oom_where DIR: the function that made the failed allocation (addr2line, when it can tell)
oom_where() {
    local at
    at=$(cat "$1/where" 2> /dev/null) || { echo "no allocation failed"; return; }
    if command -v addr2line > /dev/null; then echo "$at in $(addr2line -f -i -e "$oom_bin" "$at" | head -1)"; else echo "$at"; fi
}

# oom_reproduce SCENARIO N: that run alone, its folder kept, with the verdict
oom_reproduce() {
    local s=$1 n=$2 verdict
    [ -n "$n" ] || fail "SCENARIO needs N"
    [ -s "$work/$s/clean/count" ] || clean "$s"
    run "$s" "$n"
    verdict=$(check "$s" "$n")
    echo "$s N = $n of $(cat "$work/$s/clean/count"): exit $(cat "$work/$s/n$n/rc"), failed allocation: $(oom_where "$work/$s/n$n")"
    cat "$work/$s/n$n/err.txt"
    [ -z "$verdict" ] || fail "$s N = $n: $verdict"
    echo "ok"
}

# oom_run_all: every scenario's clean run, then its armed runs, GRZO_OOM_JOBS (2) at once
# (the script again with run:SCENARIO:N, which calls run and nothing else), the checks and a
# summary line
oom_run_all() {
    local start=$SECONDS s n j verdict bad=0 summary= failed runs jobs=()
    for s in $scenarios; do
        clean "$s"
        for n in $(oom_schedule "$(cat "$work/$s/clean/count")"); do jobs+=("$s:$n"); done
    done
    printf '%s\n' "${jobs[@]}" | xargs -P "${GRZO_OOM_JOBS:-2}" -I{} bash "${oom_self[@]}" run:{} ||
        fail "a run could not be started"
    for j in "${jobs[@]}"; do
        s=${j%:*} n=${j#*:}
        verdict=$(check "$s" "$n")
        if [ -n "$verdict" ]; then
            echo "FAIL $s N = $n: $verdict (failed allocation: $(oom_where "$work/$s/n$n"))"
            bad=$((bad + 1))
        fi
    done
    [ "$bad" -eq 0 ] || fail "$bad of ${#jobs[@]} runs; reproduce one: ${oom_self[*]} SCENARIO N"
    for s in $scenarios; do
        failed=0 runs=0
        for n in $(oom_schedule "$(cat "$work/$s/clean/count")"); do
            runs=$((runs + 1))
            [ "$(cat "$work/$s/n$n/rc")" -ne 0 ] && failed=$((failed + 1))
            rm -rf "$work/$s/n$n"
        done
        summary="$summary $s: $runs of $(cat "$work/$s/clean/count") ($failed failed cleanly);"
    done
    echo "ok: ${#jobs[@]} runs,${summary%;}; $((SECONDS - start)) s"
}
