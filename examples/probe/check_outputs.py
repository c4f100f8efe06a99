#!/usr/bin/env python3
"""check_outputs.py - runs one grzo-probe subcommand (--quick --check --no-plot) and checks
what it printed and wrote, beyond its own --check: the claims it asserts hold with a wide
margin, so a wrong column, a table row that is not the CSV's, a summary line computed from
the wrong rows or a failure message with the wrong numbers would pass unseen.

Checked, from the run's own CSV and stdout (never against numbers copied from an earlier run):
  - each derived CSV column from the columns it is derived from, and the closed forms the
    probe states (B_eff = cB + 1 - c; the Rademacher and Gaussian variances' relations; the
    cosine ratio sqrt(pi B_eff / B) G((B+1)/2) / G(B/2), here from math.lgamma; MeZO's
    cosine sqrt(2 / (pi D)); GRZO's step lr sqrt(D/B) / (2 sigma));
  - every markdown table cell against the CSV value it shows, to its printed precision;
  - the summary lines (absolute agreement, pooled coverage, "check passed", each "CHECK
    FAILED") against the CSV: a failure is reported exactly where the CSV says it fails;
  - the run's timing line: between 0 and the wall time of the whole process;
  - the plot: a stand-in gnuplot first on PATH (it writes the file its script's "set output"
    names) draws it, and the PNG, the "PNG:" line and the kept .gp script are there; none of
    its own temporaries (name.*.tmp, name.run.gp) is left.
The exit status must be 0, or 1 (a failed claim) with --sabotage, and stderr empty.

usage: check_outputs.py GRZO_PROBE SUBCOMMAND OUT_DIR [--sabotage]"""
import csv, math, os, re, subprocess, sys, tempfile, time

THREADS = 2
PLOTS = {"variance": "probe_variance", "cosine": "probe_cosine", "batch": "probe_batch", "ablation": "probe_ablation",
         "variants": "probe_variants"}
STAND_IN = """#!/bin/sh
out=$(sed -n "s/^set output '\\(.*\\)'$/\\1/p" "$1")
printf 'a whole PNG' > "$out"
"""
failures = []


def fail(msg):
    failures.append(msg)


def near(a, b, tol, what):
    if not (abs(a - b) <= tol):
        fail(f"{what}: {a!r} vs {b!r} (tolerance {tol:g})")


def rel_near(a, b, rel, what):
    near(a, b, rel * max(abs(a), abs(b)) + 1e-300, what)


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def num(s):
    return float(s)


def tables(out):
    """every markdown table of stdout: a list of rows (lists of stripped cells), header first"""
    found, cur = [], None
    for line in out.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if all(re.fullmatch(r":?-+:?", c) for c in cells):
                continue
            if cur is None:
                cur = []
                found.append(cur)
            cur.append(cells)
        else:
            cur = None
    return found


def table_rows(out, n, sub):
    """the rows of stdout's one markdown table, header left out: n of them, else a failure and none"""
    t = tables(out)
    if len(t) != 1 or len(t[0]) != n + 1:
        fail(f"{sub}: want one table of {n} rows, got {[len(x) - 1 for x in t]}")
        return []
    return t[0][1:]


