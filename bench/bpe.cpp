// bench/bpe.cpp — times BPE training and encoding on the shared corpora:
//   bench_bpe [shared_dir] [threads]
// shared_dir defaults to ../shared (run from the repository root). Prints one line per measure.
#include <chrono>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "data/bpe_trainer.h"
#include "data/gpt2_files.h"
#include "data/tokenizer.h"
#include "kernels/error.h"

using namespace tapegrad::data;

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TG_CHECK(in.good(), "bench_bpe: cannot open {}", path);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

template <class F>
double best_seconds(int repeats, F&& f) {
  double best = 1e300;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string shared = argc > 1 ? argv[1] : "../shared";
  const int threads = argc > 2 ? std::stoi(argv[2]) : 2;
  const std::string cs336 = shared + "/data/cs336/tests/fixtures/";
  const std::string corpus_en = read_all(cs336 + "corpus.en");
  const std::string stories = read_all(shared + "/data/corpora/tinystories_train_head2MiB.txt");

  BpeTrainOptions options;
  options.special_tokens = {"<|endoftext|>"};
  options.vocab_size = 500;
  fmt::print("train_bpe corpus.en ({} B) vocab 500, 1 thread: {:.4f} s (best of 5)\n", corpus_en.size(),
             best_seconds(5, [&] { (void)train_bpe(corpus_en, options); }));
  options.vocab_size = 5000;
  for (int t : {1, threads}) {
    options.num_threads = t;
    fmt::print("train_bpe tinystories 2 MiB vocab 5000, {} thread(s): {:.3f} s\n", t,
               best_seconds(1, [&] { (void)train_bpe(stories, options); }));
  }

  BpeModel gpt2 = load_gpt2_files(cs336 + "gpt2_vocab.json", cs336 + "gpt2_merges.txt", {"<|endoftext|>"});
  Tokenizer tokenizer(std::move(gpt2));
  const double cold = best_seconds(1, [&] { (void)Tokenizer(tokenizer.model()).encode(stories); });
  const double warm = best_seconds(3, [&] { (void)tokenizer.encode(stories); });
  const double parallel = best_seconds(3, [&] { (void)tokenizer.encode_parallel(stories, threads); });
  const double mb = double(stories.size()) / 1e6;
  fmt::print("GPT-2 encode tinystories 2 MiB: cold cache {:.1f} MB/s, warm cache {:.1f} MB/s, encode_parallel({}) {:.1f} MB/s\n",
             mb / cold, mb / warm, threads, mb / parallel);
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "bench_bpe: {}\n", e.what());
  return 1;
}
