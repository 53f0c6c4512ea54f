// test_lm_sft.cpp — instruction tuning (issue 21 §3): the chat template's rendering and record, the loss mask
// token by token, the JSONL reader's errors, padded batches, the vocabulary growth (old rows kept, new rows the
// mean), exact resume of an SFT run, and a micro model that learns to reverse HELD-OUT strings through the Trainer.
// The tool end to end (`tapegrad train --sft`, then generate on its checkpoint) is at the bottom.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "data/bpe_model.h"
#include "data/hf_tokenizer_json.h"
#include "kernels/error.h"
#include "lm/chat_template.h"
#include "lm/model_io.h"
#include "lm/run_dir.h"
#include "lm/sft_data.h"
#include "lm/sft_eval.h"
#include "lm/text_codec.h"
#include "lm/trainer.h"
#include "nn/transformer_lm.h"
#include "optim/checkpoint.h"
#include "test_data_helpers.h"
#include "tool_runner.h"

using namespace tapegrad;
using tapegrad::data::testing::ScratchDir;
using tapegrad::data::testing::write_all;
namespace fs = std::filesystem;

namespace {

// A byte-level BPE without merges: token id = byte value (256 tokens), so the expected ids are readable.
data::BpeModel byte_model() {
  data::BpeModel m;
  for (int b = 0; b < 256; ++b) m.vocab.emplace_back(1, char(b));
  return m;
}

std::unique_ptr<lm::TextCodec> byte_codec() { return lm::make_bpe_codec(byte_model()); }

// The template appended to the 256 bytes: system 256, user 257, assistant 258, end 259.
constexpr uint32_t S = 256, U = 257, A = 258, E = 259;
constexpr int64_t X = lm::kIgnoreIndex;

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

nn::TransformerLMConfig micro_config(int64_t vocab, int64_t context, int64_t d_model = 32, int64_t layers = 1) {
  nn::TransformerLMConfig c;
  c.vocab_size = vocab, c.context_length = context, c.d_model = d_model, c.n_layers = layers, c.n_heads = 4;
  return c;
}

// Greedy decoding without a cache (the model is tiny): the ids after `prompt` up to <|end|> (at most `max_new`).
std::vector<uint32_t> greedy_answer(const nn::TransformerLM& model, std::vector<uint32_t> ids, uint32_t end,
                                    size_t max_new) {
  NoGradGuard no_grad;
  std::vector<uint32_t> out;
  for (size_t k = 0; k < max_new && int64_t(ids.size()) < model.config.context_length; ++k) {
    const std::vector<int64_t> in(ids.begin(), ids.end());
    const Tensor logits = model.forward(from_vector(in, {1, int64_t(in.size())}));  // [1, T, V]
    const std::vector<float> last =
        logits.narrow(1, int64_t(in.size()) - 1, 1).contiguous().reshape({model.config.vocab_size}).to_vector<float>();
    const auto next = uint32_t(std::max_element(last.begin(), last.end()) - last.begin());
    if (next == end) break;
    out.push_back(next);
    ids.push_back(next);
  }
  return out;
}

// "reverse" examples over the letters a..e, length 4: all 625 strings, the user turn the string, the answer reversed.
std::string reverse_jsonl() {
  std::string jsonl;
  const std::string letters = "abcde";
  for (int i = 0; i < 625; ++i) {
    std::string s;
    for (int k = 0, v = i; k < 4; ++k, v /= 5) s += letters[size_t(v % 5)];
    jsonl += "{\"prompt\": \"" + s + "\", \"completion\": \"" + std::string(s.rbegin(), s.rend()) + "\"}\n";
  }
  return jsonl;
}

}  // namespace

