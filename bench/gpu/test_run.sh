#!/usr/bin/env bash
# The CPU-side logic of bench/gpu/run.sh: usage errors, a missing model file, the report
# written from an earlier run's files (--report-only) with its stage, test, benchmark,
# same-batch and fine-tuning sections (and a run folder whose name is gnuplot code, which must
# stay a name), a failed meson setup in a build folder of the user's (whose files must survive the retry),
# GRZO_CPU_LIBS's meson options (both setup tries) and its refusals, and (given grzo-finetune) a
# whole run of every stage against stand-ins for the GPU
# programs, from a checkout and with a GGUF whose paths hold spaces, so that the folders,
# paths and flags the stages hand each other are checked before a GPU machine's scarce
# minutes are; the cpu stage also with GRZO_CPU_LIBS (its OpenBLAS on LD_LIBRARY_PATH, preloaded,
# or left out, as a stand-in ldd makes the loader answer). The GPU programs themselves run only
# on a GPU machine.
# usage: test_run.sh WORK_DIR [GRZO_FINETUNE [CUDA_BUILD_DIR]]
# CUDA_BUILD_DIR: a build configured with CUDA, against which the programs run.sh builds
# (its GPU_TARGETS) are checked by name
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$1
real_ft=${2:-}
real_build=${3:-}
# bench_gpu's CSV header (bench_gpu.c's CSV_HEADER)
csv_header=shape,dtype,workload,ok,forward_ms,update_ms,total_ms,model_flops,tflops,peak_bytes,over_floor_bytes,over_floor_pct,device_used_bytes,steps,queued_ms
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work" || exit 1

bash "$here/run.sh" > "$work/usage.out" 2>&1
[ $? -eq 2 ] || fail "no arguments: want exit 2"
grep -q "usage:" "$work/usage.out" || fail "no usage line: $(cat "$work/usage.out")"
bash "$here/run.sh" "$work/out" /no/such/model.gguf > "$work/model.out" 2>&1
[ $? -eq 1 ] || fail "missing model file: want exit 1"
grep -q "no such model file" "$work/model.out" || fail "missing model file: $(cat "$work/model.out")"
[ ! -e "$work/out/report.md" ] || fail "a failed preflight wrote a report"
# --stages: a known list passes the argument checks (then the model file is checked), an
# unknown stage or a missing list is a usage error
bash "$here/run.sh" --stages bench,tune "$work/out" /no/such/model.gguf > "$work/stages.out" 2>&1
[ $? -eq 1 ] && grep -q "no such model file" "$work/stages.out" || fail "--stages bench,tune: $(cat "$work/stages.out")"
bash "$here/run.sh" --stages bench,plots "$work/out" > "$work/stages.out" 2>&1
[ $? -eq 2 ] && grep -q "unknown stage 'plots'" "$work/stages.out" || fail "--stages with an unknown stage: $(cat "$work/stages.out")"
bash "$here/run.sh" --stages attention "$work/out" /no/such/model.gguf > "$work/stages.out" 2>&1
[ $? -eq 1 ] && grep -q "no such model file" "$work/stages.out" || fail "--stages attention: $(cat "$work/stages.out")"
# the peer stage runs the GGUF's weights: without one, a usage error before anything runs
bash "$here/run.sh" --stages bench,peer "$work/out" > "$work/stages.out" 2>&1
[ $? -eq 2 ] && grep -q "peer needs the SmolLM2 GGUF" "$work/stages.out" || fail "--stages peer without a GGUF: $(cat "$work/stages.out")"
bash "$here/run.sh" --stages peer "$work/out" /no/such/model.gguf > "$work/stages.out" 2>&1
[ $? -eq 1 ] && grep -q "no such model file" "$work/stages.out" || fail "--stages peer: $(cat "$work/stages.out")"
bash "$here/run.sh" --stages build "$work/out" /no/such/model.gguf > "$work/stages.out" 2>&1
[ $? -eq 1 ] && grep -q "no such model file" "$work/stages.out" || fail "--stages build (the build alone): $(cat "$work/stages.out")"
bash "$here/run.sh" --stages bench,,tune "$work/out" > "$work/stages.out" 2>&1
[ $? -eq 2 ] && grep -q "empty stage name" "$work/stages.out" || fail "--stages with an empty name: $(cat "$work/stages.out")"
bash "$here/run.sh" --stages > "$work/stages.out" 2>&1
[ $? -eq 2 ] && grep -q "usage:" "$work/stages.out" || fail "--stages without a list: $(cat "$work/stages.out")"
# --budget: seconds, at least 60, in either order with --stages
# (0600 and 090: bash's arithmetic would read octal, or fail; a number past 64 bits would wrap)
for bad in 59 abc '' 1e3 0600 090 99999999999999999999; do
    bash "$here/run.sh" --budget "$bad" "$work/out" > "$work/budget.out" 2>&1
    [ $? -eq 2 ] && grep -q -- "--budget" "$work/budget.out" || fail "--budget '$bad': $(cat "$work/budget.out")"
done
for bad in 090 0600 x; do
    GRZO_GPU_VARIANTS=$bad bash "$here/run.sh" "$work/out" > "$work/variants.out" 2>&1
    [ $? -eq 2 ] && grep -q "GRZO_GPU_VARIANTS" "$work/variants.out" || fail "GRZO_GPU_VARIANTS=$bad: $(cat "$work/variants.out")"
done
bash "$here/run.sh" --budget 300 --stages tests "$work/out" /no/such/model.gguf > "$work/budget.out" 2>&1
[ $? -eq 1 ] && grep -q "no such model file" "$work/budget.out" || fail "--budget 300 --stages tests: $(cat "$work/budget.out")"
bash "$here/run.sh" --budget > "$work/budget.out" 2>&1
[ $? -eq 2 ] && grep -q "usage:" "$work/budget.out" || fail "--budget without seconds: $(cat "$work/budget.out")"
bash "$here/run.sh" --bugdet 300 "$work/out" > "$work/budget.out" 2>&1
[ $? -eq 2 ] && grep -q "unknown option '--bugdet'" "$work/budget.out" || fail "a misspelt option: $(cat "$work/budget.out")"

