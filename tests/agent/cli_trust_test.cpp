// Issue 15 through the real binary: bad input is a usage error with no run directory, a bad
// --run-dir / --tree is named, profile values that would become code or paths are refused, and
// an approval holds only for the bytes that were approved.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <regex>

#include "agent_test_support.h"
#include "liger/util.h"

namespace liger {
namespace {

using testing::run_cli;
using testing::snapshot_tree;
using testing::TempDir;
namespace fs = std::filesystem;

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

bool empty_or_missing(const fs::path& dir) {
  std::error_code ec;
  return !fs::exists(dir, ec) || fs::is_empty(dir, ec);
}

struct BadInput {
  std::vector<std::string> args;
  std::string message;
};

// Each case: exit 2, the error once with a hint, nothing that calls it a bug, and no run directory.
void expect_usage_error_without_run(const fs::path& cwd, const BadInput& c) {
  const fs::path runs = cwd / "runs";
  std::vector<std::string> args = {"--run-dir", runs.string()};
  args.insert(args.end(), c.args.begin(), c.args.end());
  const auto result = run_cli(cwd, args);
  const std::string shown = c.args[0] + " " + c.args[1].substr(0, 40);
  EXPECT_EQ(result.exit_code, 2) << shown << "\n" << result.out << result.err;
  EXPECT_EQ(count_of(result.err, "error: "), 1u) << shown << "\n" << result.err;
  EXPECT_EQ(count_of(result.err, c.message), 1u) << shown << ": expected '" << c.message << "' once\n" << result.err;
  EXPECT_NE(result.err.find("hint: "), std::string::npos) << shown << "\n" << result.err;
  EXPECT_EQ(result.err.find("bug in liger-agent"), std::string::npos) << shown << "\n" << result.err;
  EXPECT_EQ(result.err.find("File name too long"), std::string::npos) << shown << "\n" << result.err;
  EXPECT_TRUE(empty_or_missing(runs)) << shown << ": a run directory was created";
}

TEST(CliTrust, BadKernelDevInputIsAUsageErrorWithoutARunDirectory) {
  TempDir dir;
  testing::make_checkout(dir.path());  // runs start in a checkout (the tree the workflow would write to)
  fs::create_directories(dir.path() / "adir");
  ASSERT_EQ(::mkfifo((dir.path() / "afifo").c_str(), 0600), 0);
  // Binary files where source text is expected: an object file's NUL bytes, and UTF-16 source.
  util::write_file_atomic(dir.path() / "op.o", std::string("\x7f" "ELF\x02\x01\x01\x00\x00\x00 def f(x): return x", 29));
  util::write_file_atomic(dir.path() / "utf16.py", std::string("\xff\xfe" "d\0e\0f\0", 8));
  util::write_file_atomic(dir.path() / "modeling_bin.py", std::string("class A:\n    pass\n\xc3\x28\n"));
  // Checkouts whose kernels/ops.yaml a bad merge garbled, or a truncated write emptied.
  testing::make_checkout(dir.path() / "garbled");
  util::write_file_atomic(dir.path() / "garbled/kernels/ops.yaml",
                          util::read_file(dir.path() / "kernels/ops.yaml") + "<<<<<<< HEAD\n  - name: [\n");
  testing::make_checkout(dir.path() / "emptied");
  util::write_file_atomic(dir.path() / "emptied/kernels/ops.yaml", "");
  std::string long_description;
  while (long_description.size() <= 300) long_description += "dynamic tanh normalization-free layer with alpha ";
  for (const BadInput& c : {
           BadInput{{"kernel-dev", "y = x +"}, "does not parse"},
           BadInput{{"kernel-dev", "y = frobnicate(x) * 2"}, "does not parse"},
           BadInput{{"kernel-dev", "frobnicated zorblax activation"}, "does not know the op"},
           BadInput{{"kernel-dev", long_description}, "at most 255 bytes"},
           BadInput{{"kernel-dev", "\xff\xfe relu squared"}, "not valid UTF-8"},
           BadInput{{"kernel-dev", (dir.path() / "adir").string()}, "is a directory"},
           BadInput{{"kernel-dev", (dir.path() / "afifo").string()}, "is a FIFO"},
           BadInput{{"kernel-dev", "relu squared", "--name", "evil\nimport os"}, "is not an op name"},
           BadInput{{"kernel-dev", "y = 2*" + std::string(70, 'n')}, "70 characters long"},
           // Found by expr_fuzz: fifteen short lines whose formulas, written out, made a 1.1 MiB profile.
           BadInput{{"kernel-dev", util::read_file(fs::path(LIGER_SOURCE_DIR) / "fuzz/corpus/expr/profile_over_size_limit.txt")},
                    "operations once assignments are substituted"},
           BadInput{{"kernel-dev", "relu squared", "--modify", "no_such_op"}, "no op of that name"},
           // A name the pattern allows that the generated C++ / Python cannot use.
           BadInput{{"kernel-dev", "relu squared", "--name", "class"}, "is a reserved word"},
           BadInput{{"kernel-dev", "relu squared", "--name", "Import"}, "is a reserved word"},
           BadInput{{"kernel-dev", "relu squared", "--name", "torch"}, "is a reserved word"},
           BadInput{{"kernel-dev", (dir.path() / "op.o").string()}, "is not a text file: a NUL byte"},
           BadInput{{"kernel-dev", "relu squared", "--tree", (dir.path() / "garbled").string()}, "cannot be read"},
           BadInput{{"kernel-dev", "relu squared", "--tree", (dir.path() / "emptied").string()}, "is not the op list"},
           BadInput{{"kernel-dev", (dir.path() / "utf16.py").string()}, "is not a text file"},
           BadInput{{"autopatch", (dir.path() / "modeling_bin.py").string()}, "is not a text file: a byte that is not UTF-8 (0xc3) at offset 18"},
           BadInput{{"autopatch", std::string(300, 'q')}, "inline text is at most 255 bytes"},
           BadInput{{"autopatch", (dir.path() / "adir").string()}, "is a directory"},
           BadInput{{"autopatch", "qwen3; rm -rf x"}, "neither an existing file nor a model type"},
           BadInput{{"autopatch", "qwen3", "--kernels", "rmsnorm"}, "unknown kernel 'rmsnorm'"},
           // Only Understand knows the op is missing: the run it made is removed.
           BadInput{{"kernel-perf", "no_such_op"}, "no op named 'no_such_op'"},
       })
    expect_usage_error_without_run(dir.path(), c);
}

// CI's main job adds relu_squared with kernel-dev; kernel-perf on it used to answer "no op named
// 'relu_squared'", as if it were a typo, though the op is right there in the checkout.
TEST(CliTrust, KernelPerfOnAGeneratedOpWithoutASearchSpaceSaysWhy) {
  TempDir dir;
  testing::make_checkout(dir.path());
  std::string ops = util::read_file(dir.path() / "kernels/ops.yaml");
  ops += "  - name: relu_squared\n    tier: 1\n    dtypes: [fp32, fp16, bf16]\n    options: []\n"
         "    forward: liger_relu_squared_forward\n    backward: liger_relu_squared_backward\n"
         "    header: kernels/include/liger_kernels/relu_squared.h\n";
  util::write_file_atomic(dir.path() / "kernels/ops.yaml", ops);
  const fs::path runs = dir.path() / "runs";
  const auto result = run_cli(dir.path(), {"--run-dir", runs.string(), "kernel-perf", "relu_squared"});
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_NE(result.err.find("is an op of this checkout's library"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("kernels/src/relu_squared/tuning.h"), std::string::npos) << result.err;
  EXPECT_EQ(result.err.find("no op named"), std::string::npos) << result.err;
  EXPECT_TRUE(empty_or_missing(runs)) << "a run directory was left";
}

TEST(CliTrust, RunDirThatIsNotAWritableDirectoryIsNamed) {
  TempDir dir;
  testing::write_fixture_kernels(dir.path() / "repo");
  util::write_file_atomic(dir.path() / "afile", "not a directory\n");
  const std::string kernels = (dir.path() / "repo/kernels").string();
  for (const auto& [run_dir, what] : std::vector<std::pair<fs::path, std::string>>{
           {dir.path() / "afile", "is not a directory"}, {dir.path() / "afile/runs", "cannot be created"}}) {
    auto result = run_cli(dir.path(), {"--run-dir", run_dir.string(), "survey", kernels, "--yes"});
    EXPECT_EQ(result.exit_code, 2) << result.err;
    EXPECT_NE(result.err.find("'" + run_dir.string() + "'"), std::string::npos) << result.err;
    EXPECT_NE(result.err.find(what), std::string::npos) << result.err;
    EXPECT_NE(result.err.find("--run-dir"), std::string::npos) << result.err;
    EXPECT_EQ(result.err.find("bug in liger-agent"), std::string::npos) << result.err;
  }
  auto result = run_cli(dir.path(), {"--run-dir", (dir.path() / "afile").string(), "approve", "x"});
  EXPECT_EQ(result.exit_code, 2) << result.err;
  EXPECT_NE(result.err.find("is not a directory"), std::string::npos) << result.err;
  if (::geteuid() != 0) {  // root writes anywhere: the permission case needs a normal user
    fs::create_directories(dir.path() / "locked");
    fs::permissions(dir.path() / "locked", fs::perms::owner_read | fs::perms::owner_exec);
    result = run_cli(dir.path(), {"--run-dir", (dir.path() / "locked").string(), "survey", kernels, "--yes"});
    EXPECT_EQ(result.exit_code, 2) << result.err;
    EXPECT_NE(result.err.find("not writable"), std::string::npos) << result.err;
    fs::permissions(dir.path() / "locked", fs::perms::owner_all);
  }
}

TEST(CliTrust, TreeThatIsNotACheckoutIsNamed) {
  TempDir dir;
  fs::create_directories(dir.path() / "empty");
  util::write_file_atomic(dir.path() / "afile", "x\n");
  struct Case {
    std::vector<std::string> args;
    std::string what;
  };
  const std::string empty = (dir.path() / "empty").string(), file = (dir.path() / "afile").string();
  for (const Case& c : {Case{{"kernel-dev", "ReLU squared activation function", "--tree", empty},
                             "is not a checkout of the kernel library (it has no kernels/ops.yaml)"},
                        Case{{"kernel-dev", "ReLU squared activation function", "--tree", file}, "is not a directory"},
                        Case{{"kernel-dev", "ReLU squared activation function", "--tree", empty + "/nope"}, "does not exist"},
                        Case{{"autopatch", "qwen3", "--tree", empty}, "is not a checkout"},
                        Case{{"kernel-perf", "rms_norm", "--tree", empty}, "is not a checkout"}}) {
    std::vector<std::string> args = {"--run-dir", (dir.path() / "runs").string()};
    args.insert(args.end(), c.args.begin(), c.args.end());
    auto result = run_cli(dir.path(), args);
    EXPECT_EQ(result.exit_code, 2) << c.args[0] << ": " << result.err;
    EXPECT_NE(result.err.find("--tree '"), std::string::npos) << result.err;
    EXPECT_NE(result.err.find(c.what), std::string::npos) << result.err;
    EXPECT_TRUE(empty_or_missing(dir.path() / "runs"));
  }
}

// Replaces the op_name line of a parked kernel-dev profile, as a hand edit at the checkpoint would.
void set_op_name(const fs::path& profile, const std::string& yaml_value) {
  const std::string text = util::read_file(profile);
  const std::string edited = std::regex_replace(text, std::regex("op_name: [a-z_0-9]+"), "op_name: " + yaml_value);
  ASSERT_NE(edited, text);
  util::write_file_atomic(profile, edited);
}

TEST(CliTrust, EditedProfileWithCodeOrAPathAsOpNameIsRefusedAtApproval) {
  TempDir dir;
  testing::make_checkout(dir.path());  // runs start in a checkout (the tree the workflow would write to)
  const std::vector<std::string> base = {"--json", "--run-dir", (dir.path() / "runs").string()};
  for (const std::string value : {std::string("\"evil\\nimport os\\nos.system('touch /tmp/x')\\nx\""),
                                  std::string("/tmp/abs")}) {
    auto args = base;
    args.insert(args.end(), {"kernel-dev", "ReLU squared activation function"});
    auto result = run_cli(dir.path(), args);
    ASSERT_EQ(result.exit_code, 3) << result.out << result.err;
    const std::string run = result.json()["run"];
    const fs::path profile = dir.path() / "runs" / run / "profile.yaml";
    set_op_name(profile, value);
    args = base;
    args.insert(args.end(), {"approve", run});
    result = run_cli(dir.path(), args);
    EXPECT_EQ(result.exit_code, 2) << result.out << result.err;
    const std::string message = result.json()["error"]["message"];
    // field, file:line:column and the pattern
    EXPECT_TRUE(std::regex_search(message, std::regex("profile\\.yaml:[0-9]+:[0-9]+: identity\\.op_name: does not match the pattern")))
        << message;
    EXPECT_NE(message.find("^[a-z][a-z0-9_]{0,63}$"), std::string::npos) << message;
    args = base;
    args.insert(args.end(), {"resume", run, "--yes"});
    result = run_cli(dir.path(), args);
    EXPECT_NE(result.exit_code, 0) << "an unapproved, invalid profile must not reach Act";
    EXPECT_FALSE(fs::exists(dir.path() / "runs" / run / "staging/kernels/src/tmp"));
  }
}

// A keyword passes the schema's pattern but cannot name an op: a hand edit to one is refused
// before anything is staged or applied, naming the field and why (it would be C++ that cannot
// compile and a Python module that cannot be imported).
TEST(CliTrust, EditedProfileWithAKeywordAsOpNameIsRefusedBeforeAnythingIsStaged) {
  TempDir dir;
  testing::make_checkout(dir.path());
  const auto before = snapshot_tree(dir.path() / "kernels");
  const std::vector<std::string> base = {"--json", "--run-dir", (dir.path() / "runs").string()};
  auto args = base;
  args.insert(args.end(), {"kernel-dev", "ReLU squared activation function"});
  auto result = run_cli(dir.path(), args);
  ASSERT_EQ(result.exit_code, 3) << result.out << result.err;
  const std::string run = result.json()["run"];
  set_op_name(dir.path() / "runs" / run / "profile.yaml", "namespace");
  args = base;
  args.insert(args.end(), {"approve", run});
  ASSERT_EQ(run_cli(dir.path(), args).exit_code, 0);
  args = base;
  args.insert(args.end(), {"resume", run, "--yes"});
  result = run_cli(dir.path(), args);
  EXPECT_EQ(result.exit_code, 1) << result.out << result.err;
  const std::string message = result.json()["error"]["message"];
  EXPECT_NE(message.find("identity.op_name 'namespace' is a reserved word"), std::string::npos) << message;
  EXPECT_EQ(message.find("bug in liger-agent"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(dir.path() / "runs" / run / "staging/kernels/src/namespace"));
  EXPECT_EQ(snapshot_tree(dir.path() / "kernels"), before);
}

struct Survey {
  TempDir dir;
  fs::path repo = dir.path() / "repo";
  Survey() { testing::write_fixture_kernels(repo); }
  testing::CliResult cli(std::vector<std::string> args) {
    args.insert(args.begin(), {"--json", "--run-dir", (dir.path() / "runs").string()});
    return run_cli(dir.path(), args);
  }
  fs::path run_dir(const std::string& run) const { return dir.path() / "runs" / run; }
};

TEST(CliTrust, ResumeRefusesAProfileOrStagedFileChangedAfterApproval) {
  Survey s;
  const auto before = snapshot_tree(s.repo);
  auto result = s.cli({"survey", (s.repo / "kernels").string()});
  ASSERT_EQ(result.exit_code, 3) << result.out << result.err;
  const std::string run = result.json()["run"];
  ASSERT_EQ(s.cli({"approve", run}).exit_code, 0);
  const auto state = nlohmann::json::parse(util::read_file(s.run_dir(run) / "state.json"));
  EXPECT_EQ(state["checkpoints"]["profile"]["profile_sha256"].get<std::string>().size(), 64u);

  // The profile, edited after approval: refused, naming the file and the fix; the run stays.
  util::write_file_atomic(s.run_dir(run) / "profile.yaml",
                          util::read_file(s.run_dir(run) / "profile.yaml") + "# edited after approval\n");
  result = s.cli({"resume", run});
  EXPECT_EQ(result.exit_code, 2) << result.out << result.err;
  EXPECT_NE(result.json()["error"]["message"].get<std::string>().find(
                "profile.yaml was changed after it was approved at the profile checkpoint"),
            std::string::npos)
      << result.out;
  EXPECT_NE(result.json()["error"]["hint"].get<std::string>().find("review it and run `liger-agent approve " + run + "` again"),
            std::string::npos)
      << result.out;
  EXPECT_EQ(s.cli({"resume", run, "--yes"}).exit_code, 2) << "--yes does not approve a change";
  ASSERT_EQ(s.cli({"approve", run}).exit_code, 0);
  result = s.cli({"resume", run});
  ASSERT_EQ(result.exit_code, 3) << result.out << result.err;
  EXPECT_EQ(result.json()["pending_checkpoint"], "diff");

  // A staged file, edited after the diff was approved: refused before Apply touches the tree.
  ASSERT_EQ(s.cli({"approve", run}).exit_code, 0);
  const fs::path staged = s.run_dir(run) / "staging/docs/kernel-api.md";
  ASSERT_TRUE(fs::exists(staged));
  util::write_file_atomic(staged, util::read_file(staged) + "\ninjected after approval\n");
  result = s.cli({"resume", run});
  EXPECT_EQ(result.exit_code, 2) << result.out << result.err;
  EXPECT_NE(result.json()["error"]["message"].get<std::string>().find(
                "staging/docs/kernel-api.md was changed after it was approved at the diff checkpoint"),
            std::string::npos)
      << result.out;
  EXPECT_EQ(snapshot_tree(s.repo), before) << "nothing applied";
  util::write_file_atomic(s.run_dir(run) / "staging/docs/extra.md", "added after approval\n");
  result = s.cli({"resume", run});
  EXPECT_EQ(result.exit_code, 2) << result.out;

  // Approved again, the change is what gets applied.
  ASSERT_EQ(s.cli({"approve", run}).exit_code, 0);
  result = s.cli({"resume", run});
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(util::read_file(s.repo / "docs/kernel-api.md").find("injected after approval"), std::string::npos);
}

TEST(CliTrust, ProfileEditedWhileParkedAtTheDiffSendsTheRunBackToAct) {
  Survey s;
  auto result = s.cli({"survey", (s.repo / "kernels").string()});
  ASSERT_EQ(result.exit_code, 3);
  const std::string run = result.json()["run"];
  ASSERT_EQ(s.cli({"approve", run}).exit_code, 0);
  ASSERT_EQ(s.cli({"resume", run}).exit_code, 3);
  util::write_file_atomic(s.run_dir(run) / "profile.yaml",
                          util::read_file(s.run_dir(run) / "profile.yaml") + "# edited at the diff checkpoint\n");
  // Approving now approves the edited profile, not the diff made from the old one.
  result = s.cli({"approve", run});
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.json()["message"].get<std::string>().find("Act regenerates"), std::string::npos) << result.out;
  result = s.cli({"resume", run});
  ASSERT_EQ(result.exit_code, 3) << result.out << result.err;
  EXPECT_EQ(result.json()["pending_checkpoint"], "diff");
}

}  // namespace
}  // namespace liger
