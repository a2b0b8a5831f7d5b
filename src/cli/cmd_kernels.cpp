#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <iostream>

#include "cli/commands.h"
#include "liger/error.h"
#include "cli/run_support.h"
#include "liger/kernel_catalog.h"
#include "liger/workflows.h"

namespace liger::cli {

namespace {
std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ",") + item;
  return out;
}
}  // namespace

void register_kernels_command(CLI::App& app, GlobalOptions& options) {
  auto kernels_dir = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("kernels", "List the ops of the bundled kernel library (from kernels/ops.yaml): "
                                            "tier, dtypes, options and C entry points.");
  cmd->add_option("--kernels-dir", *kernels_dir, "A kernels/ directory (default: the one of the checkout holding the current directory)");
  cmd->footer(examples_footer({"liger-agent kernels", "liger-agent kernels --json"}));
  cmd->callback([kernels_dir, &options] {
    // Read-only, so outside a checkout the library the binary was built from is a fair default.
    std::filesystem::path dir = *kernels_dir;
    if (dir.empty()) {
      const auto tree = workflows::find_tree(std::filesystem::current_path());
      dir = (tree.empty() ? workflows::find_tree(LIGER_SOURCE_DIR) : tree) / "kernels";
      if (dir == "kernels")
        throw Error(ErrorKind::Usage, "no kernel library here: the current directory is not inside a checkout",
                    "cd into a clone of the repository, or pass --kernels-dir path/to/kernels");
    }
    const auto ops = toolchain::read_kernel_catalog(dir / "ops.yaml");
    if (options.json) {
      nlohmann::json list = nlohmann::json::array();
      for (const auto& op : ops) {
        list.push_back({{"name", op.name}, {"tier", op.tier}, {"dtypes", op.dtypes}, {"options", op.options},
                        {"forward", op.forward}, {"backward", op.backward}, {"header", op.header}});
      }
      print_json({{"kernels_dir", dir.string()}, {"ops", list}});
    } else {
      std::cout << fmt::format("{:<28} {:>4}  {:<15} {}\n", "OP", "TIER", "DTYPES", "ENTRY POINTS");
      for (const auto& op : ops) {
        std::cout << fmt::format("{:<28} {:>4}  {:<15} {}{}\n", op.name, op.tier, join(op.dtypes), op.forward,
                                 op.backward.empty() ? "" : ", " + op.backward);
      }
    }
    options.exit_code = 0;
  });
}

}  // namespace liger::cli
