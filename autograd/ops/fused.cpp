// fused.cpp — fused Transformer ops: one kernel forward, one kernel backward, each replacing a
// chain of primitives (its composition stays as the reference: tests/test_fused_ops.cpp).
//
// cross_entropy(x [..., V], t [...], ignore)  — as rows x [N, V], t [N]: mean over valid rows (t_i ≠ ignore) of
//   loss_i = lse_i − x_i,t_i,  lse_i = log Σ_j exp(x_ij)
//   ∂loss/∂x_ij = (softmax(x_i)_j − [j = t_i]) / N_valid      (0 on ignored rows)
//   Saves x, t and the per-row lse [N] (float64): no [N, V] softmax is ever stored.
//   Backward writes dx over the saved x when nobody else can see x (the caller dropped the logits, no
//   retain_graph: autograd/backward_pass.h) — every kernel reads x_ij before it writes dx_ij, so it is bitwise
//   the out-of-place result, with one [N, V] buffer less at the peak (llm.c does the same).
// rms_norm(x [..., C], w [C], eps)  — per row r = (mean x² + eps)^(−1/2), y = x·r·w
//   ∂r/∂x_k = −r³x_k/C, so with gw = g⊙w:  dx = r·(gw − x·r²·mean(gw⊙x)),  dw = Σ_rows g⊙x·r
//   Saves x, w and r per row.
// add_rms_norm(x, b, w, eps)  — h = x + b, y = rms_norm(h, w): two tape entries from one forward kernel, "add"
//   for h and "add_rms_norm" for y, whose backward is rms_norm's with its dh added onto the gradient already
//   gathered for h in the same kernel.
// swiglu(a, b)  — y = silu(a)⊙b = a·σ(a)·b
//   da = g⊙b⊙σ(a)(1 + a(1 − σ(a))),  db = g⊙silu(a)
//   Saves a and b (recomputing σ(a) in backward is cheaper than storing it).
#include "autograd/backward_pass.h"
#include "autograd/ops/op_util.h"

namespace tapegrad {

using detail::backend_of;
using detail::kview;
using detail::kview_as;

// ---------------- cross-entropy ----------------

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
  const char* op = "cross_entropy";
  detail::check_defined(op, logits);
  detail::check_defined(op, targets);
  detail::check_floating(op, logits);
  detail::check_same_device(op, logits, targets);
  TG_CHECK(logits.dim() >= 1, "{}: logits must be [..., V], got {}", op, logits.shape());
  TG_CHECK(targets.dtype() == kInt64 || targets.dtype() == kInt32, "{}: targets must be int64 or int32, got {} {}",
           op, targets.dtype(), targets.shape());
  const Shape lead(logits.shape().begin(), logits.shape().end() - 1);
  TG_CHECK(targets.shape() == lead, "{}: targets {} must be logits {} without the last dim", op, targets.shape(),
           logits.shape());
  // [..., V] → rows [N, V] (a view when the leading dims merge, else a copy); targets → [N].
  const int64_t V = logits.size(-1), N = lead.numel();
  const Shape rows{N, V};
  const Tensor x2 = logits.detach().reshape(rows);
  const Tensor t1 = targets.reshape({N});
  Tensor loss = empty({}, Options(detail::statistic_dtype(logits.dtype())).device(logits.device()));
  Tensor lse = empty({N}, Options(kFloat64).device(logits.device()));
  // The kernel checks every target before it writes anything.
  backend_of(logits).cross_entropy(kview(loss), kview(lse), kview(x2), kview(t1), ignore_index);
  if (needs_grad(logits))
    record(op, {&logits}, loss,
           [sx = SavedTensor(x2), st = SavedTensor(t1), lse, ignore_index, shape = logits.shape()](
               const Tensor& g, GradInputs& dx) mutable {
             // dx_ij = (exp(x_ij − lse_i) − [j = t_i])·g / N_valid, one pass per row
             // In place when this entry holds the only handle on the logits' buffer and runs for the last time:
             // the saved x is dropped and its buffer becomes the gradient.
             const bool in_place = !detail::backward_retains_graph() && detail::owns_storage(sx.get());
             const Tensor x = sx.get();
             Tensor gx;
             if (in_place) {
               x.storage()->bump_version();  // if the kernel throws, running this entry again says x was modified
               gx = x.reshape(shape);
             } else {
               gx = empty(shape, x.options());
             }
             backend_of(x).cross_entropy_backward(kview_as(gx, x.shape()), kview(g), kview(x), kview(st.get()),
                                                  kview(lse), ignore_index);
             if (in_place) sx = SavedTensor();  // the buffer is the gradient's alone now
             dx[0] = gx;
           });
  return loss;
}

