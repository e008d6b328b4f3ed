// Runs ONNX test cases (model.onnx + test_data_set_N/{input,output}_I.pb, as ONNX's backend tests
// lay them out) on a backend (the CPU by default) and prints a pass/fail table.
//
//   run_onnx_cases [--device cpu|cuda|sim] [--rel-l2 TOL] [--expect FILE] SUITE_DIR...
//
// On CUDA (fp16 storage) give --rel-l2: the cases' own tolerances are fp32 ones.
// A case passes when every output matches: within its tolerance.txt ("rtol atol", ONNX's allclose)
// or, with --rel-l2, within a relative L2 error of TOL. A case the importer or a backend refuses
// with an atl::Error is "refused" (the message says which node, op and why). The run fails when a
// case computes a wrong result, throws anything but an atl::Error, or is listed in the --expect
// file (one case name a line) and does not pass.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "core/error.h"
#include "onnx/proto_tensor.h"
#include "compile/compiler.h"
#include "onnx/onnx_import.h"
#include "runtime/devices.h"

namespace fs = std::filesystem;

namespace {

using atl::Tensor;

enum class Status { kPass, kMismatch, kRefused, kCrash };

struct Outcome {
  Status status = Status::kPass;
  std::string detail;
};

struct Tolerance {
  double rtol = 1e-3, atol = 1e-7;  // ONNX's backend test defaults
  double rel_l2 = -1;               // >= 0: compare by relative L2 instead
};

Tensor read_tensor(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  ATOLL_CHECK(in, kNotFound, "cannot open '{}'", path.string());
  std::stringstream bytes;
  bytes << in.rdbuf();
  onnx::TensorProto proto;
  ATOLL_CHECK(proto.ParseFromString(bytes.str()), kParse, "'{}' is not a TensorProto", path.string());
  return atl::onnx_detail::tensor_from_proto(proto, path.parent_path());
}

std::vector<Tensor> read_tensors(const fs::path& dir, const std::string& kind) {
  std::vector<Tensor> out;
  for (int i = 0; fs::exists(dir / fmt::format("{}_{}.pb", kind, i)); ++i) {
    out.push_back(read_tensor(dir / fmt::format("{}_{}.pb", kind, i)));
  }
  return out;
}

// Worst per-element excess over ONNX's allclose bound, or the relative L2 error; NaN where expected
// counts as matching.
std::string compare(const Tensor& got_any, const Tensor& want_any, const Tolerance& tol) {
  if (!(got_any.shape() == want_any.shape()) && got_any.numel() != want_any.numel()) {
    return fmt::format("shape {} != expected {}", got_any.shape().str(), want_any.shape().str());
  }
  const Tensor got = got_any.to(atl::DType::kF32), want = want_any.to(atl::DType::kF32);
  const auto g = got.as<float>(), w = want.as<float>();
  if (tol.rel_l2 >= 0) {
    double diff = 0, norm = 0, got_norm = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      diff += (static_cast<double>(g[i]) - w[i]) * (static_cast<double>(g[i]) - w[i]);
      norm += static_cast<double>(w[i]) * w[i];
      got_norm += static_cast<double>(g[i]) * g[i];
    }
    const double rel = std::sqrt(diff / std::max(norm, 1e-30));
    // The norm ratio tells an all-zero or blown-up output from a merely inaccurate one.
    return rel <= tol.rel_l2 ? ""
                             : fmt::format("relative L2 error {:.3g} > {:.3g} (|got| / |expected| {:.3g})", rel,
                                           tol.rel_l2, std::sqrt(got_norm / std::max(norm, 1e-30)));
  }
  for (size_t i = 0; i < w.size(); ++i) {
    if (std::isnan(w[i]) && std::isnan(g[i])) continue;
    if (std::isinf(w[i]) && g[i] == w[i]) continue;
    const double bound = tol.atol + tol.rtol * std::abs(static_cast<double>(w[i]));
    if (!(std::abs(static_cast<double>(g[i]) - w[i]) <= bound)) {
      return fmt::format("element {}: {} != expected {} (rtol {}, atol {})", i, g[i], w[i], tol.rtol, tol.atol);
    }
  }
  return "";
}

// True when the model's first input has a symbolic first dimension, which the data's batch fills.
bool symbolic_batch(const fs::path& model_path) {
  std::ifstream in(model_path, std::ios::binary);
  onnx::ModelProto model;
  if (!model.ParseFromIstream(&in) || model.graph().input_size() == 0) return false;
  const auto& type = model.graph().input(0).type();
  if (!type.has_tensor_type() || type.tensor_type().shape().dim_size() == 0) return false;
  return !type.tensor_type().shape().dim(0).has_dim_value();
}

Tolerance case_tolerance(const fs::path& dir, double rel_l2) {
  Tolerance t;
  t.rel_l2 = rel_l2;
  std::ifstream in(dir / "tolerance.txt");
  if (in) in >> t.rtol >> t.atol;
  return t;
}

