// test_residual_norm.cpp — the residual add fused with the RMSNorm after it (add_rms_norm), on the CPU, against
// the unfused pieces it replaces, bit for bit:
//  * Backend::add_rms_norm = binary add, then rms_norm (float32, float64, strided views; a bf16 branch and/or
//    bf16 y next to a float32 stream; all-bf16 with h rounded before the norm reads it);
//  * Backend::rms_norm_backward_add = rms_norm_backward, then binary add onto the residual's gradient (in place,
//    out of place, no residual, only dweight; a bf16 grad_y; all-bf16 rounded once);
//  * the autograd op add_rms_norm = rms_norm(x + branch) then a conversion, forward and every gradient — also
//    when three bf16 matmuls read its output (their gradients are summed in float32, as float32 copies were);
//  * GradInputs::take_gathered, the engine's hand-over of a gathered gradient (when it gives one, when not);
//  * TransformerBlock / TransformerLM with fused adds = the unfused block formula, in float32 and under bf16
//    precision (outputs, hidden states and every parameter gradient).
// Bad arguments: one error, nothing written. The CUDA kernels: tests/cuda/test_cuda_add_rmsnorm.cpp.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/node.h"
#include "autograd/ops.h"
#include "autograd/ops/op_util.h"
#include "autograd/tensor.h"
#include "kernels/binary_op.h"
#include "kernels/error.h"
#include "nn/block.h"
#include "nn/precision.h"
#include "nn/transformer_lm.h"
#include "tests/same_bits.h"
#include "tests/tiny_lm_config.h"

using namespace tapegrad;
using detail::kview;
using testing::elements_differing;
using testing::same_bits;

namespace {

Tensor random(const Shape& s, DType dt, uint64_t seed) {
  Generator g(seed);
  return randn(s, Options(kFloat64), &g).to(dt);
}

kernels::Backend& cpu() { return kernels::backend(kCPU); }

// The reference forward: h = x + branch (branch widened to x's dtype first), the norm of h, y converted.
void add_then_norm(Tensor& h, Tensor& y, Tensor& rstd, const Tensor& x, const Tensor& branch, const Tensor& w) {
  const Tensor b = branch.dtype() == x.dtype() ? branch : branch.to(x.dtype());
  cpu().binary(kernels::BinaryOp::Add, kview(h), kview(x), kview(b));
  Tensor y_wide = empty(y.shape(), Options(x.dtype()));
  cpu().rms_norm(kview(y_wide), kview(rstd), kview(h), kview(w), 1e-5);
  y.copy_(y_wide);
}

}  // namespace

TEST_CASE("add_rms_norm (backend) is binary add then rms_norm, bit for bit", "[residual_norm]") {
  struct Case {
    DType x, branch, y;
  };
  for (const Case c : {Case{kFloat32, kFloat32, kFloat32}, Case{kFloat64, kFloat64, kFloat64},
                       Case{kFloat32, kBFloat16, kFloat32}, Case{kFloat32, kFloat32, kBFloat16},
                       Case{kFloat32, kBFloat16, kBFloat16}, Case{kBFloat16, kBFloat16, kBFloat16}}) {
    for (const bool strided : {false, true}) {
      CAPTURE(c.x, c.branch, c.y, strided);
      const int64_t R = 5, C = 7;
      // strided: x seen through a transpose, branch a column slice of a wider buffer.
      const Tensor x = strided ? random({C, R}, c.x, 1).t() : random({R, C}, c.x, 1);
      const Tensor branch = strided ? random({R, C + 3}, c.branch, 2).narrow(1, 2, C) : random({R, C}, c.branch, 2);
      const Tensor w = random({C}, c.x, 3);
      const DType stat = c.x == kBFloat16 ? kFloat32 : c.x;
      Tensor h = empty({R, C}, Options(c.x)), y = empty({R, C}, Options(c.y)), rstd = empty({R}, Options(stat));
      cpu().add_rms_norm(kview(h), kview(y), kview(rstd), kview(x), kview(branch), kview(w), 1e-5);
      Tensor h_ref = empty({R, C}, Options(c.x)), y_ref = empty({R, C}, Options(c.y)),
             rstd_ref = empty({R}, Options(stat));
      add_then_norm(h_ref, y_ref, rstd_ref, x, branch, w);
      CHECK(elements_differing(h, h_ref) == 0);
      CHECK(elements_differing(y, y_ref) == 0);
      CHECK(elements_differing(rstd, rstd_ref) == 0);
    }
  }
}

