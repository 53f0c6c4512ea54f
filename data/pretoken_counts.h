// pretoken_counts.h — counts the distinct pretokens of a text or a file (special tokens removed),
// over several threads on chunks cut where cut_finder.h allows (after a special token, or at a
// newline between ASCII graphic characters). Files are streamed in blocks: memory grows with the
// number of distinct pretokens (plus one block per thread), not with the file.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/string_table.h"

namespace tapegrad::data {

// Pretoken bytes -> count, in first-seen order (the order depends on how the work was split).
using PretokenCounts = FlatStringMap<int64_t>;

PretokenCounts count_pretokens(std::string_view text, const std::vector<std::string>& special_tokens,
                               int num_threads);

// Same counts as count_pretokens(whole file); each thread takes the next block of about
// block_bytes (file_blocks.h; smaller when the file holds less than one block per thread) until the
// file ends. Throws tapegrad::Error when the file cannot be opened or read.
PretokenCounts count_pretokens_in_file(const std::string& path, const std::vector<std::string>& special_tokens,
                                       int num_threads, size_t block_bytes);
// The same for the concatenation of several files (read as one text: file_blocks.h).
PretokenCounts count_pretokens_in_files(const std::vector<std::string>& paths,
                                        const std::vector<std::string>& special_tokens, int num_threads,
                                        size_t block_bytes);

}  // namespace tapegrad::data
