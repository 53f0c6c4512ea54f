// fuzz_text_inputs.cpp — libFuzzer target: the input is a JSONL file (and the same bytes as a plain-text
// file) read by data::DocumentReader (document_reader.h, text_inputs.h). The first byte picks the read
// block size and whether the text field is "text" or "t". Asserts: the reader throws only tapegrad::Error,
// and a JSONL error is one line starting "FILE:LINE: " with a line number inside the file; every JSONL
// document ends with the separator and there are no more documents than lines; plain text comes back
// exactly (the documents joined are the bytes, when there is any document), each document but the
// last ends with the separator; and a reader made at any document's position() reads the same rest.
#include <string>
#include <vector>

#include "data/document_reader.h"
#include "fuzz_common.h"
#include "kernels/error.h"

using namespace tapegrad;
using namespace tapegrad::data;

namespace {

const std::string kSeparator = "<|endoftext|>";

struct Read {
  std::vector<std::string> documents;
  std::vector<DocumentPosition> starts;
};

Read read_all(const std::vector<TextInput>& inputs, const std::string& field, size_t block, DocumentPosition from = {}) {
  DocumentReader reader(inputs, kSeparator, field, block, from);
  Read r;
  std::string d;
  for (;;) {
    const DocumentPosition at = reader.position();
    if (!reader.next(d)) break;
    r.starts.push_back(at);
    r.documents.push_back(d);
  }
  FUZZ_ASSERT(reader.bytes_read() == reader.bytes_total(), "bytes_read does not reach the file size at the end");
  return r;
}

// Reading again from every document's start gives the same documents from there.
void check_positions(const std::vector<TextInput>& inputs, const std::string& field, size_t block, const Read& r) {
  for (size_t i = 0; i < r.starts.size(); i += 1 + r.starts.size() / 8) {
    const Read again = read_all(inputs, field, block, r.starts[i]);
    FUZZ_ASSERT(again.documents.size() == r.documents.size() - i, "a reread from a position has another count");
    for (size_t k = 0; k < again.documents.size(); ++k)
      FUZZ_ASSERT(again.documents[k] == r.documents[i + k], "a reread from a position gives another document");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::MemFile input("text_inputs");
  if (size == 0) return 0;
  const uint8_t control = data[0];
  const std::string_view bytes = fuzz::as_view(data + 1, size - 1);
  const std::string& path = input.set(bytes);
  const size_t block = 1 + (control & 0x1f);
  const std::string field = control & 0x80 ? "t" : "text";
  size_t lines = 0;
  for (char c : bytes) lines += c == '\n';
  lines += !bytes.empty() && bytes.back() != '\n';

  // As JSONL.
  const std::vector<TextInput> jsonl{{path, TextFormat::jsonl, bytes.size()}};
  try {
    const Read r = read_all(jsonl, field, block);
    FUZZ_ASSERT(r.documents.size() <= lines, "more JSONL documents than lines");
    for (const std::string& d : r.documents)
      FUZZ_ASSERT(d.size() >= kSeparator.size() && d.ends_with(kSeparator), "a JSONL document lacks the separator");
    check_positions(jsonl, field, block, r);
  } catch (const Error& e) {
    const std::string what = e.what();
    FUZZ_ASSERT(what.starts_with(path + ":"), "a JSONL error does not start with FILE: " + what);
    const size_t line = std::stoul(what.substr(path.size() + 1));
    FUZZ_ASSERT(line >= 1 && line <= lines, "a JSONL error names a line outside the file: " + what);
    FUZZ_ASSERT(what.find('\n') == std::string::npos, "a JSONL error spans lines: " + what);
    fuzz::note_rejected(e.what());
  }

  // As plain text: nothing is lost or added, and only tapegrad::Error may surface (none is expected).
  const std::vector<TextInput> plain{{path, TextFormat::plain, bytes.size()}};
  const Read r = read_all(plain, field, block);
  std::string joined;
  for (size_t i = 0; i < r.documents.size(); ++i) {
    joined += r.documents[i];
    if (i + 1 < r.documents.size())
      FUZZ_ASSERT(r.documents[i].find(kSeparator) != std::string::npos, "a plain document has no separator");
  }
  FUZZ_ASSERT(r.documents.empty() || joined == bytes, "the plain documents joined are not the text");
  check_positions(plain, field, block, r);
  return 0;
}
