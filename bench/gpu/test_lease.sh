#!/usr/bin/env bash
# bench/gpu/lease.sh's own logic, against stand-ins for run.sh and finetune.sh (a GPU's calls
# cannot run here): its usage errors (--fit with --jobs over 1 among them), Call A copying the
# GGUF's half and handing run.sh its budget and folders, Call B joining the halves (a corrupt
# half refused, nothing kept), the peer stage and finetune.sh handed their budgets, options and
# paths, the tars written (without the checkpoints), finetune.sh's "runs left" passed on, a
# machine gone cold said as such, and --cpu-bench's cores (two of their own for the cpu stage,
# the rest for finetune.sh), its wait and tar, and its refusal where too few cores are. Then
# pack, in a checkout of its own with stand-ins for the GGUF, the libraries and the tasks: the
# exclude entry, the files and what they hold, the sizes it reports, its refusal of a call over
# 64 MiB and of missing inputs, and a second pack changing nothing; and the calls on what it
# packed: cpulibs unpacked and handed to run.sh as GRZO_CPU_LIBS (also with Python's tarfile
# where there is no xz; left out where it does not unpack or the machine lacks what BLIS
# needs; a build that fails with it made again without it), the data tarball unpacked for the
# peer stage and finetune.sh, neither unpacked again by a later call; all under paths with
# spaces.
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
echo "GRZO_GPU_BUILD=${GRZO_GPU_BUILD:-} GRZO_CPU_LIBS=${GRZO_CPU_LIBS:-} GRZO_SST2_DIR=${GRZO_SST2_DIR:-}" > "$GRZO_LEASE_DIR/run.env"
for a; do out=$a; case $a in --*|[0-9]*|tests,bench|peer|build|cpu) ;; *) break ;; esac; done
# the cpu stage runs beside the others: its own record, and time for the lease to wait for it
if [ "${4:-}" = cpu ]; then
    printf '%s\n' "$@" > "$GRZO_LEASE_DIR/run.args.cpu"; cp "$GRZO_LEASE_DIR/run.env" "$GRZO_LEASE_DIR/run.env.cpu"
    sleep 2; echo "done" > "$GRZO_LEASE_DIR/cpu.done"
fi
mkdir -p "$out" && echo "report" > "$out/report.md"
# RUN_FAIL_WITH_LIBS: a build that fails with the carried BLIS (a compiler of the machine's own)
if [ -n "${RUN_FAIL_WITH_LIBS:-}" ] && [ -n "${GRZO_CPU_LIBS:-}" ]; then echo "blis.h: error" > "$out/build.log"; exit 1; fi
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
finetune 300 "$work/out" --jobs 4 --fit
finetune 300 "$work/out" --fit --peer --jobs 2
again 300 "$work/out"
pack "$work/tasks" more
EOF
lease finetune 300 "$work/out" --fit --jobs 4 > "$work/e.out" 2>&1
grep -q -- "--fit with --jobs 4: finetune.sh refuses it" "$work/e.out" || fail "--fit with --jobs 4 must say why: $(cat "$work/e.out")"
[ ! -e "$S" ] || fail "a refused call made the state folder"

