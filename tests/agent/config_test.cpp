#include <gtest/gtest.h>

#include "agent_test_support.h"
#include "liger/config.h"
#include "liger/error.h"

namespace liger {
namespace {

using testing::TempDir;

ConfigInputs inputs_for(const TempDir& dir, std::map<std::string, std::string> env = {}) {
  ConfigInputs inputs;
  inputs.user_file = dir.path() / "user.yaml";
  inputs.project_file = dir.path() / "project.yaml";
  inputs.getenv = [env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  return inputs;
}

TEST(Config, DefaultsWhenNothingIsSet) {
  TempDir dir;
  const Config config = Config::load(inputs_for(dir));
  EXPECT_EQ(config.get_string("run_dir"), ".liger-agent/runs");
  EXPECT_EQ(config.get_int("max_attempts"), 3);
  EXPECT_EQ(config.get("llm.provider").layer, ConfigLayer::Default);
  EXPECT_EQ(config.get("llm.provider").source, "default");
}

TEST(Config, EachLayerOverridesTheOneBelowAndReportsItsSource) {
  TempDir dir;
  util::write_file_atomic(dir.path() / "user.yaml",
                          "max_attempts: 4\neditor: nano\nllm:\n  model: user-model\n  timeout_s: 30\n");
  util::write_file_atomic(dir.path() / "project.yaml", "max_attempts: 5\nllm:\n  model: project-model\n");
  auto inputs = inputs_for(dir, {{"LIGER_AGENT_LLM_MODEL", "env-model"}, {"LIGER_AGENT_RUN_DIR", "env-runs"}});
  inputs.flags["run_dir"] = "flag-runs";
  inputs.flag_names["run_dir"] = "--run-dir";
  const Config config = Config::load(inputs);

  EXPECT_EQ(config.get_string("editor"), "nano");  // user file beats default
  EXPECT_EQ(config.get("editor").layer, ConfigLayer::UserFile);
  EXPECT_EQ(config.get("editor").source, (dir.path() / "user.yaml").string());
  EXPECT_EQ(config.get_int("llm.timeout_s"), 30);

  EXPECT_EQ(config.get_int("max_attempts"), 5);  // project file beats user file
  EXPECT_EQ(config.get("max_attempts").source, (dir.path() / "project.yaml").string());

  EXPECT_EQ(config.get_string("llm.model"), "env-model");  // environment beats both files
  EXPECT_EQ(config.get("llm.model").source, "LIGER_AGENT_LLM_MODEL");

  EXPECT_EQ(config.get_string("run_dir"), "flag-runs");  // flag beats environment
  EXPECT_EQ(config.get("run_dir").layer, ConfigLayer::Flag);
  EXPECT_EQ(config.get("run_dir").source, "--run-dir");
}

TEST(Config, EnvironmentNamesFollowTheKey) {
  EXPECT_EQ(config_env_name("llm.base_url"), "LIGER_AGENT_LLM_BASE_URL");
  EXPECT_EQ(config_env_name("llm.price.input_per_mtok"), "LIGER_AGENT_LLM_PRICE_INPUT_PER_MTOK");
}

TEST(Config, UnknownKeyNamesFileLineAndKnownKeys) {
  TempDir dir;
  util::write_file_atomic(dir.path() / "project.yaml", "run_dir: runs\nllm:\n  providr: openai\n");
  try {
    Config::load(inputs_for(dir));
    FAIL() << "an unknown key must be rejected";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("project.yaml:3:"), std::string::npos) << message;
    EXPECT_NE(message.find("llm.providr"), std::string::npos) << message;
    EXPECT_NE(std::string(e.hint()).find("llm.provider"), std::string::npos) << e.hint();
    EXPECT_EQ(e.exit_code(), ExitCode::Usage);
  }
}

TEST(Config, WrongTypeIsRejectedWithTheVariableName) {
  TempDir dir;
  try {
    Config::load(inputs_for(dir, {{"LIGER_AGENT_MAX_ATTEMPTS", "three"}}));
    FAIL() << "a non-integer max_attempts must be rejected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("LIGER_AGENT_MAX_ATTEMPTS"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("an integer"), std::string::npos) << e.what();
  }
}

TEST(Config, RefusesToStoreApiKeys) {
  TempDir dir;
  util::write_file_atomic(dir.path() / "user.yaml", "llm:\n  api_key: sk-secret\n");
  try {
    Config::load(inputs_for(dir));
    FAIL() << "an API key in a config file must be rejected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("API key"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("sk-secret"), std::string::npos) << "the key must not be echoed";
  }
}

TEST(Config, ExplicitConfigFileMustExist) {
  TempDir dir;
  auto inputs = inputs_for(dir);
  inputs.project_file = dir.path() / "missing.yaml";
  inputs.project_file_explicit = true;
  EXPECT_THROW(Config::load(inputs), Error);
}

}  // namespace
}  // namespace liger
