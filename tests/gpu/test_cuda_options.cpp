// The CUDA backend's switches from the environment: a bad value is refused with its name before
// any device is touched, so these run anywhere (no GPU needed).
#include <gtest/gtest.h>

#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string>

#include "../test_env.h"
#include "backends/cuda/cuda_backend.h"
#include "core/error.h"

namespace atl {
namespace {

using test::ScopedEnv;

// The message of what make_cuda_backend threw ("" for nothing: a GPU was there and took it).
std::string backend_error() {
  try {
    make_cuda_backend(0);
  } catch (const Error& e) {
    return e.message();
  }
  return "";
}

TEST(CudaOptions, BadUploadCopySettingsAreRefusedByName) {
  for (const char* v : {"0", "1025", "64x", "", "-3"}) {
    ScopedEnv env("ATOLL_CUDA_UPLOAD_BLOCKS", v);
    EXPECT_NE(backend_error().find("ATOLL_CUDA_UPLOAD_BLOCKS must be a whole number from 1 to 1024"), std::string::npos)
        << "'" << v << "'";
  }
  ScopedEnv env("ATOLL_CUDA_UPLOAD_FLAG", "sideways");
  EXPECT_NE(backend_error().find("ATOLL_CUDA_UPLOAD_FLAG must be ahead or fresh, not 'sideways'"), std::string::npos);
}

TEST(CudaOptions, GoodUploadCopySettingsPass) {
  ScopedEnv blocks("ATOLL_CUDA_UPLOAD_BLOCKS", "16");
  ScopedEnv flag("ATOLL_CUDA_UPLOAD_FLAG", "fresh");
  // Without a GPU the backend still fails, but not on these.
  EXPECT_EQ(backend_error().find("ATOLL_CUDA_UPLOAD"), std::string::npos);
}

// A check distance takes only the powers of two it lists, written plainly.
void expect_distance_option(const std::string& name, const std::string& allowed, std::initializer_list<const char*> bad,
                            std::initializer_list<const char*> good) {
  for (const char* v : bad) {
    ScopedEnv env(name.c_str(), v);
    EXPECT_NE(backend_error().find(name + " must be " + allowed + ", not '" + std::string(v) + "'"), std::string::npos)
        << "'" << v << "'";
  }
  for (const char* v : good) {
    ScopedEnv env(name.c_str(), v);
    EXPECT_EQ(backend_error().find(name), std::string::npos) << "'" << v << "'";
  }
}

TEST(CudaOptions, GemmCheckTilesTakeAPowerOfTwoUpToSixteen) {
  expect_distance_option("ATOLL_CUDA_GEMM_CHECK_TILES", "1, 2, 4, 8 or 16", {"0", "3", "32", "2x", "", "-2"},
                         {"1", "2", "4", "8", "16"});
}

TEST(CudaOptions, GemmEpilogueCheckChunksTakeAPowerOfTwoUpToEight) {
  expect_distance_option("ATOLL_CUDA_GEMM_EPI_CHECK_CHUNKS", "1, 2, 4 or 8", {"0", "3", "16", "4x", "", "-4"},
                         {"1", "2", "4", "8"});
}

// The on/off switches take 0 or 1 only: "false" once turned fused attention on.
TEST(CudaOptions, SwitchesTakeZeroOrOneOnly) {
  for (const char* name :
       {"ATOLL_CUDA_AUTOTUNE", "ATOLL_CUDA_WGMMA", "ATOLL_CUDA_TMA_IM2COL", "ATOLL_CUDA_PINGPONG", "ATOLL_CUDA_GEMV",
        "ATOLL_CUDA_HEAD_VIEWS", "ATOLL_CUDA_GEMM_GROUPS", "ATOLL_CUDA_FUSED_ATTENTION"}) {
    for (const char* v : {"false", "off", "yes", "2", " 1"}) {
      ScopedEnv env(name, v);
      EXPECT_NE(backend_error().find(std::string(name) + " must be 0 or 1, not '" + v + "'"), std::string::npos)
          << name << "='" << v << "'";
    }
    for (const char* v : {"0", "1", ""}) {
      ScopedEnv env(name, v);
      EXPECT_EQ(backend_error().find(name), std::string::npos) << name << "='" << v << "'";
    }
  }
}

}  // namespace
}  // namespace atl
