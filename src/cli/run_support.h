// Glue shared by the subcommands that start or continue runs: engine options from the global
// flags, the workflow registry, and printing a run outcome as text or JSON.
#pragma once

#include <nlohmann/json.hpp>

#include "cli/global_options.h"
#include "liger/engine.h"

namespace liger::cli {

// The built-in workflows, registered on first use.
const engine::WorkflowRegistry& workflow_registry();

// --yes -> auto-approve; a terminal on stdin and stdout (and no --json) -> ask; else park.
engine::EngineOptions engine_options(GlobalOptions& options);

std::filesystem::path run_root(GlobalOptions& options);

// Prints the outcome (text on stdout, or one JSON object with --json) and returns its exit code.
int print_outcome(const GlobalOptions& options, const engine::RunOutcome& outcome);

// The short git commit of the source tree this binary was built from, "" when unknown (cmd_version.cpp).
std::string git_commit();

// Prints one JSON document on stdout.
void print_json(const nlohmann::json& document);

}  // namespace liger::cli