// ---------------- RMSNorm ----------------

namespace {

// x [..., C] as rows [R, C] for a norm with weight [C] and eps ≥ 0 (checked).
Shape norm_rows(const char* op, const Tensor& x, const Tensor& weight, double eps) {
  TG_CHECK(x.dim() >= 1 && x.size(-1) > 0, "{}: x must be [..., C] with C > 0, got {}", op, x.shape());
  const int64_t C = x.size(-1);
  TG_CHECK(weight.dim() == 1 && weight.size(0) == C, "{}: weight {} must be [C] = [{}] for x {}", op, weight.shape(),
           C, x.shape());
  TG_CHECK(eps >= 0, "{}: eps must be ≥ 0, got {}", op, eps);
  return {x.numel() / C, C};
}

}  // namespace

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  const char* op = "rms_norm";
  detail::check_defined(op, x);
  detail::check_defined(op, weight);
  detail::check_floating(op, x);
  detail::check_same_dtype(op, x, weight);
  detail::check_same_device(op, x, weight);
  const Shape rows = norm_rows(op, x, weight, eps);  // [R, C]
  const int64_t R = rows[0];
  const Tensor x2 = x.detach().reshape(rows);  // a view when the leading dims merge, else a copy
  Tensor y = empty_like(x);
  Tensor rstd = empty({R}, Options(detail::statistic_dtype(x.dtype())).device(x.device()));
  backend_of(x).rms_norm(kview_as(y, rows), kview(rstd), kview(x2), kview(weight), eps);
  if (needs_grad(x, weight))
    record(op, {&x, &weight}, y,
           [sx = SavedTensor(x2), sw = SavedTensor(weight), rstd, rows, xs = x.shape()](const Tensor& g,
                                                                                       GradInputs& dx) {
             // dx = r·(gw − x·r²·mean(gw⊙x)) with gw = g⊙w;  dw = Σ_rows g⊙x·r
             const Tensor& xv = sx.get();
             const Tensor& w = sw.get();
             const Tensor g2 = g.reshape(rows);
             Tensor gx, gw;
             if (dx.needs(0)) gx = empty(xs, xv.options());
             if (dx.needs(1)) gw = empty_like(w);
             backend_of(xv).rms_norm_backward(gx.defined() ? kview_as(gx, rows) : kernels::TensorView{},
                                              gw.defined() ? kview(gw) : kernels::TensorView{}, kview(g2), kview(xv),
                                              kview(w), kview(rstd));
             dx[0] = gx;
             dx[1] = gw;
           });
  return y;
}

// ---------------- residual add + RMSNorm ----------------

