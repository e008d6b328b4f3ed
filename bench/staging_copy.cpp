// atoll_bench_staging: how fast a request's input reaches the GPU (docs/PERFORMANCE.md). For each
// size: std::memcpy and cuda::copy_to_staging (streaming stores) into cudaHostAlloc memory,
// cacheable and write-combined, from a hot pageable source as a client's request tensor is; then
// the same copy followed by the upload (cudaMemcpyAsync to device memory, waited for), the whole
// path; then the streaming copy split across `--threads` threads (cuda::ParallelStagingCopy, what
// ATOLL_STAGING_THREADS turns on), alone and with the upload, and the single-thread streaming copy
// from a cold source (sources rotated through 256 MiB, beyond the host's caches). Median of
// `--reps`, microseconds and GB/s.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/host_copy.h"
#include "core/atomic_file.h"
#include "core/stats.h"
#include "probe_cli.h"

namespace {

using Clock = std::chrono::steady_clock;

template <typename Copy>
double median_us(int reps, Copy&& copy) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    copy();
    t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
  }
  return atl::median(std::move(t));
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> sizes{64 * 1024, 3 * 224 * 224 * 4, 8 * 3 * 224 * 224 * 4};
  int reps = 200;
  int threads = 4;
  std::string json_path = "staging_copy.json";
  atl::ProbeCli app{"atoll staging-copy benchmark (host -> pinned staging memory)"};
  app.option("--sizes", sizes, "bytes per copy");
  app.option("--reps", reps, "copies per measurement", atl::ProbeCheck::between(1, 100000));
  app.option("--threads", threads, "threads of the split copy", atl::ProbeCheck::between(1, 16));
  app.option("--json", json_path, "output file");
  if (auto status = app.parse(argc, argv)) return *status;
  return atl::run_probe("atoll_bench_staging", [&] {
    nlohmann::json doc;
    atl::cuda::Stream stream = atl::cuda::make_stream();
    atl::cuda::ParallelStagingCopy split(threads);
    const std::string split_name = fmt::format("split x{}", threads);
    fmt::print("{:>10} | {:>22} | {:>22} | {:>22} | {:>22} | {:>22} | {:>22} | {:>22} | {:>22} | {:>22}\n", "bytes",
               "memcpy -> pinned", "stream -> pinned", "memcpy -> pinned WC", "stream -> pinned WC", "memcpy + upload",
               "stream + upload", split_name + " -> pinned", split_name + " + upload", "stream, cold source");
    for (size_t bytes : sizes) {
      std::vector<std::byte> src(bytes, std::byte{1});
      atl::cuda::PinnedBuffer pinned(bytes, false), combined(bytes, false, /*write_combined=*/true);
      atl::cuda::DeviceBuffer device(bytes);
      const auto upload = [&] {
        ATL_CUDA_CHECK(cudaMemcpyAsync(device.get(), pinned.get(), bytes, cudaMemcpyHostToDevice, stream.get()));
        ATL_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
      };
      const double a = median_us(reps, [&] { std::memcpy(pinned.get(), src.data(), bytes); });
      const double b = median_us(reps, [&] { atl::cuda::copy_to_staging(pinned.get(), src.data(), bytes); });
      const double c = median_us(reps, [&] { std::memcpy(combined.get(), src.data(), bytes); });
      const double d = median_us(reps, [&] { atl::cuda::copy_to_staging(combined.get(), src.data(), bytes); });
      const double e = median_us(reps, [&] {
        std::memcpy(pinned.get(), src.data(), bytes);
        upload();
      });
      const double f = median_us(reps, [&] {
        atl::cuda::copy_to_staging(pinned.get(), src.data(), bytes);
        upload();
      });
      const double g = median_us(reps, [&] { split.copy(pinned.get(), src.data(), bytes); });
      const double h = median_us(reps, [&] {
        split.copy(pinned.get(), src.data(), bytes);
        upload();
      });
      const size_t cold_count = std::max<size_t>(2, (size_t{256} << 20) / std::max<size_t>(bytes, 1));
      std::vector<std::vector<std::byte>> cold(cold_count, std::vector<std::byte>(bytes, std::byte{2}));
      size_t next_cold = 0;
      const double k = median_us(reps, [&] {
        atl::cuda::copy_to_staging(pinned.get(), cold[next_cold].data(), bytes);
        next_cold = (next_cold + 1) % cold.size();
      });
      const auto cell = [&](double us) {
        return fmt::format("{:8.1f} us {:6.1f} GB/s", us, static_cast<double>(bytes) / us / 1e3);
      };
      fmt::print("{:>10} | {:>22} | {:>22} | {:>22} | {:>22} | {:>22} | {:>22} | {:>22} | {:>22} | {:>22}\n", bytes,
                 cell(a), cell(b), cell(c), cell(d), cell(e), cell(f), cell(g), cell(h), cell(k));
      doc["results"].push_back({{"bytes", bytes},
                                {"memcpy_pinned_us", a},
                                {"stream_pinned_us", b},
                                {"memcpy_write_combined_us", c},
                                {"stream_write_combined_us", d},
                                {"memcpy_upload_us", e},
                                {"stream_upload_us", f},
                                {"split_threads", threads},
                                {"split_pinned_us", g},
                                {"split_upload_us", h},
                                {"stream_cold_source_us", k}});
    }
    atl::write_file_atomic(json_path, doc.dump(1) + "\n");
    return 0;
  });
}
