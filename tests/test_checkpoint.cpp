// test_checkpoint.cpp — training checkpoints (optim/checkpoint.h): save → load → continue gives
// bitwise the losses of an uninterrupted run (tiny TransformerLM, AdamW with two groups + cosine
// schedule + clipping, and SGD with momentum; batches from get_batch with a seeded Generator);
// the config map round trip; refusals (other config, corrupt or truncated file, other optimizer
// kind or hyperparameters, a model that refuses its state) leave the model, the optimizer and the
// generator untouched; a save that fails midway leaves the previous checkpoint intact.
#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/io/safetensors.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "data/batch.h"
#include "kernels/error.h"
#include "nn/loss.h"
#include "nn/transformer_lm.h"
#include "optim/adamw.h"
#include "optim/checkpoint.h"
#include "optim/clip_grad.h"
#include "optim/lr_schedule.h"
#include "optim/sgd.h"

using namespace tapegrad;
using namespace tapegrad::nn;
using namespace tapegrad::optim;
namespace fs = std::filesystem;

namespace {

TransformerLMConfig tiny_lm() {
  TransformerLMConfig c;
  c.vocab_size = 37;
  c.context_length = 12;
  c.d_model = 16;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;  // grouped-query attention
  c.d_ff = 24;
  return c;
}

// A fixed token stream (random ids), shared by every run.
const std::vector<uint32_t>& tokens() {
  static const std::vector<uint32_t> t = [] {
    Generator g(5);
    std::vector<uint32_t> v(400);
    for (auto& x : v) x = static_cast<uint32_t>(g.below(37));
    return v;
  }();
  return t;
}

// A fresh directory under /tmp, removed with everything in it at the end of the test.
class TempDir {
 public:
  TempDir() : path_(fs::temp_directory_path() / fmt::format("tapegrad_ckpt_{}_{}", ::getpid(), counter()++)) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(path_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  fs::path path_;
};

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

enum class Opt { AdamW, AdamWOtherBetas, AdamWOneGroup, SGD };

// Model + optimizer + batch generator: one training run.
struct Trainer {
  Trainer(const TransformerLMConfig& c, uint64_t init_seed, uint64_t batch_seed, Opt kind = Opt::AdamW)
      : lm(make_lm(c, init_seed)), opt(make_opt(*lm, kind)), gen(batch_seed) {}

  static std::unique_ptr<TransformerLM> make_lm(const TransformerLMConfig& c, uint64_t seed) {
    Generator g(seed);
    return std::make_unique<TransformerLM>(c, &g);
  }
  static std::unique_ptr<Optimizer> make_opt(const TransformerLM& lm, Opt kind) {
    std::vector<Tensor> matrices, gains;  // weight decay on matrices only (two groups)
    for (const auto& [name, p] : lm.named_parameters()) (p.dim() >= 2 ? matrices : gains).push_back(p);
    std::vector<ParamGroup> groups{ParamGroup{matrices}, ParamGroup{gains, std::nullopt, 0.0}};
    switch (kind) {
      case Opt::AdamW: return std::make_unique<AdamW>(groups, AdamWOptions(1e-2).betas(0.9, 0.95).weight_decay(0.1));
      case Opt::AdamWOtherBetas: return std::make_unique<AdamW>(groups, AdamWOptions(1e-2).betas(0.9, 0.99).weight_decay(0.1));
      case Opt::AdamWOneGroup: return std::make_unique<AdamW>(lm.parameters(), AdamWOptions(1e-2).betas(0.9, 0.95));
      case Opt::SGD: return std::make_unique<SGD>(groups, SGDOptions(0.1).momentum(0.9).weight_decay(1e-3));
    }
    return nullptr;
  }

  // One training step t (0-based): cosine lr, a random batch, forward, backward, clip, update.
  double step(int64_t t) {
    opt->set_lr(cosine_lr(t, 1e-2, 1e-3, 3, 20));
    data::Batch b = data::get_batch(std::span<const uint32_t>(tokens()), 3, 12, gen);
    opt->zero_grad();
    Tensor loss = cross_entropy(lm->forward(b.inputs), b.targets);
    loss.backward();
    clip_grad_norm(opt->params(), 0.5);
    opt->step();
    return loss.item<double>();
  }

