// bench/bpe.cpp — the BPE benchmark (tokenizer issue): times tapegrad::data BPE training and encoding.
// Each subcommand is one measurement configuration, meant to run as its own process (bench/run.sh bpe
// does that) so that peak RSS (getrusage ru_maxrss) belongs to that configuration alone. Each prints
// one table row and one line `JSON {...}` that run.sh gathers into its single `RESULT` line.
//
//   bench_bpe small  <text> <vocab> <threads> [reps=5]  train_bpe on an in-memory text: median wall time
//   bench_bpe train  <file> <vocab> <threads>           train_bpe_file (streams the file in 8 MiB blocks):
//       wall time, peak RSS (taken right after training), then — after the RSS is read — a
//       separate count_pretokens pass on the same text gives pretokenization MB/s, and
//       merges/s = merges / (wall − pretokenization time). If the text allows fewer merges than asked,
//       it trains again to the largest possible vocab and reports the vocab reached.
//   bench_bpe encode <vocab.json> <merges.txt> <text> <threads>  GPT-2 vocab: cold = fresh Tokenizer,
//       warm = second pass on the same one (median of 3 such rounds); 1 thread uses encode(), >1 uses encode_parallel() (whose
//       per-thread caches persist between calls, so its warm pass is warm). Also CPU time per pass (getrusage, all
//       threads): MB per CPU-second, the per-core speed with the waiting for a shared CPU left out.
//   Optional last argument for train/small: target seconds; for encode: target MB/s per core.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "data/bpe_trainer.h"
#include "data/gpt2_files.h"
#include "data/pretoken_counts.h"
#include "data/tokenizer.h"
#include "kernels/error.h"

using namespace tapegrad::data;

namespace {

const std::vector<std::string> kSpecial = {"<|endoftext|>"};

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TG_CHECK(in.good(), "bench_bpe: cannot open {}", path);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double cpu_s() {  // user + system time of all threads of this process
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + 1e-6 * double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_maxrss) / 1024.0;  // Linux: KiB
}

std::string base_name(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// "train_bpe: only N merges are possible ..." -> N, or -1.
long possible_merges(const std::string& message) {
  const auto at = message.find("only ");
  if (at == std::string::npos) return -1;
  try {
    return std::stol(message.substr(at + 5));
  } catch (...) {
    return -1;
  }
}

const char* verdict(bool met) { return met ? "met" : "MISSED"; }

int cmd_small(int argc, char** argv) {
  TG_CHECK(argc >= 5, "usage: bench_bpe small <text> <vocab> <threads> [reps] [target_s]");
  const std::string text = read_all(argv[2]);
  BpeTrainOptions options;
  options.special_tokens = kSpecial;
  options.vocab_size = std::stoul(argv[3]);
  options.num_threads = std::stoi(argv[4]);
  const int reps = argc > 5 ? std::stoi(argv[5]) : 5;
  const double target = argc > 6 ? std::stod(argv[6]) : 0.1;
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now_s();
    (void)train_bpe(text, options);
    times.push_back(now_s() - t0);
  }
  std::sort(times.begin(), times.end());
  const double median = times[times.size() / 2];
  fmt::print("| train {} ({:.2f} MB) vocab {} | {} | {:.4f} s (median of {}) | | | {:.0f} | < {} s: {} |\n",
             base_name(argv[2]), text.size() / 1e6, options.vocab_size, options.num_threads, median, reps,
             peak_rss_mb(), target, verdict(median < target));
  fmt::print("JSON {{\"measure\":\"train_small\",\"file\":\"{}\",\"bytes\":{},\"vocab\":{},\"threads\":{},"
             "\"median_s\":{:.5f},\"reps\":{},\"target_s\":{},\"target_met\":{}}}\n",
             base_name(argv[2]), text.size(), options.vocab_size, options.num_threads, median, reps, target,
             median < target);
  return 0;
}

int cmd_train(int argc, char** argv) {
  TG_CHECK(argc >= 5, "usage: bench_bpe train <file> <vocab> <threads> [target_s]");
  const std::string path = argv[2];
  BpeTrainOptions options;
  options.special_tokens = kSpecial;
  options.vocab_size = std::stoul(argv[3]);
  options.num_threads = std::stoi(argv[4]);
  const double target = argc > 5 ? std::stod(argv[5]) : 0.0;
  const size_t asked = options.vocab_size;
  double t0 = now_s();
  BpeModel model;
  try {
    model = train_bpe_file(path, options);
  } catch (const tapegrad::Error& e) {
    const long possible = possible_merges(e.what());
    if (possible < 0) throw;
    options.vocab_size = kSpecial.size() + 256 + size_t(possible);
    fmt::print(stderr, "bench_bpe: vocab {} not reachable ({}); training to {}\n", asked, e.what(),
               options.vocab_size);
    t0 = now_s();
    model = train_bpe_file(path, options);
  }
  const double wall = now_s() - t0;
  const double rss = peak_rss_mb();
  const size_t merges = model.merges.size();
  // Pretokenization alone, after the RSS reading (this pass holds the text in memory on its own).
  const double r0 = now_s();
  const std::string text = read_all(path);
  const double read = now_s() - r0;
  double pretok = 1e300, spent = 0;
  size_t distinct = 0;
  for (int r = 0; r < 3 && spent < 8; ++r) {  // best of up to 3 passes (fewer on big files)
    const double p0 = now_s();
    distinct = count_pretokens(text, options.special_tokens, options.num_threads).size();
    pretok = std::min(pretok, now_s() - p0);
    spent += now_s() - p0;
  }
  const double mb = text.size() / 1e6;
  // Merge phase ~ wall − file read − pretokenization; 0 (n/a) when that is inside the timing noise.
  const double merge_s = wall - read - pretok;
  const double merges_per_s = merge_s > 0.02 * wall ? merges / merge_s : 0.0;
  const bool met = target <= 0 || (wall < target && rss < 1024);
  fmt::print("| train_bpe_file {} ({:.1f} MB) vocab {} (reached {}) | {} | {:.3f} s | {:.1f} | {} | {:.0f} | {} |\n",
             base_name(path), mb, asked, model.vocab.size(), options.num_threads, wall, mb / pretok,
             merges_per_s > 0 ? fmt::format("{:.0f} (merge phase ~{:.2f} s)", merges_per_s, merge_s) : "n/a (noise)",
             rss, target > 0 ? fmt::format("< {} s, < 1 GB: {}", target, verdict(met)) : std::string("-"));
  fmt::print("JSON {{\"measure\":\"train_file\",\"trainer\":\"train_bpe_file\",\"file\":\"{}\",\"bytes\":{},"
             "\"vocab_asked\":{},\"vocab_reached\":{},\"merges\":{},\"threads\":{},\"wall_s\":{:.4f},"
             "\"read_s\":{:.4f},\"pretok_s\":{:.4f},\"pretok_mb_s\":{:.2f},\"distinct_pretokens\":{},\"merges_per_s\":{},"
             "\"peak_rss_mb\":{:.1f},\"target_s\":{},\"target_rss_mb\":{},\"target_met\":{}}}\n",
             base_name(path), text.size(), asked, model.vocab.size(), merges, options.num_threads, wall, read,
             pretok, mb / pretok, distinct, merges_per_s > 0 ? fmt::format("{:.1f}", merges_per_s) : "null", rss, target > 0 ? fmt::format("{}", target) : "null",
             target > 0 ? "1024" : "null", target > 0 ? (met ? "true" : "false") : "null");
  return 0;
}

