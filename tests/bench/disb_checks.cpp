#include "disb_checks.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "core/error.h"

namespace atl::bench::testing {

namespace {
// Arrivals travel as whole nanoseconds; the records give them back in ms.
constexpr double kNsInMs = 1e-6;
}  // namespace

void expect_requests_conserved(const Workload& w, const ModeRun& run, uint64_t seed) {
  const bool rt_only = run.mode == "rt-only";
  for (size_t c = 0; c < w.clients.size(); ++c) {
    const ClientSpec& spec = w.clients[c];
    SCOPED_TRACE(fmt::format("mode {}, client {}", run.mode, spec.name));
    std::vector<RequestRecord> mine;
    for (const RequestRecord& r : run.requests) {
      if (r.client == static_cast<int>(c)) mine.push_back(r);
    }
    for (const RequestRecord& r : mine) {
      EXPECT_FALSE(r.failed);
      if (!r.dropped) {
        EXPECT_LE(r.arrival_ms, r.start_ms + kNsInMs);
        EXPECT_LE(r.start_ms, r.finish_ms);
      }
    }
    if (rt_only && !spec.realtime) {
      EXPECT_TRUE(mine.empty());
      continue;
    }
    std::vector<double> arrivals;
    for (const RequestRecord& r : mine) arrivals.push_back(r.arrival_ms);
    std::sort(arrivals.begin(), arrivals.end());
    if (spec.load != LoadType::kClosedLoop) {
      const std::vector<double> expected = scheduled_arrivals(spec, run.duration_ms, seed);
      ASSERT_EQ(arrivals.size(), expected.size());
      for (size_t i = 0; i < expected.size(); ++i) ASSERT_NEAR(arrivals[i], expected[i], kNsInMs) << "request " << i;
      continue;
    }
    // Closed loop: the arrivals after the first `concurrency` are exactly the finishes of the
    // answers that came before the end.
    std::vector<double> resubmitted_at;
    for (const RequestRecord& r : mine) {
      if (!r.dropped && r.finish_ms < run.duration_ms) resubmitted_at.push_back(r.finish_ms);
    }
    std::sort(resubmitted_at.begin(), resubmitted_at.end());
    ASSERT_EQ(arrivals.size(), resubmitted_at.size() + static_cast<size_t>(spec.concurrency));
    for (int k = 0; k < spec.concurrency; ++k) EXPECT_EQ(arrivals[static_cast<size_t>(k)], 0.0);
    for (size_t i = 0; i < resubmitted_at.size(); ++i) {
      ASSERT_NEAR(arrivals[i + static_cast<size_t>(spec.concurrency)], resubmitted_at[i], kNsInMs) << "request " << i;
    }
  }
}

ScratchDir::ScratchDir(const std::string& name)
    : path_((std::filesystem::temp_directory_path() / fmt::format("atoll_disb_{}_{}", getpid(), name)).string()) {
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;  // a destructor must not throw; a leftover folder is harmless
  std::filesystem::remove_all(path_, ignored);
}

std::string shipped_workloads_dir() {
  return std::string(ATOLL_SOURCE_DIR) + "/bench/workloads";
}

std::string workload_error(const std::string& text, const std::string& base_dir) {
  try {
    parse_workload(text, "w.json", base_dir);
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("w.json"), std::string::npos) << e.message();
    return e.message();
  }
  ADD_FAILURE() << "accepted: " << text;
  return "";
}

}  // namespace atl::bench::testing
