#!/usr/bin/env python3
"""The fault-injection matrix of `braid run` (docs/RUNTIME.md, "Faults").

Each run starts tests/faults/job.yaml (4 ranks: trainers 0-1, worker 2, master 3) under a launcher, with
BRAID_FAULT making one rank raise a signal on itself at a named phase (base/fault_injection.h), and checks:
  - the fault was reached (the rank's "braid fault:" line gives its time);
  - the launcher, and with it every surviving rank, exits (non-zero) within failure.timeout_s + 10 s of the
    fault; a run still going after that bound plus a grace is a hang: everything of it is killed and the
    run fails;
  - every surviving rank names the failed rank and role ("rank 1 (trainer)") in its own output;
  - no process of the run is left (the process table: every process whose environment carries the run's
    BRAID_FAULT_MATRIX_RUN marker);
  - a checkpoint interrupted mid-write leaves the previous one as `latest`, and it loads (the job resumes
    from it under braid launch, every rank reading its file).

Usage:
  fault_matrix.py BRAID [--mpiexec MPIEXEC] [--short | --full] [--launchers launch,mpirun,slurm]
                  [--table FILE.md] [--only SUBSTRING]
--short (the default; `make test` runs it as the ctest `faults_short`) is three runs; --full is every
fault x role x phase x launcher (64 runs over braid launch and mpirun). Exit 0 when every run passed.
Slurm runs (srun --kill-on-bad-exit) need a running cluster (SLURM_CONF set, `scontrol ping` answering).
"""
import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
JOB = os.path.join(ROOT, "tests", "faults", "job.yaml")
WORLD = 4
ROLE_OF = {0: "trainer", 1: "trainer", 2: "worker", 3: "master"}
# The rank that faults, per role: trainer 1 rather than 0, whose process hosts the job's store.
RANK_OF = {"trainer": 1, "worker": 2, "master": 3}
PHASES = ["rendezvous", "forward", "allreduce", "rpc", "checkpoint", "shutdown"]
# Only trainers enter an allreduce (DDP's); the worker and the master are in no collective once started.
APPLIES = {"trainer": PHASES, "worker": [p for p in PHASES if p != "allreduce"],
           "master": [p for p in PHASES if p != "allreduce"]}
# The reach of the point that faults: the second checkpoint write, so that a previous checkpoint exists.
NTH = {"checkpoint": 2}
SIGNALS = ["kill", "stop"]
TIMEOUT_S = 5          # the job's failure.timeout_s
SLACK_S = 10           # every surviving rank is gone within TIMEOUT_S + SLACK_S of the fault
HANG_GRACE_S = 10      # past the bound, this much more before the run counts as hung and is killed
REACH_BOUND_S = 90     # the fault must be reached within this long of the start
LAUNCHER_VARS = ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "RANK",
                 "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "BRAID_LOG_LEVEL", "BRAID_LOG",
                 "BRAID_FAULT")
SHORT = [("launch", "master", "kill", "forward"), ("mpirun", "trainer", "stop", "allreduce"),
         ("launch", "worker", "kill", "checkpoint")]
FAULT_LINE = re.compile(r"braid fault: rank (\d+) raises (\S+) at '([^']+)' \(reach \d+\) at unix time ([0-9.]+)")
RANK_PREFIX = {
    "launch": re.compile(r"^\[rank (\d+)\] "),
    "mpirun": re.compile(r"^\[\d+,(\d+)\]<std(?:out|err)>:"),
    "slurm": re.compile(r"^\s*(\d+): "),
}


def describe(rank):
    return f"rank {rank} ({ROLE_OF[rank]})"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def command(launcher, braid, mpiexec, args):
    if launcher == "launch":
        return [braid, "launch", "-n", str(WORLD), "--", braid, "run"] + args
    if launcher == "mpirun":
        return [mpiexec, "-np", str(WORLD), "--oversubscribe", "--tag-output", braid, "run"] + args
    return ["srun", "-n", str(WORLD), "--overcommit", "--label", "--kill-on-bad-exit=1", braid, "run"] + args


def run_env(launcher, marker, fault, trace_dir):
    e = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    # The flight recorder's dumps go with the run's output, not next to the job file in the source tree.
    e["BRAID_TRACE_DIR"] = trace_dir
    e.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
              "OMPI_MCA_rmaps_base_oversubscribe": "1", "BRAID_FAULT": fault, "BRAID_FAULT_MATRIX_RUN": marker})
    if launcher == "slurm":
        e.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())})
    return e


