// sample_token.cpp — the next token drawn on the logits' device (Backend::sample_token); never recorded on the
// tape. Used by lm::GraphDecoder, whose captured decode step then sends the host {id, status}, not the row.
#include <cmath>

#include "autograd/ops.h"
#include "autograd/ops/op_util.h"

namespace tapegrad {

using detail::backend_of;
using detail::kview;

Tensor sample_token(const Tensor& logits, const Tensor& uniform, const TokenSampling& sampling, const Tensor& token) {
  const char* op = "sample_token";
  detail::check_defined(op, logits);
  TG_CHECK(logits.dim() == 1 && logits.numel() >= 1, "{}: logits must be one row [V], got {}", op, logits.shape());
  detail::check_floating(op, logits);
  TG_CHECK(std::isfinite(sampling.temperature) && sampling.temperature >= 0,
           "{}: temperature must be a finite number >= 0, but is {}", op, sampling.temperature);
  TG_CHECK(sampling.top_k >= 0, "{}: top_k must be >= 0 (0: off), but is {}", op, sampling.top_k);
  TG_CHECK(sampling.top_p > 0 && sampling.top_p <= 1, "{}: top_p must be in (0, 1], but is {}", op, sampling.top_p);
  const bool greedy = sampling.greedy || sampling.temperature == 0;
  if (!greedy) {
    detail::check_defined(op, uniform);
    detail::check_same_device(op, logits, uniform);
    TG_CHECK(uniform.dtype() == kFloat64 && uniform.numel() == 1,
             "{}: the uniform must be a float64 tensor of 1 element, got {} {}", op, uniform.dtype(), uniform.shape());
  }
  if (token.defined()) {
    detail::check_same_device(op, logits, token);
    TG_CHECK(token.dtype() == kInt64 && token.numel() == 1, "{}: token must be an int64 tensor of 1 element, got {} {}",
             op, token.dtype(), token.shape());
  }
  const Tensor row = logits.contiguous();
  Tensor result = empty({2}, Options(kFloat64).device(logits.device()));
  const kernels::TensorView token_view = token.defined() ? kview(token) : kernels::TensorView{};
  const kernels::TensorView uniform_view = uniform.defined() ? kview(uniform) : kernels::TensorView{};  // 1 element
  TG_CHECK(backend_of(row).sample_token(token_view, kview(result), kview(row), uniform_view, sampling),
           "{}: {} has no kernel drawing tokens (the CPU: lm::Sampler draws from the logits where they are)", op,
           logits.device().str());
  if (token.defined()) token.storage()->bump_version();
  return result;
}

}  // namespace tapegrad
