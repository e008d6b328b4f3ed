#include "sched/exec_device.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace atl::sched {

int64_t ExecDevice::slice_units(InstanceId /*instance*/, int /*kernel*/) const { return 0; }

bool ExecDevice::grid_stride(InstanceId /*instance*/, int /*kernel*/) const { return false; }

uint64_t ExecDevice::launch_slice(StreamId /*stream*/, InstanceId /*instance*/, int kernel,
                                  const KernelSlice& /*slice*/, const LaunchOptions& /*options*/) {
  ATOLL_THROW(kUnsupported, "device '{}' runs kernel {} only whole: it launches no slices", name(), kernel);
}

uint64_t ExecDevice::launch_range(StreamId stream, InstanceId instance, int first, const LaunchOptions& options) {
  const int kernels = static_cast<int>(program(instance).kernels.size());
  ATOLL_CHECK(first >= 0 && first < kernels, kInvalidArgument, "kernel range from {} of a {}-kernel program", first,
              kernels);
  uint64_t seq = 0;
  for (int k = first; k < kernels; ++k) {
    LaunchOptions o = options;
    o.timed = options.timed && (k == first || k == kernels - 1);
    o.report = options.report && k == kernels - 1;
    seq = launch(stream, instance, k, o);
  }
  return seq;
}

void ExecDevice::hold(StreamId) {
  ATOLL_THROW(kUnsupported, "device '{}' cannot hold work on a stream", name());
}

void ExecDevice::release(StreamId) {
  ATOLL_THROW(kUnsupported, "device '{}' cannot hold work on a stream", name());
}

void ExecDevice::enqueue_inputs(InstanceId, StreamId) {
  ATOLL_THROW(kUnsupported, "device '{}' cannot enqueue an upload before its inputs exist", name());
}

void ExecDevice::stage_inputs(InstanceId, std::span<const Tensor>) {
  ATOLL_THROW(kUnsupported, "device '{}' cannot stage inputs for an enqueued upload", name());
}

std::vector<Tensor> ExecDevice::request_buffers(InstanceId) {
  return {};
}

bool ExecDevice::inputs_in_staging(InstanceId, std::span<const Tensor>) {
  return false;
}

std::optional<GateOpener> ExecDevice::gate_opener(StreamId, int) {
  return std::nullopt;
}

uint32_t ExecDevice::completion_word(StreamId) {
  ATOLL_THROW(kUnsupported, "device '{}' has no completion words to read from another thread", name());
}

uint64_t ExecDevice::completed_at(StreamId, uint32_t) {
  ATOLL_THROW(kUnsupported, "device '{}' has no completion words to read from another thread", name());
}

void ExecDevice::set_sm_copies(InstanceId, bool) {
  ATOLL_THROW(kUnsupported, "device '{}' has no copies to move onto the SMs", name());
}

void ExecDevice::set_uploads_with_first_kernel(InstanceId, bool) {
  ATOLL_THROW(kUnsupported, "device '{}' has no uploads to move onto the SMs", name());
}

void ExecDevice::set_profile(InstanceId instance, ModelProfile profile) {
  if (runs_foreign_profiles()) {
    check_profile_program(profile, program(instance));
  } else {
    check_profile(profile, program(instance), description());
  }
  profiles_[instance] = std::move(profile);
}

const ModelProfile* ExecDevice::profile(InstanceId instance) const {
  const auto it = profiles_.find(instance);
  return it == profiles_.end() ? nullptr : &it->second;
}

ModelProfile ExecDevice::measure_profile(InstanceId, const std::function<void(int, int)>&) {
  ATOLL_THROW(kUnsupported, "device '{}' cannot profile kernels", name());
}

int64_t ExecDevice::set_l2_residency(InstanceId, const l2::ResidencyConfig*, const l2::L2Device&) {
  ATOLL_THROW(kUnsupported, "device '{}' has no L2 residency control", name());
}

int64_t ExecDevice::set_l2_persistence(std::span<const InstanceId>, L2Persist, int64_t) {
  ATOLL_THROW(kUnsupported, "device '{}' has no L2 persistence control", name());
}

std::vector<double> persist_hit_ratios(std::span<const int64_t> window_bytes, int64_t setaside_bytes) {
  ATOLL_CHECK(setaside_bytes >= 0, kInvalidArgument, "L2 set-aside of {} bytes", setaside_bytes);
  std::vector<size_t> order(window_bytes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return window_bytes[a] < window_bytes[b]; });
  std::vector<double> ratios(window_bytes.size(), 0.0);
  double left = static_cast<double>(setaside_bytes);
  for (size_t n = 0; n < order.size(); ++n) {
    const auto bytes = static_cast<double>(window_bytes[order[n]]);
    ATOLL_CHECK(bytes >= 0, kInvalidArgument, "L2 window of {} bytes", window_bytes[order[n]]);
    if (bytes == 0) continue;
    const double share = left / static_cast<double>(order.size() - n);
    const double covered = std::min(bytes, share);
    ratios[order[n]] = covered / bytes;
    left -= covered;
  }
  return ratios;
}

}  // namespace atl::sched
