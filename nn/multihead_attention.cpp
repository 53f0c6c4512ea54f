// multihead_attention.cpp — projections, head split, the combined bool mask, SDPA, head merge.
#include "nn/multihead_attention.h"

#include <vector>

namespace tapegrad::nn {

Tensor key_padding_mask(const Tensor& ids, int64_t pad_id) {
  TG_CHECK(ids.defined() && ids.dim() == 2 && (ids.dtype() == kInt64 || ids.dtype() == kInt32),
           "key_padding_mask: ids must be [B, T] int64 or int32");
  return ne(ids, static_cast<double>(pad_id));  // [B, T], true = real token
}

MultiHeadAttention::MultiHeadAttention(int64_t d, int64_t h, bool bias, DType dtype, Generator* gen)
    : d_model(d), n_heads(h) {
  TG_CHECK(d > 0 && h > 0, "MultiHeadAttention: d_model and n_heads must be positive, got {} and {}", d, h);
  TG_CHECK(d % h == 0, "MultiHeadAttention: d_model {} is not divisible by n_heads {}", d, h);
  head_dim = d / h;
  q_proj = register_module("q_proj", std::make_shared<Linear>(d, d, bias, dtype, gen));
  k_proj = register_module("k_proj", std::make_shared<Linear>(d, d, bias, dtype, gen));
  v_proj = register_module("v_proj", std::make_shared<Linear>(d, d, bias, dtype, gen));
  output_proj = register_module("output_proj", std::make_shared<Linear>(d, d, bias, dtype, gen));
}

Tensor MultiHeadAttention::forward(const Tensor& query, const Tensor& kv, const Tensor& pad, bool causal) const {
  TG_CHECK(query.defined() && kv.defined(), "MultiHeadAttention: undefined input");
  TG_CHECK(query.dim() == 3 && query.size(2) == d_model, "MultiHeadAttention: query must be [B, Tq, {}], got {}",
           d_model, query.shape());
  TG_CHECK(kv.dim() == 3 && kv.size(2) == d_model && kv.size(0) == query.size(0),
           "MultiHeadAttention: key_value must be [B, Tk, {}] with the query's B = {}, got {}", d_model,
           query.size(0), kv.shape());
  const int64_t B = query.size(0), Tq = query.size(1), Tk = kv.size(1), H = n_heads, D = head_dim;
  TG_CHECK(!causal || Tq == Tk, "MultiHeadAttention: a causal mask needs Tq == Tk, got Tq {} and Tk {}", Tq, Tk);
  if (pad.defined()) {
    TG_CHECK(pad.dtype() == kBool, "MultiHeadAttention: key_padding_mask must be bool (true = real token), got {}",
             pad.dtype());
    TG_CHECK(pad.dim() == 2 && pad.size(0) == B && pad.size(1) == Tk,
             "MultiHeadAttention: key_padding_mask must be [B, Tk] = [{}, {}], got {}", B, Tk, pad.shape());
  }

  // The bool mask, true = attend, and for rows with no visible key the 0/1 factor that zeroes them.
  Tensor mask, row_alive;  // [B or 1, 1, Tq or 1, Tk] bool; [B, 1, Tq, 1] float (0 = nothing to attend)
  if (pad.defined()) {
    const DType dt = query.dtype();
    Tensor allowed = pad.to(dt).view({B, 1, 1, Tk});                            // 1 = real key
    if (causal) allowed = allowed * causal_mask(Tq, query.device()).to(dt);     // [B, 1, Tq, Tk], AND
    row_alive = gt(sum(allowed, {-1}, /*keepdim=*/true), 0.5).to(dt);          // [B, 1, Tq|1, 1]
    // A dead row attends to every key (finite softmax, no NaN); its result is multiplied by 0 below.
    mask = gt(allowed + (1.0 - row_alive), 0.5);
    if (row_alive.to_vector<double>() == std::vector<double>(static_cast<size_t>(row_alive.numel()), 1.0))
      row_alive = Tensor();  // every row has a key: no zeroing needed
  } else if (causal) {
    mask = causal_mask(Tq, query.device());  // [Tq, Tk], broadcast over B and H
  }

  // [B, T, C] → [B, T, H, D] → [B, H, T, D]
  Tensor q = q_proj->forward(query).view({B, Tq, H, D}).transpose(1, 2);
  Tensor k = k_proj->forward(kv).view({B, Tk, H, D}).transpose(1, 2);
  Tensor v = v_proj->forward(kv).view({B, Tk, H, D}).transpose(1, 2);
  Tensor y = scaled_dot_product_attention(q, k, v, mask);  // [B, H, Tq, D]
  if (row_alive.defined()) y = y * row_alive;              // dead rows → 0
  y = y.transpose(1, 2).reshape({B, Tq, H * D});           // heads side by side: [B, Tq, C]
  return output_proj->forward(y);                          // [B, Tq, C]
}

}  // namespace tapegrad::nn
