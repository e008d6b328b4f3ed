// atoll profile: every kernel of a zoo model alone on a device (time, grid, occupancy, SM share,
// exit latency, GEMM choice), saved as a kernel profile for the padding modes and the simulator;
// printed: the heaviest kernels and their shares of the device's peaks.
#include <fmt/core.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "apps/commands.h"
#include "apps/options.h"
#include "core/error.h"
#include "models/zoo.h"
#include "runtime/model_source.h"
#include "sched/profiles.h"

namespace atl::apps {

namespace {

struct ProfileFlags {
  std::string model;
  int64_t batch = 1;
  std::string device = "cuda";
  std::string out;  // default: MODEL_bBATCH_DEVICE.profile.json
  int cap = 4;
  uint64_t seed = 0;
};

// "kernel 37/180" rewritten in place on a terminal, at most every 100 ms; nothing otherwise.
class KernelProgress {
 public:
  KernelProgress() : tty_(isatty(STDERR_FILENO) == 1) {}
  void operator()(int done, int total) {
    const auto now = std::chrono::steady_clock::now();
    if (!tty_ || (done < total && now - last_ < std::chrono::milliseconds(100))) return;
    last_ = now;
    fmt::print(stderr, "\r\033[Kkernel {}/{}", done, total);
    if (done == total) fmt::print(stderr, "\r\033[K");
    std::fflush(stderr);
  }

 private:
  bool tty_;
  std::chrono::steady_clock::time_point last_{};
};

// "412.3 (42%)", or the rate alone where the device's peak is unknown.
std::string rate_with_share(double rate, double share) {
  return share > 0 ? fmt::format("{:.1f} ({:.0f}%)", rate, 100.0 * share) : fmt::format("{:.1f}", rate);
}

// The kernels that hold the model back: the heaviest, with what each reaches of the device's
// peaks (issue 13: where a model misses, the notes name these and their shares).
void print_heaviest_kernels(const ModelProfile& p) {
  constexpr double kCovered = 0.8;
  constexpr size_t kMost = 12;
  const std::vector<size_t> heavy = heaviest_kernels(p, kCovered, kMost);
  const double total = p.total_us();
  fmt::print("the kernels that take {:.0f}% of the time (at most {}):\n", 100.0 * kCovered, kMost);
  fmt::print("  {:<36} {:<14} {:<12} {:>9} {:>6} {:>16} {:>16}\n", "kernel", "op", "choice", "us", "share",
             "TFLOP/s (peak)", "GB/s (peak)");
  for (const size_t i : heavy) {
    const KernelProfile& k = p.kernels[i];
    const KernelRoofline r = roofline_of(p, k);
    fmt::print("  {:<36} {:<14} {:<12} {:>9.1f} {:>5.1f}% {:>16} {:>16}\n", k.name, k.op,
               k.choice.empty() ? "-" : k.choice, k.time_us, 100.0 * k.time_us / total,
               rate_with_share(r.flops_per_s / 1e12, r.flops_share),
               rate_with_share(r.bytes_per_s / 1e9, r.bytes_share));
  }
  double flops = 0;
  for (const KernelProfile& k : p.kernels) flops += k.flops;
  const double tflops = flops / (total * 1e-6) / 1e12;
  if (p.peak_flops > 0) {
    fmt::print("the model: {:.1f} TFLOP/s over its kernels' time, {:.0f}% of the device's {:.0f} TFLOP/s\n", tflops,
               100.0 * tflops * 1e12 / p.peak_flops, p.peak_flops / 1e12);
  } else {
    fmt::print("the model: {:.1f} TFLOP/s over its kernels' time (the device's peak is unknown)\n", tflops);
  }
}

void run_profile_command(const ProfileFlags& f) {
  check_model_exists(f.model);
  sched::ProfileRequest r;
  r.model = ZooModel{.name = f.model, .batch = f.batch, .seed = f.seed};
  r.device = f.device;
  r.inflight_cap = f.cap;
  KernelProgress progress;
  r.on_kernel = [&](int done, int total) { progress(done, total); };
  const auto start = std::chrono::steady_clock::now();
  const ModelProfile p = sched::profile_zoo_model(r);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string out = f.out.empty() ? fmt::format("{}_b{}_{}.profile.json", f.model, f.batch, f.device) : f.out;
  save_profile(p, out);
  double share_sum = 0, sliced_us = 0;
  int with_exit = 0, sliced = 0;
  for (const KernelProfile& k : p.kernels) {
    share_sum += k.sm_share;
    with_exit += k.exit_us.has_value() ? 1 : 0;
    if (k.slice_units > 0) {
      ++sliced;
      sliced_us += k.time_us;
    }
  }
  // Which kernels padding-slices can cut into slices or run on a capped grid (grid-stride ones,
  // one unit each): a BE lane stops at the first long kernel that can do neither, so the share
  // tells how far slicing reaches in this model.
  fmt::print(
      "profiled {} batch {} on {}: {} kernels, {:.1f} us alone in total, mean SM share {:.2f}, exit latency "
      "for {} kernels, {} kernels slice or cap their grid ({:.0f}% of the time) ({:.1f} s)\n",
      p.model, p.batch, p.device, p.kernels.size(), p.total_us(), share_sum / static_cast<double>(p.kernels.size()),
      with_exit, sliced, 100.0 * sliced_us / p.total_us(), seconds);
  // As an RT model: how much of its time leaves SMs for padded BE work at all.
  const PaddingRoom room = padding_room(p);
  fmt::print("as an RT model it leaves SMs idle {:.0f}% of its time, {:.1f} of {} SMs on average\n",
             100.0 * room.time_share_with_idle_sms, room.mean_idle_sms, p.sm_count);
  print_heaviest_kernels(p);
  fmt::print("wrote {}\n", out);
}

}  // namespace

void add_profile_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("profile", "Profile every kernel of a zoo model for the padding modes");
  auto f = std::make_shared<ProfileFlags>();
  cmd->add_option("model", f->model, "Zoo model (atoll models)")->required();
  cmd->add_option("--batch", f->batch, "Batch size")->check(CLI::Range(int64_t{1}, int64_t{4096}));
  cmd->add_option("--device", f->device, "cuda or sim")->check(CLI::IsMember({"cuda", "sim"}));
  cmd->add_option("--out", f->out, "Profile file (default MODEL_bBATCH_DEVICE.profile.json)");
  cmd->add_option("--cap", f->cap, "The in-flight cap the model will be scheduled with (colocate and DISB: 4)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--seed", f->seed, "Seed for the weights")->check(kWholeUint64);
  cmd->callback([f] { run_profile_command(*f); });
}

}  // namespace atl::apps
