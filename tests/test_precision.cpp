// test_precision.cpp — the mixed-precision policy (nn/precision.h): under a bf16 PrecisionGuard a
// TransformerLM's matmuls and attention run in bfloat16 while its parameters, their gradients, the
// residual stream and the loss stay float32; the gradients are those of float32 within bf16's error;
// float64 models and FP32 precision are untouched; the guard nests and restores.
#include <catch2/catch.hpp>
#include <cmath>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/error.h"
#include "nn/loss.h"
#include "nn/precision.h"
#include "nn/rope.h"
#include "nn/transformer_lm.h"
#include "tests/same_bits.h"
#include "tiny_lm_config.h"

using namespace tapegrad;
using nn::Precision;
using nn::PrecisionGuard;
using nn::Stage;

namespace {

// ‖a − b‖ / ‖b‖ in float64.
double relative_error(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  REQUIRE(x.size() == y.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) num += (x[i] - y[i]) * (x[i] - y[i]), den += y[i] * y[i];
  return std::sqrt(num / den);
}

}  // namespace

TEST_CASE("precision names parse and bad ones are refused naming the flag", "[precision]") {
  for (Precision p : {Precision::FP32, Precision::TF32, Precision::BF16})
    CHECK(nn::parse_precision(nn::precision_name(p)) == p);
  CHECK_THROWS_WITH(nn::parse_precision("fp16", "--precision"),
                    "--precision: 'fp16' is not a precision (expected fp32, tf32 or bf16)");
}

TEST_CASE("PrecisionGuard nests and restores, the policy table per stage", "[precision]") {
  CHECK(nn::current_precision() == Precision::FP32);
  CHECK(nn::stage_dtype(Stage::Matmul) == kFloat32);
  {
    PrecisionGuard bf16(Precision::BF16);
    CHECK(nn::stage_dtype(Stage::Matmul) == kBFloat16);
    CHECK(nn::stage_dtype(Stage::Attention) == kBFloat16);
    CHECK(nn::stage_dtype(Stage::Residual) == kFloat32);
    CHECK(nn::stage_dtype(Stage::Norm) == kFloat32);
    CHECK(nn::stage_dtype(Stage::Embedding) == kFloat32);
    CHECK(nn::stage_dtype(Stage::Loss) == kFloat32);
    {
      PrecisionGuard tf32(Precision::TF32);
      CHECK(nn::current_precision() == Precision::TF32);
      CHECK(nn::stage_dtype(Stage::Matmul) == kFloat32);
    }
    CHECK(nn::current_precision() == Precision::BF16);
    // Only float32 is converted: float64 (gradcheck) and integers pass unchanged.
    const Tensor x64 = ones({2, 2}, kFloat64);
    CHECK(nn::autocast(x64, Stage::Matmul).dtype() == kFloat64);
    CHECK(nn::autocast(ones({2}, kInt64), Stage::Matmul).dtype() == kInt64);
    CHECK(nn::autocast(ones({2}, kFloat32), Stage::Matmul).dtype() == kBFloat16);
    CHECK(nn::autocast(ones({2}, kFloat32), Stage::Norm).dtype() == kFloat32);
  }
  CHECK(nn::current_precision() == Precision::FP32);
}

TEST_CASE("bf16 precision: bf16 matmuls, float32 residual, loss and gradients, close to float32", "[precision]") {
  Generator gen(7);
  nn::TransformerLM model(tapegrad::testing::tiny_gqa_lm(), &gen);
  const Tensor ids = randint(0, 64, {2, 16}, kInt64, &gen);
  const Tensor targets = randint(0, 64, {2, 16}, kInt64, &gen);

  Tensor loss32 = nn::cross_entropy(model.forward(ids), targets);
  loss32.backward();
  std::map<std::string, Tensor> grad32;
  for (const auto& [name, p] : model.named_parameters()) grad32[name] = p.grad().clone();
  model.zero_grad();

  Tensor loss16;
  {
    PrecisionGuard bf16(Precision::BF16);
    std::vector<Tensor> hidden;
    const Tensor logits = model.forward(ids, &hidden);
    CHECK(logits.dtype() == kBFloat16);  // lm_head is a matmul
    for (const Tensor& h : hidden) CHECK(h.dtype() == kFloat32);  // the residual stream
    loss16 = nn::cross_entropy(logits, targets);
    CHECK(loss16.dtype() == kFloat32);
    loss16.backward();
  }
  // bf16 has 8 significant bits: the loss within 1 %, each gradient within a few % of float32's.
  CHECK(std::abs(loss16.item() - loss32.item()) / loss32.item() < 0.01);
  for (const auto& [name, p] : model.named_parameters()) {
    INFO(name);
    REQUIRE(p.grad().defined());
    CHECK(p.dtype() == kFloat32);
    CHECK(p.grad().dtype() == kFloat32);  // the master weights' gradients
    CHECK(relative_error(p.grad(), grad32.at(name)) < 0.05);
  }
}

TEST_CASE("bf16 precision leaves a float64 model exactly as it is", "[precision]") {
  Generator gen(3);
  nn::TransformerLM model(tapegrad::testing::tiny_gqa_lm(kFloat64), &gen);
  const Tensor ids = randint(0, 64, {1, 8}, kInt64, &gen);
  const Tensor plain = model.forward(ids);
  PrecisionGuard bf16(Precision::BF16);
  const Tensor guarded = model.forward(ids);
  CHECK(guarded.dtype() == kFloat64);
  CHECK(guarded.to_vector<double>() == plain.to_vector<double>());
}

