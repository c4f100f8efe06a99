#!/usr/bin/env python3
"""llama_ref.py - an independent reference for the grzo LLM forward: a minimal GGUF v3
writer and reader (F32/F16 tensors), Hugging Face folders (config.json + safetensors,
written and read with the `safetensors` package), and a Llama forward in numpy (float64).

It shares no code with the C side (examples/llm): the C test builds a random model with
`make` (GGUF) or `make-hf` (a Hugging Face folder), loads the same file with its own
loader, and compares its logits with `logits`.

    python3 llama_ref.py make    --out tiny.gguf --variant gqa_tied_f32 --seed 1
    python3 llama_ref.py make-hf --out DIR --variant hf_llama3_untied_f32 --seed 1
    python3 llama_ref.py logits  --model tiny.gguf|DIR --tokens seqs.txt --out logits.f32

The Hugging Face forward follows transformers' LlamaForCausalLM on the folder's own
tensors: rotary embeddings rotate the two halves of each head (i, i + head_dim/2) with
transformers' inverse frequencies (Llama-3.1's "llama3" rope_scaling included), so it
checks the C loader's q/k row permutation rather than repeating it.

seqs.txt: one sequence per line, token ids separated by spaces. logits.f32: the logits of
every position of every sequence, in order, as little-endian float32 (rows of vocab).

Forward (the llama2.c / llama.cpp "llama" convention): x = E[tok]; per layer
x += Wo attn(rope(Wq n(x)), rope(Wk n(x)), Wv n(x)); x += W2 (silu(W1 n(x)) * W3 n(x));
logits = Wout n(x), with n(x) = g * x / sqrt(mean(x^2) + eps), rotary pairs (2i, 2i+1)
rotated by pos * theta^(-2i/head_dim), causal grouped-query attention.
"""
import argparse
import json
import os
import shutil
import struct
import sys

import numpy as np

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
ALIGNMENT = 32

# GGUF metadata value types
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL, T_STRING, T_ARRAY, T_UINT64, T_INT64, T_FLOAT64 = range(13)
SCALAR_FORMATS = {T_UINT8: "<B", T_INT8: "<b", T_UINT16: "<H", T_INT16: "<h", T_UINT32: "<I", T_INT32: "<i",
                  T_FLOAT32: "<f", T_BOOL: "<?", T_UINT64: "<Q", T_INT64: "<q", T_FLOAT64: "<d"}
# ggml tensor types
GGML_F32, GGML_F16 = 0, 1

# ---------------------------------------------------------------------------- variants
VARIANTS = {
    # grouped-query attention, tied head, fp32 tensors
    "gqa_tied_f32": dict(dim=64, hidden=160, layers=3, heads=8, kv_heads=2, head_dim=None, vocab=300, ctx=128,
                         eps=1e-5, theta=10000.0, tied=True, dtype=GGML_F32),
    # multi-head attention with head_dim * heads != dim, untied head, fp16 tensors, large theta
    "mha_untied_f16": dict(dim=48, hidden=96, layers=2, heads=4, kv_heads=4, head_dim=16, vocab=257, ctx=96,
                           eps=1e-6, theta=500000.0, tied=False, dtype=GGML_F16),
}


def random_weights(v, seed):
    """Tensors named as in GGUF, as float32 numpy arrays of shape (d_out, d_in) / (d,)."""
    rng = np.random.default_rng(seed)
    hd = v["head_dim"] or v["dim"] // v["heads"]
    qd, kvd, dim, hid = v["heads"] * hd, v["kv_heads"] * hd, v["dim"], v["hidden"]

    def mat(rows, cols):
        return (rng.uniform(-1.0, 1.0, size=(rows, cols)) / np.sqrt(cols)).astype(np.float32)

    def gain(d):
        return (1.0 + rng.uniform(-0.2, 0.2, size=d)).astype(np.float32)

    t = {"token_embd.weight": rng.uniform(-1.0, 1.0, size=(v["vocab"], dim)).astype(np.float32)}
    for l in range(v["layers"]):
        t[f"blk.{l}.attn_norm.weight"] = gain(dim)
        t[f"blk.{l}.attn_q.weight"] = mat(qd, dim)
        t[f"blk.{l}.attn_k.weight"] = mat(kvd, dim)
        t[f"blk.{l}.attn_v.weight"] = mat(kvd, dim)
        t[f"blk.{l}.attn_output.weight"] = mat(dim, qd)
        t[f"blk.{l}.ffn_norm.weight"] = gain(dim)
        t[f"blk.{l}.ffn_gate.weight"] = mat(hid, dim)
        t[f"blk.{l}.ffn_down.weight"] = mat(dim, hid)
        t[f"blk.{l}.ffn_up.weight"] = mat(hid, dim)
    t["output_norm.weight"] = gain(dim)
    if not v["tied"]:
        t["output.weight"] = mat(v["vocab"], dim)
    return t, hd

