#!/usr/bin/env bash
# grzo as another project gets it (tests/install/meson.build registers each case):
#   pkgconfig   configure grzo's source with --prefix inside the build folder, meson install,
#               then compile tests/install/consumer.c with `pkg-config --cflags --libs grzo`
#               (and grzo-cuda where CUDA is built) and run it
#   subproject  a consumer Meson project (tests/install/subproject) with grzo's source in its
#               subprojects/: builds and runs the same consumer, and checks that grzo builds
#               nothing the consumer does not link and installs nothing
#   files       `meson install --destdir` of this build: the headers, grzo.pc, the CLI tools
#               (and libgrzo_cuda.a, grzo-cuda.pc with CUDA), and no test or benchmark
# Usage: test_install.sh CASE WORK_DIR SOURCE_ROOT BUILD_ROOT MESON PKG_CONFIG "CC" \
#        OPENBLAS OPENMP CUDA GPU_ARCHS BLAS_PCDIR EXAMPLES
# OPENBLAS, OPENMP, CUDA: enabled|disabled, this build's findings, so that the nested
# builds make the same choices; BLAS_PCDIR: the folder of the openblas.pc this build used.
# Exit 0 pass, 1 fail, 77 skip.
set -u
case_name=$1 work=$2 src=$3 build_root=$4 meson=$5 pkgconf=$6 cc=$7
openblas=$8 openmp=$9 cuda=${10} gpu_archs=${11} blas_pcdir=${12} examples=${13}
here=$src/tests/install
[ -n "$blas_pcdir" ] && export PKG_CONFIG_PATH="$blas_pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export OMP_WAIT_POLICY=passive

die() { echo "FAIL ($case_name): $*"; exit 1; }
# run a command quietly; on failure show its output and fail with the step's name
quiet() { local what=$1; shift; local out; out=$("$@" 2>&1) || { echo "$out" | tail -30; die "$what"; }; }
# run a consumer; built with grzo-cuda, it must have the CUDA backend in it
run_consumer() {
    local out; out=$("$1" 2>&1); local rc=$?
    echo "$out"
    [ $rc = 0 ] || die "the consumer ($2) failed"
    if [ "$2" = grzo-cuda ]; then
        echo "$out" | grep -q -e "CUDA backend linked" -e "cuda backend" || die "the consumer ($2) has no CUDA backend"
    fi
}
same_options=(-Dopenblas="$openblas" -Dopenmp="$openmp" -Dcuda="$cuda" -Dgpu_archs="$gpu_archs")

rm -rf "$work" && mkdir -p "$work" || die "cannot make $work"

case $case_name in
pkgconfig)
    [ -n "$pkgconf" ] || { echo "SKIP: no pkg-config program"; exit 77; }
    prefix=$work/prefix
    quiet "meson setup --prefix=$prefix" "$meson" setup "$work/build" "$src" --prefix="$prefix" \
        "${same_options[@]}" -Dtests=false -Dexamples=false -Dbench=false
    quiet "meson install" "$meson" install -C "$work/build"
    pcdir=$(dirname "$(find "$prefix" -name grzo.pc | head -1)")
    [ -f "$pcdir/grzo.pc" ] || die "no grzo.pc under $prefix"
    export PKG_CONFIG_PATH="$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    # grzo alone, then grzo-cuda (Requires: grzo) where CUDA is built: consumer.c takes its
    # CUDA step only with grzo-cuda's -DGRZO_CUDA
    for pkg in grzo $([ "$cuda" = enabled ] && echo grzo-cuda); do
        flags=$("$pkgconf" --cflags --libs "$pkg") || die "pkg-config --cflags --libs $pkg"
        echo "pkg-config --cflags --libs $pkg: $flags"
        # the headers come from the prefix (consumer.c's own folder holds none of them)
        case " $flags " in *" -I$prefix/include/grzo "*) ;; *) die "$pkg: Cflags lack -I$prefix/include/grzo";; esac
        # shellcheck disable=SC2086  # CC and the flags are word lists
        quiet "compiling consumer.c with $pkg's flags" \
            $cc -std=c99 -Wall -Wextra -Werror -o "$work/consumer-$pkg" "$here/consumer.c" $flags
        run_consumer "$work/consumer-$pkg" "$pkg"
    done
    ;;
