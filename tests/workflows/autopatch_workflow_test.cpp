// autopatch end to end through the engine (--yes semantics) on the synthetic fixtures, in a temporary
// tree holding the package __init__.py and docs/python.md: the staged files are applied, the generated
// Python compiles, the registry line lands in sorted order, declined parts are absent from the apply
// function and named in the report, modify mode regenerates only what changed, and Verify says
// "not run" (never "passed") where torch is missing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>
#include <unistd.h>

#include "liger/config.h"
#include "liger/engine.h"
#include "liger/error.h"
#include "liger/util.h"
#include "liger/workflows.h"
#include "workflows/autopatch/workflow.h"

#include "committed_tree.h"

namespace fs = std::filesystem;
using namespace liger;

namespace {

fs::path repo() { return fs::path(LIGER_SOURCE_DIR); }
fs::path fixture(const std::string& name) {
  return repo() / "tests/workflows/fixtures/autopatch" / name / ("modeling_" + name + ".py");
}
const char* kPkg = "kernels/python/liger_kernels/transformers";

bool has_python() { return std::system("python3 -c 'import sys' >/dev/null 2>&1") == 0; }
bool has_torch() { return std::system("python3 -c 'import torch' >/dev/null 2>&1") == 0; }

struct Tree {
  fs::path root;
  fs::path tree, runs;
  Config config = Config::defaults();
  engine::WorkflowRegistry registry;

  Tree() {
    std::string pattern = (fs::temp_directory_path() / "autopatch-wf-XXXXXX").string();
    root = ::mkdtemp(pattern.data());
    tree = root / "repo";
    runs = root / "runs";
    // As committed: integrations autopatch has since added to the checkout are not the baseline.
    liger::testing::copy_committed(repo(), {std::string(kPkg) + "/__init__.py", "docs/python.md"}, tree);
    registry.add(autopatch::make_workflow());
  }
  ~Tree() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  engine::RunOutcome run(const std::string& name, nlohmann::json extra = nlohmann::json::object()) {
    engine::EngineOptions o;
    o.run_root = runs;
    o.checkpoints = engine::CheckpointPolicy::AutoApprove;
    o.config = &config;
    o.quiet = true;
    engine::RunRequest r;
    r.workflow = "autopatch";
    r.label = name;
    r.tree_root = tree;
    r.arguments = {{"model", fixture(name).string()}};
    for (auto& [k, v] : extra.items()) r.arguments[k] = v;
    engine::Engine e(registry, o);
    return e.start(r);
  }
  std::string read(const std::string& rel) const { return util::read_file(tree / rel); }
};

// The body of `def apply_liger_kernel_to_<m>(...)` up to the next top-level def.
std::string apply_function(const std::string& module_text, const std::string& module) {
  const auto b = module_text.find("def apply_liger_kernel_to_" + module + "(");
  EXPECT_NE(b, std::string::npos);
  const auto e = module_text.find("\ndef ", b + 1);
  return module_text.substr(b, e - b);
}

void expect_compiles(const fs::path& file) {
  if (!has_python()) GTEST_SKIP() << "python3 not found";
  const std::string cmd = "python3 -m py_compile '" + file.string() + "'";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << file;
}

}  // namespace

TEST(AutopatchWorkflow, RegisteredAsBuiltin) {
  engine::WorkflowRegistry registry;
  workflows::register_builtin_workflows(registry);
  const auto* w = registry.find("autopatch");
  ASSERT_NE(w, nullptr);
  EXPECT_TRUE(w->has_all_stages());
}

class AutopatchFixtureRun : public ::testing::TestWithParam<std::string> {};

