#include "backends/cuda/grid_cap.h"

namespace atl::cuda {

namespace {
thread_local int t_grid_cap = 0;
}  // namespace

int grid_cap() { return t_grid_cap; }

GridCapScope::GridCapScope(int max_blocks) : previous_(t_grid_cap) { t_grid_cap = max_blocks; }

GridCapScope::~GridCapScope() { t_grid_cap = previous_; }

}  // namespace atl::cuda
