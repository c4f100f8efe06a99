#!/usr/bin/env python3
"""Read grzo-export's GGUF files with the `gguf` package (llama.cpp's own Python reader).

usage: gguf_read_export.py ORIGINAL F32 F16 BF16 Q8_0 [SAFETENSORS_DIR]   (exports of one model)
       gguf_read_export.py --hf FOLDER F32   (an export of a Hugging Face folder: check_hf says what it checks)

Checks, for each export: every key-value pair of the original is present with the same
type and bytes (general.file_type excepted: it must be the written type's llama_ftype);
the tensors have the original's names, order and shapes; matrices have the requested type
and norm gains stay F32; the data is what the package's own quantizers make of the f32
export's weights, byte for byte (numpy's float16 conversion, gguf.quants for BF16 and
Q8_0: "bit-exact with ggml's reference").
The safetensors folder (f32), read with plain json/numpy: the header's offsets tile the
data exactly; every tensor has transformers' name and shape; llama.cpp's own HF -> GGUF
permutation of q_proj/k_proj (convert_hf_to_gguf.py's LlamaModel.permute) applied to the
folder's tensors gives the f32 GGUF's attn_q/attn_k bit for bit, the other tensors equal
theirs; config.json agrees with the GGUF metadata; and a numpy forward in transformers'
convention (rotate_half over each head's two halves) on the folder gives the logits of the
same forward in GGUF's convention (adjacent pairs) on the f32 GGUF, within 1e-9 (float64).
Exit 0 pass, 1 fail, 77 skip (no gguf package).
"""
import json
import os
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


