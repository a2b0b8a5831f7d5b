// kernel-dev's LLM path, replayed from cassettes (no network, no key): recorded
// OpenAI-compatible exchanges in tests/workflows/fixtures/kernel_dev/cassettes/<case>/llm.json.
// The answers are hand-written (cassettes/<case>/answers/N.md); the cassette was recorded by
// playing them from a local scripted server. To re-record after a prompt/schema/analyser/template
// change:
//   LIGER_KD_RECORD=1 ./build/tests/workflow_tests --gtest_filter='KernelDevLlm*'
//
// - softmax_llm (Tier 2): "softmax with temperature one": the built-in analyser derives plain
//   "softmax" from its PyTorch form, but a description with more words (a temperature) is left to
//   the model (which rightly answers plain softmax, the temperature being one; "temperature 1", with a number, is derived offline since the input modifiers). Answer 1 is rejected by
//   validation (tier 4, closest kernel "softmax"); the re-ask with the errors gets answer 2, a
//   complete profile whose row program has a WRONG gradient (dx = y * dy, no row-sum term). Act
//   renders the row kernel; Verify builds and runs the rendered fp64 reference test for real
//   (g++ + GoogleTest, here standing in for the CMake build), whose finite-difference check
//   rejects the backward; Act's attempt 2 sends those diagnostics and the failing reference to
//   the model, whose answer 3 (dx = y * (dy - sum(dy * y))) passes. The same cassette replays
//   through the real CLI and a real build: scripts/kernel-dev-e2e.sh --tier2.
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

#include "committed_tree.h"

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

// Builds the rendered reference of `op` in `tree` with the host compiler and GoogleTest, as the
// library's reference_tests target does, and runs it with the workflow's filter: the real test
// output, not a canned one.
toolchain::ProcessResult build_and_run_reference(const fs::path& tree, const std::string& op, const std::string& filter) {
  toolchain::ProcessResult r;
  const fs::path binary = tree / ("reference_tests_" + op);
  toolchain::ProcessOptions build;
  build.argv = {"g++", "-std=c++17", "-O1", "-I" + (tree / "kernels/reference").string(),
                (tree / ("kernels/reference/" + op + "_ref.cpp")).string(),
                (tree / ("tests/kernels/reference/test_" + op + "_ref.cpp")).string(), "-lgtest", "-lgtest_main", "-pthread",
                "-o", binary.string()};
  build.cwd = tree;
  build.timeout = std::chrono::seconds(300);
  auto built = toolchain::run_process(build);
  if (!built.ok()) {
    r.exit_code = 1;
    r.output = "error: the rendered reference did not build:\n" + built.output;
    return r;
  }
  toolchain::ProcessOptions test;
  test.argv = {binary.string(), filter};
  test.cwd = tree;
  test.timeout = std::chrono::seconds(300);
  r = toolchain::run_process(test);
  fs::remove(binary);
  return r;
}

bool host_gtest_available() {
  return toolchain::find_executable("g++").has_value() &&
         (fs::exists("/usr/include/gtest/gtest.h") || fs::exists("/usr/local/include/gtest/gtest.h"));
}

