// The CUDA Instance: device memory (weights, arena, workspace, inputs/outputs), the prepared
// launches, the instance's stream and flags, and the optional CUDA graph of a whole run.
#include "backends/cuda/cuda_instance.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <system_error>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/gemm_plan.h"
#include "backends/cuda/host_convert.h"
#include "backends/cuda/host_copy.h"
#include "backends/cuda/io_convert.h"
#include "backends/cuda/timing.h"
#include "backends/cuda/tune_cache.h"
#include "core/error.h"

namespace atl::cuda {

namespace {

// Request tensors are f32 where the backend stores f16, else the stored type.
DType host_dtype(const TensorSpec& spec) {
  return spec.dtype == DType::kF16 ? DType::kF32 : spec.dtype;
}

// Host copies into staging memory go in pieces this big, so that a scheduler staging a BE
// request notices an RT arrival within a few microseconds.
constexpr size_t kStagingChunkBytes = 64 * 1024;
constexpr int kOutputBlocksAtLoad = 3;

// Elements a weight takes on the device: its own, or the padded filter's.
int64_t device_elems(const TensorSpec& spec, WeightFormat f) {
  if (f != WeightFormat::kChannelsPadded8) return spec.shape.numel();
  return spec.shape.numel() / spec.shape[1] * kStemChannels;
}

size_t device_elem_size(WeightFormat f) {
  switch (f) {
    case WeightFormat::kParamF32:
      return 4;
    case WeightFormat::kInt64:
      return 8;
    default:
      return 2;
  }
}

}  // namespace

CudaInstanceImpl::CudaInstanceImpl(const Program& program, const WeightStore& weights, int device,
                                   const DeviceInfo& info, const TuneSettings& tuning)
    : program_(program), info_(info), device_(device) {
  ATOLL_CHECK(program_.act_dtype == DType::kF16, kUnsupported,
              "program '{}' stores activations as {}; the CUDA backend needs f16 (compile for the CUDA target)",
              program_.model, dtype_name(program_.act_dtype));
  ATOLL_CHECK(program_.alignment % 16 == 0, kUnsupported,
              "program '{}' aligns arena buffers to {} bytes; the CUDA backend needs a multiple of 16", program_.model,
              program_.alignment);
  verify_program(program_);
  ATL_CUDA_CHECK(cudaSetDevice(device));
  upload_weights(weights);
  arena_ = DeviceBuffer(static_cast<size_t>(program_.arena_bytes));
  allocate_io();
  stream_ = make_stream();
  flag_ = DeviceBuffer(sizeof(int));
  ATL_CUDA_CHECK(cudaMemsetAsync(flag_.get(), 0, sizeof(int), stream_.get()));
  index_error_ = PinnedBuffer(sizeof(int), /*mapped=*/true);
  *static_cast<volatile int*>(index_error_.get()) = 0;
  index_error_device_ = static_cast<int*>(index_error_.device_alias());

  launches_.reserve(program_.kernels.size());
  for (const Kernel& k : program_.kernels) launches_.push_back(prepare_launch(k, *this));
  size_t ws = 0;
  for (const auto& l : launches_) ws = std::max(ws, l->workspace_bytes());
  set_workspace(ws);
  if (tuning.autotune) autotune_gemms(tuning);
  // Like the CPU backend, a fresh instance has NaN everywhere a kernel writes, so an element
  // no kernel writes shows up in any comparison.
  poison(0xFF);
  // Copies from pageable memory may still be in flight, and on other streams than ours.
  ATL_CUDA_CHECK(cudaDeviceSynchronize());
}

CudaInstanceImpl::~CudaInstanceImpl() {
  // Work still queued may use the buffers about to be freed.
  if (stream_) cudaStreamSynchronize(stream_.get());
  // Persisting lines and the limit outlive the instance otherwise and slow down whatever runs next.
  if (residency_) {
    try {
      clear_l2_state();
    } catch (const Error&) {  // a destructor must not throw; the device is failing anyway
    }
  }
}

void CudaInstanceImpl::upload_weights(const WeightStore& weights) {
  formats_ = plan_weight_formats(program_);
  weight_offsets_.resize(program_.weights.size());
  size_t total = 0;
  for (size_t i = 0; i < program_.weights.size(); ++i) {
    weight_offsets_[i] = total;
    total += align_up(static_cast<size_t>(device_elems(program_.weights[i], formats_[i])) * device_elem_size(formats_[i]));
  }
  std::vector<std::byte> host(total);
  for (size_t i = 0; i < program_.weights.size(); ++i) {
    const TensorSpec& spec = program_.weights[i];
    auto it = weights.find(spec.name);
    ATOLL_CHECK(it != weights.end(), kNotFound, "weight '{}' of program '{}' is missing from the weight store",
                spec.name, program_.model);
    const Tensor& t = it->second;
    ATOLL_CHECK(t.shape() == spec.shape && t.dtype() == spec.dtype, kInvalidArgument,
                "weight '{}' is {} {}, the program expects {} {}", spec.name, dtype_name(t.dtype()), t.shape().str(),
                dtype_name(spec.dtype), spec.shape.str());
    std::byte* dst = host.data() + weight_offsets_[i];
    switch (formats_[i]) {
      case WeightFormat::kParamF32:
      case WeightFormat::kInt64:
        std::memcpy(dst, t.raw(), t.nbytes());
        break;
      case WeightFormat::kHalf:
        floats_to_halves(t.as<float>(), reinterpret_cast<uint16_t*>(dst));
        break;
      case WeightFormat::kTapsMajor:
        filter_to_taps_major(t.as<float>(), spec.shape, reinterpret_cast<uint16_t*>(dst));
        break;
      case WeightFormat::kChannelsPadded8:
        filter_pad_channels(t.as<float>(), spec.shape, kStemChannels, reinterpret_cast<uint16_t*>(dst));
        break;
    }
  }
  weights_ = DeviceBuffer(total);
  if (total > 0) ATL_CUDA_CHECK(cudaMemcpy(weights_.get(), host.data(), total, cudaMemcpyHostToDevice));
}

void CudaInstanceImpl::allocate_io() {
  auto layout = [](const std::vector<TensorSpec>& specs, std::vector<size_t>& offsets, size_t& total, bool host_form) {
    for (const TensorSpec& s : specs) {
      offsets.push_back(total);
      total += align_up(static_cast<size_t>(s.shape.numel()) * dtype_size(host_form ? host_dtype(s) : s.dtype));
    }
  };
  size_t total = 0, host_total = 0;
  layout(program_.inputs, input_offsets_, total, false);
  layout(program_.outputs, output_offsets_, total, false);
  layout(program_.inputs, input_host_offsets_, host_total, true);
  layout(program_.outputs, output_host_offsets_, host_total, true);
  io_ = DeviceBuffer(total);
  host_io_ = DeviceBuffer(host_total);
  for (const TensorSpec& s : program_.inputs) {
    // Mapped, so that the SMs can read it too (set_sm_copies).
    input_staging_.emplace_back(static_cast<size_t>(s.shape.numel()) * dtype_size(host_dtype(s)), true);
    input_staging_device_.push_back(input_staging_.back().size() > 0 ? input_staging_.back().device_alias() : nullptr);
    input_copied_.push_back(make_event());
  }
  for (const TensorSpec& s : program_.outputs) {
    output_block_offsets_.push_back(output_block_bytes_);
    output_block_bytes_ += align_up(static_cast<size_t>(s.shape.numel()) * dtype_size(host_dtype(s)));
  }
  // Pinned allocation takes milliseconds: made here, not on the launch path. Three blocks cover
  // an armed RT lane (the running task's download, the next task's, the previous task's outputs
  // still held by its consumer).
  for (int b = 0; b < kOutputBlocksAtLoad; ++b) add_output_block();
}

size_t CudaInstanceImpl::add_output_block() {
  auto memory = std::make_shared<PinnedBuffer>(std::max<size_t>(output_block_bytes_, 1), true);
  auto* device = static_cast<std::byte*>(memory->device_alias());
  output_blocks_.push_back({std::move(memory), device, make_event()});
  return output_blocks_.size() - 1;
}

// A block no consumer holds and no enqueued download writes, a new one only when none is free.
size_t CudaInstanceImpl::free_output_block() {
  for (size_t b = 0; b < output_blocks_.size(); ++b) {
    const bool pending = std::find(output_writes_.begin(), output_writes_.end(), b) != output_writes_.end();
    if (!pending && output_blocks_[b].memory.use_count() == 1) return b;
  }
  return add_output_block();
}

void CudaInstanceImpl::set_workspace(size_t bytes) {
  ATL_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
  workspace_ = DeviceBuffer(bytes);
  for (auto& l : launches_) l->bind_workspace(workspace_.get());
  graph_.reset();
  program_graphs_.clear();
}

void* CudaInstanceImpl::address(const Binding& b) const {
  switch (b.kind) {
    case Binding::Kind::kArena:
      return arena_.bytes_ptr() + b.offset;
    case Binding::Kind::kInput:
      return io_.bytes_ptr() + input_offsets_.at(static_cast<size_t>(b.index)) + b.offset;
    case Binding::Kind::kOutput:
      return io_.bytes_ptr() + output_offsets_.at(static_cast<size_t>(b.index)) + b.offset;
    case Binding::Kind::kWeight: {
      const auto i = static_cast<size_t>(b.index);
      const int64_t elem = b.offset / static_cast<int64_t>(dtype_size(program_.weights.at(i).dtype));
      return weights_.bytes_ptr() + weight_offsets_[i] + static_cast<size_t>(elem) * device_elem_size(formats_[i]);
    }
  }
  return nullptr;
}

// enqueue_input_copy lands an f16 input's request bytes in host_io_ before converting them.
const float* CudaInstanceImpl::input_f32(const Binding& b) const {
  if (b.kind != Binding::Kind::kInput || b.dtype != DType::kF16) return nullptr;
  const auto i = static_cast<size_t>(b.index);
  const TensorSpec& spec = program_.inputs.at(i);
  // The f32 copy is in logical order; an NHWC tensor's kernels index its stored order.
  if (half_storage(spec).nhwc || (b.layout == Layout::kNHWC && b.shape.rank() == 4)) return nullptr;
  const auto* base = reinterpret_cast<const float*>(host_io_.bytes_ptr() + input_host_offsets_[i]);
  return base + b.offset / static_cast<int64_t>(dtype_size(DType::kF16));
}

WeightFormat CudaInstanceImpl::weight_format(int weight_index) const {
  return formats_.at(static_cast<size_t>(weight_index));
}

void CudaInstanceImpl::check_input(int index, const Tensor& t) const {
  ATOLL_CHECK(index >= 0 && index < static_cast<int>(program_.inputs.size()), kInvalidArgument,
              "input index {} out of range ({} inputs)", index, program_.inputs.size());
  const TensorSpec& spec = program_.inputs[static_cast<size_t>(index)];
  ATOLL_CHECK(t.shape() == spec.shape, kInvalidArgument, "input '{}' must be {}, got {}", spec.name, spec.shape.str(),
              t.shape().str());
  ATOLL_CHECK(t.dtype() == host_dtype(spec), kInvalidArgument, "input '{}' must be an {} tensor, got {}", spec.name,
              dtype_name(host_dtype(spec)), dtype_name(t.dtype()));
  ATOLL_CHECK(spec.dtype == DType::kF16 || spec.layout != Layout::kNHWC || spec.shape.rank() != 4, kUnsupported,
              "input '{}': NHWC storage of {} tensors", spec.name, dtype_name(spec.dtype));
}

void CudaInstanceImpl::enqueue_input_copy(size_t i, cudaStream_t stream, const int* flag) {
  const TensorSpec& spec = program_.inputs[i];
  const size_t bytes = input_staging_[i].size();
  std::byte* stored = io_.bytes_ptr() + input_offsets_[i];
  std::byte* raw = spec.dtype == DType::kF16 ? host_io_.bytes_ptr() + input_host_offsets_[i] : stored;
  if (uploads_with_first_kernel_) {
    launch_sm_copy(input_staging_device_[i], raw, bytes, stream, flag, upload_copy_.blocks, upload_copy_.fresh_flag);
  } else if (sm_copies_) {
    launch_sm_copy(input_staging_device_[i], raw, bytes, stream);
  } else {
    ATL_CUDA_CHECK(cudaMemcpyAsync(raw, input_staging_[i].get(), bytes, cudaMemcpyHostToDevice, stream));
  }
  if (spec.dtype == DType::kF16) {
    launch_f32_to_storage(reinterpret_cast<const float*>(raw), stored, half_storage(spec), stream, flag);
  }
  ATL_CUDA_CHECK(cudaEventRecord(input_copied_[i].get(), stream));
}

void CudaInstanceImpl::set_upload_copy(UploadCopy copy) {
  ATOLL_CHECK(copy.blocks >= 1 && copy.blocks <= 1024, kInvalidArgument, "an upload copy takes 1 to 1024 blocks, not {}",
              copy.blocks);
  upload_copy_ = copy;
}

void CudaInstanceImpl::set_input(int index, const Tensor& t) {
  check_input(index, t);
  const auto i = static_cast<size_t>(index);
  // The previous copy from this staging buffer must be done before it is overwritten.
  ATL_CUDA_CHECK(cudaEventSynchronize(input_copied_[i].get()));
  copy_to_staging_buffer(i, t);
  enqueue_input_copy(i, stream_.get());
}

void CudaInstanceImpl::copy_to_staging_buffer(size_t i, const Tensor& t) {
  if (!is_staging(i, t)) staging_copier().copy(input_staging_[i].get(), t.raw(), t.nbytes());
}

std::vector<Tensor> CudaInstanceImpl::staging_inputs() {
  std::vector<Tensor> out;
  for (size_t i = 0; i < program_.inputs.size(); ++i) {
    const TensorSpec& spec = program_.inputs[i];
    // Non-owning: the instance owns the pinned buffer and outlives the tensors (see the header).
    std::shared_ptr<std::byte[]> view(static_cast<std::byte*>(input_staging_[i].get()), [](std::byte*) {});
    out.push_back(Tensor::over(host_dtype(spec), spec.shape, std::move(view)));
  }
  return out;
}

bool CudaInstanceImpl::inputs_are_staging(std::span<const Tensor> inputs) const {
  if (inputs.size() != program_.inputs.size()) return false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!is_staging(i, inputs[i])) return false;
  }
  return true;
}

