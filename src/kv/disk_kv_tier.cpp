#include "kv/disk_kv_tier.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <fstream>
#include <system_error>

#include "core/checksum64.h"
#include "core/error.h"

namespace tokamak {
namespace fs = std::filesystem;
namespace {

constexpr char kMagic[8] = {'T', 'K', 'M', 'K', 'V', 'B', 'L', 'K'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 120;  // up to the tokens
constexpr size_t kChecksumBytes = 8;
constexpr const char* kExtension = ".kvb";

void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}
void put_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = uint8_t(v >> (8 * i));
}
uint32_t get_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t(p[i]) << (8 * i);
  return v;
}
uint64_t get_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(p[i]) << (8 * i);
  return v;
}

// The key a file name names, or false for a name that is not "<64 hex>.kvb".
bool key_of_name(const std::string& name, BlockKey& key) {
  if (name.size() != 64 + std::strlen(kExtension) || !name.ends_with(kExtension)) return false;
  for (size_t i = 0; i < 32; ++i) {
    uint8_t byte = 0;
    for (size_t j = 0; j < 2; ++j) {
      const char c = name[2 * i + j];
      uint8_t nibble;
      if (c >= '0' && c <= '9') {
        nibble = uint8_t(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        nibble = uint8_t(c - 'a' + 10);
      } else {
        return false;
      }
      byte = uint8_t(byte << 4 | nibble);
    }
    key[i] = byte;
  }
  return true;
}

void remove_quietly(const fs::path& path) {
  std::error_code ec;
  fs::remove(path, ec);  // gone already, or not ours to remove: nothing else to do
}

}  // namespace

DiskKVTier::DiskKVTier(fs::path dir, size_t capacity_bytes, const BlockKey& identity,
                       int32_t n_tokens, size_t payload_bytes)
    : dir_(std::move(dir)),
      capacity_(capacity_bytes),
      identity_(identity),
      n_tokens_(n_tokens),
      payload_bytes_(payload_bytes) {
  assert(n_tokens >= 1 && payload_bytes >= 1);
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec || !fs::is_directory(dir_)) {
    throw Error("KV disk tier: cannot use directory " + dir_.string() + ": " +
                (ec ? ec.message() : "not a directory"));
  }
  scratch_.reserve(file_bytes());
  scan();
}

size_t DiskKVTier::file_bytes() const {
  return kHeaderBytes + 4 * size_t(n_tokens_) + payload_bytes_ + kChecksumBytes;
}

fs::path DiskKVTier::path_of(const BlockKey& key) const {
  return dir_ / (block_key_hex(key) + kExtension);
}

bool DiskKVTier::read_entry(const fs::path& path, const BlockKey* expect_key,
                            std::vector<uint8_t>& file) const {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  const size_t size = file_bytes();
  file.resize(size);
  in.read(reinterpret_cast<char*>(file.data()), std::streamsize(size));
  if (size_t(in.gcount()) != size) return false;                     // truncated
  if (in.peek() != std::ifstream::traits_type::eof()) return false;  // longer than an entry
  const uint8_t* p = file.data();
  if (std::memcmp(p, kMagic, sizeof(kMagic)) != 0) return false;
  if (get_u32(p + 8) != kVersion) return false;
  if (get_u32(p + 12) != uint32_t(n_tokens_)) return false;
  if (get_u64(p + 16) != payload_bytes_) return false;
  if (std::memcmp(p + 24, identity_.data(), 32) != 0) return false;  // another model's
  if (get_u64(p + size - kChecksumBytes) != checksum64(p, size - kChecksumBytes)) return false;
  BlockKey key, parent;
  std::memcpy(key.data(), p + 56, 32);
  std::memcpy(parent.data(), p + 88, 32);
  std::vector<int32_t> tokens(static_cast<size_t>(n_tokens_));
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<int32_t>(get_u32(p + kHeaderBytes + 4 * i));
  }
  if (chain_block_key(parent, tokens) != key) return false;
  if (expect_key != nullptr && key != *expect_key) return false;
  return true;
}

