#include "serve/grpc_server.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <chrono>
#include <cstring>
#include <map>

#include "core/text.h"
#include "serve/grpc_codec.h"
#include "serve/shared_memory.h"
#include "grpc_service.grpc.pb.h"

namespace atl::serve {

namespace {

grpc::StatusCode grpc_code(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kInvalidGraph:
    case ErrorCode::kParse: return grpc::StatusCode::INVALID_ARGUMENT;
    case ErrorCode::kNotFound: return grpc::StatusCode::NOT_FOUND;
    case ErrorCode::kResourceExhausted: return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case ErrorCode::kUnsupported: return grpc::StatusCode::UNIMPLEMENTED;
    case ErrorCode::kUnavailable: return grpc::StatusCode::UNAVAILABLE;
    case ErrorCode::kDeadlineExceeded: return grpc::StatusCode::DEADLINE_EXCEEDED;
    case ErrorCode::kIo:
    case ErrorCode::kCuda:
    case ErrorCode::kInternal: return grpc::StatusCode::INTERNAL;
  }
  return grpc::StatusCode::INTERNAL;
}

grpc::Status to_status(std::exception_ptr error) {
  const ErrorInfo info = error_info(error);
  return {grpc_code(info.code), printable(info.message)};
}

// An extension atoll does not serve: UNIMPLEMENTED, naming it and what is served.
grpc::ServerUnaryReactor* not_served(grpc::CallbackServerContext* context, const std::string& what) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish({grpc::StatusCode::UNIMPLEMENTED, "atoll does not serve " + what + "; it serves " + served_protocol()});
  return reactor;
}

constexpr const char* kCudaSharedMemory = "the CUDA shared-memory extension (register system shared memory instead)";

// Runs a handler that answers at once; its exceptions become the call's status.
template <typename Handler>
grpc::ServerUnaryReactor* answer(grpc::CallbackServerContext* context, Handler handler) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  try {
    handler();
    reactor->Finish(grpc::Status::OK);
  } catch (...) {
    reactor->Finish(to_status(std::current_exception()));
  }
  return reactor;
}

inference::DataType config_datatype(DType dtype) {
  return is_float(dtype) ? inference::TYPE_FP32 : inference::TYPE_INT64;
}

inference::ModelConfig config_message(const ServedModel& model) {
  inference::ModelConfig c;
  c.set_name(model.spec.name);
  c.set_platform(served_platform(model.spec));
  c.set_backend("atoll");
  c.set_max_batch_size(static_cast<int32_t>(model.spec.max_batch_size));
  const auto dims = [&](const TensorSpec& t) {
    std::vector<int64_t> d = t.shape.dims();
    if (model.spec.max_batch_size > 0) d.erase(d.begin());
    return d;
  };
  for (const TensorSpec& t : model.batch1().inputs) {
    auto* in = c.add_input();
    in->set_name(t.name);
    in->set_data_type(config_datatype(t.dtype));
    for (int64_t d : dims(t)) in->add_dims(d);
  }
  for (const TensorSpec& t : model.batch1().outputs) {
    auto* out = c.add_output();
    out->set_name(t.name);
    out->set_data_type(config_datatype(t.dtype));
    for (int64_t d : dims(t)) out->add_dims(d);
  }
  auto& params = *c.mutable_parameters();
  if (!model.spec.is_onnx()) params["zoo_model"].set_string_value(model.spec.zoo_model);
  if (model.spec.l2) {
    params["l2_config"].set_string_value(model.spec.l2->file);
    params["l2_status"].set_string_value(model.l2_status);
  }
  params["default_class"].set_string_value(sched::task_class_name(model.spec.default_class));
  params["timeout_policy"].set_string_value(model.spec.timeout_policy == TimeoutPolicy::kReject ? "reject" : "report");
  return c;
}

void fill_statistics(const std::string& name, const std::string& version, const ModelStats& s,
                     inference::ModelStatistics& m) {
  m.set_name(name);
  m.set_version(version);
  m.set_last_inference(s.last_inference_ms);
  m.set_inference_count(s.inference_count);
  m.set_execution_count(s.execution_count);
  auto* st = m.mutable_inference_stats();
  const auto set = [](inference::StatisticDuration* d, const DurationStat& v) {
    d->set_count(v.count);
    d->set_ns(v.ns);
  };
  set(st->mutable_success(), s.success);
  set(st->mutable_fail(), s.fail);
  set(st->mutable_queue(), s.queue);
  set(st->mutable_compute_input(), s.compute_input);
  set(st->mutable_compute_infer(), s.compute_infer);
  set(st->mutable_compute_output(), s.compute_output);
  for (const auto& [batch, d] : s.compute_by_batch) {
    auto* b = m.add_batch_stats();
    b->set_batch_size(batch);
    set(b->mutable_compute_infer(), d);
  }
}

}  // namespace

