// test_data_text_inputs.cpp — several inputs as one stream of documents (data/text_inputs.h,
// data/document_reader.h, data/document_encode.h, lm::tokenize_text_inputs): the order of a directory,
// JSONL documents and their errors (FILE:LINE: field), the ids of several inputs against those of their
// concatenation with separators, the validation split counted across inputs, the streamed path against
// the old whole-text one with chunks and read blocks much smaller than the text, reading again from a
// position; and the tool (tokenize encode/train, train --text, eval --text) on directories and JSONL.
#include <algorithm>
#include <filesystem>
#include <random>

#include <nlohmann/json.hpp>

#include <catch2/catch.hpp>

#include "data/bpe_trainer.h"
#include "data/document_encode.h"
#include "data/document_reader.h"
#include "data/text_inputs.h"
#include "data/tokenizer.h"
#include "data/tokenizer_files.h"
#include "kernels/error.h"
#include "lm/text_split.h"
#include "test_data_helpers.h"
#include "tool_runner.h"

using namespace tapegrad;
using namespace tapegrad::data;
using tapegrad::data::testing::read_all;
using tapegrad::data::testing::ScratchDir;
using tapegrad::data::testing::write_all;
using tapegrad::testing::lines_of;
using tapegrad::testing::run_tool;
using tapegrad::testing::ToolResult;
namespace fs = std::filesystem;

