#!/usr/bin/env bash
# grzo-probe's output files: never half-written, a failure is one line and a nonzero exit.
#   - --out naming a regular file is refused before any work (no table printed);
#   - a CSV that cannot be written whole (a file size limit) is an error, the CSV of an
#     earlier run stays as it was and no temporary is left;
#   - a gnuplot that fails after starting the PNG is an error, and leaves no PNG and no
#     temporary; a gnuplot that succeeds leaves the PNG (gnuplot stand-ins on PATH: each
#     writes the file its script's "set output" names, so that these checks do not depend
#     on the gnuplot installed here, and shows the script run names a temporary);
#   - with PROBE_FAILMALLOC (a copy of grzo-probe whose malloc fails on request), an
#     allocation failure in 'batch' (the data set, a table cell, the row buffers' labels) is
#     its one-line error, not a crash.
# usage: test_outputs.sh GRZO_PROBE WORK_DIR [GRZO_PROBE_FAILMALLOC]
set -u
probe=$1 work=$2 failmalloc=${3:-}
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work/bin-ok" "$work/bin-fail" || exit 1
# exit 3 (a runtime error) with exactly one line on stderr matching $2: check_error OUT_PREFIX REGEX
check_error() {
    local rc lines
    rc=$(cat "$1.rc") lines=$(wc -l < "$1.err")
    [ "$rc" -eq 3 ] && [ "$lines" -eq 1 ] && grep -q -- "$2" "$1.err" ||
        fail "$1: want exit 3 and one line matching '$2', got exit $rc and: $(cat "$1.err")"
}
run() { local o=$1; shift; "$probe" "$@" > "$o.out" 2> "$o.err"; echo $? > "$o.rc"; }

# --out names a regular file
echo "not a folder" > "$work/afile"
run "$work/file" variance --quick --out "$work/afile"
check_error "$work/file" "is not a folder"
[ ! -s "$work/file.out" ] || fail "--out naming a file: the subcommand ran first: $(head -3 "$work/file.out")"
[ "$(cat "$work/afile")" = "not a folder" ] || fail "--out naming a file: the file was changed"

# a CSV cut short by a file size limit (1 KiB; the alignment CSV is larger). SIGXFSZ is
# ignored so that the write fails with EFBIG instead of killing the program.
d=$work/limit
mkdir -p "$d" && echo "earlier run" > "$d/probe_alignment.csv" || exit 1
(trap '' XFSZ; ulimit -f 1; exec "$probe" alignment --quick --no-plot --out "$d") > /dev/null 2> "$d.err"
echo $? > "$d.rc"
check_error "$d" "cannot write '.*probe_alignment.csv'"
[ "$(cat "$d/probe_alignment.csv")" = "earlier run" ] || fail "a failed write replaced the earlier CSV"
[ "$(ls "$d")" = probe_alignment.csv ] || fail "a failed write left files behind: $(ls "$d")"

# gnuplot stand-ins: one fails after starting the PNG, one succeeds
cat > "$work/bin-fail/gnuplot" << 'EOF2'
#!/bin/sh
out=$(sed -n "s/^set output '\(.*\)'$/\1/p" "$1")
printf 'half a PNG' > "$out"
echo "stand-in gnuplot: failed" >&2
exit 1
EOF2
cat > "$work/bin-ok/gnuplot" << 'EOF2'
#!/bin/sh
out=$(sed -n "s/^set output '\(.*\)'$/\1/p" "$1")
printf 'a whole PNG' > "$out"
EOF2
chmod +x "$work/bin-fail/gnuplot" "$work/bin-ok/gnuplot" || exit 1
d=$work/plot-fails
PATH=$work/bin-fail:$PATH run "$d" batch --quick --out "$d"
[ "$(cat "$d.rc")" -eq 3 ] && grep -q "grzo-probe: gnuplot failed" "$d.err" ||
    fail "a failed plot: want exit 3 and a message, got exit $(cat "$d.rc"): $(cat "$d.err")"
[ ! -e "$d/probe_batch.png" ] || fail "a failed plot left a PNG"
[ "$(ls "$d" | tr '\n' ' ')" = "probe_batch.csv probe_batch.gp " ] || fail "a failed plot left files behind: $(ls "$d")"
d=$work/plot-ok
PATH=$work/bin-ok:$PATH run "$d" batch --quick --out "$d"
[ "$(cat "$d.rc")" -eq 0 ] || fail "a plot that succeeds: exit $(cat "$d.rc"): $(cat "$d.err")"
[ "$(cat "$d/probe_batch.png" 2> /dev/null)" = "a whole PNG" ] || fail "a plot that succeeds: no PNG"
grep -q "^PNG: $d/probe_batch.png$" "$d.out" || fail "a plot that succeeds: no 'PNG:' line"
grep -q "^set output 'probe_batch.png'$" "$d/probe_batch.gp" || fail "the kept script must draw probe_batch.png when run by hand"
[ "$(ls "$d" | tr '\n' ' ')" = "probe_batch.csv probe_batch.gp probe_batch.png " ] || fail "files left behind: $(ls "$d")"

# an allocation failure in batch: the data set's first buffer (1024 examples x 16 inputs x 4 bytes)
if [ -n "$failmalloc" ]; then
    d=$work/oom
    PROBE_FAIL_MALLOC_SIZE=65536 "$failmalloc" batch --quick --no-plot --out "$d" > "$d.out" 2> "$d.err"
    echo $? > "$d.rc"
    check_error "$d" "out of memory"
    # the table's header cell "largest / median step" (22 bytes): its last cell fails, the
    # eight before it and the cell array must be freed (under ASan a leak exits 86, not 3)
    d=$work/oom_table
    PROBE_FAIL_MALLOC_SIZE=22 "$failmalloc" batch --quick --no-plot --out "$d" > "$d.out" 2> "$d.err"
    echo $? > "$d.rc"
    check_error "$d" "out of memory (table)"
    # the row buffers' labels (256 rows x 4 bytes, model.c's ensure_rows): reported as such,
    # also when the buffer allocated next succeeds (a check of both at once missed one alone)
    d=$work/oom_rows
    PROBE_FAIL_MALLOC_SIZE=1024 "$failmalloc" batch --quick --no-plot --out "$d" > "$d.out" 2> "$d.err"
    echo $? > "$d.rc"
    check_error "$d" "malloc failed: out of memory"
fi
echo "ok: grzo-probe's outputs (a file as --out, a short write, a failed and a good plot${failmalloc:+, allocation failures in batch})"
