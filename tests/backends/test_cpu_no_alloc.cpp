// Instance::run() on the CPU backend allocates nothing: every heap allocation in the process is
// counted while a run is in flight. The counter interposes glibc's allocator entry points (an
// executable's definitions take precedence over libc's, also for calls from shared libraries),
// so the test exists only on glibc builds without a sanitizer runtime of its own.
#include <cstdlib>

#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>

#include "backends/cpu/cpu_backend.h"
#include "compile/compiler.h"
#include "models/zoo.h"
#include "op_cases.h"

extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t count, size_t size);
void* __libc_realloc(void* p, size_t size);
void* __libc_memalign(size_t alignment, size_t size);
}

namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_allocations{0};

void count() {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

extern "C" {
void* malloc(size_t size) {
  count();
  return __libc_malloc(size);
}
void* calloc(size_t count_, size_t size) {
  count();
  return __libc_calloc(count_, size);
}
void* realloc(void* p, size_t size) {
  count();
  return __libc_realloc(p, size);
}
void* aligned_alloc(size_t alignment, size_t size) {
  count();
  return __libc_memalign(alignment, size);
}
void* memalign(size_t alignment, size_t size) {
  count();
  return __libc_memalign(alignment, size);
}
int posix_memalign(void** out, size_t alignment, size_t size) {
  count();
  void* p = __libc_memalign(alignment, size);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}
}

namespace atl {
namespace {

// Allocations made by one run(), after a first run that lets the OpenMP runtime set up its threads.
long allocations_in_run(Instance& inst) {
  inst.run();
  g_allocations = 0;
  g_counting = true;
  inst.run();
  g_counting = false;
  return g_allocations.load();
}

TEST(CpuNoAlloc, CounterSeesAllocations) {
  g_allocations = 0;
  g_counting = true;
  void* p = std::malloc(1000);
  auto* q = new std::vector<int>(100);
  g_counting = false;
  std::free(p);
  delete q;
  EXPECT_GE(g_allocations.load(), 3);  // malloc, the vector, its storage
}

long allocations_in_case(const opcases::OpCase& c) {
  const opcases::OpCaseData d = c.build(DType::kF32, 1);
  auto inst = make_cpu_backend()->load(d.program, d.weights);
  for (size_t i = 0; i < d.inputs.size(); ++i) inst->set_input(static_cast<int>(i), d.inputs[i]);
  return allocations_in_run(*inst);
}

TEST(CpuNoAlloc, OpCasesRunWithoutAllocating) {
  for (const opcases::OpCase& c : opcases::all_op_cases()) EXPECT_EQ(allocations_in_case(c), 0) << c.name;
}

// Products large enough that Eigen's packing buffers exceed its stack limit: without the
// workspace they would come from the heap.
TEST(CpuNoAlloc, LargeProductsRunWithoutAllocating) {
  for (opcases::OpCase c : opcases::all_op_cases()) {
    if (c.name == "gemm_relu_wide") {
      c.operands[0].shape = Shape{384, 512};  // x
      c.operands[1].shape = Shape{320, 512};  // w
      c.operands[2].shape = Shape{320};       // bias
    } else if (c.name == "matmul_batched") {
      c.operands[0].shape = Shape{2, 3, 200, 300};
      c.operands[1].shape = Shape{2, 3, 300, 250};
    } else if (c.name == "conv_1x1_bias_residual_relu") {
      c.operands[0].shape = Shape{1, 256, 20, 20};  // x
      c.operands[1].shape = Shape{256, 256, 1, 1};  // w
      c.operands[2].shape = Shape{256};             // bias
      c.operands[3].shape = Shape{1, 256, 20, 20};  // residual
    } else {
      continue;
    }
    EXPECT_EQ(allocations_in_case(c), 0) << c.name;
  }
}

TEST(CpuNoAlloc, ModelsRunWithoutAllocating) {
  for (const char* model : {"tiny_cnn", "tiny_vgg", "tiny_bert"}) {
    ModelOptions opts;
    opts.seq_len = 16;
    auto backend = make_cpu_backend();
    const CompiledModel m = compile_graph(build_model(model, opts), backend->target());
    auto inst = backend->load(m.program, m.weights);
    EXPECT_EQ(allocations_in_run(*inst), 0) << model;
  }
}

}  // namespace
}  // namespace atl

#endif
