#!/usr/bin/env bash
# grzo-finetune's classification accuracy against an independent scorer
# (tests/reference/classify_ref.py: the llama2.c tokenizer, the SST-2 and RTE prompts and
# candidates, the mean log-likelihood of each candidate's continuation, the first-maximum
# argmax and the comparison with the gold label, over the float64 numpy forward of
# tests/reference/llama_ref.py). Zero-shot (--steps 0), stories260K + tok512.
#
# grzo-finetune reports accuracies only, so each run is composed to make its counts speak
# for every example: the labeled examples of the task samples (SST-2: train.tsv then dev.tsv,
# 16; RTE: train.jsonl then val.jsonl, 12) are cut into four chunks, and two runs per task
# take one chunk as dev and one as test, the chunk's j-th example repeated 2^j times. A
# split's count of correct examples, in binary, is then the correctness of each example, and
# classify_ref.py --per-example compares them one by one (zero-shot and final, dev and test).
# A candidate margin below 1e-3 (mean log-likelihood per token) would be a near tie that float32
# may flip: classify_ref.py then allows either outcome and fails when more than 2 of a run's
# examples are near ties (here the smallest margin is about 0.04). RTE's examples must not all
# predict the same candidate (stories260K says " terrible" to every SST-2 sentence, so there
# the gold labels, not the predictions, vary).
#
# The test fails, by the counts, when the evaluation's argmax is inverted, its comparison with
# the gold is negated, or only the gold candidate is scored (checked by mutating finetune.c's
# evaluate() in a scratch copy).
# usage: test_finetune_scorer.sh GRZO_FINETUNE DATA_DIR WORK_DIR CLASSIFY_REF PYTHON...
# Exit 0 pass, 1 fail, 77 skip (no interpreter with numpy; CI's summary counts it as a failure).
set -u
bin=$1 data=$2 work=$3 ref=$4
shift 4
fail() { echo "FAIL: $*"; exit 1; }
. "$(dirname "${BASH_SOURCE[0]}")/numpy_python.sh"   # py, or a skip that says why
rm -rf "$work" && mkdir -p "$work" || exit 1

# lines FIRST..LAST (1-based) of a file, the j-th repeated 2^(j-1) times
weighted() { sed -n "$2,$3p" "$1" | awk '{ for (i = 0; i < 2 ^ (NR - 1); i++) print }'; }

# compose DIR/examples (one labeled example a line, in file order) into 2 runs' folders
sst2_header=$(head -n 1 "$data/tasks/SST-2/train.tsv")
[ "$sst2_header" = "$(head -n 1 "$data/tasks/SST-2/dev.tsv")" ] || fail "SST-2 train.tsv and dev.tsv headers differ"
{ tail -n +2 "$data/tasks/SST-2/train.tsv"; tail -n +2 "$data/tasks/SST-2/dev.tsv"; } | awk 'NF' > "$work/sst2.examples"
awk 'NF' "$data/tasks/RTE/train.jsonl" "$data/tasks/RTE/val.jsonl" > "$work/rte.examples"

runs=0
for task in SST-2 RTE; do
    ex=$work/$(echo "$task" | tr -d '-' | tr 'A-Z' 'a-z').examples
    n=$(wc -l < "$ex")
    q=$(( (n + 3) / 4 ))
    [ "$q" -ge 2 ] || fail "$task: only $n labeled examples in the samples"
    for r in 0 1; do
        d=$work/data-$task-$r
        mkdir -p "$d"
        dev_first=$(( 2 * r * q + 1 )) test_first=$(( (2 * r + 1) * q + 1 ))
        if [ "$task" = SST-2 ]; then
            # a labeled test.tsv: dev is read from dev.tsv, test from test.tsv (tasks.h, directory resolution)
            cp "$data/tasks/SST-2/train.tsv" "$d/train.tsv"
            { echo "$sst2_header"; weighted "$ex" "$dev_first" $(( dev_first + q - 1 )); } > "$d/dev.tsv"
            { echo "$sst2_header"; weighted "$ex" "$test_first" $(( test_first + q - 1 )); } > "$d/test.tsv"
            extra=()
        else
            # dev is carved from train.jsonl's draw (all of it: --n-train 0), test from val.jsonl
            weighted "$ex" "$dev_first" $(( dev_first + q - 1 )) > "$d/train.jsonl"
            weighted "$ex" "$test_first" $(( test_first + q - 1 )) > "$d/val.jsonl"
            extra=(--require-varied)
        fi
        out=$work/run-$task-$r
        "$bin" --model "$data/stories260K.bin" --tokenizer "$data/tok512.bin" --task "$task" --data "$d" --steps 0 \
            --n-train 0 --n-dev 100000 --n-test 100000 --seed 7 --threads 1 --out "$out" > "$out.out" 2> "$out.err" \
            || fail "$task run $r: grzo-finetune: $(tail -3 "$out.err")"
        echo "$task run $r (dev: examples $dev_first..$(( dev_first + q - 1 )), test: $test_first..$(( test_first + q - 1 )), each j-th x2^j): $(grep '^zero-shot' "$out.out")"
        "$py" "$ref" --model "$data/stories260K.bin" --tokenizer "$data/tok512.bin" --task "$task" --indices "$out/indices.txt" \
            --results "$out/results.json" --json "$out/reference.json" --per-example ${extra[@]+"${extra[@]}"} > "$out.ref" 2>&1
        rc=$?
        cat "$out.ref"
        [ "$rc" -eq 0 ] || fail "$task run $r: grzo-finetune's accuracy differs from the reference scorer (above)"
        [ "$(grep -c 'example by example' "$out.ref")" -eq 4 ] || fail "$task run $r: not every count was compared example by example"
        runs=$((runs + 1))
    done
done
echo "PASS: $runs runs, every dev and test example's correctness as classify_ref.py scores it"
