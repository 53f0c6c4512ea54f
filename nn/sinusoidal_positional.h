// sinusoidal_positional.h — the fixed positional encoding of "Attention Is All You Need" (§3.5):
//   PE[pos, 2i]   = sin(pos / 10000^(2i / C))
//   PE[pos, 2i+1] = cos(pos / 10000^(2i / C))        pos ∈ [0, max_len), 2i, 2i+1 < C
// The table [max_len, C] is computed once in float64 and stored in the module's dtype as a
// non-persistent buffer "pe" (recomputed, never saved in a state dict; not a parameter).
// forward(x [B, T, C]) = x + PE[:T] (broadcast over B; also accepts [T, C]); T > max_len is an error.
// An odd C is allowed (the last column is a sin). No √C scaling of the embeddings is implied:
// tapegrad's Embedding starts at N(0, 1), already on the scale of this table.
#pragma once
#include "nn/module.h"

namespace tapegrad::nn {

class SinusoidalPositionalEncoding : public Module {
 public:
  SinusoidalPositionalEncoding(int64_t max_len, int64_t d_model, DType dtype = kFloat32);
  // x [..., T, C] → x + PE[:T]
  Tensor forward(const Tensor& x) const;
  Tensor operator()(const Tensor& x) const { return forward(x); }

  int64_t max_len, d_model;
  Tensor pe;  // [max_len, C]
};

}  // namespace tapegrad::nn