class GrpcFrontEnd::Service final : public inference::GRPCInferenceService::CallbackService {
 public:
  explicit Service(ModelControl& control) : control_(control), engine_(control.engine()) {}

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* c, const inference::ServerLiveRequest*,
                                       inference::ServerLiveResponse* r) override {
    return answer(c, [&] { r->set_live(true); });
  }
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* c, const inference::ServerReadyRequest*,
                                        inference::ServerReadyResponse* r) override {
    return answer(c, [&] { r->set_ready(engine_.ready()); });
  }
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* c, const inference::ModelReadyRequest* q,
                                       inference::ModelReadyResponse* r) override {
    return answer(c, [&] {
      try {
        engine_.model(q->name(), q->version());
        r->set_ready(engine_.ready());
      } catch (const Error& e) {
        if (e.code() != ErrorCode::kUnavailable) throw;
        r->set_ready(false);
      }
    });
  }
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* c, const inference::ServerMetadataRequest*,
                                           inference::ServerMetadataResponse* r) override {
    return answer(c, [&] {
      r->set_name(kServerName);
      r->set_version(kServerVersion);
      for (const char* e : kExtensions) r->add_extensions(e);
    });
  }
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* c, const inference::ModelMetadataRequest* q,
                                          inference::ModelMetadataResponse* r) override {
    return answer(c, [&] {
      const auto model = engine_.model(q->name(), q->version());
      r->set_name(model->spec.name);
      for (int64_t v : model->spec.versions) r->add_versions(std::to_string(v));
      r->set_platform(served_platform(model->spec));
      const auto add = [&](const TensorSpec& t, inference::ModelMetadataResponse::TensorMetadata* m) {
        m->set_name(t.name);
        m->set_datatype(kserve_datatype(t.dtype));
        for (int64_t d : client_shape(model->spec, t)) m->add_shape(d);
      };
      for (const TensorSpec& t : model->batch1().inputs) add(t, r->add_inputs());
      for (const TensorSpec& t : model->batch1().outputs) add(t, r->add_outputs());
    });
  }
  grpc::ServerUnaryReactor* ModelConfig(grpc::CallbackServerContext* c, const inference::ModelConfigRequest* q,
                                        inference::ModelConfigResponse* r) override {
    return answer(c, [&] { *r->mutable_config() = config_message(*engine_.model(q->name(), q->version())); });
  }
  grpc::ServerUnaryReactor* ModelStatistics(grpc::CallbackServerContext* c, const inference::ModelStatisticsRequest* q,
                                            inference::ModelStatisticsResponse* r) override {
    return answer(c, [&] {
      if (!q->name().empty()) {
        const auto model = engine_.model(q->name(), q->version());
        const std::string version = q->version().empty() ? std::to_string(model->spec.versions.back()) : q->version();
        fill_statistics(q->name(), version, engine_.stats().model(q->name()), *r->add_model_stats());
        return;
      }
      for (const auto& [name, version] : engine_.ready_models()) {
        fill_statistics(name, version, engine_.stats().model(name), *r->add_model_stats());
      }
    });
  }
  grpc::ServerUnaryReactor* RepositoryIndex(grpc::CallbackServerContext* c, const inference::RepositoryIndexRequest* q,
                                            inference::RepositoryIndexResponse* r) override {
    return answer(c, [&] {
      for (const ModelIndexEntry& e : engine_.index()) {
        if (q->ready() && e.state != "READY") continue;
        auto* m = r->add_models();
        m->set_name(e.name);
        m->set_version(e.version);
        m->set_state(e.state);
        m->set_reason(e.reason);
      }
    });
  }
  grpc::ServerUnaryReactor* RepositoryModelLoad(grpc::CallbackServerContext* c,
                                                const inference::RepositoryModelLoadRequest* q,
                                                inference::RepositoryModelLoadResponse*) override {
    return answer(c, [&] {
      std::vector<std::string> names;
      for (const auto& [name, value] : q->parameters()) names.push_back(name);
      check_load_parameters(q->model_name(), names);
      control_.load_model(q->model_name());
    });
  }
  grpc::ServerUnaryReactor* RepositoryModelUnload(grpc::CallbackServerContext* c,
                                                  const inference::RepositoryModelUnloadRequest* q,
                                                  inference::RepositoryModelUnloadResponse*) override {
    return answer(c, [&] { control_.unload_model(q->model_name()); });
  }
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* c, const inference::ModelInferRequest* q,
                                       inference::ModelInferResponse* r) override {
    grpc::ServerUnaryReactor* reactor = c->DefaultReactor();
    try {
      auto shm_outputs = std::make_shared<ShmOutputs>();
      InferRequest request = grpc_infer_request(*q, control_.shared_memory(), *shm_outputs);
      engine_.infer(request, [reactor, r, shm_outputs](std::exception_ptr error, InferResponse response) {
        if (!error) {
          try {
            fill_grpc_response(std::move(response), *shm_outputs, *r);
          } catch (...) {
            error = std::current_exception();
          }
        }
        reactor->Finish(error ? to_status(error) : grpc::Status::OK);
      });
    } catch (...) {
      reactor->Finish(to_status(std::current_exception()));
    }
    return reactor;
  }

  grpc::ServerUnaryReactor* SystemSharedMemoryStatus(grpc::CallbackServerContext* c,
                                                     const inference::SystemSharedMemoryStatusRequest* q,
                                                     inference::SystemSharedMemoryStatusResponse* r) override {
    return answer(c, [&] {
      for (const auto& region : control_.shared_memory().status(q->name())) {
        auto& s = (*r->mutable_regions())[region->name()];
        s.set_name(region->name());
        s.set_key(region->key());
        s.set_offset(region->offset());
        s.set_byte_size(region->byte_size());
      }
    });
  }
  grpc::ServerUnaryReactor* SystemSharedMemoryRegister(grpc::CallbackServerContext* c,
                                                       const inference::SystemSharedMemoryRegisterRequest* q,
                                                       inference::SystemSharedMemoryRegisterResponse*) override {
    return answer(c, [&] { control_.shared_memory().register_region(q->name(), q->key(), q->offset(), q->byte_size()); });
  }
  grpc::ServerUnaryReactor* SystemSharedMemoryUnregister(grpc::CallbackServerContext* c,
                                                         const inference::SystemSharedMemoryUnregisterRequest* q,
                                                         inference::SystemSharedMemoryUnregisterResponse*) override {
    return answer(c, [&] { control_.shared_memory().unregister(q->name()); });
  }
  grpc::ServerUnaryReactor* CudaSharedMemoryStatus(grpc::CallbackServerContext* c,
                                                   const inference::CudaSharedMemoryStatusRequest*,
                                                   inference::CudaSharedMemoryStatusResponse*) override {
    return not_served(c, kCudaSharedMemory);
  }
  grpc::ServerUnaryReactor* CudaSharedMemoryRegister(grpc::CallbackServerContext* c,
                                                     const inference::CudaSharedMemoryRegisterRequest*,
                                                     inference::CudaSharedMemoryRegisterResponse*) override {
    return not_served(c, kCudaSharedMemory);
  }
  grpc::ServerUnaryReactor* CudaSharedMemoryUnregister(grpc::CallbackServerContext* c,
                                                       const inference::CudaSharedMemoryUnregisterRequest*,
                                                       inference::CudaSharedMemoryUnregisterResponse*) override {
    return not_served(c, kCudaSharedMemory);
  }
  grpc::ServerUnaryReactor* TraceSetting(grpc::CallbackServerContext* c, const inference::TraceSettingRequest*,
                                         inference::TraceSettingResponse*) override {
    return not_served(c, "the trace extension");
  }
  grpc::ServerUnaryReactor* LogSettings(grpc::CallbackServerContext* c, const inference::LogSettingsRequest*,
                                        inference::LogSettingsResponse*) override {
    return not_served(c, "the logging extension");
  }

 private:
  ModelControl& control_;
  Engine& engine_;
};

GrpcFrontEnd::GrpcFrontEnd(ModelControl& control, const std::string& host, int port, int max_message_bytes)
    : service_(std::make_unique<Service>(control)) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  const std::string address = host.find(':') != std::string::npos ? fmt::format("[{}]:{}", host, port)
                                                                   : fmt::format("{}:{}", host, port);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port_);
  builder.SetMaxReceiveMessageSize(max_message_bytes);
  builder.SetMaxSendMessageSize(max_message_bytes);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  ATOLL_CHECK(server_ != nullptr && port_ > 0, kIo, "cannot listen for gRPC on {}", address);
  server_->GetHealthCheckService()->SetServingStatus(true);
}

GrpcFrontEnd::~GrpcFrontEnd() {
  shutdown();
}

void GrpcFrontEnd::shutdown() {
  if (!server_) return;
  server_->GetHealthCheckService()->SetServingStatus(false);
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  server_->Wait();
  server_.reset();
}

}  // namespace atl::serve
