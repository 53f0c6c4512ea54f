// test_fused_ops.cpp — the fused Transformer ops (cross_entropy, rms_norm, swiglu) against
// the compositions they replace: values and gradients in float32 and float64, many shapes (V not a
// multiple of 16, rows longer than the kernel's chunk), logits of ±1e4, ignored rows,
// non-contiguous inputs, bad inputs, and the nn modules that now run them.
// (Finite-difference gradchecks of the three ops are samples in tests/gradcheck_samples.h.)
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "autograd/tapegrad.h"
#include "kernels/backend.h"
#include "nn/loss.h"
#include "nn/rmsnorm.h"
#include "nn/swiglu.h"

using namespace tapegrad;

namespace {

// |a − b| ≤ atol + rtol·|b| for every element (b the reference); the message names the worst one.
struct Close {
  bool ok = true;
  std::string where;
};
Close close(const Tensor& a, const Tensor& b, double atol, double rtol) {
  if (a.shape() != b.shape()) return {false, fmt::format("shapes {} vs {}", a.shape(), b.shape())};
  const auto av = a.to_vector<double>(), bv = b.to_vector<double>();
  Close c;
  double worst = 0;
  for (size_t i = 0; i < av.size(); ++i) {
    if (av[i] == bv[i] || (std::isnan(av[i]) && std::isnan(bv[i]))) continue;
    const double ratio = std::abs(av[i] - bv[i]) / (atol + rtol * std::abs(bv[i]));
    if (!(ratio <= 1.0) && (c.ok || ratio > worst)) {
      c.ok = false;
      worst = ratio;
      c.where = fmt::format("element {}: {:.10g} vs reference {:.10g}", i, av[i], bv[i]);
    }
  }
  return c;
}
#define CHECK_CLOSE(a, b, atol, rtol)          \
  do {                                         \
    const Close c_ = close((a), (b), atol, rtol); \
    INFO(c_.where);                            \
    CHECK(c_.ok);                              \
  } while (0)

// Fresh leaves with the same values and layout as `xs` (constants stay shared).
std::vector<Tensor> fresh(const std::vector<Tensor>& xs) {
  std::vector<Tensor> out;
  for (const Tensor& x : xs) {
    if (!x.requires_grad()) {
      out.push_back(x);
      continue;
    }
    Tensor y = x.detach().clone();
    if (!x.is_contiguous()) {  // keep a transposed 2-D leaf transposed
      REQUIRE(x.dim() == 2);
      y = x.detach().t().contiguous().t();
    }
    y.requires_grad_();
    out.push_back(y);
  }
  return out;
}

struct Run {
  Tensor y;
  std::vector<Tensor> grads;
};
// y = fn(inputs), then backward of Σ y·w for a fixed random w; the gradients of the inputs that require grad.
template <class Fn>
Run run(Fn fn, const std::vector<Tensor>& inputs, uint64_t seed = 99) {
  std::vector<Tensor> in = fresh(inputs);
  Run r;
  r.y = fn(in);
  Generator g(seed);
  Tensor w = randn(r.y.shape(), Options(r.y.dtype()), &g);
  sum(r.y * w).backward();
  for (const Tensor& x : in)
    if (x.requires_grad()) r.grads.push_back(x.grad());
  return r;
}

Tensor randn_leaf(const Shape& s, DType dt, uint64_t seed, double scale = 1.0) {
  Generator g(seed);
  Tensor t = mul(randn(s, Options(kFloat64), &g), scale).to(dt);
  t.requires_grad_();
  return t;
}

// Targets in [0, V) with every `ignore_every`-th row set to ignore_index.
Tensor targets_for(int64_t N, int64_t V, uint64_t seed, int64_t ignore_every = 0, int64_t ignore_index = -100) {
  Generator g(seed);
  std::vector<int64_t> t(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) {
    t[i] = static_cast<int64_t>(g.below(static_cast<uint64_t>(V)));
    if (ignore_every > 0 && i % ignore_every == 1) t[i] = ignore_index;
  }
  return from_vector<int64_t>(t, {N});
}

kernels::TensorView view_of(const Tensor& t) { return {t.data_ptr(), t.dtype(), t.shape(), t.strides()}; }

const char* name(DType d) { return d == kFloat32 ? "float32" : "float64"; }

}  // namespace

