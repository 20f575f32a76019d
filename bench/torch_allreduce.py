#!/usr/bin/env python3
"""PyTorch's side of `braid bench collectives --op allreduce`: torch.distributed.all_reduce (SUM) with the
gloo backend on float32 tensors of the same sizes, timed the same way, printing the same columns.

Per size: the input gets the pattern (rank + j) % 13 and one all_reduce is checked element by element
against sum_s (s + j) % 13 (#wrong, summed over ranks); then `--warmup` untimed calls; then `--rounds`
rounds of a barrier and N calls, N chosen so that a size takes about `--seconds-per-size` (or `--iters`).
The time is the best round of the slowest rank's mean per call; busbw = algbw * 2(n-1)/n (nccl-tests).
The buffer is allocated once per size and reused.

It starts its own ranks (subprocesses rendezvousing over tcp://127.0.0.1 on a free port), so run it as a
plain program, not under mpirun:

    /usr/bin/python3 bench/torch_allreduce.py --ranks 2 --sizes 4K..64M

Debian's python3-torch (1.13) installs into the system python, which may not be the first python3 on PATH.
The last line is machine-readable: "RESULT torch_allreduce ranks=2 dtype=float32 sizes=... wrong=0
avg_busbw=..." followed by one "RESULT torch_allreduce_size bytes=... time_us=... busbw=..." per size.
Not used by any test.
"""
import argparse
import math
import os
import socket
import subprocess
import sys
import time

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text):
    t = text.strip().rstrip("B").rstrip("i")
    scale = 1
    if t and t[-1].upper() in UNITS:
        scale = UNITS[t[-1].upper()]
        t = t[:-1]
    return int(t) * scale


def parse_sizes(spec, factor):
    if ".." in spec:
        lo, hi = (parse_size(s) for s in spec.split(".."))
        sizes = []
        while lo <= hi:
            sizes.append(lo)
            lo *= factor
        return sizes
    return [parse_size(s) for s in spec.split(",")]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_main(a, rank, world, port):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    factor = 2.0 * (world - 1) / world
    rows = []
    for size in parse_sizes(a.sizes, a.factor):
        count = max(size // 4, 1)
        nbytes = count * 4
        t = torch.empty(count, dtype=torch.float32)
        # Check once, outside timing.
        j = torch.arange(count, dtype=torch.int64)
        t.copy_((rank + j) % 13)
        dist.all_reduce(t)
        expected = torch.zeros(count, dtype=torch.int64)
        for s in range(world):
            expected += (s + j) % 13
        wrong = torch.tensor([float((t != expected.to(torch.float32)).sum().item())], dtype=torch.float64)
        del j, expected

        warm = max(a.warmup, 0 if a.iters else 2)
        if warm:
            dist.all_reduce(t)
        t0 = time.perf_counter()
        for _ in range(warm - 1):
            dist.all_reduce(t)
        per_call = (time.perf_counter() - t0) / max(warm - 1, 1)
        iters = a.iters
        if not iters:
            slowest = torch.tensor([per_call], dtype=torch.float64)
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
            iters = int(min(max(math.floor(a.seconds_per_size / a.rounds / max(slowest.item(), 1e-7)), 1), 1e6))

        rounds = []
        for _ in range(a.rounds):
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(t)
            mean = torch.tensor([(time.perf_counter() - t0) / iters], dtype=torch.float64)
            dist.all_reduce(mean, op=dist.ReduceOp.MAX)  # the slowest rank's mean
            rounds.append(mean.item())
        dist.all_reduce(wrong)
        best = min(rounds)
        algbw = nbytes / best / 1e9
        rows.append((nbytes, count, best * 1e6, algbw, algbw * factor, int(wrong.item()), iters))
        if rank == 0:
            print(f"{nbytes:>12} {count:>11} {'float32':>9} {'sum':>5} {-1:>4} {best * 1e6:>10.1f} {algbw:>7.3f} "
                  f"{algbw * factor:>7.3f} {int(wrong.item()):>6} {iters:>8}", flush=True)
    if rank == 0:
        wrong = sum(r[5] for r in rows)
        print(f"# Out of bounds values : {wrong} {'OK' if wrong == 0 else 'FAILED'}")
        print(f"# Avg bus bandwidth    : {sum(r[4] for r in rows) / len(rows):.3f} GB/s")
        print(f"RESULT torch_allreduce ranks={world} dtype=float32 sizes={len(rows)} wrong={wrong} "
              f"avg_busbw={sum(r[4] for r in rows) / len(rows):.4f} torch={torch.__version__}")
        for r in rows:
            print(f"RESULT torch_allreduce_size bytes={r[0]} time_us={r[2]:.2f} busbw={r[4]:.4f}")
    dist.destroy_process_group()
    return 1 if any(r[5] for r in rows) else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--sizes", default="4K..64M")
    ap.add_argument("--factor", type=int, default=2)
    ap.add_argument("--iters", type=int, default=0, help="calls per round (0: about --seconds-per-size per size)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds-per-size", type=float, default=0.4)
    ap.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)  # set for the spawned ranks
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()

    if a.rank >= 0:
        sys.exit(rank_main(a, a.rank, a.ranks, a.port))

    import torch  # fail here, once, when PyTorch is missing

    port = free_port()
    print(f"# torch {torch.__version__} all_reduce (gloo, SUM), {a.ranks} ranks, float32, sizes {a.sizes}; "
          f"{a.warmup} warm-up calls, {a.rounds} rounds; time = best round of the slowest rank's mean per call")
    print(f"# {'size':>10} {'count':>11} {'type':>9} {'redop':>5} {'root':>4} {'time':>10} {'algbw':>7} {'busbw':>7} "
          f"{'#wrong':>6} {'iters':>8}")
    print(f"# {'(B)':>10} {'(elements)':>11} {'':>9} {'':>5} {'':>4} {'(us)':>10} {'(GB/s)':>7} {'(GB/s)':>7} "
          f"{'':>6} {'per round':>8}", flush=True)
    base = [sys.executable, os.path.abspath(__file__), "--port", str(port)] + [
        arg for arg in sys.argv[1:]]
    procs = [subprocess.Popen(base + ["--rank", str(r)]) for r in range(a.ranks)]
    codes = [p.wait() for p in procs]
    sys.exit(max(codes))


if __name__ == "__main__":
    main()
