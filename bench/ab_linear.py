#!/usr/bin/env python3
"""ab_linear.py - a change's effect on one grzo linear, measured in one process.

Builds bench_linear twice into one program, A from a git ref (default HEAD) and B from the
working tree, each with its own private copy of grzo's header, and runs the two in
alternation, round by round, after a warm-up round (bench/ab_linear.c). On a shared machine whose speed swings by
tens of percent from one minute to the next, two programs run minutes apart do not compare;
two runs of one round do. README "Measuring a change".

  bench/ab_linear.py [--build DIR] [--rounds N] [--ref REF] -- BENCH_LINEAR_ARGS [-- B_ARGS]

  --build DIR   a configured grzo build (default: the repository's build/): its compile command for
                bench/bench_linear.c gives both sides their flags, its link command the
                libraries
  --rounds N    rounds (default 20); each runs A's bench_linear and B's once
  --ref REF     A's source: any git ref of this repository (default HEAD)
  after "--":   bench_linear's options for both sides; after a second "--", B's own (the same
                build on both sides then compares two operations, e.g. GRZO against MeZO)

It prints one line: the best call of each side and the median [p10, p90] of the per-round
ratios B / A. Exit status: 0, 1 when a build or a run fails, 2 on a usage error.
Needs git, ninja and the C compiler of the build.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile

# what of a tree bench_linear.c compiles against
SOURCES = ["grzo.h", "backends", "bench/bench_linear.c", "examples/common"]
MAIN = "int main(int argc, char **argv)"


def fail(message, status=1):
    print("ab_linear: " + message, file=sys.stderr)
    sys.exit(status)


def run(cmd, cwd=None, what=None):
    try:
        result = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except OSError as e:   # the program itself missing (ninja, the compiler)
        fail("%s: cannot run %s: %s" % (what or cmd[0], cmd[0], e))
    if result.returncode != 0:
        sys.stderr.write(result.stdout)
        fail("%s failed: %s" % (what or cmd[0], " ".join(shlex.quote(c) for c in cmd)))
    return result.stdout


def extract_ref(root, ref, dest):
    """REF's files that bench_linear.c compiles against, into dest"""
    if subprocess.run(["git", "-C", root, "rev-parse", "--verify", "--quiet", ref + "^{commit}"],
                      stdout=subprocess.DEVNULL).returncode != 0:
        fail("--ref: no commit '%s' in %s" % (ref, root), 2)
    archive = subprocess.run(["git", "-C", root, "archive", "--format=tar", ref] + SOURCES, stdout=subprocess.PIPE)
    if archive.returncode != 0:
        fail("git archive %s %s failed" % (ref, " ".join(SOURCES)))
    if subprocess.run(["tar", "-x", "-C", dest], input=archive.stdout).returncode != 0:
        fail("unpacking %s's files into %s failed" % (ref, dest))


def compile_entry(build):
    path = os.path.join(build, "compile_commands.json")
    try:
        with open(path) as f:
            entries = json.load(f)
    except (OSError, ValueError) as e:
        fail("cannot read %s (is %s a configured grzo build?): %s" % (path, build, e))
    for e in entries:
        if e["file"].replace("\\", "/").endswith("bench/bench_linear.c"):
            return e
    fail("%s has no compile command for bench/bench_linear.c" % path)


def side_source(tree, side, out):
    """bench_linear.c of tree with its main renamed ab_main_<side>, and a call to its
    cpu_env_reexec for the driver"""
    with open(os.path.join(tree, "bench", "bench_linear.c")) as f:
        text = f.read()
    if text.count(MAIN) != 1:
        fail("%s/bench/bench_linear.c: expected one '%s'" % (tree, MAIN))
    text = text.replace(MAIN, "int ab_main_%s(int argc, char **argv)" % side)
    text += "\nvoid ab_reexec_%s(char **argv) { cpu_env_reexec(argv); }\n" % side
    with open(out, "w") as f:
        f.write(text)


