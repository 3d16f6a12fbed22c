#pragma once
// BufferArena: storage handed out in pieces from large AlignedBuffers, all freed together
// when the arena goes. For data made once and kept for the arena's life, such as the
// repacked weights (CpuOps): one weight of a small model is a fraction of a 2 MiB page, and
// only pieces of one large buffer can share huge pages (core/aligned_buffer.h says why they
// are worth having). Pieces are zeroed on allocation (fresh mappings) and 64-byte aligned.
// Not thread-safe.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/aligned_buffer.h"

namespace tokamak {

class BufferArena {
 public:
  // Buffers of chunk_bytes (or one piece's size, when larger) on `pages`.
  explicit BufferArena(size_t chunk_bytes = size_t{64} << 20, Pages pages = Pages::Huge)
      : chunk_bytes_(chunk_bytes), pages_(pages) {}

  // `bytes` bytes, zero, kBufferAlignment-aligned, valid until the arena is destroyed.
  uint8_t* allocate(size_t bytes) {
    bytes =
        std::max<size_t>(1, (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment);
    if (chunks_.empty() || chunks_.back().size() - used_ < bytes) {
      chunks_.emplace_back(std::max(chunk_bytes_, bytes), pages_);
      used_ = 0;
    }
    uint8_t* p = chunks_.back().data() + used_;
    used_ += bytes;
    return p;
  }

  size_t n_chunks() const { return chunks_.size(); }

 private:
  size_t chunk_bytes_;
  Pages pages_;
  std::vector<AlignedBuffer<uint8_t>> chunks_;
  size_t used_ = 0;  // bytes handed out from the last chunk
};

}  // namespace tokamak
