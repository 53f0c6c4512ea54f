// cuda_test_util.h — helpers of the cross-backend suite: run one Backend function on the CPU backend
// and on the CUDA backend with the same random inputs, and compare the results.
//
// Inputs are autograd Tensors made on the CPU (randn/rand/from_vector); on_cuda(t) is a contiguous
// copy on cuda:0. For strided inputs, take the same view on both devices after the copy
// (e.g. on_cuda(base).transpose(0, 1) beside base.transpose(0, 1)): views are device-agnostic.
// view(t) is the TensorView a backend sees.
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/ops.h"
#include "autograd/ops/op_util.h"
#include "autograd/tensor.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/error.h"

namespace tapegrad::cuda_test {

inline Device gpu() { return Device::cuda(0); }
inline kernels::Backend& cpu_be() { return kernels::backend(Device::cpu()); }
inline kernels::Backend& gpu_be() { return kernels::backend(gpu()); }

// The TensorView of t (data pointer at t's first element, t's shape and strides).
inline kernels::TensorView view(const Tensor& t) { return detail::kview(t); }

// A contiguous copy of t on cuda:0.
inline Tensor on_cuda(const Tensor& t) { return t.to(gpu()); }

// Element values of a tensor on any device, as double, in row-major order of its shape.
inline std::vector<double> values(const Tensor& t) { return t.to(Device::cpu()).contiguous().to_vector<double>(); }

// Every element of `got` within atol + rtol·|want| of `want` (NaN matches NaN; ±inf must match).
inline void expect_close(const Tensor& want, const Tensor& got, double rtol, double atol, const std::string& what) {
  INFO(what);
  REQUIRE(want.shape() == got.shape());
  const std::vector<double> w = values(want), g = values(got);
  int64_t bad = 0, first_bad = -1;
  for (size_t i = 0; i < w.size(); ++i) {
    const bool ok = (std::isnan(w[i]) && std::isnan(g[i])) || w[i] == g[i] ||
                    std::abs(w[i] - g[i]) <= atol + rtol * std::abs(w[i]);
    if (!ok && bad++ == 0) first_bad = static_cast<int64_t>(i);
  }
  if (bad > 0) {
    const auto i = static_cast<size_t>(first_bad);
    FAIL_CHECK(bad << " of " << w.size() << " elements differ; first at " << first_bad << ": cpu " << w[i]
                   << " vs cuda " << g[i] << " (rtol " << rtol << ", atol " << atol << ")");
  }
}

// The default tolerances of the suite: float32 (TF32 off) 1e-5 relative, float64 1e-12.
inline double rtol_for(DType t) { return t == kFloat64 ? 1e-12 : 1e-5; }
inline double atol_for(DType t) { return t == kFloat64 ? 1e-12 : 1e-6; }

}  // namespace tapegrad::cuda_test