TEST_P(AutopatchFixtureRun, GeneratesAppliesAndReports) {
  const std::string name = GetParam();
  Tree t;
  const auto out = t.run(name);
  ASSERT_EQ(out.status, "completed") << out.message;
  const std::string mod = std::string(kPkg) + "/" + name + ".py";
  const std::string test = "tests/python/test_autopatch_" + name + ".py";
  for (const auto& rel : {mod, std::string(kPkg) + "/" + name + ".autopatch.yaml", test})
    EXPECT_TRUE(fs::exists(t.tree / rel)) << rel;
  expect_compiles(t.tree / mod);
  expect_compiles(t.tree / test);
  expect_compiles(t.tree / kPkg / "__init__.py");

  const std::string text = t.read(mod);
  EXPECT_NE(text.find("# autopatch-profile: " + name + ".autopatch.yaml"), std::string::npos);
  EXPECT_NE(text.find("def revert_liger_kernel_to_" + name + "("), std::string::npos);
  // The fused-loss forward is the shared one, configured by the SPEC, not a copy per model.
  EXPECT_NE(text.find("lce_forward = _autopatch.make_lce_forward(SPEC)"), std::string::npos);
  EXPECT_EQ(text.find("def lce_forward("), std::string::npos);
  EXPECT_NE(t.read(test).find("_autopatch_testing.install("), std::string::npos);

  // Registry: the line exists, and the block stays sorted.
  const std::string init = t.read(std::string(kPkg) + "/__init__.py");
  EXPECT_NE(init.find("_register_module(\"" + name + "\", \"" + name + "\")"), std::string::npos);
  std::vector<std::string> keys;
  std::regex line_re(R"RE(_register_module\("([^"]+)")RE");
  for (std::sregex_iterator it(init.begin(), init.end(), line_re), end; it != end; ++it) keys.push_back((*it)[1]);
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  EXPECT_GE(keys.size(), 3u);
  // README row.
  EXPECT_NE(t.read("docs/python.md").find("| `" + name + "` | `liger_kernels.transformers." + name + "`"), std::string::npos);

  // Verify on a machine without torch: "not run", never passed.
  const std::string report = util::read_file(out.run_dir / "report.md");
  const std::string verify = util::read_file(out.run_dir / "autopatch" / "verify.md");
  if (!has_torch()) {
    EXPECT_NE(report.find("not run: import check: torch not installed"), std::string::npos) << report;
    EXPECT_NE(report.find("not run: instance test"), std::string::npos);
    EXPECT_NE(verify.find("verdict: **unverified"), std::string::npos) << verify;
    EXPECT_EQ(verify.find("| instance test | passed"), std::string::npos);
  }
  if (has_python()) EXPECT_NE(verify.find("| py_compile | passed"), std::string::npos) << verify;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, AutopatchFixtureRun,
                         ::testing::Values("tinyllama", "tinygemma", "tinymoe", "tinyds", "tinyvl", "tinycohere"));

TEST(AutopatchWorkflow, GemmaLikeGetsGemmaNormsGegluAndSoftcap) {
  Tree t;
  ASSERT_EQ(t.run("tinygemma").status, "completed");
  const std::string text = t.read(std::string(kPkg) + "/tinygemma.py");
  EXPECT_NE(text.find("\"offset\": 1, \"casting_mode\": \"gemma\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"init_fn\": \"zeros\""), std::string::npos);
  EXPECT_NE(text.find("\"kind\": \"geglu\""), std::string::npos);
  EXPECT_NE(text.find("geglu: bool = True"), std::string::npos);
  EXPECT_EQ(text.find("swiglu: bool"), std::string::npos);
  const auto profile = YAML::LoadFile((t.tree / kPkg / "tinygemma.autopatch.yaml").string());
  if (profile["decisions"]["softcapping"]["value"].as<bool>())
    EXPECT_NE(text.find("\"softcap_attr\": \""), std::string::npos);
  else
    EXPECT_NE(text.find("\"softcap_attr\": None"), std::string::npos);
  if (!profile["decisions"]["in_place_backward"]["value"].as<bool>())
    EXPECT_NE(text.find("\"in_place\": False"), std::string::npos);
}

TEST(AutopatchWorkflow, MoeLikeUsesMoeOutputAndAuxLoss) {
  Tree t;
  ASSERT_EQ(t.run("tinymoe").status, "completed");
  const std::string text = t.read(std::string(kPkg) + "/tinymoe.py");
  EXPECT_NE(text.find("\"output_class\": \"MoeCausalLMOutputWithPast\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"moe\": True"), std::string::npos);
  // The shared forward adds the router loss when SPEC["forward"]["moe"] says so.
  const std::string shared = util::read_file(repo() / kPkg / "_autopatch.py");
  EXPECT_NE(shared.find("load_balancing_loss_func"), std::string::npos);
  EXPECT_NE(shared.find("if moe:"), std::string::npos);
}

// Convergence tolerances are per model family (the reference integration): a bf16 MoE's parameters
// get a 5e-2 relative-norm bound (top-k routing flips move expert weights further than a dense
// MLP's; H100: Qwen3-MoE experts.gate_up_proj 2.54e-2 / 2.69e-2 against 2e-2), everything else is
// the Llama integration's table. The table lives once, in the shared test harness; each generated
// test names its family.
TEST(AutopatchWorkflow, ConvergenceToleranceFollowsTheModelFamily) {
  Tree t;
  for (const auto& [name, family] : std::vector<std::pair<std::string, std::string>>{
           {"tinyllama", "llama"}, {"tinygemma", "gemma"}, {"tinymoe", "moe"}}) {
    ASSERT_EQ(t.run(name).status, "completed") << name;
    const auto profile = YAML::LoadFile((t.tree / kPkg / (name + ".autopatch.yaml")).string());
    ASSERT_EQ(profile["reference_integration"]["name"].as<std::string>(), family) << name;
    const std::string test = t.read("tests/python/test_autopatch_" + name + ".py");
    EXPECT_NE(test.find("\nFAMILY = \"" + family + "\"\n"), std::string::npos) << name;
    EXPECT_NE(test.find("    family=FAMILY,\n"), std::string::npos) << name;
    EXPECT_EQ(test.find("CONV_TOL"), std::string::npos) << name << ": the tolerance table is the harness's";
  }
  const std::string harness = util::read_file(repo() / kPkg / "_autopatch_testing.py");
  // Every family of the profile schema's enum has an entry; only moe changes anything, in bf16.
  for (const char* f : {"llama", "gemma", "moe"})
    EXPECT_NE(harness.find(std::string("\n    \"") + f + "\": "), std::string::npos) << f;
  EXPECT_NE(harness.find("    \"moe\": {torch.bfloat16: dict(params=(2e-2, 2e-2, 5e-2))},\n"), std::string::npos);
  EXPECT_NE(harness.find("params=(2e-2, 2e-2, 2e-2)),\n"), std::string::npos) << "the dense bf16 row changed";
  EXPECT_NE(harness.find("params=(5e-3, 1e-4, 1e-3)),\n"), std::string::npos) << "the fp32 row changed";
  EXPECT_NE(harness.find("tol = conv_tol(dtype, family)\n"), std::string::npos);
}

// Every committed integration test is a generated one: it installs the shared harness and carries
// no test code of its own (a copy would drift from the harness's tolerances).
TEST(AutopatchWorkflow, CommittedIntegrationTestsUseTheSharedHarness) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(repo() / "tests/python")) {
    const std::string f = e.path().filename().string();
    if (f.rfind("test_autopatch_", 0) != 0 || e.path().extension() != ".py") continue;
    ++n;
    const std::string text = util::read_file(e.path());
    EXPECT_NE(text.find("_autopatch_testing.install(\n    globals(),"), std::string::npos) << f;
    EXPECT_EQ(text.find("def test_convergence("), std::string::npos) << f;
    EXPECT_EQ(text.find("CONV_TOL"), std::string::npos) << f;
    EXPECT_NE(text.find("pytest.importorskip(\"torch\""), std::string::npos) << f << ": must skip without torch";
  }
  EXPECT_GT(n, 0);
}

