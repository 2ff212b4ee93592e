# shellcheck shell=bash
# Shared functions for rdmx's scripts (setup, test, bench, demo). Source it:
#   . "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# It sets RDMX_ROOT (the repository root) and changes nothing else.

RDMX_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export RDMX_ROOT

# Debian 12 packages rdmx needs to build, test and launch jobs.
RDMX_PACKAGES=(
  build-essential cmake pkg-config git
  libucx-dev ucx-utils
  openmpi-bin libopenmpi-dev libpmix-dev
  munge slurmctld slurmd slurm-client
  iproute2 gdb
  libnuma-dev libhwloc-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  clang libclang-rt-14-dev
  libcereal-dev libboost-serialization-dev libmsgpack-cxx-dev
  libsnappy-dev
  python3 python3-matplotlib
)

rdmx_log() { printf '== %s\n' "$*"; }
rdmx_warn() { printf 'warning: %s\n' "$*" >&2; }
rdmx_die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# Build parallelism: RDMX_JOBS, else the number of online CPUs.
rdmx_jobs() {
  if [ -n "${RDMX_JOBS:-}" ]; then
    printf '%s\n' "$RDMX_JOBS"
  else
    nproc 2>/dev/null || echo 2
  fi
}

# rdmx_missing_packages: print the packages of RDMX_PACKAGES not installed.
rdmx_missing_packages() {
  local p status
  for p in "${RDMX_PACKAGES[@]}"; do
    status="$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)"
    [ "$status" = "install ok installed" ] || printf '%s\n' "$p"
  done
}

# rdmx_install_packages: apt-get install whatever is missing; a no-op (one
# dpkg-query per package) when everything is already there. Run as root it
# installs directly (a container often has no sudo); run as a user it asks
# sudo, which prompts for a password if it needs one. Only the install step
# is privileged: the build stays the user's.
rdmx_install_packages() {
  if ! command -v dpkg-query >/dev/null 2>&1; then
    rdmx_warn "no dpkg-query: not a Debian system; install the equivalent of: ${RDMX_PACKAGES[*]}"
    return 0
  fi
  local missing
  mapfile -t missing < <(rdmx_missing_packages)
  if [ "${#missing[@]}" -eq 0 ]; then
    rdmx_log "installing packages: all ${#RDMX_PACKAGES[@]} already installed"
    return 0
  fi
  rdmx_log "installing packages: ${missing[*]}"
  local sudo=()
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 \
      || rdmx_die "missing packages (${missing[*]}) and no sudo: run 'bash $0' as root"
    sudo=(sudo)
  fi
  local apt_opts=(-y -q -o DPkg::Lock::Timeout=300 -o Dpkg::Use-Pty=0)
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" update </dev/null \
    || rdmx_die "apt-get update failed"
  # --no-install-recommends: the only recommendation that matters here would
  # be libcoarrays-openmpi-dev (Fortran coarrays), which rdmx does not use.
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" \
    install --no-install-recommends "${RDMX_PACKAGES[@]}" </dev/null \
    || rdmx_die "apt-get install failed"
  mapfile -t missing < <(rdmx_missing_packages)
  [ "${#missing[@]}" -eq 0 ] || rdmx_die "still missing after apt-get install: ${missing[*]}"
}

# rdmx_configure DIR [cmake -D options...]: configure RDMX_ROOT into DIR
# (build type RDMX_BUILD_TYPE, default RelWithDebInfo).
rdmx_configure() {
  local dir="$1"; shift
  cmake -S "$RDMX_ROOT" -B "$dir" -DCMAKE_BUILD_TYPE="${RDMX_BUILD_TYPE:-RelWithDebInfo}" "$@" </dev/null
}

# rdmx_build DIR [cmake -D options...]: configure RDMX_ROOT into DIR and build
# it with $(rdmx_jobs) parallel jobs. Returns 1 if configuring failed, 2 if
# building failed.
rdmx_build() {
  local dir="$1"; shift
  rdmx_configure "$dir" "$@" || return 1
  cmake --build "$dir" --parallel "$(rdmx_jobs)" </dev/null || return 2
}

# rdmx_ensure_build: build build/ (default options) if it was never configured.
# Its output goes to stderr: callers' stdout may be a results file.
rdmx_ensure_build() {
  if [ ! -f "$RDMX_ROOT/build/CMakeCache.txt" ]; then
    rdmx_log "building (build/ not found)" >&2
    rdmx_build "$RDMX_ROOT/build" >&2 || rdmx_die "build failed"
  fi
}

# rdmx_elapsed START: seconds since START (from $SECONDS) as "Xm Ys".
rdmx_elapsed() {
  local s=$((SECONDS - $1))
  printf '%dm%02ds' $((s / 60)) $((s % 60))
}

# rdmx_usage: print the calling script's header comment (its help text).
rdmx_usage() {
  awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"
}
