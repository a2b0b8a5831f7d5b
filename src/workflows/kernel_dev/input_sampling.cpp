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

namespace {

// One row per distribution: the map of a standard-normal z in fp64 and as C++ / PyTorch source
// text ($z stands for the draw), the ends the reference test checks, a description.
struct SampleKind {
  const char* name;
  double (*value)(double z);
  const char* cpp;
  const char* python;
  const char* extremes;
  const char* description;
};

// The order is the preference: the widest range that works wins a tie.
const std::vector<SampleKind>& table() {
  static const std::vector<SampleKind> kinds = {
      {"normal", [](double z) { return z; }, "$z", "$z", "-80.0, -1e-30, 0.0, 80.0", " ~ N(0, s): the whole line"},
      {"positive", [](double z) { return 0.1 + std::fabs(z); }, "(0.1 + std::fabs($z))", "(0.1 + $z.abs())",
       "1e-6, 0.1, 1.0, 80.0", " = 0.1 + |z|: positive"},
      {"symmetric_unit", [](double z) { return 0.95 * std::tanh(z); }, "(0.95 * std::tanh($z))",
       "(0.95 * torch.tanh($z))", "-0.999, -1e-30, 0.0, 0.999", " = 0.95 tanh(z): inside (-1, 1)"},
      {"unit", [](double z) { return 0.05 + 0.9 / (1.0 + std::exp(-z)); }, "(0.05 + 0.9 / (1.0 + std::exp(-($z))))",
       "(0.05 + 0.9 * torch.sigmoid($z))", "1e-6, 0.05, 0.95, 1.0 - 1e-6", " = 0.05 + 0.9 sigmoid(z): inside (0, 1)"},
      {"above_one", [](double z) { return 1.1 + std::fabs(z); }, "(1.1 + std::fabs($z))", "(1.1 + $z.abs())",
       "1.000001, 1.1, 2.0, 80.0", " = 1.1 + |z|: above 1"},
  };
  return kinds;
}

// "" is normal (a profile written before the field existed).
const SampleKind& find_kind(const std::string& kind) {
  for (const auto& k : table())
    if (k.name == kind || (kind.empty() && std::string(k.name) == "normal")) return k;
  throw std::invalid_argument("unknown input sample '" + kind + "'");
}

std::string with_draw(const char* pattern, const std::string& z) {
  std::string out = pattern;
  for (std::size_t at = out.find("$z"); at != std::string::npos; at = out.find("$z", at + z.size())) out.replace(at, 2, z);
  return out;
}

}  // namespace

const std::vector<std::string>& sample_kinds() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& k : table()) out.push_back(k.name);
    return out;
  }();
  return names;
}

bool is_sample_kind(const std::string& kind) {
  const auto& kinds = sample_kinds();
  return std::find(kinds.begin(), kinds.end(), kind) != kinds.end();
}

double sample_value(const std::string& kind, double z) { return find_kind(kind).value(z); }
std::string sample_cpp(const std::string& kind, const std::string& z) { return with_draw(find_kind(kind).cpp, z); }
std::string sample_python(const std::string& kind, const std::string& z) { return with_draw(find_kind(kind).python, z); }
std::string sample_extremes_cpp(const std::string& kind) { return find_kind(kind).extremes; }
std::string sample_description(const std::string& kind, const std::string& input) {
  return input + find_kind(kind).description;
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
