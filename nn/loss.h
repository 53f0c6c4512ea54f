// loss.h — cross_entropy(logits [..., V], targets [...] int, ignore_index = -100)
//   = mean over the positions whose target ≠ ignore_index of −log_softmax(logits)[target].
// A composition (log_softmax + gather + masked mean), so its gradient comes from its parts;
// log_softmax subtracts the row max, so logits of ±1e4 are fine. No valid target → NaN (0/0), as
// in PyTorch. A target outside [0, V) that is not ignore_index is a tapegrad::Error.
#pragma once
#include "autograd/tapegrad.h"

namespace tapegrad::nn {

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100);

}  // namespace tapegrad::nn
