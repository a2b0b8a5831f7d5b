// What kernel-dev's stage files share: workflow.cpp (these helpers, Understand, the registration),
// act.cpp (Act) and verify.cpp (Verify, and the diagnosis after the last failed attempt).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "liger/workflow.h"
#include "workflows/kernel_dev/profile.h"

namespace liger::kernel_dev::stages {

namespace fs = std::filesystem;
using engine::StageContext;
using engine::StageResult;

fs::path data_dir();                          // skills and templates of the installed agent
fs::path work_dir(const StageContext& ctx);  // <run>/kernel-dev: logs, act.json, verify.json
std::string read_or_empty(const fs::path& path);
// A prompt file's {{key}} markers replaced by their values.
std::string substitute(std::string text, const std::map<std::string, std::string>& values);

// Every problem with an answered profile: schema errors, a document the struct cannot read, a
// Tier-2 row program that is malformed or missing, a complete profile the templates cannot render.
// The validator of Understand's and Act's (repair) LLM requests.
std::vector<std::string> profile_problems(const nlohmann::json& document);

// The profile the later stages use: the approved profile.yaml, or the corrected one an LLM
// gave after a failed Verify (kept in <run>/kernel-dev/profile.current.yaml).
KernelProfile current_profile(const StageContext& ctx);

// Understand (workflow.cpp), Act (act.cpp), Verify and diagnose (verify.cpp).
StageResult understand(StageContext& ctx);
StageResult act(StageContext& ctx);
StageResult verify(StageContext& ctx);
std::string diagnose(const std::vector<engine::AttemptRecord>& attempts);

}  // namespace liger::kernel_dev::stages
