#pragma once
// Private to the CUDA backend: the Instance implementation behind CudaInstance.
#include <deque>
#include <optional>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/launch.h"

namespace atl::cuda {

// Load-time GEMM tuning: whether to time alternatives, and where choices persist.
struct TuneSettings {
  bool autotune = true;
  std::string cache_path;  // "" = no cache
  std::string device_key;  // the cache section for this device and kernel set
};

class TuneCache;

class CudaInstanceImpl final : public CudaInstance, private LoadContext {
 public:
  CudaInstanceImpl(const Program& program, const WeightStore& weights, int device, const DeviceInfo& info,
                   const TuneSettings& tuning);
  ~CudaInstanceImpl() override;

  const Program& program() const override { return program_; }
  void set_input(int index, const Tensor& t) override;
  Tensor get_output(int index) override;
  bool stage_inputs(std::span<const Tensor> inputs, cudaStream_t stream,
                    const std::function<bool()>& should_yield) override;
  void enqueue_outputs(cudaStream_t stream) override;
  std::vector<Tensor> collect_outputs() override;
  void enqueue_inputs(cudaStream_t stream) override;
  void fill_staging(std::span<const Tensor> inputs) override;
  void preload(cudaStream_t stream) override;
  std::vector<Tensor> staging_inputs() override;
  bool inputs_are_staging(std::span<const Tensor> inputs) const override;
  void run() override;
  void run_range(int first, int last) override;
  void synchronize() override;
  MemoryReport memory() const override;

  cudaStream_t stream() const override { return stream_.get(); }
  int* preempt_flag() const override { return static_cast<int*>(flag_.get()); }
  void launch(int kernel, cudaStream_t stream, const int* flag) override;
  int64_t slice_units(int kernel) const override { return launch_at(kernel).slice_units(); }
  bool grid_stride(int kernel) const override { return launch_at(kernel).grid_stride(); }
  void launch_slice(int kernel, cudaStream_t stream, const int* flag, int64_t begin, int64_t end,
                    int max_blocks) override;
  void enqueue_run() override;
  void enqueue_program(cudaStream_t stream) override;
  void set_program_graphs(int count) override;
  void set_use_graph(bool on) override;
  void set_preemptible(bool on) override;
  void set_sm_copies(bool on) override { sm_copies_ = on; }
  void set_uploads_with_first_kernel(bool on) override { uploads_with_first_kernel_ = on; }
  void set_upload_copy(UploadCopy copy) override;
  std::vector<double> time_kernels(int repeats) override;
  std::vector<GemmTuneResult> tune_gemms(int repeats) override;
  LoadTuning load_tuning() const override { return load_tuning_; }
  std::string gemm_choice(int kernel) const override;
  int gemm_choice_count(int kernel) const override;
  void select_gemm_choice(int kernel, int choice) override;
  void set_l2_residency(const L2Residency* residency) override;
  int64_t persisting_l2_limit() const override;
  void set_l2_persistence(L2Persist buffer, double hit_ratio) override;
  int64_t l2_persist_bytes(L2Persist buffer) const override;
  std::vector<std::byte> read_binding(const Binding& b) override;
  void poison(uint8_t byte) override;
  void poison_binding(const Binding& b, uint8_t byte) override;

 private:
  // LoadContext, for the entry points while kernels are prepared.
  void* address(const Binding& b) const override;
  WeightFormat weight_format(int weight_index) const override;
  const DeviceInfo& device() const override { return info_; }
  int* index_error_flag() const override { return index_error_device_; }
  const float* input_f32(const Binding& b) const override;

