// test_cuda_sample_token.cpp — the token drawn on the device (autograd sample_token, kernels/cuda/sample_token.cu)
// against the host's lm::Sampler, an independent implementation of the same rules (heap top-k, bucketed top-p,
// sequential float64 sums), given the same logits and the same uniform:
//  * every option set (greedy, temperature only, top_k, top_p, both; k = 1, k ≥ V, k spanning several chunks of
//    the kernel's 512, a top_p prefix of thousands of tokens), float32 / bfloat16 / float64 logits, V from 1 to
//    5000, rows with long runs of equal logits across chunk boundaries, −inf logits, −0 beside +0, and the
//    extreme uniforms 0 and 1 − 2⁻⁵³: the same id every time (the sums differ only in their order, so a mismatch
//    would need u·Σw within ~1e-15 of a boundary);
//  * status: the row's max; a NaN / +inf logit gives {its lowest index, its value}, an all −inf row {0, −inf};
//  * the id is also written into `token`; a captured call replays with the uniform it reads at replay time;
//  * the CPU has no such kernel, and bad arguments are one clear error.
// [sample_token_san]: the cases short enough for compute-sanitizer (scripts/gpu_check.sh: memcheck, racecheck).
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/device_graph.h"
#include "lm/generate.h"
#include "lm/sampler.h"
#include "tests/cuda/cuda_test_util.h"

using namespace tapegrad;
using namespace tapegrad::cuda_test;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// {id, status} drawn on the GPU from `logits` (any device) with uniform u.
std::vector<double> draw_on_gpu(const Tensor& logits, double u, const lm::SamplerOptions& o) {
  const Tensor uniform = tensor({u}, Options(kFloat64).device(gpu()));
  return values(sample_token(on_cuda(logits), uniform, o.on_device()));
}

// lm::Sampler's id for the same logits and u (a sampler whose next uniform is u: its generator is advanced to it).
uint32_t draw_on_host(const Tensor& logits, uint64_t seed, const lm::SamplerOptions& o) {
  lm::Sampler sampler(o, seed);
  const std::vector<double> z = values(logits);  // float32 / bfloat16 widen exactly
  return sampler.sample(std::span<const double>(z));
}

// Rows of V logits of one kind, as float64 values (converted to the tested dtype by the caller).
std::vector<double> row_values(int kind, int64_t V, Generator& gen) {
  std::vector<double> z(static_cast<size_t>(V));
  for (double& x : z) {
    const double n = gen.normal();
    switch (kind) {
      case 0: x = 3 * n; break;                          // spread out
      case 1: x = 0.05 * n; break;                       // nearly flat: top_p keeps most of the row
      case 2: x = std::round(2 * n) / 2; break;          // a handful of values, long runs of ties
      case 3: x = gen.uniform() < 0.3 ? -kInf : 2 * n; break;  // −inf tokens
      default: x = gen.uniform() < 0.5 ? 0.0 : -0.0; break;    // only zeros of both signs: all tied
    }
  }
  return z;
}

}  // namespace

TEST_CASE("sample_token draws lm::Sampler's token for every option set and dtype", "[cuda][sample_token]") {
  struct Case {
    double temperature;
    int64_t top_k;
    double top_p;
    bool greedy;
  };
  const std::vector<Case> cases{
      {1.0, 0, 1.0, true},   {0.0, 0, 1.0, false},  {1.0, 0, 1.0, false},  {0.7, 0, 1.0, false},
      {1.0, 1, 1.0, false},  {1.0, 5, 1.0, false},  {1.3, 40, 1.0, false}, {1.0, 700, 1.0, false},
      {1.0, 0, 0.9, false},  {0.8, 0, 0.5, false},  {1.0, 0, 0.999, false}, {1.0, 0, 1e-9, false},
      {1.0, 40, 0.9, false}, {1.0, 1200, 0.95, false}, {2.0, 100000, 0.8, false}};
  const std::vector<int64_t> sizes{1, 7, 600, 2500};
  Generator gen(5);
  int64_t draws = 0;
  for (const DType dt : {kFloat32, kBFloat16, kFloat64}) {
    for (const int64_t V : sizes) {
      for (int kind = 0; kind < 5; ++kind) {
        const Tensor logits = tensor(row_values(kind, V, gen), Options(kFloat64)).to(dt);
        for (const Case& c : cases) {
          lm::SamplerOptions o;
          o.temperature = c.temperature, o.top_k = c.top_k, o.top_p = c.top_p, o.greedy = c.greedy;
          for (uint64_t seed = 0; seed < 3; ++seed) {
            INFO(fmt::format("{} V {} kind {} T {} top_k {} top_p {} greedy {} seed {}", dt, V, kind, c.temperature,
                             c.top_k, c.top_p, c.greedy, seed));
            Generator uniform_source(seed);
            const std::vector<double> got = draw_on_gpu(logits, uniform_source.uniform(), o);
            const std::vector<double> z = values(logits);
            double m = -kInf;
            for (const double x : z) m = std::max(m, x);
            CHECK(got[1] == m);
            if (m > -kInf) {
              CHECK(got[0] == draw_on_host(logits, seed, o));
            } else {  // the host refuses the row; the device says so in its status
              CHECK_THROWS_WITH(draw_on_host(logits, seed, o), Catch::Contains("every logit is -inf"));
              CHECK(got[0] == 0);
            }
            ++draws;
          }
        }
      }
    }
  }
  CHECK(draws == 3 * 4 * 5 * 15 * 3);
}

