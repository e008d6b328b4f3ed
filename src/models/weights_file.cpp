// safetensors: an 8-byte little-endian header length, a JSON header mapping each tensor name to
// {dtype, shape, data_offsets [begin, end)} relative to the data section, then raw little-endian data.
#include "models/weights_file.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_value.h"
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

struct TensorEntry {
  std::string name;
  FileDTypeInfo dtype;
  Shape shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

TensorEntry parse_entry(const std::string& path, const std::string& name, const nlohmann::json& j, uint64_t data_bytes) {
  ATOLL_CHECK(j.is_object(), kParse, "{}: tensor '{}': header entry is not a JSON object", path, name);
  ATOLL_CHECK(j.contains("dtype") && j["dtype"].is_string(), kParse, "{}: tensor '{}': missing string 'dtype'", path,
              name);
  ATOLL_CHECK(j.contains("shape") && j["shape"].is_array(), kParse, "{}: tensor '{}': missing array 'shape'", path,
              name);
  ATOLL_CHECK(j.contains("data_offsets") && j["data_offsets"].is_array() && j["data_offsets"].size() == 2, kParse,
              "{}: tensor '{}': 'data_offsets' must be [begin, end]", path, name);
  TensorEntry e;
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

// The header as JSON, refusing a tensor name given twice (JSON parsers would keep one silently).
nlohmann::json parse_header(const std::string& path, const std::string& text) {
  std::set<std::string> names;
  const auto unique_names = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::key && depth == 1) {
      const std::string name = parsed.get<std::string>();
      ATOLL_CHECK(names.insert(name).second, kParse, "{}: tensor '{}' appears twice in the header", path, name);
    }
    return true;
  };
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text, unique_names);
  } catch (const nlohmann::json::exception& e) {
    ATOLL_THROW(kParse, "{}: bad header JSON: {}", path, json_error_text(e));
  }
  ATOLL_CHECK(j.is_object(), kParse, "{}: bad header JSON: expected an object of tensors, got {}", path, j.type_name());
  return j;
}

// Tensors sharing bytes are a corrupt (or hand-crafted) file, never an export.
void check_disjoint(const std::string& path, std::vector<TensorEntry> entries) {
  std::erase_if(entries, [](const TensorEntry& e) { return e.begin == e.end; });
  std::sort(entries.begin(), entries.end(), [](const TensorEntry& a, const TensorEntry& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < entries.size(); ++i) {
    const TensorEntry& a = entries[i - 1];
    const TensorEntry& b = entries[i];
    ATOLL_CHECK(b.begin >= a.end, kParse, "{}: tensors '{}' [{}, {}) and '{}' [{}, {}) overlap in the data section",
                path, a.name, a.begin, a.end, b.name, b.begin, b.end);
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

  const nlohmann::json j = parse_header(path, header);
  const uint64_t data_start = 8 + header_bytes;
  const uint64_t data_bytes = file_bytes - data_start;
  std::vector<TensorEntry> entries;
  for (const auto& [name, value] : j.items()) {
    if (name != "__metadata__") entries.push_back(parse_entry(path, name, value, data_bytes));
  }
  check_disjoint(path, entries);

  WeightStore store;
  std::vector<std::byte> staging;
  for (const TensorEntry& e : entries) {
    const std::string& name = e.name;
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

  AtomicFile f(path);
  f.write(&header_bytes, 8);
  f.write(text);
  for (const auto& [name, t] : store) f.write(t.raw(), t.nbytes());
  f.commit();
}

namespace {

// Training-time buffers of PyTorch modules that state_dict exports but inference never reads.
bool is_unused_buffer(const std::string& name) {
  for (const std::string suffix : {"num_batches_tracked", "position_ids"}) {
    if (name == suffix || name.ends_with("." + suffix)) return true;
  }
  return false;
}

// The model weight a file tensor names: itself, or itself without a wrapper module's prefix.
std::optional<std::string> weight_named(const Graph& g, const std::string& name) {
  for (const std::string& candidate : {name, name.substr(name.find('.') + 1)}) {
    const auto id = g.find_value(candidate);
    if (id && g.value(*id).kind == ValueKind::kWeight) return candidate;
    if (name.find('.') == std::string::npos) break;
  }
  return std::nullopt;
}

// The first few names, so an error about a whole model's weights stays readable.
std::string name_list(const std::vector<std::string>& names) {
  constexpr size_t kShown = 8;
  std::string out;
  for (size_t i = 0; i < std::min(names.size(), kShown); ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > kShown) out += fmt::format(" and {} more", names.size() - kShown);
  return out;
}

}  // namespace

WeightsFileReport load_weights_file(Graph& g, const std::string& path, const WeightsFileOptions& options) {
  const WeightStore file = read_safetensors(path);
  WeightStore by_weight;
  std::map<std::string, std::string> source;  // weight name -> file tensor name
  WeightsFileReport report;
  for (const auto& [name, t] : file) {
    if (is_unused_buffer(name)) continue;
    const std::optional<std::string> w = weight_named(g, name);
    if (!w) {
      report.unused.push_back(name);
      continue;
    }
    const auto [it, first] = source.emplace(*w, name);
    ATOLL_CHECK(first, kInvalidArgument, "{}: tensors '{}' and '{}' both name weight '{}'", path, it->second, name, *w);
    const DType want = g.value(*g.find_value(*w)).dtype;
    ATOLL_CHECK(is_float(t.dtype()) == is_float(want), kInvalidArgument,
                "{}: tensor '{}' holds {} values but weight '{}' is {}", path, name,
                is_float(t.dtype()) ? "floating-point" : "integer", *w, dtype_name(want));
    by_weight[*w] = t;
  }
  ATOLL_CHECK(report.unused.empty() || options.allow_extra, kInvalidArgument,
              "{}: {} tensors name no weight of the model: {} (--allow-extra-weights skips them)", path,
              report.unused.size(), name_list(report.unused));
  int64_t weights = 0;
  for (const Value& v : g.values()) {
    if (v.kind != ValueKind::kWeight) continue;
    ++weights;
    if (!source.count(v.name)) report.left_seeded.push_back(v.name);
  }
  ATOLL_CHECK(report.left_seeded.empty() || options.allow_partial, kInvalidArgument,
              "{}: lacks {} of the model's {} weights: {} (--allow-partial-weights keeps seeded values for them)", path,
              report.left_seeded.size(), weights, name_list(report.left_seeded));
  report.loaded = g.load_weights(by_weight);
  return report;
}

}  // namespace atl
