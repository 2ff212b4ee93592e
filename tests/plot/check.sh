#!/usr/bin/env bash
# scripts/plot against the committed sample of results (tests/plot/sample:
# a few lines of each benchmark, from a real run, and its machine.json):
#   - every figure `scripts/plot --list` names is drawn, as SVG and PNG,
#     and names the machine;
#   - without one benchmark's results, its figure is skipped with one line
#     naming the benchmark to run, and the others are still drawn;
#   - an empty folder draws nothing and is no error.
#   tests/plot/check.sh PLOT SAMPLE WORK
# Exits 77 (skipped) when /usr/bin/python3 has no matplotlib.
set -uo pipefail
plot="$1" sample="$2" work="$3"
if ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  echo "SKIP: /usr/bin/python3 has no matplotlib (Debian: python3-matplotlib; scripts/setup installs it)"
  exit 77
fi
status=0
fail() { echo "FAIL: $*"; status=1; }
rm -rf "$work"
mkdir -p "$work"

mapfile -t figures < <("$plot" --list | awk '{print $1}')
[ "${#figures[@]}" -gt 0 ] || fail "scripts/plot --list names no figure"

"$plot" --out "$work/all" "$sample" > "$work/all.log" 2>&1 || fail "scripts/plot exited with $? on the sample"
cat "$work/all.log"
grep -q ": skipped, " "$work/all.log" && fail "a figure was skipped although the sample has its results"
for f in "${figures[@]}"; do
  svg="$work/all/$f.svg" png="$work/all/$f.png"
  if ! { [ -s "$svg" ] && grep -q "<svg" "$svg"; }; then
    fail "$f.svg was not drawn"
    continue
  fi
  [ "$(head -c 4 "$png" 2>/dev/null | tail -c 3)" = PNG ] || fail "$f.png was not drawn"
  if ! { grep -q "Open MPI" "$svg" && grep -q "results: " "$svg"; }; then
    fail "$f.svg does not name its machine and results"
  fi
done

# The same results less npb's.
mkdir "$work/partial"
for file in "$sample"/*; do
  case "$(basename "$file")" in npb*) ;; *) cp "$file" "$work/partial/" ;; esac
done
"$plot" "$work/partial" > "$work/partial.log" 2>&1 || fail "scripts/plot exited with $? without the npb results"
grep -qx "scripts/plot: npb: skipped, no npb results: run scripts/bench npb" "$work/partial.log" ||
  fail "the npb figure was not skipped with a line saying to run scripts/bench npb"
[ ! -e "$work/partial/figures/npb.svg" ] || fail "npb.svg drawn without npb results"
[ -s "$work/partial/figures/transfer.svg" ] || fail "transfer.svg not drawn without the npb results"

# Nothing at all.
mkdir "$work/empty"
"$plot" "$work/empty" > "$work/empty.log" 2>&1 || fail "scripts/plot exited with $? on an empty folder"
[ "$(grep -c ': skipped, .*run scripts/bench ' "$work/empty.log")" = "${#figures[@]}" ] ||
  fail "an empty folder did not skip every figure with a line naming a benchmark"
[ ! -e "$work/empty/figures" ] || fail "figures drawn from an empty folder"
exit "$status"
