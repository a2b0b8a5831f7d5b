// Progress of long child processes: the step name, the elapsed time and ninja's/ctest's [n/N];
// without a terminal a heartbeat line per interval, so a CI log never looks hung.
#include <gtest/gtest.h>

#include <iostream>
#include <sstream>

#include "liger/process.h"

namespace liger::toolchain {
namespace {

TEST(Progress, LabelsNameTheStep) {
  EXPECT_EQ(progress_label({"cmake", "-S", ".", "-B", "build"}), "configure");
  EXPECT_EQ(progress_label({"/usr/bin/cmake", "--build", "build", "--target", "x"}), "build");
  EXPECT_EQ(progress_label({"ninja", "-C", "build"}), "build");
  EXPECT_EQ(progress_label({"ctest", "--output-on-failure"}), "test");
  EXPECT_EQ(progress_label({"build/tests/kernels/reference_tests", "--gtest_filter=A.*"}), "test");
  EXPECT_EQ(progress_label({"python3", "-m", "pytest", "-q"}), "test");
  EXPECT_EQ(progress_label({"build/benchmarks/liger-bench", "--op", "x"}), "benchmark");
  EXPECT_EQ(progress_label({"python3", "benchmarks/compare_torch.py"}), "benchmark");
  EXPECT_EQ(progress_label({"/usr/local/cuda/bin/nvcc", "-c", "a.cu"}), "nvcc");
}

TEST(Progress, CountIsTheLastNinjaOrCtestCounter) {
  EXPECT_EQ(progress_count("[1/120] Building CXX a.o\n[45/120] Building CUDA b.o\n"), "[45/120]");
  EXPECT_EQ(progress_count("      Start 12: T.x\n12/40 Test #12: T.x ....   Passed    0.01 sec\n"), "[12/40]");
  EXPECT_EQ(progress_count("no counter here, only 3/4 of a sentence\n"), "");
  EXPECT_EQ(format_elapsed(5), "5s");
  EXPECT_EQ(format_elapsed(150), "2m30s");
  EXPECT_EQ(format_elapsed(3725), "1h02m");
}

// Redirects std::cerr for the scope (stderr is not a terminal under ctest either way).
struct CaptureCerr {
  std::ostringstream text;
  std::streambuf* saved = std::cerr.rdbuf(text.rdbuf());
  ~CaptureCerr() { std::cerr.rdbuf(saved); }
};

TEST(Progress, HeartbeatWithoutATerminalAndSilenceWhenOff) {
  ProcessOptions options;
  options.argv = {"/bin/sh", "-c", "echo '[3/10] Building a.o'; sleep 1; echo '[7/10] Building b.o'; sleep 1"};
  options.progress_label = "build";
  {
    CaptureCerr err;
    set_progress_reporting(true, std::chrono::milliseconds(300));
    const auto result = run_process(options);
    set_progress_reporting(false);
    ASSERT_TRUE(result.ok()) << result.output;
    const std::string text = err.text.str();
    // A heartbeat while the first step was the latest one, and one after the second.
    EXPECT_NE(text.find("s, [3/10]\n"), std::string::npos) << text;
    EXPECT_NE(text.find("  ... build: 1s, [7/10]\n"), std::string::npos) << text;
    EXPECT_NE(text.find(", [7/10], done\n"), std::string::npos) << text;
    EXPECT_EQ(text.find('\r'), std::string::npos) << "no terminal: plain lines only";
  }
  {
    CaptureCerr err;
    ASSERT_TRUE(run_process(options).ok());
    EXPECT_EQ(err.text.str(), "") << "progress is off unless the engine turns it on";
  }
}

}  // namespace
}  // namespace liger::toolchain
