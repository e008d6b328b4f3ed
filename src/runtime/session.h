#pragma once
// A model ready to run: zoo graph + weights -> compiled Program -> loaded backend Instance.
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "compile/compiler.h"
#include "ir/graph.h"
#include "models/weights_file.h"
#include "models/zoo.h"

namespace atl {

struct SessionOptions {
  std::string model;
  std::string device = "auto";
  ModelOptions model_options;
  std::string weights_file;  // safetensors; empty = deterministic weights from the seed
  WeightsFileOptions weights_options;
  CompileOptions compile_options;
};

class Session {
 public:
  explicit Session(const SessionOptions& options);

  const std::string& device() const { return device_; }
  const std::string& device_note() const { return device_note_; }
  // What a weights file left seeded or skipped (empty without one).
  const WeightsFileReport& weights_report() const { return weights_report_; }
  const Graph& graph() const { return graph_; }
  const Program& program() const { return compiled_.program; }
  Backend& backend() { return *backend_; }
  Instance& instance() { return *instance_; }

  // Seeded inputs: floats ~ U(-1, 1); indices uniform over the table they index.
  std::vector<Tensor> random_inputs(uint64_t seed) const;
  // Checks name, dtype and shape against the model's input, naming all three on a mismatch.
  void set_input(const std::string& name, const Tensor& t);
  void set_inputs(const std::vector<Tensor>& inputs);
  std::vector<Tensor> outputs();

 private:
  int input_index(const std::string& name) const;

  std::string device_;
  std::string device_note_;
  WeightsFileReport weights_report_;
  Graph graph_;
  CompiledModel compiled_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Instance> instance_;
};

struct LatencyStats {
  double min_ms = 0, median_ms = 0, p99_ms = 0, mean_ms = 0, max_ms = 0;
  int samples = 0;
};
LatencyStats latency_stats(std::vector<double> samples_ms);

}  // namespace atl
