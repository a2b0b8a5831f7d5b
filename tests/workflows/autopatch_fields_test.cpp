// Every field of the autopatch profile is a contract: an edit at the checkpoint either changes
// what Act stages, or the schema marks the field read-only and the edit is refused with the
// schema's reason. One case per schema field (the 12 decisions' record fields are generated),
// plus a check that the cases cover every field the schema declares, so a new field cannot arrive
// without a decision about it. No Verify, no GPU: Understand on a fixture, then Act into a staging
// directory. The recorded profile sidecar (a copy of the profile) and the integration's
// decisions digest comment are left out of the comparison: an edit must change the code.
#include <gtest/gtest.h>

#include <unistd.h>

#include <map>
#include <set>

#include <yaml-cpp/yaml.h>

#include "yaml_path.h"
#include "engine/checkpoint.h"
#include "liger/error.h"
#include "liger/profile.h"
#include "liger/util.h"
#include "liger/workflow.h"
#include "workflows/autopatch/model_analysis.h"
#include "workflows/autopatch/workflow.h"

#include "committed_tree.h"

namespace fs = std::filesystem;
namespace ap = liger::autopatch;
using namespace liger;

namespace {

const fs::path kSource = LIGER_SOURCE_DIR;
const std::string kPkg = "kernels/python/liger_kernels/transformers";

const profile::Schema& schema() {
  static const auto s = profile::Schema::load_file(kSource / "skills/autopatch/profile.schema.yaml");
  return s;
}

// A scratch tree holding the files Act reads (registry, docs table), plus a second registry and
// docs page so the generation paths can be pointed elsewhere.
struct Scratch {
  fs::path root;
  Scratch() {
    std::string pattern = (fs::temp_directory_path() / "autopatch-fields-XXXXXX").string();
    root = ::mkdtemp(pattern.data());
    liger::testing::copy_committed(kSource, {kPkg + "/__init__.py", "docs/python.md"}, root / "repo");
    fs::copy_file(tree() / kPkg / "__init__.py", tree() / kPkg / "registry_copy.py");
    fs::copy_file(tree() / "docs/python.md", tree() / "docs/python_copy.md");
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  fs::path tree() const { return root / "repo"; }
};

Scratch& scratch() {
  static Scratch s;
  return s;
}

nlohmann::json input_of(const std::string& fixture) {
  const fs::path file = kSource / "tests/workflows/fixtures/autopatch" / fixture / ("modeling_" + fixture + ".py");
  return {{"model", file.string()}};
}

// The profile Understand writes for a fixture (what the reviewer edits).
YAML::Node base(const std::string& fixture) {
  static std::map<std::string, YAML::Node> cache;
  if (!cache.count(fixture)) {
    engine::StageContext ctx;
    ctx.run_dir = scratch().root / ("understand-" + fixture);
    ctx.tree_root = scratch().tree();
    ctx.input = input_of(fixture);
    ctx.quiet = true;
    ap::make_workflow().understand(ctx);
    // As the engine hands it over: written to profile.yaml and read back.
    cache[fixture] = YAML::Load(YAML::Dump(ctx.profile));
  }
  return YAML::Clone(cache.at(fixture));
}

// What Act stages for a profile: path -> content, the sidecar's content blanked and the
// decisions digest line dropped.
std::map<std::string, std::string> staged(const std::string& fixture, const YAML::Node& profile) {
  static int n = 0;
  const fs::path dir = scratch().root / ("act-" + std::to_string(n++));
  engine::Staging staging(dir / "staging");
  engine::StageContext ctx;
  ctx.run_dir = dir;
  ctx.tree_root = scratch().tree();
  ctx.input = input_of(fixture);
  ctx.profile = YAML::Clone(profile);
  ctx.staging = &staging;
  ctx.quiet = true;
  ap::make_workflow().act(ctx);
  std::map<std::string, std::string> out;
  for (const auto& rel : staging.files()) {
    std::string content = util::read_file(staging.path_of(rel));
    if (rel.size() > 15 && rel.compare(rel.size() - 15, 15, ".autopatch.yaml") == 0) content.clear();
    std::string kept;
    std::istringstream lines(content);
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("# autopatch-decisions:", 0) != 0) kept += line + "\n";
    out[rel] = kept;
  }
  return out;
}

std::string all_of(const std::map<std::string, std::string>& files) {
  std::string out;
  for (const auto& [path, content] : files) out += "== " + path + "\n" + content;
  return out;
}

YAML::Node at(YAML::Node root, const std::string& path) { return liger::testing::yaml_at(root, path); }

struct FieldCase {
  std::string field;    // schema path, list items as "[]"
  std::string fixture;  // the fixture Understand analyses
  std::string path;     // the profile path edited
  std::string value;    // the new value, as YAML
  bool readonly;        // the schema refuses the edit
  std::string expect;   // editable: text the edited staging holds and the original does not ("" = any change)
};

std::ostream& operator<<(std::ostream& os, const FieldCase& c) { return os << c.field; }

std::vector<FieldCase> cases() {
  std::vector<FieldCase> out = {
      {"model_type", "tinyllama", "model_type", "tinyllama_edited", false, "\"model_type\": \"tinyllama_edited\""},
      {"source.modeling", "tinyllama", "source.modeling", "/elsewhere/modeling_x.py", true, ""},
      {"source.configuration", "tinyllama", "source.configuration", "/elsewhere/configuration_x.py", true, ""},
      {"source.resolved_from", "tinyllama", "source.resolved_from", "transformers llama", true, ""},
      // The decisions' values: each re-derives the items it governs (plan_edits.cpp).
      {"decisions.norm_type.value", "tinyllama", "decisions.norm_type.value", "LayerNorm", false,
       "\"rms_norm:TinyLlamaRMSNorm\": \"decision norm_type set to 'LayerNorm' at review\""},
      {"decisions.rms_norm_casting.value", "tinyllama", "decisions.rms_norm_casting.value", "gemma", false,
       "\"casting_mode\": \"gemma\""},
      {"decisions.rms_norm_offset.value", "tinyllama", "decisions.rms_norm_offset.value", "1", false,
       "\"offset\": 1, \"casting_mode\": \"llama\", \"in_place\": True, \"init_fn\": \"zeros\""},
      {"decisions.in_place_backward.value", "tinyllama", "decisions.in_place_backward.value", "false", false,
       "\"in_place\": False"},
      {"decisions.mlp_activation.value", "tinyllama", "decisions.mlp_activation.value", "geglu", false, "\"kind\": \"geglu\""},
      {"decisions.architecture.value", "tinyllama", "decisions.architecture.value", "moe", false, "MoeCausalLMOutputWithPast"},
      {"decisions.vision.value", "tinyllama", "decisions.vision.value", "true", false, "vision=True"},
      {"decisions.rope.value", "tinyllama", "decisions.rope.value", "interleaved", false, "\"rope\": None"},
      {"decisions.output_class.value", "tinyllama", "decisions.output_class.value", "TinyLlamaLMHeadModel", false,
       "\"causal_lm\": \"TinyLlamaLMHeadModel\""},
      {"decisions.last_hidden_state.value", "tinyllama", "decisions.last_hidden_state.value", "outputs[0]", true, ""},
      {"decisions.softcapping.value", "tinygemma", "decisions.softcapping.value", "false", false,
       "\"softcap_attr\": None,  # decision 11"},
      {"decisions.norm_names.value", "tinyllama", "decisions.norm_names.value.decoder", "[input_layernorm]", false,
       "\"attrs\": [\"input_layernorm\", \"norm\"]"},
      // The plan, as Act applies it (an applied item's note and source, a declined item's record
      // reach the integration's docstring).
      {"patch_plan.apply[].kernel", "tinyllama", "patch_plan.apply[1].kernel", "geglu", false, "\"kind\": \"geglu\""},
      {"patch_plan.apply[].target", "tinyllama", "patch_plan.apply[0].target", "OtherRMSNorm", false, "\"cls\": \"OtherRMSNorm\""},
      {"patch_plan.apply[].attributes", "tinyllama", "patch_plan.apply[0].attributes", "[norm]", false, "\"attrs\": [\"norm\"]"},
      {"patch_plan.apply[].params", "tinyllama", "patch_plan.apply[0].params.casting_mode", "none", false,
       "\"casting_mode\": \"none\""},
      {"patch_plan.apply[].reason", "tinyllama", "patch_plan.apply[2].reason", "reviewed by hand", false, "; reviewed by hand"},
      {"patch_plan.apply[].module", "tinyllama", "patch_plan.apply[2].module", "transformers.models.llama.modeling_llama", false,
       "\"rope_module\": \"transformers.models.llama.modeling_llama\""},
      {"patch_plan.apply[].source", "tinyllama", "patch_plan.apply[0].source", "models/llama/modeling_llama.py", false,
       "(read from models/llama/modeling_llama.py)"},
      {"patch_plan.declined[].kernel", "tinycohere", "patch_plan.declined[0].kernel", "rms_norm", false, "rms_norm:TinyCohereLayerNorm"},
      {"patch_plan.declined[].target", "tinycohere", "patch_plan.declined[0].target", "OtherNorm", false, "layer_norm:OtherNorm"},
      {"patch_plan.declined[].attributes", "tinycohere", "patch_plan.declined[0].attributes", "[ln_only]", false,
       "; attributes [ln_only]"},
      {"patch_plan.declined[].params", "tinycohere", "patch_plan.declined[0].params", "{eps_from: config}", false,
       "; params {eps_from: config}"},
      {"patch_plan.declined[].reason", "tinycohere", "patch_plan.declined[0].reason", "kept by review", false,
       "\"layer_norm:TinyCohereLayerNorm\": \"kept by review\""},
      {"patch_plan.declined[].module", "tinycohere", "patch_plan.declined[0].module", "transformers.models.x.modeling_x", false,
       "; module transformers.models.x.modeling_x"},
      {"patch_plan.declined[].source", "tinycohere", "patch_plan.declined[0].source", "models/x/modeling_x.py", false,
       "(read from models/x/modeling_x.py)"},
      {"patch_plan.derived_from", "tinyllama", "patch_plan.derived_from.rope", "none", true, ""},
      {"reference_integration.name", "tinyllama", "reference_integration.name", "gemma", false, "FAMILY = \"gemma\""},
      {"reference_integration.reason", "tinyllama", "reference_integration.reason", "chosen by review", false,
       "(chosen by review)"},
      {"mini_model.config_class", "tinyllama", "mini_model.config_class", "OtherConfig", false, "\"OtherConfig\""},
      {"mini_model.model_type", "tinyllama", "mini_model.model_type", "other", true, ""},
      {"mini_model.attributes", "tinyllama", "mini_model.attributes.vocab_size", "2048", false, "2048"},
      {"undecided", "tinyllama", "undecided", "[rope]", true, ""},
      {"warnings", "tinyllama", "warnings", "[edited]", true, ""},
      {"generation.module", "tinyllama", "generation.module", "tinyllama_b", false, "apply_liger_kernel_to_tinyllama_b"},
      {"generation.mode", "tinyllama", "generation.mode", "modify", true, ""},
      {"generation.integration", "tinyllama", "generation.integration", kPkg + "/tinyllama_b.py", false, "== " + kPkg + "/tinyllama_b.py"},
      {"generation.profile_sidecar", "tinyllama", "generation.profile_sidecar", kPkg + "/tinyllama_b.autopatch.yaml", false,
       "tinyllama_b.autopatch.yaml"},
      {"generation.test", "tinyllama", "generation.test", "tests/python/test_other.py", false, "== tests/python/test_other.py"},
      {"generation.registry", "tinyllama", "generation.registry", kPkg + "/registry_copy.py", false,
       "== " + kPkg + "/registry_copy.py"},
      {"generation.readme", "tinyllama", "generation.readme", "docs/python_copy.md", false, "== docs/python_copy.md"},
      {"generation.kernels_filter", "tinyllama", "generation.kernels_filter", "[rms_norm]", false, "left out by --kernels"},
      {"change_impact", "tinyllama", "change_impact", "{summary: edited}", true, ""},
  };
  // A decision's record of the source, the same for all 12: read-only.
  const std::vector<std::pair<std::string, std::string>> record = {
      {"number", ""}, {"confidence", "0.5"}, {"source", "elsewhere.py:1"},
      {"evidence", "[{file: x.py, line: 1, fragment: y}]"}, {"details", "{edited: true}"}, {"notes", "[edited]"}};
  int number = 0;
  for (const auto& key : ap::decision_keys()) {
    ++number;
    for (auto [field, value] : record) {
      if (field == "number") value = std::to_string(number % 12 + 1);  // another decision's number
      out.push_back({"decisions." + key + "." + field, "tinyllama", "decisions." + key + "." + field, value, true, ""});
    }
  }
  return out;
}

class AutopatchProfileField : public ::testing::TestWithParam<FieldCase> {};

TEST_P(AutopatchProfileField, EditDrivesTheStagedFilesOrIsRefusedAsReadOnly) {
  const FieldCase& c = GetParam();
  const YAML::Node before = base(c.fixture);
  YAML::Node after = YAML::Clone(before);
  at(after, c.path) = YAML::Load(c.value);
  ASSERT_NE(YAML::Dump(at(YAML::Clone(before), c.path)), YAML::Dump(at(after, c.path))) << "the edit changes nothing";

  const auto readonly = schema().readonly_changes(before, after);
  if (c.readonly) {
    // Refused, naming the field and why: what a reviewer sees at approve or resume.
    ASSERT_EQ(readonly.size(), 1u) << c.field << " is editable in the schema, but Act does not follow it";
    EXPECT_EQ(c.path.rfind(readonly.front().path, 0), 0u) << readonly.front().path;
    EXPECT_NE(readonly.front().message.find("read-only field was edited: "), std::string::npos);
    EXPECT_GT(readonly.front().message.size(), std::string("read-only field was edited: ").size() + 10);
    return;
  }
  ASSERT_TRUE(readonly.empty()) << readonly.front().format("profile.yaml");
  const auto report = schema().validate(after);
  ASSERT_TRUE(report.ok()) << "the edit must be one the schema accepts:\n" << report.format_errors("profile.yaml");
  const std::string original = all_of(staged(c.fixture, before));
  const std::string edited = all_of(staged(c.fixture, after));
  EXPECT_NE(original, edited) << c.field << " is editable but the staged code is byte-identical: make Act follow it, or "
                                          "mark it readonly with a reason in skills/autopatch/profile.schema.yaml";
  EXPECT_NE(edited.find(c.expect), std::string::npos) << c.field << ": expected '" << c.expect << "' in\n" << edited;
  if (!c.expect.empty()) EXPECT_EQ(original.find(c.expect), std::string::npos) << c.expect;
}

INSTANTIATE_TEST_SUITE_P(EveryField, AutopatchProfileField, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<FieldCase>& info) {
                           std::string name;
                           for (char ch : info.param.field) name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return name;
                         });

