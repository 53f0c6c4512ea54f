// gradcheck_samples.h — the samples that tests/test_gradcheck_ops.cpp checks: for every op of
// autograd/ops/ops.def, small float64 inputs and a function of them that exercises the op.
//
// Reading guide (for people learning backprop): each sample is
//   op     the ops.def name it is filed under (the suite fails if an op has no sample),
//   what   one line saying what the sample exercises,
//   make   builds the inputs from a seeded Generator: leaves, some requiring grad (gradcheck
//          differentiates with respect to those), some constants, index and mask tensors,
//   fn     the computation. Views that overlap in memory (expand) must be built INSIDE fn:
//          gradcheck perturbs input elements one at a time through their strides, and an
//          input whose elements share memory cannot be perturbed one element at a time.
// Inputs are chosen away from the points where an op is not differentiable: no ties for
// max/min, |x| ≥ 0.1 for abs/relu, positive inputs for log/sqrt/rsqrt/fractional pow.
// Constants made inside fn take their dtype from an input, so every sample also runs in float32
// (the float32-vs-float64 test), except the ones marked f32 = false.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "autograd/tapegrad.h"

namespace tapegrad::gradcheck_samples {

using Inputs = std::vector<Tensor>;

struct Sample {
  std::string op;    // ops.def name
  std::string what;  // what it exercises
  std::function<Inputs(Generator&)> make;
  std::function<Tensor(const Inputs&)> fn;
  double eps = 1e-6, atol = 1e-5, rtol = 1e-3;
  bool f32 = true;  // also compare float32 gradients against float64 ones
  // Computes in float32 inside a float64 function (to_dtype round trips): the CPU/CUDA comparison
  // (tests/cuda/test_cuda_ops.cpp) then uses float32's tolerance, since the two backends' float32
  // transcendentals (glibc tanhf vs CUDA's tanhf) may differ by an ulp.
  bool float32_inside = false;
};

// ---- input builders (all float64) ----

// N(0, 1) values; a parameter (requires grad) or a constant.
inline Tensor param(const Shape& s, Generator& g) { return randn(s, Options(kFloat64).requires_grad(), &g); }
inline Tensor constant(const Shape& s, Generator& g) { return randn(s, Options(kFloat64), &g); }

// Uniform in [lo, hi), requires grad — for ops defined (or smooth) only on positive inputs.
inline Tensor positive(const Shape& s, Generator& g, double lo = 0.5, double hi = 2.0) {
  Tensor t = add(mul(rand(s, Options(kFloat64), &g), hi - lo), lo);
  t.requires_grad_();
  return t;
}

// N(0, 1) values pushed at least 0.1 away from 0, requires grad — for abs and relu, whose
// derivative jumps at 0 (a central difference straddling 0 would see the average slope).
inline Tensor away_from_zero(const Shape& s, Generator& g) {
  std::vector<double> v(static_cast<size_t>(s.numel()));
  for (double& x : v) {
    x = g.normal();
    x = x >= 0 ? x + 0.1 : x - 0.1;
  }
  return tensor(v, s, Options(kFloat64).requires_grad());
}

// Distinct values (pairwise gaps ≥ 0.25) in random order, requires grad — for max/min: the
// gradient goes to the arg-max, which must be unique and stay the arg-max under a ±ε nudge.
inline Tensor distinct(const Shape& s, Generator& g) {
  const int64_t n = s.numel();
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = 0.25 * static_cast<double>(i) - 0.125 * static_cast<double>(n);
  for (int64_t i = n - 1; i > 0; --i) std::swap(v[i], v[g.below(static_cast<uint64_t>(i + 1))]);  // shuffle
  return tensor(v, s, Options(kFloat64).requires_grad());
}

// A non-contiguous leaf: a [cols, rows] buffer seen transposed as [rows, cols] (strides {1, rows}).
inline Tensor transposed_param(int64_t rows, int64_t cols, Generator& g) {
  Tensor t = randn({cols, rows}, Options(kFloat64), &g).t();
  t.requires_grad_();
  return t;
}

inline Tensor ids(const std::vector<int64_t>& v, const Shape& s) { return from_vector<int64_t>(v, s); }
inline Tensor mask(const std::vector<double>& bits, const Shape& s) { return tensor(bits, s, Options(kBool)); }

// ---- the samples ----

inline std::vector<Sample> all_samples() {
  std::vector<Sample> s;
  auto add_sample = [&](std::string op, std::string what, std::function<Inputs(Generator&)> make,
                        std::function<Tensor(const Inputs&)> fn) -> Sample& {
    s.push_back(Sample{std::move(op), std::move(what), std::move(make), std::move(fn)});
    return s.back();
  };

  // ---------------- elementwise, binary ----------------
  add_sample("add", "[3,1] + [1,4]: both operands broadcast, gradients summed back over the size-1 dims",
             [](Generator& g) { return Inputs{param({3, 1}, g), param({1, 4}, g)}; },
             [](const Inputs& x) { return x[0] + x[1]; });
  add_sample("add", "[4] + [2,3,4]: the shorter operand gets leading dims, its gradient sums over them",
             [](Generator& g) { return Inputs{param({4}, g), param({2, 3, 4}, g)}; },
             [](const Inputs& x) { return x[0] + x[1]; });
  add_sample("add", "0-d + [2,3]: a scalar tensor operand receives the sum of all gradients",
             [](Generator& g) { return Inputs{param({}, g), param({2, 3}, g)}; },
             [](const Inputs& x) { return add(x[0], x[1]); });
  add_sample("add", "transposed (non-contiguous) leaf + a constant: only one side requires grad",
             [](Generator& g) { return Inputs{transposed_param(3, 4, g), constant({3, 4}, g)}; },
             [](const Inputs& x) { return x[0] + x[1]; });
  add_sample("add", "x + x: one tensor used twice, its gradient accumulates (2)",
             [](Generator& g) { return Inputs{param({5}, g)}; },
             [](const Inputs& x) { return x[0] + x[0]; });

  add_sample("sub", "[2,3] − [3]: broadcast; the right operand's gradient is −g summed over rows",
             [](Generator& g) { return Inputs{param({2, 3}, g), param({3}, g)}; },
             [](const Inputs& x) { return x[0] - x[1]; });
  add_sample("sub", "constant − 0-d parameter: only the negated side requires grad",
             [](Generator& g) { return Inputs{constant({2, 2}, g), param({}, g)}; },
             [](const Inputs& x) { return sub(x[0], x[1]); });

  add_sample("mul", "[3,1] · [1,4]: outer-product broadcast, ∂/∂a = Σ_j b_j",
             [](Generator& g) { return Inputs{param({3, 1}, g), param({1, 4}, g)}; },
             [](const Inputs& x) { return x[0] * x[1]; });
  add_sample("mul", "x · x: the same tensor on both sides, gradient 2x from two contributions",
             [](Generator& g) { return Inputs{param({2, 3}, g)}; },
             [](const Inputs& x) { return x[0] * x[0]; });
  add_sample("mul", "transposed leaf · 0-d parameter: strides and a scalar operand together",
             [](Generator& g) { return Inputs{transposed_param(4, 3, g), param({}, g)}; },
             [](const Inputs& x) { return x[0] * x[1]; });
  add_sample("mul", "constant [2,3] · parameter [2,1]: only b requires grad (a is not saved)",
             [](Generator& g) { return Inputs{constant({2, 3}, g), param({2, 1}, g)}; },
             [](const Inputs& x) { return x[0] * x[1]; });

  add_sample("div", "[2,3] / [3] with positive denominators: ∂/∂b = −a/b², summed over rows",
             [](Generator& g) { return Inputs{param({2, 3}, g), positive({3}, g)}; },
             [](const Inputs& x) { return x[0] / x[1]; });
  add_sample("div", "0-d numerator / [4]: the scalar's gradient is Σ 1/b",
             [](Generator& g) { return Inputs{param({}, g), positive({4}, g)}; },
             [](const Inputs& x) { return div(x[0], x[1]); });
  add_sample("div", "constant / parameter: only the denominator requires grad",
             [](Generator& g) { return Inputs{constant({2, 2}, g), positive({2, 2}, g)}; },
             [](const Inputs& x) { return x[0] / x[1]; });

  // ---------------- elementwise, unary ----------------
  add_sample("neg", "−x on a transposed leaf",
             [](Generator& g) { return Inputs{transposed_param(2, 3, g)}; },
             [](const Inputs& x) { return -x[0]; });
  add_sample("neg", "neg(x) · x: neg's gradient meets another path into the same leaf",
             [](Generator& g) { return Inputs{param({4}, g)}; },
             [](const Inputs& x) { return neg(x[0]) * x[0]; });

  add_sample("pow", "x³ on N(0,1) inputs (an integer exponent is defined for negative x)",
             [](Generator& g) { return Inputs{param({2, 3}, g)}; },
             [](const Inputs& x) { return pow(x[0], 3.0); });
  add_sample("pow", "x^−1.5 on positive inputs: negative fractional exponent",
             [](Generator& g) { return Inputs{positive({5}, g)}; },
             [](const Inputs& x) { return pow(x[0], -1.5); });
  add_sample("pow", "x^0.5 on positive inputs: fractional exponent",
             [](Generator& g) { return Inputs{positive({2, 2}, g)}; },
             [](const Inputs& x) { return x[0].pow(0.5); });
  add_sample("pow", "x² (the fast path of the kernel)",
             [](Generator& g) { return Inputs{param({4}, g)}; },
             [](const Inputs& x) { return pow(x[0], 2.0); });
  add_sample("pow", "x¹ · x⁰ on N(0,1) inputs (special cases of the kernel; d/dx x⁰ = 0)",
             [](Generator& g) { return Inputs{param({4}, g)}; },
             [](const Inputs& x) { return pow(x[0], 1.0) * pow(x[0], 0.0); });
  add_sample("pow", "2 / x: operator/(double, Tensor) is pow(x, −1) · 2",
             [](Generator& g) { return Inputs{positive({3}, g)}; },
             [](const Inputs& x) { return 2.0 / x[0]; });

  add_sample("exp", "exp(x): dy/dx = y (saved output)",
             [](Generator& g) { return Inputs{param({2, 3}, g)}; },
             [](const Inputs& x) { return exp(x[0]); });
  add_sample("log", "log(x) on positive inputs: dy/dx = 1/x",
             [](Generator& g) { return Inputs{positive({2, 3}, g)}; },
             [](const Inputs& x) { return log(x[0]); });
  add_sample("sqrt", "sqrt(x) on positive inputs: dy/dx = 1/(2y)",
             [](Generator& g) { return Inputs{positive({2, 3}, g)}; },
             [](const Inputs& x) { return sqrt(x[0]); });
  add_sample("rsqrt", "rsqrt(x) on positive inputs: dy/dx = −y³/2",
             [](Generator& g) { return Inputs{positive({2, 3}, g)}; },
             [](const Inputs& x) { return rsqrt(x[0]); });
  add_sample("abs", "|x| with |x| ≥ 0.1 (both signs, away from the kink)",
             [](Generator& g) { return Inputs{away_from_zero({3, 4}, g)}; },
             [](const Inputs& x) { return abs(x[0]); });
  add_sample("sigmoid", "sigmoid(x): dy/dx = y(1−y)",
             [](Generator& g) { return Inputs{param({2, 3}, g)}; },
             [](const Inputs& x) { return sigmoid(x[0]); });
  add_sample("tanh", "tanh(x) on a transposed leaf: dy/dx = 1 − y²",
             [](Generator& g) { return Inputs{transposed_param(3, 2, g)}; },
             [](const Inputs& x) { return tanh(x[0]); });
  add_sample("tanh", "tanh(x)ᵀ: the gradient reaching tanh's backward is non-contiguous",
             [](Generator& g) { return Inputs{param({2, 3}, g)}; },
             [](const Inputs& x) { return tanh(x[0]).t(); });
  add_sample("tanh", "h = tanh(x) used three times (h·h + h): gradients accumulate on a non-leaf entry",
             [](Generator& g) { return Inputs{param({2, 3}, g)}; },
             [](const Inputs& x) { const Tensor h = tanh(x[0]); return h * h + h; });
  add_sample("relu", "relu(x) with |x| ≥ 0.1: gradient 1 for x > 0, 0 for x < 0",
             [](Generator& g) { return Inputs{away_from_zero({3, 4}, g)}; },
             [](const Inputs& x) { return relu(x[0]); });
  add_sample("silu", "silu(x) = x·σ(x)",
             [](Generator& g) { return Inputs{param({2, 3}, g)}; },
             [](const Inputs& x) { return silu(x[0]); });
  add_sample("gelu", "gelu(x) = x·Φ(x) (erf form) on N(0,1) inputs, transposed: dy/dx = Φ(x) + x·φ(x)",
             [](Generator& g) { return Inputs{transposed_param(3, 4, g)}; },
             [](const Inputs& x) { return gelu(x[0]) * x[0]; });

  add_sample("add_scalar", "x + 2.5 and x − 3 (operator− with a double adds −3)",
             [](Generator& g) { return Inputs{param({2, 3}, g)}; },
             [](const Inputs& x) { return (x[0] + 2.5) * (x[0] - 3.0); });
  add_sample("add_scalar", "1 − x: neg then add_scalar",
             [](Generator& g) { return Inputs{param({4}, g)}; },
             [](const Inputs& x) { return 1.0 - x[0]; });
  add_sample("mul_scalar", "3·x and x / 4 (division by a double multiplies by 1/4)",
             [](Generator& g) { return Inputs{param({2, 3}, g)}; },
             [](const Inputs& x) { return 3.0 * x[0] + x[0] / 4.0; });

  // ---------------- where ----------------
  add_sample("where", "where(mask, a, b), all [2,3]: a gets g where true, b where false",
             [](Generator& g) { return Inputs{mask({1, 0, 1, 0, 0, 1}, {2, 3}), param({2, 3}, g), param({2, 3}, g)}; },
             [](const Inputs& x) { return where(x[0], x[1], x[2]); });
  add_sample("where", "mask [3] broadcast over a [2,3], b 0-d: b's gradient sums the false positions",
             [](Generator& g) { return Inputs{mask({0, 1, 0}, {3}), param({2, 3}, g), param({}, g)}; },
             [](const Inputs& x) { return where(x[0], x[1], x[2]); });
  add_sample("where", "a constant [2,1], b parameter [4]: only b requires grad, broadcast to [2,4]",
             [](Generator& g) {
               return Inputs{mask({1, 1, 0, 0, 0, 1, 0, 1}, {2, 4}), constant({2, 1}, g), param({4}, g)};
             },
             [](const Inputs& x) { return where(x[0], x[1], x[2]); });
  add_sample("where", "where over a transposed leaf and a step-2 slice; output transposed",
             [](Generator& g) {
               return Inputs{mask({1, 0, 0, 1, 1, 0}, {3, 2}), transposed_param(3, 2, g), param({3, 4}, g)};
             },
             [](const Inputs& x) { return where(x[0], x[1], x[2].slice(1, 0, 4, 2)).t(); });

  // ---------------- reductions ----------------
  add_sample("sum", "sum over all → 0-d output",
             [](Generator& g) { return Inputs{param({2, 3, 4}, g)}; },
             [](const Inputs& x) { return sum(x[0]); });
  add_sample("sum", "sum over dims {0, 2}, keepdim false → [3]",
             [](Generator& g) { return Inputs{param({2, 3, 4}, g)}; },
             [](const Inputs& x) { return sum(x[0], {0, 2}); });
  add_sample("sum", "sum over dim 1, keepdim true → [2,1,4]",
             [](Generator& g) { return Inputs{param({2, 3, 4}, g)}; },
             [](const Inputs& x) { return x[0].sum({1}, true); });
  add_sample("sum", "sum over dim −1 of a transposed leaf",
             [](Generator& g) { return Inputs{transposed_param(3, 4, g)}; },
             [](const Inputs& x) { return sum(x[0], {-1}); });
  add_sample("sum", "sum over dim 0 of a [3] expanded to [4,3] inside fn: gradient 4 per element",
             [](Generator& g) { return Inputs{param({3}, g)}; },
             [](const Inputs& x) { return sum(x[0].expand({4, 3}), {0}) * x[0]; });
  add_sample("sum", "sum over all dims with keepdim true → [1,1]; squared so the gradient is not constant",
             [](Generator& g) { return Inputs{param({3, 2}, g)}; },
             [](const Inputs& x) { auto t = sum(x[0], {0, 1}, true); return t * t; });
  add_sample("sum", "sum of a 0-d tensor (over no dims) → itself",
             [](Generator& g) { return Inputs{param({}, g)}; },
             [](const Inputs& x) { return sum(x[0]) * x[0]; });

  add_sample("max", "max over all → 0-d: the gradient goes to the unique arg-max",
             [](Generator& g) { return Inputs{distinct({3, 4}, g)}; },
             [](const Inputs& x) { return max(x[0]); });
  add_sample("max", "max over dim 1 of [2,4,3], keepdim false → [2,3]",
             [](Generator& g) { return Inputs{distinct({2, 4, 3}, g)}; },
             [](const Inputs& x) { return max(x[0], 1); });
  add_sample("max", "max over dim 0, keepdim true → [1,5]",
             [](Generator& g) { return Inputs{distinct({3, 5}, g)}; },
             [](const Inputs& x) { return x[0].max(0, true); });
  add_sample("max", "max over dim 1 of a transposed leaf, output sliced: strided input and gradient",
             [](Generator& g) { return Inputs{distinct({4, 3}, g)}; },
             [](const Inputs& x) { return max(x[0].t(), 1).slice(0, 0, 3, 2); });
  add_sample("max", "max over dim −1 of a 0-d tensor: itself",
             [](Generator& g) { return Inputs{param({}, g)}; },
             [](const Inputs& x) { return max(x[0], -1); });

  // ---------------- matmul ----------------
  add_sample("matmul", "[3,4] @ [4,2]: dA = G Bᵀ, dB = Aᵀ G",
             [](Generator& g) { return Inputs{param({3, 4}, g), param({4, 2}, g)}; },
             [](const Inputs& x) { return matmul(x[0], x[1]); });
  add_sample("matmul", "[2,1,3,4] @ [5,4,2] → [2,5,3,2]: broadcast batch dims summed back",
             [](Generator& g) { return Inputs{param({2, 1, 3, 4}, g), param({5, 4, 2}, g)}; },
             [](const Inputs& x) { return matmul(x[0], x[1]); });
  add_sample("matmul", "[2,3,4] @ [4,5]: a batch times one matrix (batch folded into M)",
             [](Generator& g) { return Inputs{param({2, 3, 4}, g), param({4, 5}, g)}; },
             [](const Inputs& x) { return matmul(x[0], x[1]); });
  add_sample("matmul", "[4] @ [4] → 0-d dot product",
             [](Generator& g) { return Inputs{param({4}, g), param({4}, g)}; },
             [](const Inputs& x) { return matmul(x[0], x[1]); });
  add_sample("matmul", "[3] @ [3,2] → [2]: a vector on the left is a row",
             [](Generator& g) { return Inputs{param({3}, g), param({3, 2}, g)}; },
             [](const Inputs& x) { return matmul(x[0], x[1]); });
  add_sample("matmul", "[2,3] @ [3] → [2]: a vector on the right is a column",
             [](Generator& g) { return Inputs{param({2, 3}, g), param({3}, g)}; },
             [](const Inputs& x) { return matmul(x[0], x[1]); });
  add_sample("matmul", "[3] @ [2,3,4] → [2,4]: a vector against a batch",
             [](Generator& g) { return Inputs{param({3}, g), param({2, 3, 4}, g)}; },
             [](const Inputs& x) { return matmul(x[0], x[1]); });
  add_sample("matmul", "transposed leaf [3,4] @ Bᵀ taken inside fn: both operands non-contiguous",
             [](Generator& g) { return Inputs{transposed_param(3, 4, g), param({2, 4}, g)}; },
             [](const Inputs& x) { return matmul(x[0], x[1].t()); });
  add_sample("matmul", "constant [3,4] @ parameter [4,2]: only B requires grad",
             [](Generator& g) { return Inputs{constant({3, 4}, g), param({4, 2}, g)}; },
             [](const Inputs& x) { return matmul(x[0], x[1]); });
  add_sample("matmul", "parameter [2,3,4] @ constant [2,4,3]: batched, only A requires grad",
             [](Generator& g) { return Inputs{param({2, 3, 4}, g), constant({2, 4, 3}, g)}; },
             [](const Inputs& x) { return matmul(x[0], x[1]); });
  add_sample("matmul", "expanded [3,4] → [2,3,4] (batch stride 0) @ a step-2 slice [4,3] (column stride 2)",
             [](Generator& g) { return Inputs{param({3, 4}, g), param({4, 6}, g)}; },
             [](const Inputs& x) { return matmul(x[0].expand({2, 3, 4}), x[1].slice(1, 0, 6, 2)); });

  // ---------------- softmax ----------------
  add_sample("softmax", "softmax over the middle dim of [2,4,3]",
             [](Generator& g) { return Inputs{param({2, 4, 3}, g)}; },
             [](const Inputs& x) { return softmax(x[0], 1); });
  add_sample("softmax", "softmax over dim −1 of a transposed leaf",
             [](Generator& g) { return Inputs{transposed_param(3, 5, g)}; },
             [](const Inputs& x) { return x[0].softmax(-1); });
  add_sample("softmax", "softmax of a step-2 slice, output transposed: backward gets a strided input and gradient",
             [](Generator& g) { return Inputs{param({3, 6}, g)}; },
             [](const Inputs& x) { return softmax(x[0].slice(1, 1, 6, 2), 1).t(); });
  add_sample("softmax", "softmax of a 0-d tensor (always 1: zero gradient), times x so the output depends on x",
             [](Generator& g) { return Inputs{param({}, g)}; },
             [](const Inputs& x) { return softmax(x[0], 0) * x[0]; });
  add_sample("softmax", "attention: softmax(q kᵀ / 2) v — softmax between two matmuls",
             [](Generator& g) { return Inputs{param({3, 4}, g), param({5, 4}, g), param({5, 2}, g)}; },
             [](const Inputs& x) { return matmul(softmax(matmul(x[0], x[1].t()) * 0.5, -1), x[2]); });
  add_sample("log_softmax", "log_softmax over the middle dim of [2,4,3]",
             [](Generator& g) { return Inputs{param({2, 4, 3}, g)}; },
             [](const Inputs& x) { return log_softmax(x[0], 1); });
  add_sample("log_softmax", "log_softmax over dim 0 of a transposed leaf, output transposed back",
             [](Generator& g) { return Inputs{transposed_param(4, 3, g)}; },
             [](const Inputs& x) { return log_softmax(x[0], 0).t(); });
  add_sample("log_softmax", "cross-entropy: −Σ log_softmax(x) picked by gather → 0-d",
             [](Generator& g) { return Inputs{param({3, 5}, g), ids({4, 0, 2}, {3, 1})}; },
             [](const Inputs& x) { return -sum(gather(log_softmax(x[0], -1), 1, x[1])); });

  // ---------------- views ----------------
  add_sample("view", "view [2,6] as [3,4] and [−1]",
             [](Generator& g) { return Inputs{param({2, 6}, g)}; },
             [](const Inputs& x) { return x[0].view({3, 4}) * x[0].view({-1}).view({3, 4}); });
  add_sample("view", "view a transposed leaf [3,4] (strides 1,3) as [3,2,2]: splits the strided dim, no copy",
             [](Generator& g) { return Inputs{transposed_param(3, 4, g), param({3, 2, 2}, g)}; },
             [](const Inputs& x) { return x[0].view({3, 2, 2}) * x[1]; });
  add_sample("transpose", "transpose(0, 2) of [2,3,4], then a broadcast op with a [2] vector",
             [](Generator& g) { return Inputs{param({2, 3, 4}, g), param({2}, g)}; },
             [](const Inputs& x) { return transpose(x[0], 0, 2) * x[1]; });
  add_sample("transpose", "x.t() on a transposed leaf: back to contiguous",
             [](Generator& g) { return Inputs{transposed_param(3, 2, g)}; },
             [](const Inputs& x) { return x[0].t() * 2.0; });
  add_sample("permute", "permute {2, 0, 1} of [2,3,4]: backward applies the inverse permutation",
             [](Generator& g) { return Inputs{param({2, 3, 4}, g), param({4, 1, 3}, g)}; },
             [](const Inputs& x) { return permute(x[0], {2, 0, 1}) * x[1]; });
  add_sample("slice", "slice dim 1 [1, 5) step 2 of [3,6]: gradient zero outside the slice",
             [](Generator& g) { return Inputs{param({3, 6}, g)}; },
             [](const Inputs& x) { return slice(x[0], 1, 1, 5, 2); });
  add_sample("slice", "two overlapping slices with negative starts: gradients add where they overlap",
             [](Generator& g) { return Inputs{param({5, 2}, g)}; },
             [](const Inputs& x) { return x[0].slice(0, -4, 4) * x[0].slice(0, -3, 5); });
  add_sample("expand", "[3,1] expanded inside fn to [2,−1,4] (−1 keeps the 3): backward sums the expanded dims",
             [](Generator& g) { return Inputs{param({3, 1}, g), param({2, 3, 4}, g)}; },
             [](const Inputs& x) { return expand(x[0], {2, -1, 4}) * x[1]; });
  add_sample("expand", "0-d expanded to [2,2]: every dim is a new leading dim",
             [](Generator& g) { return Inputs{param({}, g), param({2, 2}, g)}; },
             [](const Inputs& x) { return x[0].expand({2, 2}) * x[1]; });
  add_sample("unsqueeze", "unsqueeze at 0 and at −1, multiplied back together as an outer product",
             [](Generator& g) { return Inputs{param({3}, g)}; },
             [](const Inputs& x) { return unsqueeze(x[0], 0) * x[0].unsqueeze(-1); });
  add_sample("squeeze", "squeeze(1) of [3,1,2]",
             [](Generator& g) { return Inputs{param({3, 1, 2}, g), param({3, 2}, g)}; },
             [](const Inputs& x) { return squeeze(x[0], 1) * x[1]; });
  add_sample("squeeze", "squeeze() of [1,3,1]: every size-1 dim",
             [](Generator& g) { return Inputs{param({1, 3, 1}, g)}; },
             [](const Inputs& x) { return squeeze(x[0]) * 2.0; });
  add_sample("contiguous", "contiguous() of a transposed leaf: a recorded copy",
             [](Generator& g) { return Inputs{transposed_param(2, 3, g)}; },
             [](const Inputs& x) { return contiguous(x[0]) * 3.0; });
  add_sample("clone", "clone(x) · x: the copy and the original both carry gradient",
             [](Generator& g) { return Inputs{param({2, 3}, g)}; },
             [](const Inputs& x) { return clone(x[0]) * x[0]; });
  // Round trip float64 → float32 → float64: the function itself is rounded to float32 (24-bit
  // mantissa, relative ulp ≈ 6e-8), so a central difference with ε = 1e-6 would be noise-dominated
  // (error ≈ 6e-8·|y| / 2e-6 ≈ 3% of |y|). ε = 1e-3 brings the rounding error down to ≈ 3e-5·|y|,
  // and the tolerances are loosened to atol 1e-3, rtol 1e-2 to cover it. Not run in float32: fn
  // hard-codes the float64 → float32 → float64 path.
  {
    Sample& rt = add_sample("to_dtype", "float64 → float32 → float64 round trip around a float32 tanh",
                            [](Generator& g) { return Inputs{param({2, 3}, g)}; },
                            [](const Inputs& x) { return to_dtype(tanh(to_dtype(x[0], kFloat32)), kFloat64) * x[0]; });
    rt.eps = 1e-3, rt.atol = 1e-3, rt.rtol = 1e-2;
    rt.f32 = false;
    rt.float32_inside = true;
  }

  // ---------------- joining and indexing ----------------
  add_sample("cat", "cat of 3 tensors on dim 1, the middle one a constant",
             [](Generator& g) { return Inputs{param({2, 3}, g), constant({2, 1}, g), param({2, 2}, g)}; },
             [](const Inputs& x) { return cat({x[0], x[1], x[2]}, 1); });
  add_sample("cat", "cat on dim −3 (= 0) of 3-D tensors, first one a constant, x1 used twice",
             [](Generator& g) { return Inputs{constant({1, 2, 2}, g), param({2, 2, 2}, g)}; },
             [](const Inputs& x) { return cat({x[0], x[1], x[1]}, -3); });
  add_sample("cat", "cat on dim 0 of a transposed leaf and an expanded 0-d: non-contiguous pieces",
             [](Generator& g) { return Inputs{transposed_param(2, 3, g), param({}, g)}; },
             [](const Inputs& x) { return cat({x[0], x[1].expand({1, 3})}, 0); });
  add_sample("index_select", "rows {0, 2, 0, 2, 1} of [3,4]: repeated indices accumulate",
             [](Generator& g) { return Inputs{param({3, 4}, g), ids({0, 2, 0, 2, 1}, {5})}; },
             [](const Inputs& x) { return index_select(x[0], 0, x[1]); });
  add_sample("index_select", "dim 1 of [2,3,2] with int32 indices {2, 2}; index 0 and 1 get zero gradient",
             [](Generator& g) { return Inputs{param({2, 3, 2}, g), from_vector<int32_t>({2, 2}, {2})}; },
             [](const Inputs& x) { return index_select(x[0], 1, x[1]); });
  add_sample("index_select", "dim 1 of a transposed leaf with indices {3, 0, 3}, output transposed",
             [](Generator& g) { return Inputs{transposed_param(2, 4, g), ids({3, 0, 3}, {3})}; },
             [](const Inputs& x) { return index_select(x[0], 1, x[1]).t(); });
  add_sample("gather", "gather dim 1 of [3,4] with index [3,5] (repeats): scatter-add backward",
             [](Generator& g) {
               return Inputs{param({3, 4}, g), ids({0, 3, 3, 1, 2, 2, 2, 0, 1, 3, 1, 0, 0, 0, 3}, {3, 5})};
             },
             [](const Inputs& x) { return gather(x[0], 1, x[1]); });
  add_sample("gather", "gather dim 0 of [3,2] with an index [2,2] smaller than the input",
             [](Generator& g) { return Inputs{param({3, 2}, g), ids({2, 0, 2, 1}, {2, 2})}; },
             [](const Inputs& x) { return gather(x[0], 0, x[1]); });
  add_sample("gather", "gather dim −1 of a transposed leaf, output transposed: strided input and gradient",
             [](Generator& g) { return Inputs{transposed_param(3, 4, g), ids({1, 1, 3, 0, 2, 2}, {3, 2})}; },
             [](const Inputs& x) { return gather(x[0], -1, x[1]).t(); });
  add_sample("gather", "gather of a 0-d tensor with a 0-d index",
             [](Generator& g) { return Inputs{param({}, g), ids({0}, {})}; },
             [](const Inputs& x) { return gather(x[0], 0, x[1]) * x[0]; });

  // ---------------- fused Transformer ops ----------------
  add_sample("cross_entropy", "mean CE of [4,5] logits, one row ignored (−100): dx = (softmax − onehot)/3",
             [](Generator& g) { return Inputs{param({4, 5}, g), ids({1, -100, 4, 0}, {4})}; },
             [](const Inputs& x) { return cross_entropy(x[0], x[1]); });
  add_sample("cross_entropy", "CE of transposed [3,6] logits (column stride 3), ignore_index 2",
             [](Generator& g) { return Inputs{transposed_param(3, 6, g), ids({5, 2, 0}, {3})}; },
             [](const Inputs& x) { return cross_entropy(x[0], x[1], 2); });
  add_sample("cross_entropy", "CE · Σx: a non-unit incoming gradient; int32 targets",
             [](Generator& g) { return Inputs{param({2, 3}, g), from_vector<int32_t>({2, 0}, {2})}; },
             [](const Inputs& x) { return cross_entropy(x[0], x[1]) * x[0].sum(); });
  add_sample("rms_norm", "rms_norm of [2,3,5] with a random weight: dx = r·(gw − x·r²·mean(gw⊙x)), dw = Σ g⊙x·r",
             [](Generator& g) { return Inputs{param({2, 3, 5}, g), param({5}, g)}; },
             [](const Inputs& x) { return rms_norm(x[0], x[1], 1e-5); });
  add_sample("rms_norm", "rms_norm of a transposed [4,3] leaf, constant weight, eps 0.5",
             [](Generator& g) { return Inputs{transposed_param(4, 3, g), constant({3}, g)}; },
             [](const Inputs& x) { return rms_norm(x[0], x[1], 0.5); });
  add_sample("rms_norm", "rms_norm with only the weight requiring grad; output transposed",
             [](Generator& g) { return Inputs{constant({3, 4}, g), param({4}, g)}; },
             [](const Inputs& x) { return rms_norm(x[0], x[1], 1e-5).t(); });
  add_sample("add_rms_norm", "h = x + b, y = rms_norm(h) of [2,3,5]; Σ y·c + Σ h²: dh = the norm's dx + 2h",
             [](Generator& g) {
               return Inputs{param({2, 3, 5}, g), param({2, 3, 5}, g), param({5}, g), constant({2, 3, 5}, g)};
             },
             [](const Inputs& x) {
               const ResidualNorm r = add_rms_norm(x[0], x[1], x[2], 1e-5, x[0].dtype());
               return (r.normed * x[3]).sum() + (r.sum * r.sum).sum();
             });
  add_sample("add_rms_norm", "a transposed [4,3] x plus a constant branch; only normed read (nothing gathered)",
             [](Generator& g) { return Inputs{transposed_param(4, 3, g), constant({4, 3}, g), param({3}, g)}; },
             [](const Inputs& x) { return add_rms_norm(x[0], x[1], x[2], 0.5, x[0].dtype()).normed; });
  add_sample("swiglu", "silu(a)⊙b, [2,3]: da = g·b·σ(a)(1 + a(1−σ(a))), db = g·silu(a)",
             [](Generator& g) { return Inputs{param({2, 3}, g), param({2, 3}, g)}; },
             [](const Inputs& x) { return swiglu(x[0], x[1]); });
  add_sample("swiglu", "transposed a, constant b; the same tensor as both a and b",
             [](Generator& g) { return Inputs{transposed_param(3, 4, g), constant({3, 4}, g)}; },
             [](const Inputs& x) { return swiglu(x[0], x[1]) + swiglu(x[0], x[0]); });
  add_sample("swiglu", "constant a, parameter b: only db; the gradient reaching it is transposed",
             [](Generator& g) { return Inputs{constant({4, 3}, g), param({4, 3}, g)}; },
             [](const Inputs& x) { return swiglu(x[0], x[1]).t(); });
  add_sample("rope", "RoPE of [2,3,4] at positions {4,0,2} of [5,2] tables: dx = rotation of g by −angle",
             [](Generator& g) { return Inputs{param({2, 3, 4}, g), constant({5, 2}, g), constant({5, 2}, g),
                                              ids({4, 0, 2}, {3})}; },
             [](const Inputs& x) { return rope(x[0], x[1], x[2], x[3]); });
  add_sample("rope", "RoPE of a [1,2,3,4] view transposed from [1,3,2,4] (the head split); output transposed back",
             [](Generator& g) { return Inputs{param({1, 3, 2, 4}, g), constant({3, 2}, g), constant({3, 2}, g),
                                              ids({0, 1, 2}, {3})}; },
             [](const Inputs& x) { return rope(x[0].transpose(1, 2), x[1], x[2], x[3]).transpose(1, 2); });
  add_sample("causal_attention", "causal attention, q k v [1,2,5,3], scale 0.7",
             [](Generator& g) { return Inputs{param({1, 2, 5, 3}, g), param({1, 2, 5, 3}, g), param({1, 2, 5, 3}, g)}; },
             [](const Inputs& x) { return causal_attention(x[0], x[1], x[2], 0.7); });
  add_sample("causal_attention", "grouped-query: q [2,4,3,2], k v [2,2,3,2] (two query heads per kv head)",
             [](Generator& g) { return Inputs{param({2, 4, 3, 2}, g), param({2, 2, 3, 2}, g), param({2, 2, 3, 2}, g)}; },
             [](const Inputs& x) { return causal_attention(x[0], x[1], x[2], 1.0); });
  add_sample("causal_attention", "head-split views [B,T,H,D] → [B,H,T,D]; T = 67 spans two query blocks of 64",
             [](Generator& g) { return Inputs{param({1, 67, 1, 2}, g), param({1, 67, 1, 2}, g), param({1, 67, 1, 2}, g)}; },
             [](const Inputs& x) {
               return causal_attention(x[0].transpose(1, 2), x[1].transpose(1, 2), x[2].transpose(1, 2), 0.5);
             });

  // ---------------- compositions ----------------
  add_sample("masked_fill", "masked_fill with a [2,3] mask: filled positions get zero gradient",
             [](Generator& g) { return Inputs{param({2, 3}, g), mask({0, 1, 1, 0, 0, 1}, {2, 3})}; },
             [](const Inputs& x) { return masked_fill(x[0], x[1], -5.0); });
  add_sample("masked_fill", "masked_fill with a [3] mask broadcast over [2,3] (a causal-mask shape)",
             [](Generator& g) { return Inputs{param({2, 3}, g), mask({0, 0, 1}, {3})}; },
             [](const Inputs& x) { return softmax(masked_fill(x[0], x[1], -1e9), -1); });
  add_sample("mean", "mean over all → 0-d",
             [](Generator& g) { return Inputs{param({2, 3}, g)}; },
             [](const Inputs& x) { return mean(x[0]); });
  add_sample("mean", "mean over dims {0, 2} keepdim true → [1,3,1]",
             [](Generator& g) { return Inputs{param({2, 3, 4}, g)}; },
             [](const Inputs& x) { return mean(x[0], {0, 2}, true); });
  add_sample("min", "min over dim 1, keepdim false: −max(−x)",
             [](Generator& g) { return Inputs{distinct({3, 4}, g)}; },
             [](const Inputs& x) { return min(x[0], 1); });
  add_sample("min", "min over dim 0, keepdim true",
             [](Generator& g) { return Inputs{distinct({3, 2}, g)}; },
             [](const Inputs& x) { return min(x[0], 0, true); });
  add_sample("logsumexp", "logsumexp over dim 1 of [2,4,3]: the gradient is softmax",
             [](Generator& g) { return Inputs{param({2, 4, 3}, g)}; },
             [](const Inputs& x) { return logsumexp(x[0], 1); });
  add_sample("logsumexp", "logsumexp over dim −1, keepdim true, on a transposed leaf",
             [](Generator& g) { return Inputs{transposed_param(3, 4, g)}; },
             [](const Inputs& x) { return logsumexp(x[0], -1, true); });
  add_sample("reshape", "reshape of a transposed leaf: no view possible, copies (contiguous then view)",
             [](Generator& g) { return Inputs{transposed_param(3, 4, g)}; },
             [](const Inputs& x) { return reshape(x[0], {2, -1}); });
  add_sample("reshape", "reshape [2,3,4] → [6,4]: a view",
             [](Generator& g) { return Inputs{param({2, 3, 4}, g)}; },
             [](const Inputs& x) { return x[0].reshape({6, 4}); });
  add_sample("narrow", "narrow dim 1 from 1, length 2",
             [](Generator& g) { return Inputs{param({3, 4}, g)}; },
             [](const Inputs& x) { return narrow(x[0], 1, 1, 2); });
  add_sample("select", "select dim 0 index −1 (the last row) → [4]",
             [](Generator& g) { return Inputs{param({3, 4}, g)}; },
             [](const Inputs& x) { return select(x[0], 0, -1); });
  add_sample("stack", "stack of 3 [2,2] tensors on dim 1, the first a constant",
             [](Generator& g) { return Inputs{constant({2, 2}, g), param({2, 2}, g), param({2, 2}, g)}; },
             [](const Inputs& x) { return stack({x[0], x[1], x[2]}, 1); });
  add_sample("embedding", "embedding [5,3] with ids [2,4] (repeats): rows of repeated ids accumulate",
             [](Generator& g) { return Inputs{param({5, 3}, g), ids({1, 4, 1, 0, 4, 4, 2, 1}, {2, 4})}; },
             [](const Inputs& x) { return embedding(x[0], x[1]); });

  return s;
}

}  // namespace tapegrad::gradcheck_samples
