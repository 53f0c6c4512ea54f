// test_untrusted_numbers.cpp — numbers read from files go through ONE checked parser (parse_number in
// autograd/io/exact_number.h): every field below, given an empty, non-numeric, negative or 2^70 value, is
// refused with a tapegrad::Error naming the field and the value — never std::invalid_argument /
// std::out_of_range from std::stoull & co (issue 35 §2). Library calls and `tapegrad train --init-from`.
#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/io/exact_number.h"
#include "autograd/io/safetensors.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "data/bpe_model.h"
#include "data/hf_tokenizer_json.h"
#include "kernels/error.h"
#include "lm/chat_template.h"
#include "lm/model_io.h"
#include "lm/text_codec.h"
#include "nn/transformer_lm.h"
#include "optim/checkpoint.h"
#include "test_data_helpers.h"
#include "tiny_lm_config.h"
#include "tool_runner.h"

using namespace tapegrad;
using tapegrad::data::testing::ScratchDir;
using tapegrad::data::testing::write_all;
namespace fs = std::filesystem;

namespace {

// Empty, non-numeric, negative, 2^70.
const std::vector<std::string> kBad = {"", "12x", "-1", "1180591620717411303424"};

// The message parse_number gives for `field` = `value`.
std::string refusal(const std::string& field, const std::string& value) {
  return fmt::format("{} = '{}' is not a valid number", field, value);
}

}  // namespace

TEST_CASE("parse_number: the value, or an Error naming the field and the value", "[untrusted][numbers]") {
  CHECK(parse_number<uint64_t>("42", "f") == 42);
  CHECK(parse_number<int64_t>("-42", "f") == -42);
  CHECK(parse_number<double>("0.5", "f") == 0.5);
  CHECK(parse_number<uint32_t>("4294967295", "f") == 4294967295u);
  for (const std::string& v : std::vector<std::string>{"", "12x", "-1", "1180591620717411303424", " 1", "+1", "1 ",
                                                       "4294967296"}) {
    INFO(v);
    CHECK_THROWS_MATCHES(parse_number<uint32_t>(v, "file 'x': field 'n'"), Error,
                         Catch::Message(refusal("file 'x': field 'n'", v) + " (an integer from 0 to 4294967295)"));
  }
  CHECK_THROWS_AS(parse_number<uint64_t>("1180591620717411303424", "f"), Error);
  CHECK_THROWS_AS(parse_number<int64_t>("-1180591620717411303424", "f"), Error);
  for (const std::string& v : std::vector<std::string>{"", "abc", "1e400", "0.5x"})
    CHECK_THROWS_MATCHES(parse_number<double>(v, "f"), Error, Catch::Message(refusal("f", v)));
  // A long value is shown cut.
  CHECK_THROWS_WITH(parse_number<int>(std::string(1000, '9'), "f"),
                    Catch::Contains("…") && !Catch::Contains(std::string(100, '9')));
}

TEST_CASE("codec_for_checkpoint and tokenizer_for_checkpoint: a bad config.vocab_size is an Error naming it",
          "[untrusted][numbers]") {
  ScratchDir dir("untrusted_vocab");
  const std::string tok = dir.file("tokenizer.json");
  data::BpeModel bytes;
  for (int b = 0; b < 256; ++b) bytes.vocab.emplace_back(1, char(b));
  data::save_hf_tokenizer_json(bytes, tok);
  for (const std::string& v : kBad) {
    INFO("vocab_size = '" << v << "'");
    optim::Checkpoint ck;
    ck.config["vocab_size"] = v;
    const std::string message = refusal("checkpoint 'ck.safetensors': config.vocab_size", v);
    CHECK_THROWS_MATCHES(lm::codec_for_checkpoint(ck, "ck.safetensors", tok), Error,
                         Catch::Message(message + " (an integer from 0 to 18446744073709551615)"));
    CHECK_THROWS_MATCHES(lm::tokenizer_for_checkpoint(ck, "ck.safetensors", tok), Error,
                         Catch::Message(message + " (an integer from 0 to 18446744073709551615)"));
  }
}

TEST_CASE("chat template record: a bad count or id is an Error naming the field", "[untrusted][numbers]") {
  const std::map<std::string, std::string> good = {{"chat_template", lm::kChatTemplateName},
                                                   {"chat_special_ids", "256,257,258,259"},
                                                   {"chat_added_tokens", "4"},
                                                   {"chat_tokenizer_vocab", "256"}};
  REQUIRE(lm::ChatTemplate::from_run_info(good, "run").has_value());
  for (const char* field : {"chat_special_ids", "chat_added_tokens", "chat_tokenizer_vocab"})
    for (const std::string& v : kBad) {
      INFO(field << " = '" << v << "'");
      auto run_info = good;
      run_info[field] = v;
      CHECK_THROWS_MATCHES(lm::ChatTemplate::from_run_info(run_info, "run"), Error,
                           Catch::Message(refusal(fmt::format("run: '{}'", field), v) +
                                          " (an integer from 0 to 4294967295)"));
    }
}