// The leaf fields a schema declares ("a.b", "list[].c"); a read-only node is one field.
void leaf_fields(const YAML::Node& node, const std::string& path, std::set<std::string>& out) {
  if (node["readonly"] && node["readonly"].as<bool>()) {
    out.insert(path);
  } else if (node["fields"]) {
    for (const auto& entry : node["fields"])
      leaf_fields(entry.second, path.empty() ? entry.first.Scalar() : path + "." + entry.first.Scalar(), out);
  } else if (node["items"] && node["items"]["fields"]) {
    leaf_fields(node["items"], path + "[]", out);
  } else {
    out.insert(path);
  }
}

TEST(AutopatchProfileFields, TheCasesCoverEverySchemaField) {
  std::set<std::string> fields;
  leaf_fields(YAML::LoadFile((kSource / "skills/autopatch/profile.schema.yaml").string()), "", fields);
  std::set<std::string> covered;
  for (const auto& c : cases()) covered.insert(c.field);
  for (const auto& field : fields) EXPECT_TRUE(covered.count(field)) << "no edit case for schema field " << field;
  for (const auto& field : covered) EXPECT_TRUE(fields.count(field)) << "edit case for a field the schema lacks: " << field;
}

// An edit the plan cannot follow is refused with the field and the fix, never ignored.
TEST(AutopatchProfileFields, DecisionEditsThePlanCannotFollowAreRefused) {
  auto refused = [](const std::string& fixture, const std::string& key, const std::string& value) {
    YAML::Node p = base(fixture);
    p["decisions"][key]["value"] = YAML::Load(value);
    try {
      staged(fixture, p);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Usage);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  // No LayerNorm class to add.
  EXPECT_NE(refused("tinyllama", "norm_type", "both").find("decisions.norm_type.value"), std::string::npos);
  // The layout (one gate_up projection or two) is the source's.
  EXPECT_NE(refused("tinyllama", "mlp_activation", "fused_swiglu").find("projections"), std::string::npos);
  // Not one of the decision's values.
  EXPECT_NE(refused("tinyllama", "rope", "sideways").find("is not one of"), std::string::npos);
  // Soft-capping needs the config attribute the analysis did not find.
  EXPECT_NE(refused("tinyllama", "softcapping", "true").find("config attribute"), std::string::npos);
  // An attribute the source does not assign.
  EXPECT_NE(refused("tinyllama", "norm_names", "{decoder: [ln_x], attention: [], final: norm}").find("ln_x"), std::string::npos);
}

// The fused loss's logit factors are the applied item's params.logits_scale: an edit changes what the
// shared forward scales by, and text that is not '<op> <factor>' pairs is refused naming the field.
TEST(AutopatchProfileFields, TheLogitsScaleParamDrivesTheForwardAndBadTextIsRefused) {
  const YAML::Node before = base("tinycohere");
  auto edited = [&](const std::string& text) {
    YAML::Node p = YAML::Clone(before);
    for (auto it : p["patch_plan"]["apply"])
      if (it["kernel"].as<std::string>() == "fused_linear_cross_entropy") it["params"]["logits_scale"] = text;
    return p;
  };
  const std::string original = all_of(staged("tinycohere", before));
  EXPECT_NE(original.find("\"logits_scale\": [(\"*\", \"logit_scale\")]"), std::string::npos) << original;
  const std::string more = all_of(staged("tinycohere", edited("* logit_scale / config.extra_scale")));
  EXPECT_NE(more.find("\"logits_scale\": [(\"*\", \"logit_scale\"), (\"/\", \"config.extra_scale\")]"), std::string::npos)
      << more;
  EXPECT_NE(all_of(staged("tinycohere", edited("* .5 / 2e-1"))).find("[(\"*\", \".5\"), (\"/\", \"2e-1\")]"),
            std::string::npos)
      << "every literal the analysis folds renders";
  EXPECT_EQ(all_of(staged("tinycohere", edited(""))).find("\"logits_scale\""), std::string::npos)
      << "an empty param renders no factor";
  for (const std::string bad : {"+ logit_scale", "* logit_scale /", "* __import__('os')", "logit_scale"}) {
    try {
      staged("tinycohere", edited(bad));
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Usage);
      EXPECT_NE(std::string(e.what()).find("params.logits_scale"), std::string::npos) << e.what();
    }
  }
}

