// Approvals bound to the bytes approved (issue 15): an approval records the SHA-256 of
// profile.yaml (and at the diff checkpoint of every staged file); a later phase that would use
// a file changed since then refuses until the change is approved again.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "engine/run_state.h"

namespace liger::engine {

// Stamps `record` (just approved at `checkpoint`) with the digests of what it approves.
void record_approved_digests(CheckpointRecord& record, const std::string& checkpoint,
                             const std::filesystem::path& run_dir);

// A file that differs from what was approved, and at which checkpoint it was approved.
struct ApprovalDrift {
  std::string checkpoint;  // "profile" or "diff"
  std::string file;        // run-relative: "profile.yaml", "staging/kernels/x.cu"
  std::string change;      // "changed", "added", "removed"
};

// The first drift that matters to the run's next phase: the profile once its checkpoint is
// approved (Act, the diff checkpoint, Apply and Verify read it), the staged files once the diff
// is approved (Apply copies them). nullopt when none, or when the approval predates digests.
std::optional<ApprovalDrift> approval_drift(const RunState& state, const std::filesystem::path& run_dir);

// "profile.yaml changed after it was approved at the profile checkpoint of run 'x'".
std::string describe_drift(const ApprovalDrift& drift, const std::string& run_name);

}  // namespace liger::engine
