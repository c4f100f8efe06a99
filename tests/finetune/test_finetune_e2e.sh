#!/usr/bin/env bash
# End to end through the grzo-finetune CLI: fine-tune stories260K on the SST-2 sample for a
# few steps, then check that
#   1. a run stopped after 3 steps and resumed to 8 logs exactly what the uninterrupted
#      8-step run logs (step, loss, lr, dev accuracy; only the elapsed time may differ),
#      and ends with the same test accuracy;
#   2. Ctrl-C (SIGINT) writes a checkpoint and exits 130, and --resume from it again
#      reproduces the uninterrupted log.
# usage: test_finetune_e2e.sh GRZO_FINETUNE DATA_DIR WORK_DIR
set -u
bin=$1 data=$2 work=$3
rm -rf "$work" && mkdir -p "$work" || exit 1
common=(--model "$data/stories260K.bin" --tokenizer "$data/tok512.bin" --task sst2 --data "$data/tasks/SST-2"
        --n-train 8 --n-dev 4 --n-test 4 --batch 4 --lr 1e-3 --sigma 1e-3 --eval-every 2 --seed 5 --threads 1)
fail() { echo "FAIL: $*"; exit 1; }
# the log without the elapsed seconds
strip() { sed 's/,"elapsed":[0-9.]*//' "$1"; }
acc() { sed -n 's/.*"test_acc":\([0-9.]*\).*/\1/p' "$1"; }

"$bin" "${common[@]}" --steps 8 --out "$work/straight" > "$work/straight.out" 2>&1 || fail "straight run: $(tail -3 "$work/straight.out")"
[ "$(wc -l < "$work/straight/log.jsonl")" -eq 8 ] || fail "straight run logged $(wc -l < "$work/straight/log.jsonl") lines, want 8"
grep -q '"dev_acc"' "$work/straight/log.jsonl" || fail "no dev accuracy in the log"

"$bin" "${common[@]}" --steps 3 --out "$work/split" > "$work/split1.out" 2>&1 || fail "first half: $(tail -3 "$work/split1.out")"
"$bin" "${common[@]}" --steps 8 --out "$work/split" --resume > "$work/split2.out" 2>&1 || fail "resume: $(tail -3 "$work/split2.out")"
diff <(strip "$work/straight/log.jsonl") <(strip "$work/split/log.jsonl") > "$work/diff1" || fail "resumed log differs: $(head -5 "$work/diff1")"
[ "$(acc "$work/straight/results.json")" = "$(acc "$work/split/results.json")" ] || fail "test accuracy differs after resume"
cmp -s "$work/straight/checkpoint.grzo" "$work/split/checkpoint.grzo" || fail "final checkpoints differ"

# Ctrl-C: a long run, interrupted once it has logged a few steps
"$bin" "${common[@]}" --steps 100000 --out "$work/intr" > "$work/intr1.out" 2>&1 &
pid=$!
for _ in $(seq 1 300); do
    [ -f "$work/intr/log.jsonl" ] && [ "$(wc -l < "$work/intr/log.jsonl")" -ge 3 ] && break
    sleep 0.1
done
# a background job of a script starts with SIGINT ignored, and grzo-finetune catches it only
# once it trains: a run that has not logged 3 steps in 30 s (under valgrind, say) would not stop
if [ ! -f "$work/intr/log.jsonl" ] || [ "$(wc -l < "$work/intr/log.jsonl")" -lt 3 ]; then
    kill -TERM "$pid"
    fail "the interrupted run logged fewer than 3 steps in 30 s: $(tail -3 "$work/intr1.out")"
fi
kill -INT "$pid"
wait "$pid"
rc=$?
[ "$rc" -eq 130 ] || fail "interrupted run exited $rc, want 130: $(tail -3 "$work/intr1.out")"
[ -f "$work/intr/checkpoint.grzo" ] || fail "no checkpoint after Ctrl-C"
done_steps=$(wc -l < "$work/intr/log.jsonl")
total=$((done_steps + 3))
"$bin" "${common[@]}" --steps "$total" --out "$work/intr" --resume > "$work/intr2.out" 2>&1 || fail "resume after Ctrl-C: $(tail -3 "$work/intr2.out")"
"$bin" "${common[@]}" --steps "$total" --out "$work/straight2" > "$work/straight2.out" 2>&1 || fail "second straight run"
diff <(strip "$work/straight2/log.jsonl") <(strip "$work/intr/log.jsonl") > "$work/diff2" || fail "log after Ctrl-C + resume differs: $(head -5 "$work/diff2")"
echo "ok: resumed logs equal the uninterrupted run's ($done_steps steps before Ctrl-C, $total in all)"
