#include "engine/apply.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/run_state.h"
#include "liger/error.h"
#include "liger/util.h"

namespace liger::engine {

namespace fs = std::filesystem;

namespace {

constexpr const char* kTempPrefix = ".liger-agent-tmp.";

std::function<void(const std::string&)>& step_hook() {
  static std::function<void(const std::string&)> hook;
  return hook;
}

void step(const std::string& name) {
  if (auto& hook = step_hook()) hook(name);
}

fs::path manifest_path(const fs::path& backup_dir) { return backup_dir / "manifest.json"; }

// Change detection between what apply wrote and what is in the tree now; not a security hash.
std::string content_hash(std::string_view content) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : content) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buffer[17];
  std::snprintf(buffer, sizeof buffer, "%016llx", static_cast<unsigned long long>(h));
  return std::string(buffer) + "-" + std::to_string(content.size());
}

// Run names are slugs already; anything else is made safe for a file name.
std::string temp_prefix(const std::string& owner) {
  std::string safe;
  for (char c : owner.empty() ? std::string("run") : owner)
    safe += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') ? c : '_';
  return kTempPrefix + safe + ".";
}

Error io_error(const std::string& what, const fs::path& path, int err) {
  return Error(ErrorKind::Io, what + " '" + path.string() + "': " + std::strerror(err),
               "check that the path exists and is writable by this user");
}

bool is_within(const fs::path& path, const fs::path& root) {
  auto [r, p] = std::mismatch(root.begin(), root.end(), path.begin(), path.end());
  return r == root.end();
}

// Refuses a repository path whose parent directories lead outside the tree through a symlink
// (or through a dangling one, which a write would follow wherever it points later).
void check_stays_in_tree(const fs::path& tree_root, const std::string& rel) {
  std::error_code ec;
  const fs::path root = fs::weakly_canonical(tree_root, ec);
  fs::path current = tree_root;
  fs::path shown;
  for (const auto& part : fs::path(rel).parent_path()) {
    current /= part;
    shown /= part;
    const auto status = fs::symlink_status(current, ec);
    if (ec || status.type() == fs::file_type::not_found) break;  // the rest does not exist yet
    if (status.type() != fs::file_type::symlink) continue;
    std::error_code link_ec;
    const fs::path link = fs::read_symlink(current, link_ec);
    const fs::path resolved = fs::canonical(current, link_ec);
    if (link_ec) {
      throw Error(ErrorKind::Failure,
                  "refusing to write '" + rel + "': '" + shown.string() + "' is a symlink to '" + link.string() +
                      "', which does not resolve",
                  "replace the dangling link '" + (tree_root / shown).string() + "' with a directory, then resume");
    }
    if (!is_within(resolved, root)) {
      throw Error(ErrorKind::Failure,
                  "refusing to write '" + rel + "': '" + shown.string() + "' is a symlink to '" + link.string() +
                      "' (" + resolved.string() + "), outside the repository " + root.string(),
                  "apply writes only inside the repository; make '" + shown.string() +
                      "' a real directory (or a link into the repository), then resume the run");
    }
  }
  const fs::path parent = fs::weakly_canonical(tree_root / fs::path(rel).parent_path(), ec);
  if (!ec && !is_within(parent, root)) {
    throw Error(ErrorKind::Failure, "refusing to write '" + rel + "': it resolves to " + parent.string() +
                                        ", outside the repository " + root.string(),
                "apply writes only inside the repository");
  }
}