# an earlier run's files
o=$work/rep
mkdir -p "$o/bench" "$o/tune/tiny-grzo" || exit 1
echo "$csv_header" > "$o/bench/bench_gpu.csv"
printf 'T,bf16,floor,1,10,0,10,1e12,100,1000,0,0,2000,20,0\nT,bf16,grzo,1,15,1,16,1e12,60,1005,5,0.5,2000,20,0\n' >> "$o/bench/bench_gpu.csv"
printf '## grzo bench_gpu\n\n| workload | total ms |\n|---|---:|\n| GRZO | 16.0 |\n' > "$o/bench/bench_gpu.md"
{
    printf '{"step":0,"diagnose":{"b_eff":3.6312,"b_eff_se":0.31,"b_eff_lo":3.0236,"b_eff_hi":4.2388,"c_w":0.175,"c_w_se":0.021,"probes":32,"seconds":1.5}}\n'
    for s in 0 1 2; do printf '{"step":%d,"loss":%d.5,"lr":1e-4,"elapsed":%d.0}\n' "$s" $((3 - s)) $((s + 1)); done
} > "$o/tune/tiny-grzo/log.jsonl"
echo "stopped by its time budget (30 s)" > "$o/tune/tiny-grzo.status"
echo "REFUSED: grzo-finetune does not run --device cuda --dtype bf16 here: unknown option '--device'" > "$o/tune/tiny-mezo.status"
printf 'passed|42\n' > "$o/stage-build.txt"
printf 'FAILED (tests.log)|7\n' > "$o/stage-tests.txt"
printf ' 1/1 grzo:cuda / cuda_parity FAIL 1.0s\nOk:                 0\nFail:               1\n' > "$o/tests.log"
bash "$here/run.sh" --report-only "$o" > "$work/report.out" 2>&1 || fail "--report-only: $(cat "$work/report.out")"
r=$o/report.md
[ -s "$r" ] || fail "no report.md"
grep -q '^| build | passed | 42 |$' "$r" || fail "stage table: build"
grep -q '^| tests | FAILED (tests.log) | 7 |$' "$r" || fail "stage table: tests"
grep -q '^| bench | not run |' "$r" || fail "stage table: bench"
grep -q 'cuda_parity FAIL' "$r" || fail "test lines"
grep -q '^### grzo bench_gpu' "$r" || fail "the benchmark's markdown (headings one level down)"
grep -q '^| tiny-grzo | stopped by its time budget (30 s) | 3 | 3.0 | 1.00 | 3.5000 | 2.5000 |$' "$r" || fail "fine-tuning row: $(grep tiny-grzo "$r")"
grep -q '^| tiny-mezo | REFUSED: .*--device' "$r" || fail "the refusal of grzo-finetune is not reported"
grep -q '^| 0 | 3.63 | \[3.02, 4.24\] |$' "$r" || fail "the logged B_eff of tiny-grzo is not in the report"
! grep -q '^| attention |\|^## Attention' "$r" || fail "the opt-in attention stage did not run, yet the report lists it"
# the attention stage's two runs (the fused form finished both shapes, cuBLAS only the first)
mkdir -p "$o/attention/fused" "$o/attention/gemm" || exit 1
head -1 "$o/bench/bench_gpu.csv" | tee "$o/attention/fused/bench_gpu.csv" > "$o/attention/gemm/bench_gpu.csv"
printf 'S,bf16,floor,1,0,0,8.0,1e12,1,1,0,0,1,20,7.5\nS,bf16,grzo,0,0,0,0,0,0,0,0,0,0,0,0\nL,bf16,floor,1,0,0,400.5,1e12,1,1,0,0,1,20,0\n' >> "$o/attention/fused/bench_gpu.csv"
printf 'S,bf16,floor,1,0,0,6.0,1e12,1,1,0,0,1,20,4.25\nL,bf16,floor,0,0,0,0,0,0,0,0,0,0,0,0\n' >> "$o/attention/gemm/bench_gpu.csv"
printf 'passed|99\n' > "$o/stage-attention.txt"
bash "$here/run.sh" --report-only "$o" > "$work/report.out" 2>&1 || fail "--report-only with attention: $(cat "$work/report.out")"
grep -q '^| attention | passed | 99 |$' "$r" || fail "stage table: attention"
grep -q '^| S | 8.00 | 7.50 | 6.00 | 4.25 | 0.750 |$' "$r" || fail "attention row S: $(grep '^| S ' "$r")"
grep -q '^| L | 400.50 | not run | not run | not run |  |$' "$r" || fail "attention row L: $(grep '^| L ' "$r")"
! grep -q '^| peer |\|^## Same batch' "$r" || fail "the opt-in peer stage did not run, yet the report lists it"
# the peer stage's files: torch_mezo.py's table as it prints it (seconds), bench_gpu --tokens's
# CSV (milliseconds) and the batch line of its markdown
mkdir -p "$o/peer" || exit 1
{
    printf '## torch 2.5.1, transformers MeZO peer of bench_llm\n\nmodel /tmp/hf, device cuda, 1 torch threads, B = 2 examples, 7 tokens, 5 rounds, eps 0.001, lr 1e-07\n\n'
    printf '| dtype | layout | inference of 2B s | MeZO step s | MeZO / inference | peak MiB |\n|---|---|---:|---:|---:|---:|\n'
    printf '| fp32 | padded | 0.030 | 0.100 | 3.33x | 1200 |\n| fp32 | packed | 0.025 | 0.080 | 3.20x | 1100 |\n'
    printf '| bf16 | padded | 0.020 | 0.090 | 4.50x | 700 |\n| bf16 | packed | 0.015 | 0.064 | 4.27x | 650 |\n'
} > "$o/peer/torch_mezo.txt"
head -1 "$o/bench/bench_gpu.csv" > "$o/peer/bench_gpu.csv"
printf 'T (token batch),bf16,floor,1,8,0,8,1e12,1,1,0,0,1,20,0\nT (token batch),bf16,grzo,1,14,2,16,1e12,1,1,0,0,1,20,0\n' >> "$o/peer/bench_gpu.csv"
printf 'T (token batch),bf16,mezo_inplace,1,20,12,32,1e12,1,1,0,0,1,20,0\nT (token batch),bf16,fzoo,0,0,0,0,0,0,0,0,0,0,0,0\n' >> "$o/peer/bench_gpu.csv"
printf '## grzo bench_gpu\n\ndevice X; token batch /x/peer/batch.json: 2 examples, 7 tokens (bench_llm'"'"'s SST-2 prompts; loss ...); 20 steps\n' > "$o/peer/bench_gpu.md"
echo passed > "$o/peer/torch.status"
printf 'passed|61\n' > "$o/stage-peer.txt"
bash "$here/run.sh" --report-only "$o" > "$work/report.out" 2>&1 || fail "--report-only with peer: $(cat "$work/report.out")"
grep -q '^| peer | passed | 61 |$' "$r" || fail "stage table: peer"
grep -q '^## Same batch: grzo vs PyTorch MeZO$' "$r" || fail "no same-batch section"
grep -q '^token batch /x/peer/batch.json: 2 examples, 7 tokens (bench_llm.s SST-2 prompts; loss ...)\.$' "$r" || fail "the peer batch line: $(grep -n 'token batch' "$r")"
for row in '| PyTorch MeZO, fp32, padded | 100.00 | 0.160 |' '| PyTorch MeZO, fp32, packed | 80.00 | 0.200 |' \
           '| PyTorch MeZO, bf16, padded | 90.00 | 0.178 |' '| PyTorch MeZO, bf16, packed | 64.00 | 0.250 |' \
           '| grzo GRZO, bf16 | 16.00 | 1.000 |' '| grzo MeZO in place, bf16 | 32.00 | 0.500 |' \
           'grzo GRZO / PyTorch MeZO (packed): fp32 0.200x, bf16 0.250x' 'PyTorch: passed'; do
    grep -qxF -- "$row" "$r" || fail "same-batch table: no line '$row': $(sed -n '/^## Same batch/,/^## Fine/p' "$r")"
