# Sourced by the bench drivers: pick_openblas_coretype BRAID_BINARY
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
