// test_decode_step.cpp — the pieces of a decode step that keeps its position in device memory (so that it can be
// captured once as a CUDA graph: lm/graph_decoder.h), on the CPU, against the plain forms they replace:
//  * index_copy_ (rows written at indexed positions): a host loop at dims 0/1/2, strided sources, every dtype,
//    the last of repeated indices winning, and a bad index / shape / dtype refused with nothing written;
//  * causal_attention over a counted prefix of the keys: bit for bit causal_attention on the narrowed keys
//    (float32/float64/bfloat16, grouped-query heads, T 1 and 3, L from T to the capacity), bad counts refused;
//  * TransformerLM::forward_decode: the logits and the cache of forward(token, cache), bit for bit, step after
//    step, in float32 and under bf16 precision; position and length left to the caller.
// The CUDA kernels of the same functions: tests/cuda/test_cuda_decode_kernels.cpp; graph decoding itself:
// tests/cuda/test_cuda_graph_decode.cpp.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/error.h"
#include "nn/kv_cache.h"
#include "nn/precision.h"
#include "nn/transformer_lm.h"
#include "tests/same_bits.h"
#include "tests/tiny_lm_config.h"

using namespace tapegrad;
using testing::same_bits;

namespace {

Tensor random(const Shape& s, DType dt, uint64_t seed) {
  Generator g(seed);
  return randn(s, Options(kFloat64), &g).to(dt);
}

Tensor ids(std::vector<int64_t> v) { return from_vector(v, {int64_t(v.size())}); }

// out with the rows index[j] of dim `dim` replaced by src's rows j, in order: the definition, one row at a time.
Tensor index_copy_by_rows(const Tensor& out, int64_t dim, const std::vector<int64_t>& index, const Tensor& src) {
  Tensor r = out.clone();
  NoGradGuard no_grad;
  for (size_t j = 0; j < index.size(); ++j) r.narrow(dim, index[j], 1).copy_(src.narrow(dim, int64_t(j), 1));
  return r;
}

}  // namespace

TEST_CASE("index_copy_: rows written at their indices, as a host loop, at every dim and dtype", "[decode_step]") {
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kInt64}) {
    for (int64_t dim : {0, 1, 2}) {
      INFO(dtype_name(dt) << " dim " << dim);
      const Shape shape{4, 5, 6};
      Shape src_shape = shape;
      src_shape[size_t(dim)] = 3;
      const std::vector<int64_t> index{3, 0, 2};
      Tensor out = mul(random(shape, kFloat64, 1), 100.0).to(dt);
      const Tensor src = mul(random(src_shape, kFloat64, 2), 100.0).to(dt);
      const Tensor want = index_copy_by_rows(out, dim, index, src);
      index_copy_(out, dim, ids(index), src);
      CHECK(same_bits(out, want));
    }
  }
}

TEST_CASE("index_copy_: strided source and target, int32 index, a repeated index keeps the last row",
          "[decode_step]") {
  // The KV cache's write: cache [B, Hkv, capacity, D] ← k [B, Hkv, 1, D] that is a transposed view.
  Tensor cache = random({1, 2, 8, 4}, kFloat32, 3);
  const Tensor k = random({1, 1, 2, 4}, kFloat32, 4).transpose(1, 2);  // [1, 2, 1, 4], strided
  const Tensor want = index_copy_by_rows(cache, 2, {5}, k);
  index_copy_(cache, 2, from_vector(std::vector<int32_t>{5}, {1}), k);
  CHECK(same_bits(cache, want));
  // Into a strided target (a transposed view of a buffer): the buffer changes where the view says.
  Tensor base = random({6, 3}, kFloat64, 5);
  Tensor target = base.transpose(0, 1);  // [3, 6]
  const Tensor src = random({3, 2}, kFloat64, 6);
  const Tensor want_t = index_copy_by_rows(target, 1, {4, 1}, src);
  index_copy_(target, 1, ids({4, 1}), src);
  CHECK(same_bits(target, want_t));
  CHECK(same_bits(base.transpose(0, 1), want_t));
  // Repeated: row 2 written by j = 0, 2 and 3; j = 3's row stays.
  Tensor out = zeros({4, 3});
  const Tensor rows = from_vector(std::vector<float>{1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4}, {4, 3});
  index_copy_(out, 0, ids({2, 0, 2, 2}), rows);
  CHECK(out.to_vector<float>() == std::vector<float>{2, 2, 2, 0, 0, 0, 4, 4, 4, 0, 0, 0});
  // An empty index writes nothing.
  index_copy_(out, 0, ids({}), zeros({0, 3}));
  CHECK(out.to_vector<float>() == std::vector<float>{2, 2, 2, 0, 0, 0, 4, 4, 4, 0, 0, 0});
}

