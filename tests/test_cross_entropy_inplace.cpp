// test_cross_entropy_inplace.cpp — cross_entropy's backward writes the logits' gradient over the saved logits
// (autograd/ops/fused.cpp, autograd/backward_pass.h) exactly when nobody else can see them: the caller dropped
// the logits (cross_entropy(model.forward(x), y)), they fill their whole buffer contiguously, and the backward
// does not keep the graph. Then the gradient is bitwise the out-of-place one (float32, float64, bfloat16,
// ignored rows) and lives in the logits' buffer; otherwise (the caller holds the logits, a strided view,
// retain_graph, RetainValuesGuard) a new buffer is made and the caller's logits stay as they were.
//
// Where the gradient lives is seen by `probe`, an identity op whose backward keeps the gradient it receives:
// put between the op that makes the logits and cross_entropy, it receives dlogits itself.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/error.h"
#include "tests/grad_probe.h"
#include "tests/same_bits.h"

using namespace tapegrad;

namespace {

using testing::probe;
using testing::bytes_of;
using testing::same_bits;

// y = make_view(x) on x's own buffer (a strided view, or one that leaves part of the buffer out); backward stores
// y's gradient in *seen and passes undo(g) to x.
template <class MakeView, class Undo>
Tensor view_probe(const Tensor& x, MakeView make_view, Undo undo, Tensor* seen) {
  Tensor y = make_view(x.detach());
  record("view_probe", {&x}, y, [seen, undo](const Tensor& g, GradInputs& dx) {
    *seen = g;
    dx[0] = undo(g);
  });
  return y;
}

Tensor randn_leaf(const Shape& s, DType dt, uint64_t seed, double scale = 1.0) {
  Generator g(seed);
  Tensor t = mul(randn(s, Options(kFloat64), &g), scale).to(dt);
  t.requires_grad_();
  return t;
}

// Targets in [0, V) for the leading shape `lead`, every `ignore_every`-th one (from the second) ignored.
Tensor targets_for(const Shape& lead, int64_t V, uint64_t seed, int64_t ignore_every) {
  Generator g(seed);
  const int64_t N = lead.numel();
  std::vector<int64_t> t(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) {
    t[i] = static_cast<int64_t>(g.below(static_cast<uint64_t>(V)));
    if (ignore_every > 0 && i % ignore_every == 1) t[i] = -100;
  }
  return from_vector<int64_t>(t, lead);
}

// One backward of cross_entropy(probe(x), t) (times a non-trivial upstream gradient): the logits' gradient,
// the logits' buffer, and x's gradient. keep_logits: the caller holds the logits through backward.
struct Outcome {
  Tensor dlogits;
  const void* logits_data = nullptr;
  Tensor x_grad;
};
Outcome run_ce(const Tensor& x_in, const Tensor& t, bool keep_logits, double loss_scale = 1.75) {
  Tensor x = x_in.detach().clone();
  x.requires_grad_();
  Outcome o;
  Tensor kept, loss;
  {
    Tensor logits = probe(x, &o.dlogits);
    o.logits_data = logits.data_ptr();
    loss = mul(cross_entropy(logits, t), loss_scale);
    if (keep_logits) kept = logits;
  }
  loss.backward();
  o.x_grad = x.grad();
  return o;
}

const char* name(DType d) { return d == kFloat32 ? "float32" : d == kFloat64 ? "float64" : "bfloat16"; }

}  // namespace

