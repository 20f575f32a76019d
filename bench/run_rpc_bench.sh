#!/usr/bin/env bash
# Builds `braid` (Release) and runs the RPC benchmark the way docs/PERFORMANCE.md reports it: `braid bench
# rpc` between 2 processes under mpirun over TCP (and UCX when braid is built with it; `auto`, the default,
# is UCX then), and PyTorch's TensorPipe agent on the same calls (bench/torch_rpc.py) when torch is
# importable. Each braid run also times the large echoes over a plain loopback TCP socket (the tcp
# transport's reference: its goal is >= 0.8x of it on 16 MiB), printed as "socket". Each configuration runs
# RUNS times, interleaved (tcp, ucx, torch, tcp, ...) so that all of them see the same machine load; the
# summary gives each row's median over the runs, the issue's targets and the ratio braid / PyTorch (how
# many times faster braid is: PyTorch's p50 over braid's, braid's throughput over PyTorch's). Each run's
# full table is kept in <build>/rpc-bench/*.txt.
#
# mpirun runs with --bind-to none (MPIRUN_BIND overrides it): Open MPI binds each of 2 ranks to one core by
# default, which puts the caller's thread and its transport's I/O thread on the same core, so that every
# reply waits for a context switch on a core shared with them; on a 2-core machine that doubles the p50 of
# a sync call. PyTorch's processes are not bound either.
#
# usage: bench/run_rpc_bench.sh [build-dir] [runs] [extra braid bench rpc / torch_rpc.py flags...]
#        (defaults: build-bench, 3; e.g. `bench/run_rpc_bench.sh build-bench 1 --iters 500`)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-build-bench}"
runs="${2:-3}"
shift $(($# < 2 ? $# : 2))
case "$build" in /*) ;; *) build="$root/$build" ;; esac

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBRAID_WITH_CUDA=OFF >/dev/null
cmake --build "$build" --target braid -j"${JOBS:-2}" >/dev/null
braid="$build/cli/braid"
out="$build/rpc-bench"
mkdir -p "$out"
rm -f "$out"/*.txt

source "$root/bench/driver_lib.sh"
transports=(tcp)
if braid_built "$braid" ucx; then transports+=(ucx); fi
find_torch_python torch.distributed.rpc

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bind="${MPIRUN_BIND:-none}"
echo "machine: $(getconf _NPROCESSORS_ONLN) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
for run in $(seq 1 "$runs"); do
  for t in "${transports[@]}"; do
    echo "== run $run: mpirun -np 2 --oversubscribe --bind-to $bind braid bench rpc --transport $t $* (load $(load))"
    mpirun -np 2 --oversubscribe --bind-to "$bind" "$braid" bench rpc --transport "$t" "$@" | tee "$out/braid-$t-$run.txt" ||
      echo "(run $run over $t failed: its failed rows are left out)"
  done
  if [[ -n "$torch_py" ]]; then
    echo "== run $run: $torch_py bench/torch_rpc.py $* (load $(load))"
    "$torch_py" "$root/bench/torch_rpc.py" "$@" 2>"$out/torch-$run.log" | tee "$out/torch-$run.txt" ||
      echo "(PyTorch run $run failed: see $out/torch-$run.log)"
  fi
done
echo "load after the runs: $(load)"

python3 - "$out" <<'PY'
import collections, pathlib, statistics, sys

out = pathlib.Path(sys.argv[1])
# config -> (op, bytes) -> list of RESULT dicts, one per run
data = collections.defaultdict(lambda: collections.defaultdict(list))
for path in sorted(out.glob("*.txt")):
    config = path.stem.rsplit("-", 1)[0]  # braid-tcp, braid-ucx, torch
    for line in path.read_text().splitlines():
        if line.startswith("RESULT rpc ") or line.startswith("RESULT torch_rpc "):
            kv = dict(p.split("=", 1) for p in line.split()[2:] if "=" in p)
            if kv.get("op") == "socket_echo":  # the plain-socket reference, the same in every braid run
                kv["op"] = "echo"
                data["socket"][(kv["op"], int(kv["bytes"]))].append(kv)
                continue
            if kv.get("failed") == "1":
                print(f"note: {path.name}: the {kv['op']} row of {kv['bytes']} bytes failed (left out of the medians)")
                continue
            if "failed_calls" in kv:
                print(f"note: {path.name}: {kv['failed_calls']} calls of the {kv['op']} row of {kv['bytes']} bytes "
                      "failed (its numbers are of the others)")
            data[config][(kv["op"], int(kv["bytes"]))].append(kv)

def median(rows, key):
    vals = [float(r[key]) for r in rows if key in r]
    return statistics.median(vals) if vals else None

# (op, bytes, target text, RESULT key, bound, at most?) — the issue's targets
ROWS = [("empty", 0, "p50 <= 40 us", "p50_us", 40, True), ("echo", 64, "", None, None, None),
        ("echo", 1 << 20, "", None, None, None), ("echo", 16 << 20, ">= 4 GB/s", "payload_gbs", 4, False),
        ("remote_to_here", 64, "p50 <= 100 us", "p50_us", 100, True),
        ("async", 0, ">= 100000 calls/s", "calls_per_s", 100000, False)]
configs = [c for c in ("braid-tcp", "braid-ucx", "socket", "torch") if c in data]
if not configs:
    sys.exit("no RESULT lines found")
runs = max(len(v) for c in configs for v in data[c].values())
print(f"\n== medians over {runs} run(s): p50 / p99 in us; throughput in calls/s (echo >= 1 MiB: payload GB/s, one way)")
head = f"{'op':<16} {'size':>7}"
for c in configs:
    head += f" | {c + ' p50':>14} {'p99':>8} {'thr':>9}"
for c in configs:
    if c not in ("torch", "socket") and "torch" in data:
        head += f" | {c + ' vs torch':>16}"
print(head + " | target")

def throughput(op, size, rows):
    if op == "echo" and size >= 1 << 20:
        v = median(rows, "payload_gbs")
        return v, f"{v:.3f}"
    v = median(rows, "calls_per_s")
    return v, f"{v:.0f}"

def size_text(b):
    return "-" if b == 0 else (f"{b >> 20} MiB" if b % (1 << 20) == 0 else f"{b} B")

for op, size, target, key, bound, at_most in ROWS:
    line = f"{op:<16} {size_text(size):>7}"
    for c in configs:
        rows = data[c].get((op, size), [])
        if not rows:
            line += f" | {'-':>14} {'-':>8} {'-':>9}"
            continue
        p50, p99 = median(rows, "p50_us"), median(rows, "p99_us")
        fmt1 = lambda v: "-" if v is None else f"{v:.1f}"
        line += f" | {fmt1(p50):>14} {fmt1(p99):>8}"
        # A row that failed in some runs is the median of the others: "(2)" says of how many.
        line += f" {throughput(op, size, rows)[1] + ('' if len(rows) == runs else f' ({len(rows)})'):>9}"
    for c in configs:
        if c in ("torch", "socket") or "torch" not in data:
            continue
        mine, ref = data[c].get((op, size), []), data["torch"].get((op, size), [])
        ratio = "-"
        if mine and ref:
            if op == "async" or (op == "echo" and size >= 1 << 20):
                ratio = f"{throughput(op, size, mine)[0] / throughput(op, size, ref)[0]:.1f}x"
            else:
                ratio = f"{median(ref, 'p50_us') / median(mine, 'p50_us'):.1f}x"
        line += f" | {ratio:>16}"
    if target:
        verdicts = []
        for c in (c for c in configs if c != "socket"):
            v = median(data[c].get((op, size), []), key)
            if v is not None:
                verdicts.append(f"{c}: {'met' if (v <= bound if at_most else v >= bound) else 'MISSED'}")
        target += " (" + ", ".join(verdicts) + ")"
    print(line + f" | {target}")
# The tcp transport's goal: its 16 MiB echo at >= 0.8x the plain socket's (medians over the runs).
for size in (1 << 20, 16 << 20):
    mine, ref = data.get("braid-tcp", {}).get(("echo", size), []), data.get("socket", {}).get(("echo", size), [])
    if mine and ref:
        ratio = median(mine, "payload_gbs") / median(ref, "payload_gbs")
        goal = f" (goal >= 0.8x: {'met' if ratio >= 0.8 else 'MISSED'})" if size == 16 << 20 else ""
        print(f"braid-tcp echo {size_text(size)} / plain socket echo: {ratio:.2f}x{goal}")
print("((n) after a throughput: the row failed in the other runs and the medians are of n runs)")
print("(vs torch: how many times faster braid is — PyTorch's p50 / braid's p50 for latency rows, braid's "
      "throughput / PyTorch's for echo >= 1 MiB and async)")
PY
