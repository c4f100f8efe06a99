#!/usr/bin/env bash
# grzo-generate and grzo-export when memory runs out: the whole process, one allocation failing
# at a time (as test_finetune_oom.sh does to grzo-finetune, with the same LD_PRELOAD shim,
# tests/oom_shim.c: the N-th allocation of the program's own code fails, not the C
# library's, OpenBLAS's or libgomp's). Each scenario below is run once clean, which tells the
# number of counted allocations T, then again with allocation N failing, for every N when
# T <= 28, else N = 1..20, the last 4 and an even stride in between (28 runs: the loaders'
# and grzo_create's first allocations, the writers' last; each run starts a process that
# loads cuBLAS where CUDA is built, and CI's time is short; GRZO_OOM_ALL=1 runs every N).
#   generate: stories260K + tok512 (llama2.c) greedy from a prompt; the same with --checkpoint,
#             sampled at a fixed seed; a SentencePiece GGUF; a GPT-2 byte-level GGUF (exported
#             here), sampled; a Hugging Face folder with tokenizer.json
#   export:   stories260K + checkpoint -> safetensors; a GGUF original -> GGUF f32 over an
#             earlier file, -> GGUF q8_0, -> safetensors f16; a Hugging Face folder -> GGUF q8_0
#             (the converter's metadata, its tokenizer.json), -> safetensors bf16 (its
#             tokenizer files copied)
# Each armed run must either
#   - exit 0 with the clean run's stdout, stderr (grzo-generate's speeds aside) and files, byte
#     for byte, or
#   - exit 1, not by a signal and not hung, with one line on stderr besides the clean run's own
#     lines, the last, and it names the program and says "memory"; grzo-generate's stdout is a
#     beginning of the clean run's (the text streams out; a failed run ends it with a newline);
#     and the run's folder is as it was before (export.c: "a failed export leaves nothing (and
#     an earlier GGUF intact)"): no output, no temporary, the earlier file byte for byte.
# usage: test_tools_oom.sh generate|export GRZO_GENERATE GRZO_EXPORT GRZO_FINETUNE DATA_DIR WORK_DIR SHIM [SCENARIO N]
#   with SCENARIO N, only that run (a reproduction), its folder kept.
#   GRZO_OOM_ALL=1: every N, whatever T. GRZO_OOM_JOBS: runs at once (2).
set -u
tool=$1 generate=$(realpath "$2") export=$(realpath "$3") finetune=$(realpath "$4") data=$(realpath "$5") work=$6
shim=$(realpath "$7") only_scen=${8:-} only_n=${9:-}
here=$(cd "$(dirname "$0")" && pwd)
corpus=$here/corpus
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p "$work/$tool" && work=$(realpath "$work/$tool") || exit 1
ulimit -c 0   # a crash is seen by its exit status; no core files
in=$work/in   # the inputs every run reads (made once, unarmed)

case $tool in
    generate) bin=$generate scenarios="llama2c_greedy checkpoint_sampled gguf_spm gguf_gpt2_sampled hf_folder" ;;
    export) bin=$export scenarios="llama2c_safetensors gguf_f32_over_earlier gguf_q8_0 gguf_safetensors_f16 hf_gguf_q8_0 hf_safetensors_bf16" ;;
    *) fail "unknown tool '$tool' (generate or export)" ;;