namespace {

const std::string kEot = "<|endoftext|>";

std::string corpus_head(size_t bytes) {
  const std::string corpus = read_all(std::string(TAPEGRAD_SOURCE_DIR) + "/corpus/tinystories_head.txt");
  return corpus.substr(0, corpus.find(kEot, bytes) + kEot.size());
}

// A small BPE trained on the repository's corpus: with "<|endoftext|>" as separator, or without any
// special token (the blank-line separator).
const BpeModel& small_bpe(bool with_eot) {
  static const auto train = [](bool eot) {
    BpeTrainOptions o;
    o.vocab_size = eot ? 400 : 399;
    if (eot) o.special_tokens = {kEot};
    return train_bpe(corpus_head(40000), o);
  };
  static const BpeModel with = train(true), without = train(false);
  return with_eot ? with : without;
}

std::vector<uint32_t> concat(std::vector<uint32_t> a, const std::vector<uint32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<std::string> all_documents(DocumentReader& reader) {
  std::vector<std::string> out;
  std::string d;
  while (reader.next(d)) out.push_back(d);
  return out;
}

std::vector<std::string> paths_of(const std::vector<TextInput>& inputs) {
  std::vector<std::string> out;
  for (const auto& i : inputs) out.push_back(i.path);
  return out;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// A text of `n` documents ending with `sep`, of varied lengths, some with whitespace-only pieces.
std::string documents_text(std::mt19937& rng, size_t n, const std::string& sep) {
  static const std::vector<std::string> words = {"Tom", " ran", " to", " the", " park", ".", "\n", " \xc3\xa9t\xc3\xa9", "!", " 42"};
  std::string text;
  for (size_t i = 0; i < n; ++i) {
    const size_t len = 1 + rng() % 40;
    for (size_t w = 0; w < len; ++w) text += words[rng() % words.size()];
    text += sep;
    if (rng() % 7 == 0) text += sep == "\n\n" ? " \n\n" : "\n" + sep;  // a whitespace-only piece: joins
    if (rng() % 3 == 0 && sep != "\n\n") text += "\n";
  }
  return text;
}

}  // namespace

TEST_CASE("text inputs: a directory gives its text files sorted bytewise by relative path, hidden ones skipped",
          "[text-inputs]") {
  ScratchDir dir("text_inputs_dir");
  const fs::path d = dir.path / "corpus";
  for (const char* sub : {"a", "b", "b/c", ".git", "empty_sub"}) fs::create_directories(d / sub);
  for (const char* f : {"b.txt", "a/z.txt", "a.md", "B.TXT", "b/a.text", "b/c/d.jsonl", "b0.txt", ".hidden.txt",
                        ".git/x.txt", "notes.bin", "README"})
    write_all((d / f).string(), "x");
  const std::vector<TextInput> inputs = resolve_text_inputs({d.string()}, "--text");
  std::vector<std::string> relative;
  for (const auto& i : inputs) relative.push_back(fs::path(i.path).lexically_relative(d).generic_string());
  CHECK(relative == std::vector<std::string>{"B.TXT", "a.md", "a/z.txt", "b.txt", "b/a.text", "b/c/d.jsonl", "b0.txt"});
  for (const auto& i : inputs) {
    CHECK(i.bytes == 1);
    CHECK((i.format == TextFormat::jsonl) == i.path.ends_with(".jsonl"));
  }
  // Given inputs keep their order; a file given by name counts whatever its name.
  const auto mixed = resolve_text_inputs({(d / "notes.bin").string(), (d / "b").string(), (d / "a.md").string()}, "--input");
  CHECK(paths_of(mixed) == std::vector<std::string>{(d / "notes.bin").string(), (d / "b/a.text").string(),
                                                    (d / "b/c/d.jsonl").string(), (d / "a.md").string()});
  CHECK(total_bytes(mixed) == 4);
  // Errors name the flag and the path.
  CHECK_THAT(error_of([&] { resolve_text_inputs({(d / "empty_sub").string()}, "--text"); }),
             Catch::StartsWith("--text: the directory " + (d / "empty_sub").string() + " holds no text file"));
  // Hidden entries are skipped below a directory; a hidden directory given by name is read.
  CHECK(paths_of(resolve_text_inputs({(d / ".git").string()}, "--text")) == std::vector<std::string>{(d / ".git/x.txt").string()});
  CHECK(error_of([&] { resolve_text_inputs({(d / "nope.txt").string()}, "--input"); }) ==
        "--input: cannot open " + (d / "nope.txt").string() + ": no such file or directory");
}

TEST_CASE("text inputs: a JSONL line is one document, from the chosen field, blank lines hold none", "[text-inputs]") {
  CHECK(jsonl_document(R"({"text": "Hello \u00e9\n", "id": 3})", "text", "f.jsonl", 1) == "Hello \xc3\xa9\n");
  CHECK(jsonl_document(R"({"body": "B", "text": 1})", "body", "f.jsonl", 1) == "B");
  CHECK(jsonl_document("  \r", "text", "f.jsonl", 1) == std::nullopt);
  CHECK(jsonl_document(R"({"text": ""})", "text", "f.jsonl", 1) == "");

  ScratchDir dir("text_inputs_jsonl");
  write_all(dir.file("d.jsonl"), "{\"text\": \"one\", \"n\": 1}\n\n{\"text\": \"two\\nlines\"}\r\n  \n{\"text\": \"three\"}");
  DocumentReader reader(resolve_text_inputs({dir.file("d.jsonl")}, "--text"), kEot);
  CHECK(all_documents(reader) == std::vector<std::string>{"one" + kEot, "two\nlines" + kEot, "three" + kEot});
  CHECK(reader.bytes_read() == reader.bytes_total());
}

TEST_CASE("text inputs: a JSONL text that holds the separator stays one document (as document_reader.h says)",
          "[text-inputs]") {
  ScratchDir dir("text_inputs_jsonl_separator");
  write_all(dir.file("d.jsonl"), "{\"text\": \"a<|endoftext|>b\"}\n{\"text\": \"c\"}\n");
  DocumentReader reader(resolve_text_inputs({dir.file("d.jsonl")}, "--text"), kEot);
  CHECK(all_documents(reader) == std::vector<std::string>{"a" + kEot + "b" + kEot, "c" + kEot});
}

TEST_CASE("text inputs: a bad JSONL line is one error naming file, line and field", "[text-inputs]") {
  ScratchDir dir("text_inputs_bad_jsonl");
  const std::string good = "{\"text\": \"fine\"}\n\n";  // lines 1-2
  struct Case {
    std::string line, expect;
  };
  const std::vector<Case> cases = {
      {"{\"text\": \"unterminated}", ":3: not valid JSON (parse error"},
      {"not json at all", ":3: not valid JSON"},
      {"{\"text\": \"a\"} {\"text\": \"b\"}", ":3: not valid JSON"},
      {"[\"text\"]", ":3: expected a JSON object with a string field \"text\", got a JSON array"},
      {"{\"body\": \"no text\"}", ":3: no field \"text\" in this JSON object"},
      {"{\"text\": 12}", ":3: field \"text\" is a JSON number, not a string"},
      {"{\"text\": null}", ":3: field \"text\" is a JSON null, not a string"},
      {"{\"text\": \"\xff\"}", ":3: not valid JSON"},
  };
  for (const Case& c : cases) {
    INFO(c.line);
    write_all(dir.file("bad.jsonl"), good + c.line + "\n{\"text\": \"after\"}\n");
    DocumentReader reader(resolve_text_inputs({dir.file("bad.jsonl")}, "--text"), kEot);
    const std::string e = error_of([&] { all_documents(reader); });
    CHECK_THAT(e, Catch::StartsWith(dir.file("bad.jsonl") + c.expect));
    CHECK(e.find('\n') == std::string::npos);
  }
}

TEST_CASE("text inputs: several inputs give the ids of their concatenation with separators", "[text-inputs]") {
  ScratchDir dir("text_inputs_concat");
  Tokenizer tok(small_bpe(true));
  const std::string a = "Tom had a red ball." + kEot + "\nHe liked it. The end",  // no final separator
      b = "\nA cat sat." + kEot + "It was sunny." + kEot + "\n",                  // ends after one (and a newline)
      c = "Last file, last words.";
  write_all(dir.file("a.txt"), a);
  fs::create_directories(dir.file("more"));
  write_all(dir.file("more/b.txt"), b);
  write_all(dir.file("more/j.jsonl"), "{\"text\": \"Json one.\"}\n{\"text\": \"Json\\ntwo.\"}\n");
  write_all(dir.file("c.md"), c);
  const auto inputs = resolve_text_inputs({dir.file("a.txt"), dir.file("more"), dir.file("c.md")}, "--text");
  REQUIRE(inputs.size() == 4);
  const std::string concatenation = a + kEot + b + "Json one." + kEot + "Json\ntwo." + kEot + c;

  // The documents: no document holds text of two inputs, whitespace-only pieces join the one before, and
  // whitespace after a file's last separator starts the next document (b.txt's "\n"), as in the concatenation.
  DocumentReader reader(inputs, kEot);
  const auto docs = all_documents(reader);
  CHECK(docs == std::vector<std::string>{"Tom had a red ball." + kEot, "\nHe liked it. The end" + kEot,
                                         "\nA cat sat." + kEot, "It was sunny." + kEot, "\nJson one." + kEot,
                                         "Json\ntwo." + kEot, c});

  for (size_t chunk : {size_t(1), size_t(30), size_t(1) << 20}) {
    INFO("chunk bytes " << chunk);
    lm::TextInputOptions o;
    o.val_fraction = 0;
    o.chunk_bytes = chunk;
    o.read_block_bytes = 5;
    const lm::TokenizedText all = lm::tokenize_text_inputs(inputs, kEot, bpe_document_encoder(tok, 1), o);
    CHECK(all.train == tok.encode(concatenation));
    CHECK(all.train_documents == 7);
    CHECK(all.val.empty());
    CHECK(all.bytes == concatenation.size());
    // With a split: ⌈0.3·7⌉ = 3 documents held out, each part encoded on its own (as split_documents on
    // the concatenation: b.txt's final "\n" goes with the next document).
    o.val_fraction = 0.3;
    const lm::TokenizedText split = lm::tokenize_text_inputs(inputs, kEot, bpe_document_encoder(tok, 2), o);
    CHECK(split.train == tok.encode(docs[0] + docs[1] + docs[2] + docs[3]));
    CHECK(split.val == tok.encode(docs[4] + docs[5] + docs[6]));
    CHECK(split.train_documents == 4);
    CHECK(split.val_documents == 3);
    const lm::TextSplit s = lm::split_documents(concatenation, kEot, 0.3);
    CHECK(s.train_documents == 4);
    CHECK(s.val_documents == 3);
  }
}

TEST_CASE("text inputs: whitespace after a file's last separator starts the next file's document (the issue's "
          "case)",
          "[text-inputs]") {
  ScratchDir dir("text_inputs_tail");
  Tokenizer tok(small_bpe(true));
  write_all(dir.file("a.txt"), "A" + kEot + " ");
  write_all(dir.file("b.txt"), "the");
  const auto inputs = resolve_text_inputs({dir.file("a.txt"), dir.file("b.txt")}, "--text");
  DocumentReader reader(inputs, kEot, "text", 1);
  CHECK(all_documents(reader) == std::vector<std::string>{"A" + kEot, " the"});
  for (size_t chunk : {size_t(1), size_t(1) << 20}) {
    DocumentReader r(inputs, kEot, "text", 1);
    CHECK(encode_documents(r, bpe_document_encoder(tok, 1), chunk).ids == tok.encode("A" + kEot + " the"));
  }
  // Whitespace-only files and tails carry on to the first document with content; at the end they end the last.
  write_all(dir.file("c.txt"), " \n");
  write_all(dir.file("d.txt"), "A" + kEot + " ");
  const auto more = resolve_text_inputs({dir.file("a.txt"), dir.file("c.txt"), dir.file("b.txt"), dir.file("d.txt")},
                                        "--text");
  DocumentReader r(more, kEot, "text", 2);
  CHECK(all_documents(r) == std::vector<std::string>{"A" + kEot, "  \nthe" + kEot, "A" + kEot + " "});
}

// The documented rule as a property: any text, split into plain files anywhere, read in any block size and
// encoded in any chunk size, gives the ids of encoding the files joined (a separator inserted after a file whose
// text after its last separator is more than whitespace) all at once.
TEST_CASE("text inputs: any split into files, block size and chunk size give the ids of the joined text",
          "[text-inputs]") {
  ScratchDir dir("text_inputs_property");
  Tokenizer tok(small_bpe(true));
  std::mt19937 rng(35);
  const std::vector<std::string> spice = {" ", "\n", "  \n", kEot, kEot + " ", "\n" + kEot + "\n", "the", " the"};
  for (int trial = 0; trial < 60; ++trial) {
    std::string text = documents_text(rng, 2 + rng() % 12, kEot);
    for (int k = rng() % 6; k > 0; --k) text.insert(rng() % (text.size() + 1), spice[rng() % spice.size()]);
    // Cut into 1..5 files at random points (some may be empty), half of them just after the whitespace that
    // follows a separator (where a file's tail is whitespace only: the case the rule is about).
    std::vector<size_t> after_tail;
    for (size_t at = text.find(kEot); at != std::string::npos; at = text.find(kEot, at + 1)) {
      const size_t end = text.find_first_not_of(" \t\r\n", at + kEot.size());
      if (end != std::string::npos && end > at + kEot.size()) after_tail.push_back(end);
    }
    std::vector<size_t> cuts{0, text.size()};
    for (int k = rng() % 5; k > 0; --k)
      cuts.push_back(rng() % 2 && !after_tail.empty() ? after_tail[rng() % after_tail.size()]
                                                      : rng() % (text.size() + 1));
    std::sort(cuts.begin(), cuts.end());
    std::vector<std::string> parts, paths;
    for (size_t i = 0; i + 1 < cuts.size(); ++i)
      if (cuts[i + 1] > cuts[i]) parts.push_back(text.substr(cuts[i], cuts[i + 1] - cuts[i]));
    std::string joined;
    for (size_t i = 0; i < parts.size(); ++i) {
      paths.push_back(dir.file(fmt::format("t{}_{}.txt", trial, i)));
      write_all(paths.back(), parts[i]);
      joined += parts[i];
      const size_t last = parts[i].rfind(kEot);
      const std::string tail = last == std::string::npos ? parts[i] : parts[i].substr(last + kEot.size());
      if (i + 1 < parts.size() && tail.find_first_not_of(" \t\r\n") != std::string::npos) joined += kEot;
    }
    if (paths.empty()) continue;
    const auto inputs = resolve_text_inputs(paths, "--text");
    const std::vector<uint32_t> want = tok.encode(joined);
    for (int k = 0; k < 3; ++k) {
      const size_t block = 1 + rng() % 40, chunk = std::vector<size_t>{1, 5, 64, 1 << 20}[rng() % 4];
      INFO("trial " << trial << ", files " << paths.size() << ", block " << block << ", chunk " << chunk);
      DocumentReader reader(inputs, kEot, "text", block);
      CHECK(encode_documents(reader, bpe_document_encoder(tok, 1), chunk).ids == want);
    }
  }
}

TEST_CASE("text inputs: the validation split counts documents across inputs", "[text-inputs]") {
  ScratchDir dir("text_inputs_split");
  Tokenizer tok(small_bpe(true));
  std::vector<std::string> names, docs;
  for (int f = 0; f < 3; ++f) {
    std::string text;
    for (int d = 0; d < 4; ++d) {
      docs.push_back(fmt::format("File {} story {}: Tom ran.", f, d) + kEot);
      text += docs.back();
    }
    names.push_back(dir.file(fmt::format("part{}.txt", f)));
    write_all(names.back(), text);
  }
  const auto inputs = resolve_text_inputs(names, "--text");
  for (auto [fraction, held] : {std::pair{0.25, 3}, std::pair{0.1, 2}, std::pair{0.5, 6}, std::pair{0.99, 11}}) {
    INFO("fraction " << fraction);
    for (size_t chunk : {size_t(1), size_t(100), size_t(1) << 20}) {
      lm::TextInputOptions o;
      o.val_fraction = fraction;
      o.chunk_bytes = chunk;
      const lm::TokenizedText t = lm::tokenize_text_inputs(inputs, kEot, bpe_document_encoder(tok, 1), o);
      CHECK(t.val_documents == size_t(held));
      CHECK(t.train_documents == 12 - size_t(held));
      std::string val_text;
      for (size_t i = 12 - size_t(held); i < 12; ++i) val_text += docs[i];
      CHECK(t.val == tok.encode(val_text));
      CHECK(concat(t.train, t.val) == tok.encode(read_all(names[0]) + read_all(names[1]) + read_all(names[2])));
    }
  }
  // One document: its last ⌈fraction·tokens⌉ tokens are held out (a plain text without separators).
  write_all(dir.file("one.txt"), "only one story, a story without a separator in it" + kEot);
  const std::vector<uint32_t> whole = tok.encode(read_all(dir.file("one.txt")));
  for (double fraction : {0.1, 0.5, 0.99}) {
    lm::TextInputOptions options;
    options.val_fraction = fraction;
    const auto one = lm::tokenize_text_inputs(resolve_text_inputs({dir.file("one.txt")}, "--text"), kEot,
                                              bpe_document_encoder(tok, 1), options);
    CHECK(one.val_by_tokens);
    CHECK(one.val.size() == lm::validation_tokens(whole.size(), fraction));
    CHECK(concat(one.train, one.val) == whole);
  }
  CHECK(lm::validation_tokens(100, 0.07) == 7);
  CHECK(lm::validation_tokens(2, 0.01) == 1);
  CHECK(lm::validation_tokens(2, 0.99) == 1);
  // Too little text to split: the error names the input.
  write_all(dir.file("tiny.txt"), "a");
  CHECK_THAT(error_of([&] {
               lm::tokenize_text_inputs(resolve_text_inputs({dir.file("tiny.txt")}, "--text"), kEot,
                                        bpe_document_encoder(tok, 1));
             }),
             Catch::StartsWith(fmt::format("{}: 1 token(s) of text: too few", dir.file("tiny.txt"))));
}

TEST_CASE("text inputs: streamed in small chunks, the ids are those of the whole-text path", "[text-inputs]") {
  ScratchDir dir("text_inputs_stream");
  std::mt19937 rng(21);
  for (bool eot : {true, false}) {
    Tokenizer tok(small_bpe(eot));
    const std::string sep = lm::document_separator(tok);
    REQUIRE(sep == (eot ? kEot : "\n\n"));
    for (int trial = 0; trial < 4; ++trial) {
      std::string text = documents_text(rng, 40 + rng() % 40, sep);
      if (trial == 1) text = "\n\n  " + text;                     // whitespace before the first document
      if (trial == 2) text += "and a last one without separator";  // the last document as written
      write_all(dir.file("t.txt"), text);
      for (double fraction : {0.1, 0.37}) {
        // The old path: the whole text split, each part encoded whole.
        const lm::TextSplit s = lm::split_documents(text, sep, fraction);
        const std::vector<uint32_t> old_train = tok.encode(s.train), old_val = tok.encode(s.val);
        // With the blank-line separator, a chunk boundary can change the ids of the whitespace there, so
        // there the chunks are large (only the validation cut splits the text); the read blocks stay tiny.
        for (size_t chunk : eot ? std::vector<size_t>{1, 64, 500, size_t(1) << 20} : std::vector<size_t>{size_t(1) << 20}) {
          INFO("separator " << sep << ", trial " << trial << ", fraction " << fraction << ", chunk " << chunk);
          lm::TextInputOptions o;
          o.val_fraction = fraction;
          o.chunk_bytes = chunk;
          o.read_block_bytes = 1 + rng() % 50;
          uint64_t calls = 0, last_done = 0, total = 0;
          o.progress = [&](uint64_t done, uint64_t all) {
            CHECK(done >= last_done);
            last_done = done, total = all;
            ++calls;
          };
          const lm::TokenizedText t =
              lm::tokenize_text_inputs(resolve_text_inputs({dir.file("t.txt")}, "--text"), sep, bpe_document_encoder(tok, 2), o);
          CHECK(t.train == old_train);
          CHECK(t.val == old_val);
          CHECK(t.train_documents == s.train_documents);
          CHECK(t.val_documents == s.val_documents);
          CHECK(t.bytes == text.size());
          CHECK(last_done == text.size());
          CHECK(total == text.size());
          CHECK(calls >= (chunk == 1 ? s.train_documents + s.val_documents : 1));
        }
        if (!eot) {  // tiny chunks with the blank-line separator: the same text and documents all the same
          lm::TextInputOptions o;
          o.val_fraction = fraction;
          o.chunk_bytes = 16;
          const lm::TokenizedText t =
              lm::tokenize_text_inputs(resolve_text_inputs({dir.file("t.txt")}, "--text"), sep, bpe_document_encoder(tok, 1), o);
          CHECK(tok.decode_bytes(t.train) == std::string(s.train));
          CHECK(tok.decode_bytes(t.val) == std::string(s.val));
          CHECK(t.val_documents == s.val_documents);
        }
      }
      // tokenize_text_file (kept for its callers) is the same path.
      const lm::TokenizedText f = lm::tokenize_text_file(dir.file("t.txt"), tok, 0.2, 2);
      const lm::TextSplit s = lm::split_documents(text, sep, 0.2);
      CHECK(f.train == tok.encode(s.train));
      CHECK(f.val == tok.encode(s.val));
    }
  }
}

TEST_CASE("text inputs: a reader made at position() reads the same documents from there", "[text-inputs]") {
  ScratchDir dir("text_inputs_position");
  std::mt19937 rng(7);
  write_all(dir.file("a.txt"), documents_text(rng, 12, kEot) + "tail without separator");
  write_all(dir.file("b.jsonl"), "{\"text\": \"j1\"}\n\n{\"text\": \"  \"}\n{\"text\": \"j3\"}\n");
  write_all(dir.file("c.txt"), "\n" + kEot + "c1" + kEot + "   ");
  const auto inputs = resolve_text_inputs({dir.file("a.txt"), dir.file("b.jsonl"), dir.file("c.txt")}, "--text");
  DocumentReader first(inputs, kEot, "text", 3);
  std::vector<DocumentPosition> starts;
  std::vector<std::string> docs;
  std::string d;
  for (;;) {
    const DocumentPosition at = first.position();
    if (!first.next(d)) break;
    starts.push_back(at);
    docs.push_back(d);
  }
  std::string joined;
  for (const auto& x : docs) joined += x;
  CHECK(joined == read_all(dir.file("a.txt")) + kEot + "j1" + kEot + "  " + kEot + "j3" + kEot + read_all(dir.file("c.txt")));
  // Whitespace-only pieces join the document before, even across inputs.
  REQUIRE(docs.size() >= 4);
  CHECK(docs[docs.size() - 3] == "j1" + kEot + "  " + kEot);
  CHECK(docs[docs.size() - 2] == "j3" + kEot + "\n" + kEot);
  CHECK(docs.back() == "c1" + kEot + "   ");
  for (size_t i = 0; i < starts.size(); ++i) {
    INFO("from document " << i);
    DocumentReader again(inputs, kEot, "text", 1 + i % 5, starts[i]);
    CHECK(all_documents(again) == std::vector<std::string>(docs.begin() + std::ptrdiff_t(i), docs.end()));
  }
}

TEST_CASE("text inputs: documents read in blocks are split_documents' documents", "[text-inputs]") {
  std::mt19937 rng(3);
  ScratchDir dir("text_inputs_random");
  for (int trial = 0; trial < 40; ++trial) {
    const std::string sep = trial % 2 ? kEot : "\n\n";
    static const std::vector<std::string> bits = {"a", " ", "\n", "\n\n", "<|endoftext|>", "<|endof", "text|>", "\t", "x."};
    std::string text;
    const size_t n = rng() % 60;
    for (size_t i = 0; i < n; ++i) text += bits[rng() % bits.size()];
    write_all(dir.file("r.txt"), text);
    DocumentReader reader(resolve_text_inputs({dir.file("r.txt")}, "--text"), sep, "text", 1 + rng() % 9);
    const auto docs = all_documents(reader);
    INFO("text '" << text << "' separator " << sep);
    if (docs.size() < 2) {
      CHECK_THROWS_AS(lm::split_documents(text, sep), Error);
      continue;
    }
    std::string joined;
    for (const auto& x : docs) joined += x;
    CHECK(joined == text);  // nothing lost, nothing added
    const lm::TextSplit s = lm::split_documents(text, sep, 0.5);
    REQUIRE(s.train_documents + s.val_documents == docs.size());
    std::string train;
    for (size_t i = 0; i < s.train_documents; ++i) train += docs[i];
    CHECK(train == std::string(s.train));
  }
}

TEST_CASE("text inputs: encode_documents_to_token_file writes the ids atomically, nothing on an error",
          "[text-inputs]") {
  ScratchDir dir("text_inputs_token_file");
  Tokenizer tok(small_bpe(true));
  write_all(dir.file("a.txt"), "One." + kEot + "Two.");
  write_all(dir.file("b.jsonl"), "{\"text\": \"Three.\"}\n");
  const auto inputs = resolve_text_inputs({dir.file("a.txt"), dir.file("b.jsonl")}, "--input");
  DocumentReader reader(inputs, kEot);
  const TokenFileSummary s = encode_documents_to_token_file(reader, bpe_document_encoder(tok, 1), tok.vocab_size(),
                                                            dir.file("out.bin"), 1);
  const auto want = tok.encode("One." + kEot + "Two." + kEot + "Three." + kEot);
  CHECK(tapegrad::data::testing::read_tokens(dir.file("out.bin")) == want);
  CHECK(s.tokens == want.size());
  CHECK(s.documents == 3);
  // A bad line after good chunks: the error, the old output untouched, no temp file.
  write_all(dir.file("bad.jsonl"), "{\"text\": \"ok\"}\n{\"text\": \"ok\"}\n{\"txt\": \"no\"}\n");
  DocumentReader bad(resolve_text_inputs({dir.file("a.txt"), dir.file("bad.jsonl")}, "--input"), kEot);
  CHECK_THAT(error_of([&] {
               encode_documents_to_token_file(bad, bpe_document_encoder(tok, 1), tok.vocab_size(), dir.file("out.bin"), 1);
             }),
             Catch::StartsWith(dir.file("bad.jsonl") + ":3: no field \"text\""));
  CHECK(tapegrad::data::testing::read_tokens(dir.file("out.bin")) == want);
  CHECK_FALSE(fs::exists(dir.file("out.bin.tmp")));
}

// ---------------------------------------------------------------------------------------------
// The tool

namespace {

struct ToolCorpus {
  ScratchDir dir{"text_inputs_tool"};
  std::string tok = dir.file("tok");
  std::string corpus = dir.file("corpus");
  std::vector<std::string> stories;  // every story of the corpus directory, in its order

  ToolCorpus() {
    const std::string text = corpus_head(30000);
    size_t start = 0;
    for (size_t at; (at = text.find(kEot, start)) != std::string::npos; start = at + kEot.size())
      stories.push_back(text.substr(start, at + kEot.size() - start));
    REQUIRE(stories.size() > 20);
    fs::create_directories(corpus + "/sub");
    std::string a, b;
    for (size_t i = 0; i < stories.size(); ++i) (i < stories.size() / 2 ? a : b) += stories[i];
    write_all(corpus + "/a.txt", a);
    write_all(corpus + "/sub/b.txt", b);
    write_all(corpus + "/.skip.txt", "never read");
    const ToolResult r = tool({"tokenize", "train", "--input", corpus, "--vocab-size", "300", "--out", tok});
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
  }
  ToolResult tool(const std::vector<std::string>& args) const {
    return run_tool(args, dir.file("log"));
  }
};

}  // namespace

TEST_CASE("tool: tokenize encode and train --text take directories and JSONL, bad JSONL is one error, no output",
          "[text-inputs][tool]") {
  ToolCorpus c;
  // A JSONL file with three more stories under a different field.
  std::string jsonl;
  for (int i = 0; i < 3; ++i) {
    std::string story = c.stories[size_t(i)];
    story.resize(story.size() - kEot.size());
    jsonl += nlohmann::json{{"story", story}, {"text", 0}}.dump() + "\n";
  }
  write_all(c.dir.file("extra.jsonl"), jsonl);

  ToolResult r = c.tool({"tokenize", "encode", "--tokenizer", c.tok, "--input", c.corpus, c.dir.file("extra.jsonl"),
                         "--text-field", "story", "--out", c.dir.file("all.bin"), "--threads", "2"});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains(fmt::format("{} documents from 3 file(s)", c.stories.size() + 3)));
  Tokenizer tok(load_tokenizer_model(c.tok));
  std::string all;
  for (const auto& s : c.stories) all += s;
  for (int i = 0; i < 3; ++i) all += c.stories[size_t(i)];
  CHECK(tapegrad::data::testing::read_tokens(c.dir.file("all.bin")) == tok.encode(all));

  // Bad JSONL: exit code 2, one line on stderr naming file:line:field, no token file, no temp file.
  write_all(c.dir.file("bad.jsonl"), jsonl + "\n{\"text\": \"no story here\"}\n");
  for (const std::string& out : {c.dir.file("bad.bin")}) {
    r = c.tool({"tokenize", "encode", "--tokenizer", c.tok, "--input", c.corpus, "--input", c.dir.file("bad.jsonl"),
                "--text-field", "story", "--out", out});
    CHECK(r.exit_code == 2);
    const auto lines = lines_of(r.err);
    REQUIRE(lines.size() == 1);
    CHECK(lines[0] == "tapegrad: " + c.dir.file("bad.jsonl") + ":5: no field \"story\" in this JSON object (choose the "
                                                              "field with --text-field)");
    CHECK_FALSE(fs::exists(out));
    CHECK_FALSE(fs::exists(out + ".tmp"));
  }
  r = c.tool({"tokenize", "train", "--input", c.dir.file("bad.jsonl"), "--text-field", "story", "--vocab-size", "300",
              "--out", c.dir.file("tok_bad")});
  CHECK(r.exit_code == 2);
  CHECK(lines_of(r.err).size() == 1);
  CHECK_THAT(r.err, Catch::Contains("bad.jsonl:5: no field \"story\""));
  CHECK_FALSE(fs::exists(c.dir.file("tok_bad")));
  // tokenize train on JSONL: trained on its documents; the temp text is gone.
  r = c.tool({"tokenize", "train", "--input", c.dir.file("extra.jsonl"), "--text-field", "story", "--vocab-size", "280",
              "--out", c.dir.file("tok_jsonl")});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(fs::exists(c.dir.file("tok_jsonl/tokenizer.json")));
  for (const auto& e : fs::directory_iterator(c.dir.file("tok_jsonl"))) CHECK(e.path().filename().string()[0] != '.');
  // An empty directory and a missing path are refused by name.
  fs::create_directories(c.dir.file("nothing"));
  r = c.tool({"tokenize", "encode", "--tokenizer", c.tok, "--input", c.dir.file("nothing"), "--out", c.dir.file("x.bin")});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("--input: the directory " + c.dir.file("nothing") + " holds no text file"));

