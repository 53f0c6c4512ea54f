// pretoken_counts.cpp — split at special tokens, pretokenize each piece, count; chunks of a text, or
// blocks of a file, in parallel, one count table per thread, added up at the end.
#include "data/pretoken_counts.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <filesystem>
#include <mutex>
#include <thread>

#include "data/cut_finder.h"
#include "data/file_blocks.h"
#include "data/pretokenizer.h"
#include "data/special_splitter.h"

namespace tapegrad::data {
namespace {

void count_chunk(std::string_view chunk, const SpecialSplitter& splitter, const Pretokenizer& pretokenizer,
                 PretokenCounts& counts) {
  splitter.split(
      chunk,
      [&](std::string_view piece) {
        pretokenizer.split(piece, [&](std::string_view pretoken) { ++counts[pretoken]; });
      },
      [](size_t) {});
}

// Runs work(t) for t = 0..n-1, t > 0 on threads of their own; rethrows the first error.
template <class Work>
void run_threads(size_t n, const Work& work) {
  std::vector<std::exception_ptr> errors(n);
  {
    std::vector<std::jthread> workers;
    auto guarded = [&](size_t t) {
      try {
        work(t);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    };
    for (size_t t = 1; t < n; ++t) workers.emplace_back(guarded, t);
    guarded(0);
  }  // jthreads join here
  for (const auto& error : errors)
    if (error) std::rethrow_exception(error);
}

PretokenCounts add_up(std::vector<PretokenCounts>& partial) {
  for (size_t t = 1; t < partial.size(); ++t)
    for (const auto& [pretoken, count] : partial[t]) partial[0][pretoken] += count;
  return std::move(partial[0]);
}

}  // namespace

PretokenCounts count_pretokens(std::string_view text, const std::vector<std::string>& special_tokens,
                               int num_threads) {
  const SpecialSplitter splitter(special_tokens);
  const Pretokenizer pretokenizer;
  const CutFinder cuts(special_tokens);
  std::vector<size_t> bounds{0};
  const auto chunks = size_t(std::max(1, num_threads));
  for (size_t c = 1; c < chunks; ++c) {
    const size_t cut = cuts.next_cut(text, std::max(bounds.back() + 1, text.size() * c / chunks));
    if (cut == std::string_view::npos) break;
    bounds.push_back(cut);
  }
  bounds.push_back(text.size());
  std::vector<PretokenCounts> partial(bounds.size() - 1);
  run_threads(partial.size(), [&](size_t c) {
    count_chunk(text.substr(bounds[c], bounds[c + 1] - bounds[c]), splitter, pretokenizer, partial[c]);
  });
  return add_up(partial);
}

PretokenCounts count_pretokens_in_file(const std::string& path, const std::vector<std::string>& special_tokens,
                                       int num_threads, size_t block_bytes) {
  return count_pretokens_in_files({path}, special_tokens, num_threads, block_bytes);
}

PretokenCounts count_pretokens_in_files(const std::vector<std::string>& paths,
                                        const std::vector<std::string>& special_tokens, int num_threads,
                                        size_t block_bytes) {
  const SpecialSplitter splitter(special_tokens);
  const Pretokenizer pretokenizer;
  // Files smaller than a block per thread are read in smaller blocks, so that every thread gets one.
  std::error_code unknown;
  uint64_t file_bytes = 0;
  for (const std::string& path : paths)
    if (!unknown) file_bytes += std::filesystem::file_size(path, unknown);
  const auto threads = size_t(std::max(1, num_threads));
  if (!unknown && threads > 1) block_bytes = std::min(block_bytes, std::max<size_t>(size_t(1) << 16, file_bytes / threads + 1));
  CutFileReader reader(paths, special_tokens, block_bytes);
  std::mutex reader_mutex;
  std::atomic<bool> failed{false};
  std::vector<PretokenCounts> partial(threads);
  run_threads(partial.size(), [&](size_t t) {
    try {
      std::string block;
      while (!failed) {
        {
          const std::lock_guard lock(reader_mutex);
          if (!reader.next(block)) break;
        }
        count_chunk(block, splitter, pretokenizer, partial[t]);
      }
    } catch (...) {
      failed = true;  // the other threads stop at their next block
      throw;
    }
  });
  return add_up(partial);
}

}  // namespace tapegrad::data
