// chat_session.cpp — one reply at a time, the KV cache kept across turns (see chat_session.h).
#include "lm/chat_session.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "autograd/generator.h"
#include "autograd/grad_mode.h"
#include "autograd/gradcheck.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "autograd/tensor.h"
#include "kernels/error.h"
#include "lm/generate.h"
#include "lm/graph_decoder.h"
#include "nn/precision.h"

namespace tapegrad::lm {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }


void append(std::vector<uint32_t>& to, std::span<const uint32_t> ids) { to.insert(to.end(), ids.begin(), ids.end()); }

// Positions a new turn needs besides its own ids: one answer id and the closing <|end|>.
constexpr int64_t kAnswerRoom = 2;

}  // namespace

int64_t default_answer_room(int64_t max_tokens, int64_t context) { return std::min(max_tokens, context / 4) + 1; }

ChatSession::ChatSession(const nn::TransformerLM& model, TextCodec& codec, const ChatTemplate& chat_template,
                         ChatOptions options)
    : model_(model),
      codec_(codec),
      template_(chat_template),
      options_(std::move(options)),
      sampler_(options_.sampling, options_.seed),
      cache_(model.config, 1, 0, model.device()) {
  const int64_t vocab = model.config.vocab_size;
  TG_CHECK(int64_t(codec.vocab_size()) == vocab,
           "chat: the tokenizer has {} tokens but the model's vocabulary is {}: another tokenizer?", codec.vocab_size(),
           vocab);
  for (uint32_t id : {template_.system_id, template_.user_id, template_.assistant_id, template_.end_id})
    TG_CHECK(int64_t(id) < vocab, "chat: the template's token {} (id {}) is outside the model's vocabulary of {}",
             template_.special_text(id), id, vocab);
  TG_CHECK(options_.max_tokens >= 1, "--max-tokens must be at least 1, but is {}", options_.max_tokens);
  TG_CHECK(options_.answer_room == 0 || options_.answer_room >= kAnswerRoom,
           "--answer-room must be at least {} (an answer id and the closing end token), but is {}", kAnswerRoom,
           options_.answer_room);
  answer_room_ = options_.answer_room > 0 ? options_.answer_room
                                          : default_answer_room(options_.max_tokens, cache_.capacity());
  (void)StopStrings(options_.stop);  // an empty stop string is refused now, not at the first reply
  start_ = codec.encode_prompt("");
  if (options_.system) append(start_, template_.encode_message(codec, {"system", *options_.system}));
  // The smallest turn: <|user|> <|end|> <|assistant|>, then an answer id and <|end|>.
  TG_CHECK(int64_t(start_.size()) + 3 + kAnswerRoom <= cache_.capacity(),
           "chat: the system message takes {} tokens, which leaves no room for a turn in the model's context of {} "
           "(a shorter --system)",
           start_.size(), cache_.capacity());
}

int64_t ChatSession::history_size() const {
  auto n = int64_t(start_.size());
  for (const auto& t : turns_) n += int64_t(t.size());
  return n;
}

std::vector<uint32_t> ChatSession::history() const {
  std::vector<uint32_t> ids = start_;
  for (const auto& t : turns_) append(ids, t);
  return ids;
}

void ChatSession::reset() {
  turns_.clear();
  cache_.reset();
}

int64_t ChatSession::drop_oldest_turns(size_t current, int64_t need) {
  int64_t dropped = 0;
  int64_t total = history_size() + int64_t(current);
  while (total + need > cache_.capacity() && size_t(dropped) < turns_.size())
    total -= int64_t(turns_[size_t(dropped++)].size());
  turns_.erase(turns_.begin(), turns_.begin() + dropped);
  return dropped;
}

ChatReply ChatSession::reply(std::string_view user_text, const std::function<void(std::string_view)>& on_text) {
  std::vector<uint32_t> current = template_.encode_message(codec_, {"user", std::string(user_text)});
  append(current, template_.generation_prompt());
  const int64_t context = cache_.capacity();
  TG_CHECK(int64_t(start_.size() + current.size()) + kAnswerRoom <= context,
           "chat: this message takes {} tokens; with the {} of the start and the system message, and room for an "
           "answer, it needs {} positions, more than the model's context of {} (a shorter message)",
           current.size(), start_.size(), start_.size() + current.size() + kAnswerRoom, context);
  try {
    return reply_unguarded(std::move(current), on_text);
  } catch (...) {
    cache_.reset();  // it may hold part of the failed turn: the next reply prefills the history again
    throw;
  }
}

