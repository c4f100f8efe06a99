#!/usr/bin/env bash
# bench/gpu/finetune.sh on the CPU (stories260K, the SST-2 and RTE samples): its argument checks,
# a call whose every run grzo-finetune refuses (which must not fix the OUTDIR's protocol), a
# whole tiny protocol (zero-shot, grid, choice, final runs over two seeds, the report), the
# same two runs at a time (--jobs 2: the same losses), the refusal of a changed protocol in the
# same OUTDIR (its files moved to other folders are taken, a model of another name is not), the
# grids extended at their edges, --jobs against the clock, --fit's estimates (evaluations
# included, runs made beside others not used; --fit with --jobs over 1 refused), and two runs
# stopped by the budget that the next call resumes instead of restarting, their B_eff
# diagnostics going on.
# usage: test_finetune.sh GRZO_FINETUNE DATA_DIR WORK_DIR   (DATA_DIR: tests/data)
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export GRZO_FINETUNE=$1
data=$2 work=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work" || exit 1
fs() { bash "$here/finetune.sh" "$@"; }
tiny=(--device cpu --dtype f32 --tokenizer "$data/tok512.bin" --batch 4 --n-train 8 --n-dev 4 --n-test 4 --threads 1
      --eval-every 3 --diagnose-every 3 --diagnose-probes 4 --grid-grzo 1e-4,1e-3 --grid-mezo 1e-4,1e-3 --grid-extend 0)

# argument checks: usage errors exit 2, a missing file 1; nothing is created
fs > "$work/e.out" 2>&1; [ $? -eq 2 ] && grep -q "usage:" "$work/e.out" || fail "no arguments: $(cat "$work/e.out")"
fs --seeds 1,,2 "$data/stories260K.bin" "$data/tasks" "$work/x" > "$work/e.out" 2>&1
[ $? -eq 2 ] && grep -q "empty name" "$work/e.out" || fail "--seeds 1,,2: $(cat "$work/e.out")"
fs --tasks sst2,qqp "$data/stories260K.bin" "$data/tasks" "$work/x" > "$work/e.out" 2>&1
[ $? -eq 2 ] && grep -q "unknown task 'qqp'" "$work/e.out" || fail "unknown task: $(cat "$work/e.out")"
fs --steps 12abc "$data/stories260K.bin" "$data/tasks" "$work/x" > "$work/e.out" 2>&1
[ $? -eq 2 ] && grep -q "expected a count" "$work/e.out" || fail "--steps 12abc: $(cat "$work/e.out")"
fs --grid-mezo 1e-4,../x "$data/stories260K.bin" "$data/tasks" "$work/x" > "$work/e.out" 2>&1
[ $? -eq 2 ] && grep -q "'../x' is not a learning rate" "$work/e.out" || fail "a learning rate that is a path: $(cat "$work/e.out")"
fs "$data/no-such.bin" "$data/tasks" "$work/x" > "$work/e.out" 2>&1
[ $? -eq 1 ] && grep -q "no such model file" "$work/e.out" || fail "missing model: $(cat "$work/e.out")"
fs --tokenizer "$data/no-such-tok.bin" "$data/stories260K.bin" "$data/tasks" "$work/x" > "$work/e.out" 2>&1
[ $? -eq 1 ] && grep -q "no such tokenizer file" "$work/e.out" || fail "missing tokenizer: $(cat "$work/e.out")"
# values the runs would only meet later (or bash's arithmetic would misread: 0600 is octal to
# it, 090 an error), each a usage error: "OPTION VALUE what the message says"
while read -r opt val want; do
    fs "$opt" "$val" "$data/stories260K.bin" "$data/tasks" "$work/x" > "$work/e.out" 2>&1
    [ $? -eq 2 ] && grep -q -- "$want" "$work/e.out" || fail "$opt $val: $(cat "$work/e.out")"
