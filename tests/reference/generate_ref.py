#!/usr/bin/env python3
"""generate_ref.py - an independent greedy decoder for grzo-finetune's generation tasks
(SQuAD, DROP), to hold OUT/predictions.jsonl to it question by question.

It shares no code with the C side. The llama2.c checkpoint reader, the llama2.c tokenizer
(encode), MeZO's prompt assembly and the indices.txt reader come from classify_ref.py, the
float64 Llama forward from llama_ref.py (with its key/value cache, one token at a time).

What grzo-finetune does, as re-implemented here (examples/finetune):
  - the prompt (tasks.c template_squad / template_drop, MeZO's SQuADv2Template/DROPTemplate):
      SQuAD  "Title: <title>\\nContext: <context>\\nQuestion: <question, str.strip()>\\nAnswer:"
             (a missing title is ""), one question per qas[] entry in file order;
      DROP   "Passage: <passage>\\nQuestion: <question, str.strip()>\\nAnswer:", in file order,
             less the questions HF "drop" drops (drop_target: an answer that is no number, date
             or span, or a number or date given together with another kind);
    then MeZO's assembly (classify_ref.assemble: spaces stripped from both ends, then lstrip());
    tokenized with BOS (llama2.c encode);
  - tok_examples.c prompt_fit: with max_len = --max-len (0 or above the model's seq_len: seq_len),
    a prompt longer than cap = max_len - 50 (a model with at most 51 positions: cap = max_len / 2,
    at least 1) keeps BOS and its last cap - 1 tokens;
  - finetune.c setup_optimizer: gen_steps = the largest n_prompt + 49 over the dev and test
    questions, at most max_len (sequence_cap); generate_answer: steps = min(n_prompt + 49,
    gen_steps) positions in all (TASKS_MAX_NEW_TOKENS = 50 new tokens at most);
  - model.c llm_generate, greedy: for pos = n_prompt - 1 .. steps - 1, the next token is the
    first maximum of the logits at pos (the lowest id on ties); BOS (1) or EOS (2) ends the
    text without being emitted; otherwise it is appended, and a token whose text holds "\\n"
    ends the text after it (finetune.c answer_stops, the on_token hook, which watches BOS and
    EOS too and drops them from the answer); the loop's end
    is the length limit: "max_new_tokens" when steps = n_prompt + 49, else the sequence's cap
    ("max_len": gen_steps was clamped to --max-len or the model's seq_len);
  - the text: each new token's text (tokenizer.c llm_token_text: an <0xXX> token is that byte;
    a leading space is dropped when the token before is BOS; pieces are C strings, so a NUL
    byte reads as nothing) concatenated, cut at the first "\\n" (strcspn), and read as UTF-8
    with U+FFFD for ill-formed bytes (qa_utf8_repair, Python's decode(errors="replace")).

For each question it also decodes the counterfactuals a broken stop rule would produce: the
stop that ended the answer ignored (BOS, EOS: the token emitted and decoding going on; the
newline: decoding going on, the text still cut at the newline), and the length limit one
position longer or shorter (max_new_tokens: n_prompt + 50 or + 48, still within gen_steps,
as a changed TASKS_MAX_NEW_TOKENS - 1 in generate_answer would be; max_len: gen_steps + 1 or
- 1). A condition is shown when its counterfactual changes the prediction or the answer's new
tokens (predictions.jsonl's "new_tokens" and "stop" are compared too: the newline stop cannot
change the prediction, which is cut at the newline either way).

float64 here against float32 there: when the top-2 margin of the logits at a step is below
--tol, the C side may pick either token; the question is then compared only up to that step
(the C prediction must start with the text decoded before it), and more than --max-near-ties
such questions in a run fail the check.

    generate_ref.py check --model M.bin --tokenizer T.bin --task squad|drop --indices OUT/indices.txt
        [--max-len N] [--predictions OUT/predictions.jsonl] [--json REPORT.json]
        [--tol 1e-4] [--max-near-ties 2]
  prints one line per question (split, id, prompt length, limit, new tokens, the stop that
  ended it, the smallest margin, the prediction, which counterfactuals change it) and with
  --predictions compares each test question's prediction, its "new_tokens" and its "stop"
  (exit 0 agree, 1 disagree, 2 bad input).

    generate_ref.py coverage REPORT.json...
  fails unless, across the reports, every stop (newline, eos, bos, max_new_tokens, max_len)
  ends at least one test answer and its counterfactuals change that answer's prediction or its
  new tokens (the newline's cut must matter too: a newline-ended answer whose text would
  change without it), and none ends every answer.

    generate_ref.py make-model --from stories260K.bin --out M.bin [--untie] [--seq-len N]
        [--row TOKEN=SRC*SCALE ...]
    generate_ref.py make-tokenizer --from tok512.bin --out T.bin [--piece ID=TEXT ...]
  write the test's model and tokenizer variants (see tests/finetune/test_finetune_generate_ref.sh).
  make-model: --untie stores the classifier apart from the token embedding (header vocab
  negative, llama2.c's convention: a positive vocab shares the embedding as the classifier);
  --row TOKEN=SRC*SCALE sets classifier row TOKEN to SCALE times embedding row SRC (after
  --untie, so the embedding, i.e. the model's input, is unchanged); --seq-len N rewrites the
  header's seq_len (the rotary tables cut or extended, llama2.c's freq_cis formula).
  make-tokenizer: --piece ID=TEXT replaces token ID's text (Python escapes: "\\\\n").
"""
import argparse
import json
import os
import struct
import sys

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")   # tiny matrices: threads only contend (35x slower on a busy host)

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import classify_ref as cr  # noqa: E402  (llama2.c reader, tokenizer, prompt assembly, indices)
import llama_ref  # noqa: E402  (the float64 forward)

