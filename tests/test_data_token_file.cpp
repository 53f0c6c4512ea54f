// test_data_token_file.cpp — the token file format (write streaming, read mapped, bad files) and
// get_batch / SequentialBatches (shapes, shift-by-one targets, uniform start positions, devices).
#include <cmath>
#include <filesystem>
#include <numeric>

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "data/batch.h"
#include "data/token_file.h"
#include "kernels/error.h"
#include "test_data_helpers.h"

using namespace tapegrad;
using namespace tapegrad::data;
using namespace tapegrad::data::testing;

TEST_CASE("token files round-trip with 2-byte and 4-byte tokens", "[data][token_file]") {
  ScratchDir dir("token_file_roundtrip");
  std::vector<uint32_t> small(1000), large(1000);
  for (uint32_t i = 0; i < 1000; ++i) small[i] = (i * 7919u) % 50257u, large[i] = (i * 104729u) % 100000u;
  {
    TokenFileWriter writer(dir.file("small.tok"), 50257);
    CHECK(writer.token_width() == 2);
    writer.write(std::span(small).first(400));  // streamed in two pieces
    writer.write(std::span(small).subspan(400));
    writer.close();
  }
  write_token_file(dir.file("large.tok"), large, 100000);
  write_token_file(dir.file("empty.tok"), {}, 10);
  const TokenFile a(dir.file("small.tok")), b(dir.file("large.tok")), e(dir.file("empty.tok"));
  CHECK(a.token_width() == 2);
  CHECK(b.token_width() == 4);
  CHECK(a.vocab_size() == 50257);
  REQUIRE(a.size() == 1000);
  REQUIRE(b.size() == 1000);
  CHECK(e.size() == 0);
  CHECK(std::filesystem::file_size(dir.file("small.tok")) == 32 + 2000);
  for (uint32_t i = 0; i < 1000; ++i) {
    CHECK(a[i] == small[i]);
    CHECK(b[i] == large[i]);
  }
  CHECK_THROWS_WITH(a.at(1000), Catch::Contains("outside"));
  CHECK(TokenFileWriter(dir.file("w65536.tok"), 65536).token_width() == 2);
  CHECK(TokenFileWriter(dir.file("w65537.tok"), 65537).token_width() == 4);
}