# Call A: without its half, a clear error; with it, run.sh gets the budget less 40 s, the stages,
# its folders, and the tar is written
mv "$work/gpu/a/part.00" "$work/part.00"
lease check 300 "$work/out" > "$work/a0.out" 2>&1
[ $? -eq 1 ] && grep -q "no .*part.00: carry .gpu/a" "$work/a0.out" || fail "Call A without its half: $(cat "$work/a0.out")"
mv "$work/part.00" "$work/gpu/a/part.00"
lease check 300 "$work/out" > "$work/a.out" 2>&1 || fail "Call A: $(cat "$work/a.out")"
cmp -s "$S/smol/part.00" "$work/gpu/a/part.00" || fail "Call A did not copy the GGUF's half"
grep -q "no .*/gpu/a/cpulibs.tar.xz (lease.sh pack makes it): the build goes without BLIS" "$work/a.out" && grep -q " GRZO_CPU_LIBS= " "$S/run.env" ||
    fail "Call A without cpulibs.tar.xz: say so, and no GRZO_CPU_LIBS: $(cat "$work/a.out" "$S/run.env")"
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
lease finetune 300 "$work/out" --peer --jobs 1 --fit > "$work/b.out" 2>&1
[ $? -eq 3 ] || fail "Call B must pass finetune.sh's 3 (runs left) on: $(tail -3 "$work/b.out")"
cmp -s "$S/smol/smol.gguf" "$work/model.gguf" || fail "the joined GGUF is not the model"
[ "$(tr '\n' '|' < "$S/run.args")" = "--budget|100|--stages|peer|$S/op|$S/smol/smol.gguf|" ] ||
    fail "the peer stage's arguments: $(tr '\n' ' ' < "$S/run.args")"
grep -q "GRZO_SST2_DIR=$work/gpu/data/SST-2$" "$S/run.env" || fail "the peer stage's SST-2: $(cat "$S/run.env")"
tar -tzf "$work/out/op.tgz" | grep -q report.md || fail "the peer stage's tar"
[ "$(sed -n 1,4p "$S/ft.args" | tr '\n' '|')" = "--jobs|1|--fit|--budget|" ] && b=$(sed -n 5p "$S/ft.args") &&
    [ "$b" -ge 220 ] && [ "$b" -le 230 ] || fail "finetune.sh's options and budget (want what is left, 300 s less the stand-ins' seconds, less 70): $(tr '\n' ' ' < "$S/ft.args")"
[ "$(sed -n 6,8p "$S/ft.args" | tr '\n' '|')" = "$S/smol/smol.gguf|$work/gpu/data|$S/ft|" ] ||
    fail "finetune.sh's model, data and folder: $(tr '\n' ' ' < "$S/ft.args")"
grep -q "^GRZO_FINETUNE=$S/build-gpu/examples/finetune/grzo-finetune$" "$S/ft.env" || fail "finetune.sh's grzo-finetune: $(cat "$S/ft.env")"
[ "$(cat "$S/ft/finetune.md")" = "seed report" ] || fail "the fine-tuning folder must start as the committed one"
tar -tzf "$work/out/ft.tgz" > "$work/ft.list" && grep -q "log.jsonl" "$work/ft.list" && ! grep -q "checkpoint.grzo" "$work/ft.list" ||
    fail "the fine-tuning tar (the logs, not the checkpoints): $(cat "$work/ft.list")"
# a second Call B in the same lease: the joined GGUF and the folder stand (no half needed)
rm "$S/smol/part.00" && echo "resumed" > "$S/ft/finetune.md"
lease finetune 200 "$work/out" --jobs 4 > "$work/b2.out" 2>&1
[ $? -eq 3 ] && [ "$(cat "$S/ft/finetune.md")" = resumed ] && [ "$(sed -n 1,2p "$S/ft.args" | tr '\n' '|')" = "--jobs|4|" ] ||
    fail "a later Call B (--jobs 4 without --fit): $(tail -3 "$work/b2.out")"

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
grep -q -- "--cpu-bench: no .*/cpulibs (Call A had no cpulibs.tar.xz): the build has no BLIS, the stage will skip" "$work/c.out" &&
    grep -q " GRZO_CPU_LIBS= GRZO_SST2_DIR=$work/gpu/data/SST-2$" "$S/run.env.cpu" ||
    fail "--cpu-bench without cpulibs: say so: $(grep -- --cpu-bench "$work/c.out"; cat "$S/run.env.cpu")"
# too few cores: said why, the rest as without it (nothing pinned)
rm -f "$S/taskset.log" "$work/out/oc.tgz"
PATH=$sb:$PATH LSCPU_CPUS=5 lease finetune 300 "$work/out" --cpu-bench > "$work/c2.out" 2>&1
[ $? -eq 3 ] && grep -q -- "--cpu-bench: not run: too few cores" "$work/c2.out" && [ ! -e "$S/taskset.log" ] && [ ! -e "$work/out/oc.tgz" ] ||
    fail "--cpu-bench with 5 CPUs on 3 cores: $(cat "$work/c2.out")"
