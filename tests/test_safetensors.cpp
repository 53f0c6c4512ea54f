// test_safetensors.cpp — autograd/io/safetensors: round trips, hand-built files (the byte layout
// checked independently of our writer), the shared reference files, every validation error,
// fuzzing (truncation, bit flips, garbage: Error or success, never a crash) and atomic writes.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <unistd.h>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/io/safetensors.h"
#include "autograd/io/safetensors_dtype.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/error.h"
#include "tests/shared_fixture.h"

using namespace tapegrad;
namespace fs = std::filesystem;

namespace {

using Bytes = std::vector<unsigned char>;

// A fresh empty directory under the system temp dir, removed at scope exit.
struct TempDir {
  fs::path path;
  TempDir() {
    static int counter = 0;
    path = fs::temp_directory_path() / ("tg_safetensors_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}
void write_bytes(const std::string& path, const Bytes& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}
void append_u64(Bytes& b, uint64_t v) {
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<unsigned char>(v >> (8 * i)));
}
template <class T>
void append_values(Bytes& b, std::initializer_list<T> values) {
  for (T v : values) {
    unsigned char raw[sizeof(T)];
    std::memcpy(raw, &v, sizeof(T));
    b.insert(b.end(), raw, raw + sizeof(T));
  }
}
// u64 header length, the header text as given, then the data: assembled here, not by our writer.
Bytes make_file(const std::string& header, const Bytes& data) {
  Bytes b;
  append_u64(b, header.size());
  b.insert(b.end(), header.begin(), header.end());
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

// The error message of loading `bytes` written to a file (fails the test if it loads).
std::string load_error(const TempDir& dir, const Bytes& bytes) {
  std::string path = dir.file("bad.safetensors");
  write_bytes(path, bytes);
  try {
    load_safetensors(path);
  } catch (const Error& e) {
    return e.what();
  }
  FAIL("expected tapegrad::Error");
  return "";
}

// Loading must succeed or throw tapegrad::Error; anything else fails the test. True if it loaded.
bool load_survives(const std::string& path) {
  try {
    std::map<std::string, std::string> meta;
    auto t = load_safetensors(path, &meta);
    return true;
  } catch (const Error&) {
    return false;
  } catch (const std::exception& e) {
    FAIL("non-tapegrad exception: " << e.what());
  }
  return false;
}

// The data bytes of a .npy file (v1.0 header).
Bytes npy_data(const std::string& path) {
  Bytes b = read_bytes(path);
  REQUIRE(b.size() >= 10);
  size_t hlen = b[8] | (b[9] << 8);
  return Bytes(b.begin() + 10 + hlen, b.end());
}
Bytes tensor_bytes(const Tensor& t) {
  Tensor c = t.contiguous();
  auto p = static_cast<const unsigned char*>(c.data_ptr());
  return Bytes(p, p + c.numel() * dtype_size(c.dtype()));
}

void check_same(const Tensor& got, const Tensor& want) {
  CHECK(got.dtype() == want.dtype());
  CHECK(got.shape() == want.shape());
  CHECK(got.is_contiguous());
  CHECK(tensor_bytes(got) == tensor_bytes(want));
}

}  // namespace

TEST_CASE("safetensors round trip of every dtype, 0-d, empty and non-contiguous tensors", "[safetensors]") {
  TempDir dir;
  std::map<std::string, Tensor> in;
  in["f32"] = randn({3, 4});
  in["f64"] = randn({2, 3, 2}, kFloat64);
  in["i32"] = tensor({1, -2, 2147483647, -2147483648.0}, kInt32);
  in["i64"] = from_vector<int64_t>({int64_t(1) << 40, -7, 0}, {3});
  in["bool"] = lt(randn({5}), zeros({5}));
  in["scalar"] = scalar_tensor(3.25, kFloat64);
  in["empty"] = zeros({0, 3});
  in["empty_i64"] = zeros({0}, kInt64);
  in["transposed"] = randn({3, 5}).t();                          // non-contiguous
  in["strided"] = arange(20, kInt32).slice(0, 1, 20, 3);         // step 3
  in["expanded"] = tensor({1, 2}, kFloat64).unsqueeze(0).expand({3, 2});  // stride 0
  REQUIRE_FALSE(in["transposed"].is_contiguous());
  std::string path = dir.file("all.safetensors");
  save_safetensors(path, in);

  auto out = load_safetensors(path);
  REQUIRE(out.size() == in.size());
  for (const auto& [name, t] : in) {
    INFO(name);
    REQUIRE(out.count(name) == 1);
    check_same(out.at(name), t);
  }
  CHECK(out.at("transposed").to_vector<float>() == in["transposed"].to_vector<float>());  // row-major
  CHECK(out.at("strided").to_vector<int32_t>() == std::vector<int32_t>{1, 4, 7, 10, 13, 16, 19});
  CHECK(out.at("scalar").dim() == 0);
  CHECK(out.at("scalar").item() == 3.25);

  SafetensorsFile f(path);
  CHECK(f.names().size() == in.size());
  CHECK(f.contains("f32"));
  CHECK_FALSE(f.contains("nope"));
  CHECK(f.entry("f64").dtype == "F64");
  CHECK(f.entry("bool").dtype == "BOOL");
  CHECK(f.entry("i32").shape == std::vector<int64_t>{4});
  CHECK(f.entry("scalar").shape.empty());
  CHECK_THROWS_AS(f.entry("nope"), Error);
  CHECK_THROWS_WITH(f.load("nope"), Catch::Contains("no tensor named 'nope'"));
  // the writer puts 8-byte dtypes first: every tensor's data is aligned to its element size
  for (const auto& e : f.entries()) CHECK(e.begin % detail::find_st_dtype(e.dtype)->size == 0);
}

TEST_CASE("safetensors metadata round trip and header padding", "[safetensors]") {
  TempDir dir;
  std::string path = dir.file("m.safetensors");
  std::map<std::string, std::string> meta{{"format", "pt"}, {"note", "héllo \"quoted\"\n"}, {"empty", ""}};
  save_safetensors(path, {{"w", ones({2})}}, meta);
  std::map<std::string, std::string> got;
  load_safetensors(path, &got);
  CHECK(got == meta);
  CHECK(SafetensorsFile(path).metadata() == meta);

  save_safetensors(path, {{"w", ones({2})}});  // no metadata: no "__metadata__" key at all
  got = {{"stale", "x"}};
  load_safetensors(path, &got);
  CHECK(got.empty());
  Bytes b = read_bytes(path);
  std::string text(b.begin() + 8, b.end());
  CHECK(text.find("__metadata__") == std::string::npos);
}

TEST_CASE("safetensors writer byte layout checked byte by byte", "[safetensors]") {
  TempDir dir;
  std::string path = dir.file("layout.safetensors");
  save_safetensors(path, {{"x", from_vector<float>({1.5f, -2.0f}, {2})}, {"n", from_vector<int64_t>({7}, {})}});
  // I64 (8 bytes) goes before F32; keys are sorted in the JSON; padded with spaces to a multiple of 8
  std::string header = R"({"n":{"data_offsets":[0,8],"dtype":"I64","shape":[]},"x":{"data_offsets":[8,16],"dtype":"F32","shape":[2]}})";
  while (header.size() % 8) header += ' ';
  Bytes data;
  append_values<int64_t>(data, {7});
  append_values<float>(data, {1.5f, -2.0f});
  CHECK(read_bytes(path) == make_file(header, data));
}

TEST_CASE("safetensors loads a hand-built file with every loadable dtype", "[safetensors]") {
  TempDir dir;
  std::string header =
      R"({"__metadata__":{"k":"v"},)"
      R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"F64","shape":[],"data_offsets":[8,16]},)"
      R"("c":{"dtype":"I64","shape":[1,2],"data_offsets":[16,32]},)"
      R"("d":{"dtype":"I32","shape":[2,1],"data_offsets":[32,40]},)"
      R"("e":{"dtype":"U8","shape":[3],"data_offsets":[40,43]},)"
      R"("f":{"dtype":"BOOL","shape":[2],"data_offsets":[43,45]},)"
      R"("g":{"dtype":"F16","shape":[3],"data_offsets":[45,51]},)"
      R"("h":{"dtype":"BF16","shape":[2],"data_offsets":[51,55]},)"
      R"("z":{"dtype":"F32","shape":[2,0],"data_offsets":[55,55]}}   )";
  Bytes data;
  append_values<float>(data, {0.5f, -1.25f});
  append_values<double>(data, {3.0});
  append_values<int64_t>(data, {-5, int64_t(1) << 50});
  append_values<int32_t>(data, {7, -8});
  append_values<uint8_t>(data, {1, 0, 1});
  append_values<uint8_t>(data, {0, 1});
  append_values<uint16_t>(data, {0x3C00, 0xC000, 0x3555});  // 1, -2, 0.333251953125
  append_values<uint16_t>(data, {0x3F80, 0xC040});          // 1, -3
  std::string path = dir.file("hand.safetensors");
  write_bytes(path, make_file(header, data));

