#pragma once
// A model's kernel profile: per kernel of a compiled Program, how long it takes alone and how
// much of the GPU it fills. Keyed to the Program's fingerprint and the device it was measured
// on. Written by `atoll profile` (CUDA or the simulated GPU); read by the scheduler's padding
// mode (which BE kernel fits beside the running RT kernel) and by the simulated GPU (measured
// durations instead of its roofline guess).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "program/program.h"

namespace atl {

struct KernelProfile {
  std::string name;                // Program kernel name
  double time_us = 0;              // median standalone time
  int64_t grid_blocks = 0;         // blocks of the kernel's largest launch
  int threads_per_block = 0;       // of that launch; 0 where the device does not model threads (sim)
  int resident_blocks_per_sm = 0;  // occupancy of that launch
  int launches = 1;                // device launches the kernel makes (split-K GEMMs make two)
  // Share of the device's SMs the kernel fills: blocks / (resident per SM x SMs), at most 1.
  double sm_share = 0;
  std::optional<double> exit_us;  // median exit latency once the flag rises mid-kernel (CUDA)
  // Independent units (output tiles) a padding slice may run a range of (ExecDevice::launch_slice);
  // 0: the kernel runs only whole. The kernel's units take time_us in waves of
  // resident_blocks_per_sm x sm_count blocks.
  int64_t slice_units = 0;
  // Its one slice unit is the whole kernel, a grid-stride loop that runs on any grid: a slice of
  // it runs whole on the slice's max_blocks (padding's capped grids). Only with slice_units 1.
  bool grid_stride = false;
  // What the kernel computes, for its share of the device's peaks (roofline_of): its op, the
  // Program's count of its flops and of the bytes it must move at least, and on CUDA the GEMM
  // tile and split the tuner chose (empty where none).
  std::string op;
  double flops = 0;
  double bytes = 0;
  std::string choice;
};

struct ModelProfile {
  std::string model;
  int64_t batch = 0;
  std::string fingerprint;  // Program::fingerprint
  std::string device;       // ExecDevice::description() / Backend::device_description()
  int sm_count = 0;
  int repeats = 0;                     // timed launches per kernel
  // The device's dense fp16 tensor-core peak and its memory bandwidth (0 where unknown): on CUDA
  // from the SMs' peak clock and the memory clock and bus width the driver reports; the
  // simulator's own peaks.
  double peak_flops = 0;
  double peak_bytes_per_s = 0;
  std::vector<KernelProfile> kernels;  // one per Program kernel, in order

  double total_us() const;
};

double sm_share_of(int64_t grid_blocks, int resident_blocks_per_sm, int sm_count);

// How much room a model's kernels leave beside them, counted as padding-slices counts it (a
// grid's blocks spread over the SMs first, so a kernel leaves idle only the SMs beyond its grid):
// the share of the model's time in kernels that leave at least one SM idle, and the idle SMs
// averaged over its time. A model that fills every SM most of the time leaves BE slices beside
// it nothing to run on (session 36's H100 pairs).
struct PaddingRoom {
  double time_share_with_idle_sms = 0;
  double mean_idle_sms = 0;
};
PaddingRoom padding_room(const ModelProfile& profile);

// Where a kernel stands against the device's peaks: the rates it reached alone and their shares
// of the peaks (0 where the profile has no peak or the kernel no count). Issue 13's notes name,
// for each model that misses, the kernels that hold it back and these shares.
struct KernelRoofline {
  double flops_per_s = 0, bytes_per_s = 0;
  double flops_share = 0, bytes_share = 0;
};
KernelRoofline roofline_of(const ModelProfile& profile, const KernelProfile& kernel);
// The kernels that take most of the model's time, heaviest first: as many as cover `share` of
// it, at most `most`.
std::vector<size_t> heaviest_kernels(const ModelProfile& profile, double share, size_t most);

// Checks the fields (one entry per kernel, names as in `program`, times and shares in range)
// and that the profile belongs to `program`; throws kInvalidArgument naming the mismatch.
void check_profile_program(const ModelProfile& profile, const Program& program);
// ... and that it was measured on `device` (the description of the device about to use it).
void check_profile(const ModelProfile& profile, const Program& program, const std::string& device);

std::string profile_to_json(const ModelProfile& profile);
// Parses and checks the fields (not the program: the reader knows which one); throws kParse.
ModelProfile profile_from_json(const std::string& text, const std::string& source);
void save_profile(const ModelProfile& profile, const std::string& path);  // through core/atomic_file
ModelProfile load_profile(const std::string& path);                       // kNotFound, kParse

}  // namespace atl
