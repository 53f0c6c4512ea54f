// test_cuda_memory_estimate.cpp — the GPU column of the training memory estimate (lm/memory_estimate.h) against
// the caching allocator's peak (kernels/device_memory.h) over a training step of lm::Trainer on cuda:0, after a
// first step has made AdamW's state: within 15 %, for grad_accum 1 and 2 (where the gradients of the first
// micro-batch live through the second's backward). The CUDA context is outside the allocator: not compared.
#include <cmath>

#include "kernels/device_memory.h"
#include "lm/memory_estimate.h"
#include "lm/trainer.h"
#include "tests/cuda/cuda_test_util.h"

using namespace tapegrad;
using namespace tapegrad::cuda_test;

TEST_CASE("memory estimate: within 15 % of the GPU allocator's peak over a training step", "[cuda][memory]") {
  nn::TransformerLMConfig c;
  c.vocab_size = 512, c.context_length = 64, c.d_model = 128, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2;
  std::vector<uint32_t> tokens(20000);
  Generator g(5);
  for (auto& t : tokens) t = static_cast<uint32_t>(g.below(512));
  const data::TokenSource train = std::span<const uint32_t>(tokens.data(), tokens.size());
  for (int64_t accum : {1, 2}) {
    INFO("grad_accum " << accum);
    lm::TrainOptions o;
    o.batch_size = 16;
    o.grad_accum = accum;
    o.steps = 3;
    o.device = gpu();
    const size_t before = kernels::device_memory(gpu()).allocated_bytes;  // what other tests left alive
    {
      lm::Trainer t(c, o, train, std::nullopt);
      t.train_step();  // AdamW's m and v exist from here on
      kernels::reset_peak_device_memory(gpu());
      t.train_step();
      const kernels::DeviceMemory m = kernels::device_memory(gpu());
      CHECK(m.total_bytes > 0);
      const double peak = double(m.peak_allocated_bytes - before);
      const lm::MemoryEstimate e = lm::estimate_training_memory(c, o, 0);
      const double estimate = double(e.gpu.total - e.gpu.overhead);
      INFO("estimate " << estimate / 1e6 << " MB, allocator peak " << peak / 1e6 << " MB");
      CHECK(peak > 10e6);
      CHECK(std::abs(estimate - peak) <= 0.15 * peak);
    }
  }
}
