#!/usr/bin/env bash
# Orphans end themselves: start a job whose processes spin in a poll loop,
# kill its launcher with SIGKILL, and check that every process has ended
# within a bound (each notices that its launcher, its parent, is gone).
#   orphan.sh RUN TLS NP PROGRAM
set -u
run="$1" tls="$2" np="$3" program="$4"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
"$run" --tls "$tls" -np "$np" "$program" spin "$dir" &
launcher=$!
for _ in $(seq 600); do  # up to 60 s for the job to start on a busy machine
  [ "$(find "$dir" -type f | wc -l)" -ge "$np" ] && break
  sleep 0.1
done
pids=$(ls "$dir")
[ "$(echo "$pids" | wc -w)" -ge "$np" ] || { echo "orphan: FAILED: the job did not start"; kill -9 "$launcher"; exit 1; }
kill -9 "$launcher"
start=$SECONDS
for _ in $(seq 300); do  # the bound: 30 s
  alive=0
  for p in $pids; do kill -0 "$p" 2>/dev/null && alive=$((alive + 1)); done
  [ "$alive" = 0 ] && { echo "orphan: ok, every process ended $((SECONDS - start)) s after its launcher was killed"; exit 0; }
  sleep 0.1
done
echo "orphan: FAILED: $alive processes still running 30 s after the launcher was killed"
for p in $pids; do kill -9 "$p" 2>/dev/null; done
exit 1
