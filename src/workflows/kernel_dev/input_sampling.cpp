// Where a generated op's tests draw each input from (input_sampling.h).
#include "workflows/kernel_dev/input_sampling.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>

namespace liger::kernel_dev {

namespace {

// fp16's largest finite value: a forward or gradient above it overflows the 16-bit GPU tests.
constexpr double kLargestHalf = 65504.0;
// The widest normal the tests draw (the GPU test's); the analysis covers what they will meet.
constexpr double kDrawStddev = 2.0;

}  // namespace

const std::vector<std::string>& sample_kinds() {
  // The order is the preference: the widest range that works wins a tie.
  static const std::vector<std::string> kinds = {"normal", "positive", "symmetric_unit", "unit", "above_one"};
  return kinds;
}

bool is_sample_kind(const std::string& kind) {
  const auto& kinds = sample_kinds();
  return std::find(kinds.begin(), kinds.end(), kind) != kinds.end();
}

double sample_value(const std::string& kind, double z) {
  if (kind == "normal" || kind.empty()) return z;
  if (kind == "positive") return 0.1 + std::fabs(z);
  if (kind == "symmetric_unit") return 0.95 * std::tanh(z);
  if (kind == "unit") return 0.05 + 0.9 / (1.0 + std::exp(-z));
  if (kind == "above_one") return 1.1 + std::fabs(z);
  throw std::invalid_argument("unknown input sample '" + kind + "'");
}

std::string sample_cpp(const std::string& kind, const std::string& z) {
  if (kind == "normal" || kind.empty()) return z;
  if (kind == "positive") return "(0.1 + std::fabs(" + z + "))";
  if (kind == "symmetric_unit") return "(0.95 * std::tanh(" + z + "))";
  if (kind == "unit") return "(0.05 + 0.9 / (1.0 + std::exp(-(" + z + "))))";
  if (kind == "above_one") return "(1.1 + std::fabs(" + z + "))";
  throw std::invalid_argument("unknown input sample '" + kind + "'");
}

std::string sample_python(const std::string& kind, const std::string& z) {
  if (kind == "normal" || kind.empty()) return z;
  if (kind == "positive") return "(0.1 + " + z + ".abs())";
  if (kind == "symmetric_unit") return "(0.95 * torch.tanh(" + z + "))";
  if (kind == "unit") return "(0.05 + 0.9 * torch.sigmoid(" + z + "))";
  if (kind == "above_one") return "(1.1 + " + z + ".abs())";
  throw std::invalid_argument("unknown input sample '" + kind + "'");
}

std::string sample_extremes_cpp(const std::string& kind) {
  if (kind == "normal" || kind.empty()) return "-80.0, -1e-30, 0.0, 80.0";
  if (kind == "positive") return "1e-6, 0.1, 1.0, 80.0";
  if (kind == "symmetric_unit") return "-0.999, -1e-30, 0.0, 0.999";
  if (kind == "unit") return "1e-6, 0.05, 0.95, 1.0 - 1e-6";
  if (kind == "above_one") return "1.000001, 1.1, 2.0, 80.0";
  throw std::invalid_argument("unknown input sample '" + kind + "'");
}

std::string sample_description(const std::string& kind, const std::string& input) {
  if (kind == "normal" || kind.empty()) return input + " ~ N(0, s): the whole line";
  if (kind == "positive") return input + " = 0.1 + |z|: positive";
  if (kind == "symmetric_unit") return input + " = 0.95 tanh(z): inside (-1, 1)";
  if (kind == "unit") return input + " = 0.05 + 0.9 sigmoid(z): inside (0, 1)";
  if (kind == "above_one") return input + " = 1.1 + |z|: above 1";
  throw std::invalid_argument("unknown input sample '" + kind + "'");
}

SampleChoice choose_input_samples(const Expr& forward, const std::vector<Expr>& gradients,
                                  const std::vector<std::string>& inputs, const Environment& fixed, int points,
                                  const std::map<std::string, std::string>& hints) {
  SampleChoice choice;
  for (const auto& in : inputs) {
    const auto hint = hints.find(in);
    choice.kind[in] = hint != hints.end() && is_sample_kind(hint->second) ? hint->second : "normal";
  }
  choice.points = points;
  if (inputs.empty()) return choice;
  std::mt19937_64 rng(20261127);
  std::normal_distribution<double> normal(0.0, kDrawStddev);
  std::vector<std::vector<double>> draws(static_cast<std::size_t>(points), std::vector<double>(inputs.size()));
  for (auto& draw : draws)
    for (auto& z : draw) z = normal(rng);

  auto usable = [](double v) { return std::isfinite(v) && std::fabs(v) <= kLargestHalf; };
  auto failures = [&](const std::map<std::string, std::string>& kinds) {
    int failed = 0;
    Environment env = fixed;
    for (const auto& draw : draws) {
      for (std::size_t i = 0; i < inputs.size(); ++i) env[inputs[i]] = sample_value(kinds.at(inputs[i]), draw[i]);
      bool ok = true;
      try {
        ok = usable(eval_f64(forward, env));
        for (std::size_t g = 0; ok && g < gradients.size(); ++g) ok = usable(eval_f64(gradients[g], env));
      } catch (const std::exception&) {
        ok = false;
      }
      failed += ok ? 0 : 1;
    }
    return failed;
  };

  int current = failures(choice.kind);
  // Each step strictly lowers the failure count; the cap only bounds the work.
  for (std::size_t step = 0; current > 0 && step < inputs.size() * sample_kinds().size(); ++step) {
    int best = current;
    std::string best_input, best_kind;
    for (const auto& in : inputs)
      for (const auto& kind : sample_kinds()) {
        if (kind == choice.kind[in] || hints.count(in)) continue;
        auto trial = choice.kind;
        trial[in] = kind;
        const int n = failures(trial);
        if (n < best) {
          best = n;
          best_input = in;
          best_kind = kind;
        }
      }
    if (best_input.empty()) break;
    choice.kind[best_input] = best_kind;
    current = best;
  }
  choice.failing = current;
  choice.points = points;
  if (current > 0)
    choice.problem = std::to_string(current) + " of " + std::to_string(points) +
                     " random points give a non-finite (or beyond fp16's range) forward or gradient under every "
                     "input distribution tried; the tests will meet such points";
  return choice;
}

}  // namespace liger::kernel_dev
