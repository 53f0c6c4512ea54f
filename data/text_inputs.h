// text_inputs.h — what `train --text`, `eval --text` and `tokenize train|encode --input` accept: a list
// of files and directories, resolved here into the ordered list of input files, and the JSONL line
// reader (one document per line, its text in one string field).
//
//   A file given by name is read whatever its name, as JSONL when it ends in ".jsonl", else as plain
//   text. A directory stands for every file below it (recursively) whose name ends in ".txt",
//   ".text", ".md" (plain text) or ".jsonl" (JSONL), case-insensitively; entries whose name starts
//   with '.' are skipped (hidden files and whole hidden directories), symlinked directories are not
//   followed. The files of one directory come in bytewise order of their path relative to it
//   ("a/z.txt" < "b.txt" < "b/a.txt"), so the order never depends on the file system. A directory
//   with no such file is an error naming it. The inputs keep the order in which they were given;
//   a file given twice is read twice.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tapegrad::data {

enum class TextFormat { plain, jsonl };

struct TextInput {
  std::string path;
  TextFormat format = TextFormat::plain;
  uint64_t bytes = 0;  // the file's size when resolved (for progress)
};

// The files that `given` (files and directories) stands for, in order. `flag` (e.g. "--text") starts
// every error: a path that does not exist, cannot be opened, is neither a file nor a directory, or
// a directory without text files. Throws tapegrad::Error.
std::vector<TextInput> resolve_text_inputs(const std::vector<std::string>& given, std::string_view flag);

uint64_t total_bytes(const std::vector<TextInput>& inputs);

// The given paths joined by ", " (for messages and run_info).
std::string describe_inputs(const std::vector<std::string>& given);

// The document of one JSONL line: the string value of `field` in the JSON object on the line.
// std::nullopt for a blank line (only whitespace), which holds no document. Anything else throws
// tapegrad::Error "FILE:LINE: ..." (line 1-based) saying what is wrong: not JSON, not an object,
// no field `field`, or a field that is not a string.
std::optional<std::string> jsonl_document(std::string_view line, std::string_view field, std::string_view file,
                                          uint64_t line_number);

}  // namespace tapegrad::data
