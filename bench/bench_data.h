#pragma once
// Test data for the kernel benchmarks: seeded random floats, and Rotation, which keeps copies
// of an operand so that the benchmark can stream it from DRAM the way a model's forward does.
//
// Why copies: a decode step reads every layer's weights once, ~100 MB for SmolLM2-135M Q4_1
// and ~1 GB for a 1B model, more than the last-level cache, so they come from DRAM. A
// benchmark that calls one 576x576 matmul over and over reads 200 KB from L2 instead and
// says nothing about decode. Rotation holds enough copies to fill a footprint several times
// the LLC and hands them out in turn ("cold"); with a footprint of 0 it holds one ("hot").

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/aligned_buffer.h"

namespace tokamak::bench {

// x[i] uniform in [-1, 1), from a SplitMix64 stream: fast enough for 100 M values.
inline void fill_random(float* x, size_t n, uint64_t seed) {
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    x[i] = static_cast<float>(static_cast<double>(z >> 40) * 0x1p-23 - 1.0);
  }
}

// Copies of `bytes` bytes, each page-aligned, enough of them to cover `footprint` bytes (at
// least one), handed out in turn by next().
class Rotation {
 public:
  Rotation() = default;
  Rotation(const void* src, size_t bytes, size_t footprint) {
    stride_ = (bytes + 4095) / 4096 * 4096;
    copies_ = std::max<size_t>(1, (footprint + stride_ - 1) / stride_);
    buf_ = AlignedBuffer<uint8_t>(stride_ * copies_, Pages::Huge);  // as a model's weights are
    for (size_t c = 0; c < copies_; ++c) std::memcpy(buf_.data() + c * stride_, src, bytes);
  }

  size_t copies() const { return copies_; }
  uint8_t* next() {
    uint8_t* p = buf_.data() + next_ * stride_;
    next_ = next_ + 1 == copies_ ? 0 : next_ + 1;
    return p;
  }

 private:
  AlignedBuffer<uint8_t> buf_;
  size_t stride_ = 0;
  size_t copies_ = 0;
  size_t next_ = 0;
};

}  // namespace tokamak::bench
