// test_cuda_fused.cpp — the fused Transformer kernels of the CUDA backend (cross-entropy, RMSNorm,
// SwiGLU, RoPE) against the CPU backend: forward and backward, float32 and float64, contiguous,
// transposed, sliced and broadcast inputs and outputs, odd sizes on both sides of the kernels'
// warp-per-row / block-per-row switch (256), ignored rows, no valid row (NaN loss), empty tensors,
// bad targets / positions raising at the next synchronisation, and gradients that are not asked for.
//
// Strided outputs are views of a base filled with a sentinel on both devices; the whole bases are
// compared, so elements outside the view must stay untouched. Only contiguous GPU tensors are read
// back (copy_to_host), so these tests need no other CUDA kernel.
#include <cmath>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "tests/cuda/cuda_test_util.h"

using namespace tapegrad;
using namespace tapegrad::cuda_test;

namespace {

constexpr double kSentinel = 7.25;

// The same tensor on both devices: bases (contiguous, what is compared) and the views the kernels see.
struct Twin {
  Tensor cpu_base, gpu_base, cpu, gpu;
};
template <class View>
Twin twin(const Tensor& cpu_base, View view) {
  Twin t;
  t.cpu_base = cpu_base;
  t.gpu_base = on_cuda(cpu_base);
  t.cpu = view(t.cpu_base);
  t.gpu = view(t.gpu_base);
  return t;
}

// 2-D layouts of an [R, C] operand.
enum class Layout2 { Contiguous, Transposed, Sliced };
const char* name(Layout2 l) {
  return l == Layout2::Contiguous ? "contiguous" : (l == Layout2::Transposed ? "transposed" : "sliced");
}
// base filled by make(base_shape); the view has shape [R, C]: transposed (strides (1, R)) or
// every other column of [R, 2C + 1] starting at column 1 (strides (2C + 1, 2), offset 1).
template <class Make>
Twin twin2(Layout2 l, int64_t R, int64_t C, Make make) {
  switch (l) {
    case Layout2::Contiguous: return twin(make(Shape{R, C}), [](const Tensor& b) { return b; });
    case Layout2::Transposed: return twin(make(Shape{C, R}), [](const Tensor& b) { return b.t(); });
    case Layout2::Sliced:
      return twin(make(Shape{R, 2 * C + 1}), [C](const Tensor& b) { return b.slice(1, 1, 1 + 2 * C, 2); });
  }
  return {};
}
auto randn_of(DType t, double scale = 1.0) {
  return [t, scale](const Shape& s) { return mul(randn(s, Options(t)), scale); };
}
auto sentinel_of(DType t) {
  return [t](const Shape& s) { return full(s, kSentinel, Options(t)); };
}

void expect_twin(const Twin& t, DType dtype, const std::string& what) {
  expect_close(t.cpu_base, t.gpu_base, rtol_for(dtype), atol_for(dtype), what);
}

// Targets [N] of dtype index_type: uniform in [0, V), every `ignore_every`-th row (from row 1)
// set to ignore_index; stride 2 when strided.
Twin make_targets(int64_t N, int64_t V, DType index_type, int64_t ignore_index, int ignore_every, bool strided,
                  uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t n = strided ? 2 * N : N;
  std::vector<int64_t> t(static_cast<size_t>(n), 0);
  for (int64_t i = 0; i < n; ++i) {
    t[i] = V > 0 ? static_cast<int64_t>(rng() % static_cast<uint32_t>(V)) : ignore_index;
    const int64_t row = strided ? i / 2 : i;
    if (ignore_every > 0 && row % ignore_every == 1) t[i] = ignore_index;
  }
  const Tensor base = from_vector<int64_t>(t, Shape{n}).to(index_type);
  if (strided) return twin(base, [N](const Tensor& b) { return b.slice(0, 0, 2 * N, 2); });
  return twin(base, [](const Tensor& b) { return b; });
}

kernels::TensorView none() { return kernels::TensorView{}; }

// ---------------- cross-entropy ----------------

struct CeResult {
  Tensor loss, lse;
};
CeResult ce_forward(kernels::Backend& be, Device dev, const Tensor& logits, const Tensor& targets, int64_t ignore) {
  CeResult r;
  r.loss = empty({}, Options(logits.dtype()).device(dev));
  r.lse = empty({logits.size(0)}, Options(kFloat64).device(dev));
  be.cross_entropy(view(r.loss), view(r.lse), view(logits), view(targets), ignore);
  return r;
}

// Forward and backward of one configuration on both backends, compared.
void check_cross_entropy(DType dtype, DType index_type, int64_t N, int64_t V, Layout2 in_layout, Layout2 out_layout,
                         int ignore_every, double logit_scale = 1.0) {
  const int64_t ignore = -100;
  const std::string what = fmt::format("{} targets {} N={} V={} logits {} grad {} ignore_every={}", dtype, index_type,
                                       N, V, name(in_layout), name(out_layout), ignore_every);
  INFO(what);
  const Twin x = twin2(in_layout, N, V, randn_of(dtype, logit_scale));
  const Twin t = make_targets(N, V, index_type, ignore, ignore_every, in_layout == Layout2::Sliced,
                              static_cast<uint32_t>(N * 131 + V));
  const CeResult want = ce_forward(cpu_be(), Device::cpu(), x.cpu, t.cpu, ignore);
  const CeResult got = ce_forward(gpu_be(), gpu(), x.gpu, t.gpu, ignore);
  expect_close(want.loss, got.loss, rtol_for(dtype), atol_for(dtype), "loss");
  expect_close(want.lse, got.lse, rtol_for(dtype), atol_for(dtype), "lse");

  const Tensor g = full({}, 0.75, Options(dtype));
  const Tensor g_gpu = on_cuda(g);
  const Twin dx = twin2(out_layout, N, V, sentinel_of(dtype));
  cpu_be().cross_entropy_backward(view(dx.cpu), view(g), view(x.cpu), view(t.cpu), view(want.lse), ignore);
  gpu_be().cross_entropy_backward(view(dx.gpu), view(g_gpu), view(x.gpu), view(t.gpu), view(got.lse), ignore);
  expect_twin(dx, dtype, "grad_logits");
}

TEST_CASE("cross_entropy: forward and backward match the CPU (contiguous and strided, both dtypes)",
          "[cuda][fused][cross_entropy]") {
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 1}, {5, 7}, {9, 33}, {3, 256}, {4, 257}, {6, 1000}};
  for (DType dtype : {kFloat32, kFloat64})
    for (const auto& [N, V] : shapes)
      for (Layout2 l : {Layout2::Contiguous, Layout2::Transposed, Layout2::Sliced}) {
        const DType index_type = (N + V) % 2 == 0 ? kInt64 : kInt32;
        check_cross_entropy(dtype, index_type, N, V, l, l == Layout2::Transposed ? Layout2::Contiguous : l,
                            N > 2 ? 3 : 0);
      }
}