subproject)
    proj=$work/consumer
    cp -r "$here/subproject" "$proj" && cp "$here/consumer.c" "$proj/" &&
        ln -s "$src" "$proj/subprojects/grzo" || die "cannot set up $proj"
    # grzo-cuda is looked up only when this build has CUDA: the subproject decides it then
    quiet "meson setup of the consumer project" "$meson" setup "$proj/build" "$proj" \
        --force-fallback-for=grzo,grzo-cuda -Dgrzo:cuda="$cuda" -Dgrzo:gpu_archs="$gpu_archs" \
        -Dgrzo:openblas="$openblas" -Dgrzo:openmp="$openmp"
    quiet "building the consumer project" "$meson" compile -C "$proj/build"
    run_consumer "$proj/build/consumer" "$([ "$cuda" = enabled ] && echo grzo-cuda || echo grzo)"
    # nothing of grzo's beyond what the consumer links: no default-built target, no install
    extra=$("$meson" introspect --targets "$proj/build" | python3 -c '
import json, sys
print(" ".join(t["name"] for t in json.load(sys.stdin)
               if t.get("subproject") == "grzo" and t.get("build_by_default")))') ||
        die "meson introspect --targets"
    [ -z "$extra" ] || die "grzo as a subproject builds by default: $extra"
    installed=$("$meson" introspect --installed "$proj/build") || die "meson introspect --installed"
    [ "$installed" = "{}" ] || die "grzo as a subproject installs: $installed"
    echo "subproject: the consumer built and ran; grzo added no default target and no install"
    ;;
files)
    dest=$work/dest
    quiet "meson install --destdir" "$meson" install -C "$build_root" --no-rebuild --destdir "$dest"
    prefix=$("$meson" introspect --buildoptions "$build_root" | python3 -c '
import json, sys
print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))') || die "no prefix"
    root=$dest$prefix
    want="include/grzo/grzo.h include/grzo/backends/grzo_cpu.h include/grzo/backends/grzo_mpi.h"
    [ "$examples" = true ] && want="$want bin/grzo-export bin/grzo-finetune bin/grzo-generate bin/grzo-probe"
    [ "$cuda" = enabled ] && want="$want include/grzo/backends/grzo_cuda.h"
    for f in $want; do [ -f "$root/$f" ] || die "not installed: $f"; done
    for pc in grzo $([ "$cuda" = enabled ] && echo grzo-cuda); do
        [ -n "$(find "$root" -name "$pc.pc")" ] || die "not installed: $pc.pc"
    done
    if [ "$cuda" = enabled ]; then
        [ -n "$(find "$root" -name libgrzo_cuda.a)" ] || die "not installed: libgrzo_cuda.a"
    fi
    # programs of the source tree only: tests, benchmarks and the demo stay out of bin/
    for f in "$root"/bin/*; do
        [ -e "$f" ] || continue
        case ${f##*/} in grzo-export|grzo-finetune|grzo-generate|grzo-probe) ;; *) die "installed: bin/${f##*/}";; esac
    done
    # the installed programs load the OpenBLAS the build linked (install_rpath), not whichever
    # libopenblas.so.0 the system's alternatives select
    if [ "$openblas" = enabled ] && [ "$examples" = true ] && [ -n "$pkgconf" ]; then
        blas_libdir=$("$pkgconf" --variable=libdir openblas) || die "pkg-config --variable=libdir openblas"
        got=$(ldd "$root/bin/grzo-probe" | awk '/libopenblas/ { print $3 }')
        [ "$(dirname "$got")" -ef "$blas_libdir" ] ||
            die "the installed grzo-probe loads ${got:-no libopenblas}, not the one in $blas_libdir"
    fi
    echo "files: $(cd "$root" && find . -type f | sort | tr '\n' ' ')"
    ;;
*) die "unknown case";;
esac
echo "PASS ($case_name)"
