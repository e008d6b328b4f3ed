#include "onnx/import_context.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace atl::onnx_detail {

const std::string& ImportContext::input_name(int i) const {
  ATOLL_CHECK(has_input(i), kUnsupported, "input {} is required but absent", i);
  return node_->input(i);
}

const Tensor* ImportContext::find_const(const std::string& name) const {
  auto it = constants_.find(name);
  return it == constants_.end() ? nullptr : &it->second;
}

bool ImportContext::is_const(int i) const { return has_input(i) && constants_.count(node_->input(i)) != 0; }

const Tensor& ImportContext::constant(int i) const {
  const std::string& name = input_name(i);
  const Tensor* t = find_const(name);
  ATOLL_CHECK(t != nullptr, kUnsupported, "input '{}' must be a constant (an initializer or foldable at import)",
              name);
  return *t;
}

ValueId ImportContext::value_of(const std::string& name) {
  if (auto it = values_.find(name); it != values_.end()) return it->second;
  if (auto it = weights_of_constants_.find(name); it != weights_of_constants_.end()) return it->second;
  const Tensor* t = find_const(name);
  ATOLL_CHECK(t != nullptr, kInvalidArgument, "value '{}' is used before any node produces it", name);
  // Scalars become [1]: the backends broadcast rank-1 operands, and a scalar broadcasts the same.
  Tensor w = t->shape().rank() == 0 ? t->reshaped(Shape{1}) : *t;
  const ValueId id = graph_.add_weight(unique_name(name), w.shape(), WeightInit{}, w.dtype());
  graph_.weights()[graph_.value(id).name] = std::move(w);
  weights_of_constants_[name] = id;
  return id;
}

ValueId ImportContext::value(int i) { return value_of(input_name(i)); }

Shape ImportContext::shape(int i) const {
  const std::string& name = input_name(i);
  if (const Tensor* t = find_const(name)) return t->shape();
  auto it = values_.find(name);
  ATOLL_CHECK(it != values_.end(), kInvalidArgument, "value '{}' is used before any node produces it", name);
  return graph_.value(it->second).shape;
}

DType ImportContext::dtype(int i) const {
  const std::string& name = input_name(i);
  if (const Tensor* t = find_const(name)) return t->dtype();
  auto it = values_.find(name);
  ATOLL_CHECK(it != values_.end(), kInvalidArgument, "value '{}' is used before any node produces it", name);
  return graph_.value(it->second).dtype;
}

void ImportContext::define_const(const std::string& name, Tensor t) {
  held_bytes_ += static_cast<int64_t>(t.nbytes());
  constants_[name] = std::move(t);
}

namespace {
constexpr int64_t kComputedBaseBytes = int64_t{64} << 20;
}  // namespace

int64_t ImportContext::computed_room() const { return kComputedBaseBytes + 4 * held_bytes_ - computed_bytes_; }

void ImportContext::check_room(int64_t bytes, const std::string& what) const {
  ATOLL_CHECK(bytes >= 0 && bytes <= computed_room(), kUnsupported,
              "{}: computed constants would take {} MiB, more than the {} MiB allowed (64 MiB plus four times the "
              "model's own constants)",
              what, (computed_bytes_ + bytes) >> 20, (kComputedBaseBytes + 4 * held_bytes_) >> 20);
}

void ImportContext::account_computed(int64_t bytes, const std::string& what) {
  check_room(bytes, what);
  computed_bytes_ += bytes;
}

std::vector<int64_t> ImportContext::const_ints(int i, std::vector<int64_t> def) const {
  if (!has_input(i)) return def;
  const Tensor& t = constant(i);
  ATOLL_CHECK(t.dtype() == DType::kI64, kUnsupported, "input '{}' must hold integers", node_->input(i));
  const auto v = t.as<int64_t>();
  return {v.begin(), v.end()};
}

const std::string& ImportContext::output_base() const {
  return node_->output_size() > 0 ? node_->output(0) : node_->name();
}

void ImportContext::set_output(int i, ValueId v) {
  if (i < node_->output_size() && !node_->output(i).empty()) values_[node_->output(i)] = v;
}

void ImportContext::set_output_const(int i, Tensor t) {
  if (i < node_->output_size() && !node_->output(i).empty()) constants_[node_->output(i)] = std::move(t);
}

bool ImportContext::output_used(int i) const {
  if (i >= node_->output_size() || node_->output(i).empty()) return false;
  auto it = uses_.find(node_->output(i));
  return it != uses_.end() && it->second > 0;
}

std::string ImportContext::unique_name(const std::string& base) const {
  std::string name = base.empty() ? std::string("value") : base;
  for (int n = 1; graph_.find_value(name); ++n) name = fmt::format("{}#{}", base, n);
  return name;
}

ValueId ImportContext::add(OpKind op, std::vector<ValueId> inputs, Attrs attrs, const std::string& suffix) {
  const std::string& base = output_base();
  return graph_.add(op, unique_name(base + suffix), std::move(inputs), std::move(attrs));
}

ValueId ImportContext::add_weight(const std::string& suffix, Tensor t) {
  const std::string& base = output_base();
  account_computed(static_cast<int64_t>(t.nbytes()), fmt::format("weight '{}'", base + suffix));
  const ValueId id = graph_.add_weight(unique_name(base + suffix), t.shape(), WeightInit{}, t.dtype());
  graph_.weights()[graph_.value(id).name] = std::move(t);
  return id;
}

// --- shape rules --------------------------------------------------------------------------------