  std::map<std::string, std::string> meta;
  auto t = load_safetensors(path, &meta);
  CHECK(meta == std::map<std::string, std::string>{{"k", "v"}});
  CHECK(t.at("a").to_vector<float>() == std::vector<float>{0.5f, -1.25f});
  CHECK(t.at("b").dim() == 0);
  CHECK(t.at("b").item() == 3.0);
  CHECK(t.at("c").shape() == Shape{1, 2});
  CHECK(t.at("c").to_vector<int64_t>() == std::vector<int64_t>{-5, int64_t(1) << 50});
  CHECK(t.at("d").dtype() == kInt32);
  CHECK(t.at("d").to_vector<int32_t>() == std::vector<int32_t>{7, -8});
  CHECK(t.at("e").dtype() == kBool);  // U8 holding 0/1 → bool
  CHECK(t.at("e").to_vector<uint8_t>() == std::vector<uint8_t>{1, 0, 1});
  CHECK(t.at("f").dtype() == kBool);
  CHECK(t.at("f").to_vector<uint8_t>() == std::vector<uint8_t>{0, 1});
  CHECK(t.at("g").dtype() == kFloat32);
  CHECK(t.at("g").to_vector<float>() == std::vector<float>{1.0f, -2.0f, 0.333251953125f});
  CHECK(t.at("h").dtype() == kBFloat16);  // BF16 loads as bfloat16, bit for bit
  CHECK(t.at("h").to_vector<float>() == std::vector<float>{1.0f, -3.0f});
  CHECK(t.at("z").shape() == Shape{2, 0});
}

TEST_CASE("safetensors half and bfloat16 conversions are exact for every bit pattern", "[safetensors]") {
  for (uint32_t bits = 0; bits < 65536; ++bits) {
    auto h = static_cast<uint16_t>(bits);
    int sign = h >> 15, exp = (h >> 10) & 31, mant = h & 1023;
    float got = detail::half_to_float(h);
    INFO("half bits " << bits);
    if (exp == 31) {
      CHECK((mant == 0 ? std::isinf(got) : std::isnan(got)));
    } else {
      double want = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, exp - 25);
      REQUIRE(static_cast<double>(got) == (sign ? -want : want));
    }
    CHECK(std::signbit(got) == (sign == 1));
    // bfloat16 is the top half of a float32
    float b = detail::bfloat16_to_float(h);
    uint32_t fb = std::bit_cast<uint32_t>(b);
    REQUIRE(fb == bits << 16);
  }
  CHECK(detail::half_to_float(0x7BFF) == 65504.0f);
  CHECK(detail::half_to_float(0x0001) == std::ldexp(1.0f, -24));
}

