#pragma once
// checksum64: a fast 64-bit checksum of a byte range, for detecting accidental damage to
// files we wrote ourselves (bit flips, torn or truncated writes, another program's file),
// at several GB/s. Not a cryptographic hash: it does not stand against someone crafting a
// file on purpose (whoever can write the directory can recompute any checksum anyway);
// identities that must not collide use SHA-256 (core/sha256.h), which runs ~20x slower
// here and would dominate the time to load a KV block from disk.
//
// Four independent 64-bit lanes take 32 bytes per round (multiply, rotate, multiply), so
// the loop has four dependency chains; the lanes, the length and the tail bytes are then
// folded and finished with a 64-bit avalanche. Every input bit reaches every output bit.

#include <cstddef>
#include <cstdint>

namespace tokamak {

uint64_t checksum64(const void* data, size_t n, uint64_t seed = 0);

}  // namespace tokamak
