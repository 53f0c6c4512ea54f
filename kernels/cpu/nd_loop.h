// nd_loop.h — NdLoop<N>: walks N operands (byte pointers + element strides) over one shape.
//
// Dims of size 1 are dropped and adjacent dims that are contiguous in every operand are merged,
// so the common cases collapse to one flat loop: all-contiguous (the compiler vectorizes the
// inner loop), a broadcast scalar (stride 0), a transposed view. run(begin, end, f) calls
//   f(char* ptr[N], int64_t n, const int64_t byte_stride[N])
// once per run of the innermost dim that overlaps the linear range [begin, end), so a caller
// can split the range across threads.
#pragma once
#include <array>
#include <cstdint>

#include "kernels/backend.h"

namespace tapegrad::kernels::cpu {

template <int N>
class NdLoop {
 public:
  // shape: the common iteration shape; ops[k]: base pointer, element strides, element size.
  struct Operand {
    void* data;
    const Shape* strides;
    int64_t elem_size;
  };
  NdLoop(const Shape& shape, const Operand (&ops)[N]) {
    numel_ = shape.numel();
    for (int k = 0; k < N; ++k) base_[k] = static_cast<char*>(ops[k].data);
    ndim_ = 0;
    for (int d = 0; d < shape.size(); ++d) {
      if (shape[d] == 1) continue;
      bool merge = ndim_ > 0;
      for (int k = 0; k < N && merge; ++k)
        merge = stride_[k][ndim_ - 1] == (*ops[k].strides)[d] * ops[k].elem_size * shape[d];
      if (merge) {
        shape_[ndim_ - 1] *= shape[d];
        for (int k = 0; k < N; ++k) stride_[k][ndim_ - 1] = (*ops[k].strides)[d] * ops[k].elem_size;
      } else {
        shape_[ndim_] = shape[d];
        for (int k = 0; k < N; ++k) stride_[k][ndim_] = (*ops[k].strides)[d] * ops[k].elem_size;
        ++ndim_;
      }
    }
    if (ndim_ == 0) {  // a single element
      shape_[0] = 1;
      for (int k = 0; k < N; ++k) stride_[k][0] = 0;
      ndim_ = 1;
    }
  }
  int64_t numel() const { return numel_; }

  template <class F>
  void run(int64_t begin, int64_t end, F&& f) const {
    if (begin >= end) return;
    const int inner = ndim_ - 1;
    const int64_t n_inner = shape_[inner];
    int64_t idx[kMaxDims];
    int64_t outer = begin / n_inner, pos = begin % n_inner;
    for (int d = inner - 1; d >= 0; --d) {
      idx[d] = outer % shape_[d];
      outer /= shape_[d];
    }
    std::array<char*, N> p;
    std::array<int64_t, N> s;
    for (int k = 0; k < N; ++k) {
      int64_t off = pos * stride_[k][inner];
      for (int d = 0; d < inner; ++d) off += idx[d] * stride_[k][d];
      p[k] = base_[k] + off;
      s[k] = stride_[k][inner];
    }
    int64_t done = begin;
    while (done < end) {
      const int64_t n = std::min(n_inner - pos, end - done);
      f(p.data(), n, s.data());
      done += n;
      if (done >= end) break;
      // advance to the start of the next inner run
      for (int k = 0; k < N; ++k) p[k] -= pos * stride_[k][inner];
      pos = 0;
      for (int d = inner - 1; d >= 0; --d) {
        if (++idx[d] < shape_[d]) {
          for (int k = 0; k < N; ++k) p[k] += stride_[k][d];
          break;
        }
        idx[d] = 0;
        for (int k = 0; k < N; ++k) p[k] -= (shape_[d] - 1) * stride_[k][d];
      }
    }
  }

 private:
  int ndim_ = 0;
  int64_t numel_ = 0;
  int64_t shape_[kMaxDims];
  int64_t stride_[N][kMaxDims];
  std::array<char*, N> base_;
};

// NdLoop over TensorViews that all have (or are broadcast to) `shape`.
template <int N>
NdLoop<N> make_loop(const Shape& shape, const std::array<const TensorView*, N>& views) {
  typename NdLoop<N>::Operand ops[N];
  for (int k = 0; k < N; ++k)
    ops[k] = {views[k]->data, &views[k]->strides, static_cast<int64_t>(dtype_size(views[k]->dtype))};
  return NdLoop<N>(shape, ops);
}

}  // namespace tapegrad::kernels::cpu
