#!/usr/bin/env bash
# grzo-finetune's command line, folders and files (issue 13), one case per argument:
#   options    bad numeric values and an unknown task: exit 2, one line on stderr naming the
#              option, no files; --n-dev 0 runs; --max-len takes effect, and an answer as long as it keeps BOS
#   launcher   MPI is initialized only under an MPI launcher (or GRZO_MPI=1; a refused
#              option then still one line); a build without MPI refuses a launcher's
#              environment; a bad GRZO_MPI is refused
#   injection  --out/--log with $(...), backquotes, quotes, spaces and a newline run no
#              command, and the run (with its loss plot when gnuplot is installed) works
#   resume     --resume refuses options that contradict the run (one line naming each and
#              the recorded value) and changes nothing; settings not given come from
#              run.json; results.json reports what ran; a checkpoint of another run is
#              refused; a new run refuses a folder with an earlier run unless --overwrite;
#              a run.json without a setting is refused (the variants' may be missing)
#   saves      --save-every: kill -9 loses at most N steps and --resume continues from the
#              last periodic checkpoint, reproducing the uninterrupted log; a save that
#              fails (periodic or final) fails the run; a new run that fails after its
#              checkpoint keeps it
#   paths      long paths are not truncated; a directory given as --log is refused and
#              kept; an unreadable checkpoint says why; a bad model or data leaves no files
#   variants   --sparse-density, --lowrank-rank/--lowrank-every and --quant: bad values and
#              refused combinations give one line and no files; each variant trains, is
#              recorded in run.json and resumes; a resume with another variant is refused
#   foreign    --resume takes only the checkpoint the run saved last (run.json records its step
#              and header checksum): another run's, or another state of the same settings, is
#              refused; a moved copy and a save cut short by a crash are taken; a run recorded
#              before the record is held to its log
#   inputs     a model or tokenizer file changed under its recorded path is refused on resume
#              (given again or not); a run resumes from another folder (absolute paths)
#   hf_folder  a Hugging Face folder as --model has an identity of its files, both ends of
#              each (needs grzo-export)
#   leftovers  missing --out/--log/--checkpoint folders and a newline in --data are refused before
#              anything is written; a new run that fails before its first checkpoint leaves
#              nothing; --overwrite that cannot run removes nothing
#   logs       a log write error stops the run (one line, exit 1); a last line cut short,
#              and lines past the checkpoint, are dropped on resume; a log gone is refused
#   interrupt  Ctrl-C stops the zero-shot evaluation (nothing kept, exit 130) and the final
#              one (checkpoint kept, exit 130; --resume evaluates)
#   collisions --log/--checkpoint/--export on another of the run's files (or each other) are
#              refused; --overwrite removes the earlier run's files and no other
#   durability indices.txt, run.json and the trimmed log are fsynced before their rename
#              (strace); a huge --steps shows an ETA, not an int overflow (script)
# usage: test_finetune_cli.sh CASE GRZO_FINETUNE DATA_DIR WORK_DIR [GRZO_EXPORT (hf_folder)]
set -u
case_=$1 bin=$(realpath "$2") data=$(realpath "$3") work=$4/$1 export_bin=${5:+$(realpath "$5")}
# the Hugging Face folders' tokenizer.json (case_hf_folder)
toy_tokenizer=$(cd "$(dirname "$0")/../llm" && pwd)/write_toy_tokenizer.py
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
# wait_for FILE: until it exists, at most 30 s
wait_for() {
    local _
    for _ in $(seq 1 600); do [ -e "$1" ] && return 0; sleep 0.05; done
    return 1
}

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
    run 2 "${common[@]}" --attention flash --out o; one_line "--attention flash"
    grep -q -- "--attention: expected auto, fused or gemm" err.txt || fail "--attention flash: $(cat err.txt)"
    run 2 "${common[@]}" --attention fused --out o; one_line "--attention fused on the CPU"
    grep -q -- "--attention fused needs --device cuda" err.txt || fail "--attention fused on the CPU: $(cat err.txt)"
    run 2 --model "$data/stories260K.bin" --tokenizer "$data/tok512.bin" --task nosuch --data "$data/tasks/SST-2" --out o
    one_line "--task nosuch"
    grep -q -- "--task: unknown task 'nosuch'" err.txt || fail "--task nosuch: $(cat err.txt)"
    # a path that is not UTF-8 cannot be recorded in run.json (JSON text)
    mkdir u8 && cp "$data/stories260K.bin" u8/$'mod\xe9l.bin'
    run 2 "${common[@]}" --model u8/$'mod\xe9l.bin' --out o; one_line "a model path that is not UTF-8"
    grep -q -- "--model: the path is not valid UTF-8" err.txt || fail "a path that is not UTF-8: $(cat err.txt)"
    rm -r u8
    [ -z "$(ls -A | grep -v -x -e err.txt -e out.txt)" ] || fail "bad command lines left files: $(ls -A | tr '\n' ' ')"
    # a bound itself is taken: no dev split (--n-dev 0), evaluated every step all the same
    run 0 "${common[@]}" --n-dev 0 --steps 2 --eval-every 1 --out z
    grep -q '"n_dev":0' z/run.json && [ "$(wc -l < z/log.jsonl)" -eq 2 ] || fail "--n-dev 0: $(tail -2 err.txt)"
    rm -r z
    # --max-len below the model's context cuts the sequences: another loss than the full length's
    run 0 "${common[@]}" --steps 1 --out ml0
    run 0 "${common[@]}" --steps 1 --max-len 12 --out ml12
    grep -q '"max_len":12' ml12/run.json && ! cmp -s <(strip ml0/log.jsonl) <(strip ml12/log.jsonl) ||
        fail "--max-len 12 trained as the full length"
    rm -r ml0 ml12
    # an answer at least as long as --max-len keeps one context token (BOS) and scores the
    # rest: SQuAD's training answers cut at 2..8 tokens, some exactly as long as the cut (a
    # clamp that let the continuation take every position passed every other test)
    for m in 2 3 4 5 6 7 8; do
        run 0 --model "$data/stories260K.bin" --tokenizer "$data/tok512.bin" --task squad --data "$data/tasks/SQuAD" \
            --steps 1 --max-len "$m" --n-train 16 --n-dev 1 --n-test 1 --batch 16 --seed 1 --threads 1 --out mlq
        rm -r mlq
    done
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
        # one rank that fails ends as a process alone does (MPI_Abort is for several ranks: it
        # would add Open MPI's banner and, started alone, its helper daemon's words)
        TMPDIR=$work/tmp-forced GRZO_MPI=1 run 2 "${common[@]}" --batch 0 --out refused; one_line "GRZO_MPI=1 --batch 0"
        echo "ok: started alone, MPI is not initialized (GRZO_MPI=1 initializes it; same checkpoint; a failure is one line)"
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
        ! grep -q "^note: " err.txt || fail "a note although the plot was drawn: $(grep '^note: ' err.txt)"
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
    grep -qF "'r' holds an earlier run (r/run.json, r/checkpoint.grzo, r/log.jsonl, r/indices.txt, r/results.json" err.txt ||
        fail "the refusal does not name the earlier run's files: $(cat err.txt)"
    run 0 "${common[@]}" --steps 2 --out r --overwrite
    [ "$(wc -l < r/log.jsonl)" -eq 2 ] && grep -q '"steps":2' r/results.json || fail "--overwrite did not start over"
    # a run.json without a setting it has always recorded is refused; one recorded before the
    # variants existed (no "sparse_density") resumes as the dense run it was
    cp -r r r-nolr && sed -i '/^ "lr":/d' r-nolr/run.json
    run 2 --out r-nolr --resume --steps 3; one_line "run.json without lr"
    grep -qF 'r-nolr/run.json: no "lr"' err.txt || fail "run.json without lr: $(cat err.txt)"
    cp -r r r-old && sed -i '/^ "sparse_density":/d' r-old/run.json
    run 0 --out r-old --resume --steps 3
    [ "$(wc -l < r-old/log.jsonl)" -eq 3 ] || fail "a run.json from before the variants did not resume"
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
    # a save that fails fails the run: periodic, and the final one (the checkpoint's temporary
    # is a folder, so the save fails where the folder took the run's probe)
    mkdir -p cks1 cks2/ck.grzo.tmp
    run 0 "${common[@]}" --steps 2 --out s1 --checkpoint cks1/ck.grzo
    mkdir cks1/ck.grzo.tmp
    run 1 --out s1 --resume --steps 6 --save-every 1
    grep -q "could not write" err.txt || fail "periodic save failure: $(cat err.txt)"
    [ "$(wc -l < s1/log.jsonl)" -eq 3 ] || fail "the run went on after a failed save"
    run 1 "${common[@]}" --steps 2 --out s2 --checkpoint cks2/ck.grzo
    [ ! -e s2/results.json ] || fail "results.json written although the final save failed"
    # a new run that fails after its checkpoint (results.json cannot be written: its temporary
    # is a folder) keeps what it saved, and --resume finishes it
    mkdir -p s3/results.json.tmp
    run 1 "${common[@]}" --steps 2 --out s3
    tail -1 err.txt | grep -q "cannot create 's3/results.json.tmp'" || fail "results.json failure: $(tail -2 err.txt)"
    [ -f s3/checkpoint.grzo ] && [ -f s3/run.json ] && [ "$(wc -l < s3/log.jsonl)" -eq 2 ] ||
        fail "a run that failed after its checkpoint removed its files: $(ls s3 | tr '\n' ' ')"
    rmdir s3/results.json.tmp
    run 0 --out s3 --resume --steps 2
    [ -f s3/results.json ] || fail "the resume did not write results.json"
    # (and an evaluation, --steps 0, whose checkpoint is of step 0)
    mkdir -p s4/results.json.tmp
    run 1 "${common[@]}" --steps 0 --out s4
    [ -f s4/checkpoint.grzo ] && [ -f s4/run.json ] || fail "an evaluation that failed after its checkpoint removed it"
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
    # a model file name longer than the plot title's buffer (128 bytes) is cut, not overrun
    name=m$(printf 'x%.0s' $(seq 1 200)).bin
    cp "${common[1]}" "$name"
    run 0 --model "$name" "${common[@]:2}" --steps 2 --out p0
    [ -f p0/results.json ] || fail "the run of a model with a long name: $(tail -2 err.txt)"
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
    # and the Gaussian run's checkpoint in the Rademacher run's folder (run.json agrees with the command)
    cp r8/checkpoint.grzo r8.ck; cp g/checkpoint.grzo r8/checkpoint.grzo
    run 1 --out r8 --resume --steps 3
    grep -q -- "belongs to another run than r8/run.json: --noise rademacher (the checkpoint has gaussian)" err.txt ||
        fail "a Gaussian checkpoint in a Rademacher run: $(cat err.txt)"
    cp r8.ck r8/checkpoint.grzo
    echo "ok: variant options checked, refused combinations leave nothing, each variant trains and resumes"
}

