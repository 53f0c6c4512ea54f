// backward_pass.h — what a backward function may ask about the backward pass running it (engine.cpp
// answers). Included by the engine and by the ops that reuse a saved buffer (autograd/ops/fused.cpp).
//
//   backward_retains_graph(): true while a backward with retain_graph runs on this thread — a tape entry may
//     then run again, so it must leave what it saved intact. Also true outside any backward (the safe answer).
//   owns_storage(t): t is the only handle on all of its storage (its impl and storage held once, contiguous,
//     offset 0, covering every byte), so nobody else can observe a write into it.
// cross_entropy's backward writes the logits' gradient over the saved logits when both hold (and the pass
// frees the entry right after): one [N, V] buffer less at the peak of a language model's backward.
#pragma once
#include "autograd/tensor.h"

namespace tapegrad::detail {

bool backward_retains_graph();
bool owns_storage(const Tensor& t);

}  // namespace tapegrad::detail