TEST_CASE("cross_entropy: long rows (block per row, 512 threads), both index types", "[cuda][fused][cross_entropy]") {
  for (DType dtype : {kFloat32, kFloat64}) {
    check_cross_entropy(dtype, kInt64, 3, 4999, Layout2::Contiguous, Layout2::Contiguous, 2);
    check_cross_entropy(dtype, kInt32, 2, 8200, Layout2::Sliced, Layout2::Sliced, 0);
  }
}

TEST_CASE("cross_entropy: large logits (±1e4 scale) stay exact", "[cuda][fused][cross_entropy]") {
  for (DType dtype : {kFloat32, kFloat64}) {
    check_cross_entropy(dtype, kInt64, 4, 300, Layout2::Contiguous, Layout2::Contiguous, 0, 1e4);
    check_cross_entropy(dtype, kInt64, 6, 40, Layout2::Transposed, Layout2::Sliced, 4, 1e4);
  }
}

TEST_CASE("cross_entropy: -inf, +inf and NaN logits give what the CPU gives", "[cuda][fused][cross_entropy]") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  for (DType dtype : {kFloat32, kFloat64})
    for (int64_t V : {5, 300}) {
      INFO(fmt::format("{} V={}", dtype, V));
      // rows: finite with some −inf (not at the target); all −inf; a NaN; a +inf; finite
      std::vector<double> v(static_cast<size_t>(5 * V));
      std::mt19937 rng(7);
      std::normal_distribution<double> normal;
      for (double& e : v) e = normal(rng);
      for (int64_t j = 1; j < V; j += 2) v[j] = -inf;                 // row 0: target 0 stays finite
      for (int64_t j = 0; j < V; ++j) v[V + j] = -inf;                // row 1
      v[2 * V + V / 2] = nan;                                          // row 2
      v[3 * V + V - 1] = inf;                                          // row 3
      const Tensor x = tensor(v, Shape{5, V}, Options(dtype));
      const Tensor t = from_vector<int64_t>({0, 0, 1, 0, 2}, Shape{5});
      const CeResult want = ce_forward(cpu_be(), Device::cpu(), x, t, -100);
      const CeResult got = ce_forward(gpu_be(), gpu(), on_cuda(x), on_cuda(t), -100);
      CHECK(std::isnan(values(want.loss)[0]));
      expect_close(want.loss, got.loss, rtol_for(dtype), atol_for(dtype), "loss");
      expect_close(want.lse, got.lse, rtol_for(dtype), atol_for(dtype), "lse");
      const std::vector<double> lse = values(got.lse);
      CHECK(std::isfinite(lse[0]));
      CHECK(lse[1] == -inf);
      CHECK(std::isnan(lse[2]));
      CHECK(std::isnan(lse[3]));
      // Backward of the finite rows only (rows 1–3 ignored through a target of −100).
      const Tensor tb = from_vector<int64_t>({0, -100, -100, -100, 2}, Shape{5});
      const Tensor g = full({}, 1.0, Options(dtype));
      Tensor dx_cpu = empty({5, V}, Options(dtype)), dx_gpu = empty({5, V}, Options(dtype).device(gpu()));
      cpu_be().cross_entropy_backward(view(dx_cpu), view(g), view(x), view(tb), view(want.lse), -100);
      gpu_be().cross_entropy_backward(view(dx_gpu), view(on_cuda(g)), view(on_cuda(x)), view(on_cuda(tb)),
                                      view(got.lse), -100);
      expect_close(dx_cpu, dx_gpu, rtol_for(dtype), atol_for(dtype), "grad_logits");
    }
}

