#pragma once
// KServe v2 / Triton GRPCInferenceService on gRPC's callback API (an inference holds no thread
// while it waits for the scheduler), and gRPC's standard grpc.health.v1 Health service.
#include <memory>
#include <string>

#include "serve/protocol.h"

namespace grpc {
class Server;
}

namespace atl::serve {

class GrpcFrontEnd {
 public:
  // Listens on host:port (0: any free port); messages over max_message_bytes are refused.
  GrpcFrontEnd(ModelControl& control, const std::string& host, int port, int max_message_bytes);
  ~GrpcFrontEnd();
  int port() const { return port_; }
  // Health turns NOT_SERVING, then in-flight calls finish (waiting at most a few seconds).
  void shutdown();

 private:
  class Service;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace atl::serve