done << 'EOF2'
--device gpu expected cuda or cpu
--dtype f64 expected bf16, f16 or f32
--steps 0 at least 1
--grid-steps 0 at least 1
--batch 0 at least 1
--n-dev 0 at least 1
--budget 0 at least 1
--diagnose-probes 1 at least 2
--steps 0600 expected a count
--budget 090 expected a count
--threads 01 expected a count
--seeds 01 not a seed
EOF2
# --fit with --jobs over 1: a run's speed beside others is not one --fit can hold to the budget
fs --fit --jobs 2 "$data/stories260K.bin" "$data/tasks" "$work/x" > "$work/e.out" 2>&1
[ $? -eq 2 ] && grep -q "^finetune.sh: --fit with --jobs 2: .*use --jobs 1 with --fit$" "$work/e.out" || fail "--fit --jobs 2: $(cat "$work/e.out")"
[ ! -e "$work/x" ] || fail "a refused call created its OUTDIR"

# a call whose runs grzo-finetune all refuses (a stand-in that rejects its options) fails and
# keeps no protocol, so that a corrected call with other options may use the OUTDIR
printf '#!/bin/sh\necho "grzo-finetune: unknown option (stand-in)" >&2\nexit 2\n' > "$work/refusing-ft" && chmod +x "$work/refusing-ft" || exit 1
o=$work/refused
GRZO_FINETUNE=$work/refusing-ft fs "${tiny[@]}" --tasks sst2 --estimators grzo --grid-steps 4 --steps 6 --seeds 1 \
    "$data/stories260K.bin" "$data/tasks" "$o" > "$work/refused.out" 2>&1
[ $? -eq 1 ] || fail "a call whose runs all fail must exit 1: $(tail -3 "$work/refused.out")"
[ ! -e "$o/protocol.txt" ] || fail "a call whose every run was refused kept its protocol: $(cat "$o/protocol.txt")"
fs "${tiny[@]}" --tasks sst2 --estimators grzo --grid-steps 4 --steps 7 --seeds 1 --budget 1 \
    "$data/stories260K.bin" "$data/tasks" "$o" > "$work/refused2.out" 2>&1
[ $? -eq 3 ] && ! grep -q "another protocol" "$work/refused2.out" ||
    fail "the corrected call (every run left to a later call by --budget 1) was refused: $(tail -3 "$work/refused2.out")"

# a whole tiny protocol
o=$work/full
fs "${tiny[@]}" --tasks sst2,rte --estimators grzo,mezo --grid-steps 4 --steps 6 --seeds 1,2 \
    "$data/stories260K.bin" "$data/tasks" "$o" > "$work/full.out" 2>&1 || fail "the tiny protocol: $(tail -5 "$work/full.out")"
for r in zs-sst2 zs-rte grid-sst2-grzo-1e-4 grid-sst2-grzo-1e-3 grid-rte-mezo-1e-3 final-sst2-grzo-s1 final-rte-mezo-s2; do
    [ -s "$o/runs/$r/results.json" ] || fail "no results of $r"
done
[ ! -e "$o/runs/grid-sst2-grzo-1e-4/checkpoint.grzo" ] && [ -s "$o/runs/final-sst2-grzo-s1/checkpoint.grzo" ] ||
    fail "the grid's checkpoints must go, the final runs' stay"
grep -q '"diagnose"' "$o/runs/final-rte-grzo-s1/log.jsonl" || fail "the final GRZO run logged no B_eff"
r=$o/finetune.md
[ -s "$r" ] || fail "no finetune.md"
chosen=$(cat "$o/runs/chosen-sst2-mezo")
grep -q "^| sst2 | mezo | $chosen | 4 | .* | \*\*chosen\*\* |$" "$r" || fail "the grid row of the chosen MeZO lr: $(grep '| sst2 | mezo |' "$r")"
grep -Eq "^\| rte \| grzo \| $(cat "$o/runs/chosen-rte-grzo") \| 2 of 2 \| [0-9.]+ ± [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \[" "$r" ||
    fail "the results row of rte, grzo: $(grep '| rte | grzo |' "$r")"
grep -q "^Runs left for a later call: 0$" "$r" || fail "runs left"
grep -q "^plan: 18 runs, 18 done; nothing left" "$r" || fail "the plan line: $(grep '^plan:' "$r")"
bash "$here/finetune.sh" --report-only "$o" > "$work/rep.out" 2>&1 && cmp -s <(grep '^|' "$r") <(grep '^|' "$o/finetune.md") ||
    fail "--report-only: $(cat "$work/rep.out")"
