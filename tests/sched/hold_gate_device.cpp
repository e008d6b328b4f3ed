#include "hold_gate_device.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "core/error.h"

namespace atl::sched::testing {

namespace {

// Whether a gate word at `word` has opened hold `n` (modulo 2^32, as raise_gate_word compares).
bool gate_reached(uint32_t& word, uint32_t n) {
  const uint32_t w = std::atomic_ref<uint32_t>(word).load(std::memory_order_acquire);
  return static_cast<int32_t>(w - n) >= 0;
}

}  // namespace

HoldGateDevice::HoldGateDevice() : origin_(std::chrono::steady_clock::now()) {}

void HoldGateDevice::set_kernel_ns(InstanceId instance, DeviceTime kernel_ns) {
  instances_.at(static_cast<size_t>(instance))->kernel_ns = kernel_ns;
}

void HoldGateDevice::block_first_be_launch_after_lower(std::chrono::nanoseconds block, std::function<void()> on_block) {
  std::lock_guard lock(mutex_);
  block_ = block;
  on_block_ = std::move(on_block);
  block_after_lower_ = true;
}

DeviceTime HoldGateDevice::block_returned_at() const {
  return block_returned_at_.load();
}

InstanceId HoldGateDevice::load(const Program& program, const WeightStore&) {
  auto in = std::make_unique<Instance>();
  in->program = program;
  for (const TensorSpec& spec : program.inputs) in->staging.emplace_back(DType::kF32, spec.shape);
  instances_.push_back(std::move(in));
  return static_cast<InstanceId>(instances_.size()) - 1;
}

const Program& HoldGateDevice::program(InstanceId instance) const {
  return instances_.at(static_cast<size_t>(instance))->program;
}

StreamId HoldGateDevice::create_stream(StreamPriority) {
  std::lock_guard lock(mutex_);
  streams_.emplace_back();
  return static_cast<StreamId>(streams_.size()) - 1;
}

HoldGateDevice::Stream& HoldGateDevice::stream(StreamId id) {
  ATOLL_CHECK(id >= 0 && static_cast<size_t>(id) < streams_.size(), kInvalidArgument, "no stream {}", id);
  return streams_[static_cast<size_t>(id)];
}

uint64_t HoldGateDevice::launch(StreamId id, InstanceId instance, int kernel, const LaunchOptions& options) {
  const Instance& in = *instances_.at(static_cast<size_t>(instance));
  ATOLL_CHECK(kernel >= 0 && kernel < static_cast<int>(in.program.kernels.size()), kInvalidArgument,
              "kernel {} outside a {}-kernel program", kernel, in.program.kernels.size());
  uint64_t seq = 0;
  bool block = false;
  {
    std::lock_guard lock(mutex_);
    const DeviceTime t = now();
    advance(t);
    Stream& s = stream(id);
    Op op;
    op.enqueued = t;
    op.length = in.kernel_ns;
    op.preemptible = options.preemptible;
    s.kernels.push_back(s.ops.size());
    s.ops.push_back(op);
    seq = s.kernels.size();
    block = options.preemptible && std::exchange(block_next_be_launch_, false);
  }
  if (block) {
    // The launch is on the device already; only the calling thread is held up.
    if (on_block_) on_block_();
    std::this_thread::sleep_for(block_);
    block_returned_at_.store(now());
  }
  return seq;
}

uint64_t HoldGateDevice::completed(StreamId id) {
  std::lock_guard lock(mutex_);
  advance(now());
  return stream(id).ended;
}

std::optional<LaunchSpan> HoldGateDevice::launch_span(StreamId id, uint64_t seq) {
  std::lock_guard lock(mutex_);
  advance(now());
  const Stream& s = stream(id);
  if (seq == 0 || seq > s.ended) return std::nullopt;
  return s.ops[s.kernels[seq - 1]].span;
}

void HoldGateDevice::raise_flag(StreamId via) {
  std::lock_guard lock(mutex_);
  const DeviceTime t = now();
  advance(t);
  Op op;
  op.kind = Op::Kind::kFlag;
  op.enqueued = t;
  stream(via).ops.push_back(op);
  advance(t);  // an unheld stream writes it at once
}

void HoldGateDevice::lower_flag() {
  std::lock_guard lock(mutex_);
  advance(now());
  flag_ = false;
  if (std::exchange(block_after_lower_, false)) block_next_be_launch_ = true;
}

void HoldGateDevice::hold(StreamId id) {
  std::lock_guard lock(mutex_);
  const DeviceTime t = now();
  advance(t);
  Stream& s = stream(id);
  Op op;
  op.kind = Op::Kind::kHold;
  op.enqueued = t;
  op.hold = ++s.holds;
  s.ops.push_back(op);
  s.opened_at.push_back(kNever);
}

void HoldGateDevice::release(StreamId id) {
  std::lock_guard lock(mutex_);
  const DeviceTime t = now();
  advance(t);
  Stream& s = stream(id);
  ATOLL_CHECK(s.released < s.holds, kInvalidArgument, "stream {} has no hold to release", id);
  ++s.released;
  raise_gate_word(&s.gate_word, s.released);  // a no-op where a gate opener raised it first
  advance(t);
}

std::vector<Tensor> HoldGateDevice::request_buffers(InstanceId instance) {
  return instances_.at(static_cast<size_t>(instance))->staging;
}

bool HoldGateDevice::inputs_in_staging(InstanceId instance, std::span<const Tensor> inputs) {
  const std::vector<Tensor>& staging = instances_.at(static_cast<size_t>(instance))->staging;
  if (inputs.size() != staging.size()) return false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].raw() != staging[i].raw()) return false;
  }
  return true;
}

