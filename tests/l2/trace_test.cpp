#include "l2/trace.h"

#include <gtest/gtest.h>

#include <set>

#include "core/error.h"
#include "l2_test_util.h"

namespace atl::l2 {
namespace {

using testing::tiny_device;
using testing::tiny_program;

struct Expected {
  uint32_t first_line, lines, kernel;
  bool write;
};

// Address space of tiny_program with 128-byte lines (regions aligned to 256 bytes):
//   arena [0, 3392)      next base align(3392) = 3584
//   w0    [3584, 4160)   576 device bytes, next 4352
//   w1    [4352, 4384)   next 4608
//   x     [4608, 5408)   next 5632
//   y     [5632, 5648)   end: 5648 bytes = 45 lines (44 full + 16 bytes)
// Ranges: conv reads x = lines 36..42 (7), w0 = 28..32 (5), w1 = 34 (1), writes a0 = 0..12 (13);
// relu reads a0 (13), writes a1 = [1792, 3392) = lines 14..26 (13); pool reads a1 (13), writes y = line 44.
const std::vector<Expected> kTinyRanges = {{36, 7, 0, false}, {28, 5, 0, false}, {34, 1, 0, false},  {0, 13, 0, true},
                                           {0, 13, 1, false}, {14, 13, 1, true}, {14, 13, 2, false}, {44, 1, 2, true}};

TEST(Trace, AddressSpaceAndRangesOfAHandBuiltProgram) {
  const Trace t = build_trace(tiny_program(), 128);
  ASSERT_EQ(t.regions.size(), 5u);
  const std::vector<std::pair<int64_t, int64_t>> regions = {
      {0, 3392}, {3584, 576}, {4352, 32}, {4608, 800}, {5632, 16}};
  for (size_t i = 0; i < regions.size(); ++i) {
    EXPECT_EQ(t.regions[i].base, regions[i].first) << "region " << i;
    EXPECT_EQ(t.regions[i].bytes, regions[i].second) << "region " << i;
  }
  EXPECT_EQ(t.address_bytes, 5648);
  EXPECT_EQ(t.total_lines(), 45);
  EXPECT_EQ(t.arena_lines(), 27);
  EXPECT_EQ(t.kernel_count, 3);
  ASSERT_EQ(t.ranges.size(), kTinyRanges.size());
  for (size_t i = 0; i < kTinyRanges.size(); ++i) {
    const TraceRange& r = t.ranges[i];
    EXPECT_EQ(r.first_line, kTinyRanges[i].first_line) << "range " << i;
    EXPECT_EQ(r.lines, kTinyRanges[i].lines) << "range " << i;
    EXPECT_EQ(r.kernel, kTinyRanges[i].kernel) << "range " << i;
    EXPECT_EQ(r.write, kTinyRanges[i].write) << "range " << i;
    EXPECT_FALSE(r.hinted);
  }
  EXPECT_EQ(t.accesses(), 66);
}

TEST(Trace, DeviceWeightBytesFollowTheStorageRules) {
  const Program p = tiny_program();
  EXPECT_EQ(device_weight_bytes(p), (std::vector<int64_t>{576, 32}));
  Program f32 = tiny_program();
  f32.act_dtype = DType::kF32;  // a CPU program keeps conv weights in f32
  EXPECT_EQ(device_weight_bytes(f32), (std::vector<int64_t>{1152, 32}));
}

TEST(Trace, WeightViewsScaleToTheDeviceElementSize) {
  Program p = tiny_program();
  // conv reads the second half of w0 only: host bytes [576, 1152) = device bytes [288, 576).
  p.kernels[0].inputs[1] = testing::tensor_binding(Binding::Kind::kWeight, 0, DType::kF32, Shape{4, 4, 3, 3});
  p.kernels[0].inputs[1].offset = 576;
  const Trace t = build_trace(p, 128);
  // [3584 + 288, 3584 + 576) = [3872, 4160): lines 30..32.
  EXPECT_EQ(t.ranges[1].first_line, 30u);
  EXPECT_EQ(t.ranges[1].lines, 3u);
}

// Embedding lookup: table f32 [100, 16] (f16 on the device: 3200 bytes, rows of 32), i64 indices.
Program gather_program(int64_t indices) {
  Program p;
  p.model = "embed";
  p.act_dtype = DType::kF16;
  p.inputs = {{"ids", DType::kI64, Shape{indices}, Layout::kRowMajor}};
  p.weights = {{"table", DType::kF32, Shape{100, 16}, Layout::kRowMajor}};
  Kernel k;
  k.name = "embed";
  k.op = OpKind::kGather;
  k.inputs = {testing::tensor_binding(Binding::Kind::kWeight, 0, DType::kF32, Shape{100, 16}),
              testing::tensor_binding(Binding::Kind::kInput, 0, DType::kI64, Shape{indices})};
  k.outputs = {testing::arena_binding(0, Shape{indices, 16})};
  p.kernels = {k};
  p.arena_bytes = indices * 32;
  p.fingerprint = p.compute_fingerprint();
  verify_program(p);
  return p;
}

TEST(Trace, GatherReadsOneTableRowPerIndex) {
  // 6 indices: arena [0,192) then the table at 256: rows [256, 448) = lines 2-3, ids at 3584 = line 28.
  const Trace six = build_trace(gather_program(6), 128);
  ASSERT_EQ(six.ranges.size(), 3u);
  EXPECT_EQ(six.ranges[0].first_line, 2u);
  EXPECT_EQ(six.ranges[0].lines, 2u);
  EXPECT_EQ(six.ranges[1].first_line, 28u);
  EXPECT_EQ(six.ranges[1].lines, 1u);
  EXPECT_EQ(six.ranges[2].first_line, 0u);
  EXPECT_EQ(six.ranges[2].lines, 2u);
  // 200 indices into 100 rows read the whole table: 3200 bytes from 6400 = lines 50..74.
  const Trace all = build_trace(gather_program(200), 128);
  EXPECT_EQ(all.ranges[0].first_line, 50u);
  EXPECT_EQ(all.ranges[0].lines, 25u);
}

TEST(Trace, DeterministicWithDistinctSignaturesPerBinding) {
  const Trace a = build_trace(tiny_program(), 128);
  const Trace b = build_trace(tiny_program(), 128);
  ASSERT_EQ(a.ranges.size(), b.ranges.size());
  std::set<uint32_t> signatures;
  for (size_t i = 0; i < a.ranges.size(); ++i) {
    EXPECT_EQ(a.ranges[i].first_line, b.ranges[i].first_line);
    EXPECT_EQ(a.ranges[i].lines, b.ranges[i].lines);
    EXPECT_EQ(a.ranges[i].signature, b.ranges[i].signature);
    signatures.insert(a.ranges[i].signature);
  }
  EXPECT_EQ(signatures.size(), a.ranges.size());
}

TEST(Trace, LineSizeChangesTheGranularity) {
  // 32-byte lines: a0 = [0, 1600) is exactly 50 lines, a1 = [1792, 3392) lines 56..105.
  const Trace t = build_trace(tiny_program(), 32);
  EXPECT_EQ(t.ranges[3].first_line, 0u);
  EXPECT_EQ(t.ranges[3].lines, 50u);
  EXPECT_EQ(t.ranges[5].first_line, 56u);
  EXPECT_EQ(t.ranges[5].lines, 50u);
  EXPECT_THROW(build_trace(tiny_program(), 0), Error);
}

int64_t hinted_lines(const Trace& t, uint32_t kernel) {
  int64_t n = 0;
  for (const TraceRange& r : t.ranges) {
    if (r.kernel == kernel && r.hinted) n += r.lines;
  }
  return n;
}

TEST(Trace, WithHintsSplitsRangesAtSpanEdges) {
  const Trace t = build_trace(tiny_program(), 128);
  const Trace h = with_hints(t, {{}, {{5, 20}}, {}});
  EXPECT_EQ(h.accesses(), t.accesses());
  // relu: read [0,13) -> [0,5) + hinted [5,13); write [14,27) -> hinted [14,20) + [20,27).
  std::vector<std::tuple<uint32_t, uint32_t, bool>> relu;
  for (const TraceRange& r : h.ranges) {
    if (r.kernel == 1) relu.emplace_back(r.first_line, r.lines, r.hinted);
  }
  const std::vector<std::tuple<uint32_t, uint32_t, bool>> expected = {
      {0, 5, false}, {5, 8, true}, {14, 6, true}, {20, 7, false}};
  EXPECT_EQ(relu, expected);
  EXPECT_EQ(hinted_lines(h, 0), 0);
  EXPECT_EQ(hinted_lines(h, 2), 0);
}

// Resident 512-byte slices 0 and 4 = lines [0,4) and [16,20).
TEST(Trace, HintsFromAConfigExactAndAsWindows) {
  const Program p = tiny_program();
  const ResidencyConfig c = make_config(p, tiny_device(), {true, false, false, false, true, false, false}, 1.0, 512);
  const Trace t = build_trace(p, 128);
  const Trace exact = hinted_trace(t, p, c, tiny_device(), HintMode::kExactSlices);
  EXPECT_EQ(hinted_lines(exact, 0), 4);      // writes [0,13): lines 0-3
  EXPECT_EQ(hinted_lines(exact, 1), 4 + 4);  // reads 0-3, writes 16-19
  EXPECT_EQ(hinted_lines(exact, 2), 4);      // reads 16-19
  // Windows: conv [0,4), relu [0,20) (covers all of its read and lines 14-19 of its write), pool [16,20).
  const Trace windows = hinted_trace(t, p, c, tiny_device(), HintMode::kWindows);
  EXPECT_EQ(hinted_lines(windows, 0), 4);
  EXPECT_EQ(hinted_lines(windows, 1), 13 + 6);
  EXPECT_EQ(hinted_lines(windows, 2), 4);
  // Weights, inputs and outputs are never hinted.
  for (const TraceRange& r : windows.ranges) {
    if (r.hinted) {
      EXPECT_LT(r.first_line + r.lines, 28u);
    }
  }
}

}  // namespace
}  // namespace atl::l2
