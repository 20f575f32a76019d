#!/usr/bin/env bash
# Builds `braid` (Release) and runs the distributed autograd benchmark the way docs/PERFORMANCE.md reports
# it: `braid bench dist-autograd` between 2 processes under mpirun over TCP (and UCX when braid is built
# with it), and PyTorch 1.13's torch.distributed.autograd on the same model (bench/torch_dist_autograd.py)
# when torch is importable. Each configuration runs RUNS times, interleaved (tcp, ucx, torch, tcp, ...) so
# that all of them see the same machine load; the summary gives each row's median over the runs and the
# ratios: braid distributed / braid local (target <= 1.15) and braid distributed / PyTorch distributed
# (target <= 0.7), by p50. Each run's full table is kept in <build>/dist-autograd-bench/*.txt.
#
# mpirun runs with --bind-to none (MPIRUN_BIND overrides it): Open MPI binds each of 2 ranks to one core by
# default, which puts a worker's compute, its RPC threads and its transport's I/O thread on one core (see
# bench/run_rpc_bench.sh). PyTorch's processes are not bound either. Both sides run 1 OpenBLAS thread per
# process by default (--threads; bench/torch_dist_autograd.py explains the choice).
#
# usage: bench/run_dist_autograd_bench.sh [build-dir] [runs] [extra braid bench dist-autograd /
#        torch_dist_autograd.py flags...]   (defaults: build-bench, 3; e.g. `... build-bench 1 --iters 20`)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-build-bench}"
runs="${2:-3}"
shift $(($# < 2 ? $# : 2))
case "$build" in /*) ;; *) build="$root/$build" ;; esac

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBRAID_WITH_CUDA=OFF >/dev/null
cmake --build "$build" --target braid -j"${JOBS:-2}" >/dev/null
braid="$build/cli/braid"
out="$build/dist-autograd-bench"
mkdir -p "$out"
rm -f "$out"/*.txt "$out"/*.log

source "$root/bench/driver_lib.sh"
transports=(tcp)
if braid_built "$braid" ucx; then transports+=(ucx); fi
find_torch_python torch.distributed.autograd

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
pick_openblas_coretype "$braid"
bind="${MPIRUN_BIND:-none}"
echo "machine: $(getconf _NPROCESSORS_ONLN) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
for run in $(seq 1 "$runs"); do
  for t in "${transports[@]}"; do
    echo "== run $run: mpirun -np 2 --oversubscribe --bind-to $bind braid bench dist-autograd --transport $t $* (load $(load))"
    mpirun -np 2 --oversubscribe --bind-to "$bind" "$braid" bench dist-autograd --transport "$t" "$@" |
      tee "$out/braid-$t-$run.txt" || echo "(run $run over $t failed)"
  done
  if [[ -n "$torch_py" ]]; then
    echo "== run $run: $torch_py bench/torch_dist_autograd.py $* (load $(load))"
    "$torch_py" "$root/bench/torch_dist_autograd.py" "$@" 2>"$out/torch-$run.log" | tee "$out/torch-$run.txt" ||
      echo "(PyTorch run $run failed: see $out/torch-$run.log)"
  fi
done
echo "load after the runs: $(load)"

python3 - "$out" <<'PY'
import collections, pathlib, statistics, sys

out = pathlib.Path(sys.argv[1])
data = collections.defaultdict(lambda: collections.defaultdict(list))  # config -> mode -> [RESULT dict]
for path in sorted(out.glob("*.txt")):
    config = path.stem.rsplit("-", 1)[0]  # braid-tcp, braid-ucx, torch
    for line in path.read_text().splitlines():
        if line.startswith("RESULT dist_autograd ") or line.startswith("RESULT torch_dist_autograd "):
            kv = dict(p.split("=", 1) for p in line.split()[2:] if "=" in p)
            data[config][kv["mode"]].append(kv)
        elif line.startswith("RESULT dist_autograd_timeline "):
            kv = dict(p.split("=", 1) for p in line.split()[2:] if "=" in p)
            data[config]["timeline"].append(kv)
configs = [c for c in ("braid-tcp", "braid-ucx", "torch") if c in data]
if not configs:
    sys.exit("no RESULT lines found")

def median(config, mode, key):
    vals = [float(r[key]) for r in data[config][mode] if key in r]
    return statistics.median(vals) if vals else None

def fmt(v, spec=".3f"):
    return "-" if v is None else format(v, spec)

runs = max(len(data[c][m]) for c in configs for m in ("local", "distributed"))
print(f"\n== medians over {runs} run(s), ms per iteration (p50 / mean / min of each run, then the median over runs)")
print(f"{'config':<10} {'mode':<12} {'p50':>8} {'mean':>8} {'min':>8} | {'forward':>8} {'backward':>8} "
      f"{'grads':>8} {'release':>8} | runs")
for c in configs:
    for mode in ("local", "distributed"):
        if not data[c][mode]:
            continue
        print(f"{c:<10} {mode:<12} {fmt(median(c, mode, 'p50_ms')):>8} {fmt(median(c, mode, 'mean_ms')):>8} "
              f"{fmt(median(c, mode, 'min_ms')):>8} | {fmt(median(c, mode, 'forward_ms')):>8} "
              f"{fmt(median(c, mode, 'backward_ms')):>8} {fmt(median(c, mode, 'gradients_ms')):>8} "
              f"{fmt(median(c, mode, 'release_ms')):>8} | {len(data[c][mode])}")

print("\n== ratios (of the medians of p50)")
for c in configs:
    local, dist = median(c, "local", "p50_ms"), median(c, "distributed", "p50_ms")
    if local is None or dist is None:
        continue
    r = dist / local
    # The per-run ratios too: both rows of one run saw the same load (they alternate iteration by iteration).
    per_run = [float(r_["ratio"]) for r_ in data[c]["distributed"] if "ratio" in r_]
    runs_text = ", ".join(f"{v:.2f}" for v in per_run)
    # The fastest iterations of each row: the least disturbed by other programs (not the target's figure).
    rmin = median(c, "distributed", "min_ms") / median(c, "local", "min_ms")
    verdict = "" if c == "torch" else f"   target <= 1.15: {'met' if r <= 1.15 else 'MISSED'}"
    print(f"{c:<10} distributed / local = {r:.3f}x   (per run: {runs_text}; by min: {rmin:.3f}x){verdict}")
if "torch" in data and median("torch", "distributed", "p50_ms"):
    ref = median("torch", "distributed", "p50_ms")
    for c in configs:
        if c == "torch" or median(c, "distributed", "p50_ms") is None:
            continue
        r = median(c, "distributed", "p50_ms") / ref
        print(f"{c:<10} distributed / PyTorch distributed = {r:.3f}x   target <= 0.7: {'met' if r <= 0.7 else 'MISSED'}")

for c in configs:
    tl = data[c]["timeline"]
    if not tl:
        continue
    keys = [k[:-3] for k in tl[0] if k.endswith("_ms") and not k.endswith("_p50_ms") and k != "total_ms"]
    print(f"\n== {c}: where a distributed iteration's time goes (medians over runs of each segment's p50, ms)")
    for k in keys:
        print(f"  {k:<22} {statistics.median(float(r[k + '_p50_ms']) for r in tl):8.3f}")
PY
