#!/usr/bin/env bash
# One cross-host test on the cluster of scripts/netns_cluster.sh (tests/multihost/README.md): 2 hosts x 2
# ranks, mpirun inside the first host reaching the second through scripts/netns_rsh_agent.sh, or the env://
# launcher tests/multihost/launch_hosts.py.
#
#   run_multihost.sh BUILD_DIR SCENARIO
#     collectives-mpi | collectives-gloo   the collectives conformance suite (tests/mp collectives_mp_tests)
#                                          under mpirun, on the mpi or the gloo engine
#     collectives-gloo-env                 the same on gloo under env:// (TCPStore with rank 0 on bh1)
#     rpc-tcp | rpc-ucx                    tests/mp rpc_mp_tests under mpirun (RRefs forked across hosts)
#
# Exit 77 (skip) when the cluster is not up (the fixture multihost/cluster_up skipped: not root, no
# namespaces) or the test's executable or transport is not built. BRAID_MULTIHOST_FILTER replaces the
# Catch2 filter of a scenario (e.g. "[allreduce]"); BRAID_CLUSTER_NAME picks the cluster.
set -euo pipefail

readonly BUILD=${1:?usage: run_multihost.sh BUILD_DIR SCENARIO}
readonly SCENARIO=${2:?usage: run_multihost.sh BUILD_DIR SCENARIO}
readonly ROOT=$(cd "$(dirname "$0")/../.." && pwd)
readonly CLUSTER=$ROOT/scripts/netns_cluster.sh
readonly PER_HOST=2
readonly TIMEOUT_S=240
# Catch2 test specs (one argument: space = and, comma = or). Left out everywhere: the cases about the
# shared-memory and staged paths, which assume that all ranks share one host (they count shared-memory
# ops, or make a rank skip one; across hosts a group has no such path), and the one on two "lo" devices.
readonly SINGLE_HOST_ONLY='~"*shared-memory*" ~"*staged*" ~[devices]'
# Each of `tags` without the one-host cases, the timeout and stress cases (they test the engines' own
# logic, which the one-host runs in tests/mp cover).
spec_of_tags() {
  local spec="" t
  for t in "$@"; do spec="${spec:+$spec,}$t $SINGLE_HOST_ONLY ~[timeout] ~[stress]"; done
  echo "$spec"
}
# mpi runs every op, the groups and the dtypes (the whole suite took 75-92 s here: too long for CI);
# gloo, at debug level for the shared-memory check (twice as slow), the main collectives; env:// what
# proves the rendezvous.
case "$SCENARIO" in
  collectives-mpi) FILTER=("$(spec_of_tags "[allreduce]" "[broadcast]" "[allgather]" "[reduce_scatter]" "[alltoall]" \
                                "[gather]" "[scatter]" "[reduce]" "[p2p]" "[barrier]" "[groups]" "[dtype]")") ;;
  collectives-gloo) FILTER=("$(spec_of_tags "[allreduce]" "[broadcast]" "[allgather]" "[reduce_scatter]" "[groups]")") ;;
  collectives-gloo-env) FILTER=("$(spec_of_tags "[allreduce]" "[broadcast]")") ;;
  *) FILTER=() ;;
esac
[ -z "${BRAID_MULTIHOST_FILTER:-}" ] || FILTER=("$BRAID_MULTIHOST_FILTER")

say() { echo "run_multihost[$SCENARIO]: $*" >&2; }
skip() { say "skipped: $*"; exit 77; }