TEST_CASE("safetensors U8 other than 0 or 1, unsupported and unknown dtypes", "[safetensors]") {
  TempDir dir;
  Bytes data{0, 2, 1};
  std::string err = load_error(dir, make_file(R"({"m":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}})", data));
  CHECK_THAT(err, Catch::Contains("'m'") && Catch::Contains("element 1 is 2"));
  err = load_error(dir, make_file(R"({"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})", data));
  CHECK_THAT(err, Catch::Contains("element 1 is 2"));
  // a dtype of the spec that tapegrad cannot hold: listed, but loading it throws
  std::string path = dir.file("i8.safetensors");
  write_bytes(path, make_file(R"({"m":{"dtype":"I8","shape":[3],"data_offsets":[0,3]}})", data));
  SafetensorsFile f(path);
  CHECK(f.entry("m").dtype == "I8");
  CHECK_THROWS_WITH(f.load("m"), Catch::Contains("dtype I8 is not supported"));
  err = load_error(dir, make_file(R"({"m":{"dtype":"F31","shape":[3],"data_offsets":[0,3]}})", data));
  CHECK_THAT(err, Catch::Contains("unknown dtype \"F31\"") && Catch::Contains("'m'"));
}

TEST_CASE("safetensors: a tensor of more dims than tapegrad holds is listed, and refused on load naming it",
          "[safetensors]") {
  TempDir dir;
  const std::string path = dir.file("deep.safetensors");
  // 9 dims of size 1 (kMaxDims is 8), one F32; beside it a tensor of exactly 8 dims, which loads.
  write_bytes(path, make_file(R"({"deep":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]},)"
                              R"("ok":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1],"data_offsets":[4,8]}})",
                              Bytes(8, 0)));
  SafetensorsFile f(path);
  CHECK(f.entry("deep").shape.size() == 9);
  CHECK_THROWS_WITH(f.load("deep"), Catch::Contains("tensor 'deep': 9 dimensions, tapegrad supports at most 8") &&
                                        Catch::Contains(path));
  CHECK(f.load("ok").dim() == 8);
  CHECK_THROWS_WITH(load_safetensors(path), Catch::Contains("9 dimensions"));
}

