#!/usr/bin/env bash
# bench/gpu/lease.sh - the calls of a 15-minute device lease (bench/gpu/README.md), one command
# each, whose budgets follow from the call's own time limit: nothing is worked out by hand
# while the lease's seconds run; and, here beforehand, what the calls carry.
#
#   bash bench/gpu/lease.sh pack [DATA_DIR]       here, not on the device: makes .gpu/ (below)
#        from this checkout and machine, checks that .gpu/ is ignored (adding /.gpu/ to
#        .git/info/exclude where needed) and that each call's carry, with the tree that travels
#        anyway (tracked and untracked-not-ignored files, shared/), is within the device tool's
#        64 MiB; prints each call's size, exit 1 when one is over. Idempotent: what is up to
#        date is left alone.
#   bash bench/gpu/lease.sh check SECONDS OUT      Call A (cold, carrying .gpu/a): the GGUF's
#        first part to the machine's state folder, cpulibs.tar.xz unpacked (below), then run.sh
#        --stages tests,bench (it builds, with BLIS); OUT/oa.tgz
#   bash bench/gpu/lease.sh build SECONDS OUT      Call A of a lease that only fine-tunes: the
#        same, and run.sh --stages build (no tests: the commit's have passed on a GPU before)
#   bash bench/gpu/lease.sh finetune SECONDS OUT [--peer] [--jobs N] [--fit] [--cpu-bench]
#        Call B, at once (carrying .gpu/b): the GGUF's parts joined and checked against
#        .gpu/b/sha256, the tasks' data unpacked (data.tar.xz), run.sh's peer stage (--peer:
#        ~100 s; OUT/op.tgz), then finetune.sh (--jobs and --fit passed on) resuming the
#        fine-tuning folder, which starts as a copy of the committed one; OUT/ft.tgz without the
#        checkpoints (~270 MB each). --fit with --jobs over 1 is a usage error, as in finetune.sh
#        (four runs at a time ran at 0.76x the throughput of one at a time on an H200).
#        --cpu-bench: after the peer stage, run.sh's cpu stage (bench_mlp and bench_llm: issue
#        10's targets on this host's CPU, which the sessions' own machines are not) on two CPUs
#        of two cores of their own (their SMT siblings left idle), while finetune.sh keeps to
#        the other cores; OUT/oc.tgz. It costs the lease no time: it ends before the
#        fine-tuning's stop. Not run (said why, the rest goes on) without taskset and lscpu or
#        with fewer than four cores; it reads "skipped" in its report where the build has no
#        BLIS (Call A without cpulibs.tar.xz)
#
# .gpu/ (ignored; each call names its folder in the device tool's carry):
#   a/part.00         the first part of the SmolLM2 GGUF (build/models/, 94 MiB: `. .ci/deps.sh;
#                     grzo_fetch_smollm2`), cut so that both calls carry the same
#   a/cpulibs.tar.xz  what the device's image lacks for issue 10's kernels, from Debian 12's
#                     packages: lib/libblis.so.4 (+ libblis.so) and include/blis.h (BLIS, the
#                     OpenMP build: libblis4-openmp, libblis-openmp-dev) and
#                     openblas/libopenblas.so.0 (OpenBLAS's OpenMP build: libopenblas0-openmp),
#                     with SOURCES (the files and packages). Unpacked to $L/cpulibs, it is
#                     run.sh's GRZO_CPU_LIBS: the build finds BLIS there and every program loads
#                     libblis.so.4 from there (an rpath); only the cpu stage runs with that
#                     OpenBLAS (the GPU stages keep the machine's). Without it, check and build
#                     go on without BLIS and say so; where the build with it fails, they build
#                     once more without it (build_gpu)
#   b/part.01, b/sha256   the GGUF's second part and the whole file's SHA-256
#   b/data.tar.xz     SST-2 and RTE (DATA_DIR, default ../shared/data; ~1 MB compressed,
#                     7 MB unpacked), unpacked to $L/data. A .gpu/data/{SST-2,RTE} of the
#                     earlier layout (carried as .gpu/data) is read where there is no tarball
# pack reads the GGUF from $GRZO_LEASE_GGUF and the libraries from $GRZO_LEASE_BLIS_SO,
# $GRZO_LEASE_BLIS_H and $GRZO_LEASE_OPENBLAS where set (the tests' stand-ins), and writes the
# checkout's own .gpu/ (the carry paths are the checkout's), whatever GRZO_LEASE_GPU_DIR says.
#
# SECONDS: the timeout_s the call is given; the budgets inside are cut from it, with room for a
# run to stop (finetune.sh's runs take up to 30 s after their budget), the report and the tar.
# OUT: the device tool's $OUT. The machine's state lives in $GRZO_LEASE_DIR (default /root):
# build-gpu/, smol/ (the GGUF), cpulibs/, data/, ft/ (the fine-tuning folder), oa/, ob/, op/,
# oc/; it survives between the calls of a lease only while the machine stays warm (a call that
# finds it gone says so). The tarballs are unpacked with tar and xz, or Python's tarfile where
# the image has no xz.
# Exit status: 0 done; 3 fine-tuning runs are left for a later call or lease; 1 a step failed
# (the line says which), or pack found a call over the limit; 2 usage.
set -u -o pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
L=${GRZO_LEASE_DIR:-/root}
GPU=${GRZO_LEASE_GPU_DIR:-$REPO/.gpu}                                   # what the calls carry
SEED=${GRZO_LEASE_FT_SEED:-$REPO/bench/gpu/results/2026-11-30-h200/finetune}   # the folder resumed
RUN_SH=${GRZO_RUN_SH:-$REPO/bench/gpu/run.sh}
FINETUNE_SH=${GRZO_FINETUNE_SH:-$REPO/bench/gpu/finetune.sh}
LIMIT=67108864   # the device tool's limit on what one call carries, the tree included: 64 MiB
START=$(date +%s)

