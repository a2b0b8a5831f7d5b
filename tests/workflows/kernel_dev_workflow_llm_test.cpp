// kernel-dev's LLM path, replayed from cassettes (no network, no key): recorded
// OpenAI-compatible exchanges in tests/workflows/fixtures/kernel_dev/cassettes/<case>/llm.json.
// The answers are hand-written (cassettes/<case>/answers/N.md); the cassette was recorded by
// playing them from a local scripted server. To re-record after a prompt/schema/analyser change:
//   LIGER_KD_RECORD=1 ./build/tests/workflow_tests --gtest_filter='KernelDevLlm*'
//
// - softmax_llm: a Tier-2 op the built-in analyser cannot derive. The first answer is rejected by
//   validation (tier 4, closest kernel "softmax"); the re-ask with the errors gets a complete
//   profile; the run parks at the profile checkpoint with nothing undecided; after approval Act
//   refuses honestly (the templates render Tier-1 kernels only).
// - relu_squared_repair: the model's first profile has a wrong fp64 reference (x^2 without the
//   relu); Verify's reference tests reject it; Act's second attempt sends the diagnostics and the
//   failing file to the model, whose corrected profile passes.
#include <gtest/gtest.h>

#include <fstream>
#include <unistd.h>

#include "liger/config.h"
#include "liger/engine.h"
#include "liger/error.h"
#include "liger/util.h"
#include "workflows/kernel_dev/workflow.h"

// The scripted server of the LLM tests, used only when recording.
#include "llm/test_server.cpp"

namespace fs = std::filesystem;
using namespace liger;

namespace {

fs::path repo() { return fs::path(LIGER_SOURCE_DIR); }
fs::path cassettes() { return repo() / "tests/workflows/fixtures/kernel_dev/cassettes"; }

std::string openai_answer(const std::string& text) {
  return nlohmann::json{{"id", "chatcmpl-kd"},
                        {"object", "chat.completion"},
                        {"choices", {{{"index", 0},
                                      {"message", {{"role", "assistant"}, {"content", text}}},
                                      {"finish_reason", "stop"}}}},
                        {"usage", {{"prompt_tokens", 2000}, {"completion_tokens", 900}}}}
      .dump();
}

struct Runner : kernel_dev::ToolRunner {
  fs::path tree;
  int reference_runs = 0;
  toolchain::ProcessResult run(const std::vector<std::string>& argv, const fs::path&, std::chrono::seconds,
                               const std::map<std::string, std::string>&) override {
    toolchain::ProcessResult r;
    r.exit_code = 0;
    const std::string exe = fs::path(argv.front()).filename().string();
    if (exe == "reference_tests") {
      ++reference_runs;
      const std::string ref = util::read_file(tree / "kernels/reference/relu_squared_ref.cpp");
      if (ref.find("const double t0 = x;") != std::string::npos) {
        r.exit_code = 1;
        r.output = "[ RUN      ] ReluSquaredReference.BackwardMatchesFiniteDifferences\n"
                   "test_relu_squared_ref.cpp:71: Failure: gradient check failed at x = -1.5: the backward "
                   "(2*relu(x)*step(x) = 0) disagrees with finite differences of the forward (-3)\n"
                   "[  FAILED  ] 1 test, listed below:\n";
      } else {
        r.output = "[  PASSED  ] 2 tests.\n";
      }
    } else if (exe == "cmake") {
      r.output = "ninja: no work to do.\n";
    }
    return r;
  }
  bool has_tool(const std::string& name) override { return name != "nvcc"; }
  bool has_gpu() override { return false; }
};

struct LlmCase {
  fs::path root, tree, runs, build, cassette_dir;
  std::unique_ptr<llm::testing::TestServer> server;
  Config config;
  engine::WorkflowRegistry registry;
  std::shared_ptr<Runner> runner = std::make_shared<Runner>();
  bool recording = std::getenv("LIGER_KD_RECORD") != nullptr;
  fs::path fixture;

