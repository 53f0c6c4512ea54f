// test_fused_attention.cpp — the fused attention-side ops (rope, causal_attention) and the
// modules that run them, against their compositions (nn RotaryEmbedding::forward_reference,
// CausalSelfAttention::forward_reference): values and every gradient, float32 and float64, several
// query blocks (T > 64, not a multiple of 64), grouped-query heads, strided inputs, bad inputs.
// (Finite-difference gradchecks of both ops are samples in tests/gradcheck_samples.h.)
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/error.h"
#include "nn/attention.h"
#include "nn/rope.h"

using namespace tapegrad;

namespace {

// max |a − b| / (atol + rtol·|b|) over all elements (≤ 1 means close); b is the reference.
double worst_ratio(const Tensor& a, const Tensor& b, double atol, double rtol) {
  REQUIRE(a.shape() == b.shape());
  const auto av = a.to_vector<double>(), bv = b.to_vector<double>();
  double worst = 0;
  for (size_t i = 0; i < av.size(); ++i) {
    const double r = std::abs(av[i] - bv[i]) / (atol + rtol * std::abs(bv[i]));
    worst = std::isnan(r) ? INFINITY : std::max(worst, r);
  }
  return worst;
}

Tensor leaf(const Shape& s, DType dtype, Generator& g, double scale = 1.0) {
  return (randn(s, Options(dtype), &g) * scale).detach().requires_grad_(true);
}
Tensor fresh_copy(const Tensor& x) { return x.detach().clone().requires_grad_(true); }

// y = f(inputs); loss = Σ y ⊙ w for a fixed random w, backward; returns y and the input grads.
template <class F>
std::pair<Tensor, std::vector<Tensor>> run(F f, const std::vector<Tensor>& inputs, const Tensor& w) {
  Tensor y = f(inputs);
  (y * w).sum().backward();
  std::vector<Tensor> grads;
  for (const Tensor& x : inputs) grads.push_back(x.grad());
  return {y, grads};
}

}  // namespace

TEST_CASE("fused rope equals the RoPE composition, values and gradient", "[fused][rope]") {
  for (DType dt : {kFloat64, kFloat32}) {
    const double tol = dt == kFloat64 ? 1e-12 : 1e-5;
    Generator g(11);
    nn::RotaryEmbedding rope(10000.0, 8, 40, dt);
    // [B, T, H, D] viewed as [B, H, T, D] (the head split), positions not in order
    Tensor base = leaf({2, 5, 3, 8}, dt, g);
    Tensor pos = from_vector<int64_t>({7, 0, 39, 3, 12}, {5});
    Tensor w = randn({2, 3, 5, 8}, Options(dt), &g);
    auto fused = run([&](const std::vector<Tensor>& in) { return rope.forward(in[0].transpose(1, 2), pos); },
                     {base}, w);
    Tensor base2 = fresh_copy(base);
    auto ref = run([&](const std::vector<Tensor>& in) { return rope.forward_reference(in[0].transpose(1, 2), pos); },
                   {base2}, w);
    CHECK(worst_ratio(fused.first, ref.first, tol, tol) <= 1);
    CHECK(worst_ratio(fused.second[0], ref.second[0], tol, tol) <= 1);
  }
}

TEST_CASE("fused rope rejects positions outside the table and bad tables", "[fused][rope]") {
  nn::RotaryEmbedding rotary(10000.0, 4, 6);
  Tensor x = zeros({1, 7, 4});
  CHECK_THROWS_WITH(rotary.forward(x, arange(7.0)), Catch::Contains("outside the table"));
  CHECK_THROWS_WITH(rope(zeros({3, 4}), zeros({6, 3}), zeros({6, 3}), arange(3.0)),
                    Catch::Contains("must both be [P, D/2]"));
  CHECK_THROWS_WITH(rope(zeros({3, 5}), zeros({6, 2}), zeros({6, 2}), arange(3.0)),
                    Catch::Contains("D even"));
  CHECK_THROWS_WITH(rope(zeros({3, 4}), zeros({6, 2}), zeros({6, 2}), arange(2.0)),
                    Catch::Contains("positions must be"));
}

