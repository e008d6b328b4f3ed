// The timeline recorder wraps the device of DISB's traced mode: every call must reach the inner
// device, or the traced mode runs differently from the others (session 11: request_buffers fell
// to the base default, so the traced reset run copied every RT input on the host).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/timeline_recorder.h"
#include "core/error.h"
#include "l2/slices.h"

namespace atl::bench {
namespace {

// A device whose optional calls answer in ways the ExecDevice defaults never do, and count.
class ProbeDevice final : public sched::ExecDevice {
 public:
  int bound_threads = 0;
  int residency_calls = 0;
  std::vector<sched::InstanceId> sm_copies;
  std::vector<sched::InstanceId> buffers_asked;
  uint32_t gate_word = 0;

  std::string name() const override { return "probe"; }
  std::string description() const override { return "probe device"; }
  void bind_thread() override { ++bound_threads; }
  std::string pci_bus_id() const override { return "0000:42:00.0"; }
  CompileTarget target() const override { return {}; }
  bool computes() const override { return false; }
  sched::InstanceId load(const Program& p, const WeightStore&) override {
    program_ = p;
    return 0;
  }
  const Program& program(sched::InstanceId) const override { return program_; }
  bool write_inputs(sched::InstanceId, sched::StreamId, std::span<const Tensor>,
                    const std::function<bool()>&) override {
    return true;
  }
  std::vector<Tensor> read_outputs(sched::InstanceId, sched::StreamId) override { return {}; }
  sched::StreamId create_stream(sched::StreamPriority) override { return 0; }
  uint64_t launch(sched::StreamId, sched::InstanceId, int, const sched::LaunchOptions&) override { return ++launched_; }
  int64_t slice_units(sched::InstanceId, int kernel) const override { return 10 + kernel; }
  bool grid_stride(sched::InstanceId, int kernel) const override { return kernel == 3; }
  uint64_t launch_slice(sched::StreamId, sched::InstanceId, int, const sched::KernelSlice& slice,
                        const sched::LaunchOptions&) override {
    slices.push_back(slice);
    return ++launched_;
  }
  std::vector<sched::KernelSlice> slices;
  uint64_t completed(sched::StreamId) override { return launched_; }
  std::optional<sched::LaunchSpan> launch_span(sched::StreamId, uint64_t) override { return std::nullopt; }
  std::exception_ptr take_error(sched::StreamId) override { return nullptr; }
  void raise_flag(sched::StreamId) override {}
  void lower_flag() override {}
  bool can_hold() const override { return true; }
  bool holds_isolate(std::span<const sched::StreamId>) override { return false; }
  std::vector<Tensor> request_buffers(sched::InstanceId instance) override {
    buffers_asked.push_back(instance);
    return {Tensor(DType::kF32, Shape{2, 3})};
  }
  void set_sm_copies(sched::InstanceId instance, bool on) override {
    if (on) sm_copies.push_back(instance);
  }
  int64_t set_l2_residency(sched::InstanceId, const l2::ResidencyConfig*, const l2::L2Device&) override {
    ++residency_calls;
    return 4096;
  }
  bool inputs_in_staging(sched::InstanceId instance, std::span<const Tensor>) override { return instance == 5; }
  std::optional<sched::GateOpener> gate_opener(sched::StreamId stream, int holds) override {
    return sched::GateOpener{&gate_word, static_cast<uint32_t>(stream * 10 + holds)};
  }
  uint32_t completion_word(sched::StreamId stream) override { return static_cast<uint32_t>(stream) + 100; }
  uint64_t completed_at(sched::StreamId stream, uint32_t word) override { return word + static_cast<uint64_t>(stream); }
  sched::DeviceTime now() override { return 7; }
  void wait_until(sched::DeviceTime) override {}
  void synchronize(sched::StreamId) override {}

