#!/usr/bin/env bash
# grzo-finetune's command line, folders and files (issue 13), one case per argument:
#   options    bad numeric values: exit 2, one line on stderr naming the option, no files
#   launcher   MPI is initialized only under an MPI launcher (or GRZO_MPI=1); a build
#              without MPI refuses a launcher's environment; a bad GRZO_MPI is refused
#   injection  --out/--log with $(...), backquotes, quotes, spaces and a newline run no
#              command, and the run (with its loss plot when gnuplot is installed) works
#   resume     --resume refuses options that contradict the run (one line naming each and
#              the recorded value) and changes nothing; settings not given come from
#              run.json; results.json reports what ran; a checkpoint of another run is
#              refused; a new run refuses a folder with an earlier run unless --overwrite
#   saves      --save-every: kill -9 loses at most N steps and --resume continues from the
#              last periodic checkpoint, reproducing the uninterrupted log; a save that
#              fails (periodic or final) fails the run
#   paths      long paths are not truncated; a directory given as --log is refused and
#              kept; an unreadable checkpoint says why; a bad model or data leaves no files
#   variants   --sparse-density, --lowrank-rank/--lowrank-every and --quant: bad values and
#              refused combinations give one line and no files; each variant trains, is
#              recorded in run.json and resumes; a resume with another variant is refused
# usage: test_finetune_cli.sh CASE GRZO_FINETUNE DATA_DIR WORK_DIR
set -u
case_=$1 bin=$(realpath "$2") data=$(realpath "$3") work=$4/$1
rm -rf "$work" && mkdir -p "$work" && work=$(realpath "$work") || exit 1
cd "$work" || exit 1   # the runs' relative paths (and any stray file) land here
common=(--model "$data/stories260K.bin" --tokenizer "$data/tok512.bin" --task sst2 --data "$data/tasks/SST-2"
        --n-train 8 --n-dev 4 --n-test 4 --batch 4 --lr 1e-3 --sigma 1e-3 --seed 5 --threads 1)
fail() { echo "FAIL: $*"; exit 1; }
strip() { sed 's/,"elapsed":[0-9.]*//' "$1"; }
# run EXPECTED_RC ARGS...: runs grzo-finetune, stdout+stderr in out.txt, stderr in err.txt
run() {
    local want=$1 rc
    shift
    "$bin" "$@" > out.txt 2> err.txt
    rc=$?
    [ "$rc" -eq "$want" ] || fail "grzo-finetune $* exited $rc, want $want: $(tail -3 err.txt)"
}
one_line() { [ "$(wc -l < err.txt)" -eq 1 ] || fail "$1: want one line on stderr, got: $(cat err.txt)"; }

case_options() {
    local bad
    for bad in "--batch 2.5" "--steps 0.5" "--lr abc" "--seed -1" "--steps 99999999999" "--sigma inf" "--batch 0" \
               "--threads 12abc" "--n-train 1e3" "--fzoo-probes 99999" "--eval-every -2" "--save-every 1.5" \
               "--max-len 0x10" "--seed 18446744073709551616" "--lr nan" "--warmup 5x"; do
        set -- $bad
        run 2 "${common[@]}" "$1" "$2" --out o
        one_line "$bad"
        grep -q -- "$1" err.txt || fail "$bad: the message does not name $1: $(cat err.txt)"
        [ ! -e o ] || fail "$bad: created the output folder"
    done
    run 2 "${common[@]}" --estimator foo --out o; one_line "--estimator foo"
    run 2 "${common[@]}" --steps; one_line "--steps without a value"
    run 2 "${common[@]}" --bogus 1; one_line "--bogus"
    run 2 "${common[@]}" --device gpu --out o; one_line "--device gpu"
    run 2 "${common[@]}" --dtype bf16 --out o; one_line "--dtype bf16 on the CPU"
    grep -q "needs --device cuda" err.txt || fail "--dtype bf16 on the CPU: $(cat err.txt)"
    [ -z "$(ls -A | grep -v -x -e err.txt -e out.txt)" ] || fail "bad command lines left files: $(ls -A | tr '\n' ' ')"
    echo "ok: bad values refused with one line each, nothing written"
}

