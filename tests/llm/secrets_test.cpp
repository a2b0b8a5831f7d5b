// Secrets never reach disk or the terminal: the file writer and the standard streams scrub the
// configured keys whatever text carries them, and an LLM answer that echoes the key is scrubbed
// before any caller sees it. The end-to-end cases run the real binary against the local server
// and grep every file of the run directory and everything printed.
#include <gtest/gtest.h>

#include "agent/agent_test_support.h"
#include "engine/report.h"
#include "engine/run_state.h"
#include "liger/llm/provider.h"
#include "liger/llm/redact.h"
#include "liger/util.h"
#include "llm/llm_test_support.h"

namespace liger::llm {
namespace {

namespace fs = std::filesystem;
using testing::json_answer;
using testing::ScopedEnv;
using testing::TestServer;

// Not shaped like any well-known key format, so only the configured-key path can scrub it.
constexpr const char* kEchoKeyVar = "LIGER_SECRETS_TEST_KEY";
constexpr const char* kEchoKey = "plainkey_51d0c7e29a8b4f36bb0e";

std::vector<std::string> files_containing(const fs::path& root, const std::string& needle) {
  std::vector<std::string> hits;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (entry.is_regular_file() && util::read_file(entry.path()).find(needle) != std::string::npos)
      hits.push_back(fs::relative(entry.path(), root).string());
  }
  return hits;
}

TEST(Secrets, FileWriterScrubsRegisteredKeysButVerbatimCopiesKeepEveryByte) {
  SecretRegistry::global().add("writer-secret-5a7f0c3e91");
  testing::TempDir dir;
  util::write_file_atomic(dir.path() / "run.txt", "error: key writer-secret-5a7f0c3e91 rejected\n");
  EXPECT_EQ(util::read_file(dir.path() / "run.txt"), "error: key [REDACTED] rejected\n");
  // A user's own file (apply's backup and restore) comes back exactly as it was.
  util::write_file_atomic_verbatim(dir.path() / "user.py", "KEY = 'writer-secret-5a7f0c3e91'\n");
  EXPECT_EQ(util::read_file(dir.path() / "user.py"), "KEY = 'writer-secret-5a7f0c3e91'\n");
  // Shape-based patterns are for messages, not files: generated code keeps "Bearer <word>".
  util::write_file_atomic(dir.path() / "gen.py", "headers = {'Authorization': 'Bearer placeholder_token'}\n");
  EXPECT_EQ(util::read_file(dir.path() / "gen.py"), "headers = {'Authorization': 'Bearer placeholder_token'}\n");
}

TEST(Secrets, KeysOfTheStandardAndTheConfiguredVariablesAreRegistered) {
  ScopedEnv openai("OPENAI_API_KEY", "openai-env-value-3141592653");
  ScopedEnv custom("LIGER_SECRETS_CUSTOM_VAR", "custom-env-value-2718281828");
  register_environment_keys("LIGER_SECRETS_CUSTOM_VAR");
  EXPECT_EQ(redact_known_secrets("a openai-env-value-3141592653 b custom-env-value-2718281828 c"),
            "a [REDACTED] b [REDACTED] c");
}

TEST(Secrets, KeyShapedMarkerCountsOnlyAtTheStartOfAWord) {
  // Paths and names that merely contain "sk-" are left alone (they end up in state.json).
  EXPECT_EQ(redact("/home/u/desk-projects/liger/runs/task-abcdefghijklmnopq"),
            "/home/u/desk-projects/liger/runs/task-abcdefghijklmnopq");
  EXPECT_EQ(redact("key=sk-abcdefghijklmnopqrstuv end"), "key=[REDACTED] end");
  EXPECT_EQ(redact("(sk-proj-ABCDEFGHIJKLMNOPQRSTUV)"), "([REDACTED])");
}

TEST(Secrets, StateAndReportsNeverHoldAKeyWhateverFieldCarriesIt) {
  SecretRegistry::global().add(kEchoKey);
  testing::TempDir dir;
  engine::RunState state;
  state.name = "r1";
  state.workflow = "kernel-dev";
  state.status = "failed";
  state.error = engine::ErrorRecord{"llm", std::string("the answer named op '") + kEchoKey + "'",
                                    std::string("remove ") + kEchoKey + " from the profile"};
  state.diagnosis = std::string("echoed: ") + kEchoKey;
  state.input = {{"description", std::string("use key ") + kEchoKey}};
  state.save(dir.path());
  engine::write_reports(dir.path(), state);
  EXPECT_EQ(files_containing(dir.path(), kEchoKey), std::vector<std::string>{});
  EXPECT_NE(util::read_file(dir.path() / "state.json").find("the answer named op '[REDACTED]'"), std::string::npos);
  EXPECT_NE(util::read_file(dir.path() / "report.md").find("[REDACTED]"), std::string::npos);
}

TEST(Secrets, AnAnswerEchoingTheKeyIsScrubbedBeforeAnyCallerSeesIt) {
  ScopedEnv key(testing::kTestKeyVar, testing::kTestKey);
  TestServer server({json_answer(200, testing::openai_body(std::string("op: ") + testing::kTestKey))});
  auto provider = make_provider(testing::config_for(server, ProviderKind::OpenAI));
  Request request;
  request.messages = {user_message("hi")};
  const Response response = provider->complete(request);
  EXPECT_EQ(response.text, "op: [REDACTED]");
  ASSERT_EQ(server.request_count(), 1u);
  EXPECT_EQ(server.requests()[0].header("authorization"), std::string("Bearer ") + testing::kTestKey);
}

TEST(Secrets, TheCliPrintsNoKeyOnEitherStream) {
  liger::testing::TempDir dir;
  // The key arrives in the text of an error ("no run named <key>"), on stderr and in --json.
  const std::map<std::string, std::string> env = {{"OPENAI_API_KEY", kEchoKey}};
  auto text = liger::testing::run_cli(dir.path(), {"show", kEchoKey}, env);
  EXPECT_NE(text.exit_code, 0);
  EXPECT_EQ((text.out + text.err).find(kEchoKey), std::string::npos) << text.out << text.err;
  EXPECT_NE(text.err.find("[REDACTED]"), std::string::npos) << "the message did quote it: " << text.err;
  auto json = liger::testing::run_cli(dir.path(), {"--json", "show", kEchoKey}, env);
  EXPECT_NE(json.exit_code, 0);
  EXPECT_EQ((json.out + json.err).find(kEchoKey), std::string::npos) << json.out << json.err;
  EXPECT_NE(json.out.find("[REDACTED]"), std::string::npos) << json.out;
}

// The newest run directory under `runs`, or empty.
fs::path only_run(const fs::path& runs) {
  std::error_code ec;
  if (!fs::is_directory(runs, ec)) return {};
  fs::path found;
  for (const auto& entry : fs::directory_iterator(runs))
    if (entry.is_directory()) found = entry.path();
  return found;
}

TEST(Secrets, ARunWhoseAnswersEchoTheKeyLeavesItInNoFileAndPrintsItNowhere) {
  ScopedEnv key(kEchoKeyVar, kEchoKey);
  // Every answer echoes the key, as an op name and in prose, and is never a usable profile.
  testing::ScriptedAnswer echo = json_answer(
      200, testing::openai_body(std::string("Authorised with ") + kEchoKey + ".\n```yaml\nop_name: " + kEchoKey +
                                "\ntier: 9\n```\n"));
  echo.forever = true;
  TestServer server({echo}, std::chrono::seconds(60));
  liger::testing::TempDir dir;
  const std::map<std::string, std::string> env = {{kEchoKeyVar, kEchoKey},
                                                  {"LIGER_AGENT_LLM_PROVIDER", "openai"},
                                                  {"LIGER_AGENT_LLM_BASE_URL", server.base_url() + "/v1"},
                                                  {"LIGER_AGENT_LLM_API_KEY_ENV", kEchoKeyVar},
                                                  {"LIGER_AGENT_LLM_MAX_RETRIES", "0"},
                                                  {"LIGER_AGENT_LLM_TIMEOUT_S", "20"}};
  for (const bool as_json : {false, true}) {
    // A tree of its own, so the run never writes into the source tree.
    liger::testing::make_checkout(dir.path() / "repo");
    std::vector<std::string> args = {"-v", "kernel-dev", "--yes", "--tree", (dir.path() / "repo").string(),
                                     "relu squared"};
    if (as_json) args.insert(args.begin(), "--json");
    const std::size_t before = server.request_count();
    auto result = liger::testing::run_cli(dir.path(), args, env);
    SCOPED_TRACE(as_json ? "--json" : "text");
    EXPECT_NE(result.exit_code, 0) << result.out << result.err;
    ASSERT_GT(server.request_count(), before) << "the run never asked the model: " << result.err;
    EXPECT_EQ(server.requests().back().header("authorization"), std::string("Bearer ") + kEchoKey);
    EXPECT_EQ(result.out.find(kEchoKey), std::string::npos) << result.out;
    EXPECT_EQ(result.err.find(kEchoKey), std::string::npos) << result.err;
  }
  const fs::path runs = dir.path() / ".liger-agent" / "runs";
  ASSERT_TRUE(fs::is_directory(runs));
  EXPECT_EQ(files_containing(runs, kEchoKey), std::vector<std::string>{});
  // Not vacuous: the exchanges were recorded, with the echoed key scrubbed.
  const fs::path run = only_run(runs);
  ASSERT_TRUE(fs::exists(run / "llm" / "cassette.json")) << run;
  EXPECT_NE(util::read_file(run / "llm" / "cassette.json").find("Authorised with [REDACTED]"), std::string::npos);
  EXPECT_TRUE(fs::exists(run / "state.json"));
}

}  // namespace
}  // namespace liger::llm