TEST_CASE("chat template: appended ids, rendering, special texts, and the record a checkpoint keeps", "[sft]") {
  const auto codec = byte_codec();
  const lm::ChatTemplate t = lm::ChatTemplate::appended(256);
  CHECK(t.system_id == S);
  CHECK(t.user_id == U);
  CHECK(t.assistant_id == A);
  CHECK(t.end_id == E);
  CHECK(t.vocab_size() == 260);
  CHECK(t.encode_message(*codec, {"user", "hi"}) == std::vector<uint32_t>{U, 'h', 'i', E});
  CHECK(t.generation_prompt() == std::vector<uint32_t>{A});
  CHECK(t.encode_conversation(*codec, {{"system", "x"}, {"user", "y"}}, true) ==
        std::vector<uint32_t>{S, 'x', E, U, 'y', E, A});
  CHECK_THROWS_WITH(t.encode_message(*codec, {"bot", "hi"}), Catch::Contains("unknown role 'bot'"));
  CHECK(t.special_text(E) == "<|end|>");
  CHECK(t.special_text(A) == "<|assistant|>");
  CHECK(t.special_text('a') == "");
  CHECK(t.is_special(S));
  CHECK_FALSE(t.is_special(255));

  std::map<std::string, std::string> info;
  t.to_run_info(info);
  CHECK(info.at("chat_template") == lm::kChatTemplateName);
  CHECK(info.at("chat_special_ids") == "256,257,258,259");
  const auto back = lm::ChatTemplate::from_run_info(info, "here");
  REQUIRE(back.has_value());
  CHECK(back->end_id == E);
  CHECK(back->added_tokens == 4);
  CHECK(back->tokenizer_vocab == 256);
  CHECK_FALSE(lm::ChatTemplate::from_run_info({}, "here").has_value());
  info["chat_special_ids"] = "256,257,258";
  CHECK_THROWS_WITH(lm::ChatTemplate::from_run_info(info, "here"), Catch::Contains("4 ids"));
  info["chat_special_ids"] = "256,257,258,999";
  CHECK_THROWS_WITH(lm::ChatTemplate::from_run_info(info, "here"), Catch::Contains("outside the vocabulary"));

  // A BPE tokenizer trained with the four tokens as special tokens: their own ids, nothing appended.
  data::BpeModel with = byte_model();
  for (const char* s : {lm::kSystemToken, lm::kUserToken, lm::kAssistantToken, lm::kEndToken}) {
    with.vocab.emplace_back(s);
    with.special_tokens.emplace_back(s);
  }
  const auto own = lm::chat_template_in_tokenizer(with);
  REQUIRE(own.has_value());
  CHECK(own->system_id == 256);
  CHECK(own->end_id == 259);
  CHECK(own->added_tokens == 0);
  CHECK_FALSE(lm::chat_template_in_tokenizer(byte_model()).has_value());
}

TEST_CASE("sft: the loss mask token by token (system + user + two assistant turns, prompt/completion)", "[sft]") {
  const auto codec = byte_codec();
  const lm::ChatTemplate t = lm::ChatTemplate::appended(256);
  const std::string jsonl =
      R"({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "ab"},)"
      R"( {"role": "assistant", "content": "c"}, {"role": "user", "content": "d"},)"
      R"( {"role": "assistant", "content": "ef"}]})"
      "\n\n"
      R"({"prompt": "hi", "completion": "yo"})"
      "\n";
  const std::vector<lm::SftExample> ex = lm::parse_sft_jsonl(jsonl, "chat.jsonl", *codec, t);
  REQUIRE(ex.size() == 2);
  CHECK(ex[0].where == "chat.jsonl:1");
  CHECK(ex[1].where == "chat.jsonl:3");  // the blank line is skipped, the line numbers are the file's

  CHECK(ex[0].ids == std::vector<uint32_t>{S, 'S', E, U, 'a', 'b', E, A, 'c', E, U, 'd', E, A, 'e', 'f', E});
  CHECK(ex[0].trained == std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 1, 1});
  // targets[i] predicts ids[i+1]: only the answers' content and their <|end|>.
  CHECK(ex[0].targets() == std::vector<int64_t>{X, X, X, X, X, X, X, 'c', E, X, X, X, X, 'e', 'f', E});
  CHECK(ex[0].answer_tokens() == 5);

  CHECK(ex[1].ids == std::vector<uint32_t>{U, 'h', 'i', E, A, 'y', 'o', E});
  CHECK(ex[1].targets() == std::vector<int64_t>{X, X, X, X, 'y', 'o', E});

  // A batch: right-padded to the longest example, inputs with pad_id, targets with ignore_index.
  const std::vector<size_t> which{1, 0};
  const data::Batch b = lm::sft_batch(ex, which, E);
  REQUIRE(b.inputs.shape() == Shape{2, 16});
  const std::vector<int64_t> in = b.inputs.to_vector<int64_t>(), tg = b.targets.to_vector<int64_t>();
  CHECK(std::vector<int64_t>(in.begin(), in.begin() + 16) ==
        std::vector<int64_t>{U, 'h', 'i', E, A, 'y', 'o', E, E, E, E, E, E, E, E, E});
  CHECK(std::vector<int64_t>(tg.begin(), tg.begin() + 16) ==
        std::vector<int64_t>{X, X, X, X, 'y', 'o', E, X, X, X, X, X, X, X, X, X});
  CHECK(std::vector<int64_t>(tg.begin() + 16, tg.end()) == ex[0].targets());

  // llama2.c-style tokenizers put BOS first: context, never a target (here: a codec whose prompt starts with 1).
  struct BosCodec final : lm::TextCodec {
    std::unique_ptr<lm::TextCodec> base = byte_codec();
    std::vector<uint32_t> encode_prompt(std::string_view s) override {
      std::vector<uint32_t> ids{1};
      for (uint32_t id : base->encode_text(s)) ids.push_back(id);
      return ids;
    }
    std::vector<uint32_t> encode_text(std::string_view s) override { return base->encode_text(s); }
    std::string decode_token(uint32_t p, uint32_t id) override { return base->decode_token(p, id); }
    std::optional<uint32_t> stop_token() const override { return std::nullopt; }
    size_t vocab_size() const override { return 256; }
    std::string kind() const override { return "bos"; }
  } bos;
  const lm::SftExample with_bos = lm::encode_sft_example({{"user", "q"}, {"assistant", "r"}}, bos, t, "x");
  CHECK(with_bos.ids == std::vector<uint32_t>{1, U, 'q', E, A, 'r', E});
  CHECK(with_bos.targets() == std::vector<int64_t>{X, X, X, X, 'r', E});
}