esac
prog=${bin##*/}

# args SCENARIO: the scenario's command line, in the array `args` (outputs relative to the run's folder)
args() {
    local gen=(--threads 1) st=(--model "$data/stories260K.bin" --tokenizer "$data/tok512.bin" --prompt "Once upon a time" --steps 40)
    case $1 in
        llama2c_greedy) args=("${st[@]}" "${gen[@]}") ;;
        checkpoint_sampled) args=("${st[@]}" "${gen[@]}" --checkpoint "$in/ft/checkpoint.grzo" --temperature 0.8 --seed 3) ;;
        gguf_spm) args=(--model "$corpus/gguf_f32_spm.gguf" --prompt "hello world" --steps 20 "${gen[@]}") ;;
        gguf_gpt2_sampled) args=(--model "$in/hf.gguf" --prompt "Once upon the time" --steps 30 --temperature 0.5 --seed 7 "${gen[@]}") ;;
        hf_folder) args=(--model "$in/hf" --prompt "Once upon the time" --steps 30 "${gen[@]}") ;;
        llama2c_safetensors) args=(--model "$data/stories260K.bin" --checkpoint "$in/ft/checkpoint.grzo" --out st --format safetensors) ;;
        gguf_f32_over_earlier) args=(--model "$corpus/gguf_f32_spm.gguf" --checkpoint "$in/ftg/checkpoint.grzo" --out tuned.gguf) ;;
        gguf_q8_0) args=(--model "$corpus/gguf_f32_spm.gguf" --checkpoint "$in/ftg/checkpoint.grzo" --out tuned.gguf --type q8_0) ;;
        gguf_safetensors_f16) args=(--model "$corpus/gguf_f32_spm.gguf" --checkpoint "$in/ftg/checkpoint.grzo" --out st/
                                    --format safetensors --type f16) ;;
        hf_gguf_q8_0) args=(--model "$in/hf" --checkpoint "$in/ft/checkpoint.grzo" --out tuned.gguf --type q8_0) ;;
        hf_safetensors_bf16) args=(--model "$in/hf" --checkpoint "$in/ft/checkpoint.grzo" --out st --format safetensors --type bf16) ;;
        *) fail "unknown scenario '$1' of $tool: $scenarios" ;;
    esac
}
# before SCENARIO FOLDER: what is in the run's folder before it runs
before() {
    case $1 in gguf_f32_over_earlier) echo "an earlier export" > "$2/tuned.gguf" ;; esac
}

