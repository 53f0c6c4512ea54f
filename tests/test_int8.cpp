// test_int8.cpp — weight-only int8 (kernels/int8.h, autograd/int8_ops.h, nn quantize_int8,
// lm/quantized_model.h): the Q8_0 quantizer's rules; every kernel path (portable, AVX2, AVX-512,
// VNNI; quantized and float activations; whole groups and the small groups 4–32, odd row lengths) exact
// against an integer reference when the scales are 1, and within float tolerance of the dequantized float64
// product otherwise; the SIMD group quantizer bit for bit against the plain loop; the model's logits and
// cached generation; the file's round trip and its bad input; perplexity of stories260K within 1 %
// of float32 and greedy text that starts the same (skipped without ../shared).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <unistd.h>
#include <vector>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/int8_ops.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/cpu/int8_internal.h"
#include "kernels/error.h"
#include "kernels/int8.h"
#include "lm/evaluate.h"
#include "lm/generate.h"
#include "lm/llama2c.h"
#include "lm/llama2c_tokenizer.h"
#include "lm/quantized_model.h"
#include "nn/transformer_lm.h"
#include "optim/checkpoint.h"
#include "tests/shared_fixture.h"

using namespace tapegrad;
using kernels::Int8Activations;
using kernels::Int8Matrix;
using kernels::Int8Path;
namespace fs = std::filesystem;

namespace {

const std::vector<Int8Path> kPaths = {Int8Path::Portable, Int8Path::Avx2, Int8Path::Avx512, Int8Path::Avx512Vnni};

// Whether `path` runs groups of `group` (whole SIMD steps, or the small groups that divide a step).
bool path_fits(Int8Path path, int64_t group) {
  if (path == Int8Path::Portable) return true;
  const int64_t step = path == Int8Path::Avx2 ? 32 : 64;
  return group % step == 0 || (group % 4 == 0 && group < step && step % group == 0);
}

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("tapegrad_int8_" + std::to_string(::getpid()) + "_" + name)).string();
}

// A matrix with random int8 values in [−127, 127] and the given scales (1 → exact integer products).
Int8Matrix random_matrix(int64_t rows, int64_t cols, int64_t group, std::mt19937& rng, bool unit_scales) {
  Int8Matrix m;
  m.rows = rows, m.cols = cols, m.group = group;
  std::uniform_int_distribution<int> v(-127, 127);
  std::uniform_real_distribution<float> s(0.001f, 0.05f);
  for (int64_t i = 0; i < rows * cols; ++i) m.q.push_back(int8_t(v(rng)));
  for (int64_t i = 0; i < rows * m.groups_per_row(); ++i) m.scales.push_back(unit_scales ? 1.0f : s(rng));
  return m;
}

std::vector<float> random_floats(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(size_t(n), 0.0f);
  for (auto& v : x) v = d(rng);
  return x;
}

// y [m, rows] = x [m, cols] · dequant(W)ᵀ in float64.
std::vector<double> reference(const std::vector<float>& x, int64_t m, const Int8Matrix& w) {
  std::vector<float> deq(size_t(w.rows * w.cols));
  kernels::dequantize_int8(w, deq.data());
  std::vector<double> y(size_t(m * w.rows), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t n = 0; n < w.rows; ++n) {
      double s = 0;
      for (int64_t k = 0; k < w.cols; ++k) s += double(x[size_t(i * w.cols + k)]) * deq[size_t(n * w.cols + k)];
      y[size_t(i * w.rows + n)] = s;
    }
  return y;
}