TEST_CASE("bad token files give clear errors", "[data][token_file]") {
  ScratchDir dir("token_file_bad");
  const std::vector<uint32_t> tokens{1, 2, 3, 4, 5};
  write_token_file(dir.file("good.tok"), tokens, 10);
  const std::string good = read_all(dir.file("good.tok"));

  std::string wrong_magic = good;
  wrong_magic[0] = 'X';
  write_all(dir.file("magic.tok"), wrong_magic);
  CHECK_THROWS_WITH(TokenFile(dir.file("magic.tok")), Catch::Contains("wrong magic"));
  write_all(dir.file("truncated.tok"), good.substr(0, good.size() - 1));
  CHECK_THROWS_WITH(TokenFile(dir.file("truncated.tok")), Catch::Contains("truncated"));
  write_all(dir.file("long.tok"), good + "xx");
  CHECK_THROWS_WITH(TokenFile(dir.file("long.tok")), Catch::Contains("truncated or corrupt"));
  write_all(dir.file("header.tok"), good.substr(0, 20));
  CHECK_THROWS_WITH(TokenFile(dir.file("header.tok")), Catch::Contains("shorter than"));
  std::string bad_width = good;
  bad_width[12] = 3;
  write_all(dir.file("width.tok"), bad_width);
  CHECK_THROWS_WITH(TokenFile(dir.file("width.tok")), Catch::Contains("token width 3"));
  std::string huge_count = good;
  huge_count[23] = char(0x80);
  write_all(dir.file("count.tok"), huge_count);
  CHECK_THROWS_AS(TokenFile(dir.file("count.tok")), Error);
  CHECK_THROWS_WITH(TokenFile(dir.file("missing.tok")), Catch::Contains("cannot open"));
  CHECK_THROWS_WITH(write_token_file(dir.file("over.tok"), tokens, 5), Catch::Contains("not below vocab_size 5"));
  // The header promises every id < vocab_size: one flipped byte in the body breaks that, and open says where.
  std::string flipped = good;
  flipped[32 + 2 * 3 + 1] = char(0x01);  // token 3: 4 → 260
  write_all(dir.file("flipped.tok"), flipped);
  CHECK_THROWS_WITH(TokenFile(dir.file("flipped.tok")),
                    Catch::Contains("offset 38") && Catch::Contains("token 260 (index 3)") &&
                        Catch::Contains("vocab_size 10"));
  std::string zero_vocab = good;
  zero_vocab[24] = 0;
  write_all(dir.file("vocab0.tok"), zero_vocab);
  CHECK_THROWS_WITH(TokenFile(dir.file("vocab0.tok")), Catch::Contains("vocab_size 0"));
  std::string wide_vocab = good;
  wide_vocab[26] = 1;  // vocab_size 65546 in 2-byte tokens
  write_all(dir.file("vocab_wide.tok"), wide_vocab);
  CHECK_THROWS_WITH(TokenFile(dir.file("vocab_wide.tok")), Catch::Contains("does not fit 2-byte tokens"));
  std::string version2 = good;
  version2[8] = 2;
  write_all(dir.file("version2.tok"), version2);
  CHECK_THROWS_WITH(TokenFile(dir.file("version2.tok")),
                    Catch::Contains("offset 8: version 2 is not supported (expected 1)"));

  // The writer: a vocabulary it cannot promise is refused before the file is created; a closed writer
  // refuses more tokens (and the file it closed stays valid).
  CHECK_THROWS_WITH(TokenFileWriter(dir.file("v0.tok"), 0), Catch::Contains("vocab_size 0 must be in 1..2^32"));
  CHECK_THROWS_WITH(TokenFileWriter(dir.file("vbig.tok"), (uint64_t(1) << 32) + 1),
                    Catch::Contains("vocab_size 4294967297 must be in 1..2^32"));
  CHECK_FALSE(std::filesystem::exists(dir.file("v0.tok")));
  CHECK_FALSE(std::filesystem::exists(dir.file("vbig.tok")));
  TokenFileWriter writer(dir.file("closed.tok"), 10);
  writer.write(tokens);
  writer.close();
  CHECK_THROWS_WITH(writer.write(tokens), Catch::Contains("write after close"));
  CHECK(TokenFile(dir.file("closed.tok")).size() == tokens.size());
}

TEST_CASE("a token file's ids are checked against vocab_size on open, in every block", "[data][token_file]") {
  // 10,000 ids in 2 and 4 bytes: the scan works in blocks of 4096, so a bad id in the first, a middle
  // and the last (partial) block must each be found, with its index.
  ScratchDir dir("token_file_scan");
  for (const uint64_t vocab : {uint64_t(1000), uint64_t(70000)}) {
    std::vector<uint32_t> ids(10000);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = uint32_t((i * 7919) % vocab);
    write_token_file(dir.file("ok.tok"), ids, vocab);
    CHECK(TokenFile(dir.file("ok.tok")).size() == 10000);
    const std::string good = read_all(dir.file("ok.tok"));
    const size_t width = vocab <= 65536 ? 2 : 4;
    for (const size_t bad : {size_t(0), size_t(5000), size_t(9999)}) {
      std::string body = good;
      const uint64_t value = vocab;  // the smallest id that is too big
      for (size_t b = 0; b < width; ++b) body[32 + bad * width + b] = char((value >> (8 * b)) & 0xff);
      write_all(dir.file("bad.tok"), body);
      INFO("vocab " << vocab << " bad index " << bad);
      CHECK_THROWS_WITH(TokenFile(dir.file("bad.tok")), Catch::Contains(fmt::format("(index {})", bad)));
    }
  }
}