 private:
  Program program_;
  uint64_t launched_ = 0;
};

TEST(TimelineRecorder, ForwardsTheOptionalCallsToTheInnerDevice) {
  ProbeDevice inner;
  TimelineRecorder recorder(inner, 0, 1000);
  recorder.bind_thread();
  EXPECT_EQ(inner.bound_threads, 1);
  EXPECT_EQ(recorder.pci_bus_id(), "0000:42:00.0");
  EXPECT_FALSE(recorder.computes());
  EXPECT_TRUE(recorder.can_hold());
  EXPECT_FALSE(recorder.holds_isolate({}));

  const std::vector<Tensor> buffers = recorder.request_buffers(3);
  ASSERT_EQ(buffers.size(), 1u);
  EXPECT_EQ(buffers[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(inner.buffers_asked, std::vector<sched::InstanceId>{3});

  recorder.set_sm_copies(2, true);
  EXPECT_EQ(inner.sm_copies, std::vector<sched::InstanceId>{2});

  EXPECT_EQ(recorder.set_l2_residency(0, nullptr, l2::L2Device{}), 4096);
  EXPECT_EQ(inner.residency_calls, 1);

  // The arrival sentinel's calls (session 14: they fell to the defaults, and DISB's runs never
  // used the sentinel).
  EXPECT_TRUE(recorder.inputs_in_staging(5, {}));
  const std::optional<sched::GateOpener> opener = recorder.gate_opener(3, 2);
  ASSERT_TRUE(opener.has_value());
  EXPECT_EQ(opener->word, &inner.gate_word);
  EXPECT_EQ(opener->token, 32u);
  EXPECT_EQ(recorder.completion_word(4), 104u);
  EXPECT_EQ(recorder.completed_at(4, 9), 13u);

  // padding-slices (session 35: without these, DISB's runs sliced nothing).
  Program one_kernel;
  one_kernel.kernels.emplace_back();
  recorder.load(one_kernel, WeightStore{});
  EXPECT_EQ(recorder.slice_units(0, 2), 12);
  EXPECT_TRUE(recorder.grid_stride(0, 3)) << "capped grids, as slices";
  EXPECT_FALSE(recorder.grid_stride(0, 2));
  EXPECT_EQ(recorder.launch_slice(0, 0, 0, sched::KernelSlice{3, 8, 5}, sched::LaunchOptions{}), 1u);
  ASSERT_EQ(inner.slices.size(), 1u);
  EXPECT_EQ(inner.slices[0].begin, 3);
  EXPECT_EQ(inner.slices[0].end, 8);
  EXPECT_EQ(inner.slices[0].max_blocks, 5);
}

// Launch host times by op: every single-kernel launch counted once under its kernel's op, most
// total time first; outside the trace window as inside it.
TEST(TimelineRecorder, TalliesLaunchesByTheKernelsOp) {
  ProbeDevice inner;
  TimelineRecorder recorder(inner, 0, 5);  // the probe's clock reads 7: every launch is outside
  Program p;
  for (OpKind op : {OpKind::kConv2d, OpKind::kRelu, OpKind::kConv2d, OpKind::kConcat, OpKind::kConv2d}) {
    Kernel k;
    k.op = op;
    p.kernels.push_back(k);
  }
  recorder.load(p, WeightStore{});
  for (int round = 0; round < 2; ++round) {
    for (int k = 0; k < 5; ++k) recorder.launch(0, 0, k, sched::LaunchOptions{});
  }
  const std::vector<DeviceCallStats> by_op = recorder.launch_stats_by_op();
  ASSERT_EQ(by_op.size(), 3u);
  int64_t total = 0;
  for (const DeviceCallStats& c : by_op) {
    total += c.count;
    EXPECT_EQ(c.count, c.call == "Conv2d" ? 6 : 2) << c.call;
    EXPECT_GE(c.longest_ns * c.count, c.total_ns) << c.call;
  }
  EXPECT_EQ(total, 10);
  for (size_t i = 1; i < by_op.size(); ++i) EXPECT_GE(by_op[i - 1].total_ns, by_op[i].total_ns);
  const std::vector<DeviceCallStats> calls = recorder.call_stats();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].call, "launch");
  EXPECT_EQ(calls[0].count, 10);
  EXPECT_THROW(recorder.launch(0, 0, 5, sched::LaunchOptions{}), std::out_of_range);
}

}  // namespace
}  // namespace atl::bench
