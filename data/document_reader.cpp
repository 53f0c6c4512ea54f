// document_reader.cpp — pieces up to each separator (plain text read in blocks; JSONL by lines),
// joined into documents by the whitespace rule of document_reader.h.
#include "data/document_reader.h"

#include <algorithm>
#include <string_view>

#include "kernels/error.h"

namespace tapegrad::data {
namespace {

bool has_content(std::string_view body) { return body.find_first_not_of(" \t\r\n") != std::string_view::npos; }

}  // namespace

DocumentReader::DocumentReader(std::vector<TextInput> inputs, std::string separator, std::string text_field,
                               size_t block_bytes, DocumentPosition start)
    : inputs_(std::move(inputs)), separator_(std::move(separator)), text_field_(std::move(text_field)),
      block_bytes_(block_bytes), bytes_total_(total_bytes(inputs_)) {
  TG_CHECK(!separator_.empty(), "DocumentReader: the document separator is empty");
  TG_CHECK(block_bytes_ > 0, "DocumentReader: block_bytes must be positive");
  TG_CHECK(start.input <= inputs_.size(), "DocumentReader: start input {} is past the {} inputs", start.input,
           inputs_.size());
  for (size_t i = 0; i < start.input; ++i) finished_bytes_ += inputs_[i].bytes;
  input_ = start.input;
  if (input_ < inputs_.size()) {
    open_input();
    if (start.offset > 0) {
      in_.seekg(std::streamoff(start.offset));
      TG_CHECK(in_.good(), "{}: cannot seek to byte {} (did the file change while it was read?)", inputs_[input_].path,
               start.offset);
    }
    buffer_offset_ = line_offset_ = start.offset;
    line_number_ = start.line;
  }
}

void DocumentReader::open_input() {
  const std::string& path = inputs_[input_].path;
  in_ = std::ifstream(path, std::ios::binary);
  TG_CHECK(in_.good(), "cannot open {} for reading", path);
  buffer_.clear();
  buffer_offset_ = 0;
  begin_ = search_from_ = 0;
  file_end_ = false;
  line_offset_ = 0;
  line_number_ = 1;
  open_ = true;
}

DocumentPosition DocumentReader::read_position() const {
  if (!open_) return {input_, 0, 1};
  if (inputs_[input_].format == TextFormat::jsonl) return {input_, line_offset_, line_number_};
  return {input_, buffer_offset_ + begin_, 1};
}

DocumentPosition DocumentReader::position() const { return holding_ ? held_at_ : read_position(); }

uint64_t DocumentReader::bytes_read() const {
  if (!open_) return finished_bytes_;
  const bool jsonl = inputs_[input_].format == TextFormat::jsonl;
  return finished_bytes_ + (jsonl ? line_offset_ : buffer_offset_ + buffer_.size());
}

bool DocumentReader::plain_piece(std::string& piece, bool& content) {
  const size_t sep = separator_.size();
  for (;;) {
    const size_t at = buffer_.find(separator_, std::max(begin_, search_from_));
    if (at != std::string::npos) {
      piece.assign(buffer_, begin_, at + sep - begin_);
      content = has_content(std::string_view(buffer_).substr(begin_, at - begin_));
      begin_ = search_from_ = at + sep;
      return true;
    }
    if (file_end_) break;
    // Keep the unconsumed tail, read the next block; a separator may start in the last sep-1 bytes.
    buffer_.erase(0, begin_);
    buffer_offset_ += begin_;
    begin_ = 0;
    search_from_ = buffer_.size() >= sep ? buffer_.size() - sep + 1 : 0;
    const size_t old = buffer_.size();
    buffer_.resize(old + block_bytes_);
    in_.read(buffer_.data() + old, std::streamsize(block_bytes_));
    const auto got = size_t(in_.gcount());
    buffer_.resize(old + got);
    if (got < block_bytes_) {
      TG_CHECK(!in_.bad(), "{}: read error at byte {}", inputs_[input_].path, buffer_offset_ + buffer_.size());
      file_end_ = true;
    }
  }
  if (begin_ == buffer_.size()) return false;  // the file ended with a separator (or is empty)
  piece.assign(buffer_, begin_);
  content = has_content(piece);
  begin_ = buffer_.size();
  // The next input starts a new document (a whitespace-only tail just ends this one).
  if (content && input_ + 1 < inputs_.size()) piece += separator_;
  return true;
}

bool DocumentReader::jsonl_piece(std::string& piece, bool& content) {
  while (std::getline(in_, line_)) {
    const uint64_t number = line_number_;
    line_offset_ += line_.size() + (in_.eof() ? 0 : 1);
    ++line_number_;
    std::optional<std::string> document = jsonl_document(line_, text_field_, inputs_[input_].path, number);
    if (!document) continue;  // a blank line
    content = has_content(*document);
    piece = std::move(*document);
    piece += separator_;
    return true;
  }
  TG_CHECK(!in_.bad(), "{}: read error after line {}", inputs_[input_].path, line_number_ - 1);
  return false;
}

bool DocumentReader::next_piece(std::string& piece, bool& content, DocumentPosition& at) {
  while (input_ < inputs_.size()) {
    if (!open_) open_input();
    at = read_position();
    const bool got = inputs_[input_].format == TextFormat::jsonl ? jsonl_piece(piece, content)
                                                                 : plain_piece(piece, content);
    if (got) {
      // Whitespace after a plain file's last separator (no separator follows it) starts the next input's
      // first piece, as it does in the joined text: carried over (with where it starts), not left behind.
      if (!content && !piece.ends_with(separator_) && input_ + 1 < inputs_.size()) {
        if (carry_.empty()) carry_at_ = at;
        carry_ += piece;
        continue;
      }
      if (!carry_.empty()) {
        piece.insert(0, carry_);
        carry_.clear();
        at = carry_at_;
      }
      return true;
    }
    finished_bytes_ += inputs_[input_].bytes;
    in_.close();
    open_ = false;
    buffer_.clear();
    buffer_.shrink_to_fit();
    ++input_;
  }
  if (carry_.empty()) return false;
  // Only whitespace followed the carried text: it ends the last document, as trailing whitespace does.
  piece.swap(carry_);
  carry_.clear();
  content = false;
  at = carry_at_;
  return true;
}

bool DocumentReader::next(std::string& out) {
  out.clear();
  bool content = false;
  if (holding_) {
    out.swap(held_);
    holding_ = false;
    content = true;
  }
  std::string piece;
  bool piece_content = false;
  DocumentPosition at;
  while (next_piece(piece, piece_content, at)) {
    if (piece_content && content) {  // the start of the next document
      held_.swap(piece);
      held_at_ = at;
      holding_ = true;
      return true;
    }
    out += piece;
    content = content || piece_content;
  }
  return content;
}

}  // namespace tapegrad::data
