#!/usr/bin/env bash
# Builds (Release) and runs the tensor benchmarks, then prints braid against its reference side by side:
#   gemm: braid mm_out / mm vs a direct cblas_sgemm (GFLOP/s), sizes 512, 1024, 2048
#   add:  braid binary_out / add of 16M floats vs memcpy of the same bytes (GB/s)
# Separate runs give each side's median over repetitions (interleaved at random) and the ratio of those;
# on a shared, loaded machine they drift apart, so the GEMM acceptance (braid >= 0.95x) is judged on the
# paired runs, which time both sides back to back in every iteration. OpenBLAS threading is whatever the
# environment says (OPENBLAS_NUM_THREADS); both sides run in one process, so they share it.
#
# usage: bench/run_tensor_bench.sh [build-dir] [repetitions]     (defaults: build-bench, 5)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-build-bench}"
reps="${2:-5}"
case "$build" in /*) ;; *) build="$root/$build" ;; esac

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
# CUDA is off: these are CPU benchmarks, and nvcc would only slow the build down.
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBRAID_WITH_CUDA=OFF >"$out/build.log" 2>&1 &&
  cmake --build "$build" --target gemm_bench elementwise_bench -j"${JOBS:-2}" >>"$out/build.log" 2>&1 ||
  { cat "$out/build.log"; exit 1; }
flags=(--benchmark_repetitions="$reps" --benchmark_enable_random_interleaving=true
       --benchmark_report_aggregates_only=true --benchmark_format=json)
"$build/bench/gemm_bench" "${flags[@]}" >"$out/gemm.json"
"$build/bench/elementwise_bench" "${flags[@]}" >"$out/elementwise.json"

python3 - "$out/gemm.json" "$out/elementwise.json" <<'PY'
import json, sys

UNIT = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}

def load(path):
    """{(function, arg): {aggregate: seconds}} for the median and min aggregates, and the paired runs'
    median counters by (variant, size)."""
    doc = json.load(open(path))
    rows, paired = {}, {}
    for b in doc["benchmarks"]:
        agg = b.get("aggregate_name")
        name = b["run_name"].split("/")
        if name[0] == "BM_paired":
            if agg == "median":
                paired[(name[1], name[2])] = b
            continue
        if agg not in ("median", "min"):
            continue
        key = (name[0], name[1] if len(name) > 1 and name[1].isdigit() else "")
        rows.setdefault(key, {})[agg] = b["real_time"] * UNIT[b["time_unit"]]
    return doc["context"], rows, paired

ctx, gemm, paired = load(sys.argv[1])
_, ew, _ = load(sys.argv[2])
print(f"host {ctx.get('host_name')}: {ctx.get('num_cpus')} CPUs @ {ctx.get('mhz_per_cpu')} MHz, load average "
      f"{', '.join(f'{x:.2f}' for x in ctx.get('load_avg', []))}; OpenBLAS threads {ctx.get('openblas_threads')} "
      f"({ctx.get('openblas_config')})")
def row(label, size, unit, work, side, ref_work, ref):
    med = work / side["median"], ref_work / ref["median"]
    best = work / side["min"], ref_work / ref["min"]
    print(f"{label:<24}{size:>6}{med[0]:>9.2f}{med[1]:>11.2f}{unit:>9}{med[0] / med[1]:>10.3f}x"
          f"{best[0] / best[1]:>8.3f}x")

print("-- separate runs: rates of the median repetition; 'best' compares each side's fastest repetition")
print(f"{'benchmark':<24}{'size':>6}{'braid':>9}{'reference':>11}{'unit':>9}{'braid/ref':>11}{'best':>9}")
for size in ("512", "1024", "2048"):
    n = int(size)
    for fn, label in (("BM_braid_mm_out", "mm_out / cblas_sgemm"), ("BM_braid_mm", "mm / cblas_sgemm")):
        flop = 2 * n**3 / 1e9
        row(label, size, "GFLOP/s", flop, gemm[(fn, size)], flop, gemm[("BM_cblas_sgemm", size)])
gb = 16 * 2**20 * 4 / 1e9  # one 64 MiB operand
for fn, label in (("BM_braid_add_out", "add_out / memcpy"), ("BM_braid_add", "add / memcpy")):
    # add moves 3 operands (read a, read b, write out); memcpy 2 (read, write).
    row(label, "16M", "GB/s", 3 * gb, ew[(fn, "")], 2 * gb, ew[("BM_memcpy", "")])
print("-- paired runs (braid and cblas_sgemm back to back in each iteration; median of per-pair ratios)")
print(f"{'benchmark':<24}{'size':>6}{'braid':>9}{'reference':>11}{'unit':>9}{'braid/ref':>11}")
worst = float("inf")
for size in ("512", "1024", "2048"):
    for variant in ("mm_out", "mm"):
        b = paired[(variant, size)]
        worst = min(worst, b["braid/ref"])
        print(f"{variant + ' / cblas_sgemm':<24}{size:>6}{b['braid_GFLOP/s']:>9.2f}{b['ref_GFLOP/s']:>11.2f}"
              f"{'GFLOP/s':>9}{b['braid/ref']:>10.3f}x")
print(f"gemm acceptance (paired), braid >= 0.95x cblas_sgemm at every size: "
      f"{'PASS' if worst >= 0.95 else 'FAIL'} (worst {worst:.3f}x)")
PY