TEST_CASE("safetensors rejects every malformed header with a precise error", "[safetensors]") {
  TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  Bytes d8(8, 0), d16(16, 0);
  auto entry = [](const std::string& name, const std::string& body) { return "{\"" + name + "\":" + body + "}"; };
  struct Case {
    const char* what;
    Bytes bytes;
    const char* expected;
  };
  Bytes huge_len;
  append_u64(huge_len, 200'000'000);
  huge_len.resize(64, ' ');
  Bytes long_len;
  append_u64(long_len, 100);
  long_len.insert(long_len.end(), {'{', '}'});
  std::vector<Case> cases = {
      {"empty file", {}, "fewer than the 8-byte header length"},
      {"3 bytes", {1, 2, 3}, "fewer than the 8-byte header length"},
      {"header longer than file", long_len, "larger than the 2 bytes after it"},
      {"absurd header length", huge_len, "exceeds the 100000000-byte limit"},
      {"not JSON", make_file("{nope}", {}), "not valid JSON"},
      {"truncated JSON", make_file(R"({"a":{"dtype":"F32")", {}), "not valid JSON"},
      {"not an object", make_file("[1,2]   ", {}), "does not start with '{'"},
      {"invalid UTF-8", make_file("{\"\xff\":1}", {}), "not valid JSON"},
      {"entry not an object", make_file(entry("a", "[1]"), {}), "tensor 'a': header entry is a JSON array"},
      {"missing dtype", make_file(entry("a", R"({"shape":[2],"data_offsets":[0,8]})"), d8), "'a': header entry has no \"dtype\""},
      {"missing shape", make_file(entry("a", R"({"dtype":"F32","data_offsets":[0,8]})"), d8), "'a': header entry has no \"shape\""},
      {"missing offsets", make_file(entry("a", R"({"dtype":"F32","shape":[2]})"), d8), "has no \"data_offsets\""},
      {"dtype not a string", make_file(entry("a", R"({"dtype":4,"shape":[2],"data_offsets":[0,8]})"), d8), "\"dtype\" must be a string"},
      {"shape not an array", make_file(entry("a", R"({"dtype":"F32","shape":2,"data_offsets":[0,8]})"), d8), "\"shape\" must be an array"},
      {"negative dim", make_file(entry("a", R"({"dtype":"F32","shape":[-2],"data_offsets":[0,8]})"), d8), "must be non-negative, got -2"},
      {"fractional dim", make_file(entry("a", R"({"dtype":"F32","shape":[2.5],"data_offsets":[0,8]})"), d8), "must be integers, got 2.5"},
      {"float dim", make_file(entry("a", R"({"dtype":"F32","shape":[2.0],"data_offsets":[0,8]})"), d8), "must be integers"},
      {"string dim", make_file(entry("a", R"({"dtype":"F32","shape":["2"],"data_offsets":[0,8]})"), d8), "must be integers"},
      {"huge dims", make_file(entry("a", R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]})"), d8), "overflows"},
      {"dim beyond int64", make_file(entry("a", R"({"dtype":"F32","shape":[18446744073709551615],"data_offsets":[0,8]})"), d8), "too large"},
      {"offsets not a pair", make_file(entry("a", R"({"dtype":"F32","shape":[2],"data_offsets":[0,8,9]})"), d8), "must be an array [begin, end]"},
      {"offsets negative", make_file(entry("a", R"({"dtype":"F32","shape":[2],"data_offsets":[-8,0]})"), d8), "non-negative"},
      {"offsets reversed", make_file(entry("a", R"({"dtype":"F32","shape":[2],"data_offsets":[8,0]})"), d8), "[8, 0] are reversed"},
      {"offsets outside", make_file(entry("a", R"({"dtype":"F32","shape":[2],"data_offsets":[8,16]})"), d8), "outside the data section (8 bytes)"},
      {"size mismatch", make_file(entry("a", R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})"), d8), "span 8 bytes but shape [3] of F32 needs 3 × 4 = 12"},
      {"overlap", make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", d16),
       "tensor 'b': data_offsets [4, 12] overlap tensor 'a' [0, 8]"},
      {"gap", make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})", d16),
       "leave a gap of 4 bytes at offset 8"},
      {"trailing data", make_file(entry("a", R"({"dtype":"F32","shape":[2],"data_offsets":[0,8]})"), d16), "has 16 bytes but the tensors cover only 8"},
      {"duplicate name", make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", d16),
       "duplicate key 'a' in the header (two tensors with the same name)"},
      {"duplicate field", make_file(entry("a", R"({"dtype":"F32","dtype":"F64","shape":[2],"data_offsets":[0,8]})"), d8), "duplicate key 'dtype'"},
      {"metadata not object", make_file(R"({"__metadata__":[1]})", {}), "\"__metadata__\" must be an object"},
      {"metadata value not string", make_file(R"({"__metadata__":{"k":1}})", {}), "value of 'k' must be a string, got 1"},
  };
  const std::string deep = std::string(1'000'000, '[') + std::string(1'000'000, ']');  // no recursive dump
  cases.push_back({"deeply nested shape", make_file(entry("a", R"({"dtype":"F32","shape":[)" + deep + R"(],"data_offsets":[0,8]})"), d8),
                   "shape values must be integers, got a JSON array"});
  cases.push_back({"deeply nested metadata", make_file(R"({"__metadata__":{"k":)" + deep + "}}", {}),
                   "value of 'k' must be a string, got a JSON array"});
  for (const Case& c : cases) {
    INFO(c.what);
    std::string err = load_error(dir, c.bytes);
    CHECK_THAT(err, Catch::Contains(c.expected));
    CHECK_THAT(err, Catch::Contains(path));  // every message names the file
  }
}

