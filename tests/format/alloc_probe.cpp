#include "alloc_probe.h"

#include <cstdlib>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define TOKAMAK_HAVE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TOKAMAK_HAVE_ASAN 1
#endif
#endif

namespace {
thread_local int t_probes = 0;           // live probes on this thread
thread_local std::size_t t_largest = 0;  // largest request while t_probes > 0
}  // namespace

namespace tokamak::gguf::test {

AllocProbe::AllocProbe() {
  if (t_probes++ == 0) t_largest = 0;
}
AllocProbe::~AllocProbe() { --t_probes; }
size_t AllocProbe::largest() const { return t_largest; }

#ifdef TOKAMAK_HAVE_ASAN
bool AllocProbe::available() { return false; }
#else
bool AllocProbe::available() { return true; }
#endif

}  // namespace tokamak::gguf::test

#ifdef TOKAMAK_HAVE_ASAN

// Any single allocation above the limit is reported by ASan as an error (and fails the run)
// instead of being attempted.
extern "C" const char* __asan_default_options() {
  return "max_allocation_size_mb=512:allocator_may_return_null=0";
}
static_assert(tokamak::gguf::test::kAsanAllocationLimitMb == 512);

#else

// libstdc++'s array and nothrow forms call these two, and its sized delete calls the unsized
// one, so replacing this pair covers every plain allocation. (The aligned forms keep using
// aligned_alloc and free and are not measured.)
void* operator new(std::size_t n) {
  if (t_probes > 0 && n > t_largest) t_largest = n;
  for (;;) {
    if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
    std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) throw std::bad_alloc();
    handler();
  }
}

void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

#endif
