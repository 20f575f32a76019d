#!/usr/bin/env bash
# Builds `braid` (Release, in its own folder) and runs the DDP benchmark the way docs/PERFORMANCE.md reports
# it: `braid bench ddp` on 2 ranks under mpirun over each CPU backend (mpi, and gloo when built), and PyTorch
# 1.13's DDP over gloo on the same model (bench/torch_ddp.py) when torch is importable, three times: as
# installed ("torch"), with glibc's malloc thresholds raised ("torch-tuned", see bench/torch_ddp.py), and with
# those plus transparent huge pages for malloc's memory ("torch-thp": GLIBC_TUNABLES=glibc.malloc.hugetlb=1,
# what braid's own allocator does for its large blocks). Each configuration runs RUNS times, interleaved
# (mpi, gloo, torch, torch-tuned, torch-thp, mpi, ...) so that all of them see the same machine load. The
# summary gives each configuration's median over the runs of single p50 and DDP p50, the ratio ddp / single
# (target <= 1.25 on the fastest backend) and braid's DDP step / PyTorch's (target <= 0.7, against the
# fastest PyTorch configuration). Each run's full table is kept in <build>/ddp-bench/*.txt.
#
# mpirun runs with --bind-to none (MPIRUN_BIND overrides it), as the other two-process benchmarks: a rank's
# compute and its engine's progress threads then share both cores. Both sides run 1 OpenBLAS thread per rank.
#
# usage: bench/run_ddp_bench.sh [build-dir] [runs] [extra braid bench ddp / torch_ddp.py flags...]
#        (defaults: build-bench, 3; e.g. `... build-bench 1 --iters 10`). BUILD_TYPE=RelWithDebInfo configures a
#        new build folder that way instead of Release; BACKENDS="gloo" limits braid's backends.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-build-bench}"
runs="${2:-3}"
shift $(($# < 2 ? $# : 2))
case "$build" in /*) ;; *) build="$root/$build" ;; esac

source "$root/bench/driver_lib.sh"
build_braid "$root" "$build"
out="$build/ddp-bench"
mkdir -p "$out"
rm -f "$out"/*.txt "$out"/*.log

read -r -a backends <<<"${BACKENDS:-mpi gloo}"
if ! braid_built "$braid" gloo; then backends=("${backends[@]/gloo/}"); fi
find_torch_python torch.distributed

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
pick_openblas_coretype "$braid"
bind="${MPIRUN_BIND:-none}"
echo "machine: $(getconf _NPROCESSORS_ONLN) cores, build $(grep -m1 CMAKE_BUILD_TYPE: "$build/CMakeCache.txt" | cut -d= -f2), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
for run in $(seq 1 "$runs"); do
  for b in "${backends[@]}"; do
    [[ -n "$b" ]] || continue
    echo "== run $run: mpirun -np 2 --oversubscribe --bind-to $bind braid bench ddp --backend $b $* (load $(load))"
    mpirun -np 2 --oversubscribe --bind-to "$bind" "$braid" bench ddp --backend "$b" "$@" |
      tee "$out/braid-$b-$run.txt" || echo "(run $run over $b failed)"
  done
  if [[ -n "$torch_py" ]]; then
    echo "== run $run: $torch_py bench/torch_ddp.py $* (load $(load))"
    "$torch_py" "$root/bench/torch_ddp.py" "$@" 2>"$out/torch-$run.log" | tee "$out/torch-$run.txt" ||
      echo "(PyTorch run $run failed: see $out/torch-$run.log)"
    echo "== run $run: MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=4294967296 $torch_py bench/torch_ddp.py $* (load $(load))"
    MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=4294967296 \
      "$torch_py" "$root/bench/torch_ddp.py" "$@" 2>"$out/torch_tuned-$run.log" | tee "$out/torch_tuned-$run.txt" ||
      echo "(PyTorch tuned run $run failed: see $out/torch_tuned-$run.log)"
    echo "== run $run: MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=4294967296 GLIBC_TUNABLES=glibc.malloc.hugetlb=1 $torch_py bench/torch_ddp.py $* (load $(load))"
    MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=4294967296 GLIBC_TUNABLES=glibc.malloc.hugetlb=1 \
      "$torch_py" "$root/bench/torch_ddp.py" "$@" 2>"$out/torch_thp-$run.log" | tee "$out/torch_thp-$run.txt" ||
      echo "(PyTorch THP run $run failed: see $out/torch_thp-$run.log)"
  fi
done
echo "load after the runs: $(load)"

python3 - "$out" <<'PY'
import collections, pathlib, statistics, sys

out = pathlib.Path(sys.argv[1])
data = collections.defaultdict(list)  # config -> [RESULT dict]
for path in sorted(out.glob("*.txt")):
    config = path.stem.rsplit("-", 1)[0]  # braid-mpi, braid-gloo, torch, torch_tuned, torch_thp
    for line in path.read_text().splitlines():
        if line.startswith("RESULT ddp ") or line.startswith("RESULT torch_ddp "):
            data[config].append(dict(p.split("=", 1) for p in line.split()[2:] if "=" in p))
configs = [c for c in ("braid-mpi", "braid-gloo", "torch", "torch_tuned", "torch_thp") if c in data]
if not configs:
    sys.exit("no RESULT lines found")

def med(c, key):
    vals = [float(r[key]) for r in data[c] if key in r]
    return statistics.median(vals) if vals else None

def f(v, spec=".2f"):
    return "-" if v is None else format(v, spec)

print(f"\n== medians over the runs, ms per step (p50 of each run)")
print(f"{'config':<12} {'single':>8} {'ddp':>8} {'ddp/single':>11} {'per run':<24} {'overlap':>8} {'comm':>8} "
      f"{'tail':>7} | runs")
for c in configs:
    per_run = ", ".join(f"{float(r['ratio']):.2f}" for r in data[c])
    print(f"{c:<12} {f(med(c, 'single_p50_ms')):>8} {f(med(c, 'ddp_p50_ms')):>8} {f(med(c, 'ratio'), '.3f'):>10}x "
          f"{per_run:<24} {f(med(c, 'overlap')):>8} {f(med(c, 'comm_ms')):>8} {f(med(c, 'tail_ms')):>7} | {len(data[c])}")
refs = {c: med(c, "ddp_p50_ms") for c in ("torch", "torch_tuned", "torch_thp") if c in data}
ref_name = min(refs, key=refs.get) if refs else None
print()
for c in configs:
    if not c.startswith("braid"):
        continue
    r = med(c, "ratio")
    line = f"{c:<12} ddp / single = {r:.3f}x (target <= 1.25: {'met' if r <= 1.25 else 'MISSED'})"
    if ref_name:
        v = med(c, "ddp_p50_ms") / refs[ref_name]
        line += f"; ddp / PyTorch ddp ({ref_name}) = {v:.3f}x (target <= 0.7: {'met' if v <= 0.7 else 'MISSED'})"
    print(line)
    launches = [r["launch_ms"] for r in data[c] if r.get("launch_ms")]
    if launches:
        print(f"{'':<12} bucket launches (ms after backward starts), per run: {'; '.join(launches)}")
PY
