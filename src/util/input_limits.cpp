#include "util/input_limits.h"

#include <cstdio>
#include <system_error>

#include "liger/error.h"

namespace liger::util {

std::string format_size(std::uintmax_t bytes) {
  char buffer[64];
  if (bytes >= kMiB && bytes % kMiB == 0) {
    std::snprintf(buffer, sizeof buffer, "%ju MiB", bytes / kMiB);
  } else if (bytes >= kMiB) {
    std::snprintf(buffer, sizeof buffer, "%.1f MiB (%ju bytes)", static_cast<double>(bytes) / kMiB, bytes);
  } else if (bytes >= kKiB && bytes % kKiB == 0) {
    std::snprintf(buffer, sizeof buffer, "%ju KiB", bytes / kKiB);
  } else if (bytes >= kKiB) {
    std::snprintf(buffer, sizeof buffer, "%.1f KiB (%ju bytes)", static_cast<double>(bytes) / kKiB, bytes);
  } else {
    std::snprintf(buffer, sizeof buffer, "%ju bytes", bytes);
  }
  return buffer;
}

void check_input_size(const std::string& what, std::uintmax_t size, std::uintmax_t limit, const std::string& fix) {
  if (size <= limit) return;
  throw Error(ErrorKind::Usage, what + " is " + format_size(size) + ", more than the " + format_size(limit) + " limit",
              fix);
}

void check_file_size(const std::filesystem::path& path, const std::string& what, std::uintmax_t limit,
                     const std::string& fix) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec) || ec) return;
  std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) return;
  check_input_size(what, size, limit, fix);
}

void check_kernel_dev_input(const std::string& input) {
  const std::string fix =
      "kernel-dev takes one element-wise op: words, an expression or a PyTorch file of at most " +
      format_size(kMaxKernelDevInputBytes) + "; pass the function that defines the op, not a whole program";
  std::error_code ec;
  if (std::filesystem::is_regular_file(input, ec) && !ec) {
    check_file_size(input, input, kMaxKernelDevInputBytes, fix);
  } else {
    check_input_size("the request", input.size(), kMaxKernelDevInputBytes, fix);
  }
}

void check_autopatch_input(const std::string& model) {
  check_file_size(model, model, kMaxModelingFileBytes,
                  "autopatch reads one HuggingFace modeling_<model>.py (a few hundred KiB at most); pass that file, "
                  "not a concatenation or a data file");
}

}  // namespace liger::util