# the audit's runs: A (SST-2, batch 4, 2 steps) and B (RTE, batch 2, 3 steps), and runs of A's
# settings at other budgets: a checkpoint that is not the one the run saved is refused
case_foreign() {
    run 0 "${common[@]}" --steps 2 --out A
    run 0 "${common[@]}" --task rte --data "$data/tasks/RTE" --batch 2 --steps 3 --out B
    cp A/log.jsonl A.log; cp A/run.json A.run; cp B/checkpoint.grzo B.ck
    run 1 --out A --resume --steps 5 --checkpoint B/checkpoint.grzo
    tail -1 err.txt | grep -q "^grzo-finetune: --resume: the checkpoint .*B/checkpoint.grzo (step 3) is not the one this run saved last (step 2)" ||
        fail "another run's --checkpoint: $(tail -2 err.txt)"
    cmp -s A.log A/log.jsonl && cmp -s A.run A/run.json && cmp -s B.ck B/checkpoint.grzo || fail "a refused resume changed files"
    # the same settings, another budget: in the run's own checkpoint file, still another state
    run 0 "${common[@]}" --steps 3 --out C
    cp A/checkpoint.grzo A.ck; cp C/checkpoint.grzo A/checkpoint.grzo
    run 1 --out A --resume --steps 5
    tail -1 err.txt | grep -q "is not the one this run saved last" || fail "a checkpoint of the same settings: $(tail -2 err.txt)"
    # the run's checkpoint, moved (a copy elsewhere): taken, and the run goes on as C did
    mkdir moved; cp A.ck moved/ck.grzo; rm A/checkpoint.grzo
    run 0 --out A --resume --steps 3 --checkpoint moved/ck.grzo
    diff <(strip C/log.jsonl) <(strip A/log.jsonl) > d || fail "resumed from the moved checkpoint: $(head -4 d)"
    # and the run's log, moved: taken with --log, and continued there
    mv A/log.jsonl moved/log.jsonl
    run 0 --out A --resume --steps 4 --checkpoint moved/ck.grzo --log moved/log.jsonl
    [ "$(wc -l < moved/log.jsonl)" -eq 4 ] && [ ! -e A/log.jsonl ] || fail "the moved log was not continued: $(tail -2 err.txt)"
    # a crash after a save's rename, before run.json recorded it: run.json says which step was being saved
    run 0 "${common[@]}" --steps 2 --out D
    cp C/checkpoint.grzo D/checkpoint.grzo; cp C/log.jsonl D/log.jsonl
    sed -i 's/"checkpoint_saving":null/"checkpoint_saving":3/' D/run.json
    run 0 --out D --resume --steps 4
    grep -q "^resumed at step 3" err.txt || fail "the save cut short was not resumed: $(tail -2 err.txt)"
    # a run recorded before the record (no "checkpoint_step"): at least the log bounds the checkpoint's step
    run 0 "${common[@]}" --steps 2 --out F
    sed -i -z 's/,\n "checkpoint_step":[^}]*}/}/' F/run.json
    grep -q checkpoint_step F/run.json && fail "could not remove the record from run.json"
    cp F/checkpoint.grzo F.ck; cp C/checkpoint.grzo F/checkpoint.grzo
    run 1 --out F --resume --steps 5
    tail -1 err.txt | grep -q "is at step 3, but the log .* holds 2 steps" || fail "a checkpoint ahead of the log: $(tail -2 err.txt)"
    cp F.ck F/checkpoint.grzo
    run 0 --out F --resume --steps 3
    # such a run, resumed and stopped before its next save (a log that cannot grow past 4 KiB):
    # run.json now records the checkpoint it resumed from, so it resumes again
    run 0 "${common[@]}" --steps 2 --out G
    sed -i -z 's/,\n "checkpoint_step":[^}]*}/}/' G/run.json
    (ulimit -f 4; trap '' XFSZ; exec "$bin" --out G --resume --steps 300 > out.txt 2> err.txt) && fail "the log did not outgrow 4 KiB"
    grep -q '"checkpoint_step":2,' G/run.json || fail "the resumed run did not record its checkpoint: $(tail -1 G/run.json)"
    run 0 --out G --resume --steps 3
    echo "ok: a checkpoint of another run, or another state of this one, is refused; a moved one (and log) and a cut-short save are taken"
}