TEST_CASE("safetensors loads the CS336 test tensors", "[safetensors]") {
  const std::string dir = testing::shared_path("data/cs336");
  SafetensorsFile f(dir + "/test_tensors.safetensors");
  CHECK(f.metadata().count("source") == 1);
  CHECK(f.metadata().at("mask_note") == "inputs.mask is U8 0/1");
  CHECK(f.entry("inputs.mask").dtype == "U8");

  Tensor pos = f.load("inputs.pos_ids");
  CHECK(pos.dtype() == kInt64);
  CHECK(pos.to_vector<int64_t>() == arange(12).to_vector<int64_t>());

  Tensor mask = f.load("inputs.mask");
  CHECK(mask.dtype() == kBool);
  CHECK(mask.shape() == Shape{4, 12, 16});
  CHECK(tensor_bytes(mask) == npy_data(dir + "/npy/inputs/mask.npy"));

  Tensor q = f.load("inputs.q");
  CHECK(q.dtype() == kFloat32);
  CHECK(q.shape() == Shape{4, 12, 64});
  CHECK(tensor_bytes(q) == npy_data(dir + "/npy/inputs/q.npy"));

  Tensor idx = f.load("inputs.in_indices");
  CHECK(idx.shape() == Shape{4, 12});
  CHECK(tensor_bytes(idx) == npy_data(dir + "/npy/inputs/in_indices.npy"));
  for (int64_t v : idx.to_vector<int64_t>()) CHECK((v >= 0 && v < 10000));

  CHECK(f.entry("expected.test_transformer_lm").shape == std::vector<int64_t>{4, 12, 10000});
  auto all = f.load_all();
  CHECK(all.size() == f.entries().size());
  CHECK(all.at("adamw.xs").shape() == Shape{1000, 3});
}

TEST_CASE("safetensors loads the lm_mha_seed0 reference file", "[safetensors]") {
  std::map<std::string, std::string> meta;
  auto t = load_safetensors(testing::shared_path("data/reference/lm_mha_seed0.safetensors"), &meta);
  for (const char* key : {"vocab", "d_model", "layers", "heads", "kv_heads", "d_ff", "theta", "seed", "dtype"}) {
    INFO(key);
    CHECK(meta.count(key) == 1);
  }
  CHECK(meta.at("vocab") == "512");
  CHECK(meta.at("dtype") == "float64");
  const Tensor& emb = t.at("weights.token_embeddings.weight");
  CHECK(emb.dtype() == kFloat64);
  CHECK(emb.shape() == Shape{512, 64});
  double loss = t.at("expected.loss").item();
  CHECK(std::isfinite(loss));
  CHECK(loss > 0);
}

