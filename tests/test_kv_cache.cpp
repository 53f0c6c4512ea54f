// test_kv_cache.cpp — TransformerLM::forward(ids, KVCache&) against the full forward: the logits at
// every position agree (float64 ≤ 1e-12, float32 ≤ 1e-5 relative; also with last_only) for multi-head,
// grouped-query and multi-query attention, tied and untied heads, batch 1 and 2, prompts of length 1
// and > 1, one token at a time and in chunks; the cache's capacity and shape errors; decoding steps
// that take no new memory from the system.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/error.h"
#include "nn/kv_cache.h"
#include "nn/transformer_lm.h"

using namespace tapegrad;
using namespace tapegrad::nn;

namespace {

TransformerLMConfig small_config(int64_t heads, int64_t kv_heads, DType dtype, bool tie = false) {
  TransformerLMConfig c;
  c.vocab_size = 37;
  c.context_length = 24;
  c.d_model = 32;
  c.n_layers = 2;
  c.n_heads = heads;
  c.n_kv_heads = kv_heads;
  c.d_ff = 48;
  c.tie_embeddings = tie;
  c.dtype = dtype;
  return c;
}

// max |a − b| / max |b|
double rel_diff(const Tensor& a, const Tensor& b) {
  const Tensor a64 = a.to(kFloat64), b64 = b.to(kFloat64);
  return (a64 - b64).abs().max().item<double>() / std::max(b64.abs().max().item<double>(), 1e-300);
}

// Runs `ids` [B, N] through the cache in the given chunk lengths and compares every chunk's logits
// with the same rows of one full forward over all N positions.
void check_chunks(const TransformerLM& lm, const Tensor& ids, const std::vector<int64_t>& chunks, double tol) {
  NoGradGuard no_grad;
  const Tensor full = lm.forward(ids);  // [B, N, V]
  KVCache cache(lm.config, ids.size(0)), last_cache(lm.config, ids.size(0));
  int64_t start = 0;
  for (int64_t len : chunks) {
    const Tensor logits = lm.forward(ids.narrow(1, start, len), cache);
    INFO("positions " << start << ".." << start + len - 1);
    REQUIRE(logits.shape() == Shape{ids.size(0), len, lm.config.vocab_size});
    CHECK(rel_diff(logits, full.narrow(1, start, len)) <= tol);
    // last_only: the last position's logits alone
    const Tensor last = lm.forward(ids.narrow(1, start, len), last_cache, /*last_only=*/true);
    REQUIRE(last.shape() == Shape{ids.size(0), 1, lm.config.vocab_size});
    CHECK(rel_diff(last, full.narrow(1, start + len - 1, 1)) <= tol);
    start += len;
    CHECK(cache.length() == start);
  }
}

}  // namespace

TEST_CASE("KV cache: cached logits equal the full forward at every position", "[nn][kv_cache]") {
  struct Case {
    const char* name;
    int64_t heads, kv_heads;
    bool tie;
  };
  for (const Case c : {Case{"MHA", 4, 4, false}, Case{"GQA", 4, 2, false}, Case{"MQA", 4, 1, true}}) {
    for (DType dt : {kFloat64, kFloat32}) {
      const double tol = dt == kFloat64 ? 1e-12 : 1e-5;
      Generator gen(11);
      TransformerLM lm(small_config(c.heads, c.kv_heads, dt, c.tie), &gen);
      for (int64_t batch : {1, 2}) {
        const Tensor ids = randint(0, 37, {batch, 20}, kInt64, &gen);
        INFO(c.name << " " << dtype_name(dt) << " batch " << batch);
        check_chunks(lm, ids, std::vector<int64_t>(20, 1), tol);  // a prompt of 1, then one token at a time
        std::vector<int64_t> chunks{7};                             // a prompt of 7, then one at a time
        chunks.insert(chunks.end(), 13, 1);
        check_chunks(lm, ids, chunks, tol);
        check_chunks(lm, ids, {5, 3, 1, 6, 5}, tol);  // chunks longer than one after the prompt (masked)
      }
    }
  }
}

TEST_CASE("KV cache: capacity, reset and shape errors", "[nn][kv_cache]") {
  Generator gen(3);
  TransformerLM lm(small_config(4, 2, kFloat64), &gen);
  KVCache cache(lm.config, 1);
  CHECK(cache.capacity() == 24);
  CHECK(cache.num_layers() == 2);
  CHECK(cache.layer(0).k.shape() == Shape{1, 2, 24, 8});
  const Tensor ids = randint(0, 37, {1, 24}, kInt64, &gen);
  const Tensor first = lm.forward(ids.narrow(1, 0, 20), cache);
  // Past the capacity: refused, the cache unchanged.
  CHECK_THROWS_WITH(lm.forward(ids.narrow(1, 0, 5), cache), Catch::Contains("past the KV cache's capacity 24"));
  CHECK(cache.length() == 20);
  lm.forward(ids.narrow(1, 20, 4), cache);
  CHECK(cache.length() == 24);
  CHECK_THROWS(lm.forward(ids.narrow(1, 0, 1), cache));
  // After reset the same prompt gives the same logits again.
  cache.reset();
  CHECK(rel_diff(lm.forward(ids.narrow(1, 0, 20), cache), first) == 0.0);
  // Wrong batch; a cache of another model; a capacity beyond the context.
  CHECK_THROWS_WITH(lm.forward(randint(0, 37, {2, 1}, kInt64, &gen), cache), Catch::Contains("batch"));
  TransformerLM other(small_config(4, 4, kFloat64), &gen);
  KVCache other_cache(other.config, 1);
  CHECK_THROWS_WITH(lm.forward(ids.narrow(1, 0, 1), other_cache), Catch::Contains("KV cache"));
  CHECK_THROWS_WITH(KVCache(lm.config, 1, 25), Catch::Contains("longer than the model's context_length 24"));
  CHECK_THROWS(KVCache(lm.config, 0));
  // No tape: the logits of a cached forward do not require grad even though the weights do.
  KVCache c2(lm.config, 1);
  CHECK_FALSE(lm.forward(ids.narrow(1, 0, 3), c2).requires_grad());
}

TEST_CASE("KV cache: decoding steps after the first take no new memory from the system", "[nn][kv_cache]") {
  // The CPU allocator's cache serves every buffer a decoding step makes once the first step has made
  // them (kernels/cpu/allocator.cpp): no malloc, no page faults per token. Sizes take both matrix-vector
  // paths (our loop for the blocks, BLAS gemv for the 1000 × 64 classifier) and GQA.
  TransformerLMConfig c = small_config(8, 4, kFloat32);
  c.vocab_size = 1000;
  c.d_model = 64;
  c.d_ff = 172;
  c.context_length = 300;
  Generator g(3);
  TransformerLM lm(c, &g);
  NoGradGuard no_grad;
  KVCache cache(lm.config, 1);
  Tensor logits = lm.forward(from_vector<int64_t>({1, 5, 9, 2}, {1, 4}), cache);
  auto next = [&] { return from_vector<int64_t>({argmax(logits.select(1, logits.size(1) - 1), -1).item<int64_t>()}, {1, 1}); };
  for (int i = 0; i < 2; ++i) logits = lm.forward(next(), cache);  // the first decoding steps
  const uint64_t before = kernels::cpu::cpu_system_allocations();
  CHECK(before > 0);  // the counter counts (building the model and the cache took memory)
  for (int i = 0; i < 250; ++i) logits = lm.forward(next(), cache);
  CHECK(cache.length() == 256);
  CHECK(kernels::cpu::cpu_system_allocations() == before);
}
