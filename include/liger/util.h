// Small filesystem, time and terminal helpers shared by every layer.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <string_view>

namespace liger::util {

namespace fs = std::filesystem;

// Reads a whole file; throws liger::Error (Io) naming the path when it cannot.
std::string read_file(const fs::path& path);

// Writes `content` so that readers see either the old file or the new one, never a prefix of
// the new one: temp file in the same directory, fsync, rename, fsync of the directory. A crash
// at any point leaves at most a stray `.tmp-*` file next to the target.
// The one door through which the agent's own files (state, reports, profiles, logs, staged
// code, cassettes) reach the disk, so it scrubs registered API keys from `content`
// (llm::redact_known_secrets): a key that an LLM answer or an error message echoed never lands.
void write_file_atomic(const fs::path& path, std::string_view content);
// The same without scrubbing, for byte-exact copies of the user's own files (apply's backups,
// applying and restoring them), which must come back exactly as they were.
void write_file_atomic_verbatim(const fs::path& path, std::string_view content);
// Writes all of `content` to the open descriptor `fd` (retrying short writes and EINTR); an
// error names `path`, the file behind `fd`.
void write_all(int fd, std::string_view content, const fs::path& path);

// Current UTC time as ISO-8601 ("2024-05-01T12:00:00Z") and as a run-name stamp
// ("20240501-120000", local time so users recognise it).
std::string now_iso8601();
std::string now_run_stamp();
// Seconds since the epoch for an ISO-8601 string written by now_iso8601(); -1 if unparsable.
long long parse_iso8601(const std::string& text);
// "42s", "5m", "3h", "2d": compact age for listings.
std::string format_age(long long seconds);

// Lower-case, [a-z0-9-] only, collapsed dashes, at most `max_len` characters; "run" if empty.
std::string slugify(std::string_view text, std::size_t max_len = 40);

// Both stdin and stdout are terminals: only then may the agent ask questions.
bool interactive_terminal();

// Trims ASCII whitespace from both ends.
std::string trim(std::string_view text);

}  // namespace liger::util

namespace liger::signals {

// SIGINT/SIGTERM only set a flag; long-running code polls it at safe points so state on disk
// stays consistent and the run can be resumed. Handlers are installed without SA_RESTART so a
// blocking read (a checkpoint prompt) returns early.
void install_handlers();
bool interrupted();
// Raises liger::Error(Interrupted) when a signal has arrived.
void throw_if_interrupted();
// For tests that simulate a signal and then continue in the same process.
void reset_for_testing();
void simulate_interrupt_for_testing();

}  // namespace liger::signals
