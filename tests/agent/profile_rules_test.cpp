// The schema rules for profile values that become names, paths or code (issue 15): `pattern:`,
// `path: relative` + `under:`, `key_pattern:`, `max_length:`, and the shipped schemas using them.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/run_state.h"
#include "liger/error.h"
#include "liger/profile.h"
#include "liger/sha256.h"
#include "liger/text_escape.h"
#include "liger/input_check.h"

namespace liger::profile {
namespace {

namespace fs = std::filesystem;

const char* kRules = R"(
type: map
fields:
  op: {type: string, required: true, pattern: '^[a-z][a-z0-9_]{0,63}$'}
  title: {type: string, max_length: 10}
  out: {type: string, path: relative, under: [kernels, tests/python]}
  anywhere: {type: string, path: relative}
  attrs: {type: map, open: true, key_pattern: '^[A-Za-z_][A-Za-z0-9_]*$'}
)";

std::string errors_of(const Schema& schema, const std::string& yaml) {
  return schema.validate(parse_yaml(yaml, "profile.yaml")).format_errors("profile.yaml");
}

TEST(ProfileRules, EvilOpNameIsRejectedWithFieldLineColumnAndPattern) {
  const Schema schema = Schema::parse(kRules, "rules.schema.yaml");
  const std::string text = "op: \"evil\\nimport os\\nos.system('touch /tmp/x')\\nx\"\n";
  const auto report = schema.validate(parse_yaml(text, "profile.yaml"));
  ASSERT_EQ(report.errors.size(), 1u) << report.format_errors("profile.yaml");
  const std::string message = report.format_errors("profile.yaml");
  EXPECT_NE(message.find("profile.yaml:1:5: op: does not match the pattern"), std::string::npos) << message;
  EXPECT_NE(message.find("^[a-z][a-z0-9_]{0,63}$"), std::string::npos) << message;
  // The value's newlines are shown escaped: the message stays one line per error.
  EXPECT_NE(message.find("evil\\nimport os"), std::string::npos) << message;
  EXPECT_EQ(std::count(message.begin(), message.end(), '\n'), 1) << message;
}

TEST(ProfileRules, AbsoluteOrEscapingOpNameIsRejected) {
  const Schema schema = Schema::parse(kRules, "rules.schema.yaml");
  for (const char* op : {"/tmp/abs", "../x", "Relu", "a b", "x;y", "1abc", ""}) {
    const std::string message = errors_of(schema, std::string("op: '") + op + "'\n");
    EXPECT_NE(message.find("op:"), std::string::npos) << op << ": " << message;
  }
  EXPECT_EQ(errors_of(schema, "op: relu_squared\n"), "");
  EXPECT_NE(errors_of(schema, "op: " + std::string(65, 'a') + "\n"), "") << "longer than 64 characters";
}

TEST(ProfileRules, PathsMustBeRelativeNormalisedAndInsideTheOwnedFolders) {
  const Schema schema = Schema::parse(kRules, "rules.schema.yaml");
  EXPECT_EQ(errors_of(schema, "op: a\nout: kernels/src/a/a.cu\nanywhere: docs/x.md\n"), "");
  EXPECT_EQ(errors_of(schema, "op: a\nout: tests/python/test_a.py\n"), "");
  struct Case {
    const char* value;
    const char* why;
  };
  for (const Case& c : {Case{"/tmp/abs", "an absolute path"}, Case{"kernels/../../etc/passwd", "'..'"},
                        Case{"kernels/./a", "'.' component"}, Case{"kernels//a", "empty path component"},
                        Case{"docs/a.md", "outside the folders"}, Case{"kernelsX/a", "outside the folders"},
                        Case{"kernels\\\\a", "backslash"}, Case{"~/a", "absolute"}}) {
    const std::string message = errors_of(schema, std::string("op: a\nout: \"") + c.value + "\"\n");
    EXPECT_NE(message.find("profile.yaml:2:6: out: not an allowed path"), std::string::npos) << c.value << ": " << message;
    EXPECT_NE(message.find(c.why), std::string::npos) << c.value << ": " << message;
    EXPECT_NE(message.find("under kernels/, tests/python/"), std::string::npos) << message;
  }
  EXPECT_NE(errors_of(schema, "op: a\nanywhere: /etc/passwd\n").find("absolute"), std::string::npos);
}

TEST(ProfileRules, KeyPatternAndMaxLength) {
  const Schema schema = Schema::parse(kRules, "rules.schema.yaml");
  EXPECT_EQ(errors_of(schema, "op: a\nattrs: {hidden_size: 8}\n"), "");
  const std::string keys = errors_of(schema, "op: a\nattrs:\n  \"x = 1; import os\": 8\n");
  EXPECT_NE(keys.find("profile.yaml:3:3: attrs.x = 1; import os: key does not match the pattern"), std::string::npos) << keys;
  const std::string long_title = errors_of(schema, "op: a\ntitle: abcdefghijk\n");
  EXPECT_NE(long_title.find("title: too long"), std::string::npos) << long_title;
  EXPECT_NE(long_title.find("at most 10 bytes"), std::string::npos) << long_title;
}

TEST(ProfileRules, BadRulesInASchemaAreDefectsOfTheSchema) {
  EXPECT_THROW(Schema::parse("type: map\nfields:\n  a: {type: string, pattern: '([a-z'}\n", "s.yaml"), Error);
  EXPECT_THROW(Schema::parse("type: map\nfields:\n  a: {type: string, path: absolute}\n", "s.yaml"), Error);
  EXPECT_THROW(Schema::parse("type: map\nfields:\n  a: {type: string, under: [x]}\n", "s.yaml"), Error);
}

fs::path repo() { return LIGER_SOURCE_DIR; }

// Every shipped schema loads, and the identifiers that become file names or code are
// constrained in each workflow's schema.
TEST(ProfileRules, ShippedSchemasConstrainNamesAndPaths) {
  const Schema kernel_dev = Schema::load_file(repo() / "skills/kernel_dev/profile.schema.yaml");
  const Schema autopatch = Schema::load_file(repo() / "skills/autopatch/profile.schema.yaml");
  const Schema kernel_perf = Schema::load_file(repo() / "skills/kernel_perf/profile.schema.yaml");
  Schema::load_file(repo() / "skills/survey/profile.schema.yaml");

  const std::string identity =
      "identity:\n  op_name: \"evil\\nimport os\\nos.system('touch /tmp/x')\\nx\"\n  display_name: Evil\n"
      "  c_prefix: liger_evil\n  cpp_namespace: liger::kernels::evil\n  python_functional: evil\n"
      "  python_module: LigerEvil\n  python_function: LigerEvilFunction\n";
  std::string message = errors_of(kernel_dev, identity);
  EXPECT_NE(message.find("profile.yaml:2:12: identity.op_name: does not match the pattern"), std::string::npos)
      << message;
  message = errors_of(kernel_dev, "identity:\n  op_name: /tmp/abs\n");
  EXPECT_NE(message.find("profile.yaml:2:12: identity.op_name: does not match the pattern"), std::string::npos)
      << message;
  EXPECT_NE(message.find("^[a-z][a-z0-9_]{0,63}$"), std::string::npos) << message;
  message = errors_of(kernel_dev, "inputs:\n  - {name: \"x); os.system('x'\", shape: n, dtype: fp32}\n");
  EXPECT_NE(message.find("inputs[0].name: does not match the pattern"), std::string::npos) << message;

  message = errors_of(autopatch, "generation:\n  module: x\n  mode: create\n  integration: /tmp/x.py\n"
                                 "  profile_sidecar: ../x.yaml\n  test: tests/python/test_x.py\n");
  EXPECT_NE(message.find("generation.integration: not an allowed path: an absolute path"), std::string::npos) << message;
  EXPECT_NE(message.find("generation.profile_sidecar: not an allowed path"), std::string::npos) << message;
  EXPECT_EQ(message.find("generation.test:"), std::string::npos) << message;
  message = errors_of(autopatch, "patch_plan:\n  apply:\n    - {kernel: rms_norm, target: \"X\\nimport os\"}\n");
  EXPECT_NE(message.find("patch_plan.apply[0].target: does not match the pattern"), std::string::npos) << message;

  message = errors_of(kernel_perf, "op: /tmp/abs\nfiles: {header: /etc/passwd, kernel_source: kernels/src/a.cu, "
                                   "tuning: kernels/src/t.h, test_filter: 'A.*', snapshot_dir: s}\n");
  EXPECT_NE(message.find("op: does not match the pattern"), std::string::npos) << message;
  EXPECT_NE(message.find("files.header: not an allowed path"), std::string::npos) << message;
  EXPECT_EQ(message.find("files.kernel_source:"), std::string::npos) << message;
}

}  // namespace
}  // namespace liger::profile