# ---- pack: .gpu/ made in a checkout of its own (a git repository holding a copy of lease.sh,
# which packs the checkout it lies in), from stand-ins: a GGUF where grzo_fetch_smollm2 puts it
# (in the ignored build/), three library files and the two tasks' folders
if ! command -v git > /dev/null || ! command -v xz > /dev/null; then
    echo "note: no git or xz here: lease.sh pack and the calls on what it packs are not checked"
    echo "ok: lease.sh (usage, Call A, Call B: join, peer, finetune.sh's budget and options, tars, a cold machine, --cpu-bench)"
    exit 0
fi
repo=$work/checkout
gguf=$repo/build/models/SmolLM2-135M-Instruct.Q4_1.gguf
mkdir -p "$repo/bench/gpu" "$repo/build/models" "$work/libs" "$work/tasks/SST-2/k-shot" "$work/tasks/RTE" "$work/tasks/CB" || exit 1
cp "$here/lease.sh" "$repo/bench/gpu/lease.sh" && git -C "$repo" init -q && echo "/build/" > "$repo/.gitignore" &&
    head -c 3000 /dev/urandom > "$repo/tracked.bin" && git -C "$repo" add .gitignore tracked.bin bench &&
    head -c 1000 /dev/urandom > "$repo/untracked.bin" && head -c 300000 /dev/urandom > "$gguf" || exit 1
head -c 20000 /dev/urandom > "$work/libs/libblis.so.4" && head -c 5000 /dev/urandom > "$work/libs/blis.h" &&
    head -c 30000 /dev/urandom > "$work/libs/libopenblasp-r0.3.21.so" && ln -s libopenblasp-r0.3.21.so "$work/libs/libopenblas.so.0" || exit 1
printf 'sentence\tlabel\ngood\t1\n' > "$work/tasks/SST-2/train.tsv" && printf 'x\t0\n' > "$work/tasks/SST-2/k-shot/dev.tsv" &&
    printf 'a\tb\tentailment\n' > "$work/tasks/RTE/train.tsv" && echo "not carried" > "$work/tasks/CB/train.tsv" || exit 1
# the earlier layout, made by hand: a read-only copy of the tasks (cp -r of ../shared/data) and a stray file
mkdir -p "$repo/.gpu/data/SST-2" "$repo/.gpu/a" && echo old > "$repo/.gpu/data/SST-2/train.tsv" && chmod -R a-w "$repo/.gpu/data" &&
    echo old > "$repo/.gpu/a/stray" || exit 1
G=$repo/.gpu
pack() {
    env -u GRZO_LEASE_GPU_DIR GRZO_LEASE_BLIS_SO="${GRZO_LEASE_BLIS_SO:-$work/libs/libblis.so.4}" GRZO_LEASE_BLIS_H="$work/libs/blis.h" \
        GRZO_LEASE_OPENBLAS="${GRZO_LEASE_OPENBLAS:-$work/libs/libopenblas.so.0}" bash "$repo/bench/gpu/lease.sh" pack "$@"
}
# the files in .gpu/, each with its inode and size: a file rewritten gets a new inode
inodes() { find "$G" -type f ! -path "$G/.pack/*" -printf '%i %s %P\n' | sort -k3; }
pack "$work/tasks" > "$work/p1.out" 2>&1 || fail "pack: $(cat "$work/p1.out")"
[ "$(grep -cx '/.gpu/' "$repo/.git/info/exclude")" -eq 1 ] && git -C "$repo" check-ignore -q .gpu/b/data.tar.xz ||
    fail "pack: /.gpu/ in .git/info/exclude once, and .gpu/ ignored: $(cat "$repo/.git/info/exclude")"
