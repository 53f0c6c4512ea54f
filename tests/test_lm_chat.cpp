// test_lm_chat.cpp — lm::ChatSession (tapegrad chat) and lm::StopStrings:
//  * after every reply the KV cache holds exactly the rendered history, and a new turn prefills only itself;
//  * greedy answers through the kept cache equal those of a fresh prefill of the whole history;
//  * the oldest turns are dropped (the system message never) when the history outgrows the context; an
//    answer that fills the context alone ends, a message that cannot fit is refused, the session unchanged;
//  * before an answer the oldest turns make room for a whole answer (answer_room): on a small context each turn
//    of a long conversation then answers exactly as that turn alone, and no answer is cut to make room; an answer
//    that still reaches the end of the context goes on from the ids it drew;
//  * a tokenizer whose pieces carry the space before a word: the answer's one leading space is dropped;
//  * stop strings end the answer (across tokens), the end token ends it, /reset keeps the system message;
//  * stop strings on a byte stream, split anywhere.
#include <catch2/catch.hpp>

#include <algorithm>

#include "data/bpe_model.h"
#include "lm/chat_session.h"
#include "lm/generate.h"
#include "lm/llama2c_tokenizer.h"
#include "lm/stop_strings.h"
#include "tests/chat_fixture.h"
#include "tests/shared_fixture.h"

using namespace tapegrad;
using tapegrad::testing::LetterCodec;

namespace {

lm::ChatOptions greedy_options(int64_t max_tokens) {
  lm::ChatOptions o;
  o.sampling.greedy = true;
  o.max_tokens = max_tokens;
  return o;
}

// ids of a letters-only string
std::vector<uint32_t> letters(const std::string& s) { return LetterCodec().encode_text(s); }

// What a reply adds to the history: <|user|> text <|end|> <|assistant|> answer <|end|>.
std::vector<uint32_t> rendered_turn(const lm::ChatTemplate& t, const std::string& user, const lm::ChatReply& r) {
  std::vector<uint32_t> ids{t.user_id};
  for (uint32_t id : letters(user)) ids.push_back(id);
  ids.push_back(t.end_id);
  ids.push_back(t.assistant_id);
  for (uint32_t id : r.tokens)
    if (id != t.end_id) ids.push_back(id);
  ids.push_back(t.end_id);
  return ids;
}

// The greedy answer of a fresh prefill of `history` + the user turn (no cache kept from before).
std::vector<uint32_t> fresh_answer(const nn::TransformerLM& model, const lm::ChatTemplate& t,
                                   std::vector<uint32_t> history, const std::string& user, int64_t max_tokens) {
  history.push_back(t.user_id);
  for (uint32_t id : letters(user)) history.push_back(id);
  history.push_back(t.end_id);
  history.push_back(t.assistant_id);
  lm::GenerateOptions o;
  o.sampling.greedy = true;
  o.max_tokens = max_tokens;
  o.stop_token = t.end_id;
  return lm::generate(model, history, o).tokens;
}

}  // namespace

TEST_CASE("chat: after each reply the cache holds exactly the rendered history, a turn prefills only itself",
          "[chat]") {
  LetterCodec codec;
  const auto model = testing::chat_model(64);
  lm::ChatOptions o = greedy_options(5);
  o.system = "abc";
  lm::ChatSession chat(*model, codec, codec.chat, o);
  const lm::ChatTemplate& t = codec.chat;
  std::vector<uint32_t> want{t.system_id, 0, 1, 2, t.end_id};  // <|system|> abc <|end|>
  CHECK(chat.cache_length() == 0);  // the system message is prefilled with the first turn
  CHECK(chat.history() == want);
  int64_t previous = 0;
  for (const std::string user : {"ab", "pon", "c", "ddd"}) {
    std::string streamed;
    const lm::ChatReply r = chat.reply(user, [&](std::string_view s) { streamed += s; });
    const std::vector<uint32_t> turn = rendered_turn(t, user, r);
    want.insert(want.end(), turn.begin(), turn.end());
    CHECK(chat.history() == want);
    CHECK(chat.cache_length() == int64_t(want.size()));
    // Prefill: the new turn (<|user|> text <|end|> <|assistant|>), and the system message the first time.
    CHECK(r.prefill_tokens == int64_t(user.size() + 3) + (previous == 0 ? 5 : 0));
    CHECK(r.dropped_turns == 0);
    CHECK(streamed == r.text);
    CHECK(int64_t(r.tokens.size()) <= 5);
    CHECK(r.stop == (r.tokens.back() == t.end_id ? lm::ChatStop::EndToken : lm::ChatStop::MaxTokens));
    previous = chat.cache_length();
  }
  CHECK(chat.num_turns() == 4);
}

