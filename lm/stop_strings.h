// stop_strings.h — ending streamed text at the first of several stop strings (`chat --stop STRING`),
// where a stop string may be split across any number of tokens.
//
//   lm::StopStrings stop({"\nUser:"});
//   out += stop.push(bytes_of_token);   // the bytes that surely come before any stop string
//   if (stop.stopped()) break;          // a stop string was completed: nothing of it was returned
//   out += stop.finish();               // the stream ended without one: what was held back
//
// push() holds back the longest tail of the text that is the beginning of some stop string (so at most
// the longest stop string's length − 1 bytes); every byte before it can no longer be part of a match,
// so the first match, when it comes, starts inside the held-back tail plus the new bytes. Bytes, not
// characters: a stop string matches wherever its bytes occur.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace tapegrad::lm {

class StopStrings {
 public:
  // Throws tapegrad::Error for an empty stop string (it would match before the first byte).
  explicit StopStrings(std::vector<std::string> stops = {});

  // Appends bytes; returns those now known to precede any stop string. Once a stop string has been
  // completed, returns the bytes before it, and stopped() is true; later pushes return nothing.
  std::string push(std::string_view bytes);
  bool stopped() const { return stopped_; }
  // The held-back bytes (the stream ended without a stop string), and a fresh start.
  std::string finish();
  // Forgets the held-back bytes and the stop (a new stream).
  void reset();
  bool empty() const { return stops_.empty(); }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace tapegrad::lm