TEST_CASE("get_batch returns int64 inputs and targets shifted by one", "[data][batch]") {
  std::vector<uint32_t> data(100);
  std::iota(data.begin(), data.end(), 0u);
  Generator gen(1234);
  const Batch b = get_batch(std::span<const uint32_t>(data), 8, 16, gen);
  CHECK(b.inputs.shape() == Shape{8, 16});
  CHECK(b.targets.shape() == Shape{8, 16});
  CHECK(b.inputs.dtype() == kInt64);
  const auto in = b.inputs.to_vector<int64_t>(), out = b.targets.to_vector<int64_t>();
  for (size_t r = 0; r < 8; ++r)
    for (size_t t = 0; t < 16; ++t) {
      CHECK(out[r * 16 + t] == in[r * 16 + t] + 1);
      if (t > 0) CHECK(in[r * 16 + t] == in[r * 16 + t - 1] + 1);
    }
  // the same through a token file
  ScratchDir dir("batch_file");
  write_token_file(dir.file("arange.tok"), data, 100);
  const TokenFile file(dir.file("arange.tok"));
  Generator g1(7), g2(7);
  const Batch from_file = get_batch(file, 4, 10, g1);
  const Batch from_span = get_batch(std::span<const uint32_t>(data), 4, 10, g2);
  CHECK(from_file.inputs.to_vector<int64_t>() == from_span.inputs.to_vector<int64_t>());
  const SequentialBatches sequential(file, 2, 33);  // built straight from the file
  CHECK(sequential.num_batches() == 2);
  CHECK(sequential[1].targets.to_vector<int64_t>().back() == 99);
}

TEST_CASE("get_batch start positions are uniform over every valid offset", "[data][batch]") {
  const size_t length = 40, context = 8, offsets = length - context;  // starts 0..31
  std::vector<uint32_t> data(length);
  std::iota(data.begin(), data.end(), 0u);
  Generator gen(42);
  std::vector<int64_t> counts(offsets + 1, 0);
  const int draws = 200, batch = 160;
  for (int d = 0; d < draws; ++d) {
    const auto starts = get_batch(std::span<const uint32_t>(data), batch, context, gen).inputs.to_vector<int64_t>();
    for (int r = 0; r < batch; ++r) ++counts[starts[size_t(r) * context]];
  }
  const double n = double(draws) * batch, p = 1.0 / offsets;
  const double mean = n * p, sigma = std::sqrt(n * p * (1 - p));
  for (size_t s = 0; s < offsets; ++s) {
    INFO("start " << s << " count " << counts[s]);
    CHECK(std::abs(double(counts[s]) - mean) < 5 * sigma);
  }
  CHECK(counts[offsets] == 0);  // a window starting at length - context would have no last target
}

TEST_CASE("SequentialBatches covers the data once in order", "[data][batch]") {
  std::vector<uint32_t> data(103);
  std::iota(data.begin(), data.end(), 0u);
  const TokenSource source{std::span<const uint32_t>(data)};
  const SequentialBatches batches(source, 3, 10);
  CHECK(batches.num_windows() == 10);  // (103 - 1) / 10
  REQUIRE(batches.num_batches() == 4);
  std::vector<int64_t> seen;
  for (uint64_t i = 0; i < batches.num_batches(); ++i) {
    const auto in = batches[i].inputs.to_vector<int64_t>();
    seen.insert(seen.end(), in.begin(), in.end());
  }
  CHECK(batches[3].inputs.shape() == Shape{1, 10});
  std::vector<int64_t> expected(100);
  std::iota(expected.begin(), expected.end(), 0);
  CHECK(seen == expected);
  CHECK_THROWS_WITH(batches[4], Catch::Contains("outside"));
}

TEST_CASE("get_batch rejects bad sizes and unavailable devices", "[data][batch]") {
  std::vector<uint32_t> data(10, 1);
  const TokenSource source{std::span<const uint32_t>(data)};
  Generator gen(1);
  CHECK_THROWS_WITH(get_batch(source, 2, 10, gen), Catch::Contains("too few"));
  CHECK_NOTHROW(get_batch(source, 2, 9, gen));
  CHECK_THROWS_AS(get_batch(source, 0, 4, gen), Error);
  CHECK_THROWS_AS(get_batch(source, 2, 0, gen), Error);
  CHECK_THROWS_AS(get_batch(source, 2, 4, gen, Device{DeviceType::CPU, -1}), Error);
  CHECK_THROWS_AS(get_batch(source, 2, 4, gen, Device{DeviceType::CPU, 1}), Error);
  CHECK_THROWS_AS(SequentialBatches(source, 2, 10), Error);
}