TEST_CASE("rms_norm_backward_add (backend) is rms_norm_backward then binary add, bit for bit", "[residual_norm]") {
  const int64_t R = 6, C = 9;
  for (const DType dt : {kFloat32, kFloat64}) {
    for (const DType gdt : {dt, kBFloat16}) {
      if (gdt == kBFloat16 && dt != kFloat32) continue;
      CAPTURE(dt, gdt);
      const Tensor x = random({R, C}, dt, 4), w = random({C}, dt, 5), g = random({R, C}, gdt, 6);
      const Tensor residual = random({R, C}, dt, 7);
      Tensor rstd = empty({R}, Options(dt)), y = empty({R, C}, Options(dt));
      cpu().rms_norm(kview(y), kview(rstd), kview(x), kview(w), 1e-5);
      // the reference: dx and dw, then residual + dx
      const Tensor g_wide = g.to(dt);
      Tensor dx = empty({R, C}, Options(dt)), dw = empty({C}, Options(dt)), sum_ref = empty({R, C}, Options(dt));
      cpu().rms_norm_backward(kview(dx), kview(dw), kview(g_wide), kview(x), kview(w), kview(rstd));
      cpu().binary(kernels::BinaryOp::Add, kview(sum_ref), kview(residual), kview(dx));

      SECTION("in place: grad_residual is grad_x") {
        Tensor gx = residual.clone(), gw = empty({C}, Options(dt));
        cpu().rms_norm_backward_add(kview(gx), kview(gw), kview(g), kview(x), kview(w), kview(rstd), kview(gx));
        CHECK(elements_differing(gx, sum_ref) == 0);
        CHECK(elements_differing(gw, dw) == 0);
      }
      SECTION("out of place, into a strided grad_x") {
        Tensor gx = empty({C, R}, Options(dt)).t();
        cpu().rms_norm_backward_add(kview(gx), {}, kview(g), kview(x), kview(w), kview(rstd), kview(residual));
        CHECK(elements_differing(gx, sum_ref) == 0);
      }
      SECTION("no residual: rms_norm_backward's dx; only dweight") {
        Tensor gx = empty({R, C}, Options(dt)), gw = empty({C}, Options(dt));
        cpu().rms_norm_backward_add(kview(gx), {}, kview(g), kview(x), kview(w), kview(rstd), {});
        CHECK(elements_differing(gx, dx) == 0);
        cpu().rms_norm_backward_add({}, kview(gw), kview(g), kview(x), kview(w), kview(rstd), {});
        CHECK(elements_differing(gw, dw) == 0);
      }
    }
  }
  SECTION("all bfloat16: the sum formed in float32 and rounded once") {
    const Tensor x = random({R, C}, kBFloat16, 8), w = random({C}, kBFloat16, 9), g = random({R, C}, kBFloat16, 10);
    const Tensor residual = random({R, C}, kBFloat16, 11);
    Tensor rstd = empty({R}, Options(kFloat32)), y = empty({R, C}, Options(kBFloat16));
    cpu().rms_norm(kview(y), kview(rstd), kview(x), kview(w), 1e-5);
    Tensor want = empty({R, C}, Options(kFloat32));
    cpu().rms_norm_backward_add(kview(want), {}, kview(g.to(kFloat32)), kview(x.to(kFloat32)),
                                kview(w.to(kFloat32)), kview(rstd), kview(residual.to(kFloat32)));
    Tensor gx = residual.clone();
    cpu().rms_norm_backward_add(kview(gx), {}, kview(g), kview(x), kview(w), kview(rstd), kview(gx));
    CHECK(elements_differing(gx, want.to(kBFloat16)) == 0);
  }
}

