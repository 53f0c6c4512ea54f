// block_ffn.h — the feed-forward half of a TransformerBlock, one interface for its two kinds:
//   SwiGLU (nn/swiglu.h; Llama):            y = w2(silu(w1 x) ⊙ w3 x),  w1, w3 [F, C], w2 [C, F]
//   ReLU² (nn/relu_squared.h; Primer, modded-nanogpt): y = w2(relu(w1 x)²),  w1 [F, C], w2 [C, F]
// Parameter names: w1, w2 (and w3 for SwiGLU) — the block's "ffn.w1.weight", … in every checkpoint.
#pragma once
#include <string_view>

#include "nn/linear.h"

namespace tapegrad::nn {

enum class FFNKind { SwiGLU, ReLU2 };
// "swiglu" / "relu2" ↔ FFNKind; anything else is a tapegrad::Error naming the value.
FFNKind ffn_kind_from_string(std::string_view name);
const char* ffn_kind_name(FFNKind kind);
// F when d_ff ≤ 0: SwiGLU 8/3·C rounded up to a multiple of 64 (three matrices: the parameters of a 4·C MLP);
// ReLU² 4·C (two matrices, as GPT-2 and modded-nanogpt).
int64_t default_d_ff(FFNKind kind, int64_t d_model);

class BlockFFN : public Module {
 public:
  // x [..., C] → [..., C]
  virtual Tensor forward(const Tensor& x) const = 0;
  // The same computed by a plain composition of autograd ops: forward's test oracle.
  virtual Tensor forward_reference(const Tensor& x) const = 0;
  Tensor operator()(const Tensor& x) const { return forward(x); }
  virtual FFNKind kind() const = 0;

  int64_t d_model = 0, d_ff = 0;
  std::shared_ptr<Linear> w1, w2, w3;  // w3: SwiGLU's up projection; null for ReLU²
};

// A block's feed-forward of the given kind (d_ff ≤ 0: default_d_ff).
std::shared_ptr<BlockFFN> make_block_ffn(FFNKind kind, int64_t d_model, int64_t d_ff, DType dtype, Generator* gen);

}  // namespace tapegrad::nn
