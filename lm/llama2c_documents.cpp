// llama2c_documents.cpp — documents → BOS + pieces with llama2.c's tokenizer (see llama2c_documents.h).
#include "lm/llama2c_documents.h"

#include <omp.h>

#include <memory>
#include <string_view>
#include <vector>

namespace tapegrad::lm {

namespace {

std::string_view strip(std::string_view s) {
  const char* ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// The documents of a chunk: the pieces between separators, stripped; empty ones left out.
std::vector<std::string_view> split_documents(std::string_view text) {
  std::vector<std::string_view> docs;
  const std::string_view sep = kLlama2cDocumentSeparator;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = text.find(sep, start);
    const std::string_view doc = strip(text.substr(start, end == std::string_view::npos ? text.size() - start : end - start));
    if (!doc.empty()) docs.push_back(doc);
    if (end == std::string_view::npos) break;
    start = end + sep.size();
  }
  return docs;
}

}  // namespace

data::DocumentEncoder llama2c_document_encoder(const Llama2cTokenizer& tokenizer, int threads) {
  const int team = threads > 0 ? threads : 1;
  // One cache per thread, kept from chunk to chunk (the encoder is called for one chunk at a time).
  auto caches = std::make_shared<std::vector<Llama2cEncodeCache>>(size_t(team));
  return [&tokenizer, team, caches](std::string_view text, std::vector<uint32_t>& out) {
    const std::vector<std::string_view> docs = split_documents(text);
    std::vector<std::vector<uint32_t>> ids(docs.size());
    if (omp_in_parallel()) {  // called from a parallel region: the shared caches are not this thread's
      Llama2cEncodeCache cache;
      for (const std::string_view doc : docs) tokenizer.encode(doc, /*bos=*/true, out, cache);
      return;
    }
#pragma omp parallel for schedule(dynamic, 16) num_threads(team) if (team > 1)
    for (size_t i = 0; i < docs.size(); ++i)
      tokenizer.encode(docs[i], /*bos=*/true, ids[i], (*caches)[size_t(omp_get_thread_num())]);
    for (const auto& v : ids) out.insert(out.end(), v.begin(), v.end());
  };
}

}  // namespace tapegrad::lm
