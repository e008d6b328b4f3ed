#include "serve/datatype.h"

namespace atl::serve {

size_t datatype_size(const std::string& datatype) {
  if (datatype == "FP32" || datatype == "INT32" || datatype == "UINT32") return 4;
  if (datatype == "INT64" || datatype == "UINT64" || datatype == "FP64") return 8;
  if (datatype == "FP16" || datatype == "BF16" || datatype == "INT16" || datatype == "UINT16") return 2;
  if (datatype == "INT8" || datatype == "UINT8") return 1;
  return 0;
}

std::string kserve_datatype(DType program_dtype) {
  return is_float(program_dtype) ? "FP32" : "INT64";
}

}  // namespace atl::serve