usage() {
    echo "usage: bash bench/gpu/lease.sh pack [DATA_DIR] | check|build SECONDS OUT | finetune SECONDS OUT [--peer] [--jobs N] [--fit] [--cpu-bench]" >&2
    exit 2
}
say() { local e=$(( $(date +%s) - START )); printf '[%02d:%02d] lease.sh: %s\n' $((e / 60)) $((e % 60)) "$*"; }
die() { say "$*" >&2; exit 1; }
is_count() { case $1 in ''|*[!0-9]*|0?*) return 1 ;; esac; [ "${#1}" -le 5 ]; }
# seconds of the call left after RESERVE more
left() { echo $(( START + SECONDS_ - $(date +%s) - $1 )); }

# the GGUF's first part, copied to the state folder (the second comes with Call B)
first_half() {
    [ -s "$GPU/a/part.00" ] || die "no $GPU/a/part.00: carry .gpu/a (bash bench/gpu/lease.sh pack makes it)"
    mkdir -p "$L/smol" && cp "$GPU/a/part.00" "$L/smol/part.00" || die "cannot copy the GGUF's first part to $L/smol"
}

# TARBALL (.tar.xz) unpacked into the folder DEST, made anew; nothing when DEST holds this
# tarball already (its SHA-256 in DEST.sha256). With tar and xz, else Python's tarfile.
unpack() {
    local tarball=$1 dest=$2 sum
    sum=$(sha256sum "$tarball" | cut -d' ' -f1) || return 1
    [ -d "$dest" ] && [ "$(cat "$dest.sha256" 2> /dev/null)" = "$sum" ] && return 0
    rm -rf "${dest:?}" "$dest.tmp" "$dest.sha256" && mkdir -p "$dest.tmp" || return 1
    if command -v xz > /dev/null; then tar -C "$dest.tmp" -xJf "$tarball"
    else python3 -m tarfile -e "$tarball" "$dest.tmp"; fi || { rm -rf "$dest.tmp"; return 1; }
    mv "$dest.tmp" "$dest" && echo "$sum" > "$dest.sha256"
}

# the libraries FILE needs that the loader does not find here (nothing where there is no ldd)
not_found() { command -v ldd > /dev/null || return 0; ldd "$1" 2>&1 | awk '/=> *not found/ { print $1 }' | sort -u | paste -sd' ' -; }

