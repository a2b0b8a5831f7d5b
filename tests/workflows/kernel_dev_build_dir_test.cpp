// LIGER_BUILD_DIR pointing at another checkout's build: Verify would build and test that checkout
// and report its tests as the new op's. kernel-dev refuses it before a run exists.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "workflows/kernel_dev/workflow.h"

namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("liger-build-dir-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                        "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

void write_cache(const fs::path& build, const fs::path& source) {
  fs::create_directories(build);
  std::ofstream(build / "CMakeCache.txt") << "# This is the CMakeCache file.\nCMAKE_BUILD_TYPE:STRING=Release\n"
                                          << "CMAKE_HOME_DIRECTORY:INTERNAL=" << source.string() << "\n";
}

TEST(KernelDevBuildDir, AnotherCheckoutsBuildIsNamedWithBothPaths) {
  TempDir tmp;
  const fs::path ours = tmp.path / "clone", theirs = tmp.path / "other", build = tmp.path / "build";
  fs::create_directories(ours);
  fs::create_directories(theirs);
  write_cache(build, theirs);
  const std::string problem = liger::kernel_dev::foreign_build_dir_problem(ours, build);
  EXPECT_NE(problem.find(build.string()), std::string::npos) << problem;
  EXPECT_NE(problem.find(theirs.string()), std::string::npos) << problem;
  EXPECT_NE(problem.find(ours.string()), std::string::npos) << problem;
}

TEST(KernelDevBuildDir, ThisCheckoutsBuildANewOneOrAnUnreadableCacheAreAccepted) {
  TempDir tmp;
  const fs::path ours = tmp.path / "clone";
  fs::create_directories(ours);
  write_cache(tmp.path / "mine", tmp.path / "clone" / "." );  // the same directory, spelled differently
  EXPECT_EQ(liger::kernel_dev::foreign_build_dir_problem(ours, tmp.path / "mine"), "");
  EXPECT_EQ(liger::kernel_dev::foreign_build_dir_problem(ours, tmp.path / "fresh"), "");
  fs::create_directories(tmp.path / "odd");
  std::ofstream(tmp.path / "odd" / "CMakeCache.txt") << "not a cache\n";
  EXPECT_EQ(liger::kernel_dev::foreign_build_dir_problem(ours, tmp.path / "odd"), "");
}

}  // namespace