TEST_CASE("chat: greedy answers through the kept cache equal those of a fresh prefill of the whole history",
          "[chat]") {
  LetterCodec codec;
  const auto model = testing::chat_model(96, 3);
  lm::ChatOptions o = greedy_options(8);
  o.system = "hello";
  lm::ChatSession chat(*model, codec, codec.chat, o);
  for (const std::string user : {"abc", "ponm", "aaaa", "b"}) {
    const std::vector<uint32_t> want = fresh_answer(*model, codec.chat, chat.history(), user, 8);
    const lm::ChatReply r = chat.reply(user);
    CHECK(r.tokens == want);
    std::string text;  // the streamed text is the answer's letters
    for (uint32_t id : want)
      if (id < LetterCodec::kLetters) text += char('a' + id);
    CHECK(r.text == text);
  }
}

TEST_CASE("chat: the oldest turns are dropped when the history outgrows the context, never the system message",
          "[chat]") {
  LetterCodec codec;
  const auto model = testing::chat_model(32, 5);
  lm::ChatOptions o = greedy_options(6);
  o.system = "ab";  // <|system|> a b <|end|>: 4 ids
  std::vector<std::pair<int64_t, int64_t>> shifts;
  o.on_context_shift = [&](int64_t dropped, int64_t reread) { shifts.emplace_back(dropped, reread); };
  lm::ChatSession chat(*model, codec, codec.chat, o);
  const std::vector<uint32_t> system{codec.chat.system_id, 0, 1, codec.chat.end_id};
  int64_t dropped = 0;
  for (int i = 0; i < 8; ++i) {
    const std::string user = i % 2 ? "abcd" : "ppp";
    const std::vector<uint32_t> before = chat.history();
    const size_t turns_before = chat.num_turns();
    const lm::ChatReply r = chat.reply(user);
    dropped += r.dropped_turns;
    const std::vector<uint32_t> h = chat.history();
    CHECK(chat.cache_length() == int64_t(h.size()));
    CHECK(chat.cache_length() <= 32);
    REQUIRE(h.size() >= system.size());
    CHECK(std::vector<uint32_t>(h.begin(), h.begin() + 4) == system);
    const std::vector<uint32_t> turn = rendered_turn(codec.chat, user, r);  // the newest turn is whole at the end
    CHECK(std::vector<uint32_t>(h.end() - long(turn.size()), h.end()) == turn);
    if (r.dropped_turns == 0) {  // nothing dropped: the history grew by this turn
      std::vector<uint32_t> grown = before;
      grown.insert(grown.end(), turn.begin(), turn.end());
      CHECK(h == grown);
    }
    CHECK(chat.num_turns() == turns_before + 1 - size_t(r.dropped_turns));
  }
  CHECK(dropped > 0);
  CHECK(!shifts.empty());
  int64_t dropped_by_shifts = 0;
  for (auto [d, reread] : shifts) {
    dropped_by_shifts += d;
    CHECK(reread <= 32);
  }
  CHECK(dropped_by_shifts == dropped);
}

