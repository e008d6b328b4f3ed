#pragma once
// `atoll serve`: the engine, the models it starts with, and the three listeners (gRPC, HTTP,
// metrics). Loopback unless told otherwise.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "serve/engine.h"
#include "serve/grpc_server.h"
#include "serve/http_server.h"
#include "serve/protocol.h"

namespace atl::serve {

struct ServeOptions {
  EngineOptions engine;
  std::string repository;           // Triton layout; empty: none
  std::vector<std::string> models;  // --model NAME[=ZOO] or NAME=FILE.onnx
  std::string host = "127.0.0.1";
  int grpc_port = 8001;  // 0: any free port
  int http_port = 8000;
  int metrics_port = 8002;
  int64_t max_request_bytes = 64 << 20;
  int http_threads = 16;
};

class Server final : public ModelControl {
 public:
  // Loads every model (a repository model that fails to load is reported and listed as
  // UNAVAILABLE; a --model that fails is an error), then listens.
  explicit Server(const ServeOptions& options);
  ~Server() override;

  Engine& engine() override { return *engine_; }
  // Repository models re-read their config; --model and default models load their spec again.
  void load_model(const std::string& name) override;
  void unload_model(const std::string& name) override;
  SharedMemoryRegistry& shared_memory() override { return shared_memory_; }

  int grpc_port() const { return grpc_->port(); }
  int http_port() const { return http_->port(); }
  int metrics_port() const { return metrics_->port(); }

  // Refuses new requests, answers every accepted one, then closes the listeners.
  void shutdown();

 private:
  ServeOptions options_;
  std::mutex specs_mutex_;
  std::vector<ModelSpec> flag_specs_;  // models given without a repository
  std::unique_ptr<Engine> engine_;
  SharedMemoryRegistry shared_memory_;  // before the front ends, which resolve requests against it
  std::unique_ptr<GrpcFrontEnd> grpc_;
  std::unique_ptr<HttpFrontEnd> http_;
  std::unique_ptr<MetricsFrontEnd> metrics_;
};

}  // namespace atl::serve
