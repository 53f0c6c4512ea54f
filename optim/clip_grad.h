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

// On the CPU the sums are read as they are computed; on a GPU the whole computation (sums, norm,
// the decision to clip, the scaling) stays on the device and reading n is the one synchronisation.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

// The same without reading anything back: returns n as a 0-d float64 tensor on the gradients'
// device (undefined when no parameter has a gradient). No host synchronisation on a GPU.
Tensor clip_grad_norm_tensor(const std::vector<Tensor>& params, double max_norm);

}  // namespace tapegrad::optim
