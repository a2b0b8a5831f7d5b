// Every field of the kernel-dev profile is a contract: an edit at the checkpoint either changes
// what Act stages, or the schema marks the field read-only and the edit is refused with the
// schema's reason. One case per schema field (TEST_P), plus a check that the table covers every
// field the schema declares, so a new field cannot arrive without a decision about it. No build,
// no GPU: the staged output is render() plus the ops.yaml entry, exactly what Act stages.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "yaml_path.h"
#include "liger/profile.h"
#include "workflows/kernel_dev/render.h"
#include "workflows/kernel_dev/workflow.h"

namespace kd = liger::kernel_dev;
namespace fs = std::filesystem;

namespace {

const fs::path kSource = LIGER_SOURCE_DIR;

const kd::KnowledgeBase& kb() {
  static const kd::KnowledgeBase k = kd::KnowledgeBase::load(kSource);
  return k;
}

const liger::profile::Schema& schema() {
  static const auto s = liger::profile::Schema::load_file(kSource / "skills/kernel_dev/profile.schema.yaml");
  return s;
}

// The base profiles the edits start from: each field appears in at least one of them.
YAML::Node base(const std::string& name) {
  if (name == "softmax") {  // Tier 2, from a recorded LLM answer: the row program
    std::ifstream in(kSource / "tests/workflows/fixtures/kernel_dev/cassettes/softmax_llm/answers/3.md");
    std::stringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    const std::size_t begin = s.find("```yaml\n") + 8;
    return YAML::Load(s.substr(begin, s.find("```", begin) - begin));
  }
  if (name == "fused_ce")  // Tier 3: the fused_linear section of a cross-entropy (tier3_profile.cpp)
    return kd::profile_to_yaml(kd::analyse({"fused linear cross entropy with z-loss 1e-4 and softcap 30", kd::InputKind::Auto, ""}, kb()));
  if (name == "fused_jsd")  // Tier 3: the fused_linear section of a distillation loss
    return kd::profile_to_yaml(kd::analyse({"fused linear JSD distillation beta 0.5 temperature 2", kd::InputKind::Auto, ""}, kb()));
  if (name == "segment")  // a segment reduction: the segment section (segment.cpp)
    return kd::profile_to_yaml(kd::analyse({"max pooling over jagged rows given offsets", kd::InputKind::Auto, ""}, kb()));
  if (name == "weights")  // Tier 2 with a learnable per-column weight: row_program.backward.param_gradients
    return kd::profile_to_yaml(kd::analyse({"class RmsScale(nn.Module):\n    def __init__(self, d):\n        super().__init__()\n"
                                            "        self.weight = nn.Parameter(torch.ones(d))\n    def forward(self, x):\n"
                                            "        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)",
                                            kd::InputKind::Auto, ""},
                                           kb()));
  if (name == "glu")  // Tier 1 on the two halves of one argument: inputs[].split
    return kd::profile_to_yaml(kd::analyse({"def f(x): return F.glu(x, dim=-1)", kd::InputKind::Auto, ""}, kb()));
  if (name == "two_inputs")  // Tier 2 of two input tensors: row_program.backward.input_gradients
    return kd::profile_to_yaml(kd::analyse({"def f(x, t): return ((x - t) ** 2).mean(-1, keepdim=True)", kd::InputKind::Auto, ""}, kb()));
  const std::string request = name == "dyt" ? "dynamic tanh" : "leaky ReLU with negative slope 0.2";
  return kd::profile_to_yaml(kd::analyse({request, kd::InputKind::Auto, ""}, kb()));
}

// What Act stages for a profile: every rendered file and the ops.yaml entry.
std::map<std::string, std::string> staged(const YAML::Node& profile) {
  const kd::KernelProfile p = kd::profile_from_yaml(profile);
  std::map<std::string, std::string> out;
  for (const auto& f : kd::render(p, kSource / "templates/kernel_dev")) out[f.path + (f.insert ? "#" + f.template_name : "")] = f.content;
  out["kernels/ops.yaml#entry"] = kd::ops_yaml_entry(p);
  return out;
}

YAML::Node at(YAML::Node root, const std::string& path) { return liger::testing::yaml_at(root, path); }

struct FieldCase {
  std::string field;  // schema path, list items as "[]": "inputs[].name"
  std::string base;   // dyt | leaky | softmax | segment | weights | two_inputs | glu
  std::string path;   // the profile path edited
  std::string value;  // the new value, as YAML
};

std::ostream& operator<<(std::ostream& os, const FieldCase& c) { return os << c.field; }

// One edit per schema field, each one a reviewer might make and the schema accepts.
const std::vector<FieldCase> kCases = {
    {"identity.op_name", "dyt", "identity.op_name", "dyt_edited"},
    {"identity.display_name", "dyt", "identity.display_name", "DyT (edited)"},
    {"identity.c_prefix", "dyt", "identity.c_prefix", "liger_other"},
    {"identity.cpp_namespace", "dyt", "identity.cpp_namespace", "liger::kernels::other"},
    {"identity.python_functional", "dyt", "identity.python_functional", "liger_other"},
    {"identity.python_module", "dyt", "identity.python_module", "LigerOther"},
    {"identity.python_function", "dyt", "identity.python_function", "LigerOtherFunction"},
    {"source.kind", "dyt", "source.kind", "expression"},
    {"source.text", "dyt", "source.text", "something else"},
    {"source.resolved_from", "dyt", "source.resolved_from", "by hand"},
    {"source.entry", "weights", "source.entry", "other_function"},
    {"tier.value", "dyt", "tier.value", "2"},
    {"tier.reason", "dyt", "tier.reason", "edited"},
    {"closest_kernel.name", "dyt", "closest_kernel.name", "swiglu"},
    {"closest_kernel.reason", "dyt", "closest_kernel.reason", "edited"},
    {"inputs[].name", "dyt", "inputs[0].name", "a"},
    {"inputs[].shape", "dyt", "inputs[0].shape", "[cols]"},
    {"inputs[].dtype", "dyt", "inputs[0].dtype", "fp32"},
    {"inputs[].description", "dyt", "inputs[0].description", "edited"},
    {"inputs[].sample", "dyt", "inputs[0].sample", "positive"},
    // Both halves named as part 1: refused on load (each part of an argument is one input).
    {"inputs[].split", "glu", "inputs[0].split", "x.chunk(2, dim=-1)[1]"},
    {"outputs[].name", "dyt", "outputs[0].name", "out"},
    {"outputs[].shape", "dyt", "outputs[0].shape", "[cols]"},
    {"outputs[].dtype", "dyt", "outputs[0].dtype", "fp32"},
    {"outputs[].description", "dyt", "outputs[0].description", "edited"},
    {"learnable_parameters[].name", "dyt", "learnable_parameters[0].name", "gain"},
    {"learnable_parameters[].shape", "dyt", "learnable_parameters[0].shape", "channel"},
    {"learnable_parameters[].init", "dyt", "learnable_parameters[0].init", "0.25"},
    {"learnable_parameters[].description", "dyt", "learnable_parameters[0].description", "edited"},
    {"module_parameters[].name", "leaky", "module_parameters[0].name", "slope"},
    {"module_parameters[].shape", "leaky", "module_parameters[0].shape", "channel"},
    {"module_parameters[].default", "leaky", "module_parameters[0].default", "0.05"},
    {"module_parameters[].description", "leaky", "module_parameters[0].description", "edited"},
    {"forward.expression", "dyt", "forward.expression", "tanh(alpha * x)"},
    {"forward.cuda", "dyt", "forward.cuda", "y = x;"},
    {"forward.reference", "dyt", "forward.reference", "y = x;"},
    {"precision[].operation", "dyt", "precision[0].operation", "edited"},
    {"precision[].requirement", "dyt", "precision[0].requirement", "edited"},
    {"precision[].reason", "dyt", "precision[0].reason", "edited"},
    {"saved_for_backward.saved", "dyt", "saved_for_backward.saved", "[y]"},
    {"saved_for_backward.recomputed", "dyt", "saved_for_backward.recomputed", "[]"},
    {"saved_for_backward.reason", "dyt", "saved_for_backward.reason", "edited"},
    {"gradients[].wrt", "dyt", "gradients[0].wrt", "z"},
    {"gradients[].kind", "dyt", "gradients[0].kind", "learnable"},
    {"gradients[].derivative", "dyt", "gradients[0].derivative", "1"},
    {"gradients[].reduction", "dyt", "gradients[0].reduction", "true"},
    {"gradients[].reduction_note", "dyt", "gradients[1].reduction_note", "edited"},
    {"backward.cuda", "dyt", "backward.cuda", "dx = dy;"},
    {"backward.reference", "dyt", "backward.reference", "dx = dy;"},
    {"tiling.strategy", "dyt", "tiling.strategy", "edited"},
    {"tiling.threads_per_block", "dyt", "tiling.threads_per_block", "128"},
    {"tiling.vector_bytes", "dyt", "tiling.vector_bytes", "8"},
    // Tier 1 launches its own grid: refused at Act, naming the field (the Tier-2 edit is in
    // TilingSetsTheDefaultLaunchOfTheGeneratedKernel).
    {"tiling.rows_per_block", "dyt", "tiling.rows_per_block", "4"},
    {"tiling.backward_threads_per_block", "softmax", "tiling.backward_threads_per_block", "512"},
    {"tiling.backward_rows_per_block", "softmax", "tiling.backward_rows_per_block", "4"},
    {"tiling.grid", "dyt", "tiling.grid", "edited"},
    {"tiling.parameter_gradients", "dyt", "tiling.parameter_gradients", "edited"},
    {"tiling.reason", "dyt", "tiling.reason", "edited"},
    {"benchmark.variable", "dyt", "benchmark.variable", "tokens"},
    {"benchmark.values", "dyt", "benchmark.values", "[1024, 2048]"},
    {"benchmark.fixed", "dyt", "benchmark.fixed", "{cols: 2048}"},
    {"benchmark.dtypes", "dyt", "benchmark.dtypes", "[fp32]"},
    {"benchmark.modes", "dyt", "benchmark.modes", "[forward]"},
    {"benchmark.baselines", "dyt", "benchmark.baselines", "[other]"},
    {"benchmark.metrics", "dyt", "benchmark.metrics", "edited"},
    {"tolerances[].dtype", "dyt", "tolerances[0].dtype", "fp16"},
    {"tolerances[].applies_to", "dyt", "tolerances[0].applies_to", "parameter gradients"},
    {"tolerances[].atol", "dyt", "tolerances[0].atol", "0.125"},
    {"tolerances[].rtol", "dyt", "tolerances[0].rtol", "0.125"},
    {"tolerances[].max_relative_l2", "dyt", "tolerances[0].max_relative_l2", "0.125"},
    {"tolerances[].reason", "dyt", "tolerances[0].reason", "edited"},
    {"row_program.forward.reductions[].name", "softmax", "row_program.forward.reductions[0].name", "mx"},
    {"row_program.forward.reductions[].op", "softmax", "row_program.forward.reductions[1].op", "mean"},
    {"row_program.forward.reductions[].expression", "softmax", "row_program.forward.reductions[1].expression", "exp(x - m) * 2"},
    {"row_program.forward.output", "softmax", "row_program.forward.output", "exp(x - m) / (2 * s)"},
    {"row_program.backward.uses", "softmax", "row_program.backward.uses", "[x, y]"},
    {"row_program.backward.reductions[].name", "softmax", "row_program.backward.reductions[0].name", "h"},
    {"row_program.backward.reductions[].op", "softmax", "row_program.backward.reductions[0].op", "mean"},
    {"row_program.backward.reductions[].expression", "softmax", "row_program.backward.reductions[0].expression", "dy * y * 2"},
    {"row_program.backward.grad_input", "softmax", "row_program.backward.grad_input", "y * (dy - 2 * g)"},
    {"row_program.backward.param_gradients[].name", "weights", "row_program.backward.param_gradients[0].name", "scale"},
    {"row_program.backward.param_gradients[].expression", "weights", "row_program.backward.param_gradients[0].expression", "dy * x"},
    {"row_program.backward.input_gradients[].name", "two_inputs", "row_program.backward.input_gradients[0].name", "u"},
    {"row_program.backward.input_gradients[].expression", "two_inputs", "row_program.backward.input_gradients[0].expression", "-dy * (x - t)"},
    {"row_program.pytorch_reference", "softmax", "row_program.pytorch_reference", "torch.nn.functional.softmax(x, -1)"},
    {"segment.reduce", "segment", "segment.reduce", "min"},
    {"segment.index", "segment", "segment.index", "lengths"},
    {"segment.pooled_dim", "segment", "segment.pooled_dim", "1"},
    {"segment.features", "segment", "segment.features", "512"},
    {"segment.dtypes", "segment", "segment.dtypes", "[bf16]"},
    {"segment.index_dtype", "segment", "segment.index_dtype", "int32"},
    {"segment.empty_segment", "segment", "segment.empty_segment", "inf"},
    {"segment.source_form", "segment", "segment.source_form", "loop"},
    {"segment.benchmark.segments", "segment", "segment.benchmark.segments", "4096"},
    {"segment.benchmark.min_rows", "segment", "segment.benchmark.min_rows", "0"},
    {"segment.benchmark.max_rows", "segment", "segment.benchmark.max_rows", "128"},
    {"fused_linear.loss", "fused_ce", "fused_linear.loss", "kl_div"},
    {"fused_linear.ignore_index", "fused_ce", "fused_linear.ignore_index", "-1"},
    {"fused_linear.label_smoothing", "fused_ce", "fused_linear.label_smoothing", "0.1"},
    {"fused_linear.z_loss", "fused_ce", "fused_linear.z_loss", "0.001"},
    {"fused_linear.softcap", "fused_ce", "fused_linear.softcap", "10"},
    {"fused_linear.temperature", "fused_jsd", "fused_linear.temperature", "4"},
    {"fused_linear.beta", "fused_jsd", "fused_linear.beta", "0.2"},
    {"fused_linear.reduction", "fused_ce", "fused_linear.reduction", "sum"},
    {"fused_linear.chunk_rows", "fused_ce", "fused_linear.chunk_rows", "256"},
    {"fused_linear.loss_scale", "fused_ce", "fused_linear.loss_scale", "0.25"},
    {"fused_linear.grad_weight_accumulator", "fused_ce", "fused_linear.grad_weight_accumulator", "fp32"},
    {"fused_linear.dtypes", "fused_ce", "fused_linear.dtypes", "[bf16]"},
    {"fused_linear.source_form", "fused_ce", "fused_linear.source_form", "F.cross_entropy"},
    {"fused_linear.benchmark.tokens", "fused_ce", "fused_linear.benchmark.tokens", "4096"},
    {"fused_linear.benchmark.hidden", "fused_ce", "fused_linear.benchmark.hidden", "2048"},
    {"fused_linear.benchmark.vocab", "fused_ce", "fused_linear.benchmark.vocab", "32000"},
    {"notes", "dyt", "notes", "[edited]"},
};

// The leaf fields a schema declares ("a.b", "list[].c"), read from the schema file itself.
void leaf_fields(const YAML::Node& node, const std::string& path, std::set<std::string>& out) {
  if (node["fields"]) {
    for (const auto& entry : node["fields"])
      leaf_fields(entry.second, path.empty() ? entry.first.Scalar() : path + "." + entry.first.Scalar(), out);
  } else if (node["items"] && node["items"]["fields"]) {
    leaf_fields(node["items"], path + "[]", out);
  } else {
    out.insert(path);
  }
}

class KernelDevProfileField : public ::testing::TestWithParam<FieldCase> {};

TEST_P(KernelDevProfileField, EditDrivesTheStagedFilesOrIsRefusedAsReadOnly) {
  const FieldCase& c = GetParam();
  const YAML::Node before = base(c.base);
  YAML::Node after = YAML::Clone(before);
  at(after, c.path) = YAML::Load(c.value);
  ASSERT_NE(YAML::Dump(at(YAML::Clone(before), c.path)), YAML::Dump(at(after, c.path))) << "the edit changes nothing";

  const auto readonly = schema().readonly_changes(before, after);
  if (!readonly.empty()) {
    // Refused, naming the field and why: what a reviewer sees at the checkpoint or at approve.
    EXPECT_EQ(readonly.front().path, c.path);
    EXPECT_NE(readonly.front().message.find("read-only field was edited: "), std::string::npos);
    EXPECT_GT(readonly.front().message.size(), std::string("read-only field was edited: ").size() + 10);
    return;
  }
  const auto report = schema().validate(after);
  ASSERT_TRUE(report.ok()) << "the edit must be one the schema accepts:\n" << report.format_errors("profile.yaml");
  const auto original = staged(before);
  std::map<std::string, std::string> edited;
  try {
    edited = staged(after);
  } catch (const std::invalid_argument& e) {
    // Act refuses the edited profile with the reason (e.g. a Tier-2 profile without a row
    // program): the field is acted on, not ignored.
    SUCCEED() << e.what();
    return;
  } catch (const std::runtime_error& e) {
    // Refused when the profile is read (e.g. inputs[].split that no longer describes whole
    // arguments), as `approve` and Act read it.
    EXPECT_NE(std::string(e.what()).find(c.field.substr(0, c.field.find_first_of(".["))), std::string::npos) << e.what();
    return;
  }
  EXPECT_TRUE(original != edited) << c.field << " is editable but the staged files are byte-identical: render it, or mark "
                                            "it readonly with a reason in skills/kernel_dev/profile.schema.yaml";
}

INSTANTIATE_TEST_SUITE_P(EveryField, KernelDevProfileField, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<FieldCase>& info) {
                           std::string name;
                           for (char ch : info.param.field) name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return name;
                         });

