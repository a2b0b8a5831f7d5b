// The human side of a checkpoint: show what is to be approved, then approve / edit / reject.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "liger/config.h"
#include "liger/profile.h"

namespace liger::engine {

enum class Decision { Approved, Rejected, Parked };

struct CheckpointView {
  std::string kind;                      // "profile" or "diff"
  std::string run_name;
  std::filesystem::path profile_path;    // profile checkpoint: the file shown and edited
  const profile::Schema* schema = nullptr;
  std::string diff_text;                 // diff checkpoint
  std::vector<std::string> staged_files; // diff checkpoint
};

// Asks at the terminal until the user decides. Editing (profile only) opens the editor on a
// copy, re-validates it and loops on errors; only a valid edit replaces profile.yaml (atomically).
// A profile with undecided fields cannot be approved until they are decided.
// Throws Interrupted when a signal arrives while waiting; end of input parks the run.
Decision ask_at_terminal(const CheckpointView& view, const Config& config, std::istream& in, std::ostream& out);

// Undecided field descriptions ("ops[0].dtype: <reason>") of a profile file; validation errors
// are thrown as Usage errors naming field, line and what is allowed.
std::vector<std::string> validate_profile_file(const std::filesystem::path& profile_path,
                                               const profile::Schema& schema);

}  // namespace liger::engine
