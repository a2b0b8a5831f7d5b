#include "engine/apply.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <nlohmann/json.hpp>
#include <set>

#include "liger/error.h"
#include "liger/util.h"

namespace liger::engine {

namespace fs = std::filesystem;

namespace {

fs::path manifest_path(const fs::path& backup_dir) { return backup_dir / "manifest.json"; }

}  // namespace

void apply_staged_files(const fs::path& staging_dir, const fs::path& tree_root,
                        const std::vector<std::string>& files, const fs::path& backup_dir) {
  // A previous, interrupted apply may have left the tree half-written: undo it first so the
  // backups taken below are of the true originals.
  restore_backups(backup_dir, tree_root);
  std::error_code ec;
  fs::remove_all(backup_dir, ec);
  fs::create_directories(backup_dir / "files");

  nlohmann::json manifest = {{"files", nlohmann::json::array()}, {"created_dirs", nlohmann::json::array()}};
  std::set<std::string> created_dirs;
  for (const auto& file : files) {
    const fs::path target = tree_root / file;
    nlohmann::json entry = {{"path", file}, {"existed", fs::exists(target, ec)}};
    if (entry["existed"].get<bool>()) {
      util::write_file_atomic_verbatim(backup_dir / "files" / file, util::read_file(target));
      entry["mode"] = static_cast<int>(fs::status(target).permissions());
    }
    manifest["files"].push_back(entry);
    for (fs::path dir = fs::path(file).parent_path(); !dir.empty(); dir = dir.parent_path()) {
      if (!fs::exists(tree_root / dir, ec)) created_dirs.insert(dir.generic_string());
    }
  }
  // Deepest first, so restore can remove them in order.
  std::vector<std::string> dirs(created_dirs.begin(), created_dirs.end());
  std::sort(dirs.begin(), dirs.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  manifest["created_dirs"] = dirs;
  util::write_file_atomic(manifest_path(backup_dir), manifest.dump(2));

  try {
    for (const auto& entry : manifest["files"]) {
      const std::string file = entry["path"].get<std::string>();
      const fs::path target = tree_root / file;
      util::write_file_atomic_verbatim(target, util::read_file(staging_dir / file));
      if (entry.contains("mode")) fs::permissions(target, static_cast<fs::perms>(entry["mode"].get<int>()));
    }
  } catch (...) {
    restore_backups(backup_dir, tree_root);
    throw;
  }
}

void restore_backups(const fs::path& backup_dir, const fs::path& tree_root) {
  std::error_code ec;
  if (!fs::exists(manifest_path(backup_dir), ec)) return;
  const auto manifest = nlohmann::json::parse(util::read_file(manifest_path(backup_dir)));
  for (const auto& entry : manifest["files"]) {
    const std::string file = entry["path"].get<std::string>();
    const fs::path target = tree_root / file;
    if (entry["existed"].get<bool>()) {
      util::write_file_atomic_verbatim(target, util::read_file(backup_dir / "files" / file));
      if (entry.contains("mode")) fs::permissions(target, static_cast<fs::perms>(entry["mode"].get<int>()), ec);
    } else {
      fs::remove(target, ec);
    }
  }
  for (const auto& dir : manifest["created_dirs"]) {
    fs::path path = tree_root / dir.get<std::string>();
    if (fs::is_directory(path, ec) && fs::is_empty(path, ec)) fs::remove(path, ec);
  }
}

// ---- ApplyLock ----

namespace {

bool process_alive(long pid) {
  if (pid <= 0) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

// Serialises check-then-create between processes; flock is dropped by the kernel if we die.
class RegistryMutex {
 public:
  explicit RegistryMutex(const fs::path& locks_dir) {
    fd_ = ::open((locks_dir / ".registry").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0 || ::flock(fd_, LOCK_EX) != 0) {
      throw Error(ErrorKind::Io, "cannot lock '" + (locks_dir / ".registry").string() + "'",
                  "check that the repository's .liger-agent/ directory is writable");
    }
  }
  ~RegistryMutex() {
    if (fd_ >= 0) ::close(fd_);
  }

 private:
  int fd_ = -1;
};

}  // namespace

ApplyLock ApplyLock::acquire(const fs::path& tree_root, const std::string& run_name,
                             const std::vector<std::string>& files) {
  const fs::path locks_dir = tree_root / ".liger-agent" / "locks";
  fs::create_directories(locks_dir);
  RegistryMutex mutex(locks_dir);

  const std::set<std::string> wanted(files.begin(), files.end());
  for (const auto& entry : fs::directory_iterator(locks_dir)) {
    if (entry.path().extension() != ".lock") continue;
    nlohmann::json holder;
    try {
      holder = nlohmann::json::parse(util::read_file(entry.path()));
    } catch (const std::exception&) {
      continue;  // unreadable claim: written atomically, so not ours to interpret; ignore
    }
    const std::string holder_run = holder.value("run", "");
    const long pid = holder.value("pid", 0L);
    if (holder_run == run_name || !process_alive(pid)) {
      std::error_code ec;
      fs::remove(entry.path(), ec);  // our own claim from before a crash, or a stale one
      continue;
    }
    std::vector<std::string> shared;
    for (const auto& file : holder.value("files", std::vector<std::string>{}))
      if (wanted.count(file)) shared.push_back(file);
    if (!shared.empty()) {
      std::string list;
      for (const auto& file : shared) list += (list.empty() ? "" : ", ") + file;
      throw Error(ErrorKind::Failure,
                  "run '" + holder_run + "' (pid " + std::to_string(pid) + ") is applying the same files: " + list,
                  "wait for that run to finish, then `liger-agent resume " + run_name +
                      "`; if that process is gone, delete " + entry.path().string());
    }
  }

  ApplyLock lock;
  lock.path_ = locks_dir / (run_name + ".lock");
  nlohmann::json claim = {{"run", run_name}, {"pid", static_cast<long>(::getpid())},
                          {"files", files},  {"created_at", util::now_iso8601()}};
  util::write_file_atomic(lock.path_, claim.dump(2));
  return lock;
}

ApplyLock::ApplyLock(ApplyLock&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }

ApplyLock& ApplyLock::operator=(ApplyLock&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    other.path_.clear();
  }
  return *this;
}

ApplyLock::~ApplyLock() { release(); }

void ApplyLock::release() {
  if (path_.empty()) return;
  std::error_code ec;
  fs::remove(path_, ec);
  path_.clear();
}

}  // namespace liger::engine