TEST_CASE("cross_entropy: no valid row gives a NaN loss and zero gradients, N = 0 too", "[cuda][fused][cross_entropy]") {
  for (DType dtype : {kFloat32, kFloat64})
    for (int64_t V : {3, 700}) {
      INFO(fmt::format("{} V={}", dtype, V));
      const Tensor x = randn({4, V}, Options(dtype));
      const Tensor t = from_vector<int32_t>({-1, -1, -1, -1}, Shape{4});
      const CeResult got = ce_forward(gpu_be(), gpu(), on_cuda(x), on_cuda(t), -1);
      CHECK(std::isnan(values(got.loss)[0]));
      CHECK(values(got.lse) == std::vector<double>(4, 0.0));
      const Tensor g = on_cuda(full({}, 1.0, Options(dtype)));
      const Tensor dx = on_cuda(full({4, V}, kSentinel, Options(dtype)));
      gpu_be().cross_entropy_backward(view(dx), view(g), view(on_cuda(x)), view(on_cuda(t)), view(got.lse), -1);
      CHECK(values(dx) == std::vector<double>(static_cast<size_t>(4 * V), 0.0));
    }
  const Tensor x = empty({0, 5}, Options(kFloat32));
  const Tensor t = empty({0}, Options(kInt64));
  const CeResult got = ce_forward(gpu_be(), gpu(), on_cuda(x), on_cuda(t), -100);
  CHECK(std::isnan(values(got.loss)[0]));
}

TEST_CASE("cross_entropy: deterministic, and no host synchronisation", "[cuda][fused][cross_entropy]") {
  const Tensor x = on_cuda(randn({37, 300}, Options(kFloat32)));
  const Twin t = make_targets(37, 300, kInt64, -100, 5, false, 3);
  const uint64_t syncs = kernels::cuda::sync_count();
  const CeResult a = ce_forward(gpu_be(), gpu(), x, t.gpu, -100);
  const CeResult b = ce_forward(gpu_be(), gpu(), x, t.gpu, -100);
  const Tensor g = on_cuda(full({}, 2.0, Options(kFloat32)));
  Tensor dx = empty({37, 300}, Options(kFloat32).device(gpu()));
  gpu_be().cross_entropy_backward(view(dx), view(g), view(x), view(t.gpu), view(a.lse), -100);
  CHECK(kernels::cuda::sync_count() == syncs);
  CHECK(values(a.loss) == values(b.loss));
  CHECK(values(a.lse) == values(b.lse));
}