TEST_CASE("bf16 precision: a KV cache made under it is bf16 and decoding matches the full forward", "[precision]") {
  Generator gen(11);
  nn::TransformerLM model(tapegrad::testing::tiny_gqa_lm(), &gen);
  const Tensor ids = randint(0, 64, {1, 10}, kInt64, &gen);
  PrecisionGuard bf16(Precision::BF16);
  nn::KVCache cache(model.config, 1);
  CHECK(cache.layer(0).k.dtype() == kBFloat16);
  NoGradGuard no_grad;
  const Tensor full = model.forward(ids).narrow(1, 9, 1).to(kFloat32);  // the last position's logits
  model.forward(ids.narrow(1, 0, 6), cache);
  Tensor step;
  for (int64_t t = 6; t < 10; ++t) step = model.forward(ids.narrow(1, t, 1), cache);
  // The cached path rounds K and V to bf16 as the full forward's attention does: the same within bf16 error.
  CHECK(relative_error(step.to(kFloat32), full) < 0.02);
}

TEST_CASE("WeightCast keeps a weight's bf16 copy under a CastCacheGuard until the weight changes", "[precision]") {
  nn::PrecisionGuard bf16(nn::Precision::BF16);
  Tensor w = randn({8, 4}, Options().requires_grad());
  nn::WeightCast cast;
  SECTION("training (grad mode, w requires grad): converted on the tape every time, nothing kept") {
    nn::CastCacheGuard cache;
    const Tensor a = cast(w, nn::Stage::Matmul), b = cast(w, nn::Stage::Matmul);
    CHECK(a.dtype() == kBFloat16);
    CHECK(a.requires_grad());
    CHECK(a.storage() != b.storage());
  }
  SECTION("without the guard: a new copy each time") {
    NoGradGuard no_grad;
    CHECK(cast(w, nn::Stage::Matmul).storage() != cast(w, nn::Stage::Matmul).storage());
  }
  SECTION("inference under the guard: one copy, renewed after an in-place write") {
    NoGradGuard no_grad;
    nn::CastCacheGuard cache;
    const Tensor a = cast(w, nn::Stage::Matmul), b = cast(w, nn::Stage::Matmul);
    CHECK(a.dtype() == kBFloat16);
    CHECK(a.storage() == b.storage());
    CHECK(a.to(kFloat32).to_vector<float>() == w.to(kBFloat16).to(kFloat32).to_vector<float>());
    w.mul_(2.0);  // an optimizer step or a load would do the same: the version moves on
    const Tensor c = cast(w, nn::Stage::Matmul);
    CHECK(c.storage() != a.storage());
    CHECK(c.to(kFloat32).to_vector<float>() == w.to(kBFloat16).to(kFloat32).to_vector<float>());
    CHECK(cast(w, nn::Stage::Norm).dtype() == kFloat32);  // a float32 stage: the weight itself
    CHECK(cast(w.t(), nn::Stage::Matmul).storage() != c.storage());  // another view of it: converted anew
  }
  SECTION("under fp32 nothing is converted") {
    nn::PrecisionGuard fp32(nn::Precision::FP32);
    NoGradGuard no_grad;
    nn::CastCacheGuard cache;
    CHECK(cast(w, nn::Stage::Matmul).storage() == w.storage());
  }
}

TEST_CASE("RotaryEmbedding converts its tables once per dtype, again only when they change", "[precision]") {
  nn::RotaryEmbedding rope(10000.0, 8, 16);
  const auto [c32, s32] = rope.tables_as(kFloat32);
  CHECK(c32.storage() == rope.cos_table.storage());  // its own dtype: the tables themselves
  const auto [c1, s1] = rope.tables_as(kBFloat16);
  const auto [c2, s2] = rope.tables_as(kBFloat16);
  CHECK(c1.dtype() == kBFloat16);
  CHECK((c1.storage() == c2.storage() && s1.storage() == s2.storage()));  // kept
  CHECK(testing::same_bits(c1, rope.cos_table.to(kBFloat16)));
  CHECK(testing::same_bits(s1, rope.sin_table.to(kBFloat16)));
  rope.sin_table.mul_(0.5);  // an in-place write (a load would do the same): converted anew
  const auto [c3, s3] = rope.tables_as(kBFloat16);
  CHECK(s3.storage() != s1.storage());
  CHECK(testing::same_bits(s3, rope.sin_table.to(kBFloat16)));
  rope.cos_table = rope.cos_table.clone();  // another storage (to(device) replaces the buffers so)
  CHECK(rope.tables_as(kBFloat16).first.storage() != c3.storage());
  CHECK(rope.tables_as(kFloat64).first.dtype() == kFloat64);
  // the rotation with the kept tables is the rotation with freshly converted ones
  const Tensor x = randn({2, 5, 8}).to(kBFloat16), pos = rope.positions(3, 5);
  const Tensor cf = rope.cos_table.to(kBFloat16), sf = rope.sin_table.to(kBFloat16);
  CHECK(testing::same_bits(rope.forward(x, pos), tapegrad::rope(x, cf, sf, pos)));
}

TEST_CASE("bf16 inference keeps its weight copies and gives the logits it gives without them", "[precision]") {
  Generator gen(5);
  nn::TransformerLM model(tapegrad::testing::tiny_gqa_lm(), &gen);
  nn::PrecisionGuard bf16(nn::Precision::BF16);
  NoGradGuard no_grad;
  const Tensor ids = randint(0, 64, {2, 6}, kInt64, &gen);
  const Tensor plain = model.forward(ids);
  nn::CastCacheGuard cache;
  const Tensor first = model.forward(ids), second = model.forward(ids);
  CHECK(first.to(kFloat32).to_vector<float>() == plain.to(kFloat32).to_vector<float>());
  CHECK(second.to(kFloat32).to_vector<float>() == plain.to(kFloat32).to_vector<float>());
}
