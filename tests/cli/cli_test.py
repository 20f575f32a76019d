#!/usr/bin/env python3
"""Smoke tests of the `braid` executable: exit codes, --version, --help, info (text and JSON), --log-level,
the rank stamp taken from a launcher's environment, and `braid check` on the job files of tests/fixtures/jobs. Usage: cli_test.py PATH_TO_BRAID"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

LAUNCHER_VARS = ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "RANK",
                 "WORLD_SIZE", "BRAID_LOG_LEVEL", "BRAID_LOG")


def run(braid, args, env_extra=None, launcher=None):
    # Start from an environment without launcher or log variables: the tests may themselves run inside a
    # Slurm allocation or under mpirun.
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    env.update(env_extra or {})
    cmd = (launcher or []) + [braid] + args
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)


JOBS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "jobs")


def check_job_file(braid, expect):
    """`braid check`: the summary of a good job, a bad job's file/line/key/reason and exit 2, --set, --print."""
    hybrid = os.path.join(JOBS, "hybrid.yaml")
    r = run(braid, ["check", hybrid])
    expect("check ok", r.returncode == 0 and "hybrid.yaml: ok" in r.stdout and "hybrid: 6 ranks (trainers 0-3, "
           "workers 4, master 5), backend gloo, model hybrid, 3 steps" in r.stdout, r)
    r = run(braid, ["check", hybrid, "--set", "devices={trainers: cuda, workers: cpu}"])
    expect("check names where each role computes and what the CUDA trainers reduce over", r.returncode == 0
           and "backend gloo (trainers over nccl), trainers on cuda, workers on cpu, model hybrid" in r.stdout, r)
    r = run(braid, ["check", hybrid, "--set", "device=gpu"])
    expect("check refuses a device it does not know, naming the key and the choices",
           r.returncode == 2 and "device: 'gpu' is not one of cpu, cuda" in r.stderr, r)
    r = run(braid, ["check", os.path.join(JOBS, "bad_unknown_key.yaml")])
    expect("check bad job exits 2 naming file, line, key and the suggestion", r.returncode == 2 and r.stdout == ""
           and "bad_unknown_key.yaml:5: train.batchsize: unknown key; did you mean 'batch_size'?" in r.stderr, r)
    r = run(braid, ["check", os.path.join(JOBS, "bad_missing_csv.yaml")])
    expect("check csv file missing", r.returncode == 2 and "data.path: no such file" in r.stderr, r)
    r = run(braid, ["check", os.path.join(JOBS, "no_such.yaml")])
    expect("check missing job file", r.returncode == 2 and "no_such.yaml: cannot read the job file" in r.stderr, r)
    r = run(braid, ["check", hybrid, "--set", "optimizer.kind=none", "--set", "ddp.mode=inside", "--set",
                    "train.steps=7"])
    expect("check --set", r.returncode == 0 and "7 steps" in r.stdout and "ddp inside" in r.stdout
           and "no optimizer" in r.stdout, r)
    r = run(braid, ["check", hybrid, "--set", "train.batch_size=0"])
    expect("check bad --set exits 2", r.returncode == 2
           and "--set train.batch_size=0: train.batch_size: must be >= 1, got 0" in r.stderr, r)
    r = run(braid, ["check", hybrid, "--print", "--set", "optimizer.lr=0.5"])
    try:
        j = json.loads(r.stdout)
        ok = (r.returncode == 0 and j["optimizer"]["lr"] == 0.5 and j["roles"]["master"] == 5
              and j["train"]["batch_size"] == 4 and j["log"]["metrics"].endswith("/metrics.jsonl")
              and os.path.isabs(j["checkpoint"]["dir"]) and j["fsdp"]["param_dtype"] is None)
    except (ValueError, KeyError, TypeError):
        ok = False
    expect("check --print", ok, r)
    r = run(braid, ["check", hybrid, "--world-size", "6"])
    expect("check --world-size fits", r.returncode == 0, r)
    r = run(braid, ["check", hybrid, "--world-size", "4"])
    expect("check --world-size mismatch", r.returncode == 2 and "launcher started 4" in r.stderr, r)
    # Issue 32's defects: each is refused by `braid check`, at once, naming the file, the key and the limit.
    r = run(braid, ["check", os.path.join(JOBS, "bad_yaml_aliases.yaml")])
    expect("check refuses nested YAML aliases (a billion laughs) by a bounded node count", r.returncode == 2
           and "bad_yaml_aliases.yaml: the YAML expands to more than 100000 nodes" in r.stderr, r)
    minimal = os.path.join(JOBS, "minimal.yaml")
    for key in ("failure.timeout_s", "rpc.timeout_s", "failure.context_ttl_s"):
        for value in ("1e10", ".inf", "-1"):
            r = run(braid, ["check", minimal, "--set", f"{key}={value}"])
            expect(f"check refuses {key}={value}", r.returncode == 2
                   and f"{key}: must be a duration in seconds" in r.stderr, r)
    r = run(braid, ["check", os.path.join(JOBS, "bad_mlp_too_large.yaml")])
    expect("check refuses a model larger than this machine's memory", r.returncode == 2
           and "bad_mlp_too_large.yaml: model.args.hidden[0]: the mlp" in r.stderr and "GiB" in r.stderr, r)
    r = run(braid, ["status", "--addr", "127.0.0.1:1", "--timeout", "1e10"])
    expect("status --timeout 1e10 is a usage error", r.returncode == 2 and "30 days" in r.stderr, r)
    r = run(braid, ["check", "--help"])
    expect("check --help teaches", r.returncode == 0 and "--set optimizer.lr=0.1" in r.stdout
           and "docs/JOBS.md" in r.stdout, r)


