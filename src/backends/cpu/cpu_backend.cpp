#include "backends/cpu/cpu_backend.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "backends/cpu/kernel_registry.h"

namespace atl {

namespace {

// 64-byte aligned, owned, fixed-size byte buffer.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(int64_t bytes) : bytes_(bytes) {
    const size_t rounded = static_cast<size_t>((std::max<int64_t>(bytes, 1) + 63) / 64 * 64);
    data_.reset(static_cast<std::byte*>(::operator new[](rounded, std::align_val_t{64})));
  }
  std::byte* data() const { return data_.get(); }
  int64_t bytes() const { return bytes_; }

 private:
  struct Free {
    void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{64}); }
  };
  std::unique_ptr<std::byte[], Free> data_;
  int64_t bytes_ = 0;
};

int64_t spec_bytes(const TensorSpec& s) {
  return s.shape.numel() * static_cast<int64_t>(dtype_size(s.dtype));
}

// Host tensors are f32 for float tensors and i64 for index tensors, whatever the storage type.
DType host_dtype(DType stored) {
  return is_float(stored) ? DType::kF32 : DType::kI64;
}

// Copies a logical NCHW tensor of `shape` into [N, H, W, C] storage (or back with to_nhwc false).
void convert_layout(const float* src, float* dst, const Shape& shape, bool to_nhwc) {
  const int64_t n = shape[0], c = shape[1], hw = shape[2] * shape[3];
  for (int64_t b = 0; b < n; ++b) {
    const float* s = src + b * c * hw;
    float* d = dst + b * c * hw;
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t p = 0; p < hw; ++p) {
        if (to_nhwc) {
          d[p * c + ch] = s[ch * hw + p];
        } else {
          d[ch * hw + p] = s[p * c + ch];
        }
      }
    }
  }
}

// Moves between host (f32 / i64, logical row-major) and storage (spec dtype and layout) bytes.
void copy_converted(const TensorSpec& spec, const std::byte* src, std::byte* dst, bool to_storage) {
  const bool nhwc = spec.layout == Layout::kNHWC && spec.shape.rank() == 4;
  const int64_t n = spec.shape.numel();
  if (spec.dtype == DType::kI32) {  // i64 on the host, i32 stored: narrow or widen by value
    if (to_storage) {
      auto* d = reinterpret_cast<int32_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = static_cast<int32_t>(reinterpret_cast<const int64_t*>(src)[i]);
    } else {
      auto* d = reinterpret_cast<int64_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = reinterpret_cast<const int32_t*>(src)[i];
    }
    return;
  }
  if (nhwc) {
    convert_layout(reinterpret_cast<const float*>(src), reinterpret_cast<float*>(dst), spec.shape, to_storage);
  } else {
    std::memcpy(dst, src, static_cast<size_t>(spec_bytes(spec)));
  }
}

// Shape as stored: weights may arrive with the logical shape or already reshaped to storage order.
Shape storage_shape(const TensorSpec& s) {
  if (s.layout != Layout::kNHWC || s.shape.rank() != 4) return s.shape;
  return Shape{s.shape[0], s.shape[2], s.shape[3], s.shape[1]};
}

class CpuInstance final : public Instance {
 public:
  CpuInstance(const Program& program, const WeightStore& weights) : program_(program) {
    ATOLL_CHECK(program_.act_dtype == DType::kF32, kUnsupported,
                "the CPU backend runs f32 activations; program '{}' stores them as {}", program_.model,
                dtype_name(program_.act_dtype));
    verify_program(program_);
    load_weights(weights);
    for (const auto* list : {&program_.inputs, &program_.outputs}) {
      for (const TensorSpec& s : *list) {
        ATOLL_CHECK(s.dtype == DType::kF32 || s.dtype == DType::kI64 || s.dtype == DType::kI32, kUnsupported,
                    "tensor '{}' is {}; the CPU backend stores f32, i64 or i32", s.name, dtype_name(s.dtype));
        ATOLL_CHECK(s.dtype == DType::kF32 || s.layout == Layout::kRowMajor, kUnsupported,
                    "index tensor '{}' must be row-major", s.name);
        (list == &program_.inputs ? inputs_ : outputs_).emplace_back(spec_bytes(s));
      }
    }
    arena_ = AlignedBuffer(program_.arena_bytes);
    plan_kernels();
    // Poison: every byte 0xFF is a NaN in f32, so an element no kernel writes shows in the output.
    std::memset(arena_.data(), 0xFF, static_cast<size_t>(arena_.bytes()));
    for (auto& o : outputs_) std::memset(o.data(), 0xFF, static_cast<size_t>(o.bytes()));
    // Inputs start at zero (a valid index too), so running before set_input is deterministic.
    for (auto& i : inputs_) std::memset(i.data(), 0, static_cast<size_t>(i.bytes()));
  }

  const Program& program() const override { return program_; }

  void set_input(int index, const Tensor& t) override {
    ATOLL_CHECK(index >= 0 && index < static_cast<int>(program_.inputs.size()), kInvalidArgument,
                "input index {} out of range: program '{}' has {} inputs", index, program_.model,
                program_.inputs.size());
    const TensorSpec& spec = program_.inputs[static_cast<size_t>(index)];
    const DType want = host_dtype(spec.dtype);
    ATOLL_CHECK(t.shape() == spec.shape && t.dtype() == want, kInvalidArgument,
                "input '{}' expects {} {}, was given {} {}", spec.name, dtype_name(want), spec.shape.str(),
                dtype_name(t.dtype()), t.shape().str());
    copy_converted(spec, t.raw(), inputs_[static_cast<size_t>(index)].data(), true);
  }

