// byte_unicode.h — GPT-2's reversible byte <-> printable-unicode mapping, used by vocab.json and
// merges.txt: printable Latin-1 bytes map to themselves, the other 68 bytes to U+0100.. in byte order
// (so the space byte 0x20 is 'Ġ', U+0120).
#pragma once
#include <string>
#include <string_view>

namespace tapegrad::data {

// Raw bytes -> their GPT-2 unicode spelling, as UTF-8.
std::string bytes_to_gpt2_unicode(std::string_view bytes);
// GPT-2 unicode spelling (UTF-8) -> raw bytes. Throws tapegrad::Error naming `what` when the text is not
// valid UTF-8 or holds a character outside the 256-character GPT-2 alphabet.
std::string gpt2_unicode_to_bytes(std::string_view text, std::string_view what);

}  // namespace tapegrad::data
