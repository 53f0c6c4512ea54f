// test_lm_chat_commands.cpp — the lines `tapegrad chat` reads (lm/chat_commands.h): /help, /reset, /quit; an
// unknown /word refused naming the nearest command; "//" to send a line that starts with '/'; lines that only
// contain a '/' are messages; and the edit distance the "did you mean" hints rest on (lm/edit_distance.h).
#include <catch2/catch.hpp>

#include "lm/chat_commands.h"
#include "lm/edit_distance.h"

using namespace tapegrad;
using lm::ChatLineKind;

TEST_CASE("chat commands: the table, messages, and unknown /words refused with the nearest command", "[chat]") {
  CHECK(lm::read_chat_line("/help").kind == ChatLineKind::Help);
  CHECK(lm::read_chat_line("/reset").kind == ChatLineKind::Reset);
  CHECK(lm::read_chat_line("/reset \r").kind == ChatLineKind::Reset);
  CHECK(lm::read_chat_line("/quit").kind == ChatLineKind::Quit);
  CHECK(lm::read_chat_line("").kind == ChatLineKind::Empty);
  CHECK(lm::read_chat_line("\r").kind == ChatLineKind::Empty);
  for (const std::string message : {"hello", "1/2 of it", "/usr/bin is a folder", "/ 2", "/3"}) {
    INFO(message);
    const lm::ChatLine line = lm::read_chat_line(message);
    CHECK(line.kind == ChatLineKind::Message);
    CHECK(line.text == message);
  }
  const lm::ChatLine slash = lm::read_chat_line("//reset is a command");  // "//": a message that starts with '/'
  CHECK(slash.kind == ChatLineKind::Message);
  CHECK(slash.text == "/reset is a command");

  const lm::ChatLine typo = lm::read_chat_line("/rest");
  CHECK(typo.kind == ChatLineKind::Refused);
  CHECK(typo.text.starts_with("unknown command /rest (did you mean /reset?); /help lists the commands"));
  CHECK(lm::read_chat_line("/hlep").text.starts_with("unknown command /hlep (did you mean /help?)"));
  CHECK(lm::read_chat_line("/qit").text.starts_with("unknown command /qit (did you mean /quit?)"));
  const lm::ChatLine far = lm::read_chat_line("/translate this");
  CHECK(far.kind == ChatLineKind::Refused);
  CHECK(far.text.starts_with("unknown command /translate; /help"));  // nothing near enough to name
  const lm::ChatLine extra = lm::read_chat_line("/reset now");
  CHECK(extra.kind == ChatLineKind::Refused);
  CHECK(extra.text.starts_with("/reset takes nothing after it"));

  const std::string help = lm::chat_help();
  for (const lm::ChatCommand& c : lm::chat_commands()) CHECK(help.find(c.name) != std::string::npos);
  CHECK(help.find("//") != std::string::npos);
}

TEST_CASE("edit distance: insertions, deletions and substitutions", "[chat]") {
  CHECK(lm::edit_distance("", "") == 0);
  CHECK(lm::edit_distance("abc", "") == 3);
  CHECK(lm::edit_distance("", "abc") == 3);
  CHECK(lm::edit_distance("kitten", "sitting") == 3);
  CHECK(lm::edit_distance("/rest", "/reset") == 1);
  CHECK(lm::edit_distance("tokenzier", "tokenizer") == 2);
  CHECK(lm::edit_distance("same", "same") == 0);
}
