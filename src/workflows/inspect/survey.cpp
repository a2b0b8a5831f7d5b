// The `survey` workflow: documents the C API of a kernel library. Small, but it goes through
// every engine path (profile + schema, both checkpoints, staging, apply, a Verify that can fail)
// so the engine has a real end-to-end job before the larger workflows land.
#include <mustache.hpp>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <sstream>

#include "liger/error.h"
#include "liger/input_check.h"
#include "liger/util.h"
#include "liger/workflows.h"
#include "workflows/inspect/header_scan.h"

namespace liger::workflows {

namespace fs = std::filesystem;
using engine::StageContext;
using engine::StageResult;

namespace {

fs::path header_dir(const fs::path& kernels_dir) { return kernels_dir / "include" / "liger_kernels"; }

std::vector<fs::path> list_headers(const fs::path& kernels_dir) {
  std::vector<fs::path> headers;
  std::error_code ec;
  if (!fs::is_directory(header_dir(kernels_dir), ec)) return headers;
  for (const auto& entry : fs::directory_iterator(header_dir(kernels_dir)))
    if (entry.is_regular_file() && entry.path().extension() == ".h") headers.push_back(entry.path());
  std::sort(headers.begin(), headers.end());
  return headers;
}

// Path shown in the docs: relative to the repository when the header lives in it.
std::string display_path(const fs::path& file, const fs::path& tree_root) {
  const fs::path relative = fs::absolute(file).lexically_relative(fs::absolute(tree_root));
  if (!relative.empty() && *relative.begin() != "..") return relative.generic_string();
  return fs::absolute(file).string();
}

YAML::Node function_node(const inspect::CFunction& function) {
  YAML::Node node;
  node["function"] = function.name;
  node["returns"] = function.return_type;
  node["line"] = function.line;
  node["params"] = YAML::Node(YAML::NodeType::Sequence);
  for (const auto& param : function.parameters) {
    YAML::Node p;
    p["type"] = param.type;
    p["name"] = param.name;
    node["params"].push_back(p);
  }
  return node;
}

std::string role_of(const std::string& function, const std::string& op) {
  if (function == "liger_" + op + "_forward") return "forward";
  if (function == "liger_" + op + "_backward") return "backward";
  return "other";
}

StageResult understand(StageContext& ctx) {
  StageResult result;
  const fs::path kernels_dir = ctx.input.at("kernels_dir").get<std::string>();
  const auto headers = list_headers(kernels_dir);
  if (headers.empty()) {
    return result.fail("no public headers found",
                       "expected " + header_dir(kernels_dir).string() + "/*.h; pass the kernels/ directory");
  }
  ctx.progress("scanning " + std::to_string(headers.size()) + " header(s) in " + header_dir(kernels_dir).string());
  fs::create_directories(ctx.input_dir / "headers");

  YAML::Node profile;
  profile["kernels_dir"] = kernels_dir.string();
  profile["output"] = ctx.input.at("output").get<std::string>();
  profile["ops"] = YAML::Node(YAML::NodeType::Sequence);
  int function_count = 0;
  for (const auto& header : headers) {
    // The run keeps the exact headers it documented, so the profile can be reviewed later.
    fs::copy_file(header, ctx.input_dir / "headers" / header.filename(), fs::copy_options::overwrite_existing);
    const auto functions = inspect::scan_header_file(header);
    if (functions.empty()) {
      result.warn("header declares no extern \"C\" functions", display_path(header, ctx.tree_root));
      continue;
    }
    const std::string op = header.stem().string();
    YAML::Node node;
    node["name"] = op;
    node["header"] = display_path(header, ctx.tree_root);
    node["functions"] = YAML::Node(YAML::NodeType::Sequence);
    bool has_forward = false;
    for (const auto& function : functions) {
      YAML::Node entry = function_node(function);
      entry["role"] = role_of(function.name, op);
      has_forward |= entry["role"].as<std::string>() == "forward";
      node["functions"].push_back(entry);
      ++function_count;
    }
    if (!has_forward && op != "common") result.warn("op '" + op + "' has no liger_" + op + "_forward entry point");
    profile["ops"].push_back(node);
  }
  if (function_count == 0) {
    return result.fail("the headers declare no extern \"C\" functions",
                       "scanned " + std::to_string(headers.size()) + " header(s) under " + header_dir(kernels_dir).string());
  }
  profile["function_count"] = function_count;
  ctx.log->info("survey: {} functions in {} headers", function_count, headers.size());
  ctx.profile = profile;
  return result;
}

std::string markdown_cell(std::string text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

StageResult act(StageContext& ctx) {
  StageResult result;
  const fs::path template_path = data_dir() / "templates" / "survey" / "kernel-api.md.mustache";
  kainjow::mustache::mustache view_template(util::read_file(template_path));
  if (!view_template.is_valid()) {
    return result.fail("template " + template_path.string() + " is invalid", view_template.error_message());
  }
  kainjow::mustache::data rows{kainjow::mustache::data::type::list};
  int count = 0;
  for (const auto& op : ctx.profile["ops"]) {
    for (const auto& function : op["functions"]) {
      std::string params;
      for (const auto& param : function["params"]) {
        if (!params.empty()) params += ", ";
        params += param["type"].as<std::string>();
        const std::string name = param["name"].as<std::string>("");
        if (!name.empty()) params += " " + name;
      }
      kainjow::mustache::data row;
      row.set("op", markdown_cell(op["name"].as<std::string>()));
      row.set("role", function["role"].as<std::string>());
      row.set("function", markdown_cell(function["function"].as<std::string>()));
      row.set("returns", markdown_cell(function["returns"].as<std::string>()));
      row.set("params", markdown_cell(params.empty() ? "void" : params));
      row.set("header", markdown_cell(op["header"].as<std::string>()));
      rows.push_back(row);
      ++count;
    }
  }
  kainjow::mustache::data view;
  view.set("rows", rows);
  view.set("function_count", std::to_string(count));
  view.set("op_count", std::to_string(ctx.profile["ops"].size()));
  view.set("kernels_dir", display_path(ctx.profile["kernels_dir"].as<std::string>(), ctx.tree_root));
  const std::string rendered = view_template.render(view);
  if (!view_template.is_valid()) return result.fail("rendering failed", view_template.error_message());
  ctx.staging->write(ctx.profile["output"].as<std::string>(), rendered);
  result.note(ctx.attempt == 1 ? "rendered " + std::to_string(count) + " rows from the approved profile"
                               : "re-rendered after: " + ctx.previous_failures.front().summary);
  return result;
}

std::vector<std::string> split_row(const std::string& line) {
  std::vector<std::string> cells;
  std::string current;
  for (std::size_t i = 1; i < line.size(); ++i) {  // skip the leading '|'
    if (line[i] == '\\' && i + 1 < line.size() && line[i + 1] == '|') {
      current += '|';
      ++i;
    } else if (line[i] == '|') {
      cells.push_back(util::trim(current));
      current.clear();
    } else {
      current += line[i];
    }
  }
  return cells;
}

StageResult verify(StageContext& ctx) {
  StageResult result;
  const std::string output = ctx.profile["output"].as<std::string>();
  const fs::path written = ctx.tree_root / output;
  std::error_code ec;
  if (!fs::exists(written, ec)) return result.fail(output + " was not written to the tree");
  ctx.progress("checking " + output + " against the headers");

  // The table: a header row, a |---| separator, then data rows with as many cells.
  std::istringstream lines(util::read_file(written));
  std::vector<std::vector<std::string>> table;
  int line_number = 0, table_line = 0;
  for (std::string line; std::getline(lines, line);) {
    ++line_number;
    line = util::trim(line);
    if (!line.starts_with("|")) {
      if (!table.empty()) break;  // one table only
      continue;
    }
    if (table.empty()) table_line = line_number;
    table.push_back(split_row(line));
  }
  if (table.size() < 2) return result.fail(output + " contains no markdown table");
  const std::size_t columns = table[0].size();
  const auto function_column = std::find(table[0].begin(), table[0].end(), "function") - table[0].begin();
  if (static_cast<std::size_t>(function_column) >= columns) return result.fail("the table has no 'function' column");
  if (!std::all_of(table[1].begin(), table[1].end(), [](const std::string& c) {
        return !c.empty() && c.find_first_not_of("-:") == std::string::npos;
      })) {
    return result.fail(output + ":" + std::to_string(table_line + 1) + ": the table's second row is not a separator");
  }

  // What the headers declare now: the documentation must match the code, not just the profile.
  std::set<std::string> declared;
  for (const auto& header : list_headers(ctx.profile["kernels_dir"].as<std::string>()))
    for (const auto& function : inspect::scan_header_file(header)) declared.insert(function.name);
  std::set<std::string> expected;
  for (const auto& op : ctx.profile["ops"])
    for (const auto& function : op["functions"]) expected.insert(function["function"].as<std::string>());

  std::set<std::string> documented;
  for (std::size_t r = 2; r < table.size(); ++r) {
    const std::string where = output + ":" + std::to_string(table_line + static_cast<int>(r));
    if (table[r].size() != columns) {
      result.fail(where + ": row has " + std::to_string(table[r].size()) + " cells, the header has " +
                  std::to_string(columns));
      continue;
    }
    std::string name = table[r][function_column];
    std::erase(name, '`');
    if (!documented.insert(name).second) result.fail(where + ": " + name + " is documented twice");
    if (!declared.count(name)) result.fail(where + ": " + name + " is not declared in any header");
  }
  for (const auto& name : expected)
    if (!documented.count(name)) result.fail("function " + name + " from the profile has no row in " + output);
  if (table.size() - 2 != expected.size()) {
    result.fail("the table has " + std::to_string(table.size() - 2) + " rows for " + std::to_string(expected.size()) +
                " functions");
  }
  return result;
}

}  // namespace

void register_survey_workflow(engine::WorkflowRegistry& registry) {
  engine::Workflow workflow;
  workflow.name = "survey";
  workflow.description = "document the C API of a kernel library as a markdown table";
  workflow.profile_schema = data_dir() / "skills" / "survey" / "profile.schema.yaml";
  workflow.understand = understand;
  workflow.act = act;
  workflow.verify = verify;
  // The table is written into the tree: it must be a writable directory before a run exists.
  workflow.check_request = [](const nlohmann::json& arguments, const std::string&, const fs::path& tree, const Config&) {
    input::require_checkout(tree, {}, "--tree");
    const fs::path output = arguments.value("output", "");
    const bool escapes = std::any_of(output.begin(), output.end(), [](const fs::path& part) { return part == ".."; });
    if (output.empty() || output.is_absolute() || escapes)
      throw Error(ErrorKind::Usage, "--output '" + output.string() + "' is not a path inside the repository",
                  "give a repository-relative path without '..', e.g. --output docs/kernel-api.md");
  };
  registry.add(std::move(workflow));
}

}  // namespace liger::workflows
