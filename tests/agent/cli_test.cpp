// The real binary, end to end, each test in a fresh temp dir with its own fixture repository.
#include <gtest/gtest.h>

#include "agent_test_support.h"
#include "liger/kernel_catalog.h"
#include "liger/error.h"
#include "workflows/inspect/header_scan.h"

namespace liger {
namespace {

using testing::run_cli;
using testing::snapshot_tree;
using testing::TempDir;
namespace fs = std::filesystem;

struct Repo {
  TempDir dir;
  fs::path repo = dir.path() / "repo";
  Repo() { testing::write_fixture_kernels(repo); }
  std::vector<std::string> survey(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--json", "--run-dir", (dir.path() / "runs").string(), "survey",
                                     (repo / "kernels").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  std::vector<std::string> cmd(std::vector<std::string> args) {
    args.insert(args.begin(), {"--json", "--run-dir", (dir.path() / "runs").string()});
    return args;
  }
};

TEST(Cli, SurveyWithoutTerminalParksThenApproveAndResumeFinishIt) {
  Repo r;
  const auto before = snapshot_tree(r.repo);
  auto result = run_cli(r.dir.path(), r.survey());
  ASSERT_EQ(result.exit_code, 3) << result.out << result.err;
  auto json = result.json();
  EXPECT_EQ(json["status"], "awaiting_approval");
  EXPECT_EQ(json["pending_checkpoint"], "profile");
  const std::string run = json["run"];
  EXPECT_NE(json["message"].get<std::string>().find("liger-agent approve " + run), std::string::npos);
  EXPECT_EQ(snapshot_tree(r.repo), before);

  // resume before approval is refused with the same exit code and the next steps.
  result = run_cli(r.dir.path(), r.cmd({"resume", run}));
  EXPECT_EQ(result.exit_code, 3) << result.out;
  EXPECT_EQ(result.json()["error"]["kind"], "awaiting-approval");

  const std::string prefix = run.substr(0, run.size() - 3);  // a unique prefix works too
  result = run_cli(r.dir.path(), r.cmd({"approve", prefix}));
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  result = run_cli(r.dir.path(), r.cmd({"resume", run}));
  ASSERT_EQ(result.exit_code, 3) << result.out << result.err;
  EXPECT_EQ(result.json()["pending_checkpoint"], "diff");
  EXPECT_EQ(snapshot_tree(r.repo), before) << "nothing applied before the diff is approved";

  ASSERT_EQ(run_cli(r.dir.path(), r.cmd({"approve", run})).exit_code, 0);
  result = run_cli(r.dir.path(), r.cmd({"resume", run}));
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_EQ(result.json()["status"], "completed");

  const std::string table = util::read_file(r.repo / "docs/kernel-api.md");
  EXPECT_NE(table.find("| relu_squared | forward | `liger_relu_squared_forward` |"), std::string::npos) << table;
  EXPECT_NE(table.find("`const void* x, void* y, int64_t n, int dtype, void* stream`"), std::string::npos) << table;
  EXPECT_NE(table.find("`liger_last_error`"), std::string::npos);
  EXPECT_EQ(util::read_file(r.repo / "README.md"), "# fixture repository\n");

  result = run_cli(r.dir.path(), r.cmd({"show", run}));
  ASSERT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.json()["state"]["stages"]["verify"]["status"], "done");
  EXPECT_EQ(result.json()["state"]["checkpoints"]["profile"]["decided_by"], "approve command");
}

TEST(Cli, RejectedRunLeavesTheTreeByteForByteUntouched) {
  Repo r;
  const auto before = snapshot_tree(r.repo);
  auto result = run_cli(r.dir.path(), r.survey());
  ASSERT_EQ(result.exit_code, 3);
  const std::string run = result.json()["run"];
  ASSERT_EQ(run_cli(r.dir.path(), r.cmd({"approve", run})).exit_code, 0);
  ASSERT_EQ(run_cli(r.dir.path(), r.cmd({"resume", run})).exit_code, 3);
  result = run_cli(r.dir.path(), r.cmd({"reject", run, "--reason", "test"}));
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_EQ(result.json()["status"], "rejected");
  EXPECT_EQ(snapshot_tree(r.repo), before);
  result = run_cli(r.dir.path(), r.cmd({"resume", run}));
  EXPECT_EQ(result.exit_code, 2) << "a rejected run cannot be resumed";
}

TEST(Cli, YesRunsEndToEndAndRunsListsIt) {
  Repo r;
  auto result = run_cli(r.dir.path(), r.survey({"--yes"}));
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  result = run_cli(r.dir.path(), r.cmd({"runs"}));
  ASSERT_EQ(result.exit_code, 0);
  auto runs = result.json()["runs"];
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0]["workflow"], "survey");
  EXPECT_EQ(runs[0]["status"], "completed");
  EXPECT_TRUE(fs::exists(fs::path(runs[0]["run_dir"].get<std::string>()) / "report.md"));
}

