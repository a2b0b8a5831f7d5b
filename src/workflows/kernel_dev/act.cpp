// kernel-dev's Act: renders the profile (the approved one, or the one an LLM corrected after a
// failed Verify, which a repeat attempt asks for first) into the op's files and list inserts,
// and stages them; an existing op is only overwritten under --modify.
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "liger/llm/provider.h"
#include "liger/llm/structured.h"
#include "liger/profile.h"
#include "liger/util.h"
#include "workflows/kernel_dev/compile_entry.h"
#include "workflows/kernel_dev/workflow.h"
#include "workflows/kernel_dev/workflow_internal.h"

namespace liger::kernel_dev {

// ------------------------------------------------------------------------------ ops.yaml
std::string ops_yaml_entry(const KernelProfile& p) {
  std::string options;
  for (const auto& m : p.module_parameters) options += (options.empty() ? "" : ", ") + m.name;
  for (const auto& l : p.learnable_parameters) options += (options.empty() ? "" : ", ") + l.name;
  std::string out;
  out += "  - name: " + p.op_name + "\n";
  out += "    tier: " + std::to_string(p.tier) + "\n";
  out += "    dtypes: [fp32, fp16, bf16]\n";
  out += "    options: [" + options + "]\n";
  out += "    forward: " + p.c_prefix + "_forward\n";
  out += "    backward: " + p.c_prefix + "_backward\n";
  out += "    header: kernels/include/liger_kernels/" + p.op_name + ".h\n";
  return out;
}

std::string insert_ops_yaml_entry(const std::string& text, const std::string& op, const std::string& entry) {
  // Entries are blocks starting with "  - name: "; insert before the first larger name.
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  const std::string marker = "  - name: ";
  std::size_t insert_at = std::string::npos, last_entry_end = std::string::npos;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind(marker, 0) != 0) continue;
    std::string name = util::trim(lines[i].substr(marker.size()));
    if (name == op) return text;  // already listed
    std::size_t end = i + 1;
    while (end < lines.size() && lines[end].rfind("    ", 0) == 0) ++end;
    last_entry_end = end;
    if (insert_at == std::string::npos && name > op) insert_at = i;
  }
  if (insert_at == std::string::npos) insert_at = last_entry_end;
  if (insert_at == std::string::npos) return text + (text.empty() || text.back() == '\n' ? "" : "\n") + entry;
  std::vector<std::string> block;
  std::istringstream e(entry);
  for (std::string line; std::getline(e, line);) block.push_back(line);
  lines.insert(lines.begin() + static_cast<long>(insert_at), block.begin(), block.end());
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  if (!text.empty() && text.back() != '\n') out.pop_back();
  return out;
}

