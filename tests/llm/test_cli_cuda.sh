#!/usr/bin/env bash
# The command-line tools on the GPU against themselves on the CPU (issue 16 items 5 and 6),
# stories260K and the SST-2 sample; Meson suite 'cuda'. Skips (77) when the tools report no
# CUDA device. cli_cuda_emulated runs it where no GPU is, on the CLIs linked against the
# emulated CUDA backend and ops (tests/cuda_emu, tests/llm/meson.build).
#   1. grzo-generate --device cuda (f32, greedy) prints the CPU's text byte for byte, and
#      --dtype bf16 generates too.
#   2. grzo-finetune --device cuda, 5 steps of GRZO and of in-place MeZO in fp32 (the backend's
#      pedantic math): each logged loss within 1e-4 relative of the CPU run's (the library's
#      parity test holds the parameters to 1e-5; the CLI adds nothing of its own). GRZO at lr
#      1e-5: its normalized step is lr / (2 sigma sqrt(B)) a coordinate whatever the gradient,
#      and at 1e-4 (0.025) the GPU's last-bit loss differences (4e-7 at step 0, another
#      summation order) grew to 1.5e-3 by step 4 on the emulated GPU; at 1e-5 they stay near
#      3e-6 while the update still moves step 4's loss by 10 % (against lr 1e-9). GRZO with
#      the default attention (auto: the cuBLAS form at this size) and with --attention fused
#      (recorded in run.json); in-place MeZO and bf16 with the fused kernel.
#   3. grzo-finetune --device cuda --dtype bf16 (fast math): every loss finite, and step 0's
#      (no update yet: only the bf16 rounding of weights and activations, 2^-8 relative each)
#      within 5e-2 relative of the CPU's fp32 loss: a sanity bound that a wrong kernel breaks;
#      the 16-bit kernels' own bounds are test_cuda's and test_llm_cuda's.
# usage: test_cli_cuda.sh GRZO_FINETUNE GRZO_GENERATE DATA_DIR WORK_DIR
set -u
ft=$1 gen=$2 data=$3 work=$4
rm -rf "$work" && mkdir -p "$work" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
model=(--model "$data/stories260K.bin" --tokenizer "$data/tok512.bin")

# no device: the tools say so in one line; that is the skip, anything else is a failure
if ! "$gen" "${model[@]}" --steps 4 --device cuda > "$work/probe.out" 2> "$work/probe.err"; then
    if grep -q "no CUDA device" "$work/probe.err"; then echo "SKIP: $(tail -1 "$work/probe.err")"; exit 77; fi
    fail "grzo-generate --device cuda: $(tail -1 "$work/probe.err")"
fi

# 1. generation
"$gen" "${model[@]}" --steps 60 --device cpu > "$work/gen_cpu.txt" 2> "$work/gen_cpu.err" || fail "generate on the CPU: $(tail -1 "$work/gen_cpu.err")"
"$gen" "${model[@]}" --steps 60 --device cuda > "$work/gen_gpu.txt" 2> "$work/gen_gpu.err" || fail "generate on the GPU: $(tail -1 "$work/gen_gpu.err")"
[ -s "$work/gen_cpu.txt" ] || fail "the CPU generated nothing"
cmp -s "$work/gen_cpu.txt" "$work/gen_gpu.txt" || fail "the GPU's greedy text differs from the CPU's: '$(head -c 200 "$work/gen_gpu.txt")'"
"$gen" "${model[@]}" --steps 60 --device cuda --dtype bf16 > "$work/gen_bf16.txt" 2> "$work/gen_bf16.err" ||
    fail "generate in bf16: $(tail -1 "$work/gen_bf16.err")"
[ -s "$work/gen_bf16.txt" ] || fail "bf16 generated nothing"
echo "ok: generation, the GPU's fp32 text is the CPU's"

# 2. and 3. fine-tuning
common=("${model[@]}" --task sst2 --data "$data/tasks/SST-2" --n-train 8 --n-dev 2 --n-test 2 --batch 4
        --sigma 1e-3 --eval-every 0 --seed 5 --threads 1 --steps 5)
losses() { sed -n 's/^{"step":\([0-9]*\),"loss":\([^,}]*\).*/\1 \2/p' "$1/log.jsonl"; }
tune() {   # NAME ARGS...: one run into $work/NAME
    local name=$1
    shift
    "$ft" "${common[@]}" "$@" --out "$work/$name" > "$work/$name.out" 2>&1 || fail "$name: $(tail -1 "$work/$name.out")"
    [ "$(losses "$work/$name" | wc -l)" -eq 5 ] || fail "$name logged $(losses "$work/$name" | wc -l) losses, want 5"
}
# compare A B TOL STEPS: the losses of steps 0..STEPS-1 within TOL relative, all finite
compare() {
    paste -d' ' <(losses "$work/$1") <(losses "$work/$2") | awk -v tol="$3" -v n="$4" -v what="$2 vs $1" '
        { if ($4 !~ /^-?[0-9.]+(e[-+]?[0-9]+)?$/) { printf "%s: step %d loss %s is not finite\n", what, $1, $4; bad = 1; next }
          if ($1 >= n) next
          d = $4 - $2; if (d < 0) d = -d; r = d / ($2 < 0 ? -$2 : $2)
          printf "  %s step %d: %.6f vs %.6f (relative %.2e)\n", what, $1, $2, $4, r
          if (r > tol) { printf "%s: step %d differs by %.2e relative (bound %g)\n", what, $1, r, tol; bad = 1 } }
        END { exit bad }' || fail "$2 against $1 (above)"
}
# GRZO with the default attention (auto: the cuBLAS form at this size) and with the fused
# kernel; in-place MeZO and bf16 with the fused kernel alone (the emulator runs the cuBLAS
# form's padded GEMMs slowly: 90 s a run against 22)
for est in grzo mezo-inplace; do
    lr=1e-4 form=(--attention fused); [ "$est" = grzo ] && lr=1e-5 form=()
    tune "cpu-$est" --estimator "$est" --lr "$lr" --device cpu
    tune "gpu-$est" --estimator "$est" --lr "$lr" --device cuda --dtype f32 "${form[@]}"
    compare "cpu-$est" "gpu-$est" 1e-4 5
done
tune gpu-grzo-fused --estimator grzo --lr 1e-5 --device cuda --dtype f32 --attention fused
grep -q '"attention":"fused"' "$work/gpu-grzo-fused/run.json" || fail "run.json does not record --attention fused"
compare cpu-grzo gpu-grzo-fused 1e-4 5
tune gpu-grzo-bf16 --estimator grzo --lr 1e-5 --device cuda --dtype bf16 --attention fused
compare cpu-grzo gpu-grzo-bf16 5e-2 1
echo "ok: grzo-finetune --device cuda: fp32 losses within 1e-4 of the CPU's (GRZO, in-place MeZO; GRZO with either attention), bf16's step 0 within 5e-2"
