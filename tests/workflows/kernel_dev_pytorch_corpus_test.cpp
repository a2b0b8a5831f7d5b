// PyTorch as people and models write it, through Understand (CPU): each entry of
// fixtures/kernel_dev/pytorch_corpus.yaml is one test. A decided op must have the tier, inputs and
// parameters the entry names, and compute what its independent reference (kernel-dev's expression
// language) computes at random points, with Tier-2 gradients that match central differences; an
// input outside the subset must be refused at the line and column the entry names, saying what is
// supported instead.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "workflows/kernel_dev/profile.h"
#include "workflows/kernel_dev/tier2_derive.h"

#include "kernel_dev_family.h"

namespace kd = liger::kernel_dev;

namespace {

using liger::testing::family::analyse;

struct Entry {
  std::string name, source;
  int tier = 0;
  std::vector<std::string> inputs;
  // inputs[].split per input ("x.chunk(2, dim=-1)[0]"), "" for an input passed on its own; empty
  // when no input is a part.
  std::vector<std::string> splits;
  std::vector<std::string> learnable;  // "name:shape:init"
  std::map<std::string, double> module;
  std::string reference;
  bool positive = false;
  bool refused = false;
  std::string says, where, supported;
  // Translated, but a later stage cannot generate it yet: what the translation holds and why.
  std::string translated, limit;
};

std::vector<Entry> load_corpus() {
  const auto path = std::filesystem::path(LIGER_SOURCE_DIR) / "tests/workflows/fixtures/kernel_dev/pytorch_corpus.yaml";
  std::vector<Entry> out;
  for (const auto& node : YAML::LoadFile(path.string())) {
    Entry e;
    e.name = node["name"].as<std::string>();
    e.source = node["source"].as<std::string>();
    if (const auto r = node["refused"]) {
      e.refused = true;
      e.says = r["says"].as<std::string>();
      e.where = r["where"].as<std::string>();
      e.supported = r["supported"].as<std::string>();
    } else {
      e.tier = node["tier"].as<int>();
      e.inputs = node["inputs"].as<std::vector<std::string>>();
      if (node["splits"]) e.splits = node["splits"].as<std::vector<std::string>>();
      if (node["learnable"]) e.learnable = node["learnable"].as<std::vector<std::string>>();
      if (node["module"]) e.module = node["module"].as<std::map<std::string, double>>();
      if (node["limit"]) {
        e.limit = node["limit"].as<std::string>();
        e.translated = node["translated"].as<std::string>();
      } else {
        e.reference = node["reference"].as<std::string>();
      }
      e.positive = node["positive"] && node["positive"].as<bool>();
    }
    out.push_back(e);
  }
  return out;
}

std::string undecided(const kd::KernelProfile& p) {
  return liger::testing::family::undecided_text(p) + "resolved_from: " + p.resolved_from + "\n";
}

std::string format_number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

std::vector<std::string> learnable_of(const kd::KernelProfile& p) {
  std::vector<std::string> out;
  for (const auto& l : p.learnable_parameters) out.push_back(l.name + ":" + l.shape + ":" + format_number(l.value));
  return out;
}

double relative(double a, double b) { return std::fabs(a - b) / (1.0 + std::fabs(b)); }

// Tier 1: the op and its reference at random points of every input, parameters at their defaults.
void expect_same_elementwise(const kd::KernelProfile& p, const kd::KernelProfile& ref, bool positive) {
  const kd::Program op = p.program(), r = ref.program();
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> uniform(positive ? 0.05 : -3.0, 3.0);
  for (int trial = 0; trial < 64; ++trial) {
    kd::Environment env, ref_env;
    for (const auto& param : op.params) env[param.name] = param.init;
    for (const auto& param : r.params) ref_env[param.name] = param.init;
    for (const auto& input : op.inputs) env[input] = ref_env[input] = uniform(rng);
    const double got = kd::eval_f64(op.expression, env), want = kd::eval_f64(r.expression, ref_env);
    ASSERT_LT(relative(got, want), 1e-9) << "at trial " << trial << ": " << got << " vs " << want << " (reference "
                                         << ref.resolved_from << ")";
  }
}

// Tier 2: the op and its reference on random rows with random learnable weights; the op's dx and
// weight gradients against central differences of its own forward.
void expect_same_rows(const kd::KernelProfile& p, const kd::KernelProfile& ref, bool positive) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> uniform(positive ? 0.05 : -2.0, 2.0);
  for (int trial = 0; trial < 4; ++trial) {
    const std::size_t cols = 3 + 2 * static_cast<std::size_t>(trial);
    std::vector<double> x(cols);
    for (auto& v : x) v = uniform(rng);
    kd::ColumnValues w;
    for (const auto& l : p.learnable_parameters)
      for (std::size_t j = 0; j < cols; ++j) w[l.name].push_back(0.5 + 0.5 * uniform(rng));
    // The input tensors after the first: a row each, passed beside the weights.
    for (std::size_t i = 1; i < p.inputs.size(); ++i)
      for (std::size_t j = 0; j < cols; ++j) w[p.inputs[i].name].push_back(uniform(rng));
    const auto y = kd::row_forward_f64(p, x, {}, w);
    const auto want = kd::row_forward_f64(ref, x, {}, w);
    ASSERT_EQ(y.size(), want.size());
    for (std::size_t j = 0; j < y.size(); ++j)
      ASSERT_LT(relative(y[j], want[j]), 1e-9) << "column " << j << " of " << cols << ": " << y[j] << " vs " << want[j];
    std::vector<double> dy(y.size());
    for (auto& v : dy) v = uniform(rng);
    auto loss = [&](const std::vector<double>& at, const kd::ColumnValues& weights) {
      const auto out = kd::row_forward_f64(p, at, {}, weights);
      double s = 0;
      for (std::size_t j = 0; j < out.size(); ++j) s += dy[j] * out[j];
      return s;
    };
    const double h = 1e-6;
    const auto dx = kd::row_backward_f64(p, x, dy, {}, w);
    ASSERT_EQ(dx.size(), cols);
    // detach() makes the gradient differ from the derivative of the values on purpose (PyTorch's
    // `x - x.max(...).values.detach()`): finite differences cannot check it, the reference's own
    // backward (written with detach as well) does.
    if (p.row_program->output.find("detach(") != std::string::npos) {
      const auto want_dx = kd::row_backward_f64(ref, x, dy, {}, w);
      for (std::size_t j = 0; j < cols; ++j) EXPECT_LT(relative(dx[j], want_dx[j]), 1e-9) << "dx column " << j;
      continue;
    }
    const auto dw = kd::row_param_gradients_f64(p, x, dy, {}, w);
    const auto dothers = kd::row_input_gradients_f64(p, x, dy, {}, w);
    for (std::size_t j = 0; j < cols; ++j) {
      auto a = x, b = x;
      a[j] += h;
      b[j] -= h;
      EXPECT_LT(relative(dx[j], (loss(a, w) - loss(b, w)) / (2 * h)), 1e-5) << "dx column " << j;
      for (const auto& l : p.learnable_parameters) {
        auto wa = w, wb = w;
        wa[l.name][j] += h;
        wb[l.name][j] -= h;
        EXPECT_LT(relative(dw.at(l.name)[j], (loss(x, wa) - loss(x, wb)) / (2 * h)), 1e-5) << "d" << l.name << " column " << j;
      }
      for (std::size_t i = 1; i < p.inputs.size(); ++i) {
        const std::string& name = p.inputs[i].name;
        auto wa = w, wb = w;
        wa[name][j] += h;
        wb[name][j] -= h;
        EXPECT_LT(relative(dothers.at(name)[j], (loss(x, wa) - loss(x, wb)) / (2 * h)), 1e-5) << "d" << name << " column " << j;
      }
    }
  }
}