TEST_CASE("index_copy_: a bad index, shape, dtype or a tensor that requires grad is refused, nothing written",
          "[decode_step]") {
  Tensor out = random({4, 3}, kFloat32, 7);
  const Tensor before = out.clone();
  const Tensor src = random({2, 3}, kFloat32, 8);
  CHECK_THROWS_WITH(index_copy_(out, 0, ids({1, 4}), src),
                    Catch::Contains("index_copy") && Catch::Contains("index 4 at position 1"));
  CHECK_THROWS_WITH(index_copy_(out, 0, ids({-1, 0}), src), Catch::Contains("index -1 at position 0"));
  CHECK(same_bits(out, before));  // the good row of the first call was not written either
  CHECK_THROWS_WITH(index_copy_(out, 0, ids({1}), src), Catch::Contains("src must be [1, 3]"));
  CHECK_THROWS_WITH(index_copy_(out, 0, ids({1, 2}), src.to(kFloat64)), Catch::Contains("dtype"));
  CHECK_THROWS_WITH(index_copy_(out, 0, from_vector(std::vector<float>{1, 2}, {2}), src),
                    Catch::Contains("int64 or int32"));
  CHECK_THROWS_WITH(index_copy_(out, 2, ids({1, 2}), src), Catch::Contains("dim"));
  Tensor leaf = random({4, 3}, kFloat32, 9);
  leaf.requires_grad_();
  CHECK_THROWS_WITH(index_copy_(leaf, 0, ids({1, 2}), src), Catch::Contains("not differentiable"));
  CHECK(same_bits(out, before));
}

TEST_CASE("causal_attention over a counted prefix of the keys = over the narrowed keys, bit for bit",
          "[decode_step]") {
  NoGradGuard no_grad;
  const int64_t B = 2, H = 4, Hkv = 2, Tc = 9, D = 8;
  for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
    const Tensor k = random({B, Hkv, Tc, D}, dt, 11), v = random({B, Hkv, Tc, D}, dt, 12);
    for (int64_t T : {1, 3}) {
      const Tensor q = random({B, H, T, D}, dt, 13 + uint64_t(T));
      for (int64_t L : {T, int64_t(5), Tc}) {
        INFO(dtype_name(dt) << " T " << T << " L " << L);
        const Tensor want = causal_attention(q, k.narrow(2, 0, L), v.narrow(2, 0, L), 0.35);
        const Tensor got = causal_attention(q, k, v, 0.35, ids({L}));
        CHECK(same_bits(got, want));
      }
    }
  }
}

TEST_CASE("causal_attention over a counted prefix: a count outside [T, Tc] or not one int64 is refused",
          "[decode_step]") {
  const Tensor q = random({1, 2, 3, 4}, kFloat32, 21), k = random({1, 1, 6, 4}, kFloat32, 22);
  CHECK_THROWS_WITH(causal_attention(q, k, k, 0.5, ids({2})), Catch::Contains("key count 2 is outside [T, Tc] = [3, 6]"));
  CHECK_THROWS_WITH(causal_attention(q, k, k, 0.5, ids({7})), Catch::Contains("key count 7"));
  CHECK_THROWS_WITH(causal_attention(q, k, k, 0.5, ids({3, 4})), Catch::Contains("one int64"));
  CHECK_THROWS_WITH(causal_attention(q, k, k, 0.5, from_vector(std::vector<int32_t>{4}, {1})),
                    Catch::Contains("one int64"));
  Tensor qg = q.clone();
  qg.requires_grad_();
  CHECK_THROWS_WITH(causal_attention(qg, k, k, 0.5, ids({4})), Catch::Contains("no gradient"));
}

TEST_CASE("forward_decode gives forward(token, cache)'s logits and cache bit for bit, step after step",
          "[decode_step]") {
  for (bool bf16 : {false, true}) {
    INFO((bf16 ? "bf16 precision" : "float32"));
    nn::PrecisionGuard precision(bf16 ? nn::Precision::BF16 : nn::Precision::FP32);
    Generator gen(5);
    const nn::TransformerLM model(testing::tiny_gqa_lm(), &gen);
    nn::KVCache eager(model.config, 1), decode(model.config, 1);
    const Tensor prompt = from_vector(std::vector<int64_t>{3, 9, 27, 17}, {1, 4});
    CHECK(same_bits(model.forward(prompt, eager, true), model.forward(prompt, decode, true)));
    Tensor position = zeros({1}, Options(kInt64));
    for (int64_t token : {5, 60, 0, 33, 12}) {
      INFO("position " << decode.length());
      position.fill_(double(decode.length()));
      const Tensor id = from_vector(std::vector<int64_t>{token}, {1, 1});
      const Tensor want = model.forward(id, eager);
      const Tensor got = model.forward_decode(id, decode, position);
      CHECK(same_bits(got, want));
      CHECK(decode.length() == eager.length() - 1);  // forward_decode leaves the length to its caller
      CHECK(position.to_vector<int64_t>() == std::vector<int64_t>{eager.length() - 1});
      decode.advance(1);
      for (size_t l = 0; l < eager.num_layers(); ++l) {
        CHECK(same_bits(decode.layer(l).k, eager.layer(l).k));
        CHECK(same_bits(decode.layer(l).v, eager.layer(l).v));
      }
    }
  }
}

TEST_CASE("forward_decode refuses a token or position of the wrong shape", "[decode_step]") {
  Generator gen(6);
  const nn::TransformerLM model(testing::tiny_gqa_lm(), &gen);
  nn::KVCache cache(model.config, 1);
  const Tensor pos = zeros({1}, Options(kInt64));
  CHECK_THROWS_WITH(model.forward_decode(from_vector(std::vector<int64_t>{1, 2}, {1, 2}), cache, pos),
                    Catch::Contains("token must be [1, 1]"));
  CHECK_THROWS_WITH(model.forward_decode(from_vector(std::vector<int64_t>{1}, {1, 1}), cache, zeros({1})),
                    Catch::Contains("position must be one int64"));
  // A position past the cache: the CPU names it (RoPE's table check comes first, then index_copy_'s).
  CHECK_THROWS_WITH(model.forward_decode(from_vector(std::vector<int64_t>{1}, {1, 1}), cache, ids({16})),
                    Catch::Contains("position 16 is outside"));
}