TEST_CASE("sft: a bad line is one error naming file:line and what is wrong", "[sft]") {
  const auto codec = byte_codec();
  const lm::ChatTemplate t = lm::ChatTemplate::appended(256);
  const std::string good = R"({"prompt": "a", "completion": "b"})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"this is not json", "not JSON"},
      {"[1, 2]", "not an object"},
      {R"({"text": "x"})", "no \"messages\""},
      {R"({"messages": "x"})", "not an array"},
      {R"({"messages": []})", "\"messages\" is empty"},
      {R"({"messages": [5]})", "messages[0] is a JSON number"},
      {R"({"messages": [{"role": "bot", "content": "x"}]})", "unknown role \"bot\""},
      {R"({"messages": [{"role": "user", "content": 5}]})", "\"content\" is a JSON number, not a string"},
      {R"({"messages": [{"content": "x"}]})", "no \"role\""},
      {R"({"messages": [{"role": "user", "content": "x"}]})", "no assistant message"},
      {R"({"prompt": "x"})", "no \"completion\""},
      {R"({"prompt": "x", "completion": "y", "messages": []})", "both"},
  };
  for (const auto& [line, what] : cases) {
    INFO(line);
    CHECK_THROWS_WITH(lm::parse_sft_jsonl(good + "\n\n" + line + "\n" + good + "\n", "d.jsonl", *codec, t),
                      Catch::Contains("d.jsonl:3") && Catch::Contains(what));
  }
  CHECK_THROWS_WITH(lm::parse_sft_jsonl("\n  \n", "d.jsonl", *codec, t), Catch::Contains("no examples"));
  // Longer than context + 1: refused (never truncated), naming the line.
  CHECK_THROWS_WITH(lm::parse_sft_jsonl(good + "\n" + R"({"prompt": "abcdef", "completion": "b"})", "d.jsonl", *codec,
                                        t, 8),
                    Catch::Contains("d.jsonl:2") && Catch::Contains("11 tokens") && Catch::Contains("context + 1 = 8"));
  ScratchDir dir("sft_missing");
  CHECK_THROWS_WITH(lm::read_sft_jsonl(dir.file("nope.jsonl"), *codec, t), Catch::Contains("nope.jsonl"));
}

