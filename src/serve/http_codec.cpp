#include "serve/http_codec.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_value.h"
#include "core/text.h"

namespace atl::serve {

namespace {

using nlohmann::json;

// Deeper nesting than any tensor rank the zoo has is refused before it is walked.
constexpr int kMaxDataDepth = 16;

const json* member(const json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

std::optional<int64_t> integer_parameter(const json* params, const char* key) {
  if (params == nullptr || !params->contains(key)) return std::nullopt;
  const json& v = params->at(key);
  ATOLL_CHECK(v.is_number_integer(), kInvalidArgument, "parameter '{}' must be an integer", key);
  return json_int64(v, key);
}

// The tensor the parameters place in a registered region, or none.
std::optional<SharedMemoryTensor> shm_tensor(const json* params, const SharedMemoryRegistry& shm,
                                             const std::string& tensor) {
  if (params == nullptr || !params->contains("shared_memory_region")) return std::nullopt;
  const json& region = params->at("shared_memory_region");
  ATOLL_CHECK(region.is_string(), kInvalidArgument, "parameter 'shared_memory_region' must be a string");
  const std::optional<int64_t> size = integer_parameter(params, "shared_memory_byte_size");
  ATOLL_CHECK(size.has_value(), kInvalidArgument,
              "tensor '{}' names shared-memory region '{}' without a shared_memory_byte_size", printable(tensor),
              printable(region.get<std::string>()));
  return shm.tensor(region.get<std::string>(), *size, integer_parameter(params, "shared_memory_offset").value_or(0),
                    tensor);
}

bool bool_parameter(const json* params, const char* key, bool fallback) {
  if (params == nullptr || !params->contains(key)) return fallback;
  const json& v = params->at(key);
  ATOLL_CHECK(v.is_boolean(), kInvalidArgument, "parameter '{}' must be true or false", key);
  return v.get<bool>();
}

template <typename T>
void append(std::vector<std::byte>& out, T value) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &value, sizeof(T));
}

void append_element(const json& v, const std::string& datatype, const std::string& input, std::vector<std::byte>& out) {
  if (datatype == "FP32" || datatype == "FP64") {
    ATOLL_CHECK(v.is_number(), kInvalidArgument, "input '{}': data element {} is not a number", input,
                out.size() / datatype_size(datatype));
    if (datatype == "FP32") {
      const double d = v.get<double>();
      ATOLL_CHECK(!std::isfinite(d) || std::fabs(d) <= std::numeric_limits<float>::max(), kInvalidArgument,
                  "input '{}': data element {} ({}) is out of FP32 range", input, out.size() / 4, d);
      append(out, static_cast<float>(d));
    } else {
      append(out, v.get<double>());
    }
    return;
  }
  ATOLL_CHECK(v.is_number_integer(), kInvalidArgument, "input '{}': data element {} is not an integer", input,
              out.size() / datatype_size(datatype));
  const size_t element = out.size() / datatype_size(datatype);
  const int64_t value = json_int64(v, fmt::format("{}[{}]", input, element));
  if (datatype == "INT32") {
    ATOLL_CHECK(value >= std::numeric_limits<int32_t>::min() && value <= std::numeric_limits<int32_t>::max(),
                kInvalidArgument, "input '{}': data element {} ({}) is out of INT32 range", input, element, value);
    append(out, static_cast<int32_t>(value));
  } else {
    append(out, value);
  }
}

// Row-major bytes of a JSON "data" array (flat or nested as the shape).
void flatten(const json& data, const std::string& datatype, const std::string& input, int depth,
             std::vector<std::byte>& out) {
  ATOLL_CHECK(depth <= kMaxDataDepth, kInvalidArgument, "input '{}': data is nested deeper than {} levels", input,
              kMaxDataDepth);
  for (const json& v : data) {
    if (v.is_array()) {
      flatten(v, datatype, input, depth + 1, out);
    } else {
      append_element(v, datatype, input, out);
    }
  }
}

std::vector<int64_t> shape_of(const json& in, const std::string& name) {
  const json* shape = member(in, "shape");
  ATOLL_CHECK(shape != nullptr && shape->is_array(), kInvalidArgument, "input '{}' has no shape array", name);
  std::vector<int64_t> dims;
  for (const json& d : *shape) {
    ATOLL_CHECK(d.is_number_integer(), kInvalidArgument, "input '{}': shape holds a non-integer", name);
    dims.push_back(json_int64(d, "shape"));
  }
  return dims;
}

json parse_header(const std::string& body, std::optional<size_t> header_length) {
  const size_t length = header_length.value_or(body.size());
  ATOLL_CHECK(length <= body.size(), kInvalidArgument,
              "Inference-Header-Content-Length {} exceeds the body's {} bytes", length, body.size());
  json header = json::parse(body.begin(), body.begin() + static_cast<std::ptrdiff_t>(length), nullptr, false);
  ATOLL_CHECK(!header.is_discarded(), kParse, "request body is not valid JSON");
  ATOLL_CHECK(header.is_object(), kInvalidArgument, "request body must be a JSON object");
  return header;
}

}  // namespace

