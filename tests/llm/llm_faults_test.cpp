// LLM faults against the local scripted server: an endpoint stuck on 500 or 429 or that never
// answers fails `llm check`; an answer of non-UTF-8 bytes is a clear error that leaves no
// temporary file; a runaway invalid answer is quoted back in bounded excerpts, never resent
// whole; and every configuration key or variable a message names exists.
#include <gtest/gtest.h>

#include <cctype>
#include <regex>
#include <set>

#include "agent/agent_test_support.h"
#include "liger/config.h"
#include "liger/error.h"
#include "liger/llm/cassette.h"
#include "liger/llm/excerpt.h"
#include "liger/llm/provider.h"
#include "liger/llm/structured.h"
#include "liger/util.h"
#include "llm/llm_test_support.h"

namespace liger::llm {
namespace {

namespace fs = std::filesystem;
using testing::config_for;
using testing::json_answer;
using testing::ScopedEnv;
using testing::ScriptedAnswer;
using testing::TestServer;

ScriptedAnswer forever(ScriptedAnswer answer) {
  answer.forever = true;
  return answer;
}

ScriptedAnswer hang_forever() {
  ScriptedAnswer answer;
  answer.behaviour = ScriptedAnswer::Behaviour::StallBeforeResponse;
  answer.forever = true;
  return answer;
}

template <typename F>
Error expect_error(F&& body) {
  try {
    body();
  } catch (const Error& error) {
    return error;
  }
  ADD_FAILURE() << "expected liger::Error";
  return Error(ErrorKind::Internal, "no error thrown");
}

std::vector<std::string> temporary_files(const fs::path& root) {
  std::vector<std::string> found;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with(".tmp") || name.ends_with(".tmp")) found.push_back(entry.path().string());
  }
  return found;
}

// ------------------------------------------------------------------------------ llm check

struct CheckCase {
  const char* name;
  ScriptedAnswer answer;
  const char* failure;
  long status;
  bool reachable;
};

std::vector<CheckCase> failing_endpoints() {
  return {{"500 forever", forever(json_answer(500, R"({"error":{"message":"boom"}})")), "server_error", 500, true},
          {"503 forever", forever(json_answer(503, "<html>down</html>")), "server_error", 503, true},
          {"429 forever", forever(json_answer(429, R"({"error":{"message":"slow down"}})", {{"Retry-After", "0"}})),
           "rate_limited", 429, true},
          {"hang past the timeout", hang_forever(), "timeout", 0, false}};
}

TEST(LlmCheck, FailsWhenTheEndpointNeverGivesAUsableAnswer) {
  ScopedEnv key(testing::kTestKeyVar, testing::kTestKey);
  for (const auto& c : failing_endpoints()) {
    SCOPED_TRACE(c.name);
    TestServer server({c.answer});
    ProviderConfig config = config_for(server, ProviderKind::OpenAI);
    config.max_retries = 1;
    config.timeout_s = 1;
    const EndpointCheck check = check_endpoint(config);
    EXPECT_FALSE(check.ok()) << check.message;
    EXPECT_FALSE(check.answered);
    EXPECT_FALSE(check.model_ok);
    EXPECT_EQ(check.failure, c.failure) << check.message;
    EXPECT_EQ(check.http_status, c.status);
    EXPECT_EQ(check.reachable, c.reachable);
    EXPECT_FALSE(check.message.empty());
    EXPECT_FALSE(check.hint.empty());
    EXPECT_EQ(server.request_count(), 2u) << "one try and one retry";
  }
}

