// tensor.h — Tensor: a handle to an n-d array (shape, strides, offset over shared Storage)
// that can record on the autograd tape.
//
//   Tensor x = randn({3, 4}, Options().dtype(kFloat64).requires_grad(true));
//   Tensor y = (x * x).sum();
//   y.backward();            // x.grad() == 2x
//
// Copying a Tensor copies the handle (like libtorch): both refer to the same TensorImpl.
// Views (transpose, slice, expand, …) make a new TensorImpl over the same Storage.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autograd/storage.h"
#include "kernels/bfloat16.h"
#include "kernels/dtype.h"
#include "kernels/shape.h"

namespace tapegrad {

inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat64 = DType::Float64;
inline constexpr DType kBFloat16 = DType::BFloat16;
inline constexpr DType kInt32 = DType::Int32;
inline constexpr DType kInt64 = DType::Int64;
inline constexpr DType kBool = DType::Bool;
inline const Device kCPU = Device::cpu();

// Creation options, libtorch style: Options().dtype(kFloat64).requires_grad(true).
struct Options {
  Options() = default;
  Options(DType t) : dtype_(t) {}  // NOLINT: zeros({2}, kFloat64) reads well
  Options& dtype(DType t) { dtype_ = t; return *this; }
  Options& device(Device d) { device_ = d; return *this; }
  Options& requires_grad(bool r = true) { requires_grad_ = r; return *this; }
  DType dtype_ = kFloat32;
  Device device_ = Device::cpu();
  bool requires_grad_ = false;
};

class Node;
class Tensor;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;  // in elements
  int64_t offset = 0;  // in elements
  DType dtype = kFloat32;
  bool requires_grad = false;
  std::shared_ptr<Node> grad_fn;      // the tape entry that produced this tensor (null for a leaf)
  std::shared_ptr<TensorImpl> grad;   // accumulated gradient (leaves)
  std::string name;                   // optional, shown by the tape printer and DOT export
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  const std::shared_ptr<TensorImpl>& impl() const { return impl_; }

  // ---- metadata ----
  const Shape& shape() const { return impl_->shape; }
  const Shape& strides() const { return impl_->strides; }
  int64_t offset() const { return impl_->offset; }
  int dim() const { return impl_->shape.size(); }
  int64_t size(int64_t dim) const;
  int64_t numel() const { return impl_->shape.numel(); }
  DType dtype() const { return impl_->dtype; }
  Device device() const { return impl_->storage->device(); }
  // This tensor's dtype and device (requires_grad false): zeros({n}, x.options()) is a new tensor
  // of the same kind as x.
  Options options() const { return Options(dtype()).device(device()); }
  bool is_contiguous() const;
  const std::shared_ptr<Storage>& storage() const { return impl_->storage; }
  // Pointer to the first element (host memory on CPU).
  void* data_ptr() const;
  template <class T>
  T* data() const { return static_cast<T*>(data_ptr()); }

  // ---- values ----
  // The single value of a one-element tensor, converted to T.
  template <class T = double>
  T item() const { return static_cast<T>(item_double()); }
  // All values in row-major order, converted to T (float, double, int32_t, int64_t, uint8_t/bool).
  template <class T>
  std::vector<T> to_vector() const;
  std::string str() const;  // readable printing, as fmt::format("{}", t)

  // ---- autograd ----
  bool requires_grad() const { return impl_->requires_grad; }
  // Marks a leaf as a parameter to differentiate (floating dtypes only).
  Tensor& requires_grad_(bool on = true);
  bool is_leaf() const { return impl_->grad_fn == nullptr; }
  const std::shared_ptr<Node>& grad_fn() const { return impl_->grad_fn; }
  Tensor grad() const { return Tensor(impl_->grad); }
  void set_grad(const Tensor& g);
  // Clears the accumulated gradient (it becomes undefined, like PyTorch's set_to_none).
  void zero_grad() { impl_->grad.reset(); }
  // Replays the tape in reverse from this tensor. `grad` defaults to 1 for a scalar.
  void backward(const Tensor& grad = Tensor(), bool retain_graph = false) const;
  // Same storage, no history: never records, never requires grad.
  Tensor detach() const;
  const std::string& name() const { return impl_->name; }
  Tensor& set_name(std::string name) { impl_->name = std::move(name); return *this; }

  // ---- conversions ----
  Tensor to(DType dtype) const;
  Tensor to(Device device) const;
  Tensor clone() const;
  Tensor contiguous() const;

  // ---- views and shape (see autograd/ops.h for the free-function forms) ----
  Tensor view(const Shape& shape) const;
  Tensor reshape(const Shape& shape) const;
  Tensor flatten(int64_t start = 0, int64_t end = -1) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const;  // transpose of a 2-D tensor
  Tensor permute(const std::vector<int64_t>& dims) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor expand(const Shape& shape) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze(int64_t dim) const;
  Tensor squeeze() const;

  // ---- math (same as the free functions) ----
  Tensor sum() const;
  Tensor sum(const std::vector<int64_t>& dims, bool keepdim = false) const;
  Tensor mean() const;
  Tensor mean(const std::vector<int64_t>& dims, bool keepdim = false) const;
  Tensor max() const;
  Tensor max(int64_t dim, bool keepdim = false) const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor abs() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor pow(double exponent) const;
  Tensor matmul(const Tensor& other) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;

  // ---- in place (never recorded; an error on a tensor that requires grad while grad mode is on) ----
  Tensor& add_(const Tensor& other, double alpha = 1.0);
  Tensor& sub_(const Tensor& other) { return add_(other, -1.0); }
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(double value);
  Tensor& add_(double value);
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }
  Tensor& copy_(const Tensor& src);  // broadcasts src to this shape, converts its dtype

 private:
  double item_double() const;
  std::shared_ptr<TensorImpl> impl_;
};

// A new tensor over fresh storage; contents uninitialized.
Tensor empty(const Shape& shape, Options options = {});
// A new contiguous tensor of x's shape, dtype and device; contents uninitialized.
Tensor empty_like(const Tensor& x);
// A view of `base`'s storage with the given geometry (no autograd record; ops use this).
Tensor make_view(const Tensor& base, const Shape& shape, const Shape& strides, int64_t offset);

}  // namespace tapegrad

template <>
struct fmt::formatter<tapegrad::Tensor> : fmt::formatter<std::string> {
  auto format(const tapegrad::Tensor& t, format_context& ctx) const {
    return fmt::formatter<std::string>::format(t.str(), ctx);
  }
};
