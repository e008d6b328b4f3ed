#pragma once
// Checks every DISB mode run must pass, computed from the workload, not from the runner.
#include <cstdint>
#include <string>

#include "bench/results.h"
#include "bench/workload.h"

namespace atl::bench::testing {

// Requests are conserved: each open-loop client's requests arrive exactly at its scheduled
// arrivals (none missing, none twice); each closed-loop client starts `concurrency` requests at
// 0 and sends one more for each answer that came before the end, arriving at that answer's
// finish. Every request is served (arrival <= start <= finish) or dropped, never failed. In
// rt-only mode BE clients send nothing.
void expect_requests_conserved(const Workload& w, const ModeRun& run, uint64_t seed);

// A directory for this test process only (ctest runs tests in parallel processes), removed with
// the object, so test runs leave nothing in the temporary folder.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The workloads shipped in bench/workloads/.
std::string shipped_workloads_dir();

// The message of the error parse_workload(text) throws (for a file "w.json" in base_dir), which
// must name the file; fails the test and returns "" when the workload is accepted.
std::string workload_error(const std::string& text, const std::string& base_dir = ".");

}  // namespace atl::bench::testing