TEST(KernelDevProfileFields, TheTableCoversEverySchemaField) {
  std::set<std::string> fields;
  leaf_fields(YAML::LoadFile((kSource / "skills/kernel_dev/profile.schema.yaml").string()), "", fields);
  std::set<std::string> covered;
  for (const auto& c : kCases) covered.insert(c.field);
  for (const auto& field : fields) EXPECT_TRUE(covered.count(field)) << "no edit case for schema field " << field;
  for (const auto& field : covered) EXPECT_TRUE(fields.count(field)) << "edit case for a field the schema lacks: " << field;
}

// The issue's example: block and vector width reach the generated kernel's default launch.
TEST(KernelDevProfileFields, TilingSetsTheDefaultLaunchOfTheGeneratedKernel) {
  YAML::Node p = base("dyt");
  auto tuning = [](const YAML::Node& profile) {
    for (const auto& [path, content] : staged(profile))
      if (path.size() > 9 && path.compare(path.size() - 9, 9, "/tuning.h") == 0) return content;
    return std::string();
  };
  const std::string defaults = tuning(p);
  EXPECT_NE(defaults.find("{80, INT64_MAX, {256, 16, 8}}"), std::string::npos) << defaults;
  EXPECT_NE(defaults.find("{80, int64_t{1} << 20, {128, 16, 16}}"), std::string::npos) << defaults;
  p["tiling"]["threads_per_block"] = 128;
  p["tiling"]["vector_bytes"] = 8;
  const std::string edited = tuning(p);
  EXPECT_NE(edited.find("{90, INT64_MAX, {128, 8, 16}}"), std::string::npos) << edited;
  EXPECT_NE(edited.find("{90, int64_t{1} << 20, {64, 8, 32}}"), std::string::npos) << edited;
  EXPECT_NE(edited.find("return {128, 8, 16};"), std::string::npos) << edited;
  p["tiling"]["threads_per_block"] = 100;  // not a block the kernel launches
  EXPECT_THROW(staged(p), std::invalid_argument);

  YAML::Node row = base("softmax");
  row["tiling"]["threads_per_block"] = 512;
  const std::string rows = tuning(row);
  EXPECT_NE(rows.find("{80, 256, {128, 1}}"), std::string::npos) << rows;
  EXPECT_NE(rows.find("{90, 4096, {512, 1}}"), std::string::npos) << rows;
  EXPECT_NE(rows.find("{90, INT64_MAX, {1024, 1}}"), std::string::npos) << rows;
  // Absent backward fields: the backward launches as the forward does.
  const std::string backward = rows.substr(rows.find("kBackwardTuning[]"));
  EXPECT_NE(backward.find("{90, 4096, {512, 1}}"), std::string::npos) << rows;

  // Each direction its own launch: rows per block and the backward's block reach their tables.
  row["tiling"]["rows_per_block"] = 2;
  row["tiling"]["backward_threads_per_block"] = 128;
  row["tiling"]["backward_rows_per_block"] = 4;
  const std::string split = tuning(row);
  const std::string forward_table = split.substr(split.find("kForwardTuning[]"), split.find("kBackwardTuning[]") - split.find("kForwardTuning[]"));
  const std::string backward_table = split.substr(split.find("kBackwardTuning[]"));
  EXPECT_NE(forward_table.find("{90, 4096, {512, 2}}"), std::string::npos) << split;
  EXPECT_NE(backward_table.find("{90, 4096, {128, 4}}"), std::string::npos) << split;
  EXPECT_NE(backward_table.find("{90, 256, {64, 4}}"), std::string::npos) << split;
  EXPECT_NE(split.find("Config{512, 4}"), std::string::npos) << "the longest rows' backward: " << split;
  row["tiling"]["backward_threads_per_block"] = 96 + 4;  // not a multiple of 32
  EXPECT_THROW(staged(row), std::invalid_argument);
  row["tiling"]["backward_threads_per_block"] = 128;
  row["tiling"]["rows_per_block"] = 0;  // the schema's minimum for the other tiers; a row kernel needs 1..4096
  EXPECT_NO_THROW(staged(row)) << "0 reads as one row per block";

  // Tier 1 launches its own grid: a row-kernel field there is refused, naming it.
  YAML::Node element_wise = base("dyt");
  element_wise["tiling"]["backward_threads_per_block"] = 128;
  try {
    staged(element_wise);
    ADD_FAILURE() << "a Tier-1 profile with tiling.backward_threads_per_block rendered";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("tiling.backward_threads_per_block"), std::string::npos) << e.what();
  }
}

