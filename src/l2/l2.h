#pragma once
// Entry points for `atoll l2 info` and `atoll l2 simulate`: plain functions over a compiled Program.
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "l2/cache_sim.h"
#include "l2/slices.h"
#include "program/program.h"

namespace atl::l2 {

struct L2Info {
  std::string model;
  int64_t batch = 0;
  std::string fingerprint;
  int kernels = 0;
  int64_t arena_bytes = 0;
  int64_t slice_bytes = 0;
  int64_t slices = 0;
  int64_t setaside_max_slices = 0;  // whole slices the largest set-aside holds
  int64_t weight_bytes = 0;         // as stored on the device
  int64_t input_bytes = 0;
  int64_t output_bytes = 0;
  int64_t trace_accesses = 0;  // line accesses of one inference
  L2Device device;
};
void to_json(nlohmann::json& j, const L2Info& info);

L2Info l2_info(const Program& p, const L2Device& d, int64_t slice_bytes = kDefaultSliceBytes);

// One inference of p on d's L2 under policy, with config's slices resident (null: no set-aside,
// no hints). Throws kInvalidArgument when the config was made for another Program or cannot be
// applied on d.
SimResult simulate(const Program& p, const L2Device& d, Policy policy, const ResidencyConfig* config,
                   const SimOptions& options = {});

}  // namespace atl::l2
