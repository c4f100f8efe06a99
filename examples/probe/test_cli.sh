#!/usr/bin/env bash
# grzo-probe's command line (main.c), what the subcommands' tests do not reach:
#   - --help exits 0 and names every subcommand;
#   - a usage error (no subcommand, an unknown one, two, an unknown option, an option without
#     its value, an empty --out) exits 2 with one line on stderr, before any work;
#   - --threads changes nothing in the results and --seed does (README: "every result is a
#     pure function of the seed"): batch's CSV with 1 and 3 threads, byte for byte, and with
#     another seed.
# usage: test_cli.sh GRZO_PROBE WORK_DIR
set -u
probe=$(realpath "$1") work=$2
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work" || exit 1

"$probe" --help > "$work/help" 2> "$work/help.err" || fail "--help: exit $?"
[ ! -s "$work/help.err" ] || fail "--help wrote on stderr: $(cat "$work/help.err")"
for sub in variance cosine quant batch ablation alignment variants all; do
    grep -q "^  $sub " "$work/help" || fail "--help does not list '$sub'"
done

# usage_error ARG...: exit 2 with one stderr line, and no output folder made
usage_error() {
    (cd "$work" && "$probe" "$@" > usage.out 2> usage.err)
    local rc=$?
    [ "$rc" -eq 2 ] && [ "$(wc -l < "$work/usage.err")" -eq 1 ] ||
        fail "'$*': want exit 2 and one line on stderr, got exit $rc and: $(cat "$work/usage.err")"
    [ ! -s "$work/usage.out" ] && [ ! -e "$work/probe-out" ] || fail "'$*': work started before the usage error"
}
usage_error
usage_error nosuch --quick
usage_error batch alignment
usage_error batch --nosuch
usage_error batch --seed
usage_error batch --out ""
usage_error batch --out "$(printf '%01024d' 0)"   # a name as long as opts.out_dir, with no room for its NUL

# run NAME ARG...: batch in quick mode into WORK/NAME
run() {
    local name=$1
    shift
    "$probe" batch --quick --no-plot --out "$work/$name" "$@" > "$work/$name.out" 2>&1 || fail "batch $*: exit $?: $(tail -3 "$work/$name.out")"
}
run one --threads 1 --seed 7
run three --threads 3 --seed 7
run other --threads 3 --seed 8
cmp -s "$work/one/probe_batch.csv" "$work/three/probe_batch.csv" || fail "batch's CSV depends on --threads"
! cmp -s "$work/three/probe_batch.csv" "$work/other/probe_batch.csv" || fail "batch's CSV does not depend on --seed"
echo "ok: grzo-probe's command line (--help, usage errors, --threads and --seed)"