  void save(const std::string& path, int64_t step) const {
    save_checkpoint(path, lm->state_dict(), *opt, step, gen, lm->config.to_config_map());
  }
  int64_t load(const std::string& path) {
    return load_checkpoint(
        path, [this](const TensorMap& sd) { lm->load_state_dict(sd); }, *opt, gen, lm->config.to_config_map());
  }

  std::unique_ptr<TransformerLM> lm;
  std::unique_ptr<Optimizer> opt;
  Generator gen;
};

// Everything a load could modify, as plain values (exact: float32/float64 → double is exact).
struct Snapshot {
  std::vector<std::pair<std::string, std::vector<double>>> model, optim;
  std::vector<double> lr, weight_decay;
  Generator::State rng;
  bool operator==(const Snapshot&) const = default;
};

Snapshot snapshot(const Trainer& t) {
  Snapshot s;
  for (const auto& [name, v] : t.lm->state_dict()) s.model.emplace_back(name, v.to_vector<double>());
  for (const auto& [name, v] : t.opt->state()) s.optim.emplace_back(name, v.to_vector<double>());
  for (size_t g = 0; g < t.opt->num_groups(); ++g) {
    s.lr.push_back(t.opt->lr(g));
    s.weight_decay.push_back(t.opt->weight_decay(g));
  }
  s.rng = t.gen.state();
  return s;
}

bool same_bits(double a, double b) { return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b); }

// While alive, files this process writes cannot grow past `bytes` (write() fails with EFBIG).
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_) == 0);
    rlimit r = old_;
    r.rlim_cur = bytes;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &r) == 0);
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of a signal
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    std::signal(SIGXFSZ, old_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit old_{};
  void (*old_handler_)(int) = nullptr;
};

}  // namespace

TEST_CASE("checkpoint: save, load and continue gives bitwise the losses of an uninterrupted run", "[checkpoint]") {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  const int64_t n = 10;
  for (Opt kind : {Opt::AdamW, Opt::SGD}) {
    Trainer reference(tiny_lm(), 1, 2, kind);
    std::vector<double> expected;
    for (int64_t t = 0; t < n; ++t) expected.push_back(reference.step(t));

    for (int64_t k : {int64_t(0), int64_t(4)}) {  // 0: before any optimizer state exists
      INFO((kind == Opt::SGD ? "SGD" : "AdamW") << ", checkpoint at step " << k);
      Trainer first(tiny_lm(), 1, 2, kind);
      for (int64_t t = 0; t < k; ++t) REQUIRE(same_bits(first.step(t), expected[t]));
      first.save(path, k);

      // Another initialisation and another batch seed: everything must come from the file.
      Trainer resumed(tiny_lm(), 101, 202, kind);
      CHECK_FALSE(snapshot(resumed) == snapshot(first));
      CHECK(resumed.load(path) == k);
      CHECK(snapshot(resumed) == snapshot(first));
      for (int64_t t = k; t < n; ++t) {
        const double loss = resumed.step(t);
        INFO("step " << t << ": " << fmt::format("{} vs {}", loss, expected[t]));
        CHECK(same_bits(loss, expected[t]));
      }
      CHECK(snapshot(resumed) == snapshot(reference));
    }
  }
}

TEST_CASE("checkpoint: the generator state is exact, including the Box-Muller spare", "[checkpoint]") {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  Trainer a(tiny_lm(), 1, 2);
  a.gen.next_u64();
  a.gen.normal();  // leaves a spare normal
  REQUIRE(a.gen.state().has_spare);
  a.save(path, 0);
  Trainer b(tiny_lm(), 1, 3);
  b.load(path);
  CHECK(b.gen.state() == a.gen.state());
  CHECK(same_bits(b.gen.normal(), a.gen.normal()));
  CHECK(b.gen.next_u64() == a.gen.next_u64());

  const Checkpoint ck = read_checkpoint(path);
  CHECK(ck.step == 0);
  CHECK(ck.model_dtype == "float32");
  CHECK(ck.optimizer.kind == "AdamW");
  CHECK(ck.optimizer.fixed.at("beta2") == 0.95);
  CHECK(ck.optimizer.group_sizes.size() == 2);
  CHECK(ck.config == a.lm->config.to_config_map());
  CHECK(ck.model_state.size() == a.lm->state_dict().size());
  CHECK(TransformerLMConfig::from_config_map(ck.config).to_config_map() == ck.config);
}

