#!/usr/bin/env python3
"""End-to-end tests of `braid run` under mpirun (docs/RUNTIME.md). Usage: run_e2e_test.py BRAID MPIEXEC CASE

Cases:
  hybrid           examples/hybrid/job.yaml --steps 3 --set optimizer.kind=none reproduces the gradients of
                   PyTorch's ddp_under_dist_autograd_test.py (tests/mp/dist_autograd/hybrid_reference.txt)
                   exactly for ddp.mode none, inside, outside and outside with data.uneven=true; and trains
                   for real (loss falls) with its own optimizer
  resume           6 steps in one run == 3 steps, SIGUSR1 (checkpoint and stop), --resume to 6: the same gradients
                   for steps 4-6 and bit-identical final checkpoints
  signal           SIGTERM to one rank's process: every rank logs the stop line and exits 0, checkpoint written
  kill             kill -9 of a trainer: every process ends within failure.timeout_s, naming the rank and role
  driver_dies      kill -9 of the driver of an env:// job: the other ranks' watchdogs end them within the bound
  status           `braid status` while a job runs: ranks, roles, state and step
  examples         the hybrid job and the digits job under braid launch (stated accuracy), the digits job from .npy
                   files (job_npy.yaml: the CSV job's accuracies exactly), the FSDP job under mpirun,
                   then digits under mpirun and FSDP under braid launch (shorter), FSDP hybrid_shard = full_shard
  errors           a bad job file, a bad --set, the wrong process count, no launcher: clear errors, nothing runs
Every subprocess has a timeout; a case prints what it checked and exits non-zero on the first failure."""
import glob
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
HYBRID = os.path.join(ROOT, "examples", "hybrid", "job.yaml")
LAUNCHER_VARS = ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "RANK",
                 "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "BRAID_LOG_LEVEL", "BRAID_LOG")


def env():
    e = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    e.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_rmaps_base_oversubscribe": "1"})
    return e


def mpirun(mpiexec, braid, n, args):
    return [mpiexec, "-np", str(n), "--oversubscribe", braid, "run"] + args


def launch(braid, n, args):
    return [braid, "launch", "-n", str(n), "--", braid, "run"] + args


def run(cmd, timeout=90):
    return subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=timeout)


def fail(what, r=None):
    print(f"FAIL {what}")
    if r is not None:
        print(f"--- exit {r.returncode}\n--- stdout\n{r.stdout[-4000:]}\n--- stderr\n{r.stderr[-6000:]}")
    sys.exit(1)


def expect(what, ok, r=None):
    if not ok:
        fail(what, r)
    print(f"ok   {what}")


