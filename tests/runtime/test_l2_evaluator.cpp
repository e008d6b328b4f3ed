// The GPU fitness evaluator of the tuners refuses anything but a CUDA instance, in every build.
#include <gtest/gtest.h>

#include "core/error.h"
#include "runtime/devices.h"
#include "runtime/l2_measure.h"
#include "runtime/model_source.h"

namespace atl {
namespace {

TEST(CudaL2Evaluator, ACpuInstanceIsUnsupported) {
  const CompiledModel cm = compile_zoo_model({.name = "tiny_cnn"}, CompileTarget{}, true);
  std::unique_ptr<Instance> inst = make_backend("cpu")->load(cm.program, cm.weights);
  try {
    CudaL2Evaluator ev(*inst, l2::h200_l2(), 0.9);
    ADD_FAILURE() << "a CPU instance was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  }
}

}  // namespace
}  // namespace atl