TEST_CASE("cross_entropy's gradient written over dropped logits is bitwise the out-of-place one", "[ce_inplace]") {
  struct Case {
    Shape shape;  // the logits [..., V]
    int64_t ignore_every;
  };
  const std::vector<Case> cases = {{{1, 1}, 0}, {{7, 17}, 3}, {{3, 5, 33}, 2}, {{5, 2049}, 0}, {{64, 300}, 5}};
  for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
    for (const Case& c : cases) {
      INFO(name(dt) << " logits " << fmt::format("{}", c.shape) << " ignore every " << c.ignore_every);
      const Tensor x = randn_leaf(c.shape, dt, 11 + c.shape.numel(), 3.0);
      const Shape lead(c.shape.begin(), c.shape.end() - 1);
      const Tensor t = targets_for(lead, c.shape.back(), 5 + c.shape.numel(), c.ignore_every);
      const Outcome in_place = run_ce(x, t, /*keep_logits=*/false);
      const Outcome out_of_place = run_ce(x, t, /*keep_logits=*/true);
      CHECK(in_place.dlogits.data_ptr() == in_place.logits_data);
      CHECK(out_of_place.dlogits.data_ptr() != out_of_place.logits_data);
      CHECK(in_place.dlogits.dtype() == dt);
      CHECK(in_place.dlogits.shape() == c.shape);
      CHECK(same_bits(in_place.dlogits, out_of_place.dlogits));
      CHECK(same_bits(in_place.x_grad, out_of_place.x_grad));
      if (c.ignore_every > 0) {  // an ignored row's gradient is 0, also where it overwrote nonzero logits
        const std::vector<double> row = in_place.dlogits.reshape({-1, c.shape.back()}).select(0, 1).to_vector<double>();
        for (double v : row) CHECK(v == 0.0);
      }
    }
  }
}

TEST_CASE("cross_entropy(matmul(h, w), t) with the logits dropped: in place, and h, w get the same gradients",
          "[ce_inplace]") {
  for (DType dt : {kFloat32, kBFloat16}) {
    INFO(name(dt));
    const int64_t B = 2, T = 24, C = 16, V = 257;
    const Tensor h0 = randn_leaf({B, T, C}, dt, 1), w0 = randn_leaf({C, V}, dt, 2);
    const Tensor t = targets_for({B, T}, V, 3, 7);
    auto run = [&](bool keep_logits, Tensor* h_grad, Tensor* w_grad) {
      Tensor h = h0.detach().clone().requires_grad_(), w = w0.detach().clone().requires_grad_();
      Tensor dlogits, kept, loss;
      const void* logits_data = nullptr;
      {
        Tensor logits = probe(matmul(h, w), &dlogits);  // [B, T, V]: rows merge into a view
        logits_data = logits.data_ptr();
        loss = cross_entropy(logits, t);
        if (keep_logits) kept = logits;
      }
      loss.backward();
      *h_grad = h.grad();
      *w_grad = w.grad();
      return dlogits.data_ptr() == logits_data;
    };
    Tensor hg_in, wg_in, hg_out, wg_out;
    CHECK(run(false, &hg_in, &wg_in));
    CHECK_FALSE(run(true, &hg_out, &wg_out));
    CHECK(same_bits(hg_in, hg_out));
    CHECK(same_bits(wg_in, wg_out));
  }
}

