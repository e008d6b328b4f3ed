#pragma once
// ExecDevice on the simulated GPU. Timing comes from the discrete-event model; with `numerics`
// each instance also lives on the CPU backend and every launch that completes uncut runs its
// kernel there, so preempted-and-resumed tasks produce real outputs to compare.
#include <map>
#include <memory>
#include <vector>

#include "backends/sim/sim_gpu.h"
#include "sched/exec_device.h"

namespace atl::sched {

struct SimExecOptions {
  sim::SimGpuConfig gpu;
  bool numerics = false;      // run kernels on the CPU backend (programs must be f32)
  bool record_trace = false;  // keep every launch in gpu().trace()
};

class SimExecDevice final : public ExecDevice {
 public:
  explicit SimExecDevice(SimExecOptions options = {});
  ~SimExecDevice() override;

  std::string name() const override { return "sim"; }
  bool computes() const override { return options_.numerics; }
  std::string description() const override;
  CompileTarget target() const override;

  InstanceId load(const Program& program, const WeightStore& weights) override;
  const Program& program(InstanceId instance) const override;
  // Copies cost io_call_ns of host time; the stream does not matter to the model.
  using ExecDevice::write_inputs;
  bool write_inputs(InstanceId instance, StreamId stream, std::span<const Tensor> inputs,
                    const std::function<bool()>& should_yield) override;
  std::vector<Tensor> read_outputs(InstanceId instance, StreamId stream) override;

  StreamId create_stream(StreamPriority priority) override;
  uint64_t launch(StreamId stream, InstanceId instance, int kernel, const LaunchOptions& options) override;
  // A whole non-preemptible program in one launch call, as the CUDA device's graph launch.
  uint64_t launch_range(StreamId stream, InstanceId instance, int first, const LaunchOptions& options) override;
  // Units: the attached profile's (KernelProfile::slice_units), else sim::sim_slice_units. A
  // slice runs its share of the kernel's blocks on its share of the slots; with numerics the
  // kernel runs on the CPU once slices completed uncut have covered every unit.
  int64_t slice_units(InstanceId instance, int kernel) const override;
  // The attached profile's (KernelProfile::grid_stride), else sim::sim_grid_stride. Such a kernel's
  // slice runs it whole on max_blocks block slots (scaled as a slice's), for the whole time x the
  // full grid / those blocks, never less than the whole time: as padding's capped_beside counts it.
  bool grid_stride(InstanceId instance, int kernel) const override;
  uint64_t launch_slice(StreamId stream, InstanceId instance, int kernel, const KernelSlice& slice,
                        const LaunchOptions& options) override;
  uint64_t completed(StreamId stream) override { return gpu_.completed(stream); }
  std::optional<LaunchSpan> launch_span(StreamId stream, uint64_t seq) override;
  std::exception_ptr take_error(StreamId stream) override { return gpu_.take_error(stream); }

  bool can_hold() const override { return true; }
  void hold(StreamId stream) override { gpu_.hold(stream); }
  void release(StreamId stream) override { gpu_.release(stream); }
  void enqueue_inputs(InstanceId instance, StreamId stream) override;
  void stage_inputs(InstanceId instance, std::span<const Tensor> inputs) override;

  void raise_flag(StreamId via) override { gpu_.write_flag(via, true); }
  void lower_flag() override { gpu_.write_flag_blocking(false); }

  DeviceTime now() override { return gpu_.now(); }
  bool simulated_clock() const override { return true; }
  void wait_until(DeviceTime deadline) override { gpu_.run_until_completion(deadline); }
  void synchronize(StreamId stream) override { gpu_.synchronize(stream); }

  // The profile of the instance's current shapes (what `atoll profile --device sim` writes).
  ModelProfile measure_profile(InstanceId instance, const std::function<void(int, int)>& on_kernel) override;
  // Launch shapes of an instance's kernels: the roofline by default; a profile measured on any
  // device (its times and SM shares, sim::shapes_from_profile) or explicit shapes replace them.
  // The profile is attached too (set_profile), so the scheduler plans with what the model runs.
  void run_profile(InstanceId instance, const ModelProfile& profile);
  void set_kernel_shapes(InstanceId instance, std::vector<sim::SimKernelShape> shapes);
  const std::vector<sim::SimKernelShape>& kernel_shapes(InstanceId instance) const;

  sim::SimGpu& gpu() { return gpu_; }
  const sim::SimGpu& gpu() const { return gpu_; }

 protected:
  bool runs_foreign_profiles() const override { return true; }

 private:
  struct Loaded {
    Program program;
    std::vector<sim::SimKernelShape> shapes;
    std::unique_ptr<Instance> cpu;  // numerics only
    std::map<int, std::vector<uint8_t>> covered;  // by kernel: units slices have run since it last ran whole
  };
  sim::SimKernelShape slice_shape(InstanceId instance, int kernel, const KernelSlice& slice) const;
  sim::SimKernelShape capped_shape(InstanceId instance, int kernel, int64_t grid) const;
  Loaded& loaded(InstanceId instance);
  const Loaded& loaded(InstanceId instance) const;

  SimExecOptions options_;
  sim::SimGpu gpu_;
  std::unique_ptr<Backend> cpu_backend_;
  std::vector<std::unique_ptr<Loaded>> instances_;
};

}  // namespace atl::sched
