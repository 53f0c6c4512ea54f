// test_model_budget.cpp — a small file cannot make a model loader allocate a huge model (issue 35 §1,
// lm/model_budget.h): for every format (int8 model, float checkpoint, llama2.c, Hugging Face) a hand-made
// file whose config asks for long RoPE tables / a large KV cache, or (float checkpoint) for more weights than
// it holds, is refused before the model exists, with one line naming the field and the figure; the same
// files with an ordinary config load. The cheap cases lower the slack (set_model_allocation_slack) so that
// the model the old code built from them stays small.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/io/checksum.h"
#include "autograd/io/safetensors.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "data/hf_tokenizer_json.h"
#include "data/json_file.h"
#include "kernels/error.h"
#include "lm/hf_llama.h"
#include "lm/llama2c.h"
#include "lm/llama2c_export.h"
#include "lm/model_budget.h"
#include "lm/model_io.h"
#include "lm/quantized_model.h"
#include "nn/transformer_lm.h"
#include "optim/checkpoint.h"
#include "test_data_helpers.h"
#include "tool_runner.h"

using namespace tapegrad;
using tapegrad::data::testing::read_all;
using tapegrad::data::testing::ScratchDir;
using tapegrad::data::testing::write_all;
namespace fs = std::filesystem;

namespace {

// One layer, one head of 64: the RoPE tables and KV cache are 64 × (16 + 4) + 2 · 64 · 4 bytes per position.
nn::TransformerLMConfig small_config() {
  nn::TransformerLMConfig c;
  c.vocab_size = 8;
  c.context_length = 16;
  c.d_model = 64;
  c.n_layers = 1;
  c.n_heads = 1;
  c.d_ff = 64;
  return c;
}

// The slack for one scope.
struct SlackGuard {
  double old = lm::model_allocation_slack();
  explicit SlackGuard(double bytes) { lm::set_model_allocation_slack(bytes); }
  ~SlackGuard() { lm::set_model_allocation_slack(old); }
};

// `path`'s safetensors metadata with `key` = `value`, written to `out`; the checksum recomputed as `format`
// computes it ("checkpoint": optim::checkpoint_checksum; "int8": every other entry, then every tensor).
void rewrite(const std::string& path, const std::string& out, const std::string& key, const std::string& value,
             bool int8) {
  const SafetensorsFile f(path);
  std::map<std::string, std::string> meta = f.metadata();
  meta[key] = value;
  std::map<std::string, std::vector<unsigned char>> bytes;
  std::map<std::string, SafetensorsBytes> raw;
  io::Checksum c;
  for (const auto& [k, v] : meta) {
    if (k == "checksum") continue;
    c.text(k);
    c.text(v);
  }
  for (const SafetensorsEntry& e : f.entries()) {  // sorted by name, as both checksums take them
    auto& b = bytes[e.name];
    b.resize(e.end - e.begin);
    f.read_bytes(e.name, e.dtype, b.data(), b.size());
    c.text(e.name);
    c.text(e.dtype);
    c.word(e.shape.size());
    for (int64_t d : e.shape) c.word(uint64_t(d));
    c.bytes(b.data(), b.size());
    raw[e.name] = {e.dtype, e.shape, b.data(), b.size()};
  }
  if (int8) {
    meta["checksum"] = c.hex();
  } else {
    meta.erase("checksum");
    meta["checksum"] = optim::checkpoint_checksum(meta, load_safetensors(path));
  }
  save_safetensors(out, {}, meta, raw);
}

}  // namespace

TEST_CASE("model budget: what a config allocates, from the config alone", "[model-budget]") {
  const lm::ModelAllocation a = lm::model_allocation(small_config());
  // 8·64 embeddings + 64·8 classifier; 64 final norm + (2·64 norms + 4·64·64 attention + 3·64·64 FFN).
  CHECK(a.embeddings == 2 * 8 * 64 * 4.0);
  CHECK(a.blocks == (64 + 2 * 64 + 7 * 64 * 64) * 4.0);
  CHECK(a.rope == 16 * 64 * 20.0 + 16 * 16);
  CHECK(a.kv_cache == 2 * 16 * 64 * 4.0);
  // The weights are the config's own count, for every architecture option.
  for (int option = 0; option < 5; ++option) {
    nn::TransformerLMConfig c = small_config();
    c.n_heads = 2, c.n_kv_heads = 1, c.d_ff = option % 2 ? 0 : 96;
    if (option == 1) c.ffn = nn::FFNKind::ReLU2;
    if (option == 2) c.qk_norm = true, c.ffn = nn::FFNKind::ReLU2;
    if (option == 3) c.norm_gain = false, c.tie_embeddings = true;
    if (option == 4) c.embed_norm = true, c.dtype = kFloat64;
    const lm::ModelAllocation m = lm::model_allocation(c);
    INFO("option " << option);
    CHECK(m.embeddings + m.blocks == c.parameter_count() * double(dtype_size(c.dtype)));
    nn::TransformerLM built(c);
    CHECK(double(built.num_parameters()) == c.parameter_count());
  }
  // No config overflows the arithmetic or divides by zero.
  nn::TransformerLMConfig huge = small_config();
  huge.vocab_size = huge.context_length = huge.d_model = huge.n_layers = int64_t(1) << 62;
  CHECK(std::isfinite(lm::model_allocation(huge).total()));
  huge.n_heads = 0;
  CHECK(std::isfinite(lm::model_allocation(huge).total()));
  CHECK(lm::format_binary_bytes(3 * 1024.0) == "3.00 KiB");
  CHECK(lm::format_binary_bytes(160.0 * (1 << 30)) == "160 GiB");
}