TEST_CASE("cross_entropy: a bad target raises at the next synchronisation, naming the op",
          "[cuda][fused][cross_entropy]") {
  for (int64_t bad : {5, -1}) {
    INFO("bad target " << bad);
    const Tensor x = on_cuda(randn({4, 5}, Options(kFloat32)));
    const Tensor t = on_cuda(from_vector<int64_t>({0, 4, bad, 1}, Shape{4}));
    CeResult r;
    CHECK_NOTHROW(r = ce_forward(gpu_be(), gpu(), x, t, -100));
    CHECK_THROWS_WITH(values(r.loss), Catch::Contains("cross_entropy") && Catch::Contains("index " + std::to_string(bad)));
    CHECK_NOTHROW(values(r.loss));  // the record was cleared

    // backward: same, through synchronize()
    const Tensor g = on_cuda(full({}, 1.0, Options(kFloat32)));
    Tensor dx = empty({4, 5}, Options(kFloat32).device(gpu()));
    const Tensor lse = on_cuda(zeros({4}, Options(kFloat64)));
    CHECK_NOTHROW(gpu_be().cross_entropy_backward(view(dx), view(g), view(x), view(t), view(lse), -100));
    CHECK_THROWS_WITH(gpu_be().synchronize(), Catch::Contains("cross_entropy"));
    CHECK_NOTHROW(gpu_be().synchronize());
  }
}

// ---------------- RMSNorm ----------------

struct RmsCase {
  int64_t R, C;
};

void check_rms_norm(DType dtype, int64_t R, int64_t C, Layout2 x_layout, Layout2 out_layout, bool strided_weight,
                    bool want_x, bool want_w) {
  const std::string what = fmt::format("{} R={} C={} x {} outputs {} weight {} dx {} dw {}", dtype, R, C,
                                       name(x_layout), name(out_layout), strided_weight ? "strided" : "contiguous",
                                       want_x, want_w);
  INFO(what);
  const double eps = 1e-5;
  const Twin x = twin2(x_layout, R, C, randn_of(dtype));
  const Twin w = strided_weight
                     ? twin(randn({2 * C + 3}, Options(dtype)), [C](const Tensor& b) { return b.slice(0, 3, 3 + 2 * C, 2); })
                     : twin(randn({C}, Options(dtype)), [](const Tensor& b) { return b; });
  const Twin y = twin2(out_layout, R, C, sentinel_of(dtype));
  const Twin rstd = twin(full({R}, kSentinel, Options(dtype)), [](const Tensor& b) { return b; });
  cpu_be().rms_norm(view(y.cpu), view(rstd.cpu), view(x.cpu), view(w.cpu), eps);
  gpu_be().rms_norm(view(y.gpu), view(rstd.gpu), view(x.gpu), view(w.gpu), eps);
  expect_twin(y, dtype, "y");
  expect_twin(rstd, dtype, "rstd");

  const Twin g = twin2(x_layout == Layout2::Transposed ? Layout2::Sliced : Layout2::Transposed, R, C, randn_of(dtype));
  const Twin dx = twin2(out_layout, R, C, sentinel_of(dtype));
  const Twin dw = twin(full({C + 1}, kSentinel, Options(dtype)), [C](const Tensor& b) { return b.slice(0, 1, C + 1); });
  cpu_be().rms_norm_backward(want_x ? view(dx.cpu) : none(), want_w ? view(dw.cpu) : none(), view(g.cpu),
                             view(x.cpu), view(w.cpu), view(rstd.cpu));
  gpu_be().rms_norm_backward(want_x ? view(dx.gpu) : none(), want_w ? view(dw.gpu) : none(), view(g.gpu),
                             view(x.gpu), view(w.gpu), view(rstd.gpu));
  expect_twin(dx, dtype, "grad_x");  // all sentinels when not asked for
  expect_twin(dw, dtype, "grad_weight");
  if (!want_x && R * C > 0) CHECK(values(dx.gpu_base)[0] == kSentinel);
  if (!want_w && C > 0) CHECK(values(dw.gpu_base)[1] == kSentinel);
}

