// Record/replay: recorded exchanges replay with the server gone, secrets never reach the file,
// and a miss in replay-only mode says which cassette to re-record.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "liger/error.h"
#include "liger/llm/cassette.h"
#include "liger/llm/provider.h"
#include "llm/llm_test_support.h"

namespace liger::llm {
namespace {

using testing::TestServer;
using testing::config_for;
using testing::json_answer;

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

Request question(const std::string& text) {
  Request request;
  request.messages = {user_message(text)};
  return request;
}

class CassetteTest : public ::testing::Test {
 protected:
  testing::TempDir dir_;
  std::optional<testing::ScopedEnv> key_{std::in_place, testing::kTestKeyVar, testing::kTestKey};

  ProviderConfig recording(const TestServer& server, ProviderKind kind, RecordMode mode) {
    auto config = config_for(server, kind);
    config.cassette_dir = dir_.path().string();
    config.cassette_name = "exchange";
    config.record_mode = mode;
    return config;
  }
  std::filesystem::path cassette_file() const { return dir_.path() / "exchange.json"; }
};

TEST_F(CassetteTest, RecordThenReplayWithTheServerStoppedAndNoKey) {
  auto server = std::make_unique<TestServer>(std::vector{json_answer(200, testing::openai_body("recorded answer", 11, 4))});
  auto config = recording(*server, ProviderKind::OpenAI, RecordMode::All);
  EXPECT_EQ(make_provider(config)->complete(question("what is 2+2?")).text, "recorded answer");
  ASSERT_TRUE(std::filesystem::exists(cassette_file()));
  server.reset();  // nothing listens on that port any more
  key_.reset();    // and no key is available: replay must not need one

  config.record_mode = RecordMode::ReplayOnly;
  Response replayed = make_provider(config)->complete(question("what is 2+2?"));

  EXPECT_EQ(replayed.text, "recorded answer");
  EXPECT_EQ(replayed.usage.input_tokens, 11);
  EXPECT_TRUE(replayed.replayed);
}

TEST_F(CassetteTest, CassetteHoldsNoSecretsEvenWhenTheServerEchoesTheKey) {
  std::string echo = std::string(R"({"error":{"message":"Incorrect API key provided: )") + testing::kTestKey + R"("}})";
  TestServer server({json_answer(200, testing::openai_body(std::string("your key is ") + testing::kTestKey),
                                 {{"Set-Cookie", "session=abcdef123456"}}),
                     json_answer(401, echo)});
  auto provider = make_provider(recording(server, ProviderKind::OpenAI, RecordMode::All));
  provider->complete(question("echo my key"));
  EXPECT_THROW(provider->complete(question("again")), Error);

  std::string text = read_file(cassette_file());
  EXPECT_EQ(text.find(testing::kTestKey), std::string::npos) << text;
  EXPECT_EQ(text.find("abcdef123456"), std::string::npos) << "cookie leaked";
  EXPECT_NE(text.find("[REDACTED]"), std::string::npos);
  auto cassette = nlohmann::json::parse(text);
  ASSERT_EQ(cassette["interactions"].size(), 2u);
  EXPECT_EQ(cassette["interactions"][1]["response"]["status"], 401);
}

TEST_F(CassetteTest, ReplayMissInNoneModeNamesTheCassette) {
  TestServer server({json_answer(200, testing::openai_body("only this one"))});
  auto config = recording(server, ProviderKind::OpenAI, RecordMode::All);
  make_provider(config)->complete(question("recorded question"));
  config.record_mode = RecordMode::ReplayOnly;
  auto provider = make_provider(config);
  try {
    provider->complete(question("a question nobody recorded"));
    FAIL() << "expected a replay miss";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::Llm);
    EXPECT_NE(std::string(error.what()).find(cassette_file().string()), std::string::npos) << error.what();
    EXPECT_NE(error.hint().find("LIGER_AGENT_RECORD"), std::string::npos);
  }
  EXPECT_EQ(server.request_count(), 1u);
}

TEST_F(CassetteTest, ReplayOnlyWithoutACassetteFileIsAMiss) {
  TestServer server({});
  auto provider = make_provider(recording(server, ProviderKind::OpenAI, RecordMode::ReplayOnly));
  EXPECT_THROW(provider->complete(question("anything")), Error);
  EXPECT_EQ(server.request_count(), 0u);
}

TEST_F(CassetteTest, OnceRecordsWhenMissingThenReplays) {
  TestServer server({json_answer(200, testing::anthropic_body("first and only"))});
  auto config = recording(server, ProviderKind::Anthropic, RecordMode::Once);
  EXPECT_EQ(make_provider(config)->complete(question("q")).text, "first and only");
  EXPECT_EQ(make_provider(config)->complete(question("q")).text, "first and only");
  EXPECT_EQ(server.request_count(), 1u);
}

TEST_F(CassetteTest, StreamedExchangesReplayThroughTheCallback) {
  TestServer server({testing::sse_answer(
      {"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"stre\"}}]}\n\n",
       "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"amed\"}}]}\n\n", "data: [DONE]\n\n"})});
  auto config = recording(server, ProviderKind::OpenAI, RecordMode::All);
  std::string live;
  make_provider(config)->complete(question("stream it"), [&](std::string_view t) { live += t; });
  EXPECT_EQ(live, "streamed");
  auto stored = nlohmann::json::parse(read_file(cassette_file()));
  EXPECT_NE(stored["interactions"][0]["response"]["body"].get<std::string>().find("data: [DONE]"), std::string::npos)
      << "streamed bodies are stored raw";

  config.record_mode = RecordMode::ReplayOnly;
  std::string replayed;
  Response response = make_provider(config)->complete(question("stream it"), [&](std::string_view t) { replayed += t; });
  EXPECT_EQ(replayed, "streamed");
  EXPECT_EQ(response.text, "streamed");
}

TEST(CassetteMatching, BodiesMatchRegardlessOfKeyOrderAndSpacing) {
  EXPECT_EQ(normalise_body(R"({"b": 1, "a": [1, 2]})"), normalise_body(R"({"a":[1,2],"b":1})"));
  EXPECT_NE(normalise_body(R"({"a": 1})"), normalise_body(R"({"a": 2})"));
  EXPECT_EQ(normalise_body("not json"), "not json");
}

TEST(CassetteModes, ParseAndEnvironment) {
  EXPECT_EQ(parse_record_mode("none"), RecordMode::ReplayOnly);
  EXPECT_EQ(parse_record_mode("once"), RecordMode::Once);
  EXPECT_EQ(parse_record_mode("all"), RecordMode::All);
  EXPECT_THROW(parse_record_mode("sometimes"), Error);
  {
    testing::ScopedEnv env("LIGER_AGENT_RECORD", "all");
    EXPECT_EQ(record_mode_from_env(RecordMode::Disabled), RecordMode::All);
  }
  EXPECT_EQ(record_mode_from_env(RecordMode::Once), RecordMode::Once);
}

}  // namespace
}  // namespace liger::llm
