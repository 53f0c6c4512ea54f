// ops.h — every tensor op, as free functions (most also exist as Tensor methods / operators).
// Each differentiable op's forward and backward live side by side in autograd/ops/<family>.cpp;
// ops/ops.def lists them all, and the gradcheck suite checks every entry of that list.
//
// Rules shared by all ops:
//  * elementwise ops broadcast like NumPy; both operands must have the same dtype and device;
//  * dims may be negative (counted from the end);
//  * errors are tapegrad::Error, and the message names the op and the shapes/dtypes involved.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "autograd/generator.h"
#include "autograd/tensor.h"
#include "kernels/token_sampling.h"

namespace tapegrad {

// ---- creation (autograd/factory.cpp) ----
Tensor zeros(const Shape& shape, Options options = {});
Tensor ones(const Shape& shape, Options options = {});
Tensor full(const Shape& shape, double value, Options options = {});
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor scalar_tensor(double value, Options options = {});  // 0-d
// [start, end) with `step`; dtype defaults to int64.
Tensor arange(double end, Options options = kInt64);
Tensor arange(double start, double end, double step = 1.0, Options options = kInt64);
// From values (converted to options.dtype); shape defaults to 1-D of values.size().
Tensor tensor(const std::vector<double>& values, Options options = {});
Tensor tensor(const std::vector<double>& values, const Shape& shape, Options options = {});
// From typed values; the dtype is T's (float, double, int32_t, int64_t).
template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, bool requires_grad = false);
// Random, from `gen` (default: the global generator seeded by manual_seed).
Tensor rand(const Shape& shape, Options options = {}, Generator* gen = nullptr);   // U[0, 1)
Tensor randn(const Shape& shape, Options options = {}, Generator* gen = nullptr);  // N(0, 1)
// N(mean, std²) truncated to [a, b] (absolute bounds), by rejection.
Tensor trunc_normal(const Shape& shape, double mean, double std, double a, double b, Options options = {},
                    Generator* gen = nullptr);
// Integers uniform in [low, high).
Tensor randint(int64_t low, int64_t high, const Shape& shape, Options options = kInt64, Generator* gen = nullptr);

// ---- elementwise (autograd/ops/elementwise.cpp) ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double s);  // a + s
Tensor mul(const Tensor& a, double s);  // a · s
Tensor pow(const Tensor& x, double exponent);
// neg, exp, log, sqrt, rsqrt, abs, sigmoid, tanh, relu, silu, gelu, …: one function per row of the op
// table kernels/unary_ops.def, declared in autograd/ops_from_table.h (include it where you call them).

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, double s);
Tensor operator+(double s, const Tensor& a);
Tensor operator-(const Tensor& a, double s);
Tensor operator-(double s, const Tensor& a);
Tensor operator*(const Tensor& a, double s);
Tensor operator*(double s, const Tensor& a);
Tensor operator/(const Tensor& a, double s);
Tensor operator/(double s, const Tensor& a);

// ---- comparisons and selection (autograd/ops/compare.cpp) ----
// Comparisons return kBool and are not differentiable.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double s);
Tensor ne(const Tensor& a, double s);
Tensor lt(const Tensor& a, double s);
Tensor le(const Tensor& a, double s);
Tensor gt(const Tensor& a, double s);
Tensor ge(const Tensor& a, double s);
// cond ? a : b, broadcasting all three; cond must be kBool.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// x with `value` wherever mask (kBool, broadcastable to x) is true.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

// ---- reductions (autograd/ops/reduce.cpp) ----
Tensor sum(const Tensor& x);  // over all elements → 0-d
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim = false);
// Maximum; its gradient goes to the (first) arg-max.
Tensor max(const Tensor& x);
Tensor max(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);  // int64, not differentiable
Tensor logsumexp(const Tensor& x, int64_t dim, bool keepdim = false);

// ---- matmul (autograd/ops/matmul.cpp) ----
// 1-D·1-D → 0-d; 2-D @ 2-D; batched with broadcast batch dims; 1-D operands as in NumPy.
Tensor matmul(const Tensor& a, const Tensor& b);

// ---- softmax (autograd/ops/softmax.cpp) ----
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