TEST(AutopatchWorkflow, DeclinedPartsAreAbsentFromApplyAndNamedInReport) {
  Tree t;
  const auto out = t.run("tinyds");  // MoE with fused 3-D experts and a non-standard RoPE
  ASSERT_EQ(out.status, "completed") << out.message;
  const std::string text = t.read(std::string(kPkg) + "/tinyds.py");
  const std::string apply = apply_function(text, "tinyds");
  EXPECT_EQ(apply.find("rope"), std::string::npos) << apply;
  EXPECT_NE(text.find("\"rope\": None"), std::string::npos);
  const std::string declined = text.substr(text.find("DECLINED = {"), text.find("\n}\n", text.find("DECLINED = {")) - text.find("DECLINED = {"));
  EXPECT_NE(declined.find("\"rope:apply_rotary_pos_emb"), std::string::npos) << declined;
  EXPECT_NE(declined.find("\"swiglu:"), std::string::npos) << declined;
  const std::string report = util::read_file(out.run_dir / "report.md");
  EXPECT_NE(report.find("declined on purpose: rope"), std::string::npos) << report;
  EXPECT_NE(report.find("declined on purpose: swiglu"), std::string::npos);
}

TEST(AutopatchWorkflow, CohereLikeKeepsItsLayerNormAndFoldsItsLogitScale) {
  Tree t;
  ASSERT_EQ(t.run("tinycohere").status, "completed");
  const std::string text = t.read(std::string(kPkg) + "/tinycohere.py");
  const std::string apply = apply_function(text, "tinycohere");
  EXPECT_EQ(apply.find("layer_norm"), std::string::npos) << apply;
  // `logits * self.logit_scale` folds into the fused loss: the SPEC carries the factor the
  // shared forward scales the hidden state by, and the docstring says so.
  EXPECT_NE(apply.find("fused_linear_cross_entropy: bool = True"), std::string::npos) << apply;
  EXPECT_NE(text.find("\"logits_scale\": [(\"*\", \"logit_scale\")],"), std::string::npos) << text;
  EXPECT_NE(text.find("(logits scaled * logit_scale, folded into the hidden state)"), std::string::npos) << text;
}

