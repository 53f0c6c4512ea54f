// view.cpp — shape ops. Views share the input's storage (new shape/strides/offset, no copy);
// each backward maps the output's gradient back to the input's geometry.
//   view/reshape: dx = g.reshape(x.shape)      transpose: dx = gᵀ (same dims)
//   permute: dx = g permuted by the inverse    slice: dx = zeros(x.shape) with g written into the slice
//   expand: dx = g (the engine sums the expanded dims)   unsqueeze/squeeze: the inverse view
//   contiguous/clone: dx = g                   to_dtype: dx = g converted back (float32 → bf16: gathered in
//                                                float32, and so is its transpose: GradInputs::gathers_in_float32)
#include <algorithm>
#include <numeric>

#include "autograd/ops/op_util.h"

namespace tapegrad {

using detail::backend_of;
using detail::kview;

namespace {

// Strides that view (shape, strides) as new_shape without copying, or false when impossible:
// each run of input dims that is contiguous in memory may be re-split freely.
bool view_strides(const Shape& shape, const Shape& strides, const Shape& new_shape, Shape& out) {
  out.resize(new_shape.size());
  if (shape.numel() == 0 || shape.size() == 0) {
    out = contiguous_strides(new_shape);
    return true;
  }
  int view_d = new_shape.size() - 1;
  int64_t chunk_base_stride = strides[shape.size() - 1];
  int64_t tensor_numel = 1, view_numel = 1;
  for (int d = shape.size() - 1; d >= 0; --d) {
    tensor_numel *= shape[d];
    if (d == 0 || (shape[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return false;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  return view_d == -1;
}

// Replaces a single -1 in `shape` so that it holds `numel` elements.
Shape infer_shape(const Shape& shape, int64_t numel, const Shape& from, const char* op) {
  Shape out = shape;
  int infer = -1;
  int64_t known = 1;
  for (int d = 0; d < out.size(); ++d) {
    if (out[d] == -1) {
      TG_CHECK(infer < 0, "{}: only one dimension can be -1 in {}", op, shape);
      infer = d;
    } else {
      TG_CHECK(out[d] >= 0, "{}: invalid dimension {} in {}", op, out[d], shape);
      known *= out[d];
    }
  }
  if (infer >= 0) {
    TG_CHECK(known != 0 && numel % known == 0, "{}: shape {} is invalid for input of shape {} ({} elements)", op,
             shape, from, numel);
    out[infer] = numel / known;
  }
  TG_CHECK(out.numel() == numel, "{}: shape {} is invalid for input of shape {} ({} elements)", op, shape, from,
           numel);
  return out;
}

// A view of x with the given geometry, recorded as "view" (backward: reshape back).
Tensor recorded_view(const Tensor& x, const Shape& shape, const Shape& strides) {
  Tensor y = make_view(x, shape, strides, x.offset());
  if (needs_grad(x))
    record("view", {&x}, y, [xs = x.shape()](const Tensor& g, GradInputs& dx) { dx[0] = g.reshape(xs); });
  return y;
}

Tensor copy_op(const Tensor& x, const char* name) {
  Tensor y = empty_like(x);
  backend_of(x).copy(kview(y), kview(x));
  if (needs_grad(x)) record(name, {&x}, y, [](const Tensor& g, GradInputs& dx) { dx[0] = g; });
  return y;
}

}  // namespace

Tensor view(const Tensor& x, const Shape& shape) {
  detail::check_defined("view", x);
  const Shape target = infer_shape(shape, x.numel(), x.shape(), "view");
  Shape strides;
  TG_CHECK(view_strides(x.shape(), x.strides(), target, strides),
           "view: cannot view a tensor of shape {} with strides {} as {} without a copy; use reshape()", x.shape(),
           x.strides(), target);
  return recorded_view(x, target, strides);
}

// Composition: a view when the layout allows, otherwise contiguous() then view.
Tensor reshape(const Tensor& x, const Shape& shape) {
  detail::check_defined("reshape", x);
  const Shape target = infer_shape(shape, x.numel(), x.shape(), "reshape");
  Shape strides;
  if (target == x.shape() && !needs_grad(x)) return x;
  if (view_strides(x.shape(), x.strides(), target, strides)) return recorded_view(x, target, strides);
  const Tensor c = contiguous(x);
  return recorded_view(c, target, contiguous_strides(target));
}

Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) {
  detail::check_defined("transpose", x);
  if (x.dim() == 0) return x;
  const int a = wrap_dim(d0, x.dim(), "transpose"), b = wrap_dim(d1, x.dim(), "transpose");
  Shape shape = x.shape(), strides = x.strides();
  std::swap(shape[a], shape[b]);
  std::swap(strides[a], strides[b]);
  Tensor y = make_view(x, shape, strides, x.offset());
  if (needs_grad(x)) {
    record("transpose", {&x}, y, [a, b](const Tensor& g, GradInputs& dx) { dx[0] = g.transpose(a, b); });
    // The transpose of a cast weight (nn::Linear's Wᵀ) gathers like the cast: its backward passes float32 on.
    if (x.grad_fn() && x.grad_fn()->gathers_in_float32()) y.grad_fn()->set_gathers_in_float32(true);
  }
  return y;
}

Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) {
  detail::check_defined("permute", x);
  TG_CHECK(static_cast<int>(dims.size()) == x.dim(), "permute: {} dims given for a tensor of shape {}", dims.size(),
           x.shape());
  std::vector<int64_t> inverse(dims.size(), -1);
  Shape shape, strides;
  for (size_t i = 0; i < dims.size(); ++i) {
    const int d = wrap_dim(dims[i], x.dim(), "permute");
    TG_CHECK(inverse[d] < 0, "permute: dim {} appears twice in the permutation", dims[i]);
    inverse[d] = static_cast<int64_t>(i);
    shape.push_back(x.shape()[d]);
    strides.push_back(x.strides()[d]);
  }
  Tensor y = make_view(x, shape, strides, x.offset());
  if (needs_grad(x))
    record("permute", {&x}, y, [inverse](const Tensor& g, GradInputs& dx) { dx[0] = g.permute(inverse); });
  return y;
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  detail::check_defined("slice", x);
  TG_CHECK(x.dim() > 0, "slice: cannot slice a 0-d tensor");
  TG_CHECK(step > 0, "slice: step must be positive, got {}", step);
  const int d = wrap_dim(dim, x.dim(), "slice");
  const int64_t n = x.shape()[d];
  // Python semantics: negative positions count from the end; out-of-range positions clamp.
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape shape = x.shape(), strides = x.strides();
  shape[d] = (end - start + step - 1) / step;
  strides[d] *= step;
  Tensor y = make_view(x, shape, strides, x.offset() + start * x.strides()[d]);
  if (needs_grad(x))
    record("slice", {&x}, y, [xs = x.shape(), d, start, end, step](const Tensor& g, GradInputs& dx) {
      Tensor gx = zeros(xs, g.options());
      Tensor part = slice(gx, d, start, end, step);
      backend_of(gx).copy(kview(part), kview(g));
      dx[0] = gx;
    });
  return y;
}

// Compositions over slice/squeeze, with strict range checks.
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  detail::check_defined("narrow", x);
  TG_CHECK(x.dim() > 0, "narrow: cannot narrow a 0-d tensor");
  const int d = wrap_dim(dim, x.dim(), "narrow");
  const int64_t n = x.shape()[d];
  if (start < 0 && start >= -n) start += n;
  TG_CHECK(start >= 0 && length >= 0 && start + length <= n,
           "narrow: start {} and length {} are out of range for dim {} of size {} (shape {})", start, length, dim, n,
           x.shape());
  return slice(x, d, start, start + length);
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  detail::check_defined("select", x);
  TG_CHECK(x.dim() > 0, "select: cannot select from a 0-d tensor");
  const int d = wrap_dim(dim, x.dim(), "select");
  const int64_t n = x.shape()[d];
  TG_CHECK(index >= -n && index < n, "select: index {} is out of range for dim {} of size {} (shape {})", index, dim,
           n, x.shape());
  if (index < 0) index += n;
  return slice(x, d, index, index + 1).squeeze(d);
}

Tensor expand(const Tensor& x, const Shape& shape) {
  detail::check_defined("expand", x);
  TG_CHECK(shape.size() >= x.dim(), "expand: cannot expand shape {} to fewer dims {}", x.shape(), shape);
  const int lead = shape.size() - x.dim();
  Shape out = shape, strides;
  strides.resize(shape.size());
  for (int i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      TG_CHECK(shape[i] >= 0, "expand: a new leading dim cannot be {} (in {})", shape[i], shape);
      strides[i] = 0;
      continue;
    }
    const int64_t have = x.shape()[i - lead];
    if (shape[i] == -1 || shape[i] == have) {
      out[i] = have;
      strides[i] = x.strides()[i - lead];
    } else {
      TG_CHECK(have == 1, "expand: cannot expand shape {} to {} (dim {} has size {}, not 1)", x.shape(), shape, i, have);
      strides[i] = 0;
    }
  }
  Tensor y = make_view(x, out, strides, x.offset());
  if (needs_grad(x)) record("expand", {&x}, y, [](const Tensor& g, GradInputs& dx) { dx[0] = g; });
  return y;
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  detail::check_defined("unsqueeze", x);
  const int d = wrap_dim(dim, x.dim() + 1, "unsqueeze");
  Shape shape = x.shape(), strides = x.strides();
  const int64_t stride = d < x.dim() ? x.shape()[d] * x.strides()[d] : 1;
  shape.insert(d, 1);
  strides.insert(d, stride);
  Tensor y = make_view(x, shape, strides, x.offset());
  if (needs_grad(x)) record("unsqueeze", {&x}, y, [d](const Tensor& g, GradInputs& dx) { dx[0] = g.squeeze(d); });
  return y;
}

Tensor squeeze(const Tensor& x, int64_t dim) {
  detail::check_defined("squeeze", x);
  if (x.dim() == 0) return x;
  const int d = wrap_dim(dim, x.dim(), "squeeze");
  if (x.shape()[d] != 1) return x;
  Shape shape = x.shape(), strides = x.strides();
  shape.erase(d);
  strides.erase(d);
  Tensor y = make_view(x, shape, strides, x.offset());
  if (needs_grad(x)) record("squeeze", {&x}, y, [d](const Tensor& g, GradInputs& dx) { dx[0] = g.unsqueeze(d); });
  return y;
}

Tensor squeeze(const Tensor& x) {
  detail::check_defined("squeeze", x);
  Shape shape, strides;
  for (int d = 0; d < x.dim(); ++d)
    if (x.shape()[d] != 1) shape.push_back(x.shape()[d]), strides.push_back(x.strides()[d]);
  if (shape.size() == x.dim()) return x;
  Tensor y = make_view(x, shape, strides, x.offset());
  if (needs_grad(x))
    record("squeeze", {&x}, y, [xs = x.shape()](const Tensor& g, GradInputs& dx) { dx[0] = g.reshape(xs); });
  return y;
}

Tensor contiguous(const Tensor& x) {
  detail::check_defined("contiguous", x);
  return x.is_contiguous() ? x : copy_op(x, "contiguous");
}

Tensor clone(const Tensor& x) {
  detail::check_defined("clone", x);
  return copy_op(x, "clone");
}

Tensor to_dtype(const Tensor& x, DType dtype) {
  detail::check_defined("to", x);
  if (x.dtype() == dtype) return x;
  Tensor y = empty(x.shape(), Options(dtype).device(x.device()));
  backend_of(x).copy(kview(y), kview(x));
  if (is_floating(dtype) && needs_grad(x)) {
    record("to_dtype", {&x}, y, [from = x.dtype()](const Tensor& g, GradInputs& dx) { dx[0] = g.to(from); });
    // float32 → bfloat16 (autocast): the backward widens its gradient anyway, so the gradients of several
    // readers are summed in float32 and a reader may hand over float32 (GradInputs::gathers_in_float32).
    if (x.dtype() == kFloat32 && dtype == kBFloat16) y.grad_fn()->set_gathers_in_float32(true);
  }
  return y;
}

}  // namespace tapegrad
