// Keys must not survive into logs or files, and must only travel to their own origin.
#include <gtest/gtest.h>

#include <ctime>
#include <sstream>

#include <spdlog/logger.h>
#include <spdlog/sinks/ostream_sink.h>

#include "liger/error.h"
#include "liger/llm/http.h"
#include "liger/llm/redact.h"

namespace liger::llm {
namespace {

TEST(Redact, RegisteredSecretsAreRemovedWherever) {
  SecretRegistry::global().add("registered-secret-value-42");
  std::string text = redact("prefix registered-secret-value-42 suffix, again:registered-secret-value-42");
  EXPECT_EQ(text.find("registered-secret-value-42"), std::string::npos);
  EXPECT_NE(text.find("prefix [REDACTED] suffix"), std::string::npos) << text;
}

TEST(Redact, KeyShapedTokensAreRemovedEvenIfUnknown) {
  std::string text = redact("key sk-proj-ABCDEFGHIJKLMNOPQRSTUV and sk-ant-api03-ZZZZZZZZZZZZZZZZZZZZ here");
  EXPECT_EQ(text.find("ABCDEFGHIJKLMNOP"), std::string::npos) << text;
  EXPECT_EQ(text.find("ZZZZZZZZZZZZ"), std::string::npos) << text;
  EXPECT_EQ(redact("Authorization: Bearer abc.def-123456789"), "Authorization: Bearer [REDACTED]");
  // Ordinary text with short look-alikes is left alone.
  EXPECT_EQ(redact("task-list and sk-1 stay"), "task-list and sk-1 stay");
}

TEST(Redact, ExtraSecretsAreRemoved) {
  EXPECT_EQ(redact("token=hunter2hunter2", {"hunter2hunter2"}), "token=[REDACTED]");
}

TEST(Redact, SensitiveHeadersLoseTheirValues) {
  Headers headers = {{"Authorization", "Bearer whatever-token-here"},
                     {"x-api-key", "plain-key-value"},
                     {"Content-Type", "application/json"},
                     {"X-Echo", "mentions hidden-extra-secret"}};
  Headers clean = redact_headers(headers, {"hidden-extra-secret"});
  EXPECT_EQ(clean[0].second, "[REDACTED]");
  EXPECT_EQ(clean[1].second, "[REDACTED]");
  EXPECT_EQ(clean[2].second, "application/json");
  EXPECT_EQ(clean[3].second, "mentions [REDACTED]");
  EXPECT_TRUE(is_sensitive_header("PROXY-AUTHORIZATION"));
  EXPECT_FALSE(is_sensitive_header("content-length"));
}

TEST(Redact, LogSinkScrubsMessages) {
  SecretRegistry::global().add("logged-secret-0987654321");
  std::ostringstream captured;
  auto inner = std::make_shared<spdlog::sinks::ostream_sink_mt>(captured);
  spdlog::logger logger("redact-test", make_redacting_sink(inner));
  logger.set_pattern("%v");
  logger.warn("calling with key {} and header Bearer {}", "logged-secret-0987654321", "tok_abcdefghijk");
  logger.flush();
  std::string line = captured.str();
  EXPECT_EQ(line.find("logged-secret-0987654321"), std::string::npos) << line;
  EXPECT_EQ(line.find("tok_abcdefghijk"), std::string::npos) << line;
  EXPECT_NE(line.find("calling with key [REDACTED]"), std::string::npos) << line;
}

TEST(Origin, SchemeHostAndPortDecide) {
  EXPECT_EQ(origin_of("https://API.openai.com/v1"), "https://api.openai.com:443");
  EXPECT_EQ(origin_of("http://127.0.0.1:8080/v1/chat"), "http://127.0.0.1:8080");
  EXPECT_EQ(origin_of("http://localhost/x"), "http://localhost:80");
  EXPECT_THROW(origin_of("not a url"), Error);
  EXPECT_THROW(origin_of("ftp://example.com/"), Error);
}

TEST(Origin, KeyOnlyGoesToItsOwnOrigin) {
  KeyBinding binding{origin_of("https://api.example.com/v1"), {{"authorization", "Bearer k"}}, "KEY"};
  EXPECT_EQ(binding.headers_for("https://api.example.com/v1/chat/completions").size(), 1u);
  EXPECT_TRUE(binding.headers_for("http://api.example.com/v1/chat/completions").empty()) << "scheme downgrade";
  EXPECT_TRUE(binding.headers_for("https://api.example.com:8443/v1").empty()) << "other port";
  EXPECT_TRUE(binding.headers_for("https://evil.example.com/v1").empty()) << "other host";
  EXPECT_TRUE(binding.headers_for("https://api.example.com.evil.net/v1").empty());
  EXPECT_TRUE(binding.headers_for("https://user@evil.net/?https://api.example.com").empty());
}

TEST(Origin, RelativeRedirectsResolve) {
  EXPECT_EQ(resolve_url("http://a.test:81/v1/chat", "/v2/x"), "http://a.test:81/v2/x");
  EXPECT_EQ(resolve_url("http://a.test/v1/chat", "https://b.test/y"), "https://b.test/y");
}

TEST(RetryAfter, SecondsMillisecondsAndHttpDates) {
  HttpResponse response;
  response.headers = {{"retry-after", "7"}};
  EXPECT_DOUBLE_EQ(*retry_after_seconds(response), 7.0);
  response.headers = {{"retry-after-ms", "250"}, {"retry-after", "7"}};
  EXPECT_DOUBLE_EQ(*retry_after_seconds(response), 0.25);
  std::time_t later = std::time(nullptr) + 30;
  char date[64];
  std::strftime(date, sizeof date, "%a, %d %b %Y %H:%M:%S GMT", std::gmtime(&later));
  response.headers = {{"Retry-After", date}};
  double wait = *retry_after_seconds(response);
  EXPECT_GT(wait, 25.0);
  EXPECT_LE(wait, 31.0);
  response.headers = {{"retry-after", "soon"}};
  EXPECT_FALSE(retry_after_seconds(response).has_value());
  response.headers = {};
  EXPECT_FALSE(retry_after_seconds(response).has_value());
}

TEST(RetryPolicy, RetryableStatuses) {
  for (long status : {408L, 409L, 429L, 500L, 502L, 503L, 504L, 529L}) EXPECT_TRUE(is_retryable_status(status)) << status;
  for (long status : {200L, 400L, 401L, 403L, 404L, 422L}) EXPECT_FALSE(is_retryable_status(status)) << status;
}

}  // namespace
}  // namespace liger::llm