[ ! -e "$G/data" ] && [ ! -e "$G/a/stray" ] || fail "pack: the earlier layout's files must go: $(find "$G" | sort)"
[ "$(find "$G" -type f ! -path "$G/.pack/*" -printf '%P\n' | sort | tr '\n' ' ')" = "a/cpulibs.tar.xz a/part.00 b/data.tar.xz b/part.01 b/sha256 " ] ||
    fail "pack: the files of .gpu/: $(find "$G" -type f | sort)"
cat "$G/a/part.00" "$G/b/part.01" | cmp -s - "$gguf" && [ "$(cat "$G/b/sha256")" = "$(sha256sum "$gguf" | cut -d' ' -f1)" ] ||
    fail "pack: the GGUF's parts do not join to it, or its sha256"
tar -tvJf "$G/a/cpulibs.tar.xz" > "$work/cpulibs.list" && grep -q ' lib/libblis.so -> libblis.so.4$' "$work/cpulibs.list" &&
    [ "$(tar -tJf "$G/a/cpulibs.tar.xz" | grep -v '/$' | sort | tr '\n' ' ')" = "SOURCES include/blis.h lib/libblis.so lib/libblis.so.4 openblas/libopenblas.so.0 " ] &&
    tar -xJOf "$G/a/cpulibs.tar.xz" lib/libblis.so.4 | cmp -s - "$work/libs/libblis.so.4" &&
    tar -xJOf "$G/a/cpulibs.tar.xz" include/blis.h | cmp -s - "$work/libs/blis.h" &&
    tar -xJOf "$G/a/cpulibs.tar.xz" openblas/libopenblas.so.0 | cmp -s - "$work/libs/libopenblasp-r0.3.21.so" &&
    tar -xJOf "$G/a/cpulibs.tar.xz" SOURCES | grep -q "^openblas/libopenblas.so.0: $work/libs/libopenblasp-r0.3.21.so (" ||
    fail "pack: cpulibs.tar.xz: $(cat "$work/cpulibs.list")"
[ "$(tar -tJf "$G/b/data.tar.xz" | grep -v '/$' | sort | tr '\n' ' ')" = "RTE/train.tsv SST-2/k-shot/dev.tsv SST-2/train.tsv " ] &&
    tar -xJOf "$G/b/data.tar.xz" SST-2/train.tsv | cmp -s - "$work/tasks/SST-2/train.tsv" || fail "pack: data.tar.xz: $(tar -tJf "$G/b/data.tar.xz")"
# the sizes: the tree is the four files that are not ignored; both calls carry the same, give or take a byte
tree=$(cat "$repo/.gitignore" "$repo/tracked.bin" "$repo/untracked.bin" "$repo/bench/gpu/lease.sh" | wc -c)
a=$(( $(stat -c %s "$G/a/part.00") + $(stat -c %s "$G/a/cpulibs.tar.xz") ))
b=$(( $(stat -c %s "$G/b/part.01") + $(stat -c %s "$G/b/sha256") + $(stat -c %s "$G/b/data.tar.xz") ))
grep -q "the tree that travels with every call (tracked and untracked-not-ignored files): $tree bytes" "$work/p1.out" &&
    grep -q "Call A (check, build): carry .gpu/a, $a bytes; with the tree $((tree + a)) bytes (0.[0-9][0-9] MiB) of 64 MiB" "$work/p1.out" &&
    grep -q "Calls B and C (finetune): carry .gpu/b, $b bytes; with the tree $((tree + b)) bytes" "$work/p1.out" ||
    fail "pack: the sizes (tree $tree, A $a, B $b bytes): $(cat "$work/p1.out")"
[ $((a - b)) -le 1 ] && [ $((b - a)) -le 1 ] || fail "pack: the GGUF's cut must make both calls carry the same: A $a, B $b bytes"
# again: nothing rewritten, the exclude entry not added twice
inodes > "$work/inodes1"
pack "$work/tasks" > "$work/p2.out" 2>&1 || fail "pack again: $(cat "$work/p2.out")"
inodes > "$work/inodes2"
cmp -s "$work/inodes1" "$work/inodes2" && [ "$(grep -c ': unchanged' "$work/p2.out")" -eq 5 ] && ! grep -q 'written\|added' "$work/p2.out" &&
    [ "$(grep -cx '/.gpu/' "$repo/.git/info/exclude")" -eq 1 ] || fail "pack must be idempotent: $(cat "$work/p2.out"; diff "$work/inodes1" "$work/inodes2")"
# over the limit: a 64 MiB file (sparse) in the tree puts both calls over by the rest; exit 1, said how much
truncate -s 64M "$repo/big.bin" || exit 1
pack "$work/tasks" > "$work/p3.out" 2>&1
[ $? -eq 1 ] && grep -q "Call A (check, build): carry .gpu/a, $a bytes; .*OVER the limit of 64 MiB by $((tree + a)) bytes" "$work/p3.out" &&
    grep -q "Calls B and C (finetune): .*OVER the limit of 64 MiB by $((tree + b)) bytes" "$work/p3.out" &&
    grep -q "largest folders: (top level) 64.00 MiB" "$work/p3.out" && grep -q "more than the device tool's 64 MiB" "$work/p3.out" ||
    fail "pack with a call over 64 MiB: $(cat "$work/p3.out")"
rm "$repo/big.bin"
# what it reads, missing: exit 1, said what to install or fetch, nothing changed
GRZO_LEASE_GGUF=$work/none.gguf pack "$work/tasks" > "$work/p4.out" 2>&1
[ $? -eq 1 ] && grep -q "no GGUF at $work/none.gguf: fetch it .*grzo_fetch_smollm2" "$work/p4.out" || fail "pack without the GGUF: $(cat "$work/p4.out")"
GRZO_LEASE_BLIS_SO=$work/none pack "$work/tasks" > "$work/p4.out" 2>&1
[ $? -eq 1 ] && grep -q "apt-get install libblis4-openmp libblis-openmp-dev" "$work/p4.out" || fail "pack without BLIS: $(cat "$work/p4.out")"
GRZO_LEASE_OPENBLAS=$work/none pack "$work/tasks" > "$work/p4.out" 2>&1
[ $? -eq 1 ] && grep -q "apt-get install libopenblas0-openmp" "$work/p4.out" || fail "pack without OpenBLAS: $(cat "$work/p4.out")"
pack "$work/tasks/RTE" > "$work/p4.out" 2>&1
[ $? -eq 1 ] && grep -q "no SST-2 and RTE folders in $work/tasks/RTE" "$work/p4.out" || fail "pack without the tasks: $(cat "$work/p4.out")"
# a .gitignore rule that keeps .gpu/ from being ignored: refused
cp "$repo/.gitignore" "$work/gitignore" && echo '!/.gpu/' >> "$repo/.gitignore"
pack "$work/tasks" > "$work/p4.out" 2>&1
[ $? -eq 1 ] && grep -q "still not ignored" "$work/p4.out" || fail "pack with .gpu/ not ignored: $(cat "$work/p4.out")"
cp "$work/gitignore" "$repo/.gitignore"
inodes > "$work/inodes3"
cmp -s "$work/inodes1" "$work/inodes3" || fail "a refused pack changed .gpu/: $(diff "$work/inodes1" "$work/inodes3")"

# ---- the calls on what pack made -----------------------------------------------------------------
export GRZO_LEASE_GPU_DIR=$G GRZO_LEASE_DIR="$work/state 2"
S=$GRZO_LEASE_DIR
# Call A: cpulibs unpacked (the link too) and handed to run.sh
lease check 300 "$work/out" > "$work/pa.out" 2>&1 || fail "Call A on the pack: $(cat "$work/pa.out")"
cmp -s "$S/cpulibs/lib/libblis.so.4" "$work/libs/libblis.so.4" && [ "$(readlink "$S/cpulibs/lib/libblis.so")" = libblis.so.4 ] &&
    cmp -s "$S/cpulibs/include/blis.h" "$work/libs/blis.h" && cmp -s "$S/cpulibs/openblas/libopenblas.so.0" "$work/libs/libopenblasp-r0.3.21.so" ||
    fail "Call A: cpulibs not unpacked: $(find "$S/cpulibs" | sort)"
grep -q "cpulibs unpacked to $S/cpulibs" "$work/pa.out" && grep -q "^GRZO_GPU_BUILD=$S/build-gpu GRZO_CPU_LIBS=$S/cpulibs GRZO_SST2_DIR=$" "$S/run.env" ||
    fail "Call A: run.sh must get GRZO_CPU_LIBS: $(cat "$S/run.env")"
# Call A of a fine-tuning lease, later in the same lease: cpulibs not unpacked again
echo mine > "$S/cpulibs/marker"
lease build 120 "$work/out" > "$work/pb.out" 2>&1 && [ -e "$S/cpulibs/marker" ] && grep -q " GRZO_CPU_LIBS=$S/cpulibs " "$S/run.env" ||
    fail "Call A (build) again: $(cat "$work/pb.out")"
# a build that fails with the carried BLIS goes once more without it (check and build alike),
# the first try's log kept; the cpu stage then finds no cpulibs
for mode in build check; do
    o=$S/$([ "$mode" = build ] && echo ob || echo oa)
    RUN_FAIL_WITH_LIBS=1 lease "$mode" 300 "$work/out" > "$work/pf.out" 2>&1
    [ $? -eq 0 ] && grep -q "the build with the carried BLIS failed" "$work/pf.out" && grep -q "blis.h: error" "$o/build-with-cpulibs.log" &&
        grep -q " GRZO_CPU_LIBS= " "$S/run.env" && [ ! -e "$S/cpulibs" ] ||
        fail "Call A ($mode) whose build fails with the carried BLIS: $(cat "$work/pf.out" "$S/run.env")"
    [ "$mode" = build ] || [ "$(sed -n 3,4p "$S/run.args" | tr '\n' '|')" = "--stages|tests,bench|" ] ||
        fail "Call A (check) after the build without BLIS: $(tr '\n' ' ' < "$S/run.args")"
done
# without xz (the device's image may lack it): Python's tarfile unpacks it, the link too
if command -v python3 > /dev/null; then
    nox=$work/bin-no-xz
    mkdir -p "$nox" || exit 1
    IFS=: read -r -a dirs <<< "$PATH"
    for d in "${dirs[@]}"; do
        for f in "$d"/*; do n=${f##*/}; [ "$n" = xz ] || [ -e "$nox/$n" ] || [ ! -x "$f" ] || ln -s "$f" "$nox/$n"; done
    done
    rm -rf "$S/cpulibs" "$S/cpulibs.sha256"
    PATH=$nox lease build 120 "$work/out" > "$work/pc.out" 2>&1 || fail "Call A without xz: $(cat "$work/pc.out")"
    cmp -s "$S/cpulibs/lib/libblis.so.4" "$work/libs/libblis.so.4" && [ "$(readlink "$S/cpulibs/lib/libblis.so")" = libblis.so.4 ] ||
        fail "Call A without xz: cpulibs not unpacked: $(cat "$work/pc.out"; find "$S/cpulibs" | sort)"
