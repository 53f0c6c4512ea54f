// document_reader.h — the documents of a list of input files (text_inputs.h), one at a time, so that
// a corpus of any size streams through in memory of about one document plus one read block.
//
// A document is the text up to and including the next occurrence of the separator (the tokenizer's
// end-of-text token, or "\n\n"), found as std::string_view::find would in the file's text (one that
// straddles two files, "\n" + "\n", is not one); a piece whose text before the separator is only
// whitespace (" \t\r\n") joins the previous document (or the next one, at the start), exactly as
// lm::split_documents does. Documents are what lies between separators, whatever file they came from,
// with one addition: when a plain-text file has more than whitespace after its last separator, the
// separator is inserted after it (except after the last input, which is taken as written, as
// `train --text FILE` always did), so no document has text of two inputs. Whitespace after a file's last
// separator starts the next document (the next input's first), as in the joined text; after the last
// input it ends the last document. A JSONL file gives one document per non-blank line (jsonl_document),
// each followed by the separator — the line's text whole, even when it holds the separator itself. So
// the documents of plain-text inputs are exactly those of split_documents on the concatenation of the
// inputs with these separators inserted (issue 35 §4: whitespace after a file's last separator used to
// stay with that file's last document, so chunked encoding differed from whole-text encoding); a JSONL
// text that contains the separator is one document here where split_documents of the joined text would
// cut it in two.
//
// position() says where the next document starts; a reader made with that position reads the same
// documents from there on (used to read one chunk again when the validation cut falls inside it).
#pragma once
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "data/text_inputs.h"

namespace tapegrad::data {

struct DocumentPosition {
  size_t input = 0;        // index into the inputs
  uint64_t offset = 0;     // byte offset in that file
  uint64_t line = 1;       // JSONL: the line number at offset (1-based)
};

class DocumentReader {
 public:
  // block_bytes (> 0): how much of a plain-text file is read at a time. Throws tapegrad::Error when
  // the separator is empty; file errors surface when the file is reached (naming it).
  DocumentReader(std::vector<TextInput> inputs, std::string separator, std::string text_field = "text",
                 size_t block_bytes = size_t(1) << 20, DocumentPosition start = {});

  // Replaces `out` with the next document (separator included); false when there is none left.
  bool next(std::string& out);
  DocumentPosition position() const;
  uint64_t bytes_read() const;  // input bytes consumed (for progress; can run ahead of position())
  uint64_t bytes_total() const { return bytes_total_; }
  const std::string& separator() const { return separator_; }

 private:
  // The next piece (up to a separator, or a file's end) and whether its text before the separator
  // has anything but whitespace; false when every input is read.
  bool next_piece(std::string& piece, bool& content, DocumentPosition& at);
  bool plain_piece(std::string& piece, bool& content);
  bool jsonl_piece(std::string& piece, bool& content);
  void open_input();
  DocumentPosition read_position() const;

  std::vector<TextInput> inputs_;
  std::string separator_, text_field_;
  size_t block_bytes_;
  uint64_t bytes_total_ = 0;

  size_t input_ = 0;            // the input being read
  bool open_ = false;
  std::ifstream in_;
  uint64_t finished_bytes_ = 0;  // bytes of the inputs before input_
  // plain text: buffer_ holds the file's bytes from buffer_offset_, consumed up to begin_
  std::string buffer_;
  uint64_t buffer_offset_ = 0;
  size_t begin_ = 0, search_from_ = 0;
  bool file_end_ = false;
  // JSONL
  uint64_t line_offset_ = 0, line_number_ = 1;
  std::string line_;

  std::string carry_;  // whitespace after a plain file's last separator, the start of the next piece
  DocumentPosition carry_at_;
  std::string held_;  // the first piece of the next document, already read
  DocumentPosition held_at_;
  bool holding_ = false;
};

}  // namespace tapegrad::data
