#!/usr/bin/env python3
"""PyTorch's side of bench/mlp/mlp_bench.cc: the same MLP training step (zero_grad, forward, MSE loss,
backward, SGD(lr=0.01, momentum=0.9) step) on one thread, timed the same way (each step on its own after
warm-up, median reported). Prints a last line "RESULT torch median_ms=... min_ms=... forward_ms=... ...".

usage: mlp_torch.py [--layers 4] [--width 2048] [--batch 64] [--steps 20] [--warmup 3] [--threads 1]
                    [--label torch]
"""
import argparse
import statistics
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--label", default="torch", help="the side's name on the RESULT line")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    layers = []
    for _ in range(a.layers):
        layers += [torch.nn.Linear(a.width, a.width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers)
    x = torch.randn(a.batch, a.width)
    target = torch.randn(a.batch, a.width)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    total, fwd, bwd, upd = [], [], [], []
    loss = None
    for s in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), target)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        if s < a.warmup:
            continue
        total.append((t3 - t0) * 1e3)
        fwd.append((t1 - t0) * 1e3)
        bwd.append((t2 - t1) * 1e3)
        upd.append((t3 - t2) * 1e3)

    med = statistics.median(total)
    print(f"torch {torch.__version__} MLP step: {a.layers} x (Linear({a.width}, {a.width}) + ReLU), batch {a.batch}, "
          f"float32, {torch.get_num_threads()} thread(s)")
    print(f"  {a.steps} steps after {a.warmup} warm-up: median {med:.2f} ms, min {min(total):.2f} ms, "
          f"max {max(total):.2f} ms (loss {loss.item():.6f})")
    print(f"  phases (median): forward+loss {statistics.median(fwd):.2f} ms, backward {statistics.median(bwd):.2f} ms, "
          f"SGD step {statistics.median(upd):.2f} ms")
    print(f"RESULT {a.label} median_ms={med:.3f} min_ms={min(total):.3f} forward_ms={statistics.median(fwd):.3f} "
          f"backward_ms={statistics.median(bwd):.3f} step_ms={statistics.median(upd):.3f}")


if __name__ == "__main__":
    main()
