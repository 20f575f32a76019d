#!/usr/bin/env bash
# Builds `braid` and runs the FSDP memory and step-time benchmark the way docs/PERFORMANCE.md reports it:
# `braid bench fsdp` with Adam on LAYERS x Linear(WIDTH, WIDTH) (default 8 x 3584: 102.8 M parameters,
# 392 MiB of float32), each Linear its own unit, for every rank count in RANKS (default "2 4"):
#   UNSHARDED   the plain model on every rank, no communication (the unsharded baseline of the memory)
#   FULL_SHARD  FSDP
#   DDP         DistributedDataParallel on the same model (the step-time reference)
# Each configuration is its own mpirun, so VmHWM (the process's peak resident memory) is its own, and the
# configurations run interleaved (UNSHARDED, FULL_SHARD, DDP at 2 ranks, then at 4, then the next run) so
# that all see the same machine load. The summary gives, per rank count, the median over the runs of each
# configuration's step p50 and of rank 0's peak bytes of parameters + gradients + optimizer state
# (bench/fsdp/fsdp_bench_meter.h) and of every tensor at once (the allocator's peak), FULL_SHARD's peak against
# the target (unsharded / N + the largest unit; and + 2 x the largest unit), and FULL_SHARD's step time / DDP's. Each run's output is kept in <build>/fsdp-bench/*.txt.
#
# usage: bench/run_fsdp_bench.sh [build-dir] [runs] [extra braid bench fsdp flags...]
#        (defaults: build-bench, 2; e.g. `... build 1 --layers 4 --width 1024`). An existing build folder is
#        used as it is configured (`build`, RelWithDebInfo, saves a Release build on a shared machine); a new
#        one is configured Release without CUDA (BUILD_TYPE overrides). BACKEND (default gloo), RANKS,
#        LAYERS, WIDTH, BATCH (per rank, default 8), STEPS (default 3) and WARMUP (default 1) set the rest.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-build-bench}"
runs="${2:-2}"
shift $(($# < 2 ? $# : 2))
case "$build" in /*) ;; *) build="$root/$build" ;; esac

source "$root/bench/driver_lib.sh"
build_braid "$root" "$build"
out="$build/fsdp-bench"
mkdir -p "$out"
rm -f "$out"/*.txt

backend="${BACKEND:-gloo}"
if [[ "$backend" == gloo ]] && ! braid_built "$braid" gloo; then backend=mpi; fi
read -r -a rank_counts <<<"${RANKS:-2 4}"
flags=(--backend "$backend" --optimizer adam --layers "${LAYERS:-8}" --width "${WIDTH:-3584}" --batch "${BATCH:-8}"
       --steps "${STEPS:-3}" --warmup "${WARMUP:-1}")

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# One OpenBLAS thread per rank: the ranks already share the cores.
export OPENBLAS_NUM_THREADS=1
pick_openblas_coretype "$braid"
build_type="$(grep -m1 CMAKE_BUILD_TYPE: "$build/CMakeCache.txt" | cut -d= -f2)"
cpu="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "machine: $(getconf _NPROCESSORS_ONLN) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, build $build_type, $cpu"
for run in $(seq 1 "$runs"); do
  for n in "${rank_counts[@]}"; do
    for s in UNSHARDED FULL_SHARD DDP; do
      echo "== run $run: mpirun -np $n --oversubscribe --bind-to none braid bench fsdp ${flags[*]}" \
        "--strategies $s $* (load $(load))"
      mpirun -np "$n" --oversubscribe --bind-to none "$braid" bench fsdp "${flags[@]}" --strategies "$s" "$@" |
        tee "$out/$s-np$n-$run.txt" || echo "(run $run, $s on $n ranks failed)"
    done
  done
done
echo "load after the runs: $(load)"

python3 - "$out" <<'PY'
import collections, pathlib, statistics, sys

out = pathlib.Path(sys.argv[1])
data = collections.defaultdict(list)  # (strategy, ranks) -> [RESULT dict]
for path in sorted(out.glob("*.txt")):
    for line in path.read_text().splitlines():
        if line.startswith("RESULT fsdp "):
            r = dict(p.split("=", 1) for p in line.split()[2:] if "=" in p)
            data[(r["strategy"], int(r["ranks"]))].append(r)
if not data:
    sys.exit("no RESULT lines found")

def med(key, field):
    vals = [float(r[field]) for r in data.get(key, [])]
    return statistics.median(vals) if vals else None

def f(v, spec=".1f"):
    return "-" if v is None else format(v, spec)

any_row = next(iter(data.values()))[0]
unit = float(any_row["unit_mib"])
print(f"\n== medians over the runs; model {any_row['model_mib']} MiB of parameters, largest unit {unit:.1f} MiB, "
      f"optimizer {any_row['optimizer']}")
print(f"{'ranks':>5} {'config':<11} {'step p50 ms':>12} {'peak state MiB':>15} {'at step MiB':>12} "
      f"{'peak tensors MiB':>17} {'VmHWM MiB':>10} {'runs':>5}")
for n in sorted({k[1] for k in data}):
    for s in ("UNSHARDED", "FULL_SHARD", "DDP"):
        if (s, n) in data:
            print(f"{n:>5} {s:<11} {f(med((s, n), 'median_ms')):>12} {f(med((s, n), 'peak_state_mib')):>15} "
                  f"{f(med((s, n), 'step_state_mib')):>12} {f(med((s, n), 'peak_tensors_mib')):>17} "
                  f"{f(med((s, n), 'hwm_mib')):>10} {len(data[(s, n)]):>5}")
print()
for n in sorted({k[1] for k in data}):
    base, fs, ddp = (med((s, n), "peak_state_mib") for s in ("UNSHARDED", "FULL_SHARD", "DDP"))
    if base is None or fs is None:
        continue
    target = base / n + unit
    # In bytes: the MiB figures are rounded.
    fs_b, base_b = (med((s, n), "peak_state_bytes") for s in ("FULL_SHARD", "UNSHARDED"))
    over = fs_b - (base_b / n + float(any_row["unit_bytes"])) if fs_b is not None and base_b is not None else None
    verdict = "-" if over is None else ("met" if over <= 0 else f"over by {over:.0f} bytes")
    line = (f"{n} ranks: FULL_SHARD peak {fs:.1f} MiB vs target unsharded/{n} + largest unit = {target:.1f} MiB: "
            f"{verdict} ({fs / base:.3f} of unsharded)")
    tensors = med(("FULL_SHARD", n), "peak_tensors_mib")
    if tensors is not None:
        line += (f"; peak tensors (activations and buffers included) {tensors:.1f} MiB: "
                 f"{'within' if tensors <= target else 'over'} the target")
    t_fs, t_ddp = med(("FULL_SHARD", n), "median_ms"), med(("DDP", n), "median_ms")
    if t_fs and t_ddp:
        line += f"; step FULL_SHARD / DDP = {t_fs / t_ddp:.2f}x"
    print(line)
PY
