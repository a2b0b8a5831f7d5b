// Size limits on what users (and LLM answers) feed the parsers. Every parser is linear or close
// to it, but a 50 MB "modeling" file still costs tens of seconds, gigabytes of memory and a copy
// into the run: inputs above these sizes are not real inputs, and are refused with the size, the
// limit and what to do, before a run directory exists where the CLI can tell.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace liger::util {

inline constexpr std::uintmax_t kKiB = 1024;
inline constexpr std::uintmax_t kMiB = 1024 * kKiB;
// A HuggingFace modeling file is at most a few hundred KiB (the largest in transformers ~300 KiB).
inline constexpr std::uintmax_t kMaxModelingFileBytes = 4 * kMiB;
// kernel-dev's request: words, an expression or a PyTorch file defining one element-wise op.
inline constexpr std::uintmax_t kMaxKernelDevInputBytes = 256 * kKiB;
// profile.yaml and the other YAML documents the engine loads from a run or the tree.
inline constexpr std::uintmax_t kMaxProfileBytes = 1 * kMiB;

// "256 KiB", "4 MiB", "51.2 MB"-style rendering for messages.
std::string format_size(std::uintmax_t bytes);

// Throws liger::Error (Usage) "<what> is <size>, more than the <limit> limit" with `fix` as hint.
void check_input_size(const std::string& what, std::uintmax_t size, std::uintmax_t limit, const std::string& fix);

// When `path` names a regular file, checks its size; anything else (a missing path, words that
// are not a path at all, a name too long for the filesystem) is left to the caller.
void check_file_size(const std::filesystem::path& path, const std::string& what, std::uintmax_t limit,
                     const std::string& fix);

// The CLI's checks, called before a run starts: the request text or the file it names.
void check_kernel_dev_input(const std::string& input);
void check_autopatch_input(const std::string& model);

}  // namespace liger::util