# the model and tokenizer files are checked on every resume, given again or not; relative paths
# are the ones of the folder where the run started
case_inputs() {
    cp "$data/stories260K.bin" m.bin; cp "$data/tok512.bin" t.bin; cp m.bin m.orig; cp t.bin t.orig
    local -a rest=("${common[@]:4}")   # common without --model and --tokenizer
    [ "${common[0]}" = --model ] && [ "${common[2]}" = --tokenizer ] || fail "common changed: fix rest"
    run 0 --model m.bin --tokenizer t.bin "${rest[@]}" --steps 2 --out o
    printf '\001' | dd of=m.bin bs=1 seek=5000 conv=notrunc status=none   # another model under the same name
    run 2 --out o --resume --steps 3; one_line "another model at the recorded path"
    grep -q "the model at .*/m.bin is another file than the run started with" err.txt || fail "changed model: $(cat err.txt)"
    cp m.orig m.bin
    printf '\001' | dd of=t.bin bs=1 seek=100 conv=notrunc status=none
    run 2 --out o --resume --steps 3; one_line "another tokenizer at the recorded path"
    grep -q "the tokenizer at .*/t.bin is another file" err.txt || fail "changed tokenizer: $(cat err.txt)"
    cp t.orig t.bin
    # a model that cannot be read is not "another file" (the user would look for a change
    # never made), and not a wrong command line (exit 2): exit 1 with the reason
    rm m.bin
    run 1 --out o --resume --steps 3; one_line "the recorded model gone"
    grep -q -- "--resume: --model .*/m.bin: cannot read it, to check that it is the file the run started with: No such file" err.txt ||
        fail "a model gone: $(cat err.txt)"
    cp m.orig m.bin
    mkdir elsewhere
    (cd elsewhere && run 0 --out ../o --resume --steps 3) || exit 1
    [ "$(wc -l < o/log.jsonl)" -eq 3 ] || fail "the resume from another folder did not continue the run"
    echo "ok: a changed model or tokenizer is refused when not given again; a run resumes from any folder"
}