void fsync_dir(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

fs::path make_temp_name(const fs::path& dir, const std::string& owner) {
  static std::atomic<unsigned> sequence{0};
  return dir / (temp_prefix(owner) + std::to_string(::getpid()) + "." + std::to_string(sequence++));
}

// Writes `content` to `target` through a recognisable temp file in the same directory, with
// `mode` set before the rename, so the path holds the old or the new file, never a prefix. A
// symlink at `target` is replaced, never written through.
void write_tree_file(const fs::path& target, std::string_view content, fs::perms mode, const std::string& owner,
                     const std::string& step_name) {
  const fs::path dir = target.parent_path();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw io_error("cannot create directory", dir, ec.value());
  const fs::path temp = make_temp_name(dir, owner);
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw io_error("cannot create", temp, errno);
  try {
    util::write_all(fd, content, temp);
    if (::fchmod(fd, static_cast<mode_t>(mode)) != 0) throw io_error("cannot set permissions of", temp, errno);
    if (::fsync(fd) != 0) throw io_error("cannot fsync", temp, errno);
  } catch (...) {
    ::close(fd);
    ::unlink(temp.c_str());
    throw;
  }
  ::close(fd);
  step("temp:" + step_name);
  if (::rename(temp.c_str(), target.c_str()) != 0) {
    int err = errno;
    ::unlink(temp.c_str());
    throw io_error("cannot rename into place", target, err);
  }
  fsync_dir(dir);
  step(step_name);
}

void write_tree_symlink(const fs::path& target, const fs::path& link, const std::string& owner,
                        const std::string& step_name) {
  const fs::path dir = target.parent_path();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw io_error("cannot create directory", dir, ec.value());
  const fs::path temp = make_temp_name(dir, owner);
  if (::symlink(link.c_str(), temp.c_str()) != 0) throw io_error("cannot create symlink", temp, errno);
  step("temp:" + step_name);
  if (::rename(temp.c_str(), target.c_str()) != 0) {
    int err = errno;
    ::unlink(temp.c_str());
    throw io_error("cannot rename into place", target, err);
  }
  fsync_dir(dir);
  step(step_name);
}

std::optional<nlohmann::json> load_manifest(const fs::path& backup_dir) {
  std::error_code ec;
  if (!fs::exists(manifest_path(backup_dir), ec)) return std::nullopt;
  auto manifest = nlohmann::json::parse(util::read_file(manifest_path(backup_dir)), nullptr, false);
  if (manifest.is_discarded() || !manifest.is_object()) {
    throw Error(ErrorKind::Io, "the apply manifest " + manifest_path(backup_dir).string() + " is not valid JSON",
                "it is written atomically, so it was edited by hand; restore it or compare the tree with "
                "the originals under " + (backup_dir / "files").string() + " yourself");
  }
  return manifest;
}

void save_manifest(const fs::path& backup_dir, nlohmann::json& manifest, const char* status) {
  manifest["status"] = status;
  util::write_file_atomic(manifest_path(backup_dir), manifest.dump(2));
  step(std::string("manifest:") + status);
}

// An entry's original kind: "file", "symlink" or "absent" (manifests of version 1 had only
// "existed").
std::string kind_of(const nlohmann::json& entry) {
  if (entry.contains("kind")) return entry["kind"].get<std::string>();
  return entry.value("existed", false) ? "file" : "absent";
}

std::string describe(fs::file_type type) {
  switch (type) {
    case fs::file_type::regular: return "a file";
    case fs::file_type::directory: return "a directory";
    case fs::file_type::symlink: return "a symlink";
    case fs::file_type::not_found: return "missing";
    default: return "a special file";
  }
}

// Why `target` is not as the manifest entry says it was before apply; empty when it is.
std::string mismatch(const fs::path& target, const nlohmann::json& entry, const fs::path& backup_dir) {
  std::error_code ec;
  const auto status = fs::symlink_status(target, ec);
  const std::string kind = kind_of(entry);
  const std::string rel = entry["path"].get<std::string>();
  if (kind == "absent") {
    return status.type() == fs::file_type::not_found ? "" : "did not exist before the run but is " + describe(status.type());
  }
  if (kind == "symlink") {
    if (status.type() != fs::file_type::symlink) return "was a symlink but is " + describe(status.type());
    const auto link = fs::read_symlink(target, ec);
    return link == fs::path(entry["link"].get<std::string>()) ? "" : "points to '" + link.string() + "'";
  }
  if (status.type() != fs::file_type::regular) return "was a file but is " + describe(status.type());
  if (util::read_file(target) != util::read_file(backup_dir / "files" / rel)) return "content differs from the backup";
  if (entry.contains("mode") && status.permissions() != static_cast<fs::perms>(entry["mode"].get<int>()))
    return "permissions differ from the original";
  return "";
}

std::vector<std::string> manifest_files(const nlohmann::json& manifest) {
  std::vector<std::string> files;
  for (const auto& entry : manifest.value("files", nlohmann::json::array())) files.push_back(entry["path"]);
  return files;
}

}  // namespace

void set_apply_step_hook(std::function<void(const std::string&)> hook) { step_hook() = std::move(hook); }

BackupStatus backup_status(const fs::path& backup_dir) {
  const auto manifest = load_manifest(backup_dir);
  if (!manifest) return BackupStatus::None;
  const std::string status = manifest->value("status", "applied");  // version 1 had no status
  if (status == "applying") return BackupStatus::Applying;
  if (status == "restoring") return BackupStatus::Restoring;
  if (status == "restored") return BackupStatus::Restored;
  return BackupStatus::Applied;
}