TEST(AutopatchWorkflow, KernelsFilterDeclinesTheRest) {
  Tree t;
  ASSERT_EQ(t.run("tinyllama", {{"kernels", "rms_norm,swiglu"}}).status, "completed");
  const std::string apply = apply_function(t.read(std::string(kPkg) + "/tinyllama.py"), "tinyllama");
  EXPECT_NE(apply.find("rms_norm: bool"), std::string::npos);
  EXPECT_NE(apply.find("swiglu: bool"), std::string::npos);
  EXPECT_EQ(apply.find("rope"), std::string::npos);
  EXPECT_EQ(apply.find("fused_linear_cross_entropy"), std::string::npos);
  EXPECT_NE(t.read(std::string(kPkg) + "/tinyllama.py").find("left out by --kernels"), std::string::npos);
}

TEST(AutopatchWorkflow, ModifyModeRegeneratesOnlyWhatChanged) {
  Tree t;
  ASSERT_EQ(t.run("tinyllama").status, "completed");
  const std::string mod = std::string(kPkg) + "/tinyllama.py";
  const std::string sidecar = std::string(kPkg) + "/tinyllama.autopatch.yaml";

  // Same source again: change impact "no change", nothing regenerated.
  auto again = t.run("tinyllama", {{"modify", true}});
  ASSERT_EQ(again.status, "completed") << again.message;
  YAML::Node p = YAML::LoadFile((again.run_dir / "profile.yaml").string());
  {
    YAML::Emitter e;
    e << p["change_impact"];
    SCOPED_TRACE(e.c_str());
    EXPECT_EQ(p["change_impact"]["decisions_changed"].size(), 0u) << e.c_str();
  }
  EXPECT_EQ(p["generation"]["mode"].as<std::string>(), "modify");
  EXPECT_EQ(p["change_impact"]["decisions_changed"].size(), 0u);
  EXPECT_EQ(p["change_impact"]["regenerate"].size(), 0u);
  const auto state = engine::read_run_state(again.run_dir);
  ASSERT_TRUE(state.contains("staged_files")) << state.dump();
  for (const auto& f : state["staged_files"]) {
    EXPECT_NE(f.get<std::string>(), mod) << "the unchanged integration was restaged";
    EXPECT_NE(f.get<std::string>(), "tests/python/test_autopatch_tinyllama.py");
  }

  // The recorded profile says offset 1: the new analysis (offset 0) is a change; the module is regenerated.
  YAML::Node old = YAML::LoadFile((t.tree / sidecar).string());
  old["decisions"]["rms_norm_offset"]["value"] = 1;
  {
    YAML::Emitter e;
    e << old;
    util::write_file_atomic(t.tree / sidecar, std::string(e.c_str()) + "\n");
  }
  util::write_file_atomic(t.tree / mod, t.read(mod) + "# stale\n");
  auto changed = t.run("tinyllama", {{"modify", true}});
  ASSERT_EQ(changed.status, "completed") << changed.message;
  p = YAML::LoadFile((changed.run_dir / "profile.yaml").string());
  ASSERT_EQ(p["change_impact"]["decisions_changed"].size(), 1u);
  EXPECT_EQ(p["change_impact"]["decisions_changed"][0]["decision"].as<std::string>(), "rms_norm_offset");
  EXPECT_EQ(t.read(mod).find("# stale"), std::string::npos);
  EXPECT_EQ(YAML::LoadFile((t.tree / sidecar).string())["decisions"]["rms_norm_offset"]["value"].as<int>(), 0);
}

