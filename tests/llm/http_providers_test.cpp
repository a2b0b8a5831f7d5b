// The real libcurl client against a scripted local server: success, streaming, errors, retries,
// timeouts, size caps and key handling, for both APIs.
#include <gtest/gtest.h>

#include <chrono>

#include "liger/error.h"
#include "liger/llm/provider.h"
#include "llm/llm_test_support.h"

namespace liger::llm {
namespace {

using namespace std::chrono_literals;
using testing::ScriptedAnswer;
using testing::TestServer;
using testing::config_for;
using testing::json_answer;
using testing::sse_answer;

Request hello_request() {
  Request request;
  request.messages = {system_message("You are terse."), user_message("Say hello.")};
  return request;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Runs `body`, expecting a liger::Error, and returns it for inspection.
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

class HttpProviderTest : public ::testing::Test {
 protected:
  testing::ScopedEnv key_{testing::kTestKeyVar, testing::kTestKey};
};

TEST_F(HttpProviderTest, OpenAISuccessSendsBearerKeyAndReportsUsageAndCost) {
  TestServer server({json_answer(200, testing::openai_body("Hello!", 1'000'000, 500'000))});
  auto config = config_for(server, ProviderKind::OpenAI);
  config.price = Price{2.0, 8.0};
  config.ledger = std::make_shared<UsageLedger>();
  auto provider = make_provider(config);

  Response response = provider->complete(hello_request());

  EXPECT_EQ(response.text, "Hello!");
  EXPECT_EQ(response.usage.input_tokens, 1'000'000);
  EXPECT_EQ(response.usage.output_tokens, 500'000);
  EXPECT_FALSE(response.usage.estimated);
  EXPECT_DOUBLE_EQ(response.cost_usd, 2.0 + 4.0);
  EXPECT_GT(response.latency_s, 0.0);
  EXPECT_EQ(response.http_attempts, 1);
  ASSERT_EQ(server.request_count(), 1u);
  auto sent = server.requests()[0];
  EXPECT_EQ(sent.method, "POST");
  EXPECT_EQ(sent.path, "/v1/chat/completions");
  EXPECT_EQ(sent.header("authorization"), std::string("Bearer ") + testing::kTestKey);
  auto body = nlohmann::json::parse(sent.body);
  EXPECT_EQ(body["model"], "gpt-4o-mini");
  EXPECT_EQ(body["stream"], false);
  ASSERT_EQ(body["messages"].size(), 2u);
  EXPECT_EQ(body["messages"][0]["role"], "system");
  EXPECT_EQ(body["messages"][1]["content"], "Say hello.");
  auto report = config.ledger->to_json();
  EXPECT_EQ(report["total"]["requests"], 1);
  EXPECT_EQ(report["total"]["input_tokens"], 1'000'000);
  EXPECT_DOUBLE_EQ(report["total"]["cost_usd"].get<double>(), 6.0);
}

TEST_F(HttpProviderTest, AnthropicSuccessUsesMessagesApiHeadersAndSystemField) {
  TestServer server({json_answer(200, testing::anthropic_body("Hi there"))});
  auto provider = make_provider(config_for(server, ProviderKind::Anthropic));

  Response response = provider->complete(hello_request());

  EXPECT_EQ(response.text, "Hi there");
  EXPECT_EQ(response.usage.input_tokens, 20);
  EXPECT_EQ(response.usage.output_tokens, 7);
  EXPECT_EQ(response.stop_reason, "end_turn");
  ASSERT_EQ(server.request_count(), 1u);
  auto sent = server.requests()[0];
  EXPECT_EQ(sent.path, "/v1/messages");
  EXPECT_EQ(sent.header("x-api-key"), testing::kTestKey);
  EXPECT_EQ(sent.header("anthropic-version"), "2023-06-01");
  EXPECT_FALSE(sent.has_header("authorization"));
  auto body = nlohmann::json::parse(sent.body);
  EXPECT_EQ(body["system"], "You are terse.");
  ASSERT_EQ(body["messages"].size(), 1u);
  EXPECT_EQ(body["messages"][0]["role"], "user");
  EXPECT_GT(body["max_tokens"].get<int>(), 0);
}

TEST_F(HttpProviderTest, OpenAIStreamingDeliversChunksAndFinalUsage) {
  TestServer server({sse_answer({
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n",
      "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" world\"},",
      "\"finish_reason\":\"stop\"}]}\n\n",
      "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":3}}\n\n",
      "data: [DONE]\n\n"})});
  auto provider = make_provider(config_for(server, ProviderKind::OpenAI));
  std::vector<std::string> pieces;

  Response response = provider->complete(hello_request(), [&](std::string_view text) { pieces.emplace_back(text); });

  EXPECT_EQ(response.text, "Hello world");
  EXPECT_EQ(pieces, (std::vector<std::string>{"Hel", "lo", " world"}));
  EXPECT_EQ(response.usage.input_tokens, 9);
  EXPECT_EQ(response.usage.output_tokens, 3);
  EXPECT_EQ(response.stop_reason, "stop");
  auto body = nlohmann::json::parse(server.requests()[0].body);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  EXPECT_EQ(server.requests()[0].header("accept"), "text/event-stream");
}

TEST_F(HttpProviderTest, AnthropicStreamingDeliversDeltasAndUsage) {
  TestServer server({sse_answer({
      "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":31,\"output_tokens\":1}}}\n\n",
      "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
      "event: ping\ndata: {\"type\":\"ping\"}\n\n",
      "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Bon\"}}\n\n",
      "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"jour\"}}\n\n",
      "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
      "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":15}}\n\n",
      "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"})});
  auto provider = make_provider(config_for(server, ProviderKind::Anthropic));
  std::vector<std::string> pieces;

  Response response = provider->complete(hello_request(), [&](std::string_view text) { pieces.emplace_back(text); });

  EXPECT_EQ(response.text, "Bonjour");
  EXPECT_EQ(pieces, (std::vector<std::string>{"Bon", "jour"}));
  EXPECT_EQ(response.usage.input_tokens, 31);
  EXPECT_EQ(response.usage.output_tokens, 15);
  EXPECT_EQ(response.stop_reason, "end_turn");
  EXPECT_EQ(nlohmann::json::parse(server.requests()[0].body)["stream"], true);
}

TEST_F(HttpProviderTest, AnthropicStreamErrorEventBecomesAnError) {
  TestServer server({sse_answer({
      "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":1}}}\n\n",
      "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"})});
  auto provider = make_provider(config_for(server, ProviderKind::Anthropic));
  Error error = expect_error([&] { provider->complete(hello_request(), [](std::string_view) {}); });
  EXPECT_EQ(error.kind(), ErrorKind::Llm);
  EXPECT_NE(std::string(error.what()).find("Overloaded"), std::string::npos);
}

TEST_F(HttpProviderTest, MalformedJsonBodyIsAClearError) {
  TestServer server({json_answer(200, "{\"choices\": [ this is not json")});
  auto provider = make_provider(config_for(server, ProviderKind::OpenAI));
  Error error = expect_error([&] { provider->complete(hello_request()); });
  EXPECT_EQ(error.kind(), ErrorKind::Llm);
  EXPECT_NE(std::string(error.what()).find("malformed"), std::string::npos) << error.what();
  EXPECT_EQ(server.request_count(), 1u);
}

TEST_F(HttpProviderTest, WrongShapeJsonIsAClearError) {
  TestServer server({json_answer(200, R"({"unexpected": true})")});
  auto provider = make_provider(config_for(server, ProviderKind::OpenAI));
  Error error = expect_error([&] { provider->complete(hello_request()); });
  EXPECT_EQ(error.kind(), ErrorKind::Llm);
  EXPECT_NE(std::string(error.what()).find("malformed"), std::string::npos) << error.what();
}

TEST_F(HttpProviderTest, RateLimitHonoursRetryAfter) {
  TestServer server({json_answer(429, R"({"error":{"message":"slow down"}})", {{"Retry-After", "1"}}),
                     json_answer(200, testing::openai_body("after the wait"))});
  auto config = config_for(server, ProviderKind::OpenAI);
  config.backoff_base_s = 0.001;  // so only retry-after can explain a one-second wait
  auto provider = make_provider(config);
  auto start = std::chrono::steady_clock::now();

  Response response = provider->complete(hello_request());

  EXPECT_GE(seconds_since(start), 0.95);
  EXPECT_LT(seconds_since(start), 5.0);
  EXPECT_EQ(response.text, "after the wait");
  EXPECT_EQ(response.http_attempts, 2);
  EXPECT_EQ(server.request_count(), 2u);
}

TEST_F(HttpProviderTest, RetryAfterIsCapped) {
  TestServer server({json_answer(429, "{}", {{"Retry-After", "3600"}}),
                     json_answer(200, testing::openai_body("ok"))});
  auto config = config_for(server, ProviderKind::OpenAI);
  config.retry_after_cap_s = 0.2;
  auto provider = make_provider(config);
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(provider->complete(hello_request()).text, "ok");
  EXPECT_LT(seconds_since(start), 3.0);
}

TEST_F(HttpProviderTest, ServerErrorThenSuccessIsRetried) {
  TestServer server({json_answer(500, R"({"error":{"message":"boom"}})"),
                     json_answer(200, testing::openai_body("recovered"))});
  auto provider = make_provider(config_for(server, ProviderKind::OpenAI));
  Response response = provider->complete(hello_request());
  EXPECT_EQ(response.text, "recovered");
  EXPECT_EQ(server.request_count(), 2u);
}

TEST_F(HttpProviderTest, AnthropicOverloaded529ThenSuccessIsRetried) {
  TestServer server({json_answer(529, R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})"),
                     json_answer(200, testing::anthropic_body("made it"))});
  auto provider = make_provider(config_for(server, ProviderKind::Anthropic));
  EXPECT_EQ(provider->complete(hello_request()).text, "made it");
  EXPECT_EQ(server.request_count(), 2u);
}

