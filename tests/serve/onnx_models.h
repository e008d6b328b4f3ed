#pragma once
// ONNX models for the server's tests, built with the ONNX tests' ModelBuilder and written where a
// repository or --model finds them.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "../onnx/onnx_builder.h"

namespace atl::serve::testing_onnx {

namespace fs = std::filesystem;

// A fresh seed each run, printed so that a failure can be replayed.
inline std::mt19937_64 fresh_rng() {
  const uint64_t seed = std::random_device{}();
  std::cout << "seed " << seed << "\n";
  return std::mt19937_64(seed);
}

inline std::vector<float> uniform(size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// Conv -> Relu -> GlobalAveragePool -> Flatten -> Gemm with random weights and a symbolic batch:
// input "x" [batch, 3, 8, 8], output "logits" [batch, 5].
inline onnxtest::ModelBuilder random_cnn(std::mt19937_64& rng) {
  onnxtest::ModelBuilder m;
  m.input("x", {-1, 3, 8, 8}).output("logits");
  m.initializer("w", {4, 3, 3, 3}, uniform(108, rng));
  m.initializer("b", {4}, uniform(4, rng));
  m.initializer("fc_w", {5, 4}, uniform(20, rng));
  m.initializer("fc_b", {5}, uniform(5, rng));
  onnxtest::ModelBuilder::ints_attr(m.node("Conv", {"x", "w", "b"}, {"c"}), "pads", {1, 1, 1, 1});
  m.node("Relu", {"c"}, {"r"});
  m.node("GlobalAveragePool", {"r"}, {"p"});
  m.node("Flatten", {"p"}, {"f"});
  onnxtest::ModelBuilder::int_attr(m.node("Gemm", {"f", "fc_w", "fc_b"}, {"logits"}), "transB", 1);
  return m;
}

inline void write_file(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

// A fresh folder under the test's temporary directory.
inline fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

}  // namespace atl::serve::testing_onnx
