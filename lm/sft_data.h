// sft_data.h — instruction-tuning examples (`train --sft`): JSONL conversations rendered with the chat
// template (lm/chat_template.h), each with the per-token loss mask, and batches of them for the Trainer.
//
// One example per line, either form:
//   {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "reverse: abc"},
//                 {"role": "assistant", "content": "cba"}]}
//   {"prompt": "reverse: abc", "completion": "cba"}          (prompt → a user message, completion → assistant)
// Blank lines are skipped. Every other line must be one of the two forms, with at least one assistant message;
// anything else is ONE tapegrad::Error naming file:line and what is wrong (not JSON, not an object, no
// "messages", a message that is not an object, an unknown role, content that is not a string, …).
//
// Loss mask: ids = ChatTemplate::encode_conversation(messages); trained[i] = 1 exactly when ids[i] is a token of
// an assistant message's content or that message's <|end|>. The model is trained to predict those tokens only:
//   inputs  = ids[0 .. n−2]
//   targets[t] = ids[t+1] if trained[t+1] else −100 (nn::cross_entropy's ignore_index)
// so the system and user turns, the headers and the tokenizer's BOS are context, never targets.
//
// Length: an example of more than context + 1 ids (its inputs would not fit the model's context) is refused
// with its file:line — never truncated, which would silently train on a cut answer.
//
// Batches: examples padded on the right to the longest one (of the data, in the Trainer; see sft_batch) (inputs padded with `pad_id`, targets
// with −100). Attention is causal, so a real token never attends to the pads after it, and the pads' own
// outputs are ignored by the loss: no attention mask is needed. (Packing several examples into one window
// would need a block-diagonal mask, which the fused attention does not have.)
#pragma once
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data/batch.h"
#include "lm/chat_template.h"
#include "lm/text_codec.h"

namespace tapegrad::lm {

inline constexpr int64_t kIgnoreIndex = -100;

struct SftExample {
  std::vector<uint32_t> ids;     // the rendered conversation
  std::vector<uint8_t> trained;  // per id: 1 when it is a target (assistant content or its <|end|>)
  std::string where;             // "file:line", for messages
  std::string group;             // what the held-out loss is reported by: the line's "task", else its system prompt
  // The loss targets of inputs ids[0 .. n−2]: ids[t+1] where trained[t+1], else kIgnoreIndex.
  std::vector<int64_t> targets() const;
  size_t answer_tokens() const;  // Σ trained
};

// One JSONL line → its messages (prompt/completion become user/assistant). `where` ("file:line") starts
// every error message. Does not check that there is an assistant message (encode_sft_example does).
// `group` (when given) receives the example's group: the line's string field "task" when it has one, else the
// content of its first system message, else "" (a "task" that is not a string is refused).
std::vector<ChatMessage> parse_sft_line(std::string_view line, const std::string& where, std::string* group = nullptr);

// Messages → the example (ids and mask, see above). Refused: no assistant message; more than `max_ids` ids
// (context + 1; 0: no limit).
SftExample encode_sft_example(const std::vector<ChatMessage>& messages, TextCodec& codec, const ChatTemplate& chat,
                              const std::string& where, size_t max_ids = 0);

// Every example of a JSONL text (`name` is the file's name in messages), and of a file.
std::vector<SftExample> parse_sft_jsonl(std::string_view text, const std::string& name, TextCodec& codec,
                                        const ChatTemplate& chat, size_t max_ids = 0);
std::vector<SftExample> read_sft_jsonl(const std::string& path, TextCodec& codec, const ChatTemplate& chat,
                                       size_t max_ids = 0);

// Moves k of the n examples, a random subset drawn with `seed`, from `all` into the returned held-out set; both
// keep the file's order. k = round(n·f), but at least 1 and at most n − 1 when f > 0 and n ≥ 2 (a small file still
// gets a validation example and keeps a training one); 0 when f = 0 or n < 2. fraction in [0, 1).
// The subset: the k examples of lowest rank r(i) = splitmix64(seed ⊕ splitmix64(i)) (ties by index) — the same
// on every machine and standard library, so a resumed run (same file, same seed) holds out the same examples.
// Random, not every 10th: a file written in blocks (all of one task, then the next) would alias with a stride.
std::vector<SftExample> hold_out_examples(std::vector<SftExample>& all, double fraction, uint64_t seed);

// The distinct groups of `examples` (SftExample::group) in order of first appearance.
std::vector<std::string> sft_groups(const std::vector<SftExample>& examples);

// The batch of examples `which` (indices into `examples`): inputs and targets [B, Tmax] int64, Tmax the longest
// example's length − 1 or `row_length` if that is longer, right-padded (inputs with pad_id, targets with
// kIgnoreIndex). The Trainer pads every batch to the longest example of the whole data (SftData::row_length): one
// shape for the run, so the CPU allocator reuses one set of blocks and the memory estimate holds (batches padded
// each to its own longest grew the process step after step, a new set of cached blocks per shape).
data::Batch sft_batch(const std::vector<SftExample>& examples, std::span<const size_t> which, uint32_t pad_id,
                      size_t row_length = 0);

// The longest example of `sets` less its last id: the row length of SftData (0 when there is none).
size_t longest_sft_row(std::initializer_list<const std::vector<SftExample>*> sets);

}  // namespace tapegrad::lm
