// join.cpp — cat (primitive) and stack (composition: unsqueeze each, then cat).
//   y = cat(x₀, x₁, …; dim)    dxᵢ = g.narrow(dim, offsetᵢ, sizeᵢ)
#include "autograd/ops/op_util.h"

namespace tapegrad {

using detail::backend_of;
using detail::kview;

Tensor cat(const std::vector<Tensor>& xs, int64_t dim) {
  TG_CHECK(!xs.empty(), "cat: expected at least one tensor");
  for (const Tensor& t : xs) detail::check_defined("cat", t);
  const Tensor& first = xs[0];
  TG_CHECK(first.dim() > 0, "cat: cannot concatenate 0-d tensors; use stack()");
  const int d = wrap_dim(dim, first.dim(), "cat");
  Shape out = first.shape();
  out[d] = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& t = xs[i];
    detail::check_same_device("cat", first, t);
    detail::check_same_dtype("cat", first, t);
    bool same = t.dim() == first.dim();
    for (int k = 0; same && k < t.dim(); ++k) same = k == d || t.shape()[k] == first.shape()[k];
    TG_CHECK(same, "cat: tensor {} has shape {}, which does not match {} outside dim {}", i, t.shape(), first.shape(),
             d);
    out[d] += t.shape()[d];
  }
  Tensor y = empty(out, first.options());
  std::vector<int64_t> sizes;
  int64_t at = 0;
  for (const Tensor& t : xs) {
    Tensor part = slice(y, d, at, at + t.shape()[d]);
    backend_of(t).copy(kview(part), kview(t));
    sizes.push_back(t.shape()[d]);
    at += t.shape()[d];
  }
  bool any = false;
  for (const Tensor& t : xs) any = any || needs_grad(t);
  if (any)
    record("cat", xs, y, [d, sizes](const Tensor& g, GradInputs& dx) {
      int64_t off = 0;
      for (size_t i = 0; i < sizes.size(); ++i) {
        if (dx.needs(i)) dx[i] = g.narrow(d, off, sizes[i]);
        off += sizes[i];
      }
    });
  return y;
}

Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
  TG_CHECK(!xs.empty(), "stack: expected at least one tensor");
  for (const Tensor& t : xs) detail::check_defined("stack", t);
  const int d = wrap_dim(dim, xs[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  parts.reserve(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    TG_CHECK(xs[i].shape() == xs[0].shape(), "stack: tensor {} has shape {}, expected {} like tensor 0", i,
             xs[i].shape(), xs[0].shape());
    parts.push_back(xs[i].unsqueeze(d));
  }
  return cat(parts, d);
}

}  // namespace tapegrad
