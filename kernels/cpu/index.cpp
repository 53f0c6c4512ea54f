// index.cpp — CPU indexing kernels: index_select / index_add (embedding lookup and its
// scatter-add backward), index_copy (rows written at indexed positions: the KV cache's decode-step
// write) and gather / scatter_add along a dim (torch.gather semantics).
// Every index is checked before anything is written, so a bad index throws and leaves the
// output untouched. The scatter kernels run serially: repeated indices must accumulate.
#include <cstring>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/nd_loop.h"
#include "kernels/cpu/parallel.h"

namespace tapegrad::kernels::cpu {
namespace {

void check_indices(const TensorView& index, int64_t limit, const char* op, int dim) {
  TG_CHECK(is_index(index.dtype), "{}: index dtype must be int64 or int32, got {}", op, index.dtype);
  auto loop = make_loop<1>(index.shape, {&index});
  int64_t pos = 0;
  loop.run(0, loop.numel(), [&](char** p, int64_t n, const int64_t* s) {
    for (int64_t i = 0; i < n; ++i, ++pos) {
      const int64_t v = read_index(p[0], index.dtype, i * s[0]);
      TG_CHECK(v >= 0 && v < limit, "{}: index {} at position {} is out of range for dim {} of size {}", op, v, pos,
               dim, limit);
    }
  });
}

// A view of `v` narrowed to one position `at` along `dim`.
TensorView narrow_one(const TensorView& v, int dim, int64_t at) {
  TensorView r = v;
  r.data = static_cast<char*>(v.data) + at * v.strides[dim] * int64_t(dtype_size(v.dtype));
  r.shape[dim] = 1;
  return r;
}

// dst = src (same shape and dtype), byte-wise per element.
void copy_slab(const TensorView& dst, const TensorView& src) {
  const int64_t es = dtype_size(dst.dtype);
  auto loop = make_loop<2>(dst.shape, {&dst, &src});
  loop.run(0, loop.numel(), [&](char** p, int64_t n, const int64_t* s) {
    if (s[0] == es && s[1] == es) std::memcpy(p[0], p[1], n * es);
    else
      for (int64_t i = 0; i < n; ++i) std::memcpy(p[0] + i * s[0], p[1] + i * s[1], es);
  });
}

}  // namespace

void CpuBackend::index_select(const TensorView& out, const TensorView& in, int dim, const TensorView& index) {
  check_indices(index, in.shape[dim], "index_select", dim);
  const int64_t n = index.numel(), is = index.strides.size() ? index.strides[0] : 1;
  const int64_t esz = dtype_size(index.dtype);
  const int64_t slab = in.numel() / std::max<int64_t>(1, in.shape[dim]);
  parallel_for(n, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, slab)), [&](int64_t b, int64_t e) {
    for (int64_t j = b; j < e; ++j) {
      const int64_t src = read_index(index.data, index.dtype, j * is * esz);
      copy_slab(narrow_one(out, dim, j), narrow_one(in, dim, src));
    }
  });
}

void CpuBackend::index_add(const TensorView& out, int dim, const TensorView& index, const TensorView& src) {
  check_indices(index, out.shape[dim], "index_add", dim);
  const int64_t n = index.numel(), is = index.strides.size() ? index.strides[0] : 1;
  const int64_t esz = dtype_size(index.dtype);
  dispatch_all(out.dtype, [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, bool>) {
      throw Error("index_add: dtype bool is not supported");
    } else {
      for (int64_t j = 0; j < n; ++j) {
        const int64_t dst = read_index(index.data, index.dtype, j * is * esz);
        TensorView o = narrow_one(out, dim, dst), s = narrow_one(src, dim, j);
        auto loop = make_loop<2>(o.shape, {&o, &s});
        loop.run(0, loop.numel(), [&](char** p, int64_t m, const int64_t* st) {
          for (int64_t i = 0; i < m; ++i)
            *reinterpret_cast<T*>(p[0] + i * st[0]) += *reinterpret_cast<const T*>(p[1] + i * st[1]);
        });
      }
    }
  });
}

void CpuBackend::index_copy(const TensorView& out, int dim, const TensorView& index, const TensorView& src) {
  check_indices(index, out.shape[dim], "index_copy", dim);
  const int64_t n = index.numel(), is = index.strides.size() ? index.strides[0] : 1;
  const int64_t esz = dtype_size(index.dtype);
  // In index order, so a repeated index keeps the last row written (the GPU kernel reproduces this).
  for (int64_t j = 0; j < n; ++j) {
    const int64_t dst = read_index(index.data, index.dtype, j * is * esz);
    copy_slab(narrow_one(out, dim, dst), narrow_one(src, dim, j));
  }
}

void CpuBackend::gather(const TensorView& out, const TensorView& in, int dim, const TensorView& index) {
  check_indices(index, in.shape[dim], "gather", dim);
  TensorView row = in;  // `in` with stride 0 along dim: the index picks the position
  row.strides[dim] = 0;
  row.shape = out.shape;
  const int64_t es = dtype_size(in.dtype), step = in.strides[dim] * es;
  auto loop = make_loop<3>(out.shape, {&out, &index, &row});
  parallel_for(loop.numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
    loop.run(b, e, [&](char** p, int64_t n, const int64_t* s) {
      for (int64_t i = 0; i < n; ++i) {
        const int64_t k = read_index(p[1], index.dtype, i * s[1]);
        std::memcpy(p[0] + i * s[0], p[2] + i * s[2] + k * step, es);
      }
    });
  });
}

void CpuBackend::scatter_add(const TensorView& out, int dim, const TensorView& index, const TensorView& src) {
  check_indices(index, out.shape[dim], "scatter_add", dim);
  TensorView row = out;
  row.strides[dim] = 0;
  row.shape = index.shape;
  dispatch_all(out.dtype, [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, bool>) {
      throw Error("scatter_add: dtype bool is not supported");
    } else {
      const int64_t step = out.strides[dim] * int64_t(sizeof(T));
      auto loop = make_loop<3>(index.shape, {&row, &index, &src});
      loop.run(0, loop.numel(), [&](char** p, int64_t n, const int64_t* s) {
        for (int64_t i = 0; i < n; ++i) {
          const int64_t k = read_index(p[1], index.dtype, i * s[1]);
          *reinterpret_cast<T*>(p[0] + i * s[0] + k * step) += *reinterpret_cast<const T*>(p[2] + i * s[2]);
        }
      });
    }
  });
}

}  // namespace tapegrad::kernels::cpu
