// The engine and the LLM layer joined: stages ask ctx.llm(), the run's ledger lands in
// report.json/report.md, every HTTP exchange is recorded into <run>/llm/ with the key redacted,
// and the key reaches no file of the run directory.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "liger/config.h"
#include "liger/engine.h"
#include "liger/error.h"
#include "liger/llm/builtin.h"
#include "liger/llm/provider.h"
#include "liger/llm/structured.h"
#include "liger/util.h"
#include "llm/llm_test_support.h"

namespace liger::llm {
namespace {

namespace fs = std::filesystem;
using testing::json_answer;
using testing::ScopedEnv;
using testing::TempDir;
using testing::TestServer;

// Not shaped like any well-known key format, so only the registered-secret path can scrub it.
constexpr const char* kRunKeyVar = "LIGER_ENGINE_LLM_TEST_KEY";
constexpr const char* kRunKey = "plainkey-7f3a9c1e5b2d4068aa91";

Config config_with(std::map<std::string, std::string> flags) {
  ConfigInputs inputs;
  inputs.flags = std::move(flags);
  return Config::load(inputs);
}

Config config_with_env(std::map<std::string, std::string> env) {
  ConfigInputs inputs;
  inputs.getenv = [env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  return Config::load(inputs);
}

// A one-field workflow whose Understand stage asks the run's LLM for the profile.
struct LlmWorkflowFixture {
  TempDir dir;
  fs::path tree = dir.path() / "repo";
  fs::path runs = dir.path() / "runs";
  engine::WorkflowRegistry registry;
  std::string answer_seen;

  LlmWorkflowFixture() {
    fs::create_directories(tree);
    util::write_file_atomic(dir.path() / "schema.yaml",
                            "type: map\nfields:\n  op: {type: string, required: true}\n");
    engine::Workflow workflow;
    workflow.name = "llmflow";
    workflow.profile_schema = dir.path() / "schema.yaml";
    workflow.understand = [this](engine::StageContext& ctx) {
      StructuredRequest request;
      request.kind = "test/engine-llm";
      request.input = {{"description", ctx.input.value("description", "")}};
      request.messages = {user_message("Name the operation in: " + ctx.input.value("description", ""))};
      request.schema = nlohmann::json{{"type", "object"},
                                      {"properties", {{"op", {{"type", "string"}}}}},
                                      {"required", {"op"}}};
      request.max_reasks = 0;
      StructuredResult result = ask_structured(ctx.llm(), request);
      answer_seen = result.answer;
      // A careless stage logging the raw answer must not leak a key into run.log.
      ctx.log->info("llm answered: {}", result.answer);
      ctx.profile["op"] = result.document.value("op", std::string("unknown"));
      return engine::StageResult{};
    };
    workflow.act = [](engine::StageContext& ctx) {
      // A second stage gets the same provider (and ledger) as the first.
      ctx.staging->write("out/op.txt", ctx.profile["op"].as<std::string>() + " via " + ctx.llm().name() + "\n");
      return engine::StageResult{};
    };
    workflow.verify = [](engine::StageContext&) { return engine::StageResult{}; };
    registry.add(std::move(workflow));
  }

  engine::RunOutcome run(const Config& config) {
    engine::EngineOptions options;
    options.run_root = runs;
    options.checkpoints = engine::CheckpointPolicy::AutoApprove;
    options.config = &config;
    options.quiet = true;
    engine::Engine engine(registry, options);
    engine::RunRequest request;
    request.workflow = "llmflow";
    request.label = "case";
    request.tree_root = tree;
    request.arguments = {{"description", "ReLU squared"}};
    return engine.start(request);
  }
};

nlohmann::json read_json(const fs::path& path) { return nlohmann::json::parse(util::read_file(path)); }

// Every file under `root` (recursively) whose bytes contain `needle`.
std::vector<std::string> files_containing(const fs::path& root, const std::string& needle) {
  std::vector<std::string> hits;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file()) continue;
    if (util::read_file(entry.path()).find(needle) != std::string::npos)
      hits.push_back(fs::relative(entry.path(), root).string());
  }
  return hits;
}

TEST(EngineLlm, BuiltinProviderAnswersStagesAndUsageLandsInTheReport) {
  AnalyserRegistration registration{"test/engine-llm", [](const Request& request) -> nlohmann::json {
                                      const std::string text = request.input.value("description", "");
                                      return {{"op", text == "ReLU squared" ? "relu_squared" : "other"}};
                                    }};
  LlmWorkflowFixture f;
  const Config config = Config::defaults();  // llm.provider builtin: no network, no key
  const engine::RunOutcome outcome = f.run(config);
  AnalyserRegistry::global()->remove("test/engine-llm");

  ASSERT_EQ(outcome.exit_code, 0) << outcome.message;
  EXPECT_EQ(util::read_file(f.tree / "out/op.txt"), "relu_squared via builtin\n");

  const nlohmann::json report = read_json(outcome.run_dir / "report.json");
  ASSERT_TRUE(report.contains("usage")) << report.dump(2);
  EXPECT_EQ(report["usage"]["total"]["requests"], 1);
  ASSERT_EQ(report["usage"]["by_model"].size(), 1u);
  EXPECT_EQ(report["usage"]["by_model"][0]["provider"], "builtin");
  EXPECT_EQ(read_json(outcome.run_dir / "state.json")["usage"], report["usage"]);
  const std::string md = util::read_file(outcome.run_dir / "report.md");
  EXPECT_NE(md.find("| LLM | 1 request(s) to builtin/builtin; 0 input + 0 output tokens; $0.0000 |"),
            std::string::npos)
      << md;
  EXPECT_NE(util::read_file(outcome.run_dir / "logs/run.log").find("llm: provider builtin"), std::string::npos);
}

TEST(EngineLlm, RunWithoutLlmReportsNoRequests) {
  LlmWorkflowFixture f;
  engine::Workflow quiet;
  quiet.name = "nollm";
  quiet.profile_schema = f.dir.path() / "schema.yaml";
  quiet.understand = [](engine::StageContext& ctx) {
    ctx.profile["op"] = "x";
    return engine::StageResult{};
  };
  quiet.act = [](engine::StageContext&) { return engine::StageResult{}; };
  quiet.verify = [](engine::StageContext&) { return engine::StageResult{}; };
  f.registry.add(quiet);
  // An OpenAI provider with no key: never built, because no stage asks for it.
  const Config config = config_with({{"llm.provider", "openai"}, {"llm.api_key_env", "LIGER_UNSET_KEY_VAR"}});
  engine::EngineOptions options;
  options.run_root = f.runs;
  options.checkpoints = engine::CheckpointPolicy::AutoApprove;
  options.config = &config;
  options.quiet = true;
  engine::Engine engine(f.registry, options);
  engine::RunRequest request;
  request.workflow = "nollm";
  request.label = "case";
  request.tree_root = f.tree;
  const engine::RunOutcome outcome = engine.start(request);
  ASSERT_EQ(outcome.exit_code, 0) << outcome.message;
  EXPECT_EQ(read_json(outcome.run_dir / "report.json")["usage"]["total"]["requests"], 0);
  EXPECT_NE(util::read_file(outcome.run_dir / "report.md").find("| LLM | no requests |"), std::string::npos);
  EXPECT_FALSE(fs::exists(outcome.run_dir / "llm"));
}

TEST(EngineLlm, OpenAIExchangeIsRecordedInTheRunWithTheKeyRedactedEverywhere) {
  ScopedEnv key(kRunKeyVar, kRunKey);
  // The server echoes the key back in its answer, as some APIs do in error messages.
  const std::string answer = std::string("```yaml\nop: relu_squared\n```\n(request authorised with ") + kRunKey + ")";
  TestServer server({json_answer(200, testing::openai_body(answer, 40, 9))});
  LlmWorkflowFixture f;
  const Config config = config_with({{"llm.provider", "openai"},
                                     {"llm.base_url", server.base_url() + "/v1"},
                                     {"llm.model", "gpt-4o-mini"},
                                     {"llm.api_key_env", kRunKeyVar},
                                     {"llm.max_retries", "0"},
                                     {"llm.timeout_s", "10"}});
  const engine::RunOutcome outcome = f.run(config);
  ASSERT_EQ(outcome.exit_code, 0) << outcome.message;
  EXPECT_EQ(util::read_file(f.tree / "out/op.txt"), "relu_squared via openai\n");
  ASSERT_EQ(server.request_count(), 1u);
  EXPECT_EQ(server.requests()[0].header("authorization"), std::string("Bearer ") + kRunKey);
  // The key is scrubbed from the answer before any stage sees it: it cannot travel on into a
  // profile, a note, a staged file's name or an error message.
  EXPECT_EQ(f.answer_seen.find(kRunKey), std::string::npos) << f.answer_seen;
  EXPECT_NE(f.answer_seen.find("(request authorised with [REDACTED])"), std::string::npos) << f.answer_seen;

  // The exchange is in the run's cassette, with the key scrubbed from headers and body.
  const fs::path cassette = outcome.run_dir / "llm" / "cassette.json";
  ASSERT_TRUE(fs::exists(cassette));
  const std::string recorded = util::read_file(cassette);
  EXPECT_NE(recorded.find("chat/completions"), std::string::npos) << recorded;
  EXPECT_NE(recorded.find("relu_squared"), std::string::npos) << recorded;
  EXPECT_NE(recorded.find(std::string(kRedacted)), std::string::npos) << recorded;

  // Usage of the exchange is in report.json.
  const nlohmann::json usage = read_json(outcome.run_dir / "report.json")["usage"];
  EXPECT_EQ(usage["total"]["requests"], 1);
  EXPECT_EQ(usage["total"]["input_tokens"], 40);
  EXPECT_EQ(usage["total"]["output_tokens"], 9);
  EXPECT_EQ(usage["by_model"][0]["model"], "gpt-4o-mini");
  EXPECT_NE(util::read_file(outcome.run_dir / "report.md").find("40 input + 9 output tokens"), std::string::npos);

  // The key is in no file of the run directory: cassette, logs, state, reports.
  EXPECT_NE(util::read_file(outcome.run_dir / "logs/run.log").find("llm answered"), std::string::npos);
  EXPECT_EQ(files_containing(outcome.run_dir, kRunKey), std::vector<std::string>{});
}

TEST(EngineLlm, UserCassetteReplaysWithoutNetworkOrKey) {
  // Record once into a user cassette directory, then replay it in a second run with no key.
  TempDir cassettes;
  std::string recorded_url;
  {
    ScopedEnv key(kRunKeyVar, kRunKey);
    TestServer server({json_answer(200, testing::openai_body("```yaml\nop: recorded\n```\n", 11, 3))});
    recorded_url = server.base_url() + "/v1";
    LlmWorkflowFixture f;
    const Config config = config_with({{"llm.provider", "openai"},
                                       {"llm.base_url", recorded_url},
                                       {"llm.api_key_env", kRunKeyVar},
                                       {"llm.cassette_dir", cassettes.path().string()},
                                       {"llm.max_retries", "0"}});
    const engine::RunOutcome outcome = f.run(config);
    ASSERT_EQ(outcome.exit_code, 0) << outcome.message;
    EXPECT_TRUE(fs::exists(cassettes.path() / "llm.json"));
    EXPECT_FALSE(fs::exists(outcome.run_dir / "llm")) << "the user's cassette directory is honoured";
  }
  LlmWorkflowFixture f;
  const Config config = config_with({{"llm.provider", "openai"},
                                     {"llm.base_url", recorded_url},  // the server is gone
                                     {"llm.api_key_env", kRunKeyVar},  // and no key is set
                                     {"llm.cassette_dir", cassettes.path().string()},
                                     {"llm.record", "none"}});
  const engine::RunOutcome outcome = f.run(config);
  ASSERT_EQ(outcome.exit_code, 0) << outcome.message;
  EXPECT_EQ(util::read_file(f.tree / "out/op.txt"), "recorded via openai\n");
  EXPECT_EQ(read_json(outcome.run_dir / "report.json")["usage"]["total"]["replayed"], 1);
}

TEST(EngineLlm, ProviderConfigFromConfigMapsKeysAndLegacyEnvironment) {
  {
    const ProviderConfig config = provider_config_from(Config::defaults());
    EXPECT_EQ(config.kind, ProviderKind::Builtin);
    EXPECT_EQ(config.record_mode, RecordMode::Disabled);
    EXPECT_TRUE(config.cassette_dir.empty());
    EXPECT_DOUBLE_EQ(config.stall_timeout_s, 120.0);
  }
  {
    // The variables that predate the keys keep working and show up as the keys' source.
    const Config config = config_with_env({{"LIGER_AGENT_RECORD", "all"}, {"LIGER_AGENT_CASSETTE_DIR", "/tmp/c"},
                                           {"LIGER_AGENT_LLM_STALL_TIMEOUT_S", "7.5"}});
    EXPECT_EQ(config.get("llm.record").source, "LIGER_AGENT_RECORD");
    const ProviderConfig provider = provider_config_from(config);
    EXPECT_EQ(provider.record_mode, RecordMode::All);
    EXPECT_EQ(provider.cassette_dir, "/tmp/c");
    EXPECT_DOUBLE_EQ(provider.stall_timeout_s, 7.5);
  }
  {
    // The canonical name wins over the legacy one; a directory alone means `once`.
    const Config config = config_with_env({{"LIGER_AGENT_RECORD", "all"}, {"LIGER_AGENT_LLM_RECORD", "none"}});
    EXPECT_EQ(provider_config_from(config).record_mode, RecordMode::ReplayOnly);
    EXPECT_EQ(provider_config_from(config_with_env({{"LIGER_AGENT_LLM_CASSETTE_DIR", "/tmp/d"}})).record_mode,
              RecordMode::Once);
  }
  EXPECT_THROW(provider_config_from(config_with({{"llm.record", "sometimes"}})), Error);
}

TEST(EngineLlm, RunProviderConfigRecordsIntoTheRunUnlessTheUserChose) {
  const fs::path run = "/runs/r1";
  const ProviderConfig by_default = run_provider_config(Config::defaults(), run);
  EXPECT_EQ(by_default.record_mode, RecordMode::All);
  EXPECT_EQ(fs::path(by_default.cassette_dir), run / "llm");
  EXPECT_EQ(by_default.cassette_name, "cassette");

  const ProviderConfig once = run_provider_config(config_with({{"llm.record", "once"}}), run);
  EXPECT_EQ(once.record_mode, RecordMode::Once);
  EXPECT_EQ(fs::path(once.cassette_dir), run / "llm");

  const ProviderConfig off = run_provider_config(config_with({{"llm.record", "off"}}), run);
  EXPECT_EQ(off.record_mode, RecordMode::Disabled);
  EXPECT_TRUE(off.cassette_dir.empty());

  const ProviderConfig theirs = run_provider_config(config_with({{"llm.cassette_dir", "/fixtures"}}), run);
  EXPECT_EQ(theirs.cassette_dir, "/fixtures");
  EXPECT_EQ(theirs.record_mode, RecordMode::Once);
}

}  // namespace
}  // namespace liger::llm
