// test_llama2c_encode.cpp — Llama2cTokenizer::encode (the fast encoder, lm/llama2c_encode.h) gives exactly the
// ids of encode_reference (run.c's O(n²) loop):
//   * property tests on random and adversarial texts (random bytes, invalid UTF-8, long runs of one character,
//     spaces, newlines) with vocabularies written here (no shared data): equal scores (ties), pieces with spaces
//     inside and at the end, scores that never merge (−1e10, below, NaN), repeated pieces, empty pieces, byte
//     pieces that are other texts, merges with BOS, merges spelling byte pieces, pieces longer than the pair
//     table's 64 bytes; runs long enough for the heap; one cache shared by all texts;
//   * the document encoder (1 and 2 threads, its caches kept from chunk to chunk) = the reference per document;
//   * the corpora of ../shared/data/corpora with every tokenizer in ../shared/data/llama2c (skipped without them;
//     12 KB of each: run.c's loop is slow; the hidden case, tapegrad_tests "[llama2c_encode_all]", takes them whole).
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

#include "kernels/error.h"
#include "lm/llama2c_documents.h"
#include "lm/llama2c_tokenizer.h"
#include "tests/shared_fixture.h"

using namespace tapegrad;
namespace fs = std::filesystem;

namespace {

using Piece = std::pair<std::string, float>;

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("tapegrad_l2cenc_" + std::to_string(::getpid()) + "_" + name)).string();
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// run.c's layout: <unk>, <s>, </s>, the byte pieces (`bytes` replaces some of them), then `extra`.
using BytePieces = std::vector<std::pair<int, std::string>>;  // (byte, the text of its piece)

std::string tokenizer_file(const std::vector<Piece>& extra, const BytePieces& bytes = {}) {
  std::vector<Piece> pieces = {{"<unk>", 0.0f}, {"\n<s>\n", 0.0f}, {"\n</s>\n", 0.0f}};
  for (int b = 0; b < 256; ++b) pieces.emplace_back(fmt::format("<0x{:02X}>", b), 0.0f);
  for (const auto& [b, text] : bytes) pieces[size_t(3 + b)].first = text;
  pieces.insert(pieces.end(), extra.begin(), extra.end());
  std::string out(4, '\0');
  const int32_t max_len = 200;
  std::memcpy(out.data(), &max_len, 4);
  for (const auto& [text, score] : pieces) {
    const auto len = int32_t(text.size());
    out.append(reinterpret_cast<const char*>(&score), 4);
    out.append(reinterpret_cast<const char*>(&len), 4);
    out += text;
  }
  return out;
}

// A tokenizer of the given pieces, read back from a temporary file.
struct Synthetic {
  std::string path;
  std::unique_ptr<lm::Llama2cTokenizer> tok;
  Synthetic(const std::string& name, const std::vector<Piece>& extra, const BytePieces& bytes = {})
      : path(temp_path(name)) {
    std::ofstream(path, std::ios::binary) << tokenizer_file(extra, bytes);
    tok = std::make_unique<lm::Llama2cTokenizer>(path, lm::Llama2cTokenizer::count_tokens(path));
  }
  ~Synthetic() { fs::remove(path); }
};

std::string repeat(std::string_view s, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

// Many ties (scores from a small set), spaces inside and at the end, scores that never merge, repeated and long
// pieces, a merge with BOS, merges that spell byte pieces.
std::vector<Piece> rich_pieces() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<Piece> p = {
      {" ", -1}, {"a", -1}, {"b", -1}, {"c", -1}, {"\n", -1}, {"\xc3\xa9", -1}, {"\xe6\x97\xa5", -2},  // é 日
      {"ab", -1}, {"ba", -1}, {"aa", -2}, {"aaa", -1}, {"aaaa", -3}, {" a", -1}, {" b", -2}, {"  ", -1},
      {"   ", -2}, {"a ", -1}, {"b ", -3}, {"a b", -1}, {" ab", -2}, {"\n\n", -1}, {"\na", -2}, {"ab\n", -3},
      {"\xc3\xa9 \xc3\xa9", -1}, {" \xc3\xa9", -2}, {"cc", -1}, {"ccc", -1}, {"c c", -2}, {"c ", -3},
      {"bb", -1e10f}, {"ca", -2e10f}, {"ac", nan}, {"ab", 5.0f}, {"c", 3.0f},  // never merge; repeats: first wins
      {"\n<s>\n ", -1}, {"\n<s>\n a", -2},                                    // BOS + the dummy prefix
      {"<0xFF><0xFE>", -1}, {"<0xFE><0xFF>", -2}, {"<0xC3>a", -1}, {"\x80", -3},  // byte pieces and a stray byte
      {"ba ", -4}, {"aab", -4}, {"abab", -2}, {" aa", -4}, {"a\n", -4}, {"\n ", -3}, {" \n", -3}};
  for (size_t k : {6, 8, 16, 32, 64, 70, 128, 134}) p.emplace_back(repeat("a", k), -1.5f);  // 70 = 64 + 6
  for (size_t k : {4, 8, 16, 32, 64, 65, 96, 97}) p.emplace_back(repeat(" ", k), -2.5f);
  return p;
}

