#!/usr/bin/env bash
# The demo command: installs missing build dependencies (Debian 12, as root), builds,
# fine-tunes a pretrained MLP with GRZO, MeZO and FZOO side by side (arguments go to the
# demo), and draws the loss curves with gnuplot into build/demo/demo.png.
set -u
cd "$(dirname "$0")/.."
. .ci/deps.sh
grzo_install_deps || exit 1
grzo_build || exit 1

out=build/demo
mkdir -p "$out" || exit 1
rm -f "$out/demo.csv" "$out/demo.png"
# --csv first: a --csv among the arguments replaces it (and then there is nothing to plot)
build/examples/demo --csv "$out/demo.csv" "$@" | tee "$out/demo.txt"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] && [ -f "$out/demo.csv" ] || exit "$rc"

c=$(sed -n 's/^  this fine-tuning.*: c = \([0-9.-]*\) .*/\1/p' "$out/demo.txt")
seeds=$(sed -n 's/^run: \([0-9]*\) seeds.*/\1/p' "$out/demo.txt")
if ! command -v gnuplot >/dev/null; then
    echo "no gnuplot on PATH: the curves are in $out/demo.csv, no plot drawn"
    exit 0
fi
(cd "$out" && gnuplot 2>&1) <<EOF || { echo "gnuplot failed: no plot drawn" >&2; rm -f "$out/demo.png.tmp"; exit 1; }
set terminal pngcairo size 1300,560 font 'sans,11'
set output 'demo.png.tmp'
set datafile separator ','
set multiplot layout 1,2 title "Fine-tuning a pretrained MLP on a related task (c = $c), same forward rows per step, $seeds seeds"
set xlabel 'forward rows per estimator (2B = 32 per step for each)'
set grid
set key top right box opaque
set style fill transparent solid 0.15 noborder
set title 'training loss on task B: mean over seeds, band from min to max'
set ylabel 'mean squared error'
set logscale y
names = "GRZO MeZO FZOO"
plot for [i=0:2] 'demo.csv' every ::1 using 2:(column(4+3*i)):(column(5+3*i)) with filledcurves lc i+1 notitle, \
     for [i=0:2] '' every ::1 using 2:(column(3+3*i)) with lines lw 2 lc i+1 title word(names, i+1)
set title "GRZO's loss / MeZO's, paired by seed (below 1: GRZO ahead)"
set ylabel 'ratio'
unset logscale y
set yrange [0:1.6]
plot 'demo.csv' every ::2 using 2:13:14 with filledcurves lc 1 notitle, \
     '' every ::2 using 2:12 with lines lw 2 lc 1 title 'mean over seeds (band: min to max)', \
     1 with lines lc 'black' dt 2 notitle
unset multiplot
EOF
mv "$out/demo.png.tmp" "$out/demo.png" && echo "plot: $out/demo.png"
