// test_cuda_flash_attention.cpp — bf16 causal attention on the CUDA backend: the tensor-core flash attention
// (kernels/cuda/flash_attention_tc.cu; through mma.h's emulation on the emulated device) and the SIMT kernels
// on bf16 storage (fused_attention.cu), each against the CPU's bf16 attention (kernels/bf16_bridge: the float32
// kernel on the widened inputs, outputs rounded once) and against each other, forward and backward.
// CudaBackend is called directly with bf16 views (the bridge in front of it may widen bf16 before it gets there).
// Each backward reads the CPU's out and lse, so each direction is compared on its own.
//
// Tolerances, per quantity:
//   SIMT out      ≤ 2 bf16 ulp (rtol 2⁻⁶): float32 compute in another summation order, rounded once.
//   TC out        rtol 2⁻⁶ + atol 1e-2·max|out|: P is rounded to bf16 (2⁻⁹ relative) before P·V, as in every
//                 flash attention; an output near 0 (a cancelling mean of V) gets that absolute error.
//   lse (both)    rtol 1e-5 + atol 1e-5: float32 statistics of exact bf16 products, summed in other orders.
//   gradients     norm-wise ‖got − want‖ / ‖want‖ ≤ 1.5e-2 (test_bf16_ops.cpp's causal_attention tolerance:
//                 Δ = Σ dO·O reads the bf16 output and dP − Δ cancels); the TC kernels also round P and dS.
//                 ‖want‖ is floored at 1e-2·‖dV‖: at T = 1, dQ and dK are 0 exactly and rounding noise here.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "cuda_test_util.h"

using namespace tapegrad;
using namespace tapegrad::cuda_test;
namespace cu = tapegrad::kernels::cuda;

namespace {

struct Case {
  int64_t B, H, Hkv, T, Tk, D;
  bool strided;  // views of [B, T, heads, D] buffers transposed to [B, heads, T, D], as nn/attention.cpp makes them
};

// Sets the attention implementation for a scope.
class AttentionImplGuard {
 public:
  explicit AttentionImplGuard(cu::AttentionImpl impl) : saved_(cu::attention_impl()) { cu::set_attention_impl(impl); }
  ~AttentionImplGuard() { cu::set_attention_impl(saved_); }
  AttentionImplGuard(const AttentionImplGuard&) = delete;
  AttentionImplGuard& operator=(const AttentionImplGuard&) = delete;

