#pragma once
// Flags shared by the subcommands that take a model.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>

#include "core/error.h"
#include "models/zoo.h"
#include "sched/colocate.h"
#include "sched/scheduler.h"

namespace atl::apps {

// A positive number from the whole of `text`, or nullopt.
template <typename T>
inline std::optional<T> parse_number(const std::string& text) {
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !(value > 0)) return std::nullopt;
  return value;
}

// For 64-bit unsigned options such as --seed: CLI11 would read "-1" as 2^64 - 1 and clamp 2^64 and
// above to it, silently.
inline const CLI::Validator kWholeUint64(
    [](const std::string& v) {
      uint64_t value = 0;
      const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), value);
      return ec == std::errc() && end == v.data() + v.size() && !v.empty()
                 ? std::string()
                 : "must be a whole number from 0 to 18446744073709551615, got " + v;
    },
    "UINT64");

// How an RT request reaches the device (colocate and DISB): --rt-arrival, --inputs, --rt-copies,
// --be-uploads, --rt-launch and --rt-arm-next.
struct RtPathFlags {
  std::string rt_arrival = "sentinel";
  std::string inputs = "staging";
  std::string rt_copies = "copy-engine";
  std::string be_uploads = "auto";
  std::string rt_launch = "one";
  std::string rt_arm_next = "behind";
  int sentinel_priority = 0;
  std::string sentinel_words = "claim";
};

// --be-queue-us (colocate and DISB): SchedulerOptions::be_queue_ns, in microseconds.
inline void add_be_queue_flag(CLI::App* cmd, double& us) {
  cmd->add_option("--be-queue-us", us,
                  "0 (off) or the time a BE stream's queued kernels should cover: long kernels then queue fewer "
                  "than --cap (at least one behind the running one), by their measured kernel time")
      ->check(CLI::Range(0.0, 1e6));
}

// --padding-rt-budget PCT (colocate, DISB, pairs, serve): sets SchedulerOptions::padding_rt_budget,
// a fraction, from the percent given.
inline void add_padding_budget_flag(CLI::App* cmd, double& fraction) {
  cmd->add_option_function<double>(
         "--padding-rt-budget", [&fraction](double percent) { fraction = percent / 100; },
         "Padding modes: the RT slowdown padding may cost, in percent of an RT task's device time; "
         "measured per RT client, padding then runs beside only the share of tasks that keeps it "
         "within this (0: beside every task)")
      ->check(CLI::Range(0.0, 99.0));
}

// --rt-l2 and --rt-l2-mib (colocate and DISB): the RT clients' buffer persisting in L2.
struct RtL2Flags {
  std::string buffer = "off";
  double mib = 0;  // 0: the device's largest set-aside
};

inline void add_rt_l2_flags(CLI::App* cmd, RtL2Flags& f) {
  cmd->add_option("--rt-l2", f.buffer,
                  "Keep the RT clients' weights or arena (activations) persisting in L2, so BE traffic cannot "
                  "evict them between RT requests (CUDA)")
      ->check(CLI::IsMember({"off", "weights", "arena"}));
  cmd->add_option("--rt-l2-mib", f.mib,
                  "The L2 set-aside --rt-l2 shares among the RT clients, MiB (default 0: the device's largest)")
      ->check(CLI::Range(0.0, 1024.0));
}

// The buffer --rt-l2 names, refused on devices without L2 control before anything runs.
inline L2Persist rt_l2_buffer(const RtL2Flags& f, const std::string& device) {
  const L2Persist buffer = l2_persist_from_name(f.buffer);
  ATOLL_CHECK(buffer == L2Persist::kOff || device == "cuda", kInvalidArgument,
              "--rt-l2 {} needs --device cuda: the simulated GPU has no L2 persistence", f.buffer);
  return buffer;
}

inline int64_t rt_l2_budget_bytes(const RtL2Flags& f) { return std::llround(f.mib * 1024.0 * 1024.0); }

