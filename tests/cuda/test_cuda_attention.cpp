// test_cuda_attention.cpp — CudaBackend::causal_attention and causal_attention_backward against the
// CPU backend: out and lse, then grad_q, grad_k, grad_v (the backward of both backends reads the
// CPU's out and lse, so each direction is compared on its own). Sequence lengths around the tile
// sizes (32/64 rows, 32/64 keys), every head layout (MHA, GQA, MQA), head sizes on both sides of
// each 32-column step and past 128 (the row-per-warp fallback), contiguous and strided views, both
// float dtypes.
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "tests/cuda/cuda_test_util.h"

using namespace tapegrad;
using namespace tapegrad::cuda_test;

namespace {

struct Layout {
  int64_t B, H, Hkv, T, D;
};

// q, k, v and grad_out of one case, on one device: either separate contiguous [B, H(kv), T, D]
// tensors (slices of one [B, H + 2·Hkv, T, D] buffer), or (strided) views of one [B, T, H + 2·Hkv, D]
// projection buffer transposed to [B, H, T, D], as nn/attention.cpp produces them, with grad_out a
// transposed [B, T, H, D] buffer.
struct Inputs {
  Tensor q, k, v, grad_out;
};

Inputs views_of(const Tensor& qkv, const Tensor& grad, const Layout& s, bool strided) {
  if (!strided) return {qkv.narrow(1, 0, s.H), qkv.narrow(1, s.H, s.Hkv), qkv.narrow(1, s.H + s.Hkv, s.Hkv), grad};
  return {qkv.narrow(2, 0, s.H).transpose(1, 2), qkv.narrow(2, s.H, s.Hkv).transpose(1, 2),
          qkv.narrow(2, s.H + s.Hkv, s.Hkv).transpose(1, 2), grad.transpose(1, 2)};
}

// Random inputs of a case in `dtype` (q and k multiplied by qk_magnitude: large scores).
std::pair<Tensor, Tensor> random_buffers(const Layout& s, bool strided, DType dtype, double qk_magnitude) {
  const Options opts(dtype);
  const int64_t heads = s.H + 2 * s.Hkv;
  Tensor qkv = strided ? randn({s.B, s.T, heads, s.D}, opts) : randn({s.B, heads, s.T, s.D}, opts);
  if (qk_magnitude != 1.0) {
    const int dim = strided ? 2 : 1;
    qkv = cat({qkv.narrow(dim, 0, s.H + s.Hkv) * qk_magnitude, qkv.narrow(dim, s.H + s.Hkv, s.Hkv)}, dim);
  }
  const Tensor grad = strided ? randn({s.B, s.T, s.H, s.D}, opts) : randn({s.B, s.H, s.T, s.D}, opts);
  return {qkv, grad};
}

// A [B, heads, T(, D)] output on `device`: contiguous, or (strided) in [B, T, heads(, D)] memory;
// pre-filled with NaN so that an element never written shows.
Tensor output(const Layout& s, int64_t heads, bool with_d, bool strided, DType dtype, Device device) {
  Shape shape = strided ? Shape{s.B, s.T, heads} : Shape{s.B, heads, s.T};
  if (with_d) shape.push_back(s.D);
  const Tensor t = full(shape, std::numeric_limits<double>::quiet_NaN(), Options(dtype)).to(device);
  return strided ? t.transpose(1, 2) : t;
}

// t on `device` in the same memory layout (contiguous, or [B, T, heads, …] seen as [B, heads, T, …]).
Tensor same_layout_on(const Tensor& t, Device device, bool strided) {
  return strided ? t.transpose(1, 2).to(device).transpose(1, 2) : t.to(device);
}

struct Results {
  Tensor out, lse, grad_q, grad_k, grad_v;
};

// Forward, then backward, of one backend. The backward reads `saved`'s out and lse when given (the
// other backend's forward, copied here), else this forward's.
Results run(kernels::Backend& be, Device device, const Inputs& in, const Layout& s, bool strided, double scale,
            const Results* saved = nullptr) {
  const DType dtype = in.q.dtype();
  Results r;
  r.out = output(s, s.H, true, strided, dtype, device);
  r.lse = output(s, s.H, false, strided, dtype, device);
  be.causal_attention(view(r.out), view(r.lse), view(in.q), view(in.k), view(in.v), scale);
  const Tensor out = saved ? same_layout_on(saved->out, device, strided) : r.out;
  const Tensor lse = saved ? same_layout_on(saved->lse, device, strided) : r.lse;
  r.grad_q = output(s, s.H, true, strided, dtype, device);
  r.grad_k = output(s, s.Hkv, true, strided, dtype, device);
  r.grad_v = output(s, s.Hkv, true, strided, dtype, device);
  be.causal_attention_backward(view(r.grad_q), view(r.grad_k), view(r.grad_v), view(in.grad_out), view(in.q),
                               view(in.k), view(in.v), view(out), view(lse), scale);
  return r;
}

// The GPU against the CPU on one case (the GPU's backward reads the CPU's out and lse, so each
// direction is compared on its own).
void check_case(const Layout& s, DType dtype, bool strided, double scale, double qk_magnitude = 1.0) {
  INFO("B " << s.B << " H " << s.H << " Hkv " << s.Hkv << " T " << s.T << " D " << s.D << " " << dtype_name(dtype)
            << (strided ? " strided" : " contiguous") << " scale " << scale << " |q|,|k| x" << qk_magnitude);
  const auto [qkv, grad] = random_buffers(s, strided, dtype, qk_magnitude);
  const Results want = run(cpu_be(), Device::cpu(), views_of(qkv, grad, s, strided), s, strided, scale);
  const Results got =
      run(gpu_be(), gpu(), views_of(on_cuda(qkv), on_cuda(grad), s, strided), s, strided, scale, &want);
  // float32: both sum in float, in different orders; the rounding of a sum of T terms grows like √T
  const double rtol = rtol_for(dtype);
  const double atol = dtype == kFloat64 ? 1e-12 : 1e-6 * std::sqrt(double(s.T));
  expect_close(want.out, got.out, rtol, atol, "out");
  expect_close(want.lse, got.lse, rtol, atol, "lse");
  // dK and dV of a key sum over the G·T queries of its group
  const double grad_atol = dtype == kFloat64 ? 1e-12 : 1e-6 * std::sqrt(double(s.T * (s.H / s.Hkv)));
  expect_close(want.grad_q, got.grad_q, rtol, grad_atol, "grad_q");
  expect_close(want.grad_k, got.grad_k, rtol, grad_atol, "grad_k");
  expect_close(want.grad_v, got.grad_v, rtol, grad_atol, "grad_v");
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = values(a), y = values(b);
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}
double max_abs(const Tensor& a) {
  double m = 0;
  for (double x : values(a)) m = std::max(m, std::abs(x));
  return m;
}

// Ill-conditioned float32 (scores of magnitude ~100: the rounding of one score is already ~1e-5
// relative in P): the GPU's float32 results must be about as close to the float64 truth as the
// CPU's. End to end here: each backend's backward reads its own forward's lse, which is consistent
// with the scores it recomputes (another backend's lse is not, to ~1e-5 at these magnitudes).
void check_float32_accuracy(const Layout& s, double scale, double qk_magnitude) {
  INFO("B " << s.B << " H " << s.H << " Hkv " << s.Hkv << " T " << s.T << " D " << s.D << " scale " << scale
            << " |q|,|k| x" << qk_magnitude);
  const auto [qkv64, grad64] = random_buffers(s, false, kFloat64, qk_magnitude);
  const Tensor qkv = qkv64.to(kFloat32), grad = grad64.to(kFloat32);
  const Results truth =
      run(cpu_be(), Device::cpu(), views_of(qkv.to(kFloat64), grad.to(kFloat64), s, false), s, false, scale);
  const Results cpu = run(cpu_be(), Device::cpu(), views_of(qkv, grad, s, false), s, false, scale);
  const Results gpu_results =
      run(gpu_be(), gpu(), views_of(on_cuda(qkv), on_cuda(grad), s, false), s, false, scale);
  const std::pair<const char*, Tensor Results::*> fields[] = {{"out", &Results::out},
                                                             {"lse", &Results::lse},
                                                             {"grad_q", &Results::grad_q},
                                                             {"grad_k", &Results::grad_k},
                                                             {"grad_v", &Results::grad_v}};
  for (const auto& [name, field] : fields) {
    const double cpu_error = max_abs_diff(truth.*field, cpu.*field);
    const double gpu_error = max_abs_diff(truth.*field, (gpu_results.*field).to(Device::cpu()));
    INFO(name << ": max error vs float64, cpu " << cpu_error << ", cuda " << gpu_error << ", max |value| "
              << max_abs(truth.*field));
    CHECK(gpu_error <= 2 * cpu_error + 1e-6 * max_abs(truth.*field));
    CHECK(gpu_error > 0);  // float32 results were compared, not float64 ones
  }
}

}  // namespace

