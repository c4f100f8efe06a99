#!/usr/bin/env python3
"""classify_ref.py - an independent scorer for grzo-finetune's classification accuracy.

It re-implements, in Python (numpy and the standard library, no code from the C side),
everything between a model file and an accuracy, for a llama2.c checkpoint (.bin) with a
llama2.c tokenizer.bin:

  - the llama2.c checkpoint (legacy v0 header: dim, hidden_dim, n_layers, n_heads,
    n_kv_heads, vocab_size (negative: an untied head follows), seq_len; then the fp32
    tensors in llama2.c's order), read into llama_ref.py's tensor names so that its float64
    Llama forward (`llama_ref.forward`) runs it;
  - the llama2.c tokenizer (tokenizer.bin: max_token_length, then per token a float score,
    a length and the bytes) and llama2.c's encode(): BOS, the dummy-prefix " " token when
    the text is not empty, one token per UTF-8 character (at most 4 bytes), <0xXX> byte
    tokens (id byte + 3) for characters missing from the vocabulary, then repeatedly merge
    the adjacent pair whose concatenation is in the vocabulary with the highest score (the
    leftmost such pair on equal scores; scores must beat -1e10), until none merges;
  - the data files and the tasks' prompts, as grzo-finetune documents them (README
    "Fine-tuning", examples/finetune/tasks.h "Prompt assembly"):
      SST-2  context "<sentence, Python-stripped> It was", candidates " terrible" / " great"
             (GLUE tsv with a header naming the columns "sentence" and "label")
      RTE    context "<premise>\\nDoes this mean that \\"<hypothesis>\\" is true? Yes or No?\\n",
             candidates "Yes" / "No" (SuperGLUE jsonl, label "entailment" = 0 /
             "not_entailment" = 1; or a GLUE tsv with sentence1, sentence2, label)
    then MeZO's assembly: context = encode(x).strip(" ").lstrip() and
    text = (encode(x) + candidate).strip(" ").lstrip();
  - the scoring: text and context are each tokenized with BOS; the candidate's tokens are
    the last n(text) - n(context) tokens of the text (at least 1, at most n(text) - 1), and
    its score is the mean over them of log softmax(logits at the previous position)[token]
    (the whole continuation, not the first token's logit); sequences longer than the
    model's seq_len would lose tokens from the left after BOS (none does here);
  - the prediction: the argmax over the candidates, the first maximum on exact ties; the
    example is correct when it equals the gold label.

Which examples: grzo-finetune's OUT/indices.txt (tasks.h "Indices files") names the files
(with their FNV-1a 64 hashes and example counts, both checked here against the files read)
and lists each split's example indices (the example's position among the file's examples,
header and blank lines not counted); dev indices refer to the train file when
dev_from_train is 1. The sampling itself is not re-derived.

float64 here against float32 there: an example whose best and second-best candidate
scores are closer than --tol (mean log-likelihood, nats per token) is a near tie, whose
prediction the C side may flip; it is reported, and counts as either correct or wrong in
the comparison. More than --max-near-ties of them fails the check. (The default 1e-3 is far
above float32's effect: recomputing stories260K's RTE scores with float32 tensors and
activations moves them by under 1e-6; the smallest margin in the test is about 0.04.)

    classify_ref.py --model stories260K.bin --tokenizer tok512.bin --task SST-2 \\
        --indices OUT/indices.txt [--results OUT/results.json [--per-example] [--require-varied]]
        [--json preds.json] [--tol 1e-3] [--max-near-ties 2]

prints one line per distinct example (split, file index and copies, gold, prediction,
candidate scores, margin) and each split's accuracy. With --results (grzo-finetune's
results.json) it compares each split's count of correct examples, zero-shot and final
(grzo-finetune reports accuracies only, no per-example predictions for classification):
  - where every distinct example of the split appears a distinct power of two times (the
    test composes such files, tests/finetune/test_finetune_scorer.sh) and none is a near
    tie, the count written in binary IS the per-example correctness, and each example is
    compared on its own;
  - otherwise the count must equal the reference's, or lie in its range when near ties
    may go either way.
Exit status: 0 agree (or no --results), 1 disagree or a check failed, 2 bad input.
"""
import argparse
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama_ref  # noqa: E402  (the float64 Llama forward)


