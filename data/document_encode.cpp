// document_encode.cpp — chunks of whole documents through the encoder, into memory or a token file
// (see document_encode.h).
#include "data/document_encode.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "data/token_file.h"
#include "kernels/error.h"

namespace tapegrad::data {
namespace {

// Calls chunk_done(text, documents, start) for each chunk of whole documents, then reports progress.
template <class ChunkDone>
void for_each_chunk(DocumentReader& reader, size_t chunk_bytes, const BytesProgress& progress,
                    ChunkDone&& chunk_done) {
  TG_CHECK(chunk_bytes > 0, "encode_documents: chunk_bytes must be positive");
  std::string chunk, document;
  uint64_t documents = 0;
  DocumentPosition start;
  for (;;) {
    const DocumentPosition at = reader.position();
    const bool more = reader.next(document);
    if (more) {
      if (documents == 0) start = at;
      chunk += document;
      ++documents;
    }
    if (documents > 0 && (!more || chunk.size() >= chunk_bytes)) {
      chunk_done(std::string_view(chunk), documents, start);
      chunk.clear();
      documents = 0;
      if (progress) progress(reader.bytes_read(), reader.bytes_total());
    }
    if (!more) return;
  }
}

// Appends the encoder's ids for `text` to `ids`; returns how many it added.
uint64_t encode_into(const DocumentEncoder& encode, std::string_view text, std::vector<uint32_t>& ids) {
  const size_t before = ids.size();
  encode(text, ids);
  TG_CHECK(ids.size() >= before, "encode_documents: the encoder removed ids it was given");
  return ids.size() - before;
}

}  // namespace

DocumentEncoder bpe_document_encoder(Tokenizer& tokenizer, int threads) {
  return [&tokenizer, threads](std::string_view documents, std::vector<uint32_t>& out) {
    const std::vector<uint32_t> ids =
        threads > 1 ? tokenizer.encode_parallel(documents, threads) : tokenizer.encode(documents);
    out.insert(out.end(), ids.begin(), ids.end());
  };
}

EncodedDocuments encode_documents(DocumentReader& reader, const DocumentEncoder& encode, size_t chunk_bytes,
                                  const BytesProgress& progress) {
  EncodedDocuments out;
  for_each_chunk(reader, chunk_bytes, progress, [&](std::string_view text, uint64_t documents, DocumentPosition start) {
    encode_into(encode, text, out.ids);
    out.documents += documents;
    out.bytes += text.size();
    out.chunks.push_back({start, out.documents, out.ids.size()});
  });
  return out;
}

TokenFileSummary encode_documents_to_token_file(DocumentReader& reader, const DocumentEncoder& encode,
                                                uint64_t vocab_size, const std::string& token_path,
                                                size_t chunk_bytes, const BytesProgress& progress) {
  const std::string tmp = token_path + ".tmp";
  TokenFileSummary summary;
  try {
    TokenFileWriter writer(tmp, vocab_size);
    std::vector<uint32_t> ids;
    for_each_chunk(reader, chunk_bytes, progress, [&](std::string_view text, uint64_t documents, DocumentPosition) {
      ids.clear();
      encode_into(encode, text, ids);
      writer.write(ids);
      summary.documents += documents;
      summary.bytes += text.size();
    });
    writer.close();
    summary.tokens = writer.count();
    TG_CHECK(std::rename(tmp.c_str(), token_path.c_str()) == 0, "cannot rename {} to {}: {}", tmp, token_path,
             std::strerror(errno));
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  return summary;
}

}  // namespace tapegrad::data
