// test_data_hf_json.cpp — the tokenizer.json writer (round trips through the loader, byte-unicode keys,
// special tokens under their raw text), load_tokenizer_model on files and directories, the fingerprint,
// training on several files, and encode_file_to_token_file's progress callback and atomic output.
#include <filesystem>
#include <functional>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "data/bpe_trainer.h"
#include "data/byte_unicode.h"
#include "data/gpt2_files.h"
#include "data/hf_tokenizer_json.h"
#include "data/stream_encode.h"
#include "data/tokenizer.h"
#include "data/tokenizer_files.h"
#include "kernels/error.h"
#include "test_data_helpers.h"

using namespace tapegrad;
using namespace tapegrad::data;
using namespace tapegrad::data::testing;

namespace {

BpeModel trained_on_corpus_en(size_t vocab_size, std::vector<std::string> special_tokens) {
  BpeTrainOptions options;
  options.vocab_size = vocab_size;
  options.special_tokens = std::move(special_tokens);
  return train_bpe(read_all(cs336_path("tests/fixtures/corpus.en")), options);
}

// Text whose merges hold bytes the byte-unicode mapping moves (controls, space, 0x7f..0xa0, 0xad,
// invalid UTF-8) and multi-byte characters, with a special token that has a space and non-ASCII.
const std::string kOddSpecial = "<|fin de texte \xc3\xa9|>";
std::string odd_bytes_text() {
  std::string text;
  for (int i = 0; i < 40; ++i) {
    text += "caf\xc3\xa9 na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x99\x83\t\t\r\n";
    static constexpr char kRaw[] = "\x00\x01\x7f\x80\xa0\xad \xff\xfe";  // NUL, controls, invalid UTF-8
    text += std::string(kRaw, sizeof kRaw - 1) + "  x\n";
    text += kOddSpecial + "\xc2\xa0\xc2\xa0 y " + std::to_string(i) + "\n";
  }
  return text;
}

BpeModel odd_bytes_model() {
  BpeTrainOptions options;
  options.vocab_size = 1 + 256 + 60;
  options.special_tokens = {kOddSpecial};
  return train_bpe(odd_bytes_text(), options);
}

void check_same_model(const BpeModel& a, const BpeModel& b) {
  CHECK(a.vocab == b.vocab);
  CHECK(a.merges == b.merges);
  CHECK(a.special_tokens == b.special_tokens);
}

}  // namespace

TEST_CASE("save_hf_tokenizer_json then load_hf_tokenizer_json gives the same model", "[data][hf_json]") {
  ScratchDir dir("hf_json_round_trip");
  const BpeModel trained = trained_on_corpus_en(500, {"<|endoftext|>"});
  save_hf_tokenizer_json(trained, dir.file("tokenizer.json"));
  check_same_model(load_hf_tokenizer_json(dir.file("tokenizer.json")), trained);
  CHECK_FALSE(std::filesystem::exists(dir.file("tokenizer.json.tmp")));

  // the pipeline a `tokenizers` user gets
  const auto json = nlohmann::json::parse(read_all(dir.file("tokenizer.json")));
  CHECK(json["model"]["type"] == "BPE");
  CHECK(json["model"]["vocab"]["<|endoftext|>"] == 0);
  CHECK(json["model"]["vocab"]["\xc4\xa0"] == 1 + ' ');  // 'Ġ' is the space byte
  CHECK(json["model"]["merges"].size() == trained.merges.size());
  CHECK(json["added_tokens"].size() == 1);
  CHECK(json["added_tokens"][0]["content"] == "<|endoftext|>");
  CHECK(json["added_tokens"][0]["special"] == true);
  CHECK(json["pre_tokenizer"]["type"] == "ByteLevel");
  CHECK(json["pre_tokenizer"]["add_prefix_space"] == false);
  CHECK(json["pre_tokenizer"]["use_regex"] == true);
  CHECK(json["decoder"]["type"] == "ByteLevel");
  CHECK(json["normalizer"].is_null());

  // no special tokens at all
  const BpeModel plain = trained_on_corpus_en(300, {});
  save_hf_tokenizer_json(plain, dir.file("plain.json"));
  check_same_model(load_hf_tokenizer_json(dir.file("plain.json")), plain);
}

