// libFuzzer entry point for the GGUF reader and the `tokamak info` formatting. Compiled into
// format_tests (which runs it over seed files, see FuzzHarness below) so it stays buildable;
// the fuzzer itself is built by hand, see tests/format/fuzz/README.md.

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/error.h"
#include "format/gguf.h"
#include "format/gguf_summary.h"

// Any outcome but a File or a tokamak::Error (another exception, a crash, a sanitizer report,
// a huge allocation) is a finding.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tokamak::gguf;
  try {
    const File f = File::from_bytes("fuzz.gguf", std::span<const uint8_t>(data, size));
    unsigned sum = 0;
    for (const auto& t : f.tensors()) {
      for (uint64_t i = 0; i < t.nbytes; ++i) sum += t.data[i];
    }
    volatile unsigned sink = sum;
    (void)sink;
    (void)format_metadata(f);
    (void)format_tensors(f);
    (void)describe(f);  // may throw Error for a key of the wrong type
  } catch (const tokamak::Error&) {
  }
  return 0;
}
