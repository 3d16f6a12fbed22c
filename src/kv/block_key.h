#pragma once
// BlockKey: the identity of one full KV block outside the pool (host and disk tiers): a
// SHA-256 chained over the token ids from the first block to this one,
//
//   key(block 0) = SHA-256(zeros(32) || tokens of block 0)
//   key(block i) = SHA-256(key(block i - 1) || tokens of block i)     (ids as little-endian int32)
//
// so equal keys mean equal token prefixes (the K/V of a block depends on nothing else, for
// one model, KV dtype and block size). Tiers still store each block's parent key and tokens
// and compare them on lookup, as the radix tree compares tokens: a hash collision could only
// serve wrong K/V if SHA-256 collided on the parent chain too.

#include <array>
#include <cstdint>
#include <span>
#include <string>

namespace tokamak {

using BlockKey = std::array<uint8_t, 32>;

// The parent key of a sequence's first block.
inline constexpr BlockKey kRootBlockKey{};

BlockKey chain_block_key(const BlockKey& parent, std::span<const int32_t> tokens);

// 64 lower-case hex digits (disk tier file names).
std::string block_key_hex(const BlockKey& key);

struct BlockKeyHash {
  size_t operator()(const BlockKey& k) const {
    size_t h;
    static_assert(sizeof(h) <= sizeof(BlockKey));
    __builtin_memcpy(&h, k.data(), sizeof(h));  // already uniformly distributed
    return h;
  }
};

}  // namespace tokamak