done
if python3 -c "import matplotlib" 2> /dev/null || command -v gnuplot > /dev/null; then
    [ -s "$o/tune_loss.png" ] || fail "a plotter is here but no tune_loss.png"
    grep -q '!\[tune_loss.png\]' "$r" || fail "plot not linked"
else
    grep -q 'no plots' "$r" || fail "no plotter, and the report does not say so"
fi
[ ! -e "$o/report.md.tmp" ] || fail "temporary report left behind"

# A run folder whose name would end a gnuplot string and call system(): the name stays a
# title. Through the gnuplot path (matplotlib hidden: its import fails), with the real
# gnuplot where there is one: a stand-in could not tell code that gnuplot runs.
if command -v gnuplot > /dev/null; then
    o=$work/inject
    evil="x'.system('touch PWNED').'"
    mkdir -p "$o/tune/$evil" "$work/no-matplotlib/matplotlib" "$work/inject-cwd" || exit 1
    echo 'raise ImportError("hidden by test_run.sh: the gnuplot path is under test")' > "$work/no-matplotlib/matplotlib/__init__.py"
    for s in 0 1 2; do printf '{"step":%d,"loss":%d.5,"lr":1e-4,"elapsed":%d.0}\n' "$s" $((3 - s)) $((s + 1)); done > "$o/tune/$evil/log.jsonl"
    (cd "$work/inject-cwd" && PYTHONPATH=$work/no-matplotlib bash "$here/run.sh" --report-only "$o") > "$work/inject.out" 2>&1 ||
        fail "--report-only with an odd run name: $(cat "$work/inject.out")"
    [ -z "$(find "$work" -name PWNED)" ] || fail "a run folder's name ran as gnuplot code: $(find "$work" -name PWNED)"
    [ -s "$o/tune_loss.png" ] && grep -q '!\[tune_loss.png\]' "$o/report.md" ||
        fail "gnuplot drew no tune_loss.png for an odd run name: $(cat "$o/gnuplot.log" 2> /dev/null)"
    [ -z "$(find "$o" -name '*.tmp' -o -name '.tune_loss.*')" ] || fail "the plot left temporaries: $(find "$o" -name '*.tmp' -o -name '.tune_loss.*')"
else
    echo "note: no gnuplot here: a run name's way into gnuplot is not checked"
fi

