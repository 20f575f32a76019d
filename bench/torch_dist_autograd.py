#!/usr/bin/env python3
"""PyTorch's side of `braid bench dist-autograd`: the same model and iterations through
torch.distributed.rpc (the TensorPipe agent) and torch.distributed.autograd, timed the same way, printing the
same table and RESULT lines.

Two workers: worker1 owns torch.nn.Linear(features, features) (with bias, drawn after
torch.manual_seed(seed)) inside a RemoteLinear module that worker0 creates with rpc.remote; worker1 calls
rpc.shutdown() at once, which is graceful and returns when worker0 shuts down too. On worker0, alternating
iteration by iteration:
  local        the same Linear built on worker0 from the same seed:
                 out = linear(x); loss = out.sum(); torch.autograd.grad(loss, [x, W, b])
  distributed  with dist_autograd.context() as cid:
                 out = rref.rpc_sync().forward(x); loss = out.sum()
                 dist_autograd.backward(cid, [loss]); dist_autograd.get_gradients(cid)
with x a (batch, features) float32 leaf that requires grad, made once. Each phase is timed (forward,
backward, get_gradients, leaving the context). Before the timing, one distributed iteration's gradients
(x's on worker0, W's and b's from worker1's context) are checked against the local ones (allclose).

Threads: each process runs --threads compute threads (default 1): torch.set_num_threads(threads) for
ATen's own kernels, and OPENBLAS_NUM_THREADS=threads in the workers' environment (set by the parent, so
that it is there when torch loads OpenBLAS), because
Debian's torch does its float32 matmuls in the system BLAS (libblas.so.3 -> OpenBLAS, the same library braid
links) and torch.set_num_threads does not reach OpenBLAS. braid's side calls openblas_set_num_threads(threads)
in both processes, so both frameworks run their GEMMs in the same BLAS with the same thread count. One
thread by default: the two processes share 2 cores, and more BLAS threads per process would oversubscribe
them whenever both work at once. --rpc-threads sets num_worker_threads of each agent (braid: the same).

It starts its own two processes (rendezvous over tcp://127.0.0.1 on a free port), so run it as a plain
program, not under mpirun, with the python that has torch (Debian's python3-torch is in /usr/bin/python3):

    /usr/bin/python3 bench/torch_dist_autograd.py [--iters 200] [--threads 1]

Machine-readable lines: "RESULT torch_dist_autograd transport=tensorpipe mode=local batch=64 ... p50_ms=..."
with the keys of braid's "RESULT dist_autograd ..." lines. Not used by any test.
"""
import argparse
import math
import os
import socket
import subprocess
import sys
import time

try:
    import torch
except ImportError:
    sys.exit("torch_dist_autograd.py: PyTorch is not importable by " + sys.executable +
             " (Debian's python3-torch is in /usr/bin/python3)")

TARGET_RATIO = 1.15
RTOL, ATOL = 1e-4, 1e-5