else
    echo "note: no python3 here: unpacking without xz is not checked"
fi
# a machine without what the carried BLIS needs (a stand-in ldd says libgomp.so.1 is missing):
# the build goes without it, and says so
lb=$work/bin-ldd
mkdir -p "$lb" && printf '#!/bin/sh\nprintf "\\tlibgomp.so.1 => not found\\n"\n' > "$lb/ldd" && chmod +x "$lb/ldd" || exit 1
rm -rf "$S/cpulibs" "$S/cpulibs.sha256"
PATH=$lb:$PATH lease build 120 "$work/out" > "$work/pd.out" 2>&1
[ $? -eq 0 ] && grep -q "the carried BLIS needs libgomp.so.1, which this machine lacks: the build goes without BLIS" "$work/pd.out" &&
    grep -q " GRZO_CPU_LIBS= " "$S/run.env" && [ ! -e "$S/cpulibs" ] || fail "Call A where BLIS cannot load: $(cat "$work/pd.out" "$S/run.env")"
# a tarball that does not unpack: the same
mkdir -p "$work/bad/a" && cp "$G/a/part.00" "$work/bad/a/" && head -c 1000 /dev/urandom > "$work/bad/a/cpulibs.tar.xz" || exit 1
GRZO_LEASE_GPU_DIR=$work/bad lease build 120 "$work/out" > "$work/pd.out" 2>&1
[ $? -eq 0 ] && grep -q "cannot unpack .*cpulibs.tar.xz (make it again: lease.sh pack): the build goes without BLIS" "$work/pd.out" &&
    grep -q " GRZO_CPU_LIBS= " "$S/run.env" && [ ! -e "$S/cpulibs" ] || fail "Call A with a corrupt cpulibs.tar.xz: $(cat "$work/pd.out" "$S/run.env")"