BOS, EOS = 1, 2            # llama2.c tokenizer ids (tokenizer.c llm_tokenizer_load_llama2c_memory)
MAX_NEW = 50               # tasks.h TASKS_MAX_NEW_TOKENS
RefError = cr.RefError
STOPS = ("newline", "eos", "bos", "max_new_tokens", "max_len")   # predictions.jsonl's "stop"

# ---------------------------------------------------------------------------- questions and prompts


def squad_questions(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    out = []
    for article in doc["data"]:
        title = article.get("title", "")
        for par in article["paragraphs"]:
            for qa in par["qas"]:
                enc = ("Title: " + title + "\nContext: " + par["context"] + "\nQuestion: " + qa["question"].strip()
                       + "\nAnswer:")
                out.append({"id": qa["id"], "encoded": enc})
    return out


def drop_kept(answer):
    """Whether HF "drop" keeps the question (tasks.c drop_target)."""
    number = answer.get("number", "")
    date = answer.get("date", {})
    date_given = any(date.get(k, "") for k in ("day", "month", "year"))
    spans = answer.get("spans", [])
    if number:
        return not (date_given or spans)
    if date_given:
        return not spans
    return bool(spans)


def drop_questions(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    out = []
    for section in doc.values():
        for qa in section["qa_pairs"]:
            if not drop_kept(qa["answer"]):
                continue
            enc = "Passage: " + section["passage"] + "\nQuestion: " + qa["question"].strip() + "\nAnswer:"
            out.append({"id": qa["query_id"], "encoded": enc})
    return out


TASKS = {"squad": squad_questions, "drop": drop_questions}


def prompt_fit(ids, max_len):
    """tok_examples.c prompt_fit with BOS kept at the head."""
    n = len(ids)
    cap = max_len - MAX_NEW
    if cap < 2:
        cap = max_len // 2 if max_len // 2 > 1 else 1
    if n <= cap:
        return list(ids)
    return ids[:1] + ids[1 + n - cap:]

# ---------------------------------------------------------------------------- token texts


def piece_bytes(tok, prev, tid):
    """llm_token_text's bytes for token tid after prev (a C string: up to a NUL)."""
    p = tok.vocab[tid]
    if len(p) == 6 and p[:3] == b"<0x" and p[5:] == b">":
        try:
            p = bytes([int(p[3:5].decode("ascii"), 16)])
        except ValueError:
            pass
    p = p.split(b"\0", 1)[0]
    if prev == BOS and p[:1] == b" ":
        p = p[1:]
    return p


def prediction_of(raw):
    """The raw generated bytes up to the first newline, decoded as qa_utf8_repair does."""
    return raw.split(b"\n", 1)[0].decode("utf-8", errors="replace")


def complete_prefix(b):
    """b without a trailing incomplete UTF-8 sequence (which a longer text may complete)."""
    for k in range(1, min(4, len(b)) + 1):
        c = b[-k]
        if c & 0xC0 == 0x80:
            continue
        need = 2 if c & 0xE0 == 0xC0 else 3 if c & 0xF0 == 0xE0 else 4 if c & 0xF8 == 0xF0 else 1
        return b[:-k] if need > k else b
    return b

# ---------------------------------------------------------------------------- decoding


def first_max(logits):
    """model.c llm__argmax: the first maximum; and the margin to the best other token."""
    best = int(np.argmax(logits))          # numpy: the first occurrence
    other = np.delete(logits, best).max() if len(logits) > 1 else -np.inf
    return best, float(logits[best] - other)


def decode(meta, t, tok, prompt, steps, ignore=()):
    """Greedy decoding as llm_generate + generate_answer: llama_ref.forward over the prompt,
    then one token at a time against its key/value cache; ignore: stops to skip ("bos", "eos",
    "newline"). Returns the generated tokens, the stop, the per-step margins, the raw bytes."""
    cache = {}
    tokens, margins, stop = list(prompt), [], None
    n_prompt = len(prompt)
    logits = llama_ref.forward(meta, t, tokens, cache)[-1]
    for pos in range(n_prompt - 1, steps):
        if pos >= n_prompt:
            logits = llama_ref.forward(meta, t, tokens[-1:], cache)[-1]
        nxt, margin = first_max(logits)
        margins.append(margin)
        if nxt == BOS and "bos" not in ignore:
            stop = "bos"
            break
        if nxt == EOS and "eos" not in ignore:
            stop = "eos"
            break
        tokens.append(nxt)
        if b"\n" in piece_bytes(tok, tokens[-2], nxt) and "newline" not in ignore:
            stop = "newline"
            break
    if stop is None:
        stop = "max_new_tokens" if steps == n_prompt + MAX_NEW - 1 else "max_len"
    new = tokens[n_prompt:]
    raw = b"".join(piece_bytes(tok, tokens[n_prompt + i - 1], new[i]) for i in range(len(new)))
    return {"new": new, "stop": stop, "margins": margins, "raw": raw}

# ---------------------------------------------------------------------------- a run's questions


def load_run(args):
    idx = cr.read_indices(args.indices)
    task = args.task.lower()
    if task not in TASKS:
        raise RefError(f"task {args.task}: the reference knows {', '.join(TASKS)}")
    if idx.get("task", "").lower() != task:
        raise RefError(f"{args.indices} is for task {idx.get('task')}, not {task}")
    pools = cr.read_pools(idx, TASKS[task])
    splits = {}
    for split in ("dev", "test"):
        src = pools["train" if split == "dev" and idx["dev_from_train"] else split]
        splits[split] = [dict(src[i], index=i) for i in idx["splits"][split]]
    return splits


def evaluate(args):
    splits = load_run(args)
    meta, t = cr.read_llama2c(args.model)
    tok = cr.Llama2cTokenizer(args.tokenizer, meta["vocab"])
    seq_len = meta["llama.context_length"]
    max_len = seq_len if args.max_len <= 0 or args.max_len > seq_len else args.max_len
    for qs in splits.values():
        for q in qs:
            q["prompt"] = prompt_fit(tok.encode(cr.assemble(q["encoded"], "")[0], True), max_len)
    max_generate = max((len(q["prompt"]) + MAX_NEW - 1 for qs in splits.values() for q in qs), default=0)
    gen_steps = min(max_generate, max_len)   # the prompt and the answer are one sequence
    memo = {}
    for split, qs in splits.items():
        for q in qs:
            n = len(q["prompt"])
            steps = min(n + MAX_NEW - 1, gen_steps)
            key = (tuple(q["prompt"]), steps)
            if key not in memo:
                memo[key] = run_question(meta, t, tok, q["prompt"], steps, gen_steps, args.tol)
            q.update(memo[key], n_prompt=n, steps=steps)
    return {"splits": splits, "gen_steps": gen_steps, "seq_len": seq_len, "max_len": max_len, "tol": args.tol,
            "model": args.model, "tokenizer": args.tokenizer, "task": args.task.lower()}, tok


def run_question(meta, t, tok, prompt, steps, gen_steps, tol):
    n = len(prompt)
    d = decode(meta, t, tok, prompt, steps)
    near = next((i for i, m in enumerate(d["margins"]) if m < tol), None)
    r = {"new": d["new"], "stop": d["stop"], "raw": d["raw"], "prediction": prediction_of(d["raw"]),
         "min_margin": min(d["margins"]) if d["margins"] else float("inf"), "near_tie_step": near, "what_if": {}}
    # the counterfactuals of the stop that ended it
    alt = {}
    if d["stop"] in ("bos", "eos", "newline"):
        alt["ignored"] = decode(meta, t, tok, prompt, steps, ignore=(d["stop"],))
    elif d["stop"] == "max_new_tokens":
        alt["limit+1"] = decode(meta, t, tok, prompt, min(n + MAX_NEW, gen_steps))
        alt["limit-1"] = decode(meta, t, tok, prompt, n + MAX_NEW - 2) if n + MAX_NEW - 2 >= n else None
    else:
        alt["limit+1"] = decode(meta, t, tok, prompt, min(n + MAX_NEW - 1, gen_steps + 1))
        alt["limit-1"] = decode(meta, t, tok, prompt, min(n + MAX_NEW - 1, gen_steps - 1)) if gen_steps - 1 >= n else None
    for name, a in alt.items():
        if a is None:
            continue
        r["what_if"][name] = {"prediction": prediction_of(a["raw"]), "raw": a["raw"],
                              "prediction_changes": prediction_of(a["raw"]) != r["prediction"],
                              "raw_changes": a["raw"] != d["raw"], "n_new": len(a["new"])}
    if d["stop"] == "newline":   # the strcspn cut: would the text change without it?
        r["what_if"]["no_cut"] = {"prediction_changes": d["raw"].decode("utf-8", errors="replace") != r["prediction"]}
    return r


def prefix_before_tie(q, tok):
    """The raw bytes of the tokens decoded before the first near tie."""
    k = q["near_tie_step"]
    new = q["new"][:k]
    prev = [q["prompt"][-1]] + new
    return b"".join(piece_bytes(tok, prev[i], new[i]) for i in range(len(new)))


def describe(q):
    wi = ", ".join(f"{k} changes {'the prediction' if v['prediction_changes'] else 'the new tokens' if v.get('n_new', len(q['new'])) != len(q['new']) else 'nothing'}"
                   for k, v in q["what_if"].items())
    tie = f" NEAR TIE at new token {q['near_tie_step'] + 1}" if q["near_tie_step"] is not None else ""
    return (f"{q['id']:>10s} prompt {q['n_prompt']:3d} limit {q['steps']:3d} new {len(q['new']):2d} stop {q['stop']:7s} "
            f"margin {q['min_margin']:.4f}{tie}: {json.dumps(q['prediction'])} [{wi}]")

# ---------------------------------------------------------------------------- checks


def check_predictions(result, path, tok):
    fails, near = [], 0
    with open(path, encoding="utf-8") as f:
        lines = [json.loads(ln) for ln in f if ln.strip()]
    test = result["splits"]["test"]
    if len(lines) != len(test):
        return [f"{path}: {len(lines)} predictions, indices.txt lists {len(test)} test questions"], 0
    compared = 0
    for q, got in zip(test, lines):
        if got.get("id") != q["id"]:
            fails.append(f"line {compared + 1}: id {got.get('id')!r}, the test split's question is {q['id']!r}")
            continue
        compared += 1
        pred = got.get("prediction")
        if q["near_tie_step"] is None:
            if pred != q["prediction"]:
                fails.append(f"{q['id']}: grzo-finetune predicts {json.dumps(pred)}, the reference {json.dumps(q['prediction'])} "
                             f"(stop {q['stop']}, {len(q['new'])} new tokens of at most {q['steps'] - q['n_prompt'] + 1})")
            elif got.get("stop") != q["stop"] or got.get("new_tokens") != len(q["new"]):
                fails.append(f"{q['id']}: grzo-finetune's answer {json.dumps(pred)} ended by {got.get('stop')!r} after "
                             f"{got.get('new_tokens')!r} new tokens, the reference's by {q['stop']!r} after {len(q['new'])}")
        else:
            near += 1
            pre = prediction_of(complete_prefix(prefix_before_tie(q, tok)))
            if not isinstance(pred, str) or not pred.startswith(pre.rstrip("\ufffd")):
                fails.append(f"{q['id']}: grzo-finetune predicts {json.dumps(pred)}, which does not start with the "
                             f"reference's text before its near tie, {json.dumps(pre)}")
    print(f"{result['task']}: {compared} test predictions compared with predictions.jsonl ({near} only up to a near tie)")
    return fails, near


def report_json(result):
    out = {k: v for k, v in result.items() if k != "splits"}
    out["splits"] = {}
    for split, qs in result["splits"].items():
        out["splits"][split] = [{"id": q["id"], "index": q["index"], "n_prompt": q["n_prompt"], "steps": q["steps"],
                                 "n_new": len(q["new"]), "new": q["new"], "stop": q["stop"], "prediction": q["prediction"],
                                 "raw": q["raw"].hex(), "min_margin": q["min_margin"], "near_tie_step": q["near_tie_step"],
                                 "what_if": {k: {kk: (vv.hex() if isinstance(vv, bytes) else vv) for kk, vv in v.items()}
                                             for k, v in q["what_if"].items()}} for q in qs]
    return out


def cmd_check(a):
    try:
        result, tok = evaluate(a)
    except (RefError, OSError, ValueError, KeyError, IndexError) as e:
        print(f"generate_ref.py: {e}", file=sys.stderr)
        return 2
    print(f"{result['task']}: {os.path.basename(a.model)} + {os.path.basename(a.tokenizer)}: seq_len {result['seq_len']}, "
          f"max_len {result['max_len']}, gen_steps {result['gen_steps']}")
    for split, qs in result["splits"].items():
        for q in qs:
            print(f"  {split:4s} {describe(q)}")
        stops = {s: sum(q["stop"] == s for q in qs) for s in STOPS}
        print(f"  {split}: stops {', '.join(f'{s} {n}' for s, n in stops.items() if n)}")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(report_json(result), f, indent=1)
    fails, near = [], 0
    try:
        if a.predictions:
            f, near = check_predictions(result, a.predictions, tok)
            fails += f
    except (OSError, ValueError) as e:
        print(f"generate_ref.py: {e}", file=sys.stderr)
        return 2
    if near > a.max_near_ties:
        fails.append(f"{near} test questions meet a near tie (top-2 margin < {a.tol}): more than the {a.max_near_ties} "
                     f"allowed, the comparison would say little")
    for msg in fails:
        print(f"FAIL: {result['task']}: {msg}")
    return 1 if fails else 0


def cmd_coverage(a):
    """Every stop ends some test answer, changes it when broken, and does not end all of them."""
    ended = {s: [] for s in STOPS}
    total = 0
    for path in a.reports:
        with open(path, encoding="utf-8") as f:
            rep = json.load(f)
        for q in rep["splits"]["test"]:
            total += 1
            ended[q["stop"]].append((os.path.basename(path), q))
    fails = []
    for s in STOPS:
        qs = ended[s]
        if not qs:
            fails.append(f"no test answer ends by {s}")
            continue
        if len(qs) == total:
            fails.append(f"every test answer ends by {s}: the test cannot tell the stop from its absence")
        shows = []
        for name, q in qs:
            for k, v in q["what_if"].items():
                if v["prediction_changes"] or v.get("n_new", len(q["new"])) != len(q["new"]):
                    shows.append(f"{k} ({name} {q['id']})")
        need = {"newline": ["ignored", "no_cut"], "eos": ["ignored"], "bos": ["ignored"],
                "max_new_tokens": ["limit+1", "limit-1"], "max_len": ["limit+1", "limit-1"]}[s]
        missing = [k for k in need if not any(x.startswith(k + " ") for x in shows)]
        if missing:
            fails.append(f"{s}: {', '.join(missing)} would change no test answer")
        print(f"{s}: ends {len(qs)} of {total} test answers; shown by {', '.join(sorted(set(x.split(' (')[0] for x in shows)))}"
              f" (e.g. {shows[0] if shows else '-'})")
    for msg in fails:
        print(f"FAIL: coverage: {msg}")
    return 1 if fails else 0

# ---------------------------------------------------------------------------- variants


def cmd_make_model(a):
    with open(a.src, "rb") as f:
        data = f.read()
    header, raw = cr.llama2c_arrays(data, a.src)
    if a.untie and header[5] > 0:
        header[5] = -header[5]
        raw["output"] = raw["token_embd"].copy()
    for spec in a.row:
        dst, rhs = spec.split("=")
        src, scale = rhs.split("*")
        if "output" not in raw:
            raise RefError("--row needs an untied classifier (--untie)")
        raw["output"][int(dst)] = (np.float64(float(scale)) * raw["token_embd"][int(src)]).astype("<f4")
    if a.seq_len:
        dim, n_heads = header[0], header[3]
        hd = dim // n_heads
        header[6] = a.seq_len
        freqs = 1.0 / (10000.0 ** (np.arange(0, hd, 2)[: hd // 2].astype(np.float64) / hd))
        ang = np.outer(np.arange(a.seq_len), freqs)
        raw["freq_cis"] = np.stack([np.cos(ang), np.sin(ang)]).astype("<f4")
    with open(a.out, "wb") as f:
        f.write(struct.pack("<7i", *header))
        for name, _ in cr.llama2c_layout(header):
            f.write(np.ascontiguousarray(raw[name], dtype="<f4").tobytes())
    return 0


def cmd_make_tokenizer(a):
    with open(a.src, "rb") as f:
        data = f.read()
    (max_len,) = struct.unpack_from("<i", data, 0)
    pos, recs = 4, []
    while pos < len(data):
        score, n = struct.unpack_from("<fi", data, pos)
        recs.append([score, data[pos + 8:pos + 8 + n]])
        pos += 8 + n
    for spec in a.piece:
        tid, text = spec.split("=", 1)
        recs[int(tid)][1] = text.encode("utf-8").decode("unicode_escape").encode("latin-1")
    if len({r[1] for r in recs}) != len(recs):
        raise RefError("a token text would appear twice")
    with open(a.out, "wb") as f:
        f.write(struct.pack("<i", max(max_len, max(len(r[1]) for r in recs))))
        for score, text in recs:
            f.write(struct.pack("<fi", score, len(text)) + text)
    return 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("check")
    c.add_argument("--model", required=True)
    c.add_argument("--tokenizer", required=True)
    c.add_argument("--task", required=True, help="squad or drop")
    c.add_argument("--indices", required=True, help="grzo-finetune's OUT/indices.txt")
    c.add_argument("--max-len", type=int, default=0, help="grzo-finetune's --max-len (0: the model's seq_len)")
    c.add_argument("--predictions", help="grzo-finetune's OUT/predictions.jsonl: compare every test prediction")
    c.add_argument("--json", help="write the per-question report here (for coverage)")
    c.add_argument("--tol", type=float, default=1e-4, help="near-tie margin of the logits (default 1e-4)")
    c.add_argument("--max-near-ties", type=int, default=2, help="more near-tie test questions fail (default 2)")
    v = sub.add_parser("coverage")
    v.add_argument("reports", nargs="+")
    m = sub.add_parser("make-model")
    m.add_argument("--from", dest="src", required=True)
    m.add_argument("--out", required=True)
    m.add_argument("--untie", action="store_true")
    m.add_argument("--row", action="append", default=[], help="TOKEN=SRC*SCALE: classifier row TOKEN = SCALE x embedding row SRC")
    m.add_argument("--seq-len", type=int, default=0)
    k = sub.add_parser("make-tokenizer")
    k.add_argument("--from", dest="src", required=True)
    k.add_argument("--out", required=True)
    k.add_argument("--piece", action="append", default=[], help="ID=TEXT")
    a = ap.parse_args(argv)
    try:
        return {"check": cmd_check, "coverage": cmd_coverage, "make-model": cmd_make_model,
                "make-tokenizer": cmd_make_tokenizer}[a.cmd](a)
    except (RefError, OSError, ValueError) as e:
        print(f"generate_ref.py: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
