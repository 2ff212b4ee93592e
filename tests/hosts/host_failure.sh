#!/usr/bin/env bash
# Runs host_failure_test across 3 namespace hosts x 2 processes and takes the
# last host down once the survivors are calling it: `kill` SIGKILLs every
# process in its namespace (its ranks and Open MPI's daemon), `cut` sets its
# link down from the root namespace. Passes when all 4 survivors report the
# loss and leave the job; a survivor still waiting after the deadline is a
# hang, and its threads' backtraces are printed.
#   host_failure.sh kill|cut HOSTS_SCRIPT PROGRAM
# Exit status 77 (skipped) without root. Expects `scripts/hosts up 3`.
#
# After a cut nothing tells the survivors: a call in flight towards the lost
# host fails when the kernel gives up retransmitting it, after
# net.ipv4.tcp_retries2 retries (15 by default: about 15 minutes). The cut
# test lowers it to 5 (about 13 s) in the survivors' hosts, as a cluster
# that wants lost hosts found quickly would; the victim keeps 15, so its
# Open MPI daemon outlives the test instead of giving up on mpirun, which
# would then end the whole job (docs/hosts.md).
set -uo pipefail
mode="$1" hosts="$2" program="$3"
case "$mode" in kill|cut) ;; *) echo "usage: $0 kill|cut HOSTS_SCRIPT PROGRAM" >&2; exit 2 ;; esac
if [ "$(id -u)" != 0 ]; then
  echo "host_failure: needs root (network namespaces); skipped"
  exit 77
fi
victim_ns=rdmx-h2 victim_link=rdmx-v2 survivors=4 survivor_ns=(rdmx-h0 rdmx-h1)
retries2=5
out="$(mktemp)"
job=""
declare -A saved_retries2=()
finish() {
  # Whatever happened, leave the hosts as they were: nothing of the job
  # running, the victim's link up. The hosts' processes go first, so that
  # mpirun, still there, reaps its daemons; then mpirun.
  local ns
  for ns in rdmx-h0 rdmx-h1 rdmx-h2; do
    # shellcheck disable=SC2046 # one pid a word
    kill -9 $(ip netns pids "$ns" 2>/dev/null) 2>/dev/null
  done
  ip link set "$victim_link" up 2>/dev/null
  for ns in "${!saved_retries2[@]}"; do
    ip netns exec "$ns" sysctl -q -w net.ipv4.tcp_retries2="${saved_retries2[$ns]}"
  done
  if [ -n "$job" ]; then
    kill -TERM "$job" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$job" 2>/dev/null
    wait "$job" 2>/dev/null
  fi
  rm -f "$out"
}
trap finish EXIT
fail() {
  echo "host_failure $mode: FAILED: $*"
  echo "--- job output:"
  cat "$out"
  exit 1
}
count() { grep -c -- "$1" "$out"; }
# The threads of the job's processes still running in the survivors' hosts.
backtraces() {
  local ns pid
  echo "--- after $((SECONDS - start)) s, still running:"
  for ns in rdmx-h0 rdmx-h1; do
    for pid in $(ip netns pids "$ns"); do
      echo "$ns: pid $pid: $(tr '\0' ' ' <"/proc/$pid/cmdline" | cut -c1-120)"
      [ "$(readlink "/proc/$pid/exe")" = "$(readlink -f "$program")" ] || continue
      gdb -p "$pid" -batch -ex "thread apply all bt" 2>/dev/null | grep -E '^(Thread|#)'
    done
  done
}
# wait_for PATTERN COUNT SECONDS: until COUNT lines match, FAILED shows, or the time is up.
wait_for() {
  local until=$((SECONDS + $3))
  while [ "$(count "$1")" -lt "$2" ]; do
    grep -q FAILED "$out" && return 1
    [ "$SECONDS" -lt "$until" ] || return 1
    kill -0 "$job" 2>/dev/null || { [ "$(count "$1")" -ge "$2" ]; return; }
    sleep 0.2
  done
}

ip netns pids "$victim_ns" >/dev/null 2>&1 || fail "host $victim_ns is not up (scripts/hosts up 3)"
if [ "$mode" = cut ]; then
  for ns in "${survivor_ns[@]}"; do
    saved_retries2[$ns]="$(ip netns exec "$ns" sysctl -n net.ipv4.tcp_retries2)"
    ip netns exec "$ns" sysctl -q -w net.ipv4.tcp_retries2=$retries2 || fail "cannot set tcp_retries2 in $ns"
  done
fi
# --enable-recovery: mpirun lets the survivors go on when processes die.
"$hosts" run --hosts 3 --per-host 2 --enable-recovery -- "$program" >"$out" 2>&1 &
job=$!
wait_for ": calling" "$survivors" 120 || fail "the survivors never started calling"
start=$SECONDS
down_at="$(date +%s%3N)"
case "$mode" in
  kill)
    # shellcheck disable=SC2046 # one pid a word
    kill -9 $(ip netns pids "$victim_ns") ;;
  cut) ip link set "$victim_link" down ;;
esac
echo "host_failure $mode: $victim_ns taken down"
if ! wait_for "survivor left the job" "$survivors" 150; then
  grep -q FAILED "$out" || backtraces
  fail "$(count "survivor left the job") of $survivors survivors reported the loss and left"
fi
# Every survivor has left. mpirun itself never ends after losing a daemon
# (Open MPI 4.1 waits for the lost host's processes to be reported): that
# is the launcher's bookkeeping, not the job's, so it is ended here.
cat "$out"
grep -q FAILED "$out" && fail "a process failed"
# The latest failure any survivor saw, from the moment the host went down.
last="$(sed -n 's/.* failed at \([0-9]*\), .*/\1/p' "$out" | sort -n | tail -1)"
[ -n "$last" ] || fail "no detection times were printed"
echo "host_failure $mode: every survivor saw every process of $victim_ns fail within $((last - down_at)) ms"
echo "host_failure $mode: ok, $survivors survivors saw $victim_ns lost and left"
