#pragma once
// The CPU backend: fp32 reference implementation of every compiled kernel, the numerical oracle
// the other backends are checked against. Threads through OpenMP; matrix products through Eigen.
#include <memory>

#include "backends/backend.h"

namespace atl {

std::unique_ptr<Backend> make_cpu_backend();

}  // namespace atl