// Imports the model with `frozen` inputs fixed, runs it on `backend` over the case's inputs.
std::vector<Tensor> run_model(atl::Backend& backend, const fs::path& model, const std::vector<Tensor>& inputs,
                              size_t frozen_from) {
  onnx::ModelProto proto;
  std::ifstream in(model, std::ios::binary);
  ATOLL_CHECK(proto.ParseFromIstream(&in), kParse, "cannot parse '{}'", model.string());
  std::vector<std::string> names;  // graph inputs that are not initializers, in the order of input_N.pb
  std::set<std::string> initializers;
  for (const auto& init : proto.graph().initializer()) initializers.insert(init.name());
  for (const auto& input : proto.graph().input()) {
    if (!initializers.count(input.name())) names.push_back(input.name());
  }
  ATOLL_CHECK(names.size() == inputs.size(), kInvalidArgument, "{} inputs, {} given", names.size(), inputs.size());
  atl::OnnxImportOptions options;
  options.batch = symbolic_batch(model) && !inputs.empty() ? inputs[0].shape()[0] : 1;
  for (size_t i = frozen_from; i < inputs.size(); ++i) options.constant_inputs[names[i]] = inputs[i];
  const atl::Graph g = atl::import_onnx_file(model.string(), options);
  const atl::CompiledModel cm = atl::compile_graph(g, backend.target());
  auto instance = backend.load(cm.program, cm.weights);
  for (size_t i = 0; i < cm.program.inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    instance->set_input(static_cast<int>(i), t.to(is_float(t.dtype()) ? atl::DType::kF32 : atl::DType::kI64));
  }
  instance->run();
  std::vector<Tensor> out;
  for (size_t i = 0; i < cm.program.outputs.size(); ++i) out.push_back(instance->get_output(static_cast<int>(i)));
  return out;
}

// Runs every data set; a refused import is retried with every input but the first fixed at import
// (ONNX's cases feed axes, shapes and weights as inputs, which the IR needs as constants).
Outcome run_case(atl::Backend& backend, const fs::path& dir, double rel_l2) {
  std::vector<fs::path> data_sets;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) data_sets.push_back(e.path());
  }
  std::sort(data_sets.begin(), data_sets.end());
  if (data_sets.empty()) return {Status::kRefused, "no test_data_set_*"};
  const Tolerance tol = case_tolerance(dir, rel_l2);
  std::string note;
  for (const fs::path& data : data_sets) {
    std::vector<Tensor> inputs, want, got;
    try {
      inputs = read_tensors(data, "input");
      want = read_tensors(data, "output");
      try {
        got = run_model(backend, dir / "model.onnx", inputs, inputs.size());
      } catch (const atl::Error&) {
        if (inputs.size() < 2) throw;
        got = run_model(backend, dir / "model.onnx", inputs, 1);
        note = "(inputs after the first fixed at import)";
      }
    } catch (const atl::Error& e) {
      return {Status::kRefused, fmt::format("{}: {}", atl::error_code_name(e.code()), e.message())};
    } catch (const std::exception& e) {
      return {Status::kCrash, fmt::format("not an atl::Error: {}", e.what())};
    }
    if (got.size() != want.size())
      return {Status::kMismatch, fmt::format("{} outputs, {} expected", got.size(), want.size())};
    for (size_t i = 0; i < got.size(); ++i) {
      const std::string bad = compare(got[i], want[i], tol);
      if (!bad.empty()) return {Status::kMismatch, fmt::format("output {}: {} {}", i, bad, note)};
    }
  }
  return {Status::kPass, note};
}

std::set<std::string> read_expected(const std::string& path) {
  std::set<std::string> names;
  std::ifstream in(path);
  ATOLL_CHECK(in, kNotFound, "cannot open --expect file '{}'", path);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != '#') names.insert(line);
  }
  return names;
}

const char* status_name(Status s) {
  switch (s) {
    case Status::kPass: return "pass";
    case Status::kMismatch: return "WRONG";
    case Status::kRefused: return "refused";
    case Status::kCrash: return "CRASH";
  }
  return "?";
}

}  // namespace

int main(int argc, char** argv) {
  double rel_l2 = -1;
  std::string device = "cpu";
  std::set<std::string> expected;
  std::vector<fs::path> suites;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "--rel-l2" && i + 1 < argc) {
        rel_l2 = std::stod(argv[++i]);
      } else if (arg == "--device" && i + 1 < argc) {
        device = argv[++i];
      } else if (arg == "--expect" && i + 1 < argc) {
        expected = read_expected(argv[++i]);
      } else {
        suites.emplace_back(arg);
      }
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}\n", e.what());
    return 2;
  }
  std::unique_ptr<atl::Backend> backend;
  try {
    backend = atl::make_backend(device);
  } catch (const atl::Error& e) {
    fmt::print(stderr, "{}\n", e.message());
    return 2;
  }
  std::map<std::string, Outcome> results;
  for (const fs::path& suite : suites) {
    for (const auto& e : fs::directory_iterator(suite)) {
      if (fs::exists(e.path() / "model.onnx")) {
        results[e.path().filename().string()] = run_case(*backend, e.path(), rel_l2);
      }
    }
  }
  int counts[4] = {0, 0, 0, 0};
  int failures = 0;
  for (const auto& [name, r] : results) {
    ++counts[static_cast<int>(r.status)];
    const bool must_pass = expected.count(name) != 0;
    const bool failed =
        r.status == Status::kMismatch || r.status == Status::kCrash || (must_pass && r.status != Status::kPass);
    failures += failed ? 1 : 0;
    fmt::print("{:<60} {:<8}{} {}\n", name, status_name(r.status),
               failed && r.status == Status::kRefused ? " (expected to pass)" : "", r.detail);
  }
  for (const std::string& name : expected) {
    if (!results.count(name)) {
      fmt::print("{:<60} MISSING (expected to pass)\n", name);
      ++failures;
    }
  }
  fmt::print("\nONNX cases on {}: {} pass, {} refused with an error, {} wrong, {} crashed; {} failures\n", device,
             counts[0], counts[2], counts[1], counts[3], failures);
  return results.empty() || failures > 0 ? 1 : 0;
}