TEST_CASE("read_checkpoint: a bad step, RNG word or hyperparameter is an Error naming it", "[untrusted][numbers]") {
  ScratchDir dir("untrusted_checkpoint");
  Generator gen(1);
  nn::TransformerLM model(testing::tiny_gqa_lm(), &gen);
  const std::string path = dir.file("ck.safetensors");
  lm::save_model_checkpoint(model, path, {});
  std::map<std::string, std::string> meta;
  const optim::TensorMap tensors = load_safetensors(path, &meta);
  int edits = 0;
  for (const char* key : {"step", "rng.s0", "optim.fixed.beta1"})
    for (const std::string& v : kBad) {
      // The step is signed (a negative one is refused by a later check); beta1 a double (2^70 is one).
      if ((std::string(key) != "rng.s0" && v == "-1") || (std::string(key) == "optim.fixed.beta1" && v.size() > 4))
        continue;
      INFO(key << " = '" << v << "'");
      auto m = meta;
      REQUIRE(m.count(key));
      m[key] = v;
      m["checksum"] = optim::checkpoint_checksum(m, tensors);
      const std::string edited = dir.file(fmt::format("edited_{}.safetensors", edits++));
      save_safetensors(edited, tensors, m);
      CHECK_THROWS_WITH(optim::read_checkpoint(edited),
                        Catch::Contains(refusal(fmt::format("checkpoint '{}': metadata '{}'", edited, key), v)));
    }
}

TEST_CASE("tool: train --init-from a llama2.c import with a bad vocabulary size: one line naming the field",
          "[tool][untrusted][numbers]") {
  ScratchDir dir("untrusted_train");
  Generator gen(1);
  nn::TransformerLM model(testing::tiny_gqa_lm(), &gen);
  const std::string run = dir.file("base");
  fs::create_directories(fs::path(run) / "checkpoints");
  write_all((fs::path(run) / "tokenizer.bin").string(), "not read: the vocabulary size is refused first");
  const std::string text = dir.file("text.txt");
  write_all(text, "Once upon a time there was a cat.\n");
  const std::string base = (fs::path(run) / "checkpoints" / "base.safetensors").string();
  lm::save_model_checkpoint(model, base, {{"run.tokenizer_kind", "llama2c"}});
  std::map<std::string, std::string> meta;
  const optim::TensorMap tensors = load_safetensors(base, &meta);
  int edits = 0;
  for (const char* key : {"extra.run.chat_tokenizer_vocab", "config.vocab_size"})
    for (const std::string& v : kBad) {
      INFO(key << " = '" << v << "'");
      auto m = meta;
      m[key] = v;
      m["checksum"] = optim::checkpoint_checksum(m, tensors);
      const std::string edited = (fs::path(run) / "checkpoints" / fmt::format("e{}.safetensors", edits++)).string();
      save_safetensors(edited, tensors, m);
      const testing::ToolResult r =
          testing::run_tool({"train", "--init-from", edited, "--text", text, "--steps", "1", "--threads", "1",
                             "--out", dir.file(fmt::format("out{}", edits))},
                            dir.file("log"));
      INFO("stdout: " << r.out << "\nstderr: " << r.err);
      CHECK(r.signal == 0);
      CHECK(r.exit_code != 0);
      const std::string field = std::string(key).starts_with("extra.") ? std::string(key).substr(6) : key;
      CHECK(r.err == "tapegrad: " + refusal(fmt::format("checkpoint '{}': {}", edited, field), v) +
                         " (an integer from 0 to 18446744073709551615)\n");
    }
}

TEST_CASE("tool: a negative value for an unsigned option (--seed) is refused, on the command line and in --config",
          "[untrusted][numbers][tool]") {
  ScratchDir dir("untrusted_seed");
  const std::string ini = dir.file("opts.ini");
  write_all(ini, "seed = -1\n");
  for (const char* cmd : {"train", "generate", "chat"}) {
    INFO(cmd);
    testing::ToolResult r = testing::run_tool({cmd, "--seed=-1"}, dir.file("a"));
    CHECK(r.exit_code == 2);
    CHECK(r.err == "tapegrad: --seed must be a non-negative integer, but is '-1'\n");
    r = testing::run_tool({cmd, "--config", ini}, dir.file("b"));
    CHECK(r.exit_code == 2);
    CHECK(r.err == "tapegrad: --config '" + ini + "': --seed must be a non-negative integer, but is '-1'\n");
  }
}
