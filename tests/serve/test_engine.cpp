#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "core/rng.h"
#include "serve/engine.h"

namespace atl::serve {
namespace {

ModelSpec tiny_spec() {
  ModelSpec spec = model_from_flag("tiny=tiny_cnn");
  spec.max_batch_size = 2;
  return spec;
}

struct Input {
  std::vector<float> values;
  InferRequest request;
  Input(int64_t batch, int64_t priority) : values(static_cast<size_t>(batch * 3 * 32 * 32)) {
    Rng rng(static_cast<uint64_t>(batch), "input");
    for (float& v : values) v = rng.uniform(-1.0f, 1.0f);
    request.model = "tiny";
    if (priority) request.priority = priority;
    request.inputs = {{"input", "FP32", {batch, 3, 32, 32}, std::as_bytes(std::span(values)), nullptr}};
  }
};

// Property: under concurrent mixed RT/BE submissions against small queues, every request is
// either refused at once (resource exhausted) or answered exactly once, and answers for the same
// input agree whatever class ran them.
TEST(Engine, EveryAcceptedRequestIsAnsweredExactlyOnce) {
  EngineOptions options;
  options.device = "sim";
  options.max_queue_rt = 2;
  options.max_queue_be = 3;
  Engine engine(options);
  engine.load(tiny_spec());
  constexpr int kThreads = 4, kPerThread = 40;
  std::vector<std::atomic<int>> answers(kThreads * kPerThread);
  std::atomic<int> accepted{0}, refused{0};
  std::mutex outputs_mutex;
  std::map<int64_t, std::vector<float>> first_output;  // by batch
  bool outputs_agree = true;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < kPerThread; ++k) {
        const int index = t * kPerThread + k;
        const int64_t batch = 1 + (index % 2);
        const Input in(batch, index % 3 == 0 ? 1 : 0);
        try {
          engine.infer(in.request, [&, index, batch](std::exception_ptr error, InferResponse r) {
            answers[static_cast<size_t>(index)].fetch_add(1);
            if (error) return;
            const auto v = r.outputs.at(0).data.as<float>();
            std::lock_guard lock(outputs_mutex);
            auto [it, fresh] = first_output.try_emplace(batch, v.begin(), v.end());
            if (!fresh && it->second != std::vector<float>(v.begin(), v.end())) outputs_agree = false;
          });
          accepted.fetch_add(1);
        } catch (const Error& e) {
          EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted) << e.message();
          refused.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  engine.shutdown();
  int answered = 0;
  for (const auto& a : answers) {
    EXPECT_LE(a.load(), 1);
    answered += a.load();
  }
  EXPECT_EQ(answered, accepted.load());
  EXPECT_EQ(accepted + refused, kThreads * kPerThread);
  EXPECT_GT(refused.load(), 0) << "the queues never filled: the test did not exercise refusal";
  EXPECT_TRUE(outputs_agree);
  EXPECT_EQ(engine.queued(sched::TaskClass::kRealTime) + engine.queued(sched::TaskClass::kBestEffort), 0u);
  EXPECT_EQ(engine.stats().for_class(sched::TaskClass::kRealTime).rejected +
                engine.stats().for_class(sched::TaskClass::kBestEffort).rejected,
            static_cast<uint64_t>(refused.load()));
}

TEST(Engine, UnknownUnloadedAndStoppedModelsAreRefused) {
  EngineOptions options;
  options.device = "cpu";
  Engine engine(options);
  engine.load(tiny_spec());
  const Input in(1, 0);
  const auto code = [&](const InferRequest& r) {
    try {
      engine.infer(r, [](std::exception_ptr, InferResponse) { ADD_FAILURE() << "a refused request was answered"; });
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::kInternal;
  };
  InferRequest unknown = in.request;
  unknown.model = "absent";
  EXPECT_EQ(code(unknown), ErrorCode::kNotFound);
  InferRequest bad_version = in.request;
  bad_version.version = "2";
  EXPECT_EQ(code(bad_version), ErrorCode::kNotFound);
  engine.unload("tiny");
  EXPECT_EQ(code(in.request), ErrorCode::kUnavailable);
  EXPECT_EQ(engine.index().at(0).state, "UNAVAILABLE");
  engine.load(tiny_spec());
  std::promise<bool> served;
  engine.infer(in.request, [&](std::exception_ptr error, InferResponse) { served.set_value(error == nullptr); });
  EXPECT_TRUE(served.get_future().get());
  engine.shutdown();
  EXPECT_EQ(code(in.request), ErrorCode::kUnavailable);
}

TEST(Engine, RtOnlyModeRefusesBestEffortRequests) {
  EngineOptions options;
  options.device = "sim";
  options.mode = sched::Mode::kRtOnly;
  Engine engine(options);
  engine.load(tiny_spec());
  const Input be(1, 0);
  EXPECT_THROW(engine.infer(be.request, [](std::exception_ptr, InferResponse) {}), Error);
  const Input rt(1, 1);
  std::promise<sched::TaskClass> served;
  engine.infer(rt.request, [&](std::exception_ptr, InferResponse r) { served.set_value(r.task_class); });
  EXPECT_EQ(served.get_future().get(), sched::TaskClass::kRealTime);
}

// The padding modes plan with kernel profiles: a model loaded without one is profiled on its
// device, and both classes are then served with the answers reset mode gives.
TEST(Engine, PaddingModesProfileModelsAtLoadAndAnswerAsReset) {
  const auto answers = [](sched::Mode mode) {
    EngineOptions options;
    options.device = "sim";
    options.mode = mode;
    Engine engine(options);
    engine.load(tiny_spec());
    std::vector<std::vector<float>> out;
    for (const int64_t priority : {1, 0, 1, 0}) {
      const Input in(2, priority);
      std::promise<std::vector<float>> answer;
      engine.infer(in.request, [&](std::exception_ptr error, InferResponse r) {
        if (error) return answer.set_exception(error);
        const auto v = r.outputs.at(0).data.as<float>();
        answer.set_value(std::vector<float>(v.begin(), v.end()));
      });
      out.push_back(answer.get_future().get());
    }
    return out;
  };
  const auto reset = answers(sched::Mode::kReset);
  for (const sched::Mode mode : {sched::Mode::kPaddingConcurrent, sched::Mode::kPaddingSlices}) {
    EXPECT_EQ(answers(mode), reset) << sched::mode_name(mode);
  }
}

}  // namespace
}  // namespace atl::serve

namespace atl::serve {
namespace {

// Answers one request to `model` and returns its first output.
std::vector<float> infer_once(Engine& engine, const std::string& model) {
  Input in(1, 1);
  in.request.model = model;
  std::promise<std::vector<float>> answer;
  engine.infer(in.request, [&](std::exception_ptr error, InferResponse r) {
    if (error) {
      answer.set_exception(error);
      return;
    }
    const auto v = r.outputs.at(0).data.as<float>();
    answer.set_value(std::vector<float>(v.begin(), v.end()));
  });
  return answer.get_future().get();
}

ModelSpec tiny_named(const std::string& name, std::vector<int> gpus) {
  ModelSpec spec = model_from_flag(name + "=tiny_cnn");
  spec.gpus = std::move(gpus);
  return spec;
}

// Two simulated GPUs: placement follows instance_group gpus, else the device with the fewest
// models; a model on one device answers the same as on the other; loading and unloading on one
// device leaves the other serving; a placement on a device the server lacks is a clear error.
TEST(Engine, SeveralDevicesPlaceModelsByConfigAndServeEach) {
  EngineOptions options;
  options.device = "sim";
  options.devices = {0, 1};
  Engine engine(options);
  EXPECT_EQ(engine.devices(), (std::vector<int>{0, 1}));
  EXPECT_NE(engine.device_description().find("device 1:"), std::string::npos) << engine.device_description();
  engine.load(tiny_named("pinned", {1}));
  engine.load(tiny_named("spread", {}));  // device 0 holds none yet
  engine.load(tiny_named("third", {}));   // a tie: the first listed
  EXPECT_EQ(engine.model("pinned", "")->device, 1);
  EXPECT_EQ(engine.model("spread", "")->device, 0);
  EXPECT_EQ(engine.model("third", "")->device, 0);
  const std::vector<float> on_one = infer_once(engine, "pinned");
  const std::vector<float> on_zero = infer_once(engine, "spread");
  EXPECT_EQ(on_one, on_zero) << "the same model and weights answer alike on either device";

  // Reloading with another placement moves the model; its old device keeps serving the rest.
  engine.load(tiny_named("spread", {1}));
  EXPECT_EQ(engine.model("spread", "")->device, 1);
  EXPECT_EQ(infer_once(engine, "spread"), on_zero);
  EXPECT_EQ(infer_once(engine, "third"), on_zero);
  engine.unload("pinned");
  EXPECT_EQ(infer_once(engine, "spread"), on_zero);
  EXPECT_EQ(infer_once(engine, "third"), on_zero);

  try {
    engine.load(tiny_named("elsewhere", {3}));
    FAIL() << "a placement on an absent device loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(e.message().find("[3]"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("[0, 1]"), std::string::npos) << e.message();
  }
  EXPECT_EQ(infer_once(engine, "third"), on_zero) << "a refused load disturbs nothing";
  engine.shutdown();
}

TEST(Engine, DeviceListsMustNameEachDeviceOnce) {
  EngineOptions options;
  options.device = "sim";
  options.devices = {0, 0};
  EXPECT_THROW(Engine{options}, Error);
  options.devices = {-1};
  EXPECT_THROW(Engine{options}, Error);
}

}  // namespace
}  // namespace atl::serve

namespace atl::serve {
namespace {

TEST(GpuMetrics, TritonNamesPerGpuUuidAndOnlyTheReadingsGiven) {
  GpuReading a{.uuid = "GPU-a", .utilization = 0.25, .memory_used_bytes = 100, .memory_total_bytes = 1000,
               .power_w = 350.5, .energy_j = 12.0};
  GpuReading b;
  b.uuid = "GPU-b";
  b.utilization = 1.0;
  const std::string text = gpu_prometheus({a, b});
  EXPECT_NE(text.find("# TYPE nv_gpu_utilization gauge"), std::string::npos) << text;
  EXPECT_NE(text.find("nv_gpu_utilization{gpu_uuid=\"GPU-a\"} 0.25"), std::string::npos) << text;
  EXPECT_NE(text.find("nv_gpu_utilization{gpu_uuid=\"GPU-b\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("nv_gpu_memory_used_bytes{gpu_uuid=\"GPU-a\"} 100"), std::string::npos) << text;
  EXPECT_NE(text.find("nv_gpu_power_usage{gpu_uuid=\"GPU-a\"} 350.5"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE nv_energy_consumption counter"), std::string::npos) << text;
  EXPECT_EQ(text.find("nv_gpu_power_usage{gpu_uuid=\"GPU-b\"}"), std::string::npos) << "b gave no power reading";
  EXPECT_EQ(gpu_prometheus({}), "");
}

TEST(GpuMetrics, SimulatedDevicesExportNone) {
  EngineOptions options;
  options.device = "sim";
  Engine engine(options);
  EXPECT_EQ(engine.prometheus().find("nv_gpu_"), std::string::npos);
}

}  // namespace
}  // namespace atl::serve