TEST(LlmCheck, CliExitsNonZeroWithOkFalseAndTheReason) {
  liger::testing::TempDir dir;
  for (const auto& c : failing_endpoints()) {
    SCOPED_TRACE(c.name);
    TestServer server({c.answer});
    const std::map<std::string, std::string> env = {{testing::kTestKeyVar, testing::kTestKey},
                                                    {"LIGER_AGENT_LLM_BASE_URL", server.base_url() + "/v1"},
                                                    {"LIGER_AGENT_LLM_API_KEY_ENV", testing::kTestKeyVar},
                                                    {"LIGER_AGENT_LLM_MAX_RETRIES", "0"},
                                                    {"LIGER_AGENT_LLM_TIMEOUT_S", "1"}};
    auto json = liger::testing::run_cli(dir.path(), {"--json", "--llm", "openai", "llm", "check"}, env);
    EXPECT_EQ(json.exit_code, 1) << json.out << json.err;
    const auto doc = json.json();
    EXPECT_EQ(doc["ok"], false) << doc.dump(2);
    EXPECT_EQ(doc["answered"], false);
    EXPECT_EQ(doc["failure"], c.failure) << doc.dump(2);
    EXPECT_EQ(doc["http_status"], c.status);
    EXPECT_FALSE(doc["message"].get<std::string>().empty());
    if (c.status != 0)
      EXPECT_NE(doc["message"].get<std::string>().find(std::to_string(c.status)), std::string::npos) << doc.dump(2);

    auto text = liger::testing::run_cli(dir.path(), {"--llm", "openai", "llm", "check"}, env);
    EXPECT_EQ(text.exit_code, 1) << text.out << text.err;
    EXPECT_NE(text.out.find("error:"), std::string::npos) << text.out;
    EXPECT_EQ(text.out.find("auth:      ok"), std::string::npos) << "a failed probe confirms nothing: " << text.out;
  }
}

TEST(LlmCheck, AHealthyEndpointStillPasses) {
  ScopedEnv key(testing::kTestKeyVar, testing::kTestKey);
  TestServer server({json_answer(200, testing::openai_body("ok"))});
  const EndpointCheck check = check_endpoint(config_for(server, ProviderKind::OpenAI));
  EXPECT_TRUE(check.ok()) << check.message;
  EXPECT_TRUE(check.answered);
  EXPECT_EQ(check.http_status, 200);
  EXPECT_TRUE(check.failure.empty());
}

// ------------------------------------------------------------------------------ non-UTF-8

TEST(LlmAnswers, NonUtf8BytesAreAClearErrorAndLeaveNoTemporaryFile) {
  ScopedEnv key(testing::kTestKeyVar, testing::kTestKey);
  const std::string raw_garbage = std::string("\xff\xfe\x00\x81garbage", 11);
  const std::string bad_in_json = testing::openai_body(std::string("ok ") + "PLACEHOLDER");
  std::string json_with_bad_bytes = bad_in_json;
  json_with_bad_bytes.replace(json_with_bad_bytes.find("PLACEHOLDER"), 11, "\xc3\x28\xa0\xa1");
  const std::vector<std::pair<std::string, ScriptedAnswer>> cases = {
      {"raw bytes", json_answer(200, raw_garbage)},
      {"inside a JSON string", json_answer(200, json_with_bad_bytes)},
      {"inside a stream event",
       testing::sse_answer({std::string("data: {\"choices\":[{\"delta\":{\"content\":\"a\xff\"}}]}\n\n")})}};
  for (const auto& [name, answer] : cases) {
    SCOPED_TRACE(name);
    testing::TempDir dir;
    TestServer server({answer});
    ProviderConfig config = config_for(server, ProviderKind::OpenAI);
    config.cassette_dir = (dir.path() / "llm").string();
    config.cassette_name = "cassette";
    config.record_mode = RecordMode::All;
    auto provider = make_provider(config);
    Request request;
    request.messages = {user_message("hi")};
    const bool stream = name == "inside a stream event";
    const Error error = expect_error([&] {
      if (stream) {
        provider->complete(request, [](std::string_view) {});
      } else {
        provider->complete(request);
      }
    });
    const std::string message = error.what();
    EXPECT_EQ(error.kind(), ErrorKind::Llm);
    EXPECT_NE(message.find("not UTF-8"), std::string::npos) << message;
    EXPECT_NE(message.find("offset"), std::string::npos) << message;
    EXPECT_EQ(first_invalid_utf8(message), std::string::npos) << "the message itself is printable";
    EXPECT_NE(error.hint().find("llm.base_url"), std::string::npos);
    EXPECT_EQ(temporary_files(dir.path()), std::vector<std::string>{});
    const fs::path cassette = dir.path() / "llm" / "cassette.json";
    if (fs::exists(cassette)) {
      const auto recorded = nlohmann::json::parse(util::read_file(cassette));
      ASSERT_EQ(recorded["interactions"].size(), 1u);
      EXPECT_EQ(recorded["interactions"][0]["response"]["body_complete"], false);
      EXPECT_EQ(recorded["interactions"][0]["response"]["body_utf8"], false);
    } else {
      EXPECT_TRUE(stream) << "a complete non-stream exchange is recorded";
    }
  }
}