lease build 120 "$work/out" > "$work/pb.out" 2>&1 || fail "Call A (build): $(cat "$work/pb.out")"
# Call B: the GGUF's parts (cut off the middle) joined, the data unpacked for the peer stage and
# finetune.sh, GRZO_CPU_LIBS for both run.sh calls (the cpu stage's OpenBLAS)
mkdir -p "$S/build-gpu/examples/finetune" && printf '#!/bin/sh\n' > "$S/build-gpu/examples/finetune/grzo-finetune" &&
    chmod +x "$S/build-gpu/examples/finetune/grzo-finetune" || exit 1
rm -f "$S/taskset.log"
PATH=$sb:$PATH lease finetune 300 "$work/out" --peer --fit --cpu-bench > "$work/pe.out" 2>&1
[ $? -eq 3 ] || fail "Call B on the pack: $(cat "$work/pe.out")"
cmp -s "$S/smol/smol.gguf" "$gguf" || fail "Call B on the pack: the joined GGUF is not the model"
cmp -s "$S/data/SST-2/train.tsv" "$work/tasks/SST-2/train.tsv" && cmp -s "$S/data/RTE/train.tsv" "$work/tasks/RTE/train.tsv" ||
    fail "Call B: data.tar.xz not unpacked into $S/data: $(find "$S/data" | sort)"
