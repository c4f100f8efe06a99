#!/usr/bin/env bash
# grzo-finetune --diagnose (issue 15): before training it prints B_eff of the first batch with
# its 95% interval, the predicted GRZO/MeZO ratios and a recommendation, and then
#   1. the run trains exactly as without --diagnose: same log (elapsed aside), same checkpoint
#      (the diagnostic changes no parameter, no step counter, no data order);
#   2. --diagnose and --diagnose-probes are not part of the run's identity (run.json equal);
#   3. bad uses fail with one line and exit 2: --batch 1, --diagnose-probes 1, probes without
#      --diagnose.
# usage: test_finetune_diagnose.sh GRZO_FINETUNE DATA_DIR WORK_DIR
set -u
bin=$1 data=$2 work=$3
rm -rf "$work" && mkdir -p "$work" || exit 1
common=(--model "$data/stories260K.bin" --tokenizer "$data/tok512.bin" --task sst2 --data "$data/tasks/SST-2"
        --n-train 8 --n-dev 4 --n-test 4 --batch 4 --lr 1e-3 --sigma 1e-3 --steps 3 --seed 5 --threads 1)
fail() { echo "FAIL: $*"; exit 1; }
strip() { sed 's/,"elapsed":[0-9.]*//' "$1"; }

"$bin" "${common[@]}" --diagnose --diagnose-probes 8 --out "$work/diag" > "$work/diag.out" 2> "$work/diag.err" \
    || fail "diagnosed run: $(tail -3 "$work/diag.err")"
"$bin" "${common[@]}" --out "$work/plain" > "$work/plain.out" 2>&1 || fail "plain run: $(tail -3 "$work/plain.out")"
line=$(grep -E '^  B_eff = [0-9.]+ \+- [0-9.]+ \(95% interval \[[0-9.]+, [0-9.]+\]\), c_w = ' "$work/diag.out") \
    || fail "no B_eff line: $(cat "$work/diag.out")"
grep -q '^diagnose at step 0, B = 4: 8 probes' "$work/diag.out" || fail "no diagnose header line"
grep -q '^  predicted Var(MeZO)/Var(GRZO) = [0-9.]*, cos(GRZO)/cos(MeZO) = ' "$work/diag.out" || fail "no predicted ratios"
grep -qE '^  recommendation: (GRZO|MeZO|no difference expected|inconclusive)' "$work/diag.out" || fail "no recommendation"
b_eff=$(echo "$line" | sed 's/^  B_eff = \([0-9.]*\) .*/\1/')
awk -v b="$b_eff" 'BEGIN { exit !(b >= 0 && b <= 4) }' || fail "B_eff $b_eff outside [0, B]"
diff <(strip "$work/plain/log.jsonl") <(strip "$work/diag/log.jsonl") > "$work/diff" || fail "--diagnose changed the training log: $(head -5 "$work/diff")"
cmp -s "$work/plain/checkpoint.grzo" "$work/diag/checkpoint.grzo" || fail "--diagnose changed the final checkpoint"
cmp -s "$work/plain/run.json" "$work/diag/run.json" || fail "--diagnose changed run.json"

bad() {   # expected exit 2 with one line on stderr
    local what=$1; shift
    "$bin" "${common[@]}" --out "$work/bad" "$@" > "$work/bad.out" 2> "$work/bad.err"
    local rc=$?
    [ "$rc" -eq 2 ] || fail "$what: exit $rc, want 2"
    [ "$(wc -l < "$work/bad.err")" -eq 1 ] || fail "$what: want one line on stderr, got: $(cat "$work/bad.err")"
    [ ! -e "$work/bad" ] || fail "$what: wrote $work/bad"
}
bad "batch 1" --diagnose --batch 1
bad "one probe" --diagnose --diagnose-probes 1
bad "probes without --diagnose" --diagnose-probes 8
echo "ok: diagnosed B_eff $b_eff; training log, checkpoint and run.json equal the plain run's; misuse refused"
