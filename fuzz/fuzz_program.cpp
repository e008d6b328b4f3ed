// Program JSON (`atoll info --program`): parsing, then the structural verification every backend
// runs before loading; any text gives a verified Program or an atl::Error.
#include "core/error.h"
#include "program/program.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const atl::Program p = atl::program_from_json_string(std::string(reinterpret_cast<const char*>(data), size));
    atl::verify_program(p);
  } catch (const atl::Error&) {
  }
  return 0;
}
