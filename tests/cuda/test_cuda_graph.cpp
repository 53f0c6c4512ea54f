// test_cuda_graph.cpp — CUDA graphs (kernels/device_graph.h, kernels/cuda/graph.cu; docs/cuda.md "CUDA graphs"):
//  * capturing records the work and does not run it; replay() runs it, bit-identical to the eager ops, again
//    with new input data copied into the captured inputs; host→device copies made during capture are replayed;
//  * a device→host copy or synchronize() during capture is one clear error, and the backend works after;
//  * the graph's private pool: its blocks are never handed to other work while it lives, and go back to the
//    cache when it dies;
//  * AdamW with its scalars read from the device gives the bits of AdamW with them as arguments;
//  * lm::Trainer with cuda_graph on gives the eager step's losses, norms, parameters and AdamW state bit for
//    bit (issue 23 §4), with grad_accum, through run() (metrics) and across a checkpoint and resume — on
//    batches that repeat token ids (the embedding's backward is deterministic: kernels/cuda/index_add.cu);
//  * two eager steps give the same embedding gradient bits;
//  * --cuda-graph on is refused where the step cannot be captured.
// On the emulated device (CI) the capture is the recorded emulation; on a GPU (scripts/gpu_check.sh) the real one.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "autograd/ops_from_table.h"
#include "kernels/cuda/graph_capture.h"
#include "kernels/device_graph.h"
#include "lm/trainer.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/test_data_helpers.h"
#include "tests/tiny_lm_config.h"

using namespace tapegrad;
using namespace tapegrad::cuda_test;

namespace {

std::unique_ptr<kernels::DeviceGraph> capture(const std::function<void()>& work) {
  auto g = kernels::capture_device_work(gpu_be(), work);
  REQUIRE(g != nullptr);
  return g;
}

// The few ops of the graph below: a matmul, elementwise, softmax, a reduction, a constant copied from the host.
Tensor some_ops(const Tensor& x, const Tensor& w) {
  const Tensor bias = from_vector<float>({0.5f, -1.0f, 2.0f}, {3}).to(gpu());  // a host→device copy
  const Tensor h = softmax(exp(matmul(x, w) * 0.25) + bias, 1);
  return (h * h).sum({1}, true);
}

// The per-step metrics of a run directory without the timings.
std::vector<nlohmann::json> metrics_without_timings(const std::string& dir) {
  std::ifstream in(std::filesystem::path(dir) / "metrics.jsonl");
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j = nlohmann::json::parse(line);
    for (const char* k : {"wall_s", "tokens_per_s"}) j.erase(k);
    out.push_back(j);
  }
  return out;
}

// Tokens of period 13 over the vocabulary of 64: every window of context 16 repeats ids, and a batch of 2
// repeats them across its rows. The embedding's backward (index_add) sums a repeated id's gradients in
// position order on the GPU too (kernels/cuda/index_add.cu), so the steps are bitwise reproducible with
// repeats — as real text always has them.
std::vector<uint32_t> repeating_tokens(size_t n, size_t offset) {
  std::vector<uint32_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = static_cast<uint32_t>(((i * 7 + offset) % 13) * 5 % 64);
  return t;
}

}  // namespace

TEST_CASE("graph: the CPU cannot capture: capture_device_work returns null and runs nothing", "[cuda][graph]") {
  bool ran = false;
  CHECK(kernels::capture_device_work(cpu_be(), [&] { ran = true; }) == nullptr);
  CHECK_FALSE(ran);
}

TEST_CASE("graph: a captured fill is recorded, not run, until replay", "[cuda][graph]") {
  Tensor t = zeros({100}, Options(kFloat32).device(gpu()));
  auto g = capture([&] { t.fill_(3.0); });
  CHECK_FALSE(kernels::cuda::capturing());
  CHECK(values(t) == std::vector<double>(100, 0.0));
  g->replay();
  CHECK(values(t) == std::vector<double>(100, 3.0));
  t.zero_();
  g->replay();
  CHECK(values(t) == std::vector<double>(100, 3.0));
}

