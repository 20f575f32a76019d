#!/usr/bin/env python3
"""A/B runs of `braid bench collectives`: variants alternate run by run, and each row is summarised
over the runs (medians, with the range), which is what holds still on a noisy shared machine where one
run's figures move by 10-20%.

Usage:
  bench/ab_collectives.py NP OP SIZES RUNS VARIANT...
  VARIANT = name:ENV=V ENV2=V2|bench args|path/to/braid      (every part after the name may be empty)

Examples:
  # two builds against each other (4 ranks, 4 KiB alltoall, 6 runs each)
  bench/ab_collectives.py 4 alltoall 4K 6 'base:||/tmp/base/build-bench/cli/braid' 'new:'
  # one build, two lane counts
  bench/ab_collectives.py 2 allreduce 1M,4M 5 't1:|--threads 1' 't2:|--threads 2'

Environment: BACKEND (gloo), SPS (--seconds-per-size, 2), ROUNDS (--rounds, 9), BRAID (build-bench/cli/braid).
Per row: braid - raw of the best rounds, the paired ratio (median over a run's rounds of braid/raw in
the same round) and braid's CPU per call minus raw's (all ranks; builds from 40678b1 on print it).
"""
import os
import statistics
import subprocess
import sys


def run_once(np_, op, sizes, envs, args, binary):
    cmd = ["mpirun", "-np", np_, "--oversubscribe"]
    for kv in envs.split():
        cmd += ["-x", kv]
    cmd += [binary, "bench", "collectives", "--backend", os.environ.get("BACKEND", "gloo"), "--op", op,
            "--sizes", sizes, "--seconds-per-size", os.environ.get("SPS", "2"),
            "--rounds", os.environ.get("ROUNDS", "9")] + args.split()
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if out.returncode != 0:
        sys.exit(f"failed ({out.returncode}): {' '.join(cmd)}\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    rows = []
    for line in out.stdout.splitlines():
        f = line.split()
        if len(f) >= 14 and f[0].isdigit() and f[9] != "-":
            cpu = float(f[14]) - float(f[15]) if len(f) >= 16 and f[15] != "-" else None
            rows.append((int(f[0]), float(f[5]) - float(f[9]), float(f[12].rstrip("x")), cpu))
    return rows


def spread(values, fmt):
    v = sorted(values)
    return f"{fmt.format(statistics.median(v))} [{fmt.format(v[0])}..{fmt.format(v[-1])}]"


def main():
    if len(sys.argv) < 6 or "," in sys.argv[2]:
        sys.exit(__doc__ + "\n(one op per call: rows are keyed by size)")
    np_, op, sizes, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    variants = []
    for v in sys.argv[5:]:
        name, _, rest = v.partition(":")
        envs, _, rest = rest.partition("|")
        args, _, binary = rest.partition("|")
        variants.append((name, envs, args, binary or os.environ.get("BRAID", "build-bench/cli/braid")))
    results = {}
    for _ in range(runs):
        for name, envs, args, binary in variants:
            for size, overhead, paired, cpu in run_once(np_, op, sizes, envs, args, binary):
                results.setdefault((size, name), []).append((overhead, paired, cpu))
    print(f"# {op} on {np_} ranks, {runs} alternated runs per variant; medians [min..max] over runs")
    for (size, name), v in sorted(results.items(), key=lambda kv: (kv[0][0], [x[0] for x in variants].index(kv[0][1]))):
        cpus = [c for _, _, c in v if c is not None]
        cpu = f"  cpu/call - raw {spread(cpus, '{:+.1f}')} us" if cpus else ""
        print(f"{size:>10} {name:>8}  braid-raw {spread([o for o, _, _ in v], '{:+.1f}')} us  "
              f"paired {spread([p for _, p, _ in v], '{:.3f}')}x{cpu}")


if __name__ == "__main__":
    main()
