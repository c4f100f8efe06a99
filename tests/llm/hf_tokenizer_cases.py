#!/usr/bin/env python3
"""Hugging Face tokenizer.json files and their encodings, for test_llm_tokenizer_hf.

usage: hf_tokenizer_cases.py OUT_DIR [GPT2_DIR]

Builds real tokenizer.json files with the `tokenizers` package (trained here on a small
text, so that nothing is downloaded), one folder per pipeline that grzo supports:

  gpt2          byte-level BPE, ByteLevel(use_regex) = GPT-2's regex; merges written in
                the legacy "a b" string form
  gpt2_prefix   the same vocabulary with ByteLevel(add_prefix_space=True)
  gpt2_noregex  the same with ByteLevel(use_regex=False): each fragment is one word
  gpt2_gap      gpt2's vocabulary without the byte 0xFF (in no UTF-8 text) and without its
                added token: an id below the last that names no token
  gpt2_space    gpt2 with one more merge, of a token with a space in it (which no byte-level
                text reaches, and GGUF's "left right" merges cannot spell)
  gpt2_real     GPT-2's own vocabulary (GPT2_DIR/encoder.json, vocab.bpe), when given
  llama3        Split(Llama-3's regex, Isolated) + ByteLevel(use_regex=False),
                ignore_merges (with whole words in the vocabulary that merges cannot
                reach), special tokens after the vocabulary, BOS template, config
  smollm        Digits(individual_digits) + ByteLevel, special tokens first (SmolLM2)
  llama2        character BPE with byte_fallback, <unk> fused, normalizer
                Prepend("\u2581") + Replace(" ", "\u2581"), BOS template (Llama-2)
  meta_first    Metaspace(prepend_scheme="first", split=False), byte_fallback, ignore_merges
  meta_split    Metaspace(prepend_scheme="always", split=True), no byte fallback: unknown
                characters become one fused <unk>

Each folder gets tokenizer.json, maybe tokenizer_config.json, and cases.txt: one line per
test string, "HEX<TAB>ids" (the UTF-8 bytes in hex; ids as encode(text).ids with the
tokenizer's special tokens, i.e. the BOS its template adds). OUT_DIR/index.txt lists the
folders. A few hundred strings: digits, contractions in any case, letters with marks,
CJK, emoji, whitespace runs, newlines, special tokens inside text, the ends of the
White_Space ranges, letters and digits outside the BMP.
"""
import json
import os
import random
import sys

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

GPT2_REGEX = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")

TEXT = """Once upon a time, in a small village by the sea, there lived a girl named Lily. She
loved to read books about the stars and the planets. Every night she'd climb to the roof
and count them: 1, 2, 3... up to 1000! "They're so far away," she said. "I'll visit them."
Her brother Tim didn't believe her. He'd laugh and say: 'You can't fly, Lily!'
The year was 2024; the price of bread was $3.50 and 12,345 people lived there.
Café au lait, naïve résumé, Straße, Ελληνικά γράμματα, русский язык, עברית, العربية.
Long s: ſtreet ſtars ſtone, x'ſt y'ſt z'ſt.
日本語のテキストと中文文本，还有한국어 문장. Emoji: 😀 👍🏽 🚀 ❤️.
def main():
    for i in range(10):
        print(f"value {i} = {i * 2}")
    return 0
<|im_start|>user
What is 2+2?<|im_end|>
<|im_start|>assistant
4<|im_end|>
"""

PIECES = [
    "hello", "Hello", "HELLO", " world", "the", "The", " the", "Lily", "stars", "village", "sea",
    "0", "7", "42", "123", "1234", "12345", "3.14159", "1,000,000", "2024", "٣٤٥", "½", "²", "Ⅻ",
    "I'm", "you're", "THEY'RE", "it'S", "We'LL", "'ll", "don't", "'d", "'Ve", "o'clock", "'", "''", "'ſ", "'K",
    "café", "naïve", "Straße", "e\u0301", "a\u0308\u0301", "Ελληνικά", "русский", "עברית", "العربية", "हिन्दी",
    "日本語", "中文", "한국어", "ｆｕｌｌ", "😀", "👍🏽", "👨\u200d👩\u200d👧", "🚀🚀", "❤️", "\u00a0", "\u3000", "\u2028",
    " ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", " \n", "\n ", " \n \n", "\t\n", "\u000b", "\u0085",
    "!", "!!!", "???", "...", "—", "«»", "$3.50", "#", "@user", "a_b", "x+y=z", "(1)", "[[", "}}",
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|begin_of_text|>", "<|eot_id|>", "<s>", "</s>", "<unk>",
    "<|im_start", "im_end|>", "<0x41>", "▁", "▁▁x", "Ġ", "<extra>", "zzqx", " zzqx", "Ġzzqx",
]

