// L2 residency configs (`atoll run --l2`, `l2 tune --out`): any text gives a config or an atl::Error.
#include "core/error.h"
#include "l2/slices.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const atl::l2::ResidencyConfig c =
        atl::l2::config_from_json_string(std::string(reinterpret_cast<const char*>(data), size));
    (void)c;
  } catch (const atl::Error&) {
  }
  return 0;
}