# A failed meson setup in GRZO_GPU_BUILD: a folder of the user's keeps its files through the
# retry with CUDA_PATH; a folder the script created is removed before it. Stand-ins: an nvcc
# in a toolkit folder with cuda_runtime.h, an nvidia-smi, and a meson whose setup always fails
# after making its meson-private (as a real one does) and logs what the build folder held.
sb=$work/setup-bin tk=$work/toolkit
mkdir -p "$sb" "$tk/bin" "$tk/include" || exit 1
: > "$tk/include/cuda_runtime.h"
printf '#!/bin/sh\necho "Cuda compilation tools, stand-in"\n' > "$tk/bin/nvcc"
printf '#!/bin/sh\necho "Stand-in GPU, 81559 MiB, 0.0"\n' > "$sb/nvidia-smi"
printf '#!/bin/sh\nexit 0\n' > "$sb/ninja"
cat > "$sb/meson" << EOF2
#!/bin/sh
[ "\$1" = setup ] || exit 1
echo "setup CUDA_PATH=\${CUDA_PATH:-unset}: \$(ls "\$2" 2> /dev/null | tr '\\n' ' ')" >> "$work/setup.log"
mkdir -p "\$2/meson-private" "\$2/meson-logs"
echo "meson stand-in: Dependency cuda not found" >&2
exit 1
EOF2
chmod +x "$sb"/* "$tk/bin/nvcc" || exit 1
mkdir -p "$work/user build" && echo "my notes" > "$work/user build/thesis.txt" || exit 1
: > "$work/setup.log"
env -u CUDA_PATH PATH="$sb:$tk/bin:$PATH" GRZO_GPU_BUILD="$work/user build" bash "$here/run.sh" --stages tests "$work/setup-out" > "$work/setup.out" 2>&1
[ $? -eq 1 ] && grep -q "build failed" "$work/setup.out" || fail "a failed setup: want exit 1: $(tail -3 "$work/setup.out")"
[ "$(cat "$work/user build/thesis.txt" 2> /dev/null)" = "my notes" ] || fail "a failed meson setup removed the user's build folder"
[ "$(grep -c "^setup CUDA_PATH=$tk: thesis.txt $" "$work/setup.log")" -eq 1 ] ||
    fail "the retry must run with CUDA_PATH, in the user's folder without meson's leftovers: $(cat "$work/setup.log")"
: > "$work/setup.log"
env -u CUDA_PATH PATH="$sb:$tk/bin:$PATH" GRZO_GPU_BUILD="$work/new build" bash "$here/run.sh" --stages tests "$work/setup-out" > "$work/setup.out" 2>&1
[ $? -eq 1 ] || fail "a failed setup in a new folder: want exit 1: $(tail -3 "$work/setup.out")"
[ "$(grep -c "^setup CUDA_PATH=$tk: $" "$work/setup.log")" -eq 1 ] ||
    fail "the retry in a folder the script created must start from nothing: $(cat "$work/setup.log")"

# GRZO_CPU_LIBS (lease.sh's cpulibs, unpacked): both tries of the meson setup get its include
# folder (a system one), its library folder and an rpath to it, for C, C++ and CUDA (nvcc's own
# forms), and the host line names it with the packages its SOURCES gives; a folder without
# BLIS, or with a comma in its path, is refused before anything runs. Its path has a space.
cl="$work/cpu libs"
mkdir -p "$cl/lib" "$cl/include" "$cl/openblas" || exit 1
: > "$cl/lib/libblis.so.4" && ln -s libblis.so.4 "$cl/lib/libblis.so" && echo "/* blis */" > "$cl/include/blis.h" && : > "$cl/openblas/libopenblas.so.0" || exit 1
{
    echo "lib/libblis.so.4: /usr/lib/x86_64-linux-gnu/blis-openmp/libblis.so.4 (libblis4-openmp 0.9.0-1)"
    echo "include/blis.h: /usr/include/x86_64-linux-gnu/blis-openmp/blis.h (libblis-openmp-dev 0.9.0-1)"
    echo "openblas/libopenblas.so.0: /usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblasp-r0.3.21.so (libopenblas0-openmp 0.3.21+ds-4)"
} > "$cl/SOURCES"
ab=$work/args-bin
mkdir -p "$ab" && cp "$sb/nvidia-smi" "$sb/ninja" "$ab/" || exit 1
printf '#!/bin/sh\n[ "$1" = setup ] || exit 1\nprintf "%%s\\n" "$@" -- >> "%s"\nexit 1\n' "$work/setup-args" > "$ab/meson" && chmod +x "$ab/meson" || exit 1
env -u CUDA_PATH PATH="$ab:$tk/bin:$PATH" GRZO_GPU_BUILD="$work/cpu build" GRZO_CPU_LIBS="$cl" bash "$here/run.sh" --stages tests "$work/cpu-setup" \
    > "$work/cpu-setup.out" 2>&1
[ $? -eq 1 ] || fail "GRZO_CPU_LIBS with a failing setup: want exit 1: $(tail -3 "$work/cpu-setup.out")"
want=$(printf '%s\n' setup "$work/cpu build" "$(cd "$here/../.." && pwd)" -Dcuda=enabled -Dgpu_archs=90 -Dbuildtype=release \
    "-Dc_args=['-isystem$cl/include']" "-Dcpp_args=['-isystem$cl/include']" "-Dcuda_args=['-isystem=$cl/include']" \
    "-Dc_link_args=['-L$cl/lib', '-Wl,-rpath,$cl/lib']" "-Dcpp_link_args=['-L$cl/lib', '-Wl,-rpath,$cl/lib']" \
    "-Dcuda_link_args=['-L$cl/lib', '-Xlinker=-rpath=$cl/lib']" --)
[ "$(cat "$work/setup-args" 2> /dev/null)" = "$want"$'\n'"$want" ] ||
    fail "GRZO_CPU_LIBS: the meson setup's arguments (both tries): $(cat "$work/setup-args" 2> /dev/null)"
grep -qxF "GRZO_CPU_LIBS: $cl (libblis4-openmp 0.9.0-1, libopenblas0-openmp 0.3.21+ds-4)" "$work/cpu-setup/host.txt" ||
    fail "GRZO_CPU_LIBS: the host line: $(cat "$work/cpu-setup/host.txt")"
GRZO_CPU_LIBS="$work/nowhere" bash "$here/run.sh" --stages tests "$work/cpu-setup" > "$work/cpu-setup.out" 2>&1
[ $? -eq 1 ] && grep -q "GRZO_CPU_LIBS=$work/nowhere: no lib/libblis.so and include/blis.h there" "$work/cpu-setup.out" ||
    fail "GRZO_CPU_LIBS without BLIS: $(cat "$work/cpu-setup.out")"
for bad in "a,b" "a:b"; do
    mkdir -p "$work/$bad" && cp -a "$cl/lib" "$cl/include" "$work/$bad/" || exit 1
    GRZO_CPU_LIBS="$work/$bad" bash "$here/run.sh" --stages tests "$work/cpu-setup" > "$work/cpu-setup.out" 2>&1
    [ $? -eq 1 ] && grep -q "must not hold a comma, a colon" "$work/cpu-setup.out" || fail "GRZO_CPU_LIBS=$work/$bad: $(cat "$work/cpu-setup.out")"
done

# ---- every stage, end to end, against stand-ins ---------------------------------------------------
# On PATH: nvcc and nvidia-smi that say a GPU is here, a meson whose 'test' reports one
# passing cuda test, and a ninja that builds nothing but, given CUDA_BUILD_DIR, refuses a
# target that build does not have. In the build folder: a ninja file, a test_cuda, a
# bench_gpu that refuses an option bench_gpu.c does not parse and, as the real one does,
# creates only the last folder of --out; a bench_llm and a grzo-export that check what the peer
# stage hands them (the GGUF, the SST-2 file, the 0-step run's checkpoint) and write a batch and
# a Hugging Face folder; and a grzo-finetune that runs the real CPU one with --device cpu
# --dtype f32 and 3 steps (0 stay 0), so that the tune and peer stages' flags meet the real
# parser (a GGUF, which it checks is there, becomes stories260K). The peer stage's
# torch_mezo.py is the real one. The checkout (a copy of run.sh and torch_mezo.py beside the
# real tests/), the build folder, the GGUF and $TMPDIR all have a space in their paths.
if [ -z "$real_ft" ]; then
    echo "ok: run.sh CPU-side logic (the stand-in run of every stage needs grzo-finetune: not built here)"
    exit 0
