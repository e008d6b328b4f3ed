// Input hardening: .npy headers that lie or do not parse, shapes that overflow, and the helpers
// that make file contents safe for a terminal, a CSV cell or a file name.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/npy.h"
#include "core/shape.h"
#include "core/text.h"

namespace atl {
namespace {

// A version 1.0 .npy file with `header` (padded as NumPy does) followed by `data_bytes` zero bytes.
std::string write_raw_npy(const std::string& name, const std::string& header, size_t data_bytes, char major = 1) {
  const auto path = (std::filesystem::temp_directory_path() / ("atoll_input_" + name + ".npy")).string();
  std::string h = header;
  h.append((64 - (10 + h.size() + 1) % 64) % 64, ' ');
  h.push_back('\n');
  std::ofstream f(path, std::ios::binary);
  f.write("\x93NUMPY", 6);
  const char version[2] = {major, 0};
  f.write(version, 2);
  const char len[2] = {static_cast<char>(h.size() & 0xff), static_cast<char>(h.size() >> 8)};
  f.write(len, 2);
  f << h << std::string(data_bytes, '\0');
  return path;
}

std::string header_with_shape(const std::string& shape) {
  return "{'descr': '<f4', 'fortran_order': False, 'shape': (" + shape + "), }";
}

std::string npy_error(const std::string& path) {
  try {
    read_npy(path);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kParse) << e.message();
    EXPECT_NE(e.message().find(path), std::string::npos) << e.message();
    return e.message();
  }
  ADD_FAILURE() << path << " accepted";
  return "";
}

TEST(NpyInput, AcceptsWellFormedShapes) {
  EXPECT_EQ(read_npy(write_raw_npy("ok4", header_with_shape("1, 3, 2, 2"), 48)).shape(), (Shape{1, 3, 2, 2}));
  EXPECT_EQ(read_npy(write_raw_npy("ok1", header_with_shape("5,"), 20)).shape(), (Shape{5}));
  EXPECT_EQ(read_npy(write_raw_npy("ok0", header_with_shape(""), 4)).shape(), Shape{});
}

TEST(NpyInput, RejectsShapesThatAreNotNonNegativeIntegers) {
  for (const char* shape : {"-1,3,32,32", "1.0,3,32,32", "1,,3", "1 2", "x", "99999999999999999999"}) {
    EXPECT_NE(npy_error(write_raw_npy("shape", header_with_shape(shape), 0)).find("shape"), std::string::npos) << shape;
  }
}

TEST(NpyInput, RejectsUnknownVersionsAndTrailingBytes) {
  EXPECT_NE(npy_error(write_raw_npy("v99", header_with_shape("2,"), 8, 99)).find("version 99"), std::string::npos);
  EXPECT_NE(npy_error(write_raw_npy("trailing", header_with_shape("2,"), 9)).find("1 bytes after"), std::string::npos);
}

TEST(NpyInput, ChecksTheClaimedSizeAgainstTheFileBeforeAllocating) {
  // 6 GB claimed by a file of a few hundred bytes: refused from the file size, nothing allocated.
  const std::string big = npy_error(write_raw_npy("huge", header_with_shape("1500000000,"), 16));
  EXPECT_NE(big.find("data truncated (16 of 6000000000 bytes"), std::string::npos) << big;
  // 2^62 * 4 elements (and * 4 bytes) wraps int64: refused, not read as an empty array.
  const std::string wrapped = npy_error(write_raw_npy("wrap", header_with_shape("4611686018427387904, 4"), 0));
  EXPECT_NE(wrapped.find("too large"), std::string::npos) << wrapped;
}

TEST(ShapeInput, NumelRefusesOverflowInsteadOfWrapping) {
  EXPECT_THROW((Shape{int64_t{1} << 62, 4}.numel()), Error);
  EXPECT_EQ((Shape{int64_t{1} << 31, int64_t{1} << 31}.numel()), int64_t{1} << 62);
}

TEST(Text, PrintableEscapesControlAndInvalidBytesKeepingUtf8) {
  EXPECT_EQ(printable("plain 'text' (1)"), "plain 'text' (1)");
  EXPECT_EQ(printable("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(printable("a\nb\tc\x1b[31m"), "a\\nb\\tc\\x1b[31m");
  EXPECT_EQ(printable("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(printable("\xc3"), "\\xc3");                    // truncated sequence
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");           // overlong '/'
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(printable("\xc2\x9b"), "\\xc2\\x9b");           // C1 control (CSI)
  EXPECT_EQ(printable(printable("x\xff\n")), printable("x\xff\n"));
}

TEST(Text, CsvFieldQuotesOnlyWhenNeeded) {
  EXPECT_EQ(csv_field("rt-resnet50"), "rt-resnet50");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_field("two\nlines"), "\"two\nlines\"");
}

TEST(Text, FileNameProblems) {
  EXPECT_FALSE(file_name_problem("A"));
  EXPECT_FALSE(file_name_problem("rt-resnet50 (b=1), x"));
  for (const std::string& bad : std::vector<std::string>{"", ".", "..", "../../X", "a/b", "a\\b", "a\nb", "a\x7f"})
    EXPECT_TRUE(file_name_problem(bad)) << bad;
}

}  // namespace
}  // namespace atl
