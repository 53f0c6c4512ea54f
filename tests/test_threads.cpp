// test_threads.cpp — every CPU kernel that splits its work over threads gives the same bits on 1 and on
// 3 threads, forward and backward. The threaded kernels are kernels/cpu/*.cpp through parallel_for
// (parallel.h: static chunks of an OpenMP parallel region), reduce.cpp's per-thread partial sums and
// fused_attention.cpp's own region; sizes here are above their grain (kElementwiseGrain = 32768
// elements, or rows of that many elements) so the threaded path really runs, with odd sizes so the
// chunks are uneven. Static chunks make the result independent of the thread count, so equality is
// exact. ctest runs these everywhere with the rest; scripts/test.sh also runs them (every test whose
// name holds "thread") under ThreadSanitizer with OpenMP's Archer tool (docs/reliability.md).
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "autograd/tapegrad.h"
#include "tests/thread_count.h"

using namespace tapegrad;

namespace {

using testing::ThreadCount;

struct Run {
  std::vector<double> y;
  std::vector<std::vector<double>> grads;
};

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// f on fresh leaves copied from `inputs` with `threads` threads; backward of sum(f · w) for a fixed
// random w when the output is floating point (w makes every output element's gradient differ).
Run run_with(int threads, const Fn& f, const std::vector<Tensor>& inputs) {
  ThreadCount tc(threads);
  std::vector<Tensor> leaves;
  for (const Tensor& x : inputs) {
    Tensor c = x.detach().clone();
    if (x.requires_grad()) c.requires_grad_(true);
    leaves.push_back(c);
  }
  const Tensor y = f(leaves);
  Run r;
  r.y = y.to_vector<double>();
  if (y.requires_grad()) {
    Generator g(1234);
    const Tensor w = randn(y.shape(), Options(y.dtype()), &g);
    sum(y * w).backward();
    for (const Tensor& l : leaves)
      if (l.requires_grad()) r.grads.push_back(l.grad().to_vector<double>());
  }
  return r;
}

void same_bits(const std::string& what, const Fn& f, const std::vector<Tensor>& inputs) {
  INFO(what);
  const Run one = run_with(1, f, inputs), three = run_with(3, f, inputs);
  REQUIRE(one.y.size() == three.y.size());
  CHECK(one.y == three.y);
  REQUIRE(one.grads.size() == three.grads.size());
  for (size_t i = 0; i < one.grads.size(); ++i) {
    INFO("gradient of input " << i);
    CHECK(one.grads[i] == three.grads[i]);
  }
}

Tensor leaf(const Shape& shape, DType dtype, uint64_t seed) {
  Generator g(seed);
  return randn(shape, Options(dtype).requires_grad(true), &g);
}

}  // namespace

TEST_CASE("threads: elementwise, broadcast, where and copies give the same bits on 1 and 3 threads", "[threads]") {
  for (DType dt : {kFloat32, kFloat64}) {
    const Tensor a = leaf({257, 301}, dt, 1), b = leaf({301}, dt, 2), c = leaf({257, 1}, dt, 3);
    same_bits("unary chain", [](const auto& in) { return tanh(exp(in[0] * 0.1)) + sigmoid(in[0]); }, {a});
    same_bits("binary with broadcast", [](const auto& in) { return in[0] * in[1] - in[2] / (abs(in[1]) + 1.0); },
              {a, b, c});
    same_bits("where and masked_fill",
              [](const auto& in) { return masked_fill(where(gt(in[0], 0.0), in[0], in[1]), lt(in[0], -1.0), 0.5); },
              {a, b});
    same_bits("transposed copy", [](const auto& in) { return contiguous(transpose(in[0], 0, 1)) * 2.0; }, {a});
    same_bits("dtype copy", [](const auto& in) { return to_dtype(in[0], kFloat64) + 1.0; }, {a});
    same_bits("zeros / fill", [dt](const auto& in) { return in[0] + full({257, 301}, 0.25, dt); }, {a});
  }
}

