#pragma once
// content_identity: a SHA-256 that tells one model file's weights from another's, cheaply
// enough to take at every start (the KV disk tier tags its entries with it, so that K/V
// computed by one model is never served to another).
//
// Hashed: the GGUF version, every metadata key and value (type and bytes), every tensor's
// name, shape, type and offset, and samples of the tensor data: the first and last MiB of
// the data section and the first 4 KiB of every tensor. Two finetunes of one base share
// metadata and shapes but not weights: every tensor's sample differs. Reads a few MiB
// whatever the model's size (a 7B model's file is never read whole). A change confined to
// the unsampled middle of a tensor is not seen: the price of not hashing gigabytes.

#include <array>
#include <cstdint>

namespace tokamak::gguf {

class File;

std::array<uint8_t, 32> content_identity(const File& file);

}  // namespace tokamak::gguf
