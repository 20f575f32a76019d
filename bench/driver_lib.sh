# What the bench drivers (bench/run_*.sh) share.

# build_braid ROOT BUILD: builds `braid` in the folder BUILD and sets braid to its path. An existing build
# folder is used as it is configured (e.g. `build`, RelWithDebInfo: its ccache hits save a full Release build
# on a shared machine); a new one is configured Release (BUILD_TYPE overrides) without CUDA.
build_braid() {
  local root="$1" build="$2"
  if [[ ! -f "$build/CMakeCache.txt" ]]; then
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" -DBRAID_WITH_CUDA=OFF >/dev/null
  fi
  cmake --build "$build" --target braid -j"${JOBS:-2}" >/dev/null
  braid="$build/cli/braid"
}

# Exit status 0 when the braid binary $1 was built with backend or transport $2 (gloo, ucx, ...).
braid_built() {
  "$1" info --json |
    python3 -c 'import json, sys; sys.exit(0 if json.load(sys.stdin)["backends"].get(sys.argv[1], {}).get("built") else 1)' "$2"
}

# Sets torch_py to the first python that imports module $1 (torch.distributed.rpc, ...), or to "" with a
# note that no PyTorch reference will be run.
find_torch_python() {
  torch_py=""
  local py
  for py in python3 /usr/bin/python3; do
    if "$py" -c "import $1" 2>/dev/null; then torch_py="$py"; return; fi
  done
  echo "PyTorch is not importable (apt-get install python3-torch): no PyTorch reference"
}

# The load average, for the lines that start each run.
load() { cut -d' ' -f1-3 /proc/loadavg; }

# pick_openblas_coretype BRAID_BINARY
#
# OpenBLAS 0.3.21's DYNAMIC_ARCH does not know newer CPUs (a Xeon with AVX-512 here) and falls back to its
# Prescott (SSE3) kernels, whose GEMMs are 2-3x slower. braid and Debian's PyTorch load the same
# libopenblas, so one OPENBLAS_CORETYPE serves both sides of a comparison; Haswell is what it picked on the
# machine the issues' figures come from. A value already in the environment is kept.
pick_openblas_coretype() {
  local braid="$1"
  if [[ -z "${OPENBLAS_CORETYPE:-}" ]] && "$braid" info | grep -q 'OpenBLAS.* Prescott '; then
    export OPENBLAS_CORETYPE=Haswell
    echo "OpenBLAS picked its Prescott kernels on this CPU: OPENBLAS_CORETYPE=Haswell for both sides"
  fi
  echo "OpenBLAS: $("$braid" info | grep -o 'OpenBLAS [^;]*')"
}