! grep -q "(shared)" "$r" || fail "runs made one at a time marked shared"
# --jobs 2: the same protocol, two runs at a time, gives every run its own results (its seed)
# bit for bit, and the report marks the final runs' seconds as shared
o2=$work/jobs
fs "${tiny[@]}" --jobs 2 --tasks sst2,rte --estimators grzo,mezo --grid-steps 4 --steps 6 --seeds 1,2 \
    "$data/stories260K.bin" "$data/tasks" "$o2" > "$work/jobs.out" 2>&1 || fail "--jobs 2: $(tail -5 "$work/jobs.out")"
grep -q "2 runs at a time, 1 threads each" "$work/jobs.out" || fail "--jobs 2 did not say so: $(head -3 "$work/jobs.out")"
n=0
for d in "$o"/runs/*/; do
    d=${d%/} name=$(basename "$d")
    cmp -s <(grep -o '"\(loss\|dev_acc\|test_acc\)":[^,}]*' "$d/log.jsonl" "$d/results.json" | sed 's|^[^:]*/||') \
           <(grep -o '"\(loss\|dev_acc\|test_acc\)":[^,}]*' "$o2/runs/$name/log.jsonl" "$o2/runs/$name/results.json" | sed 's|^[^:]*/||') ||
        fail "$name: --jobs 2 gave other losses or accuracies than --jobs 1"
    n=$((n + 1))
done
[ "$n" -eq 18 ] || fail "compared $n runs, expected 18"
grep -Eq "^\| rte \| grzo \| [^|]* \| 2 of 2 \| .* \| [0-9.]+ \(shared\) \|" "$o2/finetune.md" && grep -q "^(shared): " "$o2/finetune.md" ||
    fail "the shared runs' steps/s: $(grep '| rte | grzo |' "$o2/finetune.md")"
# the same OUTDIR with another protocol is refused, and changes nothing
before=$(ls -R "$o" | md5sum)
fs "${tiny[@]}" --tasks sst2,rte --estimators grzo,mezo --grid-steps 4 --steps 7 --seeds 1,2 \
    "$data/stories260K.bin" "$data/tasks" "$o" > "$work/other.out" 2>&1
[ $? -eq 1 ] && grep -q "another protocol" "$work/other.out" || fail "a changed protocol: $(tail -2 "$work/other.out")"
[ "$(ls -R "$o" | md5sum)" = "$before" ] || fail "the refused call changed OUTDIR"
# the same protocol with the model and data in other folders goes on (noted), and records them
mkdir -p "$work/moved" && cp "$data/stories260K.bin" "$work/moved/" && cp -r "$data/tasks" "$work/moved/tasks"
fs "${tiny[@]}" --tasks sst2,rte --estimators grzo,mezo --grid-steps 4 --steps 6 --seeds 1,2 \
    "$work/moved/stories260K.bin" "$work/moved/tasks" "$o" > "$work/moved.out" 2>&1 ||
    fail "the protocol with its files moved: $(tail -2 "$work/moved.out")"
grep -q "note: the model and data are in other folders" "$work/moved.out" && grep -q "model=$work/moved/stories260K.bin" "$o/protocol.txt" ||
    fail "the move was not noted and recorded: $(grep note "$work/moved.out"; head -1 "$o/protocol.txt")"
mv "$work/moved/stories260K.bin" "$work/moved/other.bin"
fs "${tiny[@]}" --tasks sst2,rte --estimators grzo,mezo --grid-steps 4 --steps 6 --seeds 1,2 \
    "$work/moved/other.bin" "$work/moved/tasks" "$o" > "$work/renamed.out" 2>&1
[ $? -eq 1 ] && grep -q "another protocol" "$work/renamed.out" || fail "a model of another name: $(tail -2 "$work/renamed.out")"

