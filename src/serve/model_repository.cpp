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
#include "onnx/onnx_import.h"

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

// What the latest version folder holds, found before the config is parsed.
struct VersionFolders {
  std::vector<int64_t> versions;  // ascending
  fs::path latest;                // empty without version folders
  fs::path onnx_file;             // latest / model.onnx when it is there
};

// A present model.onnx must be a file this process can read: refusing it here names the file,
// where the importer would fail later with less context.
void check_readable(const fs::path& file, const std::string& context) {
  std::error_code ec;
  ATOLL_CHECK(fs::exists(fs::symlink_status(file, ec)), kNotFound, "{}: ONNX file '{}' does not exist", context,
              file.string());
  ATOLL_CHECK(fs::is_regular_file(file, ec), kIo, "{}: ONNX file '{}' is not a regular file", context,
              file.string());
  std::ifstream in(file, std::ios::binary);
  ATOLL_CHECK(in.good(), kIo, "{}: ONNX file '{}' cannot be read", context, file.string());
}

bool is_zoo_model(const std::string& name) {
  const auto models = list_models();
  return std::any_of(models.begin(), models.end(), [&](const ModelInfo& m) { return m.name == name; });
}

// Platform "atoll_zoo" (or backend "atoll") names a zoo model, "onnxruntime_onnx" (or backend
// "onnxruntime", Triton's spellings) a model.onnx; with neither the version folder decides, as
// Triton infers the platform from the file.
bool onnx_platform(const inference::ModelConfig& config, const std::string& path) {
  const std::string& platform = config.platform();
  const std::string& backend = config.backend();
  const bool onnx = platform == "onnxruntime_onnx" || backend == "onnxruntime";
  const bool known = (platform.empty() || platform == "atoll_zoo" || platform == "onnxruntime_onnx") &&
                     (backend.empty() || backend == "atoll" || backend == "onnxruntime");
  ATOLL_CHECK(known && !(platform == "atoll_zoo" && onnx), kUnsupported,
              "model config '{}': platform '{}' backend '{}' is not served by atoll (use platform \"atoll_zoo\" "
              "with parameter zoo_model, or \"onnxruntime_onnx\" with a model.onnx in the version folder)",
              path, printable(platform), printable(backend));
  return onnx;
}

// Sets the spec's model: the latest version folder's model.onnx when there is one, else the
// config's zoo model (parameter zoo_model, defaulting to the model's own name).
void resolve_source(const inference::ModelConfig& config, const VersionFolders& folders, ModelSpec& spec) {
  const std::string& path = spec.source;
  const bool onnx = onnx_platform(config, path);
  if (!folders.onnx_file.empty()) {
    ATOLL_CHECK(!config.parameters().contains("zoo_model") && config.platform() != "atoll_zoo", kInvalidArgument,
                "model config '{}' names a zoo model, but '{}' holds an ONNX model: keep one of them", path,
                folders.onnx_file.string());
    check_readable(folders.onnx_file, fmt::format("model config '{}'", path));
    spec.onnx_file = folders.onnx_file.string();
    return;
  }
  const std::string where = folders.latest.empty() ? std::string("no version folder holds a model.onnx")
                                                   : fmt::format("'{}' holds no model.onnx", folders.latest.string());
  ATOLL_CHECK(!onnx, kNotFound, "model config '{}': platform '{}' backend '{}' needs a model.onnx, but {}", path,
              printable(config.platform()), printable(config.backend()), where);
  spec.zoo_model = parameter(config, "zoo_model", spec.name);
  ATOLL_CHECK(is_zoo_model(spec.zoo_model), kNotFound,
              "model config '{}': zoo model '{}' does not exist (see `atoll models`) and {}", path,
              printable(spec.zoo_model), where);
}

// The l2_config parameter: a residency config file relative to the model folder, read now so
// that a malformed one fails with the config, not when the model loads.
void read_l2_parameters(const inference::ModelConfig& config, ModelSpec& spec) {
  const std::string file = parameter(config, "l2_config", "");
  const std::string device = parameter(config, "l2_device", "");
  if (file.empty()) {
    ATOLL_CHECK(device.empty(), kInvalidArgument, "model config '{}': l2_device is given without l2_config",
                spec.source);
    return;
  }
  ModelSpec::L2 l2;
  l2.file = file;
  l2.path = (fs::path(spec.source).parent_path() / file).string();
  try {
    l2.device = l2::l2_device_by_name(device.empty() ? "h200" : device);
    l2.config = l2::load_config(l2.path);
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("model config '{}': l2_config '{}': {}", spec.source, l2.path, e.message()),
                e.file(), e.line());
  }
  spec.l2 = std::move(l2);
}