// ---- shape and views (autograd/ops/view.cpp) ----
Tensor view(const Tensor& x, const Shape& shape);        // no copy; error when impossible
Tensor reshape(const Tensor& x, const Shape& shape);     // view when possible, else copy
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1);
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
Tensor select(const Tensor& x, int64_t dim, int64_t index);
Tensor expand(const Tensor& x, const Shape& shape);      // -1 keeps a dim
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor squeeze(const Tensor& x, int64_t dim);
Tensor squeeze(const Tensor& x);
Tensor contiguous(const Tensor& x);
Tensor clone(const Tensor& x);
Tensor to_dtype(const Tensor& x, DType dtype);

// ---- joining and indexing (autograd/ops/join.cpp, autograd/ops/index.cpp) ----
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);
// x with dim taken at the 1-D int index; backward scatter-adds (repeated indices accumulate).
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// Embedding lookup: weight [V, C], ids [...] → [..., C].
Tensor embedding(const Tensor& weight, const Tensor& ids);
// torch.gather: out[i][j][k] = x[i][index[i][j][k]][k] for dim 1.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// In place, not differentiable: out[.., index[j], ..] = src[.., j, ..] along dim (torch's index_copy_): src has
// out's shape but index.numel() at dim, and out's dtype; a repeated index keeps the last j's row; a bad index is
// an error and nothing is written. Where the index lives on the device, the position is never read by the host
// (the KV cache's write in a captured decode step).
Tensor& index_copy_(Tensor& out, int64_t dim, const Tensor& index, const Tensor& src);

// ---- fused Transformer ops (autograd/ops/fused.cpp) ----
// Each replaces a composition of the ops above with one kernel forward and one backward; the
// composition is its reference (tests/test_fused_ops.cpp).
// Mean cross-entropy of logits [..., V] against targets [...] (int64 or int32; logits' shape without
// the last dim): the mean over the positions whose target ≠ ignore_index of logsumexp(x_i) − x_i,t_i
// → 0-d (NaN when every position is ignored, as in PyTorch). A target outside [0, V) that is not
// ignore_index is an error. Stable for logits of ±1e4. (Also nn::cross_entropy; its composition is
// nn::cross_entropy_reference.)
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100);
// RMSNorm over the last dim: x [..., C], weight [C] → x / sqrt(mean(x²) + eps) ⊙ weight.
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps);
// The residual stream's add and the next RMSNorm in one pass (the pre-norm block: x + f(x), then its norm):
//   sum = x + branch,  normed = rms_norm(sum, weight, eps) stored as normed_dtype.
// branch has x's shape, in x's dtype or (float32 x) bfloat16, widened as add_residual would (nn/precision.h);
// normed_dtype is x's dtype or (float32 x) bfloat16: the input of the next bf16 matmul. An undefined branch:
// sum = x. Bit for bit rms_norm(x + branch.to(x's dtype), weight, eps).to(normed_dtype), forward and backward;
// the backward adds the norm's dx straight onto the gradient gathered for sum (GradInputs::take_gathered) and
// gathers several bf16 gradients of normed in float32. Tape entries: "add" for sum, "add_rms_norm" for normed.
struct ResidualNorm {
  Tensor sum, normed;
};
ResidualNorm add_rms_norm(const Tensor& x, const Tensor& branch, const Tensor& weight, double eps, DType normed_dtype);
// The SwiGLU gate silu(a) ⊙ b, for a and b of one shape.
Tensor swiglu(const Tensor& a, const Tensor& b);

// ---- fused attention ops (autograd/ops/attention.cpp; references: nn/rope.cpp, nn/attention.cpp) ----
// Rotary embedding: the pairs (2k, 2k+1) of row t of x [..., T, D] rotated by the angle whose
// cos/sin are row positions[t] of the constant tables cos, sin [P, D/2]; positions int [T] in [0, P).
Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& positions);
// Causal scaled dot-product attention: q [B, H, T, D], k, v [B, Hkv, T, D] (grouped-query when
// Hkv < H: query head h reads kv head h / (H / Hkv)) → [B, H, T, D] (stored as [B, T, H, D]), where
// query t attends to keys 0..t with weights softmax(scale · q·k). No [T, T] matrix is kept for backward.
// Inference with a KV cache: k, v may be [B, Hkv, Tk, D] with Tk > T (the cached prefix and the new
// positions); the queries are the last T positions, query t sees keys 0..t + Tk − T ("bottom-right"
// causal). Differentiable only when Tk == T.
Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale);
// Inference over the first L keys of k, v [B, Hkv, Tc, D], L = key_count (int64, one element, on q's device) read
// by the kernel when it runs — a captured decode step replays at any position (lm/graph_decoder.h). T ≤ L ≤ Tc
// (otherwise an error; on a GPU reported at its next check); query t is position t + L − T. Bit for bit the
// form above on k, v narrowed to L keys. Not differentiable.
Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, const Tensor& key_count);