# the grid extended beyond its edge, against a stand-in grzo-finetune whose dev accuracy peaks
# at the lr $PEAK (0.9 - 0.1 |log10(lr / PEAK)|), so that where the best lr lies is known. With
# $STEP its log's steps take STEP seconds each (elapsed) and its results' seconds add $END
# (the evaluation at the end; a zero-shot run's is all of it), else its seconds are $SLEEP or 1.
cat > "$work/peak-ft" << 'EOF3'
#!/bin/sh
out="" lr=1e-3 steps=0
while [ $# -gt 0 ]; do
    case $1 in
        --out) out=$2; shift 2 ;; --lr) lr=$2; shift 2 ;; --steps) steps=$2; shift 2 ;;
        *) if [ $# -ge 2 ] && [ "${2#--}" = "$2" ]; then shift 2; else shift; fi ;;
    esac
done
mkdir -p "$out" && : > "$out/log.jsonl" || exit 1
[ -z "${SLEEP:-}" ] || sleep "$SLEEP"
awk -v n="$steps" -v st="${STEP:-}" 'BEGIN { for (i = 0; i < n; i++)
    printf "{\"step\":%d,\"loss\":0.5%s}\n", i, (st == "" ? "" : sprintf(",\"elapsed\":%.3f", (i + 1) * st)) }' >> "$out/log.jsonl"
[ -z "${STEP:-}" ] && sec=${SLEEP:-1} || sec=$(awk -v n="$steps" -v st="$STEP" -v e="${END:-0}" 'BEGIN { print n * st + e }')
awk -v lr="$lr" -v p="$PEAK" -v n="$steps" -v sec="$sec" 'BEGIN { d = log(lr / p) / log(10); if (d < 0) d = -d; a = 0.9 - 0.1 * d
    printf "{\"steps\":%d,\"seconds\":%g,\"dev_acc\":%.4f,\"test_acc\":%.4f,\"zero_shot_dev_acc\":0.5,\"zero_shot_test_acc\":0.5}\n", n, sec, a, a }' \
    > "$out/results.json"
EOF3
chmod +x "$work/peak-ft" || exit 1
ext=(--device cpu --grid-steps 2 --steps 3 --seeds 1 --tasks sst2 --estimators grzo "$data/stories260K.bin" "$data/tasks")
ext2=(--device cpu --grid-steps 2 --steps 3 --seeds 1 --tasks sst2 --estimators grzo,mezo "$data/stories260K.bin" "$data/tasks")
o=$work/ext-inside                         # the top edge, then inside: one lr added
PEAK=3e-3 GRZO_FINETUNE=$work/peak-ft fs --grid-grzo 1e-4,1e-3 "${ext[@]}" "$o" > "$work/ext1.out" 2>&1 ||
    fail "a grid extended once: $(tail -3 "$work/ext1.out")"
[ "$(cat "$o/runs/extended-sst2-grzo")" = "0.01" ] && [ "$(cat "$o/runs/chosen-sst2-grzo")" = "1e-3" ] ||
    fail "1e-3 at the top edge: 0.01 must be tried and 1e-3 kept: $(cat "$o/runs/extended-sst2-grzo" "$o/runs/chosen-sst2-grzo")"
grep -q "^- sst2, grzo: added beyond the grid's edge: 0.01;$" "$o/finetune.md" || fail "the report's note: $(grep '^- ' "$o/finetune.md")"
grep -q "^| sst2 | grzo | 0.01 | 2 | 0.8477 |" "$o/finetune.md" || fail "the added lr's grid row: $(grep '| sst2 | grzo |' "$o/finetune.md")"
grep -q "^plan: 5 runs, 5 done" "$o/finetune.md" || fail "the plan counts the added lr: $(grep '^plan:' "$o/finetune.md")"
o=$work/ext-edge                           # still rising at the top: stops after --grid-extend lrs, says so
PEAK=1 GRZO_FINETUNE=$work/peak-ft fs --grid-grzo 1e-4,1e-3 "${ext[@]}" "$o" > "$work/ext2.out" 2>&1 ||
    fail "a grid extended to its limit: $(tail -3 "$work/ext2.out")"
[ "$(tr '\n' ' ' < "$o/runs/extended-sst2-grzo")" = "0.01 0.1 " ] && [ "$(cat "$o/runs/chosen-sst2-grzo")" = "0.1" ] ||
    fail "two lrs added, the last chosen: $(cat "$o/runs/extended-sst2-grzo" "$o/runs/chosen-sst2-grzo")"
