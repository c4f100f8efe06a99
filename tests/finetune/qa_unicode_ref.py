#!/usr/bin/env python3
"""The QA scorer's text handling (qa_score.c) against the official scripts' Python
(qa_rescore.py) on every character qa_score.h says behaves as in Python:
  - every ASCII character, in contexts that exercise lowering, punctuation, articles and
    whitespace, through SQuAD's normalize_answer and DROP's _normalize_answer;
  - every character Python's str.split() splits at;
  - every character from U+0080 to U+052F (Latin-1, Latin Extended-A and -B, IPA, Greek and
    Cyrillic with its supplement): str.lower() of it between letters, whether \\b sees a word
    character (beside "the"), and the final sigma next to it (cased, case-ignorable);
  - invalid UTF-8 (truncated, overlong, surrogate, out-of-range and stray bytes) repaired as
    bytes.decode("utf-8", "replace") does.
usage: qa_unicode_ref.py HELPER (tests/finetune/qa_normalize_hex). Exits 0 when all agree."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from qa_rescore import drop_normalize, squad_normalize  # noqa: E402


def cases():
    out = []
    for c in map(chr, range(1, 128)):
        if c == "\n":   # the helper reads a line per case
            continue
        for s in (f"The{c}A an{c}x", f"a {c} the", f"{c}", f"x{c}y", f"An{c}12 {c}3.50-{c}the"):
            out += [("squad", s), ("drop", s)]
    for cp in range(0x80, 0x3001):
        if chr(cp).isspace():
            out += [("squad", f"a{chr(cp)}b the{chr(cp)}c"), ("drop", f"a{chr(cp)}b 7{chr(cp)}")]
    for cp in range(0x80, 0x530):   # lowered, and a word character or not (\\b beside "the")
        c = chr(cp)
        if not c.isspace():
            out += [("squad", f"x{c}y"), ("drop", f"x{c}y"), ("squad", f"the{c}x"), ("squad", f"x{c}the")]
    out += [("squad", s) for s in ("xΣ", "aΣb", "ΑΣ ΣΑ", "Σ", "xΣ.", "İx", "xİ")]
    for before in ("é", "Ā", "ƀ", "ω", "ж", "ԑ", "x'", "é\u0301", "1", "😀"):   # the final sigma after each script
        out += [("squad", f"{before}Σ"), ("squad", f"{before}Σ{before}")]
    out += [(m, "a 😀 the 𝔸 b\U0010FFFF") for m in ("squad", "drop")]   # four-byte characters kept
    for cp in range(0x21, 0x530):   # the final sigma's reading of each character: cased, case-ignorable
        c = chr(cp)
        if not c.isspace():
            out += [("squad", f"{c}Σ"), ("squad", f"x{c}Σ"), ("squad", f"xΣ{c}")]
    return out


def repair_cases():
    return [b"\xff", b"a\xc3", b"\xc3(", b"\xe2\x82", b"\xe2\x82(", b"\xf0\x9f\x98", b"\xc0\xaf", b"\xe0\x80\xaf",
            b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xf8\x88\x80\x80\x80", b"\x80\x80x", b"\xff" * 40,
            b"ok \xe2\x82\xac \xf0\x9f\x98\x80", b"\xf0\x90\x80", b"\xf0\x90\x80\x80"]


def main():
    helper = sys.argv[1]
    cs = cases()
    rs = repair_cases()
    lines = [f"{m} {s.encode('utf-8').hex()}" for m, s in cs] + [f"repair {b.hex()}" for b in rs]
    run = subprocess.run([helper], input="\n".join(lines) + "\n", capture_output=True, text=True)
    if run.returncode != 0:
        print(f"qa_unicode_ref: {helper} exited {run.returncode}: {run.stderr.strip()}")
        return 1
    got = run.stdout.split("\n")[:-1]
    if len(got) != len(lines):
        print(f"qa_unicode_ref: {len(got)} answers to {len(lines)} lines")
        return 1
    bad = 0
    for (mode, s), g in zip(cs, got):
        want = (squad_normalize if mode == "squad" else drop_normalize)(s)
        have = "ERR" if g == "ERR" else bytes.fromhex(g).decode("utf-8")
        if have != want:
            bad += 1
            if bad <= 20:
                print(f"{mode} {s!r}: C {have!r}, Python {want!r}")
    for b, g in zip(rs, got[len(cs):]):
        want = b.decode("utf-8", "replace")
        have = "ERR" if g == "ERR" else bytes.fromhex(g).decode("utf-8")
        if have != want:
            bad += 1
            print(f"repair {b!r}: C {have!r}, Python {want!r}")
    print(f"qa_unicode_ref: {len(lines) - bad} of {len(lines)} agree")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