TEST(AutopatchWorkflow, RefusesToOverwriteAHandWrittenIntegration) {
  Tree t;
  util::write_file_atomic(t.tree / kPkg / "tinyllama.py", "# hand-written\n");
  EXPECT_THROW(t.run("tinyllama"), Error);
  EXPECT_EQ(t.read(std::string(kPkg) + "/tinyllama.py"), "# hand-written\n");
  // Beside it with --module: generated, not registered over the hand-written one.
  auto out = t.run("tinyllama", {{"module", "tinyllama_autopatch"}});
  ASSERT_EQ(out.status, "completed") << out.message;
  EXPECT_TRUE(fs::exists(t.tree / kPkg / "tinyllama_autopatch.py"));
  EXPECT_EQ(t.read(std::string(kPkg) + "/__init__.py").find("\"tinyllama\""), std::string::npos);
  expect_compiles(t.tree / kPkg / "tinyllama_autopatch.py");
}

TEST(AutopatchWorkflow, ModifyWithoutAnIntegrationIsAUsageError) {
  Tree t;
  EXPECT_THROW(t.run("tinyllama", {{"modify", true}}), Error);
}

TEST(AutopatchPieces, RegistryLineInsertedInOrderAndIdempotent) {
  const std::string init =
      "x = 1\n# BEGIN autopatch registry\n_register_module(\"gemma\", \"gemma\")\n_register_module(\"qwen3_moe\", "
      "\"qwen3_moe\")\n# END autopatch registry\ny = 2\n";
  const std::string once = autopatch::insert_registry_line(init, "mistral", "mistral");
  EXPECT_EQ(once,
            "x = 1\n# BEGIN autopatch registry\n_register_module(\"gemma\", \"gemma\")\n_register_module(\"mistral\", "
            "\"mistral\")\n_register_module(\"qwen3_moe\", \"qwen3_moe\")\n# END autopatch registry\ny = 2\n");
  EXPECT_EQ(autopatch::insert_registry_line(once, "mistral", "mistral"), once);
  EXPECT_NE(autopatch::insert_registry_line(init, "aaa", "aaa").find("registry\n_register_module(\"aaa\""), std::string::npos);
  EXPECT_THROW(autopatch::insert_registry_line("no markers\n", "a", "a"), Error);
}