void DiskKVTier::scan() {
  // Oldest first, so that ticks follow modification times.
  std::vector<std::pair<fs::file_time_type, fs::path>> found;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir_, ec)) {
    const std::string name = e.path().filename().string();
    if (name.ends_with(std::string(kExtension) + ".tmp")) {
      remove_quietly(e.path());  // a write that never finished
      ++stats_.rejected;
      continue;
    }
    if (!name.ends_with(kExtension)) continue;  // not ours: left alone
    std::error_code tec;
    const auto mtime = e.last_write_time(tec);
    found.emplace_back(tec ? fs::file_time_type::min() : mtime, e.path());
  }
  if (ec) throw Error("KV disk tier: cannot list " + dir_.string() + ": " + ec.message());
  std::sort(found.begin(), found.end());
  for (const auto& [mtime, path] : found) {
    BlockKey key;
    if (!key_of_name(path.filename().string(), key) || !read_entry(path, &key, scratch_) ||
        index_.count(key) != 0) {
      remove_quietly(path);
      ++stats_.rejected;
      continue;
    }
    add_to_index(key, ++tick_);
  }
  // A smaller bound than last time: the oldest go.
  while (used_ > capacity_ && !lru_.empty()) remove_oldest();
}

void DiskKVTier::add_to_index(const BlockKey& key, uint64_t tick) {
  index_[key] = tick;
  lru_.emplace(tick, key);
  used_ += file_bytes();
}

void DiskKVTier::remove_oldest() {
  assert(!lru_.empty());
  // A copy: remove() erases the set element the key would otherwise be read from.
  const BlockKey oldest = lru_.begin()->second;
  remove(oldest, /*rejected=*/false);
}

void DiskKVTier::remove(const BlockKey& key, bool rejected) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    lru_.erase({it->second, key});
    index_.erase(it);
    used_ -= file_bytes();
  }
  remove_quietly(path_of(key));
  ++(rejected ? stats_.rejected : stats_.evicted);
}

bool DiskKVTier::put(const BlockKey& key, const BlockKey& parent, std::span<const int32_t> tokens,
                     std::span<const uint8_t> payload) {
  assert(tokens.size() == size_t(n_tokens_) && payload.size() == payload_bytes_);
  if (auto it = index_.find(key); it != index_.end()) {
    lru_.erase({it->second, key});
    it->second = ++tick_;
    lru_.emplace(it->second, key);
    return true;
  }
  const size_t size = file_bytes();
  if (size > capacity_) return false;
  while (used_ + size > capacity_) remove_oldest();

  scratch_.assign(size, 0);
  uint8_t* p = scratch_.data();
  std::memcpy(p, kMagic, sizeof(kMagic));
  put_u32(p + 8, kVersion);
  put_u32(p + 12, uint32_t(n_tokens_));
  put_u64(p + 16, payload_bytes_);
  std::memcpy(p + 24, identity_.data(), 32);
  std::memcpy(p + 56, key.data(), 32);
  std::memcpy(p + 88, parent.data(), 32);
  for (size_t i = 0; i < tokens.size(); ++i) {
    put_u32(p + kHeaderBytes + 4 * i, static_cast<uint32_t>(tokens[i]));
  }
  std::memcpy(p + kHeaderBytes + 4 * tokens.size(), payload.data(), payload.size());
  put_u64(p + size - kChecksumBytes, checksum64(p, size - kChecksumBytes));

  const fs::path path = path_of(key);
  fs::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(p), std::streamsize(size));
    if (!out) {
      out.close();
      remove_quietly(tmp);
      return false;  // disk full or read-only: the block is dropped, not cached
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    remove_quietly(tmp);
    return false;
  }
  add_to_index(key, ++tick_);
  ++stats_.stored;
  return true;
}

bool DiskKVTier::load(const BlockKey& key, const BlockKey& parent, std::span<const int32_t> tokens,
                      std::vector<uint8_t>& payload) {
  auto it = index_.find(key);
  if (it == index_.end()) return false;
  const fs::path path = path_of(key);
  if (!read_entry(path, &key, scratch_)) {
    remove(key, /*rejected=*/true);
    return false;
  }
  const uint8_t* p = scratch_.data();
  if (std::memcmp(p + 88, parent.data(), 32) != 0) return false;  // a key collision: not ours
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (static_cast<int32_t>(get_u32(p + kHeaderBytes + 4 * i)) != tokens[i]) return false;
  }
  payload.assign(p + kHeaderBytes + 4 * tokens.size(),
                 p + kHeaderBytes + 4 * tokens.size() + payload_bytes_);
  lru_.erase({it->second, key});
  it->second = ++tick_;
  lru_.emplace(it->second, key);
  std::error_code ec;
  fs::last_write_time(path, fs::file_time_type::clock::now(), ec);  // best effort
  ++stats_.loaded;
  return true;
}

}  // namespace tokamak
