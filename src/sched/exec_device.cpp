#include "sched/exec_device.h"

#include "core/error.h"

namespace atl::sched {

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

}  // namespace atl::sched