# ---------------------------------------------------------------------------- GGUF writer


def _gguf_string(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _gguf_kv(key, vtype, value):
    out = _gguf_string(key) + struct.pack("<I", vtype)
    if vtype == T_STRING:
        return out + _gguf_string(value)
    return out + struct.pack(SCALAR_FORMATS[vtype], value)


def write_gguf(path, v, tensors, head_dim):
    kvs = [
        ("general.architecture", T_STRING, "llama"),
        ("general.alignment", T_UINT32, ALIGNMENT),
        ("llama.embedding_length", T_UINT32, v["dim"]),
        ("llama.feed_forward_length", T_UINT32, v["hidden"]),
        ("llama.block_count", T_UINT32, v["layers"]),
        ("llama.attention.head_count", T_UINT32, v["heads"]),
        ("llama.attention.head_count_kv", T_UINT32, v["kv_heads"]),
        ("llama.context_length", T_UINT32, v["ctx"]),
        ("llama.attention.layer_norm_rms_epsilon", T_FLOAT32, v["eps"]),
        ("llama.rope.freq_base", T_FLOAT32, v["theta"]),
        ("llama.rope.dimension_count", T_UINT32, head_dim),
    ]
    if v["head_dim"]:
        kvs += [("llama.attention.key_length", T_UINT32, head_dim), ("llama.attention.value_length", T_UINT32, head_dim)]
    # norm gains stay F32 (as llama.cpp's converter keeps 1-D tensors)
    blobs, infos, offset = [], [], 0
    for name, arr in tensors.items():
        ttype = v["dtype"] if arr.ndim == 2 else GGML_F32
        data = arr.astype(np.float16 if ttype == GGML_F16 else np.float32).astype("<f2" if ttype == GGML_F16 else "<f4").tobytes()
        ne = list(reversed(arr.shape))             # GGUF lists dimensions innermost first
        infos.append(_gguf_string(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne)
                     + struct.pack("<IQ", ttype, offset))
        pad = (-len(data)) % ALIGNMENT
        blobs.append(data + b"\0" * pad)
        offset += len(data) + pad
    head = GGUF_MAGIC + struct.pack("<IQQ", GGUF_VERSION, len(tensors), len(kvs))
    head += b"".join(_gguf_kv(*kv) for kv in kvs) + b"".join(infos)
    head += b"\0" * ((-len(head)) % ALIGNMENT)
    with open(path, "wb") as f:
        f.write(head)
        f.write(b"".join(blobs))

# ---------------------------------------------------------------------------- GGUF reader


class Reader:
    def __init__(self, data):
        self.d, self.p = data, 0

    def take(self, fmt):
        vals = struct.unpack_from(fmt, self.d, self.p)
        self.p += struct.calcsize(fmt)
        return vals[0] if len(vals) == 1 else vals

    def string(self):
        n = self.take("<Q")
        s = self.d[self.p:self.p + n].decode("utf-8")
        self.p += n
        return s

    def value(self, vtype):
        if vtype == T_STRING:
            return self.string()
        if vtype == T_ARRAY:
            etype, n = self.take("<I"), self.take("<Q")
            return [self.value(etype) for _ in range(n)]
        return self.take(SCALAR_FORMATS[vtype])


def read_gguf(path):
    """(metadata dict, {name: float64 array shaped (d_out, d_in) or (d,)}) for F32/F16 tensors."""
    with open(path, "rb") as f:
        data = f.read()
    r = Reader(data)
    if data[:4] != GGUF_MAGIC:
        raise ValueError("not a GGUF file")
    r.p = 4
    version, n_tensors, n_kv = r.take("<I"), r.take("<Q"), r.take("<Q")
    if version != 3:
        raise ValueError(f"GGUF version {version}")
    meta = {}
    for _ in range(n_kv):
        key = r.string()
        meta[key] = r.value(r.take("<I"))
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        n_dims = r.take("<I")
        ne = [r.take("<Q") for _ in range(n_dims)]
        ttype, off = r.take("<I"), r.take("<Q")
        infos.append((name, ne, ttype, off))
    align = meta.get("general.alignment", 32)
    start = r.p + ((-r.p) % align)
    tensors = {}
    for name, ne, ttype, off in infos:
        count = int(np.prod(ne))
        if ttype == GGML_F32:
            arr = np.frombuffer(data, dtype="<f4", count=count, offset=start + off)
        elif ttype == GGML_F16:
            arr = np.frombuffer(data, dtype="<f2", count=count, offset=start + off)
        else:
            raise ValueError(f"tensor {name}: type {ttype} not supported by the reference")
        tensors[name] = arr.astype(np.float64).reshape(list(reversed(ne)))
    return meta, tensors

# ---------------------------------------------------------------------------- forward


def rms_norm(x, g, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * g


def rope(x, theta, pos=None):
    """x: (T, heads, hd) at positions pos (default 0..T-1). Rotate pairs (2i, 2i+1) by
    pos * theta^(-2i/hd)."""
    T, _, hd = x.shape
    if pos is None:
        pos = np.arange(T)
    inv = theta ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)          # (hd/2,)
    ang = np.asarray(pos, dtype=np.float64)[:, None] * inv[None, :]      # (T, hd/2)
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = a * c - b * s
    out[..., 1::2] = a * s + b * c
    return out


def forward(meta, t, tokens, cache=None):
    """Logits (T, vocab) of one sequence, in float64. With cache (a dict, empty at first), the
    tokens continue the sequence whose keys and values the cache holds, and are added to it:
    greedy decoding feeds one token at a time."""
    dim = meta["llama.embedding_length"]
    n_layers = meta["llama.block_count"]
    nh = meta["llama.attention.head_count"]
    nkv = meta.get("llama.attention.head_count_kv", nh)
    hd = meta.get("llama.attention.key_length", dim // nh)
    eps = meta.get("llama.attention.layer_norm_rms_epsilon", 1e-5)
    theta = meta.get("llama.rope.freq_base", 10000.0)
    T = len(tokens)
    n0 = cache.get("n", 0) if cache is not None else 0
    pos = np.arange(n0, n0 + T)
    x = t["token_embd.weight"][np.asarray(tokens)]
    for l in range(n_layers):
        p = f"blk.{l}."
        h = rms_norm(x, t[p + "attn_norm.weight"], eps)
        q = rope((h @ t[p + "attn_q.weight"].T).reshape(T, nh, hd), theta, pos)
        k = rope((h @ t[p + "attn_k.weight"].T).reshape(T, nkv, hd), theta, pos)
        v = (h @ t[p + "attn_v.weight"].T).reshape(T, nkv, hd)
        if cache is not None:   # the earlier positions' keys and values before these
            k = cache[("k", l)] = np.concatenate([cache[("k", l)], k]) if n0 else k
            v = cache[("v", l)] = np.concatenate([cache[("v", l)], v]) if n0 else v
        x = x + attend(q, k, v, nh, nkv, hd) @ t[p + "attn_output.weight"].T
        h = rms_norm(x, t[p + "ffn_norm.weight"], eps)
        g = h @ t[p + "ffn_gate.weight"].T
        u = h @ t[p + "ffn_up.weight"].T
        x = x + (g / (1.0 + np.exp(-g)) * u) @ t[p + "ffn_down.weight"].T
    if cache is not None:
        cache["n"] = n0 + T
    head = t.get("output.weight", t["token_embd.weight"])
    return rms_norm(x, t["output_norm.weight"], eps) @ head.T

# ---------------------------------------------------------------------------- Hugging Face folders

LLAMA3_SCALING = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 64}
HF_VARIANTS = {
    # Llama-3 shaped: GQA, rope_scaling llama3 (original context 64: wavelengths below 16 are kept, above 64
    # divided by factor, between blended; each variant with scaling has pairs in at least two of the bands and
    # the bf16 and sharded ones in all three), untied head, F32, one model.safetensors
    "hf_llama3_untied_f32": dict(dim=64, hidden=160, layers=2, heads=8, kv_heads=2, head_dim=None, vocab=300, ctx=128,
                                 eps=1e-5, theta=500000.0, tied=False, dtype="F32", shards=1, scaling=LLAMA3_SCALING),
    # tied head (no lm_head.weight), BF16 tensors, head_dim 8
    "hf_llama3_tied_bf16": dict(dim=48, hidden=128, layers=2, heads=6, kv_heads=2, head_dim=None, vocab=280, ctx=128,
                                eps=1e-5, theta=10000.0, tied=True, dtype="BF16", shards=1, scaling=LLAMA3_SCALING),
    # sharded: three model-0000k-of-00003.safetensors + model.safetensors.index.json, F16, head_dim given
    # (heads * head_dim != hidden_size)
    "hf_llama3_sharded_f16": dict(dim=64, hidden=96, layers=3, heads=4, kv_heads=2, head_dim=12, vocab=260, ctx=96,
                                  eps=1e-6, theta=500000.0, tied=False, dtype="F16", shards=3, scaling=LLAMA3_SCALING),
    # Llama-2 shaped: multi-head attention, no rope_scaling (null), F32
    "hf_llama2_mha_f32": dict(dim=32, hidden=64, layers=2, heads=4, kv_heads=4, head_dim=None, vocab=256, ctx=80,
                              eps=1e-5, theta=10000.0, tied=False, dtype="F32", shards=1, scaling=None),
}


def hf_names(gguf_name):
    """transformers' name of a GGUF-named tensor."""
    fixed = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
             "output.weight": "lm_head.weight"}
    if gguf_name in fixed:
        return fixed[gguf_name]
    _, layer, kind, _ = gguf_name.split(".")
    sub = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
           "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
           "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}[kind]
    return f"model.layers.{layer}.{sub}.weight"


