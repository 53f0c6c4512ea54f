// attention.cpp — the fused attention-side ops: rotary embedding and causal attention, one kernel
// each way (their compositions in nn/rope.cpp and nn/attention.cpp stay as the references:
// tests/test_fused_attention.cpp).
//
// rope(x [..., T, D], cos, sin [P, D/2], positions [T])
//   y[2k] = x[2k] c − x[2k+1] s,  y[2k+1] = x[2k] s + x[2k+1] c   (c, s at pos[t], pair k)
//   The rotation R is orthogonal, so dx = Rᵀ g = the rotation by −angle. The tables are constants.
// causal_attention(q [B, H, T, D], k, v [B, Hkv, T, D], scale)
//   o_t = Σ_{j≤t} P_tj v_j,  P_t = softmax_j≤t(scale · q_t·k_j)
//   (inference also takes k, v [B, Hkv, Tk, D] with Tk > T, a KV cache: query t is position
//   t + Tk − T and sees keys j ≤ t + Tk − T; no gradient then)
//   dv_j = Σ_t P_tj g_t,  dS_tj = P_tj (g_t·v_j − g_t·o_t),  dq_t = scale Σ_j dS_tj k_j,
//   dk_j = scale Σ_t dS_tj q_t    (P recomputed in backward from the saved per-row log-sum-exp)
// Both allocate their outputs in the memory order of their input (a [B, H, T, D] view of a
// [B, T, H, D] projection gets a [B, T, H, D] buffer), so the head split and merge around
// attention stay views and no transpose is ever copied.
#include <algorithm>
#include <numeric>

#include "autograd/ops/op_util.h"

namespace tapegrad {

using detail::backend_of;
using detail::kview;

namespace {

// The stride of dim d (negative d counts from the end).
int64_t stride_at(const Tensor& x, int64_t d) { return x.strides()[static_cast<int>(d < 0 ? d + x.dim() : d)]; }

// An uninitialized tensor of x's shape whose memory order follows x's strides (largest first).
Tensor empty_in_order_of(const Tensor& x) {
  const int n = static_cast<int>(x.dim());
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  // std::sort with the index as tie-break = a stable sort (libstdc++ 12's std::stable_sort trips clang's
  // -Wdeprecated-declarations inside its own headers).
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return stride_at(x, a) != stride_at(x, b) ? stride_at(x, a) > stride_at(x, b) : a < b;
  });
  Shape physical;
  for (int64_t d : order) physical.push_back(x.size(d));
  std::vector<int64_t> inverse(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) inverse[static_cast<size_t>(order[static_cast<size_t>(i)])] = i;
  return empty(physical, x.options()).permute(inverse);
}

// x itself when its last dim has stride 1 and its second-to-last a stride ≥ D (usable as a BLAS
// leading dimension), else a contiguous copy.
Tensor rows_usable_by_blas(const Tensor& x) {
  const int64_t D = x.size(-1);
  if (stride_at(x, -1) == 1 && stride_at(x, -2) >= std::max<int64_t>(1, D)) return x;
  return x.contiguous();
}

}  // namespace

Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin, const Tensor& positions) {
  const char* op = "rope";
  for (const Tensor* t : {&x, &cos, &sin, &positions}) detail::check_defined(op, *t);
  detail::check_floating(op, x);
  detail::check_same_dtype(op, x, cos);
  detail::check_same_dtype(op, x, sin);
  detail::check_same_device(op, x, cos);
  detail::check_same_device(op, x, sin);
  detail::check_same_device(op, x, positions);
  TG_CHECK(x.dim() >= 2 && x.size(-1) % 2 == 0, "{}: x must be [..., T, D] with D even, got {}", op, x.shape());
  const int64_t T = x.size(-2), half = x.size(-1) / 2;
  TG_CHECK(cos.dim() == 2 && cos.size(1) == half && sin.shape() == cos.shape(),
           "{}: cos {} and sin {} must both be [P, D/2] = [P, {}]", op, cos.shape(), sin.shape(), half);
  TG_CHECK(!cos.requires_grad() && !sin.requires_grad(), "{}: the cos/sin tables are constants (no gradient)", op);
  TG_CHECK((positions.dtype() == kInt64 || positions.dtype() == kInt32) && positions.dim() == 1 &&
               positions.size(0) == T,
           "{}: positions must be int64/int32 [T] = [{}], got {} {}", op, T, positions.dtype(), positions.shape());
  // On the CPU a bad position is an error now; a GPU kernel reports it at the next synchronisation
  // (reading the positions here would synchronise every forward).
  if (positions.device().type == DeviceType::CPU)
    for (int64_t p : positions.to_vector<int64_t>())
      TG_CHECK(p >= 0 && p < cos.size(0), "{}: position {} is outside the table [0, {}) (sequence too long?)", op, p,
               cos.size(0));
  const Tensor xin = stride_at(x, -1) == 1 ? x : x.contiguous();
  const Tensor c = cos.contiguous(), s = sin.contiguous();
  Tensor y = empty_in_order_of(xin);
  backend_of(x).rope(kview(y), kview(xin), kview(c), kview(s), kview(positions), /*inverse=*/false);
  if (needs_grad(x))
    record(op, {&x}, y, [c, s, positions](const Tensor& g, GradInputs& dx) {
      // dx = rotation of g by −angle
      const Tensor gin = stride_at(g, -1) == 1 ? g : g.contiguous();
      Tensor gx = empty_in_order_of(gin);
      backend_of(gin).rope(kview(gx), kview(gin), kview(c), kview(s), kview(positions), /*inverse=*/true);
      dx[0] = gx;
    });
  return y;
}

