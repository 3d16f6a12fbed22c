#include "engine/stop_checker.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "engine/rng.h"

namespace tokamak {
namespace {

struct Outcome {
  std::string text;  // everything emitted, flush included
  bool stopped = false;
  std::optional<size_t> index;

  bool operator==(const Outcome&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Outcome& o) {
  os << "{\"" << o.text << "\", stopped " << o.stopped;
  if (o.index) os << ", index " << *o.index;
  return os << "}";
}

// Streams `deltas` through a checker, checking on the way that the client never sees more
// than the final output and that the hold-back stays within its bound.
Outcome stream(const std::vector<std::string>& stops, const std::vector<std::string>& deltas) {
  StopChecker checker(stops);
  Outcome out;
  for (const std::string& delta : deltas) {
    const StopChecker::StopResult r = checker.push(delta);
    out.text += r.emit;
    EXPECT_LE(checker.held_bytes(), checker.max_held_bytes());
    if (r.stopped) {
      out.stopped = true;
      out.index = r.matched_stop_index;
      EXPECT_TRUE(checker.stopped());
      break;
    }
    EXPECT_FALSE(r.matched_stop_index.has_value());
  }
  if (!out.stopped) out.text += checker.flush();
  return out;
}

std::vector<std::string> bytes_of(const std::string& text) {
  std::vector<std::string> deltas;
  for (const char c : text) deltas.emplace_back(1, c);
  return deltas;
}

// The reference: scan the whole text for the first byte where some stop string ends (the
// longest of those ending there, then the lowest index); output what precedes it.
Outcome reference(const std::vector<std::string>& stops, const std::string& text) {
  for (size_t end = 1; end <= text.size(); ++end) {
    std::optional<size_t> best;
    for (size_t i = 0; i < stops.size(); ++i) {
      const std::string& s = stops[i];
      if (s.size() <= end && text.compare(end - s.size(), s.size(), s) == 0 &&
          (!best || s.size() > stops[*best].size())) {
        best = i;
      }
    }
    if (best) return {text.substr(0, end - stops[*best].size()), true, best};
  }
  return {text, false, std::nullopt};
}

// The plain reading: the text before the earliest-starting occurrence of any stop string.
// It agrees with the stream's answer unless one stop string lies strictly inside another
// ("bc" in "abcd"): then the inner one completes first and the stream stops there.
std::string earliest_start_output(const std::vector<std::string>& stops, const std::string& text) {
  size_t first = text.size();
  for (const std::string& s : stops) first = std::min(first, text.find(s));
  return text.substr(0, first);
}

bool has_inner_stop(const std::vector<std::string>& stops) {
  for (const std::string& outer : stops) {
    for (const std::string& inner : stops) {
      for (size_t at = 1; at + inner.size() < outer.size(); ++at) {
        if (outer.compare(at, inner.size(), inner) == 0) return true;
      }
    }
  }
  return false;
}

bool valid_utf8_boundaries(const std::string& text) {
  // Enough for the test's well-formed input: no emit may start with a continuation byte or end
  // inside a sequence.
  size_t i = 0;
  while (i < text.size()) {
    const auto b = static_cast<unsigned char>(text[i]);
    const size_t len = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 0;
    if (len == 0 || i + len > text.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

TEST(StopCheckerTest, NoStopsPassesEverythingThrough) {
  StopChecker checker({});
  EXPECT_EQ(checker.push("hello").emit, "hello");
  EXPECT_EQ(checker.held_bytes(), 0u);
  EXPECT_EQ(checker.flush(), "");
}

TEST(StopCheckerTest, StopInsideOneDelta) {
  EXPECT_EQ(stream({"STOP"}, {"abcSTOPdef"}), (Outcome{"abc", true, 0}));
  EXPECT_EQ(stream({"STOP"}, {"abc", "STOP"}), (Outcome{"abc", true, 0}));
}

TEST(StopCheckerTest, StopSplitAcrossOneByteDeltas) {
  EXPECT_EQ(stream({"</end>"}, bytes_of("answer</end>more")), (Outcome{"answer", true, 0}));
}

TEST(StopCheckerTest, StopSplitAcrossManyTokens) {
  EXPECT_EQ(stream({"\n\nUser:"}, {"Sure", ".", "\n", "\nUs", "er", ":", " hi"}),
            (Outcome{"Sure.", true, 0}));
}

TEST(StopCheckerTest, HoldsBackOnlyAPossibleStart) {
  StopChecker checker({"STOP"});
  auto r = checker.push("abcST");
  EXPECT_EQ(r.emit, "abc");
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(checker.held_bytes(), 2u);
  r = checker.push("Ox");  // "STOx" is not a stop: all of it goes out
  EXPECT_EQ(r.emit, "STOx");
  EXPECT_EQ(checker.held_bytes(), 0u);
  r = checker.push("S");
  EXPECT_EQ(r.emit, "");
  r = checker.push("TOP!");
  EXPECT_EQ(r.emit, "");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.matched_stop_index, 0u);
  // After a stop, nothing more comes out.
  r = checker.push("more");
  EXPECT_EQ(r.emit, "");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(checker.flush(), "");
}

TEST(StopCheckerTest, OverlappingStopStrings) {
  // Both start at 2; "ab" completes first.
  EXPECT_EQ(stream({"ab", "abc"}, {"xxabc"}), (Outcome{"xx", true, 0}));
  EXPECT_EQ(stream({"abc", "ab"}, bytes_of("xxabc")), (Outcome{"xx", true, 1}));
  // Two ending at the same byte: the longer one (it starts earlier) wins.
  EXPECT_EQ(stream({"bc", "abc"}, {"xxabc"}), (Outcome{"xx", true, 1}));
  EXPECT_EQ(stream({"bc", "abc"}, bytes_of("xxabc")), (Outcome{"xx", true, 1}));
  // A stop that completes first wins over a longer one still in progress.
  EXPECT_EQ(stream({"abcd", "bc"}, {"abcd"}), (Outcome{"a", true, 1}));
  EXPECT_EQ(stream({"abcd", "bc"}, bytes_of("abcd")), (Outcome{"a", true, 1}));
  // Duplicates: the lowest index.
  EXPECT_EQ(stream({"q", "zz", "zz"}, {"azzb"}), (Outcome{"a", true, 1}));
}

TEST(StopCheckerTest, StopAtTheVeryStart) {
  EXPECT_EQ(stream({"###"}, {"###rest"}), (Outcome{"", true, 0}));
  EXPECT_EQ(stream({"###"}, bytes_of("###rest")), (Outcome{"", true, 0}));
  EXPECT_EQ(stream({"a"}, {"a"}), (Outcome{"", true, 0}));
}

TEST(StopCheckerTest, RepeatedPartialMatches) {
  EXPECT_EQ(stream({"aab"}, bytes_of("aaab")), (Outcome{"a", true, 0}));
  EXPECT_EQ(stream({"aab"}, {"aa", "ab"}), (Outcome{"a", true, 0}));
  EXPECT_EQ(stream({"abab"}, bytes_of("abababx")), (Outcome{"", true, 0}));
  EXPECT_EQ(stream({"aabaab"}, bytes_of("aabaabaab")), (Outcome{"", true, 0}));
  EXPECT_EQ(stream({"aabaac"}, bytes_of("aabaabaacz")), (Outcome{"aab", true, 0}));
  // The held partial match is released piece by piece as it fails.
  StopChecker checker({"aab"});
  EXPECT_EQ(checker.push("aa").emit, "");
  EXPECT_EQ(checker.push("a").emit, "a");  // "aaa": only the last "aa" can still start it
  EXPECT_EQ(checker.held_bytes(), 2u);
  EXPECT_EQ(checker.push("c").emit, "aac");
}

TEST(StopCheckerTest, UnicodeStopStrings) {
  const std::string stop = "\xE3\x80\x82";  // "。"
  EXPECT_EQ(stream({stop}, {"\xE4\xBD\xA0\xE5\xA5\xBD", stop, "\xE5\x90\x97"}),
            (Outcome{"\xE4\xBD\xA0\xE5\xA5\xBD", true, 0}));
  EXPECT_EQ(stream({stop}, bytes_of("\xE4\xBD\xA0" + stop + "x")),
            (Outcome{"\xE4\xBD\xA0", true, 0}));
  // "é" vs "è": the same lead byte, a different character: no stop, nothing lost.
  EXPECT_EQ(stream({"caf\xC3\xA9!"}, {"caf", "\xC3\xA8", "!"}),
            (Outcome{"caf\xC3\xA8!", false, std::nullopt}));
  // The hold starts at the stop's first (lead) byte, so emits are whole characters.
  StopChecker checker({"\xF0\x9F\x98\x80\xF0\x9F\x98\x81"});  // two emoji
  auto r = checker.push("\xC3\xA9\xF0\x9F\x98\x80");
  EXPECT_EQ(r.emit, "\xC3\xA9");
  EXPECT_EQ(checker.held_bytes(), 4u);
  r = checker.push("\xC3\xA0");
  EXPECT_EQ(r.emit, "\xF0\x9F\x98\x80\xC3\xA0");
}

TEST(StopCheckerTest, FlushReleasesHeldText) {
  StopChecker checker({"STOP", "xyz"});
  EXPECT_EQ(checker.push("abcSTO").emit, "abc");
  EXPECT_EQ(checker.held_bytes(), 3u);
  EXPECT_EQ(checker.flush(), "STO");
  EXPECT_EQ(checker.flush(), "");
  EXPECT_EQ(checker.max_held_bytes(), 3u);
  EXPECT_EQ(stream({"STOP"}, {"ST", "O"}), (Outcome{"STO", false, std::nullopt}));
  EXPECT_EQ(stream({"STOP"}, {}), (Outcome{"", false, std::nullopt}));
  EXPECT_EQ(stream({"STOP"}, {"", "", "a"}), (Outcome{"a", false, std::nullopt}));
}

TEST(StopCheckerTest, MatchesTheReferenceOverRandomSplits) {
  // Small alphabets make overlaps, partial matches and crossing stop strings common.
  Rng rng(20240601);
  const auto below = [&](size_t n) { return static_cast<size_t>(rng.next() % n); };
  const std::string stop_alphabet = "abc";
  const std::string text_alphabet = "abcx";
  int stopped = 0;
  int plain = 0;  // cases where the earliest-start reading was checked too
  for (int iteration = 0; iteration < 5000; ++iteration) {
    std::vector<std::string> stops(1 + below(3));
    for (std::string& s : stops) {
      s.resize(1 + below(4));
      for (char& c : s) c = stop_alphabet[below(stop_alphabet.size())];
    }
    std::string text(below(40), ' ');
    for (char& c : text) c = text_alphabet[below(text_alphabet.size())];
    const Outcome expected = reference(stops, text);
    stopped += expected.stopped;
    if (!has_inner_stop(stops)) {
      ASSERT_EQ(expected.text, earliest_start_output(stops, text));
      ++plain;
    }
    for (int split = 0; split < 4; ++split) {
      std::vector<std::string> deltas;
      for (size_t at = 0; at < text.size();) {
        const size_t length = std::min(text.size() - at, below(6));  // empty deltas too
        deltas.push_back(text.substr(at, length));
        at += length;
      }
      ASSERT_EQ(stream(stops, deltas), expected) << "text " << text << ", stop[0] " << stops[0];
    }
  }
  EXPECT_GT(stopped, 1000);  // both outcomes are well covered
  EXPECT_LT(stopped, 4900);
  EXPECT_GT(plain, 2500);
}

TEST(StopCheckerTest, UnicodeEmitsAreWholeCharacters) {
  // Characters of 1 to 4 bytes; deltas split only between characters, as a detokenizer does.
  const std::vector<std::string> chars = {
      "a", "\xC3\xA9", "\xE3\x80\x82", "\xF0\x9F\x98\x80", "\xC3\xA8", "\xE3\x80\x81"};
  Rng rng(99);
  const auto below = [&](size_t n) { return static_cast<size_t>(rng.next() % n); };
  for (int iteration = 0; iteration < 2000; ++iteration) {
    std::vector<std::string> stops(1 + below(2));
    for (std::string& s : stops) {
      const size_t n = 1 + below(3);
      for (size_t i = 0; i < n; ++i) s += chars[below(chars.size())];
    }
    std::vector<std::string> deltas;
    std::string text;
    for (size_t d = below(12); d > 0; --d) {
      std::string delta;
      for (size_t n = below(3); n > 0; --n) delta += chars[below(chars.size())];
      text += delta;
      deltas.push_back(delta);
    }
    StopChecker checker(stops);
    Outcome out;
    for (const std::string& delta : deltas) {
      const auto r = checker.push(delta);
      ASSERT_TRUE(valid_utf8_boundaries(r.emit));
      out.text += r.emit;
      if (r.stopped) {
        out.stopped = true;
        out.index = r.matched_stop_index;
        break;
      }
    }
    if (!out.stopped) {
      const std::string rest = checker.flush();
      ASSERT_TRUE(valid_utf8_boundaries(rest));
      out.text += rest;
    }
    ASSERT_EQ(out, reference(stops, text));
  }
}

}  // namespace
}  // namespace tokamak
