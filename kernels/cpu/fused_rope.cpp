// fused_rope.cpp — CPU rotary position embedding: one pass over x instead of the ~10 tensors of
// the composition (slices, four products, two sums, stack).
//
// Row (…, t) of x [..., T, D] has its interleaved pairs (x[2k], x[2k+1]) rotated by the angle
// a = pos[t] · theta^(−2k/D) read from the tables cos/sin [P, D/2]:
//   y[2k]   = x[2k] cos a − x[2k+1] sin a
//   y[2k+1] = x[2k] sin a + x[2k+1] cos a
// The rotation is orthogonal, so backward is the rotation by −a (inverse = true):
//   dx[2k] = g[2k] cos a + g[2k+1] sin a,   dx[2k+1] = −g[2k] sin a + g[2k+1] cos a
#include <algorithm>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/parallel.h"

namespace tapegrad::kernels::cpu {

void CpuBackend::rope(const TensorView& out, const TensorView& in, const TensorView& cos, const TensorView& sin,
                      const TensorView& positions, bool inverse) {
  dispatch_floating(in.dtype, "rope", [&](auto tag) {
    using T = decltype(tag);
    const int nd = in.ndim();
    const int64_t D = in.shape[nd - 1], half = D / 2, Tn = in.shape[nd - 2];
    const int64_t rows = in.numel() / std::max<int64_t>(1, D);
    const T* c = static_cast<const T*>(cos.data);
    const T* s = static_cast<const T*>(sin.data);
    const T sign = inverse ? T(-1) : T(1);
    std::vector<int64_t> pos(static_cast<size_t>(Tn));
    for (int64_t t = 0; t < Tn; ++t) pos[t] = read_index(positions.data, positions.dtype, t * positions.strides[0] * dtype_size(positions.dtype));
    parallel_for(rows, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, D)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        // row r → multi-index over the dims before D (the last of them is t)
        int64_t rem = r, off_in = 0, off_out = 0, t = 0;
        for (int d = nd - 2; d >= 0; --d) {
          const int64_t idx = rem % in.shape[d];
          rem /= in.shape[d];
          if (d == nd - 2) t = idx;
          off_in += idx * in.strides[d];
          off_out += idx * out.strides[d];
        }
        const T* x = static_cast<const T*>(in.data) + off_in;
        T* y = static_cast<T*>(out.data) + off_out;
        const T* cr = c + pos[t] * half;
        const T* sr = s + pos[t] * half;
#pragma omp simd
        for (int64_t k = 0; k < half; ++k) {
          const T x0 = x[2 * k], x1 = x[2 * k + 1], ck = cr[k], sk = sign * sr[k];
          y[2 * k] = x0 * ck - x1 * sk;
          y[2 * k + 1] = x0 * sk + x1 * ck;
        }
      }
    });
  });
}

}  // namespace tapegrad::kernels::cpu