# GRZO_TEST_HAVE_MPI (meson): 1 when grzo-finetune was built with MPI
case_launcher() {
    local v
    GRZO_MPI=yes run 1 "${common[@]}" --steps 2 --out o; one_line "GRZO_MPI=yes"
    grep -q "GRZO_MPI" err.txt && [ ! -e o ] || fail "GRZO_MPI=yes: $(cat err.txt)"
    if [ "${GRZO_TEST_HAVE_MPI:-}" = 0 ]; then
        # a launcher's job of a build without MPI: each process would train alone into one folder
        for v in GRZO_MPI=1 OMPI_COMM_WORLD_SIZE=2 PMIX_RANK=1 PMI_RANK=1 PMI_SIZE=2; do
            env "$v" "$bin" "${common[@]}" --steps 2 --out o > out.txt 2> err.txt && fail "$v: a build without MPI ran"
            one_line "$v"
            grep -q "built without MPI" err.txt && [ ! -e o ] || fail "$v: $(cat err.txt)"
        done
        echo "ok: a build without MPI refuses a launcher's environment, nothing written"
    elif [ "${GRZO_TEST_HAVE_MPI:-}" = 1 ]; then
        # started alone, MPI stays uninitialized: Open MPI's singleton start (a helper daemon, 1.3 s
        # or more) leaves its session folder in TMPDIR, which GRZO_MPI=1 shows
        mkdir -p tmp-alone tmp-forced
        TMPDIR=$work/tmp-alone run 0 "${common[@]}" --steps 2 --out alone
        [ -z "$(ls -A tmp-alone)" ] || fail "a run started alone initialized MPI: $(ls -A tmp-alone)"
        TMPDIR=$work/tmp-forced GRZO_MPI=1 run 0 "${common[@]}" --steps 2 --out forced
        [ -n "$(ls -A tmp-forced)" ] || fail "GRZO_MPI=1 left no MPI session folder in TMPDIR: the check above proves nothing"
        cmp -s alone/checkpoint.grzo forced/checkpoint.grzo || fail "the run alone and the one-rank MPI run differ"
        echo "ok: started alone, MPI is not initialized (GRZO_MPI=1 initializes it; same checkpoint)"
    else
        fail "GRZO_TEST_HAVE_MPI is '${GRZO_TEST_HAVE_MPI:-}', want 0 or 1"
    fi
}

case_injection() {
    local out log
    out=$'o\'$(touch PWNED1)" `touch PWNED2` ;touch PWNED3; \'x\nnew line'
    log="$out/l\$(touch PWNED4)'.jsonl"
    run 0 "${common[@]}" --steps 3 --out "$out" --log "$log"
    [ -z "$(find . -name 'PWNED*')" ] || fail "a command in a path ran: $(find . -name 'PWNED*')"
    [ -f "$out/results.json" ] && [ "$(wc -l < "$log")" -eq 3 ] || fail "the run with odd paths did not write its files"
    # the resume finds the odd --log through run.json
    run 0 --out "$out" --resume --steps 4
    [ "$(wc -l < "$log")" -eq 4 ] && [ -z "$(find . -name 'PWNED*')" ] || fail "resume with odd paths: $(tail -2 err.txt)"
    if command -v gnuplot > /dev/null; then
        [ -s "$out/loss.png" ] || fail "no loss.png: $(cat err.txt)"
        [ ! -e "$out/loss.gp" ] && [ ! -e "$out/loss.png.tmp" ] || fail "the plot left its script or temporary file"
        echo "ok: no command ran, loss.png drawn"
    else
        echo "ok: no command ran (gnuplot not installed: the plot itself was not checked)"
    fi
}