TEST_CASE("threads: reductions, softmax and arg-max give the same bits on 1 and 3 threads", "[threads]") {
  for (DType dt : {kFloat32, kFloat64}) {
    const Tensor x = leaf({129, 1023}, dt, 4), tall = leaf({70001, 3}, dt, 5), flat = leaf({200003}, dt, 6);
    same_bits("sum over all (per-thread partials)", [](const auto& in) { return sum(in[0]); }, {flat});
    same_bits("sum of rows", [](const auto& in) { return sum(in[0], {1}); }, {x});
    same_bits("sum of a long column (few outputs)", [](const auto& in) { return sum(in[0], {0}); }, {tall});
    same_bits("mean over dim 0", [](const auto& in) { return mean(in[0], {0}, true); }, {x});
    same_bits("max along rows", [](const auto& in) { return max(in[0], 1); }, {x});
    same_bits("min along a long column", [](const auto& in) { return min(in[0], 0); }, {tall});
    same_bits("max of all", [](const auto& in) { return max(in[0]); }, {flat});
    same_bits("argmax", [](const auto& in) { return argmax(in[0], 1); }, {x});
    same_bits("logsumexp", [](const auto& in) { return logsumexp(in[0], 1); }, {x});
    same_bits("softmax", [](const auto& in) { return softmax(in[0], 1); }, {x});
    same_bits("log_softmax over dim 0", [](const auto& in) { return log_softmax(in[0], 0); }, {x});
  }
}

TEST_CASE("threads: matmul, indexing and the fused Transformer ops give the same bits on 1 and 3 threads",
          "[threads]") {
  const DType dt = kFloat32;
  Generator g(7);
  const Tensor ids = randint(0, 997, {9, 257}, kInt64, &g);
  const Tensor emb = leaf({997, 130}, dt, 8);
  same_bits("embedding (index_add backward)", [&](const auto& in) { return embedding(in[0], ids); }, {emb});
  const Tensor rows = randint(0, 997, {600}, kInt64, &g);
  same_bits("index_select", [&](const auto& in) { return index_select(in[0], 0, rows); }, {emb});
  const Tensor gidx = randint(0, 130, {997, 70}, kInt64, &g);
  same_bits("gather", [&](const auto& in) { return gather(in[0], 1, gidx); }, {emb});
  same_bits("batched matmul", [](const auto& in) { return matmul(in[0], in[1]); },
            {leaf({33, 17, 65}, dt, 9), leaf({33, 65, 19}, dt, 10)});

  const Tensor logits = leaf({301, 1001}, dt, 11);
  const Tensor targets = randint(0, 1001, {301}, kInt64, &g);
  same_bits("cross_entropy", [&](const auto& in) { return cross_entropy(in[0], targets); }, {logits});
  same_bits("rms_norm", [](const auto& in) { return rms_norm(in[0], in[1], 1e-5); },
            {leaf({301, 385}, dt, 12), leaf({385}, dt, 13)});
  same_bits("swiglu", [](const auto& in) { return swiglu(in[0], in[1]); },
            {leaf({301, 385}, dt, 14), leaf({301, 385}, dt, 15)});

  // RoPE on [B, H, T, D] with D = 64: tables [P, D/2], positions [T].
  const int64_t T = 300, D = 64, P = 512;
  // (any table values do: the kernel only reads them)
  const Tensor cos_t = rand({P, D / 2}, Options(dt), &g), sin_t = rand({P, D / 2}, Options(dt), &g);
  const Tensor positions = arange(5.0, double(5 + T), 1.0, kInt64);
  same_bits("rope", [&](const auto& in) { return rope(in[0], cos_t, sin_t, positions); },
            {leaf({2, 3, T, D}, dt, 16)});

  same_bits("causal_attention (GQA)", [](const auto& in) { return causal_attention(in[0], in[1], in[2], 0.125); },
            {leaf({2, 4, 131, 16}, dt, 17), leaf({2, 2, 131, 16}, dt, 18), leaf({2, 2, 131, 16}, dt, 19)});
}

TEST_CASE("threads: the fused AdamW update gives the same bits on 1 and 3 threads", "[threads]") {
  auto step = [](int threads) {
    ThreadCount tc(threads);
    Generator g(20);
    const Tensor p = randn({100003}, Options(kFloat32), &g), grad = randn({100003}, Options(kFloat32), &g);
    const Tensor m = zeros({100003}), v = zeros({100003});
    NoGradGuard no_grad;
    for (int64_t t = 1; t <= 3; ++t) adamw_update_(p, grad, m, v, {1e-2, 0.9, 0.95, 1e-8, 0.1}, t);
    return std::vector<std::vector<float>>{p.to_vector<float>(), m.to_vector<float>(), v.to_vector<float>()};
  };
  CHECK(step(1) == step(3));
}