grep -q "^- sst2, grzo: added beyond the grid's edge: 0.01 0.1; \*\*the chosen lr 0.1 is still the largest tried\*\*" "$o/finetune.md" ||
    fail "the report must say the choice sits at the edge: $(grep '^- ' "$o/finetune.md")"
o=$work/ext-bottom                         # the bottom edge, by the grid's own ratio (here 3)
PEAK=1e-6 GRZO_FINETUNE=$work/peak-ft fs --grid-grzo 9e-6,3e-6,2.7e-5 --grid-extend 1 "${ext[@]}" "$o" > "$work/ext3.out" 2>&1 ||
    fail "a grid extended downwards: $(tail -3 "$work/ext3.out")"
[ "$(cat "$o/runs/extended-sst2-grzo")" = "1e-06" ] && [ "$(cat "$o/runs/chosen-sst2-grzo")" = "1e-06" ] ||
    fail "3e-6 at the bottom: 1e-06 must be tried and chosen: $(cat "$o/runs/extended-sst2-grzo" "$o/runs/chosen-sst2-grzo")"
grep -q "still the smallest tried" "$o/finetune.md" || fail "the bottom edge's note: $(grep '^- ' "$o/finetune.md")"
o=$work/ext-none                           # --grid-extend 0: the grid as given
PEAK=1 GRZO_FINETUNE=$work/peak-ft fs --grid-grzo 1e-4,1e-3 --grid-extend 0 "${ext[@]}" "$o" > "$work/ext4.out" 2>&1 ||
    fail "--grid-extend 0: $(tail -3 "$work/ext4.out")"
[ ! -e "$o/runs/extended-sst2-grzo" ] && [ "$(cat "$o/runs/chosen-sst2-grzo")" = "1e-3" ] || fail "--grid-extend 0 extended the grid"
# --jobs against the clock (a stand-in that takes 5 s a run; the zero-shot, grid and final runs
# of two tasks): two at a time they end within a budget of 28 s (one at a time, the final runs
# would start at ~20 s with under 10 s left, and be left); with 18 s the grids start at ~5 s and
# the final runs at ~10 s, so those are left, counted by the runs' own subshells
jb=(--jobs 2 --device cpu --grid-grzo 1e-3 --grid-extend 0 --grid-steps 2 --steps 3 --seeds 1 --tasks sst2,rte --estimators grzo
    "$data/stories260K.bin" "$data/tasks")
PEAK=1e-3 SLEEP=5 GRZO_FINETUNE=$work/peak-ft fs --budget 28 "${jb[@]}" "$work/jobs-fit" > "$work/jobs1.out" 2>&1 ||
    fail "two at a time within 28 s: $(tail -3 "$work/jobs1.out")"
[ -s "$work/jobs-fit/runs/final-rte-grzo-s1/results.json" ] && [ -s "$work/jobs-fit/runs/final-sst2-grzo-s1/results.json" ] ||
    fail "two at a time: the final runs did not finish"
PEAK=1e-3 SLEEP=5 GRZO_FINETUNE=$work/peak-ft fs --budget 18 "${jb[@]}" "$work/jobs-left" > "$work/jobs2.out" 2>&1
[ $? -eq 3 ] && [ "$(cat "$work/jobs-left/left.txt")" = 2 ] && grep -q "2 runs left for a later call, 0 failed" "$work/jobs2.out" ||
    fail "two at a time within 18 s: the two final runs must be left: $(tail -3 "$work/jobs2.out")"
[ -z "$(find "$work/jobs-left/runs" -name '.outcomes.*')" ] || fail "the outcomes file was left behind"

# --fit (the stand-in's figures, no sleeping): a final run of 20 steps at the 1 s a step its
# grid run measured, a dev evaluation every 5 steps, one diagnostic (2 probes: ~2 steps), would
# fit in a budget of 50 s by its training (20 s, +10%, 10 s to load); its 6 evaluations at the
# END s that the zero-shot and grid runs measured (2 zero-shot and end, 4 during training) make
# it ~68 s with END 5 (not started, left: exit 3) and ~38 s with END 0.5 (started)
ft=(--fit --budget 50 --device cpu --grid-grzo 1e-3 --grid-extend 0 --grid-steps 2 --steps 20 --eval-every 5 --diagnose-every 0
    --diagnose-probes 2 --tasks sst2 --estimators grzo "$data/stories260K.bin" "$data/tasks")