def read_dump(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


# PyTorch's gradients of the hybrid job (tests/mp/dist_autograd/hybrid_reference.txt): ddp.mode none, per
# trainer.
NONE_FC1 = [[[-32, -16], [0, -16]], [[16, -16], [16, -16]], [[-16, 16], [-16, 16]], [[32, 16], [0, 16]]]
NONE_FC2 = [[[-56, -28, -28]], [[0, -28, -28]], [[0, 28, 28]], [[56, 28, 28]]]
ZERO_FC1 = [[0, 0], [0, 0]]
ZERO_FC2 = [[0, 0, 0]]


def expected(mode, rank, mb):
    """(fc1, fc2) gradients of trainer `rank`'s micro-batch `mb` in each step."""
    if mode == "none":
        return NONE_FC1[rank], NONE_FC2[rank]
    if mode == "inside":
        return NONE_FC1[rank], ZERO_FC2
    if mode == "outside":
        return ZERO_FC1, ZERO_FC2
    # outside, uneven under join: the first micro-batch has all four trainers, the second only trainers 2, 3
    if mb == 0:
        return [[0, 12], [0, 4]], [[0, 14, 14]]
    return [[2, -2], [-2, 2]], [[7, 0, 0]]


def case_hybrid(braid, mpiexec, tmp):
    for mode, sets in (("none", ["ddp.mode=none"]), ("inside", ["ddp.mode=inside"]), ("outside", ["ddp.mode=outside"]),
                       ("uneven", ["ddp.mode=outside", "data.uneven=true"])):
        dump = os.path.join(tmp, f"grads-{mode}.jsonl")
        args = [HYBRID, "--steps", "3", "--set", "optimizer.kind=none", "--dump-grads", dump]
        for s in sets:
            args += ["--set", s]
        r = run(mpirun(mpiexec, braid, 6, args))
        expect(f"hybrid {mode}: exit 0", r.returncode == 0, r)
        lines = read_dump(dump)
        per_step = 4 if mode != "uneven" else 6  # uneven: trainers 0, 1 one micro-batch, trainers 2, 3 two
        expect(f"hybrid {mode}: {3 * per_step} dump lines", len(lines) == 3 * per_step, r)
        for line in lines:
            fc1, fc2 = expected(mode, line["rank"], line["microbatch"])
            ok = line["grads"].get("fc1.weight") == fc1 and line["grads"].get("fc2.weight") == fc2
            if not ok:
                fail(f"hybrid {mode}: rank {line['rank']} step {line['step']} micro-batch {line['microbatch']}: "
                     f"got {line['grads']}, expected fc1 {fc1} fc2 {fc2}")
        expect(f"hybrid {mode}: every gradient is PyTorch's", True)
        if mode == "uneven":
            mbs = sorted((l["rank"], l["microbatch"]) for l in lines if l["step"] == 1)
            expect("hybrid uneven: trainers 0, 1 one micro-batch, 2, 3 two",
                   mbs == [(0, 0), (1, 0), (2, 0), (2, 1), (3, 0), (3, 1)])
    # Real training (examples/hybrid/train.yaml): the hybrid job's weighted_sum cancels over the trainers by
    # the data's symmetry (its mean is 0 at every step), so that job trains on the squared error.
    metrics = os.path.join(tmp, "metrics.jsonl")
    train = os.path.join(ROOT, "examples", "hybrid", "train.yaml")
    r = run(mpirun(mpiexec, braid, 6, [train, "--steps", "12", "--set", f"log.metrics={metrics}"]))
    expect("hybrid training: exit 0 with a progress line and a summary",
           r.returncode == 0 and "step 10/12 epoch 10/12 loss" in r.stdout and "done: 12 steps" in r.stdout, r)
    losses = [m["loss"] for m in read_dump(metrics) if "loss" in m]
    expect(f"hybrid training: 12 metrics records, loss falls ({losses[0]:.4f} -> {losses[-1]:.4f})",
           len(losses) == 12 and losses[-1] < losses[0], r)


def final_state_files(ckpt):
    with open(os.path.join(ckpt, "latest")) as f:
        step_dir = os.path.join(ckpt, f.read().strip())
    return step_dir, {os.path.basename(p): open(p, "rb").read() for p in sorted(glob.glob(os.path.join(step_dir, "*.brsd")))}


def start(cmd):
    return subprocess.Popen(cmd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_line(path, predicate, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if os.path.exists(path):
            lines = read_dump(path) if os.path.getsize(path) > 0 else []
            if predicate(lines):
                return True
        time.sleep(0.05)
    return False


def check_resume(braid, mpiexec, tmp, label, nranks, job_args, nfiles, sig=signal.SIGUSR1, launcher="mpirun"):
    """Stop a run by `sig` after step 3 or later, resume it 3 steps further, compare with an uninterrupted run.
    `launcher`: "mpirun" or "launch" (braid launch); both forward the signal to every rank."""
    start_cmd = (lambda n, args: mpirun(mpiexec, braid, n, args)) if launcher == "mpirun" else (
        lambda n, args: launch(braid, n, args))
    signame = signal.Signals(sig).name
    full_ckpt, part_ckpt = os.path.join(tmp, f"{label}-ckpt-full"), os.path.join(tmp, f"{label}-ckpt-part")
    full_dump, part_dump, resumed_dump = (os.path.join(tmp, f"{label}-{n}") for n in ("full.jsonl", "part.jsonl", "resumed.jsonl"))
    # The launcher forwards the signal to every rank: the driver finishes the step, checkpoints and stops everyone.
    p = start(start_cmd(nranks, job_args + ["--steps", "1000", "--set", f"checkpoint.dir={part_ckpt}",
                                                        "--dump-grads", part_dump]))
    expect(f"{label}: the run reaches step 3", wait_for_line(part_dump, lambda ls: any(l["step"] >= 3 for l in ls), 60))
    p.send_signal(sig)
    out, err = p.communicate(timeout=60)
    r = subprocess.CompletedProcess(p.args, p.returncode, out, err)
    expect(f"{label}: {signame} to {launcher} stops the job, every rank exits 0 and logs the stop line",
           p.returncode == 0 and (err + out).count(f"stopping on {signame} after step") >= nranks, r)
    with open(os.path.join(part_ckpt, "latest")) as f:
        stopped = int(f.read().strip().split("-")[1])
    total = stopped + 3
    expect(f"{label}: stopped after step {stopped}; both runs go to step {total}", stopped >= 3, r)
    r = run(start_cmd(nranks, job_args + ["--steps", str(total), "--resume", "--set",
                                                      f"checkpoint.dir={part_ckpt}", "--dump-grads", resumed_dump]))
    expect(f"{label}: the resumed run finishes", r.returncode == 0 and "resumed from" in r.stderr + r.stdout, r)
    r = run(start_cmd(nranks, job_args + ["--steps", str(total), "--set", f"checkpoint.dir={full_ckpt}",
                                                      "--dump-grads", full_dump]))
    expect(f"{label}: the uninterrupted run", r.returncode == 0 and f"done: {total} steps" in r.stdout, r)
    full = {(l["rank"], l["step"], l["microbatch"]): l for l in read_dump(full_dump)}
    resumed = read_dump(resumed_dump)
    expect(f"{label}: the resumed run did steps {stopped + 1}..{total}",
           sorted({l["step"] for l in resumed}) == list(range(stopped + 1, total + 1)), r)
    expect(f"{label}: its gradients and losses equal the uninterrupted run's, bit for bit",
           all(full[(l["rank"], l["step"], l["microbatch"])] == l for l in resumed))
    fd, fs = final_state_files(full_ckpt)
    pd, ps = final_state_files(part_ckpt)
    expect(f"{label}: the final checkpoints ({os.path.basename(fd)}, {len(fs)} rank files) are identical byte for "
           "byte", os.path.basename(fd) == os.path.basename(pd) and fs == ps and len(fs) == nfiles)


def case_resume(braid, mpiexec, tmp):
    # A trainers-only job with Adam (optimizer state) on synthetic data: 4 trainers under DDP.
    job = os.path.join(tmp, "dp.yaml")
    with open(job, "w") as f:
        f.write("roles: {trainers: 4}\nmodel: {kind: mlp, args: {in: 16, hidden: [8], out: 4}}\nloss: cross_entropy\n"
                "data: {kind: synthetic, num_samples: 256, num_features: 16, num_classes: 4}\n"
                "optimizer: {kind: adam, lr: 0.01}\ntrain: {epochs: 1, batch_size: 8}\n"
                "log: {interval: 1}\nfailure: {timeout_s: 20, heartbeat_s: 1}\n")
    check_resume(braid, mpiexec, tmp, "data parallel, adam", 4, [job], 4)
    # The hybrid parameter-server model with Adam: the remote parts on the worker are updated by every
    # trainer's DistributedOptimizer, in the order the worker keeps; the Adam state of those optimizers (on the
    # worker) is saved with each trainer.
    # Stopped by SIGTERM to braid launch this time (the "resume after SIGTERM").
    check_resume(braid, mpiexec, tmp, "hybrid, adam", 6,
                 [HYBRID, "--set", "loss=mse", "--set", "optimizer.kind=adam", "--set", "optimizer.lr=0.01"], 5,
                 sig=signal.SIGTERM, launcher="launch")


def rank_pids(mpirun_pid):
    """{rank: pid} of the braid processes mpirun started (children of mpirun, by OMPI_COMM_WORLD_RANK)."""
    pids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid != mpirun_pid:
                continue
            with open(f"/proc/{d}/environ", "rb") as f:
                env_vars = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
            if b"OMPI_COMM_WORLD_RANK" in env_vars:
                pids[int(env_vars[b"OMPI_COMM_WORLD_RANK"])] = int(d)
        except (OSError, ValueError, IndexError):
            continue
    return pids


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def start_hybrid(braid, mpiexec, tmp, extra):
    dump = os.path.join(tmp, "progress.jsonl")
    p = start(mpirun(mpiexec, braid, 6, [HYBRID, "--steps", "100000", "--set", "loss=mse", "--set",
                                         f"log.metrics={dump}"] + extra))
    expect("the job runs (step 3 reached)", wait_for_line(dump, lambda ls: len(ls) >= 3, 60))
    pids = rank_pids(p.pid)
    expect(f"six ranks found under mpirun: {sorted(pids)}", sorted(pids) == list(range(6)))
    return p, pids


def case_kill(braid, mpiexec, tmp):
    timeout_s = 10
    p, pids = start_hybrid(braid, mpiexec, tmp, ["--set", f"failure.timeout_s={timeout_s}", "--set", "failure.heartbeat_s=1"])
    killed = time.time()
    os.kill(pids[2], signal.SIGKILL)
    out, err = p.communicate(timeout=timeout_s + 30)
    took = time.time() - killed
    r = subprocess.CompletedProcess(p.args, p.returncode, out, err)
    expect(f"kill -9 of trainer rank 2: the job ends in {took:.1f} s (bound {timeout_s} s) with a non-zero exit",
           p.returncode != 0 and took < timeout_s, r)
    expect("the driver names the failed rank and role", "rank 2 (trainer) failed" in err, r)
    time.sleep(0.5)
    left = [r for r, pid in pids.items() if alive(pid)]
    expect(f"no process left behind (alive: {left})", not left)


def case_signal(braid, mpiexec, tmp):
    ckpt = os.path.join(tmp, "ckpt")
    p, pids = start_hybrid(braid, mpiexec, tmp, ["--set", f"checkpoint.dir={ckpt}"])
    # SIGTERM to one rank's process (a worker): it tells the driver, which checkpoints and stops everyone.
    os.kill(pids[4], signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    r = subprocess.CompletedProcess(p.args, p.returncode, out, err)
    expect("SIGTERM to rank 4: every rank exits 0", p.returncode == 0, r)
    lines = [l for l in err.splitlines() if "stopping on SIGTERM after step" in l]
    expect(f"every rank logs the stop line ({len(lines)} of 6)", len(lines) >= 6, r)
    step_dir, files = final_state_files(ckpt)
    expect(f"the checkpoint the stop line names is complete: {os.path.basename(step_dir)} with meta.json and "
           f"{sorted(files)}", os.path.exists(os.path.join(step_dir, "meta.json")) and step_dir in lines[0]
           and sorted(files) == [f"rank-{r}.brsd" for r in range(5)], r)
    # SIGTERM to mpirun: Open MPI (4.1) forwards it to every rank, which checkpoint and stop as above; mpirun
    # itself then exits 1 whatever the ranks did, so only the ranks' side is checked.
    tmp2 = os.path.join(tmp, "mpirun")
    os.makedirs(tmp2)
    ckpt2 = os.path.join(tmp2, "ckpt")
    p, pids = start_hybrid(braid, mpiexec, tmp2, ["--set", f"checkpoint.dir={ckpt2}"])
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    r = subprocess.CompletedProcess(p.args, p.returncode, out, err)
    lines = [l for l in err.splitlines() if "stopping on SIGTERM after step" in l]
    step_dir, files = final_state_files(ckpt2)
    expect(f"SIGTERM to mpirun: the ranks stop on it ({len(lines)} stop lines) after a complete checkpoint",
           len(lines) >= 6 and os.path.exists(os.path.join(step_dir, "meta.json")) and len(files) == 5, r)


def case_status(braid, mpiexec, tmp):
    # A copy of the hybrid job in tmp: its default status_file, .braid-status-hybrid, lands next to it.
    job = os.path.join(tmp, "job.yaml")
    with open(HYBRID) as src, open(job, "w") as dst:
        dst.write(src.read())
    status_file = os.path.join(tmp, ".braid-status-hybrid")
    metrics = os.path.join(tmp, "progress.jsonl")
    p = start(mpirun(mpiexec, braid, 6, [job, "--steps", "100000", "--set", f"log.metrics={metrics}"]))
    try:
        expect("the job runs (step 3 reached)", wait_for_line(metrics, lambda ls: len(ls) >= 3, 60))
        with open(status_file) as f:
            addr = f.readline().strip()  # the second line is the job secret (mode 0600)
        expect("the status file is readable by its owner only", os.stat(status_file).st_mode & 0o077 == 0)
        r = run([braid, "status", job], timeout=30)
        expect(f"braid status JOB.yaml finds the driver at {addr} through the job's status_file",
               r.returncode == 0 and r.stdout.startswith("job hybrid"), r)
        r = run([braid, "status", "--addr", addr, "--json"], timeout=30)
        expect(f"braid status --addr {addr} --json answers", r.returncode == 0, r)
        s = json.loads(r.stdout)
        roles = [x["role"] for x in s["ranks"]]
        expect(f"status: job hybrid, state training, 6 ranks with their roles ({roles})",
               s["job"] == "hybrid" and s["state"] == "training" and s["step"] >= 3
               and roles == ["trainer"] * 4 + ["worker", "master"], r)
        time.sleep(1.5)  # a heartbeat round (heartbeat_s 1 in the job file)
        r = run([braid, "status", "--addr", addr], timeout=30)
        rows = [l for l in r.stdout.splitlines()[2:] if l.strip()]
        expect("status table: a line per rank, each heard within the last few seconds",
               r.returncode == 0 and len(rows) == 6 and all(" s ago" in l for l in rows), r)
        # --trace: every rank dumps its flight recorder beside the job file, and the analyzer reads them (a
        # running job may be caught inside an op, so a "hang" verdict is allowed here).
        trace_dir = os.path.join(tmp, "braid-trace-hybrid")
        r = run([braid, "status", job, "--trace"], timeout=60)
        files = re.findall(r"^rank +(\d+): (\S+\.json)$", r.stdout, re.M)
        expect(f"braid status --trace: a dump per rank in {trace_dir}",
               r.returncode == 0 and sorted(int(x) for x, _ in files) == list(range(6))
               and all(os.path.dirname(f) == trace_dir and os.path.exists(f) for _, f in files), r)
        r = run([braid, "trace", "analyze", trace_dir], timeout=60)
        expect("braid trace analyze reads every rank's dump", r.returncode in (0, 1)
               and "group 'world' (6 ranks" in r.stdout and "read 6 of 6 dump file(s)" in r.stdout, r)
    finally:
        p.send_signal(signal.SIGUSR1)
        out, err = p.communicate(timeout=60)
    expect("the job stops on SIGUSR1 and removes its status file", p.returncode == 0 and not os.path.exists(status_file),
           subprocess.CompletedProcess(p.args, p.returncode, out, err))
    r = run([braid, "status", "--addr", addr], timeout=30)
    expect("braid status of a stopped job fails with a clear error", r.returncode != 0 and "status:" in r.stderr, r)


def case_driver_dies(braid, mpiexec, tmp):
    # env:// without a launcher that ends the job for us (mpirun would kill every rank as soon as one dies): the
    # ranks' own watchdogs must end them.
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    timeout_s = 5
    metrics = os.path.join(tmp, "progress.jsonl")
    procs = []
    for rank in range(6):
        e = env()
        e.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank), "WORLD_SIZE": "6"})
        procs.append(subprocess.Popen([braid, "run", HYBRID, "--steps", "100000", "--set", "loss=mse", "--set",
                                       f"failure.timeout_s={timeout_s}", "--set", "failure.heartbeat_s=1", "--set",
                                       f"log.metrics={metrics}"], env=e, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    try:
        expect("the env:// job runs (step 3 reached)", wait_for_line(metrics, lambda ls: len(ls) >= 3, 60))
        killed = time.time()
        procs[5].kill()
        results = []
        for p in procs[:5]:
            out, err = p.communicate(timeout=timeout_s + 30)
            results.append((p.returncode, err, time.time() - killed))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    slowest = max(t for _, _, t in results)
    expect(f"kill -9 of the driver (rank 5, master): every other rank exits 1 within {slowest:.1f} s (bound "
           f"{timeout_s} s)", all(rc == 1 for rc, _, _ in results) and slowest < timeout_s + 0.5)
    # Acted on at once: the broken RPC connection names the dead driver, not the watchdog's timeout.
    named = [("rank 5 (master) died" in err) for _, err, _ in results]
    expect(f"each names the driver's rank and role as dead ({sum(named)} of 5)", all(named))


def case_errors(braid, mpiexec, tmp):
    bad = os.path.join(tmp, "bad.yaml")
    with open(bad, "w") as f:
        f.write("roles: {trainers: 2}\nmodel: {kind: mlp}\ntrain: {batchsize: 4}\n")
    t0 = time.time()
    r = run(mpirun(mpiexec, braid, 2, [bad]), timeout=60)
    expect(f"a bad job file: every rank fails at once ({time.time() - t0:.1f} s) naming the file and key",
           r.returncode != 0 and "bad.yaml:3: train.batchsize: unknown key" in r.stderr and "training" not in r.stderr, r)
    r = run(mpirun(mpiexec, braid, 6, [HYBRID, "--set", "model.args.nope=1"]), timeout=60)
    expect("a bad --set: the model's argument named", r.returncode != 0 and "model.args" in r.stderr and "nope" in r.stderr, r)
    r = run(mpirun(mpiexec, braid, 4, [HYBRID]), timeout=60)
    expect("the wrong number of processes: the roles and the launcher's count named",
           r.returncode != 0 and "the job's roles name 6 rank(s)" in r.stderr and "the launcher started 4" in r.stderr, r)
    r = run(mpirun(mpiexec, braid, 6, [HYBRID, "--resume"]), timeout=60)
    expect("--resume without checkpoint.dir: said before anything starts",
           r.returncode != 0 and "--resume" in r.stderr and "checkpoint.dir" in r.stderr and "training" not in r.stderr, r)
    r = run([braid, "run", HYBRID], timeout=60)
    expect("no launcher: exit 2, how to start it", r.returncode == 2 and "needs 6 processes" in r.stderr, r)
    # A CUDA role on a host without a GPU: every rank on CUDA stops before any rendezvous, naming itself.
    if not json.loads(run([braid, "info", "--json"]).stdout)["devices"]["cuda"]:
        t0 = time.time()
        r = run(mpirun(mpiexec, braid, 6, [HYBRID, "--set", "devices.trainers=cuda"]), timeout=60)
        expect(f"devices.trainers cuda without a GPU: refused at once ({time.time() - t0:.1f} s), the rank and role named",
               r.returncode != 0 and "the job asks for device cuda on rank 0 (trainer), but this host has no CUDA "
               "device" in r.stderr and "training" not in r.stderr, r)
    # --resume from a checkpoint of another model (the FSDP example's, 32 inputs, into digits' 64, which
    # reshards it as it is not sharded the same way): the file read and the mismatch named, and the
    # checkpoint left as it was.
    ckpt = os.path.join(tmp, "other-model")
    fsdp = os.path.join(ROOT, "examples", "fsdp", "job.yaml")
    r = run(mpirun(mpiexec, braid, 4, [fsdp, "--steps", "2", "--set", f"checkpoint.dir={ckpt}",
                                       "--set", "checkpoint.interval=2"]), timeout=120)
    expect("an FSDP checkpoint written", r.returncode == 0 and os.path.isdir(os.path.join(ckpt, "step-00000002")), r)
    before = sorted(os.listdir(os.path.join(ckpt, "step-00000002")))
    digits = os.path.join(ROOT, "examples", "digits", "job.yaml")
    r = run(mpirun(mpiexec, braid, 4, [digits, "--steps", "4", "--set", f"checkpoint.dir={ckpt}", "--resume"]), timeout=120)
    rank0_file = os.path.join(ckpt, "step-00000002", "rank-0.brsd")
    expect("--resume from another model's checkpoint: the file and the size mismatch named, the checkpoint kept",
           r.returncode != 0 and rank0_file in r.stderr and "'model.0.weight'" in r.stderr
           and "neither shards of it nor copies" in r.stderr
           and "another model" in r.stderr and sorted(os.listdir(os.path.join(ckpt, "step-00000002"))) == before, r)


def case_examples(braid, mpiexec, tmp):
    # The hybrid job under braid launch (env://, no MPI): the same gradients as under mpirun.
    dump = os.path.join(tmp, "launch-grads.jsonl")
    r = run([braid, "launch", "-n", "6", "--", braid, "run", HYBRID, "--steps", "3", "--set", "optimizer.kind=none",
             "--set", "ddp.mode=none", "--dump-grads", dump], timeout=120)
    expect("braid launch -n 6 -- braid run examples/hybrid/job.yaml: exit 0", r.returncode == 0, r)
    lines = read_dump(dump)
    expect(f"under braid launch: PyTorch's ddp.mode=none gradients ({len(lines)} lines)", len(lines) == 12 and all(
        l["grads"] == {"fc1.weight": NONE_FC1[l["rank"]], "fc2.weight": NONE_FC2[l["rank"]]} for l in lines), r)
    # The digits classifier: its stated test accuracy (examples/digits/job.yaml: >= 0.95 after 20 epochs).
    metrics = os.path.join(tmp, "digits.jsonl")
    r = run([braid, "launch", "-n", "4", "--", braid, "run", os.path.join(ROOT, "examples", "digits", "job.yaml"),
             "--set", f"log.metrics={metrics}"], timeout=200)
    evals = [m for m in read_dump(metrics) if "eval_accuracy" in m] if os.path.exists(metrics) else []
    expect(f"digits under braid launch: 20 evaluations, final test accuracy {evals[-1]['eval_accuracy'] if evals else '?'}"
           " >= 0.95", r.returncode == 0 and len(evals) == 20 and evals[-1]["eval_accuracy"] >= 0.95, r)
    # The same job from .npy files (examples/digits/job_npy.yaml, data.kind npy): the same features bit for bit,
    # so the same evaluations as the CSV job, and the summary line states the accuracy.
    csv_accuracies = [m["eval_accuracy"] for m in evals]
    metrics = os.path.join(tmp, "digits-npy.jsonl")
    r = run([braid, "launch", "-n", "4", "--", braid, "run", os.path.join(ROOT, "examples", "digits", "job_npy.yaml"),
             "--set", f"log.metrics={metrics}"], timeout=200)
    evals = [m for m in read_dump(metrics) if "eval_accuracy" in m] if os.path.exists(metrics) else []
    done = re.search(r"done: .*test accuracy (\d+\.\d+)%", r.stdout + r.stderr)
    expect(f"digits from .npy under braid launch: 20 evaluations, final test accuracy "
           f"{evals[-1]['eval_accuracy'] if evals else '?'} >= 0.95 (summary: {done.group(1) + '%' if done else '?'}), "
           "every evaluation equal to the CSV job's",
           r.returncode == 0 and len(evals) == 20 and evals[-1]["eval_accuracy"] >= 0.95 and done is not None
           and float(done.group(1)) >= 95.0 and [m["eval_accuracy"] for m in evals] == csv_accuracies, r)
    # The FSDP job under mpirun, one epoch: the loss falls.
    metrics = os.path.join(tmp, "fsdp.jsonl")
    r = run(mpirun(mpiexec, braid, 4, [os.path.join(ROOT, "examples", "fsdp", "job.yaml"), "--set", "train.epochs=1",
                                       "--set", f"log.metrics={metrics}"]), timeout=200)
    losses = [m["loss"] for m in read_dump(metrics) if "loss" in m] if os.path.exists(metrics) else []
    expect(f"fsdp job: one epoch ({len(losses)} steps), loss falls" + (f" {losses[0]:.3f} -> {losses[-1]:.3f}" if losses else ""),
           r.returncode == 0 and len(losses) == 32 and losses[-1] < losses[0], r)
    # Each job under the other launcher too, shorter: digits under mpirun, FSDP under braid launch.
    metrics = os.path.join(tmp, "digits-mpirun.jsonl")
    r = run(mpirun(mpiexec, braid, 4, [os.path.join(ROOT, "examples", "digits", "job.yaml"), "--set", "train.epochs=2",
                                       "--set", f"log.metrics={metrics}"]), timeout=200)
    evals = [m for m in read_dump(metrics) if "eval_accuracy" in m] if os.path.exists(metrics) else []
    expect(f"digits under mpirun: 2 epochs, test accuracy {evals[-1]['eval_accuracy'] if evals else '?'} >= 0.8",
           r.returncode == 0 and len(evals) == 2 and evals[-1]["eval_accuracy"] >= 0.8, r)
    metrics = os.path.join(tmp, "fsdp-launch.jsonl")
    r = run([braid, "launch", "-n", "4", "--", braid, "run", os.path.join(ROOT, "examples", "fsdp", "job.yaml"),
             "--steps", "16", "--set", f"log.metrics={metrics}"], timeout=200)
    losses = [m["loss"] for m in read_dump(metrics) if "loss" in m] if os.path.exists(metrics) else []
    expect(f"fsdp job under braid launch: 16 steps, loss falls" + (f" {losses[0]:.3f} -> {losses[-1]:.3f}" if losses else ""),
           r.returncode == 0 and len(losses) == 16 and losses[-1] < losses[0], r)
    # hybrid_shard (shard groups of 2, replicated across the 2 groups) averages the same gradients as full_shard.
    runs = {}
    for label, sets in (("full_shard", ["--set", "fsdp.sharding_strategy=full_shard"]),
                        ("hybrid_shard", ["--set", "fsdp.sharding_strategy=hybrid_shard", "--set", "fsdp.shard_group_size=2"])):
        metrics = os.path.join(tmp, f"fsdp-{label}.jsonl")
        r = run(mpirun(mpiexec, braid, 4, [os.path.join(ROOT, "examples", "fsdp", "job.yaml"), "--steps", "8",
                                           "--set", f"log.metrics={metrics}"] + sets), timeout=200)
        expect(f"fsdp job with {label}: exit 0", r.returncode == 0, r)
        runs[label] = [m["loss"] for m in read_dump(metrics) if "loss" in m] if os.path.exists(metrics) else []
    a, b = runs["full_shard"], runs["hybrid_shard"]
    expect(f"hybrid_shard's losses equal full_shard's over 8 steps (last {b[-1] if b else '?'} vs {a[-1] if a else '?'})",
           len(a) == 8 and len(b) == 8 and all(abs(x - y) <= 1e-5 * max(1.0, abs(x)) for x, y in zip(a, b)))


def main():
    braid, mpiexec, case = sys.argv[1], sys.argv[2], sys.argv[3]
    with tempfile.TemporaryDirectory(prefix=f"braid-e2e-{case}-") as tmp:
        {"hybrid": case_hybrid, "resume": case_resume, "kill": case_kill, "signal": case_signal, "status": case_status, "driver_dies": case_driver_dies, "errors": case_errors, "examples": case_examples}[case](braid, mpiexec, tmp)
    print(f"PASS {case}")


if __name__ == "__main__":
    main()