TEST(LlmAnswers, AnExcerptOnlyCassetteEntryRefusesToReplay) {
  ScopedEnv key(testing::kTestKeyVar, testing::kTestKey);
  testing::TempDir dir;
  std::string url;
  {
    TestServer server({json_answer(200, "\xff not json")});
    url = server.base_url();
    ProviderConfig config = config_for(server, ProviderKind::OpenAI);
    config.cassette_dir = dir.path().string();
    config.cassette_name = "c";
    config.record_mode = RecordMode::All;
    Request request;
    request.messages = {user_message("hi")};
    expect_error([&] { make_provider(config)->complete(request); });
  }
  ProviderConfig replay;
  replay.kind = ProviderKind::OpenAI;
  replay.base_url = url + "/v1";
  replay.model = "gpt-4o-mini";
  replay.api_key_env = testing::kTestKeyVar;
  replay.cassette_dir = dir.path().string();
  replay.cassette_name = "c";
  replay.record_mode = RecordMode::ReplayOnly;
  Request request;
  request.messages = {user_message("hi")};
  const Error error = expect_error([&] { make_provider(replay)->complete(request); });
  EXPECT_NE(std::string(error.what()).find("keeps only an excerpt"), std::string::npos) << error.what();
  EXPECT_NE(error.hint().find("llm.record"), std::string::npos);
}

TEST(Excerpt, BoundedOnCharacterBoundariesAndAlwaysValidUtf8) {
  EXPECT_EQ(bounded_excerpt("short", 10), "short");
  const std::string long_text = std::string(100, 'a') + std::string(50, 'b');
  const std::string cut = bounded_excerpt(long_text, 10, 5);
  EXPECT_EQ(cut, std::string(10, 'a') + "\n... (135 bytes omitted) ...\n" + std::string(5, 'b'));
  // "é" is two bytes: a cut inside it moves to the character's edge.
  const std::string accents = "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9";
  const std::string cut_accents = bounded_excerpt(accents, 3, 3);
  EXPECT_EQ(first_invalid_utf8(cut_accents), std::string::npos) << cut_accents;
  EXPECT_EQ(cut_accents.substr(0, 2), "\xc3\xa9");
  EXPECT_EQ(to_valid_utf8("a\xff" "b"), "a\xef\xbf\xbd" "b");
  EXPECT_EQ(first_invalid_utf8("ok \xed\xa0\x80"), 3u) << "a UTF-16 surrogate is not UTF-8";
  EXPECT_EQ(first_invalid_utf8("\xc0\xaf"), 0u) << "overlong";
  EXPECT_EQ(first_invalid_utf8("\xf0\x9f\x98\x80 fine"), std::string::npos);
}

// ------------------------------------------------------------------------------ runaway answers

TEST(LlmAnswers, ARunawayInvalidAnswerIsQuotedInBoundedExcerptsNeverResentWhole) {
  ScopedEnv key(testing::kTestKeyVar, testing::kTestKey);
  testing::TempDir dir;
  // 20 MB of an unterminated JSON string: invalid, and a parser quoting its last token would
  // quote all of it.
  const std::size_t huge = 20u << 20;
  const std::string runaway = "```json\n{\"op\": \"" + std::string(huge, 'x') + "\n```\n";
  TestServer server({forever(json_answer(200, testing::openai_body(runaway)))}, std::chrono::seconds(120));
  ProviderConfig config = config_for(server, ProviderKind::OpenAI);
  config.cassette_dir = (dir.path() / "llm").string();
  config.cassette_name = "cassette";
  config.record_mode = RecordMode::All;
  config.timeout_s = 60;
  auto provider = make_provider(config);
  StructuredRequest request;
  request.format = DocumentFormat::Json;
  request.messages = {user_message("Name the op.")};
  request.max_reasks = 3;
  const Error error = expect_error([&] { ask_structured(*provider, request); });

  ASSERT_EQ(server.request_count(), 4u);
  const auto requests = server.requests();
  const std::size_t first = requests[0].body.size();
  for (std::size_t i = 1; i < requests.size(); ++i) {
    // The question, plus per re-ask at most one quoted excerpt and its error lines.
    EXPECT_LT(requests[i].body.size(), first + i * 16 * 1024) << "request " << i + 1;
    EXPECT_NE(requests[i].body.find("bytes omitted"), std::string::npos);
  }
  EXPECT_LT(std::string(error.what()).size(), 8u * 1024) << "the final error is bounded too";
  EXPECT_LT(fs::file_size(dir.path() / "llm" / "cassette.json"), 1u << 20) << "the cassette keeps excerpts";
  EXPECT_EQ(temporary_files(dir.path()), std::vector<std::string>{});
}

