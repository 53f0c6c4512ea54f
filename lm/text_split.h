// text_split.h — a text corpus as training and validation token streams, the validation part
// being the last documents (train --text, eval --text).
//
// Documents end at the separator: the tokenizer's first special token (e.g. "<|endoftext|>",
// kept at the end of its document) when it has one, else a blank line ("\n\n"). The last
// ⌈fraction·documents⌉ documents (at least one) are held out; the cut falls exactly on a
// document boundary, so no document is split between the two parts. A text of ONE document (a plain file
// without separators, as nanoGPT's tiny-shakespeare) is held out by tokens instead: its last
// ⌈fraction·tokens⌉ ids (nanoGPT holds out the last 10 % of its tokens the same way).
//
// tokenize_text_inputs streams any number of inputs (files, directories, JSONL: data/text_inputs.h,
// data/document_reader.h) chunk by chunk through a pluggable encoder, keeping only the ids and one
// chunk of text in memory; split_documents is the same rule on a text held whole.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/document_encode.h"
#include "data/text_inputs.h"
#include "data/tokenizer.h"

namespace tapegrad::lm {

struct TextSplit {
  std::string_view train, val;  // views into the text given to split_documents
  size_t train_documents = 0, val_documents = 0;
};

// How many of `documents` (>= 2) are held out: ⌈fraction·documents⌉, at least 1, at most documents-1.
size_t validation_documents(size_t documents, double val_fraction);

// Throws tapegrad::Error when the text has fewer than 2 documents (nothing left to train on).
TextSplit split_documents(std::string_view text, std::string_view separator, double val_fraction = 0.1);

// The separator split_documents uses for texts encoded with this tokenizer (see above).
std::string document_separator(const data::Tokenizer& tokenizer);

struct TokenizedText {
  std::vector<uint32_t> train, val;
  size_t train_documents = 0, val_documents = 0;
  uint64_t bytes = 0;
  bool val_by_tokens = false;  // one document: val is its tail of ⌈fraction·tokens⌉ ids (val_documents 0)
};

// How many of `tokens` (>= 2) ids of a one-document text are held out: ⌈fraction·tokens⌉, at least 1, at most
// tokens-1.
size_t validation_tokens(size_t tokens, double val_fraction);

struct TextInputOptions {
  std::string text_field = "text";  // JSONL: the field that holds each document's text
  double val_fraction = 0.1;        // 0: no validation part (every id in .train; one document is enough)
  size_t chunk_bytes = data::kDocumentChunkBytes;
  size_t read_block_bytes = size_t(1) << 20;
  data::BytesProgress progress;     // after each chunk
};

// The documents of `inputs` (in order), encoded chunk by chunk with `encode`, the last
// ⌈val_fraction·documents⌉ of them held out. The cut is decided at the end on the documents' count;
// the chunk it falls inside is read again and encoded as two parts, so train and val are encoded
// apart exactly as split_documents + encoding each part would on the inputs joined as
// data/document_reader.h says (and, with an end-of-text separator, as encoding each part whole). One document is
// held out by tokens (see above). Throws tapegrad::Error naming the inputs when there is no text (or, with a
// validation part, fewer than 2 tokens), and naming file and line for bad JSONL.
TokenizedText tokenize_text_inputs(const std::vector<data::TextInput>& inputs, const std::string& separator,
                                   const data::DocumentEncoder& encode, const TextInputOptions& options = {});

// tokenize_text_inputs of one path (a file or a directory) with the BPE tokenizer (encode_parallel on
// `threads`) and its document_separator.
TokenizedText tokenize_text_file(const std::string& path, data::Tokenizer& tokenizer, double val_fraction = 0.1,
                                 int threads = 1);

}  // namespace tapegrad::lm
