#include "backends/sim/sim_profile.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "ir/op.h"

namespace atl::sim {

namespace {

int64_t waves_of(int64_t blocks, int64_t slots) {
  return (blocks + slots - 1) / slots;
}

}  // namespace

ModelProfile profile_of_shapes(const Program& program, const std::vector<SimKernelShape>& shapes,
                               const SimGpuConfig& config, const std::string& device) {
  ATOLL_CHECK(shapes.size() == program.kernels.size(), kInvalidArgument, "{} shapes for program '{}' of {} kernels",
              shapes.size(), program.model, program.kernels.size());
  ModelProfile p;
  p.model = program.model;
  p.batch = program.batch;
  p.fingerprint = program.fingerprint;
  p.device = device;
  p.sm_count = config.sm_count;
  p.repeats = 1;  // the model is deterministic
  p.peak_flops = config.peak_flops;
  p.peak_bytes_per_s = config.peak_bytes_per_s;
  const int64_t slots = config.slot_count();
  for (size_t i = 0; i < shapes.size(); ++i) {
    const SimKernelShape& s = shapes[i];
    KernelProfile k;
    k.name = program.kernels[i].name;
    k.time_us = static_cast<double>(waves_of(s.blocks, slots) * s.block_ns) / 1e3;
    k.grid_blocks = s.blocks;
    k.resident_blocks_per_sm = config.blocks_per_sm;
    k.sm_share = sm_share_of(s.blocks, config.blocks_per_sm, config.sm_count);
    const SimTime check = s.check_ns > 0 ? std::min(s.check_ns, s.block_ns) : config.loop_check_ns;
    k.exit_us = static_cast<double>(check > 0 ? check / 2 : s.block_ns / 2) / 1e3;
    k.slice_units = sim_slice_units(program.kernels[i], static_cast<int>(i), s);
    k.grid_stride = sim_grid_stride(program.kernels[i], static_cast<int>(i));
    k.op = std::string(op_name(program.kernels[i].op));
    k.flops = program.kernels[i].flops;
    k.bytes = program.kernels[i].bytes_moved;
    p.kernels.push_back(std::move(k));
  }
  return p;
}

std::vector<SimKernelShape> shapes_from_profile(const Program& program, const ModelProfile& profile,
                                                const SimGpuConfig& config) {
  check_profile_program(profile, program);
  const int64_t slots = config.slot_count();
  std::vector<SimKernelShape> shapes;
  shapes.reserve(profile.kernels.size());
  for (size_t i = 0; i < profile.kernels.size(); ++i) {
    const KernelProfile& k = profile.kernels[i];
    // Blocks scale with the slots: the share of the device filled, and the waves, stay the same.
    const double capacity = static_cast<double>(k.resident_blocks_per_sm) * profile.sm_count;
    const auto scaled = std::llround(static_cast<double>(k.grid_blocks) * static_cast<double>(slots) / capacity);
    SimKernelShape s;
    s.blocks = std::max<int64_t>(1, scaled);
    const double block_ns = k.time_us * 1e3 / static_cast<double>(waves_of(s.blocks, slots));
    s.block_ns = std::max<SimTime>(1, static_cast<SimTime>(std::llround(block_ns)));
    s.check_ns = check_ns_of(program.kernels[i], s, config);
    shapes.push_back(s);
  }
  return shapes;
}

}  // namespace atl::sim
