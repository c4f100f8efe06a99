#!/bin/sh
# The test suite's threads under ThreadSanitizer: builds the tree with clang and
# -fsanitize=thread into build/tsan/ (TSAN_OUT changes it), runs the Meson suites given
# (default: core llm finetune probe cli) with 2 OpenMP threads, and exits nonzero if
# ThreadSanitizer reported anything.
#
#   tests/tsan.sh [SUITE...]
#
# Why clang and LLVM's OpenMP runtime, not the suite's GCC build: ThreadSanitizer sees an
# OpenMP program's barriers and locks only through libomp's tool for it, libarcher (Debian:
# libomp-14-dev); GNU's libgomp is not instrumented, so a GCC build reports races that its
# barriers rule out. libomp and OpenBLAS's OpenMP build (libgomp) cannot share a process
# (meson.build), so here the plain GEMMs run grzo's portable loops (-Dopenblas=disabled);
# the fused perturbed GEMM still runs BLIS's micro-kernel in grzo's OpenMP loops.
#
# Each report is written to OUT/reports/ (a test that had one exits 66). Tests that fail
# without a report are listed but do not count. Five cannot pass here: probe_outputs,
# finetune_cli_logs and finetune_cli_foreign run a program under a file-size limit (ulimit
# -f), which cuts short the file libomp registers itself in under /dev/shm, and libomp's
# start then dies of SIGBUS reading it; finetune_cli_interrupt and gpu_finetune_script
# (smoke) expect a checkpoint within a time that ThreadSanitizer's slowdown overruns.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
out=${TSAN_OUT:-$root/build/tsan}
archer=${TSAN_ARCHER:-$(ls /usr/lib/llvm-*/lib/libarcher.so 2> /dev/null | tail -n 1)}
[ -n "$archer" ] && [ -f "$archer" ] || { echo "tsan.sh: no libarcher.so (install libomp-dev; or set TSAN_ARCHER)" >&2; exit 2; }
command -v clang > /dev/null || { echo "tsan.sh: no clang on PATH" >&2; exit 2; }
[ $# -gt 0 ] || set -- core llm finetune probe cli
if [ ! -f "$out/build.ninja" ]; then
    CC=clang CXX=clang++ meson setup "$out" "$root" -Db_sanitize=thread -Dbuildtype=debugoptimized \
        -Dopenblas=disabled -Dblis=auto -Dopenmp=enabled -Dcuda=disabled -Dmpi=disabled > "$out.setup.log" 2>&1 ||
        { cat "$out.setup.log" >&2; echo "tsan.sh: meson setup failed" >&2; exit 1; }
fi
ninja -C "$out" > "$out.build.log" 2>&1 || { tail -n 30 "$out.build.log" >&2; echo "tsan.sh: the build failed" >&2; exit 1; }
# the Python reference tests' packages (tests/run.sh installs them into build/pylib)
[ -d "$root/build/pylib" ] && ln -sfn "$root/build/pylib" "$out/pylib"
rm -rf "$out/reports" && mkdir -p "$out/reports"
suites=
for s in "$@"; do suites="$suites --suite $s"; done
# shellcheck disable=SC2086 # suites is a word list
OMP_TOOL_LIBRARIES=$archer OMP_NUM_THREADS=2 \
TSAN_OPTIONS="ignore_noninstrumented_modules=1 halt_on_error=0 log_path=$out/reports/tsan" \
    meson test -C "$out" --no-rebuild --num-processes 1 --timeout-multiplier 10 $suites > "$out/tests.log" 2>&1 || true
grep -E '^ *[0-9]+/[0-9]+ .* (FAIL|TIMEOUT) ' "$out/tests.log" || true
n=$(cat "$out/reports"/tsan.* 2> /dev/null | grep -c '^WARNING: ThreadSanitizer' || true)
grep -h '^SUMMARY: ThreadSanitizer' "$out/reports"/tsan.* 2> /dev/null | sort | uniq -c | sort -rn || true
tail -n 12 "$out/tests.log" | grep -E '^(Ok|Fail|Expected Fail|Skipped|Timeout):'
echo "tsan.sh: $n ThreadSanitizer reports (suites: $*; tests: $out/tests.log)"
[ "$n" -eq 0 ]
