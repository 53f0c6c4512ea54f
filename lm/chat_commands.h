// chat_commands.h — what `tapegrad chat` does with one input line: a message for the model, or one of the
// /commands of the table below (/help lists them). A line whose first word is "/" and letters is a command;
// an unknown one ("/rest") is refused, naming the nearest command ("did you mean /reset?"), never sent to the
// model. "//…" sends the message "/…"; any other line (also "/usr/bin …", "1/2") is a message.
//   const lm::ChatLine line = lm::read_chat_line("/rest");   // kind Refused, text "unknown command /rest (…)"
#pragma once
#include <span>
#include <string>
#include <string_view>

namespace tapegrad::lm {

enum class ChatLineKind { Message, Empty, Help, Reset, Quit, Refused };

struct ChatCommand {
  std::string_view name;  // "/reset"
  std::string_view help;  // what it does, one phrase
  ChatLineKind kind;
};

// The commands, in the order /help lists them.
std::span<const ChatCommand> chat_commands();

// /help's text: one line per command, and how to send a message that starts with '/'.
std::string chat_help();

struct ChatLine {
  ChatLineKind kind = ChatLineKind::Message;
  std::string text;  // Message: what to send; Refused: why, one line; otherwise empty
};

// One input line (without its '\n'; a trailing '\r' is dropped) as a message, an empty line, a command or a
// refusal.
ChatLine read_chat_line(std::string_view line);

}  // namespace tapegrad::lm