TEST_F(HttpProviderTest, RetriesStopAtTheLimitWithANetworkError) {
  TestServer server({json_answer(503, "{}"), json_answer(503, "{}"), json_answer(503, "{}"),
                     json_answer(200, testing::openai_body("too late"))});
  auto config = config_for(server, ProviderKind::OpenAI);
  config.max_retries = 2;
  auto provider = make_provider(config);
  Error error = expect_error([&] { provider->complete(hello_request()); });
  EXPECT_EQ(error.kind(), ErrorKind::Network);
  EXPECT_TRUE(error.recoverable());
  EXPECT_NE(std::string(error.what()).find("after 3 attempts"), std::string::npos) << error.what();
  EXPECT_EQ(server.request_count(), 3u);
}

TEST_F(HttpProviderTest, UnauthorizedFailsFastNamingTheKeyVariable) {
  TestServer server({json_answer(401, R"({"error":{"message":"Incorrect API key provided"}})"),
                     json_answer(200, testing::openai_body("must not be reached"))});
  auto provider = make_provider(config_for(server, ProviderKind::OpenAI));
  Error error = expect_error([&] { provider->complete(hello_request()); });
  EXPECT_EQ(error.kind(), ErrorKind::Llm);
  EXPECT_EQ(server.request_count(), 1u);
  std::string text = std::string(error.what()) + "\n" + error.hint();
  EXPECT_NE(text.find(testing::kTestKeyVar), std::string::npos) << text;
  EXPECT_NE(text.find("401"), std::string::npos) << text;
  EXPECT_EQ(text.find(testing::kTestKey), std::string::npos) << "the key itself leaked: " << text;
}