ResidualNorm add_rms_norm(const Tensor& x, const Tensor& branch, const Tensor& weight, double eps,
                          DType normed_dtype) {
  const char* op = "add_rms_norm";
  detail::check_defined(op, x);
  detail::check_defined(op, weight);
  detail::check_floating(op, x);
  // bfloat16 next to a float32 stream is the mixed-precision block; other mixes are converted by the caller.
  const auto same_or_bf16 = [&](DType t) { return t == x.dtype() || (t == kBFloat16 && x.dtype() == kFloat32); };
  TG_CHECK(same_or_bf16(normed_dtype), "{}: normed_dtype {} must be x's dtype {} (or bfloat16 for float32 x)", op,
           normed_dtype, x.dtype());
  if (!branch.defined()) {
    // Nothing to add (the first block): the plain norm, converted.
    Tensor y = rms_norm(x, weight, eps);
    if (y.dtype() == normed_dtype) return {x, y};
    return {x, y.to(normed_dtype)};  // the cast gathers its gradient in float32, as below (to_dtype)
  }
  detail::check_floating(op, branch);
  detail::check_same_dtype(op, x, weight);
  detail::check_same_device(op, x, weight);
  detail::check_same_device(op, x, branch);
  TG_CHECK(branch.shape() == x.shape(), "{}: branch {} must have x's shape {}", op, branch.shape(), x.shape());
  TG_CHECK(same_or_bf16(branch.dtype()), "{}: branch {} must be x's dtype {} (or bfloat16 for float32 x)", op,
           branch.dtype(), x.dtype());
  const Shape rows = norm_rows(op, x, weight, eps);  // [R, C]
  const int64_t R = rows[0];
  Tensor sum = empty_like(x);
  Tensor normed = empty(x.shape(), Options(normed_dtype).device(x.device()));
  Tensor rstd = empty({R}, Options(detail::statistic_dtype(x.dtype())).device(x.device()));
  backend_of(x).add_rms_norm(kview_as(sum, rows), kview_as(normed, rows), kview(rstd),
                             kview(x.detach().reshape(rows)), kview(branch.detach().reshape(rows)), kview(weight), eps);
  if (needs_grad(x, branch))
    // d sum/dx = d sum/d branch = 1; the engine converts the branch's gradient to its dtype.
    record("add", {&x, &branch}, sum, [](const Tensor& g, GradInputs& dx) {
      dx[0] = g;
      dx[1] = g;
    });
  if (needs_grad(sum, weight)) {
    record("add_rms_norm", {&sum, &weight}, normed,
           [ss = SavedTensor(sum, /*is_output=*/true), sw = SavedTensor(weight), rstd, rows](const Tensor& g,
                                                                                           GradInputs& dx) {
             // dsum = gathered + r·(gw − h·r²·mean(gw⊙h)) with gw = g⊙w;  dw = Σ_rows g⊙h·r
             const Tensor& h = ss.get();
             const Tensor& w = sw.get();
             Tensor gathered = dx.needs(0) ? dx.take_gathered(0) : Tensor();
             Tensor gh = gathered.defined() ? gathered : dx.needs(0) ? empty(h.shape(), h.options()) : Tensor();
             Tensor gw = dx.needs(1) ? empty_like(w) : Tensor();
             const kernels::TensorView gh_rows = gh.defined() ? kview_as(gh, rows) : kernels::TensorView{};
             backend_of(h).rms_norm_backward_add(gh_rows, gw.defined() ? kview(gw) : kernels::TensorView{},
                                                 kview(g.reshape(rows)), kview_as(h, rows), kview(w), kview(rstd),
                                                 gathered.defined() ? gh_rows : kernels::TensorView{});
             dx[0] = gh;
             dx[1] = gw;
           });
    // Several bf16 matmuls read normed: their gradients are summed in float32 (the backward widens g anyway).
    normed.grad_fn()->set_gathers_in_float32(true);
  }
  return {sum, normed};
}

// ---------------- SwiGLU gate ----------------

Tensor swiglu(const Tensor& a, const Tensor& b) {
  const char* op = "swiglu";
  detail::check_defined(op, a);
  detail::check_defined(op, b);
  detail::check_floating(op, a);
  detail::check_same_dtype(op, a, b);
  detail::check_same_device(op, a, b);
  TG_CHECK(a.shape() == b.shape(), "{}: a {} and b {} must have the same shape", op, a.shape(), b.shape());
  Tensor y = empty_like(a);
  backend_of(a).swiglu(kview(y), kview(a), kview(b));
  if (needs_grad(a, b))
    record(op, {&a, &b}, y, [sa = SavedTensor(a), sb = SavedTensor(b)](const Tensor& g, GradInputs& dx) {
      // da = g⊙b⊙σ(a)(1 + a(1 − σ(a))),  db = g⊙silu(a): one pass over g, a, b
      const Tensor& av = sa.get();
      const Tensor& bv = sb.get();
      Tensor ga, gb;
      if (dx.needs(0)) ga = empty_like(av);
      if (dx.needs(1)) gb = empty_like(av);
      backend_of(av).swiglu_backward(ga.defined() ? kview(ga) : kernels::TensorView{},
                                     gb.defined() ? kview(gb) : kernels::TensorView{}, kview(g, av.shape()), kview(av),
                                     kview(bv));
      dx[0] = ga;
      dx[1] = gb;
    });
  return y;
}

}  // namespace tapegrad
