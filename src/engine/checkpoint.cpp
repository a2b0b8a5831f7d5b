#include "engine/checkpoint.h"

#include <cstdlib>
#include <iostream>

#include "liger/error.h"
#include "liger/process.h"
#include "liger/util.h"

namespace liger::engine {

namespace fs = std::filesystem;

std::vector<std::string> validate_profile_file(const fs::path& profile_path, const profile::Schema& schema) {
  const YAML::Node document = profile::load_yaml_file(profile_path);
  const auto report = schema.validate(document);
  if (!report.ok()) {
    throw Error(ErrorKind::Usage,
                "profile '" + profile_path.string() + "' does not match its schema (" + schema.origin() + "):\n" +
                    report.format_errors(profile_path.string()),
                "edit the fields named above, then approve again");
  }
  std::vector<std::string> undecided;
  for (const auto& issue : report.undecided) undecided.push_back(issue.path + ": " + issue.message);
  return undecided;
}

namespace {

std::string editor_command(const Config& config) {
  std::string editor = config.get_string("editor");
  if (editor.empty())
    if (const char* visual = std::getenv("VISUAL"); visual && *visual) editor = visual;
  if (editor.empty())
    if (const char* env_editor = std::getenv("EDITOR"); env_editor && *env_editor) editor = env_editor;
  return editor.empty() ? "vi" : editor;
}

// Runs the editor through the shell so settings such as "code --wait" work.
void open_editor(const std::string& editor, const fs::path& file) {
  toolchain::ProcessOptions options;
  options.argv = {"/bin/sh", "-c", editor + " \"$1\"", "liger-agent-editor", file.string()};
  options.inherit_stdio = true;
  auto result = toolchain::run_process(options);
  if (result.exit_code != 0) {
    throw Error(ErrorKind::Usage, "editor '" + editor + "' exited with status " + std::to_string(result.exit_code),
                "set the `editor` config key, $VISUAL or $EDITOR to a working editor");
  }
}

std::optional<char> read_choice(std::istream& in, std::ostream& out, const std::string& prompt) {
  out << prompt << std::flush;
  std::string line;
  if (!std::getline(in, line)) {
    signals::throw_if_interrupted();
    return std::nullopt;
  }
  signals::throw_if_interrupted();
  line = util::trim(line);
  if (line.empty()) return '\0';
  return static_cast<char>(std::tolower(static_cast<unsigned char>(line[0])));
}

// Edits a copy until it validates (or the user gives up), then replaces the profile.
void edit_profile(const CheckpointView& view, const Config& config, std::istream& in, std::ostream& out) {
  const fs::path draft = view.profile_path.parent_path() / "profile.edit.yaml";
  util::write_file_atomic(draft, util::read_file(view.profile_path));
  const std::string editor = editor_command(config);
  while (true) {
    open_editor(editor, draft);
    std::string problems;
    try {
      const auto report = view.schema->validate(profile::load_yaml_file(draft));
      if (report.ok()) {
        util::write_file_atomic(view.profile_path, util::read_file(draft));
        fs::remove(draft);
        out << "profile updated and valid.\n";
        return;
      }
      problems = report.format_errors(draft.string());
    } catch (const Error& e) {
      problems = std::string(e.what()) + "\n";
    }
    out << "the edited profile is not valid:\n" << problems;
    auto choice = read_choice(in, out, "[e]dit again / [d]iscard the edit? ");
    if (!choice || *choice == 'd') {
      std::error_code ec;
      fs::remove(draft, ec);
      out << "edit discarded; profile unchanged.\n";
      return;
    }
  }
}

void show(const CheckpointView& view, std::ostream& out, const std::vector<std::string>& undecided) {
  out << "\n=== checkpoint: " << view.kind << " (run " << view.run_name << ") ===\n";
  if (view.kind == "profile") {
    out << util::read_file(view.profile_path);
    if (!undecided.empty()) {
      out << "\nundecided fields (decide them with [e]dit before approving):\n";
      for (const auto& field : undecided) out << "  - " << field << "\n";
    }
  } else {
    out << (view.diff_text.empty() ? "(the staged files are identical to the tree)\n" : view.diff_text);
    out << "\nfiles to apply:";
    for (const auto& file : view.staged_files) out << " " << file;
    out << "\n";
  }
}

}  // namespace

Decision ask_at_terminal(const CheckpointView& view, const Config& config, std::istream& in, std::ostream& out) {
  const bool is_profile = view.kind == "profile";
  while (true) {
    std::vector<std::string> undecided;
    if (is_profile) undecided = validate_profile_file(view.profile_path, *view.schema);
    show(view, out, undecided);
    auto choice = read_choice(in, out, is_profile ? "[a]pprove / [e]dit / [r]eject? " : "[a]pprove / [r]eject? ");
    if (!choice) return Decision::Parked;
    switch (*choice) {
      case 'a':
        if (!undecided.empty()) {
          out << "cannot approve: " << undecided.size() << " field(s) are undecided.\n";
          continue;
        }
        return Decision::Approved;
      case 'r': return Decision::Rejected;
      case 'e':
        if (is_profile) {
          edit_profile(view, config, in, out);
          continue;
        }
        [[fallthrough]];
      default: out << "please answer " << (is_profile ? "a, e or r" : "a or r") << ".\n";
    }
  }
}

}  // namespace liger::engine
