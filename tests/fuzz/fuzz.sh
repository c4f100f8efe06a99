#!/bin/sh
# Run the libFuzzer build of one grzo fuzz target under AddressSanitizer and
# UndefinedBehaviorSanitizer.
#
#   tests/fuzz/fuzz.sh TARGET [SECONDS]     TARGET: loaders | hf | checkpoint | tasks; default 60 s
#       loaders     tests/llm/fuzz_loaders.c   model and tokenizer files, tokenizer.json (examples/llm)
#       hf          tests/llm/fuzz_hf.c        Hugging Face folders: config.json, safetensors, shard index
#       checkpoint  tests/fuzz/fuzz_checkpoint.c   grzo_checkpoint_load (grzo.h)
#       tasks       tests/fuzz/fuzz_tasks.c    grzo-finetune's task and indices readers
#   FUZZ_JOBS=N runs N fuzzing processes (libFuzzer -fork=N).
#
# Needs clang with libFuzzer (clang -fsanitize=fuzzer). Builds into build/fuzz-TARGET/ (set
# FUZZ_OUT to change); inputs that reach new code are kept in its corpus/, crashes are
# written there as crash-*, and the committed seeds are only read. A crash makes the script
# exit nonzero; replay one with
#   build/fuzz-TARGET/fuzz_TARGET_libfuzzer build/fuzz-TARGET/crash-...
set -eu
target=${1:?usage: tests/fuzz/fuzz.sh loaders|hf|checkpoint|tasks [SECONDS]}
secs=${2:-60}
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${FUZZ_OUT:-$root/build/fuzz-$target}
cc=${CC_FUZZ:-clang}
llm_src="$root/examples/llm/load.c $root/examples/llm/load_hf.c $root/examples/llm/tokenizer.c"
llm_src="$llm_src $root/examples/llm/tokenizer_hf.c $root/examples/common/json.c $root/examples/common/text.c"
case $target in
  loaders)
    src="$root/tests/llm/fuzz_loaders.c $llm_src"
    inc="-I$root/examples/llm -I$root/tests/llm -I$root/examples/common"
    seeds=$root/tests/llm/corpus ;;
  hf)
    src="$root/tests/llm/fuzz_hf.c $llm_src"
    inc="-I$root/examples/llm -I$root/tests/llm -I$root/examples/common"
    seeds=$root/tests/llm/corpus_hf ;;
  checkpoint)
    src=$root/tests/fuzz/fuzz_checkpoint.c
    inc=-I$root
    seeds=$root/tests/fuzz/corpus/checkpoint ;;
  tasks)
    src="$root/tests/fuzz/fuzz_tasks.c $root/examples/finetune/tasks.c $root/examples/finetune/qa_score.c $root/examples/common/json.c $root/examples/common/text.c $root/examples/common/files.c"
    inc="-I$root/examples/finetune -I$root/examples/common"
    seeds=$root/tests/fuzz/corpus/tasks ;;
  *) echo "fuzz.sh: unknown target '$target' (loaders, hf, checkpoint or tasks)" >&2; exit 2 ;;
esac
mkdir -p "$out/corpus"
# shellcheck disable=SC2086 # src and inc are word lists
"$cc" -std=c99 -g -O1 -fno-omit-frame-pointer \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -DFUZZ_WITH_LIBFUZZER $inc -I"$root/tests/fuzz" $src -lm -o "$out/fuzz_${target}_libfuzzer"
set -- -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$out/" -print_final_stats=1
if [ "${FUZZ_JOBS:-1}" -gt 1 ]; then
  set -- "$@" -fork="$FUZZ_JOBS" -ignore_crashes=0
fi
exec "$out/fuzz_${target}_libfuzzer" "$@" "$out/corpus" "$seeds"
