#include "onnx/proto_tensor.h"

#include <charconv>
#include <cstring>
#include <fstream>
#include <limits>

#include "core/error.h"
#include "core/half.h"
#include "core/text.h"

namespace atl::onnx_detail {

namespace {

using TP = ::onnx::TensorProto;

size_t element_bytes(int32_t t) {
  switch (t) {
    case TP::FLOAT:
    case TP::INT32:
    case TP::UINT32: return 4;
    case TP::FLOAT16:
    case TP::INT16:
    case TP::UINT16: return 2;
    case TP::DOUBLE:
    case TP::INT64:
    case TP::UINT64: return 8;
    case TP::INT8:
    case TP::UINT8:
    case TP::BOOL: return 1;
    default: return 0;
  }
}

// Element i of little-endian raw bytes, as the constant's dtype holds it.
void store_raw(int32_t type, const char* src, int64_t i, Tensor& out) {
  const size_t bytes = element_bytes(type);
  const char* p = src + static_cast<size_t>(i) * bytes;
  auto put = [&](auto v) {
    if (out.dtype() == DType::kF32) {
      out.as<float>()[static_cast<size_t>(i)] = static_cast<float>(v);
    } else {
      out.as<int64_t>()[static_cast<size_t>(i)] = static_cast<int64_t>(v);
    }
  };
  auto read = [&]<typename T>(T) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
  };
  switch (type) {
    case TP::FLOAT: return put(read(float{}));
    case TP::FLOAT16: return put(half_bits_to_float(read(uint16_t{})));
    case TP::DOUBLE: return put(read(double{}));
    case TP::INT8: return put(read(int8_t{}));
    case TP::UINT8: return put(read(uint8_t{}));
    case TP::INT16: return put(read(int16_t{}));
    case TP::UINT16: return put(read(uint16_t{}));
    case TP::INT32: return put(read(int32_t{}));
    case TP::UINT32: return put(read(uint32_t{}));
    case TP::INT64: return put(read(int64_t{}));
    case TP::UINT64: return put(static_cast<int64_t>(read(uint64_t{})));
    case TP::BOOL: return put(read(uint8_t{}) != 0 ? 1 : 0);
    default: ATOLL_THROW(kInternal, "unhandled element type {}", type);
  }
}

// The bytes of an external-data tensor: a file named relative to the model, bounds checked.
std::string read_external(const TP& t, const std::filesystem::path& model_dir, size_t want) {
  std::string location;
  int64_t offset = 0, length = -1;
  // The whole value must be a decimal integer: stoll would read "5abc" as 5, misaligning the weights.
  const auto whole_number = [&](const std::string& key, const std::string& value) {
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    ATOLL_CHECK(ec == std::errc{} && end == value.data() + value.size(), kParse,
                "tensor '{}': external data {} '{}' is not a whole number", printable(t.name()), key, printable(value));
    return v;
  };
  for (const auto& kv : t.external_data()) {
    if (kv.key() == "location") location = kv.value();
    if (kv.key() == "offset") offset = whole_number(kv.key(), kv.value());
    if (kv.key() == "length") length = whole_number(kv.key(), kv.value());
  }
  const std::filesystem::path rel(location);
  ATOLL_CHECK(!location.empty() && rel.is_relative(), kParse,
              "tensor '{}': external data location '{}' must be a path relative to the model", t.name(), location);
  for (const auto& part : rel) {
    ATOLL_CHECK(part != "..", kParse, "tensor '{}': external data location '{}' leaves the model's folder", t.name(),
                location);
  }
  const std::filesystem::path path = model_dir / rel;
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  ATOLL_CHECK(in, kNotFound, "tensor '{}': cannot open external data file '{}'", t.name(), path.string());
  const auto file_size = static_cast<int64_t>(in.tellg());
  if (length < 0) length = static_cast<int64_t>(want);
  ATOLL_CHECK(offset >= 0 && length == static_cast<int64_t>(want), kParse,
              "tensor '{}': external data has offset {} and length {}, the tensor needs {} bytes", t.name(), offset,
              length, want);
  ATOLL_CHECK(offset <= file_size && length <= file_size - offset, kParse,
              "tensor '{}': external data [{}, {}) lies beyond the end of '{}' ({} bytes)", t.name(), offset,
              offset + length, path.string(), file_size);
  std::string bytes(want, '\0');
  in.seekg(offset);
  in.read(bytes.data(), static_cast<std::streamsize>(want));
  ATOLL_CHECK(in, kIo, "tensor '{}': reading external data from '{}' failed", t.name(), path.string());
  return bytes;
}

// How many values the typed field for this element type holds.
int typed_count(const TP& t) {
  switch (t.data_type()) {
    case TP::FLOAT: return t.float_data_size();
    case TP::DOUBLE: return t.double_data_size();
    case TP::INT64: return t.int64_data_size();
    case TP::UINT32:
    case TP::UINT64: return t.uint64_data_size();
    default: return t.int32_data_size();  // int8..int32, bool, and fp16 bit patterns
  }
}

// Values from the typed field; the caller checked its count.
void from_typed_fields(const TP& t, Tensor& out) {
  const int n = static_cast<int>(out.numel());
  auto put = [&](int i, auto v) {
    if (out.dtype() == DType::kF32) {
      out.as<float>()[static_cast<size_t>(i)] = static_cast<float>(v);
    } else {
      out.as<int64_t>()[static_cast<size_t>(i)] = static_cast<int64_t>(v);
    }
  };
  for (int i = 0; i < n; ++i) {
    switch (t.data_type()) {
      case TP::FLOAT: put(i, t.float_data(i)); break;
      case TP::DOUBLE: put(i, t.double_data(i)); break;
      case TP::INT64: put(i, t.int64_data(i)); break;
      case TP::UINT32:
      case TP::UINT64: put(i, static_cast<int64_t>(t.uint64_data(i))); break;
      case TP::FLOAT16: put(i, half_bits_to_float(static_cast<uint16_t>(t.int32_data(i)))); break;
      default: put(i, t.int32_data(i)); break;
    }
  }
}

}  // namespace

