#include "l2/trace.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace atl::l2 {

namespace {

constexpr int64_t kAllocationAlignment = 256;  // cudaMalloc returns at least 256-byte aligned memory
constexpr uint32_t kOutputSlotBase = 64;       // binding slots of outputs, apart from inputs

int64_t align_up(int64_t x, int64_t a) {
  return (x + a - 1) / a * a;
}

int64_t spec_bytes(const TensorSpec& s) {
  return s.shape.numel() * static_cast<int64_t>(dtype_size(s.dtype));
}

// Element size of each weight on the device (see device_weight_bytes).
std::vector<int64_t> device_weight_element_sizes(const Program& p) {
  std::vector<int64_t> sizes(p.weights.size());
  for (size_t w = 0; w < p.weights.size(); ++w) sizes[w] = static_cast<int64_t>(dtype_size(p.weights[w].dtype));
  auto stored_as_activation = [&](const Binding& b) {
    // An index out of range is reported where the binding is traced.
    if (b.kind != Binding::Kind::kWeight || b.index < 0 || b.index >= static_cast<int>(p.weights.size())) return;
    const auto w = static_cast<size_t>(b.index);
    if (is_float(p.weights[w].dtype)) sizes[w] = static_cast<int64_t>(dtype_size(p.act_dtype));
  };
  for (const Kernel& k : p.kernels) {
    if ((k.op == OpKind::kConv2d || k.op == OpKind::kGemm) && k.inputs.size() > 1) stored_as_activation(k.inputs[1]);
    if (k.op == OpKind::kGather && !k.inputs.empty()) stored_as_activation(k.inputs[0]);
  }
  return sizes;
}

}  // namespace

int64_t Trace::accesses() const {
  int64_t n = 0;
  for (const TraceRange& r : ranges) n += r.lines;
  return n;
}

std::vector<int64_t> device_weight_bytes(const Program& p) {
  const std::vector<int64_t> element = device_weight_element_sizes(p);
  std::vector<int64_t> bytes(p.weights.size());
  for (size_t w = 0; w < p.weights.size(); ++w) bytes[w] = p.weights[w].shape.numel() * element[w];
  return bytes;
}

namespace {

// Where each kind of binding's regions start in Trace::regions: the arena first, then weights,
// inputs and outputs, each aligned to the line (and the allocator's alignment).
struct RegionIndex {
  size_t weights_at = 0, inputs_at = 0, outputs_at = 0;
};

RegionIndex lay_out_regions(const Program& p, const std::vector<int64_t>& weight_element, Trace& t) {
  const int64_t alignment = std::max(kAllocationAlignment, t.line_bytes);
  int64_t next_base = 0;
  auto add_region = [&](Binding::Kind kind, int index, int64_t bytes) {
    t.regions.push_back({kind, index, next_base, bytes});
    next_base = align_up(next_base + bytes, alignment);
  };
  RegionIndex at;
  add_region(Binding::Kind::kArena, -1, p.arena_bytes);
  at.weights_at = t.regions.size();
  for (size_t w = 0; w < p.weights.size(); ++w) {
    add_region(Binding::Kind::kWeight, static_cast<int>(w), p.weights[w].shape.numel() * weight_element[w]);
  }
  at.inputs_at = t.regions.size();
  for (size_t i = 0; i < p.inputs.size(); ++i) add_region(Binding::Kind::kInput, static_cast<int>(i), spec_bytes(p.inputs[i]));
  at.outputs_at = t.regions.size();
  for (size_t o = 0; o < p.outputs.size(); ++o) {
    add_region(Binding::Kind::kOutput, static_cast<int>(o), spec_bytes(p.outputs[o]));
  }
  return at;
}

// The lines kernel `kernel` touches through binding `b` in argument `slot`; max_rows >= 0 limits a
// read of a [rows, ...] binding to its first max_rows rows.
TraceRange binding_range(const Trace& t, const RegionIndex& at, const std::vector<int64_t>& weight_element,
                         uint32_t kernel, uint32_t slot, const Binding& b, bool write, int64_t max_rows) {
  int64_t begin = b.offset, end = b.offset + b.bytes;
  const TraceRegion* region = &t.regions[0];
  if (b.kind != Binding::Kind::kArena) {
    const size_t first_region = b.kind == Binding::Kind::kWeight  ? at.weights_at
                                : b.kind == Binding::Kind::kInput ? at.inputs_at
                                                                  : at.outputs_at;
    const size_t limit = b.kind == Binding::Kind::kWeight  ? at.inputs_at
                         : b.kind == Binding::Kind::kInput ? at.outputs_at
                                                           : t.regions.size();
    ATOLL_CHECK(b.index >= 0 && first_region + static_cast<size_t>(b.index) < limit, kInvalidArgument,
                "kernel {} binds {} index {}, out of range", kernel, binding_kind_name(b.kind), b.index);
    region = &t.regions[first_region + static_cast<size_t>(b.index)];
    if (b.kind == Binding::Kind::kWeight) {
      // Views are expressed in the binding's dtype; the device may store the weight narrower.
      const auto element = static_cast<int64_t>(dtype_size(b.dtype));
      const int64_t device_element = weight_element[static_cast<size_t>(b.index)];
      begin = b.offset / element * device_element;
      end = begin + b.bytes / element * device_element;
    }
  }
  if (max_rows >= 0 && b.shape.rank() > 0 && max_rows < b.shape[0]) {
    end = begin + (end - begin) / b.shape[0] * max_rows;
  }
  ATOLL_CHECK(begin >= 0 && end <= region->bytes, kInvalidArgument, "kernel {} binds [{}, {}) of a {} of {} bytes",
              kernel, begin, end, binding_kind_name(b.kind), region->bytes);
  const int64_t first = (region->base + begin) / t.line_bytes;
  const int64_t last = (region->base + end + t.line_bytes - 1) / t.line_bytes;
  const auto signature = static_cast<uint32_t>(mix64((uint64_t{kernel} << 8) | slot));
  return {static_cast<uint32_t>(first), static_cast<uint32_t>(last - first), kernel, signature, write, false};
}

}  // namespace

