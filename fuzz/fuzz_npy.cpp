// .npy reader: any bytes give a tensor or an atl::Error, never a crash, a hang or a huge allocation.
#include "core/error.h"
#include "core/npy.h"
#include "fuzz_input_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = atl::fuzz::input_file(data, size, ".npy");
  try {
    const atl::Tensor t = atl::read_npy(path);
    (void)t.shape().numel();
  } catch (const atl::Error&) {
  }
  return 0;
}
