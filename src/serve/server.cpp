#include "serve/server.h"

#include <fmt/core.h>

#include <cstdio>

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "core/text.h"

namespace atl::serve {

Server::Server(const ServeOptions& options) : options_(options) {
  ATOLL_CHECK(options.max_request_bytes >= 1024 && options.max_request_bytes <= std::numeric_limits<int>::max(),
              kInvalidArgument, "--max-request-bytes must be 1024..{} (got {})", std::numeric_limits<int>::max(),
              options.max_request_bytes);
  for (const std::string& flag : options.models) flag_specs_.push_back(model_from_flag(flag));
  if (options.repository.empty() && flag_specs_.empty()) flag_specs_.push_back(default_model_spec());
  engine_ = std::make_unique<Engine>(options.engine);
  for (const ModelSpec& spec : flag_specs_) engine_->load(spec);
  if (!options.repository.empty()) {
    for (const std::string& name : list_repository(options.repository)) {
      try {
        engine_->load(read_model_config(options.repository, name));
      } catch (const Error& e) {
        fmt::print(stderr, "atoll serve: model '{}' is unavailable: {}\n", printable(name), printable(e.message()));
        engine_->mark_unavailable(name, e.message());
      }
    }
  }
  grpc_ = std::make_unique<GrpcFrontEnd>(*this, options.host, options.grpc_port,
                                         static_cast<int>(options.max_request_bytes));
  http_ = std::make_unique<HttpFrontEnd>(*this, options.host, options.http_port,
                                         static_cast<size_t>(options.max_request_bytes), options.http_threads);
  metrics_ = std::make_unique<MetricsFrontEnd>(*engine_, options.host, options.metrics_port);
}

Server::~Server() {
  shutdown();
}

void Server::load_model(const std::string& name) {
  std::optional<ModelSpec> spec;
  {
    std::lock_guard lock(specs_mutex_);
    const auto it = std::find_if(flag_specs_.begin(), flag_specs_.end(), [&](const ModelSpec& s) { return s.name == name; });
    if (it != flag_specs_.end()) spec = *it;
  }
  if (!spec) {
    ATOLL_CHECK(!options_.repository.empty(), kNotFound, "model '{}' is not in any repository (none was given)",
                printable(name));
    spec = read_model_config(options_.repository, name);
  }
  engine_->load(*spec);
}

void Server::unload_model(const std::string& name) {
  engine_->unload(name);
}

void Server::shutdown() {
  if (!engine_) return;
  engine_->shutdown();
  if (grpc_) grpc_->shutdown();
  if (http_) http_->shutdown();
  if (metrics_) metrics_->shutdown();
}

}  // namespace atl::serve
