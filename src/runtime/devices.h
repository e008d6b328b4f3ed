#pragma once
// Picks and creates a backend by name. "auto" is the best device present: the GPU when the
// CUDA backend is built and a device answers, else the CPU.
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace atl {

std::vector<std::string> available_devices();
// Resolves "auto"; returns the device name and, when falling back, why in `note`.
std::string resolve_device(const std::string& requested, std::string* note = nullptr);
std::unique_ptr<Backend> make_backend(const std::string& device);

}  // namespace atl