TEST_CASE("tokenizer.json keeps bytes that need the byte-unicode mapping and odd special tokens", "[data][hf_json]") {
  ScratchDir dir("hf_json_bytes");
  const BpeModel model = odd_bytes_model();
  REQUIRE(model.merges.size() == 60);
  save_hf_tokenizer_json(model, dir.file("tokenizer.json"));
  const BpeModel loaded = load_hf_tokenizer_json(dir.file("tokenizer.json"));
  check_same_model(loaded, model);
  const std::string text = odd_bytes_text();
  Tokenizer a{model}, b{loaded};
  CHECK(a.encode(text) == b.encode(text));

  // the special token is in model.vocab under its raw text (so `tokenizers` keeps its id), every other
  // token under its byte-unicode spelling
  const auto json = nlohmann::json::parse(read_all(dir.file("tokenizer.json")));
  CHECK(json["model"]["vocab"][kOddSpecial] == 0);
  CHECK(json["model"]["vocab"][bytes_to_gpt2_unicode(std::string(1, '\0'))] == 1);
  CHECK(json["added_tokens"][0]["content"] == kOddSpecial);
  // the loader also takes the byte-unicode spelling for an added token's vocab key
  auto respelled = json;
  respelled["model"]["vocab"].erase(kOddSpecial);
  respelled["model"]["vocab"][bytes_to_gpt2_unicode(kOddSpecial)] = 0;
  write_all(dir.file("respelled.json"), respelled.dump());
  check_same_model(load_hf_tokenizer_json(dir.file("respelled.json")), model);
  respelled["model"]["vocab"].erase(bytes_to_gpt2_unicode(kOddSpecial));
  respelled["model"]["vocab"]["zzz"] = 0;
  write_all(dir.file("respelled.json"), respelled.dump());
  CHECK_THROWS_WITH(load_hf_tokenizer_json(dir.file("respelled.json")), Catch::Contains("model.vocab gives to \"zzz\""));

  // what tokenizer.json cannot hold
  BpeModel bad = model;
  bad.special_tokens = {"<|not in vocab|>"};
  CHECK_THROWS_WITH(save_hf_tokenizer_json(bad, dir.file("bad.json")), Catch::Contains("not in the vocabulary"));
  bad = model;
  bad.vocab.push_back(bad.vocab[300]);
  CHECK_THROWS_WITH(save_hf_tokenizer_json(bad, dir.file("bad.json")), Catch::Contains("same key"));
  CHECK_FALSE(std::filesystem::exists(dir.file("bad.json")));
  CHECK_THROWS_WITH(save_hf_tokenizer_json(model, dir.file("no/such/dir/tokenizer.json")),
                    Catch::Contains("no/such/dir/tokenizer.json"));
}

TEST_CASE("load_tokenizer_model reads a tokenizer.json file or a tokenizer directory", "[data][hf_json]") {
  ScratchDir dir("tokenizer_dirs");
  BpeModel model = trained_on_corpus_en(400, {"<|endoftext|>", "<|pad|>"});
  const std::string full = dir.file("full");
  save_tokenizer_dir(model, full);  // creates the directory
  for (const char* name : {"tokenizer.json", "vocab.json", "merges.txt"})
    CHECK(std::filesystem::exists(std::filesystem::path(full) / name));
  // tokenizer.json is preferred: it knows both special tokens, vocab.json + merges.txt only <|endoftext|>
  check_same_model(load_tokenizer_model(full), model);
  check_same_model(load_tokenizer_model(full + "/tokenizer.json"), model);

  std::filesystem::remove(std::filesystem::path(full) / "tokenizer.json");
  const BpeModel from_gpt2_files = load_tokenizer_model(full);
  CHECK(from_gpt2_files.vocab == model.vocab);
  CHECK(from_gpt2_files.merges == model.merges);
  CHECK(from_gpt2_files.special_tokens == std::vector<std::string>{"<|endoftext|>"});
  // without <|endoftext|> in the vocabulary there is no special token
  const BpeModel plain = trained_on_corpus_en(300, {});
  save_gpt2_files(plain, dir.file("vocab.json"), dir.file("merges.txt"));
  CHECK(load_tokenizer_model(dir.path.string()).special_tokens.empty());

  std::filesystem::create_directories(dir.file("empty"));
  CHECK_THROWS_WITH(load_tokenizer_model(dir.file("empty")),
                    Catch::Contains(dir.file("empty")) && Catch::Contains("holds no tokenizer"));
  CHECK_THROWS_WITH(load_tokenizer_model(dir.file("missing")),
                    Catch::Contains(dir.file("missing")) && Catch::Contains("does not exist"));
  write_all(dir.file("not_a_tokenizer.json"), "{}");
  CHECK_THROWS_WITH(load_tokenizer_model(dir.file("not_a_tokenizer.json")), Catch::Contains("no \"model\" object"));
  write_all(dir.file("a_file"), "x");
  CHECK_THROWS_WITH(save_tokenizer_dir(model, dir.file("a_file")), Catch::Contains("cannot create the directory"));
}

