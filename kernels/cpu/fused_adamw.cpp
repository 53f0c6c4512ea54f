// fused_adamw.cpp — CPU AdamW update of one parameter in one pass over (θ, g, m, v), in
// torch.optim.AdamW's order (optim/adamw.h has the derivation):
//   θ ← θ·(1 − lr·λ)
//   m ← β1·m + (1 − β1)·g
//   v ← β2·v + (1 − β2)·g²
//   θ ← θ − lr/(1 − β1^t) · m / (√v / √(1 − β2^t) + ε)
// The composed form (optim::AdamW::step_reference) reads and writes these tensors ~12 times; this
// reads 4 and writes 3 streams once, so the optimizer step is bounded by memory bandwidth.
#include <cmath>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/nd_loop.h"
#include "kernels/cpu/parallel.h"

namespace tapegrad::kernels::cpu {

void CpuBackend::adamw_update(const TensorView& param, const TensorView& grad, const TensorView& exp_avg,
                              const TensorView& exp_avg_sq, const AdamWStep& s) {
  for (const TensorView* t : {&grad, &exp_avg, &exp_avg_sq})
    TG_CHECK(t->shape == param.shape && t->dtype == param.dtype,
             "adamw_update: tensors must match the parameter {} {}, got {} {}", param.dtype, param.shape, t->dtype,
             t->shape);
  dispatch_floating(param.dtype, "adamw_update", [&](auto tag) {
    using T = decltype(tag);
    const T decay = T(1.0 - s.lr * s.weight_decay), b1 = T(s.beta1), b2 = T(s.beta2), one_b1 = T(1.0 - s.beta1),
            one_b2 = T(1.0 - s.beta2), step_size = T(s.lr / s.bias_correction1),
            sqrt_bc2 = T(std::sqrt(s.bias_correction2)), eps = T(s.eps);
    // p·1 is exact, so "no decay" needs no branch in the loop
    const T keep = s.lr * s.weight_decay != 0.0 ? decay : T(1);
    auto update = [&](T& p, T g, T& m, T& v) {
      m = m * b1 + one_b1 * g;
      v = v * b2 + one_b2 * (g * g);
      p = p * keep - step_size * (m / (std::sqrt(v) / sqrt_bc2 + eps));  // as torch: (√v / √bc2) + ε
    };
    auto loop = make_loop<4>(param.shape, {&param, &grad, &exp_avg, &exp_avg_sq});
    parallel_for(loop.numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
      loop.run(b, e, [&](char** ptr, int64_t n, const int64_t* st) {
        bool contiguous = true;
        for (int k = 0; k < 4; ++k) contiguous &= st[k] == static_cast<int64_t>(sizeof(T));
        if (contiguous) {  // the hot path: a plain loop the compiler vectorizes
          T* __restrict p = reinterpret_cast<T*>(ptr[0]);
          const T* __restrict g = reinterpret_cast<const T*>(ptr[1]);
          T* __restrict m = reinterpret_cast<T*>(ptr[2]);
          T* __restrict v = reinterpret_cast<T*>(ptr[3]);
#pragma omp simd
          for (int64_t i = 0; i < n; ++i) update(p[i], g[i], m[i], v[i]);
        } else {
          for (int64_t i = 0; i < n; ++i)
            update(*reinterpret_cast<T*>(ptr[0] + i * st[0]), *reinterpret_cast<const T*>(ptr[1] + i * st[1]),
                   *reinterpret_cast<T*>(ptr[2] + i * st[2]), *reinterpret_cast<T*>(ptr[3] + i * st[3]));
        }
      });
    });
  });
}

}  // namespace tapegrad::kernels::cpu
