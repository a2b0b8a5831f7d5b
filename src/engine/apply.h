// Applying staged files to the tree as one transaction that survives any interruption, and the
// apply lock: a persistent claim that keeps every other run off the files a run has applied
// until that run is finished, rejected or restored.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace liger::engine {

// State of a run's backup/manifest.json, the record of what apply did to the tree:
//   None       nothing was ever applied (no manifest)
//   Applying   apply started writing; the tree may be half-written (restore undoes it)
//   Applied    every staged file is in the tree
//   Restoring  a restore started and has not been verified complete (restore again)
//   Restored   the tree was put back and checked against the backups
enum class BackupStatus { None, Applying, Applied, Restoring, Restored };
BackupStatus backup_status(const std::filesystem::path& backup_dir);
// Whether files of the run may be in the tree (Applying, Applied, Restoring).
bool tree_holds_run_files(const std::filesystem::path& backup_dir);

// Copies each staged file over its tree path, all or nothing. Any earlier apply of the same
// backup directory that was cut short is undone first. Before touching the tree it checks every
// target (no parent directory may be a symlink that leads outside `tree_root`; no target may be a
// directory), then saves the originals (symlinks as links, not their targets' content) under
// `backup_dir` with a manifest. Each write goes through a temp file named
// `.liger-agent-tmp.<owner>.*` next to its target, so leftovers of a killed process are
// recognisable (remove_temp_files). If any write fails, the tree is restored before the error
// propagates; if even that restore is incomplete, the error says which paths are wrong.
// `owner` is the run name.
void apply_staged_files(const std::filesystem::path& staging_dir, const std::filesystem::path& tree_root,
                        const std::vector<std::string>& files, const std::filesystem::path& backup_dir,
                        const std::string& owner);

// What restore_backups did, and whether the tree now matches the backups (checked, not assumed).
struct RestoreReport {
  bool had_backup = false;        // a manifest existed
  bool already_restored = false;  // an earlier restore completed; nothing was touched this time
  std::vector<std::string> displaced;  // files changed after apply by something else; copies kept
  std::vector<std::string> failed;     // "path: why" for each path not as it was before the run
  std::filesystem::path displaced_dir;

  bool tree_unchanged() const { return failed.empty(); }
  // One clause for the user, true to the facts: "the tree is unchanged", "nothing had been
  // applied; the tree is unchanged", or which paths could not be restored.
  std::string summary() const;
};

// Puts the tree back as it was before apply_staged_files(): regular files restored byte for byte
// with their permissions, symlinks recreated as the same links, files that did not exist removed,
// directories apply created removed when empty, this owner's temp files removed. A file that
// something else changed after apply is restored too, and its content is kept under
// `backup_dir/displaced/`. Afterwards every path is compared with its backup; only then is the
// manifest marked Restored, after which a second call is a no-op. Never throws for a path it
// cannot restore: it lists it in `failed`.
RestoreReport restore_backups(const std::filesystem::path& backup_dir, const std::filesystem::path& tree_root);

// The tree's version of each of `files`, to tell later whether it changed: a content hash for a
// file, the link for a symlink, null when absent. Act records it next to staged.diff.
nlohmann::json snapshot_targets(const std::filesystem::path& tree_root, const std::vector<std::string>& files);
// The files whose version in the tree differs from `base` (a snapshot_targets() result).
std::vector<std::string> changed_targets(const std::filesystem::path& tree_root, const nlohmann::json& base);

// Removes `.liger-agent-tmp.<owner>.*` files from the directories of `files` (repository-relative).
// Only call it when no process of that owner is writing (the run's lock is held, or its
// process is gone).
void remove_temp_files(const std::filesystem::path& tree_root, const std::string& owner,
                       const std::vector<std::string>& files);

// Test hook: called with a step name ("claim", "manifest:applying", "temp:<file>", ...) at each
// point where a crash leaves something on disk; the kill tests raise SIGKILL from it. Empty by
// default.
void set_apply_step_hook(std::function<void(const std::string& step)> hook);

// Removes what util::write_file_atomic leaves under a run directory when its writer is killed
// (".tmp-<name>-<pid>-<n>" whose process is gone).
void remove_orphan_run_temps(const std::filesystem::path& run_dir);

// Holds an exclusive flock on <run>/.run.lock so two processes never drive (or reject) one run.
// The kernel drops it when the process dies.
class RunDirectoryLock {
 public:
  explicit RunDirectoryLock(const std::filesystem::path& run_dir);  // throws Failure when held
  ~RunDirectoryLock();
  RunDirectoryLock(const RunDirectoryLock&) = delete;
  RunDirectoryLock& operator=(const RunDirectoryLock&) = delete;

 private:
  int fd_ = -1;
};

// Whether a live process holds the run's .run.lock (drives, or rejects, it right now). A run
// whose state says `running` while nobody holds it was killed.
bool run_is_driven(const std::filesystem::path& run_dir);

// ---- the apply lock ----
//
// A claim is <tree>/.liger-agent/locks/<run>.lock (JSON: run, run_dir, pid, files, created_at).
// It is persistent state owned by the run, not by a process: it outlives SIGTERM, SIGKILL and
// crashes and is removed only when the run completes, is rejected, or its tree is restored.

struct ApplyClaim {
  std::string run;
  std::filesystem::path run_dir;
  long pid = 0;  // the process that last drove the run (only used to tell whether it may be writing)
  std::vector<std::string> files;
  std::string created_at;
};

// Claims `files` for `run` (taking over the run's own earlier claim). Refuses with
// liger::Error (Failure) when an unfinished run holds any of them, naming that run, the shared
// files and the fix (`liger-agent resume <run>` / `liger-agent reject <run>`). Claims of runs
// that no longer exist or have finished are removed, together with their temp files, and each
// removal is described in `notes` (when given) so the caller can tell the user.
void acquire_apply_lock(const std::filesystem::path& tree_root, const std::string& run,
                        const std::filesystem::path& run_dir, const std::vector<std::string>& files,
                        std::vector<std::string>* notes = nullptr);
// Removes stale claims (with a note each, as acquire_apply_lock does) and the temp files of
// claims whose process is gone; claims nothing. A no-op for a tree without locks.
void sweep_apply_locks(const std::filesystem::path& tree_root, std::vector<std::string>* notes = nullptr);
// Removes the run's claim; a no-op when it has none.
void release_apply_lock(const std::filesystem::path& tree_root, const std::string& run);
std::optional<ApplyClaim> read_apply_lock(const std::filesystem::path& tree_root, const std::string& run);

}  // namespace liger::engine