TEST_F(HttpProviderTest, ForbiddenFailsFastToo) {
  TestServer server({json_answer(403, R"({"type":"error","error":{"type":"permission_error","message":"no access"}})")});
  auto provider = make_provider(config_for(server, ProviderKind::Anthropic));
  Error error = expect_error([&] { provider->complete(hello_request()); });
  EXPECT_EQ(server.request_count(), 1u);
  EXPECT_NE(std::string(error.hint()).find(testing::kTestKeyVar), std::string::npos);
}

TEST_F(HttpProviderTest, BadRequestIsNotRetried) {
  TestServer server({json_answer(400, R"({"error":{"message":"context too long"}})"),
                     json_answer(200, testing::openai_body("must not be reached"))});
  auto provider = make_provider(config_for(server, ProviderKind::OpenAI));
  Error error = expect_error([&] { provider->complete(hello_request()); });
  EXPECT_EQ(error.kind(), ErrorKind::Llm);
  EXPECT_EQ(server.request_count(), 1u);
  EXPECT_NE(std::string(error.what()).find("context too long"), std::string::npos);
}

TEST_F(HttpProviderTest, NotFoundIsNotRetriedAndPointsAtModelAndUrl) {
  TestServer server({json_answer(404, R"({"error":{"message":"model not found"}})")});
  auto provider = make_provider(config_for(server, ProviderKind::OpenAI));
  Error error = expect_error([&] { provider->complete(hello_request()); });
  EXPECT_EQ(server.request_count(), 1u);
  EXPECT_NE(error.hint().find("llm.model"), std::string::npos);
}