TEST_CASE("add_rms_norm and rms_norm_backward_add refuse bad arguments and write nothing", "[residual_norm]") {
  const Tensor x = random({4, 8}, kFloat32, 1), w = random({8}, kFloat32, 2), b = random({4, 8}, kFloat32, 3);
  Tensor h = zeros({4, 8}), y = zeros({4, 8}), rstd = zeros({4});
  const auto untouched = [&] { return same_bits(h, zeros({4, 8})) && same_bits(y, zeros({4, 8})); };
  CHECK_THROWS_WITH(cpu().add_rms_norm(kview(h), kview(y), kview(rstd), kview(x), kview(random({4, 7}, kFloat32, 4)),
                                       kview(w), 1e-5),
                    Catch::Contains("add_rms_norm: branch") && Catch::Contains("must have x's shape"));
  CHECK(untouched());
  const Tensor x64 = x.to(kFloat64);
  Tensor h64 = zeros({4, 8}, kFloat64), y64 = zeros({4, 8}, kFloat64), r64 = zeros({4}, kFloat64);
  CHECK_THROWS_WITH(cpu().add_rms_norm(kview(h64), kview(y64), kview(r64), kview(x64), kview(b.to(kBFloat16)),
                                       kview(w.to(kFloat64)), 1e-5),
                    Catch::Contains("or bfloat16 for float32 x"));
  CHECK(same_bits(h64, zeros({4, 8}, kFloat64)));
  CHECK_THROWS_WITH(cpu().add_rms_norm(kview(h), kview(y), kview(zeros({4}, kFloat64)), kview(x), kview(b), kview(w),
                                       1e-5),
                    Catch::Contains("rstd"));
  CHECK(untouched());
  Tensor gx = zeros({4, 8});
  CHECK_THROWS_WITH(cpu().rms_norm_backward_add(kview(gx), {}, kview(b), kview(x), kview(w), kview(rstd),
                                                kview(zeros({4, 9}))),
                    Catch::Contains("grad_residual"));
  CHECK_THROWS_WITH(cpu().rms_norm_backward_add({}, {}, kview(b), kview(x), kview(w), kview(rstd), kview(b)),
                    Catch::Contains("grad_residual is given but grad_x is not computed"));
  CHECK(same_bits(gx, zeros({4, 8})));
  // the autograd op
  CHECK_THROWS_WITH(add_rms_norm(x, b.to(kFloat64), w, 1e-5, kFloat32),
                    Catch::Contains("add_rms_norm: branch float64 must be x's dtype float32"));
  CHECK_THROWS_WITH(add_rms_norm(x64, Tensor(), w.to(kFloat64), 1e-5, kBFloat16),
                    Catch::Contains("add_rms_norm: normed_dtype bfloat16 must be x's dtype float64"));
  CHECK_THROWS_WITH(add_rms_norm(x, b.reshape({8, 4}), w, 1e-5, kFloat32), Catch::Contains("must have x's shape"));
}

TEST_CASE("add_rms_norm (autograd) = rms_norm(x + branch), forward and gradients bit for bit", "[residual_norm]") {
  for (const DType dt : {kFloat32, kFloat64}) {
    for (const bool with_branch : {true, false}) {
      CAPTURE(dt, with_branch);
      const Tensor x0 = random({2, 3, 16}, dt, 1), b0 = random({2, 3, 16}, dt, 2), w0 = random({16}, dt, 3);
      const Tensor r1 = random({2, 3, 16}, dt, 4), r2 = random({2, 3, 16}, dt, 5);
      // The sum is read after the norm too (the next residual add): its gradient is gathered before the norm's
      // backward runs, which then adds into it in place.
      const auto run = [&](bool fused) {
        Tensor x = x0.clone().requires_grad_(), b = b0.clone().requires_grad_(), w = w0.clone().requires_grad_();
        Tensor sum, normed;
        if (fused) {
          const ResidualNorm r = add_rms_norm(x, with_branch ? b : Tensor(), w, 1e-5, dt);
          sum = r.sum, normed = r.normed;
        } else {
          sum = with_branch ? x + b : x;
          normed = rms_norm(sum, w, 1e-5);
        }
        Tensor loss = (normed * r1).sum() + (sum * sum * r2).sum();
        loss.backward();
        return std::vector<Tensor>{sum, normed, loss, x.grad(), w.grad(), with_branch ? b.grad() : x.grad()};
      };
      const std::vector<Tensor> got = run(true), want = run(false);
      for (size_t i = 0; i < got.size(); ++i) {
        CAPTURE(i);
        CHECK(elements_differing(got[i].detach(), want[i].detach()) == 0);
      }
    }
  }
}

