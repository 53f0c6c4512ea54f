// test_autograd.cpp — engine semantics: gradient accumulation, NoGradGuard, detach, errors of
// backward, retain_graph, the version counter, release of saved tensors, which gradients are
// computed, diamonds, broadcasting reductions and aliasing of leaf gradients.
#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "autograd/tapegrad.h"

using namespace tapegrad;

namespace {
Options f64grad() { return Options(kFloat64).requires_grad(); }
std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }
}  // namespace

TEST_CASE("gradients accumulate across backward calls and zero_grad clears them", "[autograd]") {
  Tensor x = tensor({1, 2, 3}, f64grad());
  (x * x).sum().backward();  // 2x
  CHECK(vals(x.grad()) == std::vector<double>{2, 4, 6});
  (x * 3.0).sum().backward();  // + 3
  CHECK(vals(x.grad()) == std::vector<double>{5, 7, 9});
  CHECK(x.grad().dtype() == kFloat64);
  CHECK(x.grad().shape() == x.shape());
  CHECK_FALSE(x.grad().requires_grad());
  x.zero_grad();
  CHECK_FALSE(x.grad().defined());
  (x * 3.0).sum().backward();
  CHECK(vals(x.grad()) == std::vector<double>{3, 3, 3});
  // float32 leaves get float32 gradients
  Tensor y = tensor({1, 2}, Options(kFloat32).requires_grad());
  (y * y).sum().backward();
  CHECK(y.grad().dtype() == kFloat32);
  CHECK(y.grad().to_vector<float>() == std::vector<float>{2, 4});
}

TEST_CASE("NoGradGuard records nothing and restores grad mode after its scope", "[autograd]") {
  Tensor x = tensor({1, 2}, f64grad());
  REQUIRE(GradMode::enabled());
  {
    NoGradGuard g;
    CHECK_FALSE(GradMode::enabled());
    Tensor y = exp(x * x).sum();
    CHECK_FALSE(y.requires_grad());
    CHECK(y.grad_fn() == nullptr);
    CHECK(y.is_leaf());
    CHECK_THROWS_AS(y.backward(), Error);
    {
      NoGradGuard nested;
      CHECK_FALSE(GradMode::enabled());
    }
    CHECK_FALSE(GradMode::enabled());  // the inner guard restores the outer state, not "on"
  }
  CHECK(GradMode::enabled());
  Tensor z = x * x;
  CHECK(z.requires_grad());
  CHECK(z.grad_fn() != nullptr);
  CHECK_FALSE(z.is_leaf());
}

TEST_CASE("detach shares storage but cuts history", "[autograd]") {
  Tensor x = tensor({1, 2, 3}, f64grad());
  Tensor y = x * 2.0;
  Tensor d = y.detach();
  CHECK(d.storage().get() == y.storage().get());
  CHECK_FALSE(d.requires_grad());
  CHECK(d.grad_fn() == nullptr);
  // a gradient does not flow through the detached branch
  Tensor loss = (y * d).sum();  // d/dx = 2·d = 4x (not 8x)
  loss.backward();
  CHECK(vals(x.grad()) == std::vector<double>{4, 8, 12});
  // in place on the detached view is allowed and visible in y
  d.add_(1.0);
  CHECK(vals(y) == std::vector<double>{3, 5, 7});
}

TEST_CASE("requires_grad_ is only for floating leaves", "[autograd]") {
  Tensor i = arange(3);
  CHECK_THROWS_AS(i.requires_grad_(), Error);
  CHECK_THROWS_AS(tensor({1, 0}, kBool).requires_grad_(), Error);
  CHECK_THROWS_AS(from_vector<int32_t>({1}, {1}, true), Error);
  CHECK_NOTHROW(i.requires_grad_(false));
  Tensor x = tensor({1.0}, kFloat32);
  x.requires_grad_();
  CHECK(x.requires_grad());
  Tensor y = x * 2.0;
  CHECK_THROWS_AS(y.requires_grad_(false), Error);  // non-leaf: use detach()
}

