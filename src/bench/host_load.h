#pragma once
// How busy the host's CPUs were while a mode ran. Latency on a real GPU is host latency too: a
// request thread that other processes keep off its core answers late, which measured on the H200
// as millisecond stalls and a p99 2.5x too high while a test binary used every core of the host.
// DISB reports the share and warns, so such a run is not taken for the scheduler's behaviour.
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace atl::bench {

// Cumulative CPU time over all cores, in clock ticks (/proc/stat's first line), and this
// process's own (user + system).
struct CpuTimes {
  uint64_t busy = 0;   // every state but idle and iowait
  uint64_t total = 0;  // every state
  uint64_t self = 0;   // this process
  uint64_t steal = 0;  // a virtual machine's CPUs waiting while the hypervisor ran something else
  // Per core ("cpuN" lines, in order): steal and every state. A hypervisor that takes one vCPU
  // for milliseconds stalls whatever thread ran there, yet moves the aggregate share little.
  std::vector<uint64_t> core_steal;
  std::vector<uint64_t> core_total;
  uint64_t involuntary_switches = 0;  // this process's threads taken off a core by the kernel
};

// Parses the aggregate "cpu ..." line of /proc/stat and the per-core lines after it; nullopt if
// the aggregate line is missing or malformed (a malformed core line drops the per-core figures).
std::optional<CpuTimes> parse_proc_stat(std::string_view text);
// Now; nullopt where /proc/stat cannot be read (not Linux).
std::optional<CpuTimes> read_cpu_times();

struct HostLoad {
  double busy = 0;         // share of all cores' time spent busy, 0..1
  double busy_others = 0;  // the same without this process's own time
  double steal = 0;        // share of all cores' time stolen by the hypervisor (in busy too)
  double steal_max_core = 0;          // the most stolen core's share of its own time
  uint64_t involuntary_switches = 0;  // this process's, between the readings
};
// Between two readings; nullopt if either is missing or no time passed.
std::optional<HostLoad> host_load(const std::optional<CpuTimes>& from, const std::optional<CpuTimes>& to);

// Other processes' share above which a DISB run on a real device warns that latency figures may
// include host starvation.
inline constexpr double kBusyOthersWarning = 0.5;

}  // namespace atl::bench
