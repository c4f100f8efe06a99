#!/bin/sh
# Peak resident memory and time of loading SmolLM2-135M: the GGUF, and the same model as a
# Hugging Face folder (bf16, as published, and f32) read whole into memory first (a loader
# without memory mapping) and memory-mapped (llm_load). Each figure comes from a fresh
# process (bench_llm_load prints its own ru_maxrss).
#   bench/bench_llm_load.sh BENCH_LLM_LOAD [GGUF] [WORKDIR]
# GGUF defaults to $GRZO_SMOLLM_GGUF, then build/models/SmolLM2-135M-Instruct.Q4_1.gguf
# (tests/run.sh fetches it); without it the script exits 77 (skip).
set -eu
bin=${1:?usage: bench_llm_load.sh BENCH_LLM_LOAD [GGUF] [WORKDIR]}
root=$(cd "$(dirname "$0")/.." && pwd)
gguf=${2:-${GRZO_SMOLLM_GGUF:-$root/build/models/SmolLM2-135M-Instruct.Q4_1.gguf}}
work=${3:-$root/build/bench_llm_load}
if [ ! -f "$gguf" ]; then
    echo "SKIP: no SmolLM2 GGUF at $gguf (set GRZO_SMOLLM_GGUF or run tests/run.sh)"
    exit 77
fi
mkdir -p "$work"
for dt in bf16 f32; do
    [ -d "$work/smollm2_$dt" ] || "$bin" --convert "$gguf" --out "$work/smollm2_$dt" --dtype "$dt"
done
"$bin" --model "$gguf"
for dt in bf16 f32; do
    "$bin" --model "$work/smollm2_$dt" --read-whole
    "$bin" --model "$work/smollm2_$dt"
done
