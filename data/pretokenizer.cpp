// pretokenizer.cpp — PCRE2 (8-bit, UTF, UCP, MATCH_INVALID_UTF, JIT) behind RAII handles.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "data/pretokenizer.h"

#include <pcre2.h>

#include "kernels/error.h"

namespace tapegrad::data {

struct Pretokenizer::Impl {
  struct CodeDeleter {
    void operator()(pcre2_code* c) const { pcre2_code_free(c); }
  };
  struct MatchDataDeleter {
    void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
  };
  std::unique_ptr<pcre2_code, CodeDeleter> code;
  bool jit = false;
};

Pretokenizer::Pretokenizer(std::string_view pattern) : impl_(std::make_unique<Impl>()) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error_code, &error_offset,
                                   nullptr);
  if (!code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof message);
    throw Error(fmt::format("pretokenizer: pattern offset {}: {}", error_offset, reinterpret_cast<char*>(message)));
  }
  impl_->code.reset(code);
  impl_->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
}

Pretokenizer::~Pretokenizer() = default;
Pretokenizer::Pretokenizer(Pretokenizer&&) noexcept = default;
Pretokenizer& Pretokenizer::operator=(Pretokenizer&&) noexcept = default;

void Pretokenizer::split(std::string_view text, const std::function<void(std::string_view)>& on_pretoken) const {
  std::unique_ptr<pcre2_match_data, Impl::MatchDataDeleter> match(
      pcre2_match_data_create_from_pattern(impl_->code.get(), nullptr));
  TG_CHECK(match != nullptr, "pretokenizer: out of memory for match data");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t cursor = 0;  // everything before cursor has been handed out
  while (cursor < text.size()) {
    const int rc = impl_->jit ? pcre2_jit_match(impl_->code.get(), subject, text.size(), cursor, 0, match.get(), nullptr)
                              : pcre2_match(impl_->code.get(), subject, text.size(), cursor, 0, match.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof message);
      throw Error(fmt::format("pretokenizer: byte offset {}: {}", cursor, reinterpret_cast<char*>(message)));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match.get());
    const size_t start = ov[0], end = ov[1];
    if (start > cursor) on_pretoken(text.substr(cursor, start - cursor));  // bytes the regex cannot match
    if (end > start) {
      on_pretoken(text.substr(start, end - start));
      cursor = end;
    } else {
      cursor = start + 1;  // cannot happen with the GPT-2 pattern (no empty matches); never loop forever
      if (start < text.size()) on_pretoken(text.substr(start, 1));
    }
  }
  if (cursor < text.size()) on_pretoken(text.substr(cursor));
}

}  // namespace tapegrad::data
