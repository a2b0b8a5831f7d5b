// `runs prune`: deleting finished run directories without ever pulling one out from under a
// process that is driving it or applying its files.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <regex>

#include "engine/run_state.h"
#include "liger/engine.h"
#include "liger/error.h"
#include "liger/util.h"

namespace liger::engine {

namespace {

bool process_alive(long pid) {
  if (pid <= 0) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

// The engine holds an exclusive flock on <run>/.run.lock while it drives a run; taking it here
// (and keeping it until the directory is gone) means no resume can start mid-deletion.
class TryRunLock {
 public:
  explicit TryRunLock(const fs::path& run_dir) {
    fd_ = ::open((run_dir / ".run.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    held_ = fd_ >= 0 && ::flock(fd_, LOCK_EX | LOCK_NB) == 0;
  }
  ~TryRunLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool held() const { return held_; }

 private:
  int fd_ = -1;
  bool held_ = false;
};

// A live claim in <tree>/.liger-agent/locks/<run>.lock: the run is applying files right now.
std::string apply_lock_holder(const RunState& state) {
  if (state.tree_root.empty()) return "";
  const fs::path lock = state.tree_root / ".liger-agent" / "locks" / (state.name + ".lock");
  std::error_code ec;
  if (!fs::is_regular_file(lock, ec)) return "";
  long pid = 0;
  try {
    pid = nlohmann::json::parse(util::read_file(lock)).value("pid", 0L);
  } catch (const std::exception&) {
    return "its apply lock " + lock.string() + " is unreadable";  // not ours to judge: keep the run
  }
  return process_alive(pid) ? "it holds the apply lock " + lock.string() + " (pid " + std::to_string(pid) + ")" : "";
}

bool status_matches(const std::string& status, const std::vector<std::string>& wanted) {
  for (const auto& w : wanted) {
    if (status == w) return true;
    if (w == "failed" && status == "verification_failed") return true;
  }
  return false;
}

}  // namespace

long long parse_duration(const std::string& text) {
  static const std::regex form(R"(^\s*([0-9]+)\s*([smhdw])\s*$)");
  std::smatch m;
  if (!std::regex_match(text, m, form))
    throw Error(ErrorKind::Usage, "'" + text + "' is not a duration",
                "use a number and a unit: 45s, 30m, 12h, 7d or 2w");
  const long long n = std::stoll(m[1]);
  switch (m[2].str()[0]) {
    case 's': return n;
    case 'm': return n * 60;
    case 'h': return n * 3600;
    case 'd': return n * 86400;
    default: return n * 7 * 86400;
  }
}

PruneResult prune_runs(const fs::path& run_root, const std::vector<std::string>& statuses, long long min_age_seconds,
                       bool dry_run) {
  static const std::vector<std::string> kPrunable = {"completed", "failed", "rejected"};
  for (const auto& s : statuses)
    if (std::find(kPrunable.begin(), kPrunable.end(), s) == kPrunable.end())
      throw Error(ErrorKind::Usage, "runs prune: unknown status '" + s + "'",
                  "choose from completed, failed, rejected (runs parked at or approved past a checkpoint are never "
                  "pruned: reject them first)");
  const std::vector<std::string>& wanted = statuses.empty() ? kPrunable : statuses;

  PruneResult result;
  for (const auto& run : list_runs(run_root)) {
    if (!status_matches(run.status, wanted)) continue;
    // An unknown age (unparseable created_at) never satisfies an age limit.
    if (min_age_seconds > 0 && (run.age_seconds < 0 || run.age_seconds < min_age_seconds)) continue;
    TryRunLock lock(run.run_dir);
    if (!lock.held()) {
      result.kept_busy.emplace_back(run, "another process is driving it");
      continue;
    }
    RunState state;
    try {
      state = RunState::load(run.run_dir);
    } catch (const Error&) {
      continue;  // changed under us since list_runs: not what was matched
    }
    if (const std::string why = apply_lock_holder(state); !why.empty()) {
      result.kept_busy.emplace_back(run, why);
      continue;
    }
    if (!dry_run) {
      std::error_code ec;
      fs::remove_all(run.run_dir, ec);
      if (ec)
        throw Error(ErrorKind::Io, "runs prune: cannot remove " + run.run_dir.string() + ": " + ec.message(),
                    "check its permissions; the runs listed before it were removed");
    }
    result.removed.push_back(run);
  }
  return result;
}

}  // namespace liger::engine