TEST_CASE("sample_token at the extreme uniforms takes the first and the last token of the draw order",
          "[cuda][sample_token][sample_token_san]") {
  Generator gen(9);
  const Tensor logits = tensor(row_values(0, 1500, gen), Options(kFloat32));
  const std::vector<double> z = values(logits);
  const std::vector<std::pair<int64_t, double>> option_sets{{0, 1.0}, {0, 0.7}, {900, 1.0}, {50, 0.6}};
  for (const auto& [top_k, top_p] : option_sets) {
    lm::SamplerOptions o;
    o.top_k = top_k, o.top_p = top_p;
    INFO(fmt::format("top_k {} top_p {}", top_k, top_p));
    const lm::Sampler host(o, 0);
    const auto dist = host.distribution(std::span<const double>(z));  // draw order
    CHECK(draw_on_gpu(logits, 0.0, o)[0] == dist.front().first);
    uint32_t last = dist.front().first;
    for (const auto& [id, p] : dist)
      if (p > 0) last = id;
    CHECK(draw_on_gpu(logits, 1 - 0x1p-53, o)[0] == last);
  }
}

TEST_CASE("sample_token reports NaN, +inf and all −inf rows in its status",
          "[cuda][sample_token][sample_token_san]") {
  lm::SamplerOptions sampled, greedy;
  greedy.greedy = true;
  sampled.top_k = 3;
  for (const lm::SamplerOptions& o : {sampled, greedy}) {
    std::vector<double> z(40, 1.0);
    z[9] = kInf;
    z[5] = std::numeric_limits<double>::quiet_NaN();
    std::vector<double> got = draw_on_gpu(tensor(z, Options(kFloat32)), 0.5, o);
    CHECK(got[0] == 5);
    CHECK(std::isnan(got[1]));
    z[5] = 2.0;
    got = draw_on_gpu(tensor(z, Options(kBFloat16)), 0.5, o);
    CHECK(got[0] == 9);
    CHECK(got[1] == kInf);
    got = draw_on_gpu(tensor(std::vector<double>(40, -kInf), Options(kFloat64)), 0.5, o);
    CHECK(got[0] == 0);
    CHECK(got[1] == -kInf);
  }
}

TEST_CASE("sample_token writes the id into token and replays in a graph with the uniform of each replay",
          "[cuda][sample_token][sample_token_san]") {
  Generator gen(3);
  const Tensor logits = on_cuda(tensor(row_values(0, 300, gen), Options(kFloat32)));
  lm::SamplerOptions o;
  o.top_k = 50, o.top_p = 0.9;
  Tensor uniform = zeros({1}, Options(kFloat64).device(gpu()));
  const Tensor token = full({1}, -1.0, Options(kInt64).device(gpu()));
  Tensor result = zeros({2}, Options(kFloat64).device(gpu()));
  auto graph = kernels::capture_device_work(gpu_be(), [&] {
    NoGradGuard no_grad;
    result.copy_(sample_token(logits, uniform, o.on_device(), token));
  });
  REQUIRE(graph != nullptr);
  for (const double u : {0.1, 0.5, 0.93, 0.0}) {
    uniform.fill_(u);
    graph->replay();
    const std::vector<double> want = draw_on_gpu(logits, u, o);  // eager
    CHECK(values(result) == want);
    CHECK(values(token)[0] == want[0]);
  }
}

TEST_CASE("sample_token: the CPU has no kernel, and bad arguments are one clear error", "[cuda][sample_token]") {
  const Tensor row = randn({10});
  const TokenSampling sampled{1.0, 0, 1.0, false};
  CHECK_THROWS_WITH(sample_token(row, tensor({0.5}, Options(kFloat64)), sampled),
                    Catch::Contains("cpu has no kernel drawing tokens"));
  const Tensor g = on_cuda(row), u = tensor({0.5}, Options(kFloat64).device(gpu()));
  CHECK_THROWS_WITH(sample_token(g.view({2, 5}), u, sampled), Catch::Contains("one row [V]"));
  CHECK_THROWS_WITH(sample_token(g, u.to(kFloat32), sampled), Catch::Contains("float64 tensor of 1 element"));
  CHECK_THROWS_WITH(sample_token(g, Tensor(), sampled), Catch::Contains("sample_token"));
  CHECK_THROWS_WITH(sample_token(g, u, TokenSampling{1.0, 0, 1.5, false}), Catch::Contains("top_p must be in (0, 1]"));
  CHECK_THROWS_WITH(sample_token(g, u, sampled, zeros({1}, Options(kFloat32).device(gpu()))),
                    Catch::Contains("token must be an int64"));
  CHECK_THROWS_WITH(sample_token(g.to(kInt64), u, sampled), Catch::Contains("sample_token"));
  const TokenSampling greedy{1.0, 0, 1.0, true};
  CHECK(values(sample_token(g, Tensor(), greedy))[1] == values(row.max())[0]);  // greedy needs no uniform
}

TEST_CASE("next_token on the device draws the host Sampler's token and moves the Sampler on as the host does",
          "[cuda][sample_token]") {
  Generator gen(4);
  const Tensor logits = tensor(row_values(0, 700, gen), Options(kFloat32)).view({1, 1, 700});
  lm::SamplerOptions o;
  o.temperature = 0.9, o.top_p = 0.8;
  lm::Sampler host(o, 12), device(o, 12);
  const Tensor on_gpu = on_cuda(logits);
  for (int i = 0; i < 20; ++i) {
    CHECK(lm::next_token(device, on_gpu) == lm::next_token(host, logits));
    CHECK(device.state() == host.state());
  }
  std::vector<double> z(700, 0.0);
  z[3] = std::numeric_limits<double>::quiet_NaN();
  const Generator::State before = device.state();
  CHECK_THROWS_WITH(lm::next_token(device, on_cuda(tensor(z, Options(kFloat32)).view({1, 1, 700}))),
                    Catch::Contains("the logit of token 3 is nan"));
  CHECK(device.state() == before);  // a refused row draws nothing, as on the host
}
