#!/usr/bin/env python3
"""Real Llama-2 and SmolLM2 tokenizers as tokenizer.json, with reference ids, for
`test_llm_tokenizer_hf --compare` (a measurement beside the test, which trains its own
small tokenizers so that it needs no model files).

usage: hf_tokenizer_real.py OUT_DIR [--llama2 tokenizer.model] [--smollm2 MODEL.gguf]

--llama2: Llama-2's SentencePiece model -> tokenizer.json as transformers' LlamaConverter
    writes it (vocabulary and scores from the model; merges = every split of a piece into
    two vocabulary pieces, ordered by the piece's score, as SentencePieceExtractor does;
    byte_fallback, fuse_unk, Prepend + Replace normalizer, "<s> $A" template). Two folders
    share the file: llama2_real (ids of the tokenizers package) and llama2_real_spm (ids of
    SentencePiece itself, strings with <s>, </s> or <unk> left out): whether merging by
    rank reproduces SentencePiece's scores.
--smollm2: SmolLM2's GGUF (tokens, merges, token types, chat template) -> tokenizer.json
    with its pre-tokenizer (Digits + ByteLevel) -> smollm2_real (ids of tokenizers).

Needs tokenizers (and sentencepiece / gguf for the two sources) on PYTHONPATH. The strings
are those of tests/llm/hf_tokenizer_cases.py.
"""
import json
import os
import sys

from tokenizers import Tokenizer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "llm"))
from hf_tokenizer_cases import case_strings  # noqa: E402


def write_cases(d, encode, strings):
    with open(os.path.join(d, "cases.txt"), "w", encoding="ascii") as f:
        for s in strings:
            f.write(s.encode("utf-8").hex() + "\t" + " ".join(map(str, encode(s))) + "\n")


def write_folder(out, name, data, config, encode, strings=None):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False)
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False)
    write_cases(d, encode, strings if strings is not None else case_strings())
    return name


def added(i, s, special=True):
    return {"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
            "special": special}


def llama2_json(model_path):
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=model_path)
    n = sp.get_piece_size()
    vocab = {sp.id_to_piece(i): i for i in range(n)}
    scores = {sp.id_to_piece(i): sp.get_score(i) for i in range(n)}
    merges = []
    for piece, score in scores.items():
        local = [(piece[:k], piece[k:], score) for k in range(1, len(piece)) if piece[:k] in vocab and piece[k:] in vocab]
        merges.extend(sorted(local, key=lambda m: (vocab[m[0]], vocab[m[1]])))
    merges = [[a, b] for a, b, _ in sorted(merges, key=lambda m: m[2], reverse=True)]
    data = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>")],
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                                           {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                    {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
            {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }
    return data, sp


def smollm2_json(gguf_path):
    from gguf import GGUFReader
    r = GGUFReader(gguf_path)

    def strings(key):
        f = r.fields[key]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    def scalar(key):
        f = r.fields.get(key)
        return None if f is None else f.parts[f.data[0]].tolist()[0]

    tokens = strings("tokenizer.ggml.tokens")
    types = [int(r.fields["tokenizer.ggml.token_type"].parts[i][0]) for i in r.fields["tokenizer.ggml.token_type"].data]
    merges = [m.split(" ", 1) for m in strings("tokenizer.ggml.merges")]
    specials = [added(i, t, types[i] == 3) for i, t in enumerate(tokens) if types[i] in (3, 4)]
    data = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": specials, "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(tokens)}, "merges": merges},
    }
    config = {"bos_token": tokens[scalar("tokenizer.ggml.bos_token_id")],
              "eos_token": tokens[scalar("tokenizer.ggml.eos_token_id")], "add_bos_token": False}
    if "tokenizer.chat_template" in r.fields:
        f = r.fields["tokenizer.chat_template"]
        config["chat_template"] = bytes(f.parts[f.data[0]]).decode("utf-8")
    return data, config


def main():
    out = sys.argv[1]
    args = dict(zip(sys.argv[2::2], sys.argv[3::2]))
    names = []
    if "--llama2" in args:
        data, sp = llama2_json(args["--llama2"])
        tok = Tokenizer.from_str(json.dumps(data))
        config = {"add_bos_token": True, "bos_token": "<s>", "eos_token": "</s>"}
        names.append(write_folder(out, "llama2_real", data, config, lambda s: tok.encode(s).ids))
        # SentencePiece's encode reads "<s>" in the text as text, the tokenizers library (and
        # grzo) as the control token: those strings are left out of this comparison
        plain = [s for s in case_strings() if not any(t in s for t in ("<s>", "</s>", "<unk>"))]
        names.append(write_folder(out, "llama2_real_spm", data, config, lambda s: [1] + sp.encode(s), plain))
    if "--smollm2" in args:
        data, config = smollm2_json(args["--smollm2"])
        tok = Tokenizer.from_str(json.dumps(data))
        names.append(write_folder(out, "smollm2_real", data, config, lambda s: tok.encode(s).ids))
    with open(os.path.join(out, "index.txt"), "w", encoding="ascii") as f:
        f.write("\n".join(names) + "\n")


if __name__ == "__main__":
    main()
