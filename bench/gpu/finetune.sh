#!/usr/bin/env bash
# bench/gpu/finetune.sh - fine-tuning GRZO vs MeZO vs FZOO with MeZO's protocol (issue 16 item 9),
# resumable in calls of a few minutes (a machine that limits each command to 10 minutes).
#
#   bash bench/gpu/finetune.sh [options] MODEL DATA_DIR OUTDIR
#   bash bench/gpu/finetune.sh --report-only OUTDIR
#
# MODEL: a GGUF (SmolLM2-135M-Instruct) or a llama2.c .bin with --tokenizer; DATA_DIR holds
# the tasks' folders (SST-2, RTE, ...: shared/data, or tests/data/tasks for a smoke run).
# The protocol (MeZO's large_models: 1000 train / 500 dev / 1000 test, B = 16, sigma = 1e-3,
# constant lr; research/zo-anchors.md), in this order:
#   1. zero-shot   each task's dev and test accuracy before training (a 0-step run)
#   2. grid        each (task, estimator, lr) for --grid-steps steps, scored by its dev accuracy
#                  at the end; the chosen lr has the best dev accuracy (ties: the lower training
#                  loss over the last 20 steps). Where that lr is the grid's largest or smallest,
#                  the grid of (task, estimator) is extended beyond that edge by the grid's own
#                  last ratio (3.9e-6 after 2.3e-6: 6.6e-6), one lr at a time, until the best lr
#                  lies inside or --grid-extend (2) lrs were added; the report says where the
#                  choice still sits at an edge
#   3. final       each (task, estimator) at its chosen lr for --steps steps, seed by seed
#                  (--seeds), test accuracy at the end; GRZO and MeZO log the forward-only
#                  B_eff (--diagnose, issue 15) at the start and every --diagnose-every steps
#   4. report      OUTDIR/finetune.md (zero-shot, grid, results and B_eff tables) and, with
#                  python3 + matplotlib, OUTDIR/finetune_TASK.png (training loss, a running mean
#                  over 50 steps, against steps and seconds)
# Learning-rate grids (--grid-grzo/--grid-mezo/--grid-fzoo to change them):
#   GRZO   the paper's {1e-7, 3e-7, 5e-7} (at D = 8e9 parameters) and the same scaled by
#          sqrt(8e9 / D) (the same update norm at this D; SPEC "Step size"; D from --params,
#          default SmolLM2-135M's 134515008)
#   MeZO   the paper's {1e-7, 1e-6} and {1e-5, 1e-4} (SmolLM2's best on the CPU was 1e-4)
#   FZOO   {1e-6, 1e-5, 5e-5} (fzoo.sh's 1e-5 and its README's 5e-5)
# The budget: runs go in order until --budget seconds are spent; the run in progress then gets
# SIGINT (grzo-finetune writes its checkpoint and stops) and a later call with the same OUTDIR
# and options resumes it (--resume) and goes on, so the whole protocol can be spread over
# several calls. Finished runs (results.json) are kept, with their checkpoints for the final
# runs only; a run stopped before its first checkpoint starts over. A call with other options than those
# of the first call whose runs grzo-finetune took is refused (OUTDIR's protocol.txt, written
# once a run has finished or logged a step); the model, tokenizer and data may have moved to
# other folders (the same names: a later machine's checkout lies elsewhere), which is noted
# and recorded; a folder begun before the grids were extended (no grid_extend in its protocol)
# goes on with the extension. The report is rewritten at the end of every call.
# --jobs N runs N grzo-finetune processes at a time on the one device (zero-shot runs, the grids
# of each task and estimator, final runs), each with the cores shared out (--threads 0). It was
# meant for a small model that leaves a large GPU mostly idle, but measured on an H200
# (SmolLM2-135M at B = 16) four at a time ran at 0.76x the throughput of one at a time: a GRZO
# grid run took 0.0245 s a step alone and 0.106-0.110 s beside three others. Each run's results
# are its own (its seed), but its seconds are the shared device's: the report marks such runs'
# steps/s, and its plots draw them against their steps at the speed of runs made alone.
# --fit (for a machine's last call: the checkpoints of runs stopped by the budget do not travel
# to the next machine, so their steps are lost) starts a new grid or final run only when the
# budget left holds all that it does, at what the runs made alone measured (run_costs, estimate):
#   - as a finished run of the same kind (grid or final), task and estimator, the slowest: its
#     results.json seconds over its steps (training, the dev evaluations, checkpoints and the
#     evaluation at the end), its end again for the zero-shot evaluation before the first step;
#   - else the slowest training step of the task and estimator (else of the estimator on another
#     task, scaled by the two tasks' ratio with another estimator) times the steps, and each
#     evaluation at what one of the task measured: a final run's zero-shot and end (dev + test:
#     zs-TASK's, or a final run's end) and its dev evaluation every --eval-every steps (one in a
#     log, else a grid run's end: dev and a checkpoint); a grid run's zero-shot and end (a grid
#     run's end, else zs-TASK's);
#   - and the diagnostics (GRZO and MeZO final runs: at the start and every --diagnose-every
#     steps), the slowest the task measured (else any task; else --diagnose-probes training steps);
#   - and 10% over all that (FIT_MARGIN), for runs alike differ (SST-2 GRZO grid runs made alone
#     on the H200: 4.9-5.2 s, 6%) and a final run's checkpoints every 10 minutes, which no grid
#     run measures;
#   - and 10 s to load the model (FIT_LOAD): grzo-finetune's files do not record a load.
# The others are left for a later call, as stopped ones are; a stopped run is resumed whatever
# is left; a run whose estimator no run made alone has measured starts. Only runs made alone
# count (runs/NAME.jobs all 1, or none: made before --jobs), and --fit with --jobs over 1 is a
# usage error: a run's speed beside others depends on what runs beside it. On the H200 at
# --jobs 4, --fit took 0.106 s a step from an SST-2 GRZO grid run made beside others and
# started four 2000-step final runs with 228 s left; the SST-2 GRZO one, beside three others
# rather than two and evaluating, ran 0.110 s a step, and all four were stopped by the budget
# (at steps 1983, 1943, 1170 and 1209), their work lost.
# Exit status: 0 when everything planned is done, 3 when runs are left for a later call, 1 when
# a run failed, 2 on usage.
set -u -o pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
FT=${GRZO_FINETUNE:-$REPO/build-gpu/examples/finetune/grzo-finetune}
START=$(date +%s)

