#!/usr/bin/env bash
# grzo-generate's command line (issue 13 item 6, issue 16 item 5): each case below differs from
# an accepted run in one option, and must end with its exit status (2: the command line is
# wrong; 1: the run cannot go on) and one line on stderr that says why, nothing on stdout for
# a usage error. Then what must be accepted: every option given once (sampling), and a prompt
# that fills --steps exactly (5 positions, "Once upon a time" and BOS: one new token, ",").
# usage: test_generate_cli_args.sh GRZO_GENERATE DATA_DIR WORK_DIR
set -u
gen=$1 data=$2 work=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work" || exit 1
base=(--model "$data/stories260K.bin" --tokenizer "$data/tok512.bin" --steps 8 --threads 1)
tool=$gen name=grzo-generate
. "$(dirname "${BASH_SOURCE[0]}")/cli_refusals.sh"   # refused STATUS MESSAGE ARGS...
refused 2 "--model is required" --tokenizer "$data/tok512.bin"
refused 2 "option '--prompt' needs a value" "${base[@]}" --prompt
refused 2 "unknown option '--what'" "${base[@]}" --what x
refused 2 "--steps: expected an integer in [1, 16777216], got '12abc'" "${base[@]}" --steps 12abc
refused 2 "--steps: expected an integer in [1, 16777216], got '99999999999'" "${base[@]}" --steps 99999999999
refused 2 "--steps: expected an integer in [1, 16777216], got '0'" "${base[@]}" --steps 0
refused 2 "--temperature: expected a number in [0, 1e+06], got 'abc'" "${base[@]}" --temperature abc
refused 2 "--temperature: expected a number in [0, 1e+06], got 'inf'" "${base[@]}" --temperature inf
refused 2 "--temperature: expected a number in [0, 1e+06], got '-0.5'" "${base[@]}" --temperature -0.5
refused 2 "--seed: expected an unsigned integer in [0, 18446744073709551615], got '-1'" "${base[@]}" --seed -1
refused 2 "--threads: expected an integer in [0, 4096], got '4097'" "${base[@]}" --threads 4097
refused 2 "--device: expected cpu or cuda, got 'tpu'" "${base[@]}" --device tpu
refused 2 "--dtype: expected f32, bf16 or f16, got 'q4'" "${base[@]}" --dtype q4
refused 2 "--dtype bf16/f16 needs --device cuda" "${base[@]}" --dtype bf16
refused 2 "--dtype bf16/f16 needs --device cuda" "${base[@]}" --dtype f16
refused 1 "no-such.grzo: grzo_checkpoint_load: cannot open 'no-such.grzo'" "${base[@]}" --checkpoint no-such.grzo
refused 1 "the prompt's 26 tokens do not fit in 8 steps (raise --steps)" "${base[@]}" \
    --prompt "Once upon a time there was a little girl who lived in a village"
refused 1 "$data/no-such.bin: cannot open: No such file or directory" --model "$data/no-such.bin" --tokenizer "$data/tok512.bin"
# a full disk: the text is lost, so the run fails and says so
"$gen" "${base[@]}" > /dev/full 2> "$work/stderr"
[ $? -eq 1 ] && grep -q "^grzo-generate: cannot write the text to standard output: " "$work/stderr" ||
    fail "stdout on a full disk: $(cat "$work/stderr")"
n=$((n + 1))

# accepted: every option once
"$gen" "${base[@]}" --temperature 0.5 --seed 3 --device cpu --dtype f32 > "$work/stdout" 2> "$work/stderr" ||
    fail "every option once: $(tail -1 "$work/stderr")"
[ -s "$work/stdout" ] && grep -q "^generated 8 tokens in " "$work/stderr" || fail "every option once: $(cat "$work/stdout" "$work/stderr")"
# a prompt that fills --steps: one new token, the prompt echoed
"$gen" "${base[@]}" --steps 5 --temperature 0 --prompt "Once upon a time" > "$work/stdout" 2> "$work/stderr" ||
    fail "a prompt that fills --steps: $(tail -1 "$work/stderr")"
[ "$(cat "$work/stdout")" = "Once upon a time," ] && grep -q "^generated 1 tokens in " "$work/stderr" ||
    fail "a prompt that fills --steps: $(cat "$work/stdout" "$work/stderr")"
echo "PASS: $n refusals, 2 accepted runs"