PEAK=1e-3 STEP=1 END=5 GRZO_FINETUNE=$work/peak-ft fs --seeds 1 "${ft[@]}" "$work/fit" > "$work/fit1.out" 2>&1
[ $? -eq 3 ] && [ ! -e "$work/fit/runs/final-sst2-grzo-s1" ] &&
    grep -q "final-sst2-grzo-s1: not started (--fit: ~68 s, 20 steps at 1 s, 6 evaluations 30 s, 1 diagnostic 2 s, +10%, 10 s to load;" "$work/fit1.out" ||
    fail "--fit must count the evaluations and not start a run they make too long: $(grep -A1 '3/3' "$work/fit1.out")"
o=$work/fit-room
PEAK=1e-3 STEP=1 END=0.5 GRZO_FINETUNE=$work/peak-ft fs --seeds 1,2 "${ft[@]}" "$o" > "$work/fit2.out" 2>&1 &&
    [ -s "$o/runs/final-sst2-grzo-s1/results.json" ] && [ -s "$o/runs/final-sst2-grzo-s2/results.json" ] ||
    fail "--fit with room for the runs and their evaluations: $(tail -3 "$work/fit2.out")"
# a finished run of the same kind, task and estimator goes first: seed 1's seconds made 45 (its
# end 25 s, taken again for the zero-shot evaluation) put seed 2 at ~90 s, not started; once
# seed 1 was made beside another (its .jobs 2) it counts no more, and seed 2 starts at ~38 s
rm -rf "$o/runs/final-sst2-grzo-s2" "$o/runs/final-sst2-grzo-s2".* && sed -i 's/"seconds":[0-9.]*/"seconds":45/' "$o/runs/final-sst2-grzo-s1/results.json" || exit 1
PEAK=1e-3 STEP=1 END=0.5 GRZO_FINETUNE=$work/peak-ft fs --seeds 1,2 "${ft[@]}" "$o" > "$work/fit3.out" 2>&1
[ $? -eq 3 ] && grep -q "final-sst2-grzo-s2: not started (--fit: ~90 s, as a finished final run of sst2, grzo, 1 diagnostic 2 s," "$work/fit3.out" ||
    fail "--fit must go by a finished run alike first: $(grep -A1 '3/3' "$work/fit3.out")"
echo 2 > "$o/runs/final-sst2-grzo-s1.jobs"
PEAK=1e-3 STEP=1 END=0.5 GRZO_FINETUNE=$work/peak-ft fs --seeds 1,2 "${ft[@]}" "$o" > "$work/fit4.out" 2>&1 &&
    [ -s "$o/runs/final-sst2-grzo-s2/results.json" ] || fail "--fit used a run made beside others: $(grep -A1 '3/3' "$work/fit4.out")"

# An OUTDIR begun before the extension (no grid_extend in its protocol) goes on with it: the
# choices whose final runs have not begun are made again (and extended), the others stand
o=$work/ext-old
PEAK=1 GRZO_FINETUNE=$work/peak-ft fs --grid-grzo 1e-4,1e-3 --grid-mezo 1e-4,1e-3 --grid-extend 0 "${ext2[@]}" "$o" \
    > "$work/ext5.out" 2>&1 || fail "the old protocol's first call: $(tail -3 "$work/ext5.out")"
sed -i '1s/ grid_extend=0$//' "$o/protocol.txt" && rm -rf "$o/runs/final-sst2-mezo-s1"* || exit 1
PEAK=1 GRZO_FINETUNE=$work/peak-ft fs --grid-grzo 1e-4,1e-3 --grid-mezo 1e-4,1e-3 "${ext2[@]}" "$o" \
    > "$work/ext6.out" 2>&1 || fail "the old protocol going on with the extension: $(tail -3 "$work/ext6.out")"