usage() {
    cat >&2 << 'EOF'
usage: bash bench/gpu/finetune.sh [options] MODEL DATA_DIR OUTDIR | --report-only OUTDIR
  --budget SECONDS (540)  --device cuda|cpu (cuda)  --dtype bf16|f16|f32 (bf16)  --tokenizer PATH
  --tasks sst2,rte  --estimators grzo,mezo,fzoo  --steps N (2000)  --grid-steps N (200)  --seeds 1,2,3
  --eval-every N (500)  --diagnose-every N (500)  --diagnose-probes K (32)  --batch B (16)
  --n-train N (1000) --n-dev N (500) --n-test N (1000)  --params D (134515008)  --threads N (0: all)
  --grid-grzo LIST  --grid-mezo LIST  --grid-fzoo LIST   (comma lists of learning rates)
  --grid-extend N (2)   lrs added beyond the grid's edge where the best lr sits there (0: none)
  --jobs N (1)   runs at a time on the one device (each grid of a task and estimator is one)
  --fit          start a run only when the budget left holds it (as runs made alone measured; --jobs 1 only)
  grzo-finetune: $GRZO_FINETUNE, else build-gpu/examples/finetune/grzo-finetune
EOF
    exit 2
}
say() { local e=$(( $(date +%s) - START )); printf '[%02d:%02d] %s\n' $((e / 60)) $((e % 60)) "$*"; }
die() { echo "finetune.sh: $*" >&2; exit 1; }
# digits without a leading zero (bash's arithmetic reads 0600 as octal and fails on 090) and
# at most 18 of them (no 64-bit overflow)
is_count() { case $1 in ''|*[!0-9]*|0?*) return 1 ;; esac; [ "${#1}" -le 18 ]; }
is_list() { case $1 in ''|,*|*,|*,,*) return 1 ;; esac; }
is_rate() { [[ $1 =~ ^[0-9]+(\.[0-9]+)?([eE]-?[0-9]+)?$ ]]; }
task_folder() {   # grzo-finetune's task name -> the data folder
    case $1 in
        sst2) echo SST-2 ;; sst5) echo SST-5 ;; rte) echo RTE ;; cb) echo CB ;; boolq) echo BoolQ ;; wic) echo WiC ;;
        wsc) echo WSC ;; copa) echo COPA ;; multirc) echo MultiRC ;; trec) echo TREC ;; mnli) echo MNLI ;; snli) echo SNLI ;;
        *) return 1 ;;
    esac
}

# the lists that name runs and folders: known tasks and estimators, seeds that are counts
check_lists() {
    local n t
    for n in TASKS ESTIMATORS SEEDS; do is_list "${!n:-}" || { echo "finetune.sh: ${n,,}: an empty name in '${!n:-}'" >&2; return 1; }; done
    for t in ${TASKS//,/ }; do task_folder "$t" > /dev/null || { echo "finetune.sh: --tasks: unknown task '$t'" >&2; return 1; }; done
    for t in ${ESTIMATORS//,/ }; do
        case $t in grzo|mezo|fzoo) ;; *) echo "finetune.sh: --estimators: expected grzo, mezo, fzoo, got '$t'" >&2; return 1 ;; esac
    done
    for t in ${SEEDS//,/ }; do is_count "$t" || { echo "finetune.sh: --seeds: '$t' is not a seed" >&2; return 1; }; done
}

# the learning-rate grids, which name runs and folders too
check_grids() {
    local n v
    for n in GRID_GRZO GRID_MEZO GRID_FZOO; do
        is_list "${!n:-}" || { echo "finetune.sh: --$(echo "$n" | tr 'A-Z_' 'a-z-'): an empty value in '${!n:-}'" >&2; return 1; }
        for v in ${!n//,/ }; do is_rate "$v" || { echo "finetune.sh: --$(echo "$n" | tr 'A-Z_' 'a-z-'): '$v' is not a learning rate" >&2; return 1; }; done
    done
}

# ---- the report (also alone, from an earlier call's files) ----------------------------------------
field() { sed -n "s/.*\"$2\":\([^,}]*\).*/\1/p" "$1" | head -1; }          # a number of a one-object JSON file
acc() { field "$@" | awk '{ printf "%.4f", $1 }'; }                           # an accuracy, 4 decimals
# B_eff of a run's first and last diagnostics: "3.22 [1.45, 4.00] at step 0 -> 2.10 [1.90, 2.30] at step 1500"
beff_span() {
    sed -n 's/^{"step":\([0-9]*\),"diagnose":{"b_eff":\([^,]*\),.*"b_eff_lo":\([^,]*\),"b_eff_hi":\([^,]*\),.*/\1 \2 \3 \4/p' "$1" 2> /dev/null |
        awk '{ t = sprintf("%.2f [%.2f, %.2f] at step %d", $2, $3, $4, $1); if (NR == 1) f = t; l = t; n = NR }
             END { if (n == 1) print f; else if (n > 1) print f " → " l }'
}
last_loss() { sed -n 's/^{"step":[0-9]*,"loss":\([^,}]*\).*/\1/p' "$1" | tail -20 | awk '{ s += $1; n++ } END { if (n) printf "%.4f", s / n }'; }
steps_logged() { if [ -f "$1" ]; then grep -c '"loss"' "$1"; else echo 0; fi; }
grid_of() { case $1 in grzo) echo "$GRID_GRZO" ;; mezo) echo "$GRID_MEZO" ;; fzoo) echo "$GRID_FZOO" ;; esac; }
# the lrs of (task, est): the estimator's grid and the ones added beyond its edges, a line each
lrs_of() { grid_of "$2" | tr ',' '\n'; cat "$OUT/runs/extended-$1-$2" 2> /dev/null; }
# the best of the finished grid runs of (task, est) as "lr dev_acc loss": best dev accuracy,
# then lowest late loss; nothing while one is unfinished
best_of() {
    local lr d
    for lr in $(lrs_of "$1" "$2"); do [ -s "$OUT/runs/grid-$1-$2-$lr/results.json" ] || return 1; done
    for lr in $(lrs_of "$1" "$2"); do
        d="$OUT/runs/grid-$1-$2-$lr"
        echo "$lr $(field "$d/results.json" dev_acc) $(last_loss "$d/log.jsonl")"
    done | sort -k2,2gr -k3,3g | head -1
}
# The lr beyond the edge where BEST sits among LRS (a line each), by the ratio of the edge to
# its neighbour (the grid's own spacing, continued); nothing when BEST lies inside or LRS holds
# one lr
beyond_edge() {
    sort -g | awk -v best="$1" '{ v[NR] = $1 }
        END { if (NR < 2) exit
              if (v[NR] + 0 == best + 0) printf "%.2g\n", v[NR] * (v[NR] / v[NR - 1])
              else if (v[1] + 0 == best + 0) printf "%.2g\n", v[1] / (v[2] / v[1]) }'
}

