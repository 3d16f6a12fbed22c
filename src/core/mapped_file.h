#pragma once
// A read-only memory map of a whole file. Model weights are used straight from the map where
// their layout suits the kernels.

#include <cstddef>
#include <cstdint>
#include <string>

namespace tokamak {

class MappedFile {
 public:
  // Throws Error naming the path when the file cannot be opened or mapped.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // The caller no longer needs the bytes [p, p + n) of the map: the whole pages inside it
  // leave this process's resident set (MADV_DONTNEED). They stay readable: a later read maps
  // them back from the page cache or the file. For weights repacked at load.
  void drop_pages(const void* p, size_t n) const;

 private:
  void release();

  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tokamak