struct Runner : kernel_dev::ToolRunner {
  fs::path tree;
  int reference_runs = 0;
  std::string real_reference_op;  // when set, reference_tests really builds and runs this op's reference
  toolchain::ProcessResult run(const std::vector<std::string>& argv, const fs::path&, std::chrono::seconds,
                               const std::map<std::string, std::string>&) override {
    toolchain::ProcessResult r;
    r.exit_code = 0;
    const std::string exe = fs::path(argv.front()).filename().string();
    if (exe == "reference_tests" && !real_reference_op.empty()) {
      ++reference_runs;
      return build_and_run_reference(tree, real_reference_op, argv.at(1));
    }
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
    liger::testing::copy_committed(
        repo(), {"kernels/ops.yaml", "kernels/python/liger_kernels/functional.py", "docs/kernels/README.md"}, tree);
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

TEST(KernelDevLlm, Tier2SoftmaxWrongGradientRejectedByVerifyThenRepaired) {
  if (!host_gtest_available())
    GTEST_SKIP() << "g++ or the GoogleTest headers are missing: the rendered reference cannot be built and run";
  LlmCase c("softmax_llm");
  c.runner->real_reference_op = "softmax";
  const auto out = c.start("softmax with temperature one", engine::CheckpointPolicy::AutoApprove);
  ASSERT_EQ(out.status, "completed") << out.message;

  // Understand: the rejected answer, then the re-ask carrying the validator's errors.
  const auto cassette = nlohmann::json::parse(util::read_file(c.cassette_dir / "llm.json"));
  ASSERT_EQ(cassette["interactions"].size(), 3u);
  auto body = [&](int i) {
    const auto& b = cassette["interactions"][i]["request"]["body"];
    return b.is_string() ? b.get<std::string>() : b.dump();
  };
  EXPECT_NE(body(0).find("row_program"), std::string::npos) << "the prompt tells the model the Tier-2 format";
  EXPECT_NE(body(1).find("tier.value: out of range"), std::string::npos) << body(1).substr(0, 2000);
  EXPECT_NE(body(1).find("closest_kernel.name: value not allowed"), std::string::npos);
  const YAML::Node approved = YAML::LoadFile((out.run_dir / "profile.yaml").string());
  EXPECT_EQ(approved["tier"]["value"].as<int>(), 2);
  EXPECT_EQ(approved["row_program"]["backward"]["grad_input"].as<std::string>(), "y * dy");

  // Verify attempt 1: the real finite-difference check of the rendered reference rejects answer 2.
  EXPECT_EQ(c.runner->reference_runs, 2);
  const auto state = engine::read_run_state(out.run_dir);
  ASSERT_EQ(state["attempts"].size(), 2u) << state.dump(2);
  const auto& failure = state["attempts"][0]["hard"][0];
  EXPECT_EQ(failure["summary"].get<std::string>(), "reference tests failed for softmax");
  const std::string detail = failure["detail"].get<std::string>();
  EXPECT_NE(detail.find("tests/kernels/reference/test_softmax_ref.cpp:"), std::string::npos) << detail;
  EXPECT_NE(detail.find("gradient check failed (seed 1): dx[row "), std::string::npos) << detail;
  EXPECT_EQ(detail.find(c.tree.string()), std::string::npos) << "paths are relative to the tree: " << detail;
  EXPECT_EQ(detail.find(" ms)"), std::string::npos) << "no timings: " << detail;

  // Act attempt 2: the diagnostics and the failing reference went to the model; its answer 3 is
  // what the tree holds now.
  EXPECT_NE(body(2).find("gradient check failed (seed 1)"), std::string::npos);
  EXPECT_NE(body(2).find("The failing file kernels/reference/softmax_ref.cpp"), std::string::npos);
  EXPECT_NE(body(2).find("dx = (y * dy);"), std::string::npos) << "the wrong reference was sent";
  const std::string fixes = state["attempts"][1]["fixes"].dump();
  EXPECT_NE(fixes.find("sent the diagnostics"), std::string::npos) << fixes;
  EXPECT_NE(fixes.find("restored the row-sum term"), std::string::npos) << fixes;
  const std::string ref = util::read_file(c.tree / "kernels/reference/softmax_ref.cpp");
  EXPECT_NE(ref.find("dx = (y * (dy - g));"), std::string::npos) << ref;
  EXPECT_EQ(ref.find("dx = (y * dy);"), std::string::npos);
  const std::string cu = util::read_file(c.tree / "kernels/src/softmax/softmax.cu");
  EXPECT_NE(cu.find("block_all_reduce<Reduce::kSum>(all_, shared_)"), std::string::npos);
  EXPECT_NE(util::read_file(c.tree / "kernels/include/liger_kernels/softmax.h").find("const void* y, int64_t y_row_stride"),
            std::string::npos);
  EXPECT_NE(util::read_file(c.tree / "kernels/ops.yaml").find("  - name: softmax\n    tier: 2\n"), std::string::npos);
  EXPECT_NE(util::read_file(c.tree / "docs/kernels/README.md").find("| `softmax` | Softmax | 2 |"), std::string::npos);

  // Verify attempt 2 passed the reference tests and said what it could not run.
  const std::string verify = util::read_file(out.run_dir / "kernel-dev/verify.md");
  EXPECT_NE(verify.find("| reference tests | passed | 2 test(s) |"), std::string::npos) << verify;
  EXPECT_NE(verify.find("| GPU tests | not run: no GPU"), std::string::npos) << verify;
  const auto report = nlohmann::json::parse(util::read_file(out.run_dir / "report.json"));
  if (!c.recording) EXPECT_EQ(report["usage"]["total"]["replayed"], 3) << report["usage"].dump();
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