grid_table() {
    local d est lr task mark
    echo "| task | estimator | lr | steps | dev acc | training loss (last 20) | chosen |"
    echo "|---|---|---:|---:|---:|---:|---|"
    for d in "$OUT"/runs/grid-*; do
        [ -d "$d" ] || continue
        IFS=- read -r _ task est lr <<< "$(basename "$d")"
        mark=""; [ "$(cat "$OUT/runs/chosen-$task-$est" 2> /dev/null)" = "$lr" ] && mark="**chosen**"
        if [ -s "$d/results.json" ]; then
            echo "| $task | $est | $lr | $(field "$d/results.json" steps) | $(acc "$d/results.json" dev_acc) | $(last_loss "$d/log.jsonl") | $mark |"
        else
            echo "| $task | $est | $lr | $(steps_logged "$d/log.jsonl") | not finished | | |"
        fi
    done
}

# a line for each (task, est) whose grid was extended, or whose choice sits at the grid's edge
edge_notes() {
    local task est c added where
    for task in ${TASKS//,/ }; do
        for est in ${ESTIMATORS//,/ }; do
            added=$(tr '\n' ' ' 2> /dev/null < "$OUT/runs/extended-$task-$est")
            c=$(cat "$OUT/runs/chosen-$task-$est" 2> /dev/null)
            where=""
            if [ -n "$c" ] && [ -n "$(lrs_of "$task" "$est" | beyond_edge "$c")" ]; then
                [ "$(lrs_of "$task" "$est" | sort -g | tail -1)" = "$c" ] && where=largest || where=smallest
            fi
            [ -n "$added$where" ] || continue
            printf -- '- %s, %s:' "$task" "$est"
            [ -z "$added" ] || printf ' added beyond the grid'"'"'s edge: %s;' "${added% }"
            [ -z "$where" ] || printf ' **the chosen lr %s is still the %s tried** (a better one may lie beyond it)' "$c" "$where"
            echo
        done
    done
}

# mean and sample standard deviation of test accuracy over the finished seeds of (task, est)
final_table() {
    local task est
    echo "| task | estimator | lr | seeds done | test acc (mean ± s.d.) | dev acc (mean) | zero-shot test acc | steps/s | B_eff, first → last diagnostic (seed ${SEEDS%%,*}) |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|---|"
    for task in ${TASKS//,/ }; do
        for est in ${ESTIMATORS//,/ }; do
            local files=() f d beff zs shared
            for d in "$OUT"/runs/final-"$task"-"$est"-s*; do [ -s "$d/results.json" ] && files+=("$d/results.json"); done
            beff=$(beff_span "$OUT/runs/final-$task-$est-s${SEEDS%%,*}/log.jsonl")
            zs=$(acc "$OUT/runs/zs-$task/results.json" zero_shot_test_acc 2> /dev/null)
            shared=$(cat "$OUT"/runs/final-"$task"-"$est"-s*.jobs 2> /dev/null | awk '$1 > 1 { print " (shared)"; exit }')
            if [ ${#files[@]} -eq 0 ]; then
                echo "| $task | $est | $(cat "$OUT/runs/chosen-$task-$est" 2> /dev/null) | 0 | | | $zs | | $beff |"
                continue
            fi
            for f in "${files[@]}"; do echo "$(field "$f" test_acc) $(field "$f" dev_acc) $(field "$f" steps) $(field "$f" seconds)"; done |
                awk -v t="$task" -v e="$est" -v lr="$(cat "$OUT/runs/chosen-$task-$est")" -v planned="$N_SEEDS" -v zs="$zs" -v beff="$beff" -v shared="$shared" '
                    { a[NR] = $1; s += $1; dv += $2; st += $3; sec += $4 }
                    END { m = s / NR; v = 0; for (i = 1; i <= NR; i++) v += (a[i] - m) ^ 2
                          sd = NR > 1 ? sprintf("%.4f", sqrt(v / (NR - 1))) : "-"
                          printf "| %s | %s | %s | %d of %d | %.4f ± %s | %.4f | %s | %.2f%s | %s |\n", t, e, lr, NR, planned, m, sd,
                                 dv / NR, zs, (sec > 0 ? st / sec : 0), shared, beff }'
        done
    done
}

# 0 when a final run was made beside others on the device (--jobs): its seconds are shared
any_shared() { cat "$OUT"/runs/final-*.jobs 2> /dev/null | awk '$1 > 1 { f = 1 } END { exit !f }'; }

# The training seconds a step of task $1's estimator $2 took in runs made alone (no --jobs over
# 1), the slowest of them; nothing when none
solo_step_seconds() {
    run_costs | awk -v t="$1" -v e="$2" '$2 == t && $3 == e && $4 == 1 && $7 > 0 && $7 > m { m = $7 } END { if (m) print m }'
}

# ---- what the runs measured: the plan line, the plots and --fit -----------------------------------
FIT_MARGIN=10   # percent over the estimate (the header says why)
FIT_LOAD=10     # seconds to load the model: not measured (grzo-finetune's files record no load)
# What the runs measured, a line each: KIND TASK EST JOBS STEPS SECONDS TRAIN DEV END DIAG (KIND
# zs, grid or final; EST - for a zero-shot run; JOBS the most runs at a time of the calls that
# made it, runs/NAME.jobs, 1 before --jobs: a run made beside others measured the shared device,
# which depends on what ran beside it; 0 where not measured). grzo-finetune's
# clocks: results.json's seconds run from the first step to the results (training, the dev
# evaluations, checkpoints and the evaluation at the end), log.jsonl's elapsed to each step (on
# a line with dev_acc, that evaluation included); neither counts the load, the zero-shot
# evaluation before the first step or the diagnostics (theirs is on their log lines).
#   TRAIN  a training step: the mean of the steps' elapsed increments, those with a dev evaluation left out
#   DEV    the slowest dev evaluation during training: its step's increment less TRAIN
#   END    the evaluation at the end and its checkpoint: seconds less the last step's elapsed
#          (a zero-shot run: all of its seconds)
#   DIAG   the slowest diagnostic
run_costs() {
    local d j
    for d in "$OUT"/runs/zs-* "$OUT"/runs/grid-* "$OUT"/runs/final-*; do
        [ -f "$d/log.jsonl" ] || continue
        j=$(sort -n "$d.jobs" 2> /dev/null | tail -1)
        awk -v name="$(basename "$d")" -v j="${j:-1}" -v s="$(field "$d/results.json" seconds 2> /dev/null)" \
            -v n="$(field "$d/results.json" steps 2> /dev/null)" '
            function num(key) { return match($0, "\"" key "\":[0-9.eE+-]+") ? substr($0, RSTART + length(key) + 3, RLENGTH - length(key) - 3) + 0 : 0 }
            /"loss"/ { e = num("elapsed"); if (/"dev_acc"/) dev[++nd] = e - last; else { train += e - last; nt++ }; last = e }
            /"diagnose"/ && num("seconds") > diag { diag = num("seconds") }
            END { split(name, w, "-"); t = nt ? train / nt : 0
                  for (i = 1; i <= nd; i++) if (dev[i] - t > dv) dv = dev[i] - t
                  printf "%s %s %s %d %d %.6g %.6g %.6g %.6g %.6g\n", w[1], w[2], (w[3] == "" ? "-" : w[3]), j, n, s, t, dv, (s > 0 ? s - last : 0), diag }' \
            "$d/log.jsonl"
    done
}
# --fit's estimate of the seconds the new run NAME ($1) of STEPS ($2) steps takes, as "SECONDS
# HOW" (HOW: what it rests on, for the log); nothing when no run made alone measured a training
# step of its estimator. The evaluations and diagnostics are counted as grzo-finetune makes
# them: a dev evaluation after every --eval-every-th step, a diagnostic before the first step
# and before every --diagnose-every-th (final runs; diag holds their options, none for FZOO).
# Where the task has no training step of the estimator, another task's is taken, times the
# slowest ratio of the two tasks' steps with another estimator (1 where none says): RTE's
# prompts are longer than SST-2's (a GRZO step 0.046 s against 0.019 s on the H200).
estimate() {
    local kind task est evals=0 diags=0
    IFS=- read -r kind task est _ <<< "$1"
    if [ "$kind" = final ]; then
        [ "$EVAL_EVERY" -eq 0 ] || evals=$(( $2 / EVAL_EVERY ))
        [ ${#diag[@]} -eq 0 ] || diags=$(( 1 + (DIAG_EVERY > 0 ? ($2 - 1) / DIAG_EVERY : 0) ))
    fi
    run_costs | awk '$4 == 1 { $4 = ""; print }' | awk -v kind="$kind" -v t="$task" -v e="$est" -v steps="$2" \
        -v evals="$evals" -v diags="$diags" -v probes="$DIAG_PROBES" -v margin="$FIT_MARGIN" -v load="$FIT_LOAD" '
        # the runs made alone, without their JOBS: KIND TASK EST STEPS SECONDS TRAIN DEV END DIAG
        function up(k, v) { if (v > m[k]) m[k] = v }   # the slowest of each figure
        $1 == kind && $2 == t && $3 == e && $4 > 0 && $5 > 0 { up("alike", $5 / $4 * steps + $8) }
        $3 != "-" && $6 > 0 { up($2 SUBSEP $3, $6); tasks[$2]; ests[$3] }   # training steps
        $2 == t && ($1 == "zs" || $1 == "final") { up("dev+test", $8) }
        $2 == t && $1 == "grid" { up("dev", $8) }
        $2 == t { up("dev", $7); up("diag", $9) }
        { up("diag on any task", $9) }
        function other_task(o,   x, r) {
            for (x in ests) if (m[t SUBSEP x] > 0 && m[o SUBSEP x] > 0 && m[t SUBSEP x] / m[o SUBSEP x] > r) r = m[t SUBSEP x] / m[o SUBSEP x]
            return m[o SUBSEP e] * (r ? r : 1)
        }
        END {
            train = m[t SUBSEP e]; of = ""
            if (!train) for (o in tasks) if (m[o SUBSEP e] > 0 && other_task(o) > train) { train = other_task(o); of = " (from " o ")" }
            if (!train) exit
            devtest = m["dev+test"] ? m["dev+test"] : m["dev"]
            dev = m["dev"] ? m["dev"] : devtest
            diag = m["diag"] ? m["diag"] : m["diag on any task"] ? m["diag on any task"] : probes * train
            if (m["alike"]) {
                s = m["alike"]; how = sprintf("as a finished %s run of %s, %s", kind, t, e)
            } else {
                ev = kind == "final" ? 2 * devtest + evals * dev : 2 * dev
                s = steps * train + ev
                how = sprintf("%d steps at %.3g s%s, %d evaluations %.3g s", steps, train, of, (kind == "final" ? 2 + evals : 2), ev)
                if (!devtest) how = how " (none measured alone)"
            }
            s += diags * diag
            if (diags) how = how sprintf(", %d diagnostic%s %.3g s", diags, (diags > 1 ? "s" : ""), diags * diag)
            s = s * (1 + margin / 100) + load
            printf "%d %s, +%d%%, %d s to load\n", (s == int(s) ? s : int(s) + 1), how, margin, load }'
}

# The loss curves of the first seed's final runs, against steps and against seconds. Where runs
# were made several at a time (--jobs), their own seconds are the shared device's, so the
# seconds axis is then each run's steps at the speed its task and estimator measured alone
# (solo_step_seconds); a curve with no such speed keeps its shared seconds and says so.
plots() {
    local solo="" task est v
    if any_shared; then
        for task in ${TASKS//,/ }; do
            for est in ${ESTIMATORS//,/ }; do
                v=$(solo_step_seconds "$task" "$est"); [ -z "$v" ] || solo+="$task/$est=$v;"
            done
        done
        solo=${solo:-none}
    fi
    python3 - "$OUT" "$TASKS" "$ESTIMATORS" "${SEEDS%%,*}" "$solo" << 'PY'
import json, os, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
out, tasks, ests, seed, solo = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(","), sys.argv[4], sys.argv[5]
shared = solo != ""   # the runs shared the device: seconds alone where measured
speed = dict(kv.split("=") for kv in solo.split(";") if "=" in kv)
def running_mean(v, k=50):
    s, r = 0.0, []
    for i, x in enumerate(v):
        s += x - (v[i - k] if i >= k else 0.0)
        r.append(s / min(i + 1, k))
    return r
for task in tasks:
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4))
    drawn = 0
    for est in ests:
        p = os.path.join(out, "runs", f"final-{task}-{est}-s{seed}", "log.jsonl")
        if not os.path.exists(p): continue
        pts = [q for q in (json.loads(l) for l in open(p) if l.strip()) if "loss" in q]
        if not pts: continue
        m = running_mean([q["loss"] for q in pts])
        a.plot([q["step"] for q in pts], m, label=est, lw=0.9)
        v = speed.get(f"{task}/{est}")
        if shared and v:
            b.plot([(q["step"] + 1) * float(v) for q in pts], m, label=est, lw=0.9)
        else:
            b.plot([q.get("elapsed", 0) for q in pts], m, label=est + (" (shared seconds)" if shared else ""), lw=0.9)
        drawn += 1
    if drawn:
        a.set_xlabel("step"); a.set_ylabel("training loss (running mean of 50)")
        b.set_xlabel("seconds alone: steps x the seconds a step took in runs made alone" if shared else "seconds")
        b.legend()
        a.set_title(f"{task}, seed {seed}"); a.legend()
        fig.tight_layout(); fig.savefig(os.path.join(out, f"finetune_{task}.png"), dpi=110); print(f"finetune_{task}.png")
    plt.close(fig)
PY
}

# The plan in one line: its runs, those done, and the training seconds left at the speeds the
# finished runs measured (seconds per step per estimator; zero-shot runs and evaluations are
# not counted; a run whose seconds round to 0 measures nothing). Needs TASKS, ESTIMATORS, SEEDS,
# the step counts and the grids.
plan_line() {
    local task est lr seed d v total=0 done=0 left_steps
    declare -A sps=() todo=()
    while read -r est v; do sps[$est]=$v; done < <(   # the fastest seconds a step of each estimator's finished runs
        run_costs | awk '$1 != "zs" && $5 > 0 && $6 > 0 && (!($3 in m) || $6 / $5 < m[$3]) { m[$3] = $6 / $5 }
                         END { for (e in m) print e, m[e] }')
    for task in ${TASKS//,/ }; do
        total=$((total + 1)); [ -s "$OUT/runs/zs-$task/results.json" ] && done=$((done + 1))
        for est in ${ESTIMATORS//,/ }; do
            for lr in $(lrs_of "$task" "$est"); do
                total=$((total + 1))
                if [ -s "$OUT/runs/grid-$task-$est-$lr/results.json" ]; then done=$((done + 1))
                else todo[$est]=$(( ${todo[$est]:-0} + GRID_STEPS - $(steps_logged "$OUT/runs/grid-$task-$est-$lr/log.jsonl") )); fi
            done
            for seed in ${SEEDS//,/ }; do
                total=$((total + 1))
                if [ -s "$OUT/runs/final-$task-$est-s$seed/results.json" ]; then done=$((done + 1))
                else todo[$est]=$(( ${todo[$est]:-0} + STEPS - $(steps_logged "$OUT/runs/final-$task-$est-s$seed/log.jsonl") )); fi
            done
        done
    done
    left_steps=""
    for est in ${ESTIMATORS//,/ }; do
        [ "${todo[$est]:-0}" -gt 0 ] || continue
        if [ -n "${sps[$est]:-}" ]; then left_steps+=" $est: ${todo[$est]} steps, ~$(awk -v n="${todo[$est]}" -v v="${sps[$est]}" 'BEGIN { printf "%.0f", n * v }') s;"
        else left_steps+=" $est: ${todo[$est]} steps, speed not measured yet;"; fi
    done
    echo "plan: $total runs, $done done;${left_steps:- nothing left}"
}

write_report() {
    local tmp="$OUT/finetune.md.tmp" pngs="" p task notes
    if python3 -c "import matplotlib" 2> /dev/null; then pngs=$(plots 2> "$OUT/plot.log") || pngs=""; fi
    {
        echo "# Fine-tuning on the GPU: GRZO vs MeZO vs FZOO (bench/gpu/finetune.sh)"
        echo
        echo "$(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$REPO" rev-parse --short HEAD 2> /dev/null || echo '?')"
        echo
        echo "Protocol: \`$(head -1 "$OUT/protocol.txt" 2> /dev/null || echo "${protocol:-?} (not kept yet: no run has started)")\`"
        echo
        echo "## Zero-shot"
        echo
        echo "| task | dev acc | test acc |"
        echo "|---|---:|---:|"
        for task in ${TASKS//,/ }; do
            p="$OUT/runs/zs-$task/results.json"
            if [ -s "$p" ]; then echo "| $task | $(acc "$p" zero_shot_dev_acc) | $(acc "$p" zero_shot_test_acc) |"
            else echo "| $task | not run | |"; fi
        done
        echo
        echo "## Learning-rate grid (dev accuracy after the grid's steps)"
        echo
        grid_table
        notes=$(edge_notes)
        [ -z "$notes" ] || printf '\n%s\n' "$notes"
        echo
        echo "## Results (each estimator at its chosen lr; test accuracy at the end)"
        echo
        final_table
        if any_shared; then
            echo
            echo "(shared): some of the final runs were made several at a time on the one device (\`--jobs\`); their seconds, in the"
            echo "steps/s column, are the shared device's, not the run's alone. The plots' seconds are each run's steps at the speed"
            echo "its task and estimator measured in runs made alone (a curve without one keeps its shared seconds and says so)."
        fi
        for p in $pngs; do echo; echo "![$p]($p)"; done
        [ -n "$pngs" ] || { echo; echo "(no plots: python3 with matplotlib is not here, or no final run has logged yet)"; }
        echo
        echo "Runs left for a later call: $(cat "$OUT/left.txt" 2> /dev/null || echo '?')"
        echo
        echo "$(plan_line) (training steps only, at the fastest speed a finished run of the estimator measured)"
    } > "$tmp" && mv "$tmp" "$OUT/finetune.md"
}

# ---- arguments --------------------------------------------------------------------------------------
BUDGET=540 DEVICE=cuda DTYPE=bf16 TOKENIZER="" TASKS=sst2,rte ESTIMATORS=grzo,mezo,fzoo STEPS=2000 GRID_STEPS=200
SEEDS=1,2,3 EVAL_EVERY=500 DIAG_EVERY=500 DIAG_PROBES=32 BATCH=16 N_TRAIN=1000 N_DEV=500 N_TEST=1000 PARAMS=134515008
THREADS=0 GRID_GRZO="" GRID_MEZO=1e-7,1e-6,1e-5,1e-4 GRID_FZOO=1e-6,1e-5,5e-5 GRID_EXTEND=2 JOBS=1 FIT=0
if [ "${1:-}" = "--report-only" ]; then
    [ $# -eq 2 ] || usage
    OUT=$2
    [ -s "$OUT/protocol.txt" ] || die "$OUT holds no protocol.txt (not a finetune.sh folder)"
    read -r TASKS ESTIMATORS SEEDS STEPS GRID_STEPS GRID_GRZO GRID_MEZO GRID_FZOO <<< "$(sed -n 's/^# settings: //p' "$OUT/protocol.txt")"
    check_lists && check_grids && is_count "${STEPS:-}" && is_count "${GRID_STEPS:-}" ||
        die "$OUT/protocol.txt: its settings line is not one this script writes"
    N_SEEDS=$(echo "$SEEDS" | tr ',' '\n' | wc -l)
    write_report && echo "wrote $OUT/finetune.md"
    exit 0
fi
while [ $# -gt 0 ]; do
    case $1 in
        --budget|--device|--dtype|--tokenizer|--tasks|--estimators|--steps|--grid-steps|--seeds|--eval-every|--diagnose-every|\
        --diagnose-probes|--batch|--n-train|--n-dev|--n-test|--params|--threads|--grid-grzo|--grid-mezo|--grid-fzoo|--grid-extend|--jobs)
            [ $# -ge 2 ] || { echo "finetune.sh: $1 needs a value" >&2; usage; }
            v=$2
            case $1 in
                --budget) BUDGET=$v ;; --device) DEVICE=$v ;; --dtype) DTYPE=$v ;; --tokenizer) TOKENIZER=$v ;;
                --tasks) TASKS=$v ;; --estimators) ESTIMATORS=$v ;; --steps) STEPS=$v ;; --grid-steps) GRID_STEPS=$v ;;
                --seeds) SEEDS=$v ;; --eval-every) EVAL_EVERY=$v ;; --diagnose-every) DIAG_EVERY=$v ;;
                --diagnose-probes) DIAG_PROBES=$v ;; --batch) BATCH=$v ;; --n-train) N_TRAIN=$v ;; --n-dev) N_DEV=$v ;;
                --n-test) N_TEST=$v ;; --params) PARAMS=$v ;; --threads) THREADS=$v ;; --grid-grzo) GRID_GRZO=$v ;;
                --grid-mezo) GRID_MEZO=$v ;; --grid-fzoo) GRID_FZOO=$v ;; --grid-extend) GRID_EXTEND=$v ;;
                --jobs) JOBS=$v ;;
            esac
            shift 2 ;;
        --fit) FIT=1; shift ;;
        -*) echo "finetune.sh: unknown option $1" >&2; usage ;;
        *) break ;;
    esac
