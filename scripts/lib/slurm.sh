# shellcheck shell=bash
# A one-node Slurm cluster (scripts/slurm): its configuration and the steps
# that bring its daemons up and down. Source lib/common.sh first. Every step
# is idempotent.

# The status that means "cannot run here" (no root, no packages): ctest's SKIP_RETURN_CODE.
RDMX_SLURM_SKIP=77
RDMX_SLURM_DIR="${RDMX_SLURM_DIR:-/tmp/rdmx-slurm}"
# Debian 12's packages: the daemons, srun, and munge (Slurm's only
# authentication between daemons and commands). slurmd brings
# slurm-wlm-basic-plugins, which has the pmix (v4) and pmi2 MPI plugins.
RDMX_SLURM_PACKAGES=(munge slurmctld slurmd slurm-client)
# The node: this machine under its own name, at loopback.
RDMX_SLURM_NODE="$(hostname -s 2>/dev/null || echo localhost)"
# CPUs the node claims (SlurmdParameters=config_overrides lets it claim more
# than it has): the most processes `run` starts.
RDMX_SLURM_CPUS=64
# Ports away from Slurm's defaults (6817, 6818), so that a real Slurm on
# the machine is left alone.
RDMX_SLURM_CTLD_PORT="${RDMX_SLURM_CTLD_PORT:-16817}"
RDMX_SLURM_SLURMD_PORT="${RDMX_SLURM_SLURMD_PORT:-16818}"

rdmx_slurm_require_root() {
  if [ "$(id -u)" != 0 ]; then
    echo "scripts/slurm: needs root (the Slurm daemons run as root); skipped" >&2
    exit "$RDMX_SLURM_SKIP"
  fi
}

