#!/bin/sh
# A benchmark's command line, checked from outside:
#   expect_cli.sh refuse REGEX PROGRAM [ARG...]   exits nonzero (not by a signal, not 77: a
#                                                 skip is no refusal) with exactly one line on
#                                                 stderr, which matches REGEX (grep -E)
#   expect_cli.sh help PROGRAM [ARG...]           exits 0 with a "usage:" line on stdout and
#                                                 nothing on stderr
# Exit 0 when the program did so, 1 (with what it did) otherwise.
set -u
mode=$1
shift
regex=
if [ "$mode" = refuse ]; then regex=$1; shift; fi
out=${TMPDIR:-/tmp}/expect_cli.$$.out err=${TMPDIR:-/tmp}/expect_cli.$$.err
trap 'rm -f "$out" "$err"' EXIT
"$@" < /dev/null > "$out" 2> "$err"
rc=$?
lines=$(wc -l < "$err")
case $mode in
  refuse)
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] && [ "$rc" -lt 128 ] && [ "$lines" -eq 1 ] && grep -Eq -- "$regex" "$err"; then
      echo "ok: $* refused: $(cat "$err")"; exit 0
    fi ;;
  help)
    if [ "$rc" -eq 0 ] && [ "$lines" -eq 0 ] && grep -q "usage:" "$out"; then echo "ok: $* printed its usage"; exit 0; fi ;;
  *) echo "expect_cli.sh: unknown mode '$mode'" >&2; exit 2 ;;
esac
echo "FAIL: $*: exit $rc, $lines lines on stderr:"
sed 's/^/    /' "$err"
echo "  stdout:"
head -5 "$out" | sed 's/^/    /'
exit 1
