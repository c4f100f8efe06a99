#!/usr/bin/env python3
"""Read grzo-export's GGUF files with the `gguf` package (llama.cpp's own Python reader).

usage: gguf_read_export.py ORIGINAL F32 F16 BF16 Q8_0   (exports of one fine-tuned model)

Checks, for each export: every key-value pair of the original is present with the same
type and bytes (general.file_type excepted: it must be the written type's llama_ftype);
the tensors have the original's names, order and shapes; matrices have the requested type
and norm gains stay F32; the data is what the package's own quantizers make of the f32
export's weights, byte for byte (numpy's float16 conversion, gguf.quants for BF16 and
Q8_0: "bit-exact with ggml's reference"). Exit 0 pass, 1 fail, 77 skip (no gguf package).
"""
import sys

try:
    import numpy as np
    import gguf
    from gguf import GGMLQuantizationType as T
except ImportError as e:
    print(f"SKIP: the gguf Python package cannot be imported ({e})")
    sys.exit(77)

FILE_TYPE = {"f32": 0, "f16": 1, "bf16": 32, "q8_0": 7}
MATRIX_TYPE = {"f32": T.F32, "f16": T.F16, "bf16": T.BF16, "q8_0": T.Q8_0}
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def fields(reader):
    """key -> (types, raw bytes of the value parts), the header's virtual fields left out."""
    out = {}
    for name, f in reader.fields.items():
        if name.startswith("GGUF."):
            continue
        value_parts = [f.parts[i] for i in range(3, len(f.parts))]   # after key length, key, type
        out[name] = (list(f.types), b"".join(bytes(p.tobytes()) for p in value_parts))
    return out


def main(orig_path, paths):
    orig = gguf.GGUFReader(orig_path)
    want_fields = fields(orig)
    f32 = gguf.GGUFReader(paths["f32"])
    weights = {t.name: np.array(t.data, dtype=np.float32).reshape(-1) for t in f32.tensors}
    for kind, path in paths.items():
        r = gguf.GGUFReader(path)
        got = fields(r)
        for key, (types, raw) in want_fields.items():
            if key == "general.file_type":
                continue
            check(key in got, f"{kind}: key {key} is missing")
            check(key not in got or got[key] == (types, raw), f"{kind}: key {key} differs")
        ft = r.fields.get("general.file_type")
        check(ft is not None and int(ft.parts[-1][0]) == FILE_TYPE[kind], f"{kind}: general.file_type")
        check(len(got) == len(want_fields) + ("general.file_type" not in want_fields), f"{kind}: extra keys")
        check([t.name for t in r.tensors] == [t.name for t in orig.tensors], f"{kind}: tensor names or order")
        for t, o in zip(r.tensors, orig.tensors):
            check(list(t.shape) == list(o.shape), f"{kind}: {t.name} shape {list(t.shape)} != {list(o.shape)}")
            x = weights[t.name]
            vector = len([d for d in o.shape if d > 1]) <= 1 and t.name.endswith("norm.weight")
            want_type = T.F32 if vector else MATRIX_TYPE[kind]
            check(t.tensor_type == want_type, f"{kind}: {t.name} is {t.tensor_type.name}, expected {want_type.name}")
            if t.tensor_type != want_type:
                continue
            mine = np.asarray(t.data).view(np.uint8).reshape(-1)
            theirs = gguf.quants.quantize(x.reshape(-1, int(o.shape[0])), want_type)
            theirs = np.asarray(theirs).view(np.uint8).reshape(-1)
            check(mine.shape == theirs.shape and np.array_equal(mine, theirs),
                  f"{kind}: {t.name} bytes differ from gguf.quants.quantize ({want_type.name})")
    print(f"gguf {getattr(gguf, '__version__', '')} read the original and {len(paths)} exports:"
          f" {len(want_fields)} keys, {len(orig.tensors)} tensors each")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 6:
        print(__doc__)
        sys.exit(1)
    sys.exit(main(sys.argv[1], dict(zip(["f32", "f16", "bf16", "q8_0"], sys.argv[2:]))))
