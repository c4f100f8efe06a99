#!/usr/bin/env bash
# The test command: installs missing build dependencies (Debian 12, as root), builds into
# build/, runs every registered test, then (a full run) the same tests built with
# AddressSanitizer + UBSan in build-asan/, and ends with "N passed, N failed, N skipped"
# over both (files the tests left in their TMPDIR count as a failure).
set -u
cd "$(dirname "$0")/.."
. .ci/deps.sh
grzo_install_deps || exit 1
# A full run (no arguments) sanitizes the whole suite in build-asan/ below, so the plain build
# leaves out its own ASan copies of some tests (the same checks, built and run twice).
if [ $# -eq 0 ] && [ "${GRZO_SANITIZED:-1}" != 0 ]; then build_opts=(-Dsanitized_copies=false); else build_opts=(); fi
grzo_build "${build_opts[@]}" || { echo "the build failed"; echo "0 passed, 1 failed"; exit 1; }
grzo_fetch_smollm2
grzo_fetch_gguf_py
grzo_fetch_safetensors_py
grzo_fetch_tokenizers_py
# The staged task data sits beside the checkout where there is one (CI's clone has
# ../shared/data): the real-data test then runs instead of skipping.
if [ -z "${GRZO_TASKS_DATA:-}" ] && [ -f ../shared/data/MANIFEST.md ]; then
    GRZO_TASKS_DATA=$(cd ../shared/data && pwd)
    export GRZO_TASKS_DATA
fi
# Every test runs with TMPDIR a fresh folder: whatever the tests leave in it fails the run
# (.ci/summary.py --tmpdir), then it goes.
test_tmp=$(mktemp -d "${TMPDIR:-/tmp}/grzo-tests.XXXXXX") || { echo "cannot make a TMPDIR for the tests"; echo "0 passed, 1 failed"; exit 1; }
TMPDIR=$test_tmp meson test -C build --print-errorlogs "$@"
logs=(build/meson-logs/testlog.json)
# A full run (no arguments) builds the suite again with AddressSanitizer + UBSan and runs it
# (GRZO_SANITIZED=0 leaves this out); a sanitizer's report fails the test with exit code 86.
if [ $# -eq 0 ] && [ "${GRZO_SANITIZED:-1}" != 0 ]; then
    rm -f build-asan/meson-logs/testlog.json
    if grzo_build_sanitized; then
        echo "grzo: the suite again under AddressSanitizer + UBSan (build-asan/)"
        TMPDIR=$test_tmp ASAN_OPTIONS=exitcode=86:detect_leaks=1 UBSAN_OPTIONS=exitcode=86:print_stacktrace=1 \
            meson test -C build-asan --print-errorlogs --timeout-multiplier 4
    else
        echo "the sanitized build failed"
    fi
    logs+=(asan=build-asan/meson-logs/testlog.json)
fi
# a full run must contain the suites whose dependencies grzo_install_deps installs (OpenMPI)
if [ $# -eq 0 ]; then require=(--require mpi); else require=(); fi
python3 .ci/summary.py "${logs[@]}" "${require[@]}" --tmpdir "$test_tmp"
status=$?
rm -rf "$test_tmp"
exit $status
