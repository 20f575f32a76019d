#!/usr/bin/env bash
# A private, real, one-node Slurm cluster on loopback, for tests of the sbatch scripts in deploy/slurm/.
#
#   slurm_test_cluster.sh install     install Debian's munge and Slurm packages when missing (idempotent:
#                                     no apt at all when everything is there); exit 77 when it cannot
#   slurm_test_cluster.sh up          start munged, slurmctld and slurmd in a new /tmp/braid-slurm.XXXXXX;
#                                     prints "SLURM_TEST_DIR=…" and "SLURM_CONF=…" lines to eval
#   slurm_test_cluster.sh down DIR    cancel what is left, stop the daemons by their recorded PIDs, remove DIR
#
# Everything lives in DIR: the munge key and socket, slurm.conf, state, spool, logs, and `pids`, one line
# per daemon. `down` signals only those PIDs, and only while /proc/PID/cmdline still names DIR, so it never
# touches another cluster or a system Slurm. The daemons run in the foreground of background jobs (-F, -D),
# so $! is the daemon itself. Settings: SLURM_TEST_CPUS (default: the machine's), SLURM_TEST_BASE (/tmp;
# keep it short: unix socket paths under it must fit in 107 bytes).
#
# Several nodes: with SLURM_TEST_NETNS=1, the nodes are the hosts of a running namespace cluster
# (scripts/netns_cluster.sh up; BRAID_CLUSTER_NAME picks which): slurmctld runs on its first host, one
# slurmd on every host (NodeName bhN, NodeAddr 198.18.0.N), munged in the machine's own namespaces (its
# socket is a file, which every host sees). DIR is then under /run (the hosts have a /tmp of their own),
# and clients (sbatch, srun, scontrol) must run on a host: `netns_cluster.sh exec bh1 sbatch ...`; DIR/hosts
# lists the nodes. The daemons' PIDs come from their pid files (they run under nsenter).
set -euo pipefail

readonly PACKAGES=(munge slurmctld slurmd slurm-client slurm-wlm-basic-plugins libpmix-dev)
readonly EXIT_SKIP=77
readonly START_TIMEOUT_S=20
readonly STOP_TIMEOUT_S=10
NETNS_CLUSTER="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/netns_cluster.sh"
readonly NETNS_CLUSTER
# The namespace cluster's hosts (SLURM_TEST_NETNS=1), read by `up` and `down`; empty for one node.
HOSTS=()
ADDRS=()

say() { echo "slurm_test_cluster: $*" >&2; }

missing_packages() {
  local p
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}

cmd_install() {
  command -v dpkg-query >/dev/null || { say "no dpkg-query: not a Debian system"; exit $EXIT_SKIP; }
  local missing=()
  mapfile -t missing < <(missing_packages)
  [ ${#missing[@]} -eq 0 ] && return 0
  [ "$(id -u)" -eq 0 ] || { say "needs root to install: ${missing[*]}"; exit $EXIT_SKIP; }
  command -v apt-get >/dev/null || { say "no apt-get to install: ${missing[*]}"; exit $EXIT_SKIP; }
  say "installing ${missing[*]}"
  # Debian's postinst scripts may try to start system daemons; policy-rc.d usually refuses, and they would
  # not clash anyway: this cluster has its own key, socket and ports.
  if ! DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null 2>&1 ||
     ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
    say "apt-get could not install: ${missing[*]}"
    exit $EXIT_SKIP
  fi
}

# A TCP port nobody listens on, from $1 upwards, other than $2.
free_port() {
  local p=$1
  while [ "$p" = "${2:-}" ] || [ -n "$(ss -Htln "sport = :$p" 2>/dev/null)" ]; do p=$((p + 1)); done
  echo "$p"
}

# Loopback only when the host name resolves to a loopback address: with NoInAddrAny the daemons bind to
# what the host name resolves to, whatever NodeAddr says.
loopback_params() {
  local addr
  addr=$(getent hosts "$1" | awk '{print $1; exit}')
  case "$addr" in
    127.*) echo "CommunicationParameters=NoCtldInAddrAny,NoInAddrAny" ;;
    *) say "host name '$1' resolves to '${addr:-nothing}', not loopback: the daemons listen on every address" ;;
  esac
}