namespace stages {

// ------------------------------------------------------------------------------ Act
namespace {

std::string failing_file_for(const std::vector<engine::Finding>& failures, const std::vector<RenderedFile>& files) {
  for (const auto& f : failures)
    for (const auto& file : files)
      if (f.detail.find(fs::path(file.path).filename().string()) != std::string::npos && !file.insert)
        return file.path + ":\n" + file.content;
  return {};
}

}  // namespace

StageResult act(StageContext& ctx) {
  StageResult result;
  fs::create_directories(work_dir(ctx));
  const fs::path templates = data_dir() / "templates/kernel_dev";
  KernelProfile p;
  try {
    p = current_profile(ctx);
  } catch (const std::runtime_error& e) {
    // The schema passed but the values cannot make an op (a hand edit approved as is).
    return result.fail(std::string("the approved profile cannot be rendered: ") + e.what(),
                       "edit profile.yaml, `liger-agent approve <run>`, then `liger-agent resume <run>`");
  }
  const std::string modify = ctx.input.value("modify", "");

  if (ctx.attempt > 1 && !ctx.previous_failures.empty()) {
    std::string summaries;
    for (const auto& f : ctx.previous_failures) summaries += (summaries.empty() ? "" : "; ") + f.summary;
    if (ctx.llm().deterministic()) {
      result.note(fmt::format(
          "attempt {}: re-rendered from the same profile. Diagnosis: the built-in provider is deterministic, so the "
          "regenerated code is identical and the failure ({}) is expected to persist; it needs a profile edit by a "
          "human or an LLM provider (--llm openai|anthropic)",
          ctx.attempt, summaries));
    } else {
      // Send the diagnostics and the failing file to the model for a corrected profile.
      std::vector<RenderedFile> previous;
      try {
        previous = render(p, templates);
      } catch (const std::exception&) {
      }
      std::string diagnostics;
      for (const auto& f : ctx.previous_failures) diagnostics += "- " + f.summary + "\n" + f.detail + "\n";
      const fs::path prompts = data_dir() / "skills/kernel_dev/prompts";
      std::string fixes = read_or_empty(work_dir(ctx) / "fixes.txt");
      llm::StructuredRequest q;
      q.kind = "kernel-dev/repair";
      q.input = {{"profile", yaml_to_json(profile_to_yaml(p))}, {"failures", summaries}};
      q.format = llm::DocumentFormat::Yaml;
      q.validator = profile_problems;
      std::string user = substitute(util::read_file(prompts / "verify_failure.txt"),
                                    {{"op_name", p.op_name},
                                     {"attempt", std::to_string(ctx.attempt - 1)},
                                     {"failure_class", "hard"},
                                     {"diagnostics", diagnostics},
                                     {"fixes_tried", fixes.empty() ? "(none)" : fixes}});
      std::string failing = failing_file_for(ctx.previous_failures, previous);
      user += "\n\nThe profile that failed:\n```yaml\n" + profile_to_text(p) + "```\n";
      if (!failing.empty()) user += "\nThe failing file " + failing + "\n";
      q.messages = {llm::system_message(util::read_file(prompts / "understand_system.txt")), llm::user_message(user)};
      auto answer = llm::ask_structured(ctx.llm(), q);
      KernelProfile corrected = profile_from_yaml(json_to_yaml(answer.document));
      if (!corrected.complete() || corrected.op_name != p.op_name)
        return result.fail("the LLM's corrected profile for attempt " + std::to_string(ctx.attempt) +
                           " is incomplete or renames the op");
      util::write_file_atomic(work_dir(ctx) / "profile.current.yaml", profile_to_text(corrected));
      std::string what = "no new note";
      for (const auto& note : corrected.notes)
        if (std::find(p.notes.begin(), p.notes.end(), note) == p.notes.end()) {
          what = note;
          break;
        }
      result.note(fmt::format("attempt {}: sent the diagnostics ({}) {}to {}; corrected profile applied ({})",
                              ctx.attempt, summaries, failing.empty() ? "" : "and the failing file ", ctx.llm().name(),
                              what));
      std::ofstream(work_dir(ctx) / "fixes.txt", std::ios::app) << "- attempt " << ctx.attempt << ": " << what << "\n";
      p = corrected;
    }
  }

  std::vector<RenderedFile> files;
  if (p.tier == 3 && !p.fused_linear)  // tier3_render generates fused linear + loss ops
    return result.fail(fmt::format("'{}' is a Tier-3 (fused/complex) op: kernel-dev's templates generate Tier-1 "
                                   "(element-wise) and Tier-2 (row reduction) kernels; follow the closest kernel ({}) by hand",
                                   p.op_name, p.closest_kernel));
  if (p.tier == 2 && !p.row_program && !p.segment)
    return result.fail(fmt::format("'{}' is a Tier-2 op without a row program: kernel-dev renders a Tier-2 kernel from "
                                   "the profile's row_program (reductions, output, gradient), which an LLM provider "
                                   "(--llm openai|anthropic) or a human fills in; otherwise follow the closest kernel ({}) by hand",
                                   p.op_name, p.closest_kernel));
  try {
    files = render(p, templates);
  } catch (const std::invalid_argument& e) {
    return result.fail("the profile cannot be rendered", e.what());
  }
  files.push_back({"kernels/ops.yaml", ops_yaml_entry(p), "(ops.yaml entry)", true, "  - name: "});

  const fs::path& tree = ctx.tree_root;
  // The compile backend's entry: none where the forward has no pattern (said here), and none for
  // an op the backend already has a hand-written rule for (--modify swiglu must not replace the
  // built-in rule, which finds more spellings than one traced pattern).
  const std::string entry_path = "kernels/python/liger_kernels/compile/generated/" + p.op_name + ".py";
  if (const CompileEntryPlan plan = plan_compile_entry(p); !plan.skipped.empty()) {
    result.note("no compile-backend entry for '" + p.op_name + "': " + plan.skipped);
  } else if (read_or_empty(tree / "kernels/python/liger_kernels/compile/builtin_ops.py")
                 .find("register_op(\"" + p.op_name + "\"") != std::string::npos) {
    files.erase(std::remove_if(files.begin(), files.end(), [&](const RenderedFile& f) { return f.path == entry_path; }),
                files.end());
    result.note("no compile-backend entry for '" + p.op_name + "': the backend's built-in rules already place it "
                "(liger_kernels/compile/builtin_ops.py)");
  }
  std::map<std::string, std::string> content;  // path -> new content
  auto current = [&](const std::string& path) -> std::string {
    if (auto it = content.find(path); it != content.end()) return it->second;
    return read_or_empty(tree / path);
  };
  std::vector<std::string> differing, identical, created;
  nlohmann::json manifest = nlohmann::json::array();
  for (const auto& f : files) {
    if (f.insert) {
      if (!fs::is_regular_file(tree / f.path)) {
        result.warn("cannot insert into " + f.path + ": the file does not exist in the tree");
        continue;
      }
      const std::string base = current(f.path);
      const std::string updated = f.path == "kernels/ops.yaml" ? insert_ops_yaml_entry(base, p.op_name, f.content)
                                                               : insert_sorted_line(base, f.content, f.insert_prefix);
      if (updated == base && f.path != "kernels/ops.yaml") {
        std::string line = f.content;
        while (!line.empty() && line.back() == '\n') line.pop_back();
        if (base.find(line) == std::string::npos)
          result.warn("no block of lines starting with '" + f.insert_prefix + "' in " + f.path + "; not inserted", line);
      }
      content[f.path] = updated;
      manifest.push_back({{"path", f.path}, {"kind", "insert"}, {"template", f.template_name}});
      continue;
    }
    manifest.push_back({{"path", f.path}, {"kind", "file"}, {"template", f.template_name}});
    if (fs::exists(tree / f.path)) {
      if (read_or_empty(tree / f.path) == f.content) {
        identical.push_back(f.path);
        continue;
      }
      differing.push_back(f.path);
    } else {
      created.push_back(f.path);
    }
    content[f.path] = f.content;
  }
  if (!differing.empty() && modify != p.op_name) {
    std::string list;
    for (const auto& d : differing) list += "\n  " + d;
    return result.fail("op '" + p.op_name + "' already exists in the library and the regenerated files differ; "
                       "refusing to overwrite it (run with --modify " + p.op_name + " to update the existing kernel)",
                       "differing files:" + list);
  }
  int staged = 0;
  for (const auto& [path, text] : content) {
    if (read_or_empty(tree / path) == text && fs::exists(tree / path)) continue;
    ctx.staging->write(path, text);
    ++staged;
  }
  util::write_file_atomic(work_dir(ctx) / "act.json",
                          nlohmann::json{{"op", p.op_name},
                                         {"files", manifest},
                                         {"created", created},
                                         {"updated", differing},
                                         {"unchanged", identical},
                                         {"staged", staged}}
                                  .dump(2));
  if (staged == 0)
    result.note("op '" + p.op_name + "' is already in the library with identical files: nothing to apply; Verify runs on the tree as it is");
  else if (!differing.empty())
    result.note(fmt::format("--modify {}: updating {} existing file(s), {} new, {} unchanged", p.op_name, differing.size(),
                            created.size(), identical.size()));
  else
    result.note(fmt::format("rendered {} file(s) for '{}' ({} new, {} list insert(s) staged)", files.size(), p.op_name,
                            created.size(), staged - static_cast<int>(created.size())));
  return result;
}

}  // namespace stages
}  // namespace liger::kernel_dev