TEST_CASE("model budget: an int8 model whose context_length asks for more than its weights plus the slack is "
          "refused before the model exists",
          "[model-budget][int8][tool]") {
  ScratchDir dir("budget_int8");
  // The file: vocab 1, d_model 512, one head, no layers (1536 weights); context_length 2^24: RoPE
  // tables of 160 GiB.
  nn::TransformerLMConfig c;
  c.vocab_size = 1, c.context_length = 16, c.d_model = 512, c.n_layers = 0, c.n_heads = 1;
  nn::TransformerLM model(c);
  model.quantize_int8(64);
  const std::string good = dir.file("good.safetensors"), bad = dir.file("bad.safetensors");
  lm::save_int8_model(model, good, 0, {});
  REQUIRE_NOTHROW(lm::read_int8_model(good));
  rewrite(good, bad, "config.context_length", "16777216", true);
  CHECK_THROWS_MATCHES(
      lm::read_int8_model(bad), Error,
      Catch::Message(fmt::format("int8 model '{}': context_length 16777216 (head size 512) asks for 160 GiB of RoPE "
                                 "tables and KV cache, more than the 6.00 KiB of weights in the file plus 1.00 GiB "
                                 "(lm/model_budget.h)",
                                 bad)));
  CHECK_THROWS_WITH(lm::load_inference_model(bad), Catch::Contains("context_length 16777216"));
  // The command: `tapegrad info --checkpoint FILE` ran out of memory; now one line and exit 2.
  const testing::ToolResult r = testing::run_tool({"info", "--checkpoint", bad}, dir.file("info"));
  CHECK(r.signal == 0);
  CHECK(r.exit_code == 2);
  CHECK(r.err.starts_with(fmt::format("tapegrad: int8 model '{}': context_length 16777216", bad)));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  // A context the old bound (2^24) let through, with the slack lowered: refused too.
  const SlackGuard slack(1 << 20);
  rewrite(good, bad, "config.context_length", "4096", true);
  CHECK_THROWS_WITH(lm::read_int8_model(bad), Catch::Contains("context_length 4096 (head size 512) asks for 40.0"));
  rewrite(good, bad, "config.context_length", "64", true);
  CHECK_NOTHROW(lm::read_int8_model(bad));
}

TEST_CASE("model budget: a float checkpoint whose config asks for a long context or more weights than it holds is "
          "refused before the model exists",
          "[model-budget][checkpoint]") {
  ScratchDir dir("budget_checkpoint");
  nn::TransformerLM model(small_config());
  const std::string good = dir.file("good.safetensors"), bad = dir.file("bad.safetensors");
  lm::save_model_checkpoint(model, good, {});
  REQUIRE_NOTHROW(lm::load_inference_model(good));
  rewrite(good, bad, "config.context_length", "1099511627776", false);  // 2^40 positions
  CHECK_THROWS_AS(lm::load_inference_model(bad), Error);
  CHECK_THROWS_WITH(lm::load_inference_model(bad),
                    Catch::StartsWith(
                        fmt::format("checkpoint '{}': context_length 1099511627776 (head size 64) asks for ", bad)) &&
                        Catch::Contains("of RoPE tables and KV cache, more than the 117 KiB of weights in the file "
                                        "plus 1.00 GiB"));
  rewrite(good, bad, "config.vocab_size", "1099511627776", false);  // 2^40 rows of embeddings
  CHECK_THROWS_WITH(lm::load_inference_model(bad), Catch::Contains("vocab_size 1099511627776 (d_model 64) asks for "));
  // Cheap versions that the old code built (and then refused or loaded): refused before the model exists.
  const SlackGuard slack(1 << 20);
  rewrite(good, bad, "config.context_length", "8192", false);
  CHECK_THROWS_WITH(lm::load_inference_model(bad), Catch::Contains("context_length 8192 (head size 64) asks for"));
  rewrite(good, bad, "config.vocab_size", "8192", false);
  CHECK_THROWS_WITH(lm::load_inference_model(bad),
                    Catch::Contains("vocab_size 8192 (d_model 64) asks for 4.11 MiB of weights"));
}

