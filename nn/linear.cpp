// linear.cpp — Linear's init and forward.
#include "nn/linear.h"

#include <cmath>

#include "autograd/int8_ops.h"
#include "nn/precision.h"

namespace tapegrad::nn {

Linear::Linear(int64_t in, int64_t out, bool with_bias, DType dtype, Generator* gen)
    : in_features(in), out_features(out) {
  TG_CHECK(in > 0 && out > 0, "Linear: sizes must be positive, got in {} out {}", in, out);
  const double std = std::sqrt(2.0 / static_cast<double>(in + out));
  weight = register_parameter("weight", SkipParameterInitGuard::active()
                                            ? empty({out, in}, dtype)
                                            : trunc_normal({out, in}, 0.0, std, -3 * std, 3 * std, dtype, gen));
  if (with_bias) bias = register_parameter("bias", zeros({out}, dtype));
}

Tensor Linear::forward(const Tensor& x) const {
  TG_CHECK(x.dim() >= 1 && x.size(-1) == in_features, "Linear: input {} must end in in_features = {}", x.shape(),
           in_features);
  if (int8_weight) {
    Tensor y = int8_linear(x, *int8_weight);  // [..., in] → [..., out], int8 groups
    return bias.defined() ? y + bias : y;
  }
  // Under bf16 precision (nn/precision.h) x and the float32 weight are rounded to bf16 here; the matmul
  // accumulates in float32 and gives bf16. Under fp32 both pass unchanged.
  Tensor y = matmul(autocast(x, Stage::Matmul), weight_cast_(weight, Stage::Matmul).t());  // [..., in] @ [in, out]
  return bias.defined() ? y + bias_cast_(bias, Stage::Matmul) : y;
}

Tensor stacked_linear_forward(const Tensor& x, const std::vector<const Linear*>& layers,
                              const StackedWeightCast& cast) {
  std::vector<Tensor> weights;
  for (const Linear* l : layers) {
    if (l->int8_weight || l->bias.defined() || l->in_features != x.size(-1)) return Tensor();
    weights.push_back(l->weight);
  }
  const Tensor stacked = cast(weights, Stage::Matmul);  // [Σ out, in] in the Matmul stage's dtype
  if (!stacked.defined()) return Tensor();
  return matmul(autocast(x, Stage::Matmul), stacked.t());  // [..., in] @ [in, Σ out]
}

void Linear::quantize_int8(int64_t group) {
  TG_CHECK(weight.defined(), "Linear::quantize_int8: the weight is already int8");
  const Tensor w = weight.detach().to(kCPU).to(kFloat32).contiguous();
  set_int8_weight(kernels::quantize_int8(w.data<float>(), out_features, in_features, group));
}

void Linear::set_int8_weight(kernels::Int8Matrix w) {
  kernels::check_int8_matrix(w, "Linear");
  TG_CHECK(w.rows == out_features && w.cols == in_features, "Linear: an int8 weight [{}, {}] for a Linear [{}, {}]",
           w.rows, w.cols, out_features, in_features);
  int8_weight = std::make_shared<const kernels::Int8Matrix>(std::move(w));
  release_parameter("weight");
  weight = Tensor();
}

}  // namespace tapegrad::nn
