#!/usr/bin/env python3
"""Tests of .ci/summary.py on crafted testlog.json files: allowed skips are listed with
their reasons and counted as skipped, a skip outside the allow-list fails the summary,
files left in the tests' TMPDIR fail it, and the last line is exactly 'N passed, N failed,
N skipped'."""
import json
import os
import subprocess
import sys
import tempfile

SUMMARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "summary.py")
failures = 0


def entry(name, result, stdout=""):
    return {"name": name, "result": result, "stdout": stdout, "returncode": 77 if result == "SKIP" else 0}


def write_log(d, name, entries):
    path = os.path.join(d, name)
    with open(path, "w", encoding="utf-8") as f:
        for e in entries:
            f.write(json.dumps(e) + "\n")
    return path


def run_summary(entries, args=(), sanitized=None):
    """The summary of one log, or of two when `sanitized` (the second log's entries) is given."""
    with tempfile.TemporaryDirectory() as d:
        logs = [write_log(d, "testlog.json", entries)]
        if sanitized is not None:
            logs.append("asan=" + write_log(d, "asan.json", sanitized))
        p = subprocess.run([sys.executable, SUMMARY, *logs, *args], capture_output=True, text=True)
    return p.returncode, p.stdout.splitlines()


def check(cond, what, lines):
    global failures
    if not cond:
        failures += 1
        print(f"FAIL: {what}\n  output:\n    " + "\n    ".join(lines))


ALLOWED = [
    entry("grzo:cuda / cuda_parity", "SKIP", "SKIP: no CUDA device or driver\n"),
    entry("grzo:llm / test_llm_smollm", "SKIP", "test_llm_smollm: skipped (set GRZO_SMOLLM_GGUF to the file)\n"),
    entry("grzo:finetune / tasks_real_data", "SKIP", "real_data: skipped (set GRZO_TASKS_DATA)\n"),
]
PASSING = [entry("grzo:core / errors_state", "OK"), entry("grzo:llm / test_llm_reference", "OK")]

# allowed skips only: exit 0, one line per skip (with the test's own reason) before the total
rc, lines = run_summary(PASSING + ALLOWED)
check(rc == 0, "allowed skips: exit status 0", lines)
check(lines[-1:] == ["2 passed, 0 failed, 3 skipped"], "allowed skips: final line", lines)
check(len(lines) == 4 and all(ln.startswith("skipped: ") for ln in lines[:3]), "allowed skips: one line each", lines)
check(any("cuda_parity" in ln and "no CUDA device or driver" in ln for ln in lines), "cuda skip reason shown", lines)
check(any("test_llm_smollm" in ln and "GRZO_SMOLLM_GGUF" in ln for ln in lines), "smollm skip reason shown", lines)

# a test outside the allow-list skips (the numpy reference): counted as failed, exit 1
bad = entry("grzo:llm / test_llm_reference", "SKIP", "SKIP: no python with numpy among '/usr/bin/python3'\n")
rc, lines = run_summary(PASSING[:1] + ALLOWED + [bad])
check(rc == 1, "disallowed skip: exit status 1", lines)
check(lines[-1:] == ["1 passed, 1 failed, 3 skipped"], "disallowed skip: final line", lines)
check(any(ln.startswith("FAILED (must not skip): test_llm_reference: SKIP: no python with numpy") for ln in lines[:-1]),
      "disallowed skip: named with its reason before the final line", lines)

# a skip outside the allow-list that printed no reason: still named, still a failure
rc, lines = run_summary(PASSING + [entry("grzo:core / rng_kat", "SKIP")])
check(rc == 1 and lines[-1:] == ["2 passed, 1 failed, 0 skipped"], "core skip without a reason fails", lines)
check(any("rng_kat" in ln and "printed no reason" in ln for ln in lines), "missing reason said", lines)

# plain failures and timeouts still fail; an empty log fails
rc, lines = run_summary(PASSING + [entry("grzo:core / ops", "FAIL"), entry("grzo:core / resume_fzoo", "TIMEOUT")])
check(rc == 1 and lines == ["2 passed, 2 failed, 0 skipped"], "failures counted", lines)
rc, lines = run_summary([])
check(rc == 1 and lines == ["0 passed, 0 failed, 0 skipped"], "no test: exit status 1", lines)