TEST(LlmAnswers, ASmallRejectedAnswerIsQuotedWhole) {
  ScopedEnv key(testing::kTestKeyVar, testing::kTestKey);
  TestServer server({json_answer(200, testing::openai_body("```json\n{\"op\": 5}\n```")),
                     json_answer(200, testing::openai_body("```json\n{\"op\": \"relu\"}\n```"))});
  auto provider = make_provider(config_for(server, ProviderKind::OpenAI));
  StructuredRequest request;
  request.format = DocumentFormat::Json;
  request.messages = {user_message("Name the op.")};
  request.schema = nlohmann::json{{"type", "object"}, {"properties", {{"op", {{"type", "string"}}}}}};
  const StructuredResult result = ask_structured(*provider, request);
  EXPECT_EQ(result.document["op"], "relu");
  ASSERT_EQ(server.request_count(), 2u);
  const auto second = nlohmann::json::parse(server.requests()[1].body);
  const auto& messages = second["messages"];
  EXPECT_EQ(messages[messages.size() - 2]["content"], "```json\n{\"op\": 5}\n```");
}

TEST(LlmAnswers, TheResponseSizeLimitIsAConfigurationKeyThatIsHonoured) {
  ConfigInputs inputs;
  inputs.flags = {{"llm.max_response_bytes", "4096"}};
  const ProviderConfig config = provider_config_from(Config::load(inputs));
  EXPECT_EQ(config.max_response_bytes, 4096u);
  EXPECT_EQ(provider_config_from(Config::defaults()).max_response_bytes, 32u << 20);
  inputs.flags = {{"llm.max_response_bytes", "0"}};
  EXPECT_THROW(provider_config_from(Config::load(inputs)), Error);

  ScopedEnv key(testing::kTestKeyVar, testing::kTestKey);
  TestServer server({json_answer(200, testing::openai_body(std::string(10000, 'y')))});
  ProviderConfig small = config_for(server, ProviderKind::OpenAI);
  small.max_retries = 0;
  small.max_response_bytes = 4096;
  Request request;
  request.messages = {user_message("hi")};
  const Error error = expect_error([&] { make_provider(small)->complete(request); });
  EXPECT_NE(std::string(error.what()).find("4096 byte limit"), std::string::npos) << error.what();
  EXPECT_NE(error.hint().find("llm.max_response_bytes"), std::string::npos) << error.hint();
}

// ------------------------------------------------------------------------------ hints

// The string literals of a C++ source (comments, character literals and digit separators are
// skipped; raw strings are taken whole). A scanner, not a regex: libstdc++'s regex recurses per
// character and overflows the stack on long literals.
std::vector<std::string> string_literals(const std::string& text) {
  std::vector<std::string> out;
  std::size_t i = 0;
  const std::size_t n = text.size();
  while (i < n) {
    const char c = text[i];
    if (c == '/' && i + 1 < n && text[i + 1] == '/') {
      i = text.find('\n', i);
      if (i == std::string::npos) break;
    } else if (c == '/' && i + 1 < n && text[i + 1] == '*') {
      i = text.find("*/", i + 2);
      if (i == std::string::npos) break;
      i += 2;
    } else if (c == 'R' && i + 1 < n && text[i + 1] == '"') {
      const std::size_t open = text.find('(', i + 2);
      if (open == std::string::npos) break;
      const std::string close = ")" + text.substr(i + 2, open - i - 2) + "\"";
      const std::size_t end = text.find(close, open + 1);
      if (end == std::string::npos) break;
      out.push_back(text.substr(open + 1, end - open - 1));
      i = end + close.size();
    } else if (c == '\'' && !(i > 0 && std::isalnum(static_cast<unsigned char>(text[i - 1])))) {
      ++i;
      while (i < n && text[i] != '\'') i += text[i] == '\\' ? 2 : 1;
      ++i;
    } else if (c == '"') {
      std::string literal;
      ++i;
      while (i < n && text[i] != '"' && text[i] != '\n') {
        if (text[i] == '\\' && i + 1 < n) {
          literal += text.substr(i, 2);
          i += 2;
        } else {
          literal += text[i++];
        }
      }
      out.push_back(literal);
      ++i;
    } else {
      ++i;
    }
  }
  return out;
}

