// report.md and report.json: what a run did, what failed, what was tried, what to do next.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "engine/run_state.h"

namespace liger::engine {

void write_reports(const std::filesystem::path& run_dir, const RunState& state);

// Generic diagnosis when every attempt failed: which hard failures persisted through all
// attempts (the fixes did not touch their cause) and which came and went.
std::string default_diagnosis(const std::vector<AttemptRecord>& attempts);

}  // namespace liger::engine