done
[ $# -eq 3 ] || usage
MODEL=$1 DATA=$2 OUT=$3
# each count and its least value (0 for the ones where 0 means none or all; grzo-finetune's
# --diagnose-probes takes 2 or more)
for n in BUDGET:1 STEPS:1 GRID_STEPS:1 EVAL_EVERY:0 DIAG_EVERY:0 DIAG_PROBES:2 BATCH:1 N_TRAIN:1 N_DEV:1 N_TEST:1 PARAMS:1 THREADS:0 GRID_EXTEND:0 JOBS:1; do
    least=${n#*:} n=${n%%:*}
    opt=--$(echo "$n" | tr 'A-Z_' 'a-z-')
    [ "$n" = DIAG_EVERY ] && opt=--diagnose-every
    [ "$n" = DIAG_PROBES ] && opt=--diagnose-probes
    is_count "${!n}" || { echo "finetune.sh: $opt: expected a count, got '${!n}'" >&2; usage; }
    [ "${!n}" -ge "$least" ] || { echo "finetune.sh: $opt: at least $least, got ${!n}" >&2; usage; }
done
# --fit holds a run to the budget at the speed runs made alone measured; beside others it runs
# at a speed that depends on what runs beside it (the header: the H200's four final runs)
if [ "$FIT" -eq 1 ] && [ "$JOBS" -gt 1 ]; then
    echo "finetune.sh: --fit with --jobs $JOBS: a run's speed beside others depends on what runs beside it, so --fit cannot hold it to the budget; use --jobs 1 with --fit" >&2
    usage
fi
case $DEVICE in cuda|cpu) ;; *) echo "finetune.sh: --device: expected cuda or cpu, got '$DEVICE'" >&2; usage ;; esac
case $DTYPE in bf16|f16|f32) ;; *) echo "finetune.sh: --dtype: expected bf16, f16 or f32, got '$DTYPE'" >&2; usage ;; esac
check_lists || usage
if [ -z "$GRID_GRZO" ]; then   # the paper's grid and the same at this D's update norm
    GRID_GRZO=$(awk -v d="$PARAMS" 'BEGIN { k = sqrt(8e9 / d); printf "1e-7,3e-7,5e-7,%.2g,%.2g,%.2g", 1e-7 * k, 3e-7 * k, 5e-7 * k }')
