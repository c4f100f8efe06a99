# Sourced by the CLI tests (test_generate_cli_args.sh, test_export_cli_args.sh):
#   refused STATUS MESSAGE ARGS...
# runs "$tool" ARGS in $work and checks that it exits STATUS (2: the command line is wrong,
# 1: the run cannot go on), that its first stderr line is "$name: MESSAGE...", that a usage
# error prints nothing on stdout, and that it leaves no file in $work; counts the cases in n.
# The caller sets tool, name and work (an empty folder) and defines fail.
n=0
refused() {
    local want=$1 msg=$2 rc
    shift 2
    "$tool" "$@" > "$work/stdout" 2> "$work/stderr"
    rc=$?
    [ "$rc" -eq "$want" ] || fail "$*: exit $rc, want $want: $(head -1 "$work/stderr")"
    head -1 "$work/stderr" | grep -qF -- "$name: $msg" || fail "$*: want '$name: $msg' on stderr, got: $(head -1 "$work/stderr")"
    [ "$want" -ne 2 ] || [ ! -s "$work/stdout" ] || fail "$*: a usage error printed on stdout: $(head -c 200 "$work/stdout")"
    [ -z "$(ls -A "$work" | grep -v -x -e stdout -e stderr)" ] || fail "$*: a refused run left files: $(ls -A "$work")"
    n=$((n + 1))
}
