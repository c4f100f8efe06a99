#!/usr/bin/env python3
"""check_demo_outputs.py - runs the demo the way the Quick start does (examples/run-demo.sh,
in a stand-in checkout whose build/examples/demo is the demo built here, with a stand-in
gnuplot first on PATH), once, as `run-demo.sh --quick --check`, and checks what it printed
and wrote beyond the demo's own --check: a table cell, a CSV column, a summary figure or the
c line computed wrongly would otherwise pass unseen.

Checked, from the run's own outputs and the demo's --help (never against numbers copied from
an earlier run):
  - the header: the parameter count of the 16-64-64-4 MLP (weights and biases), the run line
    (seeds, steps, batch, first seed, sigma, threads: the --help defaults of a --quick run),
    2B rows per step, the pretrained network's score = the loss every estimator starts from;
  - demo.csv: its header; its steps (every steps/15/4, every steps/15 and the last: the
    points of the curves), forward rows = 2B x step; each estimator's min <= mean <= max,
    mean = (min + max) / 2 over the 2 seeds of a --quick run, the same start for all three;
    GRZO/MeZO paired by seed (from the per-seed line's pairing at the end, either pairing
    elsewhere), 1 at step 0; every loss finite and positive, the final well below the start;
  - the progress table: its steps (every steps/15 and the last), forward rows, and each cell
    the CSV's mean at that step, to the printed precision;
  - the final table: the learning rates (--help's), the rows forwarded per step (2B), the
    final train loss mean and s.d. from the CSV, the test loss near the train loss, "below
    MeZO" counted from the per-seed line, ms/step positive and all of them together within
    the run's wall time; the per-seed line's seeds and values against the CSV;
  - the alignment c: B_eff = cB + 1 - c of the printed c and B; c of the fine-tuning well
    above 0 and above that of the random init, which is near 0 (the demo's point);
  - the check line: passed, with the table's means and the below-MeZO count;
  - run-demo.sh's plot: drawn (demo.png from the stand-in), its title's c and seed count the
    demo's; the total wall time line between 0 and the run's own wall time.
The exit status must be 0 and stderr empty.

usage: check_demo_outputs.py RUN_DEMO_SH DEMO OUT_DIR"""
import csv, math, os, re, shutil, subprocess, sys, time

sys.dont_write_bytecode = True   # nothing written into the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "probe"))
# the probe's checker: its markdown tables reader and its failure list
from check_outputs import failures, fail, near, tables  # noqa: E402

NAMES = ["GRZO", "MeZO", "FZOO"]
SIZES = [16, 64, 64, 4]
STAND_IN = """#!/bin/sh
cat > "$GNUPLOT_SCRIPT"
out=$(sed -n "s/^set output '\\(.*\\)'$/\\1/p" "$GNUPLOT_SCRIPT")
printf 'a PNG' > "$out"
"""
def g6(a, b, what):
    """two values that went through %.6g (or one exact and one so printed)"""
    near(a, b, 1e-5 * max(abs(a), abs(b)) + 1e-12, what)


def shown(cell, value, decimals, what):
    """a cell printed with `decimals` decimals against the value it shows (itself %.6g)"""
    near(float(cell), value, 0.5 * 10 ** -decimals + 1e-5 * abs(value) + 1e-12, what)


def match(pattern, text, what):
    m = re.search(pattern, text, re.M)
    if m is None:
        fail(f"{what}: no line matches {pattern!r}")
    return m


def help_defaults(demo):
    r = subprocess.run([demo, "--help"], capture_output=True, text=True, timeout=30)
    if r.returncode != 0 or r.stderr:
        sys.exit(f"FAIL: {demo} --help: exit {r.returncode}, stderr {r.stderr!r}")
    h = r.stdout

    def grab(pattern):
        m = re.search(pattern, h)
        if m is None:
            sys.exit(f"FAIL: --help: no {pattern!r}")
        return m.group(1)
    return {"steps": int(grab(r"--steps N .*; (\d+) with --quick\)")),
            "seeds": int(grab(r"--seeds K [^\n]*\n[^\n]*\(default \d+; (\d+) with --quick\)")),
            "batch": int(grab(r"--batch B .*\(default (\d+)\)")),
            "seed": int(grab(r"--seed S .*\(default (\d+)\)")),
            "threads": int(grab(r"--threads T .*\(default (\d+)")),
            "sigma": float(grab(r"--sigma X .*\(default ([^)]+)\)")),
            "lr": [float(grab(r"--lr-%s X .*\(default ([^)]+)\)" % n.lower())) for n in NAMES]}