bool tree_holds_run_files(const fs::path& backup_dir) {
  const auto status = backup_status(backup_dir);
  return status == BackupStatus::Applying || status == BackupStatus::Applied || status == BackupStatus::Restoring;
}

void remove_temp_files(const fs::path& tree_root, const std::string& owner, const std::vector<std::string>& files) {
  const std::string prefix = temp_prefix(owner);
  std::set<fs::path> dirs;
  for (const auto& file : files) dirs.insert(fs::path(file).parent_path());
  for (const auto& rel : dirs) {
    try {
      check_stays_in_tree(tree_root, (rel / "x").string());
    } catch (const Error&) {
      continue;  // never reach outside the tree, not even to delete
    }
    std::error_code ec;
    const fs::path dir = tree_root / rel;
    if (!fs::is_directory(dir, ec)) continue;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      if (entry.path().filename().string().starts_with(prefix)) fs::remove(entry.path(), ec);
    }
  }
}

nlohmann::json snapshot_targets(const fs::path& tree_root, const std::vector<std::string>& files) {
  nlohmann::json base = nlohmann::json::object();
  for (const auto& file : files) {
    std::error_code ec;
    const fs::path target = tree_root / file;
    switch (fs::symlink_status(target, ec).type()) {
      case fs::file_type::not_found: base[file] = nullptr; break;
      case fs::file_type::symlink: base[file] = "symlink:" + fs::read_symlink(target, ec).string(); break;
      case fs::file_type::regular: base[file] = content_hash(util::read_file(target)); break;
      default: base[file] = "other"; break;
    }
  }
  return base;
}

std::vector<std::string> changed_targets(const fs::path& tree_root, const nlohmann::json& base) {
  std::vector<std::string> changed;
  if (!base.is_object()) return changed;
  for (const auto& [file, version] : base.items()) {
    if (snapshot_targets(tree_root, {file})[file] != version) changed.push_back(file);
  }
  return changed;
}