TEST_CASE("cross_entropy's gradient gets a buffer of its own when the logits may be seen", "[ce_inplace]") {
  constexpr int64_t N = 6, V = 40;
  const Tensor t = targets_for({N}, V, 9, 4);
  const Tensor x0 = randn_leaf({N, V}, kFloat32, 21, 2.0);
  const Outcome reference = run_ce(x0, t, /*keep_logits=*/true, /*loss_scale=*/1.0);

  SECTION("the caller holds the logits: they are unchanged after backward") {
    Tensor x = x0.detach().clone().requires_grad_();
    Tensor dlogits;
    Tensor logits = probe(x, &dlogits);
    const std::vector<unsigned char> before = bytes_of(logits);
    cross_entropy(logits, t).backward();
    CHECK(dlogits.data_ptr() != logits.data_ptr());
    CHECK((bytes_of(logits) == before));
    CHECK(same_bits(dlogits, reference.dlogits));
  }
  // The logits are a view of a buffer nobody else holds (base, dropped); cross_entropy must not write into it.
  auto through_view = [&](const Tensor& base_value, auto make_view, auto undo) {
    Tensor x = base_value.detach().clone().requires_grad_();
    Tensor dbase, dlogits, loss;
    uintptr_t base_begin = 0, base_end = 0;
    {
      Tensor base = probe(x, &dbase);
      base_begin = reinterpret_cast<uintptr_t>(base.data_ptr());
      base_end = base_begin + static_cast<uintptr_t>(base.numel()) * dtype_size(base.dtype());
      loss = cross_entropy(view_probe(base, make_view, undo, &dlogits), t);
    }
    loss.backward();
    // base's buffer was alive (saved) when dlogits was made: dlogits lies outside it unless written into it
    const auto dlogits_at = reinterpret_cast<uintptr_t>(dlogits.data_ptr());
    CHECK_FALSE((dlogits_at >= base_begin && dlogits_at < base_end));
    // (a strided row is summed in another order than a contiguous one: equal to rounding, not bitwise)
    const std::vector<double> got = dlogits.contiguous().to_vector<double>(), want = reference.dlogits.to_vector<double>();
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) CHECK(std::abs(got[i] - want[i]) <= 1e-6 * (1e-3 + std::abs(want[i])));
  };
  SECTION("a transposed view: not contiguous") {
    through_view(x0.detach().t().contiguous(), [](const Tensor& b) { return b.t(); },
                 [](const Tensor& g) { return g.t(); });
  }
  SECTION("a slice of wider rows: not contiguous, and it does not cover its buffer") {
    through_view(cat({x0.detach(), zeros({N, 3})}, 1), [](const Tensor& b) { return b.narrow(1, 0, V); },
                 [](const Tensor& g) { return cat({g, zeros({N, 3})}, 1); });
  }
  SECTION("the first rows of a buffer: contiguous, but it does not cover its buffer") {
    through_view(cat({x0.detach(), zeros({2, V})}, 0), [](const Tensor& b) { return b.narrow(0, 0, N); },
                 [](const Tensor& g) { return cat({g, zeros({2, V})}, 0); });
  }
  SECTION("the last rows of a buffer: contiguous, at an offset") {
    through_view(cat({zeros({2, V}), x0.detach()}, 0), [](const Tensor& b) { return b.narrow(0, 2, N); },
                 [](const Tensor& g) { return cat({zeros({2, V}), g}, 0); });
  }
  SECTION("retain_graph: the second backward sees the logits intact; a last one without it runs in place") {
    Tensor x = x0.detach().clone().requires_grad_();
    Tensor dlogits, loss;
    const void* logits_data = nullptr;
    {
      Tensor logits = probe(x, &dlogits);
      logits_data = logits.data_ptr();
      loss = cross_entropy(logits, t);
    }
    loss.backward(Tensor(), /*retain_graph=*/true);
    CHECK(dlogits.data_ptr() != logits_data);
    const std::vector<unsigned char> first = bytes_of(dlogits);
    dlogits = Tensor();
    loss.backward(Tensor(), /*retain_graph=*/true);
    CHECK(dlogits.data_ptr() != logits_data);
    CHECK((bytes_of(dlogits) == first));
    dlogits = Tensor();
    loss.backward();  // the last one
    CHECK(dlogits.data_ptr() == logits_data);
    CHECK((bytes_of(dlogits) == first));
    CHECK((first == bytes_of(reference.dlogits)));
    CHECK_THROWS_WITH(loss.backward(), Catch::Contains("already ran backward"));
  }
  SECTION("RetainValuesGuard keeps the logits' values: they stay as they were") {
    RetainValuesGuard keep;
    Tensor x = x0.detach().clone().requires_grad_();
    Tensor dlogits, loss;
    const void* logits_data = nullptr;
    std::vector<unsigned char> before;
    {
      Tensor logits = probe(x, &dlogits);
      logits_data = logits.data_ptr();
      before = bytes_of(logits);
      loss = cross_entropy(logits, t);
    }
    loss.backward();
    CHECK(dlogits.data_ptr() != logits_data);
    const Node& ce = *loss.grad_fn();
    REQUIRE(ce.inputs().size() == 1);
    CHECK((bytes_of(ce.inputs()[0].node->retained_value()) == before));
    CHECK(same_bits(dlogits, reference.dlogits));
  }
}