TEST(AutopatchPieces, ConvergenceFailuresAreClassified) {
  using autopatch::classify_pytest_failure;
  EXPECT_EQ(classify_pytest_failure("AssertionError: per-step losses: 3/20 elements outside atol=0.05 rtol=0.02 (max abs err 6.1e-02, rel norm 1.2e-02)"),
            "tolerance");
  EXPECT_EQ(classify_pytest_failure("AssertionError: last-step logits: relative error norm 6.0e-02 > 5.0e-02"), "tolerance");
  EXPECT_EQ(classify_pytest_failure("AssertionError: last-step logits: shape (4, 64, 1024) != reference (4, 63, 1024)"), "hard");
  EXPECT_EQ(classify_pytest_failure("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"), "hard");
  EXPECT_EQ(classify_pytest_failure("KeyError: 'model.layers.0.mlp.gate_proj.weight'"), "hard");
  EXPECT_EQ(classify_pytest_failure("AssertionError: per-step losses: non-finite values in the output"), "hard");
  EXPECT_EQ(classify_pytest_failure(""), "hard");
}

TEST(AutopatchPieces, ChangeImpactListsDecisionsAndPlan) {
  YAML::Node a = YAML::Load(
      "decisions: {rope: {value: standard}, softcapping: {value: false}}\n"
      "patch_plan: {apply: [{kernel: rope, target: apply_rotary_pos_emb}], declined: []}\nmini_model: {a: 1}\n");
  YAML::Node b = YAML::Load(
      "decisions: {rope: {value: partial}, softcapping: {value: false}}\n"
      "patch_plan: {apply: [], declined: [{kernel: rope, target: apply_rotary_pos_emb, reason: partial}]}\nmini_model: {a: 1}\n");
  YAML::Node ci = autopatch::compute_change_impact(a, b);
  bool rope_changed = false;
  for (const auto& c : ci["decisions_changed"])
    if (c["decision"].as<std::string>() == "rope") rope_changed = true;
  EXPECT_TRUE(rope_changed);
  EXPECT_EQ(ci["patch_plan_changed"].size(), 2u);
  EXPECT_EQ(ci["regenerate"][0].as<std::string>(), "integration");
  EXPECT_FALSE(ci["mini_model_changed"].as<bool>());
}

TEST(AutopatchWorkflow, UndecidedDecisionsStopAtTheProfileCheckpointEvenWithYes) {
  Tree t;
  const auto out = t.run("tinyrope");  // a norm whose casting/offset the analysis cannot decide
  EXPECT_EQ(out.status, "awaiting_approval") << out.message;
  EXPECT_EQ(out.pending_checkpoint, "profile");
  EXPECT_FALSE(out.undecided.empty());
  EXPECT_FALSE(fs::exists(t.tree / kPkg / "tinyrope.py"));
}