int64_t checked_numel(const std::vector<int64_t>& dims, const std::string& what, int64_t limit) {
  int64_t n = 1;
  for (int64_t d : dims) {
    ATOLL_CHECK(d >= 0, kInvalidArgument, "{}: negative dimension {}", what, d);
    ATOLL_CHECK(d == 0 || n <= limit / d, kUnsupported, "{}: more than {} elements", what, limit);
    n *= d;
  }
  return n;
}

std::string onnx_type_name(int32_t t) {
  if (TP::DataType_IsValid(t)) return TP::DataType_Name(static_cast<TP::DataType>(t));
  return fmt::format("element type {}", t);
}

DType constant_dtype(int32_t t, const std::string& what) {
  switch (t) {
    case TP::FLOAT:
    case TP::FLOAT16:
    case TP::DOUBLE: return DType::kF32;
    case TP::INT8:
    case TP::UINT8:
    case TP::INT16:
    case TP::UINT16:
    case TP::INT32:
    case TP::UINT32:
    case TP::INT64:
    case TP::UINT64:
    case TP::BOOL: return DType::kI64;
    default: ATOLL_THROW(kUnsupported, "{}: element type {} is not supported", what, onnx_type_name(t));
  }
}

std::optional<DType> input_dtype(int32_t t) {
  switch (t) {
    case TP::FLOAT: return DType::kF32;
    case TP::FLOAT16: return DType::kF16;
    case TP::INT32: return DType::kI32;
    case TP::INT64: return DType::kI64;
    default: return std::nullopt;
  }
}

Tensor tensor_from_proto(const TP& t, const std::filesystem::path& model_dir) {
  const std::string what = fmt::format("tensor '{}'", t.name());
  const DType dtype = constant_dtype(t.data_type(), what);
  const std::vector<int64_t> dims(t.dims().begin(), t.dims().end());
  // The data a file holds bounds an initializer: the count is checked against it before allocating.
  const int64_t n = checked_numel(dims, what, std::numeric_limits<int64_t>::max() / 8);
  const size_t want = static_cast<size_t>(n) * element_bytes(t.data_type());
  const bool external = t.data_location() == TP::EXTERNAL;
  if (external || t.has_raw_data()) {
    const std::string bytes = external ? read_external(t, model_dir, want) : t.raw_data();
    ATOLL_CHECK(bytes.size() == want, kParse, "{}: raw data holds {} bytes, shape {} of {} needs {}", what,
                bytes.size(), Shape(dims).str(), onnx_type_name(t.data_type()), want);
    Tensor out(dtype, Shape(dims));
    for (int64_t i = 0; i < n; ++i) store_raw(t.data_type(), bytes.data(), i, out);
    return out;
  }
  const int count = typed_count(t);
  ATOLL_CHECK(count == n, kParse, "{}: holds {} values, shape {} needs {}", what, count, Shape(dims).str(), n);
  Tensor out(dtype, Shape(dims));
  from_typed_fields(t, out);
  return out;
}

const ::onnx::AttributeProto* NodeAttrs::find(const std::string& name) const {
  for (const auto& a : node_.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

const ::onnx::AttributeProto& NodeAttrs::typed(const std::string& name,
                                               ::onnx::AttributeProto::AttributeType type) const {
  const auto* a = find(name);
  ATOLL_CHECK(a->type() == type, kInvalidArgument, "attribute '{}' has type {}, expected {}", name,
              ::onnx::AttributeProto::AttributeType_Name(a->type()), ::onnx::AttributeProto::AttributeType_Name(type));
  return *a;
}

int64_t NodeAttrs::get_int(const std::string& name, int64_t def) const {
  return has(name) ? typed(name, ::onnx::AttributeProto::INT).i() : def;
}

float NodeAttrs::get_float(const std::string& name, float def) const {
  return has(name) ? typed(name, ::onnx::AttributeProto::FLOAT).f() : def;
}

std::string NodeAttrs::get_string(const std::string& name, const std::string& def) const {
  return has(name) ? typed(name, ::onnx::AttributeProto::STRING).s() : def;
}

std::vector<int64_t> NodeAttrs::get_ints(const std::string& name, std::vector<int64_t> def) const {
  if (!has(name)) return def;
  const auto& a = typed(name, ::onnx::AttributeProto::INTS);
  return {a.ints().begin(), a.ints().end()};
}

std::vector<float> NodeAttrs::get_floats(const std::string& name) const {
  const auto& a = typed(name, ::onnx::AttributeProto::FLOATS);
  return {a.floats().begin(), a.floats().end()};
}

const ::onnx::TensorProto* NodeAttrs::get_tensor(const std::string& name) const {
  return has(name) ? &typed(name, ::onnx::AttributeProto::TENSOR).t() : nullptr;
}

}  // namespace atl::onnx_detail
