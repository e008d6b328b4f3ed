#include "serve/load_test.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <httplib.h>
#include <sys/mman.h>  // shm_open, shm_unlink
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <nlohmann/json.hpp>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "grpc_service.grpc.pb.h"
#include "runtime/model_source.h"
#include "serve/datatype.h"
#include "serve/shared_memory.h"

namespace atl::serve {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

inference::ModelInferRequest to_message(const InferRequest& r) {
  inference::ModelInferRequest m;
  m.set_model_name(r.model);
  m.set_id(r.id);
  if (r.priority) (*m.mutable_parameters())["priority"].set_int64_param(*r.priority);
  for (const InputTensor& t : r.inputs) {
    auto* in = m.add_inputs();
    in->set_name(t.name);
    in->set_datatype(t.datatype);
    for (int64_t d : t.shape) in->add_shape(d);
    m.add_raw_input_contents(reinterpret_cast<const char*>(t.data.data()), t.data.size());
  }
  return m;
}

// One blocking ModelInfer; the error message when it fails.
std::string call_infer(inference::GRPCInferenceService::Stub& stub, const inference::ModelInferRequest& m) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  inference::ModelInferResponse response;
  const grpc::Status status = stub.ModelInfer(&context, m, &response);
  return status.ok() ? std::string() : status.error_message().empty() ? "gRPC error" : status.error_message();
}

std::unique_ptr<inference::GRPCInferenceService::Stub> make_stub(const std::string& target) {
  return inference::GRPCInferenceService::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
}

void add_sample(LoadSamples& s, double latency_ms, const std::string& error) {
  if (error.empty()) {
    s.latency_ms.push_back(latency_ms);
  } else if (s.failed++ == 0) {
    s.first_error = error;
  }
}

// `count` calls of `call` (it returns its error, empty on success), each sent when the previous
// was answered.
template <typename Call>
LoadSamples one_at_a_time(int count, Call&& call) {
  LoadSamples s;
  const Clock::time_point began = Clock::now();
  for (int i = 0; i < count; ++i) {
    const Clock::time_point sent = Clock::now();
    const std::string error = call();
    add_sample(s, ms_since(sent), error);
  }
  s.seconds = ms_since(began) / 1e3;
  return s;
}

// One client's samples, from each of its sending threads.
struct Recorder {
  std::mutex mutex;
  LoadSamples samples;
  void add(double latency_ms, const std::string& error) {
    std::lock_guard lock(mutex);
    add_sample(samples, latency_ms, error);
  }
};

}  // namespace

SampleRequest sample_request(const Engine& engine, const std::string& model, bool realtime, uint64_t seed) {
  const std::shared_ptr<const ServedModel> served = engine.model(model, "");
  SampleRequest s;
  s.request.model = model;
  if (realtime) s.request.priority = 1;
  // The batch-1 program's inputs as the scheduler's own clients send them: f32 and i64, which
  // are the request's FP32 and INT64 bytes.
  const Program& program = served->batch1();
  const std::vector<Tensor> values = seeded_inputs(program, seed);
  for (size_t i = 0; i < values.size(); ++i) {
    const TensorSpec& t = program.inputs[i];
    std::vector<int64_t> shape = client_shape(served->spec, t);
    if (!shape.empty() && shape[0] < 0) shape[0] = 1;
    const auto* raw = values[i].raw();
    s.storage.emplace_back(raw, raw + values[i].nbytes());
    s.request.inputs.push_back({t.name, kserve_datatype(t.dtype), shape, std::span<const std::byte>(s.storage.back()), nullptr});
  }
  return s;
}

