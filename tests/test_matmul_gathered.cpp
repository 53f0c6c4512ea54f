// test_matmul_gathered.cpp — a matmul's backward adds dA into the gradient already gathered for A (the GEMM with
// beta = 1, autograd/ops/matmul.cpp), and a bfloat16 A whose entry sums in float32 (a float32 → bf16 cast, the
// normed output of add_rms_norm) receives dA in float32:
//  * several bf16 matmuls reading one cast input (attention's q, k, v; SwiGLU's w1, w3) give it a gradient that
//    is the float64 sum of their products to float32 rounding — no product is rounded to bf16 on the way
//    (before: each dA was rounded to bf16, ~2⁻⁹ relative);
//  * every layout the fold and the batch take (3-D @ 2-D folded, batched, a broadcast over the batch, a strided
//    gathered gradient, a transposed weight) gives the float64 reference's gradient, and the float64 gradcheck
//    of a graph with three readers passes;
//  * the engine passes a float32 gradient on to a bf16 input only where its entry gathers in float32 (a probe
//    entry shows the dtype it receives).
#include <catch2/catch.hpp>

#include "autograd/gradcheck.h"
#include "autograd/tapegrad.h"
#include "tests/grad_probe.h"

using namespace tapegrad;

namespace {

double max_rel_error(const Tensor& got, const Tensor& want) {
  const Tensor g = got.detach().to(kFloat64), w = want.detach().to(kFloat64);
  return max(abs(g - w)).item<double>() / max(abs(w)).item<double>();
}

// Values exactly representable in bfloat16, as float32.
Tensor bf16_values(const Shape& shape, Generator& gen) {
  return randn(shape, kFloat32, &gen).to(kBFloat16).to(kFloat32);
}

}  // namespace

TEST_CASE("bf16 matmuls reading one cast input sum their dA in float32, unrounded", "[matmul_gathered]") {
  Generator gen(11);
  const int64_t B = 2, T = 5, C = 48;
  for (int readers : {1, 2, 3}) {
    CAPTURE(readers);
    Tensor x = bf16_values({B, T, C}, gen).requires_grad_(true);
    std::vector<Tensor> w, r;  // weights [out, C] (read as Wᵀ, as nn::Linear does), loss weights [B, T, out]
    for (int i = 0; i < readers; ++i) {
      const int64_t out = 16 + 8 * i;
      w.push_back(bf16_values({out, C}, gen));
      r.push_back(bf16_values({B, T, out}, gen));
    }
    const Tensor h = x.to(kBFloat16);  // the cast gathers in float32
    Tensor loss = zeros({}, kFloat32);
    for (int i = 0; i < readers; ++i) loss = loss + (matmul(h, w[i].to(kBFloat16).t()).to(kFloat32) * r[i]).sum();
    loss.backward();
    REQUIRE(x.grad().defined());
    CHECK(x.grad().dtype() == kFloat32);
    // dX = Σ_i R_i @ W_i, in float64 from the same (bf16-exact) values.
    Tensor want = zeros({B, T, C}, kFloat64);
    for (int i = 0; i < readers; ++i) want = want + matmul(r[i].to(kFloat64), w[i].to(kFloat64));
    // float32 accumulation over ≤ 3·40 terms: ~1e-7; one bf16 rounding of any product would be ~4e-3.
    CHECK(max_rel_error(x.grad(), want) < 2e-6);
  }
}

TEST_CASE("the gathered dA gives the reference gradient in every matmul layout", "[matmul_gathered]") {
  Generator gen(5);
  // The float64 gradcheck (finite differences: independent of backward), then float32 against float64.
  const auto check = [&](const std::function<Tensor(const Tensor&)>& f, const Shape& x_shape) {
    const Tensor x0 = randn(x_shape, kFloat64, &gen);
    const GradcheckResult r = gradcheck([&](const std::vector<Tensor>& in) { return f(in[0]); },
                                        {x0.clone().requires_grad_(true)});
    INFO(r.message);
    CHECK(r.ok);
    Tensor x = x0.clone().requires_grad_(true), x32 = x0.to(kFloat32).requires_grad_(true);
    f(x).sum().backward();
    f(x32).sum().backward();
    CHECK(x32.grad().dtype() == kFloat32);
    CHECK(max_rel_error(x32.grad(), x.grad()) < 2e-6);
  };
  const Tensor w1 = randn({6, 4}, kFloat64, &gen), w2 = randn({5, 4}, kFloat64, &gen);
  const Tensor wb = randn({3, 4, 7}, kFloat64, &gen), r = randn({3, 2, 7}, kFloat64, &gen);
  const auto as = [](const Tensor& w, const Tensor& like) { return w.to(like.dtype()); };
  SECTION("3-D @ 2-D, folded, three readers (two weights transposed views, one contiguous)") {
    check(
        [&](const Tensor& x) {
          const Tensor h = x * 2.0;
          return (matmul(h, as(w1, x).t()).sum({-1}) + matmul(h, as(w2, x).t()).sum({-1}) +
                  matmul(h, as(w1, x).t().contiguous()).sum({-1}) * 0.5)
              .pow(2.0);
        },
        {3, 2, 4});
  }
  SECTION("batched, and a broadcast over the batch (dA summed to a's shape)") {
    check(
        [&](const Tensor& x) {
          const Tensor h = x * 1.5;                                   // [3, 2, 4]
          const Tensor shared = h.narrow(0, 0, 1).squeeze(0) * 1.0;  // [2, 4], broadcast over wb's batch of 3
          return (matmul(h, as(wb, x)) * as(r, x)).sum() + matmul(h, as(wb, x)).pow(2.0).sum() +
                 (matmul(shared, as(wb, x)) * as(r, x)).sum();
        },
        {3, 2, 4});
  }
  SECTION("a strided gradient gathered first (a transposed reader recorded last)") {
    check(
        [&](const Tensor& x) {
          const Tensor h = x * 3.0;  // [4, 6]
          const Tensor y = matmul(h, as(w1, x));
          return (y * y).sum() + (h.t() * as(w1, x)).sum();
        },
        {4, 6});
  }
}