bool CudaInstanceImpl::stage_inputs(std::span<const Tensor> inputs, cudaStream_t stream,
                                    const std::function<bool()>& should_yield) {
  check_inputs(inputs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    ATL_CUDA_CHECK(cudaEventSynchronize(input_copied_[i].get()));
    if (is_staging(i, inputs[i])) continue;
    const auto* src = inputs[i].raw();
    auto* dst = static_cast<std::byte*>(input_staging_[i].get());
    for (size_t done = 0; done < inputs[i].nbytes(); done += kStagingChunkBytes) {
      if (should_yield && should_yield()) return false;
      copy_to_staging(dst + done, src + done, std::min(kStagingChunkBytes, inputs[i].nbytes() - done));
    }
  }
  if (!uploads_with_first_kernel_) enqueue_inputs(stream);
  return true;
}

void CudaInstanceImpl::check_inputs(std::span<const Tensor> inputs) const {
  ATOLL_CHECK(inputs.size() == program_.inputs.size(), kInvalidArgument, "program '{}' takes {} inputs, got {}",
              program_.model, program_.inputs.size(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) check_input(static_cast<int>(i), inputs[i]);
}

void CudaInstanceImpl::enqueue_inputs(cudaStream_t stream) {
  for (size_t i = 0; i < program_.inputs.size(); ++i) enqueue_input_copy(i, stream);
}

void CudaInstanceImpl::fill_staging(std::span<const Tensor> inputs) {
  check_inputs(inputs);
  for (size_t i = 0; i < inputs.size(); ++i) copy_to_staging_buffer(i, inputs[i]);
}

void CudaInstanceImpl::preload(cudaStream_t stream) {
  load_io_kernels();  // the SM-copy and preemptible-upload kernels too, whatever the settings now
  for (size_t i = 0; i < program_.inputs.size(); ++i) {
    ATL_CUDA_CHECK(cudaEventSynchronize(input_copied_[i].get()));
    std::memset(input_staging_[i].get(), 0, input_staging_[i].size());
  }
  enqueue_inputs(stream);
  set_persist_window(stream);
  for (size_t k = 0; k < launches_.size(); ++k) launch_windowed(k, stream, nullptr);
  clear_stream_window(stream);
  enqueue_outputs(stream);
  ATL_CUDA_CHECK(cudaStreamSynchronize(stream));
  check_index_error();
  // Captured now, while no work is held anywhere: the scheduler's RT tasks launch it.
  if (!residency_) capture_program_graphs();
}

void CudaInstanceImpl::enqueue_output_copy(size_t i, const OutputBlock& block, cudaStream_t stream) {
  const TensorSpec& spec = program_.outputs[i];
  const std::byte* stored = io_.bytes_ptr() + output_offsets_[i];
  if (spec.dtype == DType::kF16) {
    auto* raw = reinterpret_cast<float*>(host_io_.bytes_ptr() + output_host_offsets_[i]);
    launch_storage_to_f32(stored, raw, half_storage(spec), stream);
    stored = reinterpret_cast<const std::byte*>(raw);
  }
  const size_t bytes = static_cast<size_t>(spec.shape.numel()) * dtype_size(host_dtype(spec));
  if (sm_copies_) {
    launch_sm_copy(stored, block.device + output_block_offsets_[i], bytes, stream);
  } else {
    auto* host = static_cast<std::byte*>(block.memory->get()) + output_block_offsets_[i];
    ATL_CUDA_CHECK(cudaMemcpyAsync(host, stored, bytes, cudaMemcpyDeviceToHost, stream));
  }
}

// A view, not a copy: a large output copied into fresh host memory costs milliseconds of page
// faults (6 MB: 0.7-3.6 ms), on the scheduler's thread where it delays RT work.
Tensor CudaInstanceImpl::output_view(size_t block, size_t i) const {
  const TensorSpec& spec = program_.outputs[i];
  const std::shared_ptr<PinnedBuffer>& memory = output_blocks_[block].memory;
  std::shared_ptr<std::byte[]> view(memory, static_cast<std::byte*>(memory->get()) + output_block_offsets_[i]);
  return Tensor::over(host_dtype(spec), spec.shape, std::move(view));
}

void CudaInstanceImpl::enqueue_outputs(cudaStream_t stream) {
  newest_written_output();  // downloads nobody collected (synchronous runs) free their blocks
  const size_t block = free_output_block();
  for (size_t i = 0; i < program_.outputs.size(); ++i) enqueue_output_copy(i, output_blocks_[block], stream);
  ATL_CUDA_CHECK(cudaEventRecord(output_blocks_[block].written.get(), stream));
  output_writes_.push_back(block);
}

std::deque<size_t>::iterator CudaInstanceImpl::newest_written_output() {
  for (auto it = output_writes_.end(); it != output_writes_.begin();) {
    --it;
    const cudaError_t e = cudaEventQuery(output_blocks_[*it].written.get());
    if (e == cudaErrorNotReady) continue;
    if (e != cudaSuccess) throw_cuda_error(e, "cudaEventQuery", __FILE__, __LINE__);
    return output_writes_.erase(output_writes_.begin(), it);
  }
  return output_writes_.end();
}

// The newest download that has ended is the task's: later ones belong to work enqueued ahead of
// its request (an armed RT task), earlier ones to a rolled-back last kernel.
std::vector<Tensor> CudaInstanceImpl::collect_outputs() {
  check_index_error();
  const auto newest = newest_written_output();
  ATOLL_CHECK(newest != output_writes_.end(), kInternal, "'{}': outputs collected before their download ended",
              program_.model);
  const size_t block = *newest;
  output_writes_.erase(newest);
  std::vector<Tensor> out;
  for (size_t i = 0; i < program_.outputs.size(); ++i) out.push_back(output_view(block, i));
  return out;
}

Tensor CudaInstanceImpl::get_output(int index) {
  ATOLL_CHECK(index >= 0 && index < static_cast<int>(program_.outputs.size()), kInvalidArgument,
              "output index {} out of range ({} outputs)", index, program_.outputs.size());
  const auto i = static_cast<size_t>(index);
  const size_t block = free_output_block();
  enqueue_output_copy(i, output_blocks_[block], stream_.get());
  synchronize();
  return output_view(block, i);
}

void CudaInstanceImpl::run() {
  enqueue_run();
  synchronize();
}

void CudaInstanceImpl::run_range(int first, int last) {
  ATOLL_CHECK(0 <= first && first <= last && last <= static_cast<int>(launches_.size()), kInvalidArgument,
              "kernel range [{}, {}) outside [0, {})", first, last, launches_.size());
  set_persist_window(stream_.get());
  for (int k = first; k < last; ++k) launch_windowed(static_cast<size_t>(k), stream_.get(), run_flag());
  clear_stream_window(stream_.get());
}

void CudaInstanceImpl::synchronize() {
  ATL_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
  check_index_error();
}

void CudaInstanceImpl::check_index_error() {
  auto* err = static_cast<volatile int*>(index_error_.get());
  if (*err != 0) {
    *err = 0;
    ATOLL_THROW(kInvalidArgument, "program '{}': a Gather index was out of range (clamped on the GPU)", program_.model);
  }
}

MemoryReport CudaInstanceImpl::memory() const {
  MemoryReport r;
  r.weight_bytes = static_cast<int64_t>(weights_.size());
  r.arena_bytes = static_cast<int64_t>(arena_.size());
  r.workspace_bytes = static_cast<int64_t>(workspace_.size());
  r.io_bytes = static_cast<int64_t>(io_.size());
  return r;
}

void CudaInstanceImpl::launch(int kernel, cudaStream_t stream, const int* flag) {
  launch_at(kernel);  // checks the index
  if (kernel == 0 && uploads_with_first_kernel_) {
    for (size_t i = 0; i < program_.inputs.size(); ++i) enqueue_input_copy(i, stream, flag);
  }
  set_persist_window(stream);
  launch_windowed(static_cast<size_t>(kernel), stream, flag);
  clear_stream_window(stream);
}

// The scheduler never slices kernel 0, the one that may carry the input uploads.
void CudaInstanceImpl::launch_slice(int kernel, cudaStream_t stream, const int* flag, int64_t begin, int64_t end,
                                    int max_blocks) {
  const KernelLaunch& l = launch_at(kernel);
  ATOLL_CHECK(kernel != 0 || !uploads_with_first_kernel_, kInvalidArgument,
              "kernel 0 carries the input uploads: it runs only whole");
  set_persist_window(stream);
  set_kernel_window(static_cast<size_t>(kernel), stream);
  l.launch_slice(stream, flag, begin, end, max_blocks);
  clear_stream_window(stream);
}

void CudaInstanceImpl::enqueue_run() {
  // Graph nodes keep the windows of capture time, so with a residency the run goes launch by launch.
  if (!use_graph_ || residency_) return run_range(0, static_cast<int>(launches_.size()));
  if (!graph_) graph_ = capture_graph(run_flag());
  ATL_CUDA_CHECK(cudaGraphLaunch(graph_.get(), stream_.get()));
}

void CudaInstanceImpl::enqueue_program(cudaStream_t stream) {
  if (residency_) {
    for (size_t k = 0; k < launches_.size(); ++k) launch_windowed(k, stream, nullptr);
    clear_stream_window(stream);
    return;
  }
  if (program_graphs_.size() != program_graph_count_) capture_program_graphs();
  const GraphExec& g = program_graphs_[next_program_graph_++ % program_graphs_.size()];
  ATL_CUDA_CHECK(cudaGraphLaunch(g.get(), stream));
}

void CudaInstanceImpl::set_program_graphs(int count) {
  ATOLL_CHECK(count >= 1, kInvalidArgument, "program graphs: at least 1, not {}", count);
  program_graph_count_ = static_cast<size_t>(count);
}

void CudaInstanceImpl::capture_program_graphs() {
  program_graphs_.clear();
  for (size_t i = 0; i < program_graph_count_; ++i) program_graphs_.push_back(capture_graph(nullptr));
}

GraphExec CudaInstanceImpl::capture_graph(const int* flag) {
  cudaStream_t s = stream_.get();
  // Kernel nodes keep the stream's window of capture time: the persistence window rides along.
  set_persist_window(s);
  ATL_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  cudaGraph_t graph = nullptr;
  try {
    for (const auto& l : launches_) l->launch(s, flag);
  } catch (...) {
    cudaStreamEndCapture(s, &graph);  // leaves the stream usable; the partial graph is dropped
    if (graph) cudaGraphDestroy(graph);
    clear_stream_window(s);
    throw;
  }
  const cudaError_t ended = cudaStreamEndCapture(s, &graph);
  clear_stream_window(s);
  ATL_CUDA_CHECK(ended);
  cudaGraphExec_t exec = nullptr;
  const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  ATL_CUDA_CHECK(err);
  return GraphExec(exec);
}

void CudaInstanceImpl::set_use_graph(bool on) {
  use_graph_ = on;
}

void CudaInstanceImpl::set_preemptible(bool on) {
  if (on != preemptible_) graph_.reset();
  preemptible_ = on;
}

std::vector<std::byte> CudaInstanceImpl::read_binding(const Binding& b) {
  ATOLL_CHECK(b.kind == Binding::Kind::kArena || b.kind == Binding::Kind::kOutput, kInvalidArgument,
              "read_binding reads arena and output bindings, not {}", binding_kind_name(b.kind));
  std::vector<std::byte> out(static_cast<size_t>(b.bytes));
  ATL_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
  ATL_CUDA_CHECK(cudaMemcpy(out.data(), address(b), out.size(), cudaMemcpyDeviceToHost));
  return out;
}

void CudaInstanceImpl::poison_binding(const Binding& b, uint8_t byte) {
  ATOLL_CHECK(b.kind == Binding::Kind::kArena || b.kind == Binding::Kind::kOutput, kInvalidArgument,
              "poison_binding fills arena and output bindings, not {}", binding_kind_name(b.kind));
  ATL_CUDA_CHECK(cudaMemsetAsync(address(b), byte, static_cast<size_t>(b.bytes), stream_.get()));
  ATL_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
}

void CudaInstanceImpl::poison(uint8_t byte) {
  ATL_CUDA_CHECK(cudaMemsetAsync(arena_.get(), byte, arena_.size(), stream_.get()));
  const size_t first_output = output_offsets_.empty() ? io_.size() : output_offsets_.front();
  ATL_CUDA_CHECK(cudaMemsetAsync(io_.bytes_ptr() + first_output, byte, io_.size() - first_output, stream_.get()));
  ATL_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
}

}  // namespace atl::cuda
