// text_split.h — a text corpus as training and validation token streams, the validation part
// being the last documents (train --text FILE, eval --text FILE).
//
// Documents end at the separator: the tokenizer's first special token (e.g. "<|endoftext|>",
// kept at the end of its document) when it has one, else a blank line ("\n\n"). The last
// ⌈fraction·documents⌉ documents (at least one) are held out; the cut falls exactly on a
// document boundary, so no document is split between the two parts.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizer.h"

namespace tapegrad::lm {

struct TextSplit {
  std::string_view train, val;  // views into the text given to split_documents
  size_t train_documents = 0, val_documents = 0;
};

// Throws tapegrad::Error when the text has fewer than 2 documents (nothing left to train on).
TextSplit split_documents(std::string_view text, std::string_view separator, double val_fraction = 0.1);

// The separator split_documents uses for texts encoded with this tokenizer (see above).
std::string document_separator(const data::Tokenizer& tokenizer);

struct TokenizedText {
  std::vector<uint32_t> train, val;
  size_t train_documents = 0, val_documents = 0;
  uint64_t bytes = 0;
};

// Reads `path` whole, splits it by document and encodes both parts (encode_parallel on `threads`).
// Throws tapegrad::Error naming the file when it cannot be read or has too few documents.
TokenizedText tokenize_text_file(const std::string& path, data::Tokenizer& tokenizer, double val_fraction = 0.1,
                                 int threads = 1);

}  // namespace tapegrad::lm