 private:
  cu::AttentionImpl saved_;
};

// A [B, heads, T(, D)] view of a base buffer [B, T, heads(, D)] (strided) or [B, heads, T(, D)].
Tensor heads_view(const Tensor& base, bool strided) { return strided ? base.transpose(1, 2) : base; }
Shape base_shape(int64_t B, int64_t heads, int64_t T, int64_t D, bool strided) {
  Shape s = strided ? Shape{B, T, heads} : Shape{B, heads, T};
  if (D > 0) s.push_back(D);
  return s;
}
// An output view on `device`, pre-filled with NaN so that an element never written shows.
Tensor output(int64_t B, int64_t heads, int64_t T, int64_t D, bool strided, DType dtype, Device device) {
  return heads_view(full(base_shape(B, heads, T, D, strided), std::numeric_limits<double>::quiet_NaN(), Options(dtype))
                        .to(device),
                    strided);
}

struct Inputs {
  Tensor q, k, v, grad_out;  // base buffers, bf16, on the CPU
};
Inputs random_inputs(const Case& c) {
  return {randn(base_shape(c.B, c.H, c.T, c.D, c.strided)).to(kBFloat16),
          randn(base_shape(c.B, c.Hkv, c.Tk, c.D, c.strided)).to(kBFloat16),
          randn(base_shape(c.B, c.Hkv, c.Tk, c.D, c.strided)).to(kBFloat16),
          randn(base_shape(c.B, c.H, c.T, c.D, c.strided)).to(kBFloat16)};
}

struct Results {
  Tensor out, lse, grad_q, grad_k, grad_v;
};

// Forward (and, when Tk == T, backward reading `saved`'s out and lse if given) of one backend on one device.
Results run(kernels::Backend& be, Device device, const Inputs& in, const Case& c, double scale,
            const Results* saved = nullptr) {
  const Tensor q = heads_view(in.q.to(device), c.strided), k = heads_view(in.k.to(device), c.strided),
               v = heads_view(in.v.to(device), c.strided), g = heads_view(in.grad_out.to(device), c.strided);
  Results r;
  r.out = output(c.B, c.H, c.T, c.D, c.strided, kBFloat16, device);
  r.lse = output(c.B, c.H, c.T, 0, false, kFloat32, device);
  be.causal_attention(view(r.out), view(r.lse), view(q), view(k), view(v), scale);
  if (c.Tk != c.T) return r;
  const Tensor out = saved ? heads_view(heads_view(saved->out, c.strided).to(device), c.strided) : r.out;
  const Tensor lse = saved ? saved->lse.to(device) : r.lse;
  r.grad_q = output(c.B, c.H, c.T, c.D, c.strided, kBFloat16, device);
  r.grad_k = output(c.B, c.Hkv, c.T, c.D, c.strided, kBFloat16, device);
  r.grad_v = output(c.B, c.Hkv, c.T, c.D, c.strided, kBFloat16, device);
  be.causal_attention_backward(view(r.grad_q), view(r.grad_k), view(r.grad_v), view(g), view(q), view(k), view(v),
                               view(out), view(lse), scale);
  return r;
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (double x : values(t)) m = std::max(m, std::abs(x));
  return m;
}
double norm_of(const Tensor& t) {
  double s = 0;
  for (double x : values(t)) s += x * x;
  return std::sqrt(s);
}
// ‖got − want‖ / max(‖want‖, floor) (no NaN in got: a NaN makes it NaN, which fails every ≤). The floor is for
// a gradient that is zero in exact arithmetic and only rounding noise in both: dQ and dK when every query sees
// one key (T = 1: P = 1, so dS = dP − Δ = 0 up to the order of two float32 sums).
double norm_error(const Tensor& want, const Tensor& got, double floor) {
  const std::vector<double> w = values(want), g = values(got);
  double num = 0;
  for (size_t i = 0; i < w.size(); ++i) num += (g[i] - w[i]) * (g[i] - w[i]);
  return std::sqrt(num) / std::max({norm_of(want), floor, 1e-300});
}

void check_gradients(const Results& want, const Results& got, const std::string& what) {
  const std::pair<const char*, Tensor Results::*> fields[] = {
      {"grad_q", &Results::grad_q}, {"grad_k", &Results::grad_k}, {"grad_v", &Results::grad_v}};
  const double floor = 1e-2 * norm_of(want.grad_v);  // dV = Pᵀ·dO is never zero
  for (const auto& [name, field] : fields) {
    const double e = norm_error(want.*field, got.*field, floor);
    INFO(what << " " << name << ": norm-wise relative error " << e);
    CHECK(e <= 1.5e-2);
  }
}

// The tensor-core and SIMT kernels against the CPU (and each other) on one case.
void check_case(const Case& c, bool expect_tensor_cores) {
  INFO("B " << c.B << " H " << c.H << " Hkv " << c.Hkv << " T " << c.T << " Tk " << c.Tk << " D " << c.D
            << (c.strided ? " strided" : " contiguous"));
  const double scale = 1.0 / std::sqrt(double(c.D));
  const Inputs in = random_inputs(c);
  const Results want = run(cpu_be(), Device::cpu(), in, c, scale);
  cu::CudaBackend& be = cu::cuda_backend(0);
  Results tc, simt;
  {
    const AttentionImplGuard guard(cu::AttentionImpl::TensorCore);
    tc = run(be, gpu(), in, c, scale, &want);
  }
  {
    const AttentionImplGuard guard(cu::AttentionImpl::Simt);
    simt = run(be, gpu(), in, c, scale, &want);
  }
  const double two_ulp = 1.0 / 64;  // 2⁻⁶: two bf16 steps relative to the value
  expect_close(want.out, simt.out, two_ulp, 1e-6, "SIMT out vs CPU");
  expect_close(want.lse, simt.lse, 1e-5, 1e-5, "SIMT lse vs CPU");
  const double out_atol = expect_tensor_cores ? 1e-2 * max_abs(want.out) : 1e-6;
  expect_close(want.out, tc.out, two_ulp, out_atol, "TC out vs CPU");
  expect_close(want.lse, tc.lse, 1e-5, 1e-5, "TC lse vs CPU");
  expect_close(simt.out, tc.out, two_ulp, out_atol, "TC out vs SIMT");
  if (c.Tk != c.T) return;
  check_gradients(want, simt, "SIMT vs CPU");
  check_gradients(want, tc, "TC vs CPU");
  check_gradients(simt, tc, "TC vs SIMT");
  if (!expect_tensor_cores) {  // then both runs took the SIMT kernels: the same bits
    CHECK(values(tc.out) == values(simt.out));
    CHECK(values(tc.grad_q) == values(simt.grad_q));
  }
}

}  // namespace

TEST_CASE("bf16 flash attention on tensor cores: forward and backward against SIMT and the CPU", "[cuda][flash]") {
  // T not a multiple of the tiles (64 rows, 64 keys, 32 queries), every head layout, each head dim it takes
  SECTION("D 32, MHA, T 17") { check_case({2, 4, 4, 17, 17, 32, false}, true); }
  SECTION("D 64, GQA 2, T 80, strided") { check_case({2, 4, 2, 80, 80, 64, true}, true); }
  SECTION("D 128, MQA, T 130, strided") { check_case({2, 4, 1, 130, 130, 128, true}, true); }
  SECTION("D 64, GQA 2, T 1") { check_case({2, 4, 2, 1, 1, 64, false}, true); }
  SECTION("D 32, MHA, T 130, strided") { check_case({1, 4, 4, 130, 130, 32, true}, true); }
}

TEST_CASE("bf16 attention: shapes the tensor cores do not take run the SIMT kernels", "[cuda][flash]") {
  SECTION("D 48 (blocked SIMT on bf16)") { check_case({1, 2, 1, 70, 70, 48, true}, false); }
  SECTION("D 160 (row-per-warp on float32 copies)") { check_case({1, 2, 2, 33, 33, 160, false}, false); }
  SECTION("decoding over a KV cache: 3 rows, 40 keys") { check_case({2, 4, 2, 3, 40, 64, false}, false); }
}

TEST_CASE("bf16 flash attention over a KV cache (Tk > T, forward)", "[cuda][flash]") {
  check_case({1, 4, 2, 20, 90, 64, true}, true);
}

TEST_CASE("TAPEGRAD_CUDA_ATTENTION switch: set_attention_impl round-trips", "[cuda][flash]") {
  const AttentionImplGuard guard(cu::AttentionImpl::Simt);
  CHECK(cu::attention_impl() == cu::AttentionImpl::Simt);
  cu::set_attention_impl(cu::AttentionImpl::TensorCore);
  CHECK(cu::attention_impl() == cu::AttentionImpl::TensorCore);
}
