#!/usr/bin/env bash
# A job in which a process kills itself: mpirun's own exit status then says
# nothing about the survivors, so each survivor prints a line matching
# PATTERN when it finishes correctly, and this checks that COUNT of them did
# (a survivor that crashed or hung prints none).
#   survivors.sh COUNT PATTERN RUN [launcher args...]
set -u
count="$1" pattern="$2"
shift 2
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
"$@" 2>&1 | tee "$out"
got="$(grep -c -- "$pattern" "$out")"
if [ "$got" != "$count" ] || grep -q FAILED "$out"; then
  echo "survivors: FAILED: $got of $count survivors finished correctly"
  exit 1
fi
echo "survivors: ok, $count survivors finished correctly"
