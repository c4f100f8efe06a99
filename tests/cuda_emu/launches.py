#!/usr/bin/env python3
"""Rewrite a CUDA source for the CPU emulation (tests/cuda_emu): every kernel launch
`kernel<<<grid, block, smem, stream>>>(args)` becomes `emu_launch(emu_cfg(grid, block, smem,
stream), kernel, args)`, a loop over blocks and threads (emu.h). Nothing else changes, so the
kernels and the host code that the tests exercise are the file's own.

usage: launches.py [--cooperative] INPUT.cu OUTPUT.cpp

Default mode: each thread runs to its end, one after another. Only kernels without shared
memory or barriers run correctly this way: backends/grzo_cuda.cu's are element-wise. The
script refuses a source that uses either, rather than emulate it wrongly.

--cooperative (examples/llm/ops_cuda.cu): each thread of a block runs as a coroutine
(emu_runtime.cpp), so that __syncthreads() waits for the whole block, and a warp shuffle
(__shfl_sync, __shfl_xor_sync, __shfl_up_sync, __shfl_down_sync) or __syncwarp() for its
warp's 32 lanes (full mask: another mask is reported when the kernel runs).
`__shared__ T x[N];` becomes block-wide storage (static: blocks run one after another),
refilled with 0xFF bytes (NaN) at each block's first use; `extern __shared__ T x[];` becomes
the launch's dynamic shared memory (a heap buffer of exactly the launch's size, 0xFF at each
block). Other warp or block primitives (votes, atomics, fences, cooperative groups) and
other forms of __shared__ are refused."""
import re
import sys

# what the cooperative mode does not emulate: refused, never run wrongly
COOP_REFUSED = ("__ballot", "__any_sync", "__all_sync", "__activemask", "__match_", "__reduce_", "cooperative_groups",
                "__threadfence", "atomic", "__syncthreads_count", "__syncthreads_and", "__syncthreads_or", "__shfl(",
                "__shfl_up(", "__shfl_down(", "__shfl_xor(", "clock(", "clock64")


def rewrite_shared(src, path):
    # dynamic: extern __shared__ T name[];
    src, n_dyn = re.subn(r"extern\s+__shared__\s+(?:__align__\(\s*\d+\s*\)\s+)?([A-Za-z_][\w ]*?)\s+(\w+)\s*\[\s*\]\s*;",
                         r"\1 *const \2 = (\1 *)emu_dynamic_shared(alignof(\1));", src)
    # static: __shared__ T name[N]; (one name per declaration)
    src, n_st = re.subn(r"__shared__\s+([A-Za-z_][\w ]*?)\s+(\w+)\s*(\[[^\];]+\](?:\s*\[[^\];]+\])*)\s*;",
                        r"static \1 \2\3; emu_shared_fresh(\2, sizeof \2);", src)
    if "__shared__" in src:
        at = src.index("__shared__")
        line = src[:at].count("\n") + 1
        sys.exit(f"launches.py: {path}:{line}: a form of __shared__ this emulation does not rewrite "
                 "(one array per declaration: `__shared__ T x[N];` or `extern __shared__ T x[];`)")
    return src, n_dyn + n_st


def main():
    args = sys.argv[1:]
    coop = False
    if args and args[0] == "--cooperative":
        coop = True
        args = args[1:]
    if len(args) != 2:
        sys.exit("usage: launches.py [--cooperative] INPUT.cu OUTPUT.cpp")
    src_path, out_path = args
    src = open(src_path, encoding="utf-8").read()
    if coop:
        for word in COOP_REFUSED:
            if word in src:
                sys.exit(f"launches.py: {src_path} uses {word}: the cooperative emulation does not implement it")
        src, _ = rewrite_shared(src, src_path)
    else:
        for word in ("__shared__", "__syncthreads", "__shfl"):
            if word in src:
                sys.exit(f"launches.py: {src_path} uses {word}: threads run one after another here, so it cannot be "
                         "emulated (launches.py --cooperative runs threads as coroutines)")
    n_launches = src.count("<<<")
    src, n = re.subn(r"(\w+)<<<(.*?)>>>\(", r"emu_launch(emu_cfg(\2), \1, ", src, flags=re.S)
    if n != n_launches or n == 0:
        sys.exit(f"launches.py: rewrote {n} of {n_launches} launches in {src_path}")
    # the segment tables a kernel takes by value must hold device pointers too: the check
    # follows the type's definition
    name = src_path.replace("\\", "/")
    anchor = "} grzo__cu_segs;"
    if anchor in src:
        at = src.index(anchor) + len(anchor)
        line = src[:at].count("\n") + 1
        src = src[:at] + '\nEMU_CHECK_SEGS(grzo__cu_segs)\n#line %d "%s"' % (line + 1, name) + src[at:]
    with open(out_path, "w", encoding="utf-8") as f:
        if coop:
            f.write("#define EMU_COOPERATIVE 1\n")
        f.write('#include "emu.h"\n#line 1 "%s"\n' % name)
        f.write(src)


if __name__ == "__main__":
    main()
