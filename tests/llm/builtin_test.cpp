// The built-in provider: deterministic answers from registered analysers, and undecided fields
// marked with a reason instead of guesses.
#include <gtest/gtest.h>

#include "liger/error.h"
#include "liger/llm/builtin.h"
#include "liger/llm/progress.h"
#include "liger/llm/structured.h"

namespace liger::llm {
namespace {

const nlohmann::json kUnderstandSchema = nlohmann::json::parse(R"({
  "type": "object",
  "required": ["op", "tier", "formulas"],
  "properties": {
    "op": {"type": "string"},
    "tier": {"type": "integer"},
    "formulas": {"type": "object", "required": ["forward", "backward"],
                 "properties": {"forward": {"type": "string"}, "backward": {"type": "string"}}}
  }
})");

// Stands in for a workflow analyser: understands "relu2", cannot derive its tier.
nlohmann::json test_analyser(const Request& request) {
  std::string description = request.input.value("description", "");
  if (description.find("ReLU squared") == std::string::npos)
    return {{"op", undecided("not an operation this analyser knows")}};
  return {{"op", "relu_squared"},
          {"tier", undecided("tier depends on a benchmark that has not run")},
          {"formulas", {{"forward", "max(x, 0)^2"}}}};
}

StructuredRequest understand(const std::string& description) {
  StructuredRequest request;
  request.kind = "kernel-dev/understand";
  request.input = {{"description", description}};
  request.schema = kUnderstandSchema;
  request.messages = {user_message("Understand: " + description)};
  return request;
}

TEST(Builtin, AnswersFromTheRegisteredAnalyserAndMarksWhatItCannotDecide) {
  auto registry = std::make_shared<AnalyserRegistry>();
  registry->add("kernel-dev/understand", &test_analyser);
  BuiltinProvider provider(registry);

  StructuredResult result = ask_structured(provider, understand("ReLU squared activation"));

  EXPECT_EQ(result.attempts, 1);
  EXPECT_EQ(result.document["op"], "relu_squared");
  EXPECT_EQ(result.document["formulas"]["forward"], "max(x, 0)^2");
  ASSERT_EQ(result.undecided.size(), 2u);
  EXPECT_EQ(result.undecided[0].path, "$.formulas.backward") << "left out by the analyser";
  EXPECT_NE(result.undecided[0].reason.find("kernel-dev/understand"), std::string::npos);
  EXPECT_EQ(result.undecided[1].path, "$.tier");
  EXPECT_EQ(result.undecided[1].reason, "tier depends on a benchmark that has not run");
  EXPECT_EQ(result.usage.input_tokens, 0);
}

TEST(Builtin, IsDeterministic) {
  auto registry = std::make_shared<AnalyserRegistry>();
  registry->add("kernel-dev/understand", &test_analyser);
  BuiltinProvider provider(registry);
  Request request;
  request.kind = "kernel-dev/understand";
  request.input = {{"description", "ReLU squared"}};
  request.schema = kUnderstandSchema;
  EXPECT_EQ(provider.complete(request).text, provider.complete(request).text);
  EXPECT_TRUE(provider.deterministic());
}

TEST(Builtin, WithoutAnAnalyserEveryRequiredFieldIsUndecided) {
  BuiltinProvider provider(std::make_shared<AnalyserRegistry>());
  StructuredResult result = ask_structured(provider, understand("anything"));
  ASSERT_EQ(result.undecided.size(), 3u);
  for (const auto& field : result.undecided)
    EXPECT_NE(field.reason.find("no analyser for 'kernel-dev/understand'"), std::string::npos) << field.reason;
}

TEST(Builtin, JsonFormatIsHonoured) {
  auto registry = std::make_shared<AnalyserRegistry>();
  registry->add("kernel-dev/understand", &test_analyser);
  BuiltinProvider provider(registry);
  auto request = understand("ReLU squared");
  request.format = DocumentFormat::Json;
  StructuredResult result = ask_structured(provider, request);
  EXPECT_NE(result.answer.find("```json"), std::string::npos);
  EXPECT_EQ(result.document["op"], "relu_squared");
}

TEST(Builtin, GlobalRegistrationAndCheck) {
  static AnalyserRegistration registration{"test/registered-at-startup", [](const Request&) {
                                             return nlohmann::json{{"ok", true}};
                                           }};
  EXPECT_TRUE(AnalyserRegistry::global()->find("test/registered-at-startup").has_value());
  auto provider = make_provider(ProviderConfig{});
  EXPECT_EQ(provider->name(), "builtin");
  EndpointCheck check = provider->check();
  EXPECT_TRUE(check.ok());
  EXPECT_FALSE(check.needs_endpoint);
  EXPECT_NE(check.message.find("needs no endpoint"), std::string::npos);
  EXPECT_NE(check.message.find("test/registered-at-startup"), std::string::npos);
  EXPECT_TRUE(AnalyserRegistry::global()->remove("test/registered-at-startup"));
}

TEST(Builtin, StreamsItsAnswerToo) {
  BuiltinProvider provider(std::make_shared<AnalyserRegistry>());
  std::string streamed;
  Request request;
  request.kind = "x";
  Response response = provider.complete(request, [&](std::string_view t) { streamed += t; });
  EXPECT_EQ(streamed, response.text);
  EXPECT_NE(response.text.find("undecided"), std::string::npos);
}

TEST(Usage, PriceTableLongestPrefixAndShippedDefaults) {
  PriceTable table;
  table.set("gpt-4o", {2.5, 10});
  table.set("gpt-4o-mini", {0.15, 0.6});
  EXPECT_DOUBLE_EQ(table.find("gpt-4o-mini-2024-07-18")->input_per_mtok, 0.15);
  EXPECT_DOUBLE_EQ(table.find("gpt-4o-2024-08-06")->output_per_mtok, 10);
  EXPECT_FALSE(table.find("llama-3-70b").has_value());
  EXPECT_DOUBLE_EQ(cost_of(Usage{2'000'000, 1'000'000}, Price{1, 3}), 5.0);
  const auto& shipped = PriceTable::builtin_defaults();
  ASSERT_FALSE(shipped.empty()) << "skills/llm/prices.yaml not found";
  EXPECT_TRUE(shipped.find("claude-sonnet-4-20250514").has_value());
}

TEST(Usage, LedgerAccumulatesPerModel) {
  UsageLedger ledger;
  Response a;
  a.provider = "openai";
  a.model = "m1";
  a.usage = {10, 5};
  a.cost_usd = 0.5;
  Response b = a;
  b.model = "m2";
  b.replayed = true;
  ledger.add(a);
  ledger.add(a);
  ledger.add(b);
  auto json = ledger.to_json();
  EXPECT_EQ(json["total"]["requests"], 3);
  EXPECT_EQ(json["total"]["input_tokens"], 30);
  EXPECT_EQ(json["total"]["replayed"], 1);
  EXPECT_DOUBLE_EQ(json["total"]["cost_usd"].get<double>(), 1.5);
  ASSERT_EQ(json["by_model"].size(), 2u);
  EXPECT_EQ(json["by_model"][0]["requests"], 2);
}

TEST(Config, ProviderKindsParse) {
  EXPECT_EQ(parse_provider_kind("openai-compatible"), ProviderKind::OpenAI);
  EXPECT_EQ(parse_provider_kind("anthropic"), ProviderKind::Anthropic);
  EXPECT_EQ(parse_provider_kind("builtin"), ProviderKind::Builtin);
  EXPECT_THROW(parse_provider_kind("gemini"), Error);
}

TEST(Progress, SilentWhenNotATerminal) {
  std::FILE* file = std::tmpfile();
  {
    LiveIndicator indicator("understand", file);
    auto callback = indicator.callback();
    callback("some text");
    EXPECT_EQ(indicator.characters(), 9u);
  }
  EXPECT_EQ(std::ftell(file), 0L);
  std::fclose(file);
}

}  // namespace
}  // namespace liger::llm