TEST_F(HttpProviderTest, ServerThatNeverAnswersTimesOut) {
  ScriptedAnswer silent;
  silent.behaviour = ScriptedAnswer::Behaviour::StallBeforeResponse;
  TestServer server({silent});
  auto config = config_for(server, ProviderKind::OpenAI);
  config.timeout_s = 1.0;
  config.max_retries = 0;
  auto provider = make_provider(config);
  auto start = std::chrono::steady_clock::now();
  Error error = expect_error([&] { provider->complete(hello_request()); });
  double elapsed = seconds_since(start);
  EXPECT_EQ(error.kind(), ErrorKind::Network);
  EXPECT_GE(elapsed, 0.9);
  EXPECT_LT(elapsed, 4.0);
  EXPECT_NE(error.hint().find("timeout"), std::string::npos) << error.hint();
}

TEST_F(HttpProviderTest, StreamThatStallsMidwayIsAbortedAndNotRetried) {
  ScriptedAnswer stalling = sse_answer({"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"partial\"}}]}\n\n"});
  stalling.behaviour = ScriptedAnswer::Behaviour::StallAfterChunks;
  TestServer server({stalling, json_answer(200, testing::openai_body("a retry would land here"))});
  auto config = config_for(server, ProviderKind::OpenAI);
  config.stall_timeout_s = 1;
  config.timeout_s = 20;
  auto provider = make_provider(config);
  std::string seen;
  auto start = std::chrono::steady_clock::now();
  Error error = expect_error([&] { provider->complete(hello_request(), [&](std::string_view t) { seen += t; }); });
  double elapsed = seconds_since(start);
  EXPECT_EQ(error.kind(), ErrorKind::Network);
  EXPECT_EQ(seen, "partial");
  EXPECT_LT(elapsed, 5.0);
  // The caller already showed "partial"; a retry would print the answer twice.
  EXPECT_EQ(server.request_count(), 1u);
}

