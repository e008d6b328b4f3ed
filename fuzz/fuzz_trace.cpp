// DISB trace files (one arrival gap per line), through a workload that names the fuzzed file.
#include <filesystem>

#include "bench/workload.h"
#include "core/error.h"
#include "fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::filesystem::path trace = atl::fuzz::input_file(data, size, ".trace");
  const std::string workload = R"({"name": "t", "clients": [{"name": "c", "model": "tiny_cnn", "priority": "rt",
      "load": {"type": "trace", "file": ")" + trace.filename().string() + R"("}}]})";
  try {
    const atl::bench::Workload w =
        atl::bench::parse_workload(workload, "fuzz.json", trace.parent_path().string());
    atl::bench::check_arrival_count(w.clients[0], 100.0);
    (void)atl::bench::scheduled_arrivals(w.clients[0], 100.0, 1);
  } catch (const atl::Error&) {
  }
  return 0;
}
