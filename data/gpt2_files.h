// gpt2_files.h — GPT-2 style vocab.json ({"token in byte-unicode": id}) and merges.txt (one
// "left right" pair per line in byte-unicode, an optional leading "#version" line).
#pragma once
#include <string>

#include "data/bpe_model.h"
#include "data/hf_tokenizer_json.h"  // load_hf_tokenizer_json lived here before

namespace tapegrad::data {

// Reads vocab.json + merges.txt. Ids in vocab.json must be 0..N-1, each used once. Every merge
// must name two tokens of the vocabulary whose concatenation is also in it. `special_tokens` are
// the tokens encode() will treat as special (each must be in the vocabulary).
// Throws tapegrad::Error naming the file and the line/key at fault.
BpeModel load_gpt2_files(const std::string& vocab_json_path, const std::string& merges_txt_path,
                         const std::vector<std::string>& special_tokens = {});

// Writes the model in the same format (merges.txt gets a "#version: 0.2" line), each file atomically
// (file_io.h). Throws when two ids share one byte string (vocab.json cannot say that).
void save_gpt2_files(const BpeModel& model, const std::string& vocab_json_path, const std::string& merges_txt_path);

}  // namespace tapegrad::data
