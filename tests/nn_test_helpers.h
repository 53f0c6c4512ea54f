// nn_test_helpers.h — shared helpers for the nn module tests (test_nn_modules.cpp, test_nn_classic.cpp):
// a scalar projection for gradchecks, a gradcheck that reports its message, and the input list
// {inputs…, every parameter of a module}.
#pragma once
#include <catch2/catch.hpp>

#include <vector>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/error.h"
#include "nn/module.h"

namespace tapegrad::nn::testing {

// A scalar from a tensor through fixed random weights: one backward checks every output element.
inline Tensor project(const Tensor& y, uint64_t seed) {
  Generator g(seed);
  return (y * randn(y.shape(), y.dtype(), &g)).sum();
}

inline void require_gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs) {
  auto r = gradcheck(fn, inputs);
  INFO(r.message);
  REQUIRE(r.ok);
}

// inputs = {in…, every parameter of m} (all float64 leaves).
inline std::vector<Tensor> with_params(std::vector<Tensor> in, const Module& m) {
  for (auto& p : m.parameters()) in.push_back(p);
  return in;
}
inline std::vector<Tensor> with_params(const Tensor& x, const Module& m) { return with_params(std::vector<Tensor>{x}, m); }

}  // namespace tapegrad::nn::testing
