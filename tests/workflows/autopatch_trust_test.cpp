// An autopatch profile edited at the checkpoint cannot smuggle code into the integration through
// a value the generated Python uses as a name or a literal (issue 15).
#include <gtest/gtest.h>

#include <regex>

#include "liger/config.h"
#include "liger/engine.h"
#include "liger/error.h"
#include "liger/util.h"
#include "workflows/autopatch/workflow.h"

namespace {

using namespace liger;
namespace fs = std::filesystem;

fs::path repo() { return fs::path(LIGER_SOURCE_DIR); }
const char* kPkg = "kernels/python/liger_kernels/transformers";

struct ParkedRun {
  fs::path root, tree, runs;
  Config config = Config::defaults();
  engine::WorkflowRegistry registry;
  fs::path run_dir;

  ParkedRun() {
    std::string pattern = (fs::temp_directory_path() / "autopatch-trust-XXXXXX").string();
    root = ::mkdtemp(pattern.data());
    tree = root / "repo";
    runs = root / "runs";
    fs::create_directories(tree / kPkg);
    fs::create_directories(tree / "docs");
    fs::copy_file(repo() / kPkg / "__init__.py", tree / kPkg / "__init__.py");
    fs::copy_file(repo() / "docs/python.md", tree / "docs/python.md");
    registry.add(autopatch::make_workflow());
    engine::RunRequest r;
    r.workflow = "autopatch";
    r.label = "tinyllama";
    r.tree_root = tree;
    r.arguments = {{"model", (repo() / "tests/workflows/fixtures/autopatch/tinyllama/modeling_tinyllama.py").string()}};
    engine::Engine e(registry, options(engine::CheckpointPolicy::Park));
    run_dir = e.start(r).run_dir;
  }
  ~ParkedRun() {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  engine::EngineOptions options(engine::CheckpointPolicy policy) {
    engine::EngineOptions o;
    o.run_root = runs;
    o.checkpoints = policy;
    o.config = &config;
    o.quiet = true;
    return o;
  }
};

TEST(AutopatchTrust, NormTargetAndParamsMustBeNamesAndNumbers) {
  struct Case {
    std::string pattern, replacement, field;
  };
  for (const Case& c : {Case{"target: TinyLlamaRMSNorm", "target: TinyLlamaRMSNorm; import os", "patch_plan.apply[0].target"},
                        Case{"offset: 0", "offset: 0, __import__(os).system(x)", "patch_plan.apply[0].params.offset"}}) {
    ParkedRun run;
    const fs::path profile = run.run_dir / "profile.yaml";
    const std::string text = util::read_file(profile);
    ASSERT_NE(text.find(c.pattern), std::string::npos) << text;
    util::write_file_atomic(profile, std::regex_replace(text, std::regex(c.pattern), c.replacement,
                                                        std::regex_constants::format_first_only));
    engine::approve_run(run.run_dir);
    engine::Engine e(run.registry, run.options(engine::CheckpointPolicy::AutoApprove));
    try {
      e.resume(run.run_dir);
      FAIL() << c.replacement << " was rendered";
    } catch (const Error& error) {
      EXPECT_EQ(error.kind(), ErrorKind::Usage) << error.what();
      EXPECT_NE(std::string(error.what()).find(c.field), std::string::npos) << error.what();
    }
    EXPECT_FALSE(fs::exists(run.tree / kPkg / "tinyllama.py"));
  }
}

}  // namespace