# The Debian packages, installed if missing; without them (not Debian, or
# the archive unreachable) the skip status.
rdmx_slurm_packages() {
  local p missing=()
  for p in "${RDMX_SLURM_PACKAGES[@]}"; do
    [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" = "install ok installed" ] || missing+=("$p")
  done
  [ "${#missing[@]}" -gt 0 ] || return 0
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "scripts/slurm: missing packages (${missing[*]}) and no apt-get; skipped" >&2
    exit "$RDMX_SLURM_SKIP"
  fi
  rdmx_log "installing packages: ${missing[*]}"
  local apt_opts=(-y -q -o DPkg::Lock::Timeout=300 -o Dpkg::Use-Pty=0)
  if ! { DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" update \
         && DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install --no-install-recommends "${missing[@]}"; } \
       </dev/null >"${TMPDIR:-/tmp}/rdmx-slurm-apt.log" 2>&1; then
    echo "scripts/slurm: cannot install ${missing[*]} (${TMPDIR:-/tmp}/rdmx-slurm-apt.log); skipped" >&2
    exit "$RDMX_SLURM_SKIP"
  fi
}

rdmx_slurm_pid() {
  local file="$RDMX_SLURM_DIR/$1.pid" pid
  [ -f "$file" ] || return 1
  pid="$(cat "$file" 2>/dev/null)"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  printf '%s\n' "$pid"
}

# Whether the daemon NAME that `up` started still runs (its pid file names a
# live process of that name; not some other process that reused the pid).
rdmx_slurm_running() {
  local pid
  pid="$(rdmx_slurm_pid "$1")" || return 1
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$1" ]
}

# Stop the daemons NAME...: SIGTERM to all at once (each takes a second or
# more to shut down), then SIGKILL to any that has not left in 10 s.
# Watches the pids, not the pid files, which a daemon removes before it has
# finished shutting down.
rdmx_slurm_stop() {
  local name pid i pids=() names=()
  for name in "$@"; do
    if rdmx_slurm_running "$name"; then
      pid="$(rdmx_slurm_pid "$name")"
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid")
      names+=("$name")
    fi
  done
  for ((i = 0; i < 100; ++i)); do
    local alive=0 k
    for k in "${!pids[@]}"; do
      [ "$(cat "/proc/${pids[k]}/comm" 2>/dev/null)" != "${names[k]}" ] || alive=1
    done
    [ "$alive" = 1 ] || break
    sleep 0.1
  done
  for k in "${!pids[@]}"; do
    [ "$(cat "/proc/${pids[k]}/comm" 2>/dev/null)" != "${names[k]}" ] || kill -KILL "${pids[k]}" 2>/dev/null || true
  done
  for name in "$@"; do rm -f "$RDMX_SLURM_DIR/$name.pid"; done
}

# Cancel every job of the cluster and wait (10 s at most) for them to end:
# their slurmstepd processes outlive slurmd.
rdmx_slurm_cancel_jobs() {
  rdmx_slurm_running slurmctld || return 0
  local conf="$RDMX_SLURM_DIR/slurm.conf" jobs i
  jobs="$(SLURM_CONF="$conf" squeue -h -o '%i' 2>/dev/null || true)"
  [ -n "$jobs" ] || return 0
  # shellcheck disable=SC2086 # one job id per word
  SLURM_CONF="$conf" scancel $jobs 2>/dev/null || true
  for ((i = 0; i < 100; ++i)); do
    [ -z "$(SLURM_CONF="$conf" squeue -h -o '%i' 2>/dev/null || true)" ] && return 0
    sleep 0.1
  done
  rdmx_warn "slurm down: jobs still running after 10 s: $jobs"
}

# munged with a key of its own and its socket in RDMX_SLURM_DIR: the
# machine's munge (if any) is not touched.
rdmx_slurm_munge_up() {
  local d="$RDMX_SLURM_DIR"
  rdmx_slurm_running munged && return 0
  if [ ! -s "$d/munge.key" ]; then
    (umask 077; dd if=/dev/urandom of="$d/munge.key" bs=1024 count=1 status=none)
  fi
  # --force: munged refuses a socket directory outside /run/munge unless told.
  munged --force --socket="$d/munge.socket" --key-file="$d/munge.key" --pid-file="$d/munged.pid" \
    --log-file="$d/munged.log" --seed-file="$d/munged.seed" \
    || rdmx_die "slurm up: munged did not start ($d/munged.log)"
  local i
  for ((i = 0; i < 100; ++i)); do
    [ -S "$d/munge.socket" ] && return 0
    sleep 0.1
  done
  rdmx_die "slurm up: munged made no socket in 10 s ($d/munged.log)"
}

rdmx_slurm_conf() {
  local d="$RDMX_SLURM_DIR"
  mkdir -p "$d/state" "$d/spool" "$d/tmp"
  cat >"$d/slurm.conf" <<EOF
# Written by scripts/slurm up; removed by scripts/slurm down.
ClusterName=rdmx
SlurmctldHost=$RDMX_SLURM_NODE(127.0.0.1)
SlurmctldPort=$RDMX_SLURM_CTLD_PORT
SlurmdPort=$RDMX_SLURM_SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$d/munge.socket
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool
TmpFS=$d/tmp
SlurmctldPidFile=$d/slurmctld.pid
SlurmdPidFile=$d/slurmd.pid
SlurmctldLogFile=$d/slurmctld.log
SlurmdLogFile=$d/slurmd.log
# No cgroups: a container seldom lets slurmd manage them, and rdmx's
# processes place their own threads.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
# Quick to notice a node or step that died, so a test does not wait long.
SlurmdTimeout=30
KillWait=5
NodeName=$RDMX_SLURM_NODE NodeAddr=127.0.0.1 CPUs=$RDMX_SLURM_CPUS State=UNKNOWN
PartitionName=rdmx Nodes=$RDMX_SLURM_NODE Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
}

rdmx_slurm_daemons_up() {
  local d="$RDMX_SLURM_DIR"
  if ! rdmx_slurm_running slurmctld; then
    # -i: ignore state left by a cluster that was not taken down.
    slurmctld -i -f "$d/slurm.conf" || rdmx_die "slurm up: slurmctld did not start ($d/slurmctld.log)"
  fi
  if ! rdmx_slurm_running slurmd; then
    slurmd -f "$d/slurm.conf" -N "$RDMX_SLURM_NODE" || rdmx_die "slurm up: slurmd did not start ($d/slurmd.log)"
  fi
}

# The node idle (registered and schedulable) within 30 s.
rdmx_slurm_wait_idle() {
  local i state=""
  for ((i = 0; i < 150; ++i)); do
    state="$(SLURM_CONF="$RDMX_SLURM_DIR/slurm.conf" sinfo -h -N -n "$RDMX_SLURM_NODE" -o '%T' 2>/dev/null || true)"
    case "$state" in idle*|mixed*|allocated*) return 0 ;; esac
    sleep 0.2
  done
  rdmx_die "slurm up: node $RDMX_SLURM_NODE is '${state:-unknown}', not idle, after 30 s ($RDMX_SLURM_DIR/*.log)"
}
