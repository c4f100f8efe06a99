#!/usr/bin/env bash
# grzo-finetune -> grzo-export -> grzo-generate on SmolLM2-135M (GRZO_SMOLLM_GGUF; tests/run.sh
# fetches it, the test skips without it): fine-tune 2 steps on the SST-2 sample, export the
# checkpoint as an f32 GGUF, and check that
#   1. greedy text from the export is the text from the original + the checkpoint
#      (grzo-generate --checkpoint);
#   2. grzo-finetune --export writes the same file as grzo-export;
#   3. grzo-export refuses a checkpoint of another model (stories260K's run) in one line,
#      exit 1, naming the checkpoint, and leaves no file; grzo-finetune --export of a llama2.c
#      model and a bad --export-type are refused in one line before the run (exit 2, no files);
#   4. a safetensors folder exported from stories260K (no tokenizer.json) generates, with
#      --tokenizer, the text of the original + the checkpoint.
# usage: test_export_e2e.sh GRZO_FINETUNE GRZO_EXPORT GRZO_GENERATE DATA_DIR WORK_DIR
set -u
finetune=$1 export=$2 generate=$3 data=$4 work=$5
fail() { echo "FAIL: $*"; exit 1; }
model=${GRZO_SMOLLM_GGUF:-}
if [ -z "$model" ] || [ ! -f "$model" ]; then
    echo "SKIP: GRZO_SMOLLM_GGUF does not name the SmolLM2 GGUF (tests/run.sh fetches it)"
    exit 77
fi
rm -rf "$work" && mkdir -p "$work" || exit 1
"$finetune" --model "$model" --task sst2 --data "$data/tasks/SST-2" --n-train 4 --n-dev 2 --n-test 2 --batch 2 \
    --lr 1e-5 --sigma 1e-3 --eval-every 0 --seed 5 --threads 2 --steps 2 --out "$work/run" \
    --export "$work/run.gguf" > "$work/ft.out" 2>&1 ||
    fail "grzo-finetune: $(tail -3 "$work/ft.out")"
ckpt=$work/run/checkpoint.grzo
"$export" --model "$model" --checkpoint "$ckpt" --out "$work/tuned.gguf" --type f32 2> "$work/export.err" ||
    fail "grzo-export: $(cat "$work/export.err")"
cmp -s "$work/tuned.gguf" "$work/run.gguf" || fail "grzo-finetune --export and grzo-export wrote different files"
gen=(--prompt "The movie was" --steps 24 --threads 2)
"$generate" --model "$model" --checkpoint "$ckpt" "${gen[@]}" > "$work/from_checkpoint.txt" 2> "$work/gen1.err" ||
    fail "grzo-generate --checkpoint: $(tail -2 "$work/gen1.err")"
"$generate" --model "$work/tuned.gguf" "${gen[@]}" > "$work/from_export.txt" 2> "$work/gen2.err" ||
    fail "grzo-generate on the export: $(tail -2 "$work/gen2.err")"
[ -s "$work/from_export.txt" ] || fail "no text from the export"
cmp -s "$work/from_checkpoint.txt" "$work/from_export.txt" ||
    fail "the export generates other text: '$(cat "$work/from_export.txt")' vs '$(cat "$work/from_checkpoint.txt")'"
echo "same text from the export and from the original + checkpoint: $(head -c 120 "$work/from_export.txt")"

# a checkpoint of another model: stories260K fine-tuned for 1 step; its --export (GGUF from a
# llama2.c file) is refused before it trains
other=(--model "$data/stories260K.bin" --tokenizer "$data/tok512.bin" --task sst2 --data "$data/tasks/SST-2"
       --n-train 4 --n-dev 2 --n-test 2 --batch 2 --eval-every 0 --threads 1 --steps 1 --out "$work/other")
"$finetune" "${other[@]}" --export "$work/other.gguf" > "$work/ft2.out" 2> "$work/ft2.err"
rc=$?
[ "$rc" -eq 2 ] && [ ! -e "$work/other" ] && [ ! -e "$work/other.gguf" ] ||
    fail "grzo-finetune --export of a llama2.c model: exit $rc, want 2 before the run"
[ "$(grep -c "^grzo-finetune: " "$work/ft2.err")" -eq 1 ] &&
    tail -1 "$work/ft2.err" | grep -q "^grzo-finetune: --export: .*stories260K.bin is a llama2.c checkpoint" ||
    fail "no one-line reason: $(tail -2 "$work/ft2.err")"
"$finetune" "${other[@]}" > "$work/ft2.out" 2> "$work/ft2.err" || fail "grzo-finetune of stories260K: $(tail -2 "$work/ft2.err")"
"$finetune" --model "$model" --task sst2 --data "$data/tasks/SST-2" --steps 1 --out "$work/bad" --export "$work/bad.gguf" \
    --export-type q4 > /dev/null 2>&1
rc=$?
[ "$rc" -eq 2 ] && [ ! -e "$work/bad" ] || fail "--export-type q4: exit $rc, want 2 before the run"
"$export" --model "$model" --checkpoint "$work/other/checkpoint.grzo" --out "$work/refused.gguf" 2> "$work/refused.err"
rc=$?
[ "$rc" -eq 1 ] || fail "grzo-export with another model's checkpoint exited $rc, want 1"
[ "$(wc -l < "$work/refused.err")" -eq 1 ] && grep -q "^grzo-export: .*checkpoint" "$work/refused.err" ||
    fail "not one line naming the checkpoint: $(cat "$work/refused.err")"
[ ! -e "$work/refused.gguf" ] || fail "a refused export left a file"
ls "$work" | grep -q '\.tmp' && fail "a temporary file was left behind"

# 4. a safetensors folder exported from a llama2.c original has no tokenizer.json: grzo-generate
#    takes --tokenizer for it, and writes the original + checkpoint's text
"$export" --model "$data/stories260K.bin" --checkpoint "$work/other/checkpoint.grzo" --format safetensors \
    --out "$work/other_st" 2> "$work/other_st.err" || fail "grzo-export --format safetensors: $(cat "$work/other_st.err")"
small=(--tokenizer "$data/tok512.bin" --prompt "Once upon" --steps 16 --threads 1)
"$generate" --model "$data/stories260K.bin" --checkpoint "$work/other/checkpoint.grzo" "${small[@]}" \
    > "$work/other_ckpt.txt" 2> "$work/other_gen1.err" || fail "grzo-generate --checkpoint: $(tail -2 "$work/other_gen1.err")"
"$generate" --model "$work/other_st" "${small[@]}" > "$work/other_st.txt" 2> "$work/other_gen2.err" ||
    fail "grzo-generate --tokenizer on a folder without tokenizer.json: $(tail -2 "$work/other_gen2.err")"
cmp -s "$work/other_ckpt.txt" "$work/other_st.txt" ||
    fail "the folder generates other text: '$(cat "$work/other_st.txt")' vs '$(cat "$work/other_ckpt.txt")'"
rm -rf "$work"
echo "PASS"
