// grad_probe.h — probe(x, &seen): an identity op (y = a copy of x) whose backward keeps the gradient it receives
// in *seen and passes it on. Put between the op that makes a tensor and its consumer, it shows which buffer the
// consumer's gradient lives in (tests/test_cross_entropy_inplace.cpp, tests/cuda/test_cuda_ce_inplace.cpp).
#pragma once
#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/error.h"

namespace tapegrad::testing {

inline Tensor probe(const Tensor& x, Tensor* seen) {
  Tensor y;
  {
    NoGradGuard no_grad;
    y = x.clone();
  }
  record("probe", {&x}, y, [seen](const Tensor& g, GradInputs& dx) {
    *seen = g;
    dx[0] = g;
  });
  return y;
}

}  // namespace tapegrad::testing