  // The flag run(), run_range() and the graph pass: the instance's own, or none when disabled.
  void check_input(int index, const Tensor& t) const;
  void check_inputs(std::span<const Tensor> inputs) const;
  // Copies `t` into staging buffer i, unless it is that buffer (staging_inputs).
  void copy_to_staging_buffer(size_t i, const Tensor& t);
  bool is_staging(size_t i, const Tensor& t) const { return t.raw() == input_staging_[i].get(); }
  // Staging buffer i -> device (and f16 storage), then records input_copied_[i] on `stream`.
  // `flag`: a BE upload's (set_uploads_with_first_kernel), which stops it like a kernel.
  void enqueue_input_copy(size_t i, cudaStream_t stream, const int* flag = nullptr);
  // Output i -> f32 (when stored f16) -> its place in `block`, on `stream`; and a tensor over the
  // last block written.
  struct OutputBlock;
  void enqueue_output_copy(size_t i, const OutputBlock& block, cudaStream_t stream);
  size_t free_output_block();
  size_t add_output_block();
  // The newest of output_writes_ whose download has ended, the older ones dropped; end() if none.
  std::deque<size_t>::iterator newest_written_output();
  Tensor output_view(size_t block, size_t i) const;
  // Throws (and clears the word) when a Gather kernel saw an index out of range.
  void check_index_error();
  const int* run_flag() const { return preemptible_ ? preempt_flag() : nullptr; }
  void upload_weights(const WeightStore& weights);
  void allocate_io();
  void set_workspace(size_t bytes);  // waits for the stream, rebinds every launch, drops the graph
  GraphExec capture_graph(const int* flag);
  void capture_program_graphs();
  // Best-of-`repeats` time of one launch, measured over a few back-to-back launches.
  double time_one(size_t kernel, int repeats);
  // Times every GEMM alternative of every GEMM-backed kernel and keeps the fastest; with
  // share_by_key, kernels of equal geometry reuse the first one's result.
  // With a cache, kernels whose geometry it holds take the cached choice (when still offered)
  // and the rest are timed and remembered.
  std::vector<GemmTuneResult> tune(int repeats, bool share_by_key, TuneCache* cache = nullptr);
  void autotune_gemms(const TuneSettings& tuning);
  KernelLaunch& launch_at(int kernel) const;
  // Launches kernel k on s with its residency window when a residency is set. Persistence has
  // one window for every kernel: set_persist_window before a range, clear_stream_window after.
  void launch_windowed(size_t k, cudaStream_t s, const int* flag) const;
  void set_kernel_window(size_t k, cudaStream_t s) const;  // kernel k's residency window, if any
  // Sets the stream's access-policy window (bytes == 0 turns it off).
  void set_stream_window(cudaStream_t s, const L2Window& w) const;
  void set_persist_window(cudaStream_t s) const;   // no-op without persistence
  void clear_stream_window(cudaStream_t s) const;  // no-op without residency or persistence
  void clear_l2_state();  // windows off on our stream, persisting lines reset, limit 0

  Program program_;
  DeviceInfo info_;
  int device_ = 0;
  LoadTuning load_tuning_;
  std::vector<WeightFormat> formats_;
  std::vector<size_t> weight_offsets_, input_offsets_, output_offsets_;
  DeviceBuffer weights_, arena_, workspace_, io_, flag_;
  // Inputs and outputs in their request form (f32 for f16 storage), converted on the device.
  DeviceBuffer host_io_;
  std::vector<size_t> input_host_offsets_, output_host_offsets_;
  PinnedBuffer index_error_;  // mapped: Gather writes it, synchronize() reads it
  int* index_error_device_ = nullptr;
  std::vector<PinnedBuffer> input_staging_;  // mapped
  std::vector<void*> input_staging_device_;  // their device addresses
  bool sm_copies_ = false;                   // set_sm_copies
  bool uploads_with_first_kernel_ = false;   // set_uploads_with_first_kernel
  UploadCopy upload_copy_;                   // set_upload_copy
  // Outputs in host memory, all of a task's in one pinned block (output i at its offset). Tensors
  // handed out alias their block, which is not written again while held.
  struct OutputBlock {
    std::shared_ptr<PinnedBuffer> memory;  // mapped
    std::byte* device = nullptr;           // its device address
    Event written;                         // recorded behind the block's last download
  };
  std::vector<size_t> output_block_offsets_;
  size_t output_block_bytes_ = 0;
  std::vector<OutputBlock> output_blocks_;
  std::deque<size_t> output_writes_;  // blocks with an enqueued download, oldest first
  std::vector<Event> input_copied_;
  Stream stream_;
  std::vector<std::unique_ptr<KernelLaunch>> launches_;
  GraphExec graph_;           // enqueue_run's, with run_flag()
  std::vector<GraphExec> program_graphs_;  // enqueue_program's, without the flag
  size_t program_graph_count_ = 1;
  size_t next_program_graph_ = 0;
  bool use_graph_ = true;
  bool preemptible_ = true;
  std::optional<L2Residency> residency_;
  struct PersistWindow {
    L2Persist buffer = L2Persist::kOff;
    std::byte* base = nullptr;
    size_t bytes = 0;
    double hit_ratio = 1.0;
  };
  std::optional<PersistWindow> persist_;  // set_l2_persistence
};

}  // namespace atl::cuda