TEST_CASE("model budget: a llama2.c file whose seq_len asks for more than its weights plus the slack is refused",
          "[model-budget][llama2c]") {
  ScratchDir dir("budget_llama2c");
  nn::TransformerLM model(small_config());
  const std::string good = dir.file("good.bin"), bad = dir.file("bad.bin");
  lm::export_llama2c(model, good, {.version = 1});
  REQUIRE_NOTHROW(lm::make_llama2c_model(lm::read_llama2c_model(good)));
  auto with_seq_len = [&](int32_t seq) {
    std::string bytes = read_all(good);
    std::memcpy(bytes.data() + 32, &seq, 4);  // "ak42", version, dim, hidden_dim, n_layers, n_heads, n_kv, vocab
    write_all(bad, bytes);
  };
  with_seq_len(1 << 20);  // the header's own maximum: 1.77 GiB of tables and cache for 117 KiB of weights
  CHECK_THROWS_AS(lm::read_llama2c_model(bad), Error);
  CHECK_THROWS_WITH(lm::read_llama2c_model(bad),
                    Catch::StartsWith(fmt::format("llama2c: '{}': seq_len 1048576 (head size 64) asks for 1.77 GiB of "
                                                  "RoPE tables and KV cache",
                                                  bad)));
  const SlackGuard slack(1 << 20);
  with_seq_len(8192);
  CHECK_THROWS_WITH(lm::read_llama2c_model(bad), Catch::Contains("seq_len 8192 (head size 64) asks for"));
  with_seq_len(256);
  CHECK_NOTHROW(lm::make_llama2c_model(lm::read_llama2c_model(bad)));
}

TEST_CASE("model budget: a Hugging Face config whose max_position_embeddings asks for more than the weights plus "
          "the slack is refused before a tensor is read",
          "[model-budget][hf]") {
  ScratchDir dir("budget_hf");
  nn::TransformerLM model(small_config());
  const std::string hf = dir.file("hf");
  lm::export_hf_llama(model, hf);
  REQUIRE_NOTHROW(lm::import_hf_llama(hf));
  const std::string cfg = (fs::path(hf) / "config.json").string();
  const nlohmann::json original = data::read_json_file(cfg, "test");
  auto with_positions = [&](int64_t n) {
    nlohmann::json j = original;
    j["max_position_embeddings"] = n;
    write_all(cfg, j.dump(2));
  };
  with_positions(int64_t(1) << 24);
  CHECK_THROWS_AS(lm::import_hf_llama(hf), Error);
  CHECK_THROWS_WITH(lm::import_hf_llama(hf), Catch::StartsWith(fmt::format("import hf: '{}': max_position_embeddings "
                                                                           "16777216 (head size 64) asks for 28.25 GiB",
                                                                           cfg)));
  const SlackGuard slack(1 << 20);
  with_positions(8192);
  CHECK_THROWS_WITH(lm::import_hf_llama(hf), Catch::Contains("max_position_embeddings 8192 (head size 64) asks for"));
  with_positions(256);
  CHECK_NOTHROW(lm::import_hf_llama(hf));
}

TEST_CASE("model budget: train --init-from a checkpoint whose config asks for too much is one line, nothing built",
          "[model-budget][tool]") {
  ScratchDir dir("budget_init_from");
  nn::TransformerLMConfig c = small_config();
  c.vocab_size = 256;
  nn::TransformerLM model(c);
  const std::string run = dir.file("base");
  fs::create_directories(fs::path(run) / "checkpoints");
  data::BpeModel bytes;
  for (int b = 0; b < 256; ++b) bytes.vocab.emplace_back(1, char(b));
  data::save_hf_tokenizer_json(bytes, (fs::path(run) / "tokenizer.json").string());
  const std::string good = (fs::path(run) / "checkpoints" / "good.safetensors").string();
  const std::string bad = (fs::path(run) / "checkpoints" / "bad.safetensors").string();
  lm::save_model_checkpoint(model, good, {});
  rewrite(good, bad, "config.context_length", "1099511627776", false);
  const std::string text = dir.file("text.txt");
  std::string corpus;
  for (int i = 0; i < 40; ++i) corpus += "Once upon a time there was a cat number " + std::to_string(i) + ".\n\n";
  write_all(text, corpus);
  const testing::ToolResult r =
      testing::run_tool({"train", "--init-from", bad, "--text", text, "--steps", "1", "--batch-size", "2", "--threads",
                         "1", "--out", dir.file("out")},
                        dir.file("train"));
  INFO(r.out << r.err);
  CHECK(r.signal == 0);
  CHECK(r.exit_code == 2);
  CHECK(r.err.starts_with(fmt::format("tapegrad: --init-from '{}': context_length 1099511627776 (head size 64) asks for ",
                                      bad)));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}