TEST_CASE("sft: held-out examples are a seeded random subset, the same for the same seed, both sets in file order",
          "[sft]") {
  const auto codec = byte_codec();
  const lm::ChatTemplate t = lm::ChatTemplate::appended(256);
  // Examples that cycle through 10 tasks: taking every 10th example (the old rule) held out one task only.
  auto examples = [&] {
    std::vector<lm::SftExample> all;
    for (int i = 0; i < 100; ++i) {
      all.push_back(lm::encode_sft_example({{"user", "q"}, {"assistant", std::string(1, char('a' + i % 26))}}, *codec,
                                           t, std::to_string(i)));
      all.back().group = "task" + std::to_string(i % 10);
    }
    return all;
  };
  std::vector<lm::SftExample> all = examples();
  const std::vector<lm::SftExample> held = lm::hold_out_examples(all, 0.1, 7);
  REQUIRE(held.size() == 10);
  REQUIRE(all.size() == 90);
  CHECK(lm::sft_groups(held).size() >= 5);  // seed 7 draws 6 of the 10 tasks (not 1)
  auto wheres = [](const std::vector<lm::SftExample>& v) {
    std::vector<int> w;
    for (const auto& ex : v) w.push_back(std::stoi(ex.where));
    return w;
  };
  const auto held_at = wheres(held), kept = wheres(all);
  CHECK(std::is_sorted(held_at.begin(), held_at.end()));
  CHECK(std::is_sorted(kept.begin(), kept.end()));
  // The same seed: the same subset (a resumed run); another seed: another subset.
  std::vector<lm::SftExample> again = examples(), other = examples();
  CHECK(wheres(lm::hold_out_examples(again, 0.1, 7)) == wheres(held));
  CHECK(wheres(lm::hold_out_examples(other, 0.1, 8)) != wheres(held));
  // Over many seeds, a block-written file (50 of one task, then 50 of another) gets both tasks held out almost
  // always: P(all 10 from one block) = 2·C(50,10)/C(100,10) ≈ 0.1 %.
  int mixed = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    std::vector<lm::SftExample> blocks = examples();
    for (size_t i = 0; i < blocks.size(); ++i) blocks[i].group = i < 50 ? "first" : "second";
    mixed += lm::sft_groups(lm::hold_out_examples(blocks, 0.1, seed)).size() == 2;
  }
  CHECK(mixed >= 195);
  CHECK(lm::hold_out_examples(all, 0, 7).empty());
  CHECK_THROWS_WITH(lm::hold_out_examples(all, 1.0, 7), Catch::Contains("[0, 1)"));
}

TEST_CASE("sft: an example's group is its \"task\" field, else its system prompt", "[sft]") {
  const auto codec = byte_codec();
  const lm::ChatTemplate t = lm::ChatTemplate::appended(256);
  const std::string jsonl =
      R"({"prompt": "a", "completion": "b", "task": "copy"})" "\n"
      R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "a"},)"
      R"( {"role": "assistant", "content": "b"}]})" "\n"
      R"({"task": "upper", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "a"},)"
      R"( {"role": "assistant", "content": "A"}]})" "\n"
      R"({"prompt": "a", "completion": "b"})" "\n";
  const std::vector<lm::SftExample> ex = lm::parse_sft_jsonl(jsonl, "g.jsonl", *codec, t);
  REQUIRE(ex.size() == 4);
  CHECK(ex[0].group == "copy");
  CHECK(ex[1].group == "Be brief.");
  CHECK(ex[2].group == "upper");
  CHECK(ex[3].group.empty());
  CHECK(lm::sft_groups(ex) == std::vector<std::string>{"copy", "Be brief.", "upper", ""});
  CHECK_THROWS_WITH(lm::parse_sft_jsonl(R"({"prompt": "a", "completion": "b", "task": 3})", "g.jsonl", *codec, t),
                    Catch::Contains("g.jsonl:1: \"task\" is a JSON number, not a string"));
}

TEST_CASE("sft: round(n·f) examples are held out, at least one and at most n - 1 when f > 0 and n >= 2", "[sft]") {
  const auto codec = byte_codec();
  const lm::ChatTemplate t = lm::ChatTemplate::appended(256);
  for (const double f : {0.0, 0.05, 0.1, 0.15, 0.25, 0.5, 0.75, 0.9, 0.99})
    for (size_t n = 0; n <= 40; ++n) {
      INFO("n " << n << " fraction " << f);
      std::vector<lm::SftExample> all;
      for (size_t i = 0; i < n; ++i)
        all.push_back(lm::encode_sft_example({{"user", "q"}, {"assistant", "a"}}, *codec, t, std::to_string(i)));
      const std::vector<lm::SftExample> held = lm::hold_out_examples(all, f, n);
      size_t expected = 0;
      if (f > 0 && n >= 2) expected = std::clamp(size_t(std::llround(double(n) * f)), size_t(1), n - 1);
      CHECK(held.size() == expected);
      CHECK(all.size() == n - expected);
      // Both sets keep the file's order.
      auto in_order = [](const std::vector<lm::SftExample>& v) {
        for (size_t i = 1; i < v.size(); ++i)
          if (std::stoul(v[i - 1].where) >= std::stoul(v[i].where)) return false;
        return true;
      };
      CHECK(in_order(held));
      CHECK(in_order(all));
    }
  // The issue's case: 5 to 9 examples at 0.1 held out nothing.
  std::vector<lm::SftExample> five;
  for (int i = 0; i < 5; ++i)
    five.push_back(lm::encode_sft_example({{"user", "q"}, {"assistant", "a"}}, *codec, t, "x"));
  CHECK(lm::hold_out_examples(five, 0.1, 3).size() == 1);
}