TEST_CASE("the tokenizer fingerprint changes with any merge, token or special token", "[data][hf_json]") {
  ScratchDir dir("fingerprint");
  const BpeModel model = trained_on_corpus_en(400, {"<|endoftext|>"});
  const std::string fp = tokenizer_fingerprint(model);
  CHECK(fp.size() == 16);
  CHECK(fp.find_first_not_of("0123456789abcdef") == std::string::npos);
  save_tokenizer_dir(model, dir.path.string());
  CHECK(tokenizer_fingerprint(load_tokenizer_model(dir.path.string())) == fp);

  BpeModel changed = model;
  std::swap(changed.merges[10], changed.merges[11]);
  CHECK(tokenizer_fingerprint(changed) != fp);
  changed = model;
  changed.merges.back().second += "x";
  CHECK(tokenizer_fingerprint(changed) != fp);
  changed = model;
  changed.special_tokens.clear();
  CHECK(tokenizer_fingerprint(changed) != fp);
  changed = model;
  std::swap(changed.vocab[300], changed.vocab[301]);
  CHECK(tokenizer_fingerprint(changed) != fp);
  // length prefixes: moving a byte from one merge half to the other changes it too
  BpeModel a, b;
  a.merges = {{"ab", "c"}};
  b.merges = {{"a", "bc"}};
  CHECK(tokenizer_fingerprint(a) != tokenizer_fingerprint(b));
}

TEST_CASE("train_bpe_files trains on the concatenation of its files", "[data][hf_json]") {
  ScratchDir dir("train_files");
  const std::string text = read_all(cs336_path("tests/fixtures/corpus.en"));
  // the cut falls inside a word: the files are one text, not two documents
  const size_t cut = text.find(' ', text.size() / 3) + 3;
  write_all(dir.file("a.txt"), text.substr(0, cut));
  write_all(dir.file("b.txt"), text.substr(cut, 40000));
  write_all(dir.file("c.txt"), text.substr(cut + 40000));
  BpeTrainOptions options;
  options.vocab_size = 500;
  options.special_tokens = {"<|endoftext|>"};
  const BpeModel whole = train_bpe(text, options);
  for (size_t block : {size_t(97), size_t(1) << 20}) {
    for (int threads : {1, 2}) {
      INFO("block " << block << ", threads " << threads);
      options.file_block_bytes = block;
      options.num_threads = threads;
      check_same_model(train_bpe_files({dir.file("a.txt"), dir.file("b.txt"), dir.file("c.txt")}, options), whole);
    }
  }
  CHECK_THROWS_WITH(train_bpe_files({dir.file("a.txt"), dir.file("missing.txt")}, options),
                    Catch::Contains("cannot open") && Catch::Contains("missing.txt"));
  CHECK_THROWS_WITH(train_bpe_files({dir.path.string()}, options), Catch::Contains("is a directory"));
}

TEST_CASE("encode_file_to_token_file reports progress and writes its output atomically", "[data][hf_json]") {
  ScratchDir dir("encode_progress");
  Tokenizer tokenizer(gpt2_model_with_endoftext());
  const std::string text = read_all(corpora_path("tinystories_train_head2MiB.txt")).substr(0, 100000);
  write_all(dir.file("text.txt"), text);
  const std::vector<uint32_t> whole = tokenizer.encode(text);
  for (int threads : {1, 2}) {
    INFO("threads " << threads);
    std::vector<std::pair<uint64_t, uint64_t>> calls;
    const uint64_t n = encode_file_to_token_file(
        tokenizer, dir.file("text.txt"), dir.file("text.tok"), 4096,
        [&](uint64_t done, uint64_t total) { calls.emplace_back(done, total); }, threads);
    CHECK(n == whole.size());
    CHECK(read_tokens(dir.file("text.tok")) == whole);
    REQUIRE(calls.size() > 10);
    for (size_t i = 0; i < calls.size(); ++i) {
      CHECK(calls[i].second == text.size());
      if (i > 0) CHECK(calls[i].first >= calls[i - 1].first);
    }
    CHECK(calls.back().first == text.size());
    CHECK_FALSE(std::filesystem::exists(dir.file("text.tok.tmp")));
  }

  // a failure half way (here: the callback throws) leaves the old file as it was and no temp file
  const std::string before = read_all(dir.file("text.tok"));
  int blocks = 0;
  CHECK_THROWS_WITH(encode_file_to_token_file(tokenizer, dir.file("text.txt"), dir.file("text.tok"), 4096,
                                              [&](uint64_t, uint64_t) {
                                                if (++blocks == 3) throw Error("stop");
                                              }),
                    Catch::Contains("stop"));
  CHECK(read_all(dir.file("text.tok")) == before);
  CHECK_FALSE(std::filesystem::exists(dir.file("text.tok.tmp")));
  // an output that cannot be created names the path
  CHECK_THROWS_WITH(encode_file_to_token_file(tokenizer, dir.file("text.txt"), dir.file("no/dir/x.tok")),
                    Catch::Contains("no/dir/x.tok"));
}

