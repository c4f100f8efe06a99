# Sourced by the tests that run a Python reference (tests/reference/*_ref.py): sets py to the
# first of the interpreters given (meson's llm_pythons; python3 when none) that imports numpy,
# and says which; without one the test skips (77) and says why, a skip CI's summary counts as
# a failure (CI installs python3-numpy).
py=
for cand in "${@:-python3}"; do
    if "$cand" -c 'import numpy' 2>/dev/null; then py=$cand; break; fi
done
[ -n "$py" ] || { echo "SKIP: no Python with numpy among: ${*:-python3} (CI installs python3-numpy)"; exit 77; }
echo "reference interpreter: $py"