def _encode(arr, dtype):
    """(bytes, stored values as float64) of a float32 array in a safetensors dtype."""
    if dtype == "F32":
        a = arr.astype("<f4")
        return a.tobytes(), a.astype(np.float64)
    if dtype == "F16":
        a = arr.astype("<f2")
        return a.tobytes(), a.astype(np.float64)
    bits = arr.astype("<f4").view("<u4")
    bf = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype("<u2")      # round to nearest even
    return bf.tobytes(), (bf.astype("<u4") << 16).view("<f4").astype(np.float64)


def write_hf(out, v, tensors, head_dim):
    """A Hugging Face folder: config.json and the safetensors file(s), written with the safetensors package."""
    from safetensors import serialize_file
    import json
    import os
    os.makedirs(out, exist_ok=True)
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": v["dim"],
           "intermediate_size": v["hidden"], "num_hidden_layers": v["layers"], "num_attention_heads": v["heads"],
           "num_key_value_heads": v["kv_heads"], "vocab_size": v["vocab"], "max_position_embeddings": v["ctx"],
           "rms_norm_eps": v["eps"], "rope_theta": v["theta"], "tie_word_embeddings": v["tied"], "hidden_act": "silu",
           "attention_bias": False, "mlp_bias": False, "rope_scaling": v["scaling"], "bos_token_id": 1,
           "eos_token_id": 2, "torch_dtype": {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}[v["dtype"]]}
    if v["head_dim"]:
        cfg["head_dim"] = head_dim
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    entries = []
    for name, arr in tensors.items():
        data, _ = _encode(arr, v["dtype"])
        # the package's serializer names dtypes as numpy and torch do
        dtype = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}[v["dtype"]]
        entries.append((hf_names(name), {"dtype": dtype, "shape": list(arr.shape), "data": data}))
    if v["shards"] == 1:
        serialize_file(dict(entries), os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
        return
    n = v["shards"]
    weight_map = {}
    for k in range(n):
        part = entries[k::n]
        fname = f"model-{k + 1:05d}-of-{n:05d}.safetensors"
        serialize_file(dict(part), os.path.join(out, fname), metadata={"format": "pt"})
        weight_map.update({name: fname for name, _ in part})
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": sum(len(e["data"]) for _, e in entries)}, "weight_map": weight_map}, f,
                  indent=2)


