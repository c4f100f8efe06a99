#!/usr/bin/env bash
# bench/gpu/lease.sh's own logic, against stand-ins for run.sh and finetune.sh (a GPU's calls
# cannot run here): its usage errors, Call A copying the GGUF's half and handing run.sh its
# budget and folders, Call B joining the halves (a corrupt half refused, nothing kept), the peer
# stage and finetune.sh handed their budgets, options and paths, the tars written (without the
# checkpoints), finetune.sh's "runs left" passed on, a machine gone cold said as such, and
# --cpu-bench's cores (two of their own for the cpu stage, the rest for finetune.sh), its wait
# and tar, and its refusal where too few cores are; all under paths with spaces.
# usage: test_lease.sh WORK_DIR
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work="$1/with space"
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$1" && mkdir -p "$work/out" "$work/gpu/a" "$work/gpu/b" "$work/gpu/data/SST-2" "$work/gpu/data/RTE" "$work/seed" || exit 1
export GRZO_LEASE_DIR="$work/state" GRZO_LEASE_GPU_DIR="$work/gpu" GRZO_LEASE_FT_SEED="$work/seed"
export GRZO_RUN_SH="$work/run.sh" GRZO_FINETUNE_SH="$work/finetune.sh"
lease() { bash "$here/lease.sh" "$@"; }

