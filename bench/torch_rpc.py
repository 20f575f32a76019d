#!/usr/bin/env python3
"""PyTorch's side of `braid bench rpc`: the same calls through torch.distributed.rpc (the TensorPipe agent),
timed the same way, printing the same table and RESULT lines.

Two workers: worker0 calls, worker1 serves (it calls rpc.shutdown() at once, which is graceful and returns
when worker0 shuts down too). Measurements, in order:
  empty           rpc_sync of a no-op (no arguments, returns None);
  echo 64 B       rpc_sync of a function returning its argument, a float32 tensor of 16 elements;
  echo 1 MiB, 16 MiB   the same; payload GB/s = tensor bytes / mean round trip (counted one way: the tensor
                  crosses the wire twice per call);
  remote_to_here  rpc.remote of a function returning a 16-element float32 tensor, then to_here() (the RRef
                  is dropped after the clock stops);
  async           `--async-calls` empty rpc_async calls with `--in-flight` outstanding: a new call each time
                  the oldest completes; calls/s = calls / elapsed.
Latency rows: `--warmup` untimed calls, then `--iters` calls each timed alone (large echoes: at most 5
warm-up calls, `--echo-iters` timed); min/p50/p99/max/mean with nearest-rank percentiles. Tensors are made
once and reused; each echo size is checked once, outside the timing. The destination is the WorkerInfo
of worker1, looked up once (as braid's side does).

It starts its own two processes (rendezvous over tcp://127.0.0.1 on a free port), so run it as a plain
program, not under mpirun, with the python that has torch (Debian's python3-torch is in /usr/bin/python3):

    /usr/bin/python3 bench/torch_rpc.py [--iters 2000] [--threads 8]

Machine-readable lines: "RESULT torch_rpc transport=tensorpipe op=empty bytes=0 calls=... p50_us=... ..."
with the keys of braid's "RESULT rpc ..." lines. Not used by any test.
"""
import argparse
import math
import os
import socket
import subprocess
import sys
import time

SMALL_ELEMENTS = 16
LARGE_WARMUP = 5
MIB = 1 << 20
_SMALL = None  # worker1's tensor for remote_to_here, made once


def noop():
    return None


def echo(t):
    return t


def small():
    return _SMALL


def pattern(torch, elements):
    return (torch.arange(elements, dtype=torch.int64) % 1009 - 500).to(torch.float32)


def summarize(samples):
    s = sorted(samples)
    n = len(s)

    def nearest_rank(p):
        return s[min(max(math.ceil(p / 100.0 * n), 1), n) - 1]

    return dict(min_us=s[0], p50_us=nearest_rank(50), p99_us=nearest_rank(99), max_us=s[-1], mean_us=sum(s) / n)


def time_each(op, nbytes, warmup, iters, call, after=lambda: None):
    for _ in range(warmup):
        call()
        after()
    samples = []
    for _ in range(iters):
        t0 = time.perf_counter()
        call()
        samples.append((time.perf_counter() - t0) * 1e6)
        after()
    row = dict(op=op, bytes=nbytes, calls=iters, latency=True, payload_gbs=0.0, **summarize(samples))
    row["calls_per_s"] = 1e6 / row["mean_us"]
    return row


def target(row):
    """(table text, RESULT key, met) of the issue's target for this row, or None."""
    if row["op"] == "empty":
        return "p50 <= 40 us", "p50_us<=40", row["p50_us"] <= 40
    if row["op"] == "remote_to_here":
        return "p50 <= 100 us", "p50_us<=100", row["p50_us"] <= 100
    if row["op"] == "echo" and row["bytes"] == 16 * MIB:
        return ">= 4 GB/s", "payload_gbs>=4", row["payload_gbs"] >= 4
    if row["op"] == "async":
        return ">= 100000 calls/s", "calls_per_s>=100000", row["calls_per_s"] >= 100000
    return None