TEST_CASE("backward needs a gradient for a non-scalar, and an explicit one is used as given", "[autograd]") {
  Tensor x = tensor({1, 2, 3, 4}, {2, 2}, f64grad());
  Tensor y = x * x;
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("backward") && Catch::Contains("[2, 2]"));
  y.backward(tensor({1, 10, 100, 1000}, {2, 2}, kFloat64));  // grad = g · 2x
  CHECK(vals(x.grad()) == std::vector<double>{2, 40, 600, 8000});
  // the gradient must match the tensor's shape and dtype
  Tensor z = x * 3.0;
  CHECK_THROWS_AS(z.backward(ones({4}, kFloat64)), Error);
  CHECK_THROWS_AS(z.backward(ones({2, 2}, kFloat32)), Error);
  // a 1-element non-0-d tensor needs no explicit gradient
  x.zero_grad();
  (x * 5.0).sum({0, 1}, /*keepdim=*/true).backward();
  CHECK(vals(x.grad()) == std::vector<double>{5, 5, 5, 5});
  // backward on a leaf accumulates the gradient into it directly
  Tensor leaf = tensor({1, 2}, f64grad());
  leaf.backward(tensor({3, 4}, kFloat64));
  CHECK(vals(leaf.grad()) == std::vector<double>{3, 4});
}

TEST_CASE("a second backward through the same graph needs retain_graph the first time", "[autograd]") {
  Tensor x = tensor({1, 2}, f64grad());
  Tensor y = exp(x).sum();
  y.backward();
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("retain_graph"));

  x.zero_grad();
  Tensor z = exp(x).sum();
  z.backward(Tensor(), /*retain_graph=*/true);
  z.backward();  // runs again: the gradient doubles
  const std::vector<double> g = vals(x.grad());
  CHECK(g[0] == Approx(2 * std::exp(1.0)));
  CHECK(g[1] == Approx(2 * std::exp(2.0)));
  CHECK_THROWS_AS(z.backward(), Error);  // the second call did not retain
}

TEST_CASE("modifying a saved tensor in place is caught at backward", "[autograd]") {
  Tensor a = tensor({1, 2}, f64grad());
  Tensor b = tensor({3, 4}, kFloat64);
  Tensor c = a * b;  // saves b for dc/da
  b.add_(1.0);
  CHECK_THROWS_WITH(c.sum().backward(), Catch::Contains("modified in place") && Catch::Contains("mul"));

  // an in-place change to a tensor that was NOT saved is fine
  Tensor a2 = tensor({1, 2}, f64grad());
  Tensor b2 = tensor({3, 4}, kFloat64);
  Tensor c2 = a2 + b2;  // add saves nothing
  b2.add_(1.0);
  c2.sum().backward();
  CHECK(vals(a2.grad()) == std::vector<double>{1, 1});

  // saved outputs are checked too: exp saves its output
  Tensor x = tensor({0, 1}, f64grad());
  Tensor e = exp(x);
  Tensor loss = e.sum();
  e.detach().mul_(2.0);
  CHECK_THROWS_WITH(loss.backward(), Catch::Contains("modified in place"));
}

TEST_CASE("a backward that fails leaves no stale partial gradients behind", "[autograd]") {
  Tensor x = tensor({0.0, 1.0}, f64grad());
  Tensor b = tensor({3, 4}, kFloat64);
  Tensor h = exp(x);
  Tensor a = h * b;  // saves b
  Tensor c = h * 2.0;
  Tensor loss = a.sum() + c.sum();
  b.add_(1.0);
  // c's branch runs before a's mul (newer entries first) and leaves a partial gradient for exp
  CHECK_THROWS_WITH(loss.backward(Tensor(), /*retain_graph=*/true), Catch::Contains("modified in place"));
  CHECK_FALSE(x.grad().defined());
  // a later backward through the intact branch sees only its own gradient: d/dx Σ 2eˣ = 2eˣ
  c.sum().backward();
  const std::vector<double> g = vals(x.grad());
  CHECK(g[0] == Approx(2.0));
  CHECK(g[1] == Approx(2.0 * std::exp(1.0)));
}

TEST_CASE("in-place ops on a leaf that requires grad throw unless under NoGradGuard", "[autograd]") {
  Tensor w = tensor({1, 2}, f64grad());
  CHECK_THROWS_WITH(w.add_(1.0), Catch::Contains("add_") && Catch::Contains("requires grad"));
  CHECK_THROWS_AS(w.mul_(2.0), Error);
  CHECK_THROWS_AS(w.fill_(0.0), Error);
  CHECK_THROWS_AS(w.copy_(tensor({5, 6}, kFloat64)), Error);
  CHECK_THROWS_AS(w.sub_(tensor({5, 6}, kFloat64)), Error);
  CHECK(vals(w) == std::vector<double>{1, 2});  // untouched
  {
    NoGradGuard g;
    w.sub_(tensor({0.5, 0.5}, kFloat64));  // an optimizer step
    w.add_(tensor({1, 1}, kFloat64), -2.0);
  }
  CHECK(vals(w) == std::vector<double>{-1.5, -0.5});
  CHECK(w.requires_grad());
  CHECK(w.is_leaf());
}