// gtest names a failing entry by this instead of dumping its bytes.
void PrintTo(const Entry& e, std::ostream* os) { *os << e.name; }

class PyTorchCorpus : public ::testing::TestWithParam<Entry> {};

TEST_P(PyTorchCorpus, IsUnderstood) {
  const Entry& e = GetParam();
  SCOPED_TRACE(e.source);
  const kd::KernelProfile p = analyse(e.source);
  if (e.refused) {
    EXPECT_FALSE(p.complete());
    EXPECT_NE(p.resolved_from.find(e.says), std::string::npos) << p.resolved_from;
    EXPECT_NE(p.resolved_from.find("(" + e.where + ":"), std::string::npos) << p.resolved_from;
    EXPECT_NE(p.resolved_from.find(e.supported), std::string::npos) << p.resolved_from;
    return;
  }
  if (e.limit.empty()) ASSERT_TRUE(p.complete()) << undecided(p);
  EXPECT_EQ(p.source_kind, "pytorch");
  EXPECT_EQ(p.tier, e.tier) << p.resolved_from;
  std::vector<std::string> inputs;
  for (const auto& i : p.inputs) inputs.push_back(i.name);
  EXPECT_EQ(inputs, e.inputs) << p.resolved_from;
  // No input becomes a part of an argument unless the entry says so.
  std::vector<std::string> splits;
  for (const auto& i : p.inputs) splits.push_back(i.split);
  if (e.splits.empty())
    EXPECT_TRUE(std::all_of(splits.begin(), splits.end(), [](const std::string& s) { return s.empty(); })) << p.resolved_from;
  else
    EXPECT_EQ(splits, e.splits) << p.resolved_from;
  // The output and its gradient never take an input's name.
  ASSERT_EQ(p.outputs.size(), 1u);
  for (const auto& i : inputs) {
    EXPECT_NE(p.outputs[0].name, i);
    EXPECT_NE("d" + p.outputs[0].name, i);
  }
  EXPECT_EQ(learnable_of(p), e.learnable) << p.resolved_from;
  std::map<std::string, double> module;
  for (const auto& m : p.module_parameters) module[m.name] = m.value;
  ASSERT_EQ(module.size(), e.module.size()) << p.resolved_from;
  for (const auto& [name, value] : e.module) {
    ASSERT_TRUE(module.count(name)) << name << " in " << p.resolved_from;
    EXPECT_DOUBLE_EQ(module.at(name), value) << name;
  }
  if (!e.limit.empty()) {
    EXPECT_FALSE(p.complete());
    EXPECT_NE(p.resolved_from.find("translated to '"), std::string::npos) << p.resolved_from;
    EXPECT_NE(p.resolved_from.find(e.translated), std::string::npos) << p.resolved_from;
    EXPECT_NE(undecided(p).find(e.limit), std::string::npos) << undecided(p);
    return;
  }
  const kd::KernelProfile ref = analyse(e.reference);
  ASSERT_TRUE(ref.complete()) << "the reference is not understood: " << undecided(ref);
  ASSERT_EQ(ref.tier, e.tier) << ref.resolved_from;
  if (e.tier == 1) expect_same_elementwise(p, ref, e.positive);
  else expect_same_rows(p, ref, e.positive);
}

INSTANTIATE_TEST_SUITE_P(Fixture, PyTorchCorpus, ::testing::ValuesIn(load_corpus()),
                         [](const ::testing::TestParamInfo<Entry>& info) { return info.param.name; });

// The corpus is what it claims: enough entries, every one named once, refusals among them.
TEST(PyTorchCorpusFile, HasDistinctEntriesAndRefusals) {
  const auto corpus = load_corpus();
  EXPECT_GE(corpus.size(), 40u);
  std::set<std::string> names;
  std::size_t refused = 0;
  for (const auto& e : corpus) {
    EXPECT_TRUE(names.insert(e.name).second) << e.name;
    refused += e.refused ? 1 : 0;
  }
  EXPECT_GE(refused, 5u);
  EXPECT_LT(refused, corpus.size() / 2);
}

}  // namespace
