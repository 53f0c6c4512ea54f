// text_split.cpp — the validation split by document (see text_split.h).
#include "lm/text_split.h"

#include <cmath>

#include "data/file_io.h"
#include "kernels/error.h"

namespace tapegrad::lm {

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
  TG_CHECK(ends.size() >= 2,
           "the text has {} document(s) (separated by '{}'): at least 2 are needed to hold out a validation part",
           ends.size(), separator == "\n\n" ? "\\n\\n (a blank line)" : std::string(separator));
  // ⌈fraction·n⌉ of the decimal the user wrote: 0.07·100 is 7.000000000000001 in doubles, and must give 7,
  // so a product within rounding error (relative 1e-12) of an integer counts as that integer.
  const double want = val_fraction * double(ends.size());
  size_t n_val = size_t(std::ceil(want - want * 1e-12));
  n_val = std::min(std::max<size_t>(n_val, 1), ends.size() - 1);
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

TokenizedText tokenize_text_file(const std::string& path, data::Tokenizer& tokenizer, double val_fraction, int threads) {
  const std::string text = data::read_whole_file(path, "the text file");
  TextSplit s;
  try {
    s = split_documents(text, document_separator(tokenizer), val_fraction);
  } catch (const Error& e) {
    throw Error(fmt::format("'{}': {}", path, e.what()));
  }
  TokenizedText out;
  out.train = tokenizer.encode_parallel(s.train, std::max(threads, 1));
  out.val = tokenizer.encode_parallel(s.val, std::max(threads, 1));
  out.train_documents = s.train_documents;
  out.val_documents = s.val_documents;
  out.bytes = text.size();
  return out;
}

}  // namespace tapegrad::lm