class RemoteLinear(torch.nn.Module):
    """worker1's model: torch.nn.Linear(in, out) with bias, drawn after torch.manual_seed(seed)."""

    def __init__(self, in_features, out_features, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.linear = torch.nn.Linear(in_features, out_features, bias=True)

    def forward(self, x):
        return self.linear(x)

    def gradients(self, context_id):
        import torch.distributed.autograd as dist_autograd

        g = dist_autograd.get_gradients(context_id)
        return [g[self.linear.weight], g[self.linear.bias]]


def summarize(mode, samples, phases):
    s = sorted(samples)
    n = len(s)
    p50 = s[min(max(math.ceil(0.5 * n), 1), n) - 1]  # nearest rank
    row = dict(mode=mode, iters=n, mean_ms=sum(s) / n, p50_ms=p50, min_ms=s[0], max_ms=s[-1])
    for k, v in phases.items():
        row[k] = v / n
    return row


def header(a):
    size = a.batch * a.features * 4
    size_text = f"{size >> 20} MiB" if size % (1 << 20) == 0 else (f"{size >> 10} KiB" if size % 1024 == 0
                                                                    else f"{size} B")
    return "\n".join([
        f"# model: Linear({a.features}, {a.features}) with bias, x ({a.batch}, {a.features}) float32 requiring grad; "
        f"{a.threads} OpenBLAS thread(s) per process, {a.rpc_threads} RPC threads per agent",
        f"# {a.iters} timed iterations per row after {a.warmup} warm-up, local and distributed alternating; p50 by "
        "nearest rank",
        f"# distributed: 4 tensors of {size_text} cross the wire per iteration (x, out, d out, d x), then the "
        "release; phases are means",
        "#",
        f"# {'mode':<12} {'iters':>5} {'mean':>8} {'p50':>8} {'min':>8} {'max':>8} | {'forward':>8} {'backward':>8} "
        f"{'grads':>8} {'release':>8}",
        f"# {'':<12} {'':>5} {'(ms)':>8} {'(ms)':>8} {'(ms)':>8} {'(ms)':>8} | {'(ms)':>8} {'(ms)':>8} {'(ms)':>8} "
        f"{'(ms)':>8}"])


def table_row(r):
    dist = r["mode"] == "distributed"
    ph = lambda k: f"{r[k]:.3f}" if dist else "-"
    return (f"  {r['mode']:<12} {r['iters']:>5} {r['mean_ms']:>8.3f} {r['p50_ms']:>8.3f} {r['min_ms']:>8.3f} "
            f"{r['max_ms']:>8.3f} | {r['forward_ms']:>8.3f} {r['backward_ms']:>8.3f} {ph('gradients_ms'):>8} "
            f"{ph('release_ms'):>8}")


def footer(local, dist):
    ratio = dist["p50_ms"] / local["p50_ms"]
    return (f"# distributed / local (p50): {ratio:.3f}x (mean {dist['mean_ms'] / local['mean_ms']:.3f}x, min "
            f"{dist['min_ms'] / local['min_ms']:.3f}x); target <= "
            f"{TARGET_RATIO:.2f}x (braid's): {'met' if ratio <= TARGET_RATIO else 'MISSED'}")


def results(rows, a, version):
    local, dist = rows
    ratio = dist["p50_ms"] / local["p50_ms"]
    out = []
    for r in rows:
        line = (f"RESULT torch_dist_autograd transport=tensorpipe mode={r['mode']} batch={a.batch} "
                f"features={a.features} iters={r['iters']} mean_ms={r['mean_ms']:.4f} p50_ms={r['p50_ms']:.4f} "
                f"min_ms={r['min_ms']:.4f} max_ms={r['max_ms']:.4f} forward_ms={r['forward_ms']:.4f} "
                f"backward_ms={r['backward_ms']:.4f}")
        if r["mode"] == "distributed":
            line += f" gradients_ms={r['gradients_ms']:.4f} release_ms={r['release_ms']:.4f}"
        line += f" threads={a.threads} rpc_threads={a.rpc_threads}"
        if r["mode"] == "distributed":
            line += (f" ratio={ratio:.4f} ratio_min={dist['min_ms'] / local['min_ms']:.4f}"
                     f" target=ratio<={TARGET_RATIO:.2f} met={int(ratio <= TARGET_RATIO)}")
        out.append(line + f" torch={version}")
    return "\n".join(out)


def measure(rpc, torch, a):
    import torch.distributed.autograd as dist_autograd

    rref = rpc.remote("worker1", RemoteLinear, args=(a.features, a.features, a.seed))
    local = RemoteLinear(a.features, a.features, a.seed)
    W, b = local.linear.weight, local.linear.bias
    gen = torch.Generator().manual_seed(a.seed + 1)
    x = torch.randn(a.batch, a.features, generator=gen, requires_grad=True)

    # The gradient check, once, outside the timing.
    want = torch.autograd.grad(local(x).sum(), [x, W, b])
    with dist_autograd.context() as cid:
        out = rref.rpc_sync().forward(x)
        if not out.requires_grad:
            raise RuntimeError("the remote forward's result does not require grad")
        dist_autograd.backward(cid, [out.sum()])
        mine = dist_autograd.get_gradients(cid)
        got = [mine[x]] + rref.rpc_sync().gradients(cid)
    worst = 0.0
    for name, g, w in zip(("x", "weight", "bias"), got, want):
        worst = max(worst, (g - w).abs().max().item())
        if not torch.allclose(g, w, rtol=RTOL, atol=ATOL):
            raise RuntimeError(f"the distributed gradient of {name} differs from the local one by up to "
                               f"{(g - w).abs().max().item():.3g}")

    def local_iteration(phases):
        t0 = time.perf_counter()
        loss = local(x).sum()
        t1 = time.perf_counter()
        torch.autograd.grad(loss, [x, W, b])
        t2 = time.perf_counter()
        if phases is not None:
            phases["forward_ms"] += (t1 - t0) * 1e3
            phases["backward_ms"] += (t2 - t1) * 1e3
        return (t2 - t0) * 1e3

    def distributed_iteration(phases):
        t0 = time.perf_counter()
        ctx = dist_autograd.context()
        cid = ctx.__enter__()
        loss = rref.rpc_sync().forward(x).sum()
        t1 = time.perf_counter()
        dist_autograd.backward(cid, [loss])
        t2 = time.perf_counter()
        dist_autograd.get_gradients(cid)
        t3 = time.perf_counter()
        del loss
        ctx.__exit__(None, None, None)  # releases the context (PyTorch: here, and asks worker1 to, unawaited)
        t4 = time.perf_counter()
        if phases is not None:
            phases["forward_ms"] += (t1 - t0) * 1e3
            phases["backward_ms"] += (t2 - t1) * 1e3
            phases["gradients_ms"] += (t3 - t2) * 1e3
            phases["release_ms"] += (t4 - t3) * 1e3
        return (t4 - t0) * 1e3

    for _ in range(a.warmup):
        local_iteration(None)
        distributed_iteration(None)
    lp = dict(forward_ms=0.0, backward_ms=0.0)
    dp = dict(forward_ms=0.0, backward_ms=0.0, gradients_ms=0.0, release_ms=0.0)
    ls, ds = [], []
    for _ in range(a.iters):
        ls.append(local_iteration(lp))
        ds.append(distributed_iteration(dp))
    return worst, [summarize("local", ls, lp), summarize("distributed", ds, dp)]


def rank_main(a, rank, port):
    import torch.distributed.rpc as rpc

    if os.environ.get("OPENBLAS_NUM_THREADS") != str(a.threads):
        raise RuntimeError("OPENBLAS_NUM_THREADS must be set before torch is imported (main() does it)")
    torch.set_num_threads(a.threads)
    opts = rpc.TensorPipeRpcBackendOptions(num_worker_threads=a.rpc_threads, rpc_timeout=a.timeout,
                                           init_method=f"tcp://127.0.0.1:{port}")
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=2, rpc_backend_options=opts)
    if rank != 0:
        rpc.shutdown()  # graceful: serves until worker0 shuts down too
        return 0
    try:
        worst, rows = measure(rpc, torch, a)
    finally:
        rpc.shutdown()
    print(f"# gradient check: distributed == local (allclose), max |diff| {worst:.3g}")
    print(header(a))
    for r in rows:
        print(table_row(r))
    print(footer(*rows))
    print(results(rows, a, torch.__version__), flush=True)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iters", type=int, default=200, help="timed iterations per row")
    ap.add_argument("--warmup", type=int, default=5, help="untimed iterations per row first")
    ap.add_argument("--batch", type=int, default=64, help="rows of x")
    ap.add_argument("--features", type=int, default=1024, help="features in and out of the Linear")
    ap.add_argument("--threads", type=int, default=1, help="compute threads per process (see the header)")
    ap.add_argument("--rpc-threads", type=int, default=4, help="num_worker_threads of each agent")
    ap.add_argument("--seed", type=int, default=0, help="seed of the weights (x: seed + 1)")
    ap.add_argument("--timeout", type=float, default=300, help="rpc timeout in seconds")
    ap.add_argument("--transport", default="tcp", help=argparse.SUPPRESS)  # braid's flag; TensorPipe picks its own
    ap.add_argument("--timeline", type=int, default=0, help=argparse.SUPPRESS)  # braid's flag, for run_*.sh's extras
    ap.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)  # set for the spawned workers
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if min(a.iters, a.batch, a.features, a.threads, a.rpc_threads) < 1 or a.warmup < 0:
        ap.error("--iters, --batch, --features, --threads and --rpc-threads must be positive")

    if a.rank >= 0:
        sys.exit(rank_main(a, a.rank, a.port))

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    print(f"# torch {torch.__version__} dist_autograd (TensorPipe agent, default transports and channels): 2 "
          "workers, worker0 drives, worker1 owns the model", flush=True)
    base = [sys.executable, os.path.abspath(__file__), "--port", str(port)] + sys.argv[1:]
    # OpenBLAS reads its thread count when torch loads it, at the workers' `import torch` (see the header).
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(a.threads), OMP_NUM_THREADS=str(a.threads))
    procs = [subprocess.Popen(base + ["--rank", str(r)], env=env) for r in range(2)]
    codes = [p.wait() for p in procs]
    sys.exit(max(codes))


if __name__ == "__main__":
    main()