def table(rows, a):
    names = {"empty": "rpc_sync empty", "echo": "rpc_sync echo", "remote_to_here": "remote+to_here",
             "async": f"rpc_async x{a.in_flight} empty"}
    out = ["#", f"# {'op':<20} {'size':>6} {'calls':>6} {'min':>8} {'p50':>8} {'p99':>8} {'max':>8} {'mean':>8} "
                f"{'throughput':>16}  target (issue 33)",
           f"# {'':<20} {'':>6} {'':>6} {'(us)':>8} {'(us)':>8} {'(us)':>8} {'(us)':>8} {'(us)':>8} {'':>16}"]
    met = 0
    targets = 0
    for r in rows:
        size = "-" if r["bytes"] == 0 else (f"{r['bytes'] // MIB} MiB" if r["bytes"] % MIB == 0 else f"{r['bytes']} B")
        lat = [f"{r[k]:.1f}" if r["latency"] else "-" for k in ("min_us", "p50_us", "p99_us", "max_us")]
        thr = (f"{r['payload_gbs']:.3f} GB/s" if r["op"] == "echo" and r["bytes"] >= MIB
               else f"{r['calls_per_s']:.0f} calls/s")
        t = target(r)
        if t:
            targets += 1
            met += int(t[2])
        out.append(f"  {names[r['op']]:<20} {size:>6} {r['calls']:>6} {lat[0]:>8} {lat[1]:>8} {lat[2]:>8} {lat[3]:>8} "
                   f"{r['mean_us']:>8.1f} {thr:>16}  " + (f"{t[0]}: {'met' if t[2] else 'MISSED'}" if t else ""))
    out.append(f"# targets met: {met} of {targets}")
    return "\n".join(line.rstrip() for line in out)


def results(rows, a, version):
    out = []
    for r in rows:
        line = f"RESULT torch_rpc transport=tensorpipe op={r['op']} bytes={r['bytes']} calls={r['calls']}"
        if r["latency"]:
            line += (f" min_us={r['min_us']:.2f} p50_us={r['p50_us']:.2f} p99_us={r['p99_us']:.2f}"
                     f" max_us={r['max_us']:.2f}")
        line += f" mean_us={r['mean_us']:.2f} calls_per_s={r['calls_per_s']:.1f}"
        if r["op"] == "echo":
            line += f" payload_gbs={r['payload_gbs']:.4f}"
        if r["op"] == "async":
            line += f" in_flight={a.in_flight}"
        line += f" threads={a.threads}"
        t = target(r)
        if t:
            line += f" target={t[1]} met={int(t[2])}"
        out.append(line + f" torch={version}")
    return "\n".join(out)


def measure(rpc, torch, a):
    to = rpc.get_worker_info("worker1")
    rows = []

    def empty_call():
        return rpc.rpc_sync(to, noop)

    if empty_call() is not None:
        raise RuntimeError("noop returned something")
    rows.append(time_each("empty", 0, a.warmup, a.iters, empty_call))

    for elements in (SMALL_ELEMENTS, 1 << 18, 1 << 22):
        t = pattern(torch, elements)

        def echo_call(t=t):
            return rpc.rpc_sync(to, echo, args=(t,))

        if not torch.equal(echo_call(), t):
            raise RuntimeError(f"the echo of a {elements * 4}-byte tensor came back different")
        large = elements > SMALL_ELEMENTS
        row = time_each("echo", elements * 4, min(a.warmup, LARGE_WARMUP) if large else a.warmup,
                        a.echo_iters if large else a.iters, echo_call)
        row["payload_gbs"] = row["bytes"] / (row["mean_us"] * 1e3)
        rows.append(row)

    held = []

    def remote_call():
        held.append(rpc.remote(to, small))
        return held[-1].to_here()

    if remote_call().numel() != SMALL_ELEMENTS:
        raise RuntimeError("to_here() returned the wrong tensor")
    held.clear()
    rows.append(time_each("remote_to_here", SMALL_ELEMENTS * 4, a.warmup, a.iters, remote_call, held.clear))

    def async_window(calls):
        window = [None] * a.in_flight
        t0 = time.perf_counter()
        issued = done = 0
        while done < calls:
            while issued < calls and issued - done < a.in_flight:
                window[issued % a.in_flight] = rpc.rpc_async(to, noop)
                issued += 1
            window[done % a.in_flight].wait()
            done += 1
        return (time.perf_counter() - t0) * 1e6

    async_window(max(a.warmup, a.in_flight))
    elapsed = async_window(a.async_calls)
    mean = elapsed / a.async_calls
    rows.append(dict(op="async", bytes=0, calls=a.async_calls, latency=False, mean_us=mean, calls_per_s=1e6 / mean,
                     payload_gbs=0.0))
    return rows