TEST_CASE("TransformerLMConfig to_config_map and from_config_map round-trip exactly", "[checkpoint]") {
  TransformerLMConfig c = tiny_lm();
  c.rope_theta = 500000.123456789;
  c.eps = 1.0 / 3.0 * 1e-6;
  c.tie_embeddings = true;
  c.dtype = kFloat64;
  const auto m = c.to_config_map();
  CHECK(m.at("d_model") == "16");
  CHECK(m.at("tie_embeddings") == "true");
  CHECK(m.at("dtype") == "float64");
  const TransformerLMConfig r = TransformerLMConfig::from_config_map(m);
  CHECK(r.vocab_size == c.vocab_size);
  CHECK(r.context_length == c.context_length);
  CHECK(r.d_model == c.d_model);
  CHECK(r.n_layers == c.n_layers);
  CHECK(r.n_heads == c.n_heads);
  CHECK(r.n_kv_heads == c.n_kv_heads);
  CHECK(r.d_ff == c.d_ff);
  CHECK(same_bits(r.rope_theta, c.rope_theta));
  CHECK(same_bits(r.eps, c.eps));
  CHECK(r.tie_embeddings);
  CHECK(r.dtype == kFloat64);
  CHECK(r.to_config_map() == m);

  auto bad = m;
  bad.erase("vocab_size");
  bad["d_model"] = "16x";
  bad["tie_embeddings"] = "yes";
  bad["colour"] = "blue";
  CHECK_THROWS_WITH(TransformerLMConfig::from_config_map(bad),
                    Catch::Contains("'vocab_size' is missing") && Catch::Contains("'d_model' = '16x'") &&
                        Catch::Contains("'tie_embeddings' = 'yes'") && Catch::Contains("unknown key 'colour'"));
}

TEST_CASE("checkpoint: a checkpoint of another config is refused, naming every difference", "[checkpoint]") {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  Trainer a(tiny_lm(), 1, 2);
  a.step(0);
  a.save(path, 1);

  TransformerLMConfig other = tiny_lm();
  other.d_model = 32;
  other.n_layers = 3;
  Trainer b(other, 3, 4);
  b.step(0);
  const Snapshot before = snapshot(b);
  CHECK_THROWS_WITH(b.load(path), Catch::Contains("checkpoint config differs: d_model 16 (file) vs 32 (expected)") &&
                                      Catch::Contains("n_layers 2 (file) vs 3 (expected)") &&
                                      !Catch::Contains("vocab_size"));
  CHECK(snapshot(b) == before);

  // Keys present on one side only are listed too.
  auto expected = a.lm->config.to_config_map();
  expected.erase("eps");
  expected["dropout"] = "0.1";
  CHECK(config_differences(a.lm->config.to_config_map(), expected) ==
        "checkpoint config differs: dropout missing in the file (expected 0.1), eps 1e-05 (file) is not expected");
}

TEST_CASE("checkpoint: an optimizer of another kind or with other hyperparameters is refused", "[checkpoint]") {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  Trainer a(tiny_lm(), 1, 2);
  a.step(0);
  a.save(path, 1);

  Trainer sgd(tiny_lm(), 3, 4, Opt::SGD);
  sgd.step(0);
  Snapshot before = snapshot(sgd);
  CHECK_THROWS_WITH(sgd.load(path), Catch::Contains("holds AdamW optimizer state but the optimizer is SGD"));
  CHECK(snapshot(sgd) == before);

  Trainer betas(tiny_lm(), 3, 4, Opt::AdamWOtherBetas);
  betas.step(0);
  before = snapshot(betas);
  CHECK_THROWS_WITH(betas.load(path), Catch::Contains("AdamW hyperparameters differ: beta2 0.95 (file) vs 0.99 (optimizer)"));
  CHECK(snapshot(betas) == before);

  Trainer one_group(tiny_lm(), 3, 4, Opt::AdamWOneGroup);
  one_group.step(0);
  before = snapshot(one_group);
  CHECK_THROWS_WITH(one_group.load(path), Catch::Contains("parameter groups of sizes"));
  CHECK(snapshot(one_group) == before);
}