grep -q " GRZO_CPU_LIBS=$S/cpulibs GRZO_SST2_DIR=$S/data/SST-2$" "$S/run.env" && grep -q " GRZO_CPU_LIBS=$S/cpulibs GRZO_SST2_DIR=$S/data/SST-2$" "$S/run.env.cpu" ||
    fail "Call B: the peer and cpu stages' data and libraries: $(cat "$S/run.env" "$S/run.env.cpu")"
[ "$(sed -n 1,2p "$S/ft.args" | tr '\n' '|')" = "--fit|--budget|" ] && [ "$(sed -n 4,6p "$S/ft.args" | tr '\n' '|')" = "$S/smol/smol.gguf|$S/data|$S/ft|" ] ||
    fail "Call B: finetune.sh's options, model, data and folder: $(tr '\n' ' ' < "$S/ft.args")"
# a later call of the lease: the data not unpacked again
echo mine > "$S/data/marker"
lease finetune 200 "$work/out" > "$work/pf.out" 2>&1
[ $? -eq 3 ] && [ -e "$S/data/marker" ] && [ "$(sed -n 4p "$S/ft.args")" = "$S/data" ] || fail "a later Call B on the pack: $(cat "$work/pf.out")"
echo "ok: lease.sh (usage, Call A, Call B: join, peer, finetune.sh's budget and options, tars, a cold machine, --cpu-bench; pack, and the calls on what it packs)"

