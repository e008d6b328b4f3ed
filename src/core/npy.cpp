#include "core/npy.h"

#include <cstring>
#include <fstream>
#include <regex>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"

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
}  // namespace

Tensor read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  ATOLL_CHECK(f.good(), kNotFound, "cannot open '{}'", path);
  char magic[6];
  f.read(magic, 6);
  ATOLL_CHECK(f.good() && std::memcmp(magic, kMagic, 6) == 0, kParse, "'{}' is not a .npy file", path);
  unsigned char version[2];
  f.read(reinterpret_cast<char*>(version), 2);
  uint32_t header_len = 0;
  if (version[0] == 1) {
    unsigned char l[2];
    f.read(reinterpret_cast<char*>(l), 2);
    header_len = l[0] | (l[1] << 8);
  } else {
    unsigned char l[4];
    f.read(reinterpret_cast<char*>(l), 4);
    header_len = l[0] | (l[1] << 8) | (l[2] << 16) | (static_cast<uint32_t>(l[3]) << 24);
  }
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
  std::vector<int64_t> dims;
  const std::string shape_text = m[1];
  const std::regex number(R"(\d+)");
  for (std::sregex_iterator it(shape_text.begin(), shape_text.end(), number), end; it != end; ++it) {
    dims.push_back(std::stoll(it->str()));
  }
  DType dtype;
  if (descr == "<f4") dtype = DType::kF32;
  else if (descr == "<f2") dtype = DType::kF16;
  else if (descr == "<i4") dtype = DType::kI32;
  else if (descr == "<i8") dtype = DType::kI64;
  else ATOLL_THROW(kParse, "'{}': unsupported dtype '{}' (need <f4, <f2, <i4 or <i8)", path, descr);

  Tensor t(dtype, Shape(dims));
  f.read(reinterpret_cast<char*>(t.raw()), static_cast<std::streamsize>(t.nbytes()));
  ATOLL_CHECK(f.gcount() == static_cast<std::streamsize>(t.nbytes()), kParse,
              "'{}': data truncated ({} of {} bytes)", path, f.gcount(), t.nbytes());
  return t;
}

void write_npy(const std::string& path, const Tensor& t) {
  std::string shape;
  for (int64_t d : t.shape().dims()) shape += std::to_string(d) + ",";
  if (t.shape().rank() > 1) shape.pop_back();
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr_of(t.dtype()), shape);
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  AtomicFile f(path);
  f.write(kMagic, 6);
  const char version[2] = {1, 0};
  f.write(version, 2);
  const uint16_t len = static_cast<uint16_t>(header.size());
  const char l[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  f.write(l, 2);
  f.write(header);
  f.write(t.raw(), t.nbytes());
  f.commit();
}

}  // namespace atl