TEST_CASE("checkpoint: a model that refuses its state leaves the optimizer and generator untouched", "[checkpoint]") {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  Trainer a(tiny_lm(), 1, 2);
  a.step(0);
  // A checkpoint whose model state lacks one tensor: the strict load_state_dict refuses it, after
  // the optimizer state (which is valid) has been loaded — so it must be rolled back.
  TensorMap partial = a.lm->state_dict();
  partial.erase("ln_final.weight");
  save_checkpoint(path, partial, *a.opt, 1, a.gen, a.lm->config.to_config_map());

  Trainer b(tiny_lm(), 3, 4);
  b.step(0);
  b.step(1);
  const Snapshot before = snapshot(b);
  CHECK_THROWS_WITH(b.load(path), Catch::Contains("missing: ln_final.weight"));
  CHECK(snapshot(b) == before);

  // Any exception from the loader, not only tapegrad::Error.
  a.save(path, 1);
  CHECK_THROWS_AS(load_checkpoint(
                      path, [](const TensorMap&) { throw std::runtime_error("boom"); }, *b.opt, b.gen,
                      b.lm->config.to_config_map()),
                  std::runtime_error);
  CHECK(snapshot(b) == before);
}

TEST_CASE("checkpoint: a corrupt or truncated file is refused and nothing is modified", "[checkpoint]") {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  const std::string bad = dir.file("bad.safetensors");
  Trainer a(tiny_lm(), 1, 2);
  a.step(0);
  a.step(1);
  a.save(path, 2);
  const std::string bytes = read_bytes(path);
  REQUIRE(bytes.size() > 1000);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | static_cast<unsigned char>(bytes[i]);
  const size_t data_start = 8 + header_len;
  REQUIRE(data_start < bytes.size());

  Trainer b(tiny_lm(), 3, 4);
  b.step(0);
  const Snapshot before = snapshot(b);

  SECTION("truncated") {
    for (size_t len : {size_t(0), size_t(1), size_t(7), size_t(8), size_t(9), size_t(100), data_start - 1, data_start,
                       data_start + 1, bytes.size() / 2, bytes.size() - 4, bytes.size() - 1}) {
      INFO("truncated to " << len << " of " << bytes.size() << " bytes");
      write_bytes(bad, bytes.substr(0, len));
      CHECK_THROWS_AS(b.load(bad), Error);
    }
    CHECK(snapshot(b) == before);
  }
  SECTION("one flipped bit anywhere") {
    // The length, ~300 bytes spread over the header and ~100 over the data (the checksum catches
    // any change in the data; the header's own checks or the checksum catch the rest).
    std::vector<size_t> positions;
    for (size_t i = 0; i < 16; ++i) positions.push_back(i);
    for (size_t i = 16; i < data_start; i += std::max<size_t>(1, data_start / 300)) positions.push_back(i);
    for (size_t i = data_start; i < bytes.size(); i += std::max<size_t>(1, (bytes.size() - data_start) / 100))
      positions.push_back(i);
    positions.push_back(bytes.size() - 1);
    std::vector<size_t> accepted;
    for (size_t i : positions) {
      std::string damaged = bytes;
      damaged[i] = static_cast<char>(damaged[i] ^ 0x01);
      write_bytes(bad, damaged);
      try {
        b.load(bad);
        accepted.push_back(i);
      } catch (const Error&) {
      }
    }
    INFO(fmt::format("{} damaged files loaded; first damaged byte: {}", accepted.size(),
                     accepted.empty() ? std::string("-") : std::to_string(accepted[0])));
    CHECK(accepted.empty());
    CHECK(snapshot(b) == before);
    write_bytes(bad, bytes.substr(0, data_start) + std::string(bytes.size() - data_start, '\0'));
    CHECK_THROWS_WITH(b.load(bad), Catch::Contains("is corrupt: its checksum is"));
    CHECK(snapshot(b) == before);
  }
  SECTION("not a checkpoint, or a missing file") {
    CHECK_THROWS_WITH(b.load(dir.file("absent.safetensors")), Catch::Contains("cannot be read"));
    write_bytes(bad, "this is not a checkpoint at all, just some text");
    CHECK_THROWS_AS(b.load(bad), Error);
    save_safetensors(bad, {{"w", zeros({2})}});
    CHECK_THROWS_WITH(b.load(bad), Catch::Contains("not a tapegrad checkpoint"));
    // A newer format version (and: editing the metadata without a valid checksum).
    std::map<std::string, std::string> meta;
    const auto tensors = load_safetensors(path, &meta);
    auto newer = meta;
    newer["format_version"] = "2";
    save_safetensors(bad, tensors, newer);
    CHECK_THROWS_WITH(b.load(bad), Catch::Contains("format version 2 is not supported"));
    auto edited = meta;
    edited["step"] = "3";
    save_safetensors(bad, tensors, edited);
    CHECK_THROWS_WITH(b.load(bad), Catch::Contains("is corrupt"));
    CHECK(snapshot(b) == before);
  }
  // The original is still fine.
  CHECK(b.load(path) == 2);
  CHECK(snapshot(b) == snapshot(a));
}

