// shape.cpp — shape helpers: printing, contiguous strides, NumPy broadcasting rules.
#include "kernels/shape.h"

namespace tapegrad {

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < n_; ++i) {
    if (i) s += ", ";
    s += std::to_string(d_[i]);
  }
  return s + "]";
}

Shape contiguous_strides(const Shape& shape) {
  Shape st;
  st.resize(shape.size());
  int64_t acc = 1;
  for (int i = shape.size() - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= shape[i] > 0 ? shape[i] : 1;
  }
  return st;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const int n = a.size() > b.size() ? a.size() : b.size();
  Shape out;
  out.resize(n);
  for (int i = 0; i < n; ++i) {
    const int ia = i - (n - a.size()), ib = i - (n - b.size());
    const int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    TG_CHECK(da == db || da == 1 || db == 1, "{}: shapes {} and {} do not broadcast (dim {}: {} vs {})", op,
             a, b, i, da, db);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape broadcast_strides(const Shape& from, const Shape& strides, const Shape& to) {
  Shape st;
  st.resize(to.size());
  const int lead = to.size() - from.size();
  for (int i = 0; i < to.size(); ++i) {
    const int j = i - lead;
    st[i] = (j < 0 || (from[j] == 1 && to[i] != 1)) ? 0 : strides[j];
  }
  return st;
}

int wrap_dim(int64_t dim, int ndim, const char* op) {
  const int64_t n = ndim == 0 ? 1 : ndim;  // a 0-d tensor accepts dim 0 / -1, like PyTorch
  TG_CHECK(dim >= -n && dim < n, "{}: dim {} is out of range for a {}-d tensor", op, dim, ndim);
  return static_cast<int>(dim < 0 ? dim + n : dim);
}

}  // namespace tapegrad