// Byte pieces that are not "<0x..>": empty, a character that has its own piece, a text of two characters.
BytePieces odd_byte_pieces() {
  return {{'q', ""}, {'z', "z"}, {0xFF, ""}, {0xFE, "ab"}, {0x80, "<0x80>x"}, {'\n', " "}, {0xE6, "a "}};
}

// Random texts over characters that the pieces above make interesting.
std::string random_text(std::mt19937& rng, size_t max_len) {
  static const std::vector<std::string> atoms = {
      "a", "a", "a", "b", "b", "c", " ", " ", " ", "\n", "\xc3\xa9", "\xe6\x97\xa5", "q", "z",
      "\xc3", "\x80", "\xff", "\xfe", "\xf0\x9f\x98\x80", "\xe6\x97", "<0xFF>", "\x80\x80\x80\x80\x80", "x"};
  std::uniform_int_distribution<size_t> len(0, max_len), pick(0, atoms.size() - 1), byte(0, 255), kind(0, 9);
  const size_t n = len(rng);
  std::string s;
  while (s.size() < n) {
    const size_t k = kind(rng);
    if (k == 0)
      s += char(byte(rng));
    else if (k == 1)
      s += repeat(atoms[pick(rng)], len(rng) % 40);  // a run
    else
      s += atoms[pick(rng)];
  }
  return s;
}

void check_same(const lm::Llama2cTokenizer& tok, const std::string& text, lm::Llama2cEncodeCache& cache) {
  for (bool bos : {true, false}) {
    INFO("text (" << text.size() << " bytes) '" << text.substr(0, 200) << "', bos " << bos);
    const std::vector<uint32_t> want = tok.encode_reference(text, bos);
    REQUIRE(tok.encode(text, bos) == want);
    std::vector<uint32_t> got = {7};  // appended after what is there
    tok.encode(text, bos, got, cache);
    got.erase(got.begin());
    REQUIRE(got == want);
  }
}

}  // namespace

TEST_CASE("llama2c encode: random and adversarial texts give run.c's ids", "[llama2c][llama2c_encode]") {
  const Synthetic rich("rich.bin", rich_pieces());
  const Synthetic odd("odd.bin", rich_pieces(), odd_byte_pieces());
  for (const Synthetic* s : {&rich, &odd}) {
    INFO("tokenizer " << (s == &rich ? "rich" : "odd byte pieces"));
    const lm::Llama2cTokenizer& tok = *s->tok;
    lm::Llama2cEncodeCache cache;
    std::mt19937 rng(38);
    for (int i = 0; i < 1500; ++i) check_same(tok, random_text(rng, 120), cache);
    for (int i = 0; i < 30; ++i) check_same(tok, random_text(rng, 1500), cache);
    // Long runs: one piece between cuts of hundreds of symbols goes through the heap.
    for (const char* unit : {"a", " ", "\n", "ab", "a ", "c", "\xc3\xa9 ", "\xff\xfe", "\x80", "q", "aab"})
      for (size_t n : {1, 2, 3, 31, 32, 33, 64, 65, 70, 135, 600})
        check_same(tok, repeat(unit, n), cache);
    check_same(tok, repeat("a", 2000) + " " + repeat(" ", 1000) + "b", cache);
    check_same(tok, "", cache);
    CHECK(cache.cached_pieces() > 0);
  }
}

TEST_CASE("llama2c encode: a vocabulary whose pieces hold spaces anywhere, and one with a single merge",
          "[llama2c][llama2c_encode]") {
  // Every cut rule must hold here: a space can end or sit inside any piece.
  std::vector<Piece> pieces = {{" ", 0}, {"x", 0}, {"y", 0}};
  const char* texts[] = {"x ", " x", "x y", " y ", "xy", "yx", "  ", "x  y", " x y ", "xx", "yy", "xyx "};
  for (size_t i = 0; i < std::size(texts); ++i) pieces.emplace_back(texts[i], -float(i % 3));
  const Synthetic spaces("spaces.bin", pieces);
  const Synthetic single("single.bin", {{" ", 0}, {"x", 0}, {" x", 1}});
  std::mt19937 rng(8);
  for (const Synthetic* s : {&spaces, &single}) {
    lm::Llama2cEncodeCache cache;
    for (int i = 0; i < 800; ++i) {
      std::uniform_int_distribution<int> len(0, 60), c(0, 3);
      std::string t;
      for (int n = len(rng); n > 0; --n) t += " xy\n"[c(rng)];
      check_same(*s->tok, t, cache);
    }
  }
  // A tokenizer without " " is refused by both, with the same message.
  const Synthetic no_space("nospace.bin", {{"x", 0}});
  CHECK_THROWS_WITH(no_space.tok->encode("x"), Catch::Contains("has no piece \" \" (the dummy prefix)"));
  CHECK_THROWS_WITH(no_space.tok->encode_reference("x"), Catch::Contains("has no piece \" \" (the dummy prefix)"));
  CHECK(no_space.tok->encode("") == no_space.tok->encode_reference(""));
}

