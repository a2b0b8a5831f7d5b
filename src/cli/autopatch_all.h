// `liger-agent autopatch --all`: one autopatch run per model type of a transformers tree, then the
// coverage table (cmd_autopatch_all.cpp; the table itself is workflows/autopatch/zoo.{h,cpp}).
#pragma once

#include <string>

#include "cli/global_options.h"

namespace liger::cli {

struct AutopatchAllArgs {
  std::string transformers;  // --transformers: package dir or its models/; empty: the installed one
  std::string out;           // --out: where models.md/json go; empty: the zoo's run directory
  std::string tree;          // --tree
  std::string python;        // --python
  std::string kernels;       // --kernels, passed to every run
  int jobs = 1;
  bool verify = false;
};

// Runs the zoo and writes the table; returns the exit code. Throws liger::Error for usage errors
// and for a transformers that cannot be found.
int run_autopatch_all(GlobalOptions& options, const AutopatchAllArgs& args);

}  // namespace liger::cli
