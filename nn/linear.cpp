// linear.cpp — Linear's init and forward.
#include "nn/linear.h"

#include <cmath>

namespace tapegrad::nn {

Linear::Linear(int64_t in, int64_t out, bool with_bias, DType dtype, Generator* gen)
    : in_features(in), out_features(out) {
  TG_CHECK(in > 0 && out > 0, "Linear: sizes must be positive, got in {} out {}", in, out);
  const double std = std::sqrt(2.0 / static_cast<double>(in + out));
  weight = register_parameter("weight", trunc_normal({out, in}, 0.0, std, -3 * std, 3 * std, dtype, gen));
  if (with_bias) bias = register_parameter("bias", zeros({out}, dtype));
}

Tensor Linear::forward(const Tensor& x) const {
  TG_CHECK(x.dim() >= 1 && x.size(-1) == in_features, "Linear: input {} must end in in_features = {}", x.shape(),
           in_features);
  Tensor y = matmul(x, weight.t());  // [..., in] @ [in, out] → [..., out]
  return bias.defined() ? y + bias : y;
}

}  // namespace tapegrad::nn
