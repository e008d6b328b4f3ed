// The CUDA Instance's L2 controls: AutoScratch's residency configs (one access-policy window
// per kernel over the arena) and persistence (one window over the weights or the arena for
// every kernel, kept in the captured graphs), which exclude each other.
#include <algorithm>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_instance.h"
#include "core/error.h"

namespace atl::cuda {

namespace {

// The stream's access-policy window: `bytes` from `base` persisting at `hit_ratio`, the rest of
// the window's lines `miss`; no window where `bytes` is 0.
void set_window(cudaStream_t s, void* base, size_t bytes, double hit_ratio, cudaAccessProperty miss) {
  cudaStreamAttrValue v = {};
  if (bytes > 0) {
    v.accessPolicyWindow.base_ptr = base;
    v.accessPolicyWindow.num_bytes = bytes;
    v.accessPolicyWindow.hitRatio = static_cast<float>(hit_ratio);
    v.accessPolicyWindow.hitProp = cudaAccessPropertyPersisting;
    v.accessPolicyWindow.missProp = miss;
  }
  ATL_CUDA_CHECK(cudaStreamSetAttribute(s, cudaStreamAttributeAccessPolicyWindow, &v));
}

}  // namespace

void CudaInstanceImpl::set_kernel_window(size_t k, cudaStream_t s) const {
  if (residency_) set_stream_window(s, residency_->windows[k]);
}

void CudaInstanceImpl::launch_windowed(size_t k, cudaStream_t s, const int* flag) const {
  set_kernel_window(k, s);
  launches_[k]->launch(s, flag);
}

void CudaInstanceImpl::set_stream_window(cudaStream_t s, const L2Window& w) const {
  if (w.bytes == 0) return set_window(s, nullptr, 0, 0.0, cudaAccessPropertyNormal);
  set_window(s, arena_.bytes_ptr() + w.offset, static_cast<size_t>(w.bytes), residency_->hit_ratio,
             cudaAccessPropertyStreaming);
}

void CudaInstanceImpl::clear_l2_state() {
  ATL_CUDA_CHECK(cudaSetDevice(device_));
  set_stream_window(stream_.get(), L2Window{});
  ATL_CUDA_CHECK(cudaCtxResetPersistingL2Cache());
  ATL_CUDA_CHECK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0));
}

void CudaInstanceImpl::set_l2_residency(const L2Residency* residency) {
  ATL_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
  if (residency == nullptr) {
    clear_l2_state();
    residency_.reset();
    return;
  }
  ATOLL_CHECK(!persist_, kInvalidArgument,
              "program '{}' keeps its {} persisting in L2; a residency config and persistence exclude each other",
              program_.model, l2_persist_name(persist_->buffer));
  const L2Residency& r = *residency;
  ATOLL_CHECK(r.windows.size() == launches_.size(), kInvalidArgument,
              "L2 residency has {} windows; program '{}' has {} kernels (was it planned for another program?)",
              r.windows.size(), program_.model, launches_.size());
  ATOLL_CHECK(r.hit_ratio >= 0.0 && r.hit_ratio <= 1.0, kInvalidArgument, "L2 hit ratio {} outside [0, 1]",
              r.hit_ratio);
  ATL_CUDA_CHECK(cudaSetDevice(device_));
  int max_setaside = 0, max_window = 0;
  ATL_CUDA_CHECK(cudaDeviceGetAttribute(&max_setaside, cudaDevAttrMaxPersistingL2CacheSize, device_));
  ATL_CUDA_CHECK(cudaDeviceGetAttribute(&max_window, cudaDevAttrMaxAccessPolicyWindowSize, device_));
  ATOLL_CHECK(r.setaside_bytes >= 0 && r.setaside_bytes <= max_setaside, kInvalidArgument,
              "L2 set-aside of {} bytes outside [0, {}] (cudaDevAttrMaxPersistingL2CacheSize of device {})",
              r.setaside_bytes, max_setaside, device_);
  for (size_t k = 0; k < r.windows.size(); ++k) {
    const L2Window& w = r.windows[k];
    ATOLL_CHECK(w.offset >= 0 && w.bytes >= 0 && w.offset + w.bytes <= program_.arena_bytes && w.bytes <= max_window,
                kInvalidArgument,
                "L2 window of kernel {} ('{}'): [{}, +{}) bytes is outside the {}-byte arena or above the {}-byte "
                "largest window",
                k, launches_[k]->name(), w.offset, w.bytes, program_.arena_bytes, max_window);
  }
  residency_ = r;
  // Lines left persisting by an earlier config would occupy the new set-aside.
  ATL_CUDA_CHECK(cudaCtxResetPersistingL2Cache());
  ATL_CUDA_CHECK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, static_cast<size_t>(r.setaside_bytes)));
}

int64_t CudaInstanceImpl::persisting_l2_limit() const {
  ATL_CUDA_CHECK(cudaSetDevice(device_));
  size_t bytes = 0;
  ATL_CUDA_CHECK(cudaDeviceGetLimit(&bytes, cudaLimitPersistingL2CacheSize));
  return static_cast<int64_t>(bytes);
}

void CudaInstanceImpl::set_persist_window(cudaStream_t s) const {
  if (!persist_) return;
  // The lines left out by the hit ratio stay ordinary: streaming would evict them first.
  set_window(s, persist_->base, persist_->bytes, persist_->hit_ratio, cudaAccessPropertyNormal);
}

void CudaInstanceImpl::clear_stream_window(cudaStream_t s) const {
  if (residency_ || persist_) set_stream_window(s, L2Window{});
}

int64_t CudaInstanceImpl::l2_persist_bytes(L2Persist buffer) const {
  if (buffer == L2Persist::kOff) return 0;
  int max_window = 0;
  ATL_CUDA_CHECK(cudaDeviceGetAttribute(&max_window, cudaDevAttrMaxAccessPolicyWindowSize, device_));
  const size_t bytes = buffer == L2Persist::kWeights ? weights_.size() : arena_.size();
  return static_cast<int64_t>(std::min(bytes, static_cast<size_t>(max_window)));
}

void CudaInstanceImpl::set_l2_persistence(L2Persist buffer, double hit_ratio) {
  ATOLL_CHECK(hit_ratio >= 0.0 && hit_ratio <= 1.0, kInvalidArgument, "L2 hit ratio {} outside [0, 1]", hit_ratio);
  ATOLL_CHECK(buffer == L2Persist::kOff || !residency_, kInvalidArgument,
              "program '{}' has an L2 residency config; persistence and a residency config exclude each other",
              program_.model);
  ATL_CUDA_CHECK(cudaSetDevice(device_));
  ATL_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
  const int64_t bytes = l2_persist_bytes(buffer);
  if (bytes == 0 || hit_ratio == 0.0) {
    persist_.reset();
  } else {
    std::byte* base = buffer == L2Persist::kWeights ? weights_.bytes_ptr() : arena_.bytes_ptr();
    persist_ = PersistWindow{buffer, base, static_cast<size_t>(bytes), hit_ratio};
  }
  // Graphs keep the window they were captured with.
  graph_.reset();
  if (!program_graphs_.empty()) capture_program_graphs();
}

}  // namespace atl::cuda
