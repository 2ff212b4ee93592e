#!/usr/bin/env bash
# Runs the fault-injection stress RUNS times with fresh seeds, each bounded
# in time, and checks each run's records:  stress.sh RUN TLS RUNS PROGRAM
set -u
run="$1" tls="$2" runs="$3" program="$4"
for i in $(seq "$runs"); do
  dir="$(mktemp -d)"
  seed=$(( $(date +%s%N) % 1000000007 ))
  echo "stress: run $i of $runs over $tls, seed $seed"
  # mpirun reports the killed process; what counts is the survivors' records.
  timeout -k 10 150 "$run" --tls "$tls" -np 3 --enable-recovery "$program" run "$dir" "$seed" --rdmx-threads=2
  rc=$?
  [ "$rc" = 124 ] || [ "$rc" = 137 ] && { echo "stress: FAILED: run $i (seed $seed) did not end within 150 s"; rm -rf "$dir"; exit 1; }
  "$program" check "$dir" || { echo "stress: FAILED: run $i (seed $seed)"; rm -rf "$dir"; exit 1; }
  rm -rf "$dir"
done
echo "stress: all $runs runs ok"
