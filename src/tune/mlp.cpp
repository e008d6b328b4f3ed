#include "tune/mlp.h"

#include <cmath>

namespace atl::tune {

namespace {

constexpr double kBeta1 = 0.9, kBeta2 = 0.999, kEps = 1e-8;

template <typename T>
void adam(T& param, T& m, T& v, const T& grad, double lr, double c1, double c2) {
  m = kBeta1 * m + (1 - kBeta1) * grad;
  v = kBeta2 * v + (1 - kBeta2) * grad.cwiseProduct(grad);
  param -= (lr * (m / c1).array() / ((v / c2).array().sqrt() + kEps)).matrix();
}

}  // namespace

Mlp::Mlp(int in, int hidden, int out, double out_scale, Rng& rng) {
  const std::array<int, kLayers + 1> dims = {in, hidden, hidden, out};
  for (int l = 0; l < kLayers; ++l) {
    const double scale = (l == kLayers - 1 ? out_scale : 1.0) / std::sqrt(static_cast<double>(dims[l]));
    w_[l] = Eigen::MatrixXd::NullaryExpr(dims[l + 1], dims[l], [&] { return scale * rng.normal(); });
    b_[l] = Eigen::VectorXd::Zero(dims[l + 1]);
    w_m_[l] = w_v_[l] = Eigen::MatrixXd::Zero(dims[l + 1], dims[l]);
    b_m_[l] = b_v_[l] = Eigen::VectorXd::Zero(dims[l + 1]);
  }
}

Eigen::MatrixXd Mlp::forward(const Eigen::MatrixXd& x) {
  Eigen::MatrixXd h = x;
  for (int l = 0; l < kLayers; ++l) {
    inputs_[l] = h;
    h = (w_[l] * h).colwise() + b_[l];
    if (l < kLayers - 1) h = h.array().tanh().matrix();
  }
  return h;
}

void Mlp::train_step(const Eigen::MatrixXd& d_out, double learning_rate) {
  std::array<Eigen::MatrixXd, kLayers> dw;
  std::array<Eigen::VectorXd, kLayers> db;
  Eigen::MatrixXd d = d_out;
  for (int l = kLayers - 1; l >= 0; --l) {
    dw[l] = d * inputs_[l].transpose();
    db[l] = d.rowwise().sum();
    if (l > 0) {
      // inputs_[l] is tanh of the previous layer: tanh' = 1 - tanh^2.
      d = (w_[l].transpose() * d).cwiseProduct((1.0 - inputs_[l].array().square()).matrix());
    }
  }
  ++adam_steps_;
  const double c1 = 1 - std::pow(kBeta1, adam_steps_), c2 = 1 - std::pow(kBeta2, adam_steps_);
  for (int l = 0; l < kLayers; ++l) {
    adam(w_[l], w_m_[l], w_v_[l], dw[l], learning_rate, c1, c2);
    adam(b_[l], b_m_[l], b_v_[l], db[l], learning_rate, c1, c2);
  }
}

}  // namespace atl::tune