TEST_CASE("after backward the tensors saved only by the tape are freed", "[autograd][memory]") {
  Tensor x = tensor({0.5, 1.5, 2.5}, f64grad());
  std::weak_ptr<Storage> saved;
  Tensor loss;
  {
    Tensor e = exp(x);  // exp saves its output for backward
    saved = e.storage();
    loss = e.sum();
  }
  CHECK_FALSE(saved.expired());  // only the tape holds it now
  loss.backward();
  CHECK(saved.expired());
  CHECK(vals(x.grad())[1] == Approx(std::exp(1.5)));

  // with retain_graph the saved tensor survives until the graph goes away
  x.zero_grad();
  std::weak_ptr<Storage> kept;
  {
    Tensor e = exp(x);
    kept = e.storage();
    loss = e.sum();
  }
  loss.backward(Tensor(), /*retain_graph=*/true);
  CHECK_FALSE(kept.expired());
  loss = Tensor();  // dropping the root frees the whole graph
  CHECK(kept.expired());
}

TEST_CASE("only needed gradients are computed and only needed tensors saved", "[autograd]") {
  Tensor a = tensor({1, 2, 3}, f64grad());
  Tensor b = tensor({4, 5, 6}, kFloat64);
  Tensor c = (a * b).sum();
  c.backward();
  CHECK(vals(a.grad()) == std::vector<double>{4, 5, 6});
  CHECK_FALSE(b.grad().defined());
  CHECK_FALSE(b.requires_grad());

  // mul(t, k) with k constant needs k (for dt) but not t: t is not kept alive by the tape
  std::weak_ptr<Storage> t_storage;
  Tensor loss;
  {
    Tensor t = a * 2.0;  // mul by a scalar saves nothing
    t_storage = t.storage();
    loss = (t * b).sum();
  }
  CHECK(t_storage.expired());
  a.zero_grad();
  loss.backward();
  CHECK(vals(a.grad()) == std::vector<double>{8, 10, 12});

  // an input that does not require grad gets no edge, and a constant branch gets no .grad
  Tensor k = tensor({1, 1, 1}, kFloat64);
  Tensor m = tensor({2, 2, 2}, kFloat64);
  a.zero_grad();
  (a * (k + m)).sum().backward();
  CHECK_FALSE(k.grad().defined());
  CHECK_FALSE(m.grad().defined());
  CHECK(vals(a.grad()) == std::vector<double>{3, 3, 3});
}

TEST_CASE("a diamond graph accumulates both paths", "[autograd]") {
  Tensor x = tensor({1, 2, -3}, f64grad());
  Tensor p = x * 2.0;    // path 1
  Tensor q = x.pow(2);   // path 2
  Tensor y = (p * q).sum();  // 2x³ → 6x²
  y.backward();
  CHECK(vals(x.grad()) == std::vector<double>{6, 24, 54});

  // x feeding the same op twice, and a shared intermediate used by two consumers
  Tensor z = tensor({0.5, 2.0}, f64grad());
  Tensor h = exp(z);                      // h used twice below
  Tensor out = (h * h + h * z).sum();     // e^{2z} + z e^z → 2e^{2z} + e^z (1 + z)
  out.backward();
  for (int i = 0; i < 2; ++i) {
    const double zi = i == 0 ? 0.5 : 2.0;
    CHECK(vals(z.grad())[i] == Approx(2 * std::exp(2 * zi) + std::exp(zi) * (1 + zi)));
  }
  // add(x, x): both slots of one node go to the same leaf
  Tensor w = tensor({1, 2}, f64grad());
  (w + w).sum().backward();
  CHECK(vals(w.grad()) == std::vector<double>{2, 2});
}

