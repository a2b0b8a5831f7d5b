#include "liger/workflow.h"

#include <algorithm>
#include <iostream>

#include "liger/error.h"
#include "liger/util.h"

namespace liger::engine {

StageResult& StageResult::fail(std::string summary, std::string detail) {
  hard.push_back({std::move(summary), std::move(detail)});
  return *this;
}

StageResult& StageResult::warn(std::string summary, std::string detail) {
  soft.push_back({std::move(summary), std::move(detail)});
  return *this;
}

StageResult& StageResult::note(std::string text) {
  notes.push_back(std::move(text));
  return *this;
}

void StageContext::progress(const std::string& message) const {
  if (log) log->info("progress: {}", message);
  if (!quiet) std::cerr << "  ... " << message << std::endl;
}

Staging::Staging(fs::path staging_dir) : dir_(std::move(staging_dir)) {}

void Staging::write(const std::string& repo_path, std::string_view content) {
  const fs::path relative(repo_path);
  bool escapes = relative.empty() || relative.is_absolute() ||
                 std::any_of(relative.begin(), relative.end(), [](const fs::path& part) { return part == ".."; });
  if (escapes) {
    throw Error(ErrorKind::Internal, "a workflow tried to stage '" + repo_path + "' outside the repository",
                "staged paths must be relative to the repository root and must not contain '..'");
  }
  util::write_file_atomic(dir_ / relative, content);
}

std::vector<std::string> Staging::files() const {
  std::vector<std::string> list;
  std::error_code ec;
  if (!fs::exists(dir_, ec)) return list;
  for (const auto& entry : fs::recursive_directory_iterator(dir_)) {
    if (!entry.is_regular_file()) continue;
    const std::string name = entry.path().filename().string();
    if (name.starts_with(".tmp-")) continue;  // leftovers of a write cut short by a crash
    list.push_back(fs::relative(entry.path(), dir_).generic_string());
  }
  std::sort(list.begin(), list.end());
  return list;
}

fs::path Staging::path_of(const std::string& repo_path) const { return dir_ / repo_path; }

void Staging::clear() {
  std::error_code ec;
  fs::remove_all(dir_, ec);
  fs::create_directories(dir_);
}

void WorkflowRegistry::add(Workflow workflow) {
  if (workflow.name.empty()) throw Error(ErrorKind::Internal, "a workflow was registered without a name");
  if (workflows_.count(workflow.name)) {
    throw Error(ErrorKind::Internal, "workflow '" + workflow.name + "' is registered twice",
                "each workflow registers itself once, from register_builtin_workflows()");
  }
  std::string name = workflow.name;
  workflows_.emplace(std::move(name), std::move(workflow));
}

const Workflow* WorkflowRegistry::find(const std::string& name) const {
  auto it = workflows_.find(name);
  return it == workflows_.end() ? nullptr : &it->second;
}

std::vector<std::string> WorkflowRegistry::names() const {
  std::vector<std::string> list;
  for (const auto& [name, workflow] : workflows_) list.push_back(name);
  return list;
}

}  // namespace liger::engine
