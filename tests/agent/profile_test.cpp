#include <gtest/gtest.h>

#include "agent_test_support.h"
#include "liger/error.h"
#include "liger/profile.h"

namespace liger::profile {
namespace {

const char* kSchema = R"(
type: map
fields:
  name: {type: string, required: true}
  tier: {type: int, required: true, min: 1, max: 3}
  ops:
    type: list
    required: true
    items:
      type: map
      fields:
        op: {type: string, required: true}
        dtype: {type: string, required: true, enum: [fp32, fp16, bf16]}
        fused: {type: bool}
)";

TEST(Profile, ValidProfilePasses) {
  const Schema schema = Schema::parse(kSchema, "test.schema.yaml");
  const auto report = schema.validate(parse_yaml(
      "name: relu2\ntier: 1\nops:\n  - {op: a, dtype: fp32}\n  - {op: b, dtype: bf16, fused: true}\n", "p.yaml"));
  EXPECT_TRUE(report.ok()) << report.format_errors("p.yaml");
}

TEST(Profile, MalformedProfileNamesFieldLineAndAllowedValuesForEveryError) {
  const Schema schema = Schema::parse(kSchema, "test.schema.yaml");
  const std::string text =
      "name: relu2\n"          // 1
      "tier: 7\n"              // 2: out of range
      "ops:\n"                 // 3
      "  - op: a\n"            // 4
      "    dtype: fp32\n"      // 5
      "  - op: b\n"            // 6
      "    dtype: fp16\n"      // 7
      "  - op: c\n"            // 8
      "    dtype: fp8\n"       // 9: not allowed
      "    fused: maybe\n"     // 10: not a bool
      "    colour: red\n";     // 11: unknown field
  const auto report = schema.validate(parse_yaml(text, "profile.yaml"));
  ASSERT_EQ(report.errors.size(), 4u) << report.format_errors("profile.yaml");
  const std::string all = report.format_errors("profile.yaml");

  auto find = [&](const std::string& path) -> const ValidationIssue& {
    for (const auto& issue : report.errors)
      if (issue.path == path) return issue;
    ADD_FAILURE() << "no error for " << path << " in:\n" << all;
    return report.errors.front();
  };
  const auto& dtype = find("ops[2].dtype");
  EXPECT_EQ(dtype.line, 9);
  EXPECT_EQ(dtype.column, 12);
  EXPECT_EQ(dtype.found, "\"fp8\"");
  EXPECT_EQ(dtype.expected, "one of: fp32, fp16, bf16");
  EXPECT_NE(all.find("profile.yaml:9:12: ops[2].dtype: value not allowed; found \"fp8\"; allowed: one of: fp32, fp16, bf16"),
            std::string::npos)
      << all;
  EXPECT_EQ(find("tier").line, 2);
  EXPECT_EQ(find("ops[2].fused").line, 10);
  EXPECT_EQ(find("ops[2].colour").line, 11);
}

TEST(Profile, MissingRequiredFieldNamesTheParentLine) {
  const Schema schema = Schema::parse(kSchema, "s");
  const auto report = schema.validate(parse_yaml("name: x\ntier: 1\nops:\n  - op: a\n", "p.yaml"));
  ASSERT_EQ(report.errors.size(), 1u);
  EXPECT_EQ(report.errors[0].path, "ops[0].dtype");
  EXPECT_EQ(report.errors[0].line, 4);
  EXPECT_EQ(report.errors[0].message, "required field is missing");
}

TEST(Profile, UndecidedFieldsArePendingDecisionsNotErrors) {
  const Schema schema = Schema::parse(kSchema, "s");
  const auto report = schema.validate(parse_yaml(
      "name: x\ntier: {undecided: \"reduction or element-wise?\"}\nops:\n  - {op: a, dtype: fp32}\n", "p.yaml"));
  EXPECT_TRUE(report.ok()) << report.format_errors("p.yaml");
  ASSERT_EQ(report.undecided.size(), 1u);
  EXPECT_EQ(report.undecided[0].path, "tier");
  EXPECT_EQ(report.undecided[0].message, "reduction or element-wise?");
}

TEST(Profile, YamlSyntaxErrorNamesFileAndLine) {
  try {
    parse_yaml("name: x\nops: [a, b\n", "broken.yaml");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("broken.yaml:"), std::string::npos) << e.what();
    EXPECT_EQ(e.exit_code(), ExitCode::Usage);
  }
}

TEST(Profile, MalformedSchemaIsReportedAsADefect) {
  EXPECT_THROW(Schema::parse("type: strng\n", "bad.schema.yaml"), Error);
  EXPECT_THROW(Schema::parse("type: map\nfields:\n  a: {type: int, requird: true}\n", "bad.schema.yaml"), Error);
}

TEST(Profile, ShippedSurveySchemaLoads) {
  EXPECT_NO_THROW(Schema::load_file(std::filesystem::path(LIGER_SOURCE_DIR) / "skills/survey/profile.schema.yaml"));
}

}  // namespace
}  // namespace liger::profile
