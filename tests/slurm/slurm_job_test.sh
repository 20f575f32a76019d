#!/usr/bin/env bash
# The sbatch scripts of deploy/slurm/ on a real Slurm: a private one-node cluster on loopback
# (scripts/slurm_test_cluster.sh: Debian's munged, slurmctld and slurmd) runs each script to completion,
# runs a gloo job through braid-srun.sbatch (env:// rendezvous from Slurm's variables), then runs each
# script once more with a rank that waits for SIGUSR1 and sends the batch shell the signal that
# `#SBATCH --signal=B:USR1@120` sends before a time limit (scancel --batch --signal=USR1), which the
# script must pass down to the ranks, and a job whose worker is killed mid-run, which the script requeues
# and which resumes from its checkpoint. Jobs are polled with `scontrol show job -o` every 0.5 s (sbatch
# --wait checks only every 2, 8, 32 s). The cluster is torn down on every way out, by its recorded PIDs.
#
# Usage: slurm_job_test.sh PATH_TO_BRAID. Exit 77 (CTest's skip) when not root or when the Slurm
# packages are missing and cannot be installed.
set -uo pipefail

# The job both scripts run: sbatch options; braid's arguments; regexes the job's output must contain. It is
# the training example of the hybrid parameter-server job (6 ranks: 4 trainers, a worker, a master) for a
# few steps.
job_sbatch=(-n 6 --overcommit); job_braid=(run examples/hybrid/train.yaml --steps 3); job_expect=('done: 3 steps in .*final loss')

readonly SKIP=77
# Every job gets at most JOB_TIMEOUT_S, and all of them together JOBS_TIMEOUT_S, so that the test ends (and
# tears the cluster down) well within CTest's TIMEOUT: a CTest kill would leave the daemons running.
readonly JOB_TIMEOUT_S=40
readonly JOBS_TIMEOUT_S=120
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cluster=$root/scripts/slurm_test_cluster.sh
failures=0

say() { echo "slurm_job_test: $*"; }
fail() { say "FAILED: $*"; failures=$((failures + 1)); }

[ $# -eq 1 ] && [ -x "$1" ] || { say "usage: slurm_job_test.sh PATH_TO_BRAID"; exit 2; }
export BRAID
BRAID=$(realpath "$1")
[ "$(id -u)" -eq 0 ] || { say "skipped: needs root (to install Slurm and run its daemons)"; exit $SKIP; }

bash "$cluster" install
rc=$?
[ $rc -eq $SKIP ] && { say "skipped: the Slurm packages are missing and cannot be installed (above)"; exit $SKIP; }
[ $rc -eq 0 ] || { say "FAILED: installing the Slurm packages (exit $rc)"; exit 1; }

SLURM_TEST_DIR=""
teardown() { [ -z "$SLURM_TEST_DIR" ] || bash "$cluster" down "$SLURM_TEST_DIR"; }
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
eval "$(bash "$cluster" up)" || { say "FAILED: the cluster did not start"; exit 1; }
export SLURM_CONF
# Relative paths in braid's arguments (a job file) are relative to the repository, as sbatch runs jobs in
# the directory they were submitted from.
cd "$root" || exit 1

jobs_deadline=$((SECONDS + JOBS_TIMEOUT_S))
deadline_for_job() { local d=$((SECONDS + JOB_TIMEOUT_S)); echo $((d < jobs_deadline ? d : jobs_deadline)); }

# Prints "STATE EXITCODE" of job $1 once it has ended, polling every 0.5 s; "TIMEOUT" after the limit.
wait_job() {
  local deadline line state
  deadline=$(deadline_for_job)
  while [ $SECONDS -lt $deadline ]; do
    line=$(scontrol show job -o "$1" 2>/dev/null)
    state=$(grep -o 'JobState=[A-Z_]*' <<<"$line" | cut -d= -f2)
    case "$state" in
      PENDING | RUNNING | CONFIGURING | COMPLETING | SUSPENDED | REQUEUED | RESIZING | "") sleep 0.5 ;;
      *) echo "$state $(grep -o 'ExitCode=[0-9:]*' <<<"$line" | cut -d= -f2)"; return ;;
    esac
  done
  echo "TIMEOUT"
  scancel "$1" 2>/dev/null
}

# Waits until file $1 matches regex $2 while job $3 has not ended, at most as long as a job.
wait_output() {
  local deadline
  deadline=$(deadline_for_job)
  until grep -Eq "$2" "$1" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || return 1
    scontrol show job -o "$3" 2>/dev/null | grep -Eq 'JobState=(PENDING|CONFIGURING|RUNNING)' || return 1
    sleep 0.2
  done
}

submit() {
  local name=$1
  shift
  sbatch --parsable --job-name="$name" --output="$SLURM_TEST_DIR/$name-%j.out" "$@" | cut -d';' -f1
}

