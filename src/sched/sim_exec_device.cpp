#include "sched/sim_exec_device.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "backends/cpu/cpu_backend.h"
#include "backends/engine_target.h"
#include "backends/sim/sim_profile.h"
#include "core/error.h"

namespace atl::sched {

namespace {

// Request tensors are f32 for floating-point inputs, i64 otherwise (the CPU backend's form).
void check_request_inputs(const Program& program, std::span<const Tensor> inputs) {
  const auto& specs = program.inputs;
  ATOLL_CHECK(inputs.size() == specs.size(), kInvalidArgument, "model '{}' takes {} inputs, given {}", program.model,
              specs.size(), inputs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const DType host = is_float(specs[i].dtype) ? DType::kF32 : DType::kI64;
    ATOLL_CHECK(inputs[i].shape() == specs[i].shape && inputs[i].dtype() == host, kInvalidArgument,
                "input '{}' of model '{}' expects {} {}, was given {} {}", specs[i].name, program.model,
                dtype_name(host), specs[i].shape.str(), dtype_name(inputs[i].dtype()), inputs[i].shape().str());
  }
}

}  // namespace

SimExecDevice::SimExecDevice(SimExecOptions options) : options_(options), gpu_(options.gpu, options.record_trace) {
  if (options_.numerics) cpu_backend_ = make_cpu_backend();
}

SimExecDevice::~SimExecDevice() = default;

std::string SimExecDevice::description() const {
  const sim::SimGpuConfig& c = options_.gpu;
  return fmt::format("simulated GPU, {} SMs x {} block slots, {:.0f} TFLOP/s, {:.1f} TB/s{}", c.sm_count,
                     c.blocks_per_sm, c.peak_flops / 1e12, c.peak_bytes_per_s / 1e12,
                     options_.numerics ? ", numerics on the CPU" : ", timing only");
}

// Numerics run on the CPU backend, which computes in f32 on its own kernels; timing-only
// programs are the CUDA engine's (its fp16 storage, grouped Gemms, head views and fused
// attention), so they time the kernels the GPU runs and take its profiles.
CompileTarget SimExecDevice::target() const {
  if (!options_.numerics) return cuda_engine_target();
  CompileTarget t;
  t.act_dtype = DType::kF32;
  return t;
}

InstanceId SimExecDevice::load(const Program& program, const WeightStore& weights) {
  verify_program(program);
  auto l = std::make_unique<Loaded>();
  l->program = program;
  l->shapes = sim::roofline_shapes(program, options_.gpu);
  if (options_.numerics) l->cpu = cpu_backend_->load(program, weights);
  instances_.push_back(std::move(l));
  return static_cast<InstanceId>(instances_.size()) - 1;
}

SimExecDevice::Loaded& SimExecDevice::loaded(InstanceId instance) {
  ATOLL_CHECK(instance >= 0 && instance < static_cast<int>(instances_.size()), kInvalidArgument,
              "sim device has no instance {} ({} loaded)", instance, instances_.size());
  return *instances_[static_cast<size_t>(instance)];
}

const SimExecDevice::Loaded& SimExecDevice::loaded(InstanceId instance) const {
  ATOLL_CHECK(instance >= 0 && instance < static_cast<int>(instances_.size()), kInvalidArgument,
              "sim device has no instance {} ({} loaded)", instance, instances_.size());
  return *instances_[static_cast<size_t>(instance)];
}

const Program& SimExecDevice::program(InstanceId instance) const {
  return loaded(instance).program;
}

bool SimExecDevice::write_inputs(InstanceId instance, StreamId, std::span<const Tensor> inputs,
                                 const std::function<bool()>& should_yield) {
  Loaded& l = loaded(instance);
  check_request_inputs(l.program, inputs);
  // The copy takes io_call_ns of host time; an RT request that arrived meanwhile makes it give up,
  // as the CUDA device does between its staging pieces, and the time is lost.
  gpu_.advance(options_.gpu.io_call_ns);
  if (should_yield && should_yield()) return false;
  if (l.cpu) {
    for (size_t i = 0; i < inputs.size(); ++i) l.cpu->set_input(static_cast<int>(i), inputs[i]);
  }
  return true;
}

void SimExecDevice::enqueue_inputs(InstanceId instance, StreamId) {
  loaded(instance);
  gpu_.advance(options_.gpu.launch_call_ns);
}

// The host still copies the inputs; only the upload's API call left the arrival path.
void SimExecDevice::stage_inputs(InstanceId instance, std::span<const Tensor> inputs) {
  Loaded& l = loaded(instance);
  check_request_inputs(l.program, inputs);
  gpu_.advance(options_.gpu.io_call_ns);
  if (l.cpu) {
    for (size_t i = 0; i < inputs.size(); ++i) l.cpu->set_input(static_cast<int>(i), inputs[i]);
  }
}

std::vector<Tensor> SimExecDevice::read_outputs(InstanceId instance, StreamId) {
  Loaded& l = loaded(instance);
  std::vector<Tensor> out;
  if (l.cpu) {
    for (size_t i = 0; i < l.program.outputs.size(); ++i) out.push_back(l.cpu->get_output(static_cast<int>(i)));
  }
  gpu_.advance(options_.gpu.io_call_ns);
  return out;
}

StreamId SimExecDevice::create_stream(StreamPriority priority) {
  return gpu_.create_stream(priority == StreamPriority::kHigh ? 1 : 0);
}

uint64_t SimExecDevice::launch(StreamId stream, InstanceId instance, int kernel, const LaunchOptions& options) {
  Loaded& l = loaded(instance);
  ATOLL_CHECK(kernel >= 0 && kernel < static_cast<int>(l.shapes.size()), kInvalidArgument,
              "kernel {} outside program '{}' of {} kernels", kernel, l.program.model, l.shapes.size());
  sim::SimLaunch s;
  s.shape = l.shapes[static_cast<size_t>(kernel)];
  s.preemptible = options.preemptible;
  s.work = l.cpu.get();
  s.kernel = kernel;
  s.tag = instance;
  if (s.work != nullptr) {
    // A whole run makes slices run before it moot.
    s.completes_kernel = [&l, kernel] {
      l.covered.erase(kernel);
      return true;
    };
  }
  return gpu_.launch(stream, s);
}

int64_t SimExecDevice::slice_units(InstanceId instance, int kernel) const {
  const Loaded& l = loaded(instance);
  ATOLL_CHECK(kernel >= 0 && kernel < static_cast<int>(l.shapes.size()), kInvalidArgument,
              "kernel {} outside program '{}' of {} kernels", kernel, l.program.model, l.shapes.size());
  if (const ModelProfile* p = profile(instance)) return p->kernels[static_cast<size_t>(kernel)].slice_units;
  return sim::sim_slice_units(l.program.kernels[static_cast<size_t>(kernel)], kernel,
                              l.shapes[static_cast<size_t>(kernel)]);
}

bool SimExecDevice::grid_stride(InstanceId instance, int kernel) const {
  const Loaded& l = loaded(instance);
  ATOLL_CHECK(kernel >= 0 && kernel < static_cast<int>(l.shapes.size()), kInvalidArgument,
              "kernel {} outside program '{}' of {} kernels", kernel, l.program.model, l.shapes.size());
  if (const ModelProfile* p = profile(instance)) return p->kernels[static_cast<size_t>(kernel)].grid_stride;
  return sim::sim_grid_stride(l.program.kernels[static_cast<size_t>(kernel)], kernel);
}

// A grid-stride kernel whole on `grid` slots: each block does its share of the full grid's work,
// charged as a whole kernel's time each (the time of one wave), so the launch takes the whole
// time x full grid / grid. Pessimistic for grids of several waves, which the model's roofline
// grids of memory-bound kernels may be and the CUDA backend's (capped at one wave) never are.
sim::SimKernelShape SimExecDevice::capped_shape(InstanceId instance, int kernel, int64_t grid) const {
  const sim::SimKernelShape& whole = loaded(instance).shapes[static_cast<size_t>(kernel)];
  if (grid >= whole.blocks) return whole;
  const int64_t slots = options_.gpu.slot_count();
  grid = std::min(grid, slots);  // one wave: the time below is the launch's
  const auto whole_ns = static_cast<double>((whole.blocks + slots - 1) / slots * whole.block_ns);
  sim::SimKernelShape s = whole;
  s.blocks = grid;
  s.block_ns = static_cast<sim::SimTime>(
      std::ceil(whole_ns * static_cast<double>(whole.blocks) / static_cast<double>(grid)));
  s.check_ns = sim::check_ns_of(loaded(instance).program.kernels[static_cast<size_t>(kernel)], s, options_.gpu);
  return s;
}

// The slice's share of the kernel's blocks, on persistent blocks as many as max_blocks is of a
// wave (the profile's resident blocks per SM x SMs; the slots without one), each running its
// share of the rounds; a grid-stride kernel's one unit, whole on that many (capped_shape).
sim::SimKernelShape SimExecDevice::slice_shape(InstanceId instance, int kernel, const KernelSlice& slice) const {
  const int64_t units = slice_units(instance, kernel);
  ATOLL_CHECK(units > 0, kUnsupported, "kernel {} of '{}' runs only whole", kernel, loaded(instance).program.model);
  ATOLL_CHECK(slice.begin >= 0 && slice.begin < slice.end && slice.end <= units && slice.max_blocks >= 0,
              kInvalidArgument, "slice [{}, {}) on {} blocks is not a range of kernel {}'s {} units", slice.begin,
              slice.end, slice.max_blocks, kernel, units);
  const sim::SimKernelShape& whole = loaded(instance).shapes[static_cast<size_t>(kernel)];
  const int64_t slots = options_.gpu.slot_count();
  const double fraction = static_cast<double>(slice.end - slice.begin) / static_cast<double>(units);
  const int64_t work_blocks = std::max<int64_t>(1, std::llround(static_cast<double>(whole.blocks) * fraction));
  int64_t grid = slots;
  if (slice.max_blocks > 0) {
    const ModelProfile* p = profile(instance);
    const KernelProfile* k = p != nullptr ? &p->kernels[static_cast<size_t>(kernel)] : nullptr;
    const double wave = k != nullptr ? static_cast<double>(k->resident_blocks_per_sm) * p->sm_count
                                     : static_cast<double>(slots);
    grid = std::max<int64_t>(1, std::llround(slice.max_blocks * static_cast<double>(slots) / wave));
  }
  if (grid_stride(instance, kernel)) return capped_shape(instance, kernel, slice.max_blocks > 0 ? grid : whole.blocks);
  sim::SimKernelShape s = whole;
  s.blocks = std::min(work_blocks, grid);
  s.block_ns = whole.block_ns * ((work_blocks + s.blocks - 1) / s.blocks);
  return s;
}

uint64_t SimExecDevice::launch_slice(StreamId stream, InstanceId instance, int kernel, const KernelSlice& slice,
                                     const LaunchOptions& options) {
  sim::SimLaunch s;
  s.shape = slice_shape(instance, kernel, slice);
  s.preemptible = options.preemptible;
  Loaded& l = loaded(instance);
  s.work = l.cpu.get();
  s.kernel = kernel;
  s.tag = instance;
  if (s.work != nullptr) {
    const auto units = static_cast<size_t>(slice_units(instance, kernel));
    s.completes_kernel = [&l, kernel, units, slice] {
      std::vector<uint8_t>& covered = l.covered[kernel];
      covered.resize(units, 0);
      std::fill(covered.begin() + slice.begin, covered.begin() + slice.end, uint8_t{1});
      if (std::find(covered.begin(), covered.end(), uint8_t{0}) != covered.end()) return false;
      l.covered.erase(kernel);
      return true;
    };
  }
  return gpu_.launch(stream, s);
}

uint64_t SimExecDevice::launch_range(StreamId stream, InstanceId instance, int first, const LaunchOptions& options) {
  if (first != 0 || options.preemptible) return ExecDevice::launch_range(stream, instance, first, options);
  Loaded& l = loaded(instance);
  std::vector<sim::SimLaunch> launches(l.shapes.size());
  for (size_t k = 0; k < l.shapes.size(); ++k) {
    launches[k].shape = l.shapes[k];
    launches[k].work = l.cpu.get();
    launches[k].kernel = static_cast<int>(k);
    launches[k].tag = instance;
  }
  return gpu_.launch_all(stream, launches);
}

std::optional<LaunchSpan> SimExecDevice::launch_span(StreamId stream, uint64_t seq) {
  const auto s = gpu_.span(stream, seq);
  if (!s) return std::nullopt;
  return LaunchSpan{s->start, s->end};
}

ModelProfile SimExecDevice::measure_profile(InstanceId instance, const std::function<void(int, int)>& on_kernel) {
  const Loaded& l = loaded(instance);
  ModelProfile p = sim::profile_of_shapes(l.program, l.shapes, options_.gpu, description());
  if (on_kernel) on_kernel(static_cast<int>(l.shapes.size()), static_cast<int>(l.shapes.size()));
  return p;
}

void SimExecDevice::run_profile(InstanceId instance, const ModelProfile& profile) {
  Loaded& l = loaded(instance);
  std::vector<sim::SimKernelShape> shapes = sim::shapes_from_profile(l.program, profile, options_.gpu);
  set_profile(instance, profile);
  l.shapes = std::move(shapes);
}

void SimExecDevice::set_kernel_shapes(InstanceId instance, std::vector<sim::SimKernelShape> shapes) {
  Loaded& l = loaded(instance);
  ATOLL_CHECK(shapes.size() == l.program.kernels.size(), kInvalidArgument,
              "{} kernel shapes given for program '{}' of {} kernels", shapes.size(), l.program.model,
              l.program.kernels.size());
  for (size_t i = 0; i < shapes.size(); ++i) {
    ATOLL_CHECK(shapes[i].blocks >= 1 && shapes[i].block_ns >= 1, kInvalidArgument,
                "kernel {} shape has {} blocks of {} ns; both must be positive", i, shapes[i].blocks,
                shapes[i].block_ns);
  }
  l.shapes = std::move(shapes);
}

const std::vector<sim::SimKernelShape>& SimExecDevice::kernel_shapes(InstanceId instance) const {
  return loaded(instance).shapes;
}

}  // namespace atl::sched