case_resume() {
    run 0 "${common[@]}" --steps 3 --out r
    cp r/checkpoint.grzo ck.before; cp r/log.jsonl log.before; cp r/run.json run.before
    run 2 "${common[@]}" --steps 5 --out r --resume --lr 2e-3 --batch 8 --task rte --estimator mezo --seed 6 \
        --n-train 9 --sigma 1e-2 --fzoo-probes 4 --model "$data/tok512.bin"
    one_line "conflicting resume"
    for want in "--lr 2e-3 (the run has 0.001)" "--batch 8 (the run has 4)" "--task rte (the run has SST-2)" \
                "--estimator mezo (the run has grzo)" "--seed 6 (the run has 5)" "--n-train 9 (the run has 8)" \
                "--sigma 1e-2 (the run has 0.001)" "--fzoo-probes 4 (the run has 8)" "--model $data/tok512.bin"; do
        grep -qF -- "$want" err.txt || fail "the refusal does not say \"$want\": $(cat err.txt)"
    done
    cmp -s ck.before r/checkpoint.grzo && cmp -s log.before r/log.jsonl && cmp -s run.before r/run.json ||
        fail "a refused resume changed the run's files"
    # the settings come from run.json; only the new budget (and cadences) change
    run 0 --out r --resume --steps 5 --eval-every 2
    grep -q '"steps":5' r/results.json && grep -q '"lr":0.001' r/results.json && grep -q '"batch":4' r/results.json ||
        fail "results.json does not report what ran: $(cat r/results.json)"
    grep -q '"steps":5' r/run.json && grep -q '"eval_every":2' r/run.json || fail "run.json does not record the new budget"
    [ "$(wc -l < r/log.jsonl)" -eq 5 ] || fail "the resumed log has $(wc -l < r/log.jsonl) lines, want 5"
    # the same settings given explicitly (another spelling of the task) are accepted
    run 0 "${common[@]}" --task SST-2 --out r --resume --steps 6
    run 1 --out r --resume --steps 4
    grep -q "below the checkpoint's step 6" err.txt || fail "a budget below the checkpoint: $(cat err.txt)"
    # a checkpoint of another run is refused
    run 0 "${common[@]}" --lr 5e-4 --steps 2 --out other
    cp other/checkpoint.grzo r/checkpoint.grzo
    run 1 --out r --resume --steps 8
    grep -qF -- "--lr 0.001 (the checkpoint has 0.0005)" err.txt || fail "foreign checkpoint: $(cat err.txt)"
    # a new run in a folder with an earlier run: refused, unless --overwrite
    cp r/log.jsonl log.before
    run 2 "${common[@]}" --steps 2 --out r; one_line "new run over an old one"
    grep -q -- "--overwrite" err.txt && cmp -s log.before r/log.jsonl || fail "a new run mixed with an earlier one"
    run 0 "${common[@]}" --steps 2 --out r --overwrite
    [ "$(wc -l < r/log.jsonl)" -eq 2 ] && grep -q '"steps":2' r/results.json || fail "--overwrite did not start over"
    # --resume where there is no run
    run 2 --out nothing-here --resume; one_line "resume without a run"
    [ ! -e nothing-here ] || fail "a refused resume created its folder"
    echo "ok: resume refuses contradictions, takes recorded settings, reports what ran"
}

case_saves() {
    local pid done_steps ck_step total
    run 0 "${common[@]}" --steps 12 --out straight
    "$bin" "${common[@]}" --steps 100000 --save-every 2 --out k > k.out 2>&1 &
    pid=$!
    for _ in $(seq 1 600); do
        [ -f k/log.jsonl ] && [ "$(wc -l < k/log.jsonl)" -ge 5 ] && break
        sleep 0.05
    done
    kill -9 "$pid"
    wait "$pid" 2> /dev/null
    done_steps=$(wc -l < k/log.jsonl)
    [ "$done_steps" -ge 5 ] || fail "the run logged only $done_steps steps: $(tail -3 k.out)"
    [ -f k/checkpoint.grzo ] || fail "no periodic checkpoint after $done_steps steps"
    run 0 --out k --resume --steps 12
    ck_step=$(sed -n 's/^resumed at step \([0-9]*\).*/\1/p' err.txt)
    [ -n "$ck_step" ] && [ $((done_steps - ck_step)) -le 2 ] && [ $((ck_step % 2)) -eq 0 ] ||
        fail "resumed at step '$ck_step' after $done_steps logged steps with --save-every 2"
    diff <(strip straight/log.jsonl) <(strip k/log.jsonl) > d || fail "log after kill -9 + resume differs: $(head -4 d)"
    # a save that fails fails the run: periodic, and the final one
    run 1 "${common[@]}" --steps 4 --save-every 1 --out s1 --checkpoint "$work/no/such/dir/ck.grzo"
    grep -q "could not write" err.txt || fail "periodic save failure: $(cat err.txt)"
    [ "$(wc -l < s1/log.jsonl)" -eq 1 ] || fail "the run went on after a failed save"
    run 1 "${common[@]}" --steps 2 --out s2 --checkpoint "$work/no/such/dir/ck.grzo"
    [ ! -e s2/results.json ] || fail "results.json written although the final save failed"
    echo "ok: kill -9 after $done_steps steps, resumed from step $ck_step, log equals the straight run's; failed saves fail"
}