std::vector<LoadSamples> run_grpc_load(const std::string& target, const Engine& engine,
                                       const std::vector<LoadClient>& clients, double duration_s, double warmup_s) {
  ATOLL_CHECK(duration_s > 0 && warmup_s >= 0, kInvalidArgument, "load test: duration must be positive (got {} s)",
              duration_s);
  std::vector<SampleRequest> requests;
  std::vector<inference::ModelInferRequest> messages;
  for (size_t c = 0; c < clients.size(); ++c) {
    const LoadClient& lc = clients[c];
    ATOLL_CHECK(lc.rate_hz >= 0 && lc.concurrency >= 1, kInvalidArgument,
                "load client '{}': rate must not be negative and concurrency at least 1", lc.model);
    requests.push_back(sample_request(engine, lc.model, lc.realtime, 1000 + c));
    messages.push_back(to_message(requests.back().request));
  }
  std::vector<Recorder> recorders(clients.size());
  const Clock::time_point start = Clock::now();
  const auto from = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(warmup_s));
  const auto until = from + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(duration_s));
  std::vector<std::thread> threads;
  for (size_t c = 0; c < clients.size(); ++c) {
    const LoadClient& lc = clients[c];
    const int senders = lc.rate_hz > 0 ? 1 : lc.concurrency;
    for (int k = 0; k < senders; ++k) {
      threads.emplace_back([&, c, lc] {
        auto stub = make_stub(target);
        const auto period = lc.rate_hz > 0 ? std::chrono::duration_cast<Clock::duration>(
                                                 std::chrono::duration<double>(1.0 / lc.rate_hz))
                                           : Clock::duration::zero();
        Clock::time_point next = start;
        while (Clock::now() < until) {
          // A fixed-rate request belongs to the measured window by when it was due, not when a
          // late answer to the one before let it go: else warm-up requests sent late are counted.
          Clock::time_point due{};
          if (lc.rate_hz > 0) {
            std::this_thread::sleep_until(next);
            due = next;
            next += period;
            if (next >= until) next = until;
          }
          const Clock::time_point sent = Clock::now();
          if (sent >= until) break;
          if (lc.rate_hz <= 0) due = sent;
          const std::string error = call_infer(*stub, messages[c]);
          if (due >= from) recorders[c].add(ms_since(sent), error);
        }
      });
    }
  }
  for (std::thread& t : threads) t.join();
  std::vector<LoadSamples> out;
  for (Recorder& r : recorders) {
    r.samples.seconds = duration_s;
    out.push_back(std::move(r.samples));
  }
  return out;
}

LoadSamples sequential_in_process(Engine& engine, const InferRequest& request, int count) {
  return one_at_a_time(count, [&] {
    std::promise<std::string> answered;
    try {
      engine.infer(request, [&](std::exception_ptr error, InferResponse) {
        std::string message;
        if (error) {
          try {
            std::rethrow_exception(error);
          } catch (const std::exception& e) {
            message = e.what();
          }
        }
        answered.set_value(message);
      });
    } catch (const std::exception& e) {
      answered.set_value(e.what());
    }
    return answered.get_future().get();
  });
}