int normalize_axis(int64_t axis, int rank) {
  const int64_t a = axis < 0 ? axis + rank : axis;
  ATOLL_CHECK(a >= 0 && a < rank, kUnsupported, "axis {} is out of range for rank {}", axis, rank);
  return static_cast<int>(a);
}

std::vector<int64_t> broadcast_dims(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  const size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> out(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    ATOLL_CHECK(da == db || da == 1 || db == 1, kUnsupported, "shapes {} and {} do not broadcast",
                Shape(a).str(), Shape(b).str());
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::vector<int64_t> reshape_dims(const Shape& in, const std::vector<int64_t>& target, bool allow_zero) {
  std::vector<int64_t> dims = target;
  int infer_at = -1;
  int64_t known = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 0 && !allow_zero) {
      ATOLL_CHECK(static_cast<int>(i) < in.rank(), kUnsupported, "shape entry {} copies a dimension {} lacks", i,
                  in.str());
      dims[i] = in[static_cast<int>(i)];
    }
    if (dims[i] == -1) {
      ATOLL_CHECK(infer_at < 0, kUnsupported, "shape {} has more than one -1", Shape(target).str());
      infer_at = static_cast<int>(i);
      continue;
    }
    ATOLL_CHECK(dims[i] >= 0, kUnsupported, "shape {} has a negative entry", Shape(target).str());
    ATOLL_CHECK(!__builtin_mul_overflow(known, dims[i], &known), kUnsupported,
                "shape {} has more elements than 64 bits count", Shape(target).str());
  }
  if (infer_at >= 0) {
    ATOLL_CHECK(known > 0 && in.numel() % known == 0, kUnsupported, "cannot reshape {} to {}", in.str(),
                Shape(target).str());
    dims[static_cast<size_t>(infer_at)] = in.numel() / known;
  }
  ATOLL_CHECK(Shape(dims).numel() == in.numel(), kUnsupported, "cannot reshape {} to {}", in.str(),
              Shape(target).str());
  return dims;
}

std::vector<int64_t> squeeze_dims(const Shape& in, const std::vector<int64_t>& axes) {
  std::vector<bool> drop(static_cast<size_t>(in.rank()), false);
  for (int64_t a : axes) {
    const int d = normalize_axis(a, in.rank());
    ATOLL_CHECK(in[d] == 1, kUnsupported, "cannot squeeze axis {} of {}: it is not 1", a, in.str());
    drop[static_cast<size_t>(d)] = true;
  }
  std::vector<int64_t> out;
  for (int d = 0; d < in.rank(); ++d) {
    const bool squeezed = axes.empty() ? in[d] == 1 : drop[static_cast<size_t>(d)];
    if (!squeezed) out.push_back(in[d]);
  }
  return out;
}

std::vector<int64_t> unsqueeze_dims(const Shape& in, const std::vector<int64_t>& axes) {
  const int rank = in.rank() + static_cast<int>(axes.size());
  std::vector<bool> inserted(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    const int d = normalize_axis(a, rank);
    ATOLL_CHECK(!inserted[static_cast<size_t>(d)], kUnsupported, "axis {} appears twice", a);
    inserted[static_cast<size_t>(d)] = true;
  }
  std::vector<int64_t> out;
  int next = 0;
  for (int d = 0; d < rank; ++d) out.push_back(inserted[static_cast<size_t>(d)] ? 1 : in[next++]);
  return out;
}

std::vector<int64_t> flatten_dims(const Shape& in, int64_t axis) {
  const int64_t a = axis < 0 ? axis + in.rank() : axis;
  ATOLL_CHECK(a >= 0 && a <= in.rank(), kUnsupported, "axis {} is out of range for rank {}", axis, in.rank());
  int64_t lead = 1, tail = 1;
  for (int d = 0; d < in.rank(); ++d) (d < a ? lead : tail) *= in[d];
  return {lead, tail};
}

std::vector<SliceAxis> slice_axes(const Shape& in, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                                  std::vector<int64_t> axes, std::vector<int64_t> steps) {
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  ATOLL_CHECK(ends.size() == starts.size() && axes.size() == starts.size() && steps.size() == starts.size(),
              kUnsupported, "starts, ends, axes and steps differ in length");
  std::vector<SliceAxis> out;
  for (size_t i = 0; i < starts.size(); ++i) {
    const int axis = normalize_axis(axes[i], in.rank());
    const int64_t dim = in[axis];
    const int64_t step = steps[i];
    ATOLL_CHECK(step != 0 && step != std::numeric_limits<int64_t>::min(), kUnsupported, "slice step {} is invalid",
                step);
    auto clamp_index = [&](int64_t v, int64_t lo, int64_t hi) {
      if (v < 0) v = v < -dim ? -1 : v + dim;  // avoids overflow for INT64_MIN-like sentinels
      return std::clamp(v, lo, hi);
    };
    const int64_t start = step > 0 ? clamp_index(starts[i], 0, dim) : clamp_index(starts[i], 0, dim - 1);
    const int64_t end = step > 0 ? clamp_index(ends[i], 0, dim) : clamp_index(ends[i], -1, dim - 1);
    const int64_t span = step > 0 ? end - start : start - end;
    const int64_t abs_step = step > 0 ? step : -step;
    const int64_t count = span <= 0 ? 0 : (span + abs_step - 1) / abs_step;
    out.push_back({axis, start, step, count});
  }
  return out;
}

}  // namespace atl::onnx_detail
