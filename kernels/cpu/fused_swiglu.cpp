// fused_swiglu.cpp — CPU fused SwiGLU gate: out = silu(a)⊙b, and its backward in one pass.
//
//   σ = 1/(1 + e^(−a)),  silu(a) = a·σ,  out = silu(a)·b
//   da = g·b·silu'(a) = g·b·σ·(1 + a·(1 − σ)),   db = g·silu(a)
// The value uses the silu functor of kernels/unary_functors.h, so the forward is bit-identical to
// silu(a) * b. One NdLoop over the common shape: contiguous runs are plain vectorized loops,
// anything else (transposed, sliced) takes the strided loop; threads split the linear range.
#include "kernels/fused_args.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/nd_loop.h"
#include "kernels/cpu/parallel.h"
#include "kernels/unary_functors.h"

namespace tapegrad::kernels::cpu {
namespace {

// Runs f(i, p, contiguous) for every element-run of the N views over `shape`: p are byte pointers,
// s byte strides; contiguous is true when every stride is sizeof(T).
template <class T, int N, class F>
void for_each_run(const Shape& shape, const std::array<const TensorView*, N>& views, F f) {
  auto loop = make_loop<N>(shape, views);
  parallel_for(loop.numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
    loop.run(b, e, [&](char** p, int64_t n, const int64_t* s) {
      bool contiguous = true;
      for (int k = 0; k < N; ++k) contiguous &= s[k] == static_cast<int64_t>(sizeof(T));
      f(p, n, s, contiguous);
    });
  });
}

template <class T>
T sigmoid_(T a) {
  return T(1) / (T(1) + fn::exp_(-a));
}

}  // namespace

void CpuBackend::swiglu(const TensorView& out, const TensorView& a, const TensorView& b) {
  const char* op = "swiglu";
  check_same_as_a(op, "b", b, a);
  check_same_as_a(op, "out", out, a);
  dispatch_floating(a.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    for_each_run<T, 3>(a.shape, {&out, &a, &b}, [&](char** p, int64_t n, const int64_t* s, bool contiguous) {
      if (contiguous) {
        T* o = reinterpret_cast<T*>(p[0]);
        const T* av = reinterpret_cast<const T*>(p[1]);
        const T* bv = reinterpret_cast<const T*>(p[2]);
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) o[i] = fn::Silu::f(av[i], T(0)) * bv[i];
      } else {
        for (int64_t i = 0; i < n; ++i)
          *reinterpret_cast<T*>(p[0] + i * s[0]) =
              fn::Silu::f(*reinterpret_cast<const T*>(p[1] + i * s[1]), T(0)) *
              *reinterpret_cast<const T*>(p[2] + i * s[2]);
      }
    });
  });
}

void CpuBackend::swiglu_backward(const TensorView& grad_a, const TensorView& grad_b, const TensorView& grad_out,
                                 const TensorView& a, const TensorView& b) {
  const char* op = "swiglu backward";
  check_same_as_a(op, "b", b, a);
  check_same_as_a(op, "grad_out", grad_out, a);
  const bool want_a = grad_a.data != nullptr, want_b = grad_b.data != nullptr;
  if (want_a) check_same_as_a(op, "grad_a", grad_a, a);
  if (want_b) check_same_as_a(op, "grad_b", grad_b, a);
  dispatch_floating(a.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    // da = (g·b)·σ·(1 + a·(1 − σ)),  db = g·a·σ
    auto da_of = [](T g, T av, T bv) {
      const T sg = sigmoid_(av);
      return (g * bv) * (sg * (T(1) + av * (T(1) - sg)));
    };
    auto db_of = [](T g, T av) { return g * fn::Silu::f(av, T(0)); };
    auto at = [](char* p, int64_t i, int64_t s) -> T& { return *reinterpret_cast<T*>(p + i * s); };
    if (want_a && want_b) {
      for_each_run<T, 5>(a.shape, {&grad_a, &grad_b, &grad_out, &a, &b},
                         [&](char** p, int64_t n, const int64_t* s, bool contiguous) {
                           if (contiguous) {
                             T* da = reinterpret_cast<T*>(p[0]);
                             T* db = reinterpret_cast<T*>(p[1]);
                             const T* g = reinterpret_cast<const T*>(p[2]);
                             const T* av = reinterpret_cast<const T*>(p[3]);
                             const T* bv = reinterpret_cast<const T*>(p[4]);
#pragma omp simd
                             for (int64_t i = 0; i < n; ++i) {
                               const T d = T(1) + fn::exp_(-av[i]);  // 1 + e^(−a): σ = 1/d, silu = a/d
                               const T sg = T(1) / d;
                               da[i] = (g[i] * bv[i]) * (sg * (T(1) + av[i] * (T(1) - sg)));
                               db[i] = g[i] * (av[i] / d);
                             }
                           } else {
                             for (int64_t i = 0; i < n; ++i) {
                               const T g = at(p[2], i, s[2]), av = at(p[3], i, s[3]), bv = at(p[4], i, s[4]);
                               at(p[0], i, s[0]) = da_of(g, av, bv);
                               at(p[1], i, s[1]) = db_of(g, av);
                             }
                           }
                         });
    } else if (want_a) {
      for_each_run<T, 4>(a.shape, {&grad_a, &grad_out, &a, &b}, [&](char** p, int64_t n, const int64_t* s, bool c) {
        if (c) {
          T* da = reinterpret_cast<T*>(p[0]);
          const T* g = reinterpret_cast<const T*>(p[1]);
          const T* av = reinterpret_cast<const T*>(p[2]);
          const T* bv = reinterpret_cast<const T*>(p[3]);
#pragma omp simd
          for (int64_t i = 0; i < n; ++i) da[i] = da_of(g[i], av[i], bv[i]);
        } else {
          for (int64_t i = 0; i < n; ++i) at(p[0], i, s[0]) = da_of(at(p[1], i, s[1]), at(p[2], i, s[2]), at(p[3], i, s[3]));
        }
      });
    } else if (want_b) {
      for_each_run<T, 3>(a.shape, {&grad_b, &grad_out, &a}, [&](char** p, int64_t n, const int64_t* s, bool c) {
        if (c) {
          T* db = reinterpret_cast<T*>(p[0]);
          const T* g = reinterpret_cast<const T*>(p[1]);
          const T* av = reinterpret_cast<const T*>(p[2]);
#pragma omp simd
          for (int64_t i = 0; i < n; ++i) db[i] = db_of(g[i], av[i]);
        } else {
          for (int64_t i = 0; i < n; ++i) at(p[0], i, s[0]) = db_of(at(p[1], i, s[1]), at(p[2], i, s[2]));
        }
      });
    }
  });
}

}  // namespace tapegrad::kernels::cpu
