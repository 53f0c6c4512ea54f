// tokenizer_files.h — a tokenizer on disk: found and loaded from a file or a directory, saved as a
// directory (tokenizer.json + vocab.json + merges.txt), and identified by a fingerprint (a checkpoint
// records it so that it is never used with another tokenizer).
#pragma once
#include <string>

#include "data/bpe_model.h"

namespace tapegrad::data {

// `dir_or_file` is a tokenizer.json file, or a directory holding tokenizer.json (preferred) or
// vocab.json + merges.txt (then "<|endoftext|>" is the special token when the vocabulary has it).
// Throws tapegrad::Error naming the path when it does not exist or holds neither.
BpeModel load_tokenizer_model(const std::string& dir_or_file);

// Writes dir/tokenizer.json, dir/vocab.json and dir/merges.txt (each atomically), creating dir.
void save_tokenizer_dir(const BpeModel& model, const std::string& dir);

// 16 lowercase hex digits: 64-bit FNV-1a over the vocabulary (in id order), the merges (in rank order)
// and the special tokens, each string preceded by its length and each list by its size (8 bytes,
// little-endian), so that no two different models share the input.
std::string tokenizer_fingerprint(const BpeModel& model);

}  // namespace tapegrad::data
