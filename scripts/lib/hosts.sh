# shellcheck shell=bash
# Namespace hosts (scripts/hosts): names, addresses and the steps that bring
# them up and down. Source lib/common.sh first. Every step is idempotent.

# The status that means "cannot run here" (no root): ctest's SKIP_RETURN_CODE.
RDMX_HOSTS_SKIP=77
# A private /24 unlikely to clash with a real network.
RDMX_HOSTS_NET=10.213.0
RDMX_HOSTS_BRIDGE=rdmx-br0
# Hosts take addresses .10 upwards in one /24.
# shellcheck disable=SC2034 # used by scripts/hosts
RDMX_HOSTS_MAX=200
# Marks the /etc/hosts lines this script wrote, so that down removes only those.
RDMX_HOSTS_MARK="# rdmx-hosts"

rdmx_hosts_name() { printf 'rdmx-h%s\n' "$1"; }
rdmx_hosts_addr() { printf '%s.%s\n' "$RDMX_HOSTS_NET" $((10 + $1)); }
# The root namespace's end of host K's veth pair (on the bridge).
rdmx_hosts_veth() { printf 'rdmx-v%s\n' "$1"; }
rdmx_hosts_names() {
  local k out=()
  for ((k = 0; k < $1; ++k)); do out+=("$(rdmx_hosts_name "$k")"); done
  printf '%s\n' "${out[*]}"
}

# Root, and root allowed to make namespaces and links: a container may run
# as root without CAP_NET_ADMIN (12) or CAP_SYS_ADMIN (21).
rdmx_hosts_require_root() {
  if [ "$(id -u)" != 0 ]; then
    echo "scripts/hosts: needs root (network namespaces, links, /etc/hosts); skipped" >&2
    exit "$RDMX_HOSTS_SKIP"
  fi
  local caps
  caps="$(awk '/^CapEff:/ { print $2 }' /proc/self/status 2>/dev/null)"
  if [ -n "$caps" ] && (((0x$caps >> 12 & 1) == 0 || (0x$caps >> 21 & 1) == 0)); then
    echo "scripts/hosts: root here lacks CAP_NET_ADMIN or CAP_SYS_ADMIN (a restricted container); skipped" >&2
    exit "$RDMX_HOSTS_SKIP"
  fi
  command -v ip >/dev/null 2>&1 || rdmx_die "scripts/hosts: no 'ip' command (install iproute2: scripts/setup does)"
}

# The numbers K of the namespaces rdmx-hK that exist, ascending.
rdmx_hosts_list() {
  ip netns list 2>/dev/null | awk '{ print $1 }' | sed -n 's/^rdmx-h\([0-9][0-9]*\)$/\1/p' | sort -n
}

rdmx_hosts_link_state() {
  local state
  state="$(ip -o link show "$(rdmx_hosts_veth "$1")" 2>/dev/null | sed -n 's/.*state \([A-Z]*\).*/\1/p')"
  printf '%s\n' "${state:-missing}"
}

rdmx_hosts_bridge_up() {
  local br="$RDMX_HOSTS_BRIDGE" addr="$RDMX_HOSTS_NET.1/24"
  ip link show "$br" >/dev/null 2>&1 || ip link add "$br" type bridge
  [[ "$(ip addr show dev "$br")" == *"inet $addr "* ]] || ip addr add "$addr" dev "$br"
  ip link set "$br" up
}

rdmx_hosts_bridge_down() {
  ! ip link show "$RDMX_HOSTS_BRIDGE" >/dev/null 2>&1 || ip link del "$RDMX_HOSTS_BRIDGE"
}

rdmx_hosts_host_up() {
  local k="$1" ns veth addr
  ns="$(rdmx_hosts_name "$k")" veth="$(rdmx_hosts_veth "$k")" addr="$(rdmx_hosts_addr "$k")"
  ip netns pids "$ns" >/dev/null 2>&1 || ip netns add "$ns"
  ip link show "$veth" >/dev/null 2>&1 || ip link add "$veth" type veth peer name eth0 netns "$ns"
  ip link set "$veth" master "$RDMX_HOSTS_BRIDGE"
  ip link set "$veth" up
  # Not `| grep -q`: grep leaving early fails the pipeline (pipefail).
  [[ "$(ip -n "$ns" addr show dev eth0)" == *"inet $addr/"* ]] || ip -n "$ns" addr add "$addr/24" dev eth0
  ip -n "$ns" link set eth0 up
  # No default route: a host reaches the subnet and nothing beyond it.
  ip -n "$ns" link set lo up
  rdmx_hosts_etc_hosts_set "$addr" "$ns"
}

# Ends whatever still runs in host K (a job's leftovers), then removes it.
rdmx_hosts_host_down() {
  local k="$1" ns veth pids
  ns="$(rdmx_hosts_name "$k")" veth="$(rdmx_hosts_veth "$k")"
  pids="$(ip netns pids "$ns" 2>/dev/null || true)"
  # shellcheck disable=SC2086 # one pid a word
  [ -z "$pids" ] || kill -9 $pids 2>/dev/null || true
  ! ip link show "$veth" >/dev/null 2>&1 || ip link del "$veth"
  ! ip netns pids "$ns" >/dev/null 2>&1 || ip netns del "$ns"
  rdmx_hosts_etc_hosts_remove "$ns"
}

# /etc/hosts is rewritten in place (cat >), not replaced: in a container it
# is often a bind mount that cannot be renamed over.
rdmx_hosts_etc_hosts_set() {
  local addr="$1" name="$2" line
  line="$addr $name $RDMX_HOSTS_MARK"
  grep -qxF "$line" /etc/hosts && return 0
  rdmx_hosts_etc_hosts_remove "$name"
  printf '%s\n' "$line" >>/etc/hosts
}

rdmx_hosts_etc_hosts_remove() {
  grep -qE "[[:space:]]$1 $RDMX_HOSTS_MARK\$" /etc/hosts || return 0
  local kept
  kept="$(grep -vE "[[:space:]]$1 $RDMX_HOSTS_MARK\$" /etc/hosts || true)"
  printf '%s\n' "$kept" >/etc/hosts
}

rdmx_hosts_etc_hosts_clear() {
  grep -qF "$RDMX_HOSTS_MARK" /etc/hosts || return 0
  local kept
  kept="$(grep -vF " $RDMX_HOSTS_MARK" /etc/hosts || true)"
  printf '%s\n' "$kept" >/etc/hosts
}
