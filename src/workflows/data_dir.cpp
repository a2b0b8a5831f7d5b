// Where the binary finds its data (skills/, templates/) and which checkout a workflow writes into.
// The two are separate on purpose: an installed binary reads its data from its prefix and writes
// into the clone the user stands in, never into the source tree it was built from.
#include <unistd.h>

#include <cstdlib>
#include <system_error>

#include "liger/workflows.h"

namespace liger::workflows {

namespace fs = std::filesystem;

namespace {

// The running executable, resolved through /proc (argv[0] may be a bare name found on PATH).
fs::path executable_path() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path{} : self;
}

bool holds_data(const fs::path& dir) {
  std::error_code ec;
  return fs::is_directory(dir / "skills", ec) && fs::is_directory(dir / "templates", ec);
}

}  // namespace

fs::path data_dir() {
  if (const char* dir = std::getenv("LIGER_AGENT_DATA_DIR"); dir && *dir) return dir;
#ifdef LIGER_INSTALL_DATA_RELATIVE
  // Installed: <prefix>/bin/liger-agent reads <prefix>/share/liger-agent (the relative path is
  // computed by CMake from the install directories, so a custom BINDIR/DATADIR still matches).
  static const fs::path installed = [] {
    const fs::path exe = executable_path();
    if (exe.empty()) return fs::path{};
    const fs::path candidate = (exe.parent_path() / LIGER_INSTALL_DATA_RELATIVE).lexically_normal();
    return holds_data(candidate) ? candidate : fs::path{};
  }();
  if (!installed.empty()) return installed;
#endif
  return LIGER_SOURCE_DIR;
}

fs::path find_tree(const fs::path& start) {
  std::error_code ec;
  fs::path dir = fs::absolute(start, ec).lexically_normal();
  if (ec) return {};
  if (!dir.has_filename()) dir = dir.parent_path();  // "a/b/" -> "a/b"
  for (;;) {
    if (fs::is_regular_file(dir / "kernels" / "ops.yaml", ec)) return dir;
    if (dir == dir.root_path() || dir.parent_path() == dir) return {};
    dir = dir.parent_path();
  }
}

}  // namespace liger::workflows