TEST_CASE("graph: replaying a few captured ops gives the eager bits, also with new input data", "[cuda][graph]") {
  const Tensor w = on_cuda(randn({5, 3}, Options(kFloat32)));
  Tensor x = on_cuda(randn({4, 5}, Options(kFloat32)));  // the captured input: new data is copied into it
  Tensor out;
  auto g = capture([&] { out = some_ops(x, w); });
  for (int round = 0; round < 3; ++round) {
    INFO("round " << round);
    if (round > 0) x.copy_(randn({4, 5}, Options(kFloat32)));
    g->replay();
    if (round == 1) g->replay();  // twice on the same input: the same result
    const std::vector<double> want = values(some_ops(x, w));
    CHECK(values(out) == want);
  }
}

TEST_CASE("graph: a device->host copy or synchronize() during capture is one clear error, the backend works after",
          "[cuda][graph]") {
  const Tensor x = on_cuda(randn({8}, Options(kFloat64)));
  CHECK_THROWS_WITH(capture([&] { (void)(x * 2.0).sum().item<double>(); }),
                    Catch::Contains("device->host copy") && Catch::Contains("during CUDA graph capture"));
  CHECK_FALSE(kernels::cuda::capturing());
  CHECK_THROWS_WITH(capture([&] { gpu_be().synchronize(); }),
                    Catch::Contains("synchronize()") && Catch::Contains("during CUDA graph capture"));
  CHECK_FALSE(kernels::cuda::capturing());
  // Nested captures and an end without a begin are refused by name.
  CHECK_THROWS_WITH(capture([&] { (void)gpu_be().begin_capture(); }), Catch::Contains("already in progress"));
  CHECK_THROWS_WITH(gpu_be().end_capture(), Catch::Contains("no CUDA graph capture is in progress"));
  // Eager work and a new capture work.
  CHECK(values(x * 2.0) == values((x + x)));
  Tensor y = zeros({8}, Options(kFloat64).device(gpu()));
  auto g = capture([&] { y.copy_(x * 1.0); });  // x * 1.0: a temporary from the graph's pool
  g->replay();
  CHECK(values(y) == values(x));
  CHECK(kernels::cuda::graph_pool_bytes() > 0);
  g.reset();
  CHECK(kernels::cuda::graph_pool_bytes() == 0);
}

TEST_CASE("graph: the pool's blocks go to no one else while the graph lives, and back to the cache when it dies",
          "[cuda][graph]") {
  REQUIRE(kernels::cuda::graph_pool_bytes() == 0);
  gpu_be().synchronize();  // makes the device error record (a block kept for the process) before the count
  kernels::cuda::empty_cache();
  const kernels::cuda::MemoryStats before = kernels::cuda::memory_stats();
  const Options f32 = Options(kFloat32).device(gpu());
  void* scratch_block = nullptr;
  Tensor kept;  // allocated in the capture, outlives it
  auto g = capture([&] {
    Tensor scratch = full({1 << 18}, 1.0, f32);  // 1 MiB, freed during the capture
    scratch_block = scratch.data_ptr();
    kept = scratch * 2.0;
  });
  CHECK(kernels::cuda::graph_pool_bytes() >= 2 * (size_t(1) << 20));
  {  // the freed block stays the graph's: an eager tensor of its size gets another block
    const Tensor eager = empty({1 << 18}, f32);
    CHECK(eager.data_ptr() != scratch_block);
  }
  kernels::cuda::empty_cache();  // frees the cache, never a live graph's pool
  CHECK(kernels::cuda::memory_stats().reserved_bytes >= before.reserved_bytes + 2 * (size_t(1) << 20));
  g->replay();
  CHECK(values(kept) == std::vector<double>(size_t(1) << 18, 2.0));
  g.reset();
  CHECK(kernels::cuda::graph_pool_bytes() == 0);  // the graph is gone: `kept` returns to the cache when freed
  kept = Tensor();
  kernels::cuda::empty_cache();  // now every block of the graph is freed: back to where it started
  CHECK(kernels::cuda::memory_stats().allocated_bytes == before.allocated_bytes);
  CHECK(kernels::cuda::memory_stats().reserved_bytes == before.reserved_bytes);
}