TEST_CASE("float64 gradcheck of three matmuls reading one input, folded and batched", "[matmul_gathered]") {
  Generator gen(3);
  const Tensor wq = randn({4, 5}, kFloat64, &gen), wk = randn({3, 5}, kFloat64, &gen);
  const Tensor wb = randn({2, 5, 3}, kFloat64, &gen);
  const auto r = gradcheck(
      [&](const std::vector<Tensor>& in) {
        const Tensor h = in[0] * in[0];  // a non-leaf read by every matmul below
        return matmul(h, wq.t()).sum({-1}) * matmul(h, in[1].t()).sum({-1}) + matmul(h, wk.t()).sum({-1}) +
               matmul(h, wb).sum({-1});
      },
      {randn({2, 3, 5}, Options(kFloat64).requires_grad(), &gen),
       randn({4, 5}, Options(kFloat64).requires_grad(), &gen)});
  CHECK(r.ok);
  INFO(r.message);
}

TEST_CASE("a float32 gradient reaches a bf16 input only where its entry gathers in float32", "[matmul_gathered]") {
  Generator gen(9);
  const Tensor w = bf16_values({6, 8}, gen).to(kBFloat16);
  SECTION("a cast: the matmul's float32 dA reaches the cast's backward unrounded") {
    Tensor x = bf16_values({4, 8}, gen).requires_grad_(true);
    const Tensor r = bf16_values({4, 6}, gen);
    (matmul(x.to(kBFloat16), w.t()).to(kFloat32) * r).sum().backward();
    CHECK(max_rel_error(x.grad(), matmul(r.to(kFloat64), w.to(kFloat64))) < 2e-6);
  }
  SECTION("another bf16 entry receives bf16, as before; the same entry set to gather in float32 receives float32") {
    for (const bool gathers : {false, true}) {
      CAPTURE(gathers);
      Tensor x = bf16_values({4, 8}, gen).to(kBFloat16).requires_grad_(true);
      Tensor seen;  // what the entry between x and the two matmuls receives
      const Tensor h = testing::probe(x, &seen);
      if (gathers) h.grad_fn()->set_gathers_in_float32(true);
      (matmul(h, w.t()).to(kFloat32).sum() + matmul(h, w.t()).to(kFloat32).sum()).backward();
      REQUIRE(seen.defined());
      CHECK(seen.dtype() == (gathers ? kFloat32 : kBFloat16));
      CHECK(x.grad().dtype() == kBFloat16);  // a leaf's gradient has its own dtype either way
    }
  }
}

TEST_CASE("a bf16 cast of a float32 weight gets dW in float32 through its transpose", "[matmul_gathered]") {
  Generator gen(13);
  for (int readers : {1, 2}) {
    CAPTURE(readers);
    Tensor w = bf16_values({12, 40}, gen).requires_grad_(true);  // [out, in], read as Wᵀ like nn::Linear
    const Tensor wt = w.to(kBFloat16).t();                        // the transpose gathers like the cast
    Tensor want = zeros({12, 40}, kFloat64), loss = zeros({}, kFloat32);
    for (int i = 0; i < readers; ++i) {
      const Tensor x = bf16_values({3, 7, 40}, gen), r = bf16_values({3, 7, 12}, gen);
      loss = loss + (matmul(x.to(kBFloat16), wt).to(kFloat32) * r).sum();
      // dW = Σ_rows r_rowᵀ x_row, in float64
      want = want + matmul(r.reshape({-1, 12}).to(kFloat64).t(), x.reshape({-1, 40}).to(kFloat64));
    }
    loss.backward();
    REQUIRE(w.grad().defined());
    CHECK(w.grad().dtype() == kFloat32);
    CHECK(w.grad().is_contiguous());
    CHECK(max_rel_error(w.grad(), want) < 2e-6);  // one bf16 rounding of dW would be ~4e-3
  }
  SECTION("a weight not stored transposed (x @ W) likewise") {
    Tensor w = bf16_values({40, 12}, gen).requires_grad_(true);
    const Tensor x = bf16_values({5, 40}, gen), r = bf16_values({5, 12}, gen);
    (matmul(x.to(kBFloat16), w.to(kBFloat16)).to(kFloat32) * r).sum().backward();
    CHECK(max_rel_error(w.grad(), matmul(x.to(kFloat64).t(), r.to(kFloat64))) < 2e-6);
  }
}