// ---------------------------------------------------------------- cross-entropy

TEST_CASE("fused cross-entropy matches the composition: values and gradients", "[fused]") {
  struct Case {
    int64_t N, V;
    double scale;
    int64_t ignore_every;
  };
  const std::vector<Case> cases = {{1, 1, 1.0, 0},   {3, 5, 1.0, 0},   {7, 17, 3.0, 3},   {16, 33, 1.0, 4},
                                   {5, 2049, 2.0, 2}, {4, 4100, 1.0, 0}, {33, 100, 10.0, 5}, {2, 10000, 1.0, 0},
                                   {256, 1000, 1.0, 7}};  // the last one runs on several threads when there are
  for (DType dt : {kFloat32, kFloat64}) {
    for (const Case& c : cases) {
      INFO(name(dt) << " N " << c.N << " V " << c.V << " scale " << c.scale);
      const Tensor x = randn_leaf({c.N, c.V}, dt, 1000 + c.V, c.scale);
      const Tensor t = targets_for(c.N, c.V, 7 + c.N, c.ignore_every);
      const Run fused = run([&](const auto& in) { return cross_entropy(in[0], t); }, {x});
      const Run ref = run([&](const auto& in) { return nn::cross_entropy_reference(in[0], t); }, {x});
      CHECK(fused.y.dtype() == dt);
      CHECK(fused.y.dim() == 0);
      if (dt == kFloat32) {
        CHECK_CLOSE(fused.y, ref.y, 0.0, 1e-6);
        CHECK_CLOSE(fused.grads[0], ref.grads[0], 1e-8, 1e-5);
      } else {
        CHECK_CLOSE(fused.y, ref.y, 0.0, 1e-13);
        CHECK_CLOSE(fused.grads[0], ref.grads[0], 1e-15, 1e-12);
      }
    }
  }
}

TEST_CASE("fused cross-entropy in float32 is as exact as float64 allows, also for logits of 1e4", "[fused]") {
  for (double scale : {1.0, 30.0, 1e4}) {
    INFO("logits scale " << scale);
    const int64_t N = 64, V = 1001;
    const Tensor x32 = randn_leaf({N, V}, kFloat32, 5, scale);
    const Tensor x64 = x32.detach().to(kFloat64).requires_grad_();  // the same values, exactly
    const Tensor t = targets_for(N, V, 6, 9);
    const Run f32 = run([&](const auto& in) { return cross_entropy(in[0], t); }, {x32});
    const Run f64 = run([&](const auto& in) { return nn::cross_entropy_reference(in[0], t); }, {x64});
    CHECK(std::isfinite(f32.y.item()));
    CHECK_CLOSE(f32.y.to(kFloat64), f64.y, 0.0, 1e-6);
    // softmax − onehot: each element within float32 rounding of the float64 one
    CHECK_CLOSE(f32.grads[0].to(kFloat64), f64.grads[0], 1e-9, 1e-5);
    // and the float32 composition agrees to ~1e-6 relative too
    const Run c32 = run([&](const auto& in) { return nn::cross_entropy_reference(in[0], t); }, {x32});
    CHECK_CLOSE(f32.y, c32.y, 0.0, 2e-6);
  }
  // ±1e4 in one row: exact answer 1 + log(1 + e⁻¹) for the target 1e4 − 1
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor big = tensor({1e4, -1e4, 0.0, 1e4 - 1}, {1, 4}, dt);
    big.requires_grad_();
    Tensor loss = cross_entropy(big, from_vector<int64_t>({3}, {1}));
    CHECK(loss.item() == Approx(1.0 + std::log1p(std::exp(-1.0))).epsilon(dt == kFloat32 ? 1e-6 : 1e-12));
    loss.backward();
    const auto g = big.grad().to_vector<double>();
    const double p0 = 1.0 / (1.0 + std::exp(-1.0));  // softmax of the 1e4 entry
    CHECK(g[0] == Approx(p0).epsilon(1e-6));
    CHECK(g[1] == 0.0);
    CHECK(g[2] == 0.0);
    CHECK(g[3] == Approx(1.0 - p0 - 1.0).epsilon(1e-5));
  }
}