namespace liger::util {
namespace {

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  Sha256 pieces;  // fed in odd-sized pieces across block boundaries: same digest
  const std::string million(1000000, 'a');
  for (std::size_t at = 0; at < million.size(); at += 997) pieces.update(std::string_view(million).substr(at, 997));
  EXPECT_EQ(pieces.hex_digest(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(TextEscape, FreeTextCannotLeaveACommentStringOrTableCell) {
  const std::string evil = "Evil */ \"\"\" \\\nimport os\nos.system('x') /* | ";
  const std::string code = escape_code_text(evil);
  EXPECT_EQ(code.find('\n'), std::string::npos) << code;
  EXPECT_EQ(code.find("*/"), std::string::npos) << code;
  EXPECT_EQ(code.find("/*"), std::string::npos) << code;
  EXPECT_EQ(code.find('"'), std::string::npos) << code;
  EXPECT_EQ(code.find('\\'), std::string::npos) << code;
  const std::string md = escape_markdown_text(evil);
  EXPECT_EQ(md.find('\n'), std::string::npos) << md;
  EXPECT_NE(md.find("\\|"), std::string::npos) << md;
  EXPECT_EQ(escape_code_text("relu_squared: y = max(x, 0)^2"), "relu_squared: y = max(x, 0)^2");
  EXPECT_EQ(escaper_for("docs/kernels/x.md")("a|b"), "a\\|b");
  EXPECT_EQ(escaper_for("kernels/src/x/x.cu")("a\"b"), "a'b");
}

TEST(InputCheck, Utf8) {
  EXPECT_TRUE(input::valid_utf8("ReLU squared — ünïcode ✓"));
  EXPECT_FALSE(input::valid_utf8("\xff\xfe relu"));
  EXPECT_FALSE(input::valid_utf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(input::valid_utf8("\xed\xa0\x80"));      // a UTF-16 surrogate
  EXPECT_FALSE(input::valid_utf8("abc\xe2\x82"));       // truncated
}

}  // namespace
}  // namespace liger::util

namespace liger::engine {
namespace {

TEST(UndecidedMessage, OneLinePerReasonNotPerField) {
  const std::vector<std::string> undecided = {"tier: the expression does not parse: x", "forward: the expression does not parse: x",
                                              "backward: the expression does not parse: x", "inputs: unknown tensors"};
  EXPECT_EQ(group_undecided(undecided),
            (std::vector<std::string>{"tier, forward, backward: the expression does not parse: x", "inputs: unknown tensors"}));
}

}  // namespace
}  // namespace liger::engine