# --require mpi (a full run of tests/run.sh): the mpi suite must be in the log, not merely pass
rc, lines = run_summary(PASSING, ["--require", "mpi"])
check(rc == 1 and lines[-1:] == ["2 passed, 1 failed, 0 skipped"], "required suite missing: a failure", lines)
check(any(ln.startswith("FAILED (suite missing): mpi") for ln in lines), "required suite missing: named", lines)
rc, lines = run_summary(PASSING + [entry("grzo:mpi / mpi_train_np2", "OK")], ["--require", "mpi"])
check(rc == 0 and lines == ["3 passed, 0 failed, 0 skipped"], "required suite present", lines)
rc, lines = run_summary(PASSING + [entry("grzo:mpi / mpi_train_np2", "SKIP", "SKIP: mpirun not found\n")], ["--require", "mpi"])
check(rc == 1 and lines[-1:] == ["2 passed, 1 failed, 0 skipped"], "a skipped mpi test fails CI", lines)

# no log at all (meson test did not get to write one): a failure, with the plain final line
with tempfile.TemporaryDirectory() as d:
    p = subprocess.run([sys.executable, SUMMARY, os.path.join(d, "missing.json")], capture_output=True, text=True)
lines = p.stdout.splitlines()
check(p.returncode == 1 and lines[-1:] == ["0 passed, 1 failed, 0 skipped"] and not p.stderr, "missing log", lines)

# two logs (tests/run.sh's plain and sanitized builds): one total; the second log's tests
# are named with its label, its failures listed; a missing second log is a failure
rc, lines = run_summary(PASSING + ALLOWED, sanitized=PASSING + [ALLOWED[1]])
check(rc == 0 and lines[-1:] == ["4 passed, 0 failed, 4 skipped"], "two logs: counted together", lines)
check(any(ln.startswith("skipped: asan: test_llm_smollm") for ln in lines), "two logs: label on the second's skips", lines)
rc, lines = run_summary(PASSING, sanitized=[entry("grzo:core / ops", "FAIL"), bad])
check(rc == 1 and lines[-1:] == ["2 passed, 2 failed, 0 skipped"], "two logs: the second's failures count", lines)
check("FAILED: asan: ops (FAIL)" in lines and any(ln.startswith("FAILED (must not skip): asan: test_llm_reference") for ln in lines),
      "two logs: the second's failures named", lines)
with tempfile.TemporaryDirectory() as d:
    p = subprocess.run([sys.executable, SUMMARY, write_log(d, "t.json", PASSING), "asan=" + os.path.join(d, "missing.json"),
                        "--require", "core"], capture_output=True, text=True)
lines = p.stdout.splitlines()
check(p.returncode == 1 and lines[-1:] == ["2 passed, 1 failed, 0 skipped"] and "cannot read" in lines[0],
      "two logs: the second missing", lines)

# --tmpdir (tests/run.sh): files the tests left in their TMPDIR are one failure, named;
# OpenMPI's session folder is allowed; an empty folder passes; a missing one fails
with tempfile.TemporaryDirectory() as d:
    log = write_log(d, "t.json", PASSING)
    tmp = os.path.join(d, "tmp")
    os.mkdir(tmp)
    os.mkdir(os.path.join(tmp, "ompi.vm.0"))
    p = subprocess.run([sys.executable, SUMMARY, log, "--tmpdir", tmp], capture_output=True, text=True)
    lines = p.stdout.splitlines()
    check(p.returncode == 0 and lines == ["2 passed, 0 failed, 0 skipped"], "tmpdir: only OpenMPI's folder", lines)
    for name in ["grzo_test_files_a1", "x.png.tmp"]:
        open(os.path.join(tmp, name), "w").close()
    p = subprocess.run([sys.executable, SUMMARY, log, "--tmpdir", tmp], capture_output=True, text=True)
    lines = p.stdout.splitlines()
    check(p.returncode == 1 and lines[-1:] == ["2 passed, 1 failed, 0 skipped"], "tmpdir: leftovers fail", lines)
    check(any(ln.startswith("FAILED (files left behind)") and "grzo_test_files_a1, x.png.tmp" in ln and "ompi" not in ln
              for ln in lines), "tmpdir: leftovers named", lines)
    p = subprocess.run([sys.executable, SUMMARY, log, "--tmpdir", os.path.join(d, "gone")], capture_output=True, text=True)
    lines = p.stdout.splitlines()
    check(p.returncode == 1 and lines[-1:] == ["2 passed, 1 failed, 0 skipped"] and "cannot read" in lines[0],
          "tmpdir: a missing folder fails", lines)

print("test_summary: " + ("PASS" if failures == 0 else f"FAIL ({failures} checks)"))
sys.exit(1 if failures else 0)