# A Hugging Face folder as --model: its identity is its files' (grzo-export writes the
# safetensors folders; the tokenizer.json is a small byte-level BPE)
case_hf_folder() {
    local export=$export_bin
    [ -n "$export" ] || fail "hf_folder needs grzo-export as the fifth argument"
    command -v python3 > /dev/null || fail "python3 is needed to write the folder's tokenizer.json"
    run 0 "${common[@]}" --steps 0 --out base
    run 0 "${common[@]}" --steps 2 --lr 5e-2 --out tuned
    "$export" --model "$data/stories260K.bin" --checkpoint base/checkpoint.grzo --out hf --format safetensors > x.txt 2>&1 &&
        "$export" --model "$data/stories260K.bin" --checkpoint tuned/checkpoint.grzo --out hf-other --format safetensors > x.txt 2>&1 ||
        fail "grzo-export: $(cat x.txt)"
    python3 "$toy_tokenizer" hf hf-other || fail "cannot write tokenizer.json"
    run 0 --model hf "${common[@]:4}" --steps 2 --out o   # no --tokenizer: the folder has one
    grep -q '"model_id":"folder:' o/run.json || fail "the folder has no identity of its own: $(grep model_id o/run.json)"
    mv hf hf.orig; mv hf-other hf   # another model in a folder of the same name
    run 2 --out o --resume --steps 3; one_line "another folder at the recorded path"
    grep -q "the model at .*/hf is another file" err.txt || fail "another folder: $(cat err.txt)"
    run 2 --out o --resume --steps 3 --model hf; one_line "another folder given"
    mv hf hf-other; mv hf.orig hf
    # a file of the folder that cannot be read (here a link to nothing): exit 1, with why
    mv hf/tokenizer.json tokenizer.json.orig; ln -s /no/such/file hf/tokenizer.json
    run 1 --out o --resume --steps 3 --model hf; one_line "a folder with a file that cannot be read"
    grep -q -- "--resume: --model hf: cannot read it, .*: No such file" err.txt || fail "an unreadable folder: $(cat err.txt)"
    rm hf/tokenizer.json; mv tokenizer.json.orig hf/tokenizer.json
    run 0 --out o --resume --steps 3
    # a file over 2 MiB changed only in its last bytes: its identity reads its first and
    # last MiB (here tokenizer.json with 2.5 MiB of trailing spaces, one of them then a
    # newline: the same tokenizer, another file)
    cp -r hf hf-big
    python3 -c 'import sys; open(sys.argv[1], "a").write(" " * (5 << 19))' hf-big/tokenizer.json
    run 0 --model hf-big "${common[@]:4}" --steps 2 --out big
    printf '\n' | dd of=hf-big/tokenizer.json bs=1 seek=$(($(stat -c %s hf-big/tokenizer.json) - 10)) conv=notrunc status=none
    run 2 --out big --resume --steps 3; one_line "a folder's big file changed near its end"
    grep -q "the model at .*/hf-big is another file" err.txt || fail "a big file changed near its end: $(cat err.txt)"
    echo "ok: a Hugging Face folder is identified by its files"
}