  explicit LlmCase(const std::string& name) : fixture(cassettes() / name) {
    std::string pattern = (fs::temp_directory_path() / "kernel-dev-llm-XXXXXX").string();
    root = ::mkdtemp(pattern.data());
    tree = root / "repo";
    runs = root / "runs";
    build = root / "build";
    for (const char* rel : {"kernels/ops.yaml", "kernels/python/liger_kernels/functional.py", "docs/kernels/README.md"}) {
      fs::create_directories((tree / rel).parent_path());
      fs::copy_file(repo() / rel, tree / rel);
    }
    fs::create_directories(build);
    std::ofstream(build / "build.ninja") << "# fake\n";
    std::ofstream(build / "CMakeCache.txt") << "LIGER_BUILD_KERNELS:BOOL=OFF\n";
    runner->tree = tree;
    kernel_dev::set_tool_runner_for_testing(runner);
    registry.add(kernel_dev::make_workflow());

    ConfigInputs inputs;
    if (recording) {
      std::vector<llm::testing::ScriptedAnswer> script;
      for (int i = 1; fs::exists(fixture / "answers" / (std::to_string(i) + ".md")); ++i)
        script.push_back(llm::testing::json_answer(200, openai_answer(util::read_file(fixture / "answers" / (std::to_string(i) + ".md")))));
      server = std::make_unique<llm::testing::TestServer>(script, std::chrono::seconds(120));
      fs::remove(fixture / "llm.json");
      cassette_dir = fixture;
      inputs.flags = {{"llm.provider", "openai"}, {"llm.base_url", server->base_url() + "/v1"},
                      {"llm.api_key_env", "none"}, {"llm.model", "gpt-4o"},
                      {"llm.cassette_dir", cassette_dir.string()}, {"llm.record", "all"}, {"llm.max_retries", "0"}};
    } else {
      cassette_dir = root / "cassette";
      fs::create_directories(cassette_dir);
      fs::copy_file(fixture / "llm.json", cassette_dir / "llm.json");
      const auto recorded = nlohmann::json::parse(util::read_file(cassette_dir / "llm.json"));
      std::string url = recorded["interactions"][0]["request"]["url"];
      url = url.substr(0, url.rfind("/chat/completions"));
      inputs.flags = {{"llm.provider", "openai"}, {"llm.base_url", url}, {"llm.api_key_env", "none"},
                      {"llm.model", "gpt-4o"}, {"llm.cassette_dir", cassette_dir.string()}, {"llm.record", "none"}};
    }
    config = Config::load(inputs);
  }
  ~LlmCase() {
    kernel_dev::set_tool_runner_for_testing(nullptr);
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  engine::EngineOptions options(engine::CheckpointPolicy policy) {
    engine::EngineOptions o;
    o.run_root = runs;
    o.checkpoints = policy;
    o.config = &config;
    o.quiet = true;
    return o;
  }
  engine::RunOutcome start(const std::string& input, engine::CheckpointPolicy policy) {
    engine::RunRequest r;
    r.workflow = "kernel-dev";
    r.label = input;
    r.tree_root = tree;
    r.arguments = {{"input", input}, {"build_dir", build.string()}};
    r.input_text = input;
    engine::Engine e(registry, options(policy));
    return e.start(r);
  }
};

}  // namespace

TEST(KernelDevLlm, Tier2SoftmaxFromCassetteRejectedOnceThenComplete) {
  LlmCase c("softmax_llm");
  const auto out = c.start("softmax", engine::CheckpointPolicy::Park);
  ASSERT_EQ(out.status, "awaiting_approval") << out.message;
  EXPECT_EQ(out.pending_checkpoint, "profile");
  EXPECT_TRUE(out.undecided.empty()) << "the model decided every field";
  const YAML::Node profile = YAML::LoadFile((out.run_dir / "profile.yaml").string());
  EXPECT_EQ(profile["tier"]["value"].as<int>(), 2);
  EXPECT_EQ(profile["closest_kernel"]["name"].as<std::string>(), "cross_entropy");
  EXPECT_NE(profile["saved_for_backward"]["reason"].as<std::string>().find("dx = y * (dy - sum(dy * y))"), std::string::npos);

  // Two exchanges: the rejected answer and the re-ask carrying the validator's errors.
  const auto cassette = nlohmann::json::parse(util::read_file(c.cassette_dir / "llm.json"));
  ASSERT_EQ(cassette["interactions"].size(), 2u);
  const std::string reask = cassette["interactions"][1]["request"]["body"].is_string()
                                ? cassette["interactions"][1]["request"]["body"].get<std::string>()
                                : cassette["interactions"][1]["request"]["body"].dump();
  EXPECT_NE(reask.find("tier.value: out of range"), std::string::npos) << reask.substr(0, 2000);
  EXPECT_NE(reask.find("closest_kernel.name: value not allowed"), std::string::npos);
  const auto report = nlohmann::json::parse(util::read_file(out.run_dir / "report.json"));
  if (!c.recording) EXPECT_EQ(report["usage"]["total"]["replayed"], 2) << report["usage"].dump();

  // Approved, Act refuses: the templates generate Tier-1 kernels only (said, not faked).
  engine::approve_run(out.run_dir, "test");
  engine::Engine e(c.registry, c.options(engine::CheckpointPolicy::AutoApprove));
  try {
    e.resume(out.run_dir);
    FAIL() << "Act must refuse a Tier-2 profile";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("Tier-1 (element-wise) kernels only"), std::string::npos) << err.what();
  }
  EXPECT_FALSE(fs::exists(c.tree / "kernels/src/softmax"));
}