# run SCENARIO N: the program in a fresh folder DIR/run with allocation N failing (0: none);
# stdout, stderr, exit status, count and the failed allocation's caller beside it in DIR
run() {
    local dir=$work/$1/n$2 rc
    [ "$2" -eq 0 ] && dir=$work/$1/clean
    args "$1"
    rm -rf "$dir" && mkdir -p "$dir/run" && before "$1" "$dir/run" || return 1
    (cd "$dir/run" && timeout 30 env OMP_WAIT_POLICY=passive OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
        LD_PRELOAD="$shim" GRZO_OOM_PROGRAM="$prog" GRZO_OOM_FAIL_AT="$2" GRZO_OOM_COUNT_FILE="$dir/count" \
        GRZO_OOM_WHERE_FILE="$dir/where" "$bin" "${args[@]}" > "$dir/out.txt" 2> "$dir/err.txt")
    rc=$?
    echo "$rc" > "$dir/rc"
}
# (the parallel jobs of the schedule below: this script again, one armed run each)
case "$only_scen" in run:*) s=${only_scen#run:}; run "${s%:*}" "${s#*:}"; exit 0 ;; esac

# the inputs: a checkpoint of stories260K and one of the toy SentencePiece GGUF (1 step each),
# a Hugging Face folder of the first with a byte-level tokenizer.json (as
# test_finetune_cli.sh hf_folder writes it), and that folder as a q8_0 GGUF
make_inputs() {
    local ft=(--task sst2 --data "$data/tasks/SST-2" --n-train 4 --n-dev 2 --n-test 2 --batch 2 --lr 1e-3 --sigma 1e-3
              --seed 5 --threads 1 --steps 1 --eval-every 0)
    rm -rf "$in" && mkdir -p "$in" || return 1
    command -v python3 > /dev/null || fail "python3 is needed to write the folder's tokenizer.json"
    (cd "$in" && env PATH=/nonexistent OMP_NUM_THREADS=1 "$finetune" --model "$data/stories260K.bin" --tokenizer "$data/tok512.bin" \
        "${ft[@]}" --out ft > ft.txt 2>&1) || fail "grzo-finetune stories260K: $(tail -3 "$in/ft.txt")"
    (cd "$in" && env PATH=/nonexistent OMP_NUM_THREADS=1 "$finetune" --model "$corpus/gguf_f32_spm.gguf" \
        "${ft[@]}" --out ftg > ftg.txt 2>&1) || fail "grzo-finetune gguf_f32_spm.gguf: $(tail -3 "$in/ftg.txt")"
    "$export" --model "$data/stories260K.bin" --checkpoint "$in/ft/checkpoint.grzo" --out "$in/hf" --format safetensors \
        2> "$in/export.txt" || fail "grzo-export: $(cat "$in/export.txt")"
    python3 "$here/write_toy_tokenizer.py" "$in/hf" || fail "cannot write tokenizer.json"
    "$export" --model "$in/hf" --checkpoint "$in/ft/checkpoint.grzo" --out "$in/hf.gguf" --type q8_0 2> "$in/export.txt" ||
        fail "grzo-export of the folder: $(cat "$in/export.txt")"
    touch "$in/done"
}
[ -e "$in/done" ] && [ -n "$only_scen" ] || make_inputs

# stderr without what differs between runs by the clock: grzo-generate's time and speeds
plain_err() { sed -E '/^generated [0-9]+ tokens in /s/ in .*/ in (time)/' "$1"; }

# clean SCENARIO: the run every armed run is held to
clean() {
    local c=$work/$1/clean
    oom_clean_run "$1"
    if [ "$tool" = generate ]; then
        [ "$(wc -c < "$c/out.txt")" -gt 20 ] || fail "$1: the clean run wrote no text"
    else
        [ -n "$(ls -A "$c/run")" ] || fail "$1: the clean run wrote nothing"
    fi
    plain_err "$c/err.txt" > "$c/err.plain"
    mkdir -p "$work/$1/before" && before "$1" "$work/$1/before"
}

# check SCENARIO N: the verdict on the armed run ("" when it passes)
check() {
    local c=$work/$1/clean dir=$work/$1/n$2 rc extra n
    rc=$(cat "$dir/rc")
    if [ "$rc" -eq 0 ]; then
        cmp -s "$c/err.plain" <(plain_err "$dir/err.txt") || { echo "exit 0, but stderr differs: $(diff "$c/err.plain" <(plain_err "$dir/err.txt") | head -3)"; return; }
        cmp -s "$c/out.txt" "$dir/out.txt" || { echo "exit 0, but stdout differs: $(diff "$c/out.txt" "$dir/out.txt" | head -3)"; return; }
        diff -r -q "$c/run" "$dir/run" > /dev/null || { echo "exit 0, but the files differ: $(diff -r -q "$c/run" "$dir/run" | head -3)"; return; }
        return
    fi
    [ "$rc" -eq 124 ] && { echo "hung (killed after 30 s)"; return; }
    [ "$rc" -ne 1 ] && { echo "exit $rc (a signal?): $(tail -2 "$dir/err.txt")"; return; }
    # the error: the one stderr line the clean run does not print, and the last one
    extra=$(plain_err "$dir/err.txt" | grep -v -x -F -f "$c/err.plain")
    [ "$(printf '%s\n' "$extra" | grep -c .)" -eq 1 ] || { echo "exit 1 with $(printf '%s\n' "$extra" | grep -c .) new stderr lines: $extra"; return; }
    [ "$extra" = "$(tail -1 "$dir/err.txt")" ] || { echo "the error is not the last line: $(tail -2 "$dir/err.txt")"; return; }
    case "$extra" in "$prog: "*memory*) ;; *) echo "exit 1, the message does not say memory: $extra"; return ;; esac
    # the text so far, then the newline the program ends it with
    n=$(wc -c < "$dir/out.txt")
    [ "$n" -gt 0 ] && [ "$(tail -c 1 "$dir/out.txt" | od -An -c | tr -d ' ')" = '\n' ] && n=$((n - 1))
    cmp -s <(head -c "$n" "$c/out.txt") <(head -c "$n" "$dir/out.txt") || { echo "stdout is not a beginning of the clean run's"; return; }
    diff -r -q "$work/$1/before" "$dir/run" > /dev/null ||
        { echo "the failed run changed its folder: $(diff -r -q "$work/$1/before" "$dir/run" | head -3 | tr '\n' ' ')"; return; }
}

# the shared driver (tests/oom_driver.sh): which N, the parallel runs, the checks
oom_bin=$bin
oom_self=("$0" "$tool" "$generate" "$export" "$finetune" "$data" "${work%/*}" "$shim")
. "$(cd "$(dirname "$0")" && pwd)/../oom_driver.sh"
if [ -n "$only_scen" ]; then
    args "$only_scen"   # an unknown scenario is refused
    oom_reproduce "$only_scen" "$only_n"
    exit 0
fi
oom_run_all
