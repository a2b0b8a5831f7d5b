// Which checkout a command works on: found from the current directory (nearest parent holding
// kernels/ops.yaml), --tree overriding it, a usage error outside any checkout; the default run
// directory lives in that checkout; the data (skills/, templates/) is not the checkout.
#include <gtest/gtest.h>

#include "agent_test_support.h"
#include "cli/tree.h"
#include "liger/error.h"
#include "liger/workflows.h"

namespace liger::testing {
namespace {

struct Checkout {
  TempDir dir;
  fs::path root = dir.path() / "clone";
  Checkout() {
    fs::create_directories(root / "kernels" / "src" / "deep");
    util::write_file_atomic(root / "kernels" / "ops.yaml", "ops:\n");
  }
};

// Restores the working directory a test changed.
struct Cwd {
  fs::path saved = fs::current_path();
  explicit Cwd(const fs::path& to) { fs::current_path(to); }
  ~Cwd() { fs::current_path(saved); }
};

TEST(Tree, FoundFromTheDirectoryItselfOrAnySubdirectory) {
  Checkout c;
  EXPECT_EQ(workflows::find_tree(c.root), c.root);
  EXPECT_EQ(workflows::find_tree(c.root / "kernels" / "src" / "deep"), c.root);
  EXPECT_EQ(workflows::find_tree(c.root / "kernels" / "src" / "deep" / ""), c.root);
  // The nearest one wins: a checkout nested in another (a vendored copy) is its own tree.
  const fs::path inner = c.root / "third_party" / "copy";
  fs::create_directories(inner / "kernels");
  util::write_file_atomic(inner / "kernels" / "ops.yaml", "ops:\n");
  EXPECT_EQ(workflows::find_tree(inner / "kernels"), inner);
  EXPECT_TRUE(workflows::find_tree(c.dir.path()).empty());
}

TEST(Tree, ResolveUsesTheFlagThenTheCurrentDirectoryElseAUsageError) {
  Checkout c, other;
  {
    Cwd cwd(c.root / "kernels" / "src");
    EXPECT_EQ(cli::resolve_tree("", "kernel-dev"), c.root);
    EXPECT_EQ(cli::resolve_tree(other.root.string(), "kernel-dev"), other.root);
  }
  Cwd cwd(c.dir.path());
  try {
    cli::resolve_tree("", "kernel-dev");
    ADD_FAILURE() << "outside a checkout without --tree must be a usage error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Usage);
    EXPECT_NE(std::string(e.what()).find("not inside one"), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("--tree"), std::string::npos) << e.hint();
  }
  try {
    cli::resolve_tree(c.dir.path().string(), "autopatch");
    ADD_FAILURE() << "--tree naming a directory without kernels/ops.yaml must be refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Usage);
    EXPECT_NE(std::string(e.what()).find("no kernels/ops.yaml"), std::string::npos) << e.what();
  }
}

TEST(Tree, WorkflowOutsideACheckoutExitsTwoAndCreatesNoRun) {
  TempDir dir;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--yes", "kernel-dev", "ReLU squared activation function"},
        {"--yes", "autopatch", "qwen3"},
        {"--yes", "kernel-perf", "rms_norm", "--profile-only"}}) {
    const auto result = run_cli(dir.path(), args);
    EXPECT_EQ(result.exit_code, 2) << args[1] << ": " << result.err;
    EXPECT_NE(result.err.find("--tree"), std::string::npos) << result.err;
  }
  EXPECT_FALSE(fs::exists(dir.path() / ".liger-agent")) << "a refused command left a run directory";
}

TEST(Tree, DefaultRunDirectoryIsInTheCheckoutHoldingTheCurrentDirectory) {
  Checkout c;
  const auto inside = run_cli(c.root / "kernels" / "src", {"--json", "runs"});
  ASSERT_EQ(inside.exit_code, 0) << inside.err;
  EXPECT_EQ(fs::path(inside.json()["run_root"].get<std::string>()), c.root / ".liger-agent" / "runs");
  // A configured run_dir is taken as written (relative to the current directory).
  const auto flag = run_cli(c.root / "kernels", {"--json", "--run-dir", "my-runs", "runs"});
  ASSERT_EQ(flag.exit_code, 0) << flag.err;
  EXPECT_EQ(flag.json()["run_root"].get<std::string>(), "my-runs");
}

TEST(Tree, VersionReportsTheDataDirectoryInUse) {
  TempDir dir;
  const auto result = run_cli(dir.path(), {"--json", "version"});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const fs::path data = result.json()["data_dir"].get<std::string>();
  EXPECT_TRUE(fs::is_directory(data / "skills")) << data;
  EXPECT_TRUE(fs::is_directory(data / "templates")) << data;
  // LIGER_AGENT_DATA_DIR still overrides it.
  const auto env = run_cli(dir.path(), {"--json", "version"}, {{"LIGER_AGENT_DATA_DIR", dir.path().string()}});
  EXPECT_EQ(env.json()["data_dir"].get<std::string>(), dir.path().string());
}

}  // namespace
}  // namespace liger::testing
