#pragma once
// A small fully connected network for PPO: in -> 64 tanh -> 64 tanh -> out (linear), trained
// with Adam on gradients of the output that the caller computes. Columns are samples.
#include <Eigen/Dense>
#include <array>

#include "core/rng.h"

namespace atl::tune {

class Mlp {
 public:
  // Normal(0, 1/fan_in) weights; the last layer scaled by out_scale (a small value keeps a fresh
  // policy close to uniform), zero biases.
  Mlp(int in, int hidden, int out, double out_scale, Rng& rng);
  // Outputs (out x batch) for inputs (in x batch); keeps the activations for backward().
  Eigen::MatrixXd forward(const Eigen::MatrixXd& x);
  // Gradients of the loss for the outputs of the last forward() (out x batch), then one Adam step.
  void train_step(const Eigen::MatrixXd& d_out, double learning_rate);

 private:
  static constexpr int kLayers = 3;
  std::array<Eigen::MatrixXd, kLayers> w_, w_m_, w_v_;
  std::array<Eigen::VectorXd, kLayers> b_, b_m_, b_v_;
  std::array<Eigen::MatrixXd, kLayers> inputs_;  // the input of each layer in the last forward()
  int adam_steps_ = 0;
};

}  // namespace atl::tune