TEST_CASE("grow_vocabulary keeps the old rows and logits, new rows are the mean, tied and untied", "[sft]") {
  for (bool tied : {false, true}) {
    INFO("tied " << tied);
    nn::TransformerLMConfig c = micro_config(10, 8, 16);
    c.tie_embeddings = tied;
    Generator gen(5);
    nn::TransformerLM small(c, &gen);
    const nn::StateDict grown = nn::grow_vocabulary(small.state_dict(), 14);
    nn::TransformerLMConfig c2 = c;
    c2.vocab_size = 14;
    nn::TransformerLM big(c2);
    big.load_state_dict(grown);
    for (const char* name : {"token_embeddings.weight", "lm_head.weight"}) {
      if (tied && std::string(name) == "lm_head.weight") continue;
      const Tensor before = small.state_dict().at(name), after = big.state_dict().at(name);
      REQUIRE(after.shape() == Shape{14, 16});
      CHECK(after.narrow(0, 0, 10).to_vector<float>() == before.to_vector<float>());
      const std::vector<double> mean = before.to(kFloat64).mean({0}).to_vector<double>();
      for (int64_t r = 10; r < 14; ++r) {
        const std::vector<float> row = after.narrow(0, r, 1).reshape({16}).to_vector<float>();
        for (size_t k = 0; k < 16; ++k) CHECK(row[k] == Approx(mean[k]).margin(1e-6));
      }
    }
    // On old ids, the old tokens' logits are unchanged; a new token's logit is the mean of the old ones.
    const Tensor ids = from_vector(std::vector<int64_t>{1, 2, 3, 9}, {1, 4});
    const std::vector<float> a = small.forward(ids).to_vector<float>(), b = big.forward(ids).to_vector<float>();
    for (size_t pos = 0; pos < 4; ++pos) {
      double mean_logit = 0;
      for (size_t v = 0; v < 10; ++v) {
        CHECK(b[pos * 14 + v] == Approx(a[pos * 10 + v]).margin(1e-5));
        mean_logit += a[pos * 10 + v] / 10.0;
      }
      if (!tied) CHECK(b[pos * 14 + 12] == Approx(mean_logit).margin(1e-4));
    }
  }
  CHECK_THROWS_WITH(nn::grow_vocabulary({}, 4), Catch::Contains("token_embeddings.weight"));
  Generator gen(1);
  nn::TransformerLM m(micro_config(10, 8, 16), &gen);
  CHECK_THROWS_WITH(nn::grow_vocabulary(m.state_dict(), 9), Catch::Contains("only grow"));
}

TEST_CASE("sft: Trainer::init_from a model of the tokenizer's vocabulary grows it by the template's 4 rows", "[sft]") {
  ScratchDir dir("sft_init");
  Generator gen(3);
  nn::TransformerLM base(micro_config(256, 16), &gen);
  const std::string path = dir.file("base.safetensors");
  lm::save_model_checkpoint(base, path, {});
  const auto codec = byte_codec();
  const lm::ChatTemplate t = lm::ChatTemplate::appended(256);
  lm::SftData data;
  data.train = lm::parse_sft_jsonl(R"({"prompt": "ab", "completion": "ba"})", "x", *codec, t);
  data.pad_id = t.end_id;
  lm::TrainOptions o;
  o.batch_size = 2, o.steps = 1;
  lm::Trainer trainer(micro_config(260, 16), o, std::move(data));
  trainer.init_from(optim::read_checkpoint(path), path);
  const Tensor before = base.state_dict().at("token_embeddings.weight");
  const Tensor after = trainer.model().state_dict().at("token_embeddings.weight");
  REQUIRE(after.shape() == Shape{260, 32});
  CHECK(after.narrow(0, 0, 256).to_vector<float>() == before.to_vector<float>());
  CHECK(trainer.model().state_dict().at("layers.0.ffn.w1.weight").to_vector<float>() ==
        base.state_dict().at("layers.0.ffn.w1.weight").to_vector<float>());
  // Any other difference is still refused.
  lm::SftData again;
  again.train = lm::parse_sft_jsonl(R"({"prompt": "ab", "completion": "ba"})", "x", *codec, t);
  lm::Trainer other(micro_config(260, 16, 32, 2), o, std::move(again));
  CHECK_THROWS_WITH(other.init_from(optim::read_checkpoint(path), path), Catch::Contains("n_layers = 1") &&
                                                                          Catch::Contains("n_layers = 2"));
}

