#!/usr/bin/env bash
# blas_env.sh — source it to run OpenBLAS on this CPU's vector kernels.
#
# OpenBLAS 0.3.21 (Debian 12) picks its kernels at load time from the CPU model. On CPUs newer
# than it knows (seen: an Intel Xeon with AVX-512 → "Prescott", SSE3, 5× slower sgemm), it falls
# back to a generic core. When OPENBLAS_CORETYPE is unset and the CPU has AVX-512 (or AVX2), this
# sets it to SkylakeX (or Haswell), the kernels for those instruction sets. An explicit
# OPENBLAS_CORETYPE is always kept. Set TAPEGRAD_BLAS_AUTO=1 to keep OpenBLAS's own choice.
if [[ -z "${OPENBLAS_CORETYPE:-}" && "${TAPEGRAD_BLAS_AUTO:-0}" != 1 ]]; then
  if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
    export OPENBLAS_CORETYPE=SkylakeX
  elif grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
    export OPENBLAS_CORETYPE=Haswell
  fi
fi
