// loss.cpp — cross_entropy_reference: cross-entropy as a composition (log_softmax + gather + masked
// mean), the oracle the fused op tapegrad::cross_entropy (autograd/ops/fused.cpp) is tested against.
#include "nn/loss.h"

namespace tapegrad::nn {
namespace {

// The shared argument checks; returns V.
int64_t check_args(const Tensor& logits, const Tensor& targets) {
  TG_CHECK(logits.defined() && targets.defined(), "cross_entropy: undefined input");
  TG_CHECK(logits.dim() >= 1, "cross_entropy: logits must be [..., V], got {}", logits.shape());
  TG_CHECK(targets.dtype() == kInt64 || targets.dtype() == kInt32, "cross_entropy: targets must be int64 or int32, got {}",
           targets.dtype());
  Shape lead(logits.shape().begin(), logits.shape().end() - 1);
  TG_CHECK(targets.shape() == lead, "cross_entropy: targets {} must be logits {} without the last dim",
           targets.shape(), logits.shape());
  return logits.size(-1);
}

}  // namespace

Tensor cross_entropy_reference(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
  const int64_t V = check_args(logits, targets);
  int64_t count = 0;
  for (int64_t t : targets.to_vector<int64_t>()) {
    if (t == ignore_index) continue;
    TG_CHECK(t >= 0 && t < V, "cross_entropy: target {} is out of range [0, {}) (ignore_index {})", t, V, ignore_index);
    ++count;
  }
  Tensor lp = log_softmax(logits, -1).reshape({-1, V});  // [N, V] = log p
  Tensor t = targets.to(kInt64).reshape({-1});            // [N]
  Tensor valid = ne(t, static_cast<double>(ignore_index));  // [N] bool
  Tensor safe_t = where(valid, t, zeros_like(t));         // ignored rows read class 0, then are zeroed
  Tensor picked = gather(lp, 1, safe_t.unsqueeze(1)).squeeze(1);  // [N] = log p[target]
  Tensor nll = where(valid, -picked, zeros_like(picked));
  return nll.sum() / static_cast<double>(count);          // 0-d; 0/0 = NaN when nothing is valid
}

}  // namespace tapegrad::nn
