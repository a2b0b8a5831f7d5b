// Child processes with a timeout, output capture and interrupt handling: what Verify uses to
// run compilers, tests and benchmarks, and checkpoints use to open $EDITOR.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace liger::toolchain {

struct ProcessOptions {
  std::vector<std::string> argv;          // argv[0] is looked up on PATH
  std::filesystem::path cwd;              // empty: inherit
  std::chrono::seconds timeout{0};        // 0: no limit
  bool inherit_stdio = false;             // true for interactive tools (an editor)
  std::map<std::string, std::string> env; // added to / overriding the environment
  std::string progress_label;             // shown while it runs; empty: progress_label(argv)
};

struct ProcessResult {
  int exit_code = -1;    // -1 when killed by a signal
  int signal = 0;        // the signal that ended it, if any
  bool timed_out = false;
  bool interrupted = false;  // we stopped it because liger-agent received SIGINT/SIGTERM
  std::string output;        // stdout and stderr interleaved (empty with inherit_stdio)
  double seconds = 0;

  bool ok() const { return exit_code == 0 && !timed_out && !interrupted; }
};

// Throws liger::Error (Io) only when the process cannot be started at all; a failing or
// timed-out child is reported in the result. On timeout or interrupt the child's whole process
// group gets SIGTERM, then SIGKILL after 2 s.
ProcessResult run_process(const ProcessOptions& options);

// While progress reporting is on (the engine turns it on unless -q), a child that runs for more
// than a moment is shown on stderr: on a terminal one status line rewritten every second
// ("  ... build: 1m05s [45/120]", the count taken from ninja's or ctest's output), otherwise a
// heartbeat line every `heartbeat` (CI logs must not look hung). Off by default: library users
// and tests that call run_process see nothing.
void set_progress_reporting(bool enabled, std::chrono::milliseconds heartbeat = std::chrono::seconds(30));
// "configure", "build", "test", "benchmark", or the program's name.
std::string progress_label(const std::vector<std::string>& argv);
// The last "[n/N]" of ninja ("[45/120] Building ...") or ctest (" 45/120 Test #45: ...") in
// `output`, as "[45/120]"; empty when there is none.
std::string progress_count(const std::string& output);
// 42s, 2m30s, 1h02m.
std::string format_elapsed(double seconds);

// Full path of `name` on PATH, if any.
std::optional<std::filesystem::path> find_executable(const std::string& name);

// Hardware and tools, detected at run time so one binary works on CPU and GPU machines.
struct GpuInfo {
  bool nvcc_found = false;
  std::string nvcc_version;  // "12.4" or ""
  bool gpu_found = false;
  std::vector<std::string> gpus;  // one line per device from nvidia-smi -L
};
GpuInfo detect_gpu();

}  // namespace liger::toolchain