fi
check_grids || usage
[ -f "$MODEL" ] || die "no such model file: $MODEL"
[ -z "$TOKENIZER" ] || [ -f "$TOKENIZER" ] || die "no such tokenizer file: $TOKENIZER"
[ -x "$FT" ] || die "no grzo-finetune at $FT (build with bench/gpu/run.sh, or set GRZO_FINETUNE)"
for t in ${TASKS//,/ }; do [ -d "$DATA/$(task_folder "$t")" ] || die "no $(task_folder "$t") folder in $DATA"; done
MODEL=$(cd "$(dirname "$MODEL")" && pwd)/$(basename "$MODEL")
DATA=$(cd "$DATA" && pwd)
[ -z "$TOKENIZER" ] || TOKENIZER=$(cd "$(dirname "$TOKENIZER")" && pwd)/$(basename "$TOKENIZER")
N_SEEDS=$(echo "$SEEDS" | tr ',' '\n' | wc -l)
mkdir -p "$OUT/runs" || die "cannot create $OUT"
OUT=$(cd "$OUT" && pwd)

# the protocol of this OUTDIR: a later call must ask for the same (the budget may differ)
settings="$TASKS $ESTIMATORS $SEEDS $STEPS $GRID_STEPS $GRID_GRZO $GRID_MEZO $GRID_FZOO"   # what --report-only needs
protocol="model=$MODEL tokenizer=$TOKENIZER data=$DATA device=$DEVICE dtype=$DTYPE tasks=$TASKS estimators=$ESTIMATORS"
protocol+=" steps=$STEPS grid_steps=$GRID_STEPS seeds=$SEEDS eval_every=$EVAL_EVERY diagnose_every=$DIAG_EVERY"
protocol+=" diagnose_probes=$DIAG_PROBES batch=$BATCH n=$N_TRAIN/$N_DEV/$N_TEST grids=grzo:$GRID_GRZO;mezo:$GRID_MEZO;fzoo:$GRID_FZOO"
protocol+=" grid_extend=$GRID_EXTEND"
# A protocol's fields (paths may hold spaces: each is cut at the next field's name).
proto_path() {   # FIELD LINE: the path after FIELD= (model, tokenizer or data)
    local s=${2#*"$1"=}
    case $1 in model) s=${s%% tokenizer=*} ;; tokenizer) s=${s%% data=*} ;; data) s=${s%% device=*} ;; esac
    printf '%s' "$s"
}
# The same protocol with the model and data in other folders (a later GPU machine checks the
# repository out elsewhere): the files' names and every setting agree. Finished runs stand;
# grzo-finetune itself checks that a resumed run's model and data are the ones it began with.
moved_only() {
    local f
    [ "${1#* device=}" = "${2#* device=}" ] || return 1
    for f in model tokenizer data; do
        [ "$(basename "$(proto_path $f "$1")")" = "$(basename "$(proto_path $f "$2")")" ] || return 1
    done
}
# An OUTDIR begun before the grids were extended (its protocol has no grid_extend): the same
# protocol but for that goes on with the extension. Its choices are made again where no final
# run has started (a choice at an edge then extends the grid); the others stand.
before_extend() {
    local recorded=$1 d task est
    case $recorded in *" grid_extend="*) return 1 ;; esac
    [ "$recorded" = "${protocol% grid_extend=*}" ] || moved_only "$recorded" "${protocol% grid_extend=*}" || return 1
    for d in "$OUT"/runs/chosen-*; do
        [ -f "$d" ] || continue
        IFS=- read -r _ task est <<< "$(basename "$d")"
        compgen -G "$OUT/runs/final-$task-$est-s*" > /dev/null || rm -f "$d"
    done
    say "note: $OUT began before the grids were extended at their edges; extending them now (up to $GRID_EXTEND lrs where the best lr sits at an edge; choices with final runs begun stand)"
}
if [ -s "$OUT/protocol.txt" ] && [ "$(head -1 "$OUT/protocol.txt")" != "$protocol" ]; then
    recorded=$(head -1 "$OUT/protocol.txt")
    if ! before_extend "$recorded"; then
        moved_only "$recorded" "$protocol" || die "$OUT holds another protocol: $recorded (use a new OUTDIR)"
    fi
    [ "${recorded%% device=*}" = "${protocol%% device=*}" ] ||
        say "note: the model and data are in other folders than when $OUT began ($(proto_path model "$recorded"), $(proto_path data "$recorded")); the same files' names and settings: going on there"
    printf '%s\n# settings: %s\n' "$protocol" "$settings" > "$OUT/protocol.txt.tmp" && mv "$OUT/protocol.txt.tmp" "$OUT/protocol.txt" ||
        die "cannot rewrite $OUT/protocol.txt"