TEST_CASE("fused cross-entropy on non-contiguous logits", "[fused]") {
  for (DType dt : {kFloat32, kFloat64}) {
    INFO(name(dt));
    const double rtol = dt == kFloat32 ? 1e-6 : 1e-13, gtol = dt == kFloat32 ? 1e-5 : 1e-12;
    const Tensor t = targets_for(6, 19, 3, 4);
    // transposed: a [19, 6] buffer seen as [6, 19] (column stride 6)
    Tensor xt = randn_leaf({19, 6}, dt, 11).detach().t();
    xt.requires_grad_();
    const Run f = run([&](const auto& in) { return cross_entropy(in[0], t); }, {xt});
    const Run r = run([&](const auto& in) { return nn::cross_entropy_reference(in[0], t); }, {xt});
    CHECK_CLOSE(f.y, r.y, 0.0, rtol);
    CHECK_CLOSE(f.grads[0], r.grads[0], 1e-12, gtol);
    // row stride larger than V (a narrowed view of wider rows), inside fn so the gradient flows through narrow
    const Tensor wide = randn_leaf({6, 40}, dt, 12);
    const Run fn = run([&](const auto& in) { return cross_entropy(in[0].narrow(1, 3, 19), t); }, {wide});
    const Run rn = run([&](const auto& in) { return nn::cross_entropy_reference(in[0].narrow(1, 3, 19), t); }, {wide});
    CHECK_CLOSE(fn.y, rn.y, 0.0, rtol);
    CHECK_CLOSE(fn.grads[0], rn.grads[0], 1e-12, gtol);
  }
}

TEST_CASE("fused cross-entropy: ignore_index rows get zero gradient, all ignored is NaN", "[fused]") {
  Tensor x = randn_leaf({4, 6}, kFloat64, 21);
  const Tensor t = from_vector<int64_t>({2, 7, 7, 0}, {4});  // ignore_index 7 (≥ V: allowed as the ignore value)
  Tensor loss = cross_entropy(x, t, 7);
  loss.backward();
  const auto g = x.grad().to_vector<double>();
  for (int j = 0; j < 6; ++j) {
    CHECK(g[6 + j] == 0.0);
    CHECK(g[12 + j] == 0.0);
  }
  double row0 = 0;
  for (int j = 0; j < 6; ++j) row0 += g[j];
  CHECK(std::abs(row0) < 1e-15);  // Σ_j (p_j − onehot_j) = 0
  // every row ignored: NaN (0/0) like the composition, and zero gradients
  Tensor y = randn_leaf({3, 5}, kFloat32, 22);
  const Tensor all = from_vector<int64_t>({-100, -100, -100}, {3});
  Tensor nan_loss = cross_entropy(y, all);
  CHECK(std::isnan(nan_loss.item()));
  CHECK(std::isnan(nn::cross_entropy_reference(y, all).item()));
  nan_loss.backward();
  for (double v : y.grad().to_vector<double>()) CHECK(v == 0.0);
  // a NaN logit makes its row's loss NaN, as in the composition; −inf logits (masked classes) are fine
  for (DType dt : {kFloat32, kFloat64}) {
    const double inf = std::numeric_limits<double>::infinity();
    const Tensor t2 = from_vector<int64_t>({0, 1}, {2});
    CHECK(std::isnan(cross_entropy(tensor({0.5, std::nan(""), 1.0, 2.0}, {2, 2}, dt), t2).item()));
    CHECK(std::isnan(nn::cross_entropy_reference(tensor({0.5, std::nan(""), 1.0, 2.0}, {2, 2}, dt), t2).item()));
    // a NaN in a first chunk that holds nothing else, then finite logits: still NaN
    std::vector<double> row(5000, 0.25);
    row[3] = std::nan("");
    for (int j = 0; j < 2048; ++j)
      if (j != 3) row[j] = -inf;
    CHECK(std::isnan(cross_entropy(tensor(row, {1, 5000}, dt), from_vector<int64_t>({4000}, {1})).item()));
    const Tensor masked = tensor({0.5, -inf, -inf, 2.0}, {2, 2}, dt);
    CHECK(cross_entropy(masked, t2).item() == 0.0);
    CHECK(nn::cross_entropy_reference(masked, t2).item() == 0.0);
  }
}