TEST_CASE("llama2c encode: the document encoder gives the reference's ids per document, 1 and 2 threads",
          "[llama2c][llama2c_encode]") {
  const Synthetic rich("docs.bin", rich_pieces());
  std::mt19937 rng(3);
  std::vector<std::string> chunks;
  std::vector<uint32_t> want;
  for (int c = 0; c < 3; ++c) {
    std::string chunk;
    for (int d = 0; d < 40; ++d) {
      std::string doc = random_text(rng, 200);
      if (d % 5 == 0) doc = "ab ab ba aab " + doc;  // the same words in many documents: cache hits
      // A document is what lies between blank lines, stripped (lm/llama2c_documents.h).
      std::string single;  // no blank line inside
      for (char ch : doc)
        if (ch != '\n' || single.empty() || single.back() != '\n') single += ch;
      doc = single;
      const size_t b = doc.find_first_not_of(" \t\n\r\f\v");
      if (b == std::string::npos) continue;
      doc = doc.substr(b, doc.find_last_not_of(" \t\n\r\f\v") - b + 1);
      chunk += doc + "\n\n";
      const auto ids = rich.tok->encode_reference(doc, true);
      want.insert(want.end(), ids.begin(), ids.end());
    }
    chunks.push_back(chunk);
  }
  for (int threads : {1, 2}) {
    INFO("threads " << threads);
    const data::DocumentEncoder encode = lm::llama2c_document_encoder(*rich.tok, threads);
    for (int pass = 0; pass < 2; ++pass) {  // the second pass finds the first one's pieces in the caches
      std::vector<uint32_t> got;
      for (const std::string& chunk : chunks) encode(chunk, got);
      CHECK(got == want);
    }
  }
}

namespace {

// Every tokenizer under ../shared/data/llama2c (the files that read as one: not the model).
std::vector<std::string> shared_tokenizers() {
  const std::string dir = testing::shared_path("data/llama2c");
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string path = entry.path().string();
    try {
      if (lm::Llama2cTokenizer::count_tokens(path) >= 259) found.push_back(path);
    } catch (const Error&) {  // stories260K.bin: a model
    }
  }
  std::sort(found.begin(), found.end());
  return found;
}

// `bytes` of each corpus (0: all) through every shared tokenizer, document by document and as one text.
void check_corpora(size_t bytes, size_t whole_text_bytes) {
  const std::vector<std::string> toks = shared_tokenizers();
  REQUIRE(toks.size() >= 2);  // tok512.bin and tokenizer.bin at least
  const std::string corpora = testing::shared_path("data/corpora");
  for (const std::string& tok_path : toks) {
    const lm::Llama2cTokenizer tok(tok_path, lm::Llama2cTokenizer::count_tokens(tok_path));
    lm::Llama2cEncodeCache cache;
    for (const char* name : {"tinystories_train_head2MiB.txt", "tinyshakespeare.txt",
                             "tinystories_train_head4M_lowercase.txt"}) {
      INFO("tokenizer " << tok_path << ", corpus " << name);
      std::string text = slurp(corpora + "/" + name);
      REQUIRE(!text.empty());
      if (bytes && text.size() > bytes) text.resize(bytes);
      size_t documents = 0;
      for (size_t start = 0; start < text.size();) {
        const size_t end = std::min(text.find("\n\n", start), text.size());
        const std::string doc = text.substr(start, end - start);
        start = end + 2;
        if (doc.empty()) continue;
        INFO("document " << documents << " '" << doc.substr(0, 80) << "'");
        std::vector<uint32_t> got;
        tok.encode(doc, true, got, cache);
        REQUIRE(got == tok.encode_reference(doc, true));
        ++documents;
      }
      CHECK(documents >= 1);
      const std::string whole = text.substr(0, whole_text_bytes);  // newlines and blank lines inside
      CHECK(tok.encode(whole, false) == tok.encode_reference(whole, false));
    }
  }
}

}  // namespace

TEST_CASE("llama2c encode: the corpora give run.c's ids with every shared tokenizer (a sample)",
          "[llama2c][llama2c_encode]") {
  check_corpora(12 << 10, 2000);
}

TEST_CASE("llama2c encode: the corpora give run.c's ids with every shared tokenizer (all of them, minutes)",
          "[.][llama2c_encode_all]") {
  check_corpora(0, 20000);
}
