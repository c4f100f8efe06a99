#!/usr/bin/env bash
# A Hugging Face folder end to end through the CLIs (issue 14): a random Llama-3-shaped
# model (GQA, rope_scaling llama3, three F16 shards + index) with a real tokenizer.json (the
# Llama-3 pipeline that hf_tokenizer_cases.py builds with the `tokenizers` package, whose ids
# test_llm_tokenizer_hf checks on 400 strings) is
#   1. fine-tuned for 3 steps by grzo-finetune --model DIR (the tokenizer, the weights and the
#      task pipeline together; --export writes the GGUF that grzo-export writes, byte for byte),
#   2. exported by grzo-export to a safetensors folder (f32) and to a GGUF (f32: llama.cpp's
#      metadata, tokenizer and rope_freqs.weight), which
#   3. grzo-generate loads and, greedy, writes the same text as the original folder with the
#      fine-tuned checkpoint: each export is the fine-tuned model, tokenizer included.
# usage: test_hf_folder_e2e.sh FINETUNE GENERATE EXPORT LLAMA_REF TOKENIZER_CASES TASK_DATA PYLIB WORK PYTHON...
set -u
ft=$1 gen=$2 exp=$3 ref=$4 cases=$5 data=$6 pylib=$7 work=$8
shift 8
fail() { echo "FAIL: $*"; exit 1; }
py=
for cand in "$@"; do
    if PYTHONPATH=$pylib "$cand" -c 'import numpy, safetensors, tokenizers' 2>/dev/null; then py=$cand; break; fi
done
[ -n "$py" ] || { echo "SKIP: no Python with numpy, safetensors and tokenizers (tests/run.sh installs them into $pylib)"; exit 77; }
rm -rf "$work" && mkdir -p "$work" || exit 1
PYTHONPATH=$pylib "$py" "$cases" "$work/tok" > "$work/cases.out" 2>&1 || fail "building the tokenizers: $(tail -3 "$work/cases.out")"
PYTHONPATH=$pylib "$py" "$ref" make-hf --out "$work/model" --variant hf_llama3_sharded_f16 --tokenizer "$work/tok/llama3" \
    > "$work/make.out" 2>&1 || fail "writing the folder: $(tail -3 "$work/make.out")"

"$ft" --model "$work/model" --task sst2 --data "$data/tasks/SST-2" --n-train 8 --n-dev 4 --n-test 4 --batch 4 --steps 3 \
    --lr 5e-2 --sigma 1e-3 --seed 3 --threads 1 --out "$work/ft" --export "$work/ft.gguf" > "$work/ft.out" 2>&1 || fail "grzo-finetune: $(tail -3 "$work/ft.out")"
[ "$(wc -l < "$work/ft/log.jsonl")" -eq 3 ] || fail "grzo-finetune logged $(wc -l < "$work/ft/log.jsonl") steps, want 3"
cmp -s "$work/ft/checkpoint.grzo" /dev/null && fail "empty checkpoint"

"$exp" --model "$work/model" --checkpoint "$work/ft/checkpoint.grzo" --out "$work/exported" --format safetensors --type f32 \
    > "$work/exp.out" 2>&1 || fail "grzo-export: $(tail -3 "$work/exp.out")"
for f in config.json model.safetensors tokenizer.json tokenizer_config.json; do
    [ -f "$work/exported/$f" ] || fail "the exported folder has no $f"
done

"$exp" --model "$work/model" --checkpoint "$work/ft/checkpoint.grzo" --out "$work/exported.gguf" --format gguf --type f32 \
    > "$work/exp_gguf.out" 2>&1 || fail "grzo-export --format gguf: $(tail -3 "$work/exp_gguf.out")"
cmp -s "$work/ft.gguf" "$work/exported.gguf" || fail "grzo-finetune --export wrote another GGUF than grzo-export"

prompt="The movie was 12 times better"
"$gen" --model "$work/model" --checkpoint "$work/ft/checkpoint.grzo" --prompt "$prompt" --steps 40 --temperature 0 \
    > "$work/before.txt" 2> "$work/before.err" || fail "grzo-generate on the original: $(tail -3 "$work/before.err")"
"$gen" --model "$work/exported" --prompt "$prompt" --steps 40 --temperature 0 \
    > "$work/after.txt" 2> "$work/after.err" || fail "grzo-generate on the export: $(tail -3 "$work/after.err")"
[ -s "$work/before.txt" ] || fail "no text generated"
cmp -s "$work/before.txt" "$work/after.txt" || fail "the exported folder generates other text: $(od -c "$work/after.txt" | head -3)"
"$gen" --model "$work/exported.gguf" --prompt "$prompt" --steps 40 --temperature 0 \
    > "$work/after_gguf.txt" 2> "$work/after_gguf.err" || fail "grzo-generate on the GGUF export: $(tail -3 "$work/after_gguf.err")"
cmp -s "$work/before.txt" "$work/after_gguf.txt" || fail "the GGUF export generates other text: $(od -c "$work/after_gguf.txt" | head -3)"
# the fine-tuning moved the weights far enough to change the greedy text (lr 5e-2), so an
# export that wrote the original weights would fail the comparison above
"$gen" --model "$work/model" --prompt "$prompt" --steps 40 --temperature 0 > "$work/plain.txt" 2>/dev/null || fail "grzo-generate"
cmp -s "$work/plain.txt" "$work/before.txt" && fail "the checkpoint does not change the generated text: the test cannot tell an export of the original"
echo "ok: fine-tuned, exported (safetensors, GGUF) and regenerated $(wc -c < "$work/after.txt") bytes identically"
