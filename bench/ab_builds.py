#!/usr/bin/env python3
"""Two builds of braid against each other on every benchmark the runtime has, run A B A B so that both see
the same machine load: `braid bench collectives` (mpi and gloo, 2 and 4 ranks), `bench ddp`, `bench fsdp`
and `bench rpc`. For each figure it prints both builds' medians over the runs and the range of each, so that
a change can be told from the runs' spread.

Usage:
  bench/ab_builds.py BEFORE_BRAID AFTER_BRAID [--runs N] [--only collectives,ddp,fsdp,rpc]

Figures: collectives, braid / raw engine (the paired median of a run's rounds) per op and size; ddp, the
DDP step's p50 and its ratio to the single-process step; fsdp, each strategy's median step; rpc, the p50
latency (or calls/s) of each op and size. Lower is better for every figure but calls/s.
"""
import argparse
import os
import statistics
import subprocess
import sys

MPI_ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")


def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, env=MPI_ENV, timeout=1200)
    if out.returncode != 0:
        sys.exit(f"failed ({out.returncode}): {' '.join(cmd)}\n{out.stdout[-3000:]}{out.stderr[-3000:]}")
    return out.stdout


def mpirun(np_, braid, *args):
    return ["mpirun", "-np", str(np_), "--oversubscribe", "--bind-to", "none", braid, *args]


def results(text, prefix):
    """The key=value pairs of every `RESULT <prefix>` line."""
    rows = []
    for line in text.splitlines():
        if line.startswith("RESULT " + prefix + " "):
            rows.append(dict(p.split("=", 1) for p in line.split()[2:] if "=" in p))
    return rows


def collectives(braid):
    figures = {}
    for np_ in (2, 4):
        for backend in ("mpi", "gloo"):
            for op, sizes in (("allreduce", "4K,64K,1M,16M,64M"),
                              ("allgather,broadcast,reduce_scatter,alltoall", "4K,1M,16M")):
                text = run(mpirun(np_, braid, "bench", "collectives", "--backend", backend, "--op", op, "--sizes",
                                  sizes, "--seconds-per-size", "0.3", "--rounds", "5", "--min-iters", "5"))
                # Each op's table: rows (size ... braid/raw best, paired ...), then its RESULT line.
                rows = []
                for line in text.splitlines():
                    f = line.split()
                    if len(f) >= 13 and f[0].isdigit() and f[12].endswith("x"):
                        rows.append((int(f[0]), float(f[12].rstrip("x"))))
                    elif line.startswith("RESULT collectives"):
                        name = dict(p.split("=", 1) for p in f[2:] if "=" in p)["op"]
                        for size, paired in rows:
                            figures[f"collectives {backend} np{np_} {name} {size} B braid/raw"] = [paired]
                        rows = []
    return figures


def ddp(braid):
    figures = {}
    for backend in ("mpi", "gloo"):
        for r in results(run(mpirun(2, braid, "bench", "ddp", "--backend", backend)), "ddp"):
            figures[f"ddp {backend} ddp_p50_ms"] = [float(r["ddp_p50_ms"])]
            figures[f"ddp {backend} ddp/single"] = [float(r["ratio"])]
    return figures


def fsdp(braid):
    figures = {}
    for np_ in (2, 4):
        for r in results(run(mpirun(np_, braid, "bench", "fsdp")), "fsdp"):
            figures[f"fsdp np{np_} {r['strategy']} median_ms"] = [float(r["median_ms"])]
    return figures


def rpc(braid):
    figures = {}
    for r in results(run(mpirun(2, braid, "bench", "rpc", "--transport", "tcp")), "rpc"):
        if "p50_us" in r:
            figures[f"rpc tcp {r['op']} {r['bytes']} B p50_us"] = [float(r["p50_us"])]
    return figures


BENCHES = {"collectives": collectives, "ddp": ddp, "fsdp": fsdp, "rpc": rpc}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--only", default=",".join(BENCHES))
    a = ap.parse_args()
    for name in a.only.split(","):
        samples = {"A": {}, "B": {}}
        for i in range(a.runs):
            for side, braid in (("A", a.before), ("B", a.after)):
                print(f"== {name} run {i + 1} {side} ({braid}), load {open('/proc/loadavg').read().split()[0]}",
                      flush=True)
                for key, values in BENCHES[name](braid).items():
                    samples[side].setdefault(key, []).extend(values)
        print(f"\n{'figure':<62} {'before (median, range)':>26} {'after (median, range)':>26} {'after/before':>12}")
        for key in samples["A"]:
            va, vb = samples["A"][key], samples["B"].get(key, [])
            if not vb:
                continue
            ma, mb = statistics.median(va), statistics.median(vb)
            print(f"{key:<62} {ma:>9.3f} ({min(va):.3f}-{max(va):.3f}) {mb:>9.3f} ({min(vb):.3f}-{max(vb):.3f}) "
                  f"{mb / ma if ma else float('nan'):>11.3f}")
        print(flush=True)


if __name__ == "__main__":
    main()