# Call A: cpulibs.tar.xz (carried in .gpu/a) unpacked to $L/cpulibs, run.sh's GRZO_CPU_LIBS
# (CPU_LIBS). Without it, where it does not unpack, or where this machine lacks what its BLIS
# needs (the build would not link), the build goes without BLIS, and says so: the GPU stages do
# not need it.
cpu_libs() {
    local missing
    CPU_LIBS=""
    if [ ! -s "$GPU/a/cpulibs.tar.xz" ]; then
        rm -rf "${L:?}/cpulibs" "$L/cpulibs.sha256"
        say "no $GPU/a/cpulibs.tar.xz (lease.sh pack makes it): the build goes without BLIS; a cpu stage (finetune --cpu-bench) will skip"
        return 0
    fi
    if ! unpack "$GPU/a/cpulibs.tar.xz" "$L/cpulibs" ||
       ! { [ -e "$L/cpulibs/lib/libblis.so.4" ] && [ -e "$L/cpulibs/lib/libblis.so" ] && [ -s "$L/cpulibs/include/blis.h" ]; }; then
        rm -rf "${L:?}/cpulibs" "$L/cpulibs.sha256"
        say "cannot unpack lib/libblis.so.4, lib/libblis.so and include/blis.h from $GPU/a/cpulibs.tar.xz (make it again: lease.sh pack): the build goes without BLIS; a cpu stage will skip"
        return 0
    fi
    missing=$(not_found "$L/cpulibs/lib/libblis.so.4")
    if [ -n "$missing" ]; then
        rm -rf "${L:?}/cpulibs" "$L/cpulibs.sha256"
        say "the carried BLIS needs $missing, which this machine lacks: the build goes without BLIS; a cpu stage will skip"
        return 0
    fi
    CPU_LIBS=$L/cpulibs
    missing=$(not_found "$L/cpulibs/openblas/libopenblas.so.0")
    say "cpulibs unpacked to $CPU_LIBS: BLIS for the build (GRZO_CPU_LIBS)${missing:+; its OpenBLAS needs $missing, which this machine lacks: a cpu stage runs with the OpenBLAS of this machine}"
}

# run.sh --stages build into the folder $1, within the call's time less $2 s. The carried BLIS
# (CPU_LIBS) has built here with Debian 12's compiler only: where the build with it fails on
# the machine, the build goes once more without it (the GPU stages do not need BLIS; the cpu
# stage then says it skipped), the first try's log kept as build-with-cpulibs.log.
build_gpu() {
    GRZO_GPU_BUILD=$L/build-gpu GRZO_CPU_LIBS=$CPU_LIBS bash "$RUN_SH" --budget "$(left "$2")" --stages build "$1" && return 0
    [ -n "$CPU_LIBS" ] || return 1
    say "the build with the carried BLIS failed ($1/build.log, kept as build-with-cpulibs.log): again without it; a cpu stage will skip"
    mv "$1/build.log" "$1/build-with-cpulibs.log" 2> /dev/null
    rm -rf "${L:?}/build-gpu" "$L/cpulibs" "$L/cpulibs.sha256"
    CPU_LIBS=""
    GRZO_GPU_BUILD=$L/build-gpu bash "$RUN_SH" --budget "$(left "$2")" --stages build "$1"
}

# Call B: the tasks' data into DATA: data.tar.xz (carried in .gpu/b) unpacked to $L/data, else
# the earlier layout's .gpu/data
task_data() {
    if [ -s "$GPU/b/data.tar.xz" ]; then
        unpack "$GPU/b/data.tar.xz" "$L/data" || die "cannot unpack $GPU/b/data.tar.xz into $L/data"
        DATA=$L/data
    else
        DATA=$GPU/data
    fi
    [ -d "$DATA/SST-2" ] && [ -d "$DATA/RTE" ] || die "no SST-2 or RTE in $DATA: carry .gpu/b, with its data.tar.xz (lease.sh pack)"
}