TEST_CASE("rms_norm: forward and backward match the CPU (warp and block rows, strided)", "[cuda][fused][rmsnorm]") {
  // C ≤ 256: a warp per row; above: a block. R ≥ 32: the weight gradient is summed over row chunks.
  const std::vector<RmsCase> cases = {{1, 1}, {3, 7}, {5, 33}, {4, 256}, {3, 257}, {2, 1000}, {40, 64}, {100, 5}, {33, 300}};
  for (DType dtype : {kFloat32, kFloat64})
    for (const RmsCase& c : cases)
      for (Layout2 l : {Layout2::Contiguous, Layout2::Transposed, Layout2::Sliced})
        check_rms_norm(dtype, c.R, c.C, l, l == Layout2::Transposed ? Layout2::Sliced : l, l == Layout2::Sliced, true,
                       true);
}

TEST_CASE("rms_norm: outputs with data == nullptr are not computed", "[cuda][fused][rmsnorm]") {
  for (DType dtype : {kFloat32, kFloat64}) {
    check_rms_norm(dtype, 50, 70, Layout2::Contiguous, Layout2::Contiguous, false, true, false);
    check_rms_norm(dtype, 50, 70, Layout2::Contiguous, Layout2::Contiguous, false, false, true);
    check_rms_norm(dtype, 6, 300, Layout2::Sliced, Layout2::Sliced, true, false, true);
    check_rms_norm(dtype, 6, 300, Layout2::Sliced, Layout2::Sliced, true, false, false);
  }
}

TEST_CASE("rms_norm: empty shapes (no rows: dw = 0, no columns)", "[cuda][fused][rmsnorm]") {
  for (DType dtype : {kFloat32, kFloat64}) {
    check_rms_norm(dtype, 0, 9, Layout2::Contiguous, Layout2::Contiguous, false, true, true);
    check_rms_norm(dtype, 0, 300, Layout2::Contiguous, Layout2::Contiguous, false, true, true);
    check_rms_norm(dtype, 3, 0, Layout2::Contiguous, Layout2::Contiguous, false, true, true);
  }
}

TEST_CASE("rms_norm: the weight gradient is deterministic", "[cuda][fused][rmsnorm]") {
  const Tensor x = on_cuda(randn({333, 17}, Options(kFloat32)));
  const Tensor g = on_cuda(randn({333, 17}, Options(kFloat32)));
  const Tensor w = on_cuda(randn({17}, Options(kFloat32)));
  Tensor y = empty({333, 17}, Options(kFloat32).device(gpu())), r = empty({333}, Options(kFloat32).device(gpu()));
  gpu_be().rms_norm(view(y), view(r), view(x), view(w), 1e-6);
  Tensor dw1 = empty({17}, Options(kFloat32).device(gpu())), dw2 = empty({17}, Options(kFloat32).device(gpu()));
  gpu_be().rms_norm_backward(none(), view(dw1), view(g), view(x), view(w), view(r));
  gpu_be().rms_norm_backward(none(), view(dw2), view(g), view(x), view(w), view(r));
  CHECK(values(dw1) == values(dw2));
}

// ---------------- SwiGLU ----------------

// N-d layouts of an operand of shape s.
enum class LayoutN { Contiguous, Reversed, Stepped, Broadcast };
const char* name(LayoutN l) {
  switch (l) {
    case LayoutN::Contiguous: return "contiguous";
    case LayoutN::Reversed: return "reversed";
    case LayoutN::Stepped: return "stepped";
    case LayoutN::Broadcast: return "broadcast";
  }
  return "?";
}
// Reversed: a base of the reversed shape with its dims permuted back (strides reversed);
// Stepped: every other element of the last dim; Broadcast: the first dim expanded from size 1.
template <class Make>
Twin twin_n(LayoutN l, const Shape& s, Make make) {
  const int nd = s.size();
  switch (l) {
    case LayoutN::Contiguous: return twin(make(s), [](const Tensor& b) { return b; });
    case LayoutN::Reversed: {
      Shape r;
      std::vector<int64_t> perm;
      for (int d = nd - 1; d >= 0; --d) {
        r.push_back(s[d]);
        perm.push_back(d);
      }
      return twin(make(r), [perm](const Tensor& b) { return b.permute(perm); });
    }
    case LayoutN::Stepped: {
      Shape b = s;
      b[nd - 1] = 2 * s[nd - 1];
      const int64_t n = s[nd - 1];
      return twin(make(b), [nd, n](const Tensor& t) { return t.slice(nd - 1, 0, 2 * n, 2); });
    }
    case LayoutN::Broadcast: {
      Shape b = s;
      b[0] = 1;
      return twin(make(b), [s](const Tensor& t) { return t.expand(s); });
    }
  }
  return {};
}

