// Helpers for the agent tests: a fresh temp directory per test, running the real binary, and
// snapshotting a directory tree to prove it was left byte-for-byte unchanged.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "liger/process.h"
#include "liger/util.h"

namespace liger::testing {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "liger-agent-test-XXXXXX").string();
    char* made = ::mkdtemp(pattern.data());
    if (!made) throw std::runtime_error("mkdtemp failed");
    path_ = made;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// The liger-agent binary of this build: $LIGER_AGENT_BIN, else <build>/src/liger-agent next to
// <build>/tests/agent_tests.
inline fs::path agent_binary() {
  if (const char* bin = std::getenv("LIGER_AGENT_BIN"); bin && *bin) return bin;
  const fs::path self = fs::read_symlink("/proc/self/exe");
  for (fs::path dir = self.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path()) {
    if (fs::exists(dir / "src" / "liger-agent")) return dir / "src" / "liger-agent";
  }
  throw std::runtime_error("liger-agent binary not found; set LIGER_AGENT_BIN");
}

struct CliResult {
  int exit_code = -1;
  std::string out;  // stdout only
  std::string err;
  nlohmann::json json() const { return nlohmann::json::parse(out); }
};

// Makes `root` a checkout of the kernel library as tree discovery and --tree see one (its op
// list, source folder and integrations folder), so a CLI test can run a command that needs a tree without writing into
// the source tree the tests were built from.
inline void make_checkout(const fs::path& root) {
  fs::create_directories(root / "kernels" / "src");
  fs::create_directories(root / "kernels" / "python" / "liger_kernels" / "transformers");
  fs::copy_file(fs::path(LIGER_SOURCE_DIR) / "kernels" / "ops.yaml", root / "kernels" / "ops.yaml",
                fs::copy_options::overwrite_existing);
}

inline std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// Runs the binary in `cwd` with stdin from /dev/null (so never a terminal), a private HOME and
// XDG_CONFIG_HOME unless `env` says otherwise.
inline CliResult run_cli(const fs::path& cwd, const std::vector<std::string>& args,
                         std::map<std::string, std::string> env = {}) {
  const fs::path err_file = cwd / ".stderr.txt";
  std::string command = "cd " + shell_quote(cwd.string()) + " && exec " + shell_quote(agent_binary().string());
  for (const auto& arg : args) command += " " + shell_quote(arg);
  command += " </dev/null 2>" + shell_quote(err_file.string());
  env.try_emplace("HOME", cwd.string());
  env.try_emplace("XDG_CONFIG_HOME", (cwd / ".xdg").string());
  toolchain::ProcessOptions options{.argv = {"/bin/sh", "-c", command}, .timeout = std::chrono::seconds(120), .env = env};
  auto result = toolchain::run_process(options);
  CliResult cli;
  cli.exit_code = result.exit_code;
  cli.out = result.output;
  cli.err = fs::exists(err_file) ? util::read_file(err_file) : "";
  fs::remove(err_file);
  return cli;
}

// Path -> content of every regular file under `root` except the agent's own .liger-agent/.
inline std::map<std::string, std::string> snapshot_tree(const fs::path& root) {
  std::map<std::string, std::string> files;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    if (it->path().filename() == ".liger-agent") {
      it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file()) files[fs::relative(it->path(), root).string()] = util::read_file(it->path());
  }
  return files;
}

// A small kernels/ tree with two public headers, like the bundled library's.
inline void write_fixture_kernels(const fs::path& repo) {
  const fs::path dir = repo / "kernels" / "include" / "liger_kernels";
  fs::create_directories(dir);
  util::write_file_atomic(dir / "common.h", R"(/* common */
#ifndef COMMON_H
#define COMMON_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
typedef enum liger_status { LIGER_STATUS_SUCCESS = 0, LIGER_STATUS_INVALID_ARGUMENT = 1 } liger_status;
#define LIGER_API __attribute__((visibility("default")))
/* Last error of this thread. */
LIGER_API const char* liger_last_error(void);
#ifdef __cplusplus
}
#endif
#endif
)");
  util::write_file_atomic(dir / "relu_squared.h", R"(#include "liger_kernels/common.h"
#ifdef __cplusplus
extern "C" {
#endif
/* y = relu(x)^2 */
LIGER_API liger_status liger_relu_squared_forward(const void* x, void* y, int64_t n,
                                                  int dtype, void* stream);
// dx = 2 relu(x) dy
LIGER_API liger_status liger_relu_squared_backward(const void* dy, const void* x, void* dx,
                                                   int64_t n, int dtype, void* stream);
#ifdef __cplusplus
}
#endif
)");
  util::write_file_atomic(repo / "README.md", "# fixture repository\n");
  util::write_file_atomic(repo / "docs" / "kernel-api.md", "old hand-written table\n");
}

}  // namespace liger::testing