ChatReply ChatSession::reply_unguarded(std::vector<uint32_t> current,
                                       const std::function<void(std::string_view)>& on_text) {
  const int64_t context = cache_.capacity();
  const Device device = model_.device();
  NoGradGuard no_grad;
  nn::CastCacheGuard cast_cache;  // bf16 copies of the weights kept between decode steps (nn/precision.h)
  ChatReply r;
  auto t0 = Clock::now();

  // Prefill what the cache lacks: the new turn (and the start after construction or reset()), or,
  // when old turns had to go, everything that is left.
  r.dropped_turns = drop_oldest_turns(current.size(), answer_room_);  // room for a whole answer, if turns allow
  if (r.dropped_turns > 0) cache_.reset();
  std::vector<uint32_t> feed = history();
  feed.erase(feed.begin(), feed.begin() + cache_.length());
  append(feed, current);
  if (r.dropped_turns > 0 && options_.on_context_shift)
    options_.on_context_shift(r.dropped_turns, int64_t(feed.size()));
  r.prefill_tokens = int64_t(feed.size());
  Tensor logits = model_.forward(ids_as_batch(feed, device), cache_, /*last_only=*/true);
  uint32_t next = next_token(sampler_, logits);
  r.prefill_seconds = seconds_since(t0);
  t0 = Clock::now();

  // Decode steps as graph replays where the device can capture (a GPU). A graph step also draws the next id
  // (from the same logits, with the same sampler); when the loop then does not use it (a stop string, the
  // token limit, a re-prefill, the closing <|end|>) the sampler is put back as it was, so the conversation
  // is eager decoding's, draw for draw.
  std::optional<GraphDecoder> graph;
  if (options_.cuda_graph && device.type == DeviceType::CUDA)
    graph.emplace(model_, cache_, options_.sampling.is_greedy());
  int64_t drawn = -1;  // the id the graph step drew after the id it fed (-1: none)
  Generator::State before_draw;
  auto feed_one = [&](uint32_t id, int64_t ahead) {
    if (graph && graph->available()) {
      before_draw = sampler_.state();
      drawn = graph->step(id, sampler_, ahead);
    } else {
      const uint32_t ids[1] = {id};
      logits = model_.forward(ids_as_batch(ids, device), cache_);
    }
    ++r.decode_tokens;
  };
  auto undraw = [&] {  // the graph's draw goes unused
    if (drawn >= 0) sampler_.set_state(before_draw);
    drawn = -1;
  };
  StopStrings stop(options_.stop);
  Utf8Stream utf8;
  auto emit = [&](const std::string& text) {
    if (text.empty()) return;
    r.text += text;
    if (on_text) on_text(text);
  };
  const std::optional<uint32_t> end_of_text = codec_.stop_token();
  std::vector<uint32_t> answer;
  uint32_t prev = current.back();
  bool first_text = codec_.pieces_carry_leading_space();  // drop the space the answer's first piece carries
  auto piece_text = [&](uint32_t id) {
    std::string text = codec_.decode_token(prev, id);
    if (first_text && !text.empty()) {
      if (text.front() == ' ') text.erase(0, 1);
      first_text = false;
    }
    return text;
  };
  // Invariant: before an id is fed, the cache has room for it and for the closing <|end|>.
  for (;;) {
    r.tokens.push_back(next);
    if (next == template_.end_id || (end_of_text && next == *end_of_text)) {
      r.stop = ChatStop::EndToken;
      break;
    }
    answer.push_back(next);
    if (!template_.is_special(next)) emit(utf8.push(stop.push(piece_text(next))));
    prev = next;
    feed_one(next, options_.max_tokens - int64_t(answer.size()) + 1);  // the feeds this answer may still need
    if (stop.stopped()) {
      r.stop = ChatStop::StopString;
      break;
    }
    if (int64_t(answer.size()) == options_.max_tokens) {
      r.stop = ChatStop::MaxTokens;
      break;
    }
    if (cache_.length() + kAnswerRoom > context) {  // make room: the oldest turns go, the rest is read again
      // Room for the rest of the answer if old turns allow it, so that one answer re-reads at most once.
      const int64_t rest = options_.max_tokens - int64_t(answer.size()) + 1;
      const int64_t dropped = drop_oldest_turns(current.size() + answer.size(), std::max(rest, kAnswerRoom));
      if (dropped == 0) {
        r.stop = ChatStop::ContextFull;
        break;
      }
      r.dropped_turns += dropped;
      cache_.reset();
      feed = history();
      append(feed, current);
      append(feed, answer);
      if (options_.on_context_shift) options_.on_context_shift(dropped, int64_t(feed.size()));
      undraw();
      logits = model_.forward(ids_as_batch(feed, device), cache_, /*last_only=*/true);
    }
    next = drawn >= 0 ? uint32_t(drawn) : next_token(sampler_, logits);
    drawn = -1;
  }
  undraw();
  feed_one(template_.end_id, 1);  // the answer closed in the cache, as the template renders it
  undraw();
  emit(utf8.push(stop.finish()));
  emit(utf8.finish());
  r.decode_seconds = seconds_since(t0);
  r.graph_steps = graph ? graph->steps() : 0;

  append(current, answer);
  current.push_back(template_.end_id);
  turns_.push_back(std::move(current));
  return r;
}

}  // namespace tapegrad::lm
