// index.cpp — index_select and gather (primitives), embedding (composition).
//   y = index_select(x, dim, idx):  y[.., j, ..] = x[.., idx[j], ..]
//       dx = zeros(x.shape); dx[.., idx[j], ..] += g[.., j, ..]      (repeated indices accumulate)
//   y = gather(x, dim, idx):        y[i][j][k] = x[i][idx[i][j][k]][k]   (dim 1)
//       dx = zeros(x.shape); dx[i][idx[i][j][k]][k] += g[i][j][k]
// index_copy_ (in place, not differentiable): out[.., idx[j], ..] = src[.., j, ..], the last j winning.
#include "autograd/ops/op_util.h"

namespace tapegrad {

using detail::backend_of;
using detail::kview;

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  detail::check_defined("index_select", x);
  detail::check_defined("index_select", index);
  TG_CHECK(is_index(index.dtype()), "index_select: index must be int64 or int32, got {} {}", index.dtype(),
           index.shape());
  TG_CHECK(index.dim() <= 1, "index_select: index must be 1-D, got shape {}", index.shape());
  TG_CHECK(x.dim() > 0, "index_select: cannot index a 0-d tensor");
  detail::check_same_device("index_select", x, index);
  const int d = wrap_dim(dim, x.dim(), "index_select");
  const Tensor idx = index.reshape({-1});
  Shape out = x.shape();
  out[d] = idx.numel();
  Tensor y = empty(out, x.options());
  backend_of(x).index_select(kview(y), kview(x), d, kview(idx));
  if (needs_grad(x))
    record("index_select", {&x}, y, [xs = x.shape(), d, si = SavedTensor(idx)](const Tensor& g, GradInputs& dx) {
      Tensor gx = zeros(xs, g.options());
      backend_of(gx).index_add(kview(gx), d, kview(si.get()), kview(g));
      dx[0] = gx;
    });
  return y;
}

Tensor& index_copy_(Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  const char* op = "index_copy_";
  detail::check_defined(op, out);
  detail::check_defined(op, index);
  detail::check_defined(op, src);
  TG_CHECK(!(GradMode::enabled() && (out.requires_grad() || src.requires_grad())),
           "{}: not differentiable; run it under NoGradGuard or on detach()", op);
  TG_CHECK(is_index(index.dtype()) && index.dim() <= 1, "{}: index must be a 1-D int64 or int32 tensor, got {} {}", op,
           index.dtype(), index.shape());
  TG_CHECK(out.dim() > 0, "{}: cannot index a 0-d tensor", op);
  detail::check_same_device(op, out, index);
  detail::check_same_device(op, out, src);
  detail::check_same_dtype(op, out, src);
  const int d = wrap_dim(dim, out.dim(), op);
  const Tensor idx = index.reshape({-1});
  Shape want = out.shape();
  want[d] = idx.numel();
  TG_CHECK(src.shape() == want, "{}: src must be {} (out {} with {} rows at dim {}), got {}", op, want, out.shape(),
           idx.numel(), d, src.shape());
  if (idx.numel() > 0) backend_of(out).index_copy(kview(out), d, kview(idx), kview(src));
  out.storage()->bump_version();
  return out;
}

// weight [V, C], ids [...] (int) → [..., C]
Tensor embedding(const Tensor& weight, const Tensor& ids) {
  detail::check_defined("embedding", weight);
  detail::check_defined("embedding", ids);
  TG_CHECK(weight.dim() == 2, "embedding: weight must be 2-D [vocab, dim], got shape {}", weight.shape());
  TG_CHECK(is_index(ids.dtype()), "embedding: token ids must be int64 or int32, got {} {}", ids.dtype(), ids.shape());
  Shape out = ids.shape();
  out.push_back(weight.shape()[1]);
  try {
    return index_select(weight, 0, ids.reshape({-1})).reshape(out);
  } catch (const Error& e) {  // name the op the caller used (a bad id surfaces from index_select)
    throw Error(fmt::format("embedding (weight {}, ids {}): {}", weight.shape(), ids.shape(), e.what()));
  }
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  detail::check_defined("gather", x);
  detail::check_defined("gather", index);
  TG_CHECK(is_index(index.dtype()), "gather: index must be int64 or int32, got {} {}", index.dtype(), index.shape());
  TG_CHECK(index.dim() == x.dim(), "gather: index {} and input {} must have the same number of dims", index.shape(),
           x.shape());
  detail::check_same_device("gather", x, index);
  if (x.dim() == 0) return gather(x.reshape({1}), 0, index.reshape({1})).reshape({});
  const int d = wrap_dim(dim, x.dim(), "gather");
  for (int k = 0; k < x.dim(); ++k)
    TG_CHECK(k == d || index.shape()[k] <= x.shape()[k],
             "gather: index {} is larger than input {} in dim {} (only dim {} may differ)", index.shape(), x.shape(),
             k, d);
  Tensor y = empty(index.shape(), x.options());
  backend_of(x).gather(kview(y), kview(x), d, kview(index));
  if (needs_grad(x))
    record("gather", {&x}, y, [xs = x.shape(), d, si = SavedTensor(index)](const Tensor& g, GradInputs& dx) {
      Tensor gx = zeros(xs, g.options());
      backend_of(gx).scatter_add(kview(gx), d, kview(si.get()), kview(g));
      dx[0] = gx;
    });
  return y;
}

}  // namespace tapegrad
