// Padding, as the NVIDIA-native alternative (a) of REEF's dynamic kernel padding: while an RT
// task runs, a BE lane whose next kernel fits beside the RT task's current kernel (padding.h)
// launches it, not preemptible, on its own low-priority stream. One padded kernel per lane is
// in flight at a time; the lane's cursor moves on as it ends, so a padded kernel never runs
// again, and a later reset cuts only the launches after it.
#include <algorithm>
#include <cmath>
#include <optional>

#include "core/error.h"
#include "sched/scheduler_impl.h"

namespace atl::sched {

KernelCosts KernelCosts::from(const ModelProfile& profile) {
  KernelCosts c;
  c.sm_count = profile.sm_count;
  c.ns.reserve(profile.kernels.size());
  c.share.reserve(profile.kernels.size());
  c.spread.reserve(profile.kernels.size());
  for (const KernelProfile& k : profile.kernels) {
    const DeviceTime ns = std::max<DeviceTime>(1, static_cast<DeviceTime>(std::llround(k.time_us * 1e3)));
    c.ns.push_back(ns);
    c.share.push_back(k.sm_share);
    c.spread.push_back(
        std::min(1.0, static_cast<double>(k.grid_blocks) / static_cast<double>(std::max(1, profile.sm_count))));
    const int64_t wave = std::max<int64_t>(1, int64_t{k.resident_blocks_per_sm} * profile.sm_count);
    const int64_t rounds = std::max<int64_t>(1, (k.slice_units + wave - 1) / wave);
    c.units.push_back(k.slice_units);
    c.wave_blocks.push_back(wave);
    c.round_ns.push_back(std::max<DeviceTime>(1, ns / rounds));
    c.grid_stride.push_back(k.grid_stride ? 1 : 0);
    c.grid_blocks.push_back(std::max<int64_t>(1, k.grid_blocks));
  }
  return c;
}

namespace {

// A BE kernel's units left, run in rounds of one unit per slice block, a block to an SM.
struct KernelRounds {
  DeviceTime round_ns;
  int64_t wave_blocks;
  int sm_count;
  int64_t left;
  // `best`, or the slice that runs within `time` on the SMs a `free` fraction of them holds, if
  // larger.
  SliceFit larger(const SliceFit& best, DeviceTime time, double free) const {
    // The epsilon keeps 1 - 0.8 from flooring 20 SMs of 100 to 19.
    const auto blocks = std::min(left, static_cast<int64_t>(std::floor(free * static_cast<double>(sm_count) + 1e-9)));
    if (blocks < 1 || time < round_ns) return best;
    const int64_t units = std::min(left, time / round_ns * blocks);
    if (units <= best.units) return best;
    const auto b = static_cast<double>(blocks);
    return SliceFit{units, static_cast<int>(blocks), b / static_cast<double>(sm_count),
                    b / static_cast<double>(wave_blocks)};
  }
};

// A grid-stride kernel whole on a capped grid, a block to an SM.
struct CappedGrid {
  DeviceTime ns;        // on its full grid
  int64_t full_blocks;  // of that grid
  int64_t wave_blocks;
  int sm_count;
  // Charged ns for each of the full grid's blocks, which b blocks run full / b of each.
  DeviceTime time_on(int64_t blocks) const { return std::max(ns, (ns * full_blocks + blocks - 1) / blocks); }
  // `best`, or the kernel on as many blocks as a `free` fraction of the SMs holds, if it ends within
  // `time` on them and they are more.
  SliceFit larger(const SliceFit& best, DeviceTime time, double free) const {
    const int64_t blocks =
        std::min(full_blocks, static_cast<int64_t>(std::floor(free * static_cast<double>(sm_count) + 1e-9)));
    if (blocks < 1 || blocks <= best.blocks || time_on(blocks) > time) return best;
    const auto b = static_cast<double>(blocks);
    return SliceFit{1, static_cast<int>(blocks), b / static_cast<double>(sm_count),
                    b / static_cast<double>(wave_blocks)};
  }
};

// The windows a padded BE launch may end in, as slice_beside and capped_beside walk them: for each
// RT kernel j after the current one (and the task's end, when in view), `fit(best, time, free)`
// with the time until j starts, less the launch and the window's uncertainty, and the fraction
// of SMs that every RT kernel up to j (j included: it may have begun) and the padded BE kernels
// leave.
template <typename Fit>
SliceFit best_in_windows(const RtWindow& window, DeviceTime launch_ns, Fit&& fit) {
  const KernelCosts& rt = *window.rt;
  const auto first = static_cast<size_t>(window.kernel);
  const size_t end = std::min(rt.ns.size(), first + 1 + kPaddingLookahead);
  SliceFit best;
  double free = 1.0 - window.padded_spread;  // the SMs the RT kernels overlapped so far leave
  DeviceTime ends_in = window.remaining_ns;  // until RT kernel j starts, in the loop
  for (size_t j = first; j < end; ++j) {
    free = std::min(free, 1.0 - window.padded_spread - rt.spread[j]);
    if (j > first) {
      best = fit(best, ends_in - launch_ns - window.uncertainty_ns, free);
      ends_in += rt.ns[j];
    }
  }
  if (end == rt.ns.size()) best = fit(best, ends_in - launch_ns - window.uncertainty_ns, free);
  return best;
}

}  // namespace

RtWindow rt_window(const KernelCosts& rt, int kernel, DeviceTime since, DeviceTime now) {
  RtWindow w;
  w.rt = &rt;
  w.kernel = kernel;
  w.remaining_ns = rt.ns[static_cast<size_t>(kernel)] - (now - since);
  return w;
}

std::vector<uint8_t> padding_reports(const KernelCosts& rt, DeviceTime spacing) {
  std::vector<uint8_t> reported(rt.ns.size(), 0);
  DeviceTime since_report = 0;
  for (size_t k = 0; k < rt.ns.size(); ++k) {
    since_report += rt.ns[k];
    if (since_report >= spacing || k + 1 == rt.ns.size()) {
      reported[k] = 1;
      since_report = 0;
    }
  }
  return reported;
}

RtWindow estimated_rt_window(const KernelCosts& rt, int kernel, DeviceTime since, DeviceTime now, double drift) {
  DeviceTime elapsed = now - since;
  while (!rt.reports(kernel) && elapsed >= rt.ns[static_cast<size_t>(kernel)]) {
    elapsed -= rt.ns[static_cast<size_t>(kernel)];
    ++kernel;
  }
  RtWindow w = rt_window(rt, kernel, now - elapsed, now);
  w.uncertainty_ns = static_cast<DeviceTime>(drift * static_cast<double>(now - since));
  return w;
}

bool fits_beside(const KernelCosts& be, int kernel, const RtWindow& window, DeviceTime launch_ns) {
  // An RT kernel past its profiled time ends at an unknown moment: nothing is planned beside it.
  if (window.rt == nullptr || window.remaining_ns <= 0) return false;
  const KernelCosts& rt = *window.rt;
  const DeviceTime need = launch_ns + be.ns[static_cast<size_t>(kernel)] + window.uncertainty_ns;
  const double share = be.share[static_cast<size_t>(kernel)] + window.padded_share;
  const auto first = static_cast<size_t>(window.kernel);
  const size_t end = std::min(rt.ns.size(), first + 1 + kPaddingLookahead);
  DeviceTime ends_in = window.remaining_ns;  // until RT kernel j starts, in the loop
  for (size_t j = first; j < end; ++j) {
    if (share + rt.share[j] > 1.0) return false;
    if (j > first) {
      if (ends_in >= need) return true;
      ends_in += rt.ns[j];
    }
  }
  // The task's last kernels: nothing after them to collide with.
  return end == rt.ns.size() && ends_in >= need;
}

SliceFit slice_beside(const KernelCosts& be, int kernel, int64_t done, const RtWindow& window, DeviceTime launch_ns) {
  if (window.rt == nullptr || window.remaining_ns <= 0) return {};
  const auto k = static_cast<size_t>(kernel);
  const int64_t left = be.units[k] - done;
  // A grid-stride kernel's one unit is no tile: capped_beside fits it.
  if (be.units[k] == 0 || left <= 0 || be.grid_stride[k] != 0) return {};
  const KernelRounds rounds{be.round_ns[k], be.wave_blocks[k], be.sm_count, left};
  return best_in_windows(window, launch_ns, [&](const SliceFit& best, DeviceTime time, double free) {
    return rounds.larger(best, time, free);
  });
}

SliceFit capped_beside(const KernelCosts& be, int kernel, const RtWindow& window, DeviceTime launch_ns) {
  if (window.rt == nullptr || window.remaining_ns <= 0) return {};
  const auto k = static_cast<size_t>(kernel);
  if (be.grid_stride[k] == 0 || be.units[k] != 1) return {};
  const CappedGrid grid{be.ns[k], be.grid_blocks[k], be.wave_blocks[k], be.sm_count};
  return best_in_windows(window, launch_ns, [&](const SliceFit& best, DeviceTime time, double free) {
    return grid.larger(best, time, free);
  });
}

// At add_client: a padding mode cannot plan without every client's profile, and says how to get one.
KernelCosts Scheduler::Impl::profiled_costs(const std::string& client, InstanceId instance) const {
  const ModelProfile* p = device.profile(instance);
  if (p == nullptr) {
    const Program& program = device.program(instance);
    ATOLL_THROW(kInvalidArgument,
                "mode {} needs a kernel profile of every client; client '{}' has none (atoll profile {} --batch {} "
                "--device {} --out FILE, then --profile FILE)",
                traits.name, client, program.model, program.batch, device.name());
  }
  KernelCosts costs = KernelCosts::from(*p);
  // A kernel runs in slices only as the device counts its units: a profile measured under another
  // tile choice counts other tiles, and its slices would leave some unrun; one that calls a GEMV
  // (grid-stride) what the device runs as one tile, or the other way round, would time the one as
  // the other.
  for (size_t k = 0; k < costs.units.size(); ++k) {
    const auto kernel = static_cast<int>(k);
    if (costs.units[k] != 0 && (costs.units[k] != device.slice_units(instance, kernel) ||
                                (costs.grid_stride[k] != 0) != device.grid_stride(instance, kernel))) {
      costs.units[k] = 0;
      costs.grid_stride[k] = 0;
    }
  }
  return costs;
}

// The running RT task's current kernel: estimated from the first one not seen to have ended,
// current since the scheduler first saw it so. Nothing fits once the task has no kernel left,
// or none runs.
RtWindow Scheduler::Impl::running_rt_window(Task** rt_task) {
  *rt_task = nullptr;
  for (int i : rt_lanes) {
    Lane& l = lanes[static_cast<size_t>(i)];
    if (!l.task) continue;
    Task& t = *l.task;
    const Client& c = client_of(l);
    if (t.cursor >= c.kernels) break;
    const DeviceTime now = device.now();
    if (l.seen_task != t.id) {  // first sight of the task: the guard decides for all of it
      t.padding_allowed = padding_guard.pad_beside_next(t.client);
      if (!t.padding_allowed) ++stats.padding_guarded;
    }
    if (l.seen_task != t.id || l.seen_kernel != t.cursor) {
      l.seen_task = t.id;
      l.seen_kernel = t.cursor;
      l.seen_since = now;
    }
    if (!t.padding_allowed) break;
    *rt_task = &t;
    return estimated_rt_window(c.costs, t.cursor, l.seen_since, now, options.padding_drift);
  }
  return RtWindow{};
}

void Scheduler::Impl::pad_be_lanes() {
  Task* rt_task = nullptr;
  RtWindow window = running_rt_window(&rt_task);
  if (window.rt == nullptr) return;
  for (const Lane& l : lanes) {
    if (is_rt(client_of(l)) || l.completed >= l.padded_through) continue;
    window.padded_share += l.padded_share;
    window.padded_spread += l.padded_spread;
  }
  for (Lane& l : lanes) {
    if (is_rt(client_of(l))) continue;
    // A BE request that arrives while RT tasks run back to back is staged now, or it would
    // wait for the RT queue to empty (in RT mode top_up launches nothing for it).
    if (!l.task) start_next(l);
    if (pad(l, window)) rt_task->padded_beside = true;
  }
}

// Launches the lane's next kernel beside the RT task when the lane is idle and the kernel fits,
// or, in the slicing modes, the largest slice of it that fits (a grid-stride kernel: the whole
// kernel on the largest capped grid that fits); the window then counts its slot share and SM
// spread. A slice that leaves units of its kernel to run rebases the lane so that
// its launch does not count the kernel as complete (Lane::base_seq), and the task keeps the units
// done.
bool Scheduler::Impl::pad(Lane& l, RtWindow& window) {
  if (!l.task || l.cut_at != kNoCut || l.launched != l.completed) return false;
  Task& t = *l.task;
  const Client& c = client_of(l);
  if (t.error || t.next_launch >= c.kernels) return false;
  const int kernel = t.next_launch;
  const int64_t done = t.units_done(kernel);
  // Whole where it fits and no slice of it has run, else (slicing modes) a slice that fits, or a
  // grid-stride kernel whole on a capped grid that fits.
  const bool capped = c.costs.grid_stride[static_cast<size_t>(kernel)] != 0;
  std::optional<SliceFit> slice;
  if (done > 0 || !fits_beside(c.costs, kernel, window, options.padding_launch_ns)) {
    if (!traits.slices_be) return false;
    slice = capped ? capped_beside(c.costs, kernel, window, options.padding_launch_ns)
                   : slice_beside(c.costs, kernel, done, window, options.padding_launch_ns);
    if (slice->units == 0) return false;
  }
  const bool first = kernel == 0 && t.first_seq == 0;
  LaunchOptions lo;
  lo.preemptible = false;  // it ends within the RT kernel's time: the flag must not cut it
  lo.timed = first || kernel == c.kernels - 1;
  uint64_t seq;
  try {
    seq = slice ? launch_slice(l, c.instance, kernel, KernelSlice{done, done + slice->units, slice->blocks}, lo)
                : launch(l, c.instance, kernel, lo);
  } catch (...) {
    t.error = std::current_exception();
    return false;
  }
  if (first) t.first_seq = seq;
  l.padded_through = seq;
  l.padded_share = slice ? slice->slot_share : c.costs.share[static_cast<size_t>(kernel)];
  l.padded_spread = slice ? slice->spread : c.costs.spread[static_cast<size_t>(kernel)];
  window.padded_share += l.padded_share;
  window.padded_spread += l.padded_spread;
  if (slice && done + slice->units < c.costs.units[static_cast<size_t>(kernel)]) {
    t.sliced_kernel = kernel;
    t.sliced_units = done + slice->units;
    l.base_seq = seq + 1;  // the launches after this one run kernel `kernel` on
    l.base_kernel = kernel;
  } else {
    ++t.next_launch;
  }
  ++(!slice ? stats.padded_kernels : capped ? stats.padded_capped : stats.padded_slices);
  return true;
}

}  // namespace atl::sched