fi
# The protocol is written once a run has shown that grzo-finetune takes these options (it
# finished, or its budget stopped it after it logged): a call whose every run is refused
# (an option grzo-finetune rejects) leaves the OUTDIR free for a corrected call.
keep_protocol() {
    [ -s "$OUT/protocol.txt" ] && return 0
    printf '%s\n# settings: %s\n' "$protocol" "$settings" > "$OUT/protocol.txt.tmp.$BASHPID" &&
        mv "$OUT/protocol.txt.tmp.$BASHPID" "$OUT/protocol.txt"
}

# ---- the runs ---------------------------------------------------------------------------------------
model_args=(--model "$MODEL"); [ -z "$TOKENIZER" ] || model_args+=(--tokenizer "$TOKENIZER")
left=0
# the runs this call left for a later one or saw fail, a line each ("left NAME", "failed NAME"):
# a file, because with --jobs the runs are subshells
OUTCOMES="$OUT/runs/.outcomes.$$"
: > "$OUTCOMES" || die "cannot write in $OUT/runs"
trap 'rm -f "$OUTCOMES"' EXIT
outcome() { echo "$1 $2" >> "$OUTCOMES"; }
# each grzo-finetune's threads: --threads, or with --threads 0 and --jobs N the cores shared out
RUN_THREADS=$THREADS
[ "$THREADS" -ne 0 ] || [ "$JOBS" -eq 1 ] || RUN_THREADS=$(( $(nproc) / JOBS > 0 ? $(nproc) / JOBS : 1 ))
# spawn CMD ARGS...: with --jobs 1 CMD runs here and now; with --jobs N in the background once
# fewer than N are running (a phase ends with wait)
spawn() {
    if [ "$JOBS" -eq 1 ]; then "$@"; return; fi
    while [ "$(jobs -pr | wc -l)" -ge "$JOBS" ]; do wait -n; done
    "$@" &
}
# --fit: 0 when the new run NAME ($1) of STEPS ($2) steps fits in SECS ($3) seconds, or when
# nothing measured says; else 1, with the estimate in need and what it rests on in need_how
fits() {
    local e
    need=0 need_how=""
    [ "$FIT" -eq 1 ] || return 0
    case $1 in grid-*|final-*) ;; *) return 0 ;; esac
    e=$(estimate "$1" "$2")
    [ -n "$e" ] || return 0
    need=${e%% *} need_how=${e#* }
    [ "$need" -le "$3" ]
}
# run NAME STEPS ARGS...: finished runs are skipped, stopped ones resumed, the rest started;
# each gets what is left of the budget. runs/NAME.jobs gets a line with --jobs for each call
# that runs it (its seconds are a shared device's when one of them is over 1).
run() {
    local name=$1 steps=$2 d="$OUT/runs/$1" secs st need need_how
    shift 2
    [ -s "$d/results.json" ] && return 0
    secs=$(( START + BUDGET - $(date +%s) ))
    if [ "$secs" -lt 10 ]; then outcome left "$name"; return 0; fi   # too little to load a model and write a checkpoint
    if [ -s "$d/checkpoint.grzo" ] && [ -s "$d/run.json" ]; then
        say "  $name: resuming at step $(steps_logged "$d/log.jsonl") (at most $secs s)"
        echo "$JOBS" >> "$d.jobs"
        # the diagnostics are not part of a run's identity (run.json): a resume asks for them again
        timeout -s INT -k 30 "$secs" "$FT" --out "$d" --resume --steps "$steps" --threads "$RUN_THREADS" "${diag[@]}" >> "$d.out" 2>&1
    elif ! fits "$name" "$steps" "$secs"; then
        outcome left "$name"; say "  $name: not started (--fit: ~$need s, $need_how; $secs s left)"; return 0
    else
        rm -rf "$d"
        say "  $name (at most $secs s)"
        echo "$JOBS" > "$d.jobs"
        timeout -s INT -k 30 "$secs" "$FT" "${model_args[@]}" --steps "$steps" --device "$DEVICE" --dtype "$DTYPE" --batch "$BATCH" \
            --sigma 1e-3 --n-train "$N_TRAIN" --n-dev "$N_DEV" --threads "$RUN_THREADS" "$@" --out "$d" > "$d.out" 2>&1
    fi
    st=$?
    # the zero-shot and grid runs' weights are not wanted (a SmolLM2 checkpoint is ~270 MB in bf16)
    [ -s "$d/results.json" ] && [ "${name#final-}" = "$name" ] && rm -f "$d/checkpoint.grzo"
    if [ -s "$d/results.json" ] || [ -s "$d/log.jsonl" ]; then keep_protocol; fi
    if [ -s "$d/results.json" ]; then
        case $name in
            grid-*) say "    $name done: dev acc $(acc "$d/results.json" dev_acc), $(field "$d/results.json" seconds) s" ;;
            *) say "    $name done: dev acc $(acc "$d/results.json" dev_acc), test acc $(acc "$d/results.json" test_acc), $(field "$d/results.json" seconds) s" ;;
        esac
    elif [ "$st" -eq 124 ] || [ "$st" -eq 130 ]; then
        outcome left "$name"; say "    $name: stopped by the budget at step $(steps_logged "$d/log.jsonl") (a later call resumes it)"
    else
        outcome failed "$name"; say "    $name FAILED (exit $st): $(tail -1 "$d.out")"
    fi
}
# a task's grzo-finetune arguments into the array targs (paths may hold spaces)
task_args() { targs=(--task "$1" --data "$DATA/$(task_folder "$1")"); }
# the chosen lr of (task, est) once its grid is complete: best dev accuracy, then lowest late loss
choose() {
    local task=$1 est=$2 best
    [ -s "$OUT/runs/chosen-$task-$est" ] && return 0
    best=$(best_of "$task" "$est") || return 1
    echo "${best%% *}" > "$OUT/runs/chosen-$task-$est"
    say "  chosen for $task, $est: lr $(cat "$OUT/runs/chosen-$task-$est")"
}
# The grid of (task, est) run, then extended beyond the edge where its best lr sits, one lr at
# a time (each added to runs/extended-TASK-EST before it runs, so that a later call knows it),
# up to GRID_EXTEND lrs; returns 1 while a run is unfinished (the budget ended)
run_grid() {
    local task=$1 est=$2 lr best next
    task_args "$task"
    for lr in $(lrs_of "$task" "$est"); do
        run "grid-$task-$est-$lr" "$GRID_STEPS" "${targs[@]}" --n-test 2 --estimator "$est" --lr "$lr" --eval-every 0 --seed 1
    done
    [ -s "$OUT/runs/chosen-$task-$est" ] && return 0
    while best=$(best_of "$task" "$est"); do
        [ "$(cat "$OUT/runs/extended-$task-$est" 2> /dev/null | wc -l)" -lt "$GRID_EXTEND" ] || break
        next=$(lrs_of "$task" "$est" | beyond_edge "${best%% *}")
        [ -n "$next" ] || break
        lrs_of "$task" "$est" | grep -qxF "$next" && break   # rounding met an lr already tried
        say "  $task, $est: the best lr ${best%% *} is at the grid's edge; trying $next"
        echo "$next" >> "$OUT/runs/extended-$task-$est"
        run "grid-$task-$est-$next" "$GRID_STEPS" "${targs[@]}" --n-test 2 --estimator "$est" --lr "$next" --eval-every 0 --seed 1
    done
    choose "$task" "$est"
}

