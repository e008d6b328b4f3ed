#include "backends/sim/sim_gpu.h"

#include <algorithm>

#include "core/error.h"

namespace atl::sim {

namespace {
constexpr size_t kSpanHistory = 4096;
}  // namespace

SimGpu::SimGpu(SimGpuConfig config, bool record_trace)
    : config_(config),
      slots_(config.slot_count()),
      record_trace_(record_trace),
      free_slots_(slots_) {
  ATOLL_CHECK(config.sm_count >= 1 && config.blocks_per_sm >= 1, kInvalidArgument,
              "simulated GPU needs at least one SM and one block slot per SM (got {} SMs x {} slots)", config.sm_count,
              config.blocks_per_sm);
  ATOLL_CHECK(config.peak_flops > 0 && config.peak_bytes_per_s > 0, kInvalidArgument,
              "simulated GPU peaks must be positive (flops {}, bytes/s {})", config.peak_flops,
              config.peak_bytes_per_s);
  ATOLL_CHECK(config.launch_call_ns >= 0 && config.memop_call_ns >= 0 && config.query_call_ns >= 0 &&
                  config.launch_latency_ns >= 0 && config.flag_write_ns >= 0 && config.block_exit_ns >= 0 &&
                  config.loop_check_ns >= 0 && config.io_call_ns >= 0 &&
                  config.block_floor_ns >= 1 && config.split_block_ns >= 1 && config.elems_per_block >= 1 &&
                  config.gemm_check_k >= 1 && config.tma_gemm_check_k >= 1 && config.item_elems >= 1,
              kInvalidArgument,
              "simulated GPU latencies must be non-negative, block floor, split size, block size and check "
              "spacings positive");
}

int SimGpu::create_stream(int priority) {
  Stream s;
  s.priority = priority;
  s.spans.assign(kSpanHistory, {0, SimSpan{}});
  streams_.push_back(std::move(s));
  return static_cast<int>(streams_.size()) - 1;
}

SimGpu::Stream& SimGpu::stream_at(int stream) {
  ATOLL_CHECK(stream >= 0 && stream < static_cast<int>(streams_.size()), kInvalidArgument,
              "simulated GPU has no stream {} ({} streams)", stream, streams_.size());
  return streams_[static_cast<size_t>(stream)];
}

const SimGpu::Stream& SimGpu::stream_at(int stream) const {
  ATOLL_CHECK(stream >= 0 && stream < static_cast<int>(streams_.size()), kInvalidArgument,
              "simulated GPU has no stream {} ({} streams)", stream, streams_.size());
  return streams_[static_cast<size_t>(stream)];
}

uint64_t SimGpu::launch(int stream, const SimLaunch& launch) {
  return launch_all(stream, {launch});
}

uint64_t SimGpu::launch_all(int stream, const std::vector<SimLaunch>& launches) {
  Stream& s = stream_at(stream);
  ATOLL_CHECK(!launches.empty(), kInvalidArgument, "an empty launch on stream {}", stream);
  for (const SimLaunch& launch : launches) {
    ATOLL_CHECK(launch.shape.blocks >= 1 && launch.shape.block_ns >= 1, kInvalidArgument,
                "kernel {} launched with {} blocks of {} ns; both must be positive", launch.kernel,
                launch.shape.blocks, launch.shape.block_ns);
  }
  for (const SimLaunch& launch : launches) {
    Item item;
    item.seq = ++s.launched;
    item.launch = launch;
    item.issued = now_;
    item.visible = now_ + config_.launch_latency_ns;
    s.items.push_back(item);
    if (s.items.size() == 1) activate_head(stream);
  }
  advance(config_.launch_call_ns);
  return s.launched;
}

void SimGpu::write_flag(int stream, bool raised) {
  Stream& s = stream_at(stream);
  Item item;
  item.flag_write = true;
  item.flag_value = raised;
  item.issued = now_;
  item.visible = now_ + config_.flag_write_ns;
  s.items.push_back(item);
  if (s.items.size() == 1) activate_head(stream);
  advance(config_.memop_call_ns);
}

void SimGpu::hold(int stream) {
  Stream& s = stream_at(stream);
  Item item;
  item.gate = true;
  item.issued = now_;
  item.visible = kSimForever;
  s.items.push_back(item);
  advance(config_.memop_call_ns);
}

void SimGpu::release(int stream) {
  Stream& s = stream_at(stream);
  const auto held =
      std::find_if(s.items.begin(), s.items.end(), [](const Item& i) { return i.gate && i.visible == kSimForever; });
  ATOLL_CHECK(held != s.items.end(), kInvalidArgument, "simulated stream {} has no hold to release", stream);
  held->visible = now_ + config_.gate_open_ns;
  if (held == s.items.begin()) push_event(held->visible, EventKind::kStreamHead, stream);
}

void SimGpu::write_flag_blocking(bool raised) {
  advance(config_.flag_write_ns);
  set_flag(raised);
  dispatch();
}

uint64_t SimGpu::launched(int stream) const {
  return stream_at(stream).launched;
}
uint64_t SimGpu::completed(int stream) const {
  return stream_at(stream).completed;
}

std::optional<SimSpan> SimGpu::span(int stream, uint64_t seq) const {
  const Stream& s = stream_at(stream);
  const auto& entry = s.spans[seq % kSpanHistory];
  if (seq == 0 || seq > s.completed || entry.first != seq) return std::nullopt;
  return entry.second;
}

std::exception_ptr SimGpu::take_error(int stream) {
  Stream& s = stream_at(stream);
  advance(config_.query_call_ns);
  std::exception_ptr e = s.error;
  s.error = nullptr;
  return e;
}

bool SimGpu::busy() const {
  return std::any_of(streams_.begin(), streams_.end(), [](const Stream& s) { return !s.items.empty(); });
}

void SimGpu::push_event(SimTime time, EventKind kind, int index, uint32_t generation) {
  events_.push(Event{time, event_order_++, kind, index, generation});
}

// Makes the front of `stream` current: flag writes land and leave, a kernel starts dispatching.
// A front that is not visible yet wakes the stream when it is.
void SimGpu::activate_head(int stream) {
  Stream& s = streams_[static_cast<size_t>(stream)];
  while (!s.head_active && !s.items.empty()) {
    Item& head = s.items.front();
    if (head.visible > now_) {
      // A pending hold wakes the stream when it is released.
      if (head.visible != kSimForever) push_event(head.visible, EventKind::kStreamHead, stream);
      return;
    }
    if (head.gate) {
      // Held work could start only from now: the trace's `visible` says so.
      s.items.pop_front();
      for (Item& i : s.items) {
        if (i.gate) break;
        i.visible = std::max(i.visible, now_);
      }
      continue;
    }
    if (head.flag_write) {
      set_flag(head.flag_value);
      s.items.pop_front();
      continue;
    }
    s.head_active = true;
    head.ready = now_;
  }
  dispatch();
}

// Fills free slots: higher stream priority first, then the kernel that became ready first.
void SimGpu::dispatch() {
  while (free_slots_ > 0) {
    int best = -1;
    for (int i = 0; i < static_cast<int>(streams_.size()); ++i) {
      const Stream& s = streams_[static_cast<size_t>(i)];
      if (!s.head_active) continue;
      const Item& h = s.items.front();
      if (h.dispatched >= h.launch.shape.blocks) continue;
      if (best < 0) {
        best = i;
        continue;
      }
      const Stream& b = streams_[static_cast<size_t>(best)];
      if (s.priority > b.priority || (s.priority == b.priority && h.ready < b.items.front().ready)) best = i;
    }
    if (best < 0) return;
    Item& h = streams_[static_cast<size_t>(best)].items.front();
    const int64_t n = std::min(free_slots_, h.launch.shape.blocks - h.dispatched);
    int index;
    if (free_groups_.empty()) {
      index = static_cast<int>(groups_.size());
      groups_.emplace_back();
    } else {
      index = free_groups_.back();
      free_groups_.pop_back();
    }
    Group& g = groups_[static_cast<size_t>(index)];
    g.stream = best;
    g.item = &h;
    g.blocks = n;
    g.start = now_;
    g.exiting = h.launch.preemptible && flag_;
    g.end = now_ + (g.exiting ? config_.block_exit_ns : h.launch.shape.block_ns);
    g.live = true;
    ++g.generation;
    if (g.exiting) h.cut = true;
    if (h.start < 0) h.start = now_;
    h.dispatched += n;
    ++h.running_groups;
    free_slots_ -= n;
    push_event(g.end, EventKind::kGroupEnd, index, g.generation);
  }
}

// A raised flag makes running preemptible blocks leave at their next loop point.
void SimGpu::set_flag(bool raised) {
  flag_ = raised;
  if (!raised) return;
  for (size_t i = 0; i < groups_.size(); ++i) {
    Group& g = groups_[i];
    if (!g.live || g.exiting || !g.item->launch.preemptible) continue;
    const SimTime own = g.item->launch.shape.check_ns;
    const SimTime interval = own > 0 ? own : config_.loop_check_ns;
    if (interval <= 0) continue;
    const SimTime checks = (now_ - g.start + interval - 1) / interval;
    const SimTime exit = g.start + checks * interval;
    if (exit >= g.end) continue;
    g.end = exit;
    g.exiting = true;
    g.item->cut = true;
    ++g.generation;
    push_event(g.end, EventKind::kGroupEnd, static_cast<int>(i), g.generation);
  }
}

void SimGpu::end_group(int index) {
  Group& g = groups_[static_cast<size_t>(index)];
  g.live = false;
  free_slots_ += g.blocks;
  Item& item = *g.item;
  --item.running_groups;
  free_groups_.push_back(index);
  if (item.dispatched == item.launch.shape.blocks && item.running_groups == 0) complete_head(g.stream);
}

void SimGpu::complete_head(int stream) {
  Stream& s = streams_[static_cast<size_t>(stream)];
  const Item& h = s.items.front();
  s.spans[h.seq % kSpanHistory] = {h.seq, SimSpan{h.start, now_}};
  if (record_trace_) {
    trace_.push_back(SimLaunchRecord{stream, h.seq, h.launch.tag, h.launch.kernel, h.issued, h.visible, h.start, now_,
                                     h.launch.shape.blocks, h.launch.preemptible, h.cut});
  }
  if (!h.cut && h.launch.work != nullptr && (!h.launch.completes_kernel || h.launch.completes_kernel())) {
    try {
      h.launch.work->run_range(h.launch.kernel, h.launch.kernel + 1);
    } catch (...) {
      if (!s.error) s.error = std::current_exception();
    }
  }
  ++s.completed;
  ++completions_;
  s.items.pop_front();
  s.head_active = false;
  activate_head(stream);
}

void SimGpu::process(const Event& e) {
  now_ = e.time;
  switch (e.kind) {
    case EventKind::kStreamHead:
      activate_head(e.index);
      break;
    case EventKind::kGroupEnd: {
      const Group& g = groups_[static_cast<size_t>(e.index)];
      if (g.live && g.generation == e.generation) end_group(e.index);
      break;
    }
  }
  dispatch();
}

void SimGpu::run_events_until(SimTime time) {
  while (!events_.empty() && events_.top().time <= time) {
    const Event e = events_.top();
    events_.pop();
    process(e);
  }
}

void SimGpu::advance(SimTime ns) {
  ATOLL_CHECK(ns >= 0, kInvalidArgument, "simulated time cannot go back ({} ns)", ns);
  const SimTime target = now_ + ns;
  run_events_until(target);
  now_ = target;
}

void SimGpu::run_until_completion(SimTime deadline) {
  while (completions_ == completions_seen_ && !events_.empty() && events_.top().time <= deadline) {
    const Event e = events_.top();
    events_.pop();
    process(e);
  }
  if (completions_ != completions_seen_) {
    completions_seen_ = completions_;
    return;
  }
  if (deadline != kSimForever) now_ = std::max(now_, deadline);
}

void SimGpu::synchronize(int stream) {
  const Stream& s = stream_at(stream);
  while (!s.items.empty()) {
    ATOLL_CHECK(!events_.empty(), kInternal, "simulated stream {} has work but no pending event", stream);
    const Event e = events_.top();
    events_.pop();
    process(e);
  }
}

}  // namespace atl::sim