namespace {

// The checks both causal_attention forms make of q, k, v.
void check_attention_inputs(const char* op, const Tensor& q, const Tensor& k, const Tensor& v) {
  for (const Tensor* t : {&q, &k, &v}) detail::check_defined(op, *t);
  detail::check_floating(op, q);
  detail::check_same_dtype(op, q, k);
  detail::check_same_dtype(op, q, v);
  detail::check_same_device(op, q, k);
  detail::check_same_device(op, q, v);
  TG_CHECK(q.dim() == 4 && k.dim() == 4 && k.shape() == v.shape() && k.size(0) == q.size(0) &&
               k.size(2) >= q.size(2) && k.size(3) == q.size(3) && k.size(1) > 0 && q.size(1) % k.size(1) == 0,
           "{}: need q [B, H, T, D] and k, v [B, Hkv, Tk, D] with H a multiple of Hkv and Tk ≥ T, got {}, {}, {}", op,
           q.shape(), k.shape(), v.shape());
}

}  // namespace

Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, const Tensor& key_count) {
  const char* op = "causal_attention";
  check_attention_inputs(op, q, k, v);
  detail::check_defined(op, key_count);
  detail::check_same_device(op, q, key_count);
  TG_CHECK(key_count.dtype() == kInt64 && key_count.numel() == 1,
           "{}: the key count must be one int64 element, got {} {}", op, key_count.dtype(), key_count.shape());
  TG_CHECK(!needs_grad({&q, &k, &v}),
           "{}: attention over a counted prefix of the keys (a KV cache) is for inference only; there is no "
           "gradient (run it under NoGradGuard)",
           op);
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3);
  const Tensor qb = rows_usable_by_blas(q), kb = rows_usable_by_blas(k), vb = rows_usable_by_blas(v);
  const Tensor count = key_count.reshape({1}).contiguous();
  Tensor out = empty({B, T, H, D}, q.options()).transpose(1, 2);
  Tensor lse = empty({B, H, T}, Options(detail::statistic_dtype(q.dtype())).device(q.device()));
  if (q.numel() > 0)
    backend_of(q).causal_attention_prefix(kview(out), kview(lse), kview(qb), kview(kb), kview(vb), kview(count),
                                          scale);
  return out;
}

Tensor causal_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale) {
  const char* op = "causal_attention";
  check_attention_inputs(op, q, k, v);
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3);
  const bool grad = needs_grad({&q, &k, &v});
  TG_CHECK(!grad || k.size(2) == T,
           "{}: keys longer than the queries ({} vs {}: a KV cache) are for inference only; there is no gradient "
           "(run it under NoGradGuard)",
           op, k.size(2), T);
  const Tensor qb = rows_usable_by_blas(q), kb = rows_usable_by_blas(k), vb = rows_usable_by_blas(v);
  // out in [B, T, H, D] memory, seen as [B, H, T, D]: merging the heads afterwards is a view
  Tensor out = empty({B, T, H, D}, q.options()).transpose(1, 2);
  Tensor lse = empty({B, H, T}, Options(detail::statistic_dtype(q.dtype())).device(q.device()));
  if (q.numel() > 0) backend_of(q).causal_attention(kview(out), kview(lse), kview(qb), kview(kb), kview(vb), scale);
  if (grad)
    record(op, {&q, &k, &v}, out,
           [sq = SavedTensor(qb), sk = SavedTensor(kb), sv = SavedTensor(vb), so = SavedTensor(out, true), lse,
            scale](const Tensor& g, GradInputs& dx) {
             const Tensor &qv = sq.get(), &kv = sk.get(), &vv = sv.get(), &ov = so.get();
             const Tensor gb = rows_usable_by_blas(g);
             Tensor gq = empty_in_order_of(qv), gk = empty_in_order_of(kv), gv = empty_in_order_of(vv);
             if (qv.numel() > 0)
               backend_of(qv).causal_attention_backward(kview(gq), kview(gk), kview(gv), kview(gb), kview(qv),
                                                        kview(kv), kview(vv), kview(ov), kview(lse), scale);
             else
               gk.fill_(0.0), gv.fill_(0.0);
             dx[0] = gq;
             dx[1] = gk;
             dx[2] = gv;
           });
  return out;
}

}  // namespace tapegrad
