#!/usr/bin/env python3
"""Mutation testing of one C/CUDA source against chosen test programs: do the tests fail
when the code is wrong?

  mutate.py list SRC [--lines A-B]       every candidate mutant: id, line, change
  mutate.py run SRC --build CMD --test CMD [--test CMD ...] --log F
            [--seed S] [--count N | --ids I,J,...] [--lines A-B] [--timeout T] [--fsize MIB]
  mutate.py selftest                     checks the candidate finder (Meson test mutate_selftest)

A mutant is one change at one place of SRC: a relational, logical, additive, multiplicative,
shift or bitwise operator written with a space on each side swapped for its neighbour (< for
<= or >=, == for !=, && for ||, + for -, * for /, << for >>, & for |, += for -=), an
integer constant 0 or 1 flipped, ++ made --, an if's condition negated, a `continue;` or bare
`return;` dropped. Comments, string and character literals, preprocessor lines and a kernel
launch's <<<...>>> configuration are never changed.

run: the candidates are shuffled with the seed (or taken by --ids), and for each one SRC is
written mutated, CMD of --build runs (a failure: "not compiled"), then each --test command in
order, under a limit of T seconds (default 300) and of MIB MiB a file (default 1024); the
first that exits non-zero or runs out of time kills the mutant, and one that passes them all
"survived". SRC is restored after each mutant and when the run is stopped (SIGTERM, Ctrl-C);
a second run on the same SRC meanwhile is refused (a lock on the file). Each result is a JSON
line of F: id, line, from, to, the line's text, result, the index of the test that killed it
and its last lines of output. A survivor is either a gap in the tests or an equivalent mutant (the same
behaviour, or a difference no test can observe, such as speed): reading it tells which.

Example (the CUDA backend under the emulator, a build folder of its own):
  python3 tests/mutation/mutate.py run backends/grzo_cuda.cu --seed 1 --count 60 --log cuda.jsonl \
    --build 'ninja -C B tests/test_cuda_emulated' --test 'B/tests/test_cuda_emulated'
"""
import argparse, fcntl, json, os, random, re, resource, signal, subprocess, sys, time

REL = {"<": ["<=", ">="], "<=": ["<", "=="], ">": [">=", "<="], ">=": [">", "=="],
       "==": ["!="], "!=": ["=="], "&&": ["||"], "||": ["&&"], "+": ["-"], "-": ["+"],
       "+=": ["-="], "-=": ["+="], "*": ["/"], "<<": [">>"], ">>": ["<<"], "&": ["|"], "|": ["&"]}


def mask(src):
    """src with comments, string/char literals and preprocessor lines blanked (same length)"""
    out = list(src)
    i, n = 0, len(src)
    line_start = True
    while i < n:
        c = src[i]
        if line_start and c in " \t":
            i += 1
            continue
        if line_start and c == "#":
            while i < n and src[i] != "\n":
                # continuation lines
                if src[i] == "\\" and i + 1 < n and src[i + 1] == "\n":
                    out[i] = " "; i += 2; continue
                out[i] = " "; i += 1
            continue
        line_start = False
        if src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k in range(i, j):
                if out[k] != "\n": out[k] = " "
            i = j
            continue
        if src.startswith("//", i):
            while i < n and src[i] != "\n":
                out[i] = " "; i += 1
            continue
        if c in "\"'":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            for k in range(i, min(j + 1, n)):
                out[k] = " "
            i = j + 1
            continue
        if c == "\n":
            line_start = True
        i += 1
    return "".join(out)


def candidates(src):
    m = mask(src)
    cands = []
    # binary operators written with a space each side (the code's style), never <<< >>>
    for mo in re.finditer(r"(?<=[\w)\]]) (<=|>=|==|!=|&&|\|\||\+=|-=|<<|>>|<|>|\+|-|\*|&|\|) (?=[\w(!~-])", m):
        op = mo.group(1)
        for rep in REL.get(op, []):
            cands.append((mo.start(1), mo.end(1), op, rep))
    # integer constants 0 and 1 (not part of a float or a name)
    for mo in re.finditer(r"(?<![\w.])([01])(?![\w.])", m):
        cands.append((mo.start(1), mo.end(1), mo.group(1), "1" if mo.group(1) == "0" else "0"))
    # ++ -> --
    for mo in re.finditer(r"\+\+", m):
        cands.append((mo.start(), mo.end(), "++", "--"))
    # an if's condition negated
    for mo in re.finditer(r"\bif \(", m):
        start = mo.end() - 1
        depth, j = 0, start
        while j < len(m):
            if m[j] == "(": depth += 1
            elif m[j] == ")":
                depth -= 1
                if depth == 0: break
            j += 1
        cands.append((start, j + 1, src[start:j + 1], "(!" + src[start:j + 1] + ")"))
    # a `continue;` or a bare `return;` dropped
    for mo in re.finditer(r"\b(continue|return);", m):
        cands.append((mo.start(), mo.end(), mo.group(0), ";"))
    # nothing inside a launch's <<<grid, block, smem, stream>>>: the shape is the tests' choice
    launch = [(mo.start(), mo.end()) for mo in re.finditer(r"<<<.*?>>>", m, re.S)]
    cands = [c for c in cands if not any(a <= c[0] < b for a, b in launch)]
    cands.sort()
    return cands


def line_of(src, pos):
    return src.count("\n", 0, pos) + 1


def apply(src, c):
    a, b, old, new = c
    return src[:a] + new + src[b:]


RUNNING = []   # the command in flight (its own process group), ended with the driver