class RefError(Exception):
    pass

# ---------------------------------------------------------------------------- llama2.c checkpoint


def llama2c_header(data, path):
    """The 7 header fields of a llama2.c checkpoint (vocab as stored: negative for an untied head)."""
    if len(data) < 28:
        raise RefError(f"{path}: too short for a llama2.c header")
    h = struct.unpack_from("<7i", data, 0)
    dim, hidden, n_layers, n_heads, n_kv, vocab, seq_len = h
    if min(dim, hidden, n_layers, n_heads, n_kv, abs(vocab), seq_len) <= 0 or dim % n_heads or n_heads % n_kv:
        raise RefError(f"{path}: implausible header {h}")
    return h


def llama2c_layout(header):
    """[(name, shape)] of a llama2.c checkpoint's fp32 tensors after the 28-byte header, in file
    order (llama2.c's memory_map_weights; every matrix (d_out, d_in), row-major); "output" (the
    classifier) only when the header's vocab is negative (untied)."""
    dim, hidden, L, n_heads, n_kv, vocab, seq_len = header
    hd = dim // n_heads
    kv_dim = n_kv * hd
    V = abs(vocab)
    layout = [("token_embd", (V, dim)), ("attn_norm", (L, dim)), ("attn_q", (L, n_heads * hd, dim)),
              ("attn_k", (L, kv_dim, dim)), ("attn_v", (L, kv_dim, dim)), ("attn_output", (L, dim, n_heads * hd)),
              ("ffn_norm", (L, dim)), ("ffn_gate", (L, hidden, dim)), ("ffn_down", (L, dim, hidden)),
              ("ffn_up", (L, hidden, dim)), ("output_norm", (dim,)),
              ("freq_cis", (2, seq_len, hd // 2))]        # the unused rotary tables
    if vocab < 0:
        layout.append(("output", (V, dim)))
    return layout


def llama2c_arrays(data, path):
    """(header, arrays) of a llama2.c checkpoint's bytes: its seven header ints and each
    tensor of llama2c_layout as a float32 array of its own; the file's size checked."""
    header = llama2c_header(data, path)
    layout = llama2c_layout(header)
    need = 28 + 4 * sum(int(np.prod(s)) for _, s in layout)
    if len(data) != need:
        raise RefError(f"{path}: {len(data)} bytes, a llama2.c checkpoint of this header has {need}")
    raw, off = {}, 28
    for name, shape in layout:
        n = int(np.prod(shape))
        raw[name] = np.frombuffer(data, dtype="<f4", count=n, offset=off).reshape(shape).copy()
        off += 4 * n
    return list(header), raw


def read_llama2c(path):
    """(meta, tensors) of a llama2.c checkpoint in llama_ref.forward's GGUF names (float64)."""
    with open(path, "rb") as f:
        data = f.read()
    header, raw = llama2c_arrays(data, path)
    raw = {name: a.astype(np.float64) for name, a in raw.items()}
    dim, hidden, n_layers, n_heads, n_kv, vocab, seq_len = header
    shared = vocab > 0
    vocab = abs(vocab)
    hd = dim // n_heads
    L = n_layers
    t = {"token_embd.weight": raw["token_embd"], "output_norm.weight": raw["output_norm"]}
    if not shared:
        t["output.weight"] = raw["output"]
    for l in range(L):
        for name in ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_down",
                     "ffn_up"):
            t[f"blk.{l}.{name}.weight"] = raw[name][l]
    meta = {"llama.embedding_length": dim, "llama.block_count": L, "llama.attention.head_count": n_heads,
            "llama.attention.head_count_kv": n_kv, "llama.attention.key_length": hd,
            "llama.attention.layer_norm_rms_epsilon": 1e-5, "llama.rope.freq_base": 10000.0,
            "llama.context_length": seq_len, "vocab": vocab}
    return meta, t

# ---------------------------------------------------------------------------- llama2.c tokenizer


class Llama2cTokenizer:
    BOS = 1

    def __init__(self, path, vocab_size):
        with open(path, "rb") as f:
            data = f.read()
        (self.max_token_length,) = struct.unpack_from("<i", data, 0)
        pos, self.vocab, self.scores = 4, [], []
        for _ in range(vocab_size):
            score, n = struct.unpack_from("<fi", data, pos)
            pos += 8
            if n < 0 or pos + n > len(data):
                raise RefError(f"{path}: token {len(self.vocab)} runs past the file")
            self.vocab.append(data[pos:pos + n])
            self.scores.append(score)
            pos += n
        if pos != len(data):
            raise RefError(f"{path}: {len(data) - pos} bytes after the {vocab_size} tokens")
        self.lookup = {}
        for i, s in enumerate(self.vocab):
            if s in self.lookup:   # llama2.c's bsearch would pick one arbitrarily
                raise RefError(f"{path}: token string {s!r} appears twice")
            self.lookup[s] = i

    def encode(self, text, bos):
        """llama2.c's encode(tokenizer, text, bos, eos=0)."""
        b = text.encode("utf-8")
        ids = [self.BOS] if bos else []
        if b:
            ids.append(self.lookup[b" "])          # the dummy prefix
        i = 0
        while i < len(b):
            j = i + 1                               # a character: a lead byte and up to 3 continuation bytes
            while j < len(b) and (b[j] & 0xC0) == 0x80 and j - i < 4:
                j += 1
            ch = b[i:j]
            if ch in self.lookup:
                ids.append(self.lookup[ch])
            else:
                ids.extend(c + 3 for c in ch)       # byte fallback <0xXX>
            i = j
        while True:
            best_score, best_id, best_idx = -1e10, -1, -1
            for k in range(len(ids) - 1):
                merged = self.vocab[ids[k]] + self.vocab[ids[k + 1]]
                m = self.lookup.get(merged, -1)
                if m != -1 and self.scores[m] > best_score:
                    best_score, best_id, best_idx = self.scores[m], m, k
            if best_idx == -1:
                return ids
            ids[best_idx:best_idx + 2] = [best_id]

# ---------------------------------------------------------------------------- data files and tasks


def data_lines(path):
    """The file's lines (a UTF-8 BOM dropped, CR LF and LF ends), blank lines left out."""
    with open(path, "rb") as f:
        text = f.read().decode("utf-8")
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = [ln[:-1] if ln.endswith("\r") else ln for ln in text.split("\n")]
    return [ln for ln in lines if ln.strip()]


def read_tsv(path, columns):
    """Rows of a tsv with a header, as tuples of the named columns."""
    lines = data_lines(path)
    head = lines[0].split("\t")
    try:
        cols = [head.index(c) for c in columns]
    except ValueError:
        raise RefError(f"{path}: the header {head} lacks one of {columns}")
    return [tuple(ln.split("\t")[c] for c in cols) for ln in lines[1:]]


RTE_WORDS = ["entailment", "not_entailment"]


def read_sst2(path):
    if not path.endswith(".tsv"):
        raise RefError(f"{path}: SST-2 is read from a .tsv here")
    rows = read_tsv(path, ["sentence", "label"])
    return [{"sentence": s, "label": int(lab)} for s, lab in rows]


def read_rte(path):
    if path.endswith(".jsonl"):
        out = []
        for ln in data_lines(path):
            o = json.loads(ln)
            out.append({"premise": o["premise"], "hypothesis": o["hypothesis"], "label": RTE_WORDS.index(o["label"])})
        return out
    rows = read_tsv(path, ["sentence1", "sentence2", "label"])
    return [{"premise": p, "hypothesis": h, "label": RTE_WORDS.index(lab)} for p, h, lab in rows]


def sst2_prompt(ex):
    return ex["sentence"].strip() + " It was"


def rte_prompt(ex):
    return ex["premise"] + "\nDoes this mean that \"" + ex["hypothesis"] + "\" is true? Yes or No?\n"


# name: (reader, MeZO's encode(x), the candidates in gold-index order)
TASKS = {
    "SST-2": (read_sst2, sst2_prompt, [" terrible", " great"]),
    "RTE": (read_rte, rte_prompt, ["Yes", "No"]),
}


def find_task(name):
    key = name.lower().replace("-", "").replace("_", "")
    for t in TASKS:
        if t.lower().replace("-", "") == key:
            return t
    raise RefError(f"task {name}: the reference knows {', '.join(TASKS)}")


def assemble(encoded, candidate):
    """MeZO's context and text: only spaces stripped from both ends, then lstrip()."""
    return encoded.strip(" ").lstrip(), (encoded + candidate).strip(" ").lstrip()

# ---------------------------------------------------------------------------- indices.txt


def fnv1a64(data):
    h = 0xCBF29CE484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def read_indices(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if lines[0] != "grzo-tasks-indices 1":
        raise RefError(f"{path}: not a grzo indices file")
    out = {"files": {}, "splits": {}}
    i = 1
    while i < len(lines) and lines[i] != "end":
        word, _, rest = lines[i].partition(" ")
        if word == "task":
            out["task"] = rest
        elif word == "dev_from_train":
            out["dev_from_train"] = int(rest)
        elif word == "file":
            which, pool, h, p = rest.split(" ", 3)
            out["files"][which] = (int(pool), int(h, 16), None if p == "-" else p)
        elif word == "split":
            which, n = rest.split(" ")
            out["splits"][which] = [int(x) for x in lines[i + 1:i + 1 + int(n)]]
            i += int(n)
        i += 1
    if i >= len(lines):
        raise RefError(f"{path}: no end line")
    return out

# ---------------------------------------------------------------------------- scoring


def log_softmax(x):
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def candidate_score(meta, t, tok, context, text):
    """Mean log-likelihood of the text's last n(text) - n(context) tokens."""
    ids = tok.encode(text, True)
    n_ctx = len(tok.encode(context, True))
    opt = min(max(len(ids) - n_ctx, 1), len(ids) - 1)
    max_len = meta["llama.context_length"]
    if len(ids) > max_len:   # left-truncated after BOS
        ids = ids[:1] + ids[1 + len(ids) - max_len:]
        opt = min(opt, len(ids) - 1)
    lp = log_softmax(llama_ref.forward(meta, t, ids))
    start = len(ids) - opt
    return float(np.mean([lp[p - 1, ids[p]] for p in range(start, len(ids))])), ids, start


def predict(scores):
    """The first maximum (a later candidate must score strictly higher to win)."""
    best = 0
    for k in range(1, len(scores)):
        if scores[k] > scores[best]:
            best = k
    return best


def read_pools(idx, reader):
    """The examples of each file indices.txt names (train, dev, test), read by reader(path),
    each file checked against its recorded FNV-1a 64 hash and example count."""
    pools = {}
    for which in ("train", "dev", "test"):
        pool, h, path = idx["files"][which]
        if path is None:
            continue
        with open(path, "rb") as f:
            got = fnv1a64(f.read())
        if got != h:
            raise RefError(f"{path}: FNV-1a 64 {got:016x}, indices.txt recorded {h:016x} (another file)")
        pools[which] = reader(path)
        if len(pools[which]) != pool:
            raise RefError(f"{path}: {len(pools[which])} examples read here, grzo-finetune counted {pool}")
    return pools


def evaluate(args):
    """Every dev and test example scored; the split's rows grouped by identical examples."""
    idx = read_indices(args.indices)
    task = find_task(args.task)
    if find_task(idx.get("task", "")) != task:
        raise RefError(f"{args.indices} is for task {idx.get('task')}, not {task}")
    reader, prompt, cands = TASKS[task]
    pools = read_pools(idx, reader)
    meta, t = read_llama2c(args.model)
    tok = Llama2cTokenizer(args.tokenizer, meta["vocab"])
    result = {"task": task, "tol": args.tol, "candidates": cands, "splits": {}}
    for split in ("dev", "test"):
        src = pools["train" if split == "dev" and idx["dev_from_train"] else split]
        groups = {}
        for i in idx["splits"][split]:
            ex = src[i]
            key = json.dumps(ex, sort_keys=True)
            if key in groups:
                groups[key]["indices"].append(i)
                continue
            scores, tokens = [], []
            for c in cands:
                context, text = assemble(prompt(ex), c)
                s, ids, start = candidate_score(meta, t, tok, context, text)
                scores.append(s)
                tokens.append([ids[:start], ids[start:]])
            pred = predict(scores)
            # a near tie: a candidate other than the prediction within tol of its score; the
            # C side may predict any candidate within reach
            reach = [k for k in range(len(cands)) if scores[pred] - scores[k] < args.tol]
            second = max((scores[k] for k in range(len(cands)) if k != pred), default=float("-inf"))
            groups[key] = {"example": ex, "indices": [i], "gold": ex["label"], "pred": pred, "correct": pred == ex["label"],
                           "scores": scores, "margin": scores[pred] - second, "near_tie": len(reach) > 1,
                           "could_be_correct": ex["label"] in reach,
                           "could_be_wrong": any(k != ex["label"] for k in reach), "tokens": tokens}
        result["splits"][split] = sorted(groups.values(), key=lambda g: (len(g["indices"]), g["indices"][0]))
    return result


def split_counts(groups):
    """(examples, correct, predicted per candidate, gold per candidate), counting every copy."""
    n = sum(len(g["indices"]) for g in groups)
    k = len(groups[0]["scores"]) if groups else 0
    correct = sum(len(g["indices"]) for g in groups if g["correct"])
    pred = [sum(len(g["indices"]) for g in groups if g["pred"] == c) for c in range(k)]
    gold = [sum(len(g["indices"]) for g in groups if g["gold"] == c) for c in range(k)]
    return n, correct, pred, gold


def describe(g):
    """The example's first file index, its copies and the start of its text, for messages."""
    text = g["example"].get("sentence", g["example"].get("premise", ""))
    copies = f" x{len(g['indices'])}" if len(g["indices"]) > 1 else ""
    return f"[{g['indices'][0]}{copies}] {json.dumps(text[:36] + ('...' if len(text) > 36 else ''))}"


def report(result, out):
    for split, groups in result["splits"].items():
        for g in groups:
            sc = " ".join(f"{s:9.5f}" for s in g["scores"])
            print(f"{result['task']} {split:4s} {describe(g)}: gold {g['gold']} pred {g['pred']} [{sc}] "
                  f"margin {g['margin']:.5f}{'  NEAR TIE' if g['near_tie'] else ''}{'' if g['correct'] else '  wrong'}",
                  file=out)
        n, c, pred, gold = split_counts(groups)
        print(f"{result['task']} {split}: {c}/{n} correct, accuracy {c / n if n else 0:.4f}; predicted {pred} per "
              f"candidate, gold {gold}", file=out)


def decodable(groups):
    """Whether the split's count of correct examples spells out each example: every example
    is repeated a distinct power of two times (so the count in binary is the per-example
    correctness) and none is a near tie (whose copies the C side might score apart)."""
    mult = [len(g["indices"]) for g in groups]
    return (len(set(mult)) == len(mult) and all(m & (m - 1) == 0 for m in mult)
            and not any(g["near_tie"] for g in groups))


def check(result, results_path, max_near_ties, per_example=False):
    """The C side's counts against ours; a list of failures. per_example: every split must
    be decodable (compared example by example)."""
    with open(results_path, encoding="utf-8") as f:
        res = json.load(f)
    fails = []
    near = [g for groups in result["splits"].values() for g in groups if g["near_tie"]]
    total = sum(len(groups) for groups in result["splits"].values())
    if len(near) > max_near_ties:
        fails.append(f"{len(near)} of {total} examples are near ties (margin < {result['tol']}): more than the "
                     f"{max_near_ties} allowed, the comparison would say little")
    for split, groups in result["splits"].items():
        n = sum(len(g["indices"]) for g in groups)
        if res.get("n_" + split) != n:
            fails.append(f"{split}: results.json has n_{split} {res.get('n_' + split)}, indices.txt lists {n}")
            continue
        if per_example and not decodable(groups):
            fails.append(f"{split}: its examples are not each repeated a distinct power of two times (or one is a near "
                         f"tie), so the count cannot be compared example by example")
        for key in ("zero_shot_" + split + "_acc", split + "_acc"):
            acc = res.get(key)
            if not isinstance(acc, (int, float)):
                fails.append(f"results.json lacks {key}")
                continue
            c = round(acc * n)
            if n == 0 or abs(acc - c / n) > 1e-6:
                fails.append(f"{key} {acc} is not a count out of {n}")
                continue
            if decodable(groups):
                weights = sum(len(g["indices"]) for g in groups)
                if c & ~weights:
                    fails.append(f"{key}: grzo-finetune counts {c}/{n} correct, not a sum of the examples' copies")
                    continue
                bad = [g for g in groups if bool(c & len(g["indices"])) != g["correct"]]
                for g in bad:
                    fails.append(f"{key}: example {describe(g)} (gold {g['gold']}) is {'correct' if c & len(g['indices']) else 'wrong'} for grzo-finetune, "
                                 f"{'correct' if g['correct'] else 'wrong'} here (reference prediction {g['pred']}, "
                                 f"scores {g['scores']})")
                if not bad:
                    print(f"{result['task']} {key}: grzo-finetune {c}/{n} correct = reference, and example by example "
                          f"({len(groups)} examples, copies 2^0..2^{len(groups) - 1})")
                continue
            lo = sum(len(g["indices"]) for g in groups if g["could_be_correct"] and not g["could_be_wrong"])
            hi = sum(len(g["indices"]) for g in groups if g["could_be_correct"])
            if not lo <= c <= hi:
                want = f"{lo}" if lo == hi else f"{lo} to {hi} (near ties)"
                fails.append(f"{key}: grzo-finetune counts {c}/{n} correct, the reference {want}")
            else:
                print(f"{result['task']} {key}: grzo-finetune {c}/{n} correct = reference"
                      f"{'' if lo == hi else f' (within {lo}..{hi}: near ties)'}")
    return fails


def varied(result):
    """Whether the examples' reference predictions differ (some example predicts another candidate)."""
    return len({g["pred"] for groups in result["splits"].values() for g in groups}) > 1


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="llama2.c checkpoint (.bin)")
    ap.add_argument("--tokenizer", required=True, help="llama2.c tokenizer.bin")
    ap.add_argument("--task", required=True, help=", ".join(TASKS))
    ap.add_argument("--indices", required=True, help="grzo-finetune's OUT/indices.txt")
    ap.add_argument("--results", help="grzo-finetune's OUT/results.json: compare the counts of correct examples")
    ap.add_argument("--json", help="write the per-example predictions here")
    ap.add_argument("--tol", type=float, default=1e-3, help="near-tie margin, mean log-likelihood (default 1e-3)")
    ap.add_argument("--max-near-ties", type=int, default=2, help="more near ties than this fail --results (default 2)")
    ap.add_argument("--per-example", action="store_true",
                    help="fail unless every split can be compared example by example (see above)")
    ap.add_argument("--require-varied", action="store_true",
                    help="fail unless the reference predicts different candidates for some examples")
    a = ap.parse_args(argv)
    try:
        result = evaluate(a)
    except (RefError, OSError, ValueError, KeyError, IndexError) as e:
        print(f"classify_ref.py: {e}", file=sys.stderr)
        return 2
    report(result, sys.stdout)
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
    if not a.results:
        return 0
    try:
        fails = check(result, a.results, a.max_near_ties, a.per_example)
    except (OSError, ValueError) as e:
        print(f"classify_ref.py: {a.results}: {e}", file=sys.stderr)
        return 2
    if a.require_varied and not varied(result):
        fails.append("every example predicts the same candidate: the sample cannot tell an argmax from a constant")
    for msg in fails:
        print(f"FAIL: {result['task']}: {msg}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