fi
[ -x "$real_ft" ] || fail "no grzo-finetune at $real_ft"
sb=$work/standin-bin B="$work/standin build" repo="$work/a checkout" gguf="$work/models dir/smol.gguf"
mkdir -p "$sb" "$B/tests" "$B/bench" "$B/examples/finetune" "$B/examples/llm" "$repo/bench/gpu" "$(dirname "$gguf")" || exit 1
cp "$here/run.sh" "$repo/bench/gpu/run.sh" && cp "$here/../torch_mezo.py" "$repo/bench/torch_mezo.py" && ln -s "$(cd "$here/../../tests" && pwd)" "$repo/tests" && echo "GGUF" > "$gguf" || exit 1
printf '#!/bin/sh\nexit 0\n' > "$sb/nvcc"
if [ -n "$real_build" ]; then
    ninja -C "$real_build" -t query tests/test_cuda > /dev/null 2>&1 || fail "$real_build: no tests/test_cuda (not a CUDA build)"
fi
cat > "$sb/ninja" << EOF2
#!/usr/bin/env bash
real_ninja="$(command -v ninja)" real_build="$real_build"
EOF2
cat >> "$sb/ninja" << 'EOF2'
[ "$1" = -C ] && shift 2
[ "$1" = -t ] && shift 2   # "-t query T": T is checked below like a target to build
[ $# -gt 0 ] || { echo "stand-in ninja: run.sh builds named targets only (GPU_TARGETS)" >&2; exit 1; }
for t in "$@"; do
    [ -z "$real_build" ] || "$real_ninja" -C "$real_build" -t query "$t" > /dev/null 2>&1 \
        || { echo "ninja: error: unknown target '$t'" >&2; exit 1; }
done
echo "[1/1] stand-in: $*"
EOF2
printf '#!/bin/sh\necho "Stand-in GPU, 81559 MiB, 0.0"\n' > "$sb/nvidia-smi"
# ldd: an OpenBLAS file in a folder openblas/ (the carried one) needs libgomp; a program loads
# libopenblas.so.0 from the first LD_LIBRARY_PATH folder holding one (as under a RUNPATH), or the
# machine's whatever LD_LIBRARY_PATH says (STANDIN_RPATH=1: an RPATH), or the preloaded one;
# libblis.so.4 from $STANDIN_BLIS; $STANDIN_MISSING is not found where the carried OpenBLAS is in
cat > "$sb/ldd" << 'EOF2'
#!/usr/bin/env bash
[ "$1" = --version ] && { echo "ldd (GNU libc) 2.39"; exit 0; }
case $1 in
    */openblas/libopenblas.so.0) printf '\tlibgomp.so.1 => /lib/x86_64-linux-gnu/libgomp.so.1 (0x0)\n'; exit 0 ;;
    *.so*) exit 0 ;;
esac
ob=/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0
if [ -n "${LD_PRELOAD:-}" ]; then printf '\t%s (0x0)\n' "${LD_PRELOAD%% *}"; ob=""
elif [ -z "${STANDIN_RPATH:-}" ]; then
    IFS=: read -r -a dirs <<< "${LD_LIBRARY_PATH:-}"
    for d in "${dirs[@]}"; do [ -e "$d/libopenblas.so.0" ] && { ob=$d/libopenblas.so.0; break; }; done
