// Applying staged files to the tree as one transaction, and the lock that keeps two runs from
// applying to the same files at once.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace liger::engine {

// Copies each staged file over its tree path, all or nothing. Before touching the tree it saves
// the originals (and which paths did not exist) under `backup_dir` with a manifest; if any write
// fails, everything written so far is restored and the error is rethrown. The backups stay so a
// later failure (Verify, reject) can still restore the tree with restore_backups().
void apply_staged_files(const std::filesystem::path& staging_dir, const std::filesystem::path& tree_root,
                        const std::vector<std::string>& files, const std::filesystem::path& backup_dir);

// Puts the tree back as it was before apply_staged_files(): originals restored byte for byte,
// files that did not exist removed, directories apply created removed when empty. Idempotent;
// a no-op without a manifest.
void restore_backups(const std::filesystem::path& backup_dir, const std::filesystem::path& tree_root);

// A claim on a set of repository files, recorded as <tree>/.liger-agent/locks/<run>.lock with the
// holder's pid. Claims whose pid is dead are stale and removed; a run resuming after a crash
// takes over its own claim.
class ApplyLock {
 public:
  // Throws liger::Error (Failure) naming the conflicting run, its pid and the shared files.
  static ApplyLock acquire(const std::filesystem::path& tree_root, const std::string& run_name,
                           const std::vector<std::string>& files);
  ApplyLock(ApplyLock&& other) noexcept;
  ApplyLock& operator=(ApplyLock&& other) noexcept;
  ApplyLock(const ApplyLock&) = delete;
  ApplyLock& operator=(const ApplyLock&) = delete;
  ~ApplyLock();

  void release();
  const std::filesystem::path& path() const { return path_; }

 private:
  ApplyLock() = default;
  std::filesystem::path path_;
};

}  // namespace liger::engine