ModelSpec parse_config(const std::string& text, const std::string& name, const std::string& path,
                       const VersionFolders& folders) {
  const inference::ModelConfig config = parse_config_message(text, path);
  ATOLL_CHECK(config.name().empty() || config.name() == name, kInvalidArgument,
              "model config '{}': name '{}' differs from its folder '{}'", path, printable(config.name()), name);
  ModelSpec spec;
  spec.name = name;
  spec.source = path;
  resolve_source(config, folders, spec);
  spec.max_batch_size = config.max_batch_size();
  ATOLL_CHECK(spec.max_batch_size >= 0 && spec.max_batch_size <= kMaxBatchLimit, kInvalidArgument,
              "model config '{}': max_batch_size {} is outside 0..{}", path, spec.max_batch_size, kMaxBatchLimit);
  spec.default_class = class_from_name(parameter(config, "default_class", "be"), path);
  for (const auto& group : config.instance_group()) {
    for (int gpu : group.gpus()) {
      ATOLL_CHECK(gpu >= 0, kInvalidArgument, "model config '{}': instance_group gpu {} is negative", path, gpu);
      if (std::find(spec.gpus.begin(), spec.gpus.end(), gpu) == spec.gpus.end()) spec.gpus.push_back(gpu);
    }
  }
  spec.timeout_policy = policy_from_name(parameter(config, "timeout_policy", "report"), path);
  const int64_t seed = parse_integer(parameter(config, "seed", "0"), "seed", path);
  ATOLL_CHECK(seed >= 0, kInvalidArgument, "model config '{}': seed {} is negative", path, seed);
  spec.seed = static_cast<uint64_t>(seed);
  spec.seq_len = parse_integer(parameter(config, "seq_len", "128"), "seq_len", path);
  ATOLL_CHECK(spec.seq_len >= 1 && spec.seq_len <= 512, kInvalidArgument,
              "model config '{}': seq_len {} is outside 1..512", path, spec.seq_len);
  spec.declared_inputs = declared(config.input());
  spec.declared_outputs = declared(config.output());
  read_l2_parameters(config, spec);
  // Triton's default version policy serves the latest version only, and older folders of an ONNX
  // model may hold other files; every version of a zoo model is the same architecture, so each
  // stays addressable.
  if (spec.is_onnx()) {
    spec.versions = {folders.versions.back()};
  } else if (!folders.versions.empty()) {
    spec.versions = folders.versions;
  }
  return spec;
}

VersionFolders scan_versions(const fs::path& dir, const std::string& config_path) {
  VersionFolders folders;
  std::error_code ec;
  int64_t latest = -1;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string folder = e.path().filename().string();
    if (!e.is_directory() || folder.empty() || !std::all_of(folder.begin(), folder.end(), ::isdigit)) continue;
    const int64_t version = parse_integer(folder, "version folder", config_path);
    folders.versions.push_back(version);
    if (version > latest) {
      latest = version;
      folders.latest = e.path();  // the folder's own spelling: "007" is version 7
    }
  }
  std::sort(folders.versions.begin(), folders.versions.end());
  // symlink_status: a dangling link is still the model.onnx the user meant, refused as unreadable.
  if (latest >= 0 && fs::exists(fs::symlink_status(folders.latest / "model.onnx", ec))) {
    folders.onnx_file = folders.latest / "model.onnx";
  }
  return folders;
}

}  // namespace

std::string ModelSpec::describe() const {
  return is_onnx() ? fmt::format("ONNX model '{}'", onnx_file) : fmt::format("zoo model '{}'", zoo_model);
}

std::string served_platform(const ModelSpec& spec) {
  return spec.is_onnx() ? "onnxruntime_onnx" : "atoll_zoo";
}

ModelSpec parse_model_config(const std::string& text, const std::string& name, const std::string& path) {
  return parse_config(text, name, path, {});
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
  return parse_config(text.str(), name, config_path.string(), scan_versions(dir, config_path.string()));
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
  const std::string model = eq == std::string_view::npos ? spec.name : std::string(flag.substr(eq + 1));
  spec.source = "--model " + std::string(flag);
  ATOLL_CHECK(!spec.name.empty() && !model.empty(), kInvalidArgument,
              "--model '{}': expected NAME, NAME=ZOO_MODEL or NAME=FILE.onnx", printable(flag));
  if (is_onnx_path(model)) {
    // A file name is a poor model name for clients (and a path may hold '/'): ask for one.
    ATOLL_CHECK(eq != std::string_view::npos, kInvalidArgument, "--model '{}': name the model: NAME=FILE.onnx",
                printable(flag));
    check_readable(model, fmt::format("--model '{}'", printable(flag)));
    spec.onnx_file = model;
    return spec;
  }
  ATOLL_CHECK(model.find('.') == std::string::npos, kUnsupported,
              "--model '{}': only .onnx files and zoo models are served (see `atoll models`)", printable(flag));
  ATOLL_CHECK(is_zoo_model(model), kNotFound, "--model '{}': zoo model '{}' does not exist (see `atoll models`)",
              printable(flag), printable(model));
  spec.zoo_model = model;
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
    ATOLL_CHECK(it != actual.end(), kInvalidArgument, "{}: {} '{}' is not one of {}'s {}s", spec.source, kind,
                printable(d.name), spec.describe(), kind);
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
