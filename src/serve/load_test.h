#pragma once
// A loopback load generator for `atoll bench serve`: clients that send KServe v2 ModelInfer
// requests over gRPC with binary tensors, as Triton's perf_analyzer does, closed loop or at a
// fixed rate; the same request one at a time over HTTP; and submitted to the engine in-process,
// so that what separates them is the protocol's cost.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "serve/engine.h"
#include "serve/inference.h"

namespace atl::serve {

struct LoadClient {
  std::string model;
  bool realtime = false;  // sends the reserved parameter priority 1
  double rate_hz = 0;     // > 0: one request every 1/rate s (one in flight; a late one goes at once)
  int concurrency = 1;    // closed loop (rate 0): requests in flight, one thread each
};

// One client's requests sent inside the measured window.
struct LoadSamples {
  std::vector<double> latency_ms;  // sent -> answered, successful requests
  int64_t failed = 0;
  std::string first_error;
  double seconds = 0;  // the window
};

// A batch-1 request to `model` with random inputs, owning its bytes.
struct SampleRequest {
  InferRequest request;
  std::vector<std::vector<std::byte>> storage;
};
SampleRequest sample_request(const Engine& engine, const std::string& model, bool realtime, uint64_t seed);

// Every client at once against the gRPC server at `target` (host:port): `warmup_s` unmeasured,
// then `duration_s` measured.
std::vector<LoadSamples> run_grpc_load(const std::string& target, const Engine& engine,
                                       const std::vector<LoadClient>& clients, double duration_s, double warmup_s);

// `count` requests one after the other, each sent when the previous was answered.
LoadSamples sequential_in_process(Engine& engine, const InferRequest& request, int count);
LoadSamples sequential_grpc(const std::string& target, const InferRequest& request, int count);
// The same with every input and output in one registered system shared-memory region (Triton's
// extension, as perf_analyzer --shared-memory system): only the request's header travels.
LoadSamples sequential_grpc_shm(const std::string& target, const Engine& engine, const InferRequest& request,
                                int count);
// `count` requests over HTTP (the KServe v2 REST protocol with Triton's binary tensor extension,
// as tritonclient's binary_data sends them) on one kept-alive connection to host:port.
LoadSamples sequential_http(const std::string& host, int port, const InferRequest& request, int count);
// `count` ServerLive calls one after the other: the round trip of an RPC with no payload and no
// engine behind it, what gRPC alone costs on this host.
LoadSamples sequential_grpc_live(const std::string& target, int count);

}  // namespace atl::serve
