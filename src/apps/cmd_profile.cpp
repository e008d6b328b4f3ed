// atoll profile: every kernel of a zoo model alone on a device (time, grid, occupancy, SM share,
// exit latency), saved as a kernel profile for the padding modes and the simulator.
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
  fmt::print("as an RT model it leaves SMs idle {:.0f}% of its time, {:.1f} of {} SMs on average\nwrote {}\n",
             100.0 * room.time_share_with_idle_sms, room.mean_idle_sms, p.sm_count, out);
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
