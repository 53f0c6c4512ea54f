// attention.cpp — SDPA as matmul + where + softmax + matmul; the attention module around it (fused
// ops in forward, the composition in forward_reference).
#include "nn/attention.h"

#include <cmath>
#include <limits>

namespace tapegrad::nn {

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask) {
  TG_CHECK(q.defined() && k.defined() && v.defined(), "scaled_dot_product_attention: undefined input");
  TG_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2 && q.size(-1) == k.size(-1) && k.size(-2) == v.size(-2),
           "scaled_dot_product_attention: need Q [..., Tq, D], K [..., Tk, D], V [..., Tk, Dv], got {}, {}, {}",
           q.shape(), k.shape(), v.shape());
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  Tensor scores = matmul(q, k.transpose(-1, -2)) * scale;  // [..., Tq, Tk] = Q Kᵀ / √D
  if (mask.defined()) {
    TG_CHECK(mask.dtype() == kBool, "scaled_dot_product_attention: mask must be bool (true = attend), got {}",
             mask.dtype());
    const Tensor neg_inf =
        scalar_tensor(-std::numeric_limits<double>::infinity(), scores.options());
    scores = where(mask, scores, neg_inf);  // −∞ where the key is hidden
  }
  return matmul(softmax(scores, -1), v);  // [..., Tq, Tk] @ [..., Tk, Dv] → [..., Tq, Dv]
}

Tensor causal_mask(int64_t t, Device device) {
  const Tensor i = arange(0.0, static_cast<double>(t), 1.0, Options(kInt64).device(device));
  return ge(i.unsqueeze(1), i.unsqueeze(0));  // [T, T]: query row ≥ key column
}

CausalSelfAttention::CausalSelfAttention(int64_t d, int64_t h, int64_t hkv, std::shared_ptr<RotaryEmbedding> r,
                                         DType dtype, Generator* gen, bool qk_norm, bool norm_gain, double eps)
    : d_model(d), n_heads(h), n_kv_heads(hkv > 0 ? hkv : h), rope(std::move(r)) {
  TG_CHECK(d > 0 && h > 0, "CausalSelfAttention: d_model and n_heads must be positive, got {} and {}", d, h);
  TG_CHECK(d % h == 0, "CausalSelfAttention: d_model {} is not divisible by n_heads {}", d, h);
  TG_CHECK(n_heads % n_kv_heads == 0, "CausalSelfAttention: n_heads {} is not divisible by n_kv_heads {}", n_heads,
           n_kv_heads);
  head_dim = d / h;
  TG_CHECK(!rope || rope->head_dim == head_dim, "CausalSelfAttention: RoPE head_dim {} != d_model / n_heads = {}",
           rope ? rope->head_dim : 0, head_dim);
  q_proj = register_module("q_proj", std::make_shared<Linear>(d, n_heads * head_dim, false, dtype, gen));
  k_proj = register_module("k_proj", std::make_shared<Linear>(d, n_kv_heads * head_dim, false, dtype, gen));
  v_proj = register_module("v_proj", std::make_shared<Linear>(d, n_kv_heads * head_dim, false, dtype, gen));
  output_proj = register_module("output_proj", std::make_shared<Linear>(n_heads * head_dim, d, false, dtype, gen));
  if (qk_norm) {
    q_norm = register_module("q_norm", std::make_shared<RMSNorm>(head_dim, eps, dtype, norm_gain));
    k_norm = register_module("k_norm", std::make_shared<RMSNorm>(head_dim, eps, dtype, norm_gain));
  }
}

Tensor CausalSelfAttention::split_heads(const Tensor& projected, int64_t n, const RMSNorm* norm, bool fused) const {
  const int64_t B = projected.size(0), T = projected.size(1);
  Tensor heads = projected.view({B, T, n, head_dim});  // [B, T, n, D]
  if (norm) heads = fused ? norm->forward(heads) : norm->forward_reference(heads);
  return heads.transpose(1, 2);  // [B, n, T, D]: a view, the fused ops keep the [B, T, n, D] memory order
}

