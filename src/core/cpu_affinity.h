#pragma once
// Which CPUs the kernel threads run on. By default the OS places them; a server that shares
// its machine, or a NUMA host, wants each kernel thread on a CPU of its own choosing (the
// scheduler otherwise moves threads between cores, and their L1/L2 contents with them). The
// spec, as `--affinity` takes it:
//
//   none       no pinning (the default)
//   auto       thread i on the i-th CPU this process may run on (sched_getaffinity)
//   0-3,8,10   thread i on the i-th CPU of the list (ranges inclusive, in the order written)
//
// Pinning is one CPU a thread: a list must name at least as many CPUs as there are threads,
// each at most once, and every one of them must be in the process's allowed set.

#include <string_view>
#include <thread>
#include <vector>

namespace tokamak {

// The CPUs this process may run on, ascending (its affinity mask; all online CPUs where the
// mask cannot be read).
std::vector<int> allowed_cpus();

// The CPUs a spec names, in thread order; empty for "none". Throws Error for a malformed list
// ("0-", "3-1", "x"), a CPU named twice, or one outside the process's allowed set.
std::vector<int> parse_cpu_affinity(std::string_view spec);

// The kernel threads a pool runs: `requested` when above 0, else one per CPU of `cpus`, or
// per CPU this process may run on when cpus is empty.
int kernel_thread_count(int requested, const std::vector<int>& cpus);

// Pins `thread` (the calling thread by default) to `cpu`. Throws Error when the OS refuses.
void pin_thread(int cpu, std::thread::native_handle_type thread = pthread_self());

}  // namespace tokamak