# Failures of a new run leave nothing that blocks the same command, and are found before it trains
case_leftovers() {
    run 1 "${common[@]}" --steps 2 --out nonexistent/out
    tail -1 err.txt | grep -q "^grzo-finetune: cannot create directory 'nonexistent/out': No such file or directory$" ||
        fail "--out in a missing folder: $(tail -2 err.txt)"
    [ ! -e nonexistent ] || fail "a refused --out made a folder"
    run 1 "${common[@]}" --steps 2 --out l1 --log "$work/nonexistent/x/log.jsonl"
    tail -1 err.txt | grep -q "^grzo-finetune: --log .*cannot create a file in" || fail "--log in a missing folder: $(tail -2 err.txt)"
    run 1 "${common[@]}" --steps 2 --out l2 --checkpoint nodir/ck.grzo
    tail -1 err.txt | grep -q "^grzo-finetune: --checkpoint .*No such file" || fail "--checkpoint in a missing folder: $(tail -2 err.txt)"
    grep -q "zero-shot" out.txt && fail "the run evaluated before refusing the --checkpoint folder"
    ln -s "$data/tasks/SST-2" $'da\nta'
    run 2 "${common[@]}" --data $'da\nta' --out l3; one_line "--data with a newline"
    [ ! -e l1 ] && [ ! -e l2 ] && [ ! -e l3 ] || fail "a refused run left its output folder: $(ls -d l? | tr '\n' ' ')"
    # the final save fails (its temporary is a folder): with no checkpoint nothing is kept, and the
    # same command runs again
    mkdir -p cks/ck.grzo.tmp
    run 1 "${common[@]}" --steps 2 --out l4 --checkpoint cks/ck.grzo
    [ ! -e l4 ] && [ ! -e cks/ck.grzo ] || fail "the run that saved no checkpoint left files: $(ls l4 cks | tr '\n' ' ')"
    rmdir cks/ck.grzo.tmp
    run 0 "${common[@]}" --steps 2 --out l4 --checkpoint cks/ck.grzo
    # --overwrite that cannot write its log: refused before the earlier run's files go
    run 1 "${common[@]}" --steps 3 --out l4 --checkpoint cks/ck.grzo --log nowhere/log.jsonl --overwrite
    [ -f l4/run.json ] && [ -f l4/log.jsonl ] && [ -f cks/ck.grzo ] && [ -f l4/results.json ] || fail "--overwrite removed the earlier run"
    echo "ok: missing folders and a newline in --data are refused up front; a run without a checkpoint leaves nothing"
}