Tensor CausalSelfAttention::forward(const Tensor& x, const Tensor& positions) const {
  return attend(x, positions, /*fused=*/true);
}

Tensor CausalSelfAttention::forward_reference(const Tensor& x, const Tensor& positions) const {
  return attend(x, positions, /*fused=*/false);
}

Tensor CausalSelfAttention::attend(const Tensor& x, const Tensor& positions, bool fused) const {
  TG_CHECK(x.dim() == 3 && x.size(2) == d_model, "CausalSelfAttention: input must be [B, T, {}], got {}", d_model,
           x.shape());
  const int64_t B = x.size(0), T = x.size(1), H = n_heads, Hkv = n_kv_heads, G = H / Hkv, D = head_dim;
  const Tensor pos = positions.defined() ? positions
                     : rope            ? rope->positions(0, T)
                                       : arange(0.0, static_cast<double>(T), 1.0, Options(kInt64).device(x.device()));
  TG_CHECK(pos.dim() == 1 && pos.size(0) == T, "CausalSelfAttention: positions must be [T] = [{}], got {}", T,
           pos.shape());
  // [B, T, H·D] → [B, T, H, D] (QK-norm over D) → [B, H, T, D]
  Tensor q = split_heads(q_proj->forward(x), H, q_norm.get(), fused);
  Tensor k = split_heads(k_proj->forward(x), Hkv, k_norm.get(), fused);  // [B, Hkv, T, D]
  Tensor v = split_heads(v_proj->forward(x), Hkv, nullptr, fused);
  if (rope) {
    q = fused ? rope->forward(q, pos) : rope->forward_reference(q, pos);
    k = fused ? rope->forward(k, pos) : rope->forward_reference(k, pos);
  }
  Tensor y;
  if (fused) {
    y = causal_attention(q, k, v, 1.0 / std::sqrt(static_cast<double>(D)));  // [B, H, T, D], stored [B, T, H, D]
  } else {
    // GQA: query head h = kv·G + g reads kv head kv = h / G: [B, Hkv, G, T, D] against [B, Hkv, 1, T, D]
    y = scaled_dot_product_attention(q.reshape({B, Hkv, G, T, D}), k.unsqueeze(2), v.unsqueeze(2),
                                      causal_mask(T, x.device()));
    y = y.reshape({B, H, T, D});
  }
  y = y.transpose(1, 2).reshape({B, T, H * D});  // heads back side by side (a view on the fused path)
  return output_proj->forward(y);                 // [B, T, C]
}

CausalSelfAttention::QKV CausalSelfAttention::project_for_cache(const Tensor& x, const Tensor& positions,
                                                                 DType dtype) const {
  const int64_t B = x.size(0), T = x.size(1), H = n_heads, Hkv = n_kv_heads, D = head_dim;
  Tensor q, k, v;
  // Generating under bf16 precision: q, k, v in one matmul [B, T, (H + 2·Hkv)·D] (StackedWeightCast), and q, k
  // rotated in one call over their H + Hkv adjacent heads — the same values as the calls per projection.
  const Tensor qkv = stacked_linear_forward(x, {q_proj.get(), k_proj.get(), v_proj.get()}, qkv_cast_);
  if (qkv.defined() && q_norm) {  // QK-norm: each part normalized by its own norm, then rotated
    q = split_heads(qkv.narrow(2, 0, H * D), H, q_norm.get(), true);
    k = split_heads(qkv.narrow(2, H * D, Hkv * D), Hkv, k_norm.get(), true);
    v = split_heads(qkv.narrow(2, (H + Hkv) * D, Hkv * D), Hkv, nullptr, true);
    if (rope) {
      q = rope->forward(q, positions);
      k = rope->forward(k, positions);
    }
  } else if (qkv.defined()) {
    Tensor qk = qkv.narrow(2, 0, (H + Hkv) * D).view({B, T, H + Hkv, D}).transpose(1, 2);  // [B, H + Hkv, T, D]
    if (rope) qk = rope->forward(qk, positions);
    q = qk.narrow(1, 0, H);
    k = qk.narrow(1, H, Hkv);
    v = qkv.narrow(2, (H + Hkv) * D, Hkv * D).view({B, T, Hkv, D}).transpose(1, 2);
  } else {
    q = split_heads(q_proj->forward(x), H, q_norm.get(), true);    // [B, H, T, D]
    k = split_heads(k_proj->forward(x), Hkv, k_norm.get(), true);  // [B, Hkv, T, D]
    v = split_heads(v_proj->forward(x), Hkv, nullptr, true);
    if (rope) {
      q = rope->forward(q, positions);
      k = rope->forward(k, positions);
    }
  }
  // The cache's dtype decides the attention's (a bf16 cache under bf16 precision: nn/kv_cache.h).
  if (q.dtype() != dtype) q = q.to(dtype);
  return {q, k, v};
}