TEST_CASE("fused cross-entropy: bad targets and inputs are errors, and nothing is written", "[fused]") {
  const Tensor x = randn_leaf({3, 5}, kFloat32, 31);
  CHECK_THROWS_WITH(cross_entropy(x, from_vector<int64_t>({1, 5, 0}, {3})), Catch::Contains("out of range"));
  CHECK_THROWS_WITH(cross_entropy(x, from_vector<int64_t>({1, -1, 0}, {3})), Catch::Contains("out of range"));
  CHECK_THROWS_AS(cross_entropy(x, from_vector<int64_t>({1, 2}, {2})), Error);              // wrong N
  CHECK_THROWS_AS(cross_entropy(x, tensor({1, 2, 0}, {3}, kFloat32)), Error);             // float targets
  CHECK_THROWS_AS(cross_entropy(x.reshape({3, 5, 1}), from_vector<int64_t>({1, 2, 0}, {3})), Error);  // 3-D
  CHECK_THROWS_AS(cross_entropy(from_vector<int64_t>({1, 2}, {1, 2}), from_vector<int64_t>({0}, {1})), Error);
  // the kernel checks every target before it writes: loss and lse keep their values
  Tensor loss = full({}, 7.0, kFloat32), lse = full({3}, 7.0, kFloat64);
  const Tensor bad = from_vector<int64_t>({1, 2, 9}, {3});
  CHECK_THROWS_WITH(kernels::backend(Device::cpu()).cross_entropy(view_of(loss), view_of(lse), view_of(x), view_of(bad), -100),
                    Catch::Contains("target 9 of row 2 is out of range [0, 5)"));
  CHECK(loss.item() == 7.0);
  for (double v : lse.to_vector<double>()) CHECK(v == 7.0);
  // nn::cross_entropy keeps its errors
  CHECK_THROWS_WITH(nn::cross_entropy(x, from_vector<int64_t>({1, 5, 0}, {3})), Catch::Contains("out of range"));
  CHECK_THROWS_AS(nn::cross_entropy(x, from_vector<int64_t>({1, 2}, {2})), Error);
}

TEST_CASE("nn::cross_entropy runs the fused op and matches its reference on [B, T, V]", "[fused][nn]") {
  for (DType dt : {kFloat32, kFloat64}) {
    INFO(name(dt));
    const Tensor x = randn_leaf({2, 3, 37}, dt, 41, 4.0);
    const Tensor t = from_vector<int64_t>({1, 36, -100, 0, 5, 20}, {2, 3});
    const Run f = run([&](const auto& in) { return nn::cross_entropy(in[0], t); }, {x});
    const Run r = run([&](const auto& in) { return nn::cross_entropy_reference(in[0], t); }, {x});
    CHECK_CLOSE(f.y, r.y, 0.0, dt == kFloat32 ? 1e-6 : 1e-13);
    CHECK_CLOSE(f.grads[0], r.grads[0], 1e-12, dt == kFloat32 ? 1e-5 : 1e-12);
    bool fused_on_tape = false;
    const Tensor loss = nn::cross_entropy(x, t);  // alive while its tape entries are read
    for (const Node* n : tape_entries(loss))
      fused_on_tape = fused_on_tape || std::string(n->name()) == "cross_entropy";
    CHECK(fused_on_tape);
  }
}

// ---------------------------------------------------------------- RMSNorm