TEST_F(HttpProviderTest, ConnectionErrorsAreRetriedThenReported) {
  int dead_port;
  {
    TestServer gone({});
    dead_port = gone.port();
  }
  ProviderConfig config;
  config.kind = ProviderKind::OpenAI;
  config.base_url = "http://127.0.0.1:" + std::to_string(dead_port) + "/v1";
  config.api_key_env = testing::kTestKeyVar;
  config.max_retries = 2;
  config.backoff_base_s = 0.01;
  config.connect_timeout_s = 1;
  auto provider = make_provider(config);
  Error error = expect_error([&] { provider->complete(hello_request()); });
  EXPECT_EQ(error.kind(), ErrorKind::Network);
  EXPECT_NE(std::string(error.what()).find("after 3 attempts"), std::string::npos) << error.what();
}

TEST_F(HttpProviderTest, HugeAnswerHitsTheSizeCap) {
  ScriptedAnswer huge;
  huge.behaviour = ScriptedAnswer::Behaviour::Huge;
  huge.huge_bytes = 8u << 20;
  TestServer server({huge});
  auto config = config_for(server, ProviderKind::OpenAI);
  config.max_response_bytes = 64 * 1024;
  auto provider = make_provider(config);
  Error error = expect_error([&] { provider->complete(hello_request()); });
  EXPECT_EQ(error.kind(), ErrorKind::Llm);
  EXPECT_NE(std::string(error.what()).find("65536 byte limit"), std::string::npos) << error.what();
  EXPECT_EQ(server.request_count(), 1u);
}

TEST(HttpProviderKeys, MissingKeyNamesTheVariable) {
  ::unsetenv("LIGER_LLM_TEST_UNSET_KEY");
  ProviderConfig config;
  config.kind = ProviderKind::Anthropic;
  config.api_key_env = "LIGER_LLM_TEST_UNSET_KEY";
  Error error = expect_error([&] { make_provider(config); });
  EXPECT_EQ(error.kind(), ErrorKind::Config);
  EXPECT_NE(std::string(error.what()).find("LIGER_LLM_TEST_UNSET_KEY"), std::string::npos);
  EXPECT_NE(error.hint().find("export LIGER_LLM_TEST_UNSET_KEY"), std::string::npos);
}

TEST(HttpProviderKeys, DefaultKeyVariablesPerApi) {
  ProviderConfig config;
  config.kind = ProviderKind::OpenAI;
  EXPECT_EQ(api_key_variable(config), "OPENAI_API_KEY");
  config.kind = ProviderKind::Anthropic;
  EXPECT_EQ(api_key_variable(config), "ANTHROPIC_API_KEY");
  config.api_key_env = "none";
  EXPECT_EQ(api_key_variable(config), "");
}

TEST(HttpProviderKeys, NoAuthModeSendsNoKey) {
  TestServer server({json_answer(200, testing::openai_body("local"))});
  auto config = config_for(server, ProviderKind::OpenAI);
  config.api_key_env = "none";
  EXPECT_EQ(make_provider(config)->complete(hello_request()).text, "local");
  EXPECT_FALSE(server.requests()[0].has_header("authorization"));
}

TEST_F(HttpProviderTest, KeyIsNotSentToAnotherOriginOnRedirect) {
  TestServer elsewhere({json_answer(200, testing::openai_body("from elsewhere"))});
  TestServer configured({json_answer(307, "{}", {{"Location", elsewhere.base_url() + "/v1/chat/completions"}})});
  auto provider = make_provider(config_for(configured, ProviderKind::OpenAI));

  Response response = provider->complete(hello_request());

  EXPECT_EQ(response.text, "from elsewhere");
  ASSERT_EQ(configured.request_count(), 1u);
  ASSERT_EQ(elsewhere.request_count(), 1u);
  EXPECT_EQ(configured.requests()[0].header("authorization"), std::string("Bearer ") + testing::kTestKey);
  EXPECT_FALSE(elsewhere.requests()[0].has_header("authorization"));
  EXPECT_EQ(elsewhere.requests()[0].body.find(testing::kTestKey), std::string::npos);
}