// ---- optimizer kernels (autograd/ops/optimizer_kernels.cpp): in place, never recorded ----
struct AdamWHyper {
  double lr, beta1, beta2, eps, weight_decay;
};
// One AdamW step (torch.optim.AdamW's order) of param with its grad and moments, all of one shape
// and dtype, t = step ≥ 1:  θ ← θ(1 − lr·λ);  m ← β1 m + (1 − β1) g;  v ← β2 v + (1 − β2) g²;
//   θ ← θ − lr/(1 − β1^t) · m / (√v/√(1 − β2^t) + ε). Refused under grad mode for tensors that require grad.
void adamw_update_(const Tensor& param, const Tensor& grad, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                   const AdamWHyper& hyper, int64_t step);
// The same for several parameters with one set of hyperparameters and one step, all on one device:
// {param, grad, exp_avg, exp_avg_sq} each. The same bits as adamw_update_ on each; one launch on a GPU.
void adamw_update_many_(const std::vector<std::array<Tensor, 4>>& tensors, const AdamWHyper& hyper, int64_t step);
// The scalars of one such step, {lr, β1, β2, ε, λ, 1 − β1^t, 1 − β2^t}, as a float64 tensor [7] on the host: what
// adamw_update_many_from_device_ reads.
Tensor adamw_step_scalars(const AdamWHyper& hyper, int64_t step);
// adamw_update_many_ with the step's scalars (adamw_step_scalars, copied to a float64 [7] tensor on the tensors'
// device) read when the kernel runs, not when it is queued: a captured step (kernels/device_graph.h) replays
// with each step's lr and t. The same bits as adamw_update_many_. Throws where the backend has no such kernel
// (the CPU) or the tensors are not contiguous float32/float64 of one dtype.
void adamw_update_many_from_device_(const std::vector<std::array<Tensor, 4>>& tensors, const Tensor& scalars);
// Gradient clipping by the global L2 norm in one pass over all of `grads` (one device, one dtype, contiguous),
// where the backend has kernels for it (the GPU): returns n = √(Σ g²) (0-d float64, g² summed in float64) after
// g ← g·(max_norm/(n + 1e-6)) when max_norm < n < ∞; an undefined tensor (nothing done) where it has none.
Tensor clip_grad_norm_many_(const std::vector<Tensor>& grads, double max_norm);

// ---- drawing a token on the device (autograd/ops/sample_token.cpp) ----
using kernels::TokenSampling;
// The next token drawn from one row of logits [V] (float32 / bfloat16 / float64) on their device, with
// lm::Sampler's rules (lm/sampler.h) and the draw's uniform u ∈ [0, 1) read from `uniform` (float64, 1 element, on
// that device; undefined when greedy): returns float64 [2] = {id, status} and writes the id into `token` (int64,
// 1 element) when it is defined. status is the row's max logit; a NaN or +inf logit gives {its lowest index, its
// value}, an all −inf row {0, −inf} (the reader checks status: nothing is thrown on the device). Nothing is read
// back, so a decode step can be captured with it. The id is lm::Sampler's given the same u, unless u·Σw falls
// within rounding (~1e-15 relative) of a boundary between two tokens. Not differentiable. Throws where the
// device has no such kernel (the CPU: sample with lm::Sampler there) and for bad arguments.
Tensor sample_token(const Tensor& logits, const Tensor& uniform, const TokenSampling& sampling,
                    const Tensor& token = Tensor());

// ---- threads ----
void set_num_threads(int n);
int num_threads();

}  // namespace tapegrad