def compile_side(entry, root, build, tree, source, obj):
    """entry's command for source (its -I paths into the source tree, not the build, moved to
    tree), with every grzo function private to the file"""
    args = entry.get("arguments") or shlex.split(entry["command"])
    cwd = entry["directory"]
    out, i = [args[0], "-DGRZO_STATIC"], 1
    while i < len(args):
        a = args[i]
        i += 1
        if a in ("-MQ", "-MF", "-MT", "-o", "-c"):
            i += 1   # and its argument
            continue
        if a in ("-MD", "-MMD") or a.endswith("bench_linear.c"):
            continue
        if a.startswith("-I"):
            inc = os.path.realpath(os.path.join(cwd, a[2:]))
            inside = lambda d: inc == d or inc.startswith(d + os.sep)
            if inside(root) and not inside(build):
                a = "-I" + os.path.normpath(os.path.join(tree, os.path.relpath(inc, root)))
        out.append(a)
    run(out + ["-c", source, "-o", obj], cwd=cwd, what="compiling " + source)


def link_libraries(build):
    """the libraries of the build's link command for bench_linear (paths absolute)"""
    lines = run(["ninja", "-C", build, "-t", "commands", "bench/bench_linear"], what="ninja").strip().splitlines()
    args = shlex.split(lines[-1])
    keep, i = [], 1
    while i < len(args):
        a = args[i]
        if a == "-o":
            i += 2
            continue
        if a.endswith(".o"):
            i += 1
            continue
        if a.endswith(".a") and not os.path.isabs(a):
            a = os.path.join(build, a)
        keep.append(a)
        i += 1
    return args[0], keep


def main():
    argv = sys.argv[1:]
    if "--" not in argv:
        fail("usage: bench/ab_linear.py [--build DIR] [--rounds N] [--ref REF] -- BENCH_LINEAR_ARGS [-- B_ARGS] "
             "(the file's opening comment says more)", 2)
    cut = argv.index("--")
    p = argparse.ArgumentParser(prog="ab_linear.py", add_help=True)
    p.add_argument("--build", default=None)
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--ref", default="HEAD")
    opts = p.parse_args(argv[:cut])
    if not 1 <= opts.rounds <= 10000:
        fail("--rounds: expected 1..10000, got %d" % opts.rounds, 2)
    bench_args = argv[cut + 1:]
    if "--help" in bench_args:   # bench_linear would print its usage into the captured output and exit
        fail("bench_linear's options: ./build/bench/bench_linear --help", 2)
    root = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    build = os.path.realpath(opts.build or os.path.join(root, "build"))
    run(["ninja", "-C", build, "bench/bench_linear"], what="building bench_linear in " + build)
    entry = compile_entry(build)
    cc, libs = link_libraries(build)
    with tempfile.TemporaryDirectory(prefix="grzo-ab-") as tmp:
        tree_a = os.path.join(tmp, "a")
        os.mkdir(tree_a)
        extract_ref(root, opts.ref, tree_a)
        objs = []
        for side, tree in (("a", tree_a), ("b", root)):
            src, obj = os.path.join(tmp, "tu_%s.c" % side), os.path.join(tmp, "tu_%s.o" % side)
            side_source(tree, side, src)
            compile_side(entry, root, build, tree, src, obj)
            objs.append(obj)
        driver = os.path.join(tmp, "driver.o")
        run([cc, "-std=c99", "-O2", "-c", os.path.join(root, "bench", "ab_linear.c"), "-o", driver], what="compiling the driver")
        exe = os.path.join(tmp, "ab_linear")
        run([cc, "-o", exe, driver] + objs + libs, cwd=build, what="linking")
        print("ab_linear: A = %s, B = the working tree (%s); %d rounds of bench_linear %s" %
              (opts.ref, root, opts.rounds, " ".join(bench_args)), flush=True)
        return subprocess.run([exe, str(opts.rounds)] + bench_args).returncode


if __name__ == "__main__":
    sys.exit(main())