grep -q "began before the grids were extended" "$work/ext6.out" && grep -q " grid_extend=2$" "$o/protocol.txt" ||
    fail "the upgrade was not noted and recorded: $(grep note "$work/ext6.out"; head -1 "$o/protocol.txt")"
[ "$(cat "$o/runs/chosen-sst2-grzo")" = "1e-3" ] && [ ! -e "$o/runs/extended-sst2-grzo" ] ||
    fail "a choice whose final run exists must stand"
[ "$(cat "$o/runs/chosen-sst2-mezo")" = "0.1" ] && [ -s "$o/runs/final-sst2-mezo-s1/results.json" ] ||
    fail "a choice without a final run is made again over the extended grid: $(cat "$o/runs/chosen-sst2-mezo")"
PEAK=1 GRZO_FINETUNE=$work/peak-ft fs --grid-grzo 1e-4,1e-3 --grid-mezo 1e-4,1e-3 --grid-extend 1 "${ext2[@]}" "$o" \
    > "$work/ext7.out" 2>&1
[ $? -eq 1 ] && grep -q "another protocol" "$work/ext7.out" || fail "another --grid-extend in the same OUTDIR: $(tail -2 "$work/ext7.out")"

# the budget: the final runs, two at a time (--jobs 2), are stopped (exit 3) and the next call
# resumes both
o=$work/budget
# (one grid value; a budget that leaves the final runs some seconds on a loaded 2-core machine)
args=("${tiny[@]}" --jobs 2 --grid-grzo 1e-4 --tasks sst2,rte --estimators grzo --grid-steps 30 --steps 100000000 --seeds 1
      --eval-every 0 --budget 25 "$data/stories260K.bin" "$data/tasks" "$o")
fs "${args[@]}" > "$work/b1.out" 2>&1
[ $? -eq 3 ] || fail "a call cut by its budget must exit 3: $(tail -3 "$work/b1.out")"
declare -A n1
for t in sst2 rte; do
    f=$o/runs/final-$t-grzo-s1
    [ -s "$f/checkpoint.grzo" ] || fail "the stopped run $t left no checkpoint"
    n1[$t]=$(grep -c '"loss"' "$f/log.jsonl")
    [ "${n1[$t]}" -gt 0 ] || fail "the stopped run $t logged no step"
done
grep -q "^Runs left for a later call: 2$" "$o/finetune.md" || fail "the report does not count the two stopped runs"
grep -Eq "^plan: 6 runs, 4 done; grzo: [0-9]+ steps, ~[0-9]+ s;" "$o/finetune.md" ||
    fail "the plan line (runs, and the time left at the grid's measured speed): $(grep '^plan:' "$o/finetune.md")"
fs "${args[@]}" > "$work/b2.out" 2>&1
[ $? -eq 3 ] || fail "the second call: $(tail -3 "$work/b2.out")"
for t in sst2 rte; do
    f=$o/runs/final-$t-grzo-s1
    grep -q "final-$t-grzo-s1: resuming at step ${n1[$t]} " "$work/b2.out" ||
        fail "the second call did not resume $t at step ${n1[$t]}: $(grep final "$work/b2.out")"
    n2=$(grep -c '"loss"' "$f/log.jsonl")
    [ "$(grep -c '^{"step":0,"loss"' "$f/log.jsonl")" -eq 1 ] && [ "$n2" -gt "${n1[$t]}" ] ||
        fail "$t: the resumed log must go on from step ${n1[$t]} (now $n2 steps, $(grep -c '^{"step":0,"loss"' "$f/log.jsonl") step-0 lines)"
    [ "$(sed -n 's/^{"step":\([0-9]*\),"diagnose".*/\1/p' "$f/log.jsonl" | tail -1)" -ge "${n1[$t]}" ] ||
        fail "$t: the resumed run logged no B_eff: a resume must ask for the diagnostics again (they are not in run.json)"
done
echo "ok: finetune.sh (arguments, a tiny protocol, a changed protocol refused, moved files taken, grids extended at their edges, --jobs, --fit, two runs stopped at steps ${n1[sst2]} and ${n1[rte]} and resumed)"
