#pragma once
// Padding's capped grids. A grid-stride kernel writes the same outputs on any grid, so the
// scheduler may run one whole on a few SMs beside an RT task instead of on every SM the device
// holds resident (KernelLaunch::grid_stride). The cap travels to the grid helpers of grid-stride
// kernels (blocks_for, resident_row_blocks) as a per-thread setting rather than a parameter of
// every launcher: the launch path of each op family stays as it is, and launches made outside a
// scope (every other one, on every thread) are uncapped.
namespace atl::cuda {

// The most blocks a grid-stride launch made on this thread may have; 0: no cap.
int grid_cap();

// Sets grid_cap() to `max_blocks` (0: none) for its lifetime, then restores the one before.
class GridCapScope {
 public:
  explicit GridCapScope(int max_blocks);
  ~GridCapScope();
  GridCapScope(const GridCapScope&) = delete;
  GridCapScope& operator=(const GridCapScope&) = delete;

 private:
  int previous_;
};

}  // namespace atl::cuda