TEST_CASE("checkpoint: a save that fails midway leaves the previous checkpoint intact", "[checkpoint]") {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  Trainer a(tiny_lm(), 1, 2);
  a.step(0);
  a.save(path, 1);
  const Snapshot at_1 = snapshot(a);
  const std::string saved = read_bytes(path);
  a.step(1);

  {  // The disk "fills up" after 4 KiB: write() fails with EFBIG partway through the file.
    FileSizeLimit limit(4096);
    CHECK_THROWS_WITH(a.save(path, 2), Catch::Contains("writing checkpoint") && Catch::Contains("failed"));
  }
  CHECK(read_bytes(path) == saved);
  CHECK(dir.listing() == std::vector<std::string>{"ckpt.safetensors"});  // the temp file is gone

  // The directory is not writable (meaningless as root, which may write anyway).
  if (::geteuid() != 0) {
    fs::permissions(dir.path(), fs::perms::owner_read | fs::perms::owner_exec);
    CHECK_THROWS_WITH(a.save(path, 2), Catch::Contains("cannot create a temporary file"));
    fs::permissions(dir.path(), fs::perms::owner_all);
    CHECK(read_bytes(path) == saved);
  }

  // A bad model state is refused before anything is written.
  TensorMap with_undefined = a.lm->state_dict();
  with_undefined["extra"] = Tensor();
  CHECK_THROWS_WITH(save_checkpoint(path, with_undefined, *a.opt, 2, a.gen, {}), Catch::Contains("undefined"));
  CHECK(read_bytes(path) == saved);

  // A leftover temp file (a crash mid-write) does not disturb loading the checkpoint itself.
  write_bytes(path + ".tmp.abc123", saved.substr(0, 100));
  Trainer b(tiny_lm(), 3, 4);
  CHECK(b.load(path) == 1);
  CHECK(snapshot(b) == at_1);

  // And a successful save replaces the file.
  a.save(path, 2);
  CHECK(read_checkpoint(path).step == 2);
}