TEST_CASE("load_hf_tokenizer_json refuses every malformed tokenizer.json naming the file and the entry",
          "[data][hf_json]") {
  ScratchDir dir("hf_json_bad");
  const BpeModel trained = trained_on_corpus_en(300, {"<|endoftext|>"});
  save_hf_tokenizer_json(trained, dir.file("good.json"));
  const nlohmann::json good = nlohmann::json::parse(read_all(dir.file("good.json")));
  REQUIRE(good["model"]["merges"].size() >= 2);
  const std::string bad = dir.file("bad.json");
  using json = nlohmann::json;
  struct Case {
    const char* what;
    std::function<void(json&)> edit;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"model not an object", [](json& j) { j["model"] = 5; }, "no \"model\" object"},
      {"type not BPE", [](json& j) { j["model"]["type"] = "WordPiece"; }, "model.type is \"WordPiece\", not BPE"},
      {"no vocab", [](json& j) { j["model"].erase("vocab"); }, "model needs \"vocab\" and a \"merges\" array"},
      {"merges not an array", [](json& j) { j["model"]["merges"] = "a b"; }, "a \"merges\" array"},
      {"vocab not an object", [](json& j) { j["model"]["vocab"] = json::array(); }, "model.vocab is not an object"},
      {"added_tokens not an array", [](json& j) { j["added_tokens"] = json::object(); },
       "added_tokens is not an array"},
      {"added token without content", [](json& j) { j["added_tokens"][0].erase("content"); },
       "added_tokens[0] needs an unsigned \"id\" and a non-empty \"content\""},
      {"added token with a negative id", [](json& j) { j["added_tokens"][0]["id"] = -1; },
       "added_tokens[0] needs an unsigned \"id\""},
      {"added token id twice with other contents",
       [](json& j) {
         json second = j["added_tokens"][0];
         second["content"] = "<|other|>";
         j["added_tokens"].push_back(second);
       },
       "added_tokens[1]: id 0 is also \"<|endoftext|>\""},
      {"id not an integer", [](json& j) { j["model"]["vocab"]["a"] = "97"; }, "model.vocab \"a\": id is not an integer"},
      {"id outside", [](json& j) { j["model"]["vocab"]["a"] = 100000; }, "model.vocab \"a\": id 100000 outside 0..299"},
      {"id used twice", [](json& j) { j["model"]["vocab"]["a"] = j["model"]["vocab"]["b"]; }, "is used twice"},
      {"added token at another vocab entry", [](json& j) { j["added_tokens"][0]["id"] = 5; },
       "added token \"<|endoftext|>\" has id 5, which model.vocab gives to"},
      {"merge of an unknown token", [](json& j) { j["model"]["merges"][0] = "zz\xc3\xa9q a"; },
       "model.merges[0] names a token that is not in the vocabulary"},
      {"merge without a space", [](json& j) { j["model"]["merges"][1] = "ab"; },
       "model.merges[1]: expected \"left right\", got \"ab\""},
      {"merge pair of numbers", [](json& j) { j["model"]["merges"][1] = json::array({1, 2}); },
       "model.merges[1]: expected a string or a pair of strings"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    json j = good;
    c.edit(j);
    write_all(bad, j.dump());
    CHECK_THROWS_WITH(load_hf_tokenizer_json(bad), Catch::Contains(c.message) && Catch::Contains(bad));
  }
  for (const std::string text : {"", "{", "[1, 2]", "{\"model\": {\"vocab\": {}, \"merges\": []}} trailing"}) {
    INFO(text);
    write_all(bad, text);
    CHECK_THROWS_AS(load_hf_tokenizer_json(bad), Error);
  }
  write_all(bad, "{");
  CHECK_THROWS_WITH(load_hf_tokenizer_json(bad), Catch::Contains("is not valid JSON"));
}
