#!/usr/bin/env bash
# Builds `braid` (Release) and runs `braid bench collectives` the way docs/PERFORMANCE.md reports it:
#   1. allreduce, 4K..64M, backends mpi and gloo, on 2 ranks and on 4 (oversubscribed on small machines);
#   2. allgather, broadcast, reduce_scatter and alltoall at 4K, 1M, 4M and 16M, same backends and rank counts;
#   3. PyTorch's gloo all_reduce at 2 ranks on 4K..64M (bench/torch_allreduce.py), when torch is importable;
# then prints the issue's checks from the RESULT lines: braid/raw at >= 1 MiB, overhead per call at 4 KiB,
# and braid's best CPU backend against PyTorch at 16 MiB on 2 ranks. Each run's full table is kept in
# <build>/collectives-bench/*.txt.
#
# usage: bench/run_collectives_bench.sh [build-dir] [seconds-per-size] [rounds] [min-iters]
#        (defaults: build-bench, 0.4, 7, 10: the large sizes get at least 10 calls a round, whatever the time)
# With more rounds the paired figures (median over rounds of braid against raw in the same round) hold
# still on a shared machine; the seconds per size are split between the rounds.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-build-bench}"
seconds="${2:-0.4}"
rounds="${3:-7}"
min_iters="${4:-10}"
case "$build" in /*) ;; *) build="$root/$build" ;; esac

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBRAID_WITH_CUDA=OFF >/dev/null
cmake --build "$build" --target braid -j"${JOBS:-2}" >/dev/null
braid="$build/cli/braid"
out="$build/collectives-bench"
mkdir -p "$out"
rm -f "$out"/*.txt

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() {  # run <name> <ranks> <braid bench collectives args...>
  local name="$1" np="$2"
  shift 2
  echo "== $name: mpirun -np $np --oversubscribe braid bench collectives $* (load $(cut -d' ' -f1-3 /proc/loadavg))"
  mpirun -np "$np" --oversubscribe "$braid" bench collectives --seconds-per-size "$seconds" --rounds "$rounds" \
    --min-iters "$min_iters" "$@" |
    tee "$out/$name.txt"
}

echo "machine: $(getconf _NPROCESSORS_ONLN) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
for np in 2 4; do
  for backend in mpi gloo; do
    run "allreduce-$backend-np$np" "$np" --backend "$backend" --op allreduce --sizes 4K..64M
  done
done
for np in 2 4; do
  for backend in mpi gloo; do
    run "ops-$backend-np$np" "$np" --backend "$backend" --op allgather,broadcast,reduce_scatter,alltoall --sizes 4K,1M,4M,16M
  done
done

torch_py=""
for py in python3 /usr/bin/python3; do
  if "$py" -c "import torch.distributed" 2>/dev/null; then torch_py="$py"; break; fi
done
if [[ -n "$torch_py" ]]; then
  echo "== torch: $torch_py bench/torch_allreduce.py --ranks 2 --sizes 4K..64M (load $(cut -d' ' -f1-3 /proc/loadavg))"
  "$torch_py" "$root/bench/torch_allreduce.py" --ranks 2 --sizes 4K..64M --seconds-per-size "$seconds" | tee "$out/torch-np2.txt"
else
  echo "PyTorch is not importable (apt-get install python3-torch): no PyTorch reference"
fi

python3 - "$out" <<'PY'
import pathlib, re, sys

out = pathlib.Path(sys.argv[1])
def rows(path):
    """(bytes, time_us, busbw, raw_us) per size from a braid table."""
    res = []
    for line in path.read_text().splitlines():
        f = line.split()
        if len(f) >= 13 and f[0].isdigit():
            res.append((int(f[0]), float(f[5]), float(f[7]), None if f[9] == "-" else float(f[9])))
    return res

print("\n== checks (issue 4)")
for path in sorted(out.glob("allreduce-*.txt")) + sorted(out.glob("ops-*.txt")):
    for line in path.read_text().splitlines():
        if line.startswith("RESULT collectives"):
            kv = dict(p.split("=", 1) for p in line.split()[2:])
            large = kv.get("max_ratio_ge_1MiB", "-")
            paired = kv.get("max_paired_ratio_ge_1MiB", "-")
            print(f"{path.stem:<22} {kv['op']:<15} wrong={kv['wrong']:<3} braid/raw at >= 1 MiB (worst) best rounds "
                  f"{large:>7} paired {paired:>7}   overhead at {kv.get('small_bytes', '-')} B: best rounds "
                  f"{kv.get('small_overhead_us', '-')} us, paired {kv.get('small_paired_overhead_us', '-')} us, "
                  f"CPU per call braid {kv.get('small_cpu_us', '-')} raw {kv.get('small_raw_cpu_us', '-')} us")
torch = out / "torch-np2.txt"
if torch.exists():
    t16 = {int(m.group(1)): float(m.group(3)) for m in
           re.finditer(r"RESULT torch_allreduce_size bytes=(\d+) time_us=([\d.]+) busbw=([\d.]+)", torch.read_text())}
    best = max(((b, r[2]) for b in ("mpi", "gloo") for r in rows(out / f"allreduce-{b}-np2.txt") if r[0] == 16 << 20),
               key=lambda x: x[1], default=None)
    if best and (16 << 20) in t16:
        print(f"16 MiB allreduce on 2 ranks: braid {best[0]} {best[1]:.3f} GB/s busbw vs PyTorch gloo "
              f"{t16[16 << 20]:.3f} GB/s: {best[1] / t16[16 << 20]:.2f}x (target >= 3x)")
PY