# The log: a write that fails stops the run; a last line cut short is dropped on resume
case_logs() {
    local rc
    # a file size limit (4 KiB; SIGXFSZ ignored, so the write fails with EFBIG) that the log
    # outgrows first: the run stops at once, with one line, and keeps nothing (no checkpoint yet)
    (ulimit -f 4; trap '' XFSZ; exec "$bin" "${common[@]}" --steps 300 --out lg > out.txt 2> err.txt)
    rc=$?
    [ "$rc" -eq 1 ] || fail "a log that cannot be written: exit $rc, want 1: $(tail -2 err.txt)"
    tail -1 err.txt | grep -q "^grzo-finetune: cannot write the log .*log.jsonl: File too large$" || fail "log write error: $(tail -2 err.txt)"
    [ ! -e lg ] || fail "the failed run left files: $(ls lg | tr '\n' ' ')"
    # a crash while step 3's line was written, after the checkpoint of step 3
    run 0 "${common[@]}" --steps 3 --out t
    printf '{"step":' >> t/log.jsonl
    run 0 --out t --resume --steps 5
    run 0 "${common[@]}" --steps 5 --out t5
    diff <(strip t5/log.jsonl) <(strip t/log.jsonl) > d || fail "the log with a cut line, resumed: $(head -4 d)"
    # a crash after steps 4 and 5 were logged, before their checkpoint: the resume drops them
    run 0 "${common[@]}" --steps 3 --out u
    cp t5/log.jsonl u/log.jsonl
    run 0 --out u --resume --steps 5
    grep -q "^resumed at step 3 " err.txt || fail "the resume did not start at the checkpoint: $(grep resumed err.txt)"
    diff <(strip t5/log.jsonl) <(strip u/log.jsonl) > d || fail "the log with steps past the checkpoint, resumed: $(head -4 d)"
    # the log gone: the checkpoint is ahead of it, and the run is not continued
    rm u/log.jsonl
    run 1 --out u --resume --steps 6
    tail -1 err.txt | grep -q "checkpoint u/checkpoint.grzo is at step 5, but the log u/log.jsonl holds 0 steps" ||
        fail "a resume without its log: $(tail -2 err.txt)"
    echo "ok: a log write error stops the run; a cut last line is dropped"
}

