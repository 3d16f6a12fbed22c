#pragma once
// SHA-256 (FIPS 180-4), for checking model files and fixtures against recorded digests.

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace tokamak {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t n);
  std::array<uint8_t, 32> finish();

 private:
  void block(const uint8_t* p);

  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_{};
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

std::string to_hex(const std::array<uint8_t, 32>& digest);
// Lower-case hex digest of a whole file; throws Error naming the path if it cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace tokamak
