#!/usr/bin/env python3
"""write_toy_tokenizer.py DIR... - a small byte-level BPE tokenizer.json (GPT-2's byte
alphabet, two merges, <|endoftext|> as BOS and EOS) and its tokenizer_config.json into each
Hugging Face folder DIR, beside the safetensors grzo-export writes from stories260K: the
folders the finetune and out-of-memory tests give as --model."""
import json
import sys

bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))   # GPT-2's bytes_to_unicode
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b)
        cs.append(256 + n)
        n += 1
vocab = {chr(c): i for i, c in enumerate(cs)}
vocab["\u0120t"] = 256
vocab["he"] = 257
tok = {"version": "1.0", "added_tokens": [{"id": 258, "content": "<|endoftext|>", "single_word": False, "lstrip": False,
       "rstrip": False, "normalized": False, "special": True}], "normalizer": None,
       "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
       "post_processor": None, "decoder": {"type": "ByteLevel"},
       "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None, "end_of_word_suffix": None,
                 "fuse_unk": False, "byte_fallback": False, "ignore_merges": False, "vocab": vocab,
                 "merges": [["\u0120", "t"], ["h", "e"]]}}
for d in sys.argv[1:]:
    with open(d + "/tokenizer.json", "w") as f:
        json.dump(tok, f)
    with open(d + "/tokenizer_config.json", "w") as f:
        json.dump({"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"}, f)