int cmd_encode(int argc, char** argv) {
  TG_CHECK(argc >= 6, "usage: bench_bpe encode <vocab.json> <merges.txt> <text> <threads> [target_mb_s_per_core]");
  const std::string text = read_all(argv[4]);
  const int threads = std::stoi(argv[5]);
  const double target = argc > 6 ? std::stod(argv[6]) : 20.0;
  BpeModel gpt2 = load_gpt2_files(argv[2], argv[3], kSpecial);
  const double mb = text.size() / 1e6;
  size_t tokens = 0;
  double pass_cpu = 0;
  auto pass = [&](Tokenizer& tokenizer) {
    const double s = now_s(), c = cpu_s();
    tokens = threads == 1 ? tokenizer.encode(text).size() : tokenizer.encode_parallel(text, threads).size();
    pass_cpu = cpu_s() - c;
    return now_s() - s;
  };
  // Median of 3 rounds; each round: a fresh Tokenizer (empty cache), pass 1 = cold, pass 2 = warm.
  std::vector<double> colds, warms, builds, cold_cpus, warm_cpus;
  for (int r = 0; r < 3; ++r) {
    const double t0 = now_s();
    Tokenizer tokenizer(gpt2);
    builds.push_back(now_s() - t0);
    colds.push_back(pass(tokenizer));
    cold_cpus.push_back(pass_cpu);
    warms.push_back(pass(tokenizer));
    warm_cpus.push_back(pass_cpu);
  }
  for (auto* v : {&colds, &warms, &builds, &cold_cpus, &warm_cpus}) std::sort(v->begin(), v->end());
  const double cold = colds[1], warm = warms[1], build = builds[1], cold_cpu = cold_cpus[1], warm_cpu = warm_cpus[1];
  const double cold_mb = mb / cold, warm_mb = mb / warm;
  const bool cold_met = cold_mb / threads >= target, warm_met = warm_mb / threads >= target;
  const bool met = cold_met && warm_met;
  fmt::print("| encode GPT-2 {} ({:.1f} MB), {} | {} | cold {:.3f} s, warm {:.3f} s (median of 3) | cold {:.1f} / warm {:.1f} (per CPU-s: {:.1f} / {:.1f}) | | {:.0f} | >= {} MB/s/core: cold {}, warm {} |\n",
             base_name(argv[4]), mb, threads == 1 ? "encode" : "encode_parallel", threads, cold, warm, cold_mb,
             warm_mb, mb / cold_cpu, mb / warm_cpu, peak_rss_mb(), target, verdict(cold_met), verdict(warm_met));
  fmt::print("JSON {{\"measure\":\"encode\",\"api\":\"{}\",\"file\":\"{}\",\"bytes\":{},\"tokens\":{},\"threads\":{},"
             "\"tokenizer_build_s\":{:.4f},\"cold_s\":{:.4f},\"warm_s\":{:.4f},\"cold_mb_s\":{:.2f},"
             "\"warm_mb_s\":{:.2f},\"cold_cpu_s\":{:.4f},\"warm_cpu_s\":{:.4f},\"target_mb_s_per_core\":{},\"cold_target_met\":{},\"warm_target_met\":{},"
             "\"target_met\":{}}}\n",
             threads == 1 ? "encode" : "encode_parallel", base_name(argv[4]), text.size(), tokens, threads, build,
             cold, warm, cold_mb, warm_mb, cold_cpu, warm_cpu, target, cold_met, warm_met, met);
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "small") return cmd_small(argc, argv);
  if (cmd == "train") return cmd_train(argc, argv);
  if (cmd == "encode") return cmd_encode(argc, argv);
  fmt::print(stderr, "usage: bench_bpe small|train|encode ... (see the header of bench/bpe.cpp)\n");
  return 2;
} catch (const std::exception& e) {
  fmt::print(stderr, "bench_bpe: {}\n", e.what());
  return 1;
}