// Every string literal of the sources under src/ and include/, with its file.
std::vector<std::pair<std::string, std::string>> source_string_literals() {
  std::vector<std::pair<std::string, std::string>> out;
  const fs::path root(LIGER_SOURCE_DIR);
  for (const char* top : {"src", "include"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / top)) {
      const auto ext = entry.path().extension();
      if (!entry.is_regular_file() || (ext != ".cpp" && ext != ".h")) continue;
      for (auto& literal : string_literals(util::read_file(entry.path())))
        out.emplace_back(fs::relative(entry.path(), root).string(), std::move(literal));
    }
  }
  return out;
}

TEST(Hints, TheLiteralScannerSkipsCommentsAndCharacters) {
  const auto found = string_literals("// \"not\"\nx = '\"'; y = 1'000; s = \"a\\\"b\"; /* \"no\" */ r = R\"d(q\"x)d\";");
  EXPECT_EQ(found, (std::vector<std::string>{"a\\\"b", "q\"x"}));
}

TEST(Hints, EveryConfigurationKeyAMessageNamesExists) {
  std::set<std::string> keys;
  for (const auto& spec : config_key_specs()) keys.insert(spec.key);
  static const std::regex key_ref(R"((?:^|[^A-Za-z0-9_.])((?:llm|cuda)\.[a-z_]+(?:\.[a-z_]+)*))");
  std::size_t checked = 0;
  for (const auto& [file, text] : source_string_literals()) {
    for (std::sregex_iterator it(text.begin(), text.end(), key_ref), end; it != end; ++it) {
      const std::string key = (*it)[1].str();
      ++checked;
      EXPECT_TRUE(keys.count(key)) << file << " names configuration key '" << key << "', which does not exist: \""
                                   << text << "\"";
    }
  }
  EXPECT_GT(checked, 20u) << "the scan found the hints";
}

TEST(Hints, EveryLigerAgentVariableAMessageNamesIsRead) {
  // A variable counts when the configuration takes it (a key's variable or a legacy alias) or
  // when some source reads it with getenv.
  const auto literals = source_string_literals();
  std::set<std::string> read_by_getenv;
  static const std::regex getenv_call(R"x(getenv\("(LIGER_AGENT_[A-Z_]+)"\))x");
  const fs::path root(LIGER_SOURCE_DIR);
  for (const auto& entry : fs::recursive_directory_iterator(root / "src")) {
    if (!entry.is_regular_file()) continue;
    const std::string text = util::read_file(entry.path());
    for (std::sregex_iterator it(text.begin(), text.end(), getenv_call), end; it != end; ++it)
      read_by_getenv.insert((*it)[1].str());
  }
  auto taken_by_config = [](const std::string& name) {
    ConfigInputs inputs;
    inputs.getenv = [name](const std::string& asked) -> std::optional<std::string> {
      if (asked == name) return std::string("1");
      return std::nullopt;
    };
    const Config config = Config::load(inputs);
    for (const auto& spec : config_key_specs())
      if (config.get(spec.key).source == name) return true;
    return false;
  };
  static const std::regex variable(R"(LIGER_AGENT_[A-Z_]*[A-Z])");
  std::size_t checked = 0;
  for (const auto& [file, text] : literals) {
    for (std::sregex_iterator it(text.begin(), text.end(), variable), end; it != end; ++it) {
      const std::string name = it->str();
      ++checked;
      EXPECT_TRUE(read_by_getenv.count(name) || taken_by_config(name))
          << file << " names " << name << ", which nothing reads: \"" << text << "\"";
    }
  }
  EXPECT_GT(checked, 3u);
}

}  // namespace
}  // namespace liger::llm
