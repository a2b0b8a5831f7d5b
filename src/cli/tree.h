// Which checkout a workflow command writes into: --tree, else the checkout holding the current
// directory (nearest parent with kernels/ops.yaml). Outside any checkout it is a usage error: the
// source tree the binary was built from is never a silent default.
#pragma once

#include <filesystem>
#include <string>

namespace liger::cli {

// `flag` is the --tree value (empty when not given); `command` names the subcommand in the error.
// Throws a usage error when --tree does not name a checkout or none holds the current directory.
std::filesystem::path resolve_tree(const std::string& flag, const std::string& command);

}  // namespace liger::cli
