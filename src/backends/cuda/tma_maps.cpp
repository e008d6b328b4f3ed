#include "backends/cuda/tma_maps.h"

#include <array>
#include <cstdint>
#include <functional>
#include <type_traits>

#include "backends/cuda/cuda_check.h"
#include "core/error.h"

namespace atl::cuda {

namespace {

// An NHWC image (pixels `in_c` elements apart, `cg` channels read) walked as a convolution's
// im2col: `pixels` output pixels per copy, 64 channels each, window corners from -pad to the last
// output pixel's (WindowCorner), stepping by the stride.
struct Im2colMapKey {
  const __half* base;
  int cg, in_c, in_w, in_h, images, stride_w, stride_h, lower_w, lower_h, upper_w, upper_h, pixels;
  auto tie() const {
    return std::tie(base, cg, in_c, in_w, in_h, images, stride_w, stride_h, lower_w, lower_h, upper_w, upper_h,
                    pixels);
  }
};

using EncodeTiledFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                   const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                   CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

using EncodeIm2colFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                    const cuuint64_t*, const int*, const int*, cuuint32_t, cuuint32_t,
                                    const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                    CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// The driver's encoders, found through the runtime (linking libcuda would tie every binary to a
// driver being installed, GPU-less CI machines included).
template <typename Fn>
Fn driver_entry(const char* symbol) {
  void* f = nullptr;
  cudaDriverEntryPointQueryResult found{};
  ATL_CUDA_CHECK(cudaGetDriverEntryPointByVersion(symbol, &f, 12000, cudaEnableDefault, &found));
  ATOLL_CHECK(found == cudaDriverEntryPointSuccess && f != nullptr, kCuda,
              "the driver has no {} (TMA GEMM tiles need CUDA 12 drivers)", symbol);
  return reinterpret_cast<Fn>(f);
}


CUtensorMap encode_map(const MatrixMapKey& k, const char* name) {
  static const auto encode = driver_entry<EncodeTiledFn>("cuTensorMapEncodeTiled");
  CUtensorMap map{};
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(k.cols), static_cast<cuuint64_t>(k.rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(k.row_elems) * sizeof(__half)};
  const cuuint32_t box[2] = {kTmaBK, static_cast<cuuint32_t>(k.box_rows)};
  const cuuint32_t elem_strides[2] = {1, 1};
  const CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, const_cast<__half*>(k.base), dims, strides, box,
                            elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  ATOLL_CHECK(r == CUDA_SUCCESS, kCuda, "cuTensorMapEncodeTiled failed ({}) for kernel '{}' ({} x {}, row stride {})",
              static_cast<int>(r), name, k.rows, k.cols, k.row_elems);
  return map;
}


Im2colMapKey im2col_key(const GemmParams& p, int pixels) {
  Im2colMapKey k{};
  k.pixels = pixels;
  k.base = p.a;
  k.cg = p.cg;
  k.in_c = p.in_c;
  k.in_w = p.in_w;
  k.in_h = p.in_h;
  k.images = p.M / (p.out_h * p.out_w);
  k.stride_w = p.stride_w;
  k.stride_h = p.stride_h;
  k.lower_w = -p.pad_l;
  k.lower_h = -p.pad_t;
  // The box's far corner, relative to the image's last pixel: the last output pixel's window corner.
  k.upper_w = (p.out_w - 1) * p.stride_w - p.pad_l - (p.in_w - 1);
  k.upper_h = (p.out_h - 1) * p.stride_h - p.pad_t - (p.in_h - 1);
  return k;
}

CUtensorMap encode_map(const Im2colMapKey& k, const char* name) {
  static const auto encode = driver_entry<EncodeIm2colFn>("cuTensorMapEncodeIm2col");
  CUtensorMap map{};
  const auto pixel = static_cast<cuuint64_t>(k.in_c) * sizeof(__half);
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(k.cg), static_cast<cuuint64_t>(k.in_w),
                              static_cast<cuuint64_t>(k.in_h), static_cast<cuuint64_t>(k.images)};
  const cuuint64_t strides[3] = {pixel, pixel * k.in_w, pixel * k.in_w * k.in_h};
  const int lower[2] = {k.lower_w, k.lower_h};  // innermost (W) first, as the coordinates
  const int upper[2] = {k.upper_w, k.upper_h};
  const cuuint32_t elem_strides[4] = {1, static_cast<cuuint32_t>(k.stride_w), static_cast<cuuint32_t>(k.stride_h), 1};
  const CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, const_cast<__half*>(k.base), dims, strides, lower,
                            upper, kTmaBK, static_cast<cuuint32_t>(k.pixels), elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  ATOLL_CHECK(r == CUDA_SUCCESS, kCuda,
              "cuTensorMapEncodeIm2col failed ({}) for kernel '{}' ({} images of {} x {} x {}, {} channels read)",
              static_cast<int>(r), name, k.images, k.in_h, k.in_w, k.in_c, k.cg);
  return map;
}

// A map is a pure function of its operands, so a launch whose operands were seen before reuses
// it: the scheduler launches a BE task's TMA GEMMs one by one, and encoding two maps on each
// launch was host time on its thread. Direct-mapped, per thread and key type (no lock on the
// launch path).
// A cache slot's hash, over the key's fields (not its bytes: keys have padding).
template <typename Key>
size_t key_hash(const Key& key) {
  size_t h = 0;
  std::apply([&h](const auto&... field) {
    ((h = h * 0x9E3779B97F4A7C15ull + std::hash<std::decay_t<decltype(field)>>{}(field)), ...);
  }, key.tie());
  return h;
}

template <typename Key>
CUtensorMap cached_map(const Key& key, const char* name) {
  struct Entry {
    Key key{};
    bool filled = false;
    CUtensorMap map{};
  };
  constexpr size_t kEntries = 256;
  thread_local std::array<Entry, kEntries> cache{};
  Entry& e = cache[key_hash(key) % kEntries];
  if (!e.filled || e.key.tie() != key.tie()) {
    e.map = encode_map(key, name);  // throws before the entry changes
    e.key = key;
    e.filled = true;
  }
  return e.map;
}

// Whether the TMA unit's im2col walk reads this convolution's A: K tiles of 64 channels of one
// tap, window corners (8-bit signed) and strides within what a rank-4 map encodes, tap offsets
// within its 8-bit unsigned range (PTX ISA, im2col mode).
bool im2col_a(const GemmParams& p) {
  if (p.cg <= 0 || p.cg % kTmaBK != 0 || p.cg > p.in_c || p.K % p.cg != 0 || p.kw <= 0) return false;
  if (p.out_h <= 0 || p.out_w <= 0 || p.M % (p.out_h * p.out_w) != 0) return false;
  const int taps = p.K / p.cg, kh = taps / p.kw;
  if (kh * p.kw != taps || p.stride_h < 1 || p.stride_h > 8 || p.stride_w < 1 || p.stride_w > 8) return false;
  if ((kh - 1) * p.dil_h > 0xFF || (p.kw - 1) * p.dil_w > 0xFF || p.dil_h < 1 || p.dil_w < 1) return false;
  const Im2colMapKey k = im2col_key(p, kTmaBM);
  const auto corner = [](int v) { return v >= -128 && v <= 127; };
  return corner(k.lower_w) && corner(k.lower_h) && corner(k.upper_w) && corner(k.upper_h) &&
         k.lower_w <= k.in_w - 1 + k.upper_w && k.lower_h <= k.in_h - 1 + k.upper_h;
}

}  // namespace

bool tma_reads_plain_a(const GemmParams& p) {
  return p.cg == p.K && p.kw == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_t == 0 && p.pad_l == 0 &&
         p.in_h == p.out_h && p.in_w == p.out_w;
}

bool tma_gemm_applies(const GemmParams& p) {
  const auto aligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  return p.batch == 1 && (tma_reads_plain_a(p) || im2col_a(p)) && p.M > 0 && p.N > 0 && p.K > 0 && p.in_c % 8 == 0 &&
         p.ldb % 8 == 0 && aligned(p.a) && aligned(p.b);
}

CUtensorMap matrix_map(const MatrixMapKey& k, const char* kernel) { return cached_map(k, kernel); }

CUtensorMap im2col_map(const GemmParams& p, const char* kernel, int pixels) {
  return cached_map(im2col_key(p, pixels), kernel);
}

}  // namespace atl::cuda
