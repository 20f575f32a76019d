#!/usr/bin/env python3
"""Jobs that restart themselves after a failure (docs/RUNTIME.md, "Fault tolerance"), under braid launch.

Usage: restart_test.py BRAID CASE

Cases:
  restart    the 4-rank hybrid job (two trainers, a worker with the remote parts, a master) with
             --max-restarts 2: the worker killed (kill -9) mid-job in the first run and a trainer in the
             second; the job completes, each restart is logged with its number, rank, role and cause, and
             the runs after a restart resume from the latest checkpoint. Then: restarts exhausted (the
             failed rank's code, "no restart left"), failure.max_restarts from the job file (--set), a
             bad --set (exit code 2) not restarted
  identical  a DDP job with dropout, Adam and PowerSGD (error feedback, warm start) over 3 trainers and a
             master, a checkpoint after every step: a random rank is killed (kill -9) at a random step in
             each of 3 runs, the job restarts each time, and its final weights are bit-identical to those
             of a run that was never stopped (hash of `braid export`'s tensors). The seed of the random
             choice is printed; RESTART_TEST_SEED=N repeats a choice

  resize     a DDP job resumed on another number of trainers, 4 -> 2 -> 3: each resume says so, and the
             first epoch's samples are each read once across the three runs (docs/RUNTIME.md's rule);
             then a checkpoint file cut in half, and one with a byte flipped: the resume fails naming the
             file and the damage, and changes no file
  reshard    an FSDP job (Adam) resumed from sharded checkpoints on 4 -> 2 -> 3 trainers, then as DDP,
             as hybrid_shard and as full_shard again: every trainer reshards, reading only the saved files
             that hold its rows; then a trainer count hybrid_shard's groups cannot tile (refused with the
             job file) and a shard's file missing: the resume fails naming it
  parts      the hybrid job's remote parts moved from workers 2 and 3 to worker 2 alone, then swapped:
             their state follows them, and the moved run's tensors are bit-identical to an unmoved run's

Every subprocess has a timeout; a case prints what it checked and exits non-zero on the first failure."""
import hashlib
import json
import os
import random
import re
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
FAULTS_JOB = os.path.join(ROOT, "tests", "faults", "job.yaml")
LAUNCHER_VARS = ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "RANK",
                 "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "BRAID_LOG_LEVEL", "BRAID_LOG", "BRAID_FAULT",
                 "BRAID_RESTART_COUNT", "SLURM_RESTART_COUNT")

# 3 trainers under DDP with PowerSGD and dropout, a master that drives: every piece of state a resume must
# carry (generator, Adam's moments, PowerSGD's memory, DDP's rebuilt buckets) changes the result.
IDENTICAL_JOB = """\
name: restart-identical
backend: gloo
rpc: {transport: tcp, timeout_s: 30}
roles: {trainers: [0, 1, 2], master: 3}
model: {kind: mlp, args: {in: 16, hidden: [48, 32], out: 4, dropout: 0.25}, init_seed: 5}
data: {kind: synthetic, num_samples: 240, num_features: 16, num_classes: 4, seed: 3}
optimizer: {kind: adam, lr: 0.01}
ddp:
  mode: outside
  bucket_cap_mb: 0.002
  comm_hook: {kind: powersgd, args: {start_powersgd_iter: 3, matrix_approximation_rank: 2}}
train: {steps: 14, batch_size: 8, seed: 11}
log: {level: info, interval: 1}
failure: {timeout_s: 10, heartbeat_s: 1}
"""
IDENTICAL_STEPS = 14


def env(extra=None):
    e = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    e.update(extra or {})
    return e


def run(cmd, extra_env=None, timeout=150):
    return subprocess.run(cmd, env=env(extra_env), capture_output=True, text=True, timeout=timeout)


def fail(what, r=None):
    print(f"FAIL {what}")
    if r is not None:
        print(f"--- exit {r.returncode}\n--- stdout\n{r.stdout[-4000:]}\n--- stderr\n{r.stderr[-8000:]}")
    sys.exit(1)


def expect(what, ok, r=None):
    if not ok:
        fail(what, r)
    print(f"ok   {what}")


def launch(braid, n, launch_args, run_args):
    return [braid, "launch", "-n", str(n)] + launch_args + ["--", braid, "run"] + run_args


def launcher_lines(r):
    return [l for l in r.stderr.splitlines() if l.startswith("braid launch: ")]


