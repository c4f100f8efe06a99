#!/usr/bin/env bash
# grzo-finetune's generated answers (SQuAD, DROP) against an independent greedy decoder
# (tests/reference/generate_ref.py: the prompt, its truncation, the length limit, the float64
# forward of llama_ref.py, the first-maximum argmax, the BOS / EOS / newline stops, the token
# texts, the cut at the newline), question by question, zero-shot (--steps 0).
#
# stories260K + tok512 as they are end answers only at a newline or at 50 new tokens, and
# never at BOS or EOS or the model's length; and tok512's BOS and EOS texts ("\n<s>\n",
# "\n</s>\n") start with a newline, so a BOS or EOS that were not a stop would be emitted
# and end the answer at the newline, with the same text. So the test also runs variants it
# writes itself (generate_ref.py make-model / make-tokenizer, in WORK_DIR):
#   plain   stories260K + tok512: the newline (most answers) and the 50-token limit;
#   stops   stories260K with its classifier untied from the embedding (the header's vocab
#           negative; the embedding, so every hidden state, stays as it is) and two classifier
#           rows replaced: EOS (2) = 1.01 x the embedding of "!" (443), BOS (1) = 1.01 x that
#           of "?" (450): where "!" or "?" would be the greedy token with a positive logit,
#           EOS or BOS now is, and the answer ends there; answers without them run on to a
#           newline or 50 tokens. Its tokenizer (tok-stops.bin) spells BOS "<s>" and EOS "</s>",
#           without the newlines, so that a BOS or EOS emitted shows in the answer;
#   clamp   stories260K with seq_len 40 (header and rotary tables cut): the prompt keeps BOS
#           and its last 19 tokens (a model with at most 51 positions keeps half of them), and
#           gen_steps, clamped to 40, allows 21 new tokens, fewer than 50.
# generate_ref.py coverage then requires that, over the test answers of all runs, every stop
# (newline, EOS, BOS, 50 tokens, seq_len) ends at least one and not all, and that breaking it
# (the stop ignored, the limit one longer or shorter) would change at least one prediction.
#
# predictions.jsonl's "new_tokens" and "stop" are compared too: the newline stop cannot change
# a prediction (the text is cut at the first newline either way), but ignoring it changes
# both. A last run, maxlen, gives the plain model --max-len 40: the prompt and the answer are
# one sequence, so the answers stop at 40 positions ("max_len") as the clamp variant's do; and
# tiny, --max-len 3, where half the positions is one: the prompt is BOS alone (never empty);
# mid (--max-len 80) and edge (52), where the prompt keeps max_len - 50 tokens, not half.
#
# float32 there, float64 here: a step whose top-2 logit margin is below 1e-4 may go either
# way; the question is then compared up to it only, and more than 2 such test questions in a
# run fail (the smallest margin here is about 1e-3). The em/f1 of each prediction are
# re-scored by qa_rescore.py.
# usage: test_finetune_generate_ref.sh GRZO_FINETUNE DATA_DIR WORK_DIR GENERATE_REF RESCORE_PY PYTHON...
# Exit 0 pass, 1 fail, 77 skip (no interpreter with numpy; CI's summary counts it as a failure).
set -u
bin=$1 data=$2 work=$3 ref=$4 rescore=$5
shift 5
fail() { echo "FAIL: $*"; exit 1; }
. "$(dirname "${BASH_SOURCE[0]}")/numpy_python.sh"   # py, or a skip that says why
rm -rf "$work" && mkdir -p "$work" || exit 1

"$py" "$ref" make-tokenizer --from "$data/tok512.bin" --out "$work/tok-stops.bin" --piece '1=<s>' --piece '2=</s>' &&
"$py" "$ref" make-model --from "$data/stories260K.bin" --out "$work/stops.bin" --untie --row '2=443*1.01' --row '1=450*1.01' &&
"$py" "$ref" make-model --from "$data/stories260K.bin" --out "$work/clamp.bin" --seq-len 40 ||
    fail "generate_ref.py could not write the model variants"

runs=0
# variant task: the model, the tokenizer, the task's folder and the file its test split comes from
for run in plain:squad stops:squad stops:drop clamp:squad clamp:drop maxlen:squad tiny:squad mid:squad edge:squad; do
    variant=${run%:*} task=${run#*:}
    max_len=0
    case $variant in
        plain) model=$data/stories260K.bin tok=$data/tok512.bin ;;
        maxlen) model=$data/stories260K.bin tok=$data/tok512.bin max_len=40 ;;
        tiny) model=$data/stories260K.bin tok=$data/tok512.bin max_len=3 ;;   # half of 3 is 1: BOS alone
        mid) model=$data/stories260K.bin tok=$data/tok512.bin max_len=80 ;;   # the prompt keeps 30, not half (40)
        edge) model=$data/stories260K.bin tok=$data/tok512.bin max_len=52 ;;  # 52 - 50 = 2: not yet the half rule
        stops) model=$work/stops.bin tok=$work/tok-stops.bin ;;
        clamp) model=$work/clamp.bin tok=$data/tok512.bin ;;
    esac
    case $task in
        squad) dir=SQuAD file=dev-v1.1.json ;;
        drop) dir=DROP file=drop_dataset_dev.json ;;
    esac
    out=$work/$variant-$task
    "$bin" --model "$model" --tokenizer "$tok" --task "$task" --data "$data/tasks/$dir" --steps 0 --max-len "$max_len" \
        --n-train 0 --n-dev 2 --n-test 8 --seed 1 --threads 1 --out "$out" > "$out.out" 2> "$out.err" ||
        fail "$variant $task: grzo-finetune failed: $(grep -v '^ ' "$out.err" | tail -1)"
    echo "== $variant $task: $(grep '^zero-shot' "$out.out")"
    "$py" "$ref" check --model "$model" --tokenizer "$tok" --task "$task" --indices "$out/indices.txt" --max-len "$max_len" \
        --predictions "$out/predictions.jsonl" --json "$out.ref.json" > "$out.ref" 2>&1
    rc=$?
    cat "$out.ref"
    [ "$rc" -eq 0 ] || fail "$variant $task: grzo-finetune's answers differ from the reference decoder (above)"
    "$py" "$rescore" "$task" "$data/tasks/$dir/$file" "$out/predictions.jsonl" "$out/results.json" ||
        fail "$variant $task: re-scoring the predictions"
    runs=$((runs + 1))
done

echo "== coverage of the stops over the $runs runs' test answers"
"$py" "$ref" coverage "$work"/*.ref.json || fail "some stop is not shown by the runs (above)"
echo "PASS: $runs runs, every test answer, its new tokens and its stop as generate_ref.py decodes it"