fi
[ -z "$ob" ] || printf '\tlibopenblas.so.0 => %s (0x0)\n' "$ob"
[ -z "${STANDIN_BLIS:-}" ] || printf '\tlibblis.so.4 => %s (0x0)\n' "$STANDIN_BLIS"
case $ob in */openblas/libopenblas.so.0|"") [ -z "${STANDIN_MISSING:-}" ] || printf '\t%s => not found\n' "$STANDIN_MISSING" ;; esac
exit 0
EOF2
cat > "$sb/meson" << 'EOF2'
#!/bin/sh
[ "$1" = test ] || { echo "stand-in meson: only 'meson test' (got $*)" >&2; exit 1; }
printf ' 1/1 grzo:cuda / test_cuda        OK              0.50s\n\nOk:                 1\nFail:               0\nSkipped:            0\n'
EOF2
: > "$B/build.ninja"
# the CPU side of a Meson summary, as meson-log.txt holds it (the host line's second part)
mkdir -p "$B/meson-logs" && printf 'x\n  grzo 0.1.0\n\n  grzo 0.1.0\n    BLIS (fused perturbed GEMM): True\n    GEMM kernel                : stand-in kernel\n    OpenBLAS                   : True\n    OpenBLAS variant           : OpenMP build\n    OpenMP                     : True\n    MPI (data parallelism)     : False\n\n' > "$B/meson-logs/meson-log.txt"
printf '#!/bin/sh\nexit 0\n' > "$B/tests/test_cuda"
# A stand-in for one of the C programs: it refuses an option SRC does not parse, as the real
# one would, takes each option's value into opt[--name], then runs BODY.
standin() {
    local path=$1 src=$2 body=$3
    {
        echo '#!/usr/bin/env bash'
        printf 'src=%q csv_header=%q gguf=%q\n' "$src" "$csv_header" "$gguf"
        cat << 'EOF2'
declare -A opt
me=$(basename "$0")
while [ $# -gt 0 ]; do
    grep -q -e "(a, \"$1\")" -e "{\"$1\", " "$src" || { echo "$me: unknown option '$1'" >&2; exit 2; }
    case $1 in --queued) opt[$1]=1; shift; continue ;; esac
    [ $# -ge 2 ] || { echo "$me: $1 needs a value" >&2; exit 2; }
    opt[$1]=$2
    shift 2
done
EOF2
        echo "$body"
    } > "$path" && chmod +x "$path"
}
# bench_gpu; with --tokens (the peer stage) only on the batch the stand-in bench_llm wrote and the
# GGUF run.sh was given, adding the rows the same-batch table reads
standin "$B/bench/bench_gpu" "$here/../bench_gpu.c" '
out=${opt[--out]:-bench_gpu_out} batch="B = 16 examples x 2 candidates, contexts of ~256 tokens"
mkdir "$out" 2> /dev/null || [ -d "$out" ] || { echo "bench_gpu: cannot create $out" >&2; exit 1; }
echo "$csv_header" > "$out/bench_gpu.csv"
echo "S,bf16,floor,1,0,0,8.0,1e12,1,1,0,0,1,20,7.5" >> "$out/bench_gpu.csv"
if [ -n "${opt[--tokens]:-}" ]; then
    [ "${opt[--model]:-}" = "$gguf" ] || { echo "$me: --tokens beside --model \"${opt[--model]:-}\", not the GGUF" >&2; exit 1; }
    grep -q "\"candidates\": \[5, 6\]" "${opt[--tokens]}" || { echo "$me: --tokens ${opt[--tokens]}: not bench_llm'"'"'s batch" >&2; exit 1; }
    batch="token batch ${opt[--tokens]}: 2 examples, 7 tokens (stand-in)"
    printf "T,bf16,grzo,1,14,2,16,1e12,1,1,0,0,1,20,0\nT,bf16,mezo_inplace,1,20,12,32,1e12,1,1,0,0,1,20,0\n" >> "$out/bench_gpu.csv"
fi
printf "## grzo bench_gpu\n\n%s\n\n| workload | total ms |\n|---|---:|\n| floor | 8.0 |\n" "$batch" > "$out/bench_gpu.md"
echo "  S floor 8.0 ms"'
# bench_llm: the GGUF and an SST-2 file in; with --dump-tokens a token batch out (torch_mezo.py
# reads it), else (the cpu stage) its tables, with the rounds it was given
standin "$B/bench/bench_llm" "$here/../bench_llm.c" '
[ "${opt[--model]:-}" = "$gguf" ] || { echo "$me: --model \"${opt[--model]:-}\", not the GGUF" >&2; exit 1; }
[ -s "${opt[--data]:-}" ] || { echo "$me: --data \"${opt[--data]:-}\": no SST-2 file there" >&2; exit 1; }
[ -n "${opt[--dump-tokens]:-}" ] || { printf "## grzo bench_llm\n\n%s rounds on %s\n\nlibraries: LD_LIBRARY_PATH=%s LD_PRELOAD=%s\n" "${opt[--rounds]:-3}" "${opt[--data]}" "${LD_LIBRARY_PATH:-}" "${LD_PRELOAD:-}"; exit 0; }
printf "{\"candidates\": [5, 6], \"synthetic\": false, \"examples\": [\n  {\"label\": 1, \"tokens\": [1, 2, 3]},\n  {\"label\": 0, \"tokens\": [4, 5, 6, 7]}\n]}\n" > "${opt[--dump-tokens]}"'
# bench_mlp (the cpu stage): its tables, with the rounds it was given
standin "$B/bench/bench_mlp" "$here/../bench_mlp.c" 'printf "## grzo bench_mlp\n\n%s rounds\n\nlibraries: LD_LIBRARY_PATH=%s LD_PRELOAD=%s\n" "${opt[--rounds]:-15}" "${LD_LIBRARY_PATH:-}" "${LD_PRELOAD:-}"'
# grzo-export: the checkpoint grzo-finetune (the real one, 0 steps) wrote, into a Hugging Face folder
standin "$B/examples/llm/grzo-export" "$here/../../examples/llm/export.c" '
[ "${opt[--model]:-}" = "$gguf" ] || { echo "$me: --model \"${opt[--model]:-}\", not the GGUF" >&2; exit 1; }
[ -s "${opt[--checkpoint]:-}" ] || { echo "$me: --checkpoint \"${opt[--checkpoint]:-}\": no checkpoint there" >&2; exit 1; }
[ "${opt[--format]:-}" = safetensors ] || { echo "$me: --format \"${opt[--format]:-}\", not safetensors" >&2; exit 1; }
mkdir "${opt[--out]}" && echo "{}" > "${opt[--out]}/config.json" && : > "${opt[--out]}/model.safetensors"'
cat > "$B/examples/finetune/grzo-finetune" << EOF2
#!/usr/bin/env bash
real="$real_ft" data="$(cd "$here/../../tests/data" && pwd)"
EOF2
cat >> "$B/examples/finetune/grzo-finetune" << 'EOF2'
args=()
while [ $# -gt 0 ]; do
    case $1 in
        --model) [ -f "$2" ] || { echo "grzo-finetune stand-in: no such model file '$2'" >&2; exit 1; }
                 case $2 in *.gguf) args+=(--model "$data/stories260K.bin" --tokenizer "$data/tok512.bin") ;; *) args+=("$1" "$2") ;; esac
                 shift 2 ;;
        --device) args+=(--device cpu); shift 2 ;;
        --dtype) args+=(--dtype f32); shift 2 ;;
        --steps) [ "$2" = 0 ] && args+=(--steps 0) || args+=(--steps 3); shift 2 ;;   # the peer stage's 0 steps stay 0
        *) args+=("$1"); shift ;;
    esac