void apply_staged_files(const fs::path& staging_dir, const fs::path& tree_root, const std::vector<std::string>& files,
                        const fs::path& backup_dir, const std::string& owner) {
  // An earlier apply of this run that was cut short (or an earlier attempt) is undone first, so
  // the backups taken below are of the true originals.
  const RestoreReport previous = restore_backups(backup_dir, tree_root);
  if (!previous.tree_unchanged()) {
    throw Error(ErrorKind::Failure, "an earlier apply of this run could not be undone: " + previous.summary(),
                "put those paths back by hand (the originals are under " + (backup_dir / "files").string() +
                    "), then resume the run");
  }
  // Every target is checked before the first byte is written.
  std::vector<std::string> contents;
  for (const auto& file : files) {
    check_stays_in_tree(tree_root, file);
    std::error_code ec;
    const auto type = fs::symlink_status(tree_root / file, ec).type();
    if (type == fs::file_type::directory) {
      throw Error(ErrorKind::Failure, "cannot apply '" + file + "': it is a directory in " + tree_root.string(),
                  "move that directory away, or reject the run");
    }
    contents.push_back(util::read_file(staging_dir / file));
  }
  std::error_code ec;
  fs::remove_all(backup_dir, ec);
  fs::create_directories(backup_dir / "files");

  nlohmann::json manifest = {{"version", 2}, {"owner", owner}, {"files", nlohmann::json::array()}};
  std::set<std::string> created_dirs;
  for (std::size_t i = 0; i < files.size(); ++i) {
    const std::string& file = files[i];
    const fs::path target = tree_root / file;
    const auto status = fs::symlink_status(target, ec);
    nlohmann::json entry = {{"path", file}, {"applied_hash", content_hash(contents[i])}};
    if (status.type() == fs::file_type::symlink) {
      // The link itself is the original, not what it points to.
      entry["kind"] = "symlink";
      entry["existed"] = true;
      entry["link"] = fs::read_symlink(target).string();
    } else if (status.type() == fs::file_type::not_found) {
      entry["kind"] = "absent";
      entry["existed"] = false;
    } else {
      const std::string original = util::read_file(target);
      util::write_file_atomic_verbatim(backup_dir / "files" / file, original);
      entry["kind"] = "file";
      entry["existed"] = true;
      entry["mode"] = static_cast<int>(status.permissions());
      entry["original_hash"] = content_hash(original);
    }
    manifest["files"].push_back(entry);
    for (fs::path dir = fs::path(file).parent_path(); !dir.empty(); dir = dir.parent_path()) {
      if (!fs::exists(tree_root / dir, ec)) created_dirs.insert(dir.generic_string());
    }
  }
  step("backup");
  // Deepest first, so restore can remove them in order.
  std::vector<std::string> dirs(created_dirs.begin(), created_dirs.end());
  std::sort(dirs.begin(), dirs.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  manifest["created_dirs"] = dirs;
  save_manifest(backup_dir, manifest, "applying");

  try {
    for (std::size_t i = 0; i < files.size(); ++i) {
      const auto& entry = manifest["files"][i];
      const fs::perms mode = entry.contains("mode") ? static_cast<fs::perms>(entry["mode"].get<int>())
                                                    : static_cast<fs::perms>(0644);
      write_tree_file(tree_root / files[i], contents[i], mode, owner, "write:" + files[i]);
    }
  } catch (const std::exception& error) {
    const RestoreReport undo = restore_backups(backup_dir, tree_root);
    if (!undo.tree_unchanged()) {
      throw Error(ErrorKind::Failure,
                  std::string("apply failed (") + error.what() + ") and undoing it was incomplete: " + undo.summary(),
                  "put those paths back by hand (the originals are under " + (backup_dir / "files").string() + ")");
    }
    throw;
  }
  save_manifest(backup_dir, manifest, "applied");
}

std::string RestoreReport::summary() const {
  std::string text;
  if (!failed.empty()) {
    text = "the tree is NOT as it was before the run; these paths could not be restored:";
    for (const auto& f : failed) text += "\n  - " + f;
    return text;
  }
  text = !had_backup         ? "nothing had been applied; the tree is unchanged"
         : already_restored ? "the tree is unchanged (the run's files were taken out, and the tree checked, when its "
                              "attempt failed)"
                            : "the tree is unchanged";
  if (!displaced.empty()) {
    text += " (";
    for (std::size_t i = 0; i < displaced.size(); ++i) text += (i ? ", " : "") + displaced[i];
    text += " had been changed after apply by something else; that content is kept in " + displaced_dir.string() + ")";
  }
  return text;
}

RestoreReport restore_backups(const fs::path& backup_dir, const fs::path& tree_root) {
  RestoreReport report;
  auto manifest = load_manifest(backup_dir);
  if (!manifest) return report;
  report.had_backup = true;
  report.displaced_dir = backup_dir / "displaced";
  if (manifest->value("status", "") == "restored") {
    report.already_restored = true;
    return report;
  }
  save_manifest(backup_dir, *manifest, "restoring");
  const std::string owner = manifest->value("owner", "");
  if (!owner.empty()) remove_temp_files(tree_root, owner, manifest_files(*manifest));

  std::set<std::string> failed_paths;
  for (const auto& entry : (*manifest)["files"]) {
    const std::string rel = entry["path"].get<std::string>();
    const fs::path target = tree_root / rel;
    const std::string kind = kind_of(entry);
    try {
      check_stays_in_tree(tree_root, rel);
      std::error_code ec;
      const auto status = fs::symlink_status(target, ec);
      if (status.type() == fs::file_type::regular) {
        // Apply's own content, or the original (restored already): anything else was written
        // by someone after apply, and is kept rather than silently lost.
        const std::string now = util::read_file(target);
        const std::string hash = content_hash(now);
        if (hash != entry.value("applied_hash", hash) && hash != entry.value("original_hash", std::string())) {
          util::write_file_atomic_verbatim(report.displaced_dir / rel, now);
          report.displaced.push_back(rel);
        }
      }
      if (mismatch(target, entry, backup_dir).empty()) continue;  // already as it was
      if (status.type() == fs::file_type::directory) {
        throw Error(ErrorKind::Failure, "is now a directory; move it away and restore again");
      }
      if (kind == "file") {
        write_tree_file(target, util::read_file(backup_dir / "files" / rel),
                        static_cast<fs::perms>(entry.value("mode", 0644)), owner, "restore:" + rel);
      } else if (kind == "symlink") {
        write_tree_symlink(target, entry["link"].get<std::string>(), owner, "restore:" + rel);
      } else {
        if (!fs::remove(target, ec) && ec) throw io_error("cannot remove", target, ec.value());
        step("remove:" + rel);
      }
    } catch (const std::exception& error) {
      report.failed.push_back(rel + ": " + error.what());
      failed_paths.insert(rel);
    }
  }
  for (const auto& dir : manifest->value("created_dirs", nlohmann::json::array())) {
    std::error_code ec;
    const fs::path path = tree_root / dir.get<std::string>();
    if (fs::symlink_status(path, ec).type() == fs::file_type::directory && fs::is_empty(path, ec)) fs::remove(path, ec);
  }
  // Checked, not assumed: the report's "unchanged" must be true.
  for (const auto& entry : (*manifest)["files"]) {
    const std::string rel = entry["path"].get<std::string>();
    if (failed_paths.count(rel)) continue;
    if (std::string why = mismatch(tree_root / rel, entry, backup_dir); !why.empty())
      report.failed.push_back(rel + ": " + why);
  }
  if (report.failed.empty()) save_manifest(backup_dir, *manifest, "restored");
  return report;
}

// ---- run directory ----

namespace {
bool process_alive(long pid);
}  // namespace

void remove_orphan_run_temps(const fs::path& run_dir) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(run_dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(".tmp-")) continue;
    // ".tmp-<name>-<pid>-<n>": both trailing fields numeric, or it is not ours.
    const auto last = name.rfind('-');
    const auto before = last == std::string::npos || last == 0 ? std::string::npos : name.rfind('-', last - 1);
    if (before == std::string::npos || before < 5) continue;
    const std::string pid = name.substr(before + 1, last - before - 1), n = name.substr(last + 1);
    auto numeric = [](const std::string& t) {
      return !t.empty() && t.size() < 19 && std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
    };
    if (!numeric(pid) || !numeric(n) || process_alive(std::stol(pid))) continue;
    std::error_code remove_ec;
    fs::remove(it->path(), remove_ec);
  }
}

