#pragma once
// An owning, 64-byte aligned, zero-initialised array of trivially copyable elements: the
// storage behind workspaces and the KV cache (allocated once, at start).
//
// Large buffers (>= kLazyBytes) come straight from an anonymous mmap: the kernel hands out
// zero pages on first touch, so a multi-GiB KV pool costs nothing at start-up and resident
// memory grows only with the part in use (a memset would fault in every page up front).

#include <sys/mman.h>

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

template <typename T>
class AlignedBuffer {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t n) : size_(n) {
    if (n == 0) return;
    if (n > SIZE_MAX / sizeof(T) - kBufferAlignment) throw std::bad_alloc();
    size_t bytes = n * sizeof(T);
    bytes = (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
    if (bytes >= kLazyBytes) {
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      data_ = static_cast<T*>(p);  // page aligned, zero on first touch
      mapped_bytes_ = bytes;
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