TEST_CASE("fused causal_attention equals masked softmax attention, values and gradients", "[fused][attention]") {
  struct Case {
    int64_t B, H, Hkv, T, D;
  };
  // T = 1; T < 64; T = 64 (one full block); T = 150 (three blocks, the last partial); GQA
  for (const Case c : {Case{1, 1, 1, 1, 4}, Case{2, 3, 3, 17, 8}, Case{1, 2, 2, 64, 16}, Case{2, 4, 2, 150, 8},
                       Case{1, 6, 1, 70, 4}}) {
    for (DType dt : {kFloat64, kFloat32}) {
      INFO("B " << c.B << " H " << c.H << " Hkv " << c.Hkv << " T " << c.T << " D " << c.D << " "
                << (dt == kFloat64 ? "float64" : "float32"));
      const double tol = dt == kFloat64 ? 1e-11 : 2e-5;
      Generator g(5);
      const double scale = 1.0 / std::sqrt(double(c.D));
      Tensor q = leaf({c.B, c.H, c.T, c.D}, dt, g, 2.0), k = leaf({c.B, c.Hkv, c.T, c.D}, dt, g, 2.0),
             v = leaf({c.B, c.Hkv, c.T, c.D}, dt, g);
      Tensor w = randn({c.B, c.H, c.T, c.D}, Options(dt), &g);
      auto fused = run([&](const std::vector<Tensor>& in) { return causal_attention(in[0], in[1], in[2], scale); },
                       {q, k, v}, w);
      const int64_t G = c.H / c.Hkv;
      auto ref = run(
          [&](const std::vector<Tensor>& in) {
            // the composition: [B, Hkv, G, T, D] queries against [B, Hkv, 1, T, D] keys/values
            Tensor qq = in[0].reshape({c.B, c.Hkv, G, c.T, c.D});
            Tensor y = nn::scaled_dot_product_attention(qq, in[1].unsqueeze(2), in[2].unsqueeze(2),
                                                        nn::causal_mask(c.T));
            return y.reshape({c.B, c.H, c.T, c.D});
          },
          {fresh_copy(q), fresh_copy(k), fresh_copy(v)}, w);
      CHECK(worst_ratio(fused.first, ref.first, tol, tol) <= 1);
      for (int i = 0; i < 3; ++i) {
        INFO("gradient of input " << i);
        CHECK(worst_ratio(fused.second[i], ref.second[i], tol, tol) <= 1);
      }
    }
  }
}

TEST_CASE("fused causal_attention over a longer key sequence (a KV cache) equals the masked composition",
          "[fused][attention][kv_cache]") {
  // q [B, H, T, D] are the last T of Tk positions: query t sees keys j ≤ t + Tk − T ("bottom-right").
  // T = 1 is a decoding step (the direct loops, per head size: 8 and 16 vectorized, 5 at run time),
  // T = 70 > the direct-row limit runs the BLAS blocks with the offset.
  struct Case {
    int64_t B, H, Hkv, T, Tk, D;
  };
  for (const Case c : {Case{1, 8, 4, 1, 37, 8}, Case{2, 2, 2, 1, 9, 16}, Case{1, 3, 1, 1, 300, 5},
                       Case{1, 2, 1, 3, 20, 8}, Case{2, 4, 2, 70, 100, 8}, Case{1, 2, 2, 1, 1, 64},
                       Case{1, 4, 4, 2, 130, 32}}) {
    for (DType dt : {kFloat64, kFloat32}) {
      INFO("B " << c.B << " H " << c.H << " Hkv " << c.Hkv << " T " << c.T << " Tk " << c.Tk << " D " << c.D << " "
                << (dt == kFloat64 ? "float64" : "float32"));
      const double tol = dt == kFloat64 ? 1e-12 : 2e-5;
      Generator g(21);
      const double scale = 1.0 / std::sqrt(double(c.D));
      Tensor q = randn({c.B, c.H, c.T, c.D}, Options(dt), &g) * 2.0;
      Tensor k = randn({c.B, c.Hkv, c.Tk, c.D}, Options(dt), &g) * 2.0, v = randn({c.B, c.Hkv, c.Tk, c.D}, Options(dt), &g);
      Tensor y = causal_attention(q, k, v, scale);
      REQUIRE(y.shape() == q.shape());
      const Tensor rows = arange(double(c.Tk - c.T), double(c.Tk), 1.0, Options(kInt64)).unsqueeze(1);
      const Tensor mask = ge(rows, arange(0.0, double(c.Tk), 1.0, Options(kInt64)).unsqueeze(0));  // [T, Tk]
      const int64_t G = c.H / c.Hkv;
      Tensor ref = nn::scaled_dot_product_attention(q.reshape({c.B, c.Hkv, G, c.T, c.D}), k.unsqueeze(2),
                                                    v.unsqueeze(2), mask)
                       .reshape({c.B, c.H, c.T, c.D});
      CHECK(worst_ratio(y, ref, tol, tol) <= 1);
    }
  }
}

