// document_encode.h — the documents of a DocumentReader encoded chunk by chunk: documents are
// gathered into a chunk until it holds at least chunk_bytes of text (a chunk holds one document at
// least, and ends with a whole document), the chunk is handed to a pluggable encoder, its ids are
// appended. Only one chunk of text is in memory at a time; the ids are kept (encode_documents) or
// written to a token file (encode_documents_to_token_file).
//
// For the BPE tokenizer with an end-of-text special token as separator, a chunk boundary (just after
// that token) is a cut of cut_finder.h, so the ids are exactly those of encoding all the text at once
// — the inputs joined as document_reader.h says (a separator inserted after a plain file whose text after
// its last separator is more than whitespace; a JSONL line as its text and the separator), whatever the
// chunk size, read block size or split of that text into files (a property test holds this);
// with the blank-line separator the whitespace at a chunk boundary may be split differently. The
// chunk size is fixed (not tied to the thread count), so the ids never depend on the machine.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "data/document_reader.h"
#include "data/tokenizer.h"

namespace tapegrad::data {

inline constexpr size_t kDocumentChunkBytes = size_t(4) << 20;

// Appends the ids of `documents` to `out`. The text holds whole documents, each followed by the
// separator (the last document of the last plain-text input may lack it).
using DocumentEncoder = std::function<void(std::string_view documents, std::vector<uint32_t>& out)>;

// The BPE tokenizer as a DocumentEncoder: Tokenizer::encode_parallel on `threads` (the tokenizer
// must outlive the encoder).
DocumentEncoder bpe_document_encoder(Tokenizer& tokenizer, int threads);

// Called after each chunk with the input bytes read so far and the inputs' total size.
using BytesProgress = std::function<void(uint64_t bytes_done, uint64_t bytes_total)>;

struct EncodedChunk {
  DocumentPosition start;     // where its first document starts (a reader made there reads it again)
  uint64_t documents_end = 0;  // documents in this chunk and all before it
  uint64_t tokens_end = 0;     // ids of this chunk and all before it
};

struct EncodedDocuments {
  std::vector<uint32_t> ids;
  std::vector<EncodedChunk> chunks;
  uint64_t documents = 0;
  uint64_t bytes = 0;  // text bytes encoded (inserted separators included)
};

EncodedDocuments encode_documents(DocumentReader& reader, const DocumentEncoder& encode,
                                  size_t chunk_bytes = kDocumentChunkBytes, const BytesProgress& progress = {});

struct TokenFileSummary {
  uint64_t tokens = 0, documents = 0, bytes = 0;
};

// The same ids written to a token file of vocab_size: to token_path + ".tmp", renamed to token_path
// once complete; on any error the temp file is removed and token_path is left as it was.
TokenFileSummary encode_documents_to_token_file(DocumentReader& reader, const DocumentEncoder& encode,
                                                uint64_t vocab_size, const std::string& token_path,
                                                size_t chunk_bytes = kDocumentChunkBytes,
                                                const BytesProgress& progress = {});

}  // namespace tapegrad::data