say "finetune.sh: $(basename "$MODEL") on $TASKS, $ESTIMATORS, $DEVICE/$DTYPE; budget $BUDGET s; output in $OUT"
say "$(plan_line)"
diag=()   # the --diagnose options of the run in hand (final GRZO and MeZO runs only)
# a GPU in an exclusive compute mode takes one process: the runs then go one at a time
if [ "$JOBS" -gt 1 ] && [ "$DEVICE" = cuda ] && mode=$(nvidia-smi --query-gpu=compute_mode --format=csv,noheader 2> /dev/null | head -1) &&
    [ -n "$mode" ] && [ "$mode" != Default ]; then
    say "note: the GPU's compute mode is $mode (one process at a time): --jobs $JOBS runs one at a time"
    JOBS=1 RUN_THREADS=$THREADS
fi
[ "$JOBS" -eq 1 ] || say "$JOBS runs at a time, $RUN_THREADS threads each (a grid of a task and estimator is one)"
say "1/3 zero-shot"
for task in ${TASKS//,/ }; do
    task_args "$task"
    spawn run "zs-$task" 0 "${targs[@]}" --n-test "$N_TEST" --eval-every 0
done
wait
say "2/3 learning-rate grid ($GRID_STEPS steps each; the test set is not scored here)"
for task in ${TASKS//,/ }; do
    for est in ${ESTIMATORS//,/ }; do
        spawn run_grid "$task" "$est" || true
    done
done
wait
say "3/3 final runs ($STEPS steps, seeds $SEEDS)"
for seed in ${SEEDS//,/ }; do
    for task in ${TASKS//,/ }; do
        for est in ${ESTIMATORS//,/ }; do
            if [ ! -s "$OUT/runs/chosen-$task-$est" ]; then left=$((left + 1)); continue; fi
            diag=(); [ "$est" = fzoo ] || diag=(--diagnose --diagnose-every "$DIAG_EVERY" --diagnose-probes "$DIAG_PROBES")
            task_args "$task"
            spawn run "final-$task-$est-s$seed" "$STEPS" "${targs[@]}" --n-test "$N_TEST" --estimator "$est" \
                --lr "$(cat "$OUT/runs/chosen-$task-$est")" --eval-every "$EVAL_EVERY" --seed "$seed" "${diag[@]}"
        done
    done
done
wait
left=$((left + $(grep -c '^left ' "$OUTCOMES")))
failed=$(grep -c '^failed ' "$OUTCOMES")
echo "$left" > "$OUT/left.txt"
write_report
say "wrote $OUT/finetune.md; $left runs left for a later call, $failed failed"
[ "$failed" -eq 0 ] || exit 1
[ "$left" -eq 0 ] || exit 3
exit 0
