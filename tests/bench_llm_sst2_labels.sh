#!/bin/sh
# bench_llm reads SST-2's labels (issue 13 item 11: every label used to read as 0, because
# the sentence's trailing spaces were trimmed before the label after the tab was read).
#
#   bench_llm_sst2_labels.sh BENCH_LLM MODEL SCRATCH_DIR
#
# MODEL is a small GGUF with a tokenizer (tests/llm/corpus/gguf_f32_spm.gguf): the bench
# must take its B = 4 examples from the file below, whose labels alternate 1, 0, 1, 0, and
# report 2 negative and 2 positive; a file with a label other than 0/1 must be refused with
# one line on stderr, before any timing.
set -u
bench=$1 model=$2 dir=$3
mkdir -p "$dir"
good=$dir/sst2_alternating.tsv bad=$dir/sst2_label_2.tsv out=$dir/bench_llm.out err=$dir/bench_llm.err
# SST-2's layout: a header, then "sentence <TAB>label" (a space before the tab); each
# sentence is long enough for the bench's 30-60 token prompts with the toy tokenizer
{
  printf 'sentence\tlabel\n'
  printf 'a truly wonderful film that i would watch again \t1\n'
  printf 'a dull and lifeless film that nobody should see \t0\n'
  printf 'a warm and funny story with a great cast of actors \t1\n'
  printf 'a boring mess of a movie with no wit at all to it \t0\n'
} >"$good"
{
  printf 'sentence\tlabel\n'
  printf 'a truly wonderful film that i would watch again \t1\n'
  printf 'a dull and lifeless film that nobody should see \t2\n'
} >"$bad"
fail=0
"$bench" --model "$model" --data "$good" --batch 4 --rounds 1 --threads 1 --part time >"$out" 2>"$err"
rc=$?
if [ "$rc" -ne 0 ]; then
  echo "FAIL: bench_llm on $good exited $rc:"; cat "$err"; fail=1
fi
grep -q "^B = 4 examples, SST-2 training sentences" "$out" || { echo "FAIL: the examples are not the file's:"; grep "^B = " "$out"; fail=1; }
grep -q "^SST-2 file $good: 2 sentences labeled 0 (negative), 2 labeled 1 (positive)$" "$out" ||
  { echo "FAIL: file label counts:"; grep -i "label" "$out"; fail=1; }
grep -q "^labels of the B examples: 2 negative, 2 positive$" "$out" ||
  { echo "FAIL: example labels:"; grep -i "label" "$out"; fail=1; }

"$bench" --model "$model" --data "$bad" --batch 2 --rounds 1 --threads 1 --part time >"$out" 2>"$err"
rc=$?
if [ "$rc" -eq 0 ] || [ "$rc" -ge 128 ] || [ "$(wc -l <"$err")" -ne 1 ] || ! grep -q "sst2_label_2.tsv:3:" "$err"; then
  echo "FAIL: a label 2 was not refused with one line naming the line (exit $rc):"; cat "$err"; fail=1
fi
[ "$fail" -eq 0 ] && echo "bench_llm reads SST-2 labels: 2 negative, 2 positive; a label 2 is refused"
exit "$fail"