// Each workflow's first check of its input names the problem and the fix, and bad input is a
// usage error (2), not a crash or a generic failure.
TEST(Cli, WorkflowsRejectBadInputClearly) {
  TempDir dir;
  struct Case {
    std::vector<std::string> args;
    std::string message, hint;
  };
  for (const Case& c : {Case{{"autopatch", "/nonexistent/modeling_x.py", "--tree", LIGER_SOURCE_DIR}, "no such file",
                             "modeling_<model>.py"},
                        Case{{"kernel-perf", "no_such_op", "--tree", LIGER_SOURCE_DIR}, "no op named 'no_such_op'",
                             "known ops:"},
                        Case{{"kernel-dev", "   "}, "kernel-dev needs a request", "ReLU squared"}}) {
    auto result = run_cli(dir.path(), c.args);
    EXPECT_EQ(result.exit_code, 2) << c.args[0] << ": " << result.err;
    EXPECT_NE(result.err.find("error: "), std::string::npos) << result.err;
    EXPECT_NE(result.err.find(c.message), std::string::npos) << result.err;
    EXPECT_NE(result.err.find("hint: "), std::string::npos) << result.err;
    EXPECT_NE(result.err.find(c.hint), std::string::npos) << result.err;
  }
}

TEST(Cli, JsonOutputParsesForEveryInformationalCommand) {
  TempDir dir;
  for (std::vector<std::string> args : {std::vector<std::string>{"--json", "version"},
                                        {"--json", "config"},
                                        {"--json", "runs"},
                                        {"runs", "--json"}}) {
    auto result = run_cli(dir.path(), args);
    EXPECT_EQ(result.exit_code, 0) << result.err;
    EXPECT_NO_THROW((void)result.json()) << result.out;
  }
  auto result = run_cli(dir.path(), {"--json", "show", "no-such-run"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_EQ(result.json()["ok"], false);
  EXPECT_EQ(result.json()["exit_code"], 2);
}

TEST(Cli, UsageErrorsExitWith2) {
  TempDir dir;
  EXPECT_EQ(run_cli(dir.path(), {}).exit_code, 2);
  EXPECT_EQ(run_cli(dir.path(), {"kernel-perf", "x", "--goal", "fastest"}).exit_code, 2);
  EXPECT_EQ(run_cli(dir.path(), {"--llm", "nonsense", "runs"}).exit_code, 2);
  EXPECT_EQ(run_cli(dir.path(), {"--help"}).exit_code, 0);
}

TEST(Cli, EveryCommandHelpHasAnExample) {
  TempDir dir;
  for (const char* command : {"survey", "kernel-dev", "autopatch", "kernel-perf", "runs", "show", "approve", "reject",
                              "resume", "kernels", "config", "version"}) {
    auto result = run_cli(dir.path(), {command, "--help"});
    EXPECT_EQ(result.exit_code, 0) << command;
    EXPECT_NE(result.out.find("Examples:"), std::string::npos) << command << ":\n" << result.out;
  }
}

TEST(Cli, ConfigShowsEachValueWithItsSource) {
  TempDir dir;
  util::write_file_atomic(dir.path() / ".liger-agent.yaml", "max_attempts: 5\nllm:\n  model: from-project\n");
  util::write_file_atomic(dir.path() / ".xdg/liger-agent/config.yaml", "editor: nano\nllm:\n  model: from-user\n");
  auto result = run_cli(dir.path(), {"--json", "--llm", "openai", "config"}, {{"LIGER_AGENT_CUDA_ARCH", "90"}});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  std::map<std::string, nlohmann::json> by_key;
  const nlohmann::json document = result.json();  // a range-for over a temporary's member would dangle
  for (const auto& entry : document["config"]) by_key[entry["key"].get<std::string>()] = entry;
  EXPECT_EQ(by_key["max_attempts"]["value"], "5");
  EXPECT_EQ(by_key["max_attempts"]["source"], ".liger-agent.yaml");
  EXPECT_EQ(by_key["llm.model"]["value"], "from-project");
  EXPECT_EQ(by_key["editor"]["layer"], "user-config");
  EXPECT_EQ(by_key["cuda.arch"]["source"], "LIGER_AGENT_CUDA_ARCH");
  EXPECT_EQ(by_key["llm.provider"]["value"], "openai");
  EXPECT_EQ(by_key["llm.provider"]["source"], "--llm");
  EXPECT_EQ(by_key["run_dir"]["source"], "default");

  util::write_file_atomic(dir.path() / ".liger-agent.yaml", "max_atempts: 5\n");
  result = run_cli(dir.path(), {"config"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_NE(result.err.find(".liger-agent.yaml:1:1: unknown configuration key 'max_atempts'"), std::string::npos)
      << result.err;
}

TEST(HeaderScan, ReadsExternCDeclarationsWithParameters) {
  const std::string source = R"(
#define X 1
/* int not_a_function(void); */
extern "C" {
typedef enum e { A = 0, B = 1 } e;
typedef struct s { int a; } s;
LIGER_API int liger_f_forward(const void* x, int64_t n, float values[4],
                               void (*callback)(int, int));
const char* liger_name(void);
}
int outside(int);
)";
  const auto functions = workflows::inspect::scan_c_declarations(source);
  ASSERT_EQ(functions.size(), 2u);
  EXPECT_EQ(functions[0].name, "liger_f_forward");
  EXPECT_EQ(functions[0].return_type, "int");
  EXPECT_EQ(functions[0].line, 7);
  ASSERT_EQ(functions[0].parameters.size(), 4u);
  EXPECT_EQ(functions[0].parameters[0].type, "const void*");
  EXPECT_EQ(functions[0].parameters[0].name, "x");
  EXPECT_EQ(functions[0].parameters[2].type, "float[4]");
  EXPECT_EQ(functions[0].parameters[2].name, "values");
  EXPECT_EQ(functions[1].name, "liger_name");
  EXPECT_TRUE(functions[1].parameters.empty());
}

TEST(KernelCatalog, ReadsOpsAndRejectsMalformedFiles) {
  TempDir dir;
  util::write_file_atomic(dir.path() / "ops.yaml", R"(ops:
  - name: rms_norm
    tier: 2
    dtypes: [fp32, fp16, bf16]
    options: {casting_mode: [llama, gemma, none], offset: 0.0}
    forward: liger_rms_norm_forward
    backward: liger_rms_norm_backward
    header: liger_kernels/rms_norm.h
  - name: relu_squared
    tier: 1
    dtypes: [fp32]
    forward: liger_relu_squared_forward
    header: liger_kernels/relu_squared.h
)");
  const auto ops = toolchain::read_kernel_catalog(dir.path() / "ops.yaml");
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].name, "rms_norm");
  EXPECT_EQ(ops[0].tier, "2");
  EXPECT_EQ(ops[0].options, (std::vector<std::string>{"casting_mode", "offset"}));
  EXPECT_EQ(ops[1].backward, "");

  util::write_file_atomic(dir.path() / "ops.yaml", "- name: x\n  tier: 1\n  dtypes: [fp8]\n  header: x.h\n");
  try {
    toolchain::read_kernel_catalog(dir.path() / "ops.yaml");
    FAIL();
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("[0].dtypes[0]"), std::string::npos) << message;
    EXPECT_NE(message.find("[0].forward: required field is missing"), std::string::npos) << message;
  }
  EXPECT_THROW(toolchain::read_kernel_catalog(dir.path() / "missing.yaml"), Error);

  util::write_file_atomic(dir.path() / "kernels/ops.yaml", "- {name: a, tier: 1, dtypes: [bf16], forward: f, header: h}\n");
  auto result = testing::run_cli(dir.path(), {"--json", "kernels", "--kernels-dir", (dir.path() / "kernels").string()});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.json()["ops"][0]["name"], "a");
}

}  // namespace
}  // namespace liger