// Deciding what the analysis left undecided applies the part it declined for want of the answer;
// switching a part off and on again restores the plan.
TEST(AutopatchProfileFields, DecidingAnUndecidedDecisionAppliesItsPart) {
  YAML::Node p = base("tinyrope");
  ASSERT_TRUE(profile::is_undecided(p["decisions"]["rms_norm_casting"]["value"]));
  p["decisions"]["rms_norm_casting"]["value"] = "llama";
  p["decisions"]["rms_norm_offset"]["value"] = 0;
  EXPECT_TRUE(schema().readonly_changes(base("tinyrope"), p).empty());
  const std::string code = all_of(staged("tinyrope", p));
  EXPECT_NE(code.find("{\"cls\": \"TinyRopeRMSNorm\", \"attrs\": "), std::string::npos) << code;
  EXPECT_NE(code.find("\"casting_mode\": \"llama\""), std::string::npos);

  YAML::Node rope = base("tinyllama");
  rope["decisions"]["rope"]["value"] = "none";
  YAML::Node back = ap::apply_decision_edits(rope);
  back["decisions"]["rope"]["value"] = "standard";
  EXPECT_EQ(all_of(staged("tinyllama", back)), all_of(staged("tinyllama", base("tinyllama"))));
}

// The reference integration follows the decisions its rule reads, unless the reviewer chose it.
TEST(AutopatchProfileFields, TheReferenceIntegrationFollowsTheDecisions) {
  YAML::Node p = base("tinyllama");
  p["decisions"]["architecture"]["value"] = "moe";
  EXPECT_EQ(ap::apply_decision_edits(p)["reference_integration"]["name"].as<std::string>(), "moe");
  p["reference_integration"]["name"] = "gemma";
  EXPECT_EQ(ap::apply_decision_edits(p)["reference_integration"]["name"].as<std::string>(), "gemma");
}

