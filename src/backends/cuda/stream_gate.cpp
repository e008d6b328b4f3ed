#include "backends/cuda/stream_gate.h"

#include "backends/cuda/stream_write.h"
#include "core/error.h"
#include "core/gate_word.h"

namespace atl::cuda {

StreamGate::StreamGate() : word_device_(word_.device_alias()) {
  *static_cast<volatile uint32_t*>(word_.get()) = 0;
}

void StreamGate::hold(cudaStream_t stream) {
  // Tokens only grow: a hold waits for the word to reach its own number (wraps after 2^32 holds,
  // far beyond a process's RT requests at any rate the GPU serves).
  stream_wait_value32_geq(stream, word_device_, held_ + 1);
  ++held_;
}

void StreamGate::follow(cudaStream_t stream) {
  ATOLL_CHECK(opened_ < held_, kInvalidArgument, "stream gate followed with no hold pending ({} opened)", opened_);
  stream_wait_value32_geq(stream, word_device_, held_);
}

void StreamGate::open() {
  ATOLL_CHECK(opened_ < held_, kInvalidArgument, "stream gate opened with no hold pending ({} opened)", opened_);
  ++opened_;
  raise_gate_word(host_word(), opened_);
}

void StreamGate::open_all() {
  while (pending() > 0) open();
}

}  // namespace atl::cuda