TEST_CASE("add_rms_norm with a bf16 branch and a bf16 output read by three matmuls = the unfused autocast block",
          "[residual_norm]") {
  const int64_t C = 16;
  const Tensor x0 = random({3, C}, kFloat32, 1), b0 = random({3, C}, kBFloat16, 2), w0 = random({C}, kFloat32, 3);
  std::vector<Tensor> m0;
  for (uint64_t i = 0; i < 3; ++i) m0.push_back(random({C, 8}, kBFloat16, 10 + i));
  const Tensor r = random({3, C}, kFloat32, 6);
  const auto run = [&](bool fused) {
    Tensor x = x0.clone().requires_grad_(), b = b0.clone().requires_grad_(), w = w0.clone().requires_grad_();
    std::vector<Tensor> m;
    for (const Tensor& t : m0) m.push_back(t.clone().requires_grad_());
    Tensor sum, loss;
    if (fused) {
      const ResidualNorm rn = add_rms_norm(x, b, w, 1e-5, kBFloat16);
      sum = rn.sum;
      for (const Tensor& mi : m) loss = (loss.defined() ? loss : zeros({})) + matmul(rn.normed, mi).to(kFloat32).sum();
    } else {
      sum = x + b.to(kFloat32);
      const Tensor normed = rms_norm(sum, w, 1e-5);
      // each reader converts its own bf16 copy (Linear's autocast): the gradients meet in float32
      for (const Tensor& mi : m)
        loss = (loss.defined() ? loss : zeros({})) + matmul(normed.to(kBFloat16), mi).to(kFloat32).sum();
    }
    loss = loss + (sum * r).sum();
    loss.backward();
    std::vector<Tensor> out{sum, loss, x.grad(), b.grad(), w.grad()};
    for (const Tensor& mi : m) out.push_back(mi.grad());
    return out;
  };
  const std::vector<Tensor> got = run(true), want = run(false);
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(elements_differing(got[i].detach(), want[i].detach()) == 0);
  }
  CHECK(got[3].dtype() == kBFloat16);  // the branch's gradient in the branch's dtype
}

namespace {

// A pass-through op y = x whose backward adds g onto the gradient gathered for x when the engine hands it over,
// and records what it was handed.
struct Probe {
  bool handed = false;
  Tensor seen;
};

Tensor probe(const Tensor& x, Probe& p) {
  Tensor y = x.detach().clone();
  record("probe", {&x}, y, [&p](const Tensor& g, GradInputs& dx) {
    Tensor gathered = dx.take_gathered(0);
    p.handed = gathered.defined();
    if (!p.handed) {
      dx[0] = g;
      return;
    }
    p.seen = gathered.clone();
    gathered.add_(g);
    dx[0] = gathered;
  });
  return y;
}

}  // namespace

