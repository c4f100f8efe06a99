#!/usr/bin/env bash
# bench_mpi.sh - data parallelism over MPI (README "Scaling out"): measured step time and
# communication of grzo-finetune at 1 and 2 ranks on this machine, then the communication
# cost per step at 8 and 64 ranks from a latency/bandwidth model, beside the forward time of
# the Llama-3-8B shape computed from its FLOPs at a stated throughput.
# usage: bench/bench_mpi.sh [BUILD_DIR (build)] [STEPS (30)] [BATCH (16)]
set -u
build=${1:-build} steps=${2:-30} batch=${3:-16}
cd "$(dirname "$0")/.."
bin=$build/examples/finetune/grzo-finetune
data=tests/data
[ -x "$bin" ] || { echo "bench_mpi: no $bin (build first)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpi=(mpirun --oversubscribe)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none OMP_WAIT_POLICY=passive
common=(--model "$data/stories260K.bin" --tokenizer "$data/tok512.bin" --task sst2 --data "$data/tasks/SST-2"
        --n-train 64 --n-dev 4 --n-test 4 --batch "$batch" --lr 1e-3 --sigma 1e-3 --seed 5 --steps "$steps")

# seconds per step: the log's elapsed time at the last step over the steps
step_time() { tail -1 "$1/log.jsonl" | sed -n 's/.*"elapsed":\([0-9.]*\).*/\1/p' | awk -v n="$steps" '{printf "%.4f", $1 / n}'; }

echo "grzo-finetune, stories260K, SST-2, B = $batch, $steps GRZO steps, $(nproc) cores (load $(cut -d' ' -f1 /proc/loadavg))"
printf '%-44s %12s  %s\n' "configuration" "s / step" "communication per step (rank 0)"
run1() {   # name, extra args...
    local name=$1; shift
    "$bin" "${common[@]}" "$@" --out "$work/$name" > "$work/$name.out" 2>&1 || { echo "$name failed: $(tail -2 "$work/$name.out")"; exit 1; }
}
run1 np1-batched --threads 1
printf '%-44s %12s  %s\n' "1 process, 1 thread, batched ops" "$(step_time "$work/np1-batched")" "none"
run1 np1-invariant --threads 1 --shard-invariant
printf '%-44s %12s  %s\n' "1 process, 1 thread, --shard-invariant" "$(step_time "$work/np1-invariant")" "none"
run1 np1-t2 --threads 2 --shard-invariant
printf '%-44s %12s  %s\n' "1 process, 2 threads, --shard-invariant" "$(step_time "$work/np1-t2")" "none"
OMP_NUM_THREADS=1 "${mpi[@]}" -np 2 "$bin" "${common[@]}" --threads 1 --out "$work/np2" > "$work/np2.out" 2>&1 ||
    { echo "mpirun -np 2 failed: $(tail -3 "$work/np2.out")"; exit 1; }
comm=$(sed -n 's/^communication (rank 0, 2 ranks): //p' "$work/np2.out")
printf '%-44s %12s  %s\n' "mpirun -np 2, 1 thread each" "$(step_time "$work/np2")" "$comm"
cmp -s "$work/np1-invariant/checkpoint.grzo" "$work/np2/checkpoint.grzo" && echo "(the 2-rank checkpoint is bitwise the 1-process --shard-invariant one)"

python3 - "$batch" <<'PY'
import math, sys
# Llama-3-8B: 32 layers, d 4096, FFN 14336, 32 query / 8 KV heads of 128, vocab 128256
L, d, f, kv, V = 32, 4096, 14336, 1024, 128256
per_layer = 2 * d * d + 2 * d * kv + 3 * d * f
params = L * per_layer + 2 * V * d
T = 256                                   # tokens per example copy (a SuperGLUE prompt)
flops_token = 2 * (L * per_layer + V * d) + 4 * L * d * (T / 2)   # matmuls + causal attention
tput = 400e12                             # bf16 FLOP/s per H100: ~40% of the 989 TFLOP/s dense peak
nets = [("InfiniBand/RoCE 200 Gb/s", 2e-6, 25e9), ("TCP, 10 Gb Ethernet", 25e-6, 1.25e9)]
print(f"\nLlama-3-8B shape: {params / 1e9:.2f} B parameters, {flops_token / 1e9:.1f} GFLOP per token forward, "
      f"{T} tokens per copy, {tput / 1e12:.0f} TFLOP/s per GPU (one rank per GPU)")
print("all-gather of the pass's 2B losses + one status float per rank; recursive doubling (log2 R steps) and ring (R - 1)")
print(f"{'R':>3} {'B':>4} {'copies/rank':>11} {'forward/rank':>13} {'bytes recv':>10}  {'network':<26} {'doubling':>9} {'ring':>9} {'ring/fwd':>8}")
for R, B in ((8, 16), (64, 64)):
    copies = 2 * B / R
    fwd = copies * T * flops_token / tput
    n = 2 * B + R                                       # floats gathered per pass (GRZO: one pass)
    for name, alpha, bw in nets:
        vol = (R - 1) / R * 4 * n / bw
        rd = math.ceil(math.log2(R)) * alpha + vol
        ring = (R - 1) * alpha + vol
        print(f"{R:>3} {B:>4} {copies:>11.0f} {fwd * 1e3:>10.1f} ms {4 * n:>10d}  {name:<26} {rd * 1e6:>6.1f} us {ring * 1e6:>6.0f} us"
              f" {100 * ring / fwd:>7.2f}%")
grad = 2 * params                                       # bf16 gradient, what first-order DDP all-reduces
print(f"\nfor scale: a first-order DDP step all-reduces the bf16 gradient, {grad / 1e9:.1f} GB: a ring moves 2 (R-1)/R of it,"
      f" {2 * grad / 25e9:.2f} s per step at 25 GB/s; grzo moves the {4 * (2 * 64 + 64)} bytes above and never a parameter.")
print(f"the replica guard's checksum reads every parameter ({2 * params / 1e9:.0f} GB in bf16) every K steps: "
      "at ~1 GB/s (FNV-1a, one core) raise --replica-check-every for large models.")
PY