double max_rel(const std::vector<float>& got, const std::vector<double>& want) {
  double err = 0, scale = 1e-30;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::fabs(double(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  return err / scale;
}

nn::TransformerLMConfig small_config(bool tie) {
  nn::TransformerLMConfig c;
  c.vocab_size = 96;
  c.context_length = 32;
  c.d_model = 64;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.d_ff = 160;  // not a multiple of 64: the last group of w2's rows is shorter
  c.tie_embeddings = tie;
  return c;
}

}  // namespace

TEST_CASE("int8: the Q8_0 quantizer rounds half to even per group, and a zero group has scale 0", "[int8]") {
  // group 4: [1, −2, 0.5, 127] → scale 1, q [1, −2, 0, 127]; [2.5, −2.5, 3.5, −127] → [2, −2, 4, −127];
  // [0, 0, 0, 0] → scale 0; the last group of 2: [254, −1] → scale 2, q [127, 0] (−0.5 → −0 → 0).
  const std::vector<float> w = {1, -2, 0.5f, 127, 2.5f, -2.5f, 3.5f, -127, 0, 0, 0, 0, 254, -1};
  const Int8Matrix m = kernels::quantize_int8(w.data(), 1, 14, 4);
  CHECK(m.groups_per_row() == 4);
  CHECK(m.scales == std::vector<float>{1, 1, 0, 2});
  CHECK(m.q == std::vector<int8_t>{1, -2, 0, 127, 2, -2, 4, -127, 0, 0, 0, 0, 127, 0});
  std::vector<float> back(14);
  kernels::dequantize_int8(m, back.data());
  CHECK(back[3] == 127.0f);
  CHECK(back[12] == 254.0f);
  // Every value comes back within half a step of its group's scale.
  std::mt19937 rng(7);
  const std::vector<float> r = random_floats(5 * 100, rng);
  const Int8Matrix q = kernels::quantize_int8(r.data(), 5, 100, 32);
  std::vector<float> d(r.size());
  kernels::dequantize_int8(q, d.data());
  for (size_t i = 0; i < r.size(); ++i) {
    const float scale = q.scales[(i / 100) * 4 + (i % 100) / 32];
    REQUIRE(std::fabs(d[i] - r[i]) <= 0.5f * scale * (1 + 1e-5f));
  }
  const float bad[2] = {1.0f, std::nanf("")};
  CHECK_THROWS_WITH(kernels::quantize_int8(bad, 1, 2, 2), Catch::Contains("value 1 (row 0, column 1) is nan"));
}

TEST_CASE("int8: every kernel path gives the exact integer products when the scales are 1", "[int8]") {
  std::mt19937 rng(11);
  // Groups smaller than a SIMD step (4: runq.c's for stories260K) and whole steps; row lengths of whole groups,
  // a shorter last group, stories260K's d_ff 172, and lengths that end inside a group and inside a step.
  for (int64_t group : {4, 8, 16, 32, 64, 128}) {
    for (int64_t cols : {group * 3, group * 2 + 20, int64_t(172), int64_t(13), int64_t(67)}) {
      const int64_t rows = 19, m = cols == 13 ? 1 : 3;
      const Int8Matrix w = random_matrix(rows, cols, group, rng, /*unit_scales=*/true);
      // Activations: integers in [−127, 127] with 127 in every group, so that quantizing them is exact too.
      std::vector<float> x(size_t(m * cols));
      std::uniform_int_distribution<int> v(-127, 127);
      for (int64_t i = 0; i < m * cols; ++i) x[size_t(i)] = float((i % cols) % group == 0 ? 127 : v(rng));
      std::vector<double> want(size_t(m * rows), 0.0);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t n = 0; n < rows; ++n) {
          int64_t s = 0;
          for (int64_t k = 0; k < cols; ++k) s += int64_t(x[size_t(i * cols + k)]) * w.q[size_t(n * cols + k)];
          want[size_t(i * rows + n)] = double(s);
        }
      for (Int8Path path : kPaths) {
        if (!kernels::int8_path_supported(path)) {
          WARN("SKIPPED: this CPU cannot run the " << kernels::int8_path_name(path) << " path");
          continue;
        }
        for (Int8Activations act : {Int8Activations::Quantized, Int8Activations::Float}) {
          const bool fits = path_fits(path, group);
          std::vector<float> y(size_t(m * rows));
          INFO("path " << kernels::int8_path_name(path) << ", group " << group << ", cols " << cols << ", "
                       << (act == Int8Activations::Float ? "float" : "quantized") << " activations");
          if (!fits) {
            CHECK_THROWS_WITH(kernels::int8_matmul(x.data(), m, w, y.data(), act, path),
                              Catch::Contains("needs groups of a multiple of"));
            continue;
          }
          kernels::int8_matmul(x.data(), m, w, y.data(), act, path);
          for (size_t i = 0; i < y.size(); ++i) REQUIRE(double(y[i]) == want[i]);
        }
      }
    }
  }
}