RunDirectoryLock::RunDirectoryLock(const fs::path& run_dir) {
  fd_ = ::open((run_dir / ".run.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0 || ::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    throw Error(ErrorKind::Failure, "run '" + run_dir.filename().string() + "' is being driven by another process",
                "wait for it to finish (`liger-agent runs` shows its status)");
  }
}

bool run_is_driven(const fs::path& run_dir) {
  const int fd = ::open((run_dir / ".run.lock").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;  // never driven, or its lock file is gone: nobody holds it
  // A shared probe: held for an instant, it can only collide with a process starting to drive
  // the run at that very moment (which then says the run is busy).
  const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  ::close(fd);
  return held;
}

RunDirectoryLock::~RunDirectoryLock() {
  if (fd_ >= 0) ::close(fd_);
}

// ---- the apply lock ----

namespace {

fs::path locks_dir_of(const fs::path& tree_root) { return tree_root / ".liger-agent" / "locks"; }

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

std::optional<ApplyClaim> parse_claim(const fs::path& file) {
  auto json = nlohmann::json::parse(util::read_file(file), nullptr, false);
  if (json.is_discarded() || !json.is_object()) return std::nullopt;
  ApplyClaim claim;
  claim.run = json.value("run", "");
  claim.run_dir = json.value("run_dir", "");
  claim.pid = json.value("pid", 0L);
  claim.files = json.value("files", std::vector<std::string>{});
  claim.created_at = json.value("created_at", "");
  return claim;
}

bool is_finished(const std::string& status) {
  return status == "completed" || status == "rejected" || status == "verification_failed";
}

// Why a claim no longer protects anything, or nullopt while its run still owns the files.
std::optional<std::string> stale_reason(const ApplyClaim& claim, std::string* status) {
  std::error_code ec;
  if (!claim.run_dir.empty()) {
    if (!fs::is_regular_file(claim.run_dir / "state.json", ec)) {
      if (!fs::exists(claim.run_dir, ec)) return "its run directory " + claim.run_dir.string() + " no longer exists";
      // The state is lost but the backup says the run's files are in the tree: dropping the
      // claim would leave them with nobody to restore them. `reject` still can.
      if (!tree_holds_run_files(claim.run_dir / "backup"))
        return "its run directory " + claim.run_dir.string() + " has no state.json and no files in the tree";
      *status = "state.json missing; `liger-agent reject " + claim.run + "` restores its files";
      return std::nullopt;
    }
    try {
      const RunState state = RunState::load(claim.run_dir);
      *status = state.status;
      if (is_finished(state.status)) return "the run has finished (" + state.status + ")";
    } catch (const std::exception&) {
      *status = "state unreadable; `liger-agent reject " + claim.run + "` restores its files";
    }
    return std::nullopt;
  }
  // A claim of an older version names no run directory: its process is its only owner.
  if (!process_alive(claim.pid)) return "its process " + std::to_string(claim.pid) + " is gone";
  *status = "pid " + std::to_string(claim.pid) + " running";
  return std::nullopt;
}

std::string join(const std::vector<std::string>& items) {
  std::string text;
  for (const auto& item : items) text += (text.empty() ? "" : ", ") + item;
  return text;
}

}  // namespace

namespace {

// Removes stale claims (with their temp files) and the temp files of claims whose process is
// gone. Returns the live claims of other runs; `own` receives the files of `run`'s own claim.
std::vector<ApplyClaim> sweep_claims(const fs::path& locks_dir, const fs::path& tree_root, const std::string& run,
                                     std::vector<std::string>* own, std::vector<std::string>* notes,
                                     std::vector<std::string>* statuses) {
  std::vector<ApplyClaim> live;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(locks_dir, ec)) {
    if (entry.path().extension() != ".lock") continue;
    const auto claim = parse_claim(entry.path());
    if (!claim) {
      if (notes) notes->push_back("ignored the unreadable apply lock " + entry.path().string());
      continue;
    }
    if (!run.empty() && claim->run == run) {
      if (own) own->insert(own->end(), claim->files.begin(), claim->files.end());
      continue;
    }
    std::string status;
    if (auto reason = stale_reason(*claim, &status)) {
      remove_temp_files(tree_root, claim->run, claim->files);
      fs::remove(entry.path(), ec);
      if (notes) {
        notes->push_back("removed the stale apply lock of run '" + claim->run + "' (" + *reason +
                         "); it had claimed: " + join(claim->files));
      }
      continue;
    }
    // Nobody can be mid-write for a claim whose process is gone.
    if (!process_alive(claim->pid)) remove_temp_files(tree_root, claim->run, claim->files);
    live.push_back(*claim);
    if (statuses) statuses->push_back(status);
  }
  return live;
}

}  // namespace

