// atoll_bench_staging: how fast a request's input reaches the GPU (docs/PERFORMANCE.md). For each
// size: std::memcpy and cuda::copy_to_staging (streaming stores) into cudaHostAlloc memory,
// cacheable and write-combined, from a hot pageable source as a client's request tensor is; then
// the same copy followed by the upload (cudaMemcpyAsync to device memory, waited for), the whole
// path. Median of `--reps`, microseconds and GB/s.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/host_copy.h"
#include "core/atomic_file.h"

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
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> sizes{64 * 1024, 3 * 224 * 224 * 4, 8 * 3 * 224 * 224 * 4};
  int reps = 200;
  std::string json_path = "staging_copy.json";
  CLI::App app{"atoll staging-copy benchmark (host -> pinned staging memory)"};
  app.add_option("--sizes", sizes, "bytes per copy");
  app.add_option("--reps", reps, "copies per measurement")->check(CLI::Range(1, 100000));
  app.add_option("--json", json_path, "output file");
  CLI11_PARSE(app, argc, argv);
  try {
    nlohmann::json doc;
    atl::cuda::Stream stream = atl::cuda::make_stream();
    fmt::print("{:>10} | {:>22} | {:>22} | {:>22} | {:>22} | {:>22} | {:>22}\n", "bytes", "memcpy -> pinned",
               "stream -> pinned", "memcpy -> pinned WC", "stream -> pinned WC", "memcpy + upload", "stream + upload");
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
      const auto cell = [&](double us) {
        return fmt::format("{:8.1f} us {:6.1f} GB/s", us, static_cast<double>(bytes) / us / 1e3);
      };
      fmt::print("{:>10} | {:>22} | {:>22} | {:>22} | {:>22} | {:>22} | {:>22}\n", bytes, cell(a), cell(b), cell(c),
                 cell(d), cell(e), cell(f));
      doc["results"].push_back({{"bytes", bytes},
                                {"memcpy_pinned_us", a},
                                {"stream_pinned_us", b},
                                {"memcpy_write_combined_us", c},
                                {"stream_write_combined_us", d},
                                {"memcpy_upload_us", e},
                                {"stream_upload_us", f}});
    }
    atl::write_file_atomic(json_path, doc.dump(1) + "\n");
    return 0;
  } catch (const std::exception& e) {
    fmt::print(stderr, "atoll_bench_staging: {}\n", e.what());
    return 1;
  }
}