Trace build_trace(const Program& p, int64_t line_bytes) {
  ATOLL_CHECK(line_bytes > 0, kInvalidArgument, "trace line size must be positive, got {}", line_bytes);
  Trace t;
  t.line_bytes = line_bytes;
  t.arena_bytes = p.arena_bytes;
  t.kernel_count = static_cast<int>(p.kernels.size());
  const std::vector<int64_t> weight_element = device_weight_element_sizes(p);
  const RegionIndex at = lay_out_regions(p, weight_element, t);
  t.address_bytes = t.regions.back().base + t.regions.back().bytes;
  ATOLL_CHECK(t.total_lines() < std::numeric_limits<int32_t>::max(), kUnsupported,
              "program '{}' spans {} lines of {} bytes: too many to trace", p.model, t.total_lines(), line_bytes);
  auto add_range = [&](uint32_t kernel, uint32_t slot, const Binding& b, bool write, int64_t max_rows) {
    if (b.bytes > 0) t.ranges.push_back(binding_range(t, at, weight_element, kernel, slot, b, write, max_rows));
  };
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    const Kernel& kernel = p.kernels[k];
    const auto kid = static_cast<uint32_t>(k);
    // A Gather reads one table row per index, which rows depends on the input data: we charge as
    // many rows as there are indices (at most the whole table), taken from the table's start.
    const int64_t gather_rows =
        kernel.op == OpKind::kGather && kernel.inputs.size() > 1 ? kernel.inputs[1].shape.numel() : -1;
    for (size_t i = 0; i < kernel.inputs.size(); ++i) {
      add_range(kid, static_cast<uint32_t>(i), kernel.inputs[i], false, i == 0 ? gather_rows : -1);
    }
    for (size_t o = 0; o < kernel.outputs.size(); ++o) {
      add_range(kid, kOutputSlotBase + static_cast<uint32_t>(o), kernel.outputs[o], true, -1);
    }
  }
  return t;
}

Trace with_hints(const Trace& t, const std::vector<std::vector<LineSpan>>& spans) {
  ATOLL_CHECK(static_cast<int>(spans.size()) == t.kernel_count, kInternal, "{} hint lists for {} kernels", spans.size(),
              t.kernel_count);
  Trace out = t;
  out.ranges.clear();
  out.ranges.reserve(t.ranges.size());
  for (const TraceRange& r : t.ranges) {
    int64_t at = r.first_line;
    const int64_t end = at + r.lines;
    auto emit = [&](int64_t to, bool hinted) {
      if (to <= at) return;
      TraceRange piece = r;
      piece.first_line = static_cast<uint32_t>(at);
      piece.lines = static_cast<uint32_t>(to - at);
      piece.hinted = hinted;
      out.ranges.push_back(piece);
      at = to;
    };
    for (const LineSpan& s : spans[r.kernel]) {
      if (s.end <= at) continue;
      if (s.first >= end) break;
      emit(std::min(s.first, end), r.hinted);
      emit(std::min(s.end, end), true);
    }
    emit(end, r.hinted);
  }
  return out;
}

const char* hint_mode_name(HintMode m) {
  return m == HintMode::kWindows ? "windows" : "exact";
}

Trace hinted_trace(const Trace& t, const Program& p, const ResidencyConfig& c, const L2Device& d, HintMode mode) {
  ATOLL_CHECK(t.arena_bytes == p.arena_bytes && t.kernel_count == static_cast<int>(p.kernels.size()), kInternal,
              "trace of a {}-byte arena and {} kernels used with program '{}' ({} bytes, {} kernels)", t.arena_bytes,
              t.kernel_count, p.model, p.arena_bytes, p.kernels.size());
  const int64_t line = t.line_bytes;
  auto to_lines = [&](int64_t offset, int64_t bytes) {
    return LineSpan{offset / line, (offset + bytes + line - 1) / line};
  };
  std::vector<std::vector<LineSpan>> spans(static_cast<size_t>(t.kernel_count));
  if (mode == HintMode::kWindows) {
    const WindowPlan plan = plan_windows(p, c, d);
    for (size_t k = 0; k < spans.size(); ++k) {
      const AccessWindow& w = plan.windows[k];
      if (w.bytes > 0) spans[k].push_back(to_lines(w.offset, w.bytes));
    }
  } else {
    c.check_matches(p);
    c.check_fits(d);
    std::vector<LineSpan> resident;
    for (size_t s = 0; s < c.resident.size(); ++s) {
      if (!c.resident[s]) continue;
      const int64_t offset = static_cast<int64_t>(s) * c.slice_bytes;
      const LineSpan span = to_lines(offset, std::min(c.slice_bytes, p.arena_bytes - offset));
      if (!resident.empty() && resident.back().end == span.first) {
        resident.back().end = span.end;
      } else {
        resident.push_back(span);
      }
    }
    for (auto& list : spans) list = resident;
  }
  return with_hints(t, spans);
}

}  // namespace atl::l2