HttpInferRequest decode_infer_request(const std::string& body, std::optional<size_t> header_length,
                                      const std::string& model, const std::string& version,
                                      const SharedMemoryRegistry& shm) {
  const json header = parse_header(body, header_length);
  HttpInferRequest out;
  InferRequest& r = out.request;
  r.model = model;
  r.version = version;
  if (const json* id = member(header, "id")) {
    ATOLL_CHECK(id->is_string(), kInvalidArgument, "request 'id' must be a string");
    r.id = id->get<std::string>();
  }
  const json* params = member(header, "parameters");
  ATOLL_CHECK(params == nullptr || params->is_object(), kInvalidArgument, "request 'parameters' must be an object");
  r.priority = integer_parameter(params, "priority");
  r.timeout_us = integer_parameter(params, "timeout");
  out.binary_output_default = bool_parameter(params, "binary_data_output", false);

  const json* inputs = member(header, "inputs");
  ATOLL_CHECK(inputs != nullptr && inputs->is_array(), kInvalidArgument, "request has no 'inputs' array");
  size_t binary_at = header_length.value_or(body.size());
  out.buffers.reserve(inputs->size());
  for (const json& in : *inputs) {
    ATOLL_CHECK(in.is_object(), kInvalidArgument, "each input must be a JSON object");
    const json* name = member(in, "name");
    const json* datatype = member(in, "datatype");
    ATOLL_CHECK(name && name->is_string() && datatype && datatype->is_string(), kInvalidArgument,
                "each input needs a string 'name' and 'datatype'");
    InputTensor t;
    t.name = name->get<std::string>();
    t.datatype = datatype->get<std::string>();
    t.shape = shape_of(in, t.name);
    const json* in_params = member(in, "parameters");
    if (std::optional<SharedMemoryTensor> region = shm_tensor(in_params, shm, t.name)) {
      t.data = region->bytes();
      t.owner = region->region;
    } else if (const std::optional<int64_t> size = integer_parameter(in_params, "binary_data_size")) {
      ATOLL_CHECK(*size >= 0 && static_cast<size_t>(*size) <= body.size() - binary_at, kInvalidArgument,
                  "input '{}' declares {} binary bytes; only {} remain in the body", t.name, *size,
                  body.size() - binary_at);
      t.data = std::as_bytes(std::span(body.data() + binary_at, static_cast<size_t>(*size)));
      binary_at += static_cast<size_t>(*size);
    } else {
      const json* data = member(in, "data");
      ATOLL_CHECK(data != nullptr && data->is_array(), kInvalidArgument,
                  "input '{}' has neither a 'data' array nor binary_data_size", t.name);
      std::vector<std::byte>& buffer = out.buffers.emplace_back();
      // Other datatypes stay empty: the engine names the datatype the model expects.
      if (t.datatype == "FP32" || t.datatype == "FP64" || t.datatype == "INT32" || t.datatype == "INT64") {
        flatten(*data, t.datatype, t.name, 1, buffer);
      }
      t.data = buffer;
    }
    r.inputs.push_back(std::move(t));
  }
  ATOLL_CHECK(binary_at == body.size(), kInvalidArgument, "{} bytes after the last binary input belong to no input",
              body.size() - binary_at);

  if (const json* outputs = member(header, "outputs")) {
    ATOLL_CHECK(outputs->is_array(), kInvalidArgument, "request 'outputs' must be an array");
    for (const json& o : *outputs) {
      const json* name = o.is_object() ? member(o, "name") : nullptr;
      ATOLL_CHECK(name && name->is_string(), kInvalidArgument, "each requested output needs a string 'name'");
      r.outputs.push_back(name->get<std::string>());
      const json* o_params = member(o, "parameters");
      std::optional<bool> binary;
      if (o_params && o_params->contains("binary_data")) binary = bool_parameter(o_params, "binary_data", false);
      out.binary_output.push_back(binary);
      out.shm_outputs.push_back(shm_tensor(o_params, shm, r.outputs.back()));
    }
  }
  return out;
}

HttpInferBody encode_infer_response(const InferResponse& response, const HttpInferRequest& request) {
  json header;
  header["model_name"] = response.model;
  header["model_version"] = response.version;
  if (!response.id.empty()) header["id"] = response.id;
  header["parameters"]["atoll_class"] = sched::task_class_name(response.task_class);
  if (response.late) header["parameters"]["atoll_late"] = true;
  std::string binary;
  json outputs = json::array();
  for (size_t i = 0; i < response.outputs.size(); ++i) {
    const OutputTensor& out = response.outputs[i];
    const bool as_binary = i < request.binary_output.size() && request.binary_output[i]
                               ? *request.binary_output[i]
                               : request.binary_output_default;
    json o{{"name", out.name}, {"datatype", out.datatype}, {"shape", out.shape}};
    const std::optional<SharedMemoryTensor>* shm = i < request.shm_outputs.size() ? &request.shm_outputs[i] : nullptr;
    if (shm != nullptr && shm->has_value()) {
      // No parameters, as Triton answers: its C++ client (perf_analyzer's) reads binary_data_size
      // from every output that has them.
      (*shm)->write(out.name, std::span(out.data.raw(), out.data.nbytes()));
    } else if (as_binary) {
      o["parameters"]["binary_data_size"] = out.data.nbytes();
      binary.append(reinterpret_cast<const char*>(out.data.raw()), out.data.nbytes());
    } else if (out.data.dtype() == DType::kF32) {
      const auto values = out.data.as<float>();
      o["data"] = std::vector<float>(values.begin(), values.end());
    } else {
      const auto values = out.data.as<int64_t>();
      o["data"] = std::vector<int64_t>(values.begin(), values.end());
    }
    outputs.push_back(std::move(o));
  }
  header["outputs"] = std::move(outputs);
  HttpInferBody result;
  result.body = header.dump(-1, ' ', false, json::error_handler_t::replace);
  if (!binary.empty()) {
    result.header_length = result.body.size();
    result.body += binary;
  }
  return result;
}

std::string error_body(const std::string& message) {
  return json{{"error", printable(message)}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace atl::serve