// The built-in Tier-2 profile's launch per direction (tier2_profile.cpp, measured on an H100 and an
// H200): a forward with one value per row runs 128 threads, a forward writing a row 256; the
// backward of a per-row output that reads saved statistics 128 threads, the others 256, one row
// per block.
TEST(KernelDevProfileFields, Tier2LaunchDefaultsFollowWhatTheForwardWrites) {
  auto tiling = [](const std::string& source) {
    return kd::profile_to_yaml(kd::analyse({source, kd::InputKind::Auto, ""}, kb()))["tiling"];
  };
  const YAML::Node per_row = tiling("def f(x): return torch.logsumexp(x, dim=-1)");
  EXPECT_EQ(per_row["threads_per_block"].as<int>(), 128);
  EXPECT_EQ(per_row["backward_threads_per_block"].as<int>(), 128);
  EXPECT_EQ(per_row["backward_rows_per_block"].as<int>(), 1);
  // A per-row output whose backward needs no statistic (a row sum) keeps 256.
  EXPECT_EQ(tiling("def f(x): return x.sum(dim=-1)")["backward_threads_per_block"].as<int>(), 256);
  const YAML::Node row_out = tiling("def f(x): return torch.softmax(x, dim=-1)");
  EXPECT_EQ(row_out["threads_per_block"].as<int>(), 256);
  EXPECT_EQ(row_out["rows_per_block"].as<int>(), 2);
  EXPECT_EQ(row_out["backward_threads_per_block"].as<int>(), 256);
  EXPECT_EQ(row_out["backward_rows_per_block"].as<int>(), 1);
  EXPECT_FALSE(tiling("dynamic tanh")["backward_threads_per_block"]) << "Tier 1 has one launch";
}

