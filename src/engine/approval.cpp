#include "engine/approval.h"

#include "liger/sha256.h"
#include "liger/util.h"

namespace liger::engine {

namespace fs = std::filesystem;

namespace {

std::string profile_digest(const fs::path& run_dir) {
  std::error_code ec;
  const fs::path profile = run_dir / "profile.yaml";
  return fs::exists(profile, ec) ? util::sha256_hex(util::read_file(profile)) : std::string("(no profile.yaml)");
}

}  // namespace

void record_approved_digests(CheckpointRecord& record, const std::string& checkpoint, const fs::path& run_dir) {
  record.profile_sha256 = profile_digest(run_dir);
  record.staging_sha256.clear();
  if (checkpoint == "diff") record.staging_sha256 = util::sha256_files(run_dir / "staging");
}

std::optional<ApprovalDrift> approval_drift(const RunState& state, const fs::path& run_dir) {
  // From an approved profile checkpoint on, every phase reads profile.yaml.
  if (state.phase == Phase::Understand || state.phase == Phase::Report || state.phase == Phase::Done)
    return std::nullopt;
  const std::string current = profile_digest(run_dir);
  // The latest approval speaks for the profile: the diff checkpoint's when the diff was approved.
  for (const char* checkpoint : {"diff", "profile"}) {
    auto it = state.checkpoints.find(checkpoint);
    if (it == state.checkpoints.end() || it->second.status != "approved" || it->second.profile_sha256.empty())
      continue;
    if (it->second.profile_sha256 != current) return ApprovalDrift{checkpoint, "profile.yaml", "changed"};
    break;
  }
  // An approved diff checkpoint's next step is Apply, which copies the staged files.
  if (state.phase != Phase::DiffCheckpoint && state.phase != Phase::Apply) return std::nullopt;
  auto diff = state.checkpoints.find("diff");
  if (diff == state.checkpoints.end() || diff->second.status != "approved" || diff->second.staging_sha256.empty())
    return std::nullopt;
  const auto now = util::sha256_files(run_dir / "staging");
  const auto& approved = diff->second.staging_sha256;
  for (const auto& [file, digest] : approved) {
    auto it = now.find(file);
    if (it == now.end()) return ApprovalDrift{"diff", "staging/" + file, "removed"};
    if (it->second != digest) return ApprovalDrift{"diff", "staging/" + file, "changed"};
  }
  for (const auto& [file, digest] : now)
    if (!approved.count(file)) return ApprovalDrift{"diff", "staging/" + file, "added"};
  return std::nullopt;
}

std::string describe_drift(const ApprovalDrift& drift, const std::string& run_name) {
  return drift.file + " was " + drift.change + " after it was approved at the " + drift.checkpoint +
         " checkpoint of run '" + run_name + "'";
}

}  // namespace liger::engine
