#include "op_case_walk.h"

#include <fmt/format.h>

#include "../backends/op_cases.h"

namespace atl::gputest {

void for_each_launched_kernel(Backend& backend, uint64_t seed,
                              const std::function<void(CudaInstance&, int, const Kernel&, const std::string&)>& check) {
  for (const opcases::OpCase& c : opcases::all_op_cases()) {
    const opcases::OpCaseData data = c.build(DType::kF16, seed);
    std::unique_ptr<Instance> inst;
    try {
      inst = backend.load(data.program, data.weights);
    } catch (const Error& e) {
      if (e.code() == ErrorCode::kUnsupported) continue;
      throw;
    }
    CudaInstance& gpu = as_cuda(*inst);
    for (size_t i = 0; i < data.inputs.size(); ++i) inst->set_input(static_cast<int>(i), data.inputs[i]);
    inst->run();  // uploads the inputs
    for (size_t k = 0; k < data.program.kernels.size(); ++k) {
      const int kernel = static_cast<int>(k);
      const Kernel& program_kernel = data.program.kernels[k];
      const int choices = std::max(1, gpu.gemm_choice_count(kernel));
      for (int choice = 0; choice < choices; ++choice) {
        if (gpu.gemm_choice_count(kernel) > 0) gpu.select_gemm_choice(kernel, choice);
        gpu.launch(kernel, gpu.stream(), gpu.preempt_flag());
        check(gpu, kernel, program_kernel,
              fmt::format("{} kernel {} ({}, {})", c.name, k, op_name(program_kernel.op), gpu.gemm_choice(kernel)));
      }
    }
  }
}

}  // namespace atl::gputest
