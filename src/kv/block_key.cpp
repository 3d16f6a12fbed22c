#include "kv/block_key.h"

#include "core/sha256.h"

namespace tokamak {

BlockKey chain_block_key(const BlockKey& parent, std::span<const int32_t> tokens) {
  Sha256 sha;
  sha.update(parent.data(), parent.size());
  // Little-endian ids, 64 at a time (no allocation; one update per chunk).
  uint8_t chunk[256];
  size_t n = 0;
  for (int32_t t : tokens) {
    const uint32_t u = static_cast<uint32_t>(t);
    chunk[n++] = uint8_t(u);
    chunk[n++] = uint8_t(u >> 8);
    chunk[n++] = uint8_t(u >> 16);
    chunk[n++] = uint8_t(u >> 24);
    if (n == sizeof(chunk)) {
      sha.update(chunk, n);
      n = 0;
    }
  }
  sha.update(chunk, n);
  return sha.finish();
}

std::string block_key_hex(const BlockKey& key) {
  return to_hex(key);
}

}  // namespace tokamak
