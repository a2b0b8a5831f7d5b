#include "engine/checkpoint.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "engine/diff.h"

#include "liger/error.h"
#include "liger/process.h"
#include "liger/util.h"

namespace liger::engine {

namespace fs = std::filesystem;

fs::path understood_profile_path(const fs::path& profile_path) {
  return profile_path.parent_path() / "profile.understood.yaml";
}

namespace {

// The schema's errors plus edits to read-only fields, as one report.
profile::ValidationReport check_profile(const YAML::Node& document, const fs::path& profile_path,
                                        const profile::Schema& schema) {
  auto report = schema.validate(document);
  const fs::path understood = understood_profile_path(profile_path);
  if (fs::is_regular_file(understood)) {
    auto changes = schema.readonly_changes(profile::load_yaml_file(understood), document);
    report.errors.insert(report.errors.end(), changes.begin(), changes.end());
  }
  return report;
}

}  // namespace

std::vector<std::string> validate_profile_file(const fs::path& profile_path, const profile::Schema& schema) {
  const YAML::Node document = profile::load_yaml_file(profile_path);
  const auto report = check_profile(document, profile_path, schema);
  if (!report.ok()) {
    throw Error(ErrorKind::Usage,
                "profile '" + profile_path.string() + "' does not match its schema (" + schema.origin() + "):\n" +
                    report.format_errors(profile_path.string()),
                "edit the fields named above (a read-only field back to the value shown as allowed), then approve "
                "again");
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
      const auto report = check_profile(profile::load_yaml_file(draft), view.profile_path, *view.schema);
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

// Only a terminal gets colours and a pager; a pipe or a test's stream gets plain text.
bool is_terminal(const std::ostream& out) {
  if (&out == &std::cout) return ::isatty(STDOUT_FILENO) == 1;
  if (&out == &std::cerr) return ::isatty(STDERR_FILENO) == 1;
  return false;
}

std::size_t terminal_rows() {
  struct winsize size {};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_row > 0) return size.ws_row;
  if (const char* lines = std::getenv("LINES"); lines && std::atoi(lines) > 0) return std::atoi(lines);
  return 24;
}

// Long text on a terminal goes through $PAGER (default `less -R`, which keeps the colours);
// short text, or text for a pipe, is written as it is.
void page(const std::string& text, const fs::path& scratch_dir, std::ostream& out) {
  const auto lines = static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
  if (!is_terminal(out) || lines + 2 <= terminal_rows()) {
    out << text;
    return;
  }
  const char* env_pager = std::getenv("PAGER");
  const std::string pager = env_pager && *env_pager ? env_pager : "less -R";
  const fs::path file = scratch_dir / "checkpoint-view.txt";
  util::write_file_atomic(file, text);
  out << std::flush;
  toolchain::ProcessOptions options;
  options.argv = {"/bin/sh", "-c", pager + " \"$1\"", "liger-agent-pager", file.string()};
  options.inherit_stdio = true;
  const auto result = toolchain::run_process(options);
  std::error_code ec;
  fs::remove(file, ec);
  if (result.exit_code != 0) out << text;  // no working pager: the text is still shown
}

// The first screen: the workflow's summary, what is undecided, and for the diff the diffstat.
void show_summary(const CheckpointView& view, std::ostream& out, const std::vector<std::string>& undecided) {
  out << "\n=== checkpoint: " << view.kind << " (run " << view.run_name << ") ===\n";
  std::string summary;
  if (view.summarize) {
    try {
      summary = view.summarize(profile::load_yaml_file(view.profile_path));
    } catch (const std::exception& e) {
      summary = std::string("(no summary: ") + e.what() + ")\n";
    }
  }
  if (view.kind == "profile") {
    if (summary.empty()) page(util::read_file(view.profile_path), view.profile_path.parent_path(), out);
    else out << summary << "\nfull profile: " << view.profile_path.string() << " ([v]iew, [e]dit)\n";
    if (!undecided.empty()) {
      out << "\nundecided fields (decide them with [e]dit before approving):\n";
      for (const auto& field : undecided) out << "  - " << field << "\n";
    }
  } else {
    if (!summary.empty()) out << summary << "\n";
    if (view.diff_text.empty()) {
      out << "(the staged files are identical to the tree)\n";
    } else {
      const std::string stat = diffstat(view.diff_text);
      out << "files to apply:\n" << stat;
      // A diff that fits on the screen with the rest is shown at once; a longer one on [v]iew.
      const auto lines = [](const std::string& text) { return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')); };
      if (lines(summary) + lines(stat) + lines(view.diff_text) + 4 <= terminal_rows())
        out << "\n" << (is_terminal(out) ? colorize_diff(view.diff_text) : view.diff_text);
      else
        out << "full diff: " << lines(view.diff_text) << " lines ([v]iew)\n";
    }
  }
}

void show_full(const CheckpointView& view, std::ostream& out) {
  const fs::path scratch = view.profile_path.parent_path();
  if (view.kind == "profile") {
    page(util::read_file(view.profile_path), scratch, out);
  } else {
    const std::string text = view.diff_text.empty() ? "(the staged files are identical to the tree)\n" : view.diff_text;
    page(is_terminal(out) ? colorize_diff(text) : text, scratch, out);
  }
}

}  // namespace

Decision ask_at_terminal(const CheckpointView& view, const Config& config, std::istream& in, std::ostream& out) {
  const bool is_profile = view.kind == "profile";
  const char* prompt = is_profile ? "[a]pprove / [v]iew / [e]dit / [r]eject? " : "[a]pprove / [v]iew / [r]eject? ";
  bool shown = false;
  std::vector<std::string> undecided;
  while (true) {
    // The summary again only after something changed it (an edit); a wrong key just asks again.
    if (!shown) {
      if (is_profile) undecided = validate_profile_file(view.profile_path, *view.schema);
      show_summary(view, out, undecided);
      shown = true;
    }
    auto choice = read_choice(in, out, prompt);
    if (!choice) return Decision::Parked;
    switch (*choice) {
      case 'a':
        if (!undecided.empty()) {
          out << "cannot approve: " << undecided.size() << " field(s) are undecided.\n";
          continue;
        }
        return Decision::Approved;
      case 'r': return Decision::Rejected;
      case 'v': show_full(view, out); continue;
      case 'e':
        if (is_profile) {
          edit_profile(view, config, in, out);
          shown = false;
          continue;
        }
        [[fallthrough]];
      default: out << "please answer " << (is_profile ? "a, v, e or r" : "a, v or r") << ".\n";
    }
  }
}

}  // namespace liger::engine