# The CPUs this process may use, cut in two by cores (lscpu -p: each CPU's core): BENCH_CPUS, one
# CPU on each of the two highest-numbered cores, and FT_CPUS, the CPUs of every other core (so
# the GPU work never shares a core with the benchmark, SMT sibling or not); comma lists. WHY
# says why not, where it cannot: no taskset or lscpu, or fewer than two cores left over.
split_cpus() {
    local allowed cores
    BENCH_CPUS="" FT_CPUS="" WHY=""
    command -v taskset > /dev/null && command -v lscpu > /dev/null || { WHY="no taskset or lscpu here"; return 1; }
    allowed=$(taskset -pc $$ 2> /dev/null | sed -n 's/.*: *//p')
    [ -n "$allowed" ] || { WHY="taskset could not read this process's CPUs"; return 1; }
    cores=$(lscpu -p=CPU,CORE 2> /dev/null | grep -E '^[0-9]+,[0-9]+$')
    [ -n "$cores" ] || { WHY="lscpu -p=CPU,CORE gave no CPU's core"; return 1; }
    read -r BENCH_CPUS FT_CPUS < <(echo "$cores" | awk -F, -v allowed="$allowed" '
        BEGIN { n = split(allowed, r, ",")
                for (i = 1; i <= n; i++) { m = split(r[i], ab, "-"); for (c = ab[1] + 0; c <= ab[m] + 0; c++) ok[c] = 1 } }
        !($1 in ok) { next }
        { core[$1] = $2; cpu[++k] = $1 }
        END { for (i = k; i >= 1 && nb < 2; i--) if (!(core[cpu[i]] in mine)) { mine[core[cpu[i]]] = 1; b = b (nb++ ? "," : "") cpu[i] }
              for (i = 1; i <= k; i++) if (!(core[cpu[i]] in mine)) { f = f (f != "" ? "," : "") cpu[i]; if (!(core[cpu[i]] in left)) { left[core[cpu[i]]] = 1; nf++ } }
              if (nb == 2 && nf >= 2) print b, f }')
    [ -n "$FT_CPUS" ] || { WHY="too few cores (CPUs $allowed) to keep two apart from the GPU work"; return 1; }
}

# $L/smol/smol.gguf from the two parts, checked; a GGUF joined by an earlier call stands
join_gguf() {
    local want
    [ -s "$GPU/b/sha256" ] && [ -s "$GPU/b/part.01" ] || die "no $GPU/b/part.01 or sha256: carry .gpu/b"
    want=$(cat "$GPU/b/sha256")
    if [ -s "$L/smol/smol.gguf" ] && [ "$(sha256sum "$L/smol/smol.gguf" | cut -d' ' -f1)" = "$want" ]; then return 0; fi
    [ -s "$L/smol/part.00" ] || die "the machine went cold: no GGUF part in $L/smol (start again with Call A)"
    cat "$L/smol/part.00" "$GPU/b/part.01" > "$L/smol/smol.gguf.tmp" || die "cannot join the GGUF's parts"
    [ "$(sha256sum "$L/smol/smol.gguf.tmp" | cut -d' ' -f1)" = "$want" ] ||
        { rm -f "$L/smol/smol.gguf.tmp"; die "the GGUF's parts do not join to the sha256 in $GPU/b/sha256"; }
    mv "$L/smol/smol.gguf.tmp" "$L/smol/smol.gguf"
    say "GGUF joined: $L/smol/smol.gguf"
}

# ---- pack (here, before a lease) ------------------------------------------------------------
mib() { awk -v b="$1" 'BEGIN { printf "%.2f MiB", b / 1048576 }'; }
# bytes of the files under the paths (the carried folders)
bytes_of() { find "$@" -type f -printf '%s\n' 2> /dev/null | awk '{ s += $1 } END { print s + 0 }'; }
# "SIZE PATH" of each file of the tree that travels with every call: tracked and
# untracked-not-ignored files, and the ignored ones in shared/ (which travels too)
tree_files() {
    (
        cd "$REPO" || exit 1
        { git ls-files -z --cached --others --exclude-standard
          [ -d shared ] && git ls-files -z --others --ignored --exclude-standard -- shared; } | sort -zu | xargs -0 -r stat -c '%s %n' -- 2> /dev/null
    ) || true
}
# the Debian package a file comes from, with its version ("not from a Debian package" else)
origin() {
    local pkg
    pkg=$(dpkg-query -S "$(readlink -f "$1")" 2> /dev/null | head -1 | cut -d: -f1)
    if [ -n "$pkg" ]; then echo "$pkg $(dpkg-query -W -f='${Version}' "$pkg" 2> /dev/null)"; else echo "not from a Debian package"; fi
}
# FILE from the output of CMD..., rewritten only when that differs from what FILE holds
write_if_changed() {
    local f=$1
    shift
    "$@" > "$f.tmp" || { rm -f "$f.tmp"; die "pack: cannot write $f"; }
    if [ -f "$f" ] && cmp -s "$f.tmp" "$f"; then rm -f "$f.tmp"; say "  ${f#"$REPO"/}: unchanged"
    else mv "$f.tmp" "$f" || die "pack: cannot write $f"; say "  ${f#"$REPO"/}: written ($(stat -c %s "$f") bytes)"; fi
}
# a deterministic .tar.xz of the folder SRC's entries NAMES... into FILE, rewritten only when the
# files' SHA-256s (kept in .gpu/.pack/) differ from those it was made of
tar_xz() {
    local f=$1 src=$2 digest stamp
    shift 2
    stamp=$REPO/.gpu/.pack/$(basename "$f").src
    digest=$(cd "$src" && { find "$@" -type f -print0 | sort -z | xargs -0 -r sha256sum; find "$@" -type l -printf '%p -> %l\n' | sort; })
    digest=$(printf '%s\n' "$digest" | sha256sum | cut -d' ' -f1)
    if [ -s "$f" ] && [ "$(cat "$stamp" 2> /dev/null)" = "$digest" ]; then say "  ${f#"$REPO"/}: unchanged ($(stat -c %s "$f") bytes)"; return 0; fi
    tar -C "$src" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --mode='a+rX,u+w,go-w' -cf - "$@" | xz -9 -T1 -c > "$f.tmp" &&
        mv "$f.tmp" "$f" || { rm -f "$f.tmp"; die "pack: cannot write $f"; }
    echo "$digest" > "$stamp"
    say "  ${f#"$REPO"/}: written ($(stat -c %s "$f") bytes)"
}

pack() {
    local data=${1:-$REPO/../shared/data} gguf=${GRZO_LEASE_GGUF:-$REPO/build/models/SmolLM2-135M-Instruct.Q4_1.gguf}
    local blis_so=${GRZO_LEASE_BLIS_SO:-/usr/lib/x86_64-linux-gnu/blis-openmp/libblis.so.4}
    local blis_h=${GRZO_LEASE_BLIS_H:-/usr/include/x86_64-linux-gnu/blis-openmp/blis.h}
    local openblas=${GRZO_LEASE_OPENBLAS:-/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0}
    local G=$REPO/.gpu exclude stage f g cut sum list tree n total over=0 call
    # everything it reads, before anything is written
    command -v git > /dev/null && git -C "$REPO" rev-parse --git-dir > /dev/null 2>&1 ||
        die "pack: $REPO is not a git checkout (the device tool counts what travels by git)"
    command -v xz > /dev/null || die "pack: no xz here (apt-get install xz-utils)"
    [ -s "$gguf" ] || die "pack: no GGUF at $gguf: fetch it in $REPO with '. .ci/deps.sh; grzo_fetch_smollm2' (pip, from PyPI)"
    [ -s "$blis_so" ] && [ -s "$blis_h" ] ||
        die "pack: no BLIS (OpenMP build) at $blis_so and $blis_h: apt-get install libblis4-openmp libblis-openmp-dev (Debian 12)"
    [ -s "$openblas" ] || die "pack: no OpenBLAS (OpenMP build) at $openblas: apt-get install libopenblas0-openmp (Debian 12)"
    [ -d "$data/SST-2" ] && [ -d "$data/RTE" ] || die "pack: no SST-2 and RTE folders in $data (name the folder that holds them: lease.sh pack DATA_DIR)"
    # .gpu/ ignored: else it would travel with every call, far over the limit
    [ -z "$(git -C "$REPO" ls-files -- .gpu | head -1)" ] || die "pack: git tracks files in .gpu/ (git rm --cached -r .gpu): they would travel with every call"
    if ! git -C "$REPO" check-ignore -q .gpu/a/part.00; then
        exclude=$(git -C "$REPO" rev-parse --git-path info/exclude)
        case $exclude in /*) ;; *) exclude=$REPO/$exclude ;; esac
        mkdir -p "$(dirname "$exclude")" || die "pack: cannot create $(dirname "$exclude")"
        if [ -s "$exclude" ] && [ -n "$(tail -c 1 "$exclude")" ]; then echo >> "$exclude"; fi
        echo '/.gpu/' >> "$exclude" || die "pack: cannot write $exclude"
        say "added /.gpu/ to $exclude"
    fi
    git -C "$REPO" check-ignore -q .gpu/a/part.00 && git -C "$REPO" check-ignore -q .gpu/b/part.01 ||
        die "pack: .gpu/ is still not ignored (a '!' rule in a .gitignore?): git check-ignore -v .gpu/a/part.00"
    say "pack: $G"
    # the layout: anything else in .gpu/ (the earlier .gpu/data, a stray file) is removed
    shopt -s nullglob dotglob
    mkdir -p "$G/a" "$G/b" "$G/.pack" || die "pack: cannot create $G"
    for f in "$G"/* "$G"/a/* "$G"/b/* "$G"/.pack/stage.*; do
        case ${f#"$G"/} in a|b|.pack|a/part.00|a/cpulibs.tar.xz|b/part.01|b/sha256|b/data.tar.xz|.pack/*.src) continue ;; esac
        chmod -R u+w "$f" 2> /dev/null; rm -rf "${f:?}" || die "pack: cannot remove $f"
        say "  removed ${f#"$REPO"/} (not part of the layout)"
    done
    shopt -u nullglob dotglob
    # cpulibs.tar.xz: Debian 12's BLIS and OpenBLAS, the OpenMP builds
    stage=$(mktemp -d "$G/.pack/stage.XXXXXX") || die "pack: cannot create a folder in $G/.pack"
    mkdir -p "$stage/lib" "$stage/include" "$stage/openblas" &&
        cp -L "$blis_so" "$stage/lib/libblis.so.4" && ln -s libblis.so.4 "$stage/lib/libblis.so" &&
        cp -L "$blis_h" "$stage/include/blis.h" && cp -L "$openblas" "$stage/openblas/libopenblas.so.0" ||
        { rm -rf "$stage"; die "pack: cannot copy the libraries"; }
    {
        echo "lib/libblis.so.4: $(readlink -f "$blis_so") ($(origin "$blis_so"))"
        echo "include/blis.h: $(readlink -f "$blis_h") ($(origin "$blis_h"))"
        echo "openblas/libopenblas.so.0: $(readlink -f "$openblas") ($(origin "$openblas"))"
    } > "$stage/SOURCES"
    tar_xz "$G/a/cpulibs.tar.xz" "$stage" lib include openblas SOURCES
    rm -rf "$stage"
    # data.tar.xz: the tasks
    tar_xz "$G/b/data.tar.xz" "$data" SST-2 RTE
    # the GGUF, cut so that both calls carry the same: part.00 + cpulibs = part.01 + sha256 + data
    g=$(stat -c %s "$gguf")
    sum=$(sha256sum "$gguf" | cut -d' ' -f1)
    cut=$(( (g + $(stat -c %s "$G/b/data.tar.xz") + ${#sum} + 1 - $(stat -c %s "$G/a/cpulibs.tar.xz")) / 2 ))
    [ "$cut" -ge 1 ] && [ "$cut" -lt "$g" ] || cut=$((g / 2))
    write_if_changed "$G/a/part.00" head -c "$cut" "$gguf"
    write_if_changed "$G/b/part.01" tail -c +"$((cut + 1))" "$gguf"
    write_if_changed "$G/b/sha256" echo "$sum"
    # what each call carries, with the tree, against the limit
    list=$(tree_files)
    tree=$(printf '%s\n' "$list" | awk 'NF { s += $1 } END { print s + 0 }')
    say "the tree that travels with every call (tracked and untracked-not-ignored files$([ -d "$REPO/shared" ] && echo ', shared/')): $tree bytes ($(mib "$tree"))"
    for call in "Call A (check, build)|.gpu/a" "Calls B and C (finetune)|.gpu/b"; do
        n=$(bytes_of "$REPO/${call#*|}")
        total=$((tree + n))
        if [ "$total" -gt "$LIMIT" ]; then
            over=1
            say "${call%|*}: carry ${call#*|}, $n bytes; with the tree $total bytes ($(mib "$total")): OVER the limit of 64 MiB by $((total - LIMIT)) bytes"
        else
            say "${call%|*}: carry ${call#*|}, $n bytes; with the tree $total bytes ($(mib "$total")) of 64 MiB, $(mib $((LIMIT - total))) to spare"
        fi
    done
    if [ "$over" -eq 1 ]; then
        say "the tree's largest folders: $(printf '%s\n' "$list" | awk 'NF { p = substr($0, index($0, " ") + 1); n = split(p, d, "/")
            k = n > 2 ? d[1] "/" d[2] : (n == 2 ? d[1] : "(top level)"); s[k] += $1 } END { for (k in s) print s[k], k }' | sort -rn | head -3 |
            while read -r n f; do printf '%s %s; ' "$f" "$(mib "$n")"; done)"
        die "pack: a call would carry more than the device tool's 64 MiB (it would refuse the call): make the tree smaller, or carry less"
    fi
    say "pack: done; carry [\".gpu/a\"] in Call A, [\".gpu/b\"] in Calls B and C"
}

[ $# -ge 1 ] || usage
if [ "$1" = pack ]; then
    [ $# -le 2 ] || usage
    pack "${2:-}"
    exit 0
fi
[ $# -ge 3 ] || usage
MODE=$1 SECONDS_=$2 OUT=$3
shift 3
is_count "$SECONDS_" && [ "$SECONDS_" -ge 60 ] && [ "$SECONDS_" -le 600 ] || { echo "lease.sh: SECONDS: 60 to 600 (a call's limit), got '$SECONDS_'" >&2; usage; }
[ -d "$OUT" ] || { echo "lease.sh: OUT: no folder $OUT" >&2; usage; }
PEER=0 CPU_BENCH=0 FIT=0 JOBS=1 FT_ARGS=()
case $MODE in
    check|build) [ $# -eq 0 ] || usage ;;
    finetune)
        while [ $# -gt 0 ]; do
            case $1 in
                --peer) PEER=1; shift ;;
                --fit) FIT=1; FT_ARGS+=(--fit); shift ;;
                --cpu-bench) CPU_BENCH=1; shift ;;
                --jobs) [ $# -ge 2 ] && is_count "$2" && [ "$2" -ge 1 ] || { echo "lease.sh: --jobs: a count of 1 or more" >&2; usage; }
                        JOBS=$2; FT_ARGS+=(--jobs "$2"); shift 2 ;;
                *) echo "lease.sh: unknown option $1" >&2; usage ;;
            esac
        done
        # finetune.sh refuses it too; here before any of the lease's seconds go
        if [ "$FIT" -eq 1 ] && [ "$JOBS" -gt 1 ]; then
            echo "lease.sh: --fit with --jobs $JOBS: finetune.sh refuses it (runs sharing the GPU: four at a time ran at 0.76x the throughput of one at a time on an H200); leave --jobs out" >&2
            usage
        fi ;;
    *) usage ;;
esac

case $MODE in
check)
    [ "$(left 40)" -ge 60 ] || die "check: run.sh needs a budget of 60 s: give the call 100 s or more"
    first_half
    cpu_libs
    # the build first, so that one failing with the carried BLIS can go again without it; then
    # run.sh keeps its own stage shares inside the budget (its build is done); 40 s for the tar
    # and the reply
    if ! build_gpu "$L/oa" 40; then
        tar -C "$L/oa" -czf "$OUT/oa.tgz" . || die "cannot write $OUT/oa.tgz"
        die "the build failed ($L/oa/build.log; $OUT/oa.tgz written)"
    fi
    GRZO_GPU_BUILD=$L/build-gpu GRZO_CPU_LIBS=$CPU_LIBS bash "$RUN_SH" --budget "$(left 40)" --stages tests,bench "$L/oa"
    rc=$?
    tar -C "$L/oa" -czf "$OUT/oa.tgz" . || die "cannot write $OUT/oa.tgz"
    say "run.sh exit $rc; $OUT/oa.tgz written"
    exit "$rc" ;;
build)
    [ "$(left 20)" -ge 60 ] || die "build: run.sh needs a budget of 60 s: give the call 80 s or more"
    first_half
    cpu_libs
    build_gpu "$L/ob" 20 || die "the build failed ($L/ob/build.log)"
    say "built in $L/build-gpu ($(grep -i -m1 '^BLIS' "$L/ob/host.txt" 2> /dev/null || echo 'BLIS: see host.txt'))"
    exit 0 ;;
finetune)
    [ -x "$L/build-gpu/examples/finetune/grzo-finetune" ] || die "the machine went cold: no $L/build-gpu (start again with Call A)"
    join_gguf
    task_data
    # the libraries Call A unpacked (the build's BLIS; the cpu stage's OpenBLAS)
    CPU_LIBS=""; [ -d "$L/cpulibs" ] && CPU_LIBS=$L/cpulibs
    rc=0 pin=() cpu_pid=""
    if [ "$PEER" -eq 1 ]; then
        [ "$(left 100)" -ge 60 ] || die "--peer: the call is too short for the peer stage (100 s) and a fine-tuning"
        GRZO_GPU_BUILD=$L/build-gpu GRZO_CPU_LIBS=$CPU_LIBS GRZO_SST2_DIR=$DATA/SST-2 bash "$RUN_SH" --budget 100 --stages peer "$L/op" "$L/smol/smol.gguf" ||
            { rc=1; say "the peer stage failed (its report says why); going on with the fine-tuning"; }
        tar -C "$L/op" -czf "$OUT/op.tgz" . || die "cannot write $OUT/op.tgz"
    fi
    if [ "$CPU_BENCH" -eq 1 ]; then
        # after the peer stage (its GPU timings without a neighbour on the host); it ends before
        # the fine-tuning's runs stop (left 70, and up to 30 s more)
        if [ "$(left 100)" -lt 60 ]; then say "--cpu-bench: not run: the call is too short (run.sh needs 60 s)"
        elif ! split_cpus; then say "--cpu-bench: not run: $WHY"
        else
            say "--cpu-bench: run.sh --stages cpu on CPUs $BENCH_CPUS (at most $(left 100) s); the GPU work on CPUs $FT_CPUS"
            [ -n "$CPU_LIBS" ] || say "--cpu-bench: no $L/cpulibs (Call A had no cpulibs.tar.xz): the build has no BLIS, the stage will skip"
            rm -rf "${L:?}/oc"
            # under timeout, in a process group of its own: a step of this call that dies stops
            # it whole (the EXIT trap), not just its shell
            GRZO_GPU_BUILD=$L/build-gpu GRZO_CPU_LIBS=$CPU_LIBS GRZO_SST2_DIR=$DATA/SST-2 timeout -k 5 "$(left 70)" taskset -c "$BENCH_CPUS" \
                bash "$RUN_SH" --budget "$(left 100)" --stages cpu "$L/oc" "$L/smol/smol.gguf" > "$L/oc.log" 2>&1 &
            cpu_pid=$!
            trap 'kill "$cpu_pid" 2> /dev/null' EXIT
            pin=(taskset -c "$FT_CPUS")
        fi
    fi
    if [ ! -d "$L/ft" ]; then cp -r "$SEED" "$L/ft" || die "cannot copy $SEED to $L/ft"; fi
    # the runs stop up to 30 s after the budget (their checkpoints), then the report and the tar
    budget=$(left 70)
    [ "$budget" -ge 30 ] || die "no time left for fine-tuning ($budget s)"
    GRZO_FINETUNE=$L/build-gpu/examples/finetune/grzo-finetune \
        "${pin[@]}" bash "$FINETUNE_SH" "${FT_ARGS[@]}" --budget "$budget" "$L/smol/smol.gguf" "$DATA" "$L/ft"
    ft=$?
    tar -C "$L/ft" --exclude='checkpoint.grzo*' -czf "$OUT/ft.tgz" . || die "cannot write $OUT/ft.tgz"
    say "finetune.sh exit $ft (3: runs left); $OUT/ft.tgz written"
    if [ -n "$cpu_pid" ]; then
        wait "$cpu_pid"
        say "the cpu stage: run.sh exit $?"
        trap - EXIT
        mkdir -p "$L/oc" && cp "$L/oc.log" "$L/oc/run.log" && tar -C "$L/oc" -czf "$OUT/oc.tgz" . || die "cannot write $OUT/oc.tgz"
    fi
    [ "$ft" -eq 0 ] || [ "$ft" -eq 3 ] || exit 1
    [ "$rc" -eq 0 ] || exit 1
    exit "$ft" ;;
esac
