// pretoken_counts.cpp — split at special tokens, pretokenize each piece, count; chunks in parallel.
#include "data/pretoken_counts.h"

#include <algorithm>
#include <exception>
#include <thread>

#include "data/pretokenizer.h"
#include "data/special_splitter.h"

namespace tapegrad::data {
namespace {

void count_chunk(std::string_view chunk, const SpecialSplitter& splitter, const Pretokenizer& pretokenizer,
                 PretokenCounts& counts) {
  splitter.split(
      chunk,
      [&](std::string_view piece) {
        pretokenizer.split(piece, [&](std::string_view pretoken) { ++counts[std::string(pretoken)]; });
      },
      [](size_t) {});
}

// Chunk boundaries at the start of a special token (so no pretoken or special token is cut).
std::vector<size_t> chunk_boundaries(std::string_view text, const std::vector<std::string>& special_tokens,
                                     int num_chunks) {
  std::vector<size_t> bounds{0};
  if (num_chunks > 1 && !special_tokens.empty()) {
    for (int c = 1; c < num_chunks; ++c) {
      const size_t target = std::max(bounds.back(), text.size() * size_t(c) / size_t(num_chunks));
      size_t best = std::string_view::npos;
      for (const std::string& special : special_tokens) best = std::min(best, text.find(special, target));
      if (best == std::string_view::npos) break;
      if (best > bounds.back()) bounds.push_back(best);
    }
  }
  bounds.push_back(text.size());
  return bounds;
}

}  // namespace

PretokenCounts count_pretokens(std::string_view text, const std::vector<std::string>& special_tokens,
                               int num_threads) {
  const SpecialSplitter splitter(special_tokens);
  const Pretokenizer pretokenizer;
  const std::vector<size_t> bounds = chunk_boundaries(text, special_tokens, std::max(1, num_threads));
  const size_t num_chunks = bounds.size() - 1;
  std::vector<PretokenCounts> partial(num_chunks);
  std::vector<std::exception_ptr> errors(num_chunks);
  auto run_chunk = [&](size_t c) {
    try {
      count_chunk(text.substr(bounds[c], bounds[c + 1] - bounds[c]), splitter, pretokenizer, partial[c]);
    } catch (...) {
      errors[c] = std::current_exception();
    }
  };
  {
    std::vector<std::jthread> workers;
    for (size_t c = 1; c < num_chunks; ++c) workers.emplace_back(run_chunk, c);
    run_chunk(0);
  }  // jthreads join here
  for (const auto& error : errors)
    if (error) std::rethrow_exception(error);
  for (size_t c = 1; c < num_chunks; ++c)
    for (auto& [pretoken, count] : partial[c]) partial[0][pretoken] += count;
  return std::move(partial[0]);
}

}  // namespace tapegrad::data