TEST_CASE("chat: after old turns are dropped the answer equals a fresh prefill of what is left", "[chat]") {
  LetterCodec codec;
  const auto model = testing::chat_model(40, 9);
  lm::ChatOptions o = greedy_options(4);
  lm::ChatSession chat(*model, codec, codec.chat, o);
  bool checked = false;
  for (int i = 0; i < 10; ++i) {
    const std::string user = "abcdefg";  // 10 ids; a turn is 11..15: the third turn needs a drop
    const std::vector<uint32_t> h = chat.history();
    const bool fits = h.size() + 10 + 4 - 1 <= 40;  // a fresh generate of 4 ids fits the context
    const std::vector<uint32_t> want_if_no_drop = fits ? fresh_answer(*model, codec.chat, h, user, 4) : h;
    const size_t turns = chat.num_turns();
    const lm::ChatReply r = chat.reply(user);
    if (r.dropped_turns == 0) {
      if (fits) CHECK(r.tokens == want_if_no_drop);
      continue;
    }
    // The prefill read the kept history again; when the answer then had room, nothing more was dropped
    // and the answer must be the fresh one over what was kept.
    const std::vector<uint32_t> after = chat.history();
    const std::vector<uint32_t> turn = rendered_turn(codec.chat, user, r);
    const std::vector<uint32_t> kept(after.begin(), after.end() - long(turn.size()));
    CHECK(chat.num_turns() == turns - size_t(r.dropped_turns) + 1);
    if (r.prefill_tokens + 4 + 1 > 40) continue;  // the answer may have dropped more turns on the way
    CHECK(r.prefill_tokens == int64_t(kept.size()) + 10);
    CHECK(r.tokens == fresh_answer(*model, codec.chat, kept, user, 4));
    checked = true;
  }
  CHECK(checked);
}

TEST_CASE("chat: an answer that fills the context alone ends, a message that cannot fit is refused", "[chat]") {
  LetterCodec codec;
  const auto model = testing::chat_model(32, 5);
  lm::ChatOptions o = greedy_options(30);
  o.system = "ab";  // 4 ids
  lm::ChatSession chat(*model, codec, codec.chat, o);
  // 20 letters: 4 + 23 = 27 positions before the answer; at most 4 answer ids keep one for the closing <|end|>.
  const std::string long_message(20, 'a');
  const lm::ChatReply r = chat.reply(long_message);
  if (r.stop != lm::ChatStop::EndToken) {
    CHECK(r.stop == lm::ChatStop::ContextFull);
    CHECK(r.tokens.size() == 4);
  }
  CHECK(chat.cache_length() == int64_t(chat.history().size()));
  CHECK(chat.cache_length() <= 32);
  // 26 letters: 4 + 29 + room for one answer id and <|end|> = 35 > 32.
  const std::vector<uint32_t> before = chat.history();
  CHECK_THROWS_WITH(chat.reply(std::string(26, 'b')), Catch::Contains("more than the model's context of 32"));
  CHECK(chat.history() == before);
  CHECK(chat.cache_length() == int64_t(before.size()));
  // 23 letters: 4 + 26 + 2 = 32 fits, once the old turn is dropped.
  const lm::ChatReply ok = chat.reply(std::string(23, 'b'));
  CHECK(ok.dropped_turns == 1);
  CHECK(chat.num_turns() == 1);
}

TEST_CASE("chat: with room for a whole answer, each turn of a long conversation answers as that turn alone",
          "[chat]") {
  // Context 64, answers of up to 8 ids: the default room is min(8, 64 / 4) + 1 = 9. The system message is 4 ids, a
  // message of 21 letters 24 with its template tokens; after the previous turn (25 ids + its answer of a ≥ 3 ids)
  // 4 + 25 + a + 24 + 9 > 64: no whole answer fits, so that turn goes before the answer starts. (Room for one id
  // and <|end|>, as before, kept it: the answer then began after the old turn and dropped it half-way, reading on
  // from another context: other ids than the turn alone.)
  LetterCodec codec;
  const auto model = testing::chat_model(64, 29);  // answers of 8 ids (seed 11 draws <|end|> at once)
  lm::ChatOptions o = greedy_options(8);
  o.system = "ab";
  std::vector<std::string> events;  // per reply: "shift" or "text", in order
  o.on_context_shift = [&](int64_t, int64_t) { events.push_back("shift"); };
  lm::ChatSession conversation(*model, codec, codec.chat, o);
  CHECK(conversation.answer_room() == 9);
  CHECK(lm::default_answer_room(256, 64) == 17);
  CHECK(lm::default_answer_room(100, 1024) == 101);
  int shifted = 0;
  for (int turn = 0; turn < 12; ++turn) {
    std::string user;
    for (int i = 0; i < 21; ++i) user += char('a' + (turn * 7 + i * (turn % 3 + 1)) % 16);
    lm::ChatSession alone(*model, codec, codec.chat, o);
    const lm::ChatReply want = alone.reply(user);
    events.clear();
    const lm::ChatReply got = conversation.reply(user, [&](std::string_view) { events.push_back("text"); });
    INFO("turn " << turn);
    CHECK(got.text == want.text);
    CHECK(got.tokens == want.tokens);
    // Old turns went before the answer started, never while it was written.
    const auto first_text = std::find(events.begin(), events.end(), "text");
    CHECK(std::find(first_text, events.end(), "shift") == events.end());
    shifted += got.dropped_turns > 0;
  }
  CHECK(shifted >= 10);  // the conversation did outgrow the context
  // --answer-room below 2 (an answer id and <|end|>) is refused.
  o.answer_room = 1;
  CHECK_THROWS_WITH(lm::ChatSession(*model, codec, codec.chat, o), Catch::Contains("--answer-room must be at least 2"));
}

