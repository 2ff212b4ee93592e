#!/usr/bin/env bash
# Between namespace hosts, UCX carries rdmx's traffic over TCP on the hosts'
# own interfaces, and within one host over shared memory: while rdmx-hex runs
# as 2 hosts x 2 processes, its processes in rdmx-h0 hold TCP connections to
# rdmx-h1's address and none to their own, and the search ends normally.
# (Shared memory leaves no connection to see.)
#   transports.sh HOSTS_SCRIPT RDMX_HEX
# Exit status 77 (skipped) without root. Expects `scripts/hosts up 2` or more.
set -uo pipefail
hosts="$1" hex="$2"
if [ "$(id -u)" != 0 ]; then
  echo "transports: needs root (network namespaces); skipped"
  exit 77
fi
out="$(mktemp)"
job=""
finish() {
  [ -z "$job" ] || { kill -TERM "$job" 2>/dev/null; wait "$job" 2>/dev/null; }
  rm -f "$out"
}
trap finish EXIT
fail() { echo "transports: FAILED: $*"; echo "--- job output:"; cat "$out"; exit 1; }

"$hosts" run --hosts 2 --per-host 2 -- "$hex" --size 7 --seconds 4 --quiet >"$out" 2>&1 &
job=$!
# Connections in rdmx-h0 (10.213.0.10) to address $1 that belong to
# rdmx-hex's processes.
connections() {
  local line pid n=0
  while read -r line; do
    pid="$(sed -n 's/.*pid=\([0-9]*\).*/\1/p' <<<"$line")"
    [ -n "$pid" ] && [ "$(readlink "/proc/$pid/exe")" = "$(readlink -f "$hex")" ] && n=$((n + 1))
  done < <(ip netns exec rdmx-h0 ss -Htnp state established src 10.213.0.10 dst "$1" 2>/dev/null)
  echo "$n"
}
seen=0 inside=0
until=$((SECONDS + 60))
while kill -0 "$job" 2>/dev/null && [ "$SECONDS" -lt "$until" ]; do
  seen="$(connections 10.213.0.11)"
  [ "$seen" -gt 0 ] && break
  sleep 0.2
done
[ "$seen" -gt 0 ] || fail "no TCP connection from rdmx-hex in rdmx-h0 to rdmx-h1 (10.213.0.11)"
# The search runs for seconds more: look for connections within the host meanwhile.
for _ in 1 2 3 4 5; do
  inside=$((inside + $(connections 10.213.0.10)))
  sleep 0.2
done
[ "$inside" = 0 ] || fail "rdmx-hex's processes in rdmx-h0 talk to each other over TCP ($inside connections seen), not shared memory"
wait "$job"
status=$?
job=""
[ "$status" = 0 ] || fail "rdmx-hex exited with $status"
grep -qE 'plays [a-g][1-7]: win rate' "$out" || fail "rdmx-hex did not play a move"
echo "transports: ok, $seen TCP connections from rdmx-h0 to rdmx-h1 and none within rdmx-h0 while rdmx-hex searched"
