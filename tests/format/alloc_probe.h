#pragma once
// Measures the largest single heap allocation this thread makes while an AllocProbe lives, by
// replacing the global operator new in format_tests. Used to check that no size read from a
// hostile file turns into an allocation larger than the file could justify.
//
// Sanitizer builds keep ASan's allocator (replacing it would hide what ASan checks): there
// available() is false, and format_tests instead makes ASan fail any single allocation over
// kAsanAllocationLimitMb (see alloc_probe.cpp).

#include <cstddef>

namespace tokamak::gguf::test {

inline constexpr size_t kAsanAllocationLimitMb = 512;

class AllocProbe {
 public:
  AllocProbe();
  ~AllocProbe();
  AllocProbe(const AllocProbe&) = delete;
  AllocProbe& operator=(const AllocProbe&) = delete;

  static bool available();
  size_t largest() const;  // bytes; 0 when nothing was allocated (or !available())
};

}  // namespace tokamak::gguf::test