TEST_CASE("chat: an answer that reaches the end of the context goes on from the ids it drew, old turns dropped",
          "[chat]") {
  // The room of one id and <|end|> (as before issue 38): answers start after the old turns and have to drop them
  // half-way. The ids drawn before the drop stay; the rest is the greedy continuation of what is left — the start,
  // the kept turns, this turn and those ids — not a restart.
  LetterCodec codec;
  const auto model = testing::chat_model(64, 29);
  lm::ChatOptions o = greedy_options(8);
  o.system = "ab";
  o.answer_room = 2;
  std::vector<int64_t> rereads;
  o.on_context_shift = [&](int64_t, int64_t reread) { rereads.push_back(reread); };
  lm::ChatSession chat(*model, codec, codec.chat, o);
  const lm::ChatTemplate& t = codec.chat;
  int checked = 0;
  for (int turn = 0; turn < 8; ++turn) {
    std::string user;
    for (int i = 0; i < 21; ++i) user += char('a' + (turn * 5 + i * (turn % 4 + 1)) % 16);
    const std::vector<uint32_t> before = chat.history();
    rereads.clear();
    const lm::ChatReply r = chat.reply(user);
    if (rereads.size() != 1 || r.prefill_tokens == rereads[0]) continue;  // no drop, or a drop before the answer
    INFO("turn " << turn);
    const std::vector<uint32_t> after = chat.history(), turn_ids = rendered_turn(t, user, r);
    const std::vector<uint32_t> kept(after.begin(), after.end() - long(turn_ids.size()));
    const auto drawn = size_t(rereads[0] - int64_t(kept.size()) - int64_t(user.size() + 3));  // ids before the drop
    REQUIRE(drawn >= 1);
    REQUIRE(drawn < r.tokens.size());
    const std::vector<uint32_t> head(r.tokens.begin(), r.tokens.begin() + long(drawn));
    CHECK(fresh_answer(*model, t, before, user, int64_t(drawn)) == head);  // drawn after the whole history
    std::vector<uint32_t> reread = kept;  // what was read again: kept history, this turn, the ids drawn
    reread.insert(reread.end(), turn_ids.begin(), turn_ids.begin() + long(user.size() + 3));
    reread.insert(reread.end(), head.begin(), head.end());
    CHECK(int64_t(reread.size()) == rereads[0]);
    lm::GenerateOptions g;
    g.sampling.greedy = true;
    g.max_tokens = 8 - int64_t(drawn);
    g.stop_token = t.end_id;
    const std::vector<uint32_t> rest = lm::generate(*model, reread, g).tokens;
    CHECK(std::vector<uint32_t>(r.tokens.begin() + long(drawn), r.tokens.end()) == rest);
    ++checked;
  }
  CHECK(checked >= 3);
}

namespace {

// LetterCodec with SentencePiece-style pieces: each letter decodes as " x" (the space before a word).
class SpacedLetters final : public lm::TextCodec {
 public:
  explicit SpacedLetters(bool carries) : carries_(carries) {}
  std::vector<uint32_t> encode_prompt(std::string_view text) override { return letters_.encode_prompt(text); }
  std::vector<uint32_t> encode_text(std::string_view text) override { return letters_.encode_text(text); }
  std::string decode_token(uint32_t prev, uint32_t id) override {
    const std::string s = letters_.decode_token(prev, id);
    return id < LetterCodec::kLetters ? " " + s : s;
  }
  bool pieces_carry_leading_space() const override { return carries_; }
  std::optional<uint32_t> stop_token() const override { return std::nullopt; }
  size_t vocab_size() const override { return letters_.vocab_size(); }
  std::string kind() const override { return "spaced letters"; }