def llama_cpp_permute(w, n_head):
    """convert_hf_to_gguf.py's LlamaModel.permute: HF's half-split q/k rows -> adjacent rotary pairs."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def gguf_of_hf(v, stored):
    """The GGUF tensors of a folder's stored values, as llama.cpp's converter makes them (F32 here)."""
    back = {}
    for name in random_weights(v, 0)[0]:
        arr = stored[hf_names(name)].astype(np.float32)
        if ".attn_q." in name:
            arr = llama_cpp_permute(arr, v["heads"])
        elif ".attn_k." in name:
            arr = llama_cpp_permute(arr, v["kv_heads"])
        back[name] = arr
    return back


def _decode(entry):
    dtype, shape, data = entry["dtype"], entry["shape"], entry["data"]
    if dtype == "F32":
        a = np.frombuffer(data, dtype="<f4")
    elif dtype == "F16":
        a = np.frombuffer(data, dtype="<f2")
    elif dtype == "BF16":
        a = (np.frombuffer(data, dtype="<u2").astype("<u4") << 16).view("<f4")
    else:
        raise ValueError(f"dtype {dtype} not supported by the reference")
    return a.astype(np.float64).reshape(shape)


def read_hf(folder):
    """(config dict, {transformers name: float64 array}) of a folder, read with the safetensors package."""
    from safetensors import deserialize
    import json
    import os
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    single = os.path.join(folder, "model.safetensors")
    if os.path.exists(single):
        files = [single]
    else:
        with open(os.path.join(folder, "model.safetensors.index.json")) as f:
            files = [os.path.join(folder, n) for n in sorted(set(json.load(f)["weight_map"].values()))]
    t = {}
    for path in files:
        with open(path, "rb") as f:
            for name, entry in deserialize(f.read()):
                t[name] = _decode(entry)
    return cfg, t


def hf_inv_freq(cfg, hd):
    """transformers' rotary inverse frequencies (_compute_default_rope_parameters, _compute_llama3_parameters)."""
    inv = 1.0 / (cfg.get("rope_theta", 10000.0) ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
    rs = cfg.get("rope_scaling")
    if not rs or rs.get("rope_type", rs.get("type")) == "default":
        return inv
    assert rs.get("rope_type", rs.get("type")) == "llama3"
    factor, low, high = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old = rs["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old / low, old / high
    wavelen = 2 * np.pi / inv
    scaled = np.where(wavelen > low_wavelen, inv / factor, inv)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return np.where(medium, smoothed, scaled)


def rope_half(x, inv):
    """x: (T, heads, hd). transformers' rotate_half: x * cos + rotate_half(x) * sin on (i, i + hd/2)."""
    T, _, hd = x.shape
    ang = np.arange(T, dtype=np.float64)[:, None] * inv[None, :]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x1, x2 = x[..., :hd // 2], x[..., hd // 2:]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)


def attend(q, k, v, nh, nkv, hd):
    """Causal grouped-query attention: (T, nh, hd) queries at the last T of S positions, (S, nkv, hd)
    keys and values -> (T, nh * hd)."""
    T, S = q.shape[0], k.shape[0]
    mask = np.triu(np.full((T, S), -np.inf), k=S - T + 1)
    group = nh // nkv
    out = np.empty((T, nh, hd))
    for head in range(nh):
        kh, vh = k[:, head // group, :], v[:, head // group, :]
        s = q[:, head, :] @ kh.T / np.sqrt(hd) + mask
        s = np.exp(s - s.max(axis=1, keepdims=True))
        out[:, head, :] = (s / s.sum(axis=1, keepdims=True)) @ vh
    return out.reshape(T, nh * hd)


def forward_hf(cfg, t, tokens):
    """Logits (T, vocab) of one sequence with transformers' names and rotary layout, in float64."""
    nh = cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads") or nh
    hd = cfg.get("head_dim") or cfg["hidden_size"] // nh
    eps = cfg.get("rms_norm_eps", 1e-6)
    inv = hf_inv_freq(cfg, hd)
    T = len(tokens)
    x = t["model.embed_tokens.weight"][np.asarray(tokens)]
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        h = rms_norm(x, t[p + "input_layernorm.weight"], eps)
        q = rope_half((h @ t[p + "self_attn.q_proj.weight"].T).reshape(T, nh, hd), inv)
        k = rope_half((h @ t[p + "self_attn.k_proj.weight"].T).reshape(T, nkv, hd), inv)
        v = (h @ t[p + "self_attn.v_proj.weight"].T).reshape(T, nkv, hd)
        x = x + attend(q, k, v, nh, nkv, hd) @ t[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, t[p + "post_attention_layernorm.weight"], eps)
        g = h @ t[p + "mlp.gate_proj.weight"].T
        u = h @ t[p + "mlp.up_proj.weight"].T
        x = x + (g / (1.0 + np.exp(-g)) * u) @ t[p + "mlp.down_proj.weight"].T
    head = t["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else t["lm_head.weight"]
    return rms_norm(x, t["model.norm.weight"], eps) @ head.T

# ---------------------------------------------------------------------------- CLI


def tokenizer_vocab_size(path):
    """Ids a tokenizer.json uses: its vocabulary and its added tokens."""
    with open(path, encoding="utf-8") as f:
        t = json.load(f)
    ids = list(t["model"]["vocab"].values()) + [tok["id"] for tok in t.get("added_tokens", [])]
    return max(ids) + 1


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    mk = sub.add_parser("make", help="write a random Llama GGUF")
    mk.add_argument("--out", required=True)
    mk.add_argument("--variant", choices=sorted(VARIANTS), required=True)
    mk.add_argument("--seed", type=int, default=1)
    mh = sub.add_parser("make-hf", help="write a random Llama model as a Hugging Face folder")
    mh.add_argument("--out", required=True)
    mh.add_argument("--variant", choices=sorted(HF_VARIANTS), required=True)
    mh.add_argument("--seed", type=int, default=1)
    mh.add_argument("--gguf", help="also write the same model as a GGUF, q/k rows permuted as llama.cpp's converter does")
    mh.add_argument("--tokenizer", help="a folder whose tokenizer.json (and tokenizer_config.json) the model gets; "
                                        "the vocabulary size becomes the tokenizer's")
    lg = sub.add_parser("logits", help="logits of every position of every sequence")
    lg.add_argument("--model", required=True)
    lg.add_argument("--tokens", required=True)
    lg.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    if a.cmd == "make":
        v = VARIANTS[a.variant]
        tensors, hd = random_weights(v, a.seed)
        write_gguf(a.out, v, tensors, hd)
        return 0
    if a.cmd == "make-hf":
        v = HF_VARIANTS[a.variant]
        if a.tokenizer:
            v = dict(v, vocab=tokenizer_vocab_size(os.path.join(a.tokenizer, "tokenizer.json")))
        tensors, hd = random_weights(v, a.seed)
        write_hf(a.out, v, tensors, hd)
        if a.tokenizer:
            for name in ("tokenizer.json", "tokenizer_config.json"):
                if os.path.exists(os.path.join(a.tokenizer, name)):
                    shutil.copyfile(os.path.join(a.tokenizer, name), os.path.join(a.out, name))
        if a.gguf:
            _, stored = read_hf(a.out)
            write_gguf(a.gguf, dict(v, dtype=GGML_F32), gguf_of_hf(v, stored), hd)
        return 0
    if os.path.isdir(a.model):
        cfg, t = read_hf(a.model)
        run = lambda seq: forward_hf(cfg, t, seq)
    else:
        meta, t = read_gguf(a.model)
        run = lambda seq: forward(meta, t, seq)
    with open(a.tokens) as f:
        seqs = [[int(tok) for tok in line.split()] for line in f if line.strip()]
    with open(a.out, "wb") as f:
        for s in seqs:
            f.write(run(s).astype("<f4").tobytes())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
