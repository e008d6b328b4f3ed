#include "serve/http_server.h"

#include <httplib.h>

#include <fmt/format.h>

#include <charconv>
#include <future>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/text.h"
#include "serve/http_codec.h"

namespace atl::serve {

namespace {

using nlohmann::json;

// Model paths with an optional version: /v2/models/{m}[/versions/{v}]{suffix}
std::string model_route(const std::string& suffix) {
  return R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)" + suffix;
}

void send_json(httplib::Response& res, const json& body, int status = 200) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

// Runs a handler; its exceptions become the protocol's error status with {"error": message}.
template <typename Handler>
void respond(httplib::Response& res, Handler handler) {
  try {
    handler();
  } catch (...) {
    const ErrorInfo info = error_info(std::current_exception());
    res.status = http_status(info.code);
    res.set_content(error_body(info.message), "application/json");
  }
}

std::optional<size_t> header_length(const httplib::Request& req) {
  if (!req.has_header("Inference-Header-Content-Length")) return std::nullopt;
  const std::string text = req.get_header_value("Inference-Header-Content-Length");
  size_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  ATOLL_CHECK(ec == std::errc() && end == text.data() + text.size(), kInvalidArgument,
              "Inference-Header-Content-Length '{}' is not a byte count", printable(text));
  return value;
}

json tensor_metadata(const ModelSpec& spec, const TensorSpec& t) {
  return {{"name", t.name}, {"datatype", kserve_datatype(t.dtype)}, {"shape", client_shape(spec, t)}};
}

json model_metadata(const ServedModel& model) {
  json j{{"name", model.spec.name}, {"platform", served_platform(model.spec)}, {"versions", json::array()}};
  for (int64_t v : model.spec.versions) j["versions"].push_back(std::to_string(v));
  for (const TensorSpec& t : model.batch1().inputs) j["inputs"].push_back(tensor_metadata(model.spec, t));
  for (const TensorSpec& t : model.batch1().outputs) j["outputs"].push_back(tensor_metadata(model.spec, t));
  return j;
}

json model_config(const ServedModel& model) {
  const auto tensor = [&](const TensorSpec& t) {
    std::vector<int64_t> dims = t.shape.dims();
    if (model.spec.max_batch_size > 0) dims.erase(dims.begin());
    return json{{"name", t.name}, {"data_type", is_float(t.dtype) ? "TYPE_FP32" : "TYPE_INT64"}, {"dims", dims}};
  };
  json j{{"name", model.spec.name},
         {"platform", served_platform(model.spec)},
         {"backend", "atoll"},
         {"max_batch_size", model.spec.max_batch_size},
         {"input", json::array()},
         {"output", json::array()}};
  for (const TensorSpec& t : model.batch1().inputs) j["input"].push_back(tensor(t));
  for (const TensorSpec& t : model.batch1().outputs) j["output"].push_back(tensor(t));
  if (!model.spec.is_onnx()) j["parameters"]["zoo_model"]["string_value"] = model.spec.zoo_model;
  if (model.spec.l2) {
    j["parameters"]["l2_config"]["string_value"] = model.spec.l2->file;
    j["parameters"]["l2_status"]["string_value"] = model.l2_status;
  }
  j["parameters"]["default_class"]["string_value"] = sched::task_class_name(model.spec.default_class);
  j["parameters"]["timeout_policy"]["string_value"] =
      model.spec.timeout_policy == TimeoutPolicy::kReject ? "reject" : "report";
  return j;
}

json duration(const DurationStat& d) {
  return {{"count", d.count}, {"ns", d.ns}};
}

json model_statistics(const std::string& name, const std::string& version, const ModelStats& s) {
  json j{{"name", name},
         {"version", version},
         {"last_inference", s.last_inference_ms},
         {"inference_count", s.inference_count},
         {"execution_count", s.execution_count},
         {"inference_stats",
          {{"success", duration(s.success)},
           {"fail", duration(s.fail)},
           {"queue", duration(s.queue)},
           {"compute_input", duration(s.compute_input)},
           {"compute_infer", duration(s.compute_infer)},
           {"compute_output", duration(s.compute_output)}}},
         {"batch_stats", json::array()}};
  for (const auto& [batch, d] : s.compute_by_batch) {
    j["batch_stats"].push_back({{"batch_size", batch}, {"compute_infer", duration(d)}});
  }
  return j;
}

// Waits on the engine's answer: the handler thread is the request's (httplib's model).
InferResponse infer_blocking(Engine& engine, const InferRequest& request) {
  auto answer = std::make_shared<std::promise<InferResponse>>();
  std::future<InferResponse> result = answer->get_future();
  engine.infer(request, [answer](std::exception_ptr error, InferResponse response) {
    if (error) {
      answer->set_exception(error);
    } else {
      answer->set_value(std::move(response));
    }
  });
  return result.get();
}

// Both HTTP servers (inference and metrics) bind through here. httplib writes an answer's headers and body
// in separate sends: with Nagle's algorithm on, the body waited for the client's delayed ACK, 40 ms
// on Linux, on every request of a keep-alive connection (session 38: tiny_cnn over HTTP took 44 ms
// a request, over gRPC 0.9 ms).
//
// Errors httplib answers itself (no route, a request it cannot parse, a body over the limit) come
// with an empty body, which Triton's clients report as "empty response": they get the protocol's
// {"error": message} too, a missing path naming what the port serves (`serves`).
void listen_on(httplib::Server& server, const std::string& host, int port, int& bound, const char* what,
               const std::string& serves) {
  server.set_tcp_nodelay(true);
  server.set_error_handler(httplib::Server::HandlerWithResponse([serves](const httplib::Request& req,
                                                                        httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;  // the handler's own error
    std::string message;
    if (res.status == 404) {
      message = fmt::format("no {} {} here: {}", req.method, printable(req.path), serves);
    } else if (res.status == 413) {
      message = "request larger than this server accepts (atoll serve --max-request-bytes)";
    } else {
      message = fmt::format("HTTP error {} for {} {}", res.status, req.method, printable(req.path));
    }
    res.set_content(error_body(message), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));
  bound = port == 0 ? server.bind_to_any_port(host) : (server.bind_to_port(host, port) ? port : -1);
  ATOLL_CHECK(bound > 0, kIo, "cannot listen for {} on {}:{}", what, host, port);
}

// Triton's system shared-memory endpoints: status of every region or one, register, unregister.
void add_shared_memory_routes(httplib::Server& s, SharedMemoryRegistry& shm) {
  const auto status = [&shm](const std::string& name, httplib::Response& res) {
    respond(res, [&] {
      json regions = json::array();
      for (const auto& r : shm.status(name)) {
        regions.push_back({{"name", r->name()}, {"key", r->key()}, {"offset", r->offset()}, {"byte_size", r->byte_size()}});
      }
      send_json(res, regions);
    });
  };
  s.Get("/v2/systemsharedmemory/status",
        [status](const httplib::Request&, httplib::Response& res) { status("", res); });
  s.Get(R"(/v2/systemsharedmemory/region/([^/]+)/status)",
        [status](const httplib::Request& req, httplib::Response& res) { status(req.matches[1], res); });
  s.Post(R"(/v2/systemsharedmemory/region/([^/]+)/register)", [&shm](const httplib::Request& req, httplib::Response& res) {
    respond(res, [&] {
      const json body = json::parse(req.body, nullptr, false);
      ATOLL_CHECK(body.is_object() && body.contains("key") && body["key"].is_string(), kInvalidArgument,
                  "a shared-memory registration needs a JSON object with a string 'key'");
      const auto unsigned_field = [&](const char* field) {
        if (!body.contains(field)) return uint64_t{0};
        ATOLL_CHECK(body[field].is_number_unsigned(), kInvalidArgument, "'{}' must be a non-negative integer", field);
        return body[field].get<uint64_t>();
      };
      shm.register_region(req.matches[1], body["key"].get<std::string>(), unsigned_field("offset"),
                          unsigned_field("byte_size"));
    });
  });
  s.Post("/v2/systemsharedmemory/unregister",
         [&shm](const httplib::Request&, httplib::Response& res) { respond(res, [&] { shm.unregister(""); }); });
  s.Post(R"(/v2/systemsharedmemory/region/([^/]+)/unregister)",
         [&shm](const httplib::Request& req, httplib::Response& res) {
           respond(res, [&] { shm.unregister(req.matches[1]); });
         });
}

// Liveness, readiness and the server's metadata.
void add_health_routes(httplib::Server& s, Engine& engine) {
  s.Get("/v2/health/live", [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
  s.Get("/v2/health/ready",
        [&engine](const httplib::Request&, httplib::Response& res) { res.status = engine.ready() ? 200 : 400; });
  s.Get("/v2", [](const httplib::Request&, httplib::Response& res) {
    send_json(res, {{"name", kServerName}, {"version", kServerVersion}, {"extensions", kExtensions}});
  });
}

// Each model's readiness, configuration, statistics, metadata and inference.
void add_model_routes(httplib::Server& s, Engine& engine, ModelControl& control) {
  s.Get(model_route("/ready"), [&engine](const httplib::Request& req, httplib::Response& res) {
    respond(res, [&] {
      try {
        engine.model(req.matches[1], req.matches[2]);
        res.status = engine.ready() ? 200 : 400;
      } catch (const Error& e) {
        if (e.code() != ErrorCode::kUnavailable) throw;
        res.status = 400;
      }
    });
  });
  s.Get(model_route("/config"), [&engine](const httplib::Request& req, httplib::Response& res) {
    respond(res, [&] { send_json(res, model_config(*engine.model(req.matches[1], req.matches[2]))); });
  });
  s.Get(model_route("/stats"), [&engine](const httplib::Request& req, httplib::Response& res) {
    respond(res, [&] {
      const auto model = engine.model(req.matches[1], req.matches[2]);
      const std::string version = req.matches[2].length() ? req.matches[2].str() : std::to_string(model->spec.versions.back());
      send_json(res, {{"model_stats", {model_statistics(model->spec.name, version, engine.stats().model(model->spec.name))}}});
    });
  });
  s.Get("/v2/models/stats", [&engine](const httplib::Request&, httplib::Response& res) {
    json stats = json::array();
    for (const auto& [name, version] : engine.ready_models()) {
      stats.push_back(model_statistics(name, version, engine.stats().model(name)));
    }
    send_json(res, {{"model_stats", stats}});
  });
  s.Get(model_route(""), [&engine](const httplib::Request& req, httplib::Response& res) {
    respond(res, [&] { send_json(res, model_metadata(*engine.model(req.matches[1], req.matches[2]))); });
  });
  s.Post(model_route("/infer"), [&engine, &control](const httplib::Request& req, httplib::Response& res) {
    respond(res, [&] {
      const HttpInferRequest decoded = decode_infer_request(req.body, header_length(req), req.matches[1],
                                                            req.matches[2], control.shared_memory());
      const HttpInferBody body = encode_infer_response(infer_blocking(engine, decoded.request), decoded);
      if (body.header_length) {
        res.set_header("Inference-Header-Content-Length", std::to_string(*body.header_length));
        res.set_content(body.body, "application/octet-stream");
      } else {
        res.set_content(body.body, "application/json");
      }
    });
  });
}

// The repository extension: index, load, unload.
void add_repository_routes(httplib::Server& s, Engine& engine, ModelControl& control) {
  s.Post("/v2/repository/index", [&engine](const httplib::Request& req, httplib::Response& res) {
    respond(res, [&] {
      const json body = req.body.empty() ? json::object() : json::parse(req.body, nullptr, false);
      ATOLL_CHECK(body.is_object(), kParse, "repository index request is not a JSON object");
      const bool ready_only = body.value("ready", false);
      json index = json::array();
      for (const ModelIndexEntry& e : engine.index()) {
        if (ready_only && e.state != "READY") continue;
        json entry{{"name", e.name}, {"state", e.state}};
        if (!e.version.empty()) entry["version"] = e.version;
        if (!e.reason.empty()) entry["reason"] = e.reason;
        index.push_back(entry);
      }
      send_json(res, index);
    });
  });
  s.Post(R"(/v2/repository/models/([^/]+)/load)", [&control](const httplib::Request& req, httplib::Response& res) {
    respond(res, [&] {
      std::vector<std::string> names;
      if (!req.body.empty()) {
        const json body = json::parse(req.body, nullptr, false);
        ATOLL_CHECK(body.is_object(), kParse, "load request body is not a JSON object");
        if (const auto p = body.find("parameters"); p != body.end() && p->is_object()) {
          for (const auto& [name, value] : p->items()) names.push_back(name);
        }
      }
      check_load_parameters(req.matches[1], names);
      control.load_model(req.matches[1]);
    });
  });
  s.Post(R"(/v2/repository/models/([^/]+)/unload)", [&control](const httplib::Request& req, httplib::Response& res) {
    respond(res, [&] { control.unload_model(req.matches[1]); });
  });
}

}  // namespace

HttpFrontEnd::HttpFrontEnd(ModelControl& control, const std::string& host, int port, size_t max_body_bytes,
                           int threads)
    : server_(std::make_unique<httplib::Server>()) {
  server_->set_payload_max_length(max_body_bytes);
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  add_routes(control);
  listen_on(*server_, host, port, port_, "HTTP", "atoll serves " + served_protocol());
  listener_ = std::thread([this] { server_->listen_after_bind(); });
}

HttpFrontEnd::~HttpFrontEnd() {
  shutdown();
}

void HttpFrontEnd::shutdown() {
  if (!listener_.joinable()) return;
  server_->stop();
  listener_.join();
}

void HttpFrontEnd::add_routes(ModelControl& control) {
  Engine& engine = control.engine();
  add_health_routes(*server_, engine);
  add_model_routes(*server_, engine, control);
  add_repository_routes(*server_, engine, control);
  add_shared_memory_routes(*server_, control.shared_memory());
}

MetricsFrontEnd::MetricsFrontEnd(const Engine& engine, const std::string& host, int port)
    : server_(std::make_unique<httplib::Server>()) {
  server_->new_task_queue = [] { return new httplib::ThreadPool(2); };
  server_->Get("/metrics", [&engine](const httplib::Request&, httplib::Response& res) {
    res.set_content(engine.prometheus(), "text/plain; version=0.0.4");
  });
  listen_on(*server_, host, port, port_, "metrics", "this port serves GET /metrics");
  listener_ = std::thread([this] { server_->listen_after_bind(); });
}

MetricsFrontEnd::~MetricsFrontEnd() {
  shutdown();
}

void MetricsFrontEnd::shutdown() {
  if (!listener_.joinable()) return;
  server_->stop();
  listener_.join();
}

}  // namespace atl::serve