void sweep_apply_locks(const fs::path& tree_root, std::vector<std::string>* notes) {
  const fs::path locks_dir = locks_dir_of(tree_root);
  std::error_code ec;
  if (!fs::is_directory(locks_dir, ec)) return;
  RegistryMutex mutex(locks_dir);
  sweep_claims(locks_dir, tree_root, "", nullptr, notes, nullptr);
}

void acquire_apply_lock(const fs::path& tree_root, const std::string& run, const fs::path& run_dir,
                        const std::vector<std::string>& files, std::vector<std::string>* notes) {
  const fs::path locks_dir = locks_dir_of(tree_root);
  std::error_code ec;
  fs::create_directories(locks_dir, ec);
  if (ec) throw io_error("cannot create", locks_dir, ec.value());
  RegistryMutex mutex(locks_dir);

  // Our own claim from an earlier invocation: the caller drives the run, so no process of ours
  // is writing and its leftovers can go.
  std::vector<std::string> own_files = files;
  std::vector<std::string> statuses;
  const auto live = sweep_claims(locks_dir, tree_root, run, &own_files, notes, &statuses);
  const std::set<std::string> wanted(files.begin(), files.end());
  for (std::size_t i = 0; i < live.size(); ++i) {
    std::vector<std::string> shared;
    for (const auto& file : live[i].files)
      if (wanted.count(file)) shared.push_back(file);
    if (shared.empty()) continue;
    const std::string& holder = live[i].run;
    throw Error(ErrorKind::Failure,
                "run '" + holder + "' (" + statuses[i] + ") holds the apply lock on files this run would write: " +
                    join(shared) + ". Its changes are in the tree and it has not finished",
                "finish that run with `liger-agent resume " + holder + "` or undo it with `liger-agent reject " +
                    holder + "`; then continue this one with `liger-agent resume " + run + "`");
  }
  remove_temp_files(tree_root, run, own_files);
  nlohmann::json claim = {{"run", run},
                          {"run_dir", run_dir.empty() ? std::string() : fs::absolute(run_dir).string()},
                          {"pid", static_cast<long>(::getpid())},
                          {"files", files},
                          {"created_at", util::now_iso8601()}};
  util::write_file_atomic(locks_dir / (run + ".lock"), claim.dump(2));
  step("claim");
}

void release_apply_lock(const fs::path& tree_root, const std::string& run) {
  std::error_code ec;
  fs::remove(locks_dir_of(tree_root) / (run + ".lock"), ec);
}

std::optional<ApplyClaim> read_apply_lock(const fs::path& tree_root, const std::string& run) {
  const fs::path file = locks_dir_of(tree_root) / (run + ".lock");
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return std::nullopt;
  return parse_claim(file);
}

}  // namespace liger::engine