 private:
  LetterCodec letters_;
  bool carries_;
};

}  // namespace

TEST_CASE("chat: an answer of a tokenizer whose pieces carry the leading space does not start with a space",
          "[chat]") {
  const auto model = testing::chat_model(64, 3);
  const lm::ChatOptions o = greedy_options(6);
  SpacedLetters spaced(true), plain(false);
  const lm::ChatTemplate t = LetterCodec().chat;
  std::string streamed;
  lm::ChatSession session(*model, spaced, t, o);
  const lm::ChatReply r = session.reply("abc", [&](std::string_view s) { streamed += s; });
  const lm::ChatReply kept = lm::ChatSession(*model, plain, t, o).reply("abc");
  REQUIRE(kept.text.size() >= 2);
  CHECK(kept.text.front() == ' ');  // without the flag the space stays
  CHECK(r.tokens == kept.tokens);
  CHECK(r.text == kept.text.substr(1));  // one space dropped, the others kept
  CHECK(streamed == r.text);
  // llama2.c's tokenizer is such a tokenizer (also with a chat template's ids appended); byte-level BPE is not.
  const auto llama2c = lm::make_llama2c_codec(testing::shared_path("data/llama2c/tok512.bin"), 512);
  CHECK(llama2c->pieces_carry_leading_space());
  CHECK(lm::with_special_tokens(lm::make_llama2c_codec(testing::shared_path("data/llama2c/tok512.bin"), 512),
                                {{512, "<|end|>"}})
            ->pieces_carry_leading_space());
  data::BpeModel bytes;
  for (int b = 0; b < 256; ++b) bytes.vocab.emplace_back(1, char(b));
  CHECK_FALSE(lm::make_bpe_codec(bytes)->pieces_carry_leading_space());
}

TEST_CASE("chat: a stop string ends the answer before it, even across tokens", "[chat]") {
  LetterCodec codec;
  const auto model = testing::chat_model(64, 3);
  lm::ChatOptions o = greedy_options(12);
  const std::string full = lm::ChatSession(*model, codec, codec.chat, o).reply("abc").text;
  REQUIRE(full.size() >= 5);
  const std::string stop = full.substr(2, 2);  // two tokens: the stop string spans them
  const size_t at = full.find(stop);
  o.stop = {"zz", stop};  // "zz" never occurs (no z in the alphabet)
  lm::ChatSession chat(*model, codec, codec.chat, o);
  std::string streamed;
  const lm::ChatReply r = chat.reply("abc", [&](std::string_view s) { streamed += s; });
  CHECK(r.stop == lm::ChatStop::StopString);
  CHECK(r.text == full.substr(0, at));
  CHECK(streamed == r.text);
  CHECK(r.tokens.size() == at + 2);  // the ids of the text and of the stop string were drawn
  CHECK(chat.cache_length() == int64_t(chat.history().size()));
  CHECK(chat.history().back() == codec.chat.end_id);  // the answer is closed in the history
  o.stop = {""};
  CHECK_THROWS_WITH(lm::ChatSession(*model, codec, codec.chat, o), Catch::Contains("must not be empty"));
}

TEST_CASE("chat: the end token ends an answer and is kept once in the history", "[chat]") {
  LetterCodec codec;
  const auto model = testing::chat_model(256, 1);
  lm::ChatOptions o;
  o.sampling.temperature = 1.0;  // draws the end token every ~20 ids
  o.max_tokens = 10;
  o.seed = 42;
  lm::ChatSession chat(*model, codec, codec.chat, o);
  int ended = 0;
  for (int i = 0; i < 12; ++i) {
    const size_t before = chat.history().size();
    const lm::ChatReply r = chat.reply("abab");
    const std::vector<uint32_t> h = chat.history();
    // <|user|> abab <|end|> <|assistant|> (7) + the answer's ids; the drawn <|end|> is the closing one
    const size_t answer = r.tokens.size() - (r.stop == lm::ChatStop::EndToken ? 1 : 0);
    CHECK(h.size() == before + 7 + answer + 1);
    CHECK(h.back() == codec.chat.end_id);
    CHECK(h[h.size() - 2] != codec.chat.end_id);
    if (r.stop == lm::ChatStop::EndToken) {
      ++ended;
      CHECK(r.tokens.back() == codec.chat.end_id);
      CHECK(r.text.find("<|end|>") == std::string::npos);
    }
  }
  CHECK(ended >= 1);
}

