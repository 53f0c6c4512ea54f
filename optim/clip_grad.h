// clip_grad.h — gradient clipping by the global L2 norm (CS336 gradient_clipping, like
// torch.nn.utils.clip_grad_norm_ with norm_type 2):
//   n = √(Σ_params Σ_elements g²)     over every parameter that has a .grad (others are skipped)
//   if n > max_norm:  g ← g · max_norm/(n + 1e-6)   for every gradient, in place
// Returns n, the norm before clipping. A non-finite n (inf/NaN gradients) is returned and nothing
// is scaled. Call it between backward() and step().
#pragma once
#include <vector>

#include "autograd/tensor.h"

namespace tapegrad::optim {

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

}  // namespace tapegrad::optim
