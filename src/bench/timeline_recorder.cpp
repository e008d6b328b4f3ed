#include "bench/timeline_recorder.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "ir/op.h"

namespace atl::bench {

TimelineRecorder::TimelineRecorder(sched::ExecDevice& inner, sched::DeviceTime from, sched::DeviceTime to)
    : inner_(inner), from_(from), to_(to) {}

void TimelineRecorder::label(sched::InstanceId instance, std::string client, bool realtime) {
  labels_[instance] = Label{std::move(client), realtime};
}

sched::StreamId TimelineRecorder::create_stream(sched::StreamPriority priority) {
  const sched::StreamId s = inner_.create_stream(priority);
  streams_[s] = priority;
  return s;
}

namespace {

void tally(DeviceCallStats& c, int64_t ns) {
  ++c.count;
  c.over_100us += ns > 100'000 ? 1 : 0;
  c.total_ns += ns;
  c.longest_ns = std::max<int64_t>(c.longest_ns, ns);
}

}  // namespace

TimelineRecorder::CallTimer::~CallTimer() {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - began).count();
  tally(slot, ns);
  if (also != nullptr) tally(*also, ns);
}

std::vector<DeviceCallStats> TimelineRecorder::call_stats() const {
  static constexpr std::array<const char*, static_cast<size_t>(Call::kCount)> kNames{
      "write_inputs", "read_outputs", "launch", "launch_range", "completed",      "launch_span",  "take_error", "raise_flag",
      "lower_flag",   "hold",         "release", "enqueue_inputs", "stage_inputs", "synchronize"};
  std::vector<DeviceCallStats> out;
  for (size_t i = 0; i < calls_.size(); ++i) {
    if (calls_[i].count == 0) continue;
    out.push_back(calls_[i]);
    out.back().call = kNames[i];
  }
  return out;
}

std::vector<DeviceCallStats> TimelineRecorder::launch_stats_by_op() const {
  std::vector<DeviceCallStats> out;
  for (const auto& [op, stats] : launches_by_op_) {
    out.push_back(stats);
    out.back().call = std::string(op_name(op));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.total_ns > b.total_ns; });
  return out;
}

bool TimelineRecorder::in_window() {
  const sched::DeviceTime at = inner_.now();
  return at >= from_ && at < to_;
}

sched::LaunchOptions TimelineRecorder::timed(sched::LaunchOptions options) {
  options.timed = true;
  return options;
}

uint64_t TimelineRecorder::launch(sched::StreamId stream, sched::InstanceId instance, int kernel,
                                  const sched::LaunchOptions& options) {
  const OpKind op = inner_.program(instance).kernels.at(static_cast<size_t>(kernel)).op;
  const CallTimer timer(*this, Call::kLaunch, &launches_by_op_[op]);
  if (!in_window()) return inner_.launch(stream, instance, kernel, options);
  const uint64_t seq = inner_.launch(stream, instance, kernel, timed(options));
  pending_[stream].push_back({seq, instance, kernel, options.preemptible});
  return seq;
}

uint64_t TimelineRecorder::launch_slice(sched::StreamId stream, sched::InstanceId instance, int kernel,
                                        const sched::KernelSlice& slice, const sched::LaunchOptions& options) {
  const OpKind op = inner_.program(instance).kernels.at(static_cast<size_t>(kernel)).op;
  const CallTimer timer(*this, Call::kLaunch, &launches_by_op_[op]);
  if (!in_window()) return inner_.launch_slice(stream, instance, kernel, slice, options);
  const uint64_t seq = inner_.launch_slice(stream, instance, kernel, slice, timed(options));
  pending_[stream].push_back({seq, instance, kernel, options.preemptible});
  return seq;
}

uint64_t TimelineRecorder::launch_range(sched::StreamId stream, sched::InstanceId instance, int first,
                                        const sched::LaunchOptions& options) {
  const CallTimer timer(*this, Call::kLaunchRange);
  if (!in_window()) return inner_.launch_range(stream, instance, first, options);
  const uint64_t last = inner_.launch_range(stream, instance, first, timed(options));
  const int kernels = static_cast<int>(inner_.program(instance).kernels.size()) - first;
  pending_[stream].push_back({last, instance, first, options.preemptible, kernels});
  return last;
}

