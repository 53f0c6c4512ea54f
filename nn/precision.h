// precision.h — mixed precision: the one table of which dtype each part of a model computes in.
//
//   nn::PrecisionGuard guard(nn::Precision::BF16);   // like torch.autocast(dtype=torch.bfloat16)
//   Tensor loss = cross_entropy(model.forward(ids), targets);
//   loss.backward();                                  // gradients reach the float32 parameters
//
// The parameters, their gradients and AdamW's state stay float32 (the "master weights"); only what a
// stage computes in changes. Under Precision::BF16 (the policy table, precision.cpp):
//   stage       computes in   what it means
//   Matmul      bfloat16      Linear: input and weight rounded to bf16, float32 accumulation, bf16 out
//   Attention   bfloat16      q·kᵀ and p·v on bf16 q, k, v; softmax statistics (lse) in float32
//   Residual    float32       the residual stream x + f(x) (a bf16 branch output is widened before the add)
//   Norm        float32       RMSNorm on the float32 residual (its 1/rms always float32)
//   Embedding   float32       the rows of the float32 table
//   Loss        float32       cross-entropy reads bf16 logits, its loss and log-sum-exp are float32
// What a bf16 matmul saves for backward (its bf16 inputs) is half the bytes of float32.
// Precision::TF32 computes everything in float32; on a GPU the matmuls may use TF32 tensor cores (10-bit
// mantissa inputs, float32 accumulation). The CPU has no TF32: there it is exactly FP32.
// Only float32 tensors are ever converted: float64 (gradcheck) passes every stage unchanged.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "autograd/tensor.h"

namespace tapegrad::nn {

enum class Precision : uint8_t { FP32, TF32, BF16 };
const char* precision_name(Precision p);  // "fp32", "tf32", "bf16"
// Parses a precision name; throws tapegrad::Error naming `what` (e.g. "--precision") otherwise.
Precision parse_precision(const std::string& s, const char* what = "precision");

enum class Stage : uint8_t { Matmul, Attention, Residual, Norm, Embedding, Loss };

// The precision of this thread's forward passes: FP32 unless a PrecisionGuard is alive.
Precision current_precision();

// Sets this thread's precision for its lifetime (nests; restores the previous one).
class PrecisionGuard {
 public:
  explicit PrecisionGuard(Precision p);
  ~PrecisionGuard();
  PrecisionGuard(const PrecisionGuard&) = delete;
  PrecisionGuard& operator=(const PrecisionGuard&) = delete;

 private:
  Precision previous_;
};

// The dtype `stage` computes in for a float32 input under the current precision.
DType stage_dtype(Stage stage);
// x converted for `stage` (differentiable: the gradient converts back); x itself when nothing changes
// (x is not float32, or the stage computes in float32).
Tensor autocast(const Tensor& x, Stage stage);
// Which weight a kept copy was made from: its storage, the storage's version (in-place writes) and the view.
class CopiedFrom {
 public:
  bool matches(const Tensor& w) const;
  void set(const Tensor& w);

 private:
  std::weak_ptr<Storage> storage_;
  uint64_t version_ = 0;
  int64_t offset_ = 0;
  Shape shape_, strides_;
};
// A weight's converted copy, kept between forwards while a CastCacheGuard is alive on this thread (generation:
// a decode step reads every weight once, and converting the float32 master weight to bf16 each time would read
// 4 and write 2 bytes per parameter per token on top of the matmul's 2). The copy is reused while the weight's
// storage, version (in-place writes: an optimizer step, copy_), view and the stage's dtype are the same; it is
// never used for a weight that requires grad under grad mode (training converts on the tape every time, keeps
// nothing), and without the guard it is cleared and autocast runs as before. Costs the copy's memory (bf16: half
// the float32 weight's) for as long as the module keeps it.
class WeightCast {
 public:
  Tensor operator()(const Tensor& weight, Stage stage) const;

 private:
  mutable CopiedFrom source_;
  mutable Tensor cast_;
};
// Several float32 weights [out_i, in] that read the same input (attention's q, k, v; SwiGLU's w1, w3), stacked
// into one converted copy [Σ out_i, in] — one matmul instead of one per weight while generating. Kept like
// WeightCast's copy, and made only where WeightCast would keep a converted copy of each weight anyway (a
// CastCacheGuard, the stage converting float32, no weight requiring grad under grad mode), so it costs no memory
// beyond theirs (they are then never made). Undefined where it does not apply: the caller runs each weight alone.
class StackedWeightCast {
 public:
  Tensor operator()(const std::vector<Tensor>& weights, Stage stage) const;

 private:
  mutable std::vector<CopiedFrom> sources_;
  mutable Tensor stacked_;
};
// Turns WeightCast's cache on for this thread while alive (nests). lm::generate and ChatSession hold one.
class CastCacheGuard {
 public:
  CastCacheGuard();
  ~CastCacheGuard();
  CastCacheGuard(const CastCacheGuard&) = delete;
  CastCacheGuard& operator=(const CastCacheGuard&) = delete;
};

// The residual stream's add (Stage::Residual): x + branch, the branch widened to x's dtype first when it
// came out of a bf16 stage. Under FP32 both are float32 and this is x + branch.
Tensor add_residual(const Tensor& x, const Tensor& branch);

}  // namespace tapegrad::nn
