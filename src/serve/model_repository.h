#pragma once
// What the server serves: models described in Triton's repository layout
// (<repo>/<model>/config.pbtxt or config.json, numeric version folders) or named on the command
// line. A model is a zoo architecture or an ONNX file (the latest version folder's model.onnx);
// the config says which, its batching limit, the class its requests run in unless they ask for
// RT, what a request that misses its timeout gets, and optionally an L2 residency config.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "l2/slices.h"
#include "program/program.h"
#include "sched/task.h"
#include "serve/datatype.h"

namespace atl::serve {

// A request whose `timeout` passed before it finished: an error, or outputs marked late.
enum class TimeoutPolicy : uint8_t { kReject, kReport };

struct ModelSpec {
  std::string name;       // as clients address it
  std::string zoo_model;  // the architecture (see `atoll models`); empty for an ONNX model
  std::string onnx_file;  // an ONNX model: the file load_model_graph imports; empty for a zoo model
  // Ascending; a request naming another version is refused. An ONNX model serves only its latest
  // version folder (Triton's default version policy): older folders may hold other files.
  std::vector<int64_t> versions{1};
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
  // An L2 residency config (`atoll l2 config`, as `atoll run --l2` loads it), read with the
  // config and checked at load against the program it was made for.
  struct L2 {
    std::string file;  // as the config names it (relative to the model folder)
    std::string path;  // resolved
    l2::ResidencyConfig config;
    l2::L2Device device;  // the preset its windows are planned for (parameter l2_device)
  };
  std::optional<L2> l2;
  // The devices it may run on (instance_group [{ gpus: [...] }]); empty: any the server runs on.
  std::vector<int> gpus;

  bool is_onnx() const { return !onnx_file.empty(); }
  // What load_model_graph takes: the ONNX file or the zoo name.
  const std::string& model_source() const { return is_onnx() ? onnx_file : zoo_model; }
  // For messages: "zoo model 'resnet18'" or "ONNX model 'repo/m/1/model.onnx'".
  std::string describe() const;
};

// Largest batch a config may allow: each batch size up to it compiles its own programs.
inline constexpr int64_t kMaxBatchLimit = 64;

// The platform a served model reports: "onnxruntime_onnx" for an ONNX file (the format Triton's
// clients know it by), else "atoll_zoo".
std::string served_platform(const ModelSpec& spec);

// Reads <repo>/<name>/config.pbtxt (protobuf text) or config.json. Fields atoll does not use are
// skipped. The latest version folder decides the model: a model.onnx there is the model (platform
// empty, "onnxruntime_onnx" or backend "onnxruntime"), otherwise the config's zoo reference.
// Throws kNotFound without a config or when the latest version folder holds neither a model.onnx
// nor the config a zoo model, kIo for a model.onnx that cannot be read, kParse naming the file
// for a malformed config or L2 config, kInvalidArgument for values out of range or a zoo model
// named beside a model.onnx, kUnsupported for platforms other than these.
ModelSpec read_model_config(const std::filesystem::path& repository, const std::string& name);
// Parses config text; `path` names it in errors, decides the syntax (.json or text) and is where
// an l2_config resolves from (its folder). Without a version folder to look in, the model is the
// zoo model the config names.
ModelSpec parse_model_config(const std::string& text, const std::string& name, const std::string& path);

// Names of the model folders in a repository, sorted. Throws kNotFound for a missing folder.
std::vector<std::string> list_repository(const std::filesystem::path& repository);

// `--model NAME[=ZOO]`: a zoo model served under NAME (ZOO defaults to NAME); `--model
// NAME=FILE.onnx`: an ONNX file (kNotFound when it is missing, kIo when it cannot be read).
ModelSpec model_from_flag(std::string_view flag);
// Served when neither a repository nor --model is given.
ModelSpec default_model_spec();

// Checks the spec against the compiled model at batch 1: declared names, datatypes and dims
// match, and outputs carry the batch dimension batching needs. Throws kInvalidArgument.
void check_spec_against_program(const ModelSpec& spec, const Program& program);

}  // namespace atl::serve
