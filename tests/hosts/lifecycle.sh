#!/usr/bin/env bash
# scripts/hosts' own behaviour.
#   lifecycle.sh HOSTS_SCRIPT up            up and down are idempotent, down leaves nothing
#                                          and keeps every other /etc/hosts line; ends with 3 up
#   lifecycle.sh HOSTS_SCRIPT down          down, and nothing is left
#   lifecycle.sh HOSTS_SCRIPT unprivileged  without root, or as root without CAP_NET_ADMIN:
#                                          a clear message and status 77
# Exit status 77 (skipped) without root, except for `unprivileged`.
set -uo pipefail
hosts="$1" what="$2"
fail() { echo "hosts $what: FAILED: $*"; exit 1; }

# Prints what scripts/hosts made that still exists; nothing when clean.
leftovers() {
  ip netns list | awk '$1 ~ /^rdmx-h[0-9]+$/ { print "namespace " $1 }'
  ip -o link show | awk -F': ' '$2 ~ /^rdmx-(br0|v[0-9]+)(@|$)/ { print "link " $2 }'
  grep -F '# rdmx-hosts' /etc/hosts | sed 's/^/hosts line: /'
}
expect_clean() {
  local left
  left="$(leftovers)"
  [ -z "$left" ] || fail "left behind $1: $left"
}
run() { "$hosts" "$@" || fail "scripts/hosts $* exited with $?"; }

if [ "$what" = unprivileged ]; then
  # As root, drop to nobody for the check; as anyone else, check directly.
  as=()
  [ "$(id -u)" != 0 ] || as=(setpriv --reuid=65534 --regid=65534 --clear-groups)
  out="$("${as[@]}" "$hosts" up 1 2>&1)"
  status=$?
  [ "$status" = 77 ] || fail "exit status $status, not 77 (output: $out)"
  [[ "$out" == *"needs root"* ]] || fail "no clear message: $out"
  if [ "$(id -u)" = 0 ]; then
    # Root in a container without the capabilities namespaces need.
    out="$(setpriv --inh-caps=-net_admin --bounding-set=-net_admin "$hosts" up 1 2>&1)"
    status=$?
    [ "$status" = 77 ] || fail "without CAP_NET_ADMIN: exit status $status, not 77 (output: $out)"
    [[ "$out" == *"CAP_NET_ADMIN"* ]] || fail "without CAP_NET_ADMIN: no clear message: $out"
  fi
  echo "needs root: ok ($out)"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "hosts $what: needs root; skipped"
  exit 77
fi

case "$what" in
  up)
    run down
    expect_clean "by a first down"
    before="$(cat /etc/hosts)"
    run up 2
    run up 2
    [ "$("$hosts" status | grep -c ' link UP$')" = 2 ] || fail "status after up 2: $("$hosts" status)"
    [ "$(grep -c '# rdmx-hosts$' /etc/hosts)" = 2 ] || fail "not 2 /etc/hosts lines after up 2 twice"
    getent hosts rdmx-h1 | grep -q '^10\.213\.0\.11 ' || fail "rdmx-h1 does not resolve to 10.213.0.11"
    # A host reaches another over the bridge, and nothing outside it.
    out="$(ip netns exec rdmx-h0 bash -c 'exec 3<>/dev/tcp/10.213.0.11/1' 2>&1)"
    [[ "$out" == *"Connection refused"* ]] || fail "rdmx-h0 cannot reach rdmx-h1 (a refused connection was expected): $out"
    out="$(ip netns exec rdmx-h0 bash -c 'exec 3<>/dev/tcp/192.0.2.1/1' 2>&1)"
    [[ "$out" == *"Network is unreachable"* ]] || fail "rdmx-h0 reaches beyond the bridge: $out"
    run up 1
    [ "$("$hosts" status)" = "rdmx-h0 10.213.0.10 link UP" ] || fail "status after up 1: $("$hosts" status)"
    run down
    run down
    expect_clean "by down"
    "$hosts" status >/dev/null && fail "status says hosts are up after down"
    [ "$(cat /etc/hosts)" = "$before" ] || fail "down changed other /etc/hosts lines"
    run up 3
    echo "hosts up: ok"
    ;;
  down)
    run down
    expect_clean "by down"
    echo "hosts down: ok"
    ;;
  *) echo "usage: $0 HOSTS_SCRIPT up|down|unprivileged" >&2; exit 2 ;;
esac