TEST_CASE("int8: every kernel path is the dequantized float64 product within float tolerance", "[int8]") {
  std::mt19937 rng(5);
  const int64_t rows = 70;
  for (auto [group, cols] : std::vector<std::pair<int64_t, int64_t>>{
           {64, 448}, {4, 172}, {4, 64}, {4, 13}, {8, 200}, {16, 100}, {32, 448}, {32, 70}}) {
    const Int8Matrix w = random_matrix(rows, cols, group, rng, /*unit_scales=*/false);
    for (int64_t m : {1, 4, 33}) {  // decode, a few rows, a prefill
      const std::vector<float> x = random_floats(m * cols, rng);
      // Quantized activations: the reference is the product with x quantized and dequantized the same way.
      const Int8Matrix xq = kernels::quantize_int8(x.data(), m, cols, group);
      std::vector<float> xd(x.size());
      kernels::dequantize_int8(xq, xd.data());
      const std::vector<double> want_f = reference(x, m, w), want_q = reference(xd, m, w);
      for (Int8Path path : kPaths) {
        if (!kernels::int8_path_supported(path)) continue;
        std::vector<float> yf(size_t(m * rows)), yq(size_t(m * rows));
        kernels::int8_matmul(x.data(), m, w, yf.data(), Int8Activations::Float, path);
        kernels::int8_matmul(x.data(), m, w, yq.data(), Int8Activations::Quantized, path);
        INFO("path " << kernels::int8_path_name(path) << ", " << m << " rows, group " << group << ", cols " << cols);
        REQUIRE(path_fits(path, group));  // every group here fits every path
        CHECK(max_rel(yf, want_f) <= 1e-5);
        CHECK(max_rel(yq, want_q) <= 1e-5);
        // Against the unquantized activations the quantized path is off by the activations' rounding only.
        CHECK(max_rel(yq, want_f) <= 2e-2);
      }
    }
  }
}

TEST_CASE("int8: groups of 4 (runq.c's for stories260K) run on the CPU's SIMD path, not the plain loop", "[int8]") {
  for (Int8Path path : {Int8Path::Avx512Vnni, Int8Path::Avx512, Int8Path::Avx2}) {
    if (!kernels::int8_path_supported(path)) continue;
    CHECK(kernels::int8_resolve_path(Int8Path::Auto, 4) == path);
    CHECK(kernels::int8_resolve_path(Int8Path::Auto, 64) == path);
    // 32 stays where whole groups run (AVX2's exact group sums when the CPU has AVX2).
    CHECK(path_fits(kernels::int8_resolve_path(Int8Path::Auto, 32), 32));
    break;
  }
  CHECK(kernels::int8_resolve_path(Int8Path::Auto, 6) == Int8Path::Portable);  // no SIMD kernel for 6
  std::vector<float> x(6, 1.0f), y(1);
  const Int8Matrix w = kernels::quantize_int8(x.data(), 1, 6, 6);
  CHECK_THROWS_WITH(kernels::int8_matmul(x.data(), 1, w, y.data(), Int8Activations::Quantized, Int8Path::Avx2),
                    Catch::Contains("needs groups of a multiple of 32, or of 4 to 16 dividing it, not 6"));
}

TEST_CASE("int8: the SIMD group quantizer gives the plain loop's bits", "[int8]") {
  std::mt19937 rng(13);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::uniform_int_distribution<int> half(-254, 254);
  for (int64_t n : {1, 3, 4, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 172}) {
    for (int kind = 0; kind < 5; ++kind) {
      // 0: normal values; 1: halves k/2 with a 127 (scale 1: every odd k is a tie, rounded to even); 2: zeros;
      // 3: an inf among them; 4: a NaN among them.
      std::vector<float> x(static_cast<size_t>(n));
      for (auto& v : x) v = kind == 0 ? d(rng) : kind == 1 ? float(half(rng)) / 2.0f : 0.0f;
      if (kind == 1) x[size_t(n / 2)] = -127.0f;
      if (kind == 3) x[size_t(n - 1)] = -INFINITY;
      if (kind == 4) x[0] = std::nanf("");
      std::vector<int8_t> got(size_t(n), 99), want(size_t(n), 98);
      const float sg = kernels::cpu::quantize_group(x.data(), n, got.data());
      const float sw = kernels::cpu::quantize_group_reference(x.data(), n, want.data());
      INFO("n " << n << ", kind " << kind);
      CHECK(got == want);
      if (kind >= 3) {
        CHECK(std::isnan(sg));
        CHECK(std::isnan(sw));
      } else {
        CHECK(sg == sw);
      }
    }
  }
}

