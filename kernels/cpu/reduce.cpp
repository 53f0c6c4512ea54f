// reduce.cpp — CPU reductions: sum / max / min over any set of dims, and max_along (values +
// arg-max indices along one dim, used by max's backward).
//
// Two shapes of work:
//  * inner reduction — the reduced dims include the input's fastest-moving dim (sum over the
//    last dim, or over everything): each output reduces one block with a SIMD reduction;
//    threads split the outputs, or, for a few long blocks, each block is cut into fixed chunks
//    of kElementwiseGrain elements whose partial results combine in chunk order.
//  * outer reduction — the fastest dim is kept (sum over the batch of a [N, C] gradient):
//    walk the input in memory order adding rows into an accumulator row, one per slab of the
//    input (at most kOuterSlabs, fixed by the shape), then add the slabs' rows in order. No
//    strided column walks.
// Every split depends on the shapes only, never on the thread count, so a sum gives the same bits
// on 1 thread and on 64 (tests/test_threads.cpp). Float sums accumulate blocks of 1024 in float
// lanes and the block sums in double; max/min propagate NaN.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/simd_extremum.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/nd_loop.h"
#include "kernels/cpu/parallel.h"

namespace tapegrad::kernels::cpu {
namespace {

// Inner reductions with fewer outputs than this and blocks longer than kElementwiseGrain split each
// block into chunks; outer reductions use at most kOuterSlabs accumulator rows.
constexpr int64_t kFewOutputs = 16;
constexpr int64_t kOuterSlabs = 64;

template <class T, ReduceOp Op>
struct Reducer {
  using Acc = std::conditional_t<Op == ReduceOp::Sum, typename Accum<T>::type, T>;
  static Acc identity() {
    if constexpr (Op == ReduceOp::Sum) return Acc(0);
    else if constexpr (Op == ReduceOp::Max)
      return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
    else
      return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max();
  }
  static Acc combine(Acc a, Acc b) {
    if constexpr (Op == ReduceOp::Sum) return a + b;
    else if constexpr (Op == ReduceOp::Max) return (b > a || b != b) ? b : a;
    else return (b < a || b != b) ? b : a;
  }
  // Reduces n elements starting at p with byte stride s into acc.
  static Acc run(const char* p, int64_t n, int64_t s, Acc acc) {
    if (s == sizeof(T)) {
      const T* x = reinterpret_cast<const T*>(p);
      if constexpr (Op == ReduceOp::Sum && std::is_same_v<T, float>) {
        // blocks of 1024 summed in float SIMD lanes (64 values per lane), block sums in double
        for (int64_t b = 0; b < n; b += 1024) {
          const int64_t e = std::min(n, b + 1024);
          float block = 0;
#pragma omp simd reduction(+ : block)
          for (int64_t i = b; i < e; ++i) block += x[i];
          acc += double(block);
        }
        return acc;
      } else if constexpr (Op == ReduceOp::Sum) {
        Acc sum = 0;
#pragma omp simd reduction(+ : sum)
        for (int64_t i = 0; i < n; ++i) sum += Acc(x[i]);
        return acc + sum;
      } else {
        // NaN detection that vectorizes (a bool OR-reduction does not): Σ x·0 is 0 unless some
        // x is NaN or ±inf; only then look for a real NaN.
        T m = identity(), probe = T(0);
        if constexpr (Op == ReduceOp::Max) {
#pragma omp simd reduction(max : m) reduction(+ : probe)
          for (int64_t i = 0; i < n; ++i) {
            m = x[i] > m ? x[i] : m;
            probe += x[i] * T(0);
          }
          m = fix_simd_max(m, T(identity()), n, [&](int64_t i) { return x[i]; });
        } else {
#pragma omp simd reduction(min : m) reduction(+ : probe)
          for (int64_t i = 0; i < n; ++i) {
            m = x[i] < m ? x[i] : m;
            probe += x[i] * T(0);
          }
          m = fix_simd_min(m, T(identity()), n, [&](int64_t i) { return x[i]; });
        }
        if (probe != probe)
          for (int64_t i = 0; i < n; ++i)
            if (x[i] != x[i]) return x[i];
        return combine(acc, m);
      }
    }
    for (int64_t i = 0; i < n; ++i) acc = combine(acc, Acc(*reinterpret_cast<const T*>(p + i * s)));
    return acc;
  }
};

template <class T, ReduceOp Op>
void reduce_typed(const TensorView& out, const TensorView& in) {
  using R = Reducer<T, Op>;
  using Acc = typename R::Acc;
  const int nd = in.ndim();
  Shape kept_shape, kept_in, kept_out, red_shape, red_in;
  int fastest = -1;
  for (int d = 0; d < nd; ++d) {
    if (in.shape[d] == 1) continue;
    if (fastest < 0 || std::abs(in.strides[d]) < std::abs(in.strides[fastest])) fastest = d;
    if (out.shape[d] == 1) {
      red_shape.push_back(in.shape[d]);
      red_in.push_back(in.strides[d]);
    } else {
      kept_shape.push_back(in.shape[d]);
      kept_in.push_back(in.strides[d]);
      kept_out.push_back(out.strides[d]);
    }
  }
  const int64_t n_out = kept_shape.numel(), n_red = red_shape.numel();
  const bool inner = fastest < 0 || out.shape[fastest] == 1;

  if (inner) {
    // One block per output: reduce over red_shape from the output's base offset.
    auto reduce_block = [&](const char* base, int64_t b, int64_t e, Acc acc) {
      NdLoop<1> shifted(red_shape, {{const_cast<char*>(base), &red_in, sizeof(T)}});
      shifted.run(b, e, [&](char** p, int64_t n, const int64_t* s) { acc = R::run(p[0], n, s[0], acc); });
      return acc;
    };
    NdLoop<2> outs(kept_shape, {{out.data, &kept_out, sizeof(T)}, {in.data, &kept_in, sizeof(T)}});
    if (n_out >= kFewOutputs || n_red <= kElementwiseGrain) {
      const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, n_red));
      parallel_for(n_out, grain, [&](int64_t b, int64_t e) {
        outs.run(b, e, [&](char** p, int64_t n, const int64_t* s) {
          for (int64_t i = 0; i < n; ++i)
            *reinterpret_cast<T*>(p[0] + i * s[0]) = T(reduce_block(p[1] + i * s[1], 0, n_red, R::identity()));
        });
      });
    } else {
      // Few outputs, long blocks: each block in chunks of kElementwiseGrain (fixed by n_red, so
      // the same chunks on any thread count), threads split the chunks, partials combine in order.
      const int64_t chunks = (n_red + kElementwiseGrain - 1) / kElementwiseGrain;
      std::vector<Acc> partial(static_cast<size_t>(chunks));
      outs.run(0, n_out, [&](char** p, int64_t n, const int64_t* s) {
        for (int64_t i = 0; i < n; ++i) {
          const char* base = p[1] + i * s[1];
          parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
            for (int64_t c = b; c < e; ++c)
              partial[c] = reduce_block(base, c * kElementwiseGrain, std::min(n_red, (c + 1) * kElementwiseGrain),
                                        R::identity());
          });
          Acc acc = R::identity();
          for (Acc v : partial) acc = R::combine(acc, v);
          *reinterpret_cast<T*>(p[0] + i * s[0]) = T(acc);
        }
      });
    }
    return;
  }

  // Outer reduction: accumulate rows of the input, in memory order, into per-thread buffers.
  Shape acc_strides_full;  // the accumulator is contiguous over the kept dims, 0 on reduced ones
  {
    Shape kept_contig = contiguous_strides(kept_shape);
    int k = 0;
    for (int d = 0; d < nd; ++d) {
      if (in.shape[d] != 1 && out.shape[d] != 1) acc_strides_full.push_back(kept_contig[k++]);
      else acc_strides_full.push_back(0);
    }
  }
  // Slabs: consecutive ranges of the input in memory order, each with its own accumulator row. Their
  // number depends on the shape only (about one per kElementwiseGrain elements, at most kOuterSlabs,
  // and the rows within 64 MiB), so the sum is the same on any thread count.
  const int64_t total = in.numel();
  // (A slab spans at least 4 accumulator rows, so adding the slabs up costs at most a quarter of the pass.)
  const int64_t rows = total / std::max<int64_t>(1, n_out);
  int64_t slabs = std::clamp<int64_t>(std::min(total / kElementwiseGrain, rows / 4), 1, kOuterSlabs);
  if (slabs * n_out * int64_t(sizeof(Acc)) > (int64_t{64} << 20)) slabs = 1;
  std::vector<Acc> acc(static_cast<size_t>(slabs * n_out), R::identity());
  auto accumulate = [&](int64_t t, int64_t b, int64_t e) {
    NdLoop<2> loop(in.shape, {{acc.data() + t * n_out, &acc_strides_full, sizeof(Acc)}, {in.data, &in.strides, sizeof(T)}});
    loop.run(b, e, [&](char** p, int64_t n, const int64_t* s) {
      if (s[0] == sizeof(Acc) && s[1] == sizeof(T)) {
        Acc* a = reinterpret_cast<Acc*>(p[0]);
        const T* x = reinterpret_cast<const T*>(p[1]);
        for (int64_t i = 0; i < n; ++i) a[i] = R::combine(a[i], Acc(x[i]));
      } else {
        for (int64_t i = 0; i < n; ++i) {
          Acc& a = *reinterpret_cast<Acc*>(p[0] + i * s[0]);
          a = R::combine(a, Acc(*reinterpret_cast<const T*>(p[1] + i * s[1])));
        }
      }
    });
  };
  const int64_t chunk = (total + slabs - 1) / slabs;
  parallel_for(slabs, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) accumulate(t, std::min(total, t * chunk), std::min(total, (t + 1) * chunk));
  });
  NdLoop<1> outs(kept_shape, {{out.data, &kept_out, sizeof(T)}});
  int64_t j = 0;
  outs.run(0, n_out, [&](char** p, int64_t n, const int64_t* s) {
    for (int64_t i = 0; i < n; ++i, ++j) {
      Acc a = acc[j];
      for (int64_t t = 1; t < slabs; ++t) a = R::combine(a, acc[t * n_out + j]);
      *reinterpret_cast<T*>(p[0] + i * s[0]) = T(a);
    }
  });
}

