#!/usr/bin/env bash
# The demo command: installs missing build dependencies (Debian 12, as root), builds,
# fine-tunes a pretrained MLP with GRZO, MeZO and FZOO side by side (arguments go to the
# demo), and draws the loss curves with gnuplot into build/demo/demo.png.
# build/demo's files (demo.txt, demo.csv, demo.png) are replaced only once the demo has
# succeeded: a refused argument or a failed --check leaves the last run's. A --csv FILE of
# your own is read from the folder you run this in, and then nothing is plotted.
set -u
caller=$PWD
cd "$(dirname "$0")/.." || exit 1
. .ci/deps.sh
grzo_install_deps || exit 1
grzo_build || exit 1

# the demo's arguments, a relative --csv FILE made relative to the caller's folder (this
# script runs from the repository root)
args=() own_csv=0
while [ $# -gt 0 ]; do
    if [ "$1" = --csv ] && [ $# -ge 2 ]; then
        own_csv=1
        case $2 in /*|'') args+=(--csv "$2") ;; *) args+=(--csv "$caller/$2") ;; esac
        shift 2
    else
        args+=("$1")
        shift
    fi
done

out=build/demo
mkdir -p "$out" || exit 1
rm -f "$out/demo.txt.new" "$out/demo.csv.new"
[ "$own_csv" = 1 ] || args=(--csv "$out/demo.csv.new" "${args[@]}")
build/examples/demo "${args[@]}" | tee "$out/demo.txt.new"
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then
    rm -f "$out/demo.txt.new" "$out/demo.csv.new"
    exit "$rc"
fi
if [ "$own_csv" = 1 ]; then   # the curves went to the caller's file: nothing to plot here
    mv "$out/demo.txt.new" "$out/demo.txt"
    exit 0
fi
if [ ! -f "$out/demo.csv.new" ]; then   # --help: no run, so nothing to replace
    rm -f "$out/demo.txt.new"
    exit 0
fi
mv "$out/demo.txt.new" "$out/demo.txt" && mv "$out/demo.csv.new" "$out/demo.csv" || exit 1
echo "curves renamed to $out/demo.csv (written under a temporary name until the demo succeeded)"

c=$(sed -n 's/^  this fine-tuning.*: c = \([0-9.-]*\) .*/\1/p' "$out/demo.txt")
seeds=$(sed -n 's/^run: \([0-9]*\) seeds.*/\1/p' "$out/demo.txt")
# an earlier run's plot would not show these curves: it goes whether or not a new one is drawn
rm -f "$out/demo.png"
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
