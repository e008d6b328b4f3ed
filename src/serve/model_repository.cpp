#include "serve/model_repository.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/text.h"
#include "model_config.pb.h"
#include "models/zoo.h"

namespace atl::serve {

namespace fs = std::filesystem;

namespace {

// Collects the first parse error; unknown fields (Triton options atoll has no use for) only warn.
class FirstError final : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, int column, const std::string& message) override {
    if (error.empty()) error = fmt::format("line {}, column {}: {}", line + 1, column + 1, message);
  }
  void AddWarning(int, int, const std::string&) override {}
  std::string error;
};

inference::ModelConfig parse_config_message(const std::string& text, const std::string& path) {
  inference::ModelConfig config;
  if (fs::path(path).extension() == ".json") {
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = true;
    const auto status = google::protobuf::util::JsonStringToMessage(text, &config, options);
    ATOLL_CHECK(status.ok(), kParse, "model config '{}': {}", path, std::string(status.message()));
    return config;
  }
  google::protobuf::TextFormat::Parser parser;
  FirstError errors;
  parser.RecordErrorsTo(&errors);
  parser.AllowUnknownField(true);
  parser.AllowUnknownExtension(true);
  ATOLL_CHECK(parser.ParseFromString(text, &config), kParse, "model config '{}': {}", path, errors.error);
  return config;
}

std::string parameter(const inference::ModelConfig& config, const std::string& key, const std::string& fallback) {
  const auto it = config.parameters().find(key);
  return it == config.parameters().end() ? fallback : it->second.string_value();
}

int64_t parse_integer(const std::string& text, const std::string& what, const std::string& path) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  ATOLL_CHECK(ec == std::errc() && end == text.data() + text.size(), kInvalidArgument,
              "model config '{}': {} '{}' is not an integer", path, what, printable(text));
  return value;
}

sched::TaskClass class_from_name(const std::string& name, const std::string& path) {
  if (name == "rt" || name == "RT") return sched::TaskClass::kRealTime;
  if (name == "be" || name == "BE") return sched::TaskClass::kBestEffort;
  ATOLL_THROW(kInvalidArgument, "model config '{}': default_class '{}' is neither rt nor be", path, printable(name));
}

TimeoutPolicy policy_from_name(const std::string& name, const std::string& path) {
  if (name == "report") return TimeoutPolicy::kReport;
  if (name == "reject") return TimeoutPolicy::kReject;
  ATOLL_THROW(kInvalidArgument, "model config '{}': timeout_policy '{}' is neither report nor reject", path,
              printable(name));
}

std::string datatype_of(inference::DataType type) {
  switch (type) {
    case inference::TYPE_FP32: return "FP32";
    case inference::TYPE_INT64: return "INT64";
    default: {
      const std::string name = inference::DataType_Name(type);
      return name.rfind("TYPE_", 0) == 0 ? name.substr(5) : name;
    }
  }
}

template <typename Declared>
std::vector<ModelSpec::DeclaredTensor> declared(const Declared& tensors) {
  std::vector<ModelSpec::DeclaredTensor> out;
  for (const auto& t : tensors) {
    out.push_back({t.name(), datatype_of(t.data_type()), {t.dims().begin(), t.dims().end()}});
  }
  return out;
}

// The zoo architecture a config refers to: platform "atoll_zoo" (or backend "atoll") with the
// parameter zoo_model, which defaults to the model's own name.
std::string zoo_reference(const inference::ModelConfig& config, const std::string& name, const std::string& path) {
  const bool atoll = config.platform() == "atoll_zoo" || config.backend() == "atoll" ||
                     (config.platform().empty() && config.backend().empty());
  ATOLL_CHECK(atoll, kUnsupported,
              "model config '{}': platform '{}' backend '{}' is not served by atoll (use platform \"atoll_zoo\" "
              "with parameter zoo_model)",
              path, printable(config.platform()), printable(config.backend()));
  const std::string zoo = parameter(config, "zoo_model", name);
  const auto models = list_models();
  const bool known = std::any_of(models.begin(), models.end(), [&](const ModelInfo& m) { return m.name == zoo; });
  ATOLL_CHECK(known, kNotFound, "model config '{}': zoo model '{}' does not exist (see `atoll models`)", path,
              printable(zoo));
  return zoo;
}

}  // namespace

std::string kserve_datatype(DType program_dtype) {
  return is_float(program_dtype) ? "FP32" : "INT64";
}

ModelSpec parse_model_config(const std::string& text, const std::string& name, const std::string& path) {
  const inference::ModelConfig config = parse_config_message(text, path);
  ATOLL_CHECK(config.name().empty() || config.name() == name, kInvalidArgument,
              "model config '{}': name '{}' differs from its folder '{}'", path, printable(config.name()), name);
  ModelSpec spec;
  spec.name = name;
  spec.source = path;
  spec.zoo_model = zoo_reference(config, name, path);
  spec.max_batch_size = config.max_batch_size();
  ATOLL_CHECK(spec.max_batch_size >= 0 && spec.max_batch_size <= kMaxBatchLimit, kInvalidArgument,
              "model config '{}': max_batch_size {} is outside 0..{}", path, spec.max_batch_size, kMaxBatchLimit);
  spec.default_class = class_from_name(parameter(config, "default_class", "be"), path);
  spec.timeout_policy = policy_from_name(parameter(config, "timeout_policy", "report"), path);
  const int64_t seed = parse_integer(parameter(config, "seed", "0"), "seed", path);
  ATOLL_CHECK(seed >= 0, kInvalidArgument, "model config '{}': seed {} is negative", path, seed);
  spec.seed = static_cast<uint64_t>(seed);
  spec.seq_len = parse_integer(parameter(config, "seq_len", "128"), "seq_len", path);
  ATOLL_CHECK(spec.seq_len >= 1 && spec.seq_len <= 512, kInvalidArgument,
              "model config '{}': seq_len {} is outside 1..512", path, spec.seq_len);
  spec.declared_inputs = declared(config.input());
  spec.declared_outputs = declared(config.output());
  return spec;
}