// At approve/resume the engine compares the profile with the one Understand wrote: an edited
// record is refused naming the field and the schema's reason.
TEST(AutopatchProfileFields, ApproveRefusesAnEditedRecordWithTheReason) {
  const fs::path dir = scratch().root / "approve";
  fs::create_directories(dir);
  const YAML::Node understood = base("tinyllama");
  util::write_file_atomic(engine::understood_profile_path(dir / "profile.yaml"), YAML::Dump(understood) + "\n");
  YAML::Node edited = YAML::Clone(understood);
  edited["decisions"]["rope"]["evidence"][0]["line"] = 1;
  util::write_file_atomic(dir / "profile.yaml", YAML::Dump(edited) + "\n");
  try {
    engine::validate_profile_file(dir / "profile.yaml", schema());
    FAIL() << "an edited evidence line was accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("decisions.rope.evidence"), std::string::npos) << what;
    EXPECT_NE(what.find("evidence is recorded from the source; edit value instead"), std::string::npos) << what;
  }
  edited = YAML::Clone(understood);
  edited["decisions"]["rope"]["value"] = "none";
  util::write_file_atomic(dir / "profile.yaml", YAML::Dump(edited) + "\n");
  EXPECT_NO_THROW(engine::validate_profile_file(dir / "profile.yaml", schema()));
}

}  // namespace
