// The staging copies (no GPU needed): every byte lands, whatever the size, alignment and thread
// count, and copies from several threads take turns without mixing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <numeric>
#include <thread>
#include <vector>

#include "backends/cuda/host_copy.h"
#include "core/error.h"
#include "core/rng.h"

namespace atl {
namespace {

std::vector<std::byte> random_bytes(size_t n, uint64_t seed) {
  Rng rng(seed, "bytes");
  std::vector<std::byte> v(n);
  for (std::byte& b : v) b = static_cast<std::byte>(rng.next_u64());
  return v;
}

TEST(ParallelStagingCopy, CopiesEveryByteAtAnySizeAlignmentAndThreadCount) {
  const size_t split = cuda::ParallelStagingCopy::kSplitFrom;
  for (int threads : {1, 2, 3, 4, 7}) {
    cuda::ParallelStagingCopy copier(threads);
    EXPECT_EQ(copier.threads(), threads);
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{4097}, split - 1, split, split + 13, size_t{602112},
                         size_t{4816896} + 5}) {
      for (size_t offset : {size_t{0}, size_t{3}, size_t{17}}) {
        const std::vector<std::byte> src = random_bytes(bytes + offset, bytes * 31 + offset + threads);
        std::vector<std::byte> dst(bytes + 64, std::byte{0xAB});  // poisoned, with a guard tail
        copier.copy(dst.data() + offset % 8, src.data() + offset, bytes);
        ASSERT_TRUE(std::equal(src.begin() + static_cast<long>(offset), src.end(), dst.begin() + offset % 8))
            << threads << " threads, " << bytes << " bytes, offset " << offset;
        for (size_t i = offset % 8 + bytes; i < dst.size(); ++i) ASSERT_EQ(dst[i], std::byte{0xAB}) << "wrote past the end";
      }
    }
  }
}

TEST(ParallelStagingCopy, CallersFromSeveralThreadsTakeTurns) {
  cuda::ParallelStagingCopy copier(3);
  constexpr size_t kBytes = 1 << 20;
  std::vector<std::thread> callers;
  std::vector<int> ok(4, 0);
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&, c] {
      const std::vector<std::byte> src = random_bytes(kBytes, 1000 + static_cast<uint64_t>(c));
      std::vector<std::byte> dst(kBytes);
      int good = 0;
      for (int rep = 0; rep < 20; ++rep) {
        std::fill(dst.begin(), dst.end(), std::byte{0});
        copier.copy(dst.data(), src.data(), kBytes);
        good += dst == src ? 1 : 0;
      }
      ok[static_cast<size_t>(c)] = good;
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(std::accumulate(ok.begin(), ok.end(), 0), 80);
}

TEST(ParallelStagingCopy, RefusesThreadCountsOutsideOneToSixteen) {
  EXPECT_THROW(cuda::ParallelStagingCopy(0), Error);
  EXPECT_THROW(cuda::ParallelStagingCopy(17), Error);
}

}  // namespace
}  // namespace atl
