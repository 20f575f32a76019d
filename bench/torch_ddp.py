#!/usr/bin/env python3
"""PyTorch's side of `braid bench ddp`: the same model, batch and steps through PyTorch 1.13's
DistributedDataParallel over gloo, timed the same way, printing the same table and a RESULT line.

Two ranks, each holding two copies of layers x (torch.nn.Linear(width, width) + torch.nn.ReLU) in a
torch.nn.Sequential (drawn after torch.manual_seed(seed)), SGD(lr 0.01, momentum 0.9) on each. Alternating step
by step, with a barrier before each step so that both ranks run both rows together:
  single  the plain model on this rank's (batch, width) input: zero_grad(set_to_none=True), forward, MSE loss,
          backward, optimizer step;
  ddp     the same through DistributedDataParallel(bucket_cap_mb, gradient_as_bucket_view) over the gloo group.
Before the timing, one DDP backward on each rank's slice of the global batch is compared with the plain
model's backward on the whole batch (allclose; the largest |diff| over both ranks is printed).

Threads: --threads compute threads per process (default 1), as braid's side: torch.set_num_threads for
ATen's kernels and OPENBLAS_NUM_THREADS in the ranks' environment (set by the parent before `import torch`),
because Debian's torch does its float32 GEMMs in the system OpenBLAS, which torch.set_num_threads does not reach.

It starts its own two processes (rendezvous over tcp://127.0.0.1 on a free port): run it as a plain program,
not under mpirun, with the python that has torch (Debian's python3-torch is in /usr/bin/python3):

    /usr/bin/python3 bench/torch_ddp.py [--iters 30] [--bucket-cap-mb 25] [--gradient-as-bucket-view]

PyTorch's CPU allocator does not cache: each step's fresh gradients come from glibc, which maps blocks over
its mmap threshold anew every time (page faults on every step). bench/run_ddp_bench.sh therefore also runs it
with MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_ raised ("torch-tuned"), as bench/run_mlp_bench.sh does.

Machine-readable line: "RESULT torch_ddp backend=gloo ranks=2 ... single_p50_ms=... ddp_p50_ms=... ratio=..."
with the keys of braid's "RESULT ddp ..." line that PyTorch can give. Not used by any test.
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

try:
    import torch
except ImportError:
    sys.exit("torch_ddp.py: PyTorch is not importable by " + sys.executable +
             " (Debian's python3-torch is in /usr/bin/python3)")

TARGET_RATIO = 1.25
RTOL, ATOL = 1e-4, 1e-6


def make_model(a):
    torch.manual_seed(a.seed)
    layers = []
    for _ in range(a.layers):
        layers += [torch.nn.Linear(a.width, a.width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers)


def row_stats(name, phases):
    total = phases["total"]
    return {"name": name, "p50": statistics.median(total), "mean": statistics.fmean(total), "min": min(total),
            "max": max(total), "forward": statistics.median(phases["forward"]),
            "backward": statistics.median(phases["backward"]), "step": statistics.median(phases["step"])}


def timed_step(model, opt, x, y, phases):
    t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.mse_loss(model(x), y)
    t1 = time.perf_counter()
    loss.backward()
    t2 = time.perf_counter()
    opt.step()
    t3 = time.perf_counter()
    if phases is not None:
        for key, v in (("total", t3 - t0), ("forward", t1 - t0), ("backward", t2 - t1), ("step", t3 - t2)):
            phases[key].append(1e3 * v)


def rank_main(a, rank, port):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    if os.environ.get("OPENBLAS_NUM_THREADS") != str(a.threads):
        raise RuntimeError("OPENBLAS_NUM_THREADS must be set before torch is imported (main() does it)")
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    size = dist.get_world_size()
    plain, wrapped = make_model(a), make_model(a)
    ddp = DDP(wrapped, bucket_cap_mb=a.bucket_cap_mb, gradient_as_bucket_view=a.gradient_as_bucket_view)
    gen = torch.Generator().manual_seed(a.seed + 1)
    x_all = torch.randn(a.batch * size, a.width, generator=gen)
    y_all = torch.randn(a.batch * size, a.width, generator=gen)
    x = x_all[rank * a.batch:(rank + 1) * a.batch].clone()
    y = y_all[rank * a.batch:(rank + 1) * a.batch].clone()
    plain_opt = torch.optim.SGD(plain.parameters(), lr=0.01, momentum=0.9)
    ddp_opt = torch.optim.SGD(wrapped.parameters(), lr=0.01, momentum=0.9)

    # The gradient check: DDP on the slices against one process on the whole batch.
    torch.nn.functional.mse_loss(plain(x_all), y_all).backward()
    torch.nn.functional.mse_loss(ddp(x), y).backward()
    worst, ok = 0.0, True
    for (name, p), q in zip(wrapped.named_parameters(), plain.parameters()):
        worst = max(worst, (p.grad - q.grad).abs().max().item())
        ok = ok and torch.allclose(p.grad, q.grad, rtol=RTOL, atol=ATOL)
    t = torch.tensor([worst, 0.0 if ok else 1.0], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    if t[1].item() != 0:
        raise RuntimeError(f"the DDP gradients differ from one process's on the whole batch (max |diff| {t[0]:.3g})")
    plain_opt.zero_grad(set_to_none=True)
    ddp_opt.zero_grad(set_to_none=True)

    single = {k: [] for k in ("total", "forward", "backward", "step")}
    dp = {k: [] for k in ("total", "forward", "backward", "step")}
    for s in range(a.warmup + a.iters):
        timed = s >= a.warmup
        dist.barrier()
        timed_step(plain, plain_opt, x, y, single if timed else None)
        dist.barrier()
        timed_step(ddp, ddp_opt, x, y, dp if timed else None)
    dist.barrier()
    dist.destroy_process_group()
    if rank != 0:
        return 0
    rows = [row_stats("single", single), row_stats("ddp", dp)]
    tuned = "MALLOC_MMAP_THRESHOLD_" in os.environ
    print(f"# torch {torch.__version__} ddp: {a.layers} x (Linear({a.width}, {a.width}) + ReLU), batch {a.batch} "
          f"per rank, float32, MSE, SGD(momentum 0.9)")
    print(f"# {size} ranks, backend gloo, bucket_cap_mb {a.bucket_cap_mb:g}, gradient_as_bucket_view "
          f"{str(a.gradient_as_bucket_view).lower()}, {a.threads} thread(s) per rank, malloc "
          f"{'tuned' if tuned else 'default'}")
    print(f"# {a.iters} timed steps per row after {a.warmup} warm-up, rows alternating step by step")
    print(f"# gradient check (DDP on {size} slices vs one process on the whole batch): max |diff| {t[0].item():.3g}")
    print(f"{'row':<8} {'p50':>9} {'mean':>9} {'min':>9} {'max':>9} | {'fwd+loss':>9} {'backward':>9} "
          f"{'sgd step':>9}   (ms per step, rank 0)")
    for r in rows:
        print(f"{r['name']:<8} {r['p50']:9.2f} {r['mean']:9.2f} {r['min']:9.2f} {r['max']:9.2f} | "
              f"{r['forward']:9.2f} {r['backward']:9.2f} {r['step']:9.2f}")
    ratio = rows[1]["p50"] / rows[0]["p50"]
    print(f"ddp / single = {ratio:.3f}x (p50; by min {rows[1]['min'] / rows[0]['min']:.3f}x)")
    print(f"RESULT torch_ddp backend=gloo ranks={size} layers={a.layers} width={a.width} batch={a.batch} "
          f"bucket_cap_mb={a.bucket_cap_mb:g} as_view={int(a.gradient_as_bucket_view)} malloc="
          f"{'tuned' if tuned else 'default'} single_p50_ms={rows[0]['p50']:.3f} single_min_ms={rows[0]['min']:.3f} "
          f"ddp_p50_ms={rows[1]['p50']:.3f} ddp_min_ms={rows[1]['min']:.3f} ratio={ratio:.3f} "
          f"max_abs_diff={t[0].item():.3g} backward_ms={rows[0]['backward']:.3f} "
          f"ddp_backward_ms={rows[1]['backward']:.3f} torch={torch.__version__}", flush=True)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iters", type=int, default=30, help="timed steps per row")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps per row first")
    ap.add_argument("--layers", type=int, default=4, help="Linear+ReLU layers")
    ap.add_argument("--width", type=int, default=2048, help="features in and out of every layer")
    ap.add_argument("--batch", type=int, default=64, help="rows of the input of each rank")
    ap.add_argument("--bucket-cap-mb", type=float, default=25, help="DDP's bucket_cap_mb")
    ap.add_argument("--gradient-as-bucket-view", action="store_true", help="DDP's gradient_as_bucket_view")
    ap.add_argument("--threads", type=int, default=1, help="compute threads per process (see the header)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the weights (input and target: seed + 1)")
    ap.add_argument("--backend", default="gloo", help=argparse.SUPPRESS)  # braid's flag; PyTorch's side is gloo
    ap.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)  # set for the spawned ranks
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if min(a.iters, a.layers, a.width, a.batch, a.threads) < 1 or a.warmup < 0 or a.bucket_cap_mb <= 0:
        ap.error("--iters, --layers, --width, --batch, --threads and --bucket-cap-mb must be positive")

    if a.rank >= 0:
        sys.exit(rank_main(a, a.rank, a.port))

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = [sys.executable, os.path.abspath(__file__), "--port", str(port)] + sys.argv[1:]
    # OpenBLAS reads its thread count when torch loads it, at the ranks' `import torch` (see the header).
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(a.threads), OMP_NUM_THREADS=str(a.threads))
    procs = [subprocess.Popen(base + ["--rank", str(r)], env=env) for r in range(2)]
    sys.exit(max(p.wait() for p in procs))


if __name__ == "__main__":
    main()