TEST_CASE("checkpoint: extra metadata round-trips, is under the checksum, and is never compared on load", "[checkpoint]") {
  TempDir dir;
  const std::string path = dir.file("ckpt.safetensors");
  const std::string bad = dir.file("bad.safetensors");
  Trainer a(tiny_lm(), 1, 2);
  a.step(0);
  // Keys that look like the file's own metadata ("step", "config.x") must stay the caller's.
  const ConfigMap extra = {{"tokens", "12345"},          {"marker", "EXTRAVALUE_qwerty"}, {"empty", ""},
                           {"note", "h\xc3\xa9llo \"q\" {j} \\n"}, {"step", "999"}, {"config.d_model", "7"}};
  save_checkpoint(path, a.lm->state_dict(), *a.opt, 1, a.gen, a.lm->config.to_config_map(), extra);
  const Checkpoint ck = read_checkpoint(path);
  CHECK(ck.extra == extra);
  CHECK(ck.step == 1);
  CHECK(ck.config == a.lm->config.to_config_map());
  // Without extra entries there are none.
  save_checkpoint(bad, a.lm->state_dict(), *a.opt, 1, a.gen, a.lm->config.to_config_map());
  CHECK(read_checkpoint(bad).extra.empty());

  // One changed byte of an extra value, or of an extra key, is refused as corrupt.
  const std::string bytes = read_bytes(path);
  for (const std::string& what : {std::string("EXTRAVALUE_qwerty"), std::string("extra.marker")}) {
    INFO(what);
    const size_t at = bytes.find(what);
    REQUIRE(at != std::string::npos);
    REQUIRE(bytes.find(what, at + 1) == std::string::npos);
    std::string damaged = bytes;
    damaged[at + what.size() - 1] = static_cast<char>(damaged[at + what.size() - 1] ^ 0x01);  // 'y'→'x', 'r'→'s'
    write_bytes(bad, damaged);
    CHECK_THROWS_WITH(read_checkpoint(bad), Catch::Contains("is corrupt"));
    Trainer b(tiny_lm(), 3, 4);
    const Snapshot before = snapshot(b);
    CHECK_THROWS_WITH(b.load(bad), Catch::Contains("is corrupt"));
    CHECK(snapshot(b) == before);
  }

  // Another extra (or none expected at all) does not stop a load: extra is never compared.
  save_checkpoint(path, a.lm->state_dict(), *a.opt, 1, a.gen, a.lm->config.to_config_map(), {{"tokens", "1"}});
  Trainer b(tiny_lm(), 3, 4);
  CHECK(b.load(path) == 1);
  CHECK(snapshot(b) == snapshot(a));

  // The overload that loads a checkpoint already read: it does not read the file again.
  const Checkpoint read = read_checkpoint(path);
  CHECK(read.extra == ConfigMap{{"tokens", "1"}});
  fs::remove(path);
  Trainer c(tiny_lm(), 5, 6);
  CHECK(load_checkpoint(
            read, path, [&](const TensorMap& sd) { c.lm->load_state_dict(sd); }, *c.opt, c.gen,
            c.lm->config.to_config_map()) == 1);
  CHECK(snapshot(c) == snapshot(a));
}