"$CLUSTER" status >/dev/null 2>&1 || skip "the cluster '${BRAID_CLUSTER_NAME:-bcl}' is not up (see multihost/cluster_up's output for why)"
eval "$("$CLUSTER" env)"
read -r -a HOSTS <<<"$BRAID_CLUSTER_HOSTS"
[ ${#HOSTS[@]} -ge 2 ] || skip "the cluster has ${#HOSTS[@]} host(s); these tests need 2"
HOSTS=("${HOSTS[@]:0:2}")
HOSTFILE=$BUILD/tests/multihost/hostfile
mkdir -p "$(dirname "$HOSTFILE")"
printf '%s slots='$PER_HOST'\n' "${HOSTS[@]}" >"$HOSTFILE"
NP=$((${#HOSTS[@]} * PER_HOST))
LOG=$BUILD/tests/multihost/$SCENARIO.log
# A folder every host sees, as a cluster's shared file system: file:// rendezvous needs one (each host's
# /tmp is its own).
SHARED_TMP=$BUILD/tests/multihost/tmp
mkdir -p "$SHARED_TMP"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# mpirun from the first host. The ranks on the second host get only what -x names (the agent passes no
# environment on, like ssh). The interfaces are left to Open MPI and braid: each host has lo and eth0.
mpirun_hosts() {
  local x=() v
  for v in "$@"; do x+=(-x "$v"); done
  "$CLUSTER" exec "${HOSTS[0]}" timeout --kill-after=10 "${RUN_LIMIT_S:-$TIMEOUT_S}" \
    mpirun --mca plm_rsh_agent "$ROOT/scripts/netns_rsh_agent.sh" --hostfile "$HOSTFILE" -np $NP \
    --oversubscribe --tag-output "${x[@]}" "${MPI_PROGRAM[@]}"
}

# The log must show, on every rank, a group seeing its ranks on two hosts (so that shared memory is
# used only by the per-host groups of the two-level collectives, collectives/hier/), and never a segment of
# another "host" being looked for (that would mean the hosts' identities matched: hostname and boot_id).
check_shm_stays_in_host() {
  local ranks
  ranks=$(grep -oE "\(rank [0-9]+/$NP, [a-z]+\): 2 hosts: 0,1 \| 2,3" "$LOG" | sort -u | wc -l)
  [ "$ranks" -ge "$NP" ] || { say "FAIL: expected every rank to log a group on 2 hosts (0,1 | 2,3); $ranks ranks did"; return 1; }
  if grep -q "shm_open(/braid-pool" "$LOG"; then
    say "FAIL: a rank looked for another host's shared-memory segment:"
    grep "shm_open(/braid-pool" "$LOG" | head -3 >&2
    return 1
  fi
  say "every rank saw its groups on 2 hosts (0,1 | 2,3); no rank looked for another host's segment"
}

# gloo found the interface between the hosts by itself (nothing names one here).
check_gloo_interface() {
  local n
  n=$(grep -c "gloo: group '.*' uses interface $BRAID_CLUSTER_IFACE, the one toward the store's host" "$LOG" || true)
  [ "$n" -ge "$NP" ] || { say "FAIL: expected every rank to log gloo's choice of $BRAID_CLUSTER_IFACE; $n lines"; return 1; }
  say "gloo chose $BRAID_CLUSTER_IFACE toward ${HOSTS[0]} by itself ($n groups)"
}

# RPC over TCP listened on each host's own address, found by itself.
check_rpc_listeners() {
  [ "$SCENARIO" = rpc-tcp ] || return 0
  local n
  n=$(grep -cE "init_rpc\('worker[0-9]+'\): listening on 198\.18\.0\.[0-9]+ \($BRAID_CLUSTER_IFACE," "$LOG" || true)
  [ "$n" -ge "$NP" ] || { say "FAIL: expected every worker to listen on its host's $BRAID_CLUSTER_IFACE address; $n lines"; return 1; }
  say "every RPC worker listened on its host's address ($n)"
}

# UCX must take the hosts for separate machines: with only its shared-memory transports, workers on
# different hosts cannot connect ("Destination is unreachable"); were the hosts' boot ids (UCX's system
# id) the same, UCX would map one host's memory from the other and the calls would succeed.
check_ucx_shm_stays_in_host() {
  local shm_log=$BUILD/tests/multihost/rpc-ucx-shm-only.log rc=0
  MPI_PROGRAM=("$BUILD/tests/mp/rpc_mp_tests" --use-colour no "rpc: sync*")
  # The refusal shows within a second; the ranks that were not refused would then wait out the harness's
  # 150 s end-of-case barrier, so the run is cut at 20 s (any exit but 0 is what is expected).
  RUN_LIMIT_S=20 mpirun_hosts BRAID_RPC_TRANSPORT=ucx UCX_TLS=posix,sysv,self >"$shm_log" 2>&1 || rc=$?
  if [ $rc -eq 0 ] || ! grep -q "Destination is unreachable" "$shm_log"; then
    say "FAIL: with UCX_TLS=posix,sysv,self the workers of different hosts connected (exit $rc; $shm_log)"
    return 1
  fi
  say "UCX found no shared memory between hosts (exit $rc, 'Destination is unreachable'; $shm_log)"
}

run_logged() {
  local rc=0
  "$@" >"$LOG" 2>&1 || rc=$?
  # The log is long at debug level: its end and every failure line go to CTest's output.
  grep -E "FAILED|failed|error|Error|passed|test cases" "$LOG" | grep -v "\[debug\]" | tail -40 || true
  say "exit code $rc; full log: $LOG"
  return $rc
}

case "$SCENARIO" in
  collectives-mpi)
    exe=$BUILD/tests/mp/collectives_mp_tests
    [ -x "$exe" ] || skip "$exe is not built"
    MPI_PROGRAM=("$exe" --use-colour no "${FILTER[@]}")
    run_logged mpirun_hosts BRAID_TEST_BACKEND=mpi BRAID_MP_STRESS_ITERS=50 TMPDIR="$SHARED_TMP" ;;
  collectives-gloo)
    exe=$BUILD/tests/mp/collectives_mp_tests
    [ -x "$exe" ] || skip "$exe is not built"
    MPI_PROGRAM=("$exe" --use-colour no "${FILTER[@]}")
    run_logged mpirun_hosts BRAID_TEST_BACKEND=gloo BRAID_LOG_LEVEL=debug TMPDIR="$SHARED_TMP"
    check_shm_stays_in_host
    check_gloo_interface ;;
  collectives-gloo-env)
    exe=$BUILD/tests/mp/collectives_mp_tests
    [ -x "$exe" ] || skip "$exe is not built"
    run_logged env BRAID_TEST_BACKEND=gloo BRAID_LOG_LEVEL=debug TMPDIR="$SHARED_TMP" \
      python3 "$ROOT/tests/multihost/launch_hosts.py" --hosts "$(IFS=,; echo "${HOSTS[*]}")" --per-host $PER_HOST \
      --timeout $TIMEOUT_S -- "$exe" --use-colour no "${FILTER[@]}"
    check_shm_stays_in_host
    check_gloo_interface ;;
  rpc-tcp | rpc-ucx)
    exe=$BUILD/tests/mp/rpc_mp_tests
    [ -x "$exe" ] || skip "$exe is not built"
    MPI_PROGRAM=("$exe" --use-colour no ${BRAID_MULTIHOST_FILTER:+"$BRAID_MULTIHOST_FILTER"})
    run_logged mpirun_hosts BRAID_RPC_TRANSPORT="${SCENARIO#rpc-}" BRAID_LOG_LEVEL=debug
    check_rpc_listeners
    [ "$SCENARIO" != rpc-ucx ] || check_ucx_shm_stays_in_host ;;
  *) say "unknown scenario '$SCENARIO'"; exit 2 ;;
esac
