// AutoScratch-RL: PPO (Schulman et al., 2017) with the clipped objective and GAE. The state is
// the residency bit vector, an action promotes one non-resident slice or does nothing (N + 1
// choices; resident slices are masked out, since promoting one again would change nothing), the
// reward is the drop in cost. Episodes start with nothing resident and end at the no-op or when
// every slice is resident. The answer is the best config any episode reached (Search tracks it).
#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <numeric>

#include "tune/mlp.h"
#include "tune/tuner.h"

namespace atl::tune {

namespace {

constexpr int kHidden = 64;
constexpr double kGamma = 1.0;  // undiscounted: an episode's return is its whole cost drop
constexpr double kLambda = 0.95;
constexpr double kClip = 0.2;
constexpr double kEntropy = 0.01;
constexpr double kLearningRate = 3e-3;
constexpr int kEpochs = 4;
constexpr int kMinibatch = 64;
constexpr size_t kStepsPerUpdate = 128;  // transitions of whole episodes before each update
constexpr double kMaskedLogit = -1e30;

struct Transition {
  Residency state;
  int action = 0;
  double logp = 0;
  double value = 0;
  double reward = 0;
  bool terminal = false;
  double advantage = 0;
  double ret = 0;
};

Eigen::VectorXd to_vector(const Residency& r) {
  Eigen::VectorXd v(static_cast<Eigen::Index>(r.size()));
  for (size_t i = 0; i < r.size(); ++i) v(static_cast<Eigen::Index>(i)) = r[i] ? 1.0 : 0.0;
  return v;
}

// Softmax over the actions allowed in `state` (resident slices get probability 0).
Eigen::VectorXd masked_softmax(Eigen::VectorXd logits, const Residency& state) {
  for (size_t i = 0; i < state.size(); ++i) {
    if (state[i]) logits(static_cast<Eigen::Index>(i)) = kMaskedLogit;
  }
  const Eigen::ArrayXd e = (logits.array() - logits.maxCoeff()).exp();
  return (e / e.sum()).matrix();
}

class Ppo {
 public:
  explicit Ppo(Search& s)
      : s_(s),
        n_(static_cast<int>(s.slices())),
        actor_(n_, kHidden, n_ + 1, 0.01, s.rng()),
        critic_(n_, kHidden, 1, 1.0, s.rng()),
        scale_(std::abs(s.none_cost()) > 0 ? std::abs(s.none_cost()) : 1.0) {}

  void run() {
    std::vector<Transition> batch;
    while (!s_.done()) {
      if (!episode(batch)) return;  // the budget ran out mid-episode: nothing left to learn for
      if (batch.size() >= kStepsPerUpdate) {
        update(batch);
        batch.clear();
      }
    }
  }

 private:
  int sample(const Eigen::VectorXd& p) {
    double u = s_.rng().uniform();
    for (int a = 0; a < n_; ++a) {
      u -= p(a);
      if (u < 0) return a;
    }
    return n_;  // the no-op, also where rounding leaves u
  }

  // Appends one episode's transitions; false when the budget ran out first.
  bool episode(std::vector<Transition>& batch) {
    Residency state(static_cast<size_t>(n_), false);
    double cost = s_.none_cost();
    for (int t = 0; t < n_; ++t) {
      if (s_.done()) return false;
      const Eigen::VectorXd x = to_vector(state);
      const Eigen::VectorXd p = masked_softmax(actor_.forward(x).col(0), state);
      Transition tr;
      tr.state = state;
      tr.action = sample(p);
      tr.logp = std::log(p(tr.action));
      tr.value = critic_.forward(x)(0, 0);
      if (tr.action == n_) {
        tr.terminal = true;
        batch.push_back(std::move(tr));
        return true;
      }
      state[static_cast<size_t>(tr.action)] = true;
      const double next = s_.evaluate(state);
      tr.reward = (cost - next) / scale_;
      tr.terminal = t == n_ - 1;
      cost = next;
      batch.push_back(std::move(tr));
    }
    return true;
  }

