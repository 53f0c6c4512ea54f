// chat_session.h — a multi-turn conversation with an instruction-tuned TransformerLM (`tapegrad chat`),
// the KV cache kept across turns.
//
//   lm::ChatSession chat(*model, *codec, *lm::chat_template_for_checkpoint(ck), options);
//   lm::ChatReply r = chat.reply("reverse: abc", [](std::string_view text) { print(text); });
//   chat.reset();   // forget the turns, keep the system message
//
// The history is token ids (lm/chat_template.h renders each message):
//   start   = codec.encode_prompt("") (e.g. llama2.c's BOS)  +  the system message, if any   (never dropped)
//   turn i  = <|user|> text <|end|>  <|assistant|>  answer ids  <|end|>
// After every reply the cache holds exactly start + every kept turn, so a new turn prefills only its own
// ids (<|user|> text <|end|> <|assistant|>) — the first one the start too — and decodes from there. The
// answer's ids are the ones drawn (never re-encoded from text), each fed to the cache as it is decoded;
// the answer is closed by <|end|> in the cache whether the model drew it or the answer ended otherwise
// (--max-tokens, a stop string, the tokenizer's end-of-text id, a full context), so the history always
// reads as the template renders a conversation.
//
// The context: an answer needs one position per drawn id and one for the closing <|end|>. Before the
// prefill, the oldest turns are dropped (the start never) until the new turn fits with `answer_room` free
// positions after it (default_answer_room: a whole short answer and its <|end|>), so that an answer rarely
// has to make room while it is being written. If an answer still runs out of room, more old turns are
// dropped — as many as the rest of the answer (--max-tokens) needs, or all — and what is left (start, kept
// turns, the turn and the answer so far) is prefilled again: the answer goes on from the ids already drawn,
// neither restarted nor re-encoded; `on_context_shift` says so each time. When no old turn is left to drop,
// the answer ends (ChatStop::ContextFull). A new message that cannot fit with the start, one answer id and
// <|end|> is refused before anything runs.
//
// The text: a tokenizer whose pieces carry the space before a word (llama2.c's, SentencePiece's: " Once")
// would begin every answer with a space; one leading space of an answer is dropped for those
// (TextCodec::pieces_carry_leading_space), as llama2.c drops it after BOS.
//
// Device and sampling as lm::generate (lm/generate.h): the cache lives where the model is; greedy is an
// argmax there, temperature / top-k / top-p draw on the host from the read-back row with one Sampler for
// the whole session (the same seed gives the same conversation on every device).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lm/chat_template.h"
#include "lm/sampler.h"
#include "lm/stop_strings.h"
#include "lm/text_codec.h"
#include "lm/utf8_stream.h"
#include "nn/kv_cache.h"
#include "nn/transformer_lm.h"

namespace tapegrad::lm {

struct ChatOptions {
  SamplerOptions sampling;
  uint64_t seed = 1;
  int64_t max_tokens = 256;            // answer ids per turn at most (the closing <|end|> not counted)
  std::vector<std::string> stop;       // stop strings: the answer ends before the first one (not printed)
  std::optional<std::string> system;   // the system message
  int64_t answer_room = 0;             // positions kept free before an answer starts (≥ 2: an answer id and
                                       // <|end|>); 0: default_answer_room(max_tokens, context)
  // Called when old turns were dropped: how many, and how many ids were prefilled again.
  std::function<void(int64_t dropped_turns, int64_t reprefilled_tokens)> on_context_shift;
  // On a GPU, decode steps replay one captured CUDA graph (lm/graph_decoder.h; captured once per reply), with
  // the conversation of eager decoding: the same ids, the same sampler draws.
  bool cuda_graph = true;
};

enum class ChatStop { EndToken, StopString, MaxTokens, ContextFull };

// The room kept free before an answer by default: min(max_tokens, context / 4) + 1 (the +1 for <|end|>).
// A whole answer when the context is large (≥ 4 × max_tokens); on a small one a quarter of it — enough
// for the short answers a small tuned model gives, while three quarters stay for the conversation.
int64_t default_answer_room(int64_t max_tokens, int64_t context);

struct ChatReply {
  std::string text;               // the answer as streamed: valid UTF-8, without a stop string or the
                                  // template's special tokens (a header the model draws is kept in the
                                  // history, not printed, as transformers' skip_special_tokens)
  std::vector<uint32_t> tokens;   // the ids drawn, in order (the end id included when drawn)
  ChatStop stop = ChatStop::EndToken;
  int64_t prefill_tokens = 0;     // ids prefilled before the first answer id
  int64_t dropped_turns = 0;      // old turns dropped during this reply
  double prefill_seconds = 0, decode_seconds = 0;
  int64_t decode_tokens = 0;      // forwards of one id after the prefill (the closing <|end|> included)
  int64_t graph_steps = 0;        // of those, the ones that were CUDA graph replays
};

class ChatSession {
 public:
  // Throws tapegrad::Error when the template's ids are outside the model's vocabulary, the codec's
  // vocabulary is not the model's, the options are invalid, or the start does not fit the context.
  ChatSession(const nn::TransformerLM& model, TextCodec& codec, const ChatTemplate& chat_template,
              ChatOptions options);

  // One user turn and the model's answer; on_text gets the answer's text as it is decoded (whole UTF-8
  // characters; text that may begin a stop string is held back until it cannot). tapegrad::Error, with
  // the session unchanged, for a message that cannot fit the context.
  ChatReply reply(std::string_view user_text, const std::function<void(std::string_view)>& on_text = {});

  // Forgets every turn; the system message stays (prefilled again with the next turn).
  void reset();

  // The history's ids: start + every kept turn (after a reply: exactly what the cache holds).
  std::vector<uint32_t> history() const;
  int64_t cache_length() const { return cache_.length(); }
  size_t num_turns() const { return turns_.size(); }
  int64_t context_length() const { return cache_.capacity(); }
  int64_t answer_room() const { return answer_room_; }
  const ChatTemplate& chat_template() const { return template_; }

 private:
  // Drops the oldest turns until `need` more positions fit after start + kept turns + `current`;
  // returns how many were dropped (0: none needed, or none left to drop).
  int64_t drop_oldest_turns(size_t current, int64_t need);
  int64_t history_size() const;
  // reply() once the turn's ids (`current`: the user message and the generation prompt) are known to fit.
  ChatReply reply_unguarded(std::vector<uint32_t> current, const std::function<void(std::string_view)>& on_text);

  const nn::TransformerLM& model_;
  TextCodec& codec_;
  ChatTemplate template_;
  ChatOptions options_;
  Sampler sampler_;
  nn::KVCache cache_;
  int64_t answer_room_ = 0;                   // options_.answer_room, or its default
  std::vector<uint32_t> start_;               // the tokenizer's start + the system message
  std::vector<std::vector<uint32_t>> turns_;  // each kept turn's ids
};

}  // namespace tapegrad::lm