// Spans are read as soon as the scheduler sees their launches end, well before the device
// forgets them.
uint64_t TimelineRecorder::completed(sched::StreamId stream) {
  const CallTimer timer(*this, Call::kCompleted);
  const uint64_t done = inner_.completed(stream);
  auto it = pending_.find(stream);
  if (it == pending_.end()) return done;
  std::deque<Pending>& q = it->second;
  while (!q.empty() && q.front().seq <= done) {
    const Pending& p = q.front();
    // A range: its first launch's start to its last one's end.
    const auto end = inner_.launch_span(stream, p.seq);
    const auto start = p.kernels == 1 ? end : inner_.launch_span(stream, p.seq + 1 - static_cast<uint64_t>(p.kernels));
    if (start && end) {
      recorded_.push_back({stream, p.instance, p.kernel, p.preemptible, {start->start, end->end}, p.kernels});
    }
    q.pop_front();
  }
  return done;
}

void TimelineRecorder::flag_went_up() {
  if (flag_changes_.size() % 2 == 0) flag_changes_.push_back(inner_.now());
}

void TimelineRecorder::raise_flag(sched::StreamId via) {
  const CallTimer timer(*this, Call::kRaiseFlag);
  std::deque<bool>& holds = holds_[via];
  if (holds.empty()) {
    flag_went_up();
  } else {
    holds.back() = true;
  }
  inner_.raise_flag(via);
}

void TimelineRecorder::hold(sched::StreamId stream) {
  const CallTimer timer(*this, Call::kHold);
  inner_.hold(stream);
  holds_[stream].push_back(false);
}

void TimelineRecorder::release(sched::StreamId stream) {
  const CallTimer timer(*this, Call::kRelease);
  inner_.release(stream);
  std::deque<bool>& holds = holds_[stream];
  if (holds.empty()) return;
  if (holds.front()) flag_went_up();
  holds.pop_front();
}

void TimelineRecorder::lower_flag() {
  const CallTimer timer(*this, Call::kLowerFlag);
  inner_.lower_flag();
  if (flag_changes_.size() % 2 == 1) flag_changes_.push_back(inner_.now());
}

bool TimelineRecorder::flag_was_up(sched::DeviceTime t) const {
  const auto changes_so_far = std::upper_bound(flag_changes_.begin(), flag_changes_.end(), t) - flag_changes_.begin();
  return changes_so_far % 2 == 1;
}

std::vector<KernelSpan> TimelineRecorder::spans(sched::DeviceTime origin) const {
  // A track is a stream, named by its priority and the clients whose kernels it ran.
  std::map<sched::StreamId, std::set<std::string>> clients_on;
  const auto client_of = [&](sched::InstanceId instance) -> const Label& {
    static const Label kUnlabelled{"?", false};
    const auto it = labels_.find(instance);
    return it == labels_.end() ? kUnlabelled : it->second;
  };
  for (const Recorded& r : recorded_) clients_on[r.stream].insert(client_of(r.instance).client);
  std::map<sched::StreamId, std::string> track;
  for (const auto& [stream, clients] : clients_on) {
    std::string names;
    for (const std::string& c : clients) names += (names.empty() ? "" : ", ") + c;
    const auto prio = streams_.find(stream);
    const bool high = prio != streams_.end() && prio->second == sched::StreamPriority::kHigh;
    track[stream] = fmt::format("stream {} ({} priority): {}", stream, high ? "high" : "low", names);
  }
  std::vector<KernelSpan> out;
  out.reserve(recorded_.size());
  for (const Recorded& r : recorded_) {
    const Label& l = client_of(r.instance);
    KernelSpan k;
    k.track = track[r.stream];
    const std::string& first = inner_.program(r.instance).kernels[static_cast<size_t>(r.kernel)].name;
    k.name = r.kernels == 1 ? fmt::format("{} {}", l.client, first)
                            : fmt::format("{} {} .. ({} kernels, one launch)", l.client, first, r.kernels);
    k.start_ms = static_cast<double>(r.span.start - origin) / 1e6;
    k.end_ms = static_cast<double>(r.span.end - origin) / 1e6;
    k.realtime = l.realtime;
    k.preempted = r.preemptible && flag_was_up(r.span.end);
    out.push_back(std::move(k));
  }
  std::sort(out.begin(), out.end(), [](const KernelSpan& a, const KernelSpan& b) { return a.start_ms < b.start_ms; });
  return out;
}

}  // namespace atl::bench
