// dropout.h — Dropout (Srivastava et al. 2014), "inverted" as in PyTorch:
//   train mode, 0 < p < 1:  y = x ⊙ m / (1 − p),   m ~ Bernoulli(1 − p) independently per element
//   eval mode, or p = 0:    y = x (the same tensor, nothing recorded)
// so E[y] = x and nothing needs rescaling at evaluation. The gradient is dy/dx = m / (1 − p)
// (a multiplication by a constant mask; the mask is not a parameter).
// The masks come from a tapegrad Generator (xoshiro256**, autograd/generator.h): a Dropout built
// with the same seed draws the same masks in the same order on every machine. Several Dropouts may
// share one generator (shared_ptr); without one they draw from default_generator() (manual_seed).
// p outside [0, 1) is a tapegrad::Error (p = 1 would divide by zero).
#pragma once
#include <memory>

#include "nn/module.h"

namespace tapegrad::nn {

class Dropout : public Module {
 public:
  // gen null: the global default_generator().
  explicit Dropout(double p = 0.5, std::shared_ptr<Generator> gen = nullptr);
  // Its own generator, seeded with `seed`.
  Dropout(double p, uint64_t seed);
  // x [...] float → [...] (x itself in eval mode or when p = 0)
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }

  double p;
  std::shared_ptr<Generator> generator;  // null: default_generator()
};

}  // namespace tapegrad::nn