def permute(w, n_head):
    """convert_hf_to_gguf.py's LlamaModel.permute: HF rows -> GGUF's adjacent rotary pairs."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


HF_NAMES = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
            "output.weight": "lm_head.weight"}
HF_LAYER = {"attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
            "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
            "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}


def hf_name(gguf_name):
    if gguf_name in HF_NAMES:
        return HF_NAMES[gguf_name]
    _, layer, kind, _ = gguf_name.split(".")
    return f"model.layers.{layer}.{HF_LAYER[kind]}.weight"


def forward(weights, cfg, tokens, half_split):
    """Llama logits (float64). weights: HF names. half_split: transformers' rotary (pairs
    (i, i + hd/2)); otherwise GGUF/llama.cpp's adjacent pairs (2i, 2i + 1)."""
    w = {k: v.astype(np.float64) for k, v in weights.items()}
    heads, kv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    n, eps = len(tokens), cfg["rms_norm_eps"]
    inv = cfg["rope_theta"] ** (-np.arange(0, hd, 2) / hd)
    ang = np.arange(n)[:, None] * inv[None, :]
    cos, sin = np.cos(ang), np.sin(ang)

    def rope(x):   # x: n, heads, hd
        a, b = (x[..., :hd // 2], x[..., hd // 2:]) if half_split else (x[..., 0::2], x[..., 1::2])
        ra, rb = a * cos[:, None] - b * sin[:, None], a * sin[:, None] + b * cos[:, None]
        return np.concatenate([ra, rb], -1) if half_split else np.stack([ra, rb], -1).reshape(x.shape)

    def norm(x, g):
        return g * x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)

    x = w["model.embed_tokens.weight"][tokens]
    mask = np.triu(np.full((n, n), -np.inf), 1)
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        h = norm(x, w[p + "input_layernorm.weight"])
        q = rope((h @ w[p + "self_attn.q_proj.weight"].T).reshape(n, heads, hd))
        k = rope((h @ w[p + "self_attn.k_proj.weight"].T).reshape(n, kv, hd))
        v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(n, kv, hd)
        k, v = np.repeat(k, heads // kv, 1), np.repeat(v, heads // kv, 1)
        s = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(hd) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        x = x + np.einsum("hqk,khd->qhd", s, v).reshape(n, heads * hd) @ w[p + "self_attn.o_proj.weight"].T
        h = norm(x, w[p + "post_attention_layernorm.weight"])
        g, u = h @ w[p + "mlp.gate_proj.weight"].T, h @ w[p + "mlp.up_proj.weight"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ w[p + "mlp.down_proj.weight"].T
    head = w.get("lm_head.weight", w["model.embed_tokens.weight"])
    return norm(x, w["model.norm.weight"]) @ head.T


def check_safetensors(folder, f32):
    data = open(os.path.join(folder, "model.safetensors"), "rb").read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    body = data[8 + n:]
    spans = sorted(tuple(v["data_offsets"]) for v in header.values())
    check(spans[0][0] == 0 and spans[-1][1] == len(body) and all(a[1] == b[0] for a, b in zip(spans, spans[1:])),
          "safetensors: data_offsets do not tile the data")
    meta = {k: f32.fields[k].contents() for k in f32.fields if k.startswith("llama.")}
    heads, kv_heads = meta["llama.attention.head_count"], meta["llama.attention.head_count_kv"]
    tensors = {}
    for name, v in header.items():
        check(v["dtype"] == "F32", f"safetensors: {name} is {v['dtype']}")
        a, b = v["data_offsets"]
        tensors[name] = np.frombuffer(body[a:b], dtype="<f4").reshape(v["shape"])
    check(len(tensors) == len(f32.tensors), f"safetensors: {len(tensors)} tensors, the GGUF {len(f32.tensors)}")
    for t in f32.tensors:
        name = hf_name(t.name)
        shape = [int(d) for d in reversed(t.shape)] if len(t.shape) > 1 else [int(t.shape[0])]   # ne reversed
        want = np.array(t.data, dtype=np.float32).reshape(shape)
        got = tensors.get(name)
        check(got is not None, f"safetensors: {name} is missing")
        if got is None:
            continue
        if name.endswith("q_proj.weight"):
            got = permute(got, heads)
        elif name.endswith("k_proj.weight"):
            got = permute(got, kv_heads)
        check(got.shape == want.shape and np.array_equal(got, want), f"safetensors: {name} differs from GGUF {t.name}")
    cfg = json.load(open(os.path.join(folder, "config.json")))
    gguf_weights = {hf_name(t.name): np.array(t.data, dtype=np.float32).reshape(tensors[hf_name(t.name)].shape)
                    for t in f32.tensors}
    tokens = [3, 17, 5, 29, 1, 11, 7, 2]
    hf = forward(tensors, cfg, tokens, half_split=True)
    ours = forward(gguf_weights, cfg, tokens, half_split=False)
    check(np.abs(hf - ours).max() <= 1e-9 * max(1.0, np.abs(ours).max()),
          f"safetensors: transformers-convention logits differ from the GGUF's by {np.abs(hf - ours).max():.3g}")
    for key, gkey in [("hidden_size", "llama.embedding_length"), ("intermediate_size", "llama.feed_forward_length"),
                      ("num_hidden_layers", "llama.block_count"), ("num_attention_heads", "llama.attention.head_count"),
                      ("num_key_value_heads", "llama.attention.head_count_kv")]:
        check(cfg.get(key) == meta[gkey], f"config.json: {key} {cfg.get(key)} != {gkey} {meta[gkey]}")
    check(abs(cfg["rope_theta"] - meta["llama.rope.freq_base"]) <= 1e-6 * meta["llama.rope.freq_base"], "config.json: rope_theta")
    check(cfg["tie_word_embeddings"] == ("output.weight" not in [t.name for t in f32.tensors]), "config.json: tie")
    check(cfg["architectures"] == ["LlamaForCausalLM"], "config.json: architectures")


def main(orig_path, paths, st_folder):
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
    if st_folder:
        check_safetensors(st_folder, f32)
    print(f"gguf {getattr(gguf, '__version__', '')} read the original and {len(paths)} exports:"
          f" {len(want_fields)} keys, {len(orig.tensors)} tensors each")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


def value(reader, key):
    f = reader.fields.get(key)
    if f is None:
        failures.append(f"key {key} is missing")
        return None
    return f.contents()


def check_hf(folder, path):
    """--hf: a GGUF that grzo-export wrote from a Hugging Face folder (fine-tuned: every weight
    moved by at most 1e-2): the keys llama.cpp's convert_hf_to_gguf.py writes, from the
    folder's config.json, tokenizer.json and tokenizer_config.json (general.name: the
    folder's name); every tensor with llama.cpp's
    name and shape, F32, within 1e-2 of the folder's weight with the converter's q/k
    permutation; rope_freqs.weight such that llama.cpp's frequencies (base / factor) are
    transformers' llama3 frequencies."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
    import llama_ref
    cfg, hf = llama_ref.read_hf(folder)
    with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as f:
        tj = json.load(f)
    tc = {}
    if os.path.exists(os.path.join(folder, "tokenizer_config.json")):
        with open(os.path.join(folder, "tokenizer_config.json"), encoding="utf-8") as f:
            tc = json.load(f)
    r = gguf.GGUFReader(path)
    heads, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or cfg["hidden_size"] // heads
    want = {"general.architecture": "llama", "llama.context_length": cfg["max_position_embeddings"],
            "llama.embedding_length": cfg["hidden_size"], "llama.block_count": cfg["num_hidden_layers"],
            "llama.feed_forward_length": cfg["intermediate_size"], "llama.attention.head_count": heads,
            "llama.attention.head_count_kv": kv, "llama.rope.dimension_count": hd, "llama.vocab_size": cfg["vocab_size"],
            "llama.rope.freq_base": float(np.float32(cfg["rope_theta"])),
            "llama.attention.layer_norm_rms_epsilon": float(np.float32(cfg["rms_norm_eps"])),
            "general.file_type": 0, "tokenizer.ggml.model": "gpt2",
            "general.name": os.path.basename(os.path.normpath(folder)), "general.type": "model",
            "general.quantization_version": 2}
    if hd * heads != cfg["hidden_size"]:
        want["llama.attention.key_length"] = want["llama.attention.value_length"] = hd
    for key, v in want.items():
        got = value(r, key)
        check(got == v, f"{key} = {got!r}, config says {v!r}")
    check(value(r, "tokenizer.ggml.pre") in ("gpt2", "llama-bpe", "smollm"), "tokenizer.ggml.pre")
    text = {i: t for t, i in tj["model"]["vocab"].items()}
    text.update({a["id"]: a["content"] for a in tj.get("added_tokens", [])})
    tokens = value(r, "tokenizer.ggml.tokens") or []
    check(len(tokens) == cfg["vocab_size"], f"{len(tokens)} tokens for a vocabulary of {cfg['vocab_size']}")
    check(all(tokens[i] == text.get(i, f"[PAD{i}]") for i in range(len(tokens))), "tokens differ from tokenizer.json")
    types = value(r, "tokenizer.ggml.token_type") or []
    # added tokens: special ones CONTROL (3); the others USER_DEFINED (4), split out of any
    # text as the tokenizers library does (the converter makes "<...>"-looking ones CONTROL)
    added = {a["id"]: 3 if a.get("special") else 4 for a in tj.get("added_tokens", [])}
    check(all(types[i] == added.get(i, 1) for i in range(len(types)) if i in text), "token types")
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    check(value(r, "tokenizer.ggml.merges") == merges, "merges differ from tokenizer.json")
    for key, name in (("bos", "bos_token"), ("eos", "eos_token"), ("padding", "pad_token")):
        tok = tc.get(name)
        tok = tok.get("content") if isinstance(tok, dict) else tok
        if tok:
            tid = value(r, f"tokenizer.ggml.{key}_token_id")
            check(tid is not None and tokens[tid] == tok, f"{key} token {tid} is not {tok!r}")
    template = tc.get("chat_template")
    if isinstance(template, list):   # named templates: the converter writes "default" as the template
        template = next((t["template"] for t in template if t.get("name") == "default"), None)
    if template:
        check(value(r, "tokenizer.chat_template") == template, "chat template")
    check(value(r, "tokenizer.ggml.add_eos_token") is False, "add_eos_token")

    tensors = {t.name: t for t in r.tensors}
    names = ["token_embd.weight", "output_norm.weight"] + [f"blk.{l}.{k}.weight" for l in range(cfg["num_hidden_layers"])
                                                           for k in HF_LAYER]
    if not cfg.get("tie_word_embeddings"):
        names.append("output.weight")
    check(sorted(tensors) == sorted(names + ["rope_freqs.weight"]), f"tensor names {sorted(tensors)}")
    for name in names:
        t = tensors.get(name)
        if t is None:
            continue
        w = hf[hf_name(name)]
        if ".attn_q." in name:
            w = permute(w, heads)
        elif ".attn_k." in name:
            w = permute(w, kv)
        check(t.tensor_type == T.F32 and list(t.shape) == list(reversed(w.shape)), f"{name}: type or shape")
        d = np.asarray(t.data, dtype=np.float64).reshape(w.shape) - w
        check(np.max(np.abs(d)) <= 1.01e-2, f"{name}: {np.max(np.abs(d)):.3g} from the folder's weight")
    ff = tensors.get("rope_freqs.weight")
    if ff is not None:
        base = cfg["rope_theta"] ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
        ours = base / np.asarray(ff.data, dtype=np.float64)
        check(ff.tensor_type == T.F32 and np.allclose(ours, llama_ref.hf_inv_freq(cfg, hd), rtol=1e-6, atol=0),
              "rope_freqs.weight: llama.cpp's frequencies are not transformers' llama3 frequencies")
    print(f"gguf read {path}: {len(r.fields)} keys, {len(r.tensors)} tensors")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--hf":
        sys.exit(check_hf(sys.argv[2], sys.argv[3]))
    if len(sys.argv) not in (6, 7):
        print(__doc__)
        sys.exit(1)
    sys.exit(main(sys.argv[1], dict(zip(["f32", "f16", "bf16", "q8_0"], sys.argv[2:6])),
                  sys.argv[6] if len(sys.argv) == 7 else None))
