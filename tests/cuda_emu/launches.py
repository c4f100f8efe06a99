#!/usr/bin/env python3
"""Rewrite a CUDA source for the CPU emulation (tests/cuda_emu): every kernel launch
`kernel<<<grid, block, smem, stream>>>(args)` becomes `emu_launch(emu_cfg(grid, block, smem,
stream), kernel, args)`, a loop over blocks and threads (emu.h). Nothing else changes, so the
kernels and the host code that the tests exercise are the file's own.

usage: launches.py INPUT.cu OUTPUT.cpp

Only kernels without shared memory or barriers run correctly this way (one thread after
another): backends/grzo_cuda.cu's are element-wise. The script refuses a source that uses
either, rather than emulate it wrongly."""
import re
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: launches.py INPUT.cu OUTPUT.cpp")
    src_path, out_path = sys.argv[1], sys.argv[2]
    src = open(src_path, encoding="utf-8").read()
    for word in ("__shared__", "__syncthreads", "__shfl"):
        if word in src:
            sys.exit(f"launches.py: {src_path} uses {word}: threads run one after another here, so it cannot be emulated")
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
        f.write('#include "emu.h"\n#line 1 "%s"\n' % name)
        f.write(src)


if __name__ == "__main__":
    main()
