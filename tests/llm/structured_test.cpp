// The structured-output helper: extraction, parsing, schema checks and the bounded re-ask loop,
// the loop driven through the real OpenAI provider against the scripted server.
#include <gtest/gtest.h>

#include "liger/error.h"
#include "liger/llm/builtin.h"
#include "liger/llm/structured.h"
#include "llm/llm_test_support.h"

namespace liger::llm {
namespace {

using testing::TestServer;
using testing::config_for;
using testing::json_answer;

const nlohmann::json kSchema = nlohmann::json::parse(R"({
  "type": "object",
  "required": ["name", "tier", "dtypes"],
  "additionalProperties": false,
  "properties": {
    "name": {"type": "string", "minLength": 1},
    "tier": {"type": "integer", "minimum": 1, "maximum": 3},
    "dtypes": {"type": "array", "minItems": 1, "items": {"enum": ["fp32", "fp16", "bf16"]}},
    "notes": {"type": ["string", "null"]}
  }
})");

TEST(Extract, PrefersTheFenceOfTheWantedFormat) {
  std::string answer = "Here you go:\n```json\n{\"a\": 1}\n```\nand as YAML:\n```yaml\na: 2\n```\nDone.";
  EXPECT_EQ(extract_document(answer, DocumentFormat::Yaml), "a: 2\n");
  EXPECT_EQ(extract_document(answer, DocumentFormat::Json), "{\"a\": 1}\n");
}

TEST(Extract, FallsBackToAnyFenceThenToTheBareText) {
  EXPECT_EQ(extract_document("```\nx: 1\n```", DocumentFormat::Yaml), "x: 1\n");
  EXPECT_EQ(extract_document("  x: 1  \n", DocumentFormat::Yaml), "x: 1");
  EXPECT_EQ(extract_document("Sure! {\"x\": [1]} Hope that helps.", DocumentFormat::Json), "{\"x\": [1]}");
  EXPECT_EQ(extract_document("```yaml\nx: 1\ny: [", DocumentFormat::Yaml), "x: 1\ny: [\n") << "cut-off answer";
}

TEST(Parse, YamlScalarsGetTheirTypes) {
  auto doc = parse_document("i: 3\nf: 1.5e-3\nb: true\nn: ~\ns: hello\nq: \"42\"\nlist: [1, two]\nblock: |\n  a\n  b\n",
                            DocumentFormat::Yaml);
  EXPECT_TRUE(doc["i"].is_number_integer());
  EXPECT_DOUBLE_EQ(doc["f"].get<double>(), 1.5e-3);
  EXPECT_EQ(doc["b"], true);
  EXPECT_TRUE(doc["n"].is_null());
  EXPECT_EQ(doc["s"], "hello");
  EXPECT_EQ(doc["q"], "42") << "quoted scalars stay strings";
  EXPECT_EQ(doc["list"][1], "two");
  EXPECT_EQ(doc["block"], "a\nb\n");
}

TEST(Parse, MalformedInputIsAnLlmError) {
  EXPECT_THROW(parse_document("a: [1, 2", DocumentFormat::Yaml), Error);
  EXPECT_THROW(parse_document("{\"a\": ", DocumentFormat::Json), Error);
  EXPECT_THROW(parse_document("   ", DocumentFormat::Yaml), Error);
}

TEST(Serialise, YamlRoundTripsTypes) {
  nlohmann::json doc = {{"s", "1.0"}, {"e", ""}, {"t", "true"}, {"n", 2.5}, {"i", 7}, {"multi", "x\ny\n"},
                        {"u", undecided("no idea")}, {"list", {1, "a"}}, {"null", nullptr}};
  EXPECT_EQ(parse_document(serialise_document(doc, DocumentFormat::Yaml), DocumentFormat::Yaml), doc);
  EXPECT_EQ(parse_document(serialise_document(doc, DocumentFormat::Json), DocumentFormat::Json), doc);
}

TEST(SchemaLite, ReportsEveryProblemWithItsPath) {
  auto errors = validate_schema_lite(nlohmann::json{{"name", ""}, {"tier", 7}, {"dtypes", {"fp8"}}, {"extra", 1}}, kSchema);
  std::string all;
  for (const auto& e : errors) all += e + "\n";
  EXPECT_NE(all.find("$.name: shorter than 1"), std::string::npos) << all;
  EXPECT_NE(all.find("$.tier: 7 is above the maximum 3"), std::string::npos) << all;
  EXPECT_NE(all.find("$.dtypes[0]: \"fp8\" is not one of"), std::string::npos) << all;
  EXPECT_NE(all.find("unknown field 'extra'"), std::string::npos) << all;
  EXPECT_EQ(validate_schema_lite(nlohmann::json{{"tier", "x"}}, kSchema).size(), 3u) << "2 missing + 1 type";
  EXPECT_TRUE(validate_schema_lite(nlohmann::json{{"name", "relu2"}, {"tier", 1}, {"dtypes", {"bf16"}}, {"notes", nullptr}}, kSchema).empty());
}

TEST(SchemaLite, UndecidedIsAcceptedAnywhere) {
  nlohmann::json doc = {{"name", "relu2"}, {"tier", undecided("needs profiling")}, {"dtypes", {"fp32"}}};
  EXPECT_TRUE(validate_schema_lite(doc, kSchema).empty());
  auto fields = find_undecided(doc);
  ASSERT_EQ(fields.size(), 1u);
  EXPECT_EQ(fields[0].path, "$.tier");
  EXPECT_EQ(fields[0].reason, "needs profiling");
}

class ReaskTest : public ::testing::Test {
 protected:
  testing::ScopedEnv key_{testing::kTestKeyVar, testing::kTestKey};

