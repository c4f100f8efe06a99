#!/usr/bin/env bash
# grzo-generate's whole output against llama2.c's (tests/llm/llama2c_reference.h: `run
# stories260K.bin -z tok512.bin -t 0.0 -n 200`, the text test_llm_generate holds llm_generate
# to): greedy, 200 steps, from an empty prompt (BOS), its text on stdout with the final newline,
# and "generated 200 tokens" (with a share of the time, at most 100 %) on stderr. The same run from the prompt "Once upon a time" (the
# four tokens the greedy text starts with) must print the same bytes, the prompt echoed, and
# count 196 new tokens. The text holds no EOS, so grzo-generate's stop at EOS (llama2.c stops
# at BOS only) changes nothing here; llama2.c's safe_printf rule drops lone unprintable bytes.
# usage: test_generate_cli_text.sh GRZO_GENERATE DATA_DIR REFERENCE_H WORK_DIR
set -u
gen=$1 data=$2 ref=$3 work=$4
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work" || exit 1
command -v python3 > /dev/null || fail "no python3 (it reads the reference text out of $ref)"
python3 - "$ref" > "$work/expected.txt" << 'PY' || fail "cannot read llama2c_expected from $ref"
import ast, re, sys
src = open(sys.argv[1], encoding="utf-8").read()
body = re.search(r"llama2c_expected\[\]\s*=\s*((?:\s*\"(?:[^\"\\]|\\.)*\")+)\s*;", src).group(1)
sys.stdout.write("".join(ast.literal_eval(p) for p in re.findall(r"\"(?:[^\"\\]|\\.)*\"", body)) + "\n")
PY
[ "$(wc -c < "$work/expected.txt")" -gt 400 ] || fail "the reference text read from $ref is too short"
run=(--model "$data/stories260K.bin" --tokenizer "$data/tok512.bin" --steps 200 --temperature 0 --threads 1)
for case in "empty prompt:" "prompt Once upon a time:Once upon a time"; do
    name=${case%%:*} prompt=${case#*:}
    f=$work/${name// /_}
    want=$([ -z "$prompt" ] && echo 200 || echo 196)   # steps - n_prompt + 1 (llama2.c's loop)
    "$gen" "${run[@]}" --prompt "$prompt" > "$f.txt" 2> "$f.err" || fail "$name: $(tail -1 "$f.err")"
    cmp -s "$f.txt" "$work/expected.txt" || fail "$name: stdout differs from llama2.c's text: $(cmp "$f.txt" "$work/expected.txt" 2>&1)"
    grep -q "^generated $want tokens in " "$f.err" || fail "$name: stderr does not count $want new tokens: $(cat "$f.err")"
    pct=$(sed -n 's/.* \([0-9][0-9]*\) % of the time in grzo_linear)$/\1/p' "$f.err")
    [ -n "$pct" ] && [ "$pct" -le 100 ] || fail "$name: the share of the time in grzo_linear is not a percentage: $(cat "$f.err")"
    echo "$name: llama2.c's $(wc -c < "$work/expected.txt") bytes, $want new tokens"
done
echo "PASS"
