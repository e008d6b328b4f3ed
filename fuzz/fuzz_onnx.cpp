// ONNX importer: any bytes give a graph or an atl::Error, never a crash, a hang or a huge allocation.
#include <string_view>

#include "core/error.h"
#include "onnx/onnx_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const atl::Graph g =
        atl::import_onnx_bytes(std::string_view(reinterpret_cast<const char*>(data), size), "/nonexistent", {});
    (void)g.nodes().size();
  } catch (const atl::Error&) {
  }
  return 0;
}
