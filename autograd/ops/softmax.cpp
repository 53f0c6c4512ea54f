// softmax.cpp — softmax and log_softmax along a dim, with their compact backward.
//
//   softmax:      y = exp(x − max) / Σ exp(x − max)      dx = y ⊙ (g − Σ_dim g⊙y)
//   log_softmax:  y = x − max − log Σ exp(x − max)       dx = g − exp(y) ⊙ Σ_dim g
// Both save only the output y. Stable for inputs of ±1e4 (the max is subtracted first).
#include "autograd/ops/op_util.h"

namespace tapegrad {

using detail::backend_of;
using detail::kview;

namespace {

Tensor softmax_impl(const Tensor& x, int64_t dim, bool log) {
  const char* name = log ? "log_softmax" : "softmax";
  detail::check_defined(name, x);
  detail::check_floating(name, x);
  if (x.dim() == 0) return softmax_impl(x.reshape({1}), 0, log).reshape({});
  const int d = wrap_dim(dim, x.dim(), name);
  Tensor y = empty_like(x);
  backend_of(x).softmax(kview(y), kview(x), d, log);
  if (needs_grad(x))
    record(name, {&x}, y, [sy = SavedTensor(y, true), d, log](const Tensor& g, GradInputs& dx) {
      const Tensor& yv = sy.get();
      Tensor gx = empty_like(yv);
      backend_of(yv).softmax_backward(kview(gx), kview(g), kview(yv), d, log);
      dx[0] = gx;
    });
  return y;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_impl(x, dim, false); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_impl(x, dim, true); }

}  // namespace tapegrad
