// safetensors: an 8-byte little-endian header length, a JSON header mapping each tensor name to
// {dtype, shape, data_offsets [begin, end)} relative to the data section, then raw little-endian data.
#include "models/weights_file.h"

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.h"
#include "core/half.h"

namespace atl {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian; so is this reader");

namespace {

enum class FileDType { kF32, kF16, kBF16, kF64, kI32, kI64 };

struct FileDTypeInfo {
  const char* code;
  FileDType type;
  size_t size;
};

constexpr FileDTypeInfo kFileDTypes[] = {
    {"F32", FileDType::kF32, 4}, {"F16", FileDType::kF16, 2}, {"BF16", FileDType::kBF16, 2},
    {"F64", FileDType::kF64, 8}, {"I32", FileDType::kI32, 4}, {"I64", FileDType::kI64, 8},
};

// A header larger than this is not a weights file (safetensors itself caps it at 100 MB).
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

const char* file_code(DType t) {
  switch (t) {
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kI32:
      return "I32";
    case DType::kI64:
      return "I64";
  }
  ATOLL_THROW(kInternal, "no safetensors code for dtype {}", dtype_name(t));
}

struct Entry {
  std::string name;
  FileDTypeInfo dtype;
  Shape shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

Entry parse_entry(const std::string& path, const std::string& name, const nlohmann::json& j, uint64_t data_bytes) {
  ATOLL_CHECK(j.is_object(), kParse, "{}: tensor '{}': header entry is not a JSON object", path, name);
  ATOLL_CHECK(j.contains("dtype") && j["dtype"].is_string(), kParse, "{}: tensor '{}': missing string 'dtype'", path,
              name);
  ATOLL_CHECK(j.contains("shape") && j["shape"].is_array(), kParse, "{}: tensor '{}': missing array 'shape'", path,
              name);
  ATOLL_CHECK(j.contains("data_offsets") && j["data_offsets"].is_array() && j["data_offsets"].size() == 2, kParse,
              "{}: tensor '{}': 'data_offsets' must be [begin, end]", path, name);
  Entry e;
  e.name = name;
  const std::string code = j["dtype"].get<std::string>();
  const FileDTypeInfo* info = nullptr;
  for (const FileDTypeInfo& d : kFileDTypes) {
    if (code == d.code) info = &d;
  }
  ATOLL_CHECK(info != nullptr, kParse, "{}: tensor '{}': unknown dtype '{}' (supported: F32, F16, BF16, F64, I32, I64)",
              path, name, code);
  e.dtype = *info;

  // Element count, refusing any product that could not fit in the data section.
  uint64_t numel = 1;
  std::vector<int64_t> dims;
  for (const nlohmann::json& d : j["shape"]) {
    ATOLL_CHECK(d.is_number_unsigned(), kParse, "{}: tensor '{}': shape entries must be non-negative integers", path,
                name);
    const uint64_t dim = d.get<uint64_t>();
    ATOLL_CHECK(dim == 0 || numel <= data_bytes / dim, kParse, "{}: tensor '{}': shape {} is larger than the file",
                path, name, j["shape"].dump());
    numel *= dim;
    dims.push_back(static_cast<int64_t>(dim));
  }
  e.shape = Shape(std::move(dims));

  const nlohmann::json& off = j["data_offsets"];
  ATOLL_CHECK(off[0].is_number_unsigned() && off[1].is_number_unsigned(), kParse,
              "{}: tensor '{}': data_offsets must be non-negative integers", path, name);
  e.begin = off[0].get<uint64_t>();
  e.end = off[1].get<uint64_t>();
  ATOLL_CHECK(e.begin <= e.end && e.end <= data_bytes, kParse,
              "{}: tensor '{}': data_offsets [{}, {}] out of range (data section has {} bytes)", path, name, e.begin,
              e.end, data_bytes);
  ATOLL_CHECK(e.end - e.begin == numel * info->size, kParse,
              "{}: tensor '{}': data_offsets span {} bytes but {} {} needs {}", path, name, e.end - e.begin, code,
              e.shape.str(), numel * info->size);
  return e;
}

DType store_dtype(FileDType t) {
  return t == FileDType::kI32 || t == FileDType::kI64 ? DType::kI64 : DType::kF32;
}

// F32 and I64 are already the WeightStore's types: their bytes are read straight into the tensor.
bool needs_conversion(FileDType t) {
  return t != FileDType::kF32 && t != FileDType::kI64;
}

// Widens raw file bytes of a converted dtype into the tensor `t` (f32 or i64).
void convert(FileDType type, const std::byte* src, Tensor& t) {
  const size_t n = static_cast<size_t>(t.numel());
  switch (type) {
    case FileDType::kF32:
    case FileDType::kI64:
      ATOLL_THROW(kInternal, "{} needs no conversion", dtype_name(t.dtype()));
    case FileDType::kF16: {
      auto out = t.as<float>();
      for (size_t i = 0; i < n; ++i) {
        uint16_t bits;
        std::memcpy(&bits, src + 2 * i, 2);
        out[i] = half_bits_to_float(bits);
      }
      break;
    }
    case FileDType::kBF16: {
      auto out = t.as<float>();
      for (size_t i = 0; i < n; ++i) {
        uint16_t bits;
        std::memcpy(&bits, src + 2 * i, 2);
        out[i] = std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
      }
      break;
    }
    case FileDType::kF64: {
      auto out = t.as<float>();
      for (size_t i = 0; i < n; ++i) {
        double v;
        std::memcpy(&v, src + 8 * i, 8);
        out[i] = static_cast<float>(v);
      }
      break;
    }
    case FileDType::kI32: {
      auto out = t.as<int64_t>();
      for (size_t i = 0; i < n; ++i) {
        int32_t v;
        std::memcpy(&v, src + 4 * i, 4);
        out[i] = v;
      }
      break;
    }
  }
}

}  // namespace

WeightStore read_safetensors(const std::string& path) {
  std::error_code ec;
  ATOLL_CHECK(std::filesystem::is_regular_file(path, ec), kNotFound, "weights file '{}' not found", path);
  const uint64_t file_bytes = std::filesystem::file_size(path, ec);
  ATOLL_CHECK(!ec, kIo, "{}: cannot read size: {}", path, ec.message());
  std::ifstream f(path, std::ios::binary);
  ATOLL_CHECK(f.is_open(), kIo, "{}: cannot open for reading", path);

  ATOLL_CHECK(file_bytes >= 8, kParse, "{}: truncated: {} bytes, shorter than the 8-byte header length", path,
              file_bytes);
  uint64_t header_bytes = 0;
  f.read(reinterpret_cast<char*>(&header_bytes), 8);
  ATOLL_CHECK(header_bytes <= file_bytes - 8, kParse,
              "{}: truncated: header length {} but only {} bytes follow the length field", path, header_bytes,
              file_bytes - 8);
  ATOLL_CHECK(header_bytes <= kMaxHeaderBytes, kParse, "{}: header length {} exceeds the 100 MB limit", path,
              header_bytes);
  std::string header(header_bytes, '\0');
  f.read(header.data(), static_cast<std::streamsize>(header_bytes));
  ATOLL_CHECK(f.good(), kIo, "{}: read of the {}-byte header failed", path, header_bytes);

  nlohmann::json j;
  try {
    j = nlohmann::json::parse(header);
  } catch (const nlohmann::json::exception& e) {
    ATOLL_THROW(kParse, "{}: bad header JSON: {}", path, e.what());
  }
  ATOLL_CHECK(j.is_object(), kParse, "{}: bad header JSON: expected an object of tensors, got {}", path, j.type_name());

  const uint64_t data_start = 8 + header_bytes;
  const uint64_t data_bytes = file_bytes - data_start;
  WeightStore store;
  std::vector<std::byte> staging;
  for (const auto& [name, value] : j.items()) {
    if (name == "__metadata__") continue;
    const Entry e = parse_entry(path, name, value, data_bytes);
    Tensor t(store_dtype(e.dtype.type), e.shape);
    const bool convert_after = needs_conversion(e.dtype.type);
    if (convert_after) staging.resize(e.end - e.begin);
    std::byte* dst = convert_after ? staging.data() : t.raw();
    f.seekg(static_cast<std::streamoff>(data_start + e.begin));
    f.read(reinterpret_cast<char*>(dst), static_cast<std::streamsize>(e.end - e.begin));
    ATOLL_CHECK(f.good(), kIo, "{}: tensor '{}': read of {} bytes at offset {} failed", path, name, e.end - e.begin,
                data_start + e.begin);
    if (convert_after) convert(e.dtype.type, staging.data(), t);
    store[name] = std::move(t);
  }
  return store;
}

void write_safetensors(const std::string& path, const WeightStore& store) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const auto& [name, t] : store) {
    header[name] = {
        {"dtype", file_code(t.dtype())}, {"shape", t.shape().dims()}, {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string text = header.dump();
  // Readers that map the file expect the data section 8-byte aligned; pad with spaces as safetensors does.
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t header_bytes = text.size();

  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  ATOLL_CHECK(f.is_open(), kIo, "{}: cannot open for writing", path);
  f.write(reinterpret_cast<const char*>(&header_bytes), 8);
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& [name, t] : store) {
    f.write(reinterpret_cast<const char*>(t.raw()), static_cast<std::streamsize>(t.nbytes()));
  }
  f.close();
  ATOLL_CHECK(!f.fail(), kIo, "{}: write failed", path);
}

}  // namespace atl