case_paths() {
    local long name
    # --out of ~1100 characters: the file names are not cut off
    long=$work/$(printf 'd%.0s' $(seq 1 200))/$(printf 'e%.0s' $(seq 1 200))/$(printf 'f%.0s' $(seq 1 200))
    long=$long/$(printf 'g%.0s' $(seq 1 200))/$(printf 'h%.0s' $(seq 1 200))
    mkdir -p "$long" || fail "cannot make the long folder"
    long=$long/$(printf 'o%.0s' $(seq 1 $((1100 - ${#long}))))
    run 0 "${common[@]}" --steps 2 --out "$long"
    for name in checkpoint.grzo log.jsonl indices.txt run.json results.json; do
        [ -f "$long/$name" ] || fail "no $name in a ${#long}-character --out: $(ls "$long" | tr '\n' ' ')"
    done
    [ "$(wc -l < "$long/log.jsonl")" -eq 2 ] || fail "the log in the long folder was overwritten"
    # a directory given as --log (or --checkpoint) is refused and kept
    mkdir -p logdir ckdir
    run 2 "${common[@]}" --steps 2 --out p1 --log logdir; one_line "--log directory"
    grep -q "is a directory" err.txt && [ -d logdir ] || fail "--log directory: $(cat err.txt)"
    run 2 "${common[@]}" --steps 2 --out p1 --checkpoint ckdir; one_line "--checkpoint directory"
    [ -d ckdir ] && [ ! -e p1 ] || fail "--checkpoint directory"
    # an unreadable checkpoint says why
    run 0 "${common[@]}" --steps 2 --out p2
    # (root reads any file: as root, the run drops its capabilities with setpriv)
    unprivileged=()
    [ "$(id -u)" -ne 0 ] || unprivileged=(setpriv --bounding-set=-all --inh-caps=-all)
    if [ "$(id -u)" -ne 0 ] || command -v setpriv > /dev/null; then
        chmod 000 p2/checkpoint.grzo
        "${unprivileged[@]}" "$bin" --out p2 --resume --steps 3 > out.txt 2> err.txt && fail "an unreadable checkpoint was accepted"
        one_line "unreadable checkpoint"
        grep -q "cannot read the checkpoint.*Permission denied" err.txt || fail "unreadable checkpoint: $(cat err.txt)"
        chmod 644 p2/checkpoint.grzo
    else
        echo "note: running as root without setpriv, so the unreadable-checkpoint check cannot be made"
    fi
    rm p2/checkpoint.grzo
    run 1 --out p2 --resume --steps 3; one_line "missing checkpoint"
    grep -q "no checkpoint at" err.txt || fail "missing checkpoint: $(cat err.txt)"
    # early failures leave nothing behind
    run 1 "${common[@]}" --model "$work/no-such-model.bin" --out e1; one_line "bad model"
    run 1 "${common[@]}" --data "$work/no-such-data" --out e2; one_line "bad data"
    run 1 "${common[@]}" --tokenizer "$data/stories260K.bin" --out e3
    # without a GPU (or a CUDA build) --device cuda fails before anything is written
    if [ "${GRZO_TEST_HAVE_GPU:-0}" != 1 ]; then
        run 1 "${common[@]}" --device cuda --out e4
        tail -1 err.txt | grep -q "^grzo-finetune: .*cuda" || fail "--device cuda without a GPU: $(cat err.txt)"
    fi
    [ ! -e e1 ] && [ ! -e e2 ] && [ ! -e e3 ] && [ ! -e e4 ] || fail "an early failure left its output folder"
    echo "ok: long paths kept whole, directories refused and kept, errors say why, early failures leave nothing"
}

case_variants() {
    local bad
    for bad in "--sparse-density 1.5" "--sparse-density -0.1" "--lowrank-rank -1" "--lowrank-rank 2.5" "--quant int3" "--noise normal"; do
        set -- $bad
        run 2 "${common[@]}" "$1" "$2" --out o
        one_line "$bad"
        grep -q -- "$1" err.txt || fail "$bad: the message does not name $1: $(cat err.txt)"
    done
    # refused by grzo_create after the data are read (stderr: the data's note, then one error line)
    run 1 "${common[@]}" --sparse-density 0.2 --lowrank-rank 2 --out o
    tail -1 err.txt | grep -q "^grzo-finetune: grzo_create: .*do not combine" || fail "sparse + low-rank: $(cat err.txt)"
    run 1 "${common[@]}" --estimator mezo-inplace --quant int8 --out o
    tail -1 err.txt | grep -q "^grzo-finetune: grzo_create: .*in-place MeZO" || fail "in-place MeZO + int8: $(cat err.txt)"
    run 1 "${common[@]}" --estimator fzoo --sparse-density 0.2 --out o
    tail -1 err.txt | grep -q "^grzo-finetune: grzo_create: .*FZOO" || fail "FZOO + sparse: $(cat err.txt)"
    [ ! -e o ] || fail "a refused variant left its output folder"
    run 0 "${common[@]}" --steps 2 --sparse-density 0.2 --out s
    run 0 "${common[@]}" --steps 2 --lowrank-rank 2 --lowrank-every 1 --estimator mezo --out l
    run 0 "${common[@]}" --steps 2 --quant int4 --out q
    grep -q '"sparse_density":0.2' s/run.json && grep -q '"lowrank_rank":2' l/run.json && grep -q '"quant":"int4"' q/run.json ||
        fail "run.json does not record the variants"
    run 0 --out q --resume --steps 3
    [ "$(wc -l < q/log.jsonl)" -eq 3 ] || fail "the int4 run did not resume"
    run 2 --out q --resume --steps 4 --quant int8; one_line "resume with another --quant"
    grep -q -- "--quant int8 (the run has int4)" err.txt || fail "resume with another --quant: $(cat err.txt)"
    # QuZO's setting: Gaussian base noise, so the perturbation's stochastic rounding acts
    run 0 "${common[@]}" --steps 2 --quant int8 --noise gaussian --out g
    grep -q '"noise":"gaussian"' g/run.json && grep -q '"noise":"gaussian"' g/results.json || fail "run.json/results.json do not record --noise"
    run 0 "${common[@]}" --steps 2 --quant int8 --out r8
    cmp -s g/checkpoint.grzo r8/checkpoint.grzo && fail "--noise gaussian trained the same weights as Rademacher"
    run 2 --out g --resume --steps 3 --noise rademacher; one_line "resume with another --noise"
    grep -q -- "--noise rademacher (the run has gaussian)" err.txt || fail "resume with another --noise: $(cat err.txt)"
    echo "ok: variant options checked, refused combinations leave nothing, each variant trains and resumes"
}

case "$case_" in
variants) case_variants ;;
options) case_options ;;
launcher) case_launcher ;;
injection) case_injection ;;
resume) case_resume ;;
saves) case_saves ;;
paths) case_paths ;;
*) echo "usage: $0 options|launcher|injection|resume|saves|paths|variants GRZO_FINETUNE DATA_DIR WORK_DIR"; exit 1 ;;
esac