ModelSpec read_model_config(const fs::path& repository, const std::string& name) {
  const fs::path dir = repository / name;
  std::error_code ec;
  ATOLL_CHECK(fs::is_directory(dir, ec), kNotFound, "model '{}' is not in the repository '{}'", printable(name),
              repository.string());
  fs::path config_path = dir / "config.pbtxt";
  if (!fs::exists(config_path, ec)) config_path = dir / "config.json";
  ATOLL_CHECK(fs::exists(config_path, ec), kNotFound, "model '{}': '{}' has neither config.pbtxt nor config.json",
              name, dir.string());
  std::ifstream in(config_path);
  std::stringstream text;
  text << in.rdbuf();
  ATOLL_CHECK(in.good() || in.eof(), kIo, "model config '{}': cannot read it", config_path.string());
  ModelSpec spec = parse_model_config(text.str(), name, config_path.string());
  std::vector<int64_t> versions;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string folder = e.path().filename().string();
    if (!e.is_directory() || folder.empty() || !std::all_of(folder.begin(), folder.end(), ::isdigit)) continue;
    ATOLL_CHECK(!fs::exists(e.path() / "model.onnx"), kUnsupported,
                "model '{}': '{}' holds an ONNX file; this build serves zoo models only", name, e.path().string());
    versions.push_back(parse_integer(folder, "version folder", config_path.string()));
  }
  std::sort(versions.begin(), versions.end());
  if (!versions.empty()) spec.versions = versions;
  return spec;
}

std::vector<std::string> list_repository(const fs::path& repository) {
  std::error_code ec;
  ATOLL_CHECK(fs::is_directory(repository, ec), kNotFound, "model repository '{}' is not a directory",
              repository.string());
  std::vector<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(repository, ec)) {
    if (e.is_directory() && (fs::exists(e.path() / "config.pbtxt") || fs::exists(e.path() / "config.json"))) {
      names.push_back(e.path().filename().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

ModelSpec model_from_flag(std::string_view flag) {
  const size_t eq = flag.find('=');
  ModelSpec spec;
  spec.name = std::string(flag.substr(0, eq));
  spec.zoo_model = eq == std::string_view::npos ? spec.name : std::string(flag.substr(eq + 1));
  spec.source = "--model " + std::string(flag);
  ATOLL_CHECK(!spec.name.empty() && !spec.zoo_model.empty(), kInvalidArgument,
              "--model '{}': expected NAME or NAME=ZOO_MODEL", printable(flag));
  ATOLL_CHECK(spec.zoo_model.find('.') == std::string::npos, kUnsupported,
              "--model '{}': model files are not served by this build; name a zoo model (see `atoll models`)",
              printable(flag));
  const auto models = list_models();
  ATOLL_CHECK(std::any_of(models.begin(), models.end(), [&](const ModelInfo& m) { return m.name == spec.zoo_model; }),
              kNotFound, "--model '{}': zoo model '{}' does not exist (see `atoll models`)", printable(flag),
              printable(spec.zoo_model));
  return spec;
}

ModelSpec default_model_spec() {
  ModelSpec spec = model_from_flag("resnet18");
  spec.source = "the built-in default";
  return spec;
}

namespace {

void check_declared(const ModelSpec& spec, const std::vector<ModelSpec::DeclaredTensor>& declared,
                    const std::vector<TensorSpec>& actual, const char* kind) {
  for (const ModelSpec::DeclaredTensor& d : declared) {
    const auto it = std::find_if(actual.begin(), actual.end(), [&](const TensorSpec& t) { return t.name == d.name; });
    ATOLL_CHECK(it != actual.end(), kInvalidArgument, "{}: {} '{}' is not one of zoo model '{}''s {}s", spec.source,
                kind, printable(d.name), spec.zoo_model, kind);
    ATOLL_CHECK(d.datatype == kserve_datatype(it->dtype), kInvalidArgument, "{}: {} '{}' is {}, not {}", spec.source,
                kind, d.name, kserve_datatype(it->dtype), printable(d.datatype));
    std::vector<int64_t> dims = it->shape.dims();
    if (spec.max_batch_size > 0) dims.erase(dims.begin());
    ATOLL_CHECK(d.dims == dims, kInvalidArgument, "{}: {} '{}' has dims {}, not {}", spec.source, kind, d.name,
                Shape(dims).str(), Shape(d.dims).str());
  }
}

}  // namespace

void check_spec_against_program(const ModelSpec& spec, const Program& program) {
  check_declared(spec, spec.declared_inputs, program.inputs, "input");
  check_declared(spec, spec.declared_outputs, program.outputs, "output");
  if (spec.max_batch_size == 0) return;
  for (const auto* tensors : {&program.inputs, &program.outputs}) {
    for (const TensorSpec& t : *tensors) {
      ATOLL_CHECK(t.shape.rank() >= 1 && t.shape[0] == program.batch, kInvalidArgument,
                  "{}: '{}' has no batch dimension ({}); set max_batch_size 0", spec.source, t.name, t.shape.str());
    }
  }
}

}  // namespace atl::serve