def marked_pids(marker):
    """The processes whose environment carries `marker`: what is left of a run, wherever it was reparented."""
    needle = f"BRAID_FAULT_MATRIX_RUN={marker}".encode()
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    with open(f"/proc/{d}/stat") as st:
                        state = st.read().rsplit(")", 1)[1].split()[0]
                    if state != "Z":
                        found.append(int(d))
        except OSError:
            continue
    return found


def kill_all(proc, marker):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    for pid in marked_pids(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


# mpirun forwards a rank's output in the pieces it reads, tagging each: a long line may carry another tag
# of the same rank in its middle ("... rank 1 (t[1,0]<stderr>:rainer) ..."), which is taken out.
MID_LINE_TAG = {"mpirun": r"\[\d+,{}\]<std(?:out|err)>:"}


def per_rank_output(launcher, text):
    out = {r: [] for r in range(WORLD)}
    for line in text.splitlines():
        m = RANK_PREFIX[launcher].match(line)
        if m and int(m.group(1)) in out:
            rest = line[m.end():]
            if launcher in MID_LINE_TAG:
                rest = re.sub(MID_LINE_TAG[launcher].format(m.group(1)), "", rest)
            out[int(m.group(1))].append(rest)
    return {r: "\n".join(lines) for r, lines in out.items()}


def check_checkpoint(braid, ckpt, marker):
    """`latest` names step 1's checkpoint (the one before the interrupted write), or step 2's if the write was
    only held up and then completed, and the job resumes from it
    (every rank loads its file of it: `braid export` cannot, the model keeps parts on the worker)."""
    latest = os.path.join(ckpt, "latest")
    if not os.path.exists(latest):
        return "no checkpoint/latest"
    with open(latest) as f:
        name = f.read().strip()
    m = re.fullmatch(r"step-0*(\d+)", name)
    # Step 1's, or step 2's when the write was only held up (a stopped master continued by its launcher
    # finishes the commit): either way a complete checkpoint, which the resume below must load.
    if not m or int(m.group(1)) not in (1, 2):
        return f"latest names '{name}', not step 1's (or a completed step 2's) checkpoint"
    step = int(m.group(1))
    cmd = command("launch", braid, None, [JOB, "--set", f"checkpoint.dir={ckpt}", "--resume"])
    try:
        r = subprocess.run(cmd, env=run_env("launch", marker, "", os.path.join(os.path.dirname(ckpt), "trace")), capture_output=True, text=True, timeout=90,
                           cwd=ROOT)
    except subprocess.TimeoutExpired:
        return "the resume from the previous checkpoint did not end within 90 s"
    if r.returncode != 0 or f"resumed from {os.path.join(ckpt, name)} (step {step})" not in r.stdout + r.stderr:
        return f"the resume from the previous checkpoint failed (exit {r.returncode}): {r.stderr.strip()[-300:]}"
    return ""


def run_one(args, launcher, role, sig, phase):
    rank = RANK_OF[role]
    nth = NTH.get(phase, 1)
    fault = f"{phase}:{rank}:{sig}" + (f":{nth}" if nth != 1 else "")
    marker = uuid.uuid4().hex
    tmp = tempfile.mkdtemp(prefix="braid-faults-")
    ckpt = os.path.join(tmp, "ckpt")
    res = {"launcher": launcher, "role": role, "rank": rank, "signal": sig, "phase": phase, "fault": fault,
           "problems": [], "took": None, "named": 0, "survivors": WORLD - 1}
    out_path, err_path = os.path.join(tmp, "out.txt"), os.path.join(tmp, "err.txt")
    cmd = command(launcher, args.braid, args.mpiexec, [JOB, "--set", f"checkpoint.dir={ckpt}", "--set", "checkpoint.interval=1",
                                                       "--set", "checkpoint.keep=5"])
    start = time.time()
    with open(out_path, "w") as out, open(err_path, "w") as err:
        proc = subprocess.Popen(cmd, env=run_env(launcher, marker, fault, os.path.join(tmp, "trace")), stdout=out, stderr=err, cwd=ROOT,
                                start_new_session=True)
    t_fault = None
    hung = False
    while proc.poll() is None:
        time.sleep(0.1)
        if t_fault is None:
            with open(err_path, errors="replace") as f:
                m = FAULT_LINE.search(f.read())
            if m:
                t_fault = float(m.group(4))
        now = time.time()
        if (t_fault is None and now - start > REACH_BOUND_S) or (
                t_fault is not None and now - t_fault > TIMEOUT_S + SLACK_S + HANG_GRACE_S):
            hung = True
            kill_all(proc, marker)
            break
    t_end = time.time()
    with open(out_path, errors="replace") as f:
        stdout = f.read()
    with open(err_path, errors="replace") as f:
        stderr = f.read()
    if t_fault is None:
        m = FAULT_LINE.search(stderr)
        t_fault = float(m.group(4)) if m else None
    if t_fault is None:
        res["problems"].append("the fault was not reached")
    else:
        res["took"] = t_end - t_fault
        if hung:
            res["problems"].append(f"hung: still running {t_end - t_fault:.0f} s after the fault; killed")
        elif res["took"] > TIMEOUT_S + SLACK_S:
            res["problems"].append(f"ended {res['took']:.1f} s after the fault (bound {TIMEOUT_S + SLACK_S} s)")
    if not hung and proc.returncode == 0:
        res["problems"].append("the launcher exited 0")
    # Every process of the run is gone once the launcher is: give the kernel a moment to reap, then look.
    time.sleep(1.0)
    left = marked_pids(marker)
    if left:
        res["problems"].append(f"{len(left)} process(es) left behind: {left}")
        kill_all(proc, marker)
    ranks = per_rank_output(launcher, stdout + "\n" + stderr)
    unnamed = [r for r in range(WORLD) if r != rank and describe(rank) not in ranks[r]]
    res["named"] = WORLD - 1 - len(unnamed)
    if unnamed and t_fault is not None:
        res["problems"].append(f"not named ('{describe(rank)}') by rank(s) {unnamed}")
    if phase == "checkpoint" and t_fault is not None:
        problem = check_checkpoint(args.braid, ckpt, marker)
        if problem:
            res["problems"].append(problem)
        else:
            res["checkpoint"] = "previous checkpoint intact; the job resumes from it"
    res["outcome"] = "PASS" if not res["problems"] else "FAIL"
    if res["problems"] and args.keep:
        res["problems"].append(f"output in {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return res


def slurm_usable():
    if not os.environ.get("SLURM_CONF") or not shutil.which("srun"):
        return False
    r = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=20)
    return r.returncode == 0 and "UP" in r.stdout


def table(results):
    lines = ["| launcher | fault | role (rank) | phase | outcome | exit after fault | named by survivors | notes |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        took = f"{r['took']:.1f} s" if r["took"] is not None else "-"
        notes = "; ".join(r["problems"]) or r.get("checkpoint", "")
        launcher = "braid launch" if r["launcher"] == "launch" else r["launcher"]
        lines.append(f"| {launcher} | {'kill -9' if r['signal'] == 'kill' else 'SIGSTOP'} | {r['role']} ({r['rank']}) "
                     f"| {r['phase']} | {r['outcome']} | {took} | {r['named']}/{r['survivors']} | {notes} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("braid")
    ap.add_argument("--mpiexec", default=shutil.which("mpirun") or "mpirun")
    form = ap.add_mutually_exclusive_group()
    form.add_argument("--short", action="store_true", help="a handful of runs (the default)")
    form.add_argument("--full", action="store_true", help="every fault x role x phase x launcher")
    ap.add_argument("--launchers", default="launch,mpirun", help="comma-separated: launch, mpirun, slurm")
    ap.add_argument("--only", default="", help="run only the cases whose 'launcher/role/signal/phase' contains this")
    ap.add_argument("--table", help="write the results as a Markdown table to this file")
    ap.add_argument("--keep", action="store_true", help="keep the output of failed runs")
    args = ap.parse_args()
    args.braid = os.path.abspath(args.braid)
    launchers = [l for l in args.launchers.split(",") if l]
    if "slurm" in launchers and not slurm_usable():
        print("slurm: no usable cluster (SLURM_CONF unset or scontrol ping fails); its runs are skipped")
        launchers.remove("slurm")
    if args.full:
        cases = [(l, role, sig, phase) for l in launchers for role in RANK_OF for sig in SIGNALS
                 for phase in APPLIES[role]]
    else:
        cases = [c for c in SHORT if c[0] in launchers]
    cases = [c for c in cases if args.only in "/".join(c)]
    results = []
    for c in cases:
        r = run_one(args, *c)
        results.append(r)
        took = f"{r['took']:.1f} s" if r["took"] is not None else "-"
        print(f"{r['outcome']} {'/'.join(c)}: exit {took} after the fault, named by {r['named']}/{r['survivors']}"
              f"{'; ' + '; '.join(r['problems']) if r['problems'] else ''}", flush=True)
    passed = sum(r["outcome"] == "PASS" for r in results)
    print(f"fault matrix: {passed} of {len(results)} runs passed")
    if args.table:
        with open(args.table, "w") as f:
            f.write(table(results) + "\n")
    return 0 if results and passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
