// rope.h — RotaryEmbedding (RoPE), CS336 / GPT-NeoX-interleaved convention: the interleaved pairs
// (x[2k], x[2k+1]) of each head vector are rotated by the angle pos · theta^(−2k/D), k < D/2:
//   y[2k]   = x[2k] cos − x[2k+1] sin
//   y[2k+1] = x[2k] sin + x[2k+1] cos
// cos/sin tables [max_seq_len, D/2] are built once (in float64, then cast) as non-persistent
// buffers. Positions are explicit; one ≥ max_seq_len (or < 0) is a tapegrad::Error.
// (Hugging Face Llama uses "rotate half" instead, with q/k projection rows permuted to match.)
// forward runs the fused op rope (one pass each way) when positions are [T]; other position
// shapes, and forward_reference, use the composition (views + elementwise ops), its test oracle.
#pragma once
#include <memory>
#include <utility>

#include "nn/module.h"

namespace tapegrad::nn {

class RotaryEmbedding : public Module {
 public:
  RotaryEmbedding(double theta, int64_t head_dim, int64_t max_seq_len, DType dtype = kFloat32);
  // x [..., T, D]; positions int [T] or any shape broadcastable to x's [..., T] → [..., T, D]
  Tensor forward(const Tensor& x, const Tensor& positions) const;
  // positions 0..T−1
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x, const Tensor& positions) const { return forward(x, positions); }
  // The same rotation as a composition of autograd ops: forward's reference.
  Tensor forward_reference(const Tensor& x, const Tensor& positions) const;
  // Positions start .. start+count−1 as int64 [count]: a view of a buffer on the module's device
  // (no host-to-device copy per forward). An error past max_seq_len.
  Tensor positions(int64_t start, int64_t count) const;
  // The tables in `dtype`: themselves when they have it, else a converted copy kept until the tables change
  // (another storage — to(device), a load — or an in-place write). A bf16 forward then converts them once, not
  // on every call (four conversion kernels per layer per forward, also inside a captured decode step).
  std::pair<Tensor, Tensor> tables_as(DType dtype) const;

  double theta;
  int64_t head_dim, max_seq_len;
  Tensor cos_table, sin_table;  // [max_seq_len, D/2]
  Tensor position_ids;          // int64 [max_seq_len]: 0, 1, 2, …

 private:
  struct ConvertedTables {
    std::weak_ptr<Storage> cos_source, sin_source;
    uint64_t cos_version = 0, sin_version = 0;
    Tensor cos, sin;
  };
  mutable ConvertedTables converted_;
};

}  // namespace tapegrad::nn
