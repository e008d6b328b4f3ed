#include "core/npy.h"

#include <charconv>
#include <cstring>
#include <fstream>
#include <regex>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/text.h"

namespace atl {

namespace {
const char kMagic[] = "\x93NUMPY";

std::string descr_of(DType t) {
  switch (t) {
    case DType::kF32: return "<f4";
    case DType::kF16: return "<f2";
    case DType::kI32: return "<i4";
    case DType::kI64: return "<i8";
  }
  return "";
}

// The dimensions inside "(...)": non-negative integers, comma-separated, a trailing comma allowed;
// nothing at all is a scalar.
std::vector<int64_t> parse_shape(const std::string& text, const std::string& path) {
  std::vector<std::string> tokens;
  for (size_t pos = 0;;) {
    const size_t comma = text.find(',', pos);
    const std::string part = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const size_t first = part.find_first_not_of(' ');
    tokens.push_back(first == std::string::npos ? "" : part.substr(first, part.find_last_not_of(' ') - first + 1));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (tokens.back().empty() && (tokens.size() > 1 || text.find_first_not_of(' ') == std::string::npos))
    tokens.pop_back();
  std::vector<int64_t> dims;
  for (const std::string& t : tokens) {
    int64_t d = -1;
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), d);
    ATOLL_CHECK(!t.empty() && ec == std::errc() && end == t.data() + t.size() && d >= 0, kParse,
                "'{}': .npy shape '({})' must list non-negative integers", path, printable(text));
    dims.push_back(d);
  }
  return dims;
}

}  // namespace

Tensor read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  ATOLL_CHECK(f.good(), kNotFound, "cannot open '{}'", path);
  char magic[6];
  f.read(magic, 6);
  ATOLL_CHECK(f.good() && std::memcmp(magic, kMagic, 6) == 0, kParse, "'{}' is not a .npy file", path);
  unsigned char version[2] = {0, 0};
  f.read(reinterpret_cast<char*>(version), 2);
  // 1.0 has a 2-byte header length; 2.0 and 3.0 (UTF-8 header) a 4-byte one.
  ATOLL_CHECK(f.good() && version[0] >= 1 && version[0] <= 3 && version[1] == 0, kParse,
              "'{}': unsupported .npy format version {}.{} (need 1.0, 2.0 or 3.0)", path, version[0], version[1]);
  unsigned char l[4] = {0, 0, 0, 0};
  f.read(reinterpret_cast<char*>(l), version[0] == 1 ? 2 : 4);
  const uint32_t header_len = l[0] | (l[1] << 8) | (l[2] << 16) | (static_cast<uint32_t>(l[3]) << 24);
  ATOLL_CHECK(f.good() && header_len < (1u << 20), kParse, "'{}': bad .npy header", path);
  std::string header(header_len, '\0');
  f.read(header.data(), header_len);
  ATOLL_CHECK(f.good(), kParse, "'{}': truncated .npy header", path);

  std::smatch m;
  ATOLL_CHECK(std::regex_search(header, m, std::regex(R"('descr':\s*'([^']*)')")), kParse,
              "'{}': .npy header has no descr", path);
  const std::string descr = m[1];
  ATOLL_CHECK(std::regex_search(header, m, std::regex(R"('fortran_order':\s*(True|False))")) && m[1] == "False",
              kParse, "'{}': only C-order arrays are supported", path);
  ATOLL_CHECK(std::regex_search(header, m, std::regex(R"('shape':\s*\(([^)]*)\))")), kParse,
              "'{}': .npy header has no shape", path);
  const std::vector<int64_t> dims = parse_shape(m[1], path);
  DType dtype;
  if (descr == "<f4") dtype = DType::kF32;
  else if (descr == "<f2") dtype = DType::kF16;
  else if (descr == "<i4") dtype = DType::kI32;
  else if (descr == "<i8") dtype = DType::kI64;
  else ATOLL_THROW(kParse, "'{}': unsupported dtype '{}' (need <f4, <f2, <i4 or <i8)", path, descr);

  // The header's claim is checked against the file before anything that size is allocated.
  int64_t bytes = static_cast<int64_t>(dtype_size(dtype));
  for (int64_t d : dims) {
    ATOLL_CHECK(!__builtin_mul_overflow(bytes, d, &bytes), kParse, "'{}': .npy shape {} is too large", path,
                Shape(dims).str());
  }
  const std::streamoff data_start = f.tellg();
  f.seekg(0, std::ios::end);
  const int64_t available = static_cast<int64_t>(f.tellg() - data_start);
  f.seekg(data_start);
  ATOLL_CHECK(available >= bytes, kParse, "'{}': data truncated ({} of {} bytes for shape {})", path, available, bytes,
              Shape(dims).str());
  ATOLL_CHECK(available == bytes, kParse, "'{}': {} bytes after the data of shape {}", path, available - bytes,
              Shape(dims).str());
  Tensor t(dtype, Shape(dims));
  f.read(reinterpret_cast<char*>(t.raw()), static_cast<std::streamsize>(t.nbytes()));
  ATOLL_CHECK(f.gcount() == static_cast<std::streamsize>(t.nbytes()), kParse,
              "'{}': data truncated ({} of {} bytes)", path, f.gcount(), t.nbytes());
  return t;
}

std::string encode_npy(const Tensor& t) {
  std::string shape;
  for (int64_t d : t.shape().dims()) shape += std::to_string(d) + ",";
  if (t.shape().rank() > 1) shape.pop_back();
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr_of(t.dtype()), shape);
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  const uint16_t len = static_cast<uint16_t>(header.size());
  std::string out;
  out.reserve(10 + header.size() + t.nbytes());  // one allocation: outputs can be tens of MB
  out.append(kMagic, 6);
  out += std::string{char{1}, char{0}, static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  out += header;
  out.append(reinterpret_cast<const char*>(t.raw()), t.nbytes());
  return out;
}

void write_npy(const std::string& path, const Tensor& t) { write_file_atomic(path, encode_npy(t)); }

}  // namespace atl