TEST_CASE("safetensors fuzz: truncation, byte flips and garbage give Error or success, never a crash", "[safetensors]") {
  TempDir dir;
  std::string good = dir.file("good.safetensors");
  save_safetensors(good,
                   {{"a", randn({3, 4})}, {"b", arange(5)}, {"c", lt(randn({6}), zeros({6}))},
                    {"d", scalar_tensor(1.0, kFloat64)}, {"e", zeros({0, 2}, kInt32)}},
                   {{"k", "v"}});
  const Bytes bytes = read_bytes(good);
  const std::string path = dir.file("fuzz.safetensors");

  // (a) every truncation is an error (the tensors must tile the data section exactly)
  for (size_t len = 0; len < bytes.size(); ++len) {
    INFO("truncated to " << len);
    write_bytes(path, Bytes(bytes.begin(), bytes.begin() + len));
    CHECK_FALSE(load_survives(path));
  }
  write_bytes(path, bytes);
  CHECK(load_survives(path));

  std::mt19937_64 rng(12345);
  // (b) random byte flips, anywhere (header length, header, data)
  for (int iter = 0; iter < 1500; ++iter) {
    Bytes b = bytes;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < flips; ++i) b[rng() % b.size()] ^= static_cast<unsigned char>(1 + rng() % 255);
    write_bytes(path, b);
    load_survives(path);
  }
  // (c) garbage: fully random, and random header text behind a plausible length
  for (int iter = 0; iter < 300; ++iter) {
    Bytes b(rng() % 200);
    for (auto& c : b) c = static_cast<unsigned char>(rng());
    write_bytes(path, b);
    CHECK_FALSE(load_survives(path));
    const std::string alphabet = "{}[],:\"0123456789-.e dtypeshapedata_offsetsF32I64BOOL__metadata__";
    std::string header = "{";
    size_t n = rng() % 120;
    for (size_t i = 0; i < n; ++i) header += alphabet[rng() % alphabet.size()];
    write_bytes(path, make_file(header, Bytes(rng() % 32, 0)));
    load_survives(path);
  }
}

TEST_CASE("safetensors save is atomic: failures leave nothing behind, overwrite replaces", "[safetensors]") {
  TempDir dir;
  CHECK_THROWS_WITH(load_safetensors(dir.file("absent.safetensors")), Catch::Contains("cannot open"));
  CHECK_THROWS_AS(load_safetensors(dir.path.string()), Error);  // a directory

  // a path in a missing directory: Error, and nothing is created
  std::string missing = dir.file("no_such_dir") + "/x.safetensors";
  CHECK_THROWS_AS(save_safetensors(missing, {{"a", ones({2})}}), Error);
  CHECK_FALSE(fs::exists(dir.file("no_such_dir")));

  std::string path = dir.file("w.safetensors");
  save_safetensors(path, {{"a", ones({2})}});
  save_safetensors(path, {{"b", zeros({3}, kFloat64)}});  // overwrite
  auto t = load_safetensors(path);
  CHECK(t.size() == 1);
  CHECK(t.at("b").to_vector<double>() == std::vector<double>{0, 0, 0});
  const Bytes before = read_bytes(path);

  // invalid inputs throw before anything is written; the old file is intact
  CHECK_THROWS_WITH(save_safetensors(path, {{"__metadata__", ones({1})}}), Catch::Contains("__metadata__"));
  CHECK_THROWS_WITH(save_safetensors(path, {{"u", Tensor()}}), Catch::Contains("'u' is undefined"));
  CHECK_THROWS_AS(save_safetensors(path, {{"bad\xff", ones({1})}}), Error);  // invalid UTF-8
  CHECK(read_bytes(path) == before);

  // a failure after the temp file is written (rename onto a non-empty directory): temp removed
  fs::create_directories(dir.file("occupied") + "/inner");
  CHECK_THROWS_WITH(save_safetensors(dir.file("occupied"), {{"a", ones({2})}}), Catch::Contains("renaming"));
  CHECK(fs::is_directory(dir.file("occupied")));

  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir.path)) {
    INFO(e.path());
    ++files;
  }
  CHECK(files == 2);  // w.safetensors and occupied/, no temp files left
}