  Tensor get_output(int index) override {
    ATOLL_CHECK(index >= 0 && index < static_cast<int>(program_.outputs.size()), kInvalidArgument,
                "output index {} out of range: program '{}' has {} outputs", index, program_.model,
                program_.outputs.size());
    const TensorSpec& spec = program_.outputs[static_cast<size_t>(index)];
    Tensor t(host_dtype(spec.dtype), spec.shape);
    copy_converted(spec, outputs_[static_cast<size_t>(index)].data(), t.raw(), false);
    return t;
  }

  void run() override { run_range(0, static_cast<int>(steps_.size())); }

  void run_range(int first, int last) override {
    ATOLL_CHECK(0 <= first && first <= last && last <= static_cast<int>(steps_.size()), kInvalidArgument,
                "kernel range [{}, {}) outside program '{}' of {} kernels", first, last, program_.model, steps_.size());
    for (int i = first; i < last; ++i) {
      const Step& s = steps_[static_cast<size_t>(i)];
      s.entry->run(program_.kernels[static_cast<size_t>(i)], s.plan,
                   cpu::KernelArgs{s.in, s.out, workspace_.data(), threads_});
    }
  }

  void synchronize() override {}

  MemoryReport memory() const override {
    MemoryReport r;
    for (const auto& w : weights_) r.weight_bytes += w.bytes();
    r.arena_bytes = arena_.bytes();
    r.workspace_bytes = workspace_.bytes();
    for (const auto* list : {&inputs_, &outputs_}) {
      for (const auto& b : *list) r.io_bytes += b.bytes();
    }
    return r;
  }

 private:
  struct Step {
    const cpu::KernelEntry* entry = nullptr;
    cpu::KernelPlan plan;
    std::vector<const std::byte*> in;
    std::vector<std::byte*> out;
  };

  void load_weights(const WeightStore& store) {
    for (const TensorSpec& spec : program_.weights) {
      auto it = store.find(spec.name);
      ATOLL_CHECK(it != store.end(), kNotFound, "weight '{}' of program '{}' is missing from the weight store",
                  spec.name, program_.model);
      const Tensor& t = it->second;
      ATOLL_CHECK(spec.dtype == DType::kF32 || spec.dtype == DType::kI64, kUnsupported,
                  "weight '{}' is {}; the CPU backend stores f32 or i64 weights", spec.name, dtype_name(spec.dtype));
      ATOLL_CHECK(t.dtype() == spec.dtype && (t.shape() == spec.shape || t.shape() == storage_shape(spec)),
                  kInvalidArgument, "weight '{}' must be {} {} ({} layout), is {} {}", spec.name,
                  dtype_name(spec.dtype), spec.shape.str(), layout_name(spec.layout), dtype_name(t.dtype()),
                  t.shape().str());
      weights_.emplace_back(spec_bytes(spec));
      std::memcpy(weights_.back().data(), t.raw(), t.nbytes());
    }
  }

  std::byte* resolve(const Binding& b) const {
    switch (b.kind) {
      case Binding::Kind::kArena:
        return arena_.data() + b.offset;
      case Binding::Kind::kWeight:
        return weights_[static_cast<size_t>(b.index)].data() + b.offset;
      case Binding::Kind::kInput:
        return inputs_[static_cast<size_t>(b.index)].data() + b.offset;
      case Binding::Kind::kOutput:
        return outputs_[static_cast<size_t>(b.index)].data() + b.offset;
    }
    ATOLL_THROW(kInternal, "unknown binding kind");
  }

  void plan_kernels() {
    int64_t workspace = 0;
    for (const Kernel& k : program_.kernels) {
      Step s;
      try {
        s.entry = &cpu::kernel_entry(k.op);
        s.plan = s.entry->validate(k, threads_);
      } catch (const Error& e) {
        throw Error(e.code(), fmt::format("kernel '{}' ({}): {}", k.name, op_name(k.op), e.message()), e.file(),
                    e.line());
      }
      for (const auto& b : k.inputs) s.in.push_back(resolve(b));
      for (const auto& b : k.outputs) s.out.push_back(resolve(b));
      workspace = std::max(workspace, s.plan.workspace_bytes);
      steps_.push_back(std::move(s));
    }
    workspace_ = AlignedBuffer(workspace);
  }

  Program program_;
  // Fixed at load: per-thread scratch is sized for it.
  const int threads_ = omp_get_max_threads();
  std::vector<AlignedBuffer> weights_, inputs_, outputs_;
  AlignedBuffer arena_, workspace_;
  std::vector<Step> steps_;
};

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  std::string device_description() const override {
    return fmt::format("host CPU, {} OpenMP threads, fp32", omp_get_max_threads());
  }
  CompileTarget target() const override {
    CompileTarget t{DType::kF32, 64, /*matmul_head_views=*/true, /*gemm_groups=*/true};
    t.fused_attention = true;
    return t;
  }
  std::unique_ptr<Instance> load(const Program& program, const WeightStore& weights) override {
    return std::make_unique<CpuInstance>(program, weights);
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() {
  return std::make_unique<CpuBackend>();
}

}  // namespace atl
