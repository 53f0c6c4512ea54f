// elementwise.cpp — CPU elementwise kernels: fill, strided copy with dtype cast, unary ops and
// their fused backward, binary ops and comparisons, where. The math of each unary and binary op
// lives in unary_functors.h / binary_functors.h (shared with the CUDA kernels).
//
// Every kernel is one NdLoop over the output shape, split across threads by linear range.
// When an inner run is contiguous in every operand the loop is a plain indexed loop that the
// compiler vectorizes; broadcast and strided runs take the generic strided loop.
#include <cstring>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/dispatch.h"
#include "kernels/cpu/nd_loop.h"
#include "kernels/cpu/parallel.h"
#include "kernels/binary_functors.h"
#include "kernels/unary_functors.h"

namespace tapegrad::kernels::cpu {
namespace {

// Applies `f(out_ptr, in_ptrs...)`-style element function over N operands; the first operand is the output.
// ElemFn is called as fn(T0* o, const T1* a, ...) per element via typed pointers.
template <class TO, class... TI, class Fn>
void elementwise(const Shape& shape, const std::array<const TensorView*, 1 + sizeof...(TI)>& views, Fn fn) {
  constexpr int N = 1 + sizeof...(TI);
  auto loop = make_loop<N>(shape, views);
  parallel_for(loop.numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
    loop.run(b, e, [&](char** p, int64_t n, const int64_t* s) {
      constexpr int64_t sizes[N] = {sizeof(TO), sizeof(TI)...};
      bool contiguous = true;
      for (int k = 0; k < N; ++k) contiguous &= s[k] == sizes[k];
      if (contiguous) {
        TO* o = reinterpret_cast<TO*>(p[0]);
        [&]<size_t... I>(std::index_sequence<I...>) {
          std::tuple<const TI*...> in{reinterpret_cast<const TI*>(p[1 + I])...};
          for (int64_t i = 0; i < n; ++i) o[i] = fn(std::get<I>(in)[i]...);
        }(std::index_sequence_for<TI...>{});
      } else {
        [&]<size_t... I>(std::index_sequence<I...>) {
          for (int64_t i = 0; i < n; ++i)
            *reinterpret_cast<TO*>(p[0] + i * s[0]) =
                fn(*reinterpret_cast<const TI*>(p[1 + I] + i * s[1 + I])...);
        }(std::index_sequence_for<TI...>{});
      }
    });
  });
}

}  // namespace

void CpuBackend::fill(const TensorView& out, double value) {
  dispatch_storage(out.dtype, [&](auto t) {
    using T = decltype(t);
    const T v = cast_scalar<T>(value);
    if (out.is_contiguous() && value == 0.0) {
      char* base = static_cast<char*>(out.data);
      const int64_t bytes = out.numel() * static_cast<int64_t>(sizeof(T));
      parallel_for(bytes, kElementwiseGrain * 4, [&](int64_t b, int64_t e) { std::memset(base + b, 0, e - b); });
      return;
    }
    auto loop = make_loop<1>(out.shape, {&out});
    parallel_for(loop.numel(), kElementwiseGrain, [&](int64_t b, int64_t e) {
      loop.run(b, e, [&](char** p, int64_t n, const int64_t* s) {
        for (int64_t i = 0; i < n; ++i) *reinterpret_cast<T*>(p[0] + i * s[0]) = v;
      });
    });
  });
}

void CpuBackend::copy(const TensorView& out, const TensorView& in) {
  dispatch_storage(out.dtype, [&](auto to) {
    using TO = decltype(to);
    dispatch_storage(in.dtype, [&](auto ti) {
      using TI = decltype(ti);
      if constexpr (std::is_same_v<TO, TI>) {
        if (out.is_contiguous() && in.is_contiguous()) {
          char* dst = static_cast<char*>(out.data);
          const char* src = static_cast<const char*>(in.data);
          const int64_t bytes = out.numel() * static_cast<int64_t>(sizeof(TO));
          parallel_for(bytes, kElementwiseGrain * 4,
                       [&](int64_t b, int64_t e) { std::memcpy(dst + b, src + b, e - b); });
          return;
        }
      }
      elementwise<TO, TI>(out.shape, {&out, &in}, [](TI x) {
        if constexpr (std::is_same_v<TO, bool>) return x != TI(0);  // bfloat16: compared as float
        else if constexpr (std::is_same_v<TO, bfloat16>) return bfloat16(static_cast<float>(x));
        else if constexpr (std::is_same_v<TI, bfloat16>) return static_cast<TO>(static_cast<float>(x));
        else return static_cast<TO>(x);
      });
    });
  });
}

void CpuBackend::unary(UnaryOp op, const TensorView& out, const TensorView& in, double param) {
  dispatch_floating(in.dtype, unary_op_name(op), [&](auto t) {
    using T = decltype(t);
    const T p = static_cast<T>(param);
    fn::visit_unary(op, [&](auto f) {
      using F = decltype(f);
      elementwise<T, T>(out.shape, {&out, &in}, [p](T x) { return F::f(x, p); });
    });
  });
}

void CpuBackend::unary_backward(UnaryOp op, const TensorView& grad_in, const TensorView& grad_out,
                                const TensorView& x, const TensorView& y, double param) {
  dispatch_floating(grad_in.dtype, unary_op_name(op), [&](auto t) {
    using T = decltype(t);
    const T p = static_cast<T>(param);
    fn::visit_unary(op, [&](auto f) {
      using F = decltype(f);
      elementwise<T, T, T, T>(grad_in.shape, {&grad_in, &grad_out, &x, &y},
                              [p](T g, T xv, T yv) { return g * F::df(xv, yv, p); });
    });
  });
}

void CpuBackend::binary(BinaryOp op, const TensorView& out, const TensorView& a, const TensorView& b) {
  dispatch_all(a.dtype, [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_same_v<T, bool>) {
      throw Error(fmt::format("{}: dtype bool is not supported", binary_op_name(op)));
    } else {
      fn::visit_binary(op, [&](auto f) {
        using F = decltype(f);
        elementwise<fn::binary_result_t<F, T>, T, T>(out.shape, {&out, &a, &b}, [](T x, T y) { return F::f(x, y); });
      });
    }
  });
}

void CpuBackend::where(const TensorView& out, const TensorView& cond, const TensorView& a, const TensorView& b) {
  dispatch_all(out.dtype, [&](auto t) {
    using T = decltype(t);
    elementwise<T, bool, T, T>(out.shape, {&out, &cond, &a, &b}, [](bool c, T x, T y) { return c ? x : y; });
  });
}

}  // namespace tapegrad::kernels::cpu