  // train --text: a directory plus the JSONL file, the split counted over all documents.
  const std::string run = c.dir.file("run");
  r = c.tool({"train", "--text", c.corpus, c.dir.file("extra.jsonl"), "--text-field", "story", "--tokenizer", c.tok,
              "--model", "micro", "--context", "32", "--batch-size", "2", "--steps", "2", "--eval-every", "2",
              "--threads", "1", "--val-fraction", "0.25", "--out", run});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const size_t n = c.stories.size() + 3, held = (n + 3) / 4;
  CHECK_THAT(r.out, Catch::Contains(fmt::format("text {}, {} (3 files)", c.corpus, c.dir.file("extra.jsonl"))));
  CHECK_THAT(r.out, Catch::Contains(fmt::format("({} documents), ", n - held)));
  CHECK_THAT(r.out, Catch::Contains(fmt::format("validation tokens ({} documents)", held)));
  // eval --text on the same inputs with --held-out 0.25 evaluates exactly those documents.
  r = c.tool({"eval", "--checkpoint", run, "--text", c.corpus, "--text", c.dir.file("extra.jsonl"), "--text-field",
              "story", "--held-out", "0.25", "--threads", "1"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains(fmt::format("(its last {} documents)", held)));
  r = c.tool({"eval", "--checkpoint", run, "--text", c.dir.file("bad.jsonl"), "--text-field", "story"});
  CHECK(r.exit_code == 2);
  CHECK_FALSE(r.err.empty());  // (eval may print a BLAS advice line first)
  CHECK(lines_of(r.err).back() == "tapegrad: " + c.dir.file("bad.jsonl") +
                                      ":5: no field \"story\" in this JSON object (choose the field with --text-field)");
}
