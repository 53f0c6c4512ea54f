// text_split.cpp — the validation split by document (see text_split.h).
#include "lm/text_split.h"

#include <algorithm>
#include <cmath>

#include "data/document_reader.h"
#include "kernels/error.h"

namespace tapegrad::lm {
namespace {

void check_enough_documents(size_t documents, std::string_view separator) {
  TG_CHECK(documents >= 2,
           "the text has {} document(s) (separated by '{}'): at least 2 are needed to hold out a validation part",
           documents, separator == "\n\n" ? "\\n\\n (a blank line)" : std::string(separator));
}

// The inputs for messages: "a.txt", "a.txt, b.jsonl", "a.txt ... z.txt (12 files)".
std::string inputs_name(const std::vector<data::TextInput>& inputs) {
  if (inputs.size() == 1) return inputs[0].path;
  if (inputs.size() == 2) return inputs[0].path + ", " + inputs[1].path;
  return fmt::format("{} ... {} ({} files)", inputs.front().path, inputs.back().path, inputs.size());
}

// Encodes chunk k of `encoded` again as two parts, split after `cut_document`, in place; returns the
// token offset of the cut.
uint64_t split_chunk(data::EncodedDocuments& encoded, size_t k, uint64_t cut_document,
                     const std::vector<data::TextInput>& inputs, const std::string& separator,
                     const data::DocumentEncoder& encode, const TextInputOptions& options) {
  const data::EncodedChunk& chunk = encoded.chunks[k];
  const uint64_t documents_begin = k ? encoded.chunks[k - 1].documents_end : 0;
  const uint64_t tokens_begin = k ? encoded.chunks[k - 1].tokens_end : 0;
  data::DocumentReader again(inputs, separator, options.text_field, options.read_block_bytes, chunk.start);
  std::string before, after, document;
  for (uint64_t d = documents_begin; d < chunk.documents_end; ++d) {
    TG_CHECK(again.next(document), "{}: the text changed while it was read (document {} is gone)", inputs_name(inputs),
             d + 1);
    (d < cut_document ? before : after) += document;
  }
  std::vector<uint32_t> ids;
  encode(before, ids);
  const size_t before_ids = ids.size();
  encode(after, ids);
  auto& all = encoded.ids;
  all.erase(all.begin() + std::ptrdiff_t(tokens_begin), all.begin() + std::ptrdiff_t(chunk.tokens_end));
  all.insert(all.begin() + std::ptrdiff_t(tokens_begin), ids.begin(), ids.end());
  return tokens_begin + before_ids;
}

}  // namespace

namespace {

// ⌈fraction·n⌉ of the decimal the user wrote, in [1, n-1]: 0.07·100 is 7.000000000000001 in doubles, and must
// give 7, so a product within rounding error (relative 1e-12) of an integer counts as that integer.
size_t held_out_count(size_t n, double val_fraction) {
  const double want = val_fraction * double(n);
  const auto n_val = size_t(std::ceil(want - want * 1e-12));
  return std::min(std::max<size_t>(n_val, 1), n - 1);
}

}  // namespace

size_t validation_documents(size_t documents, double val_fraction) {
  TG_CHECK(documents >= 2, "validation_documents: {} document(s), at least 2 are needed", documents);
  return held_out_count(documents, val_fraction);
}

size_t validation_tokens(size_t tokens, double val_fraction) {
  TG_CHECK(tokens >= 2, "validation_tokens: {} token(s), at least 2 are needed", tokens);
  return held_out_count(tokens, val_fraction);
}

TextSplit split_documents(std::string_view text, std::string_view separator, double val_fraction) {
  TG_CHECK(!separator.empty(), "split_documents: the document separator is empty");
  TG_CHECK(val_fraction > 0 && val_fraction < 1, "split_documents: the validation fraction must be in (0, 1), got {}",
           val_fraction);
  // ends[i] = one past the end of document i (its separator included); empty documents are skipped.
  std::vector<size_t> ends;
  size_t start = 0;
  while (start < text.size()) {
    const size_t at = text.find(separator, start);
    const size_t end = at == std::string_view::npos ? text.size() : at + separator.size();
    const std::string_view body = text.substr(start, (at == std::string_view::npos ? text.size() : at) - start);
    if (body.find_first_not_of(" \t\r\n") != std::string_view::npos)
      ends.push_back(end);
    else if (!ends.empty())
      ends.back() = end;  // an empty or whitespace-only document joins the previous one
    start = end;
  }
  check_enough_documents(ends.size(), separator);
  const size_t n_val = validation_documents(ends.size(), val_fraction);
  const size_t cut = ends[ends.size() - n_val - 1];
  TextSplit s;
  s.train = text.substr(0, cut);
  s.val = text.substr(cut);
  s.train_documents = ends.size() - n_val;
  s.val_documents = n_val;
  return s;
}

std::string document_separator(const data::Tokenizer& tokenizer) {
  const auto& specials = tokenizer.model().special_tokens;
  return specials.empty() ? std::string("\n\n") : specials.front();
}

TokenizedText tokenize_text_inputs(const std::vector<data::TextInput>& inputs, const std::string& separator,
                                   const data::DocumentEncoder& encode, const TextInputOptions& options) {
  const double fraction = options.val_fraction;
  TG_CHECK(fraction == 0 || (fraction > 0 && fraction < 1),
           "the validation fraction must be in (0, 1) (or 0 for none), got {}", fraction);
  TG_CHECK(!inputs.empty(), "tokenize_text_inputs: no input");
  data::DocumentReader reader(inputs, separator, options.text_field, options.read_block_bytes);
  data::EncodedDocuments encoded = data::encode_documents(reader, encode, options.chunk_bytes, options.progress);
  TokenizedText out;
  out.bytes = encoded.bytes;
  if (fraction == 0) {
    TG_CHECK(encoded.documents > 0, "{}: no text (only whitespace, or nothing)", inputs_name(inputs));
    out.train = std::move(encoded.ids);
    out.train_documents = encoded.documents;
    return out;
  }
  TG_CHECK(encoded.documents > 0, "{}: no text (only whitespace, or nothing)", inputs_name(inputs));
  if (encoded.documents == 1) {  // one document (no separator in the text): its tail of tokens is held out
    TG_CHECK(encoded.ids.size() >= 2, "{}: {} token(s) of text: too few to hold out a validation part",
             inputs_name(inputs), encoded.ids.size());
    const size_t cut = encoded.ids.size() - validation_tokens(encoded.ids.size(), fraction);
    out.val.assign(encoded.ids.begin() + std::ptrdiff_t(cut), encoded.ids.end());
    encoded.ids.resize(cut);
    out.train = std::move(encoded.ids);
    out.train_documents = 1;
    out.val_by_tokens = true;
    return out;
  }
  const uint64_t n_val = validation_documents(encoded.documents, fraction);
  const uint64_t cut_document = encoded.documents - n_val;
  size_t k = 0;  // the chunk that holds the cut: the first whose documents reach it
  while (encoded.chunks[k].documents_end < cut_document) ++k;
  const uint64_t cut = encoded.chunks[k].documents_end == cut_document
                           ? encoded.chunks[k].tokens_end
                           : split_chunk(encoded, k, cut_document, inputs, separator, encode, options);
  out.val.assign(encoded.ids.begin() + std::ptrdiff_t(cut), encoded.ids.end());
  encoded.ids.resize(cut);
  out.train = std::move(encoded.ids);
  out.train_documents = cut_document;
  out.val_documents = n_val;
  return out;
}

TokenizedText tokenize_text_file(const std::string& path, data::Tokenizer& tokenizer, double val_fraction, int threads) {
  TextInputOptions options;
  options.val_fraction = val_fraction;
  return tokenize_text_inputs(data::resolve_text_inputs({path}, "--text"), document_separator(tokenizer),
                              data::bpe_document_encoder(tokenizer, std::max(threads, 1)), options);
}

}  // namespace tapegrad::lm