TEST(KernelDevLlm, VerifyRejectsAWrongReferenceAndTheModelRepairsIt) {
  LlmCase c("relu_squared_repair");
  const auto out = c.start("ReLU squared activation function", engine::CheckpointPolicy::AutoApprove);
  ASSERT_EQ(out.status, "completed") << out.message;
  EXPECT_EQ(c.runner->reference_runs, 2);
  const auto state = engine::read_run_state(out.run_dir);
  ASSERT_EQ(state["attempts"].size(), 2u) << state.dump(2);
  EXPECT_NE(state["attempts"][0]["hard"][0]["summary"].get<std::string>().find("reference tests failed"), std::string::npos);
  const std::string fixes = state["attempts"][1]["fixes"].dump();
  EXPECT_NE(fixes.find("sent the diagnostics"), std::string::npos) << fixes;
  EXPECT_NE(fixes.find("restored relu(x)^2"), std::string::npos) << fixes;
  // The corrected reference is what the tree holds.
  const std::string ref = util::read_file(c.tree / "kernels/reference/relu_squared_ref.cpp");
  EXPECT_EQ(ref.find("const double t0 = x;"), std::string::npos);
  EXPECT_NE(ref.find("const double t0 = (x > 0.0 ? x : 0.0);"), std::string::npos);
  // The repair request carried the diagnostics and the failing reference test output.
  const auto cassette = nlohmann::json::parse(util::read_file(c.cassette_dir / "llm.json"));
  ASSERT_EQ(cassette["interactions"].size(), 2u);
  const std::string repair = cassette["interactions"][1]["request"]["body"].dump();
  EXPECT_NE(repair.find("gradient check failed at x = -1.5"), std::string::npos);
  EXPECT_NE(repair.find("relu_squared_ref.cpp"), std::string::npos);
  // Verify said what it could not run.
  const std::string verify = util::read_file(out.run_dir / "kernel-dev/verify.md");
  EXPECT_NE(verify.find("| GPU tests | not run: no GPU (and the CUDA library is not built: no nvcc)"), std::string::npos) << verify;
}