void check_swiglu(DType dtype, const Shape& s, LayoutN in_layout, LayoutN out_layout, bool want_a, bool want_b) {
  INFO(fmt::format("{} shape {} inputs {} outputs {} da {} db {}", dtype, s, name(in_layout), name(out_layout), want_a,
                   want_b));
  const Twin a = twin_n(in_layout == LayoutN::Broadcast ? LayoutN::Contiguous : in_layout, s, randn_of(dtype, 3.0));
  const Twin b = twin_n(in_layout, s, randn_of(dtype));
  const Twin out = twin_n(out_layout, s, sentinel_of(dtype));
  cpu_be().swiglu(view(out.cpu), view(a.cpu), view(b.cpu));
  gpu_be().swiglu(view(out.gpu), view(a.gpu), view(b.gpu));
  expect_twin(out, dtype, "out");

  const Twin g = twin_n(in_layout == LayoutN::Reversed ? LayoutN::Stepped : LayoutN::Reversed, s, randn_of(dtype));
  const Twin da = twin_n(out_layout, s, sentinel_of(dtype));
  const Twin db = twin_n(out_layout == LayoutN::Stepped ? LayoutN::Reversed : LayoutN::Stepped, s, sentinel_of(dtype));
  cpu_be().swiglu_backward(want_a ? view(da.cpu) : none(), want_b ? view(db.cpu) : none(), view(g.cpu), view(a.cpu),
                           view(b.cpu));
  gpu_be().swiglu_backward(want_a ? view(da.gpu) : none(), want_b ? view(db.gpu) : none(), view(g.gpu), view(a.gpu),
                           view(b.gpu));
  expect_twin(da, dtype, "grad_a");
  expect_twin(db, dtype, "grad_b");
  if (!want_a && s.numel() > 0) CHECK(values(da.gpu_base)[0] == kSentinel);
  if (!want_b && s.numel() > 0) CHECK(values(db.gpu_base)[0] == kSentinel);
}

TEST_CASE("swiglu: forward and backward match the CPU (contiguous, strided, broadcast)", "[cuda][fused][swiglu]") {
  const std::vector<Shape> shapes = {{7}, {3, 5}, {2, 3, 33}, {4, 1, 6}, {1027}, {5, 300}};
  for (DType dtype : {kFloat32, kFloat64})
    for (const Shape& s : shapes)
      for (LayoutN l : {LayoutN::Contiguous, LayoutN::Reversed, LayoutN::Stepped, LayoutN::Broadcast})
        check_swiglu(dtype, s, l, l == LayoutN::Broadcast ? LayoutN::Reversed : l, true, true);
}

TEST_CASE("swiglu: gradients with data == nullptr are not computed, empty tensors", "[cuda][fused][swiglu]") {
  for (DType dtype : {kFloat32, kFloat64}) {
    check_swiglu(dtype, {6, 70}, LayoutN::Contiguous, LayoutN::Contiguous, true, false);
    check_swiglu(dtype, {6, 70}, LayoutN::Contiguous, LayoutN::Contiguous, false, true);
    check_swiglu(dtype, {6, 70}, LayoutN::Reversed, LayoutN::Stepped, true, false);
    check_swiglu(dtype, {6, 70}, LayoutN::Stepped, LayoutN::Reversed, false, true);
    check_swiglu(dtype, {6, 70}, LayoutN::Contiguous, LayoutN::Contiguous, false, false);
    check_swiglu(dtype, {0, 4}, LayoutN::Contiguous, LayoutN::Contiguous, true, true);
  }
}

