// make_seeds.cpp — writes the fuzz targets' seed corpus (tests/fuzz/corpus/<target>/) with tapegrad's own
// writers: small valid files of every format, so that fuzzing starts from inputs that pass the readers'
// checks. Run it after changing a writer or a format, and commit what it writes:
//   cmake --build BUILD --target fuzz_make_seeds && BUILD/tests/fuzz_make_seeds tests/fuzz/corpus
// Deterministic (fixed seeds), and every file stays small (a few KB).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "autograd/generator.h"
#include "autograd/io/safetensors.h"
#include "autograd/ops.h"
#include "data/bpe_trainer.h"
#include "data/gpt2_files.h"
#include "data/hf_tokenizer_json.h"
#include "data/token_file.h"
#include "lm/hf_llama.h"
#include "lm/llama2c_export.h"
#include "lm/metrics_log.h"
#include "lm/model_io.h"
#include "lm/quantized_model.h"
#include "nn/transformer_lm.h"

using namespace tapegrad;
namespace fs = std::filesystem;

namespace {

fs::path g_out, g_tmp;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void seed(const std::string& target, const std::string& name, const std::string& bytes) {
  const fs::path dir = g_out / target;
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  std::printf("%-20s %-28s %6zu bytes\n", target.c_str(), name.c_str(), bytes.size());
}

template <typename T>
void put(std::string& s, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  s.append(b, sizeof(T));
}

const std::string kText =
    "Once upon a time, there was a little girl named Lily. She liked to play in the park.\n"
    "The cat sat on the mat. It's 42 degrees; don't you think we'll go?\n"
    "caf\xc3\xa9 na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80<|endoftext|>One day, Lily saw a big dog.\n";

data::BpeModel small_bpe(bool special) {
  data::BpeTrainOptions o;
  o.special_tokens = special ? std::vector<std::string>{"<|endoftext|>"} : std::vector<std::string>{};
  o.vocab_size = o.special_tokens.size() + 256 + 24;
  return data::train_bpe(kText, o);
}

nn::TransformerLMConfig tiny_config(bool tied, int64_t kv_heads) {
  nn::TransformerLMConfig c;
  c.vocab_size = 16;
  c.context_length = 8;
  c.d_model = 8;
  c.n_layers = 1;
  c.n_heads = 2;
  c.n_kv_heads = kv_heads;
  c.d_ff = 16;
  c.tie_embeddings = tied;
  return c;
}

void safetensors_seeds() {
  Generator gen(1);
  std::map<std::string, Tensor> t;
  t["f32"] = randn({2, 3}, {}, &gen);
  t["f64"] = randn({3}, {}, &gen).to(kFloat64);
  t["i64"] = arange(0, 4).reshape({2, 2});
  t["i32"] = arange(0, 3).to(DType::Int32);
  t["mask"] = lt(arange(0, 4), 2.0);
  t["scalar"] = full({}, 1.5);
  t["empty"] = zeros({0, 3});
  const std::string p = (g_tmp / "a.safetensors").string();
  save_safetensors(p, t, {{"step", "10"}, {"note", "h\xc3\xa9llo"}});
  seed("safetensors", "all_dtypes.safetensors", read_file(p));
  save_safetensors(p, {{"w", randn({4}, {}, &gen)}});
  seed("safetensors", "one.safetensors", read_file(p));
  save_safetensors(p, {});
  seed("safetensors", "empty.safetensors", read_file(p));
}

void token_file_seeds() {
  const std::string p = (g_tmp / "t.tok").string();
  data::write_token_file(p, std::vector<uint32_t>{1, 2, 3, 4, 299, 0}, 300);
  seed("token_file", "u16.tok", read_file(p));
  data::write_token_file(p, std::vector<uint32_t>{70000, 5, 65536}, 70001);
  seed("token_file", "u32.tok", read_file(p));
  data::write_token_file(p, std::vector<uint32_t>{}, 1);
  seed("token_file", "empty.tok", read_file(p));
}

void tokenizer_seeds() {
  for (const bool special : {false, true}) {
    const data::BpeModel m = small_bpe(special);
    const std::string v = (g_tmp / "vocab.json").string(), mg = (g_tmp / "merges.txt").string();
    data::save_gpt2_files(m, v, mg);
    seed("gpt2_files", special ? "special.vocab_merges" : "plain.vocab_merges", read_file(v) + '\0' + read_file(mg));
    const std::string j = (g_tmp / "tokenizer.json").string();
    data::save_hf_tokenizer_json(m, j);
    seed("hf_tokenizer_json", special ? "special.json" : "plain.json", read_file(j));
  }
  seed("bpe_roundtrip", "story.txt", kText);
  seed("bpe_roundtrip", "bytes.bin", std::string("\x00\xff\xfe a\r\n\t \xc3(\xe2\x82\xac<|endoftext|><|endof", 36));
  seed("bpe_roundtrip", "spaces.txt", "   x  \n\n  y's 'll 123456 !!!?");
}

void checkpoint_seeds() {
  Generator gen(2);
  nn::TransformerLM model(tiny_config(false, 1), &gen);
  const std::string p = (g_tmp / "ck.safetensors").string();
  lm::save_model_checkpoint(model, p, {{"run.source", "make_seeds"}});
  seed("checkpoint", "tiny.safetensors", read_file(p));
}

void run_dir_seeds() {
  lm::MetricRecord train;
  train.step = 10;
  train.tokens = 20480;
  train.wall_s = 3.25;
  train.loss = 5.91;
  train.lr = 3e-4;
  train.grad_norm = 1.7;
  train.tokens_per_s = 6400;
  lm::MetricRecord eval;
  eval.kind = lm::MetricRecord::Kind::Eval;
  eval.step = 20;
  eval.tokens = 40960;
  eval.wall_s = 6.5;
  eval.val_loss = 4.12;
  eval.val_perplexity = 61.6;
  eval.val_tokens = 51200;
  std::string log = lm::to_json_line(train) + "\n" + lm::to_json_line(eval) + "\n";
  train.step = 30;
  log += lm::to_json_line(train) + "\n{\"kind\":\"train\",\"st";  // a torn last line
  seed("run_dir", "metrics_and_names", log + '\0' +
       "step_00000010.safetensors\nstep_9.safetensors\nbest.safetensors\nstep_20.safetensors.tmp.ab12cd\n"
       "step_-4.safetensors\nStep_5.safetensors\nstep_abc.safetensors\n");
}

// int8 models (lm/quantized_model.h): every matrix int8, tied; and untied with float embeddings and lm_head.
void int8_model_seeds() {
  for (const bool tied : {true, false}) {
    Generator gen(6);
    nn::TransformerLM model(tiny_config(tied, tied ? 2 : 1), &gen);
    model.quantize_int8(4, /*keep_embeddings_float=*/!tied);
    const std::string p = (g_tmp / "int8.safetensors").string();
    lm::save_int8_model(model, p, 7, {{"run.source", "make_seeds"}});
    seed("int8_model", tied ? "tied_all_int8.safetensors" : "float_embeddings.safetensors", read_file(p));
  }
}

void hf_seeds() {
  for (const bool tied : {false, true}) {
    Generator gen(3);
    nn::TransformerLM model(tiny_config(tied, tied ? 2 : 1), &gen);
    const fs::path dir = g_tmp / "hf";
    lm::export_hf_llama(model, dir.string());
    const std::string config = read_file(dir / "config.json");
    seed("hf_config", tied ? "tied.config_weights" : "gqa.config_weights", config + '\0' + read_file(dir / "model.safetensors"));
    if (!tied) seed("hf_config", "config_only.json", config);
  }
}

// llama2.c files: versions 0 and 1 written here from the layout in lm/llama2c.h, version 2 (int8 Q8_0) by
// lm::export_llama2c.
void llama2c_seeds() {
  const int32_t dim = 8, hidden = 16, layers = 1, heads = 2, kv = 1, vocab = 12, seq = 4;
  const int32_t kvdim = kv * (dim / heads), D = dim / heads;
  float next = 0;
  auto floats = [&](std::string& s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) put(s, next = next * 0.5f + 0.125f);
  };
  for (const bool shared : {true, false}) {
    std::string v0;
    for (int32_t x : {dim, hidden, layers, heads, kv, shared ? vocab : -vocab, seq}) put(v0, x);
    floats(v0, vocab * dim);                       // token_embedding
    floats(v0, layers * dim);                      // rms_att
    floats(v0, layers * dim * dim);                // wq
    floats(v0, 2 * layers * kvdim * dim);          // wk, wv
    floats(v0, layers * dim * dim);                // wo
    floats(v0, layers * dim);                      // rms_ffn
    floats(v0, 3 * layers * hidden * dim);         // w1, w2, w3
    floats(v0, dim);                               // rms_final
    floats(v0, 2 * seq * D / 2);                   // freq_cis_real, freq_cis_imag
    if (!shared) floats(v0, vocab * dim);          // wcls
    seed("llama2c_model", shared ? "v0_shared.bin" : "v0_separate.bin", v0);

    std::string v1;
    put(v1, uint32_t(0x616b3432));
    put(v1, int32_t(1));
    for (int32_t x : {dim, hidden, layers, heads, kv, vocab, seq}) put(v1, x);
    v1.push_back(char(shared ? 1 : 0));
    v1.resize(256, '\0');
    floats(v1, 2 * layers * dim + dim);            // rms_att, rms_ffn, rms_final
    floats(v1, vocab * dim);                       // token_embedding
    floats(v1, 2 * layers * dim * dim + 2 * layers * kvdim * dim);  // wq, wk, wv, wo
    floats(v1, 3 * layers * hidden * dim);         // w1, w2, w3
    if (!shared) floats(v1, vocab * dim);          // wcls
    seed("llama2c_model", shared ? "v1_shared.bin" : "v1_separate.bin", v1);

    Generator gen(4);
    nn::TransformerLM model(tiny_config(shared, 1), &gen);
    const std::string p = (g_tmp / "v2.bin").string();
    lm::export_llama2c(model, p, {.version = 2, .group = 4});
    seed("llama2c_model", shared ? "v2_shared.bin" : "v2_separate.bin", read_file(p));
  }
  // tokenizer: <unk> <s> </s>, the 256 byte pieces, then a few pieces of "Once upon a time".
  const std::vector<std::string> extra = {" ", "O", "n", "c", "e", "u", "p", "o", "a", "t", "i", "m",
                                          " t", "on", "ce", " a", " O", "im", "me", " up", " upon", " time", " Once"};
  std::vector<std::string> pieces = {"<unk>", "<s>", "</s>"};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    pieces.push_back(name);
  }
  pieces.insert(pieces.end(), extra.begin(), extra.end());
  std::string tok;
  put(tok, uint16_t(pieces.size()));  // the fuzz target's vocabulary size prefix
  size_t max_len = 0;
  for (const auto& p : pieces) max_len = std::max(max_len, p.size());
  put(tok, int32_t(max_len));
  for (size_t i = 0; i < pieces.size(); ++i) {
    put(tok, i < 259 ? 0.0f : -float(i) + float(pieces[i].size()) * 10.0f);
    put(tok, int32_t(pieces[i].size()));
    tok += pieces[i];
  }
  seed("llama2c_tokenizer", "tok282.bin", tok);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR (e.g. tests/fuzz/corpus)\n", argv[0]);
    return 2;
  }
  g_out = argv[1];
  g_tmp = fs::temp_directory_path() / ("tapegrad_make_seeds_" + std::to_string(::getpid()));
  fs::create_directories(g_tmp);
  safetensors_seeds();
  token_file_seeds();
  tokenizer_seeds();
  checkpoint_seeds();
  run_dir_seeds();
  hf_seeds();
  llama2c_seeds();
  int8_model_seeds();
  fs::remove_all(g_tmp);
  return 0;
}
