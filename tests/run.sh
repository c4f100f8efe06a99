#!/usr/bin/env bash
# The test command: installs missing build dependencies (Debian 12, as root), builds into
# build/, runs every registered test, and ends with "N passed, N failed, N skipped".
set -u
cd "$(dirname "$0")/.."
. .ci/deps.sh
grzo_install_deps || exit 1
grzo_build || { echo "the build failed"; echo "0 passed, 1 failed"; exit 1; }
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
meson test -C build --print-errorlogs "$@"
# a full run must contain the suites whose dependencies grzo_install_deps installs (OpenMPI)
if [ $# -eq 0 ]; then require=(--require mpi); else require=(); fi
python3 .ci/summary.py build/meson-logs/testlog.json "${require[@]}"
