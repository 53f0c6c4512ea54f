// tensor.cpp — Tensor basics: metadata, values, autograd flags, conversions, in-place ops.
#include "autograd/ops_from_table.h"
#include "autograd/tensor.h"

#include <cstring>

#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/ops/op_util.h"
#include "autograd/pool.h"
#include "kernels/binary_op.h"
#include "kernels/unary_op.h"

namespace tapegrad {

using detail::kview;

Tensor empty(const Shape& shape, Options options) {
  for (int64_t d : shape) TG_CHECK(d >= 0, "empty: negative dimension in shape {}", shape);
  auto impl = detail::make_pooled<TensorImpl>();
  impl->storage = detail::make_pooled<Storage>(static_cast<size_t>(shape.numel()) * dtype_size(options.dtype_),
                                               options.device_);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = options.dtype_;
  Tensor t(std::move(impl));
  if (options.requires_grad_) t.requires_grad_(true);
  return t;
}

Tensor empty_like(const Tensor& x) {
  TG_CHECK(x.defined(), "empty_like: undefined tensor");
  return empty(x.shape(), x.options());
}

Tensor make_view(const Tensor& base, const Shape& shape, const Shape& strides, int64_t offset) {
  auto impl = detail::make_pooled<TensorImpl>();
  impl->storage = base.storage();
  impl->shape = shape;
  impl->strides = strides;
  impl->offset = offset;
  impl->dtype = base.dtype();
  return Tensor(std::move(impl));
}

int64_t Tensor::size(int64_t dim) const { return shape()[wrap_dim(dim, this->dim(), "size")]; }

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (int d = dim() - 1; d >= 0; --d) {
    if (shape()[d] == 1) continue;
    if (strides()[d] != expected) return false;
    expected *= shape()[d];
  }
  return true;
}

void* Tensor::data_ptr() const {
  return static_cast<char*>(impl_->storage->data()) + impl_->offset * static_cast<int64_t>(dtype_size(dtype()));
}

double Tensor::item_double() const {
  TG_CHECK(defined(), "item: the tensor is undefined");
  TG_CHECK(numel() == 1, "item: a tensor of shape {} has {} elements, not 1", shape(), numel());
  return to_vector<double>()[0];
}