def rank_main(a, rank, port):
    global _SMALL
    import torch
    import torch.distributed.rpc as rpc

    torch.set_num_threads(1)
    _SMALL = pattern(torch, SMALL_ELEMENTS)
    opts = rpc.TensorPipeRpcBackendOptions(num_worker_threads=a.threads, rpc_timeout=a.timeout,
                                           init_method=f"tcp://127.0.0.1:{port}")
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=2, rpc_backend_options=opts)
    if rank != 0:
        rpc.shutdown()  # graceful: serves until worker0 shuts down too
        return 0
    try:
        rows = measure(rpc, torch, a)
    finally:
        rpc.shutdown()
    print(table(rows, a))
    print(results(rows, a, torch.__version__), flush=True)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iters", type=int, default=2000, help="timed calls per latency row")
    ap.add_argument("--echo-iters", type=int, default=50, help="timed calls per large echo row (1 MiB, 16 MiB)")
    ap.add_argument("--warmup", type=int, default=200, help="untimed calls before each row (large echoes: at most 5)")
    ap.add_argument("--async-calls", type=int, default=20000, help="timed rpc_async calls")
    ap.add_argument("--in-flight", type=int, default=64, help="rpc_async calls kept outstanding")
    ap.add_argument("--threads", type=int, default=8, help="num_worker_threads of each agent")
    ap.add_argument("--timeout", type=float, default=300, help="rpc timeout in seconds")
    ap.add_argument("--rank", type=int, default=-1, help=argparse.SUPPRESS)  # set for the spawned workers
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if min(a.iters, a.echo_iters, a.async_calls, a.in_flight, a.threads) < 1 or a.warmup < 0:
        ap.error("--iters, --echo-iters, --async-calls, --in-flight and --threads must be positive")

    if a.rank >= 0:
        sys.exit(rank_main(a, a.rank, a.port))

    import torch  # fail here, once, when PyTorch is missing

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    print(f"# torch {torch.__version__} rpc (TensorPipe agent, default transports and channels): 2 workers, "
          f"worker0 calls, worker1 serves; {a.threads} worker threads each")
    print(f"# latency rows: {a.warmup} warm-up calls, then {a.iters} calls each timed alone (large echoes: "
          f"{min(a.warmup, LARGE_WARMUP)} warm-up, {a.echo_iters} timed); percentiles by nearest rank")
    print("# echo payload GB/s = tensor bytes / mean round trip, counted one way (the tensor crosses the wire twice "
          "per call)")
    print(f"# async: {a.async_calls} empty rpc_async calls with {a.in_flight} in flight (a new call each time the "
          f"oldest completes); calls/s = calls / elapsed", flush=True)
    base = [sys.executable, os.path.abspath(__file__), "--port", str(port)] + sys.argv[1:]
    procs = [subprocess.Popen(base + ["--rank", str(r)]) for r in range(2)]
    codes = [p.wait() for p in procs]
    sys.exit(max(codes))


if __name__ == "__main__":
    main()