TEST(AutopatchWorkflow, WrapperTextKernelsArePatchedInTheBackboneModule) {
  // llava's text model is llama's (AutoModel.from_config(config.text_config)): the SPEC entries
  // name transformers.models.llama.modeling_llama, and the test looks the classes up there.
  Tree t;
  const fs::path llava = repo() / "tests/workflows/fixtures/autopatch/zoo/models/llava/modeling_llava.py";
  const auto out = t.run("llava", {{"model", llava.string()}});
  ASSERT_EQ(out.status, "completed") << out.message;
  const std::string text = t.read(std::string(kPkg) + "/llava.py");
  EXPECT_NE(text.find("{\"cls\": \"LlamaRMSNorm\", \"attrs\": [\"input_layernorm\", \"post_attention_layernorm\", \"norm\"], "
                      "\"offset\": 0, \"casting_mode\": \"llama\", \"in_place\": True, \"init_fn\": \"ones\", "
                      "\"module\": \"transformers.models.llama.modeling_llama\"}"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\"rope_module\": \"transformers.models.llama.modeling_llama\""), std::string::npos);
  EXPECT_NE(text.find("\"causal_lm\": \"LlavaForConditionalGeneration\""), std::string::npos);
  const std::string test = t.read("tests/python/test_autopatch_llava.py");
  EXPECT_NE(test.find("(\"rms_norm\", \"LlamaRMSNorm\", \"transformers.models.llama.modeling_llama\"),"),
            std::string::npos)
      << test;
  // The CPU build check is the shared harness's; this file hands it the mini config.
  EXPECT_NE(test.find("_autopatch_testing.install("), std::string::npos);
  const std::string harness = util::read_file(repo() / kPkg / "_autopatch_testing.py");
  EXPECT_NE(harness.find("def test_mini_model_builds_on_cpu():"), std::string::npos);
  EXPECT_NE(harness.find("MINI-CONFIG-FIX"), std::string::npos);
  EXPECT_NE(test.find("image_token_index: 32000 -> 1023"), std::string::npos) << "derivations quoted in the test";
  // A vision tower: the harness adds the image-and-text convergence test, which builds its image
  // inputs from the vision config (no per-model code in the rendered file).
  EXPECT_NE(test.find("    vision=True,\n)"), std::string::npos) << test;
  EXPECT_EQ(test.find("pytest.mark.skip"), std::string::npos) << test;
  EXPECT_NE(harness.find("def test_convergence_multimodal(dtype):"), std::string::npos);
  EXPECT_NE(harness.find("def pixel_layouts(cfg, n_images)"), std::string::npos);
  expect_compiles(t.tree / kPkg / "llava.py");
  expect_compiles(t.tree / "tests/python/test_autopatch_llava.py");
}

TEST(AutopatchPieces, CpuBuildDiagnosisBecomesTheNextAttemptsMiniConfig) {
  // What the generated test prints when the mini model does not build (Phi-3 before the mini
  // config derived token ids): the fix lines name the field, its value and the repaired value.
  const std::string log =
      "FAILED tests/python/test_autopatch_phi3.py::test_mini_model_builds_on_cpu - MINI-CONFIG-BUILD: building "
      "Phi3ForCausalLM on CPU raised AssertionError: Padding_idx must be within num_embeddings\n"
      "MINI-CONFIG-FIX pad_token_id=1023 (pad_token_id=32000: outside vocab_size=1024)\n"
      "MINI-CONFIG-FIX text_config.cross_attention_layers=[1] (text_config.cross_attention_layers=[3, 8]: indices past "
      "num_hidden_layers=2)\n"
      "MINI-CONFIG-FIX pad_token_id=1023 (repeated in the short summary)\n";
  YAML::Node fixes = autopatch::parse_mini_config_fixes(log);
  ASSERT_EQ(fixes.size(), 2u);
  EXPECT_EQ(fixes["pad_token_id"].as<std::string>(), "1023");
  EXPECT_EQ(fixes["text_config.cross_attention_layers"].as<std::string>(), "[1]");
  YAML::Node profile;
  profile["mini_model"]["attributes"]["vocab_size"] = 1024;
  profile["mini_model"]["attributes"]["text_config"]["num_hidden_layers"] = 2;
  YAML::Node fixed = autopatch::apply_mini_config_fixes(profile, fixes);
  EXPECT_EQ(fixed["mini_model"]["attributes"]["pad_token_id"].as<int>(), 1023);
  ASSERT_TRUE(fixed["mini_model"]["attributes"]["text_config"]["cross_attention_layers"].IsSequence());
  EXPECT_EQ(fixed["mini_model"]["attributes"]["text_config"]["cross_attention_layers"][0].as<int>(), 1);
  EXPECT_EQ(fixed["mini_model"]["derivations"].size(), 2u);
  EXPECT_FALSE(profile["mini_model"]["attributes"]["pad_token_id"]) << "the approved profile is not modified";
  EXPECT_TRUE(autopatch::parse_mini_config_fixes("FAILED ... - MINI-CONFIG-BUILD: ... no field").size() == 0);
}