TEST_CASE("sft: N steps + resume + M steps == N+M steps bit for bit (batches of examples from the data generator)",
          "[sft]") {
  const auto codec = byte_codec();
  const lm::ChatTemplate t = lm::ChatTemplate::appended(256);
  std::vector<lm::SftExample> all = lm::parse_sft_jsonl(reverse_jsonl(), "rev", *codec, t, 17);
  const std::vector<lm::SftExample> val = lm::hold_out_examples(all, 0.1, 1);
  auto data = [&] { return lm::SftData{all, val, t.end_id}; };
  lm::TrainOptions o;
  o.batch_size = 4, o.steps = 6, o.lr = 3e-3, o.eval_every = 3, o.seed = 9;
  o.grad_accum = 2;
  lm::Trainer ref(micro_config(260, 16), o, data());
  std::vector<lm::StepStats> full;
  std::vector<lm::EvalStats> full_evals;
  lm::TrainCallbacks cb;
  cb.on_step = [&](const lm::StepStats& s) { full.push_back(s); };
  cb.on_eval = [&](const lm::EvalStats& e) { full_evals.push_back(e); };
  REQUIRE(ref.run(cb).status == lm::TrainStatus::Completed);
  REQUIRE(full.size() == 6);
  REQUIRE(full_evals.size() == 2);
  // Tokens seen are the real tokens: 2 × 4 examples of 12 ids (11 inputs) per step.
  CHECK(full[0].tokens == 2 * 4 * 11);
  // The evaluation is the answer-token loss over the held-out examples: 5 per example (4 letters + <|end|>).
  CHECK(full_evals[0].result.tokens == val.size() * 5);
  CHECK(full_evals[0].result.windows == val.size());

  ScratchDir dir("sft_resume");
  lm::TrainOptions first = o;
  first.out_dir = dir.file("run");
  std::string ckpt;
  {
    lm::Trainer a(micro_config(260, 16), first, data());
    int steps = 0;
    lm::TrainCallbacks stop;
    stop.should_stop = [&] { return ++steps == 4; };
    const lm::TrainResult r = a.run(stop);
    REQUIRE(r.status == lm::TrainStatus::Stopped);
    ckpt = r.last_checkpoint;
  }
  lm::Trainer b(micro_config(260, 16), first, data());
  b.resume(ckpt);
  REQUIRE(b.step() == 4);
  std::vector<lm::StepStats> rest;
  lm::TrainCallbacks cb2;
  cb2.on_step = [&](const lm::StepStats& s) { rest.push_back(s); };
  REQUIRE(b.run(cb2).status == lm::TrainStatus::Completed);
  REQUIRE(rest.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    INFO("step " << rest[i].step);
    CHECK(same_bits(rest[i].loss, full[4 + i].loss));
    CHECK(same_bits(rest[i].grad_norm, full[4 + i].grad_norm));
    CHECK(rest[i].tokens == full[4 + i].tokens);
  }
  for (const auto& [name, p] : ref.model().state_dict()) {
    INFO(name);
    CHECK(p.to_vector<float>() == b.model().state_dict().at(name).to_vector<float>());
  }
}