// (max, first index of it) over a contiguous run; NaN beats everything, the first NaN wins.
// Blocked single pass: a SIMD max per block of 1024, a scalar compare per block, and only the
// winning block is rescanned for the index — nearly one streaming read, not a branch per element.
template <class T>
struct MaxArg {
  T value;
  int64_t index;  // -1: empty
};
template <class T>
MaxArg<T> max_arg_contiguous(const T* x, int64_t begin, int64_t end) {
  constexpr int64_t kBlock = 1024;
  MaxArg<T> best{T(0), -1};
  int64_t best_block = -1;
  for (int64_t b = begin; b < end; b += kBlock) {
    const int64_t e = std::min(end, b + kBlock);
    T m = x[b], probe = T(0);  // probe: Σ x·0, NaN iff some x is NaN or ±inf (vectorizes)
#pragma omp simd reduction(max : m) reduction(+ : probe)
    for (int64_t i = b; i < e; ++i) {
      m = x[i] > m ? x[i] : m;
      probe += x[i] * T(0);
    }
    m = fix_simd_max(m, x[b], e - b, [&](int64_t j) { return x[b + j]; });
    if (probe != probe) {  // the first NaN wins outright
      for (int64_t i = b; i < e; ++i)
        if (x[i] != x[i]) return {x[i], i};
    }
    if (best_block < 0 || m > best.value) best = {m, b}, best_block = b;
  }
  if (best_block < 0) return best;
  for (int64_t i = best_block; i < end; ++i)  // m is one of the block's values
    if (x[i] == best.value) return {best.value, i};
  return best;
}
// Combines two (max, index) results of consecutive ranges, earlier range first.
template <class T>
MaxArg<T> combine_max_arg(MaxArg<T> a, MaxArg<T> b) {
  if (a.index < 0) return b;
  if (b.index < 0 || a.value != a.value) return a;
  if (b.value != b.value || b.value > a.value) return b;
  return a;
}

}  // namespace

