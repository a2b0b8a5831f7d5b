// The human side of a checkpoint: show what is to be approved, then approve / edit / reject.
#pragma once

#include <filesystem>
#include <functional>
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
  // The workflow's summary of a profile (Workflow::summarize), shown first; may be empty.
  std::function<std::string(const YAML::Node&)> summarize;
};

// Asks at the terminal until the user decides. The first screen is the workflow's summary (and
// the diffstat); [v]iew shows the whole profile or diff, through $PAGER when it is longer than
// the terminal, with colours only on a terminal. Editing (profile only) opens the editor on a
// copy, re-validates it and loops on errors; only a valid edit replaces profile.yaml (atomically).
// A profile with undecided fields cannot be approved until they are decided.
// Throws Interrupted when a signal arrives while waiting; end of input parks the run.
Decision ask_at_terminal(const CheckpointView& view, const Config& config, std::istream& in, std::ostream& out);

// Undecided field descriptions ("ops[0].dtype: <reason>") of a profile file; validation errors
// are thrown as Usage errors naming field, line and what is allowed. An edit to a field the
// schema marks read-only (compared with understood_profile_path, when that file exists) is such
// an error too, with the schema's reason.
std::vector<std::string> validate_profile_file(const std::filesystem::path& profile_path,
                                               const profile::Schema& schema);

// The copy of the profile as Understand wrote it (profile.understood.yaml beside it).
std::filesystem::path understood_profile_path(const std::filesystem::path& profile_path);

}  // namespace liger::engine