def main():
    braid = sys.argv[1]
    failures = []

    def expect(name, cond, result):
        if not cond:
            failures.append(f"{name}: rc={result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}")

    r = run(braid, ["--version"])
    expect("--version", r.returncode == 0 and re.fullmatch(r"braid \d+\.\d+\.\d+ \(\w*\)\n", r.stdout), r)

    r = run(braid, ["--help"])
    expect("--help", r.returncode == 0 and all(s in r.stdout for s in
                                               ("distributed deep-learning runtime", "info", "mpirun -np 4",
                                                "BRAID_LOG_LEVEL", "--log-level", "docs/CONFIG.md")), r)

    r = run(braid, ["info"])
    expect("info", r.returncode == 0 and all(s in r.stdout for s in
                                             ("backends", "CUDA", "NCCL", "MPI", "UCX", "Gloo", "BLAS",
                                              "devices", "cores online", "single process")), r)
    expect("info mentions cuda devices or why there are none",
           re.search(r"^  (cuda:\d+ +\S|cuda +no CUDA device: \S)", r.stdout, re.M), r)

    r = run(braid, ["info", "--json"])
    try:
        j = json.loads(r.stdout)
        ok = (r.returncode == 0 and j["braid"]["version"] and j["process"]["launcher"] == "none"
              and set(j["backends"]) == {"cuda", "nccl", "mpi", "ucx", "gloo", "blas"}
              and all("built" in b for b in j["backends"].values())
              and j["devices"]["cpu"]["cores_online"] >= 1
              and (j["devices"]["cuda"] or j["devices"]["cuda_unavailable"]))
    except (ValueError, KeyError, TypeError):
        ok = False
    expect("info --json", ok, r)

    r = run(braid, ["--log-level", "bogus", "info"])
    expect("bad --log-level exits 2 naming the level", r.returncode == 2 and "'bogus'" in r.stderr
           and r.stdout == "", r)
    r = run(braid, ["info"], {"BRAID_LOG_LEVEL": "nope"})
    expect("bad BRAID_LOG_LEVEL exits 2", r.returncode == 2 and "BRAID_LOG_LEVEL" in r.stderr, r)
    r = run(braid, [])
    expect("no subcommand exits 2", r.returncode == 2 and "subcommand" in r.stderr, r)
    r = run(braid, ["--no-such-flag"])
    expect("unknown flag exits 2", r.returncode == 2 and "--no-such-flag" in r.stderr, r)

    r = run(braid, ["info", "--log-level", "debug"], {"RANK": "1", "WORLD_SIZE": "2"})
    expect("launcher env stamps log lines", r.returncode == 0 and "[rank 1/2]" in r.stderr
           and "rank 1 of 2 (launched by env)" in r.stdout, r)
    r = run(braid, ["info"], {"SLURM_PROCID": "5", "SLURM_NTASKS": "2"})
    expect("rank outside the job exits 2 naming the variable", r.returncode == 2 and "SLURM_PROCID" in r.stderr, r)

    check_job_file(braid, expect)

    # braid trace analyze: its usage errors and an unreadable dump (the analysis itself: trace_analysis_test).
    r = run(braid, ["trace"])
    expect("trace without analyze exits 2", r.returncode == 2, r)
    r = run(braid, ["trace", "analyze", "/nonexistent/braid-trace"])
    expect("trace analyze of a missing dir exits 2 naming it", r.returncode == 2
           and "/nonexistent/braid-trace" in r.stderr and "is not a directory" in r.stderr, r)
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "rank-0.json"), "w") as f:
            f.write('{"format": "braid-trace", "version": 1, "gro')
        r = run(braid, ["trace", "analyze", d])
        expect("trace analyze of a partial dump exits 2 naming the file", r.returncode == 2
               and "rank-0.json: not valid JSON" in r.stdout, r)

    mpirun = shutil.which("mpirun")
    if mpirun:
        r = run(braid, ["info"], {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"},
                launcher=[mpirun, "-np", "2", "--oversubscribe"])
        expect("mpirun -np 2 braid info", r.returncode == 0 and "rank 0 of 2 (launched by mpirun)" in r.stdout
               and "rank 1 of 2 (launched by mpirun)" in r.stdout, r)
    else:
        print("cli_test: mpirun not found, skipping the mpirun case")

    for f in failures:
        print(f"FAILED {f}\n")
    print(f"cli_test: {'OK' if not failures else f'{len(failures)} failure(s)'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
