// An LLM answer cannot put code or a path into a name (issue 15): kernel-dev's Understand
// validates every answer against the profile schema, whose identifier patterns reject the value
// with its field, line:column and pattern, and the run fails before anything is staged.
#include <gtest/gtest.h>

#include "liger/config.h"
#include "liger/engine.h"
#include "liger/error.h"
#include "liger/profile.h"
#include "liger/util.h"
#include "llm/llm_test_support.h"
#include "workflows/kernel_dev/workflow.h"

namespace liger::llm {
namespace {

namespace fs = std::filesystem;
using testing::json_answer;
using testing::TempDir;
using testing::TestServer;

fs::path repo() { return LIGER_SOURCE_DIR; }

// A complete, valid profile for ReLU squared, as the built-in analyser writes it, with op_name
// replaced: what a model that ignores the schema would answer.
std::string answer_with_op_name(const std::string& op_name) {
  nlohmann::json profile = kernel_dev::builtin_understand({{"text", "ReLU squared activation function"}});
  profile["identity"]["op_name"] = op_name;
  return "```yaml\n" + profile::to_yaml(kernel_dev::json_to_yaml(profile)) + "```\n";
}

TEST(KernelDevLlmTrust, OpNameFromTheLlmMustBeAnIdentifier) {
  for (const std::string op_name : {std::string("evil\nimport os\nos.system('touch /tmp/x')\nx"), std::string("/tmp/abs")}) {
    testing::ScopedEnv key("LIGER_TRUST_TEST_NO_KEY", "test-key-value-0000");
    TempDir dir;
    const fs::path tree = dir.path() / "repo";
    fs::create_directories(tree / "kernels");
    fs::copy_file(repo() / "kernels/ops.yaml", tree / "kernels/ops.yaml");
    // The first answer and every re-ask get the same bad name.
    std::vector<testing::ScriptedAnswer> script;
    for (int i = 0; i < 4; ++i) script.push_back(json_answer(200, testing::openai_body(answer_with_op_name(op_name))));
    TestServer server(script);
    ConfigInputs inputs;
    inputs.flags = {{"llm.provider", "openai"},     {"llm.base_url", server.base_url() + "/v1"},
                    {"llm.model", "gpt-4o-mini"},   {"llm.api_key_env", "LIGER_TRUST_TEST_NO_KEY"},
                    {"llm.max_retries", "0"},       {"llm.timeout_s", "10"}};
    const Config config = Config::load(inputs);
    engine::WorkflowRegistry registry;
    registry.add(kernel_dev::make_workflow());
    engine::EngineOptions options;
    options.run_root = dir.path() / "runs";
    options.checkpoints = engine::CheckpointPolicy::AutoApprove;
    options.config = &config;
    options.quiet = true;
    engine::Engine engine(registry, options);
    engine::RunRequest request;
    request.workflow = "kernel-dev";
    request.label = "relu2";
    request.tree_root = tree;
    request.arguments = {{"input", "ReLU squared activation function"}};
    request.input_text = "ReLU squared activation function";
    try {
      engine.start(request);
      FAIL() << "an answer naming the op '" << op_name << "' was accepted";
    } catch (const Error& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find("identity.op_name: does not match the pattern"), std::string::npos) << message;
      EXPECT_NE(message.find("^[a-z][a-z0-9_]{0,63}$"), std::string::npos) << message;
      EXPECT_NE(message.find("profile.yaml:"), std::string::npos) << message;
    }
    EXPECT_GE(server.request_count(), 2u) << "the model was asked again with the errors";
    // The re-ask tells the model the field, the line:column and the rule.
    const auto requests = server.requests();
    EXPECT_NE(requests.back().body.find("identity.op_name: does not match the pattern"), std::string::npos);
    // Nothing staged, nothing applied.
    EXPECT_EQ(util::read_file(tree / "kernels/ops.yaml"), util::read_file(repo() / "kernels/ops.yaml"));
    EXPECT_FALSE(fs::exists(tree / "kernels/src"));
  }
}

}  // namespace
}  // namespace liger::llm