def run_demo(script, demo, work):
    """run-demo.sh --quick --check in a stand-in checkout; its stdout, stderr, wall time and paths"""
    shutil.rmtree(work, ignore_errors=True)
    repo = os.path.join(work, "checkout")
    for d in ("examples", ".ci", "build/examples", "bin"):
        os.makedirs(os.path.join(repo if d != "bin" else work, d))
    shutil.copy(script, os.path.join(repo, "examples", "run-demo.sh"))
    with open(os.path.join(repo, ".ci", "deps.sh"), "w") as f:
        f.write("grzo_install_deps() { :; }\ngrzo_build() { :; }\n")
    os.symlink(os.path.abspath(demo), os.path.join(repo, "build", "examples", "demo"))
    gp = os.path.join(work, "bin", "gnuplot")
    with open(gp, "w") as f:
        f.write(STAND_IN)
    os.chmod(gp, 0o755)
    env = dict(os.environ, PATH=os.path.join(work, "bin") + os.pathsep + os.environ.get("PATH", ""),
               GNUPLOT_SCRIPT=os.path.join(work, "plot.gp"), OMP_NUM_THREADS="1")
    t0 = time.monotonic()
    r = subprocess.run(["bash", os.path.join(repo, "examples", "run-demo.sh"), "--quick", "--check"],
                       cwd=work, env=env, capture_output=True, text=True, timeout=600)
    return r, time.monotonic() - t0, os.path.join(repo, "build", "demo"), os.path.join(work, "plot.gp")