def end_running():
    """SIGTERM to the command's process group first, SIGKILL 10 s later: `meson test` runs each
    test in a session of its own, which a signal to its group never reaches, and on SIGTERM it
    ends its tests itself; killed outright it left them running (a mutant's endless loop
    stayed on the CPU for an hour)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in RUNNING:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
        if sig == signal.SIGTERM:
            for p in RUNNING:
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass


def file_size_limit(mib):
    """a preexec_fn capping every file the command writes at mib MiB: a mutant that loops
    writing padding filled 44 GB of disk before its timeout"""
    def cap():
        resource.setrlimit(resource.RLIMIT_FSIZE, (mib << 20, mib << 20))
    return cap if mib > 0 else None


def run(cmd, timeout, fsize_mib=0):
    p = subprocess.Popen(cmd, shell=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                         preexec_fn=file_size_limit(fsize_mib))
    RUNNING.append(p)   # left there when the driver is stopped meanwhile: main's finally ends it
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        end_running()
        p.communicate()
        RUNNING.remove(p)
        return "timeout", ""
    RUNNING.remove(p)
    return p.returncode, out.decode(errors="replace")


SELFTEST_SRC = r"""#include <stdio.h>
#define LIMIT (a < 1)
/* a < b in a comment, if (x) */
static int f(int a, int b) {
    const char *s = "a < b && 1";   // c == d
    if (a < b && b != 0) return a + b;
    k<<<grid, block, 0, stream>>>(a - 1);
    for (a = 0; a < b; a++) continue;
    return a * b;
}
"""


def selftest():
    got = [(line_of(SELFTEST_SRC, c[0]), c[2], c[3]) for c in candidates(SELFTEST_SRC)]
    want = [(6, "(a < b && b != 0)", "(!(a < b && b != 0))"), (6, "<", "<="), (6, "<", ">="), (6, "&&", "||"),
            (6, "!=", "=="), (6, "0", "1"), (6, "+", "-"), (7, "-", "+"), (7, "1", "0"), (8, "0", "1"), (8, "<", "<="),
            (8, "<", ">="), (8, "++", "--"), (8, "continue;", ";"), (9, "*", "/")]
    bad = 0
    for w in want:
        if w not in got:
            print(f"selftest: missing candidate {w}"); bad = 1
    for g in got:
        if g not in want:
            print(f"selftest: unexpected candidate {g} (a comment, string, #define or launch touched?)"); bad = 1
    c = [c for c in candidates(SELFTEST_SRC) if c[2] == "*"][0]
    mutated = apply(SELFTEST_SRC, c)
    if "return a / b;" not in mutated or len(mutated) != len(SELFTEST_SRC):
        print("selftest: apply() did not change exactly the operator"); bad = 1
    print("selftest: " + ("FAIL" if bad else f"ok ({len(got)} candidates)"))
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["list", "run", "selftest"])
    ap.add_argument("src", nargs="?")
    ap.add_argument("--build")
    ap.add_argument("--test", action="append", default=[])
    ap.add_argument("--log")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=0)
    ap.add_argument("--ids", default="")
    ap.add_argument("--lines", default="")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--fsize", type=int, default=1024, help="MiB a test may write to one file (0: no limit)")
    a = ap.parse_args()
    if a.mode == "selftest":
        sys.exit(selftest())
    if not a.src:
        ap.error("SRC is needed")
    if a.mode == "run" and (not a.build or not a.test or not a.log):
        ap.error("run needs --build, at least one --test and --log")
    orig = open(a.src, encoding="utf-8").read()
    cands = candidates(orig)
    ids = list(range(len(cands)))
    if a.lines:
        lo, hi = (int(x) for x in a.lines.split("-"))
        ids = [i for i in ids if lo <= line_of(orig, cands[i][0]) <= hi]
    if a.mode == "list":
        for i in ids:
            c = cands[i]
            print(f"{i}\t{line_of(orig, c[0])}\t{c[2]!r} -> {c[3]!r}")
        print(f"{len(ids)} candidates", file=sys.stderr)
        return
    if a.ids:
        ids = [int(x) for x in a.ids.split(",")]
        if any(i < 0 or i >= len(cands) for i in ids):
            ap.error(f"--ids: {a.src} has candidates 0 .. {len(cands) - 1}")
    else:
        random.Random(a.seed).shuffle(ids)
        if a.count: ids = ids[:a.count]
    # one run a source at a time: a second one started meanwhile would take the first's
    # mutant for the original, test double mutants and restore a mutant at its end
    lock = open(a.src, encoding="utf-8")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        sys.exit(f"mutate.py: another run is mutating {a.src}; wait for it to end")
    restore = lambda *_: open(a.src, "w", encoding="utf-8").write(orig)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))   # through the finally below
    try:
        for i in ids:
            c = cands[i]
            rec = {"id": i, "line": line_of(orig, c[0]), "from": c[2], "to": c[3],
                   "text": orig.splitlines()[line_of(orig, c[0]) - 1].strip()[:160]}
            open(a.src, "w", encoding="utf-8").write(apply(orig, c))
            t0 = time.time()
            rc, out = run(a.build, 900)
            if rc != 0:
                rec["result"] = "not compiled"
            else:
                rec["result"] = "survived"
                for ti, t in enumerate(a.test):
                    rc, out = run(t, a.timeout, a.fsize)
                    if rc != 0:
                        rec["result"] = "killed"
                        rec["by"] = ti
                        rec["rc"] = rc
                        rec["tail"] = out.strip().splitlines()[-3:] if out.strip() else []
                        break
            rec["s"] = round(time.time() - t0, 1)
            with open(a.log, "a") as f:
                f.write(json.dumps(rec) + "\n")
            print(f"{i} line {rec['line']} {c[2]!r}->{c[3]!r}: {rec['result']} {rec.get('by', '')} ({rec['s']} s)", flush=True)
    finally:
        end_running()
        restore()


if __name__ == "__main__":
    main()