TEST_CASE("graph: AdamW reading its scalars from the device gives the bits of AdamW with them as arguments",
          "[cuda][graph][adamw]") {
  for (DType dt : {kFloat32, kFloat64}) {
    INFO(dtype_name(dt));
    const AdamWHyper h{3e-3, 0.9, 0.95, 1e-8, 0.1};
    std::vector<std::array<Tensor, 4>> a, b;
    for (int64_t n : {1, 37, 20000}) {
      const Tensor p = randn({n}, Options(dt)), g = randn({n}, Options(dt)), m = randn({n}, Options(dt)) * 0.1;
      const Tensor v = rand({n}, Options(dt));
      for (auto* set : {&a, &b}) set->push_back({on_cuda(p), on_cuda(g), on_cuda(m), on_cuda(v)});
    }
    Tensor scalars = zeros({7}, Options(kFloat64).device(gpu()));
    for (int64_t step = 1; step <= 3; ++step) {
      adamw_update_many_(a, h, step);
      scalars.copy_(adamw_step_scalars(h, step));
      adamw_update_many_from_device_(b, scalars);
    }
    for (size_t i = 0; i < a.size(); ++i)
      for (int k : {0, 2, 3}) CHECK(values(a[i][size_t(k)]) == values(b[i][size_t(k)]));
  }
  // The CPU has no such kernel: one clear error.
  const Tensor p = zeros({3}), g = zeros({3}), m = zeros({3}), v = zeros({3});
  CHECK_THROWS_WITH(adamw_update_many_from_device_({{p, g, m, v}}, zeros({7}, Options(kFloat64))),
                    Catch::Contains("no AdamW kernel reading its scalars from device memory"));
}

TEST_CASE("graph: Trainer steps replayed from CUDA graphs give the eager steps' bits", "[cuda][graph][lm]") {
  const std::vector<uint32_t> tokens = repeating_tokens(3000, 23);
  const data::TokenSource train = std::span<const uint32_t>(tokens.data(), tokens.size());
  lm::TrainOptions o;
  o.batch_size = 2;  // ids repeat within and across rows (repeating_tokens)
  o.grad_accum = 3;
  o.steps = 5;
  o.lr = 1e-2;
  o.warmup_steps = 2;     // lr changes every step: the AdamW scalars come from the device
  o.grad_clip = 0.5;      // the clipping scales
  o.device = gpu();
  std::vector<lm::StepStats> stats[2];
  std::map<std::string, std::vector<double>> params[2];
  for (int k = 0; k < 2; ++k) {
    o.cuda_graph = k == 1;
    lm::Trainer t(testing::tiny_gqa_lm(), o, train, std::nullopt);
    for (int s = 0; s < o.steps; ++s) {
      const uint64_t syncs = kernels::cuda::sync_count();
      stats[k].push_back(t.train_step());
      CHECK(kernels::cuda::sync_count() == syncs + 1);  // one read per step, eager, capturing or replaying
    }
    for (const auto& [name, p] : t.model().named_parameters()) params[k][name] = values(p);
    if (k == 1) CHECK(kernels::cuda::graph_pool_bytes() > 0);
  }
  CHECK(kernels::cuda::graph_pool_bytes() == 0);  // the trainer and its graphs are gone
  for (int s = 0; s < o.steps; ++s) {
    INFO("step " << s + 1);
    CHECK(stats[0][size_t(s)].loss == stats[1][size_t(s)].loss);
    CHECK(stats[0][size_t(s)].grad_norm == stats[1][size_t(s)].grad_norm);
    CHECK(stats[0][size_t(s)].lr == stats[1][size_t(s)].lr);
  }
  CHECK(stats[0].back().grad_norm > o.grad_clip);  // the clipping did scale
  for (const auto& [name, v] : params[0]) {
    INFO(name);
    CHECK(v == params[1].at(name));
  }
}

TEST_CASE("graph: two eager GPU steps on a batch with repeated ids give the same embedding gradient bits",
          "[cuda][graph][lm][index_det]") {
  // The embedding's backward used to sum a repeated id's rows with atomicAdd: on a real GPU two identical
  // steps then differed in the last bits of token_embeddings.weight's gradient. (The emulated device may run
  // atomics in order, so there this guards the deterministic kernel rather than exposing the old one.)
  Generator gen(5);
  nn::TransformerLM lm(testing::tiny_gqa_lm(), &gen);
  lm.to(gpu());
  const std::vector<uint32_t> tokens = repeating_tokens(2 * 16 + 1, 3);
  std::vector<int64_t> x(32), y(32);
  for (size_t i = 0; i < 32; ++i) {
    x[i] = tokens[i];
    y[i] = tokens[i + 1];
  }
  const Tensor ids = from_vector<int64_t>(x, {2, 16}).to(gpu()), targets = from_vector<int64_t>(y, {32}).to(gpu());
  std::vector<double> grads[2];
  for (auto& grad : grads) {
    lm.zero_grad();
    cross_entropy(lm(ids).reshape({32, 64}), targets).backward();
    for (const auto& [name, p] : lm.named_parameters())
      if (name == "token_embeddings.weight") grad = values(p.grad());
  }
  REQUIRE(grads[0].size() == size_t(64 * 32));
  CHECK(grads[0] == grads[1]);
  // the rows of the batch's 13 ids got gradient, the other 51 rows none
  int rows_with_gradient = 0;
  for (size_t r = 0; r < 64; ++r)
    rows_with_gradient += std::any_of(grads[0].begin() + long(r * 32), grads[0].begin() + long(r * 32 + 32),
                                      [](double g) { return g != 0.0; });
  CHECK(rows_with_gradient == 13);
}