std::optional<GateOpener> HoldGateDevice::gate_opener(StreamId id, int holds) {
  std::lock_guard lock(mutex_);
  Stream& s = stream(id);
  if (holds <= 0 || s.holds - s.released < static_cast<uint32_t>(holds)) return std::nullopt;
  return GateOpener{&s.gate_word, s.released + static_cast<uint32_t>(holds)};
}

uint32_t HoldGateDevice::completion_word(StreamId id) {
  std::lock_guard lock(mutex_);
  advance(now());
  return static_cast<uint32_t>(stream(id).ended);
}

uint64_t HoldGateDevice::completed_at(StreamId id, uint32_t word) {
  std::lock_guard lock(mutex_);
  const uint64_t launched = stream(id).kernels.size();
  return launched - static_cast<uint32_t>(static_cast<uint32_t>(launched) - word);
}

DeviceTime HoldGateDevice::now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - origin_).count();
}

void HoldGateDevice::wait_until(DeviceTime deadline) {
  DeviceTime until = kNever;
  {
    std::lock_guard lock(mutex_);
    advance(now());
    if (ended_ != ended_seen_) {
      ended_seen_ = ended_;
      return;
    }
    for (const Stream& s : streams_) until = std::min(until, next_end(s));
    until = std::min(until, deadline);
  }
  if (until != kNever) sleep_until(until);
}

// Throws where a hold is pending, as the CUDA device does: the wait would never end.
void HoldGateDevice::synchronize(StreamId id) {
  for (;;) {
    DeviceTime until = kNever;
    {
      std::lock_guard lock(mutex_);
      advance(now());
      Stream& s = stream(id);
      ATOLL_CHECK(s.released == s.holds, kInvalidArgument, "stream {} has held work: synchronizing would never return",
                  id);
      if (s.next_op == s.ops.size() && s.ended == s.kernels.size()) return;
      until = next_end(s);
    }
    sleep_until(until == kNever ? now() + 100'000 : until);
  }
}

// ---- the timeline ----

void HoldGateDevice::advance(DeviceTime t) {
  for (Stream& s : streams_) see_open_holds(s, t);
  for (;;) {  // the earliest start first: a flag write decides the kernels that start after it
    Stream* first = nullptr;
    DeviceTime first_at = kNever;
    for (Stream& s : streams_) {
      const DeviceTime at = ready_at(s);
      if (at <= t && at < first_at) {
        first = &s;
        first_at = at;
      }
    }
    if (first == nullptr) break;
    start_next(*first, first_at);
  }
  for (Stream& s : streams_) {
    while (s.ended < s.kernels.size() && s.kernels[s.ended] < s.next_op && s.ops[s.kernels[s.ended]].span.end <= t) {
      ++s.ended;
      ++ended_;
    }
  }
}

void HoldGateDevice::see_open_holds(Stream& s, DeviceTime t) {
  for (uint32_t n = 1; n <= s.holds; ++n) {
    DeviceTime& at = s.opened_at[n - 1];
    if (at != kNever) continue;
    if (!gate_reached(s.gate_word, n)) break;  // holds open in order
    at = t;
  }
}

DeviceTime HoldGateDevice::ready_at(const Stream& s) const {
  if (s.next_op == s.ops.size()) return kNever;
  const Op& op = s.ops[s.next_op];
  const DeviceTime at = std::max(op.enqueued, s.free_at);
  if (op.kind != Op::Kind::kHold) return at;
  const DeviceTime opened = s.opened_at[op.hold - 1];
  return opened == kNever ? kNever : std::max(at, opened);
}

void HoldGateDevice::start_next(Stream& s, DeviceTime at) {
  Op& op = s.ops[s.next_op++];
  switch (op.kind) {
    case Op::Kind::kHold:
      break;
    case Op::Kind::kFlag:
      flag_ = true;
      break;
    case Op::Kind::kKernel: {
      const DeviceTime length = op.preemptible && flag_ ? 0 : op.length;  // exits at block entry
      op.span = {at, at + length};
      break;
    }
  }
  s.free_at = op.kind == Op::Kind::kKernel ? op.span.end : at;
}

DeviceTime HoldGateDevice::next_end(const Stream& s) const {
  if (s.ended < s.kernels.size() && s.kernels[s.ended] < s.next_op) return s.ops[s.kernels[s.ended]].span.end;
  return kNever;
}

void HoldGateDevice::sleep_until(DeviceTime t) const {
  std::this_thread::sleep_until(origin_ + std::chrono::nanoseconds(t));
}

}  // namespace atl::sched::testing