inline void add_rt_path_flags(CLI::App* cmd, RtPathFlags& f) {
  cmd->add_option("--inputs", f.inputs,
                  "staging (each client's inputs written once into the runtime's pinned staging memory, as a "
                  "camera driver writes frames into a DMA buffer: no host copy per request) or pageable (every "
                  "request copied from the client's memory into staging first)")
      ->check(CLI::IsMember({"staging", "pageable"}));
  cmd->add_option("--rt-arrival", f.rt_arrival,
                  "armed (each RT client's next task waits on the device, released by host stores from the "
                  "scheduler's thread), sentinel (armed, released at the arrival instant by a thread of its own, "
                  "which also raises the flag; needs --inputs staging) or launch (the flag write and the RT "
                  "kernels are enqueued on arrival)")
      ->check(CLI::IsMember({"armed", "sentinel", "launch"}));
  cmd->add_option("--rt-copies", f.rt_copies,
                  "how RT clients' inputs and outputs cross PCIe (CUDA): copy-engine (DMA copies, which queue behind "
                  "BE clients' copies) or sms (kernels over mapped host memory)")
      ->check(CLI::IsMember({"copy-engine", "sms"}));
  cmd->add_option("--be-uploads", f.be_uploads,
                  "how BE clients' inputs reach the device (CUDA): copy-engine (a DMA copy when the task is staged, "
                  "which RT uploads queue behind), sms (a preemptible copy kernel launched with the task's first "
                  "kernel) or auto (sms for uploads of 4 MiB or more)")
      ->check(CLI::IsMember({"copy-engine", "sms", "auto"}))
      ->default_str(f.be_uploads);
  cmd->add_option("--rt-launch", f.rt_launch,
                  "how an RT task's kernels are launched: one (a single call for the whole task: a CUDA graph) "
                  " or per-kernel (one host call each)")
      ->check(CLI::IsMember({"per-kernel", "one"}))
      ->default_str(f.rt_launch);
  cmd->add_option("--rt-arm-next", f.rt_arm_next,
                  "when an armed RT client's next task is enqueued: behind (right behind its running task) or after "
                  "(once that task has ended, so no launch call is made behind a running task)")
      ->check(CLI::IsMember({"behind", "after"}))
      ->default_str(f.rt_arm_next);
  cmd->add_option("--sentinel-priority", f.sentinel_priority,
                  "the arrival sentinel thread's SCHED_FIFO priority, 0 (normal priority) to 99; refused without "
                  "CAP_SYS_NICE, it warns and runs at normal priority")
      ->check(CLI::Range(0, 99));
  cmd->add_option("--sentinel-words", f.sentinel_words,
                  "when the arrival sentinel reads the BE streams' completion words: claim (after it claims the "
                  "opening, on the RT request's path) or spin (while it spins towards the arrival)")
      ->check(CLI::IsMember({"claim", "spin"}))
      ->default_str(f.sentinel_words);
}

inline sched::RtPath rt_path_options(const RtPathFlags& f) {
  sched::RtPath p;
  p.armed_rt = f.rt_arrival != "launch";
  p.arrival_sentinel = f.rt_arrival == "sentinel";
  p.sentinel = {f.sentinel_priority, f.sentinel_words == "spin"};
  p.rt_single_launch = f.rt_launch == "one";
  p.arm_behind_running = f.rt_arm_next == "behind";
  p.staged_inputs = f.inputs == "staging";
  p.rt_sm_copies = f.rt_copies == "sms";
  p.be_uploads = sched::be_uploads_from_name(f.be_uploads);
  return p;
}

struct ModelFlags {
  std::string model = default_model();
  ModelOptions options;
};

inline void add_model_flags(CLI::App* cmd, ModelFlags& f) {
  cmd->add_option("model", f.model, "Model name (see `atoll models`) or path to an .onnx file")->default_str(default_model());
  cmd->add_option("--batch", f.options.batch, "Batch size")->check(CLI::Range(int64_t{1}, int64_t{4096}));
  cmd->add_option("--seq", f.options.seq_len, "Sequence length for BERT models")->check(CLI::Range(int64_t{1}, int64_t{512}));
  cmd->add_option("--seed", f.options.seed, "Seed for weights and inputs")->check(kWholeUint64);
  cmd->add_option_function<std::vector<std::string>>(
         "--dim",
         [&f](const std::vector<std::string>& specs) {
           for (const std::string& spec : specs) {
             const auto eq = spec.find('=');
             int64_t value = 0;
             const char* end = spec.data() + spec.size();
             const bool ok = eq != std::string::npos && eq > 0 &&
                             std::from_chars(spec.data() + eq + 1, end, value).ptr == end && value >= 1;
             ATOLL_CHECK(ok, kInvalidArgument, "--dim '{}': expected NAME=N with N >= 1", spec);
             f.options.dims[spec.substr(0, eq)] = value;
           }
         },
         "NAME=N: size of a symbolic dimension of an ONNX model besides the batch (repeatable)");
}

// The model given, or the default when none was; an empty name is refused, not read as the default.
inline std::string model_or_default(const ModelFlags& f) {
  ATOLL_CHECK(!f.model.empty(), kInvalidArgument, "model name is empty (see `atoll models`)");
  return f.model;
}

// Creates `dir` for `flag` and checks it is writable, so a bad path fails before a long run, not after.
inline void prepare_output_dir(const std::string& dir, const std::string& flag) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  ATOLL_CHECK(!ec, kIo, "{} '{}': cannot create the directory: {}", flag, dir, ec.message());
  ATOLL_CHECK(std::filesystem::is_directory(dir, ec), kIo, "{} '{}': not a directory", flag, dir);
  ATOLL_CHECK(access(dir.c_str(), W_OK | X_OK) == 0, kIo, "{} '{}': directory is not writable", flag, dir);
}

}  // namespace atl::apps
