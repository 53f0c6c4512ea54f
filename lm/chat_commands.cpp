// chat_commands.cpp — the /command table of `tapegrad chat` and the reading of one line (see chat_commands.h).
#include "lm/chat_commands.h"

#include <fmt/format.h>

#include <array>
#include <cctype>

#include "lm/edit_distance.h"

namespace tapegrad::lm {

namespace {

constexpr std::array<ChatCommand, 3> kCommands{{
    {"/help", "list these commands", ChatLineKind::Help},
    {"/reset", "forget the conversation (the system message stays)", ChatLineKind::Reset},
    {"/quit", "end the chat (as Ctrl-D or the end of the input does)", ChatLineKind::Quit},
}};

bool is_letter(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }
bool is_space(char c) { return c == ' ' || c == '\t'; }

// The command nearest to `word` when it is close enough to be a slip (at most 2 edits, fewer than the
// word's letters), else "".
std::string_view nearest_command(std::string_view word) {
  std::string_view best;
  size_t best_distance = 0;
  for (const ChatCommand& c : kCommands) {
    const size_t d = edit_distance(word, c.name);
    if (best.empty() || d < best_distance) best = c.name, best_distance = d;
  }
  return best_distance <= 2 && best_distance < word.size() - 1 ? best : std::string_view();
}

}  // namespace

std::span<const ChatCommand> chat_commands() { return kCommands; }

std::string chat_help() {
  std::string text;
  for (const ChatCommand& c : kCommands) text += fmt::format("  {:<8} {}\n", c.name, c.help);
  text += "  //text   send \"/text\" to the model (a message that starts with '/')\n";
  return text;
}

ChatLine read_chat_line(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.empty()) return {ChatLineKind::Empty, ""};
  if (line.starts_with("//")) return {ChatLineKind::Message, std::string(line.substr(1))};
  // A command: '/' and letters, then the end of the line or a space.
  size_t end = 1;
  while (end < line.size() && is_letter(line[end])) ++end;
  if (line[0] != '/' || end == 1 || (end < line.size() && !is_space(line[end])))
    return {ChatLineKind::Message, std::string(line)};
  const std::string_view word = line.substr(0, end);
  std::string_view rest = line.substr(end);
  while (!rest.empty() && is_space(rest.front())) rest.remove_prefix(1);
  while (!rest.empty() && is_space(rest.back())) rest.remove_suffix(1);
  for (const ChatCommand& c : kCommands) {
    if (c.name != word) continue;
    if (!rest.empty())
      return {ChatLineKind::Refused, fmt::format("{} takes nothing after it (/help lists the commands)", word)};
    return {c.kind, ""};
  }
  const std::string_view near = nearest_command(word);
  return {ChatLineKind::Refused,
          fmt::format("unknown command {}{}; /help lists the commands, and // starts a message with '/'", word,
                      near.empty() ? std::string() : fmt::format(" (did you mean {}?)", near))};
}

}  // namespace tapegrad::lm
