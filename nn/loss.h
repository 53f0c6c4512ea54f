// loss.h — cross_entropy(logits [..., V], targets [...] int, ignore_index = -100)
//   = mean over the positions whose target ≠ ignore_index of −log_softmax(logits)[target].
// It is the fused op tapegrad::cross_entropy (autograd/ops.h, autograd/ops/fused.cpp — one pass
// over the logits forward, one backward, only the per-row log-sum-exp saved), also reachable as
// nn::cross_entropy; the composition (log_softmax + gather + masked mean) stays here as
// cross_entropy_reference, its test oracle. Both subtract the row max, so logits of ±1e4 are fine. No valid target → NaN (0/0), as in PyTorch.
// A target outside [0, V) that is not ignore_index is a tapegrad::Error.
#pragma once
#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/error.h"

namespace tapegrad::nn {

using tapegrad::cross_entropy;  // the fused op: one function, one name in every layer
// The composition: correct by construction, the reference the fused op is tested against.
Tensor cross_entropy_reference(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100);

}  // namespace tapegrad::nn
