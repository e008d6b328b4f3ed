#pragma once
// KServe v2 HTTP/REST on Triton's paths (/v2/health/*, /v2/models/{m}[/versions/{v}]/...,
// /v2/repository/...), with JSON and binary tensors; and the Prometheus /metrics endpoint on
// its own port. Each runs its own listener thread and a bounded pool of handler threads.
#include <cstddef>
#include <memory>
#include <string>
#include <thread>

#include "serve/protocol.h"

namespace httplib {
class Server;
}

namespace atl::serve {

class HttpFrontEnd {
 public:
  // Listens on host:port (0: any free port); bodies over max_body_bytes are refused (413).
  HttpFrontEnd(ModelControl& control, const std::string& host, int port, size_t max_body_bytes, int threads);
  ~HttpFrontEnd();
  int port() const { return port_; }
  void shutdown();

 private:
  void add_routes(ModelControl& control);
  std::unique_ptr<httplib::Server> server_;
  std::thread listener_;
  int port_ = 0;
};

class MetricsFrontEnd {
 public:
  MetricsFrontEnd(const Engine& engine, const std::string& host, int port);
  ~MetricsFrontEnd();
  int port() const { return port_; }
  void shutdown();

 private:
  std::unique_ptr<httplib::Server> server_;
  std::thread listener_;
  int port_ = 0;
};

}  // namespace atl::serve