TEST_CASE("swiglu: extreme gates (±100, ±inf) match the CPU", "[cuda][fused][swiglu]") {
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dtype : {kFloat32, kFloat64}) {
    const Tensor a = tensor({-inf, -100, -20, -1e-3, 0, 1e-3, 20, 100, inf}, Options(dtype));
    const Tensor b = tensor({1, 2, -3, 4, 5, -6, 7, 8, 9}, Options(dtype));
    const Tensor g = tensor({0.5, -1, 2, 3, -4, 5, 6, -7, 8}, Options(dtype));
    Tensor o_cpu = empty({9}, Options(dtype)), o_gpu = empty({9}, Options(dtype).device(gpu()));
    Tensor da_cpu = empty({9}, Options(dtype)), da_gpu = empty({9}, Options(dtype).device(gpu()));
    Tensor db_cpu = empty({9}, Options(dtype)), db_gpu = empty({9}, Options(dtype).device(gpu()));
    cpu_be().swiglu(view(o_cpu), view(a), view(b));
    gpu_be().swiglu(view(o_gpu), view(on_cuda(a)), view(on_cuda(b)));
    cpu_be().swiglu_backward(view(da_cpu), view(db_cpu), view(g), view(a), view(b));
    gpu_be().swiglu_backward(view(da_gpu), view(db_gpu), view(on_cuda(g)), view(on_cuda(a)), view(on_cuda(b)));
    expect_close(o_cpu, o_gpu, rtol_for(dtype), atol_for(dtype), "out");
    expect_close(da_cpu, da_gpu, rtol_for(dtype), atol_for(dtype), "grad_a");
    expect_close(db_cpu, db_gpu, rtol_for(dtype), atol_for(dtype), "grad_b");
  }
}

// ---------------- RoPE ----------------

// in [..., T, D] layouts: contiguous; [B, H, T, D] as a transpose of a [B, T, H, D] base; rows
// of a longer T (a slice along T).
enum class RopeLayout { Contiguous, HeadsTransposed, SlicedT };

Twin rope_twin(RopeLayout l, const Shape& s, DType dtype, bool sentinel) {
  auto make = [&](const Shape& b) { return sentinel ? full(b, kSentinel, Options(dtype)) : randn(b, Options(dtype)); };
  const int nd = s.size();
  switch (l) {
    case RopeLayout::Contiguous: return twin(make(s), [](const Tensor& b) { return b; });
    case RopeLayout::HeadsTransposed: {  // s = [B, H, T, D] from base [B, T, H, D]
      Shape b = s;
      std::swap(b[nd - 3], b[nd - 2]);
      return twin(make(b), [nd](const Tensor& t) { return t.transpose(nd - 3, nd - 2); });
    }
    case RopeLayout::SlicedT: {
      Shape b = s;
      b[nd - 2] = s[nd - 2] + 3;
      const int64_t T = s[nd - 2];
      return twin(make(b), [nd, T](const Tensor& t) { return t.slice(nd - 2, 2, 2 + T); });
    }
  }
  return {};
}

struct RopeTables {
  Tensor cos, sin;
};
RopeTables rope_tables(int64_t P, int64_t half, DType dtype) {
  std::vector<double> c(static_cast<size_t>(P * half)), s(c.size());
  for (int64_t p = 0; p < P; ++p)
    for (int64_t k = 0; k < half; ++k) {
      const double angle = double(p) * std::pow(10000.0, -2.0 * double(k) / double(2 * half));
      c[p * half + k] = std::cos(angle);
      s[p * half + k] = std::sin(angle);
    }
  return {tensor(c, Shape{P, half}, Options(dtype)), tensor(s, Shape{P, half}, Options(dtype))};
}

void check_rope(DType dtype, const Shape& s, RopeLayout in_layout, RopeLayout out_layout, DType pos_type,
                bool strided_positions, bool inverse) {
  INFO(fmt::format("{} shape {} in {} out {} positions {} {} inverse {}", dtype, s, int(in_layout), int(out_layout),
                   pos_type, strided_positions ? "strided" : "contiguous", inverse));
  const int nd = s.size();
  const int64_t T = s[nd - 2], half = s[nd - 1] / 2, P = T + 5;
  const RopeTables tab = rope_tables(P, half, dtype);
  const Tensor c_gpu = on_cuda(tab.cos), s_gpu = on_cuda(tab.sin);
  std::mt19937 rng(static_cast<uint32_t>(T * 17 + half));
  std::vector<int64_t> pos(static_cast<size_t>(2 * T));
  for (int64_t& p : pos) p = static_cast<int64_t>(rng() % static_cast<uint32_t>(P));
  const Twin positions =
      strided_positions
          ? twin(from_vector<int64_t>(pos, Shape{2 * T}).to(pos_type), [T](const Tensor& b) { return b.slice(0, 1, 2 * T, 2); })
          : twin(from_vector<int64_t>(std::vector<int64_t>(pos.begin(), pos.begin() + T), Shape{T}).to(pos_type),
                 [](const Tensor& b) { return b; });
  const Twin in = rope_twin(in_layout, s, dtype, false);
  const Twin out = rope_twin(out_layout, s, dtype, true);
  cpu_be().rope(view(out.cpu), view(in.cpu), view(tab.cos), view(tab.sin), view(positions.cpu), inverse);
  gpu_be().rope(view(out.gpu), view(in.gpu), view(c_gpu), view(s_gpu), view(positions.gpu), inverse);
  expect_twin(out, dtype, "out");
}