TEST_CASE("int8: quantizing rows (groups of 4 four at a time) gives the plain loop's bits, row by row", "[int8]") {
  std::mt19937 rng(17);
  std::normal_distribution<float> d(0.0f, 2.0f);
  for (int64_t group : {4, 3, 8, 64}) {
    for (int64_t cols : {1, 3, 4, 5, 13, 16, 17, 64, 67, 172}) {
      const int64_t rows = 3, gpr = (cols + group - 1) / group;
      std::vector<float> x(static_cast<size_t>(rows * cols));
      for (auto& v : x) v = d(rng);
      // Row 1: halves with a 127 in every group (ties to even); row 2: a zero group and a NaN in its last group.
      for (int64_t k = 0; k < cols; ++k) x[size_t(cols + k)] = k % group == 0 ? 127.0f : float(int(k % 9) - 4) + 0.5f;
      for (int64_t k = 0; k < std::min(group, cols); ++k) x[size_t(2 * cols + k)] = 0.0f;
      if (gpr > 1) x[size_t(3 * cols - 1)] = std::nanf("");
      std::vector<int8_t> q(x.size(), 99), want(x.size(), 98);
      std::vector<float> scales(size_t(rows * gpr), -1.0f), want_scales(scales.size(), -2.0f);
      kernels::cpu::quantize_rows(x.data(), rows, cols, group, q.data(), scales.data());
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t g = 0; g < gpr; ++g) {
          const int64_t k0 = r * cols + g * group, n = std::min(group, cols - g * group);
          want_scales[size_t(r * gpr + g)] =
              kernels::cpu::quantize_group_reference(&x[size_t(k0)], n, &want[size_t(k0)]);
        }
      INFO("group " << group << ", cols " << cols);
      CHECK(q == want);
      for (size_t i = 0; i < scales.size(); ++i)
        CHECK((scales[i] == want_scales[i] || (std::isnan(scales[i]) && std::isnan(want_scales[i]))));
    }
  }
}

TEST_CASE("int8: int8_linear and int8_embedding on tensors, and what they refuse", "[int8]") {
  std::mt19937 rng(3);
  const Int8Matrix w = random_matrix(24, 64, 32, rng, false);
  const Tensor x = randn({2, 3, 64});
  Tensor y;
  {
    NoGradGuard no_grad;
    y = int8_linear(x, w);
  }
  REQUIRE(y.shape() == Shape{2, 3, 24});
  std::vector<float> deq(24 * 64);
  kernels::dequantize_int8(w, deq.data());
  const Tensor wd = from_vector(std::vector<double>(deq.begin(), deq.end()), {24, 64}).to(kFloat32);
  const Tensor quantized_x_ref = matmul(x, wd.t());
  CHECK((y - quantized_x_ref).abs().max().item<double>() <= 2e-2 * quantized_x_ref.abs().max().item<double>());
  // From kInt8DequantizeRows rows on: the dequantized weights through sgemm (float activations).
  const Tensor many = randn({kInt8DequantizeRows + 3, 64});
  Tensor y_many;
  {
    NoGradGuard no_grad;
    y_many = int8_linear(many, w);
  }
  const Tensor want_many = matmul(many, wd.t());
  CHECK((y_many - want_many).abs().max().item<double>() <= 1e-5 * want_many.abs().max().item<double>());
  const Tensor e = int8_embedding(from_vector(std::vector<int64_t>{5, 0, 23}, {3}), w);
  REQUIRE(e.shape() == Shape{3, 64});
  CHECK((e.select(0, 0) - wd.select(0, 5)).abs().max().item<double>() == 0.0);
  CHECK_THROWS_WITH(int8_embedding(from_vector(std::vector<int64_t>{24}, {1}), w), Catch::Contains("id 24"));
  CHECK_THROWS_WITH(int8_linear(randn({2, 63}), w), Catch::Contains("must end in 64"));
  CHECK_THROWS_WITH(int8_linear(randn({2, 64}, kFloat64), w), Catch::Contains("float32 on the CPU"));
  const Tensor needs_grad = randn({2, 64}, Options().requires_grad(true));
  CHECK_THROWS_WITH(int8_linear(needs_grad, w), Catch::Contains("no gradient flows"));
}