TEST_CASE("fused causal_attention is the same with 1 and 2 threads", "[fused][attention]") {
  Generator g(9);
  Tensor q = leaf({2, 4, 90, 8}, kFloat32, g), k = leaf({2, 2, 90, 8}, kFloat32, g), v = leaf({2, 2, 90, 8}, kFloat32, g);
  Tensor w = randn({2, 4, 90, 8}, Options(kFloat32), &g);
  auto f = [&](const std::vector<Tensor>& in) { return causal_attention(in[0], in[1], in[2], 0.3); };
  const int before = num_threads();
  set_num_threads(1);
  auto one = run(f, {q, k, v}, w);
  set_num_threads(2);
  auto two = run(f, {fresh_copy(q), fresh_copy(k), fresh_copy(v)}, w);
  set_num_threads(before);
  CHECK(one.first.to_vector<float>() == two.first.to_vector<float>());
  for (int i = 0; i < 3; ++i) CHECK(one.second[i].to_vector<float>() == two.second[i].to_vector<float>());
}

TEST_CASE("fused causal_attention rejects mismatched shapes", "[fused][attention]") {
  CHECK_THROWS_WITH(causal_attention(zeros({1, 3, 4, 2}), zeros({1, 2, 4, 2}), zeros({1, 2, 4, 2}), 1.0),
                    Catch::Contains("H a multiple of Hkv"));
  // fewer keys than queries
  CHECK_THROWS_WITH(causal_attention(zeros({1, 2, 5, 2}), zeros({1, 2, 4, 2}), zeros({1, 2, 4, 2}), 1.0),
                    Catch::Contains("Tk ≥ T"));
  // more keys than queries (a KV cache) has no gradient: refused when one is needed
  CHECK_THROWS_WITH(causal_attention(zeros({1, 2, 4, 2}).requires_grad_(true), zeros({1, 2, 5, 2}),
                                     zeros({1, 2, 5, 2}), 1.0),
                    Catch::Contains("inference only"));
  CHECK_NOTHROW(causal_attention(zeros({1, 2, 4, 2}), zeros({1, 2, 5, 2}), zeros({1, 2, 5, 2}), 1.0));
  CHECK_THROWS_WITH(causal_attention(zeros({2, 4, 2}), zeros({2, 4, 2}), zeros({2, 4, 2}), 1.0),
                    Catch::Contains("[B, H, T, D]"));
  CHECK_THROWS(causal_attention(zeros({1, 1, 2, 2}), zeros({1, 1, 2, 2}, kFloat64), zeros({1, 1, 2, 2}), 1.0));
}

TEST_CASE("CausalSelfAttention forward (fused) equals forward_reference, with RoPE and GQA", "[fused][attention]") {
  for (DType dt : {kFloat64, kFloat32}) {
    const double tol = dt == kFloat64 ? 1e-11 : 3e-5;
    Generator g(21);
    auto rope = std::make_shared<nn::RotaryEmbedding>(10000.0, 4, 80, dt);
    nn::CausalSelfAttention attn(16, 4, 2, rope, dt, &g);
    Tensor x = leaf({2, 75, 16}, dt, g);
    Tensor w = randn({2, 75, 16}, Options(dt), &g);
    auto fused = run([&](const std::vector<Tensor>& in) { return attn.forward(in[0]); }, {x}, w);
    std::vector<Tensor> grads_fused;
    for (const auto& [name, p] : attn.named_parameters()) grads_fused.push_back(p.grad());
    attn.zero_grad();
    auto ref = run([&](const std::vector<Tensor>& in) { return attn.forward_reference(in[0]); }, {fresh_copy(x)}, w);
    CHECK(worst_ratio(fused.first, ref.first, tol, tol) <= 1);
    CHECK(worst_ratio(fused.second[0], ref.second[0], tol, tol) <= 1);
    size_t i = 0;
    for (const auto& [name, p] : attn.named_parameters()) {
      INFO(name);
      CHECK(worst_ratio(grads_fused[i++], p.grad(), tol, tol) <= 1);
    }
  }
}