FIXED = [
    "", "a", " a", "a ", "  a", "a  b", "a   b", "a\tb", "a\nb", "a\n\nb", "a \n b", "a\r\nb", "x   ", "   x",
    "Hello world", "Hello  world", " Hello world", "Hello world\n", "Once upon a time",
    "I'm sure you're right, THEY'RE fine and it'S ok.", "can't won't shouldn't y'all",
    "12345678901234567890", "pi is 3.14159265, e is 2.71828", "phone: +1 (555) 123-4567",
    "Café naïve résumé Straße", "Ελληνικά γράμματα και русский язык", "日本語のテキスト", "中文文本，还有한국어 문장.",
    "Emoji 😀 👍🏽 🚀 ❤️ 👨\u200d👩\u200d👧 end", "mixed日本English中文123", "e\u0301 vs \u00e9",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "<s>Hello</s> <s> world</s>", "text<|endoftext|>more text", "<|im_start|><|im_end|>", "<s><s>",
    "def f(x):\n    return x * 2\n\n\nprint(f(3))\n", "\t\tindented\n\t\tcode", "line1\r\nline2\r\n",
    "   \n\n   \n", "\n", " ", "  ", "\t", "'", "''", "'s", " 's", "'S", "'ſ", "don'ſ", "x'ſt", "'ſt", "'Re 'rE 'LL 'VE 'M 'D 'T", "zzqx zzqx", "Ġzzqx",
    "trailing spaces   ", "a" * 300, "ab" * 100, "1" * 50, " " * 40, "\n" * 10, "😀" * 20,
]
# The ends of the White_Space ranges that grzo hand-codes, and their neighbours, each after
# a space and before a letter (whether it is \s changes where the regexes split); then
# letters, digits and a symbol outside the BMP (4-byte UTF-8).
FIXED += [" " + chr(cp) + "x" for cp in (0x08, 0x09, 0x0D, 0x0E, 0x1F, 0x21, 0x84, 0x85, 0x86, 0x9F, 0xA0, 0xA1, 0x167F,
                                         0x1680, 0x1681, 0x1FFF, 0x2000, 0x200A, 0x200B, 0x2027, 0x2028, 0x2029, 0x202A,
                                         0x202E, 0x202F, 0x2030, 0x205E, 0x205F, 0x2060, 0x2FFF, 0x3000, 0x3001)]
FIXED += [" \U0001d7ce\U0001d7cf", "x \U0001d7d7", "x\U00020000y", " \U00020000", "\U0001d400\U0001d401\n", " \U0001f600", "a\U0001d7d79",
          "\U0001d7ce\U0001d7cf\U0001d7d0\U0001d7d1", "x\U0001d400", "x\U0001d400 x\U0001d400!"]


def case_strings():
    rng = random.Random(14)
    out = list(FIXED)
    seps = ["", "", " ", "  ", "\n", "\t", " \n", "\r\n"]
    while len(out) < 400:
        k = rng.randint(1, 6)
        out.append("".join(rng.choice(PIECES) + rng.choice(seps) for _ in range(k)))
    return out


def train_bpe(model, pre, vocab_size, special=(), normalizer=None, alphabet=None, limit_alphabet=None):
    tok = Tokenizer(model)
    if normalizer is not None:
        tok.normalizer = normalizer
    if pre is not None:
        tok.pre_tokenizer = pre
    kw = {}
    if alphabet is not None:
        kw["initial_alphabet"] = alphabet
    if limit_alphabet is not None:
        kw["limit_alphabet"] = limit_alphabet
    tr = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(special), show_progress=False, **kw)
    tok.train_from_iterator([TEXT] * 5 + PIECES, tr)
    return tok


def write(out, name, tok, config=None, legacy_merges=False):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    data = json.loads(tok.to_str())
    if legacy_merges:  # the "a b" form older files use; the tokenizers package reads both
        data["model"]["merges"] = [" ".join(m) for m in data["model"]["merges"]]
        tok = Tokenizer.from_str(json.dumps(data))
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, indent=1)
    if config is not None:
        with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(config, f, ensure_ascii=False, indent=1)
    tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))  # what grzo reads
    with open(os.path.join(d, "cases.txt"), "w", encoding="ascii") as f:
        for s in case_strings():
            ids = tok.encode(s).ids
            f.write(s.encode("utf-8").hex() + "\t" + " ".join(map(str, ids)) + "\n")
    return name


def with_extra_vocab(tok, words):
    """Whole words added to the model's vocabulary with no merge reaching them (what
    ignore_merges is for), before any added token."""
    data = json.loads(tok.to_str())
    vocab = data["model"]["vocab"]
    for w in words:
        if w not in vocab:
            vocab[w] = len(vocab)
    return Tokenizer.from_str(json.dumps(data))


def byte_fallback_vocab(tok, special):
    """Llama-2's layout: special tokens, then <0x00>..<0xFF>, then the trained pieces."""
    data = json.loads(tok.to_str())
    trained = sorted(data["model"]["vocab"].items(), key=lambda kv: kv[1])
    vocab = {s: i for i, s in enumerate(special)}
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    for s, _ in trained:
        if s not in vocab:
            vocab[s] = len(vocab)
    data["model"]["vocab"] = vocab
    data["added_tokens"] = [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                             "normalized": False, "special": True} for i, s in enumerate(special)]
    return Tokenizer.from_str(json.dumps(data))


