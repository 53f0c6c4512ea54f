// pretoken_counts.h — counts the distinct pretokens of a text (special tokens removed), optionally
// over several threads on chunks cut at special-token boundaries. Memory grows with the number of
// distinct pretokens, not with the text.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tapegrad::data {

using PretokenCounts = std::unordered_map<std::string, int64_t>;

PretokenCounts count_pretokens(std::string_view text, const std::vector<std::string>& special_tokens,
                               int num_threads);

}  // namespace tapegrad::data