TEST_CASE("fused rms_norm matches the composition: values and gradients", "[fused]") {
  const std::vector<Shape> shapes = {{1, 1}, {3, 5}, {2, 3, 17}, {4, 512}, {7, 1000}, {9}, {64, 600}};
  for (DType dt : {kFloat32, kFloat64}) {
    for (const Shape& s : shapes) {
      INFO(name(dt) << " x " << fmt::format("{}", s));
      const int64_t C = s[s.size() - 1];
      const Tensor x = randn_leaf(s, dt, 100 + C, 2.0);
      const Tensor w = randn_leaf({C}, dt, 200 + C);
      auto composition = [](const Tensor& xv, const Tensor& wv, double eps) {
        return xv * rsqrt(mean(xv * xv, {-1}, true) + eps) * wv;
      };
      const Run f = run([&](const auto& in) { return rms_norm(in[0], in[1], 1e-5); }, {x, w});
      const Run r = run([&](const auto& in) { return composition(in[0], in[1], 1e-5); }, {x, w});
      const double tol = dt == kFloat32 ? 1e-5 : 1e-12;
      CHECK_CLOSE(f.y, r.y, tol, tol);
      CHECK_CLOSE(f.grads[0], r.grads[0], tol, tol);
      CHECK_CLOSE(f.grads[1], r.grads[1], tol * 10, tol);  // dweight sums over rows
    }
  }
}

TEST_CASE("fused rms_norm on non-contiguous inputs and with one input requiring grad", "[fused]") {
  for (DType dt : {kFloat32, kFloat64}) {
    INFO(name(dt));
    const double tol = dt == kFloat32 ? 1e-5 : 1e-12;
    auto composition = [](const Tensor& xv, const Tensor& wv) { return xv * rsqrt(mean(xv * xv, {-1}, true) + 1e-5) * wv; };
    // a transposed [5, 7] leaf (column stride 5) and a permuted 3-D tensor whose rows cannot be merged
    Tensor xt = randn_leaf({7, 5}, dt, 51).detach().t();
    xt.requires_grad_();
    const Tensor w = randn_leaf({7}, dt, 52);
    {
      const Run f = run([&](const auto& in) { return rms_norm(in[0], in[1], 1e-5); }, {xt, w});
      const Run r = run([&](const auto& in) { return composition(in[0], in[1]); }, {xt, w});
      CHECK_CLOSE(f.y, r.y, tol, tol);
      CHECK_CLOSE(f.grads[0], r.grads[0], tol, tol);
      CHECK_CLOSE(f.grads[1], r.grads[1], tol, tol);
    }
    {
      const Tensor x3 = randn_leaf({4, 3, 7}, dt, 53);
      auto perm = [](const Tensor& t) { return t.permute({1, 0, 2}); };  // [3, 4, 7], rows not mergeable
      const Run f = run([&](const auto& in) { return rms_norm(perm(in[0]), in[1], 1e-5); }, {x3, w});
      const Run r = run([&](const auto& in) { return composition(perm(in[0]), in[1]); }, {x3, w});
      CHECK_CLOSE(f.y, r.y, tol, tol);
      CHECK_CLOSE(f.grads[0], r.grads[0], tol, tol);
      CHECK_CLOSE(f.grads[1], r.grads[1], tol, tol);
    }
    {  // only x / only the weight
      const Tensor wc = w.detach();
      const Run f = run([&](const auto& in) { return rms_norm(in[0], wc, 1e-5); }, {xt});
      const Run r = run([&](const auto& in) { return composition(in[0], wc); }, {xt});
      CHECK_CLOSE(f.grads[0], r.grads[0], tol, tol);
      const Tensor xc = xt.detach();
      const Run fw = run([&](const auto& in) { return rms_norm(xc, in[0], 1e-5); }, {w});
      const Run rw = run([&](const auto& in) { return composition(xc, in[0]); }, {w});
      CHECK_CLOSE(fw.grads[0], rw.grads[0], tol, tol);
    }
  }
}