done
exec "$real" "${args[@]}"
EOF2
chmod +x "$sb"/* "$B/tests/test_cuda" "$B/examples/finetune/grzo-finetune" || exit 1
# The peer stage's torch_mezo.py is the real one (it checks its arguments and the batch), with a
# torch that cannot be imported: the case of a device without torch. The stand-in torch records
# what torch_mezo.py was given and whether --model was an exported folder while it ran.
mkdir -p "$work/no-torch/torch" "$work/tmp dir" || exit 1
cat > "$work/no-torch/torch/__init__.py" << 'EOF2'
import os, sys
a = sys.argv
hf = a[a.index("--model") + 1] if "--model" in a else ""
with open(os.environ["STANDIN_TORCH_LOG"], "a") as f:
    f.write("argv %s\nconfig.json %s\n" % (" ".join(a[1:]), "found" if os.path.isfile(os.path.join(hf, "config.json")) else "missing"))
raise ImportError("hidden by test_run.sh: a device without torch")
EOF2
o=$work/standin-out
PATH=$sb:$PATH GRZO_GPU_BUILD=$B GRZO_SST2_DIR="$here/../../tests/data/tasks/SST-2" OMP_NUM_THREADS=1 \
    PYTHONPATH="$work/no-torch" STANDIN_TORCH_LOG="$work/torch.log" TMPDIR="$work/tmp dir" \
    bash "$repo/bench/gpu/run.sh" --budget 300 --stages tests,bench,attention,peer,tune "$o" "$gguf" > "$work/standin.out" 2>&1
st=$?
r=$o/report.md
[ $st -eq 0 ] || fail "stand-in run: exit $st: $(tail -15 "$work/standin.out")"
# 300 s over the five stages' 790: every cap scaled by 30/79
grep -q 'budget 300 s; caps: build 56, tests 34, bench 64, attention 68, peer 34, cpu 0, tune 34, report 7$' "$work/standin.out" \
    || fail "stand-in run: --budget 300 did not scale the caps: $(grep 'budget' "$work/standin.out")"
grep -q 'stand-in: tests/test_cuda .*examples/finetune/grzo-finetune' "$o/build.log" || fail "stand-in run: the build named no targets"
# the host: its CPU, its toolchain and BLAS libraries, then the build's CPU side, one line in the report
grep -q '^Host: .*, [0-9]* cores.*; toolchain: gcc [^;]*; glibc [^;]*; pkg-config [^;]*; libopenblas: [^;]*; libblis: [^;]*; BLIS (fused perturbed GEMM): True; GEMM kernel: stand-in kernel; OpenBLAS: True; OpenBLAS variant: OpenMP build; OpenMP: True$' "$r" ||
    fail "stand-in run: the host line: $(grep '^Host' "$r")"
# --stages build (lease.sh build): the build alone, then the report
PATH=$sb:$PATH GRZO_GPU_BUILD=$B bash "$repo/bench/gpu/run.sh" --budget 100 --stages build "$work/build-only" > "$work/build-only.out" 2>&1 ||
    fail "--stages build: $(tail -5 "$work/build-only.out")"
grep -q '^| build | passed |' "$work/build-only/report.md" && grep -q '^| tests | not run |' "$work/build-only/report.md" &&
    grep -q '^| tune | not run |' "$work/build-only/report.md" && grep -q 'stand-in: tests/test_cuda' "$work/build-only/build.log" ||
    fail "--stages build: $(grep '^| ' "$work/build-only/report.md" | head -8)"
# --stages cpu: bench_mlp, then bench_llm on the GGUF and SST-2's train.tsv, into the report's
# section on the host's CPU
PATH=$sb:$PATH GRZO_GPU_BUILD=$B GRZO_SST2_DIR="$here/../../tests/data/tasks/SST-2" bash "$repo/bench/gpu/run.sh" --budget 100 --stages cpu \
    "$work/cpu-only" "$gguf" > "$work/cpu-only.out" 2>&1 || fail "--stages cpu: $(tail -5 "$work/cpu-only.out")"
c=$work/cpu-only/report.md
grep -q '^| cpu | passed |' "$c" && grep -q '^| tests | not run |' "$c" && grep -q '^## The CPU backend on this host' "$c" &&
    grep -qx '### grzo bench_mlp' "$c" && grep -qx '15 rounds' "$c" && grep -qx '### grzo bench_llm' "$c" &&
    grep -qx "5 rounds on /.*/SST-2/train.tsv" "$c" ||
    fail "--stages cpu: $(sed -n '/^## The CPU/,$p' "$c" | head -20; grep '^| ' "$c" | head -8)"
grep -qx 'libopenblas.so.0: /usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0 (not the OpenMP build)' "$work/cpu-only/cpu/libs.txt" &&
    ! grep -q '^environment' "$work/cpu-only/cpu/libs.txt" &&
    grep -q "^The libraries bench_mlp and bench_llm loaded (ldd, in the stage's environment): libopenblas.so.0: /usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0 (not the OpenMP build); libblis.so.4: not loaded.$" "$c" ||
    fail "--stages cpu: the libraries loaded: $(cat "$work/cpu-only/cpu/libs.txt"; grep '^The libraries' "$c")"
# With GRZO_CPU_LIBS (and Meson's summary in lower case, as Meson 1.12 writes it): bench_mlp and
# bench_llm run with its OpenMP OpenBLAS first on LD_LIBRARY_PATH where that wins (a RUNPATH),
# preloaded where it does not (an RPATH, STANDIN_RPATH=1; not from a path with a space, which
# LD_PRELOAD would split), left out where it cannot load (STANDIN_MISSING); cpu/libs.txt and the
# report say which was loaded. The preloading needs a copy of the folder at a path without a space.
sed -i 's/: True$/: true/' "$B/meson-logs/meson-log.txt"
hows="runpath rpath-space missing"
case $work in
    *[[:space:]]*) echo "note: WORK_DIR has a space: the cpu stage's preloading is not checked" ;;
    *) cp -a "$cl" "$work/cpulibs" && hows="$hows rpath" || exit 1 ;;
esac
for how in $hows; do
    oc=$work/cpu-$how
    rp=; case $how in rpath*) rp=1 ;; esac
    miss=; [ $how = missing ] && miss=libgfortran.so.5
    d=$cl; [ $how = rpath ] && d=$work/cpulibs
    PATH=$sb:$PATH GRZO_GPU_BUILD=$B GRZO_CPU_LIBS="$d" STANDIN_BLIS="$d/lib/libblis.so.4" STANDIN_RPATH=$rp STANDIN_MISSING=$miss \
        GRZO_SST2_DIR="$here/../../tests/data/tasks/SST-2" bash "$repo/bench/gpu/run.sh" --budget 100 --stages cpu "$oc" "$gguf" > "$oc.out" 2>&1 ||
        fail "--stages cpu with GRZO_CPU_LIBS ($how): $(tail -5 "$oc.out")"
    grep -q '^| cpu | passed |' "$oc/report.md" && grep -qxF "libblis.so.4 (bench_mlp): $d/lib/libblis.so.4" "$oc/host.txt" ||
        fail "--stages cpu with GRZO_CPU_LIBS ($how): $(grep '^| cpu' "$oc/report.md"; cat "$oc/host.txt")"
    case $how in
        runpath) want="libopenblas.so.0: $cl/openblas/libopenblas.so.0 (OpenMP build)|libblis.so.4: $cl/lib/libblis.so.4|environment: LD_LIBRARY_PATH=$cl/openblas"
                 ran="libraries: LD_LIBRARY_PATH=$cl/openblas*LD_PRELOAD=" ;;
        rpath)   want="libopenblas.so.0: $d/openblas/libopenblas.so.0 (OpenMP build)|libblis.so.4: $d/lib/libblis.so.4|environment: LD_LIBRARY_PATH=$d/openblas* LD_PRELOAD=$d/openblas/libopenblas.so.0"
                 ran="libraries: LD_LIBRARY_PATH=$d/openblas*LD_PRELOAD=$d/openblas/libopenblas.so.0" ;;
        rpath-space) want="GRZO_CPU_LIBS's OpenBLAS not preloaded: its path holds a space, at which LD_PRELOAD splits|libopenblas.so.0: /usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0 (not the OpenMP build)|libblis.so.4: $cl/lib/libblis.so.4|environment: LD_LIBRARY_PATH=$cl/openblas*"
                 ran="libraries: LD_LIBRARY_PATH=$cl/openblas*LD_PRELOAD=" ;;
        missing) want="GRZO_CPU_LIBS's OpenBLAS left out: it needs libgfortran.so.5, which this machine lacks|libopenblas.so.0: /usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0 (not the OpenMP build)|libblis.so.4: $cl/lib/libblis.so.4"
                 ran="libraries: LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-} LD_PRELOAD=" ;;
    esac
    # shellcheck disable=SC2053   # (the patterns' * are meant)
    [[ "$(paste -sd'|' "$oc/cpu/libs.txt")" == $want ]] || fail "--stages cpu with GRZO_CPU_LIBS ($how): libs.txt: $(cat "$oc/cpu/libs.txt")"
    # shellcheck disable=SC2053
    [[ "$(grep '^libraries' "$oc/cpu/bench_mlp.md")" == $ran ]] && [[ "$(grep '^libraries' "$oc/cpu/bench_llm.md")" == $ran ]] ||
        fail "--stages cpu with GRZO_CPU_LIBS ($how): what the programs ran with: $(grep -h '^libraries' "$oc/cpu/"*.md)"
    grep -qF "The libraries bench_mlp and bench_llm loaded (ldd, in the stage's environment): $(head -1 "$oc/cpu/libs.txt");" "$oc/report.md" ||
        fail "--stages cpu with GRZO_CPU_LIBS ($how): the report: $(grep '^The libraries' "$oc/report.md")"