# Runs "$bin" "${args[@]}" EXTRA... in the background, sends it one Ctrl-C once FILE exists,
# and returns its exit status (out.txt, err.txt: its output).
interrupt_once() {
    local file=$1 pid
    shift
    "$bin" "${args[@]}" "$@" > out.txt 2> err.txt &
    pid=$!
    wait_for "$file" || { kill -9 "$pid"; fail "the run wrote no $file in 30 s"; }
    sleep 0.1
    kill -INT "$pid"
    wait "$pid"
}

# Ctrl-C during an evaluation (the test split is large: 600 examples, seconds of scoring)
case_interrupt() {
    local rc args
    mkdir big
    cp "$data/tasks/SST-2/train.tsv" big/
    { head -1 "$data/tasks/SST-2/dev.tsv"; for _ in $(seq 1 150); do tail -n +2 "$data/tasks/SST-2/dev.tsv"; done; } > big/dev.tsv
    args=("${common[@]}" --data "$work/big" --n-test 600 --steps 2)
    # during the zero-shot evaluation: there is nothing to resume yet, so nothing is kept
    interrupt_once z/indices.txt --out z
    rc=$?
    [ "$rc" -eq 130 ] || fail "Ctrl-C in the zero-shot evaluation: exit $rc, want 130: $(tail -2 err.txt)"
    tail -1 err.txt | grep -q "interrupted during the zero-shot evaluation" || fail "Ctrl-C in the zero-shot evaluation: $(tail -2 err.txt)"
    [ ! -e z ] || fail "Ctrl-C before training left files: $(ls z | tr '\n' ' ')"
    # during the final evaluation: it stops; the checkpoint is kept and --resume evaluates it
    interrupt_once f/checkpoint.grzo --out f
    rc=$?
    [ "$rc" -eq 130 ] || fail "Ctrl-C in the final evaluation: exit $rc, want 130: $(tail -2 out.txt)"
    grep -q "^interrupted during the final evaluation: the checkpoint of step 2 is in" out.txt || fail "no line says so: $(cat out.txt)"
    [ ! -e f/results.json ] || fail "results.json written by an interrupted evaluation"
    run 0 --out f --resume
    grep -q '"test_acc":' f/results.json || fail "the resume did not evaluate"
    echo "ok: Ctrl-C stops the zero-shot evaluation (nothing kept) and the final one (checkpoint kept)"
}

# --log and --checkpoint cannot name the run's other files or each other; --overwrite removes
# only the earlier run's files
case_collisions() {
    run 2 "${common[@]}" --steps 2 --out o --checkpoint o/results.json; one_line "--checkpoint o/results.json"
    grep -q -- "--checkpoint '.*/o/results.json' is the run's results.json" err.txt || fail "--checkpoint o/results.json: $(cat err.txt)"
    run 2 "${common[@]}" --steps 2 --out o2 --log o2/run.json; one_line "--log o2/run.json"
    run 2 "${common[@]}" --steps 2 --out o3 --log ./o3//./indices.txt; one_line "--log spelled otherwise"
    run 2 "${common[@]}" --steps 2 --out o4 --log same.x --checkpoint same.x; one_line "--log = --checkpoint"
    run 2 "${common[@]}" --steps 2 --out o4 --log l.x --checkpoint l.x.tmp; one_line "--checkpoint at the log's temporary"
    run 2 "${common[@]}" --steps 2 --out o4 --log o4/checkpoint.grzo.tmp; one_line "--log at the checkpoint's temporary"
    run 2 "${common[@]}" --steps 2 --out o4 --export o4/checkpoint.grzo; one_line "--export at the checkpoint"
    [ ! -e o ] && [ ! -e o2 ] && [ ! -e o3 ] && [ ! -e o4 ] || fail "a refused run left its output folder"
    # --overwrite and a --log that is not the earlier run's: refused, nothing removed
    echo precious > notes.txt
    run 0 "${common[@]}" --steps 2 --out w
    run 2 "${common[@]}" --steps 2 --out w --overwrite --log notes.txt; one_line "--overwrite --log notes.txt"
    [ "$(cat notes.txt)" = precious ] && [ -f w/run.json ] && [ -f w/checkpoint.grzo ] || fail "--overwrite removed another file"
    # the earlier run's own log elsewhere is replaced
    run 0 "${common[@]}" --steps 2 --out w2 --log w2.jsonl
    run 0 "${common[@]}" --steps 3 --out w2 --log w2.jsonl --overwrite
    [ "$(wc -l < w2.jsonl)" -eq 3 ] || fail "--overwrite did not replace the earlier run's own log"
    echo "ok: a --log/--checkpoint/--export on another run file is refused; --overwrite removes only the earlier run's files"
}

