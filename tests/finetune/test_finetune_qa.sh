#!/usr/bin/env bash
# SQuAD and DROP end to end through grzo-finetune on the sample files of tests/data/tasks:
#   1. a 3-step fine-tune of stories260K (the LM loss on the gold answer's tokens) runs, logs
#      the dev F1 and exact match, writes F1 and EM (not accuracy) to results.json, and one
#      prediction per test question to predictions.jsonl;
#   2. the predictions, re-scored by the official scripts' code in Python (qa_rescore.py),
#      get the same per-question EM/F1 as grzo-finetune gave them, and the same means;
#   3. a run stopped after 2 steps and resumed to 3 logs, scores and predicts exactly what the
#      uninterrupted run does (the zero-shot F1/EM come back from run.json).
# usage: test_finetune_qa.sh GRZO_FINETUNE DATA_DIR WORK_DIR RESCORE_PY
set -u
bin=$1 data=$2 work=$3 rescore=$4
rm -rf "$work" && mkdir -p "$work" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
strip() { sed 's/,"elapsed":[0-9.]*//' "$1"; }
scores() { sed -n 's/.*\("test_f1":[0-9.]*\).*/\1/p; s/.*\("test_em":[0-9.]*\).*/\1/p' "$1"; }
command -v python3 > /dev/null || fail "python3 is needed to re-score the predictions"

for task in squad drop; do
    case $task in
        squad) dir=SQuAD file=dev-v1.1.json ;;
        drop) dir=DROP file=drop_dataset_dev.json ;;
    esac
    common=(--model "$data/stories260K.bin" --tokenizer "$data/tok512.bin" --task "$task" --data "$data/tasks/$dir"
            --n-train 6 --n-dev 2 --n-test 8 --batch 2 --lr 1e-4 --sigma 1e-3 --eval-every 2 --seed 1 --threads 1)
    out=$work/$task
    "$bin" "${common[@]}" --steps 3 --out "$out" > "$work/$task.out" 2>&1 || fail "$task: $(tail -3 "$work/$task.out")"
    grep -q '^zero-shot: dev F1 [0-9.]*, EM [0-9.]* (2), test F1 [0-9.]*, EM [0-9.]* (8)$' "$work/$task.out" ||
        fail "$task: no zero-shot F1/EM line: $(head -3 "$work/$task.out")"
    [ "$(wc -l < "$out/log.jsonl")" -eq 3 ] || fail "$task: $(wc -l < "$out/log.jsonl") log lines, want 3"
    grep -q '"step":1,.*"dev_f1":[0-9.]*,"dev_em":[0-9.]*}' "$out/log.jsonl" || fail "$task: no dev F1/EM at step 1: $(cat "$out/log.jsonl")"
    grep -q '"dev_acc"' "$out/log.jsonl" && fail "$task: the log reports an accuracy"
    for key in zero_shot_dev_f1 zero_shot_test_f1 dev_f1 test_f1 zero_shot_dev_em zero_shot_test_em dev_em test_em; do
        grep -q "\"$key\":[01]\.[0-9]*" "$out/results.json" || fail "$task: no $key in results.json: $(cat "$out/results.json")"
    done
    grep -q '_acc"' "$out/results.json" && fail "$task: results.json reports an accuracy"
    python3 "$rescore" "$task" "$data/tasks/$dir/$file" "$out/predictions.jsonl" "$out/results.json" || fail "$task: re-scoring"

    "$bin" "${common[@]}" --steps 2 --out "$work/$task-split" > "$work/$task-1.out" 2>&1 || fail "$task first half: $(tail -3 "$work/$task-1.out")"
    "$bin" "${common[@]}" --steps 3 --out "$work/$task-split" --resume > "$work/$task-2.out" 2>&1 || fail "$task resume: $(tail -3 "$work/$task-2.out")"
    diff <(strip "$out/log.jsonl") <(strip "$work/$task-split/log.jsonl") > "$work/$task.diff" || fail "$task: resumed log differs: $(head -5 "$work/$task.diff")"
    [ "$(scores "$out/results.json")" = "$(scores "$work/$task-split/results.json")" ] || fail "$task: test F1/EM differ after resume"
    sed 's/"seconds":[0-9.]*//' "$out/results.json" > "$work/a.json"
    sed 's/"seconds":[0-9.]*//' "$work/$task-split/results.json" > "$work/b.json"
    cmp -s "$work/a.json" "$work/b.json" || fail "$task: results.json differs after resume: $(diff "$work/a.json" "$work/b.json" | head -4)"
    cmp -s "$out/predictions.jsonl" "$work/$task-split/predictions.jsonl" || fail "$task: predictions differ after resume"
done
echo "ok: SQuAD and DROP fine-tune, score and resume"
