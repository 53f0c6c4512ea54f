// edit_distance.h — the Levenshtein distance between two words, for "did you mean …?" hints: the tool's
// unknown flags (tools/cli.cpp) and chat's unknown /commands (lm/chat_commands.h).
#pragma once
#include <cstddef>
#include <string_view>

namespace tapegrad::lm {

// The fewest single-character insertions, deletions and substitutions that turn a into b.
size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace tapegrad::lm
