#pragma once
// An owning, 64-byte aligned, zero-initialised array of trivially copyable elements: the
// storage behind workspaces and the KV cache (allocated once, at start).
//
// Large buffers (>= kLazyBytes) come straight from an anonymous mmap: the kernel hands out
// zero pages on first touch, so a multi-GiB KV pool costs nothing at start-up and resident
// memory grows only with the part in use (a memset would fault in every page up front).
//
// Pages::Huge asks for transparent huge pages (2 MiB) on such a buffer, placed on a 2 MiB
// boundary so that every whole 2 MiB of it can get one: for data streamed end to end over
// and over, the repacked weights. A decode step reads every weight once, and with 4 KiB pages
// that is a TLB miss (a nested page walk, in a guest) every 4 KiB: on the Zen 4 guest the 1B
// shape's Q4_0 decode matmuls took 19.6 / 17.5 / 23.1 ms a token with the weights on huge
// pages against 25.6 / 21.6 / 23.9 without (alternating runs; BENCHMARKS.md, "The weights on
// huge pages"). Not for the KV pool: blocks are touched a few at a
// time as sequences grow, and a first touch would zero 2 MiB instead of 4 KiB (the K/V writes
// of a fresh pool went from 1.0 to 2.0-2.5 ms a decode step). A hint: where the kernel has no
// huge pages to give, the buffer is the same, on 4 KiB pages.

#include <sys/mman.h>
#include <unistd.h>

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <span>
#include <type_traits>
#include <utility>

namespace tokamak {

inline constexpr size_t kBufferAlignment = 64;
inline constexpr size_t kLazyBytes = size_t{1} << 20;
inline constexpr size_t kHugePageBytes = size_t{2} << 20;

enum class Pages : uint8_t { Normal, Huge };

template <typename T>
class AlignedBuffer {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t n, Pages pages = Pages::Normal) : size_(n) {
    if (n == 0) return;
    if (n > SIZE_MAX / sizeof(T) - kBufferAlignment - kHugePageBytes) throw std::bad_alloc();
    size_t bytes = n * sizeof(T);
    bytes = (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
    if (bytes >= kLazyBytes) {
      data_ = static_cast<T*>(pages == Pages::Huge ? map_huge(bytes) : map(bytes));
      mapped_bytes_ = bytes;  // page aligned, zero on first touch
      return;
    }
    data_ = static_cast<T*>(std::aligned_alloc(kBufferAlignment, bytes));
    if (data_ == nullptr) throw std::bad_alloc();
    std::memset(static_cast<void*>(data_), 0, bytes);
  }
  ~AlignedBuffer() { release(); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)),
        size_(std::exchange(o.size_, 0)),
        mapped_bytes_(std::exchange(o.mapped_bytes_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    if (this != &o) {
      release();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
      mapped_bytes_ = std::exchange(o.mapped_bytes_, 0);
    }
    return *this;
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) {
    assert(i < size_);
    return data_[i];
  }
  const T& operator[](size_t i) const {
    assert(i < size_);
    return data_[i];
  }
  std::span<T> span() { return {data_, size_}; }
  std::span<const T> span() const { return {data_, size_}; }

 private:
  static void* map(size_t bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return p;
  }
  // `bytes` starting on a 2 MiB boundary: map 2 MiB more, give back what lies outside.
  static void* map_huge(size_t bytes) {
    const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t length = (bytes + page - 1) / page * page;  // what mmap maps for `bytes`
    auto* p = static_cast<uint8_t*>(map(length + kHugePageBytes));
    const size_t head =
        (kHugePageBytes - reinterpret_cast<uintptr_t>(p) % kHugePageBytes) % kHugePageBytes;
    if (head > 0) munmap(p, head);
    munmap(p + head + length, kHugePageBytes - head);
    madvise(p + head, length, MADV_HUGEPAGE);  // a hint: refused, the pages stay 4 KiB
    return p + head;
  }

  void release() {
    if (mapped_bytes_ > 0) {
      munmap(data_, mapped_bytes_);
    } else {
      std::free(data_);
    }
    data_ = nullptr;
  }

  T* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_bytes_ = 0;  // non-zero when data_ came from mmap
};

}  // namespace tokamak