template <class T>
std::vector<T> Tensor::to_vector() const {
  TG_CHECK(defined(), "to_vector: the tensor is undefined");
  constexpr DType want = std::is_same_v<T, float>     ? kFloat32
                         : std::is_same_v<T, double>  ? kFloat64
                         : std::is_same_v<T, int32_t> ? kInt32
                         : std::is_same_v<T, int64_t> ? kInt64
                                                      : kBool;
  std::vector<T> out(static_cast<size_t>(numel()));
  if (out.empty()) return out;
  NoGradGuard no_grad;
  Tensor src = *this;
  if (dtype() != want || !is_contiguous()) {
    Tensor tmp = empty(shape(), Options(want).device(device()));
    detail::backend_of(tmp).copy(kview(tmp), kview(*this));
    src = tmp;
  }
  detail::backend_of(src).copy_to_host(out.data(), src.data_ptr(), out.size() * sizeof(T));
  return out;
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<uint8_t> Tensor::to_vector<uint8_t>() const;

Tensor& Tensor::requires_grad_(bool on) {
  TG_CHECK(defined(), "requires_grad_: the tensor is undefined");
  TG_CHECK(!on || is_floating(dtype()), "requires_grad_: only floating-point tensors (float32, float64, bfloat16) can require grad, got {}",
           dtype());
  TG_CHECK(is_leaf() || on,
           "requires_grad_: cannot turn off requires_grad of a non-leaf tensor (shape {}); use detach()", shape());
  impl_->requires_grad = on;
  return *this;
}

void Tensor::set_grad(const Tensor& g) {
  if (!g.defined()) {
    impl_->grad.reset();
    return;
  }
  TG_CHECK(g.shape() == shape() && g.dtype() == dtype() && g.device() == device(),
           "set_grad: gradient {} {} on {} does not match tensor {} {} on {}", g.shape(), g.dtype(), g.device(),
           shape(), dtype(), device());
  impl_->grad = g.impl();
}

Tensor Tensor::detach() const {
  Tensor t = make_view(*this, shape(), strides(), offset());
  t.impl()->name = impl_->name;
  return t;
}

// ---- conversions ----
Tensor Tensor::to(DType t) const { return to_dtype(*this, t); }
Tensor Tensor::to(Device d) const {
  if (d == device()) return *this;
  NoGradGuard no_grad;
  Tensor src = contiguous();
  Tensor out = empty(shape(), options().device(d));
  const size_t bytes = static_cast<size_t>(numel()) * dtype_size(dtype());
  if (device().type == DeviceType::CPU) {
    detail::backend_of(out).copy_from_host(out.data_ptr(), src.data_ptr(), bytes);
  } else {
    TG_CHECK(d.type == DeviceType::CPU, "to: copies between {} and {} go through the CPU", device(), d);
    detail::backend_of(src).copy_to_host(out.data_ptr(), src.data_ptr(), bytes);
  }
  return out;
}
Tensor Tensor::clone() const { return tapegrad::clone(*this); }
Tensor Tensor::contiguous() const { return tapegrad::contiguous(*this); }

// ---- in place ----
namespace {
void check_inplace(const char* op, const Tensor& t) {
  TG_CHECK(t.defined(), "{}: the tensor is undefined", op);
  TG_CHECK(!(GradMode::enabled() && t.requires_grad()),
           "{}: in-place operation on a tensor of shape {} that requires grad; run it under NoGradGuard or on "
           "detach()",
           op, t.shape());
}
// `src` as an input view broadcast to dst's shape; broadcasting must not grow dst.
kernels::TensorView inplace_operand(const char* op, const Tensor& dst, const Tensor& src) {
  detail::check_same_device(op, dst, src);
  const Shape out = broadcast_shapes(dst.shape(), src.shape(), op);
  TG_CHECK(out == dst.shape(), "{}: cannot broadcast {} into the in-place target {}", op, src.shape(), dst.shape());
  return kview(src, dst.shape());
}
}  // namespace

Tensor& Tensor::add_(const Tensor& other, double alpha) {
  check_inplace("add_", *this);
  detail::check_same_dtype("add_", *this, other);
  auto src = inplace_operand("add_", *this, other);
  if (alpha == 1.0) {
    detail::backend_of(*this).binary(kernels::BinaryOp::Add, kview(*this), kview(*this), src);
  } else {
    NoGradGuard no_grad;
    Tensor scaled = mul(other, alpha);
    detail::backend_of(*this).binary(kernels::BinaryOp::Add, kview(*this), kview(*this),
                                     kview(scaled, shape()));
  }
  storage()->bump_version();
  return *this;
}
Tensor& Tensor::mul_(const Tensor& other) {
  check_inplace("mul_", *this);
  detail::check_same_dtype("mul_", *this, other);
  auto src = inplace_operand("mul_", *this, other);
  detail::backend_of(*this).binary(kernels::BinaryOp::Mul, kview(*this), kview(*this), src);
  storage()->bump_version();
  return *this;
}
Tensor& Tensor::mul_(double value) {
  check_inplace("mul_", *this);
  detail::check_floating("mul_", *this);
  detail::backend_of(*this).unary(kernels::UnaryOp::MulScalar, kview(*this), kview(*this), value);
  storage()->bump_version();
  return *this;
}
Tensor& Tensor::add_(double value) {
  check_inplace("add_", *this);
  detail::check_floating("add_", *this);
  detail::backend_of(*this).unary(kernels::UnaryOp::AddScalar, kview(*this), kview(*this), value);
  storage()->bump_version();
  return *this;
}
Tensor& Tensor::fill_(double value) {
  check_inplace("fill_", *this);
  detail::backend_of(*this).fill(kview(*this), value);
  storage()->bump_version();
  return *this;
}
Tensor& Tensor::copy_(const Tensor& src) {
  check_inplace("copy_", *this);
  TG_CHECK(src.defined(), "copy_: the source tensor is undefined");
  // From another device: transfer first (e.g. loading a CPU state dict into a model on the GPU).
  const Tensor here = src.device() == device() ? src : src.detach().to(device());
  auto s = inplace_operand("copy_", *this, here);
  detail::backend_of(*this).copy(kview(*this), s);
  storage()->bump_version();
  return *this;
}

// ---- method forms of the free functions ----
Tensor Tensor::view(const Shape& s) const { return tapegrad::view(*this, s); }
Tensor Tensor::reshape(const Shape& s) const { return tapegrad::reshape(*this, s); }
Tensor Tensor::flatten(int64_t start, int64_t end) const {
  if (dim() == 0) return reshape({1});
  const int s = wrap_dim(start, dim(), "flatten"), e = wrap_dim(end, dim(), "flatten");
  TG_CHECK(s <= e, "flatten: start dim {} is after end dim {}", start, end);
  Shape out;
  for (int d = 0; d < s; ++d) out.push_back(shape()[d]);
  int64_t merged = 1;
  for (int d = s; d <= e; ++d) merged *= shape()[d];
  out.push_back(merged);
  for (int d = e + 1; d < dim(); ++d) out.push_back(shape()[d]);
  return reshape(out);
}
Tensor Tensor::transpose(int64_t d0, int64_t d1) const { return tapegrad::transpose(*this, d0, d1); }
Tensor Tensor::t() const {
  TG_CHECK(dim() == 2, "t: expected a 2-D tensor, got shape {}", shape());
  return tapegrad::transpose(*this, 0, 1);
}
Tensor Tensor::permute(const std::vector<int64_t>& dims) const { return tapegrad::permute(*this, dims); }
Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  return tapegrad::slice(*this, d, start, end, step);
}
Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const { return tapegrad::narrow(*this, d, start, length); }
Tensor Tensor::select(int64_t d, int64_t index) const { return tapegrad::select(*this, d, index); }
Tensor Tensor::expand(const Shape& s) const { return tapegrad::expand(*this, s); }
Tensor Tensor::unsqueeze(int64_t d) const { return tapegrad::unsqueeze(*this, d); }
Tensor Tensor::squeeze(int64_t d) const { return tapegrad::squeeze(*this, d); }
Tensor Tensor::squeeze() const { return tapegrad::squeeze(*this); }
Tensor Tensor::sum() const { return tapegrad::sum(*this); }
Tensor Tensor::sum(const std::vector<int64_t>& dims, bool keepdim) const { return tapegrad::sum(*this, dims, keepdim); }
Tensor Tensor::mean() const { return tapegrad::mean(*this); }
Tensor Tensor::mean(const std::vector<int64_t>& dims, bool keepdim) const {
  return tapegrad::mean(*this, dims, keepdim);
}
Tensor Tensor::max() const { return tapegrad::max(*this); }
Tensor Tensor::max(int64_t d, bool keepdim) const { return tapegrad::max(*this, d, keepdim); }
Tensor Tensor::exp() const { return tapegrad::exp(*this); }
Tensor Tensor::log() const { return tapegrad::log(*this); }
Tensor Tensor::sqrt() const { return tapegrad::sqrt(*this); }
Tensor Tensor::rsqrt() const { return tapegrad::rsqrt(*this); }
Tensor Tensor::abs() const { return tapegrad::abs(*this); }
Tensor Tensor::tanh() const { return tapegrad::tanh(*this); }
Tensor Tensor::sigmoid() const { return tapegrad::sigmoid(*this); }
Tensor Tensor::relu() const { return tapegrad::relu(*this); }
Tensor Tensor::pow(double e) const { return tapegrad::pow(*this, e); }
Tensor Tensor::matmul(const Tensor& o) const { return tapegrad::matmul(*this, o); }
Tensor Tensor::softmax(int64_t d) const { return tapegrad::softmax(*this, d); }
Tensor Tensor::log_softmax(int64_t d) const { return tapegrad::log_softmax(*this, d); }

void set_num_threads(int n) { kernels::set_num_threads(n); }
int num_threads() { return kernels::num_threads(); }

}  // namespace tapegrad
