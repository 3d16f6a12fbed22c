#include "engine/stop_checker.h"

#include <algorithm>
#include <cassert>
#include <utility>

namespace tokamak {

StopChecker::StopChecker(std::vector<std::string> stops) {
  automata_.reserve(stops.size());
  for (std::string& stop : stops) {
    assert(!stop.empty());
    Automaton a;
    a.pattern = std::move(stop);
    // failure[i] = length of the longest proper prefix of pattern[0, i] that is also its
    // suffix (the classic KMP prefix function).
    a.failure.assign(a.pattern.size(), 0);
    size_t border = 0;
    for (size_t i = 1; i < a.pattern.size(); ++i) {
      while (border > 0 && a.pattern[i] != a.pattern[border]) border = a.failure[border - 1];
      if (a.pattern[i] == a.pattern[border]) ++border;
      a.failure[i] = border;
    }
    max_held_ = std::max(max_held_, a.pattern.size() - 1);
    automata_.push_back(std::move(a));
  }
  held_.reserve(max_held_);
}

StopChecker::StopResult StopChecker::push(std::string_view delta) {
  if (matched_) return {std::string(), true, matched_};
  if (automata_.empty()) return {std::string(delta), false, std::nullopt};

  for (size_t j = 0; j < delta.size(); ++j) {
    const char byte = delta[j];
    std::optional<size_t> best;  // stop completed at this byte: longest, then lowest index
    for (size_t i = 0; i < automata_.size(); ++i) {
      Automaton& a = automata_[i];
      size_t state = a.state;
      while (state > 0 && a.pattern[state] != byte) state = a.failure[state - 1];
      if (a.pattern[state] == byte) ++state;
      a.state = state;
      if (state == a.pattern.size() &&
          (!best || a.pattern.size() > automata_[*best].pattern.size())) {
        best = i;
      }
    }
    if (best) {
      // The stream so far is held_ + delta[0, j]; the stop string is its last bytes, and
      // everything before them was either emitted already or is still held.
      const size_t end = held_.size() + j + 1;
      const size_t start = end - automata_[*best].pattern.size();
      std::string emit;
      if (start <= held_.size()) {
        emit.assign(held_, 0, start);
      } else {
        emit = std::move(held_);
        emit.append(delta.substr(0, start - emit.size()));
      }
      held_.clear();
      matched_ = best;
      return {std::move(emit), true, matched_};
    }
  }

  // No stop: hold back the longest partial match, emit the rest.
  size_t hold = 0;
  for (const Automaton& a : automata_) hold = std::max(hold, a.state);
  assert(hold <= max_held_ && hold <= held_.size() + delta.size());
  const size_t emit_bytes = held_.size() + delta.size() - hold;
  std::string emit;
  if (emit_bytes <= held_.size()) {
    emit.assign(held_, 0, emit_bytes);
    held_.erase(0, emit_bytes);
    held_.append(delta);
  } else {
    const size_t from_delta = emit_bytes - held_.size();
    emit.reserve(emit_bytes);
    emit.append(held_);
    emit.append(delta.substr(0, from_delta));
    held_.assign(delta.substr(from_delta));
  }
  return {std::move(emit), false, std::nullopt};
}

std::string StopChecker::flush() {
  if (matched_) return std::string();
  for (Automaton& a : automata_) a.state = 0;
  return std::exchange(held_, std::string());
}

}  // namespace tokamak