def check_csv(rows, header, d):
    want = ["step", "forward_rows"] + [f"{n}_{s}" for n in NAMES for s in ("mean", "min", "max")] + \
           [f"GRZO_over_MeZO_{s}" for s in ("mean", "min", "max")]
    if header != want:
        fail(f"demo.csv header {header} != {want}")
        return
    steps, B = d["steps"], d["batch"]
    row_every = max(1, steps // 15)
    point_every = max(1, steps // 15 // 4)
    want_steps = [s for s in range(steps) if s % row_every == 0 or s % point_every == 0] + [steps]
    got_steps = [int(r["step"]) for r in rows]
    if got_steps != want_steps:
        fail(f"demo.csv steps {got_steps} != {want_steps}")
    for r in rows:
        at = f"demo.csv step {r['step']}"
        if int(r["forward_rows"]) != 2 * B * int(r["step"]):
            fail(f"{at}: forward_rows {r['forward_rows']} != 2B x step")
        for n in NAMES + ["GRZO_over_MeZO"]:
            mean, lo, hi = (float(r[f"{n}_{s}"]) for s in ("mean", "min", "max"))
            if not all(math.isfinite(v) and v > 0 for v in (mean, lo, hi)):
                fail(f"{at}: {n} not finite and positive: {mean}, {lo}, {hi}")
                continue
            if not lo <= mean <= hi:
                fail(f"{at}: {n} mean {mean} not within [{lo}, {hi}]")
            if d["seeds"] == 2:
                g6(mean, (lo + hi) / 2, f"{at}: {n} mean of 2 seeds against (min + max) / 2")
        if d["seeds"] == 2:   # the ratio of one of the two pairings of the seeds (unknown here)
            g = [float(r["GRZO_min"]), float(r["GRZO_max"])]
            m = [float(r["MeZO_min"]), float(r["MeZO_max"])]
            lo, hi = float(r["GRZO_over_MeZO_min"]), float(r["GRZO_over_MeZO_max"])
            pairings = [sorted([g[0] / m[0], g[1] / m[1]]), sorted([g[0] / m[1], g[1] / m[0]])]
            if not any(abs(p[0] - lo) <= 3e-5 * lo and abs(p[1] - hi) <= 3e-5 * hi for p in pairings):
                fail(f"{at}: GRZO_over_MeZO min/max {lo}, {hi}: neither pairing of {g} and {m} ({pairings})")
    first, last = rows[0], rows[-1]
    for s in ("mean", "min", "max"):   # the same start: the pretrained weights
        for n in NAMES[1:]:
            if first[f"{n}_{s}"] != first[f"GRZO_{s}"]:
                fail(f"demo.csv step 0: {n}_{s} {first[f'{n}_{s}']} != GRZO_{s} {first[f'GRZO_{s}']}")
        if float(first[f"GRZO_over_MeZO_{s}"]) != 1.0:
            fail(f"demo.csv step 0: GRZO_over_MeZO_{s} {first[f'GRZO_over_MeZO_{s}']} != 1")
    for n in NAMES:   # all three fine-tune: from the pretrained score to a small fraction of it
        if not float(last[f"{n}_mean"]) < 0.25 * float(first[f"{n}_mean"]):
            fail(f"demo.csv: {n} ends at {last[f'{n}_mean']}, not below 1/4 of its start {first[f'{n}_mean']}")


def check_text(out, rows, d, wall):
    B, n, steps = d["batch"], d["seeds"], d["steps"]
    at = {int(r["step"]): r for r in rows}
    last = rows[-1] if rows else None
    params = sum(SIZES[i] * SIZES[i + 1] + SIZES[i + 1] for i in range(3))
    match(r"^grzo \S+ demo: fine-tuning a pretrained MLP 16-64-64-4 \(tanh, %d parameters\)" % params, out,
          "header (parameter count)")
    match(r"^run: %d seeds \(%d\.\.%d\) side by side, %d steps, batch %d, sigma %s, backend \S+ with %d threads$"
          % (n, d["seed"], d["seed"] + n - 1, steps, B, re.escape("%g" % d["sigma"]), d["threads"]), out,
          "run line")
    match(r"^same budget: every estimator forwards 2B = %d rows per step" % (2 * B), out, "budget line")
    m = match(r"the pretrained network scores (\S+) on it \(mean over seeds\)$", out, "pretrained score")
    if m and rows:
        shown(m.group(1), float(rows[0]["GRZO_mean"]), 4, "pretrained score against demo.csv's step 0")

    t = tables(out)
    if len(t) != 2:
        fail(f"want 2 tables (progress, final), got {len(t)}")
        return
    prog, final = t[0], t[1]
    row_every = max(1, steps // 15)
    want_steps = list(range(0, steps, row_every)) + [steps]
    got = [int(r[0]) for r in prog[1:]]
    if got != want_steps:
        fail(f"progress table steps {got} != {want_steps}")
    for r in prog[1:]:
        s = int(r[0])
        if int(r[1]) != 2 * B * s:
            fail(f"progress table step {s}: fwd rows {r[1]} != 2B x step")
        if s in at:
            for e, name in enumerate(NAMES):
                shown(r[2 + e], float(at[s][f"{name}_mean"]), 4, f"progress table step {s} {name}")

    seed_line = match(r"^final train loss per seed:(.*)$", out, "per-seed line")
    per_seed = {name: [] for name in NAMES}
    if seed_line:
        got = re.findall(r" seed (\d+): GRZO (\S+), MeZO (\S+), FZOO (\S+);", seed_line.group(1))
        if [int(s[0]) for s in got] != list(range(d["seed"], d["seed"] + n)):
            fail(f"per-seed line: seeds {[s[0] for s in got]}, want {d['seed']}..{d['seed'] + n - 1}")
        for s in got:
            for e, name in enumerate(NAMES):
                per_seed[name].append(float(s[1 + e]))
    if last is not None and all(len(v) == n for v in per_seed.values()) and n == 2:
        exact = {}   # each seed's final loss from demo.csv (min or max), matched to the per-seed line
        for name in NAMES:
            lo, hi = float(last[f"{name}_min"]), float(last[f"{name}_max"])
            v = per_seed[name]
            if (abs(v[0] - lo) <= 6e-5 and abs(v[1] - hi) <= 6e-5):
                exact[name] = [lo, hi]
            elif abs(v[0] - hi) <= 6e-5 and abs(v[1] - lo) <= 6e-5:
                exact[name] = [hi, lo]
            else:
                fail(f"per-seed line {name} {v}: not demo.csv's final min and max {lo}, {hi}")
        if "GRZO" in exact and "MeZO" in exact:
            ratios = [exact["GRZO"][p] / exact["MeZO"][p] for p in range(n)]
            g6(min(ratios), float(last["GRZO_over_MeZO_min"]), "final GRZO_over_MeZO_min, paired by seed")
            g6(max(ratios), float(last["GRZO_over_MeZO_max"]), "final GRZO_over_MeZO_max, paired by seed")
            g6(sum(ratios) / n, float(last["GRZO_over_MeZO_mean"]), "final GRZO_over_MeZO_mean, paired by seed")

    head = ["estimator", "lr", "rows forwarded/step", "final train loss (mean +- s.d.)", "final test loss",
            "below MeZO (seeds)", "ms/step"]
    if final[0] != head or [r[0] for r in final[1:]] != NAMES:
        fail(f"final table: header {final[0]}, rows {[r[0] for r in final[1:]]}")
        return
    below = {}
    ms_total = 0.0
    for e, (name, r) in enumerate(zip(NAMES, final[1:])):
        where = f"final table {name}"
        if r[1] != "%.3g" % d["lr"][e]:
            fail(f"{where}: lr {r[1]} != --help's {d['lr'][e]:.3g}")
        if r[2] != str(2 * B):
            fail(f"{where}: rows forwarded/step {r[2]} != 2B = {2 * B}")
        tm, ts = (float(x) for x in r[3].split("+-"))
        vm, vs = (float(x) for x in r[4].split("+-"))
        if last is not None:
            lo, hi = float(last[f"{name}_min"]), float(last[f"{name}_max"])
            shown(r[3].split("+-")[0], float(last[f"{name}_mean"]), 4, f"{where}: train mean against demo.csv")
            if n == 2:
                shown(r[3].split("+-")[1], (hi - lo) / math.sqrt(2), 4, f"{where}: train s.d. of demo.csv's 2 seeds")
        if not (0.5 * tm <= vm <= 2 * tm and 0 <= vs <= 4 * max(ts, 1e-3)):
            fail(f"{where}: test loss {vm} +- {vs} far from the train loss {tm} +- {ts}")
        if len(per_seed[name]) == n and per_seed["MeZO"]:
            count = sum(a < b for a, b in zip(per_seed[name], per_seed["MeZO"]))
            ties = sum(a == b for a, b in zip(per_seed[name], per_seed["MeZO"]))
            below[name] = count
            if name == "MeZO":
                if r[5] != "-":
                    fail(f"{where}: below MeZO {r[5]!r}, want '-'")
            else:
                m = re.fullmatch(r"(\d+) of (\d+)", r[5])
                if not m or int(m.group(2)) != n or not count <= int(m.group(1)) <= count + ties:
                    fail(f"{where}: below MeZO {r[5]!r}, the per-seed line says {count} (+ {ties} ties) of {n}")
                elif ties:
                    below[name] = int(m.group(1))
        ms = float(r[6])
        if not ms > 0:
            fail(f"{where}: ms/step {ms} not positive")
        ms_total += ms
    m = match(r"^total wall time (\S+) s \(setup, training and evaluation\)$", out, "wall time line")
    if m:
        total = float(m.group(1))
        if not 0 < total <= wall + 0.05:
            fail(f"total wall time {total} s: not within (0, {wall:.2f}] (the run's own)")
        if not ms_total * steps * n / 1e3 <= total + 0.05 + 5e-4 * 3 * steps * n / 1e3:
            fail(f"ms/step {ms_total:.3f} in all x {steps} steps x {n} seeds: more than the wall time {total} s")

    c = match(r"^  this fine-tuning \(pretrained weights, task B\): c = (\S+) \+- (\S+) over seeds, "
              r"B_eff = cB \+ 1 - c = (\S+) of B = (\d+)$", out, "c line")
    cs = match(r"^  for contrast, a random init on task A \(training from scratch\): c = (\S+) \+- (\S+)$", out,
               "c of a random init")
    if c:
        cf, beff = float(c.group(1)), float(c.group(3))
        if int(c.group(4)) != B:
            fail(f"c line: B = {c.group(4)}, the run's batch is {B}")
        near(beff, cf * B + 1 - cf, 0.005 * (B - 1) + 0.05 + 1e-9, "B_eff against cB + 1 - c of the printed c")
        if not 0.5 <= cf < 1 or not 0 <= float(c.group(2)) < 0.2:
            fail(f"c of the fine-tuning {cf} +- {c.group(2)}: want well above 0 (0.5 to 1)")
        if cs:
            c0 = float(cs.group(1))
            if not (-0.1 <= c0 <= 0.35 and cf - c0 >= 0.3 and 0 <= float(cs.group(2)) < 0.2):
                fail(f"c of a random init {c0} +- {cs.group(2)}: want near 0, well below the fine-tuning's {cf}")

    chk = match(r"^check passed: GRZO's final train loss (\S+) against MeZO's (\S+) \(mean over seeds\); "
                r"below MeZO on (\d+) of (\d+) seeds$", out, "check line")
    if chk:
        if [chk.group(1), chk.group(2)] != [final[1][3].split("+-")[0].strip(), final[2][3].split("+-")[0].strip()]:
            fail(f"check line means {chk.group(1)}, {chk.group(2)}: not the final table's")
        if "GRZO" in below and (int(chk.group(3)) != below["GRZO"] or int(chk.group(4)) != n):
            fail(f"check line: below MeZO on {chk.group(3)} of {chk.group(4)}, the per-seed line: {below['GRZO']} of {n}")
        if not (float(chk.group(1)) < float(chk.group(2)) and 2 * int(chk.group(3)) > n):
            fail("check passed where its own numbers say it should not")
    return c.group(1) if c else None


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    script, demo, work = sys.argv[1:]
    d = help_defaults(demo)
    r, wall, out_dir, gp = run_demo(script, demo, work)
    if r.returncode != 0 or r.stderr:
        sys.exit(f"FAIL: run-demo.sh --quick --check: exit {r.returncode}, stderr:\n{r.stderr}\n"
                 f"stdout's end:\n{r.stdout[-2000:]}")
    with open(os.path.join(out_dir, "demo.txt")) as f:
        out = f.read()
    with open(os.path.join(out_dir, "demo.csv"), newline="") as f:
        reader = csv.reader(f)
        header = next(reader, [])
        rows = [dict(zip(header, x)) for x in reader]
    if not rows:
        sys.exit("FAIL: demo.csv has no rows")
    check_csv(rows, header, d)
    c = check_text(out, rows, d, wall)
    # run-demo.sh's plot, from the demo's c and seed count
    if sorted(os.listdir(out_dir)) != ["demo.csv", "demo.png", "demo.txt"]:
        fail(f"build/demo holds {sorted(os.listdir(out_dir))}")
    if not os.path.exists(gp):
        fail("gnuplot was not run")
    else:
        with open(gp) as f:
            title = re.search(r"^set multiplot .* title \"(.*)\"$", f.read(), re.M)
        if c is None or title is None or f"(c = {c})" not in title.group(1) or \
                not title.group(1).endswith(f", {d['seeds']} seeds"):
            fail(f"plot title {title and title.group(1)!r}: want the demo's c = {c} and {d['seeds']} seeds")
    if failures:
        print("\n".join("FAIL: " + m for m in failures))
        print(out)
        sys.exit(1)
    shutil.rmtree(work, ignore_errors=True)
    print(f"ok: demo --quick --check through run-demo.sh: {len(rows)} CSV rows, both tables, c and the plot agree")


if __name__ == "__main__":
    main()