// Tier 2: vector_bytes is the width of the row passes' accesses (kVectorBytes in tuning.h, read by
// the row kernel's launch), and the kernel still compiles with nvcc where nvcc is installed.
TEST(KernelDevProfileFields, Tier2VectorBytesSetsTheRowKernelsAccessWidth) {
  auto file = [](const std::map<std::string, std::string>& files, const std::string& suffix) {
    for (const auto& [path, content] : files)
      if (path.size() > suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0) return content;
    return std::string();
  };
  YAML::Node row = base("softmax");
  const auto before = staged(row);
  EXPECT_NE(file(before, "/tuning.h").find("inline constexpr int kVectorBytes = 4;"), std::string::npos);
  EXPECT_NE(file(before, ".cu").find("std::max(kVectorBytes, elem)"), std::string::npos) << "the launch reads it";
  row["tiling"]["vector_bytes"] = 16;
  const auto after = staged(row);
  EXPECT_NE(file(after, "/tuning.h").find("inline constexpr int kVectorBytes = 16;"), std::string::npos);
  row["tiling"]["vector_bytes"] = 3;  // not a width the kernel loads
  EXPECT_THROW(staged(row), std::invalid_argument);

  std::string nvcc;
  for (const char* candidate : {"/usr/local/cuda/bin/nvcc", "/usr/bin/nvcc"})
    if (fs::exists(candidate)) nvcc = candidate;
  if (nvcc.empty()) GTEST_SKIP() << "nvcc not found: the Tier-2 kernel with 16-byte accesses was not compiled";
  const std::string pattern = (fs::temp_directory_path() / "kd-vector-XXXXXX").string();
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  const fs::path root = ::mkdtemp(name.data());
  std::string cu;
  for (const auto& [key, content] : after) {
    if (key.find('#') != std::string::npos) continue;
    fs::create_directories((root / key).parent_path());
    std::ofstream(root / key) << content;
    if (key.size() > 3 && key.compare(key.size() - 3, 3, ".cu") == 0) cu = key;
  }
  ASSERT_FALSE(cu.empty());
  const std::string command = nvcc + " -std=c++17 -c --expt-relaxed-constexpr -arch=sm_90 -Werror all-warnings -I" +
                              (root / "kernels/include").string() + " -I" + (root / "kernels/src").string() + " -I" +
                              (kSource / "kernels/include").string() + " -I" + (kSource / "kernels/src").string() + " " +
                              (root / cu).string() + " -o " + (root / "kernel.o").string() + " >" + (root / "nvcc.log").string() +
                              " 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream log(root / "nvcc.log");
  std::stringstream text;
  text << log.rdbuf();
  EXPECT_EQ(status, 0) << text.str();
  fs::remove_all(root);
}

}  // namespace