# The run's files reach the disk before their rename (strace, where it can trace), and the
# progress line's ETA of a huge --steps is a time, not an int's overflow (script: a terminal)
case_durability() {
    local tmp prev pid
    if command -v strace > /dev/null && strace -f -o /dev/null true 2> /dev/null; then
        # LeakSanitizer cannot run under ptrace: an ASan build's exit would report that, not the run
        local asan=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
        ASAN_OPTIONS=$asan strace -f -e trace=fsync,fdatasync,rename -o trace.txt "$bin" "${common[@]}" --steps 2 --out d \
            > out.txt 2> err.txt || fail "the traced run: $(tail -2 err.txt)"
        ASAN_OPTIONS=$asan strace -f -e trace=fsync,fdatasync,rename -o trace2.txt "$bin" --out d --resume --steps 3 \
            > out.txt 2> err.txt || fail "the traced resume: $(tail -2 err.txt)"
        for tmp in indices.txt.tmp run.json.tmp log.jsonl.tmp; do
            prev=$(cat trace.txt trace2.txt | grep -B1 "rename(\"[^\"]*$tmp\"" | head -1)
            [ -n "$prev" ] || fail "no rename of $tmp traced"
            echo "$prev" | grep -q "fsync\|fdatasync" || fail "$tmp is renamed without an fsync before: $prev"
        done
    else
        echo "note: strace cannot trace here: the fsyncs were not checked"
    fi
    if command -v script > /dev/null; then
        # B = 768 on one thread: about 6 s per step here, so 10^9 steps are 2.8 times 2^31 seconds away
        script -qfec "echo \$\$ > pid; exec $(printf '%q ' "$bin" "${common[@]}" --batch 768 --steps 1000000000 --out eta)" typescript \
            < /dev/null > /dev/null 2>&1 &
        for _ in $(seq 1 1800); do grep -q "ETA" typescript 2> /dev/null && break; sleep 0.05; done
        pid=$(cat pid)
        kill -9 "$pid"
        wait
        grep -q "ETA" typescript || fail "no progress line in 90 s: $(tail -c 300 typescript)"
        grep -a -o "ETA [^ ]*" typescript | head -1 | grep -q "^ETA \(--:--\|[0-9]*:[0-9][0-9]\)$" ||
            fail "the ETA is not a time: $(grep -a -o 'ETA [^ ]*' typescript | head -1)"
    else
        echo "note: no script(1): the progress line was not checked"
    fi
    echo "ok: files are fsynced before their rename; the ETA of a huge run is a time"
}

case "$case_" in
foreign) case_foreign ;;
inputs) case_inputs ;;
hf_folder) case_hf_folder ;;
leftovers) case_leftovers ;;
logs) case_logs ;;
interrupt) case_interrupt ;;
collisions) case_collisions ;;
durability) case_durability ;;
variants) case_variants ;;
options) case_options ;;
launcher) case_launcher ;;
injection) case_injection ;;
resume) case_resume ;;
saves) case_saves ;;
paths) case_paths ;;
*) echo "usage: $0 options|launcher|injection|resume|saves|paths|variants|foreign|inputs|leftovers|logs|interrupt|collisions|durability"\
        "GRZO_FINETUNE DATA_DIR WORK_DIR, or hf_folder ... WORK_DIR GRZO_EXPORT"; exit 1 ;;
esac
