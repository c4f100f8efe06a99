#!/usr/bin/env bash
# Loss curves of run-results.sh's runs, GRZO against MeZO, per task: against steps and
# against wall-clock seconds. usage: plot-results.sh RESULTS_DIR OUT_DIR
set -eu
in=$1 out=$2
mkdir -p "$out"
cols() { sed -n 's/.*"step":\([0-9]*\),"loss":\([^,]*\),.*"elapsed":\([^,}]*\).*/\1 \2 \3/p' "$1"; }
for task in sst2 rte; do
  [ -f "$in/$task-grzo/log.jsonl" ] && [ -f "$in/$task-mezo/log.jsonl" ] || continue
  cols "$in/$task-grzo/log.jsonl" > "$out/.$task-grzo.dat"
  cols "$in/$task-mezo/log.jsonl" > "$out/.$task-mezo.dat"
  # gnuplot runs in the output folder and names files relative to it, so no path is
  # pasted into its script
  (cd "$out" && gnuplot) <<GP
set terminal pngcairo size 1100,420 font ',10' noenhanced
set output 'finetune_$task.png'
set multiplot layout 1,2 title 'SmolLM2-135M-Instruct on $task: GRZO vs MeZO (B = 16, sigma = 1e-3, seed 1; per-estimator lr from the grid)'
set grid
set ylabel 'training loss (batch mean)'
set xlabel 'step'
plot '.$task-grzo.dat' using 1:2 with lines lw 1.5 title 'GRZO', '.$task-mezo.dat' using 1:2 with lines lw 1.5 title 'MeZO'
set xlabel 'wall-clock seconds (2-core CPU, shared: see README)'
plot '.$task-grzo.dat' using 3:2 with lines lw 1.5 title 'GRZO', '.$task-mezo.dat' using 3:2 with lines lw 1.5 title 'MeZO'
unset multiplot
GP
  rm -f "$out/.$task-grzo.dat" "$out/.$task-mezo.dat"
done