TEST_CASE("fused rms_norm and cross-entropy give the same bits on 1 and 2 threads, and rms_norm errors", "[fused]") {
  const Tensor x = randn_leaf({300, 384}, kFloat32, 61);
  const Tensor w = randn_leaf({384}, kFloat32, 62);
  const int before = num_threads();
  set_num_threads(1);
  const Run one = run([&](const auto& in) { return rms_norm(in[0], in[1], 1e-5); }, {x, w});
  set_num_threads(2);
  const Run two = run([&](const auto& in) { return rms_norm(in[0], in[1], 1e-5); }, {x, w});
  set_num_threads(before);
  CHECK(one.grads[1].to_vector<float>() == two.grads[1].to_vector<float>());
  CHECK(one.grads[0].to_vector<float>() == two.grads[0].to_vector<float>());
  // the cross-entropy mean is summed in row order: the same bits too
  const Tensor logits = randn_leaf({512, 700}, kFloat32, 64);
  const Tensor t = targets_for(512, 700, 65, 5);
  set_num_threads(1);
  const Run ce1 = run([&](const auto& in) { return cross_entropy(in[0], t); }, {logits});
  set_num_threads(2);
  const Run ce2 = run([&](const auto& in) { return cross_entropy(in[0], t); }, {logits});
  set_num_threads(before);
  CHECK(ce1.y.item() == ce2.y.item());
  CHECK(ce1.grads[0].to_vector<float>() == ce2.grads[0].to_vector<float>());

  const Tensor x64 = randn_leaf({2, 4}, kFloat64, 63);
  CHECK_THROWS_AS(rms_norm(x64, ones({5}, kFloat64), 1e-5), Error);          // wrong C
  CHECK_THROWS_AS(rms_norm(x64, ones({4}, kFloat32), 1e-5), Error);          // dtype mismatch
  CHECK_THROWS_AS(rms_norm(x64, ones({1, 4}, kFloat64), 1e-5), Error);       // weight not 1-D
  CHECK_THROWS_AS(rms_norm(scalar_tensor(1.0, kFloat64), ones({1}, kFloat64), 1e-5), Error);  // 0-d
  CHECK_THROWS_AS(rms_norm(from_vector<int64_t>({1, 2}, {1, 2}), from_vector<int64_t>({1, 1}, {2}), 1e-5), Error);
  CHECK_THROWS_AS(rms_norm(x64, ones({4}, kFloat64), -1.0), Error);          // negative eps
}

// ---------------------------------------------------------------- SwiGLU gate

TEST_CASE("fused swiglu matches silu(a) * b: values and gradients", "[fused]") {
  const std::vector<Shape> shapes = {{}, {7}, {3, 33}, {2, 5, 17}, {64, 1000}};
  for (DType dt : {kFloat32, kFloat64}) {
    for (const Shape& s : shapes) {
      INFO(name(dt) << " " << fmt::format("{}", s));
      const Tensor a = randn_leaf(s, dt, 300 + s.numel(), 3.0), b = randn_leaf(s, dt, 400 + s.numel());
      const Run f = run([&](const auto& in) { return swiglu(in[0], in[1]); }, {a, b});
      const Run r = run([&](const auto& in) { return silu(in[0]) * in[1]; }, {a, b});
      CHECK_CLOSE(f.y, r.y, 0.0, 0.0);  // the same functor: bit-identical
      CHECK_CLOSE(f.grads[0], r.grads[0], 0.0, 0.0);
      CHECK_CLOSE(f.grads[1], r.grads[1], 0.0, 0.0);
    }
  }
}