def case_restart(braid, tmp):
    ckpt = os.path.join(tmp, "ckpt")
    base = [FAULTS_JOB, "--steps", "8", "--set", f"checkpoint.dir={ckpt}", "--set", "checkpoint.interval=1"]
    # The worker serves 4 forwards a step: it dies in step 4 of the first run; trainer 1 at its 3rd step of the
    # second. Checkpoints are asynchronous, and each one is committed before the next begins: by step 4 (and
    # by the third step of a run) one has been.
    faults = {"BRAID_FAULT": "forward:2:kill:13:0,forward:1:kill:3:1", "BRAID_TRACE_DIR": os.path.join(tmp, "trace")}
    r = run(launch(braid, 4, ["--max-restarts", "2", "--restart-backoff", "0.2"], base), faults)
    lines = launcher_lines(r)
    expect("two failures, two restarts: the job completes (exit 0)", r.returncode == 0 and "done: 8 steps" in r.stdout, r)
    expect("restart 1 names the worker, its role and why",
           any(l == "braid launch: restart 1 of 2 in 0.2 s: rank 2 (worker) killed by SIGKILL" for l in lines), r)
    expect("restart 2 names the trainer, its role and why",
           any(l == "braid launch: restart 2 of 2 in 0.2 s: rank 1 (trainer) killed by SIGKILL" for l in lines), r)
    resumed = [l for l in r.stderr.splitlines() if "resumed from" in l]
    expect("each restarted run resumes from the latest checkpoint, saying which restart it is",
           any("restart 1: resumed from" in l for l in resumed) and any("restart 2: resumed from" in l for l in resumed), r)
    with open(os.path.join(ckpt, "latest")) as f:
        expect("the last checkpoint is the job's last step", f.read().strip() == "step-00000008")

    # One restart allowed, two failures: the second one ends the launcher with the failed rank's code.
    ckpt2 = os.path.join(tmp, "ckpt2")
    base2 = [FAULTS_JOB, "--steps", "8", "--set", f"checkpoint.dir={ckpt2}", "--set", "checkpoint.interval=1"]
    r = run(launch(braid, 4, ["--max-restarts", "1", "--restart-backoff", "0"], base2), faults)
    expect("restarts exhausted: exit 137 (SIGKILL), 'no restart left' naming the last failure",
           r.returncode == 137 and any("rank 1 (trainer) killed by SIGKILL; no restart left (1 of 1 done)" in l
                                      for l in launcher_lines(r)), r)

    # The job file's failure.max_restarts (here through --set) is what braid launch uses without the flag.
    ckpt3 = os.path.join(tmp, "ckpt3")
    r = run(launch(braid, 4, [], [FAULTS_JOB, "--steps", "6", "--set", f"checkpoint.dir={ckpt3}", "--set",
                                  "checkpoint.interval=1", "--set", "failure.max_restarts=1", "--set",
                                  "failure.backoff_s=0.1"]),
            {"BRAID_FAULT": "forward:2:kill:3:0", "BRAID_TRACE_DIR": os.path.join(tmp, "trace")})
    expect("failure.max_restarts in the job file: restarted once, completes",
           r.returncode == 0 and any(l.startswith("braid launch: restart 1 of 1 in 0.1 s: rank 2 (worker)")
                                     for l in launcher_lines(r)), r)

    # A bad job file (exit code 2) is not restarted: no restart can mend it.
    r = run(launch(braid, 4, ["--max-restarts", "3"], [FAULTS_JOB, "--set", "optimizer.kind=nope"]), timeout=60)
    expect("exit code 2 (a bad --set) is not restarted",
           r.returncode == 2 and not any("restart 1" in l for l in launcher_lines(r))
           and any("not restarting: exit code 2" in l for l in launcher_lines(r)), r)