namespace {

// A POSIX shared-memory object of `bytes` the client creates, mapped as the server maps regions
// (SharedMemoryRegion) and unlinked when done.
class ShmObject {
 public:
  explicit ShmObject(size_t bytes) : key_(fmt::format("/atoll_bench_{}", getpid())) {
    const int fd = shm_open(key_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    ATOLL_CHECK(fd >= 0, kIo, "shm_open({}) failed: {}", key_, std::strerror(errno));
    const bool sized = ftruncate(fd, static_cast<off_t>(bytes)) == 0;
    close(fd);
    try {
      ATOLL_CHECK(sized, kIo, "cannot size shared memory {} to {} bytes", key_, bytes);
      mapping_ = std::make_unique<SharedMemoryRegion>("client", key_, 0, bytes);
    } catch (...) {
      shm_unlink(key_.c_str());
      throw;
    }
  }
  ~ShmObject() {
    mapping_.reset();
    shm_unlink(key_.c_str());
  }
  ShmObject(const ShmObject&) = delete;
  ShmObject& operator=(const ShmObject&) = delete;
  const std::string& key() const { return key_; }
  std::byte* data() const { return mapping_->bytes(0, mapping_->byte_size()).data(); }

 private:
  std::string key_;
  std::unique_ptr<SharedMemoryRegion> mapping_;
};

// `count` calls of `message`, each sent when the previous was answered.
LoadSamples sequential_calls(inference::GRPCInferenceService::Stub& stub, const inference::ModelInferRequest& message,
                             int count) {
  return one_at_a_time(count, [&] { return call_infer(stub, message); });
}

void set_shm_parameters(google::protobuf::Map<std::string, inference::InferParameter>& params, const std::string& region,
                        size_t offset, size_t bytes) {
  params["shared_memory_region"].set_string_param(region);
  params["shared_memory_byte_size"].set_int64_param(static_cast<int64_t>(bytes));
  params["shared_memory_offset"].set_int64_param(static_cast<int64_t>(offset));
}

}  // namespace

LoadSamples sequential_grpc_shm(const std::string& target, const Engine& engine, const InferRequest& request,
                                int count) {
  const std::shared_ptr<const ServedModel> model = engine.model(request.model, "");
  size_t in_bytes = 0, out_bytes = 0;
  for (const InputTensor& t : request.inputs) in_bytes += t.data.size();
  std::vector<std::pair<std::string, size_t>> outputs;  // name, bytes (f32 or i64 over the protocol)
  for (const TensorSpec& t : model->batch1().outputs) {
    outputs.emplace_back(t.name, static_cast<size_t>(t.shape.numel()) * 8);
    out_bytes += outputs.back().second;
  }
  ShmObject object(in_bytes + out_bytes);
  auto stub = make_stub(target);
  const std::string region = "atoll_bench";
  {
    grpc::ClientContext context;
    inference::SystemSharedMemoryRegisterRequest q;
    q.set_name(region);
    q.set_key(object.key());
    q.set_byte_size(in_bytes + out_bytes);
    inference::SystemSharedMemoryRegisterResponse r;
    const grpc::Status status = stub->SystemSharedMemoryRegister(&context, q, &r);
    ATOLL_CHECK(status.ok(), kUnavailable, "registering shared memory failed: {}", status.error_message());
  }
  inference::ModelInferRequest message = to_message(request);
  message.clear_raw_input_contents();
  size_t offset = 0;
  for (int i = 0; i < message.inputs_size(); ++i) {
    const std::span<const std::byte> data = request.inputs[static_cast<size_t>(i)].data;
    std::memcpy(object.data() + offset, data.data(), data.size());
    set_shm_parameters(*message.mutable_inputs(i)->mutable_parameters(), region, offset, data.size());
    offset += data.size();
  }
  for (const auto& [name, bytes] : outputs) {
    auto* out = message.add_outputs();
    out->set_name(name);
    set_shm_parameters(*out->mutable_parameters(), region, offset, bytes);
    offset += bytes;
  }
  LoadSamples s = sequential_calls(*stub, message, count);
  grpc::ClientContext context;
  inference::SystemSharedMemoryUnregisterRequest q;
  q.set_name(region);
  inference::SystemSharedMemoryUnregisterResponse r;
  stub->SystemSharedMemoryUnregister(&context, q, &r);
  return s;
}

LoadSamples sequential_grpc_live(const std::string& target, int count) {
  auto stub = make_stub(target);
  return one_at_a_time(count, [&] {
    grpc::ClientContext context;
    inference::ServerLiveResponse response;
    const grpc::Status status = stub->ServerLive(&context, inference::ServerLiveRequest{}, &response);
    return status.ok() ? std::string() : status.error_message();
  });
}

LoadSamples sequential_http(const std::string& host, int port, const InferRequest& request, int count) {
  nlohmann::json header;
  header["id"] = request.id;
  if (request.priority) header["parameters"]["priority"] = *request.priority;
  header["parameters"]["binary_data_output"] = true;
  for (const InputTensor& t : request.inputs) {
    header["inputs"].push_back({{"name", t.name},
                                {"shape", t.shape},
                                {"datatype", t.datatype},
                                {"parameters", {{"binary_data_size", t.data.size()}}}});
  }
  const std::string json = header.dump();
  std::string body = json;
  for (const InputTensor& t : request.inputs) body.append(reinterpret_cast<const char*>(t.data.data()), t.data.size());
  httplib::Client client(host, port);
  client.set_keep_alive(true);
  client.set_tcp_nodelay(true);  // the client's own Nagle would hold the body behind its headers
  client.set_read_timeout(30, 0);
  const httplib::Headers headers{{"Inference-Header-Content-Length", std::to_string(json.size())}};
  const std::string path = fmt::format("/v2/models/{}/infer", request.model);
  return one_at_a_time(count, [&] {
    const httplib::Result res = client.Post(path, headers, body, "application/octet-stream");
    return !res                ? "HTTP: " + httplib::to_string(res.error())
           : res->status != 200 ? fmt::format("HTTP {}: {}", res->status, res->body.substr(0, 200))
                                : std::string();
  });
}

LoadSamples sequential_grpc(const std::string& target, const InferRequest& request, int count) {
  auto stub = make_stub(target);
  return sequential_calls(*stub, to_message(request), count);
}

}  // namespace atl::serve