# Runs a Slurm client where the cluster can be reached: on the first host of a namespace cluster, else here.
on_ctld_host() {
  if [ ${#HOSTS[@]} -gt 0 ]; then bash "$NETNS_CLUSTER" exec --cwd / "${HOSTS[0]}" "$@"; else "$@"; fi
}

# slurm.conf: one node on loopback, or (HOSTS set) the namespace cluster's hosts, each of whose name resolves
# to its own address there, so that NoInAddrAny binds every daemon to its host's 198.18.0.N; those get
# per-node spool, pid and log files (%n).
write_config() {
  local dir=$1 node=$2 cpus=$3 ctld_port=$4 slurmd_port=$5 ctld per_node="" i
  if [ ${#HOSTS[@]} -gt 0 ]; then
    ctld="${HOSTS[0]}(${ADDRS[0]})"
    per_node="-%n"
  else
    ctld="$node(127.0.0.1)"
  fi
  {
    cat <<EOF
# A test cluster written by scripts/slurm_test_cluster.sh; everything under $dir.
ClusterName=braidtest
SlurmctldHost=$ctld
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool${per_node:+/%n}
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd$per_node.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd$per_node.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups: the tracking and task plugins that need nothing from the machine.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
# Finished jobs stay visible to scontrol for the test's polling.
MinJobAge=600
EOF
    if [ ${#HOSTS[@]} -gt 0 ]; then
      echo "CommunicationParameters=NoCtldInAddrAny,NoInAddrAny"
      for i in "${!HOSTS[@]}"; do
        echo "NodeName=${HOSTS[$i]} NodeAddr=${ADDRS[$i]} CPUs=$cpus State=UNKNOWN"
      done
      echo "PartitionName=debug Nodes=$(IFS=,; echo "${HOSTS[*]}") Default=YES MaxTime=INFINITE State=UP"
    else
      loopback_params "$node"
      echo "NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN"
      echo "PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP"
    fi
  } >"$dir/slurm.conf"
}

# Starts "$@" in the background with its output in a log, and records its PID in $dir/pids.
start_daemon() {
  local dir=$1 name=$2
  shift 2
  "$@" </dev/null >"$dir/log/$name.out" 2>&1 &
  echo "$name $!" >>"$dir/pids"
}

# Waits until "$@" succeeds, at most $1 seconds.
wait_for() {
  local limit=$1
  shift
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.2
  done
}

# Every node idle.
node_idle() {
  local states
  states=$(on_ctld_host sinfo -h -N -o '%t') || return 1
  [ -n "$states" ] && [ -z "$(grep -vx idle <<<"$states")" ]
}

ctld_up() { on_ctld_host scontrol ping | grep -q UP; }

# Starts a daemon on host $3 of the namespace cluster and records the PID that its pid file $4 names
# (nsenter stays in between, so $! is not the daemon).
start_netns_daemon() {
  local dir=$1 name=$2 host=$3 pidfile=$4
  shift 4
  bash "$NETNS_CLUSTER" exec --cwd / "$host" "$@" </dev/null >"$dir/log/$name.out" 2>&1 &
  if ! wait_for $START_TIMEOUT_S test -s "$pidfile"; then
    say "$name on $host wrote no pid file $pidfile"
    return 1
  fi
  echo "$name $(cat "$pidfile")" >>"$dir/pids"
}

# slurmd initialises its cgroup plugin whatever the proctrack plugin, and a host's /sys is a sysfs of its
# own network namespace, without the machine's cgroup mounts: mount the same hierarchies there (idempotent;
# the mounts stay with the host's mount namespace until the cluster goes).
mirror_cgroup_mounts() {
  awk '$2 ~ "^/sys/fs/cgroup(/|$)" {print $3, $2, $4}' /proc/self/mounts |
    bash "$NETNS_CLUSTER" exec --cwd / "$1" sh -euc '
      while read -r type point opts; do
        mountpoint -q "$point" && continue
        mkdir -p "$point"
        mount -t "$type" -o "$opts" "$type" "$point"
      done'
}

# The namespace cluster's hosts and addresses; exit 77 when none is up.
read_netns_hosts() {
  local env BRAID_CLUSTER_HOSTS="" BRAID_CLUSTER_ADDRS=""
  env=$(bash "$NETNS_CLUSTER" env 2>/dev/null) || { say "SLURM_TEST_NETNS=1 but no namespace cluster is up"; exit $EXIT_SKIP; }
  eval "$env"
  read -r -a HOSTS <<<"$BRAID_CLUSTER_HOSTS"
  read -r -a ADDRS <<<"$BRAID_CLUSTER_ADDRS"
  [ ${#HOSTS[@]} -gt 0 ] && [ ${#HOSTS[@]} -eq ${#ADDRS[@]} ] || { say "cannot read the namespace cluster's hosts"; exit 1; }
}

cmd_up() {
  local base=${SLURM_TEST_BASE:-/tmp} node cpus dir ctld_port slurmd_port
  if [ "${SLURM_TEST_NETNS:-0}" = 1 ]; then
    read_netns_hosts
    base=${SLURM_TEST_BASE:-/run}
  fi
  node=$(hostname -s)
  cpus=${SLURM_TEST_CPUS:-$(nproc)}
  dir=$(mktemp -d "$base/braid-slurm.XXXXXX")
  # Any failure from here on (set -e included) takes down what was started and the folder.
  # shellcheck disable=SC2064  # $dir is meant to be expanded now
  trap "cmd_down '$dir'" EXIT
  # munged insists on a socket directory that everyone can traverse and only root can write.
  chmod 0711 "$dir"
  mkdir -p "$dir/munge" "$dir/state" "$dir/spool" "$dir/run" "$dir/log"
  chmod 0711 "$dir/munge"
  : >"$dir/pids"
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 0400 "$dir/munge/munge.key"
  ctld_port=$(free_port 6817)
  slurmd_port=$(free_port $((ctld_port + 1)) "$ctld_port")
  write_config "$dir" "$node" "$cpus" "$ctld_port" "$slurmd_port"
  export SLURM_CONF=$dir/slurm.conf

  start_daemon "$dir" munged munged -F --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed"
  if ! wait_for $START_TIMEOUT_S test -S "$dir/munge/munge.socket" ||
     ! wait_for $START_TIMEOUT_S sh -c "munge -S '$dir/munge/munge.socket' -n | unmunge -S '$dir/munge/munge.socket'"; then
    say "munged did not come up"; tail -n 20 "$dir"/log/munged.* >&2 || true; exit 1
  fi
  if [ ${#HOSTS[@]} -gt 0 ]; then
    echo "${HOSTS[*]}" >"$dir/hosts"
    local ok=1 h
    for h in "${HOSTS[@]}"; do
      mkdir -p "$dir/spool/$h"
      mirror_cgroup_mounts "$h"
    done
    start_netns_daemon "$dir" slurmctld "${HOSTS[0]}" "$dir/run/slurmctld.pid" slurmctld -D -f "$SLURM_CONF" || ok=0
    for h in "${HOSTS[@]}"; do
      [ $ok -eq 1 ] || break
      start_netns_daemon "$dir" "slurmd-$h" "$h" "$dir/run/slurmd-$h.pid" slurmd -D -N "$h" -f "$SLURM_CONF" || ok=0
    done
    [ $ok -eq 1 ] || { tail -n 20 "$dir"/log/slurm* >&2 || true; exit 1; }
  else
    start_daemon "$dir" slurmctld slurmctld -D -f "$SLURM_CONF"
    start_daemon "$dir" slurmd slurmd -D -f "$SLURM_CONF"
  fi
  if ! wait_for $START_TIMEOUT_S ctld_up || ! wait_for $START_TIMEOUT_S node_idle; then
    say "slurmctld/slurmd did not come up"; tail -n 20 "$dir"/log/slurm* >&2 || true; exit 1
  fi
  if [ ${#HOSTS[@]} -gt 0 ]; then
    say "up: nodes ${HOSTS[*]} ($cpus CPUs each), slurmctld on ${ADDRS[0]}:$ctld_port, slurmd on :$slurmd_port, in $dir"
  else
    say "up: node $node, $cpus CPUs, slurmctld on 127.0.0.1:$ctld_port, slurmd on :$slurmd_port, in $dir"
  fi
  trap - EXIT
  echo "SLURM_TEST_DIR=$dir"
  echo "SLURM_CONF=$SLURM_CONF"
}

no_jobs_left() { [ -z "$(on_ctld_host squeue -h 2>/dev/null)" ]; }

# True while PID $1 is alive, not a zombie, and its command line names our directory $2.
ours_alive() {
  local pid=$1 dir=$2
  [ -r "/proc/$pid/cmdline" ] || return 1
  [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$dir"
}

cmd_down() {
  local dir=${1:?usage: slurm_test_cluster.sh down DIR}
  [ -f "$dir/pids" ] || { say "no $dir/pids: nothing to stop"; return 0; }
  export SLURM_CONF=$dir/slurm.conf
  [ -f "$dir/hosts" ] && read -r -a HOSTS <"$dir/hosts"
  # Jobs first, while the daemons can still end them; then the daemons, slurmd before slurmctld before munged.
  on_ctld_host scancel --quiet --full "--partition=debug" 2>/dev/null || true
  wait_for $STOP_TIMEOUT_S no_jobs_left || say "jobs still queued; stopping anyway"
  local name pid sig
  for sig in TERM KILL; do
    while read -r name pid; do
      if ours_alive "$pid" "$dir"; then kill -s "$sig" "$pid" 2>/dev/null || true; fi
    done < <(tac "$dir/pids")
    local deadline=$((SECONDS + STOP_TIMEOUT_S))
    while [ $SECONDS -lt $deadline ]; do
      local left=0
      while read -r name pid; do ours_alive "$pid" "$dir" && left=1; done <"$dir/pids"
      [ $left -eq 0 ] && break
      sleep 0.1
    done
  done
  while read -r name pid; do
    ours_alive "$pid" "$dir" && say "$name (pid $pid) survived SIGKILL"
  done <"$dir/pids"
  rm -rf "$dir"
}

case "${1:-}" in
  install) cmd_install ;;
  up) cmd_up ;;
  down) cmd_down "${2:-}" ;;
  *) sed -n '2,14p' "$0" >&2; exit 2 ;;
esac