Tensor CausalSelfAttention::forward_cached(const Tensor& x, KVCache::Layer& cache, int64_t start) const {
  TG_CHECK(x.dim() == 3 && x.size(2) == d_model, "CausalSelfAttention: input must be [B, T, {}], got {}", d_model,
           x.shape());
  const int64_t B = x.size(0), T = x.size(1), H = n_heads, Hkv = n_kv_heads, D = head_dim;
  const int64_t L = start + T;  // keys attended by the last query
  TG_CHECK(cache.k.size(0) == B && cache.k.size(1) == Hkv && cache.k.size(3) == D && L <= cache.k.size(2),
           "CausalSelfAttention: the KV cache {} does not fit batch {}, {} kv heads of dim {} at positions {}..{}",
           cache.k.shape(), B, Hkv, D, start, L - 1);
  const Tensor pos = rope ? rope->positions(start, T)
                          : arange(static_cast<double>(start), static_cast<double>(L), 1.0,
                                   Options(kInt64).device(x.device()));
  const QKV p = project_for_cache(x, pos, cache.k.dtype());
  cache.k.narrow(2, start, T).copy_(p.k);
  cache.v.narrow(2, start, T).copy_(p.v);
  // Keys 0..L−1 from the cache; query t (position start + t) sees keys j ≤ start + t: the fused
  // kernel's "bottom-right" causal mask over a longer key sequence (one token while decoding).
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  Tensor y = causal_attention(p.q, cache.k.narrow(2, 0, L), cache.v.narrow(2, 0, L), scale);  // [B, H, T, D]
  y = y.transpose(1, 2).reshape({B, T, H * D});
  return output_proj->forward(y);
}

Tensor CausalSelfAttention::forward_decode(const Tensor& x, KVCache::Layer& cache, const Tensor& position,
                                           const Tensor& key_count) const {
  TG_CHECK(x.dim() == 3 && x.size(1) == 1 && x.size(2) == d_model,
           "CausalSelfAttention: a decode step's input must be [B, 1, {}], got {}", d_model, x.shape());
  const int64_t B = x.size(0), H = n_heads, Hkv = n_kv_heads, D = head_dim;
  TG_CHECK(cache.k.size(0) == B && cache.k.size(1) == Hkv && cache.k.size(3) == D,
           "CausalSelfAttention: the KV cache {} does not fit batch {}, {} kv heads of dim {}", cache.k.shape(), B,
           Hkv, D);
  const QKV p = project_for_cache(x, position, cache.k.dtype());
  // Row position[0] of the cache ← this token's K, V (converted to the cache's dtype, as copy_ does above).
  index_copy_(cache.k, 2, position, p.k.dtype() == cache.k.dtype() ? p.k : p.k.to(cache.k.dtype()));
  index_copy_(cache.v, 2, position, p.v.dtype() == cache.v.dtype() ? p.v : p.v.to(cache.v.dtype()));
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  Tensor y = causal_attention(p.q, cache.k, cache.v, scale, key_count);  // [B, H, 1, D]
  y = y.transpose(1, 2).reshape({B, 1, H * D});
  return output_proj->forward(y);
}

}  // namespace tapegrad::nn