TEST_F(HttpProviderTest, AnthropicKeyIsNotSentToAnotherOriginOnRedirect) {
  TestServer elsewhere({json_answer(401, R"({"type":"error","error":{"message":"no key"}})")});
  TestServer configured({json_answer(308, "{}", {{"Location", elsewhere.base_url() + "/v1/messages"}})});
  auto provider = make_provider(config_for(configured, ProviderKind::Anthropic));
  EXPECT_THROW(provider->complete(hello_request()), Error);
  ASSERT_EQ(elsewhere.request_count(), 1u);
  EXPECT_FALSE(elsewhere.requests()[0].has_header("x-api-key"));
  EXPECT_EQ(configured.requests()[0].header("x-api-key"), testing::kTestKey);
}

TEST_F(HttpProviderTest, SameOriginRedirectKeepsTheKey) {
  TestServer server({json_answer(307, "{}", {{"Location", "/v2/chat/completions"}}),
                     json_answer(200, testing::openai_body("moved"))});
  auto provider = make_provider(config_for(server, ProviderKind::OpenAI));
  EXPECT_EQ(provider->complete(hello_request()).text, "moved");
  ASSERT_EQ(server.request_count(), 2u);
  EXPECT_EQ(server.requests()[1].path, "/v2/chat/completions");
  EXPECT_EQ(server.requests()[1].header("authorization"), std::string("Bearer ") + testing::kTestKey);
}

TEST_F(HttpProviderTest, CheckReportsAHealthyEndpoint) {
  TestServer server({json_answer(200, testing::openai_body("ok"))});
  EndpointCheck check = check_endpoint(config_for(server, ProviderKind::OpenAI));
  EXPECT_TRUE(check.ok()) << check.message;
  EXPECT_TRUE(check.reachable && check.auth_ok && check.model_ok);
  EXPECT_GT(check.latency_s, 0.0);
}

TEST_F(HttpProviderTest, CheckReportsBadAuth) {
  TestServer server({json_answer(401, R"({"error":{"message":"bad key"}})")});
  EndpointCheck check = check_endpoint(config_for(server, ProviderKind::OpenAI));
  EXPECT_FALSE(check.ok());
  EXPECT_TRUE(check.reachable);
  EXPECT_FALSE(check.auth_ok);
  EXPECT_NE(check.hint.find(testing::kTestKeyVar), std::string::npos);
}

TEST_F(HttpProviderTest, CheckReportsUnknownModel) {
  TestServer server({json_answer(404, R"({"error":{"message":"The model `nope` does not exist"}})")});
  EndpointCheck check = check_endpoint(config_for(server, ProviderKind::OpenAI));
  EXPECT_TRUE(check.reachable);
  EXPECT_TRUE(check.auth_ok);
  EXPECT_FALSE(check.model_ok);
}

TEST(HttpProviderCheck, ReportsUnreachableAndMissingKey) {
  int dead_port;
  {
    TestServer gone({});
    dead_port = gone.port();
  }
  testing::ScopedEnv key(testing::kTestKeyVar, testing::kTestKey);
  ProviderConfig config;
  config.kind = ProviderKind::OpenAI;
  config.base_url = "http://127.0.0.1:" + std::to_string(dead_port) + "/v1";
  config.api_key_env = testing::kTestKeyVar;
  config.max_retries = 0;
  EndpointCheck unreachable = check_endpoint(config);
  EXPECT_FALSE(unreachable.reachable);
  EXPECT_FALSE(unreachable.hint.empty());

  config.api_key_env = "LIGER_LLM_TEST_UNSET_KEY";
  EndpointCheck no_key = check_endpoint(config);
  EXPECT_FALSE(no_key.ok());
  EXPECT_FALSE(no_key.configured);
  EXPECT_TRUE(unreachable.configured);
  EXPECT_NE(no_key.message.find("LIGER_LLM_TEST_UNSET_KEY"), std::string::npos);
}

}  // namespace
}  // namespace liger::llm