// A writer that edits the metadata or tensors and recomputes the checksum (as a buggy or hostile tool
// could): the checksum no longer protects, so every value must be checked on its own.
TEST_CASE("checkpoint: metadata values under a valid checksum are checked, naming the key", "[checkpoint]") {
  TempDir dir;
  const std::string good = dir.file("good.safetensors"), bad = dir.file("bad.safetensors");
  Trainer a(tiny_lm(), 1, 2);
  a.step(0);
  a.save(good, 1);
  std::map<std::string, std::string> meta0;
  const TensorMap tensors0 = load_safetensors(good, &meta0);

  using Edit = std::function<void(std::map<std::string, std::string>&, TensorMap&)>;
  auto rewrite = [&](const Edit& edit) {
    auto meta = meta0;
    TensorMap tensors = tensors0;
    edit(meta, tensors);
    meta.erase("checksum");
    meta["checksum"] = checkpoint_checksum(meta, tensors);
    save_safetensors(bad, tensors, meta);
  };
  auto set = [](const std::string& key, const std::string& value) {
    return Edit([=](auto& meta, auto&) { meta[key] = value; });
  };
  auto erase = [](const std::string& key) { return Edit([=](auto& meta, auto&) { meta.erase(key); }); };
  struct Case {
    std::string what;
    Edit edit;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"no step", erase("step"), "the metadata has no 'step'"},
      {"step not a number", set("step", "12x"), "metadata 'step' = '12x' is not a valid number"},
      {"negative step", set("step", "-3"), "step -3 is negative"},
      {"no rng word", erase("rng.s2"), "the metadata has no 'rng.s2'"},
      {"rng word not a number", set("rng.s0", "-1"), "metadata 'rng.s0' = '-1' is not a valid number"},
      {"has_spare not 0/1", set("rng.has_spare", "2"), "metadata 'rng.has_spare' = '2' is not 0 or 1"},
      {"spare not a number", set("rng.spare", "nan?"), "metadata 'rng.spare' = 'nan?' is not a valid number"},
      {"empty optimizer kind", set("optim.kind", ""), "metadata 'optim.kind' is empty"},
      {"zero groups", set("optim.groups", "0"), "'optim.groups' = 0 is out of range"},
      {"huge group count", set("optim.groups", "99999999999"), "'optim.groups' = 99999999999 is out of range"},
      {"missing group", set("optim.groups", "3"), "the metadata has no 'optim.group.2.params'"},
      {"negative lr", set("optim.group.0.lr", "-0.5"), "group 0 has an invalid lr, weight decay or parameter count"},
      {"infinite weight decay", set("optim.group.1.weight_decay", "inf"),
       "group 1 has an invalid lr, weight decay or parameter count"},
      {"fixed hyperparameter not a number", set("optim.fixed.beta1", "0.9.1"),
       "metadata 'optim.fixed.beta1' = '0.9.1' is not a valid number"},
      {"unexpected tensor", Edit([](auto&, TensorMap& t) { t.emplace("junk", zeros({2})); }),
       "unexpected tensor 'junk' (names start with 'model.' or 'optim.')"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    rewrite(c.edit);
    CHECK_THROWS_WITH(read_checkpoint(bad), Catch::Contains(c.message) && Catch::Contains(bad));
    Trainer b(tiny_lm(), 3, 4);
    const Snapshot before = snapshot(b);
    CHECK_THROWS_AS(b.load(bad), Error);
    CHECK(snapshot(b) == before);
  }

  // Read fine, refused by load (and nothing modified): a fixed hyperparameter missing, AdamW's step
  // state not an integer >= 1, a state buffer the optimizer does not know.
  std::string step_tensor;
  for (const auto& [name, t] : tensors0)
    if (name.ends_with(".step")) step_tensor = name;
  REQUIRE(!step_tensor.empty());
  const std::vector<Case> load_cases = {
      {"no beta1", erase("optim.fixed.beta1"), "the checkpoint has no AdamW hyperparameter 'beta1'"},
      {"step 0", Edit([&](auto&, TensorMap& t) { t.at(step_tensor) = scalar_tensor(0.0, kFloat64); }),
       "must be an integer >= 1, but is 0"},
      {"step 2.5", Edit([&](auto&, TensorMap& t) { t.at(step_tensor) = scalar_tensor(2.5, kFloat64); }),
       "must be an integer >= 1, but is 2.5"},
      {"step float32", Edit([&](auto&, TensorMap& t) { t.at(step_tensor) = scalar_tensor(1.0, kFloat32); }),
       "must be a 0-d float64 tensor"},
      {"unknown buffer", Edit([&](auto&, TensorMap& t) { t.emplace("optim.0.momentum", zeros({2})); }),
       "unknown state buffer"},
  };
  for (const Case& c : load_cases) {
    INFO(c.what);
    rewrite(c.edit);
    CHECK_NOTHROW(read_checkpoint(bad));
    Trainer b(tiny_lm(), 3, 4);
    const Snapshot before = snapshot(b);
    CHECK_THROWS_WITH(b.load(bad), Catch::Contains(c.message) && Catch::Contains(bad));
    CHECK(snapshot(b) == before);
  }
  // The unedited rewrite loads (the writer above is right).
  rewrite([](auto&, auto&) {});
  Trainer b(tiny_lm(), 3, 4);
  CHECK(b.load(bad) == 1);
  CHECK(snapshot(b) == snapshot(a));
}
