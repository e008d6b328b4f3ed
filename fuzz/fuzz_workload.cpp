// DISB workload JSON: parsing and, for what parses, the arrival schedules of a short run (the
// checks that keep them bounded are part of what is fuzzed). Trace files resolve next to the
// input, so the corpus's workloads name none; traces come from the trace target.
#include "bench/workload.h"
#include "core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const atl::bench::Workload w = atl::bench::parse_workload(text, "fuzz.json", "/nonexistent");
    for (const atl::bench::ClientSpec& c : w.clients) {
      atl::bench::check_arrival_count(c, 100.0);
      (void)atl::bench::scheduled_arrivals(c, 100.0, 1);
    }
  } catch (const atl::Error&) {
  }
  return 0;
}
