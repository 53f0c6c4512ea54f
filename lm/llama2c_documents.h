// llama2c_documents.h — training text through llama2.c's tokenizer (tokenizer.bin), as llama2.c's own
// pretokenizer (tinystories.py) prepares it: each document stripped of the whitespace around it and
// encoded as BOS (id 1) followed by its pieces; no end marker (a model learns that a story ends by
// predicting the next BOS). `train --text` uses this when the model came from `import llama2c` (through
// --init-from); `tokenize encode --tokenizer tokenizer.bin` writes the same ids to a token file.
//
// Documents end at a blank line ("\n\n"), the separator of a tokenizer without an end-of-text token
// (lm/text_split.h); the documents of one chunk are encoded in parallel (OpenMP), in order, each thread
// with its own Llama2cEncodeCache kept from chunk to chunk (an encoder is called for one chunk at a time).
#pragma once
#include <string>

#include "data/document_encode.h"
#include "lm/llama2c_tokenizer.h"

namespace tapegrad::lm {

// The separator of documents encoded with llama2.c's tokenizer: a blank line.
inline constexpr const char* kLlama2cDocumentSeparator = "\n\n";

// A data::DocumentEncoder (lm::tokenize_text_inputs, data::encode_documents) for llama2.c's tokenizer;
// `tokenizer` must outlive it. Empty documents (only whitespace) add nothing.
data::DocumentEncoder llama2c_document_encoder(const Llama2cTokenizer& tokenizer, int threads);

}  // namespace tapegrad::lm
