// hf_tokenizer_json.h — Hugging Face `tokenizers` tokenizer.json for a byte-level BPE: read (the
// model part) and write (a complete file that the `tokenizers` library encodes to exactly our ids).
#pragma once
#include <string>

#include "data/bpe_model.h"

namespace tapegrad::data {

// Reads model.vocab, model.merges (either "left right" strings or ["left", "right"] pairs) and
// added_tokens (raw text; those marked "special" become the special tokens). An added token's id may
// be missing from model.vocab (it then extends the vocabulary) or be there under its raw text or its
// byte-unicode spelling. Only the model is read: the pre_tokenizer, normalizer and post_processor are
// assumed to be GPT-2's byte-level ones and are not checked. Throws tapegrad::Error naming the file
// and the entry at fault.
BpeModel load_hf_tokenizer_json(const std::string& path);

// Writes `model` as tokenizer.json, atomically (file_io.h): model.type "BPE" with vocab (byte-unicode
// keys, ordered by id) and merges ("left right" strings, rank order); the special tokens as added_tokens
// with "special": true (in model.vocab under their raw text, so that `tokenizers` keeps their ids);
// pre_tokenizer ByteLevel (add_prefix_space false, use_regex true: the GPT-2 regex), post_processor
// ByteLevel (trim_offsets false), decoder ByteLevel, no normalizer. Throws when two ids share one key,
// a special token is not in the vocabulary or is not valid UTF-8, or the file cannot be written.
void save_hf_tokenizer_json(const BpeModel& model, const std::string& path);

}  // namespace tapegrad::data