def cell_num(cell, what):
    """the numbers of a cell ("1.23 ± 0.04 [1.1, 1.3]", "4.2x", "95.0% of 40")"""
    vals = re.findall(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf", cell)
    if not vals:
        fail(f"{what}: no number in '{cell}'")
        return [math.nan]
    return [float(v) for v in vals]


def same_shown(cell, value, decimals, what):
    """a cell printed with `decimals` decimals shows value (the CSV's, itself rounded)"""
    near(cell_num(cell, what)[0], value, 0.5 * 10 ** -decimals + 1e-6 * abs(value), what)


def same_sig(cell, value, digits, what):
    """a cell printed with %.{digits}g shows value"""
    rel_near(cell_num(cell, what)[0], value, 0.5 * 10 ** (1 - digits) + 1e-6, what)


def cells_show(cells, r, spec, w):
    """each (cell index, CSV column, printf conversion) of spec: the cell shows the CSV's value,
    printed "%.Nf" ("f", N) or "%.Ng" ("g", N)"""
    for i, key, (conv, n) in spec:
        (same_shown if conv == "f" else same_sig)(cells[i], num(r[key]), n, f"{w} {key}")


def one_line(out, pattern, what):
    m = re.search(pattern, out, re.M)
    if not m:
        fail(f"no {what} line (/{pattern}/)")
    return m


def cos_ratio(b_eff, B):
    """the large-D cosine ratio GRZO / MeZO: sqrt(pi B_eff / B) G((B+1)/2) / G(B/2)"""
    return math.sqrt(math.pi * b_eff / B) * math.exp(math.lgamma((B + 1) / 2) - math.lgamma(B / 2))


def header_int(out, name):
    m = one_line(out, rf"\b{name} = (\d+)", name)
    return int(m.group(1)) if m else 0


# ---- variance ------------------------------------------------------------------------------------
def check_variance(out, d, sab):
    rows = read_csv(os.path.join(d, "probe_variance.csv"))
    D = header_int(out, "D")
    if len(rows) != 24:
        fail(f"variance: {len(rows)} CSV rows, want 2 regimes x 2 noises x 6 B")
    by = {}
    for r in rows:
        B, c, cw, be = int(r["B"]), num(r["c_mean_pairwise"]), num(r["c_norm_weighted"]), num(r["B_eff"])
        vm, vc, sm, sc = (num(r[k]) for k in ("var_mezo", "var_canonical", "var_mezo_se", "var_canonical_se"))
        em, ec, ratio = num(r["var_mezo_exact"]), num(r["var_canonical_exact"]), num(r["ratio"])
        w = f"variance {r['regime']} {r['noise']} B = {B}"
        by[(r["regime"], r["noise"], B)] = r
        near(be, c * B + 1 - c, 2e-6 * B, w + ": B_eff = cB + 1 - c")
        want = be if r["noise"] == "rademacher" else (D + 1) * be / (D - 1 + 2 * be)
        rel_near(num(r["theory"]), want, 1e-5, w + ": theory")
        rel_near(ratio, vm / vc, 2e-5, w + ": ratio = Var(MeZO) / Var(canonical)")
        rel_near(num(r["ratio_over_theory"]), ratio / num(r["theory"]), 2e-5, w + ": ratio / theory")
        rel_near(num(r["ratio_se"]), ratio * math.hypot(sm / vm, sc / vc), 1e-4, w + ": ratio's s.e.")
        if B == 1:
            near(c, 1.0, 1e-6, w + ": one example's c")
            near(cw, 1.0, 1e-6, w + ": one example's c_w")
        if r["noise"] == "rademacher":
            # (D-1)|g|^2 / ((D-1) m / B) = B |g|^2 / m = 1 + (B-1) c_w
            rel_near(em / ec, 1 + (B - 1) * cw, 1e-4, w + ": exact ratio = 1 + (B-1) c_w")
        if not sab:
            for v, se, e, name in ((vm, sm, em, "MeZO"), (vc, sc, ec, "canonical")):
                if not abs(v - e) <= 5 * se:
                    fail(f"{w}: Var({name}) = {v} is {abs(v - e) / se:.1f} s.e. from its closed form {e}")
    for (reg, noise, B), g in by.items():
        if noise != "gaussian" or (reg, "rademacher", B) not in by:
            continue
        r, w = by[(reg, "rademacher", B)], f"variance {reg} B = {B}"
        for k in ("c_mean_pairwise", "c_norm_weighted", "B_eff"):
            if g[k] != r[k]:
                fail(f"{w}: {k} differs between the noises ({g[k]}, {r[k]}): one batch")
        g2 = num(r["var_mezo_exact"]) / (D - 1)   # |g|^2
        rel_near(num(g["var_mezo_exact"]), (D + 1) * g2, 2e-5, w + ": Gaussian Var(MeZO) = (D+1)|g|^2")
        rel_near(num(g["var_canonical_exact"]), num(r["var_canonical_exact"]) + 2 * g2, 2e-5,
                 w + ": Gaussian Var(canonical) = Rademacher's + 2|g|^2")
    for cells, r in zip(table_rows(out, len(rows), "variance"), rows):
        w = f"variance table row {cells[:3]}"
        if cells[0] != r["regime"] or cells[1] != r["noise"] or cells[2] != r["B"]:
            fail(f"{w}: not the CSV's row {r['regime']}, {r['noise']}, {r['B']}")
        cells_show(cells, r, ((3, "c_mean_pairwise", ("f", 3)), (4, "c_norm_weighted", ("f", 3)), (5, "B_eff", ("f", 2)),
                              (6, "theory", ("f", 2)), (7, "var_mezo", ("g", 4)), (8, "var_canonical", ("g", 4))), w)
        ra = cell_num(cells[9], w + " ratio")
        near(ra[0], num(r["ratio"]), 0.005 + 1e-6, w + " ratio")
        near(ra[-1], num(r["ratio_se"]), 0.005 + 1e-6, w + " ratio's s.e.")
        same_shown(cells[10], num(r["ratio_over_theory"]), 3, w + " ratio / theory")
    m = one_line(out, r"lies in \[([-\d.]+), ([-\d.]+)\]; the largest gap\s+is ([\d.]+) standard errors", "absolute check")
    if m:
        q, z = [], []
        for r in rows:
            for v, se, e in (("var_mezo", "var_mezo_se", "var_mezo_exact"), ("var_canonical", "var_canonical_se", "var_canonical_exact")):
                q.append(num(r[v]) / num(r[e]))
                z.append(abs(num(r[v]) - num(r[e])) / num(r[se]))
        near(float(m.group(1)), min(q), 0.0006, "absolute check: lowest measured / closed form")
        near(float(m.group(2)), max(q), 0.0006, "absolute check: highest measured / closed form")
        near(float(m.group(3)), max(z), 0.06, "absolute check: largest gap in standard errors")
    bad = {(r["regime"], int(r["B"])): num(r["ratio"]) / num(r["B_eff"]) - 1 for r in rows
           if r["noise"] == "rademacher" and abs(num(r["ratio"]) / num(r["B_eff"]) - 1) > 0.20}
    said = {}
    for m in re.finditer(r"^CHECK FAILED: variance, (\w+) regime, Rademacher, B = (\d+): Var\(MeZO\)/Var\(canonical\) = "
                         r"([-\d.]+) is\s+(-?\d+)% away from B_eff = ([-\d.]+) \(allowed 20%\)$", out, re.M):
        key, pct = (m.group(1), int(m.group(2))), float(m.group(4))
        said[key] = pct
        r = by.get((key[0], "rademacher", key[1]))
        if r:
            near(float(m.group(3)), num(r["ratio"]), 0.0006, f"variance failure {key}: ratio")
            near(float(m.group(5)), num(r["B_eff"]), 0.0006, f"variance failure {key}: B_eff")
            near(pct, 100 * (num(r["ratio"]) / num(r["B_eff"]) - 1), 0.51, f"variance failure {key}: percent away")
    if re.search(r"^check passed", out, re.M) and not re.search(
            r"^check passed: variance ratio within 20% of B_eff for every B and regime \(Rademacher\)$", out, re.M):
        fail("variance: the check line does not state the 20% margin")
    if set(said) != set(bad):
        fail(f"variance: CHECK FAILED for {sorted(said)}, but the CSV's ratios are more than 20% from B_eff at {sorted(bad)}")
    claims(out, bool(bad), "variance")


# ---- cosine --------------------------------------------------------------------------------------
def check_cosine(out, d, sab):
    rows = read_csv(os.path.join(d, "probe_cosine.csv"))
    D = header_int(out, "D")
    if [int(r["B"]) for r in rows] != [1, 4, 8, 16, 32]:
        fail(f"cosine: CSV batch sizes {[r['B'] for r in rows]}")
    c = num(rows[0]["c"])
    m = one_line(out, r"c = ([-\d.]+) \(mean\s+pairwise", "cosine c")
    if m:
        near(float(m.group(1)), c, 0.0006, "cosine: the header's c")
    # MeZO's cosine |z.g| / (|z| |g|) with z in {-1, 1}^D: z.g/|g| is about standard normal for
    # large D, so its mean is sqrt(2 / pi) / sqrt(D) and its s.d. sqrt((1 - 2/pi) / D); so is
    # GRZO's at B = 1 (one example: one direction z_1, whatever its coefficient)
    m = one_line(out, r"fixed parameters, (\d+) paired trials per B", "trials")
    mezo_theory, n = math.sqrt(2 / (math.pi * D)), int(m.group(1)) if m else 0
    se_theory = math.sqrt((1 - 2 / math.pi) / D / n) if n else math.nan
    mean_mezo = sum(num(r["mezo_cos"]) for r in rows) / len(rows)
    if not abs(mean_mezo - mezo_theory) <= 4 * se_theory / math.sqrt(len(rows)) + 0.01 * mezo_theory:
        fail(f"cosine: MeZO's cosine over every B averages {mean_mezo:.6g}, not sqrt(2 / (pi D)) = {mezo_theory:.6g}")
    for r in rows[:1] if not sab else rows:
        if not abs(num(r["grzo_cos"]) - mezo_theory) <= 4 * se_theory + 0.02 * mezo_theory:
            fail(f"cosine B = {r['B']}: GRZO's cosine {r['grzo_cos']} is not MeZO's sqrt(2 / (pi D)) (one direction)")
    for r in rows:
        for k in ("mezo_se",) + (("grzo_se",) if r is rows[0] or sab else ()):
            if not 0.85 <= num(r[k]) / se_theory <= 1.15:
                fail(f"cosine B = {r['B']}: {k} {r[k]} is not sqrt((1 - 2/pi) / D / trials) = {se_theory:.4g}")
    for r in rows:
        B, w = int(r["B"]), f"cosine B = {r['B']}"
        g, gs, mz, ms, ratio = (num(r[k]) for k in ("grzo_cos", "grzo_se", "mezo_cos", "mezo_se", "ratio"))
        if r["c"] != rows[0]["c"]:
            fail(f"{w}: c differs between rows (one pool)")
        be = num(r["B_eff"])
        near(be, c * B + 1 - c, 2e-5 * B, w + ": B_eff = cB + 1 - c")
        near(num(r["sqrt_B_eff"]), math.sqrt(be), 2e-5, w + ": sqrt(B_eff)")
        near(num(r["theory_ratio"]), cos_ratio(be, B), 2e-5, w + ": theory ratio")
        rel_near(ratio, g / mz, 2e-5, w + ": ratio = GRZO / MeZO")
        rel_near(num(r["ratio_se"]), ratio * math.hypot(gs / g, ms / mz), 2e-4, w + ": ratio's s.e.")
        if not sab and not 0.85 <= ratio / num(r["theory_ratio"]) <= 1.15:
            fail(f"{w}: ratio {ratio} is not within 15% of the large-D theory {r['theory_ratio']}")
    for cells, r in zip(table_rows(out, len(rows), "cosine"), rows):
        w = f"cosine table B = {cells[0]}"
        if cells[0] != r["B"]:
            fail(f"{w}: not the CSV's B = {r['B']}")
        for cell, k in ((cells[1], "grzo"), (cells[2], "mezo")):
            v = cell_num(cell, w)
            near(v[0], 1e3 * num(r[k + "_cos"]), 0.0005 + 1e-6, f"{w} {k} cosine")
            near(v[-1], 1e3 * num(r[k + "_se"]), 0.0005 + 1e-6, f"{w} {k} s.e.")
        v = cell_num(cells[3], w)
        near(v[0], num(r["ratio"]), 0.005 + 1e-6, w + " ratio")
        near(v[-1], num(r["ratio_se"]), 0.005 + 1e-6, w + " ratio's s.e.")
        cells_show(cells, r, ((4, "paper_ratio", ("f", 2)), (5, "sqrt_B_eff", ("f", 2)), (6, "theory_ratio", ("f", 2))), w)
    ratios = [num(r["ratio"]) for r in rows]
    flat = abs(num(rows[-1]["mezo_cos"]) - num(rows[0]["mezo_cos"])) / math.hypot(num(rows[-1]["mezo_se"]), num(rows[0]["mezo_se"]))
    no_growth = {(int(rows[b - 1]["B"]), int(rows[b]["B"])) for b in range(1, len(rows)) if not ratios[b] > ratios[b - 1]}
    said = set()
    for m in re.finditer(r"^CHECK FAILED: cosine ratio GRZO/MeZO does not grow from B = (\d+) \(([-\d.]+)\) to B = (\d+) "
                         r"\(([-\d.]+)\)$", out, re.M):
        said.add((int(m.group(1)), int(m.group(3))))
        for b, v in ((m.group(1), m.group(2)), (m.group(3), m.group(4))):
            got = [num(r["ratio"]) for r in rows if r["B"] == b]
            near(float(v), got[0] if got else math.nan, 0.0006, f"cosine failure: the ratio at B = {b}")
    if said != no_growth:
        fail(f"cosine: 'does not grow' said for {sorted(said)}, the CSV's ratios fall at {sorted(no_growth)}")
    low16 = ratios[3] <= 2.0
    m = re.search(r"^CHECK FAILED: cosine ratio GRZO/MeZO at B = 16 is ([\d.]+), not above 2$", out, re.M)
    if low16 != bool(m):
        fail(f"cosine: the B = 16 ratio is {ratios[3]}, and its failure is {'not ' if low16 else ''}reported")
    if m:
        near(float(m.group(1)), ratios[3], 0.0006, "cosine failure: the B = 16 ratio")
    m = re.search(r"^CHECK FAILED: MeZO's cosine is not flat: B = 32 gives (\S+), B = 1 gives (\S+), a difference of\s+"
                  r"([\d.]+) standard errors \(allowed 3\)$", out, re.M)
    if (flat > 3) != bool(m):
        fail(f"cosine: MeZO's B = 32 and B = 1 cosines are {flat:.2f} s.e. apart, and flatness is {'not ' if flat > 3 else ''}reported")
    if m:
        rel_near(float(m.group(1)), num(rows[-1]["mezo_cos"]), 5e-4, "cosine failure: MeZO at B = 32")
        rel_near(float(m.group(2)), num(rows[0]["mezo_cos"]), 5e-4, "cosine failure: MeZO at B = 1")
        near(float(m.group(3)), flat, 0.051, "cosine failure: MeZO's B = 32 vs B = 1 in s.e.")
    m = re.search(r"^check passed: ratio grows monotonically with B and is ([\d.]+) > 2 at B = 16; MeZO at B = 32 is\s+([\d.]+) s\.e\.", out, re.M)
    if m:
        near(float(m.group(1)), ratios[3], 0.0051, "cosine check line: the B = 16 ratio")
        near(float(m.group(2)), flat, 0.051, "cosine check line: MeZO's B = 32 vs B = 1 in s.e.")
    claims(out, bool(no_growth) or low16 or flat > 3, "cosine")


# ---- alignment ------------------------------------------------------------------------------------
def check_alignment(out, d, sab):
    rows = read_csv(os.path.join(d, "probe_alignment.csv"))
    if [(r["task"], int(r["B"])) for r in rows] != [(t, b) for t in ("aligned", "diverse") for b in (2, 4, 8, 16, 32)]:
        fail("alignment: CSV rows are not aligned, diverse x B = 2, 4, 8, 16, 32")
    for r in rows:
        B, w = int(r["B"]), f"alignment {r['task']} B = {r['B']}"
        ex, est, se, lo, hi = (num(r[k]) for k in ("B_eff_exact", "B_eff_est", "B_eff_se", "B_eff_lo", "B_eff_hi"))
        near(ex, 1 + (B - 1) * num(r["c_w_exact"]), 2e-5 * B, w + ": exact B_eff = 1 + (B-1) c_w")
        near(est, 1 + (B - 1) * num(r["c_w_est"]), 2e-5 * B, w + ": estimated B_eff = 1 + (B-1) c_w")
        # z from the CSV's 6 decimals: each of est, exact and se is off by up to 5e-7
        near(num(r["z"]), (est - ex) / se, 1e-4 + (1e-6 + 5e-7 * abs(num(r["z"]))) / se, w + ": z = (estimate - exact) / se")
        near(num(r["var_ratio_pred"]), est, 2e-6, w + ": the predicted variance ratio is B_eff")
        if est > 0:
            near(num(r["cos_ratio_pred"]), cos_ratio(est, B), 2e-5, w + ": the predicted cosine ratio")
        if not (lo < est < hi and se > 0):
            fail(f"{w}: interval [{lo}, {hi}] does not hold the estimate {est} (se {se})")
        if not num(r["cos_ratio_lo"]) <= num(r["cos_ratio_pred"]) <= num(r["cos_ratio_hi"]):
            fail(f"{w}: the cosine ratio's interval does not hold it")
        k = num(r["coverage"]) * int(r["repeats"])
        if not (0 <= k <= int(r["repeats"]) and abs(k - round(k)) < 0.01):
            fail(f"{w}: coverage {r['coverage']} is not a count of {r['repeats']} repeats")
        if int(r["probes"]) != 200 or int(r["repeats"]) != 40:
            fail(f"{w}: quick mode runs 200 probes and 40 repeats, the CSV says {r['probes']} and {r['repeats']}")
    for cells, r in zip(table_rows(out, len(rows), "alignment"), rows):
        w = f"alignment table row {cells[:2]}"
        if cells[0] != r["task"] or cells[1] != r["B"]:
            fail(f"{w}: not the CSV's row {r['task']}, {r['B']}")
        same_shown(cells[2], num(r["B_eff_exact"]), 3, w + " exact")
        v = cell_num(cells[3], w)
        for got, k, dec in zip(v, ("B_eff_est", "B_eff_se", "B_eff_lo", "B_eff_hi"), (3, 3, 2, 2)):
            near(got, num(r[k]), 0.5 * 10 ** -dec + 1e-6, f"{w} {k}")
        cells_show(cells, r, ((4, "z", ("f", 2)), (5, "c_w_exact", ("f", 3)), (6, "c_w_est", ("f", 3)),
                              (7, "var_ratio_pred", ("f", 2))), w)
        v = cell_num(cells[8], w)
        for got, k in zip(v, ("cos_ratio_pred", "cos_ratio_lo", "cos_ratio_hi")):
            near(got, num(r[k]), 0.005 + 1e-6, f"{w} {k}")
        v = cell_num(cells[9], w)
        near(v[0], 100 * num(r["coverage"]), 0.05 + 1e-6, w + " coverage")
        near(v[-1], int(r["repeats"]), 0, w + " repeats")
        same_shown(cells[10], num(r["mean_abs_z"]), 2, w + " mean |z|")
    cover = sum(num(r["coverage"]) for r in rows) / len(rows)
    m = one_line(out, r"^pooled coverage of the 95% intervals: ([\d.]+)% over (\d+) estimates", "pooled coverage")
    if m:
        near(float(m.group(1)), 100 * cover, 0.051, "alignment: pooled coverage")
        near(int(m.group(2)), len(rows) * 40, 0, "alignment: estimates pooled")
    far = {(r["task"], int(r["B"])) for r in rows if not abs(num(r["z"])) <= 4.0}
    said = set()
    for m in re.finditer(r"^CHECK FAILED: alignment, (\w+) task, B = (\d+): forward-only B_eff = ([-\d.]+) ± ([\d.]+) is\s+"
                         r"([-\d.]+) standard errors from the exact ([-\d.]+) \(allowed 4\)$", out, re.M):
        said.add((m.group(1), int(m.group(2))))
        r = [r for r in rows if (r["task"], r["B"]) == (m.group(1), m.group(2))]
        if r:
            for got, k, tol in zip(m.groups()[2:], ("B_eff_est", "B_eff_se", "z", "B_eff_exact"), (6e-4, 6e-4, 0.051, 6e-4)):
                near(float(got), num(r[0][k]), tol, f"alignment failure {m.group(1)} B = {m.group(2)}: {k}")
    if said != far:
        fail(f"alignment: CHECK FAILED for {sorted(said)}, the CSV's |z| exceeds 4 at {sorted(far)}")
    bad_cover = not 0.90 <= cover <= 0.985
    m = re.search(r"^CHECK FAILED: alignment: the 95% intervals cover the exact B_eff in ([\d.]+)% of the repeats "
                  r"\(allowed \[90\.0%, 98\.5%\]\)$", out, re.M)
    if bad_cover != bool(m):
        fail(f"alignment: pooled coverage {cover:.4f}, and its failure is {'not ' if bad_cover else ''}reported")
    if m:
        near(float(m.group(1)), 100 * cover, 0.051, "alignment failure: pooled coverage")
    m = re.search(r"^check passed: forward-only B_eff within 4 standard errors of the exact one for every task and B; "
                  r"95% intervals cover it in ([\d.]+)% of the repeats$", out, re.M)
    if m:
        near(float(m.group(1)), 100 * cover, 0.051, "alignment check line: pooled coverage")
    claims(out, bool(far) or bad_cover, "alignment")


# ---- quant ----------------------------------------------------------------------------------------
def check_quant(out, d, sab):
    rows = read_csv(os.path.join(d, "probe_quant.csv"))
    if [r["estimator"] for r in rows] != ["MeZO", "canonical", "GRZO"]:
        fail(f"quant: CSV estimators {[r['estimator'] for r in rows]}")
    for r in rows:
        w = f"quant {r['estimator']}"
        rel_near(num(r["delta_std_change"]), num(r["delta_std_w4"]) / num(r["delta_std_none"]), 2e-5, w + ": std(delta) change")
        rel_near(num(r["update_norm_change"]), num(r["update_norm_w4"]) / num(r["update_norm_none"]), 2e-5, w + ": update norm change")
    for cells, r in zip(table_rows(out, len(rows), "quant"), rows):
        w = f"quant table row {cells[0]}"
        cells_show(cells, r, ((1, "delta_std_none", ("f", 5)), (2, "delta_std_w4", ("f", 5)), (3, "delta_std_change", ("f", 2)),
                              (4, "update_norm_none", ("g", 4)), (5, "update_norm_w4", ("g", 4)),
                              (6, "update_norm_change", ("f", 3)), (7, "paper_change", ("f", 2))), w)
    # canonical: g_hat = sum_i delta_i z_i / (2 sigma B) with independent z_i in {-1, 1}^D, so
    # |g_hat| = sqrt(D/B) rms(delta) / (2 sigma) up to O(1/sqrt(D)) cross terms, and its deltas
    # have mean 0: rms = std / sqrt(1 - 1/B)
    m = one_line(out, r"\(D = (\d+)\), B = (\d+), \d+ trials per cell, sigma = ([\d.e+-]+);", "quant's D, B and sigma")
    if m and len(rows) == 3:
        D, B, sigma = int(m.group(1)), int(m.group(2)), float(m.group(3))
        for mode in ("none", "w4"):
            want = math.sqrt(D / B) * num(rows[1]["delta_std_" + mode]) / math.sqrt(1 - 1 / B) / (2 * sigma)
            rel_near(num(rows[1]["update_norm_" + mode]), want, 0.015, f"quant canonical ({mode}): |g_hat| = sqrt(D/B) rms(delta) / (2 sigma)")
    grzo, mezo = num(rows[2]["update_norm_change"]), num(rows[0]["update_norm_change"])
    m = re.search(r"^CHECK FAILED: quant: GRZO's update norm changes by ([\d.]+)x under W4, outside \[0\.97, 1\.03\]$", out, re.M)
    if (not 0.97 <= grzo <= 1.03) != bool(m):
        fail(f"quant: GRZO's change {grzo}, and its failure is {'not ' if m is None else ''}reported as it should")
    if m:
        near(float(m.group(1)), grzo, 0.0006, "quant failure: GRZO's change")
    m = re.search(r"^CHECK FAILED: quant: MeZO's update norm changes by ([\d.]+)x under W4, not above 2\.0$", out, re.M)
    if (not mezo > 2.0) != bool(m):
        fail(f"quant: MeZO's change {mezo}, and its failure is reported wrongly")
    if m:
        near(float(m.group(1)), mezo, 0.0006, "quant failure: MeZO's change")
    m = re.search(r"^check passed: GRZO changes by ([\d.]+)x \(within \[0\.97, 1\.03\]\), MeZO by ([\d.]+)x \(> 2\.0\)$", out, re.M)
    if m:
        near(float(m.group(1)), grzo, 0.0006, "quant check line: GRZO's change")
        near(float(m.group(2)), mezo, 0.006, "quant check line: MeZO's change")
    claims(out, not 0.97 <= grzo <= 1.03 or not mezo > 2.0, "quant")


# ---- batch and ablation ----------------------------------------------------------------------------
def curves(path, n_points):
    rows = read_csv(path)
    if [int(r["step"]) for r in rows] != [25 * p for p in range(n_points)]:
        fail(f"{path}: steps are not 0, 25, ... {25 * (n_points - 1)}")
    return rows


def untrained_loss(out, start, what):
    """an untrained student's loss is about ln(classes): its logits are small and unrelated
    to the labels (a mean over seeds that left a seed out, or halved, is not)"""
    m = one_line(out, r"MLP \d+-\d+-(\d+) \(D = ", "student shape")
    if m and not 0.8 * math.log(int(m.group(1))) <= start <= 1.5 * math.log(int(m.group(1))):
        fail(f"{what}: the untrained loss {start} is not about ln {m.group(1)}")


def check_batch(out, d, sab):
    rows = curves(os.path.join(d, "probe_batch.csv"), 41)
    keys, D, sigma, lr = ("B4", "B8", "B16", "B32"), header_int(out, "D"), 1e-3, 5e-5
    start = rows[0]["B4_mean"]
    untrained_loss(out, num(start), "batch")
    for k in keys:
        if rows[0][k + "_mean"] != start or rows[0][k + "_sd"] != rows[0]["B4_sd"]:
            fail(f"batch: {k} starts at {rows[0][k + '_mean']}, B4 at {start}: every B starts from the same weights")
    for cells, k in zip(table_rows(out, len(keys), "batch"), keys):
        mean = [num(r[k + "_mean"]) for r in rows]
        w, B = f"batch table B = {cells[0]}", int(k[1:])
        if cells[0] != k[1:]:
            fail(f"{w}: want B = {k[1:]}")
        same_shown(cells[1], mean[0], 4, w + " start")
        same_shown(cells[2], mean[4], 4, w + " 10% of steps")
        same_shown(cells[3], mean[20], 4, w + " 50% of steps")
        v = cell_num(cells[4], w)
        near(v[0], mean[-1], 0.00005 + 1e-6 * abs(mean[-1]), w + " final")
        near(v[-1], num(rows[-1][k + "_sd"]), 0.00005 + 1e-3 * num(rows[-1][k + "_sd"]), w + " final s.d.")
        same_shown(cells[5], min(mean), 4, w + " best")
        same_shown(cells[6], mean[-1] - min(mean), 4, w + " final - best")
        # GRZO's update norm ~ lr sqrt(D/B) / (2 sigma) (training.c's top comment)
        step = cell_num(cells[7], w)[0]
        if not 0.8 <= step / (lr * math.sqrt(D / B) / (2 * sigma)) <= 1.25:
            fail(f"{w}: median step {step}, not about lr sqrt(D/B) / (2 sigma) = {lr * math.sqrt(D / B) / (2 * sigma):.3f}")
        if not cell_num(cells[8], w)[0] >= 1.0:
            fail(f"{w}: the largest step is below the median")
    b32 = [num(r["B32_mean"]) for r in rows]
    b4 = num(rows[-1]["B4_mean"])
    m = re.search(r"^check passed: B = 32 ends (\d+)% below its start; B = 4 ends ([-\d.]+) above B = 32$", out, re.M)
    if m:
        near(float(m.group(1)), 100 * (1 - b32[-1] / b32[0]), 0.51, "batch check line: B = 32's gain")
        near(float(m.group(2)), b4 - b32[-1], 0.0006, "batch check line: B = 4 above B = 32")
    claims(out, not (b32[-1] <= 0.8 * b32[0] and b4 >= b32[-1] + 0.1), "batch")


def check_ablation(out, d, sab):
    rows = curves(os.path.join(d, "probe_ablation.csv"), 41)
    tasks, variants = ("aligned", "diverse"), ("grzo", "canonical", "shared", "mezo")
    for task in tasks:
        untrained_loss(out, num(rows[0][task + "_grzo_mean"]), f"ablation {task}")
        for v in variants:
            k = f"{task}_{v}"
            if rows[0][k + "_mean"] != rows[0][task + "_grzo_mean"]:
                fail(f"ablation: {k} starts elsewhere than {task}_grzo: every variant starts from the same weights")
    table = table_rows(out, len(tasks) * len(variants), "ablation")
    for cells, (task, v) in zip(table, [(a, b) for a in tasks for b in variants]):
        mean, w = [num(r[f"{task}_{v}_mean"]) for r in rows], f"ablation table row {cells[0]}, {cells[2]}"
        if cells[0] != task:
            fail(f"{w}: want task {task}")
        if not -1.0 <= cell_num(cells[1], w)[0] <= 1.0:
            fail(f"{w}: c at start {cells[1]} is not a cosine")
        same_shown(cells[4], mean[4], 4, w + " 10% of steps")
        same_shown(cells[5], mean[20], 4, w + " 50% of steps")
        fin = cell_num(cells[6], w)
        near(fin[0], mean[-1], 0.00005 + 1e-6 * abs(mean[-1]), w + " final")
        near(fin[-1], num(rows[-1][f"{task}_{v}_sd"]), 0.00005 + 1e-3 * num(rows[-1][f"{task}_{v}_sd"]), w + " final s.d.")
    for task, lr in zip(tasks, (1e-6, 2e-5)):
        got = [cells for cells in table if cells[0] == task and cells[2] == "GRZO"]
        if got:
            rel_near(cell_num(got[0][3], "GRZO lr")[0], lr, 1e-3, f"ablation {task}: GRZO's lr")
    final = {v: num(rows[-1][f"aligned_{v}_mean"]) for v in variants}
    m = re.search(r"^check passed: on the aligned task GRZO ends at ([\d.]+), below shared \(([\d.]+)\) and MeZO \(([\d.]+)\) by >= 10%$", out, re.M)
    if m:
        for got, v in zip(m.groups(), ("grzo", "shared", "mezo")):
            near(float(got), final[v], 0.00006, f"ablation check line: {v}'s final loss")
    said = set(re.findall(r"^CHECK FAILED: ablation \(aligned task\): GRZO ends at [\d.]+, not \d+% below (.*) \(", out, re.M))
    want = {name for v, name in (("shared", "no PE (shared)"), ("mezo", "no PE, no GN (MeZO)")) if not final["grzo"] <= 0.9 * final[v]}
    if said != want:
        fail(f"ablation: CHECK FAILED for {sorted(said)}, the CSV says {sorted(want)}")
    claims(out, bool(want), "ablation")


# ---- variants -------------------------------------------------------------------------------------
def check_variants(out, d, sab):
    cos = read_csv(os.path.join(d, "probe_variants_cosine.csv"))
    cur = curves(os.path.join(d, "probe_variants_curves.csv"), 25)
    keys = ["dense", "sparse", "lowrank", "int8", "int4"]
    D = 2632   # the cosine's MLP 32-64-8
    if [r["variant"] for r in cos] != keys:
        fail(f"variants: CSV variants {[r['variant'] for r in cos]}")
    for r in cos:
        k, w = r["variant"], f"variants {r['variant']}"
        rel_near(num(r["ratio"]), num(r["grzo_cos"]) / num(r["mezo_cos"]), 1e-4, w + ": ratio")
        for core in ("mezo", "grzo"):
            if r[core + "_final_loss"] != cur[-1][f"{core}_{k}"]:
                fail(f"{w}: {core}'s final loss {r[core + '_final_loss']} is not the curve's last point {cur[-1][core + '_' + k]}")
        if cur[0]["mezo_" + k] != cur[0]["grzo_" + k]:
            fail(f"{w}: the two cores start from different losses (same student)")
    mz, ms = num(cos[0]["mezo_cos"]), num(cos[0]["mezo_se"])
    if not abs(mz - math.sqrt(2 / (math.pi * D))) <= 4 * ms + 0.02 * mz:
        fail(f"variants dense: MeZO's cosine {mz} is not sqrt(2 / (pi D)) = {math.sqrt(2 / (math.pi * D)):.6g}")
    for cells, r in zip(table_rows(out, len(cos), "variants"), cos):
        k, w = r["variant"], f"variants table row {cells[0]}"
        for cell, core in ((cells[1], "mezo"), (cells[2], "grzo")):
            v = cell_num(cell, w)
            near(v[0], 1e3 * num(r[core + "_cos"]), 0.0005 + 1e-6, f"{w} {core} cosine")
            near(v[-1], 1e3 * num(r[core + "_se"]), 0.0005 + 2e-3 * 1e3 * num(r[core + "_se"]), f"{w} {core} s.e.")
        same_shown(cells[3], num(r["ratio"]), 2, w + " ratio")
        same_shown(cells[4], num(cur[0]["mezo_" + k]), 4, w + " start loss")
        same_shown(cells[5], num(r["mezo_final_loss"]), 4, w + " MeZO+X loss")
        same_shown(cells[6], num(r["grzo_final_loss"]), 4, w + " GRZO+X loss")
    # MeZO+X's lr gives its mean update norm GRZO+X's, about sqrt(D/B) / (2 sigma) = 3250 per unit
    # of lr; MeZO's raw estimate, |g| sqrt(D), is far smaller for any loss this MLP has: its lr
    # is far larger than GRZO's (sabotaged, both cores run MeZO: the same lr)
    m = one_line(out, r"GRZO lr ([\d.e+-]+), MeZO\+X's lr matched", "GRZO's lr")
    for cells in table_rows(out, len(cos), "variants") if m else []:
        lr, grzo_lr = cell_num(cells[7], "MeZO+X lr")[0], float(m.group(1))
        if not (abs(lr - grzo_lr) <= 1e-3 * grzo_lr if sab else lr > 10 * grzo_lr):
            fail(f"variants {cells[0]}: MeZO+X's matched lr {cells[7]}, GRZO+X's {m.group(1)}")
    low = {r["variant"] for r in cos if not num(r["ratio"]) > 1.5}
    names = dict(zip(["none (dense)", "sparse (20%)", "low-rank (r = 2)", "int8", "int4"], keys))
    said = set()
    for m in re.finditer(r"^CHECK FAILED: variants: (.*): GRZO\+X's cosine is ([\d.]+) x MeZO\+X's at B = 16, not above 1\.5$", out, re.M):
        said.add(names.get(m.group(1), m.group(1)))
        r = [r for r in cos if r["variant"] == names.get(m.group(1))]
        near(float(m.group(2)), num(r[0]["ratio"]) if r else math.nan, 0.0051, f"variants failure {m.group(1)}: ratio")
    if bool(re.search(r"^check passed", out, re.M)) and not re.search(
            r"^check passed: GRZO\+X's cosine with the exact gradient is above 1\.5 x MeZO\+X's for every X$", out, re.M):
        fail("variants: the check line does not state the 1.5 x margin")
    if said != low:
        fail(f"variants: CHECK FAILED for {sorted(said)}, the CSV's ratio is not above 1.5 for {sorted(low)}")
    claims(out, bool(low), "variants")


def claims(out, should_fail, sub):
    """a failed claim is reported with CHECK FAILED, a kept one with "check passed", never both"""
    failed = bool(re.search(r"^CHECK FAILED", out, re.M))
    passed = bool(re.search(r"^check passed", out, re.M))
    if failed != should_fail or passed == should_fail:
        fail(f"{sub}: the CSV says the claims {'fail' if should_fail else 'hold'}, the run printed "
             f"{'CHECK FAILED' if failed else ''}{' and ' if failed and passed else ''}{'check passed' if passed else ''}")


def check_plot(out, d, name):
    """the stand-in drew name.png from the run copy of the kept name.gp; no temporary left"""
    pngs = re.findall(r"^PNG: (.*)$", out, re.M)
    if name is None:
        if pngs:
            fail(f"a subcommand without a plot printed PNG: {pngs}")
        return
    png = os.path.join(d, name + ".png")
    if pngs != [png]:
        fail(f"want the one line 'PNG: {png}', got {pngs}")
    try:
        with open(png) as f:
            drawn = f.read()
        with open(os.path.join(d, name + ".gp")) as f:
            script = f.read()
    except OSError as e:
        fail(f"the plot: {e}")
        return
    if drawn != "a whole PNG":
        fail(f"{png} is not what gnuplot wrote")
    if f"\nset output '{name}.png'\n" not in script:
        fail(f"{name}.gp does not draw {name}.png when run by hand")
    # only this run's own files: the other probe tests write into the same folder at the same time
    left = [f for f in os.listdir(d) if f.startswith(name + ".") and (f.endswith(".tmp") or f.endswith(".run.gp"))]
    if left:
        fail(f"temporaries left in {d}: {left}")


CHECKS = {"variance": check_variance, "cosine": check_cosine, "quant": check_quant, "batch": check_batch,
          "ablation": check_ablation, "alignment": check_alignment, "variants": check_variants}


def main():
    if len(sys.argv) not in (4, 5) or sys.argv[2] not in CHECKS or sys.argv[4:] not in ([], ["--sabotage"]):
        sys.exit(__doc__)
    probe, sub, out_dir, sab = sys.argv[1], sys.argv[2], sys.argv[3], len(sys.argv) == 5
    cmd = [probe, sub, "--quick", "--check", "--threads", str(THREADS), "--out", out_dir] + (["--sabotage"] if sab else [])
    with tempfile.TemporaryDirectory() as bin_dir:
        with open(os.path.join(bin_dir, "gnuplot"), "w") as f:
            f.write(STAND_IN)
        os.chmod(os.path.join(bin_dir, "gnuplot"), 0o755)
        env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
        t0 = time.monotonic()
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        wall = time.monotonic() - t0
    print(p.stdout, end="")
    want = 1 if sab else 0
    if p.returncode != want or p.stderr:
        sys.exit(f"FAIL: {' '.join(cmd)}: exit {p.returncode} (want {want}), stderr: {p.stderr.strip()}")
    m = one_line(p.stdout, rf"^\({sub}: ([\d.]+) s, (\d+) threads\)$", "timing")
    if m and not (0.0 <= float(m.group(1)) <= wall + 0.05 and int(m.group(2)) == THREADS):
        fail(f"timing line '{m.group(0)}': want 0 to {wall:.2f} s (the process's wall time) and {THREADS} threads")
    for path in re.findall(r"^CSV: (.*)$", p.stdout, re.M):
        if not os.path.isfile(path) or os.path.dirname(path) != out_dir.rstrip("/"):
            fail(f"'CSV: {path}' names no file in {out_dir}")
    try:
        CHECKS[sub](p.stdout, out_dir, sab)
    except (OSError, LookupError, ValueError, ZeroDivisionError) as e:   # a CSV or table not as it must be
        fail(f"{sub}: its CSV or table cannot be read as the probe writes it: {e!r}")
    check_plot(p.stdout, out_dir, PLOTS.get(sub))
    for f in failures:
        print("FAIL:", f)
    if failures:
        sys.exit(1)
    print(f"ok: {sub}{' (sabotaged)' if sab else ''}: its CSV, table and summary lines agree")


if __name__ == "__main__":
    main()