void CpuBackend::reduce(ReduceOp op, const TensorView& out, const TensorView& in) {
  dispatch_all(in.dtype, [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, bool>) {
      throw Error("reduce: dtype bool is not supported (convert to an integer or float dtype first)");
    } else {
      switch (op) {
        case ReduceOp::Sum: return reduce_typed<T, ReduceOp::Sum>(out, in);
        case ReduceOp::Max: return reduce_typed<T, ReduceOp::Max>(out, in);
        case ReduceOp::Min: return reduce_typed<T, ReduceOp::Min>(out, in);
      }
    }
  });
}

void CpuBackend::max_along(const TensorView& values, const TensorView& indices, const TensorView& in, int dim) {
  // An empty dim has no maximum (the loops below read its first element).
  TG_CHECK(dim >= 0 && dim < in.ndim() && in.shape[dim] > 0, "max: cannot take the maximum along dim {} of shape {}",
           dim, in.shape);
  dispatch_all(in.dtype, [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, bool>) {
      throw Error("max: dtype bool is not supported");
    } else {
      const int64_t len = in.shape[dim];
      const int64_t step = in.strides[dim] * int64_t(sizeof(T));
      auto loop = make_loop<3>(values.shape, {&values, &indices, &in});
      const int threads = omp_get_max_threads();
      if (in.strides[dim] == 1 && len > 0) {
        if (loop.numel() < threads && len > kElementwiseGrain) {
          // few long rows: threads split each row, results combine in order
          loop.run(0, loop.numel(), [&](char** p, int64_t n, const int64_t* s) {
            for (int64_t i = 0; i < n; ++i) {
              const T* x = reinterpret_cast<const T*>(p[2] + i * s[2]);
              std::vector<MaxArg<T>> part(threads, MaxArg<T>{T(0), -1});
              parallel_for(len, kElementwiseGrain,
                           [&](int64_t b, int64_t e) { part[omp_get_thread_num()] = max_arg_contiguous(x, b, e); });
              MaxArg<T> r{T(0), -1};
              for (const auto& q : part) r = combine_max_arg(r, q);
              *reinterpret_cast<T*>(p[0] + i * s[0]) = r.value;
              *reinterpret_cast<int64_t*>(p[1] + i * s[1]) = r.index;
            }
          });
          return;
        }
        const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / len);
        parallel_for(loop.numel(), grain, [&](int64_t b, int64_t e) {
          loop.run(b, e, [&](char** p, int64_t n, const int64_t* s) {
            for (int64_t i = 0; i < n; ++i) {
              const MaxArg<T> r = max_arg_contiguous(reinterpret_cast<const T*>(p[2] + i * s[2]), 0, len);
              *reinterpret_cast<T*>(p[0] + i * s[0]) = r.value;
              *reinterpret_cast<int64_t*>(p[1] + i * s[1]) = r.index;
            }
          });
        });
        return;
      }
      const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, len));
      parallel_for(loop.numel(), grain, [&](int64_t b, int64_t e) {
        loop.run(b, e, [&](char** p, int64_t n, const int64_t* s) {
          for (int64_t i = 0; i < n; ++i) {
            const char* x = p[2] + i * s[2];
            T best = *reinterpret_cast<const T*>(x);
            int64_t arg = 0;
            for (int64_t j = 1; j < len && best == best; ++j) {
              const T v = *reinterpret_cast<const T*>(x + j * step);
              if (v > best || v != v) best = v, arg = j;
            }
            *reinterpret_cast<T*>(p[0] + i * s[0]) = best;
            *reinterpret_cast<int64_t*>(p[1] + i * s[1]) = arg;
          }
        });
      });
    }
  });
}

}  // namespace tapegrad::kernels::cpu
