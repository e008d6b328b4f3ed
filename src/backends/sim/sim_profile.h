#pragma once
// Kernel profiles and the simulated GPU: the profile the model gives (what `atoll profile
// --device sim` writes), and launch shapes from a profile measured anywhere, so that the
// simulator runs a model with the measured durations and SM shares instead of its roofline.
#include <string>
#include <vector>

#include "backends/sim/sim_gpu.h"
#include "profile/kernel_profile.h"

namespace atl::sim {

// Each kernel alone on the simulated GPU: waves x block time, its grid, blocks_per_sm resident
// per SM, and a flag raised at a uniform moment of a block's run costing half a check interval.
ModelProfile profile_of_shapes(const Program& program, const std::vector<SimKernelShape>& shapes,
                               const SimGpuConfig& config, const std::string& device);

// Shapes that reproduce `profile` (checked against `program`): each kernel fills the same share of
// the slots as it filled of the measured device's SMs, in as many waves, and takes its measured
// time alone. A profile of this simulator's own shapes gives them back.
std::vector<SimKernelShape> shapes_from_profile(const Program& program, const ModelProfile& profile,
                                                const SimGpuConfig& config);

}  // namespace atl::sim