TEST_CASE("attention: matches the CPU for MHA, GQA and MQA around the tile sizes", "[cuda][attention]") {
  manual_seed(101);
  for (DType dtype : {kFloat32, kFloat64})
    for (auto [H, Hkv] : {std::pair<int64_t, int64_t>{2, 2}, {4, 2}, {3, 1}})
      for (int64_t T : {1, 2, 3, 17, 31, 64, 65, 127})
        for (int64_t D : {8, 16, 64})
          check_case({T < 64 ? 2 : 1, H, Hkv, T, D}, dtype, /*strided=*/false, 1.0 / std::sqrt(double(D)));
}

TEST_CASE("attention: strided q/k/v views of one projection buffer, strided outputs", "[cuda][attention]") {
  manual_seed(202);
  for (DType dtype : {kFloat32, kFloat64})
    for (auto [H, Hkv] : {std::pair<int64_t, int64_t>{2, 2}, {4, 2}, {2, 1}})
      for (int64_t T : {5, 33, 65, 130}) check_case({2, H, Hkv, T, 16}, dtype, /*strided=*/true, 0.25);
}

TEST_CASE("attention: long sequences", "[cuda][attention]") {
  manual_seed(303);
  for (DType dtype : {kFloat32, kFloat64}) {
    check_case({1, 2, 1, 257, 16}, dtype, /*strided=*/true, 0.25);
    check_case({1, 1, 1, 1025, 8}, dtype, /*strided=*/false, 1.0 / std::sqrt(8.0));
  }
}

