#pragma once
// StopChecker: finds stop strings in streamed output text and holds back whatever might be
// the start of one, so the client never sees any byte of a stop string.
//
// Semantics (those of a stream): generation ends at the first byte where some stop string
// becomes complete. The output is the text before that stop string; the stop string and
// anything after it are dropped. When several stop strings complete at the same byte, the
// longest wins (it starts earliest, so less is shown), then the lowest index. The result
// depends only on the concatenated text, never on how it was split into deltas.
//
//   stops "ab", "abc";  text "xxabc"  ->  emits "xx", stop 0 ("ab" completes first)
//   stops "abcd", "bc"; text "abcd"   ->  emits "a",  stop 1 ("bc" completes at byte 3;
//                                          "abcd" never completes, as generation ends there)
//
// Matching runs one Knuth-Morris-Pratt automaton per stop string over each new byte, so a
// push costs O(delta bytes * stop strings). The automata's longest partial match says how
// many trailing bytes to hold back: never more than the longest stop string minus one. Held
// text always starts where a stop string would start; with valid UTF-8 stop strings (which
// SamplingParams::validate checks) that is a character boundary, so an emit splits a
// multi-byte character only if the deltas themselves did.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tokamak {

class StopChecker {
 public:
  struct StopResult {
    std::string emit;  // text that is safe to show now
    bool stopped = false;
    std::optional<size_t> matched_stop_index;  // index into the stop strings when stopped
  };

  // `stops`: non-empty strings (SamplingParams::validate guarantees it). No stops: every
  // push emits its delta at once.
  explicit StopChecker(std::vector<std::string> stops);

  // Feeds the next piece of output text. Once stopped, further pushes emit nothing and
  // report the same stop.
  StopResult push(std::string_view delta);

  // End of output without a stop (EOS, max_tokens, cancel): releases the held-back text.
  // Returns "" once stopped or when called again.
  std::string flush();

  bool stopped() const { return matched_.has_value(); }
  size_t held_bytes() const { return held_.size(); }
  size_t max_held_bytes() const { return max_held_; }

 private:
  struct Automaton {
    std::string pattern;
    std::vector<size_t> failure;  // failure[i]: longest proper border of pattern[0, i]
    size_t state = 0;             // bytes of pattern matched by the end of the stream
  };

  std::vector<Automaton> automata_;
  std::string held_;  // the last `max state` bytes of the stream, not yet emitted
  size_t max_held_ = 0;
  std::optional<size_t> matched_;
};

}  // namespace tokamak
