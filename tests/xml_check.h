// xml_check.h — a small XML well-formedness check for the SVG files the tool writes (no DTDs,
// CDATA or comments needed): one root element, tags nested and closed in order, attribute values
// quoted with no raw '<', '&' only as an entity. Returns "" when well-formed, else what is wrong,
// and counts the elements by name.
#pragma once
#include <cctype>
#include <map>
#include <string>
#include <vector>

namespace tapegrad::testing {

inline bool valid_entity_at(const std::string& s, size_t i) {
  for (const char* e : {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"})
    if (s.compare(i, std::char_traits<char>::length(e), e) == 0) return true;
  return false;
}

inline std::string xml_problem(const std::string& s, std::map<std::string, int>* counts = nullptr) {
  std::vector<std::string> stack;
  size_t i = 0;
  int roots = 0;
  if (s.compare(0, 5, "<?xml") == 0) {
    i = s.find("?>");
    if (i == std::string::npos) return "unterminated XML declaration";
    i += 2;
  }
  while (i < s.size()) {
    if (s[i] != '<') {
      if (s[i] == '&' && !valid_entity_at(s, i)) return "bare '&' at " + std::to_string(i);
      if (stack.empty() && !std::isspace(static_cast<unsigned char>(s[i]))) return "text outside the root at " + std::to_string(i);
      ++i;
      continue;
    }
    const bool closing = i + 1 < s.size() && s[i + 1] == '/';
    size_t j = i + (closing ? 2 : 1);
    const size_t name_start = j;
    while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '-' || s[j] == ':' || s[j] == '_')) ++j;
    const std::string name = s.substr(name_start, j - name_start);
    if (name.empty()) return "a tag without a name at " + std::to_string(i);
    // attributes up to '>' or '/>'
    while (j < s.size() && s[j] != '>' && !(s[j] == '/' && j + 1 < s.size() && s[j + 1] == '>')) {
      if (s[j] == '"' || s[j] == '\'') {
        const char q = s[j];
        const size_t end = s.find(q, j + 1);
        if (end == std::string::npos) return "unterminated attribute value in <" + name + ">";
        for (size_t k = j + 1; k < end; ++k) {
          if (s[k] == '<') return "'<' in an attribute of <" + name + ">";
          if (s[k] == '&' && !valid_entity_at(s, k)) return "bare '&' in an attribute of <" + name + ">";
        }
        j = end + 1;
      } else if (s[j] == '<') {
        return "'<' inside the tag <" + name + ">";
      } else {
        ++j;
      }
    }
    if (j >= s.size()) return "unterminated tag <" + name + ">";
    const bool self_closing = s[j] == '/';
    i = j + (self_closing ? 2 : 1);
    if (closing) {
      if (stack.empty() || stack.back() != name) return "</" + name + "> closes " + (stack.empty() ? "nothing" : "<" + stack.back() + ">");
      stack.pop_back();
      continue;
    }
    if (stack.empty() && ++roots > 1) return "more than one root element";
    if (counts) ++(*counts)[name];
    if (!self_closing) stack.push_back(name);
  }
  if (!stack.empty()) return "<" + stack.back() + "> is never closed";
  return roots == 1 ? "" : "no root element";
}

}  // namespace tapegrad::testing