def build_all(out, gpt2_dir):
    names = []
    byte_alphabet = pre_tokenizers.ByteLevel.alphabet()

    # GPT-2 style
    tok = train_bpe(models.BPE(), pre_tokenizers.ByteLevel(add_prefix_space=False), 600, ["<|endoftext|>"],
                    alphabet=byte_alphabet)
    tok.decoder = decoders.ByteLevel()
    tok.add_tokens(["<extra>"])  # an added token that is not special
    names.append(write(out, "gpt2", tok, legacy_merges=True))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    names.append(write(out, "gpt2_prefix", tok))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    names.append(write(out, "gpt2_noregex", tok))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    data = json.loads(tok.to_str())
    del data["model"]["vocab"]["\u00ff"]   # 0xFF in the byte alphabet: no merge has it
    data["added_tokens"] = [a for a in data["added_tokens"] if a["content"] != "<extra>"]   # the package would renumber it
    names.append(write(out, "gpt2_gap", Tokenizer.from_str(json.dumps(data))))
    data = json.loads(tok.to_str())
    n = len(data["model"]["vocab"])
    data["model"]["vocab"].update({"q r": n, "q rq": n + 1})
    data["model"]["merges"].append(["q r", "q"])
    data["added_tokens"] = [dict(a, id=n + 2) if a["content"] == "<extra>" else a for a in data["added_tokens"]]
    names.append(write(out, "gpt2_space", Tokenizer.from_str(json.dumps(data))))

    if gpt2_dir:
        real = Tokenizer(models.BPE.from_file(os.path.join(gpt2_dir, "encoder.json"), os.path.join(gpt2_dir, "vocab.bpe")))
        real.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        real.decoder = decoders.ByteLevel()
        real.add_special_tokens(["<|endoftext|>"])
        names.append(write(out, "gpt2_real", real))

    # Llama-3 style
    pre = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3_REGEX), behavior="isolated"),
                                   pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok = train_bpe(models.BPE(ignore_merges=True), pre, 700, alphabet=byte_alphabet)
    # "'\u00c5\u00bft" is "'\u017ft" in the byte alphabet: a whole word only if (?i:'s) fails to fold U+017F
    # "x\U0001d400" (x and MATHEMATICAL BOLD CAPITAL A: both \p{L}, so one word) spelled in the byte alphabet
    tok = with_extra_vocab(tok, ["zzqx", "\u0120zzqx", "\u0120Lily\u0120and", "\u0120villag", "'\u00c5\u00bft",
                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False).pre_tokenize_str("x\U0001d400")[0][0]])
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    tok.add_special_tokens(specials)
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                      special_tokens=[("<|begin_of_text|>", bos)])])
    tok.decoder = decoders.ByteLevel()
    config = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "pad_token": "<|end_of_text|>", "chat_template":
              "{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n{{ m['content'] }}<|eot_id|>"
              "{% endfor %}"}
    names.append(write(out, "llama3", tok, config))

    # SmolLM2 style: special tokens first, digits split one by one
    pre = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                   pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok = train_bpe(models.BPE(), pre, 600, ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], alphabet=byte_alphabet)
    tok.decoder = decoders.ByteLevel()
    config = {"bos_token": "<|im_start|>", "eos_token": {"content": "<|im_end|>", "lstrip": False},
              "add_bos_token": False, "chat_template": [{"name": "default", "template": "{{ messages }}"}]}
    names.append(write(out, "smollm", tok, config))

    # Llama-2 style: character BPE, byte fallback, normalizer
    special = ["<unk>", "<s>", "</s>"]
    norm = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    tok = train_bpe(models.BPE(), None, 500, normalizer=norm, limit_alphabet=60)
    tok = byte_fallback_vocab(tok, special)
    data = json.loads(tok.to_str())
    data["model"].update(byte_fallback=True, unk_token="<unk>", fuse_unk=True)
    tok = Tokenizer.from_str(json.dumps(data))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)])
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    names.append(write(out, "llama2", tok, {"add_bos_token": True, "bos_token": "<s>", "eos_token": "</s>"}))

    # Metaspace pre-tokenizers
    for name, scheme, split, fallback in (("meta_first", "first", False, True), ("meta_split", "always", True, False)):
        pre = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme=scheme, split=split)
        tok = train_bpe(models.BPE(), pre, 450, limit_alphabet=50)
        tok = byte_fallback_vocab(tok, special) if fallback else tok
        data = json.loads(tok.to_str())
        if fallback:
            data["model"].update(byte_fallback=True, unk_token="<unk>", fuse_unk=True, ignore_merges=True)
        else:
            data["model"]["vocab"]["<unk>"] = len(data["model"]["vocab"])
            data["model"].update(unk_token="<unk>", fuse_unk=True)
        tok = Tokenizer.from_str(json.dumps(data))
        names.append(write(out, name, tok))
    return names


def main():
    out = sys.argv[1]
    gpt2_dir = sys.argv[2] if len(sys.argv) > 2 else None
    os.makedirs(out, exist_ok=True)
    names = build_all(out, gpt2_dir)
    with open(os.path.join(out, "index.txt"), "w", encoding="ascii") as f:
        f.write("\n".join(names) + "\n")


if __name__ == "__main__":
    main()
