#include "cli/tree.h"

#include "liger/error.h"
#include "liger/input_check.h"
#include "liger/workflows.h"

namespace liger::cli {

namespace fs = std::filesystem;

fs::path resolve_tree(const std::string& flag, const std::string& command) {
  if (!flag.empty()) {
    const fs::path tree = fs::absolute(flag).lexically_normal();
    // Says which of "does not exist", "is not a directory", "has no kernels/ops.yaml" or "is not
    // writable" it is, naming the path.
    input::require_checkout(tree, {"kernels/ops.yaml"}, "--tree");
    return tree;
  }
  const fs::path found = workflows::find_tree(fs::current_path());
  if (found.empty())
    throw Error(ErrorKind::Usage,
                command + " writes into a checkout of the kernel library, and " + fs::current_path().string() +
                    " is not inside one (no kernels/ops.yaml here or in any parent directory)",
                "cd into your clone, or name it: liger-agent " + command + " ... --tree /path/to/clone");
  return found;
}

}  // namespace liger::cli