TEST_CASE("take_gathered hands over the gradient gathered for an input's entry, only when it may",
          "[residual_norm]") {
  const Tensor a0 = random({4}, kFloat64, 1);
  SECTION("consumers recorded later have run: their sum is handed over, and the result is the same") {
    Tensor a = a0.clone().requires_grad_();
    Probe p;
    Tensor h = a * 2.0;
    Tensor c = probe(h, p);
    Tensor d = h * 3.0;  // recorded after the probe: runs before it
    (c.sum() + d.sum()).backward();
    REQUIRE(p.handed);
    CHECK(same_bits(p.seen, full({4}, 3.0, kFloat64)));
    CHECK(same_bits(a.grad(), full({4}, 8.0, kFloat64)));  // 2·(1 + 3)
  }
  SECTION("a consumer recorded earlier has not run yet: nothing to hand over") {
    Tensor a = a0.clone().requires_grad_();
    Probe p;
    Tensor h = a * 2.0;
    Tensor d = h * 3.0;
    Tensor c = probe(h, p);
    (c.sum() + d.sum()).backward();
    CHECK_FALSE(p.handed);
    CHECK(same_bits(a.grad(), full({4}, 8.0, kFloat64)));
  }
  SECTION("a leaf input: its .grad is not handed over") {
    Tensor a = a0.clone().requires_grad_();
    Probe p;
    Tensor c = probe(a, p);
    Tensor d = a * 3.0;
    (c.sum() + d.sum()).backward();
    CHECK_FALSE(p.handed);
    CHECK(same_bits(a.grad(), full({4}, 4.0, kFloat64)));
  }
  SECTION("under RetainValuesGuard every entry keeps what it passed: nothing handed over") {
    Tensor a = a0.clone().requires_grad_();
    Probe p;
    RetainValuesGuard keep;
    Tensor h = a * 2.0;
    Tensor c = probe(h, p);
    Tensor d = h * 3.0;
    (c.sum() + d.sum()).backward();
    CHECK_FALSE(p.handed);
    CHECK(same_bits(a.grad(), full({4}, 8.0, kFloat64)));
  }
}

namespace {

// The block as it was before the fusion: each residual add, then the norm of the sum.
Tensor unfused_block(const nn::TransformerBlock& b, const Tensor& x) {
  const Tensor h = nn::add_residual(x, b.attn->forward(b.ln1->forward(x)));
  return nn::add_residual(h, b.ffn->forward(b.ln2->forward(h)));
}

}  // namespace

TEST_CASE("TransformerLM with fused residual norms = the unfused block formula, fp32 and bf16 precision",
          "[residual_norm]") {
  for (const nn::Precision precision : {nn::Precision::FP32, nn::Precision::BF16}) {
    CAPTURE(nn::precision_name(precision));
    nn::TransformerLMConfig config = testing::tiny_gqa_lm();
    config.tie_embeddings = false;
    Generator g(7);
    nn::TransformerLM model(config, &g);
    const Tensor ids = randint(0, config.vocab_size, {2, 9}, Options(kInt64), &g);
    const Tensor targets = randint(0, config.vocab_size, {2, 9}, Options(kInt64), &g);
    const auto run = [&](bool fused, std::vector<Tensor>& hidden) {
      model.zero_grad();
      nn::PrecisionGuard guard(precision);
      Tensor logits;
      if (fused) {
        logits = model.forward(ids, &hidden);
      } else {
        Tensor x = model.token_embeddings->forward(ids);
        for (const auto& block : model.blocks) hidden.push_back(x = unfused_block(*block, x));
        logits = model.lm_head->forward(model.ln_final->forward(x));
      }
      cross_entropy(logits.reshape({-1, config.vocab_size}), targets.reshape({-1})).backward();
      std::vector<Tensor> grads;
      for (const auto& [name, p] : model.named_parameters()) grads.push_back(p.grad().clone());
      return std::make_pair(logits.detach(), grads);
    };
    std::vector<Tensor> hidden_fused, hidden_ref;
    const auto [logits, grads] = run(true, hidden_fused);
    const auto [logits_ref, grads_ref] = run(false, hidden_ref);
    CHECK(elements_differing(logits, logits_ref) == 0);
    REQUIRE(hidden_fused.size() == hidden_ref.size());
    for (size_t l = 0; l < hidden_ref.size(); ++l) CHECK(elements_differing(hidden_fused[l], hidden_ref[l]) == 0);
    REQUIRE(grads.size() == grads_ref.size());
    for (size_t i = 0; i < grads.size(); ++i) {
      CAPTURE(i);
      CHECK(elements_differing(grads[i], grads_ref[i]) == 0);
    }
  }
}
