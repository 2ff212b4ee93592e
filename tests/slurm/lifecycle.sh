#!/usr/bin/env bash
# scripts/slurm's own behaviour.
#   lifecycle.sh SLURM_SCRIPT up            up and down are idempotent, down leaves nothing; ends up
#   lifecycle.sh SLURM_SCRIPT down          down, and nothing is left
#   lifecycle.sh SLURM_SCRIPT unprivileged  without root: a clear message and status 77
# Exit status 77 (skipped) without root, or without the packages, except for `unprivileged`.
set -uo pipefail
slurm="$1" what="$2"
dir="${RDMX_SLURM_DIR:-/tmp/rdmx-slurm}"
fail() { echo "slurm $what: FAILED: $*"; exit 1; }

# Prints what scripts/slurm made that still exists; nothing when clean.
# (Daemons matched by their configuration file, so a real Slurm on the
# machine is not counted.)
leftovers() {
  [ ! -e "$dir" ] || echo "directory $dir"
  pgrep -a -f -- "$dir/" || true
}
expect_clean() {
  local left
  left="$(leftovers)"
  [ -z "$left" ] || fail "left behind $1: $left"
}
run() {
  "$slurm" "$@"
  local status=$?
  [ "$status" != 77 ] || { echo "slurm $what: skipped (scripts/slurm $* exited with 77)"; exit 77; }
  [ "$status" = 0 ] || fail "scripts/slurm $* exited with $status"
}

if [ "$what" = unprivileged ]; then
  as=()
  [ "$(id -u)" != 0 ] || as=(setpriv --reuid=65534 --regid=65534 --clear-groups)
  out="$("${as[@]}" "$slurm" up 2>&1)"
  status=$?
  [ "$status" = 77 ] || fail "exit status $status, not 77 (output: $out)"
  [[ "$out" == *"needs root"* ]] || fail "no clear message: $out"
  echo "needs root: ok ($out)"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "slurm $what: needs root; skipped"
  exit 77
fi

case "$what" in
  up)
    run down
    expect_clean "by a first down"
    run up
    run up
    "$slurm" status | grep -q ' idle ' || fail "status after up: $("$slurm" status)"
    out="$("$slurm" run -n 2 -- hostname 2>&1)" || fail "a 2-task step failed: $out"
    [ "$(grep -c . <<<"$out")" = 2 ] || fail "a 2-task step printed: $out"
    # A task that fails fails the run; a count out of range is refused before srun.
    "$slurm" run -n 2 -- false >/dev/null 2>&1 && fail "a step whose tasks fail exited with 0"
    for n in 0 65 x; do
      out="$("$slurm" run -n "$n" -- true 2>&1)" && fail "run -n $n exited with 0"
      [[ "$out" == *"-n must be 1 to 64"* ]] || fail "run -n $n: no clear message: $out"
    done
    run down
    run down
    expect_clean "by down"
    "$slurm" status >/dev/null && fail "status says slurm is up after down"
    run up
    echo "slurm up: ok"
    ;;
  down)
    run down
    expect_clean "by down"
    echo "slurm down: ok"
    ;;
  *) echo "usage: $0 SLURM_SCRIPT up|down|unprivileged" >&2; exit 2 ;;
esac
