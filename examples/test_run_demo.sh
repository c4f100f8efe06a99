#!/usr/bin/env bash
# examples/run-demo.sh's handling of its files, in a stand-in checkout (its .ci/deps.sh
# installs and builds nothing; build/examples/demo is the demo built here; a gnuplot
# stand-in on PATH writes the file its script's "set output" names):
#   - a refused argument leaves the last run's demo.txt, demo.csv and demo.png as they were;
#   - a --csv FILE given as a relative path lands in the caller's folder;
#   - a run that succeeds replaces all three, and leaves no temporary;
#   - a run whose --check fails (after its curves were written) replaces nothing.
# usage: test_run_demo.sh RUN_DEMO_SH DEMO WORK_DIR
set -u
script=$1 demo=$2 work=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" || exit 1
repo=$work/checkout out=$work/checkout/build/demo caller=$work/somewhere
mkdir -p "$repo/examples" "$repo/.ci" "$repo/build/examples" "$out" "$caller" "$work/bin" || exit 1
cp "$script" "$repo/examples/run-demo.sh" || exit 1
printf 'grzo_install_deps() { :; }\ngrzo_build() { :; }\n' > "$repo/.ci/deps.sh"
ln -s "$(cd "$(dirname "$demo")" && pwd)/$(basename "$demo")" "$repo/build/examples/demo" || exit 1
cat > "$work/bin/gnuplot" << 'EOF2'
#!/bin/sh
out=$(sed -n "s/^set output '\(.*\)'$/\1/p")
printf 'a PNG' > "$out"
EOF2
chmod +x "$work/bin/gnuplot" || exit 1
demo_run() { (cd "$caller" && PATH=$work/bin:$PATH OMP_NUM_THREADS=1 bash "$repo/examples/run-demo.sh" "$@") > "$work/run.out" 2>&1; }
# the three files as a fingerprint, and no temporary beside them
files_now() { cat "$out/demo.txt" "$out/demo.csv" "$out/demo.png" 2> /dev/null | md5sum; }
no_leftovers() { [ "$(ls "$out" | tr '\n' ' ')" = "demo.csv demo.png demo.txt " ] || fail "$1: files in build/demo: $(ls "$out")"; }

echo "last run's text" > "$out/demo.txt"; echo "last run's curves" > "$out/demo.csv"; echo "last run's plot" > "$out/demo.png"
before=$(files_now)
demo_run --steps abc
[ $? -ne 0 ] || fail "--steps abc: want a nonzero exit"
[ "$(files_now)" = "$before" ] || fail "a refused argument changed the last run's files"
no_leftovers "a refused argument"

demo_run --quick --csv mine.csv
[ $? -eq 0 ] || fail "--csv mine.csv: $(tail -3 "$work/run.out")"
[ -s "$caller/mine.csv" ] || fail "--csv mine.csv: not written in the caller's folder"
[ ! -e "$repo/mine.csv" ] || fail "--csv mine.csv: written relative to the checkout"
head -1 "$caller/mine.csv" | grep -q '^step,forward_rows' || fail "--csv mine.csv: not the curves"

demo_run --quick
[ $? -eq 0 ] || fail "--quick: $(tail -3 "$work/run.out")"
head -1 "$out/demo.csv" | grep -q '^step,forward_rows' || fail "--quick: demo.csv not replaced"
grep -q 'GRZO' "$out/demo.txt" || fail "--quick: demo.txt not replaced"
[ "$(cat "$out/demo.png")" = "a PNG" ] || fail "--quick: demo.png not drawn"
no_leftovers "a run that succeeded"

before=$(files_now)
demo_run --quick --check --lr-grzo 1e-9
[ $? -ne 0 ] || fail "--check with a GRZO that barely moves: want a nonzero exit"
[ "$(files_now)" = "$before" ] || fail "a failed --check replaced the last run's files"
no_leftovers "a failed --check"
echo "ok: run-demo.sh (a refused argument, --csv from the caller's folder, a run, a failed check)"
