#!/usr/bin/env bash
# grzo-export's command line: each refusal's exit status (2: bad options, before anything is
# read; 1: what it cannot write) and its one line on stderr, and that a refused export writes
# nothing at --out: q8_0 in safetensors, a GGUF from a llama2.c original, a missing
# checkpoint. (The exports themselves: test_llm_export, export_e2e, hf_folder_e2e.)
# usage: test_export_cli_args.sh GRZO_EXPORT DATA_DIR WORK_DIR
set -u
exp=$1 data=$2 work=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work" || exit 1
out=$work/x.gguf
base=(--model "$data/stories260K.bin" --checkpoint "$work/none.grzo" --out "$out")
tool=$exp name=grzo-export
. "$(dirname "${BASH_SOURCE[0]}")/cli_refusals.sh"   # refused STATUS MESSAGE ARGS...
refused 2 "--model, --checkpoint and --out are required" --checkpoint "$work/none.grzo" --out "$out"
refused 2 "--model, --checkpoint and --out are required" --model "$data/stories260K.bin" --out "$out"
refused 2 "--model, --checkpoint and --out are required" --model "$data/stories260K.bin" --checkpoint "$work/none.grzo"
refused 2 "--format: expected gguf or safetensors, got 'ggml'" "${base[@]}" --format ggml
refused 2 "--type: expected f32, f16, bf16 or q8_0, got 'q4_0'" "${base[@]}" --type q4_0
refused 2 "option '--type' needs a value" "${base[@]}" --type
refused 2 "unknown option '--quant'" "${base[@]}" --quant f16
refused 1 "safetensors holds f32, f16 or bf16 weights, not q8_0" "${base[@]}" --format safetensors --type q8_0
refused 1 "$data/stories260K.bin is a llama2.c checkpoint: a GGUF export copies the metadata" "${base[@]}" --format gguf
refused 1 "$work/none.grzo: grzo_checkpoint_load: cannot open" "${base[@]}" --format safetensors
echo "PASS: $n refusals"