TEST_CASE("attention: head sizes, including odd ones and the D > 128 fallback", "[cuda][attention]") {
  manual_seed(404);
  for (DType dtype : {kFloat32, kFloat64})
    for (int64_t D : {1, 3, 5, 31, 33, 96, 128, 129, 200})
      check_case({1, 2, 1, 45, D}, dtype, /*strided=*/D % 2 == 1, 1.0 / std::sqrt(double(D)));
}

TEST_CASE("attention: large scores (the running max is rescaled across key tiles)", "[cuda][attention]") {
  manual_seed(505);
  check_case({1, 2, 2, 150, 16}, kFloat64, /*strided=*/false, 1.0, /*qk_magnitude=*/3.0);
  check_case({1, 2, 1, 70, 160}, kFloat64, /*strided=*/false, 1.0, /*qk_magnitude=*/1.5);
  check_float32_accuracy({1, 2, 2, 150, 16}, 1.0, /*qk_magnitude=*/3.0);
  check_float32_accuracy({1, 2, 1, 70, 160}, 1.0, /*qk_magnitude=*/2.0);
}

TEST_CASE("attention: the forward over a longer key sequence (a KV cache) matches the CPU", "[cuda][attention]") {
  // q: the last T of Tk positions (query t sees keys j ≤ t + Tk − T). T = 1 is a decoding step; the
  // D = 160 case runs the row-per-warp fallback. The backward refuses Tk ≠ T.
  manual_seed(606);
  struct Case {
    int64_t B, H, Hkv, T, Tk, D;
  };
  for (DType dtype : {kFloat32, kFloat64})
    for (const Case c : {Case{1, 8, 4, 1, 37, 8}, Case{2, 2, 2, 1, 200, 16}, Case{1, 4, 1, 5, 70, 64},
                         Case{1, 2, 2, 40, 129, 32}, Case{1, 2, 1, 3, 50, 160}}) {
      INFO("B " << c.B << " H " << c.H << " Hkv " << c.Hkv << " T " << c.T << " Tk " << c.Tk << " D " << c.D << " "
                << dtype_name(dtype));
      const Options opts(dtype);
      const Tensor q = randn({c.B, c.H, c.T, c.D}, opts), k = randn({c.B, c.Hkv, c.Tk, c.D}, opts),
                   v = randn({c.B, c.Hkv, c.Tk, c.D}, opts);
      const double scale = 1.0 / std::sqrt(double(c.D));
      Tensor out = empty({c.B, c.H, c.T, c.D}, opts), lse = empty({c.B, c.H, c.T}, opts);
      cpu_be().causal_attention(view(out), view(lse), view(q), view(k), view(v), scale);
      const Options on_gpu = Options(dtype).device(gpu());
      Tensor gout = empty({c.B, c.H, c.T, c.D}, on_gpu), glse = empty({c.B, c.H, c.T}, on_gpu);
      const Tensor gq = on_cuda(q), gk = on_cuda(k), gv = on_cuda(v);
      gpu_be().causal_attention(view(gout), view(glse), view(gq), view(gk), view(gv), scale);
      const double atol = dtype == kFloat64 ? 1e-12 : 1e-6 * std::sqrt(double(c.Tk));
      expect_close(out, gout, rtol_for(dtype), atol, "out");
      expect_close(lse, glse, rtol_for(dtype), atol, "lse");
      if (c.T != c.Tk) {
        Tensor gk_grad = empty({c.B, c.Hkv, c.Tk, c.D}, on_gpu);
        CHECK_THROWS_WITH(gpu_be().causal_attention_backward(view(gout), view(gk_grad), view(gk_grad), view(gout),
                                                             view(gq), view(gk), view(gv), view(gout), view(glse),
                                                             scale),
                          Catch::Contains("causal_attention_backward"));
      }
    }
}

TEST_CASE("attention: integer tensors are rejected naming the op", "[cuda][attention]") {
  const Options on_gpu = Options(kInt32).device(gpu());
  const Tensor q = empty({1, 1, 4, 2}, on_gpu), out = empty({1, 1, 4, 2}, on_gpu), lse = empty({1, 1, 4}, on_gpu);
  CHECK_THROWS_WITH(gpu_be().causal_attention(view(out), view(lse), view(q), view(q), view(q), 1.0),
                    Catch::Contains("causal_attention") && Catch::Contains("not supported"));
  CHECK_THROWS_WITH(gpu_be().causal_attention_backward(view(out), view(out), view(out), view(out), view(q), view(q),
                                                       view(q), view(out), view(lse), 1.0),
                    Catch::Contains("causal_attention_backward") && Catch::Contains("not supported"));
}
