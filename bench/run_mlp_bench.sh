#!/usr/bin/env bash
# Builds bench_mlp (Release) and times one MLP training step in braid and, when PyTorch is importable, in
# PyTorch, then prints them side by side with the ratio braid/torch (issue target: <= 1.1x).
#   model: 4 x (Linear(2048, 2048) + ReLU), batch 64, float32, MSE loss, SGD(lr 0.01, momentum 0.9)
# Both sides run one thread (OPENBLAS_NUM_THREADS=1 / OMP_NUM_THREADS=1, torch.set_num_threads(1)).
#
# PyTorch runs twice per round. "torch" is as installed. "torch-tuned" keeps glibc from handing the 16 MiB
# gradient buffers back to the kernel after every step (MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_):
# PyTorch's CPU allocator does not cache, so by default each step pays page faults on fresh gradient
# memory, which on some VMs costs more than the GEMMs. braid's caching allocator never pays them, so the
# ratio is taken against the faster of the two PyTorch runs: the comparison is then GEMM against GEMM.
#
# The sides alternate for `rounds` rounds so that a slow spell on a shared machine hits all alike; each
# figure is the median over rounds of each run's median step.
#
# usage: bench/run_mlp_bench.sh [build-dir] [rounds] [steps]     (defaults: build-release, 3, 20)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-build-release}"
rounds="${2:-3}"
steps="${3:-20}"
case "$build" in /*) ;; *) build="$root/$build" ;; esac

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBRAID_WITH_CUDA=OFF >/dev/null
cmake --build "$build" --target bench_mlp -j"${JOBS:-2}" >/dev/null

export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1

# Debian's python3-torch installs into the system python, which may not be the first python3 on PATH.
torch_py=""
for py in python3 /usr/bin/python3; do
  if command -v "$py" >/dev/null && "$py" -c "import torch" 2>/dev/null; then torch_py="$py"; break; fi
done

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
for ((r = 0; r < rounds; ++r)); do
  "$build/bench/bench_mlp" --steps "$steps" | tee -a "$out/log" | grep '^RESULT' >>"$out/results"
  if [[ -n "$torch_py" ]]; then
    "$torch_py" "$root/bench/mlp/mlp_torch.py" --steps "$steps" --label torch |
      tee -a "$out/log" | grep '^RESULT' >>"$out/results"
    MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=4294967296 \
      "$torch_py" "$root/bench/mlp/mlp_torch.py" --steps "$steps" --label torch-tuned |
      tee -a "$out/log" | grep '^RESULT' >>"$out/results"
  fi
done
[[ -n "$torch_py" ]] || echo "PyTorch is not importable (apt-get install python3-torch): braid only"

python3 - "$out/results" "$(getconf _NPROCESSORS_ONLN)" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'PY'
import statistics, sys

runs = {}
for line in open(sys.argv[1]):
    _, side, *fields = line.split()
    runs.setdefault(side, []).append({k: float(v) for k, v in (f.split("=") for f in fields)})

def med(side, key):
    return statistics.median(r[key] for r in runs[side])

print()
print(f"MLP step, 4 x (Linear(2048, 2048) + ReLU), batch 64, float32, 1 thread; {sys.argv[2]} cores, load "
      f"average {sys.argv[3]}; median of {len(runs['braid'])} runs' medians (ms)")
print(f"{'side':<13}{'step':>9}{'best':>9}{'forward':>9}{'backward':>10}{'SGD step':>10}")
for side in runs:
    print(f"{side:<13}{med(side, 'median_ms'):>9.2f}{min(r['min_ms'] for r in runs[side]):>9.2f}"
          f"{med(side, 'forward_ms'):>9.2f}{med(side, 'backward_ms'):>10.2f}{med(side, 'step_ms'):>10.2f}")
torch_sides = [s for s in runs if s.startswith("torch")]
if torch_sides:
    braid = med("braid", "median_ms")
    for side in torch_sides:
        print(f"braid/{side}: {braid / med(side, 'median_ms'):.3f}x")
    best = min(torch_sides, key=lambda s: med(s, "median_ms"))
    ratio = braid / med(best, "median_ms")
    print(f"target braid <= 1.1x the faster PyTorch ({best}): {ratio:.3f}x {'PASS' if ratio <= 1.1 else 'FAIL'}")
PY