  // GAE over whole episodes, then advantages normalized over the batch.
  static void advantages(std::vector<Transition>& batch) {
    double next_value = 0, next_adv = 0;
    for (auto it = batch.rbegin(); it != batch.rend(); ++it) {
      if (it->terminal) next_value = next_adv = 0;
      const double delta = it->reward + kGamma * next_value - it->value;
      it->advantage = delta + kGamma * kLambda * next_adv;
      it->ret = it->advantage + it->value;
      next_value = it->value;
      next_adv = it->advantage;
    }
    Eigen::ArrayXd a(static_cast<Eigen::Index>(batch.size()));
    for (size_t i = 0; i < batch.size(); ++i) a(static_cast<Eigen::Index>(i)) = batch[i].advantage;
    const double mean = a.mean(), sd = std::sqrt((a - mean).square().mean());
    for (Transition& t : batch) t.advantage = (t.advantage - mean) / (sd + 1e-8);
  }

  void update(std::vector<Transition>& batch) {
    advantages(batch);
    std::vector<size_t> order(batch.size());
    std::iota(order.begin(), order.end(), size_t{0});
    for (int epoch = 0; epoch < kEpochs; ++epoch) {
      for (size_t i = order.size(); i > 1; --i) {
        std::swap(order[i - 1], order[static_cast<size_t>(uniform_index(s_.rng(), static_cast<int64_t>(i)))]);
      }
      for (size_t first = 0; first < order.size(); first += kMinibatch) {
        const size_t end = std::min(order.size(), first + kMinibatch);
        minibatch(batch, std::vector<size_t>(order.begin() + first, order.begin() + end));
      }
    }
  }

  // One gradient step of the clipped surrogate with an entropy bonus, and of the critic's squared
  // error, on the transitions `idx`.
  void minibatch(const std::vector<Transition>& batch, const std::vector<size_t>& idx) {
    const auto m = static_cast<Eigen::Index>(idx.size());
    Eigen::MatrixXd x(n_, m);
    for (Eigen::Index c = 0; c < m; ++c) x.col(c) = to_vector(batch[idx[c]].state);
    const Eigen::MatrixXd logits = actor_.forward(x);
    const Eigen::MatrixXd values = critic_.forward(x);
    Eigen::MatrixXd d_logits = Eigen::MatrixXd::Zero(n_ + 1, m);
    Eigen::MatrixXd d_values(1, m);
    for (Eigen::Index c = 0; c < m; ++c) {
      const Transition& t = batch[idx[c]];
      const Eigen::VectorXd p = masked_softmax(logits.col(c), t.state);
      const double ratio = std::exp(std::log(p(t.action)) - t.logp);
      // The clipped term has no gradient; where it is the minimum, the sample stops pushing.
      if (ratio * t.advantage <= std::clamp(ratio, 1 - kClip, 1 + kClip) * t.advantage) {
        Eigen::VectorXd g = -p;
        g(t.action) += 1.0;
        d_logits.col(c) -= (ratio * t.advantage / m) * g;
      }
      double entropy = 0;
      for (Eigen::Index j = 0; j <= n_; ++j) entropy -= p(j) > 0 ? p(j) * std::log(p(j)) : 0.0;
      for (Eigen::Index j = 0; j <= n_; ++j) {
        if (p(j) > 0) d_logits(j, c) += kEntropy * p(j) * (std::log(p(j)) + entropy) / m;
      }
      d_values(0, c) = (values(0, c) - t.ret) / m;
    }
    actor_.train_step(d_logits, kLearningRate);
    critic_.train_step(d_values, kLearningRate);
  }

  Search& s_;
  int n_;
  Mlp actor_, critic_;
  double scale_;
};

}  // namespace

void run_ppo(Search& s) {
  Ppo(s).run();
}

}  // namespace atl::tune
