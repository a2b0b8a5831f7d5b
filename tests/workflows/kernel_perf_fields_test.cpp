// The kernel-perf profile's fields: Optimize reads strategy_order and architecture.sm from the
// approved profile; everything else records the command line or a measurement, is read-only in
// the schema, and an edit to it is refused with the schema's reason. One case per field, and the
// table must cover every field the schema declares.
#include <gtest/gtest.h>

#include <set>

#include <yaml-cpp/yaml.h>

#include "liger/profile.h"

namespace fs = std::filesystem;

namespace {

const fs::path kSource = LIGER_SOURCE_DIR;

const liger::profile::Schema& schema() {
  static const auto s = liger::profile::Schema::load_file(kSource / "skills/kernel_perf/profile.schema.yaml");
  return s;
}

// The shape of a profile Profile writes (values abridged).
YAML::Node profile() {
  return YAML::Load(R"yaml(
op: rms_norm
goal: speed
target_modes: [forward, backward, full]
target_metric: ""
max_variants: 8
profile_only: false
start_tunables: default
files: {header: kernels/include/liger_kernels/rms_norm.h, kernel_source: kernels/src/rms_norm/rms_norm.cu,
        tuning: kernels/src/rms_norm/tuning.h, test_filter: "RmsNorm*", snapshot_dir: input/snapshot}
architecture: {sm: 90, family: hopper, source: nvidia-smi}
compiler_resources: {tool: ptxas, kernels: [{name: rms_norm_fwd, registers: 32}], max_registers: 32}
ncu: {status: "ncu not found on PATH"}
baseline: {cases: 12}
bottleneck: {class: memory-bound, evidence: "11 of 12 cases at over 80% of peak bandwidth"}
strategy_order: [{id: tune_launch, name: "launch parameters", kind: tunable}, {id: vector_width, name: "vector width", kind: tunable}]
)yaml");
}

struct FieldCase {
  std::string field;  // schema path
  std::string value;  // the edit, as YAML
  bool editable;      // read by Optimize from the approved profile
};

std::ostream& operator<<(std::ostream& os, const FieldCase& c) { return os << c.field; }

const std::vector<FieldCase> kCases = {
    {"op", "swiglu", false},
    {"goal", "memory", false},
    {"target_modes", "[forward]", false},
    {"target_metric", "1.3x", false},
    {"max_variants", "2", false},
    {"profile_only", "true", false},
    {"start_tunables", "threads_per_block=64", false},
    {"files.header", "other.h", false},
    {"files.kernel_source", "other.cu", false},
    {"files.tuning", "other.h", false},
    {"files.test_filter", "Other*", false},
    {"files.snapshot_dir", "elsewhere", false},
    {"architecture.sm", "80", true},
    {"architecture.family", "ampere", false},
    {"architecture.source", "--target-gpu", false},
    {"compiler_resources.tool", "nvcc", false},
    {"compiler_resources.kernels", "[]", false},
    {"ncu", "{status: edited}", false},
    {"baseline", "{cases: 1}", false},
    {"bottleneck.class", "compute-bound", false},
    {"bottleneck.evidence", "edited", false},
    {"strategy_order", "[{id: vector_width, name: \"vector width\", kind: tunable}]", true},
};

YAML::Node at(YAML::Node root, const std::string& path) {
  YAML::Node node = root;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = path.find('.', start);
    node.reset(node[path.substr(start, dot - start)]);
    if (dot == std::string::npos) return node;
    start = dot + 1;
  }
}

class KernelPerfProfileField : public ::testing::TestWithParam<FieldCase> {};

TEST_P(KernelPerfProfileField, ReadOnlyEditsAreRefusedWithTheReason) {
  const FieldCase& c = GetParam();
  const YAML::Node before = profile();
  ASSERT_TRUE(schema().validate(before).ok()) << schema().validate(before).format_errors("profile.yaml");
  YAML::Node after = YAML::Clone(before);
  at(after, c.field) = YAML::Load(c.value);
  const auto changes = schema().readonly_changes(before, after);
  if (c.editable) {
    EXPECT_TRUE(changes.empty()) << changes.front().format("profile.yaml");
    return;
  }
  ASSERT_EQ(changes.size(), 1u) << c.field << " is editable, but Optimize does not read it from the profile";
  EXPECT_EQ(changes.front().path.rfind(c.field.substr(0, c.field.find('.')), 0), 0u) << changes.front().path;
  EXPECT_NE(changes.front().message.find("read-only field was edited: "), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(EveryField, KernelPerfProfileField, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<FieldCase>& info) {
                           std::string name;
                           for (char ch : info.param.field) name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return name;
                         });

void leaf_fields(const YAML::Node& node, const std::string& path, std::set<std::string>& out) {
  if (node["fields"]) {
    for (const auto& entry : node["fields"])
      leaf_fields(entry.second, path.empty() ? entry.first.Scalar() : path + "." + entry.first.Scalar(), out);
  } else {
    out.insert(path);
  }
}

TEST(KernelPerfProfileFields, TheTableCoversEverySchemaField) {
  std::set<std::string> fields;
  leaf_fields(YAML::LoadFile((kSource / "skills/kernel_perf/profile.schema.yaml").string()), "", fields);
  std::set<std::string> covered;
  for (const auto& c : kCases) covered.insert(c.field);
  EXPECT_EQ(fields, covered);
}

// Deciding an undecided field is not an edit; a read-only field's reason reaches the message.
TEST(KernelPerfProfileFields, DecidingIsAllowedAndTheReasonIsShown) {
  YAML::Node before = profile();
  before["bottleneck"] = YAML::Load("{undecided: \"no benchmark\"}");
  YAML::Node after = profile();
  EXPECT_TRUE(schema().readonly_changes(before, after).empty());
  after["goal"] = "memory";
  const auto changes = schema().readonly_changes(profile(), after);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes.front().path, "goal");
  EXPECT_NE(changes.front().message.find("--goal"), std::string::npos) << changes.front().message;
  EXPECT_EQ(changes.front().expected, "speed");
}

}  // namespace
