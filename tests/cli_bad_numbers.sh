#!/bin/sh
# Bad numeric values on a program's command line: each must exit nonzero (not by a signal)
# with exactly one line on stderr, before any work starts.
#
#   cli_bad_numbers.sh PROGRAM [ARG...] -- KIND:OPTION...
#     KIND int    an integer option: "12abc", "2.5", "inf", "99999999999", "", " 3", "0x10", "1e3"
#          seed   a seed: "12abc", "2.5", "-1", "inf", "99999999999999999999", ""
#          float  a real option: "12abc", "inf", "-inf", "nan", "abc", "1e999", "", "0x1p3"
#   ARGs come before the option (e.g. a subcommand). Exit 0 when every value was refused.
set -u
prog=$1
shift
args=
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  args="$args $1"
  shift
done
[ $# -gt 0 ] && shift
err=${TMPDIR:-/tmp}/cli_bad_numbers.$$
trap 'rm -f "$err"' EXIT
failed=0 checked=0

refuses() { # OPTION VALUE
  # shellcheck disable=SC2086 # args is a word list
  "$prog" $args "$1" "$2" </dev/null >/dev/null 2>"$err"
  rc=$?
  lines=$(wc -l <"$err")
  checked=$((checked + 1))
  if [ "$rc" -eq 0 ] || [ "$rc" -ge 128 ] || [ "$lines" -ne 1 ]; then
    echo "FAIL: $prog$args $1 '$2': exit $rc, $lines lines on stderr:"
    sed 's/^/    /' "$err"
    failed=$((failed + 1))
  fi
}

for spec in "$@"; do
  kind=${spec%%:*} opt=${spec#*:}
  case $kind in
    int)   for v in 12abc 2.5 inf 99999999999 "" " 3" 0x10 1e3; do refuses "$opt" "$v"; done ;;
    seed)  for v in 12abc 2.5 -1 inf 99999999999999999999 ""; do refuses "$opt" "$v"; done ;;
    float) for v in 12abc inf -inf nan abc 1e999 "" 0x1p3; do refuses "$opt" "$v"; done ;;
    *) echo "cli_bad_numbers.sh: unknown kind '$kind' in '$spec'" >&2; exit 2 ;;
  esac
done
[ "$checked" -gt 0 ] || { echo "cli_bad_numbers.sh: no options given" >&2; exit 2; }
echo "$prog: $((checked - failed)) of $checked bad values refused with one line"
[ "$failed" -eq 0 ]
