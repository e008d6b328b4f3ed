#pragma once
// What clients hand the scheduler and what they get back.
#include <cstdint>
#include <exception>
#include <functional>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "sched/exec_device.h"

namespace atl::sched {

enum class TaskClass : uint8_t { kRealTime, kBestEffort };
const char* task_class_name(TaskClass c);  // "rt" / "be"

using ClientId = int;

// Arrival stamped when the scheduler admits the request (its next look at submissions).
inline constexpr DeviceTime kArriveOnAdmission = -1;

struct Request {
  std::vector<Tensor> inputs;  // as Instance::set_input takes them
  // Scheduled arrival on the device clock: the request waits until then, and its latency is
  // measured from here, so a late submission still shows its queueing.
  DeviceTime arrival = kArriveOnAdmission;
  DeviceTime deadline = kNever;  // orders RT tasks under RtOrder::kDeadline
};

struct TaskResult {
  uint64_t id = 0;  // submission number, unique per scheduler
  ClientId client = -1;
  TaskClass task_class = TaskClass::kBestEffort;
  std::vector<Tensor> outputs;  // empty on timing-only devices
  DeviceTime arrival = 0;       // scheduled arrival
  DeviceTime admitted = 0;      // the scheduler saw it arrived (arrival -> admitted: its reaction)
  // RT: the scheduler began starting it (admitted -> started: the RT queue and entering RT mode,
  // which reads every BE lane; started -> dispatch: the holds opened and the inputs staged).
  DeviceTime started = 0;
  DeviceTime dispatch = 0;      // inputs written and the first kernel handed to the device
  DeviceTime start = 0;         // first kernel started on the device (first attempt)
  DeviceTime finish = 0;        // last kernel ended on the device (CUDA: and its outputs downloaded)
  int preemptions = 0;          // BE: times this task was preempted with kernels in flight
  int preempted_tasks = 0;      // RT: BE tasks preempted to start this task
  bool by_sentinel = false;     // RT: admitted by the arrival sentinel, not the scheduler's thread
  // By the sentinel: when it reached the arrival and held its claim (ArrivalSentinel::Opening).
  DeviceTime sentinel_reached = 0, sentinel_claimed = 0;
  DeviceTime latency() const { return finish - arrival; }
};

// Called on the scheduler's thread exactly once per request, with an error or a result.
using Completion = std::function<void(std::exception_ptr error, TaskResult result)>;

}  // namespace atl::sched