# Checks job $2 (script $1) ended COMPLETED with exit code 0:0 and its output matches every regex after $3.
check_job() {
  local script=$1 id=$2 out=$3 result pattern ok=1
  shift 3
  result=$(wait_job "$id")
  [ "$result" = "COMPLETED 0:0" ] || { fail "$script job $id ended '$result', expected 'COMPLETED 0:0'"; ok=0; }
  for pattern in "$@"; do
    grep -Eq "$pattern" "$out" 2>/dev/null || { fail "$script job $id: no line matches /$pattern/"; ok=0; }
  done
  if [ $ok -eq 1 ]; then
    say "ok   $script: job $id COMPLETED 0:0 in $(scontrol show job -o "$id" | grep -o 'RunTime=[0-9:]*')"
  else
    say "--- $out"; cat "$out" 2>/dev/null
  fi
}

scripts=(braid-srun braid-mpirun)
declare -A job_id
for s in "${scripts[@]}"; do
  job_id[$s]=$(submit "$s" "${job_sbatch[@]}" "$root/deploy/slurm/$s.sbatch" "${job_braid[@]}")
  [ -n "${job_id[$s]}" ] || fail "sbatch $s.sbatch was refused"
done
for s in "${scripts[@]}"; do
  [ -n "${job_id[$s]}" ] && check_job "$s" "${job_id[$s]}" "$SLURM_TEST_DIR/$s-${job_id[$s]}.out" "${job_expect[@]}"
done

# A job whose ranks meet: gloo over env://, where braid takes the store's host from SLURM_JOB_NODELIST and
# the port from the MASTER_PORT that braid-srun.sbatch sets (under mpirun, MPI is the store).
if "$BRAID" info --json | python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)["backends"]["gloo"]["built"] else 1)'; then
  id=$(submit braid-srun-gloo -n 2 "$root/deploy/slurm/braid-srun.sbatch" bench collectives --backend gloo --sizes 4K \
       --iters 2 --no-raw)
  check_job "braid-srun (gloo)" "$id" "$SLURM_TEST_DIR/braid-srun-gloo-$id.out" \
    "RESULT collectives backend=gloo op=allreduce ranks=2 .*wrong=0"
else
  say "skipping the gloo job: this braid is built without gloo"
fi

# The timeout signal: one rank (a braid launch of one shell) waits for SIGUSR1 and exits 0 when it comes.
# It can come twice, close together: slurmstepd signals every process of the step (the rank too), and
# braid launch forwards its own copy. The trap ignores further ones first, or a second USR1 arriving
# while the shell exits kills it (seen once in CI: the job ended 'FAILED 138:0').
waiter='trap "trap \"\" USR1; echo rank got USR1; exit 0" USR1; echo rank ready; while :; do sleep 0.2; done'
for s in "${scripts[@]}"; do
  id=$(submit "$s-usr1" -n 1 "$root/deploy/slurm/$s.sbatch" launch -n 1 -- sh -c "$waiter")
  out=$SLURM_TEST_DIR/$s-usr1-$id.out
  if [ -z "$id" ] || ! wait_output "$out" "^\[rank 0\] rank ready" "$id"; then
    fail "$s: the SIGUSR1 job ${id:-(refused)} never got ready"
  else
    scancel --batch --signal=USR1 "$id"
  fi
  check_job "$s (SIGUSR1)" "$id" "$out" "SIGUSR1 from Slurm" "\[rank 0\] rank got USR1"
done

# A run that fails is requeued and resumes (BRAID_MAX_REQUEUES): the 4-rank fault job's worker is killed
# (kill -9, BRAID_FAULT, first run only) at its 13th forward (step 4; 4 a step), after a checkpoint is
# committed (asynchronous checkpoints are, at the latest, when the next begins); braid-srun.sbatch
# requeues the job, whose `braid run` resumes from the latest checkpoint (SLURM_RESTART_COUNT) and
# completes. --open-mode=append keeps both runs' output in one file.
ckpt=$SLURM_TEST_DIR/requeue-ckpt
id=$(BRAID_MAX_REQUEUES=1 BRAID_FAULT=forward:2:kill:13 BRAID_TRACE_DIR=$SLURM_TEST_DIR/trace \
     submit braid-srun-requeue -n 4 --overcommit --open-mode=append "$root/deploy/slurm/braid-srun.sbatch" \
     run tests/faults/job.yaml --steps 6 --set "checkpoint.dir=$ckpt" --set checkpoint.interval=1)
# Slurm holds a requeued job for about two minutes (its EligibleTime) before it may start again; an operator,
# or this test, makes it eligible at once.
out=$SLURM_TEST_DIR/braid-srun-requeue-$id.out
if [ -n "$id" ] && wait_output "$out" "requeueing job $id" "$id"; then
  deadline=$(deadline_for_job)
  # Pending again, and the first run's step daemons gone: a run started before slurmd has cleaned up the
  # last one fails to launch its step (and srun then exits 0).
  until { scontrol show job -o "$id" 2>/dev/null | grep -q 'JobState=PENDING' && ! pgrep -f "slurmstepd: \[$id\." >/dev/null; } ||
        [ $SECONDS -ge $deadline ]; do sleep 0.2; done
  scontrol update JobId="$id" StartTime=now
fi
check_job "braid-srun (requeue)" "$id" "$out" \
  "the run failed \(exit [0-9]+\); requeueing job $id \(requeue 1 of 1" "restart 1: resumed from $ckpt/step-" \
  "done: 6 steps in"

[ $failures -eq 0 ] && say "OK" || say "$failures failure(s)"
[ $failures -eq 0 ]