TEST_CASE("sft: a micro model learns to reverse held-out strings exactly (>= 90 %, greedy), through the Trainer",
          "[sft]") {
  const auto codec = byte_codec();
  const lm::ChatTemplate t = lm::ChatTemplate::appended(256);
  std::vector<lm::SftExample> train = lm::parse_sft_jsonl(reverse_jsonl(), "reverse.jsonl", *codec, t, 17);
  std::vector<lm::SftExample> held = lm::hold_out_examples(train, 0.1, 0);
  REQUIRE(held.size() == 63);
  lm::TrainOptions o;
  o.batch_size = 32, o.steps = 400, o.lr = 3e-3, o.min_lr = 3e-4, o.warmup_steps = 20, o.weight_decay = 0.0;
  o.seed = 21;
  lm::Trainer trainer(micro_config(260, 16, 64, 2), o, lm::SftData{train, held, t.end_id});
  std::vector<lm::EvalStats> evals;
  lm::TrainCallbacks cb;
  cb.on_eval = [&](const lm::EvalStats& e) { evals.push_back(e); };
  REQUIRE(trainer.run(cb).status == lm::TrainStatus::Completed);
  REQUIRE(evals.size() == 1);
  CHECK(evals[0].result.loss < 0.2);  // answer tokens only (a uniform guess over 5 letters: ln 5 = 1.6)

  int exact = 0;
  for (const lm::SftExample& ex : held) {
    // The prompt: everything up to and including <|assistant|>; the expected answer: up to <|end|>.
    const auto a = std::find(ex.ids.begin(), ex.ids.end(), t.assistant_id);
    const std::vector<uint32_t> prompt(ex.ids.begin(), a + 1), expected(a + 1, ex.ids.end() - 1);
    exact += greedy_answer(trainer.model(), prompt, t.end_id, 8) == expected ? 1 : 0;
  }
  INFO(exact << " of " << held.size() << " held-out strings reversed exactly");
  CHECK(exact >= int(0.9 * double(held.size())));
}

TEST_CASE("tool: train --sft writes checkpoints that remember the template, generate reads them", "[sft][tool]") {
  using namespace tapegrad::testing;
  ScratchDir dir("sft_tool");
  const std::string tok = dir.file("tokenizer.json"), jsonl = dir.file("chat.jsonl"), run = dir.file("run");
  data::save_hf_tokenizer_json(byte_model(), tok);
  std::string lines;
  for (int i = 0; i < 20; ++i)
    lines += R"({"messages": [{"role": "system", "content": "terse"}, {"role": "user", "content": "n)" +
             std::to_string(i) + R"("}, {"role": "assistant", "content": ")" + std::to_string(i + 1) + "\"}]}\n";
  write_all(jsonl, lines);
  const std::vector<std::string> args = {"train", "--sft", jsonl, "--tokenizer", tok, "--context", "32", "--d-model",
                                         "32", "--layers", "1", "--heads", "2", "--batch-size", "4", "--steps", "4",
                                         "--threads", "1", "--out", run};
  ToolResult r = run_tool(args, dir.file("train"));
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("18 training examples") != std::string::npos);
  CHECK(r.out.find("2 held out") != std::string::npos);
  CHECK(r.out.find("final validation loss") != std::string::npos);
  const auto ckpt = lm::newest_checkpoint(run);
  REQUIRE(ckpt.has_value());
  const optim::Checkpoint ck = optim::read_checkpoint(*ckpt);
  CHECK(ck.config.at("vocab_size") == "260");
  CHECK(ck.extra.at("run.chat_template") == lm::kChatTemplateName);
  const auto chat = lm::chat_template_for_checkpoint(ck);
  REQUIRE(chat.has_value());
  CHECK(chat->end_id == 259);
  const auto codec = lm::codec_for_checkpoint(ck, *ckpt, "");
  CHECK(codec->vocab_size() == 260);
  CHECK(codec->decode_token(0, 259) == "<|end|>");
  CHECK(codec->decode_token(0, 'a') == "a");

  r = run_tool({"generate", "--checkpoint", run, "--prompt", "n3", "--max-tokens", "4", "--threads", "1"},
               dir.file("generate"));
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);

  // A bad line stops the run before any training, naming file:line.
  write_all(jsonl, lines + "{\"messages\": [{\"role\": \"robot\", \"content\": \"x\"}]}\n");
  auto bad = args;
  bad.back() = dir.file("run2");
  r = run_tool(bad, dir.file("bad"));
  CHECK(r.exit_code != 0);
  CHECK(r.err.find("chat.jsonl:21") != std::string::npos);
  CHECK(r.err.find("unknown role \"robot\"") != std::string::npos);
}