TEST_CASE("int8: a quantized TransformerLM follows the float one, its file round-trips, bad files are refused",
          "[int8]") {
  for (bool tie : {false, true}) {
    INFO((tie ? "tied" : "separate") << " classifier");
    Generator gen(42);
    nn::TransformerLM model(small_config(tie), &gen);
    const Tensor ids = from_vector(std::vector<int64_t>{3, 17, 42, 5, 88, 1, 0, 63}, {1, 8});
    NoGradGuard no_grad;
    const Tensor float_logits = model.forward(ids);
    const int64_t float_params = model.num_parameters();
    model.quantize_int8(64);
    CHECK(model.is_int8());
    CHECK(model.num_parameters() == 2 * 2 * 64 + 64);  // the RMSNorm weights alone stay parameters
    CHECK(lm::count_weights(model).values == float_params);
    CHECK_THROWS_WITH(model.quantize_int8(64), Catch::Contains("already int8"));
    const Tensor int8_logits = model.forward(ids);
    const double err = (int8_logits - float_logits).abs().max().item<double>() / float_logits.abs().max().item<double>();
    CHECK(err <= 3e-2);
    // The KV-cache path gives the full forward's logits.
    nn::KVCache cache(model.config, 1);
    const Tensor first = model.forward(ids.narrow(1, 0, 5), cache), rest = model.forward(ids.narrow(1, 5, 3), cache);
    CHECK((rest - int8_logits.narrow(1, 5, 3)).abs().max().item<double>() <= 1e-4);

    const std::string path = temp_path(tie ? "tied.safetensors" : "untied.safetensors");
    lm::save_int8_model(model, path, 123, {{"run.tokenizer_kind", "bpe"}});
    REQUIRE(lm::is_int8_model_file(path));
    const lm::InferenceModel back = lm::load_inference_model(path);
    CHECK(back.info.step == 123);
    CHECK(back.int8_group == 64);
    CHECK(back.info.extra.at("run.tokenizer_kind") == "bpe");
    CHECK((back.model->forward(ids) - int8_logits).abs().max().item<double>() == 0.0);  // bit for bit
    // Training from it is refused with a message that says why.
    CHECK_THROWS_WITH(optim::read_checkpoint(path), Catch::Contains("is an int8 model"));

    // A flipped byte anywhere in the data: the checksum.
    std::string bytes;
    {
      std::ifstream f(path, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    }
    const std::string bad = temp_path("bad.safetensors");
    std::string flipped = bytes;
    flipped[flipped.size() - 100] ^= 0x01;
    std::ofstream(bad, std::ios::binary | std::ios::trunc).write(flipped.data(), std::streamsize(flipped.size()));
    CHECK_THROWS_WITH(lm::read_int8_model(bad), Catch::Contains("is corrupt"));
    std::ofstream(bad, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size() / 2));
    CHECK_THROWS_WITH(lm::read_int8_model(bad), Catch::Contains("cannot be read"));
    fs::remove(bad);
    fs::remove(path);
  }
  // −128 is never written by the quantizer; a file holding one (with a valid checksum) is refused.
  nn::TransformerLM model(small_config(false));
  model.quantize_int8(32);
  kernels::Int8Matrix w = *model.lm_head->int8_weight;
  w.q[7] = -128;
  model.lm_head->set_int8_weight(w);
  const std::string path = temp_path("minus128.safetensors");
  lm::save_int8_model(model, path, 0, {});
  CHECK_THROWS_WITH(lm::read_int8_model(path), Catch::Contains("'model.lm_head.weight.int8' value 7 (row 0, column 7) is −128"));
  fs::remove(path);
}

TEST_CASE("int8: stories260K keeps its perplexity within 1 % and its greedy text", "[int8]") {
  const std::string model_path = testing::shared_path("data/llama2c/stories260K.bin"),
                    tok_path = testing::shared_path("data/llama2c/tok512.bin"),
                    text_path = testing::shared_path("data/corpora/tinystories_train_head2MiB.txt");
  const lm::Llama2cModel m = lm::read_llama2c_model(model_path);
  nn::TransformerLM f32(m.config), i8(m.config);
  f32.load_state_dict(m.weights);
  i8.load_state_dict(m.weights);
  i8.quantize_int8(64);
  // Held-out text: 12 KB from the last 10 % of the TinyStories head.
  std::ifstream in(text_path, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto codec = lm::make_llama2c_codec(tok_path, 512);
  const std::vector<uint32_t> ids = codec->encode_prompt(text.substr(text.size() * 9 / 10, 12000));
  const data::TokenSource source{std::span<const uint32_t>(ids)};
  const lm::EvalResult a = lm::evaluate(f32, source, 4, 256), b = lm::evaluate(i8, source, 4, 256);
  INFO("perplexity float32 " << a.perplexity << ", int8 " << b.perplexity << " over " << a.tokens << " tokens");
  CHECK(a.tokens > 2500);
  CHECK(std::fabs(b.perplexity / a.perplexity - 1.0) <= 0.01);
  // Greedy decoding from the same prompt: the first 40 tokens agree.
  lm::GenerateOptions o;
  o.max_tokens = 40;
  o.sampling.greedy = true;
  const std::vector<uint32_t> prompt = codec->encode_prompt("Once upon a time");
  CHECK(lm::generate(i8, prompt, o).tokens == lm::generate(f32, prompt, o).tokens);
}