done
sed -i 's/: true$/: True/' "$B/meson-logs/meson-log.txt"
# a build without BLIS (the Meson summary says so): the stage is skipped, said why, and passes
sed -i 's/BLIS (fused perturbed GEMM): True/BLIS (fused perturbed GEMM): False/' "$B/meson-logs/meson-log.txt"
PATH=$sb:$PATH GRZO_GPU_BUILD=$B bash "$repo/bench/gpu/run.sh" --budget 100 --stages cpu "$work/cpu-skip" "$gguf" > "$work/cpu-skip.out" 2>&1 ||
    fail "--stages cpu without BLIS must pass: $(tail -5 "$work/cpu-skip.out")"
sed -i 's/BLIS (fused perturbed GEMM): False/BLIS (fused perturbed GEMM): True/' "$B/meson-logs/meson-log.txt"
grep -q "^| cpu | skipped: this build has no BLIS or no OpenBLAS (host.txt): not issue 10's kernels |" "$work/cpu-skip/report.md" &&
    grep -q "^The stage: skipped: this build has no BLIS" "$work/cpu-skip/report.md" && [ ! -e "$work/cpu-skip/cpu/bench_mlp.md" ] ||
    fail "--stages cpu without BLIS: $(grep '^| cpu' "$work/cpu-skip/report.md"; ls "$work/cpu-skip/cpu")"
# the peer stage: the batch went from bench_llm to both programs, the export to torch_mezo.py
# (which skipped: no torch), the scratch folder (checkpoint, export) is gone, the table has grzo's side
if command -v python3 > /dev/null; then
    grep -q "^skipped: SKIP: torch_mezo.py needs torch and transformers (hidden by test_run.sh" "$o/peer/torch.status" ||
        fail "stand-in run: peer: PyTorch missing must read skipped: $(cat "$o/peer/torch.status" 2> /dev/null)"
    grep -qxF "argv --model $work/tmp dir/$(sed -n 's|^argv --model .*/tmp dir/\([^/]*\)/hf .*|\1|p' "$work/torch.log")/hf --tokens $o/peer/batch.json --device cuda" "$work/torch.log" &&
        grep -qx "config.json found" "$work/torch.log" || fail "stand-in run: peer: what torch_mezo.py was given: $(cat "$work/torch.log" 2> /dev/null)"
    grep -qxF "PyTorch: $(cat "$o/peer/torch.status")" "$r" || fail "stand-in run: the report does not say PyTorch was skipped"
else
    grep -qx "skipped: no python3" "$o/peer/torch.status" || fail "stand-in run: peer without python3: $(cat "$o/peer/torch.status")"
fi
grep -q '^| peer | passed, PyTorch skipped (peer/torch.status) | [0-9]* |$' "$r" || fail "stand-in run: stage peer: $(grep '^| peer ' "$r")"
[ -z "$(ls -A "$work/tmp dir")" ] || fail "stand-in run: peer left its scratch behind: $(ls -A "$work/tmp dir")"
grep -qxF "token batch $o/peer/batch.json: 2 examples, 7 tokens (stand-in)." "$r" || fail "stand-in run: the peer batch line: $(grep 'token batch' "$r")"
grep -qxF '| grzo GRZO, bf16 | 16.00 | 1.000 |' "$r" && grep -qxF '| grzo MeZO in place, bf16 | 32.00 | 0.500 |' "$r" ||
    fail "stand-in run: the same-batch table: $(sed -n '/^## Same batch/,/^## Fine/p' "$r")"
for s in build tests bench attention tune; do
    grep -q "^| $s | passed | [0-9]* |$" "$r" || fail "stand-in run: stage $s did not pass: $(grep "^| $s " "$r")"
done
grep -q '^| S | 8.00 | 7.50 | 8.00 | 7.50 | 1.000 |$' "$r" || fail "stand-in run: attention table: $(grep '^| S ' "$r")"
for run in stories260K-grzo stories260K-mezo stories260K-fzoo smollm2-grzo smollm2-mezo smollm2-fzoo; do
    [ "$(cat "$o/tune/$run.status")" = "done" ] || fail "stand-in run: $run: $(cat "$o/tune/$run.status")"
    [ "$(grep -c '"loss"' "$o/tune/$run/log.jsonl")" -eq 3 ] || fail "stand-in run: $run did not log 3 steps"
done
grep -q '"diagnose"' "$o/tune/stories260K-grzo/log.jsonl" || fail "stand-in run: GRZO's run logged no B_eff"
echo "ok: run.sh CPU-side logic, and every stage against stand-ins${real_build:+ (the targets to build checked against $real_build)}"