TEST_CASE("fused swiglu on non-contiguous inputs and with one input requiring grad", "[fused]") {
  for (DType dt : {kFloat32, kFloat64}) {
    INFO(name(dt));
    const double tol = dt == kFloat32 ? 1e-6 : 1e-14;
    Tensor at = randn_leaf({9, 6}, dt, 71).detach().t();  // [6, 9], column stride 6
    at.requires_grad_();
    const Tensor b = randn_leaf({6, 9}, dt, 72);
    {
      const Run f = run([&](const auto& in) { return swiglu(in[0], in[1]); }, {at, b});
      const Run r = run([&](const auto& in) { return silu(in[0]) * in[1]; }, {at, b});
      CHECK_CLOSE(f.y, r.y, tol, tol);
      CHECK_CLOSE(f.grads[0], r.grads[0], tol, tol);
      CHECK_CLOSE(f.grads[1], r.grads[1], tol, tol);
    }
    {  // step-2 slices of wider leaves, output transposed (a strided incoming gradient)
      const Tensor aw = randn_leaf({6, 18}, dt, 73), bw = randn_leaf({6, 18}, dt, 74);
      auto sl = [](const Tensor& t) { return t.slice(1, 0, 18, 2); };
      const Run f = run([&](const auto& in) { return swiglu(sl(in[0]), sl(in[1])).t(); }, {aw, bw});
      const Run r = run([&](const auto& in) { return (silu(sl(in[0])) * sl(in[1])).t(); }, {aw, bw});
      CHECK_CLOSE(f.y, r.y, tol, tol);
      CHECK_CLOSE(f.grads[0], r.grads[0], tol, tol);
      CHECK_CLOSE(f.grads[1], r.grads[1], tol, tol);
    }
    {  // only a / only b
      const Tensor bc = b.detach(), ac = at.detach();
      const Run fa = run([&](const auto& in) { return swiglu(in[0], bc); }, {at});
      const Run ra = run([&](const auto& in) { return silu(in[0]) * bc; }, {at});
      CHECK_CLOSE(fa.grads[0], ra.grads[0], tol, tol);
      const Run fb = run([&](const auto& in) { return swiglu(ac, in[0]); }, {b});
      const Run rb = run([&](const auto& in) { return silu(ac) * in[0]; }, {b});
      CHECK_CLOSE(fb.grads[0], rb.grads[0], tol, tol);
    }
  }
  CHECK_THROWS_AS(swiglu(ones({2, 3}), ones({3})), Error);                  // no broadcasting
  CHECK_THROWS_AS(swiglu(ones({2, 3}), ones({2, 3}, kFloat64)), Error);     // dtype mismatch
  CHECK_THROWS_AS(swiglu(from_vector<int64_t>({1}, {1}), from_vector<int64_t>({1}, {1})), Error);
}

// ---------------------------------------------------------------- the nn modules

TEST_CASE("nn::RMSNorm and nn::SwiGLU run the fused ops and match their compositions", "[fused][nn]") {
  for (DType dt : {kFloat32, kFloat64}) {
    INFO(name(dt));
    const double tol = dt == kFloat32 ? 2e-5 : 1e-12;
    Generator g(81);
    nn::RMSNorm norm(12, 1e-5, dt);
    {
      NoGradGuard ng;
      norm.weight.copy_(randn({12}, Options(dt), &g));
    }
    nn::SwiGLU ffn(12, 20, dt, &g);
    const Tensor x = randn_leaf({2, 5, 12}, dt, 82);
    auto grads_of = [&](auto fwd) {
      for (Tensor& p : norm.parameters()) p.zero_grad();
      for (Tensor& p : ffn.parameters()) p.zero_grad();
      Tensor xi = x.detach().clone().requires_grad_();
      Tensor y = fwd(xi);
      Generator wg(83);
      sum(y * randn(y.shape(), Options(dt), &wg)).backward();
      std::vector<Tensor> out = {y, xi.grad(), norm.weight.grad()};
      for (Tensor& p : ffn.parameters()) out.push_back(p.grad());
      return out;
    };
    const auto f = grads_of([&](const Tensor& xi) { return ffn(norm(xi)); });
    const auto r = grads_of([&](const Tensor& xi) { return ffn.forward_reference(norm.forward_reference(xi)); });
    REQUIRE(f.size() == r.size());
    for (size_t i = 0; i < f.size(); ++i) {
      INFO("output/gradient " << i);
      CHECK_CLOSE(f[i], r[i], tol, tol);
    }
    std::vector<std::string> names;
    const Tensor y = ffn(norm(x));  // alive while its tape entries are read
    for (const Node* n : tape_entries(y)) names.emplace_back(n->name());
    CHECK(std::count(names.begin(), names.end(), "rms_norm") == 1);
    CHECK(std::count(names.begin(), names.end(), "swiglu") == 1);
  }
}
