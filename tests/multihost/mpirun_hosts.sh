#!/usr/bin/env bash
# mpirun across the hosts of the namespace cluster (scripts/netns_cluster.sh), as a drop-in for `mpirun` in
# the tests that take an MPIEXEC (tests/e2e/run_e2e_test.py, tests/faults/fault_matrix.py):
#
#   mpirun_hosts.sh -np 4 --oversubscribe [--tag-output] PROGRAM ARGS...
#
# mpirun runs inside the first host and starts the ranks on the first BRAID_MULTIHOST_NHOSTS hosts (default
# 2) through scripts/netns_rsh_agent.sh, BRAID_MULTIHOST_SLOTS per host (default 2), slot by slot: ranks
# 0-1 on bh1, 2-3 on bh2, ... Like ssh, the agent passes no environment on, so every BRAID_*, UCX_*,
# GLOO_* and TMPDIR variable of the caller travels with -x, as it would have to on a real cluster. The
# caller's folder must exist on every host (not under the machine's /tmp, which the hosts do not share):
# mpirun runs there, and so do the ranks (--wdir). Exit 77 when the cluster is not up. `exec` all the way,
# so that a signal to this script's PID reaches mpirun itself (which forwards SIGUSR1 and SIGTERM to the
# ranks).
set -euo pipefail

root=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
cluster=$root/scripts/netns_cluster.sh
hosts_wanted=${BRAID_MULTIHOST_NHOSTS:-2}
slots=${BRAID_MULTIHOST_SLOTS:-2}

env_out=$("$cluster" env 2>/dev/null) || { echo "mpirun_hosts: no namespace cluster is up (scripts/netns_cluster.sh up)" >&2; exit 77; }
eval "$env_out"
read -r -a hosts <<<"$BRAID_CLUSTER_HOSTS"
[ ${#hosts[@]} -ge "$hosts_wanted" ] || {
  echo "mpirun_hosts: the cluster has ${#hosts[@]} host(s), BRAID_MULTIHOST_NHOSTS wants $hosts_wanted" >&2; exit 77; }
hostfile=$(mktemp "${TMPDIR:-/tmp}/mpirun-hosts.XXXXXX")
for h in "${hosts[@]:0:$hosts_wanted}"; do echo "$h slots=$slots"; done >"$hostfile"
# The hostfile must outlive this script (exec): it is small and goes with the caller's TMPDIR.

forward=()
while IFS= read -r name; do
  case "$name" in
    BRAID_CLUSTER_*) ;;
    BRAID_* | UCX_* | GLOO_* | TMPDIR | OMP_NUM_THREADS) forward+=(-x "$name") ;;
  esac
done < <(compgen -e)

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec "$cluster" exec "${hosts[0]}" mpirun --mca plm_rsh_agent "$root/scripts/netns_rsh_agent.sh" \
  --hostfile "$hostfile" --wdir "$PWD" "${forward[@]}" "$@"