TEST_CASE("rope: rotation and inverse match the CPU (contiguous and strided, both dtypes)", "[cuda][fused][rope]") {
  const std::vector<Shape> shapes = {{5, 8}, {2, 3, 7, 6}, {1, 4, 1, 2}, {2, 2, 9, 64}, {3, 2, 33, 10}};
  for (DType dtype : {kFloat32, kFloat64})
    for (const Shape& s : shapes)
      for (RopeLayout l : {RopeLayout::Contiguous, RopeLayout::HeadsTransposed, RopeLayout::SlicedT}) {
        if (l == RopeLayout::HeadsTransposed && s.size() < 4) continue;
        for (bool inverse : {false, true})
          check_rope(dtype, s, l, inverse ? RopeLayout::Contiguous : l, s[0] % 2 == 0 ? kInt64 : kInt32,
                     l == RopeLayout::SlicedT, inverse);
      }
}

TEST_CASE("rope: inverse undoes the rotation on the GPU, T = 0 writes nothing", "[cuda][fused][rope]") {
  const RopeTables tab = rope_tables(12, 4, kFloat64);
  const Tensor x = on_cuda(randn({3, 10, 8}, Options(kFloat64)));
  const Tensor pos = on_cuda(from_vector<int32_t>({0, 11, 3, 3, 5, 7, 1, 2, 9, 10}, Shape{10}));
  Tensor y = empty({3, 10, 8}, Options(kFloat64).device(gpu())), z = empty({3, 10, 8}, Options(kFloat64).device(gpu()));
  gpu_be().rope(view(y), view(x), view(on_cuda(tab.cos)), view(on_cuda(tab.sin)), view(pos), false);
  gpu_be().rope(view(z), view(y), view(on_cuda(tab.cos)), view(on_cuda(tab.sin)), view(pos), true);
  expect_close(x, z, 1e-14, 1e-14, "inverse(rotate(x))");
  CHECK(values(y) != values(x));

  const Tensor e = on_cuda(empty({2, 0, 8}, Options(kFloat64)));
  Tensor eo = empty({2, 0, 8}, Options(kFloat64).device(gpu()));
  CHECK_NOTHROW(gpu_be().rope(view(eo), view(e), view(on_cuda(tab.cos)), view(on_cuda(tab.sin)),
                              view(on_cuda(empty({0}, Options(kInt64)))), false));
  CHECK_NOTHROW(gpu_be().synchronize());
}

TEST_CASE("rope: a position outside the table raises at the next synchronisation, naming the op", "[cuda][fused][rope]") {
  const RopeTables tab = rope_tables(6, 2, kFloat32);
  for (int64_t bad : {6, -2}) {
    INFO("bad position " << bad);
    const Tensor x = on_cuda(randn({2, 4, 4}, Options(kFloat32)));
    const Tensor pos = on_cuda(from_vector<int64_t>({0, 1, bad, 5}, Shape{4}));
    Tensor y = on_cuda(full({2, 4, 4}, kSentinel, Options(kFloat32)));
    CHECK_NOTHROW(gpu_be().rope(view(y), view(x), view(on_cuda(tab.cos)), view(on_cuda(tab.sin)), view(pos), false));
    CHECK_THROWS_WITH(values(y), Catch::Contains("rope") && Catch::Contains("index " + std::to_string(bad)));
    // the rows at that position were not written; the others were
    const std::vector<double> v = values(y);
    for (int64_t b = 0; b < 2; ++b) {
      CHECK(v[static_cast<size_t>(b * 16 + 2 * 4)] == kSentinel);
      CHECK(v[static_cast<size_t>(b * 16 + 1 * 4)] != kSentinel);
    }
  }
}

}  // namespace
