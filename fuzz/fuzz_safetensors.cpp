// safetensors reader: any bytes give a weight store or an atl::Error.
#include "core/error.h"
#include "fuzz_input_file.h"
#include "models/weights_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = atl::fuzz::input_file(data, size, ".safetensors");
  try {
    const atl::WeightStore store = atl::read_safetensors(path);
    (void)store.size();
  } catch (const atl::Error&) {
  }
  return 0;
}