TEST_CASE("graph: train with cuda_graph on and off writes the same metrics, and resumes exactly", "[cuda][graph][lm]") {
  const std::vector<uint32_t> tokens = repeating_tokens(4000, 29);
  const data::TokenSource train = std::span<const uint32_t>(tokens.data(), 3500);
  const data::TokenSource val = std::span<const uint32_t>(tokens.data() + 3500, 500);
  data::testing::ScratchDir dir("cuda_graph_train");
  lm::TrainOptions o;
  o.batch_size = 2;  // ids repeat within and across rows (repeating_tokens)
  o.grad_accum = 2;
  o.steps = 6;
  o.lr = 1e-2;
  o.warmup_steps = 1;
  o.eval_every = 3;
  o.device = gpu();
  std::map<std::string, std::vector<double>> final_params[3];
  for (int k = 0; k < 3; ++k) {  // 0: eager; 1: graphs; 2: graphs, stopped after step 3 and resumed
    o.cuda_graph = k > 0;
    o.out_dir = dir.file(fmt::format("run{}", k));
    lm::Trainer t(testing::tiny_gqa_lm(), o, train, val);
    lm::TrainCallbacks cb;
    if (k == 2) cb.should_stop = [&] { return t.step() == 3; };
    lm::TrainResult r = t.run(cb);
    if (k == 2) {
      REQUIRE(r.status == lm::TrainStatus::Stopped);
      lm::Trainer resumed(testing::tiny_gqa_lm(), o, train, val);
      resumed.resume(r.last_checkpoint);
      r = resumed.run();
      for (const auto& [name, p] : resumed.model().named_parameters()) final_params[k][name] = values(p);
    } else {
      for (const auto& [name, p] : t.model().named_parameters()) final_params[k][name] = values(p);
    }
    REQUIRE(r.status == lm::TrainStatus::Completed);
  }
  const auto eager = metrics_without_timings(dir.file("run0"));
  REQUIRE(eager.size() >= size_t(o.steps));
  CHECK(metrics_without_timings(dir.file("run1")) == eager);
  CHECK(metrics_without_timings(dir.file("run2")) == eager);
  for (const auto& [name, v] : final_params[0]) {
    INFO(name);
    CHECK(v == final_params[1].at(name));
    CHECK(v == final_params[2].at(name));
  }
}

TEST_CASE("graph: --cuda-graph on is refused where the step cannot be captured", "[cuda][graph][lm]") {
  lm::TrainOptions o;
  o.cuda_graph = true;
  o.device = Device::cpu();
  CHECK_THROWS_WITH(o.validate(), Catch::Contains("--cuda-graph on needs --device cuda"));
  o.device = gpu();
  o.validate();
  o.detect_anomaly = true;
  CHECK_THROWS_WITH(o.validate(), Catch::Contains("--detect-anomaly"));
  o.detect_anomaly = false;
  lm::SftData sft;
  sft.train.push_back(lm::SftExample{{1, 2, 3}, {0, 1, 1}, "x", ""});
  CHECK_THROWS_WITH(lm::Trainer(testing::tiny_gqa_lm(), o, sft),
                    Catch::Contains("--cuda-graph on is not available with --sft"));
  CHECK(lm::parse_cuda_graph_flag("on"));
  CHECK_FALSE(lm::parse_cuda_graph_flag("off"));
  CHECK_THROWS_WITH(lm::parse_cuda_graph_flag("yes"), Catch::Contains("--cuda-graph must be on or off"));
}
