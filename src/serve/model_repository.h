#pragma once
// What the server serves: models described in Triton's repository layout
// (<repo>/<model>/config.pbtxt or config.json, numeric version folders) or named on the command
// line. Every model is a zoo architecture; the config says which, its batching limit, the class
// its requests run in unless they ask for RT, and what a request that misses its timeout gets.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "program/program.h"
#include "sched/task.h"

namespace atl::serve {

// A request whose `timeout` passed before it finished: an error, or outputs marked late.
enum class TimeoutPolicy : uint8_t { kReject, kReport };

struct ModelSpec {
  std::string name;       // as clients address it
  std::string zoo_model;  // the architecture (see `atoll models`)
  std::vector<int64_t> versions{1};  // ascending; a request naming another version is refused
  // Triton's meaning: 0 = request shapes are the model's full shapes at batch 1; N > 0 = request
  // shapes carry a leading batch dimension of 1..N.
  int64_t max_batch_size = 1;
  sched::TaskClass default_class = sched::TaskClass::kBestEffort;
  TimeoutPolicy timeout_policy = TimeoutPolicy::kReport;
  uint64_t seed = 0;     // weights
  int64_t seq_len = 128;  // BERT models
  std::string source;     // where the spec came from, for messages ("--model", a config path)
  // Inputs and outputs the config declares (empty: the model's own), checked at load.
  struct DeclaredTensor {
    std::string name;
    std::string datatype;  // KServe spelling: "FP32", "INT64"
    std::vector<int64_t> dims;  // without the batch dimension when max_batch_size > 0
  };
  std::vector<DeclaredTensor> declared_inputs, declared_outputs;
};

// Largest batch a config may allow: each batch size up to it compiles its own programs.
inline constexpr int64_t kMaxBatchLimit = 64;

// KServe datatype of a program tensor as requests carry it: "FP32" for floats, "INT64" for indices.
std::string kserve_datatype(DType program_dtype);

// Reads <repo>/<name>/config.pbtxt (protobuf text) or config.json. Fields atoll does not use are
// skipped. Throws kNotFound without a config, kParse naming the file for a malformed one,
// kInvalidArgument for values out of range, kUnsupported for platforms other than atoll's.
ModelSpec read_model_config(const std::filesystem::path& repository, const std::string& name);
// Parses config text; `path` names it in errors and decides the syntax (.json or text).
ModelSpec parse_model_config(const std::string& text, const std::string& name, const std::string& path);

// Names of the model folders in a repository, sorted. Throws kNotFound for a missing folder.
std::vector<std::string> list_repository(const std::filesystem::path& repository);

// `--model NAME[=ZOO]`: a zoo model served under NAME (ZOO defaults to NAME).
ModelSpec model_from_flag(std::string_view flag);
// Served when neither a repository nor --model is given.
ModelSpec default_model_spec();

// Checks the spec against the compiled model at batch 1: declared names, datatypes and dims
// match, and outputs carry the batch dimension batching needs. Throws kInvalidArgument.
void check_spec_against_program(const ModelSpec& spec, const Program& program);

}  // namespace atl::serve
