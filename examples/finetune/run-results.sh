#!/usr/bin/env bash
# The README's fine-tuning results: SmolLM2-135M-Instruct (Q4_1 GGUF, dequantized to fp32)
# on SST-2 and RTE, GRZO vs MeZO at B = 16, sigma = 1e-3, the same seed and step count.
# Each estimator's learning rate is picked from a short grid of short runs scored on dev.
# usage: run-results.sh MODEL.gguf DATA_DIR (the staged shared/data) OUT_DIR [STEPS_SST2] [STEPS_RTE]
set -eu
model=$1 data=$2 out=$3 steps_sst2=${4:-60} steps_rte=${5:-20}
bin=${GRZO_FINETUNE:-build/examples/finetune/grzo-finetune}
export OMP_WAIT_POLICY=passive
mkdir -p "$out"
common=(--model "$model" --batch 16 --sigma 1e-3 --seed 1 --threads 2 --overwrite)   # a re-run starts over

# 1. learning-rate grid: 15 steps each on SST-2, 64 dev examples, scored by dev accuracy
lrs="1e-6 1e-5"
for est in grzo mezo; do
  for lr in $lrs; do
    "$bin" "${common[@]}" --task sst2 --data "$data/SST-2" --estimator $est --lr $lr --steps 15 \
        --n-dev 64 --n-test 0 --out "$out/grid-$est-$lr" > "$out/grid-$est-$lr.txt" 2>&1
  done
done
best() {  # the grid's lr with the best dev accuracy (the smaller lr on ties)
  for lr in $lrs; do
    printf '%s %s\n' "$(sed -n 's/.*"dev_acc":\([0-9.]*\),"test_acc".*/\1/p' "$out/grid-$1-$lr/results.json")" $lr
  done | sort -k1,1nr -k2,2g | head -1 | cut -d' ' -f2
}
lr_grzo=$(best grzo) lr_mezo=$(best mezo)
echo "grid: grzo lr $lr_grzo, mezo lr $lr_mezo" | tee "$out/grid.txt"

# 2. the runs: same seed, same steps; test = 300 SST-2 / 100 RTE validation examples
for est in grzo mezo; do
  lr=$([ $est = grzo ] && echo $lr_grzo || echo $lr_mezo)
  "$bin" "${common[@]}" --task sst2 --data "$data/SST-2" --estimator $est --lr $lr --steps $steps_sst2 \
      --eval-every 20 --n-dev 64 --n-test 300 --out "$out/sst2-$est" > "$out/sst2-$est.txt" 2>&1
  "$bin" "${common[@]}" --task rte --data "$data/RTE" --estimator $est --lr $lr --steps $steps_rte \
      --eval-every 10 --n-dev 32 --n-test 100 --max-len 192 --out "$out/rte-$est" > "$out/rte-$est.txt" 2>&1
done
for f in "$out"/sst2-*/results.json "$out"/rte-*/results.json; do echo "$f: $(cat "$f" | tr -d '\n')"; done
