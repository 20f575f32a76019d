#!/usr/bin/env bash
# deploy/slurm's batch scripts on a real two-node Slurm: one slurmd on each host of the namespace cluster
# (scripts/netns_cluster.sh, brought up by the multihost CTest fixture), slurmctld on the first
# (scripts/slurm_test_cluster.sh with SLURM_TEST_NETNS=1). Each script runs the digits job (4 trainers, DDP
# over gloo) as 2 nodes x 2 tasks:
#   - braid-srun.sbatch: srun --mpi=pmix starts the ranks; braid finds its rank in Slurm's variables and
#     meets at an env:// TCPStore on the first node of SLURM_JOB_NODELIST;
#   - braid-mpirun.sbatch: mpirun inside the allocation (Open MPI starts its daemons through srun), the
#     store from the MPI bootstrap.
# The driver's placement line must show 2 ranks on each host; the job must complete its steps. Jobs are
# polled every 0.5 s; the Slurm cluster is torn down on every way out (the namespace cluster is the
# fixture's).
#
# Usage: slurm_multihost_test.sh PATH_TO_BRAID. Exit 77 (CTest's skip) when not root, when no namespace
# cluster is up, or when the Slurm packages are missing and cannot be installed.
set -uo pipefail

readonly SKIP=77
readonly JOB_TIMEOUT_S=60
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cluster=$root/scripts/slurm_test_cluster.sh
netns=$root/scripts/netns_cluster.sh
failures=0

say() { echo "slurm_multihost_test: $*"; }
fail() { say "FAILED: $*"; failures=$((failures + 1)); }

[ $# -eq 1 ] && [ -x "$1" ] || { say "usage: slurm_multihost_test.sh PATH_TO_BRAID"; exit 2; }
BRAID=$(realpath "$1")
export BRAID
[ "$(id -u)" -eq 0 ] || { say "skipped: needs root (namespaces, Slurm's daemons)"; exit $SKIP; }
bash "$netns" status >/dev/null 2>&1 || { say "skipped: no namespace cluster is up (scripts/netns_cluster.sh up)"; exit $SKIP; }

bash "$cluster" install
rc=$?
[ $rc -eq $SKIP ] && { say "skipped: the Slurm packages are missing and cannot be installed (above)"; exit $SKIP; }
[ $rc -eq 0 ] || { say "FAILED: installing the Slurm packages (exit $rc)"; exit 1; }

SLURM_TEST_DIR=""
teardown() { [ -z "$SLURM_TEST_DIR" ] || bash "$cluster" down "$SLURM_TEST_DIR"; }
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
eval "$(SLURM_TEST_NETNS=1 bash "$cluster" up)" || { say "FAILED: the Slurm cluster did not start"; exit 1; }
export SLURM_CONF
read -r -a hosts <"$SLURM_TEST_DIR/hosts"
[ ${#hosts[@]} -ge 2 ] || { say "FAILED: the namespace cluster has ${#hosts[@]} host(s); this test needs 2"; exit 1; }
cd "$root" || exit 1

# Slurm's clients reach slurmctld only from a host of the cluster.
on_host() { bash "$netns" exec "${hosts[0]}" "$@"; }

# Prints "STATE EXITCODE" of job $1 once it has ended; "TIMEOUT" (and cancels it) after JOB_TIMEOUT_S.
wait_job() {
  local deadline=$((SECONDS + JOB_TIMEOUT_S)) line state
  while [ $SECONDS -lt $deadline ]; do
    line=$(on_host scontrol show job -o "$1" 2>/dev/null)
    state=$(grep -o 'JobState=[A-Z_]*' <<<"$line" | cut -d= -f2)
    case "$state" in
      PENDING | RUNNING | CONFIGURING | COMPLETING | SUSPENDED | REQUEUED | RESIZING | "") sleep 0.5 ;;
      *) echo "$state $(grep -o 'ExitCode=[0-9:]*' <<<"$line" | cut -d= -f2)"; return ;;
    esac
  done
  echo "TIMEOUT"
  on_host scancel "$1" 2>/dev/null
}

steps=30
job=(run examples/digits/job.yaml --steps $steps --set log.interval=10)
for script in braid-srun braid-mpirun; do
  out=$SLURM_TEST_DIR/$script-%j.out
  id=$(on_host sbatch --parsable --job-name="$script" --output="$out" \
         --nodes=2 --ntasks=4 --ntasks-per-node=2 --overcommit "$root/deploy/slurm/$script.sbatch" "${job[@]}" | cut -d';' -f1)
  [ -n "$id" ] || { fail "sbatch $script.sbatch was refused"; continue; }
  out=${out/\%j/$id}
  result=$(wait_job "$id")
  ok=1
  [ "$result" = "COMPLETED 0:0" ] || { fail "$script job $id ended '$result', expected 'COMPLETED 0:0'"; ok=0; }
  grep -Eq "done: $steps steps in .*final loss" "$out" || { fail "$script job $id: no 'done: $steps steps' line"; ok=0; }
  for h in "${hosts[@]:0:2}"; do
    grep -Eq "4 ranks on 2 hosts \(.*$h: ranks [0-9]-[0-9]" "$out" || { fail "$script job $id: the driver's placement line does not name 2 ranks on $h"; ok=0; }
  done
  if [ $ok -eq 1 ]; then
    say "ok   $script: job $id, 2 nodes x 2 tasks, COMPLETED 0:0 in $(on_host scontrol show job -o "$id" | grep -o 'RunTime=[0-9:]*')"
  else
    say "--- $out"; cat "$out" 2>/dev/null
  fi
done

[ $failures -eq 0 ] && say "passed" || say "$failures failure(s)"
[ $failures -eq 0 ]