TEST_CASE("the gradient of a broadcasting op is reduced to each input's shape", "[autograd]") {
  Tensor a = tensor({1, 2, 3}, {3, 1}, f64grad());
  Tensor b = tensor({10, 20, 30, 40}, {1, 4}, f64grad());
  // weights make every element's gradient distinct: w[i][j] = i*4 + j + 1
  Tensor w = tensor({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 4}, kFloat64);
  ((a + b) * w).sum().backward();
  REQUIRE(a.grad().shape() == Shape{3, 1});
  REQUIRE(b.grad().shape() == Shape{1, 4});
  CHECK(vals(a.grad()) == std::vector<double>{1 + 2 + 3 + 4, 5 + 6 + 7 + 8, 9 + 10 + 11 + 12});
  CHECK(vals(b.grad()) == std::vector<double>{1 + 5 + 9, 2 + 6 + 10, 3 + 7 + 11, 4 + 8 + 12});

  // a leading broadcast dim and a mul: d/dv (Σ m·v) = Σ over rows of m
  Tensor v = tensor({1, 2}, f64grad());
  Tensor m = tensor({1, 2, 3, 4, 5, 6}, {3, 2}, kFloat64);
  (m * v).sum().backward();
  REQUIRE(v.grad().shape() == Shape{2});
  CHECK(vals(v.grad()) == std::vector<double>{9, 12});

  // a 0-d scalar against a matrix
  Tensor s = scalar_tensor(2.0, f64grad());
  (s * m).sum().backward();
  REQUIRE(s.grad().shape() == Shape{});
  CHECK(s.grad().item() == 21.0);
}

TEST_CASE("leaf gradients are never aliased between leaves", "[autograd]") {
  Tensor a = tensor({1, 2, 3}, f64grad());
  Tensor b = tensor({4, 5, 6}, f64grad());
  (a + b).sum().backward();  // add hands the same gradient to both inputs
  REQUIRE(a.grad().defined());
  REQUIRE(b.grad().defined());
  CHECK(a.grad().storage().get() != b.grad().storage().get());
  {
    NoGradGuard g;
    a.grad().mul_(10.0);
  }
  CHECK(vals(a.grad()) == std::vector<double>{10, 10, 10});
  CHECK(vals(b.grad()) == std::vector<double>{1, 1, 1});
  // accumulating a second time keeps them separate too
  (a - b).sum().backward();
  CHECK(vals(a.grad()) == std::vector<double>{11, 11, 11});
  CHECK(vals(b.grad()) == std::vector<double>{0, 0, 0});

  // a leaf's gradient does not alias the gradient given to backward
  Tensor x = tensor({1, 2}, f64grad());
  Tensor g = tensor({7, 8}, kFloat64);
  (x * 1.0).backward(g);
  CHECK(x.grad().storage().get() != g.storage().get());
  g.fill_(0.0);
  CHECK(vals(x.grad()) == std::vector<double>{7, 8});
  // nor does it alias a view's gradient into another leaf (expand → same storage)
  Tensor p = tensor({1.0}, f64grad()), q = tensor({1.0}, f64grad());
  Tensor e = (p + q).expand({3});
  e.sum().backward();
  CHECK(p.grad().item() == 3.0);
  CHECK(q.grad().item() == 3.0);
  CHECK(p.grad().storage().get() != q.grad().storage().get());
}

TEST_CASE("gradients flow through views, dtype conversion and concatenation", "[autograd]") {
  Tensor x = tensor({1, 2, 3, 4, 5, 6}, {2, 3}, f64grad());
  // slice with step, transpose, select, then to float32 and back
  Tensor y = x.t().slice(0, 0, 3, 2).select(1, 1);  // x[1][0], x[1][2] = 4, 6
  CHECK(vals(y) == std::vector<double>{4, 6});
  Tensor loss = (y.to(kFloat32) * tensor({1, 2}, kFloat32)).sum();
  loss.backward();
  CHECK(x.grad().dtype() == kFloat64);
  CHECK(vals(x.grad()) == std::vector<double>{0, 0, 0, 1, 0, 2});
  x.zero_grad();
  cat({x, x * 2.0}, 0).sum().backward();
  CHECK(vals(x.grad()) == std::vector<double>(6, 3.0));
}

TEST_CASE("set_grad refuses a gradient of another shape or dtype and leaves the old one", "[autograd]") {
  Tensor x = zeros({2, 3}, Options(kFloat32).requires_grad());
  x.set_grad(ones({2, 3}));
  CHECK_THROWS_WITH(x.set_grad(ones({3, 2})),
                    Catch::Contains("set_grad: gradient [3, 2] float32 on cpu does not match tensor [2, 3] float32"));
  CHECK_THROWS_WITH(x.set_grad(ones({2, 3}, kFloat64)), Catch::Contains("gradient [2, 3] float64"));
  CHECK(x.grad().to_vector<float>() == std::vector<float>(6, 1.0f));
  x.set_grad(Tensor());  // undefined: clears it
  CHECK_FALSE(x.grad().defined());
}