TEST_CASE("chat: reset forgets the turns and keeps the system message", "[chat]") {
  LetterCodec codec;
  const auto model = testing::chat_model(64, 4);
  lm::ChatOptions o = greedy_options(6);
  o.system = "pp";
  lm::ChatSession chat(*model, codec, codec.chat, o);
  const lm::ChatReply first = chat.reply("abc");
  const lm::ChatReply second = chat.reply("abc");
  CHECK(chat.num_turns() == 2);
  chat.reset();
  CHECK(chat.num_turns() == 0);
  CHECK(chat.cache_length() == 0);
  CHECK(chat.history() == std::vector<uint32_t>{codec.chat.system_id, 15, 15, codec.chat.end_id});
  const lm::ChatReply again = chat.reply("abc");
  CHECK(again.tokens == first.tokens);  // the same conversation from the start
  CHECK(again.prefill_tokens == first.prefill_tokens);
  CHECK(first.prefill_tokens == 4 + 6);
  CHECK(second.prefill_tokens == 6);
}

TEST_CASE("chat: a session is refused for a tokenizer of another vocabulary, bad options or a long system message",
          "[chat]") {
  LetterCodec codec;
  const auto small = testing::chat_model(16);
  lm::ChatOptions o = greedy_options(4);
  o.max_tokens = 0;
  CHECK_THROWS_WITH(lm::ChatSession(*small, codec, codec.chat, o), Catch::Contains("--max-tokens"));
  o.max_tokens = 4;
  o.sampling.greedy = false;
  o.sampling.top_p = 2;
  CHECK_THROWS_WITH(lm::ChatSession(*small, codec, codec.chat, o), Catch::Contains("--top-p"));
  o.sampling.top_p = 1;
  o.system = std::string(10, 'a');  // 12 ids + the smallest turn (5) > 16
  CHECK_THROWS_WITH(lm::ChatSession(*small, codec, codec.chat, o), Catch::Contains("a shorter --system"));
  o.system.reset();
  nn::TransformerLMConfig c = testing::chat_model_config(16);
  c.vocab_size = 30;
  nn::TransformerLM other(c);
  CHECK_THROWS_WITH(lm::ChatSession(other, codec, codec.chat, o), Catch::Contains("the model's vocabulary is 30"));
}

TEST_CASE("stop strings: split anywhere, the earliest of several, held-back bytes released", "[chat]") {
  const std::string text = "one two STOP three";
  for (size_t a = 0; a <= text.size(); ++a)
    for (size_t b = a; b <= text.size(); ++b) {
      lm::StopStrings s({"STOP", "TOPS"});
      std::string out = s.push(text.substr(0, a));  // one push after the other (not one expression)
      out += s.push(text.substr(a, b - a));
      out += s.push(text.substr(b));
      CHECK(s.stopped());
      CHECK(out == "one two ");
      CHECK(s.finish().empty());
    }
  lm::StopStrings s({"abc", "bd"});
  CHECK(s.push("xa") == "x");  // "a" may begin "abc"
  CHECK(s.push("b") == "");    // "ab" may too, and "b" may begin "bd"
  CHECK(s.push("x") == "abx");
  CHECK(!s.stopped());
  CHECK(s.push("ab") == "");
  CHECK(s.finish() == "ab");  // the end of the stream releases what was held back
  CHECK(s.push("zbd") == "z");
  CHECK(s.stopped());
  CHECK(s.push("more") == "");
  lm::StopStrings none;
  CHECK(none.push("anything") == "anything");
  CHECK_THROWS_WITH(lm::StopStrings({"a", ""}), Catch::Contains("must not be empty"));
}
