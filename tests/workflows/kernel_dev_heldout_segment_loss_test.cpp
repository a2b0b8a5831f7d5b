// Held-out inputs for kernel-dev's segment reductions and Tier-3 fused linear + loss (issue 18
// items 3 and 4), read from fixtures/kernel_dev/heldout_segment_fused_linear.json: PyTorch loops,
// torch.split, segment_reduce, index_add_ / scatter_reduce / index_reduce with and without
// include_self, descriptions; cross-entropy with label smoothing, ignore_index, z-loss through a
// named logsumexp, softcapping, KL divergence in both directions, JSD in both beta conventions,
// and the constructs the fused op cannot take (a loss scaled by a tensor, an extra term, a bias, class
// weights, scaled or sliced logits). Each entry is its own check: an input taken with a wrong
// field (a dropped label smoothing, a wrong reduction, an ignored include_self) fails, and so
// does a refusal that does not name the construct and where it is.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "liger/util.h"
#include "workflows/kernel_dev/render.h"

#include "kernel_dev_family.h"

namespace kd = liger::kernel_dev;
namespace fs = std::filesystem;
using liger::testing::family::analyse;
using liger::testing::family::undecided_text;

namespace {

const fs::path kSource = LIGER_SOURCE_DIR;

nlohmann::json corpus() {
  const fs::path path = kSource / "tests/workflows/fixtures/kernel_dev/heldout_segment_fused_linear.json";
  return nlohmann::json::parse(liger::util::read_file(path)).at("inputs");
}

bool looks_like_code(const std::string& text) {
  return text.find("def ") != std::string::npos || text.find("lambda") != std::string::npos ||
         text.find("return ") != std::string::npos;
}

void expect_segment(const kd::KernelProfile& p, const nlohmann::json& want) {
  ASSERT_TRUE(p.segment.has_value()) << undecided_text(p);
  EXPECT_TRUE(p.complete()) << undecided_text(p);
  EXPECT_FALSE(p.fused_linear.has_value());
  EXPECT_EQ(p.segment->reduce, want.at("reduce").get<std::string>());
  EXPECT_EQ(p.segment->index, want.at("index").get<std::string>());
  EXPECT_EQ(p.segment->pooled_dim, want.at("pooled_dim").get<int>());
  EXPECT_EQ(p.segment->empty_segment, want.at("empty_segment").get<std::string>());
}

void expect_fused_linear(const kd::KernelProfile& p, const nlohmann::json& want) {
  ASSERT_TRUE(p.fused_linear.has_value()) << undecided_text(p);
  EXPECT_TRUE(p.complete()) << undecided_text(p);
  EXPECT_EQ(p.tier, 3);
  EXPECT_FALSE(p.segment.has_value());
  const kd::FusedLinearSpec& s = *p.fused_linear;
  EXPECT_EQ(s.loss, want.at("loss").get<std::string>());
  EXPECT_EQ(s.reduction, want.at("reduction").get<std::string>());
  EXPECT_EQ(s.ignore_index, want.at("ignore_index").get<long long>());
  for (const auto& [field, got] : {std::pair<std::string, double>{"label_smoothing", s.label_smoothing},
                                   {"z_loss", s.z_loss},
                                   {"softcap", s.softcap},
                                   {"temperature", s.temperature}})
    EXPECT_NEAR(got, want.at(field).get<double>(), 1e-12) << field;
  // loss_scale: the constant the loss is multiplied by (T * T), 1 where an entry does not say.
  EXPECT_NEAR(s.loss_scale, want.value("loss_scale", 1.0), 1e-12) << "loss_scale";
  // beta only shapes the JSD; for the others it is the unused default.
  if (s.loss == "jsd") {
    EXPECT_NEAR(s.beta, want.at("beta").get<double>(), 1e-12) << "beta";
  }
}

void expect_refused(const kd::KernelProfile& p, const std::string& text, const nlohmann::json& entry) {
  const std::string family = entry.at("family");
  const auto it = p.undecided.find(family);
  ASSERT_NE(it, p.undecided.end()) << "not refused as " << family << "; undecided:\n" << undecided_text(p);
  EXPECT_NE(it->second.find(entry.at("message_has").get<std::string>()), std::string::npos) << it->second;
  if (looks_like_code(text)) {
    EXPECT_NE(it->second.find("line "), std::string::npos) << "no line:column in: " << it->second;
    EXPECT_NE(it->second.find("column "), std::string::npos) << "no line:column in: " << it->second;
  }
  EXPECT_FALSE(p.complete());
  EXPECT_THROW(kd::render(p, kSource / "templates/kernel_dev"), std::invalid_argument);
}

}  // namespace

TEST(KernelDevHeldoutSegmentLoss, CorpusIsLargeAndCoversEveryOutcome) {
  const nlohmann::json inputs = corpus();
  EXPECT_GE(inputs.size(), 30u);
  std::map<std::string, int> kinds;
  for (const auto& e : inputs) ++kinds[e.at("expect").get<std::string>()];
  EXPECT_GE(kinds["segment"], 10);
  EXPECT_GE(kinds["fused_linear"], 10);
  EXPECT_GE(kinds["refused"], 10);
}

TEST(KernelDevHeldoutSegmentLoss, EveryInputGetsItsExpectedOutcome) {
  const nlohmann::json inputs = corpus();
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const nlohmann::json& e = inputs[i];
    const std::string text = e.at("text");
    SCOPED_TRACE("entry " + std::to_string(i) + ": " + text);
    const std::string expect = e.at("expect");
    const kd::KernelProfile p = analyse(text);
    if (expect == "segment") {
      expect_segment(p, e.at("segment"));
    } else if (expect == "fused_linear") {
      expect_fused_linear(p, e.at("fused_linear"));
    } else if (expect == "refused") {
      expect_refused(p, text, e);
    } else {
      ASSERT_EQ(expect, "neither");
      EXPECT_FALSE(p.segment.has_value());
      EXPECT_FALSE(p.fused_linear.has_value());
      EXPECT_EQ(p.undecided.count("segment"), 0u);
      EXPECT_EQ(p.undecided.count("fused_linear"), 0u);
    }
  }
}