def weights_digest(braid, ckpt, tmp, label):
    """sha256 over the tensors (names, dtypes, shapes, bytes) of `braid export`, without its metadata, which
    names the checkpoint directory."""
    out = os.path.join(tmp, f"{label}.safetensors")
    r = run([braid, "export", ckpt, "-o", out], timeout=60)
    expect(f"{label}: braid export reads the final checkpoint", r.returncode == 0, r)
    with open(out, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    h = hashlib.sha256(json.dumps(header, sort_keys=True).encode())
    h.update(data[8 + n:])
    return h.hexdigest(), len(header)


def case_identical(braid, tmp):
    job = os.path.join(tmp, "job.yaml")
    with open(job, "w") as f:
        f.write(IDENTICAL_JOB)
    seed = int(os.environ.get("RESTART_TEST_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    # Three kills at distinct steps, each in its own run. A run resumes from the checkpoint of the step before
    # the one that was killed (a checkpoint follows every step), so its n-th forward is step resumed + n.
    steps = sorted(rng.sample(range(2, IDENTICAL_STEPS), 3))
    ranks = [rng.randrange(4) for _ in steps]
    faults, resumed = [], 0
    for run_index, (step, rank) in enumerate(zip(steps, ranks)):
        faults.append(f"forward:{rank}:kill:{step - resumed}:{run_index}")
        resumed = step - 1
    print(f"seed {seed}: kill -9 of rank {ranks} at steps {steps} (BRAID_FAULT={','.join(faults)})")

    full_ckpt, cut_ckpt = os.path.join(tmp, "full"), os.path.join(tmp, "cut")
    args = lambda ckpt: [job, "--set", f"checkpoint.dir={ckpt}", "--set", "checkpoint.interval=1"]
    trace = {"BRAID_TRACE_DIR": os.path.join(tmp, "trace")}
    r = run(launch(braid, 4, [], args(full_ckpt)), trace)
    expect("the uninterrupted run completes", r.returncode == 0 and f"done: {IDENTICAL_STEPS} steps" in r.stdout, r)
    r = run(launch(braid, 4, ["--max-restarts", "3", "--restart-backoff", "0"], args(cut_ckpt)),
            dict(trace, BRAID_FAULT=",".join(faults)), timeout=300)
    restarts = [l for l in launcher_lines(r) if l.startswith("braid launch: restart ")]
    expect("the run killed 3 times restarts 3 times and completes",
           r.returncode == 0 and len(restarts) == 3 and f"done: {IDENTICAL_STEPS} steps" in r.stdout, r)
    for i, (step, rank) in enumerate(zip(steps, ranks)):
        role = "master" if rank == 3 else "trainer"
        expect(f"restart {i + 1} names rank {rank} ({role}), killed aiming at step {step}",
               f"rank {rank} ({role}) killed by SIGKILL" in restarts[i], r)
    full, n_full = weights_digest(braid, full_ckpt, tmp, "uninterrupted")
    cut, n_cut = weights_digest(braid, cut_ckpt, tmp, "restarted")
    expect(f"the final weights are bit-identical ({n_full} tensors, sha256 {full[:16]}...)", full == cut and n_full == n_cut)


RESIZE_JOB = """\
name: restart-resize
backend: gloo
rpc: {transport: tcp, timeout_s: 30}
roles: {trainers: [0, 1, 2, 3]}
model: {kind: mlp, args: {in: 16, hidden: [32], out: 4, dropout: 0.1}, init_seed: 2}
data: {kind: synthetic, num_samples: 240, num_features: 16, num_classes: 4, seed: 4}
optimizer: {kind: sgd, lr: 0.05, momentum: 0.9}
ddp: {mode: outside}
train: {batch_size: 5, seed: 9}
log: {level: info, interval: 1}
failure: {timeout_s: 10, heartbeat_s: 1}
"""


def case_resize(braid, tmp):
    """4 trainers for 3 steps, --resume on 2 for 2 more, --resume on 3 to step 20: the first epoch's 240
    samples are each read once (the 2 padded of the 3-trainer part apart), none twice."""
    job = os.path.join(tmp, "job.yaml")
    with open(job, "w") as f:
        f.write(RESIZE_JOB)
    ckpt = os.path.join(tmp, "ckpt")
    debug = {"BRAID_LOG_LEVEL": "info,braid.data=debug", "BRAID_TRACE_DIR": os.path.join(tmp, "trace")}
    samples = {}  # epoch -> list of sample indices read
    runs = [(4, "[0, 1, 2, 3]", 3, []), (2, "[0, 1]", 5, ["--resume"]), (3, "[0, 1, 2]", 20, ["--resume"])]
    for n, trainers, steps, extra in runs:
        r = run(launch(braid, n, [], [job, "--steps", str(steps), "--set", f"roles.trainers={trainers}", "--set",
                                     f"checkpoint.dir={ckpt}"] + extra), debug)
        expect(f"{n} trainers: the run ends at step {steps}", r.returncode == 0 and f"done: {steps} steps" in r.stdout, r)
        if extra:
            expect(f"{n} trainers: resumed from the checkpoint of the run before, saying it was saved by another count",
                   "on {} trainers; it was saved by".format(n) in r.stderr, r)
        for line in r.stderr.splitlines():
            m = re.search(r"step (\d+) \(epoch (\d+)\): samples ([\d ]+)$", line)
            if m:
                samples.setdefault(int(m.group(2)), []).extend(int(x) for x in m.group(3).split())
    first = samples.get(1, [])
    counts = {}
    for i in first:
        counts[i] = counts.get(i, 0) + 1
    repeats = sum(c - 1 for c in counts.values())
    expect(f"epoch 1 over 4, 2 and 3 trainers read every one of the 240 samples ({len(counts)}), {repeats} twice "
           "(the last part's padding, at most 2)", len(counts) == 240 and repeats <= 2)
    expect("epoch 2 (3 trainers) started from its own permutation", len(samples.get(2, [])) == 4 * 5 * 3)
    with open(os.path.join(ckpt, "latest")) as f:
        latest = f.read().strip()
    with open(os.path.join(ckpt, latest, "meta.json")) as f:
        meta = json.load(f)
    expect("the last checkpoint holds the data cursor of epoch 2 on 3 trainers",
           meta["data"] == {"epoch": 1, "batch": 4, "before": []} and meta["roles"]["trainers"] == [0, 1, 2])

    # A damaged checkpoint file: the resume stops before training, naming the file and the damage, and
    # leaves every file of the checkpoint as it was.
    victim = os.path.join(ckpt, latest, "rank-1.brsd")
    with open(victim, "rb") as f:
        good = f.read()
    for label, damaged, words in (("cut in half", good[:len(good) // 2], ("truncated",)),
                                  ("one byte flipped", good[:len(good) // 2] + bytes([good[len(good) // 2] ^ 0xFF])
                                   + good[len(good) // 2 + 1:], ("checksum",))):
        with open(victim, "wb") as f:
            f.write(damaged)
        before = {n: open(os.path.join(ckpt, latest, n), "rb").read() for n in os.listdir(os.path.join(ckpt, latest))}
        r = run(launch(braid, 3, [], [job, "--steps", "21", "--set", "roles.trainers=[0, 1, 2]", "--set",
                                      f"checkpoint.dir={ckpt}", "--resume"]), debug)
        after = {n: open(os.path.join(ckpt, latest, n), "rb").read() for n in os.listdir(os.path.join(ckpt, latest))}
        expect(f"a checkpoint file {label}: the resume fails naming the file and the damage, nothing trained or "
               "changed", r.returncode != 0 and "rank-1.brsd" in r.stderr and all(w in r.stderr for w in words)
               and "step 21" not in r.stdout and before == after, r)
    with open(victim, "wb") as f:
        f.write(good)


RESHARD_JOB = """\
name: restart-reshard
backend: gloo
rpc: {transport: tcp, timeout_s: 30}
roles: {trainers: [0, 1, 2, 3]}
model: {kind: mlp, args: {in: 16, hidden: [32, 24], out: 4}, init_seed: 2}
data: {kind: synthetic, num_samples: 240, num_features: 16, num_classes: 4, seed: 4}
optimizer: {kind: adam, lr: 0.01}
ddp: {mode: none}
fsdp: {enabled: true, sharding_strategy: full_shard, wrap: ["0", "2", "4"]}
train: {batch_size: 5, seed: 9}
log: {level: info, interval: 1}
failure: {timeout_s: 10, heartbeat_s: 1}
"""


def resharded_lines(r):
    return re.findall(r"trainer (\d+): resharded from (\d+) of (\d+) saved files", r.stderr)


def case_reshard(braid, tmp):
    """An FSDP job (Adam) resumed from sharded checkpoints on 4 -> 2 -> 3 trainers, then as DDP on 2, then
    as hybrid_shard on 4 (shard groups of 2), then full_shard on 2 again: each resume reshards, each
    trainer reading only the saved files that hold its rows; then a checkpoint missing a shard's file."""
    job = os.path.join(tmp, "job.yaml")
    with open(job, "w") as f:
        f.write(RESHARD_JOB)
    ckpt = os.path.join(tmp, "ckpt")
    trace = {"BRAID_TRACE_DIR": os.path.join(tmp, "trace")}
    ddp = ["--set", "fsdp.enabled=false", "--set", "ddp.mode=outside"]
    hybrid = ["--set", "fsdp.sharding_strategy=hybrid_shard", "--set", "fsdp.shard_group_size=2"]
    # (trainers, --steps, extra args, the resharded lines' (files read, of saved files) per trainer)
    runs = [(4, 3, [], None),
            (2, 5, [], [(2, 4), (2, 4)]),    # rows 32/24/4 saved in quarters: each half reads two quarters
            (3, 7, [], [(1, 2), (2, 2), (1, 2)]),  # thirds of halves: the middle trainer needs both files
            (2, 9, ddp, [(3, 3), (3, 3)]),   # DDP holds every row: all three shards
            (4, 11, hybrid, [(1, 1)] * 4),   # from DDP's copies: trainer 0's file alone
            (2, 13, [], [(1, 2), (1, 2)])]   # from hybrid: one shard group's halves, not their copies
    for i, (n, steps, extra, reads) in enumerate(runs):
        trainers = "[" + ", ".join(str(t) for t in range(n)) + "]"
        # A checkpoint after every step: the asynchronous copy of the shards overlaps the next FSDP forward.
        args = [job, "--steps", str(steps), "--set", f"roles.trainers={trainers}", "--set", f"checkpoint.dir={ckpt}",
                "--set", "checkpoint.interval=1"]
        r = run(launch(braid, n, [], args + extra + (["--resume"] if i else [])), trace)
        what = f"{n} trainers{' ' + extra[1] if extra else ''}"
        expect(f"{what}: the run ends at step {steps}", r.returncode == 0 and f"done: {steps} steps" in r.stdout, r)
        if not i:
            continue
        lines = resharded_lines(r)
        expect(f"{what}: every trainer resharded ({lines})", sorted(int(t) for t, _, _ in lines) == list(range(n)), r)
        if reads is not None:
            got = [(int(k), int(m)) for _, k, m in sorted(lines, key=lambda l: int(l[0]))]
            expect(f"{what}: each trainer read only the saved files that hold its rows: {got}", got == reads, r)
    r = run([braid, "export", ckpt, "-o", os.path.join(tmp, "final.safetensors")], timeout=60)
    expect("braid export reads the last sharded checkpoint", r.returncode == 0, r)

    with open(os.path.join(ckpt, "latest")) as f:
        step_dir = os.path.join(ckpt, f.read().strip())
    # A trainer count that hybrid_shard's groups cannot tile: refused with the job file, before anything
    # is read or started (exit code 2), and the checkpoint unchanged.
    before = {n: os.path.getmtime(os.path.join(step_dir, n)) for n in os.listdir(step_dir)}
    r = run(launch(braid, 3, [], [job, "--steps", "15", "--set", "roles.trainers=[0, 1, 2]", "--set",
                                  f"checkpoint.dir={ckpt}", "--resume"] + hybrid), trace)
    expect("hybrid_shard groups of 2 on 3 trainers: refused naming fsdp.shard_group_size, nothing changed",
           r.returncode == 2 and "fsdp.shard_group_size" in r.stderr and "dividing the 3 trainers" in r.stderr
           and {n: os.path.getmtime(os.path.join(step_dir, n)) for n in os.listdir(step_dir)} == before, r)

    # A shard's file missing: the resume stops before training, naming the file, and changes nothing.
    os.rename(os.path.join(step_dir, "rank-1.brsd"), os.path.join(tmp, "rank-1.brsd"))
    before = sorted(os.listdir(step_dir))
    r = run(launch(braid, 3, [], [job, "--steps", "15", "--set", "roles.trainers=[0, 1, 2]", "--set",
                                  f"checkpoint.dir={ckpt}", "--resume"]), trace)
    expect("a shard's file missing: the resume fails naming it, nothing trained or changed",
           r.returncode != 0 and "rank-1.brsd is missing: it holds shard 1 of 2" in r.stderr
           and "done:" not in r.stdout and sorted(os.listdir(step_dir)) == before, r)


def brsd_entries(path):
    """A state-dict file's entries (nn/serialize.h's format): name -> (dtype, shape, payload bytes)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"BRSD":
        fail(f"{path} is not a state-dict file")
    (count,) = struct.unpack_from("<Q", data, 8)
    at, out = 16, {}
    for _ in range(count):
        (n,) = struct.unpack_from("<I", data, at)
        name = data[at + 4:at + 4 + n].decode()
        at += 4 + n
        dtype, nd = data[at + 6], data[at + 7]
        (length,) = struct.unpack_from("<Q", data, at + 8)
        shape = struct.unpack_from(f"<{nd}q", data, at + 24)
        header = 24 + 8 * nd
        out[name] = (dtype, shape, data[at + header:at + header + length])
        at += header + length
    return out


def checkpoint_state(ckpt):
    """Every entry of the latest checkpoint's files, by file role: the trainers' by file, the remote parts'
    merged over whichever workers saved them."""
    with open(os.path.join(ckpt, "latest")) as f:
        step_dir = os.path.join(ckpt, f.read().strip())
    with open(os.path.join(step_dir, "meta.json")) as f:
        meta = json.load(f)
    state = {}
    for t in meta["roles"]["trainers"]:
        state[f"trainer {t}"] = brsd_entries(os.path.join(step_dir, f"rank-{t}.brsd"))
    parts = {}
    for w in meta["roles"]["workers"]:
        parts.update({k: v for k, v in brsd_entries(os.path.join(step_dir, f"rank-{w}.brsd")).items()
                      if k != "@generator"})
    state["parts"] = parts
    return state, meta


def case_parts(braid, tmp):
    """The hybrid job's remote parts (em, net) on workers 2 and 3, resumed with both on worker 2, then with
    them swapped (em on 3, net on 2): each part's state (and its optimizer's) follows it, and the run that
    moved ends with every tensor bit-identical to one that never did (SGD with momentum: the remote
    optimizers' buffers too)."""
    trace = {"BRAID_TRACE_DIR": os.path.join(tmp, "trace")}
    two = ["--set", "roles.workers=[2, 3]", "--set", "roles.master=4"]
    one = ["--set", "roles.workers=[2]", "--set", "roles.master=3"]
    swapped = ["--set", "roles.workers=[3, 2]", "--set", "roles.master=4"]
    # Momentum: the remote optimizers keep a buffer per parameter, which must follow its part.
    base = lambda ckpt, steps: [FAULTS_JOB, "--steps", str(steps), "--set", f"checkpoint.dir={ckpt}", "--set",
                                "optimizer.momentum=0.9"]
    stay, move = os.path.join(tmp, "stay"), os.path.join(tmp, "move")
    for label, ckpt, second in (("parts stay on workers 2 and 3", stay, (5, two)),
                                ("parts move to worker 2", move, (4, one))):
        r = run(launch(braid, 5, [], base(ckpt, 3) + two), trace)
        expect(f"{label}: the first run ends at step 3", r.returncode == 0 and "done: 3 steps" in r.stdout, r)
        n, roles = second
        r = run(launch(braid, n, [], base(ckpt, 6) + roles + ["--resume"]), trace)
        expect(f"{label}: the resumed run ends at step 6", r.returncode == 0 and "done: 6 steps" in r.stdout, r)
        if ckpt == move:
            expect("the moved parts resume from the file of the worker that saved them",
                   "remote parts on rank 2 (worker) resume from the file rank 3 saved" in r.stderr, r)
    a, _ = checkpoint_state(stay)
    b, meta = checkpoint_state(move)
    expect(f"the moved run saved its parts on worker 2 ({meta['parts']})", meta["parts"] == {"em": 2, "net": 2})
    expect(f"the moved run's {sum(len(v) for v in b.values())} tensors (trainers, remote optimizers, parts) are "
           "bit-identical to the unmoved run's", a == b)
    r = run(launch(braid, 5, [], base(move, 8) + swapped + ["--resume"]), trace)
    expect("swapped (em on rank 3, net on rank 2): the run resumes and ends at step 8",
           r.returncode == 0 and "done: 8 steps" in r.stdout
           and "remote parts on rank 3 (worker) resume from the file rank 2 saved" in r.stderr, r)
    _, meta = checkpoint_state(move)
    expect(f"and saves them where they are now ({meta['parts']})", meta["parts"] == {"em": 3, "net": 2})


def main():
    braid, case = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(prefix=f"braid-restart-{case}-") as tmp:
        cases = {"restart": case_restart, "identical": case_identical, "resize": case_resize, "reshard": case_reshard,
                 "parts": case_parts}
        cases[case](braid, tmp)


if __name__ == "__main__":
    main()