  StructuredRequest profile_request() {
    StructuredRequest request;
    request.messages = {system_message("You write kernel profiles."), user_message("Profile ReLU squared.")};
    request.schema = kSchema;
    return request;
  }
};

TEST_F(ReaskTest, SchemaInvalidAnswerIsSentBackWithItsErrorsThenAccepted) {
  TestServer server({json_answer(200, testing::openai_body("```yaml\nname: relu2\ntier: 9\ndtypes: [fp32]\n```")),
                     json_answer(200, testing::openai_body("Fixed:\n```yaml\nname: relu2\ntier: 2\ndtypes: [fp32, bf16]\n```"))});
  auto provider = make_provider(config_for(server, ProviderKind::OpenAI));

  StructuredResult result = ask_structured(*provider, profile_request());

  EXPECT_EQ(result.attempts, 2);
  EXPECT_EQ(result.document["tier"], 2);
  EXPECT_EQ(result.usage.input_tokens, 24) << "usage summed over both attempts";
  ASSERT_EQ(server.request_count(), 2u);
  auto first = nlohmann::json::parse(server.requests()[0].body);
  auto second = nlohmann::json::parse(server.requests()[1].body);
  EXPECT_NE(first["messages"].back()["content"].get<std::string>().find("\"minimum\""), std::string::npos)
      << "the schema is shown to the model";
  ASSERT_EQ(second["messages"].size(), first["messages"].size() + 2);
  EXPECT_EQ(second["messages"][second["messages"].size() - 2]["role"], "assistant");
  std::string reask = second["messages"].back()["content"];
  EXPECT_NE(reask.find("$.tier: 9 is above the maximum 3"), std::string::npos) << reask;
}

TEST_F(ReaskTest, MalformedAnswerIsSentBackWithTheParseError) {
  TestServer server({json_answer(200, testing::openai_body("```json\n{\"name\": \"relu2\", \"tier\": \n```")),
                     json_answer(200, testing::openai_body("{\"name\": \"relu2\", \"tier\": 1, \"dtypes\": [\"fp16\"]}"))});
  auto provider = make_provider(config_for(server, ProviderKind::OpenAI));
  auto request = profile_request();
  request.format = DocumentFormat::Json;

  StructuredResult result = ask_structured(*provider, request);

  EXPECT_EQ(result.attempts, 2);
  EXPECT_EQ(result.document["dtypes"][0], "fp16");
  std::string reask = nlohmann::json::parse(server.requests()[1].body)["messages"].back()["content"];
  EXPECT_NE(reask.find("invalid JSON"), std::string::npos) << reask;
}

TEST_F(ReaskTest, PluggedValidatorErrorsAreUsedToo) {
  TestServer server({json_answer(200, testing::anthropic_body("name: relu2\ntier: 1\ndtypes: [fp32]\n")),
                     json_answer(200, testing::anthropic_body("name: relu_squared\ntier: 1\ndtypes: [fp32]\n"))});
  auto provider = make_provider(config_for(server, ProviderKind::Anthropic));
  auto request = profile_request();
  request.validator = [](const nlohmann::json& doc) -> std::vector<std::string> {
    if (doc.value("name", "") != "relu_squared") return {"name: must be snake_case and descriptive (relu_squared)"};
    return {};
  };
  EXPECT_EQ(ask_structured(*provider, request).document["name"], "relu_squared");
  std::string reask = nlohmann::json::parse(server.requests()[1].body)["messages"].back()["content"];
  EXPECT_NE(reask.find("must be snake_case"), std::string::npos) << reask;
}

TEST_F(ReaskTest, GivesUpAfterTheBoundNamingTheLastErrors) {
  std::string bad = testing::openai_body("name: relu2\ntier: 0\ndtypes: []\n");
  TestServer server({json_answer(200, bad), json_answer(200, bad), json_answer(200, bad), json_answer(200, bad)});
  auto provider = make_provider(config_for(server, ProviderKind::OpenAI));
  auto request = profile_request();
  request.max_reasks = 2;
  try {
    ask_structured(*provider, request);
    FAIL() << "expected the helper to give up";
  } catch (const Error& error) {
    EXPECT_EQ(error.kind(), ErrorKind::Llm);
    std::string message = error.what();
    EXPECT_NE(message.find("after 3 attempt"), std::string::npos) << message;
    EXPECT_NE(message.find("$.tier: 0 is below the minimum 1"), std::string::npos) << message;
    EXPECT_NE(message.find("$.dtypes: needs at least 1 items"), std::string::npos) << message;
    EXPECT_FALSE(error.hint().empty());
  }
  EXPECT_EQ(server.request_count(), 3u);
}

TEST(StructuredBuiltin, DeterministicProviderIsNotReasked) {
  auto registry = std::make_shared<AnalyserRegistry>();
  int calls = 0;
  registry->add("test/broken", [&](const Request&) {
    ++calls;
    return nlohmann::json{{"name", "x"}, {"tier", "not a number"}, {"dtypes", {"fp32"}}};
  });
  BuiltinProvider provider(registry);
  StructuredRequest request;
  request.kind = "test/broken";
  request.schema = kSchema;
  EXPECT_THROW(ask_structured(provider, request), Error);
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace liger::llm