# the "GGUF" in two halves and its sha256; the committed fine-tuning folder
head -c 100000 /dev/urandom > "$work/model.gguf" && split -n 2 -d "$work/model.gguf" "$work/part." || exit 1
mv "$work/part.00" "$work/gpu/a/" && mv "$work/part.01" "$work/gpu/b/" || exit 1
sha256sum "$work/model.gguf" | cut -d' ' -f1 > "$work/gpu/b/sha256"
echo "seed report" > "$work/seed/finetune.md"
# stand-ins: each records its arguments (a line each) and environment, and writes what the real
# one would leave in its folder
cat > "$work/run.sh" << 'EOF'
printf '%s\n' "$@" > "$GRZO_LEASE_DIR/run.args"
echo "GRZO_GPU_BUILD=${GRZO_GPU_BUILD:-} GRZO_SST2_DIR=${GRZO_SST2_DIR:-}" > "$GRZO_LEASE_DIR/run.env"
for a; do out=$a; case $a in --*|[0-9]*|tests,bench|peer|build|cpu) ;; *) break ;; esac; done
# the cpu stage runs beside the others: its own record, and time for the lease to wait for it
if [ "${4:-}" = cpu ]; then printf '%s\n' "$@" > "$GRZO_LEASE_DIR/run.args.cpu"; sleep 2; echo "done" > "$GRZO_LEASE_DIR/cpu.done"; fi
mkdir -p "$out" && echo "report" > "$out/report.md"
exit "${RUN_EXIT:-0}"
EOF
cat > "$work/finetune.sh" << 'EOF'
printf '%s\n' "$@" > "$GRZO_LEASE_DIR/ft.args"
echo "GRZO_FINETUNE=${GRZO_FINETUNE:-}" > "$GRZO_LEASE_DIR/ft.env"
out=${!#}
mkdir -p "$out/runs/final-x" && echo "weights" > "$out/runs/final-x/checkpoint.grzo" && echo "log" > "$out/runs/final-x/log.jsonl"
exit 3
EOF
S=$work/state

# usage errors: exit 2, nothing made
lease > "$work/e.out" 2>&1; [ $? -eq 2 ] && grep -q "usage:" "$work/e.out" || fail "no arguments: $(cat "$work/e.out")"
while read -r args; do
    eval "lease $args" > "$work/e.out" 2>&1
    [ $? -eq 2 ] || fail "'$args' must be a usage error: $(cat "$work/e.out")"
done << EOF
check 30 "$work/out"
check 0600 "$work/out"
check 300 "$work/nowhere"
check 300 "$work/out" --peer
finetune 300 "$work/out" --jobs 0
finetune 300 "$work/out" --jobs x
finetune 300 "$work/out" --what
again 300 "$work/out"
EOF
[ ! -e "$S" ] || fail "a refused call made the state folder"

# Call A: without its half, a clear error; with it, run.sh gets the budget less 40 s, the stages,
# its folders, and the tar is written
mv "$work/gpu/a/part.00" "$work/part.00"
lease check 300 "$work/out" > "$work/a0.out" 2>&1
[ $? -eq 1 ] && grep -q "no .*part.00: carry .gpu/a" "$work/a0.out" || fail "Call A without its half: $(cat "$work/a0.out")"
mv "$work/part.00" "$work/gpu/a/part.00"
lease check 300 "$work/out" > "$work/a.out" 2>&1 || fail "Call A: $(cat "$work/a.out")"
cmp -s "$S/smol/part.00" "$work/gpu/a/part.00" || fail "Call A did not copy the GGUF's half"
[ "$(sed -n 1p "$S/run.args")" = --budget ] && b=$(sed -n 2p "$S/run.args") && [ "$b" -ge 255 ] && [ "$b" -le 260 ] ||
    fail "Call A's run.sh budget (want 300 - 40 s): $(tr '\n' ' ' < "$S/run.args")"
[ "$(sed -n 3,5p "$S/run.args" | tr '\n' '|')" = "--stages|tests,bench|$S/oa|" ] || fail "Call A's run.sh arguments: $(tr '\n' ' ' < "$S/run.args")"
grep -q "^GRZO_GPU_BUILD=$S/build-gpu " "$S/run.env" || fail "Call A's build folder: $(cat "$S/run.env")"
tar -tzf "$work/out/oa.tgz" | grep -q report.md || fail "Call A's tar"
RUN_EXIT=1 lease check 300 "$work/out" > /dev/null 2>&1
[ $? -eq 1 ] || fail "Call A must pass run.sh's failure on"

# Call A of a lease that only fine-tunes: run.sh builds alone
lease build 120 "$work/out" > "$work/ab.out" 2>&1 || fail "Call A (build): $(cat "$work/ab.out")"
[ "$(sed -n 3,5p "$S/run.args" | tr '\n' '|')" = "--stages|build|$S/ob|" ] && [ "$(sed -n 2p "$S/run.args")" -ge 95 ] ||
    fail "Call A (build)'s run.sh arguments: $(tr '\n' ' ' < "$S/run.args")"
lease build 70 "$work/out" > "$work/ab.out" 2>&1
[ $? -eq 1 ] && grep -q "give the call 80 s or more" "$work/ab.out" || fail "Call A (build) too short: $(cat "$work/ab.out")"

# Call B on a cold machine (no build): said as such
lease finetune 300 "$work/out" > "$work/b0.out" 2>&1
[ $? -eq 1 ] && grep -q "went cold: no .*build-gpu" "$work/b0.out" || fail "Call B without a build: $(cat "$work/b0.out")"
mkdir -p "$S/build-gpu/examples/finetune" && printf '#!/bin/sh\n' > "$S/build-gpu/examples/finetune/grzo-finetune" &&
    chmod +x "$S/build-gpu/examples/finetune/grzo-finetune" || exit 1
# a corrupt second half: refused, no GGUF kept
cp "$work/gpu/b/part.01" "$work/part.01" && printf 'x' >> "$work/gpu/b/part.01"
lease finetune 300 "$work/out" > "$work/b1.out" 2>&1
[ $? -eq 1 ] && grep -q "do not join to the sha256" "$work/b1.out" || fail "a corrupt half: $(cat "$work/b1.out")"
[ ! -e "$S/smol/smol.gguf" ] && [ ! -e "$S/smol/smol.gguf.tmp" ] || fail "a corrupt join left a GGUF behind"
mv "$work/part.01" "$work/gpu/b/part.01"
# Call B: joined, the peer stage, then finetune.sh with the rest; runs left: exit 3
rm -f "$S/run.args"
lease finetune 300 "$work/out" --peer --jobs 4 --fit > "$work/b.out" 2>&1
[ $? -eq 3 ] || fail "Call B must pass finetune.sh's 3 (runs left) on: $(tail -3 "$work/b.out")"
cmp -s "$S/smol/smol.gguf" "$work/model.gguf" || fail "the joined GGUF is not the model"
[ "$(tr '\n' '|' < "$S/run.args")" = "--budget|100|--stages|peer|$S/op|$S/smol/smol.gguf|" ] ||
    fail "the peer stage's arguments: $(tr '\n' ' ' < "$S/run.args")"
grep -q "GRZO_SST2_DIR=$work/gpu/data/SST-2$" "$S/run.env" || fail "the peer stage's SST-2: $(cat "$S/run.env")"
tar -tzf "$work/out/op.tgz" | grep -q report.md || fail "the peer stage's tar"
[ "$(sed -n 1,4p "$S/ft.args" | tr '\n' '|')" = "--jobs|4|--fit|--budget|" ] && b=$(sed -n 5p "$S/ft.args") &&
    [ "$b" -ge 220 ] && [ "$b" -le 230 ] || fail "finetune.sh's options and budget (want what is left, 300 s less the stand-ins' seconds, less 70): $(tr '\n' ' ' < "$S/ft.args")"
[ "$(sed -n 6,8p "$S/ft.args" | tr '\n' '|')" = "$S/smol/smol.gguf|$work/gpu/data|$S/ft|" ] ||
    fail "finetune.sh's model, data and folder: $(tr '\n' ' ' < "$S/ft.args")"
grep -q "^GRZO_FINETUNE=$S/build-gpu/examples/finetune/grzo-finetune$" "$S/ft.env" || fail "finetune.sh's grzo-finetune: $(cat "$S/ft.env")"
[ "$(cat "$S/ft/finetune.md")" = "seed report" ] || fail "the fine-tuning folder must start as the committed one"
tar -tzf "$work/out/ft.tgz" > "$work/ft.list" && grep -q "log.jsonl" "$work/ft.list" && ! grep -q "checkpoint.grzo" "$work/ft.list" ||
    fail "the fine-tuning tar (the logs, not the checkpoints): $(cat "$work/ft.list")"
# a second Call B in the same lease: the joined GGUF and the folder stand (no half needed)
rm "$S/smol/part.00" && echo "resumed" > "$S/ft/finetune.md"
lease finetune 200 "$work/out" > "$work/b2.out" 2>&1
[ $? -eq 3 ] && [ "$(cat "$S/ft/finetune.md")" = resumed ] || fail "a later Call B: $(tail -3 "$work/b2.out")"

# --cpu-bench: after the peer stage, run.sh's cpu stage on two CPUs of two cores of their own,
# finetune.sh on the CPUs of the other cores; the call waits for it and tars its folder. The
# stand-in taskset says this process may use CPUs 0-7 and records what it pins; the stand-in
# lscpu puts CPUs 2c and 2c + 1 on core c (SMT siblings side by side, as some hypervisors number
# them), so the two highest CPUs share a core.
sb=$work/bin
mkdir -p "$sb" || exit 1
cat > "$sb/taskset" << 'EOF'
#!/usr/bin/env bash
[ "$1" = -pc ] && { echo "pid $2's current affinity list: 0-7"; exit 0; }
[ "$1" = -c ] || { echo "stand-in taskset: -pc PID or -c LIST CMD" >&2; exit 1; }
echo "$2 $(basename "$3") $(basename "$4")" >> "$GRZO_LEASE_DIR/taskset.log"
shift 2
exec "$@"
EOF
cat > "$sb/lscpu" << 'EOF'
#!/bin/sh
[ "$1" = -p=CPU,CORE ] || { echo "stand-in lscpu: -p=CPU,CORE only" >&2; exit 1; }
echo "# The following is the parsable format"; echo "# CPU,Core"
i=0; while [ $i -lt "${LSCPU_CPUS:-8}" ]; do echo "$i,$((i / 2))"; i=$((i + 1)); done
EOF
chmod +x "$sb/taskset" "$sb/lscpu" || exit 1
rm -f "$S/taskset.log" "$S/cpu.done" "$work/out/oc.tgz"
PATH=$sb:$PATH lease finetune 300 "$work/out" --peer --cpu-bench > "$work/c.out" 2>&1
[ $? -eq 3 ] || fail "Call B with --cpu-bench: $(tail -3 "$work/c.out")"
grep -q -- "--cpu-bench: run.sh --stages cpu on CPUs 7,5 .*the GPU work on CPUs 0,1,2,3$" "$work/c.out" ||
    fail "--cpu-bench: the CPUs (want 7 and 5 for the bench, the other cores' 0-3): $(grep -- --cpu-bench "$work/c.out")"
[ "$(sort "$S/taskset.log" | tr '\n' '|')" = "0,1,2,3 bash finetune.sh|7,5 bash run.sh|" ] ||
    fail "--cpu-bench: what was pinned where: $(cat "$S/taskset.log")"
[ "$(sed -n 3,6p "$S/run.args.cpu" | tr '\n' '|')" = "--stages|cpu|$S/oc|$S/smol/smol.gguf|" ] && b=$(sed -n 2p "$S/run.args.cpu") &&
    [ "$b" -ge 190 ] && [ "$b" -le 200 ] || fail "the cpu stage's arguments (a budget of 300 s less 100): $(tr '\n' ' ' < "$S/run.args.cpu")"
[ -s "$S/cpu.done" ] && tar -tzf "$work/out/oc.tgz" > "$work/oc.list" && grep -q report.md "$work/oc.list" && grep -q run.log "$work/oc.list" ||
    fail "--cpu-bench: the call must wait for the cpu stage and tar its folder with its log"
# too few cores: said why, the rest as without it (nothing pinned)
rm -f "$S/taskset.log" "$work/out/oc.tgz"
PATH=$sb:$PATH LSCPU_CPUS=5 lease finetune 300 "$work/out" --cpu-bench > "$work/c2.out" 2>&1
[ $? -eq 3 ] && grep -q -- "--cpu-bench: not run: too few cores" "$work/c2.out" && [ ! -e "$S/taskset.log" ] && [ ! -e "$work/out/oc.tgz" ] ||
    fail "--cpu-bench with 5 CPUs on 3 cores: $(cat "$work/c2.out")"
echo "ok: lease.sh (usage, Call A, Call B: join, peer, finetune.sh's budget and options, tars, a cold machine, --cpu-bench)"
