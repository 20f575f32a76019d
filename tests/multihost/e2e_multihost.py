#!/usr/bin/env python3
"""Jobs of `braid run` across the hosts of the namespace cluster (scripts/netns_cluster.sh), under mpirun
from the first host (tests/multihost/mpirun_hosts.sh). Usage: e2e_multihost.py BRAID CASE

Cases:
  hybrid   the hybrid parameter-server job on 3 hosts x 2 ranks (trainers 0-3 on bh1 and bh2, the worker and
           the master on bh3): every gradient equals PyTorch's reference for ddp.mode none, inside, outside
           and uneven data, as on one host (tests/e2e/run_e2e_test.py's hybrid case, which this reuses), and
           the training run's loss falls
  fsdp     the FSDP example on 2 hosts x 2 ranks, stopped by SIGUSR1 after step 3 or later: its sharded
           checkpoint (one file per rank, written on both hosts) resumes 3 steps further with gradients and a
           final checkpoint bit-identical to an uninterrupted run's
  digits   the digits classifier (DDP over gloo) on 2 hosts x 2 ranks, 2 epochs: its evaluations match the same
           job's on one host (within one test image in 50), above 0.8, and the driver logs both hosts
  kill     kill -9 of the worker (rank 2, on the second host) in the forward pass of the fault matrix's job
           (trainers 0-1 on bh1; worker 2 and master 3 on bh2): every rank on both hosts exits within
           failure.timeout_s + 10 s naming it, and no process is left (tests/faults/fault_matrix.py)
Exit 77 when the cluster is not up or has too few hosts. Temporary files go under BUILD/tests/multihost/tmp,
which every host sees (each host has a /tmp of its own)."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
import run_e2e_test as e2e  # noqa: E402  (the single-host cases, reused with another MPIEXEC)

WRAPPER = os.path.join(HERE, "mpirun_hosts.sh")
HOSTS_NEEDED = {"hybrid": 3, "fsdp": 2, "digits": 2, "kill": 2}


def cluster_hosts():
    r = subprocess.run(["bash", os.path.join(ROOT, "scripts", "netns_cluster.sh"), "env"], capture_output=True, text=True)
    if r.returncode != 0:
        return []
    for line in r.stdout.splitlines():
        if line.startswith("BRAID_CLUSTER_HOSTS="):
            return line.split("=", 1)[1].strip('"').split()
    return []


def case_hybrid(braid, tmp):
    e2e.case_hybrid(braid, WRAPPER, tmp)


def case_fsdp(braid, tmp):
    job = [os.path.join(ROOT, "examples", "fsdp", "job.yaml"), "--set", "log.interval=1"]
    e2e.check_resume(braid, WRAPPER, tmp, "fsdp across 2 hosts", 4, job, 4)


def case_digits(braid, tmp):
    job = os.path.join(ROOT, "examples", "digits", "job.yaml")
    accuracies = {}
    for where, mpiexec in (("2 hosts", WRAPPER), ("one host", "mpirun")):
        metrics = os.path.join(tmp, f"digits-{where.replace(' ', '-')}.jsonl")
        r = e2e.run(e2e.mpirun(mpiexec, braid, 4, [job, "--set", "train.epochs=2", "--set", f"log.metrics={metrics}"]),
                    timeout=150)
        evals = [m["eval_accuracy"] for m in e2e.read_dump(metrics) if "eval_accuracy" in m] if os.path.exists(metrics) else []
        e2e.expect(f"digits (DDP over gloo) on {where}: exit 0, 2 evaluations {evals}", r.returncode == 0 and len(evals) == 2, r)
        if where == "2 hosts":
            e2e.expect("the driver places 4 ranks on 2 hosts", "4 ranks on 2 hosts" in r.stdout + r.stderr, r)
        accuracies[where] = evals
    across, alone = accuracies["2 hosts"], accuracies["one host"]
    # Across hosts the gradients are summed over TCP instead of shared memory, in another order: the
    # evaluations may differ in the last bits of a logit, not in what the model learned.
    e2e.expect(f"across hosts the evaluations {across} match one host's {alone} and reach 0.8",
               all(abs(a - b) <= 0.02 for a, b in zip(across, alone)) and across[-1] >= 0.8)


def case_kill(braid, tmp):
    cmd = [sys.executable, os.path.join(ROOT, "tests", "faults", "fault_matrix.py"), braid, "--mpiexec", WRAPPER,
           "--launchers", "mpirun", "--full", "--only", "mpirun/worker/kill/forward"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)
    print(r.stdout[-3000:], r.stderr[-3000:])
    e2e.expect("kill -9 of the worker on the second host: every rank exits in time naming it, nothing left",
               r.returncode == 0 and "1 of 1 runs passed" in r.stdout, r)


def main():
    braid, case = os.path.abspath(sys.argv[1]), sys.argv[2]
    hosts = cluster_hosts()
    if len(hosts) < HOSTS_NEEDED[case]:
        print(f"SKIP {case}: needs a namespace cluster of {HOSTS_NEEDED[case]} hosts, found {len(hosts)} "
              "(scripts/netns_cluster.sh up --hosts 3)")
        sys.exit(77)
    shared = os.path.join(os.path.dirname(os.path.dirname(braid)), "tests", "multihost", "tmp")
    os.makedirs(shared, exist_ok=True)
    os.environ["TMPDIR"] = shared
    os.environ["BRAID_MULTIHOST_NHOSTS"] = str(HOSTS_NEEDED[case])
    os.environ["BRAID_MULTIHOST_SLOTS"] = "2"
    with tempfile.TemporaryDirectory(prefix=f"e2e-{case}-", dir=shared) as tmp:
        {"hybrid": case_hybrid, "fsdp": case_fsdp, "digits": case_digits, "kill": case_kill}[case](braid, tmp)
    print(f"PASS {case}")


if __name__ == "__main__":
    main()
