#pragma once
// How many KV blocks to allocate: from a memory budget in bytes, a fraction of the memory
// that is free now, or a token count (the CLI's --kv-memory / --kv-tokens).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tokamak {

struct KVBudget {
  enum class Kind { Bytes, FractionOfFree, Tokens };
  Kind kind = Kind::FractionOfFree;
  double value = 0.25;  // bytes, a fraction in (0, 1], or tokens

  // "4G", "512M", "1.5GiB", "1073741824" (bytes; K/M/G/T are powers of 1024, an optional
  // trailing "B" or "iB") or "0.3" / "30%" (a fraction of free memory). A plain number in
  // (0, 1] is a fraction ("1" is all free memory); above 1 it is a whole byte count. Throws
  // Error with the text and what was expected, also for zero, negative or over 1 PiB.
  static KVBudget parse_memory(std::string_view text);
  static KVBudget tokens(int64_t n);  // n >= 1, else Error

  // Blocks of bytes_per_block that this budget buys; free_bytes is the memory available now
  // (used by FractionOfFree only). Throws Error when that is fewer than one block; more than
  // INT32_MAX is clamped to INT32_MAX.
  int32_t blocks(size_t bytes_per_block, int32_t block_size, size_t free_bytes) const;

  std::string describe() const;  // "4.00 GiB", "25% of free memory", "8192 tokens"
};

// MemAvailable from /proc/meminfo in bytes, else the available physical pages from sysconf,
// or nullopt where neither can be read.
std::optional<size_t> available_memory_bytes();

}  // namespace tokamak
