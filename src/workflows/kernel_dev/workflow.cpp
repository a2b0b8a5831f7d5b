// kernel-dev: Understand (analyser through the LLM layer) -> Act (render + list inserts) ->
// Verify (build, reference tests, GPU tests, benchmarks vs copy / eager PyTorch / closest kernel).
#include "workflows/kernel_dev/workflow.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <regex>
#include <sstream>
#include <thread>

#include "liger/error.h"
#include "liger/input_check.h"
#include "liger/llm/builtin.h"
#include "liger/llm/provider.h"
#include "liger/llm/structured.h"
#include "liger/profile.h"
#include "liger/util.h"
#include "liger/workflows.h"
#include "workflows/kernel_dev/compile_entry.h"
#include "workflows/summaries.h"

namespace liger::kernel_dev {

namespace fs = std::filesystem;
using engine::StageContext;
using engine::StageResult;
using std::chrono::seconds;

// ------------------------------------------------------------------------------ tool runner
namespace {

class SystemToolRunner : public ToolRunner {
 public:
  toolchain::ProcessResult run(const std::vector<std::string>& argv, const fs::path& cwd, seconds timeout,
                               const std::map<std::string, std::string>& env) override {
    toolchain::ProcessOptions o;
    o.argv = argv;
    o.cwd = cwd;
    o.timeout = timeout;
    o.env = env;
    return toolchain::run_process(o);
  }
  bool has_tool(const std::string& name) override {
    if (toolchain::find_executable(name)) return true;
    if (name == "nvcc") {
      for (const char* dir : {"/usr/local/cuda/bin/nvcc"})
        if (fs::exists(dir)) return true;
    }
    return false;
  }
  bool has_gpu() override {
    std::call_once(gpu_once_, [this] { gpu_ = toolchain::detect_gpu().gpu_found; });
    return gpu_;
  }

 private:
  std::once_flag gpu_once_;
  bool gpu_ = false;
};

std::mutex g_runner_mutex;
std::shared_ptr<ToolRunner> g_runner;

}  // namespace

std::shared_ptr<ToolRunner> make_system_tool_runner() { return std::make_shared<SystemToolRunner>(); }
std::shared_ptr<ToolRunner> current_tool_runner() {
  std::lock_guard lock(g_runner_mutex);
  if (!g_runner) g_runner = make_system_tool_runner();
  return g_runner;
}
void set_tool_runner_for_testing(std::shared_ptr<ToolRunner> runner) {
  std::lock_guard lock(g_runner_mutex);
  g_runner = std::move(runner);
}

// ------------------------------------------------------------------------------ YAML <-> JSON
nlohmann::json yaml_to_json(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Sequence: {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& item : node) out.push_back(yaml_to_json(item));
      return out;
    }
    case YAML::NodeType::Map: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& item : node) out[item.first.as<std::string>()] = yaml_to_json(item.second);
      return out;
    }
    case YAML::NodeType::Scalar:
      break;
  }
  const std::string text = node.Scalar();
  if (node.Tag() == "!") return text;  // quoted in the source: a string
  if (text == "true") return true;
  if (text == "false") return false;
  static const std::regex integer(R"(^[-+]?[0-9]+$)");
  static const std::regex real(R"(^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$)");
  if (std::regex_match(text, integer) && text.size() < 18) return std::stoll(text);
  if (std::regex_match(text, real)) return std::stod(text);
  return text;
}

YAML::Node json_to_yaml(const nlohmann::json& value) {
  YAML::Node node;
  if (value.is_object()) {
    node = YAML::Node(YAML::NodeType::Map);
    for (auto it = value.begin(); it != value.end(); ++it) node[it.key()] = json_to_yaml(it.value());
  } else if (value.is_array()) {
    node = YAML::Node(YAML::NodeType::Sequence);
    for (const auto& item : value) node.push_back(json_to_yaml(item));
  } else if (value.is_string()) {
    node = value.get<std::string>();
  } else if (value.is_boolean()) {
    node = value.get<bool>();
  } else if (value.is_number_integer()) {
    node = value.get<long long>();
  } else if (value.is_number()) {
    node = value.get<double>();
  }
  return node;
}

// ------------------------------------------------------------------------------ helpers
namespace {

fs::path data_dir() { return workflows::data_dir(); }
fs::path work_dir(const StageContext& ctx) { return ctx.run_dir / "kernel-dev"; }

std::string read_or_empty(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return {};
  return util::read_file(path);
}

std::string substitute(std::string text, const std::map<std::string, std::string>& values) {
  for (const auto& [key, value] : values) {
    const std::string marker = "{{" + key + "}}";
    for (std::size_t at = text.find(marker); at != std::string::npos; at = text.find(marker, at + value.size()))
      text.replace(at, marker.size(), value);
  }
  return text;
}

std::string tail_lines(const std::string& text, std::size_t lines = 40) {
  std::size_t at = text.size(), count = 0;
  while (at > 0 && count <= lines) {
    at = text.rfind('\n', at - 1);
    if (at == std::string::npos) return text;
    ++count;
  }
  return text.substr(at + 1);
}

// Tool output as the model and the report see it: paths relative to the tree and no test
// timings, so the same failure reads the same in any checkout (and a recorded repair exchange
// replays through a real build).
std::string relative_output(std::string text, const fs::path& tree) {
  const std::string root = tree.string() + "/";
  for (std::size_t at = text.find(root); at != std::string::npos; at = text.find(root, at)) text.erase(at, root.size());
  static const std::regex timing(R"( \([0-9]+ ms( total)?\))");
  return std::regex_replace(text, timing, "");
}

// Compiler errors first (what a human and an LLM need), else the tail.
std::string error_excerpt(const std::string& output) {
  std::istringstream in(output);
  std::string line, errors;
  int n = 0, follow = 0;  // a gtest "file:line: Failure" is followed by its message lines
  while (std::getline(in, line)) {
    // Blank lines carry nothing, and GoogleTest versions differ in where they print them (1.14
    // after every failure message, 1.12 not): skipped, the same failure reads the same on every
    // machine, which a recorded repair exchange relies on.
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const bool failure = line.find("Failure") != std::string::npos;
    if ((failure || follow > 0 || line.find("error") != std::string::npos || line.find("FAILED") != std::string::npos) &&
        n++ < 40)
      errors += line + "\n";
    follow = failure ? 3 : std::max(0, follow - 1);
  }
  return errors.empty() ? tail_lines(output) : errors;
}

InputKind parse_kind(const std::string& text) {
  if (text == "words") return InputKind::Words;
  if (text == "expression") return InputKind::Expression;
  if (text == "pytorch") return InputKind::PyTorch;
  return InputKind::Auto;
}
const char* kind_name(InputKind kind) {
  switch (kind) {
    case InputKind::Words: return "words";
    case InputKind::Expression: return "expression";
    case InputKind::PyTorch: return "pytorch";
    default: return "auto";
  }
}

const KnowledgeBase& knowledge(const fs::path& dir) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<KnowledgeBase>> cache;
  std::lock_guard lock(mutex);
  auto& slot = cache[dir.string()];
  if (!slot) slot = std::make_shared<KnowledgeBase>(KnowledgeBase::load(dir));
  return *slot;
}

const profile::Schema& profile_schema() {
  static const profile::Schema schema = profile::Schema::load_file(data_dir() / "skills/kernel_dev/profile.schema.yaml");
  return schema;
}

// Every problem with an answered profile: schema errors, a document the struct cannot read, a
// Tier-2 row program that is malformed or missing, a complete profile the templates cannot render.
std::vector<std::string> profile_problems(const nlohmann::json& document) {
  std::vector<std::string> problems;
  YAML::Node node = json_to_yaml(document);
  // Validated as the profile.yaml it would become, so each error names its line:column there.
  auto report = profile_schema().validate(profile::parse_yaml(profile::to_yaml(node), "profile.yaml"));
  for (const auto& e : report.errors) problems.push_back(e.format("profile.yaml"));
  if (!problems.empty()) return problems;
  try {
    KernelProfile p = profile_from_yaml(node);
    problems = row_program_problems(p);
    if (p.tier == 2 && !p.row_program && !p.segment && !p.undecided.count("row_program") && p.complete())
      problems.push_back("row_program: a complete Tier-2 profile needs its row program (the reductions, the output and "
                         "the input gradient in the expression language), or {undecided: \"<why>\"}");
    if (problems.empty() && p.complete() && (p.tier == 1 || p.tier == 2 || p.fused_linear)) render(p, data_dir() / "templates/kernel_dev");
  } catch (const std::exception& e) {
    problems.push_back(e.what());
  }
  return problems;
}

struct UnderstandInput {
  std::string text;
  InputKind kind = InputKind::Auto;
  std::string name;
  std::string modify;
};

UnderstandInput read_input(const StageContext& ctx) {
  UnderstandInput in;
  const std::string given = ctx.input.value("input", "");
  in.name = ctx.input.value("name", "");
  in.modify = ctx.input.value("modify", "");
  in.kind = parse_kind(ctx.input.value("kind", ""));
  if (fs::path copied = ctx.input_dir / "input.txt"; fs::is_regular_file(copied)) {
    in.text = util::read_file(copied);
  } else if (!given.empty() && fs::is_regular_file(ctx.input_dir / fs::path(given).filename())) {
    in.text = util::read_file(ctx.input_dir / fs::path(given).filename());
    if (in.kind == InputKind::Auto) in.kind = InputKind::PyTorch;
  } else if (!given.empty() && fs::is_regular_file(given)) {
    in.text = util::read_file(given);
    if (in.kind == InputKind::Auto) in.kind = InputKind::PyTorch;
  } else {
    in.text = given;
  }
  if (in.name.empty() && !in.modify.empty()) in.name = in.modify;
  return in;
}

// The profile the later stages use: the approved profile.yaml, or the corrected one an LLM
// gave after a failed Verify (kept in <run>/kernel-dev/profile.current.yaml).
KernelProfile current_profile(const StageContext& ctx) {
  fs::path corrected = work_dir(ctx) / "profile.current.yaml";
  if (ctx.attempt > 1 && fs::is_regular_file(corrected)) return profile_from_yaml(profile::load_yaml_file(corrected));
  return profile_from_yaml(ctx.profile);
}

}  // namespace

nlohmann::json builtin_understand(const nlohmann::json& input) {
  AnalysisRequest request;
  request.text = input.value("text", "");
  request.kind = parse_kind(input.value("kind", ""));
  request.name = input.value("name", "");
  fs::path dir = input.value("data_dir", "");
  if (dir.empty()) dir = data_dir();
  KernelProfile p = analyse(request, knowledge(dir));
  return yaml_to_json(profile_to_yaml(p));
}

namespace {
const llm::AnalyserRegistration kUnderstandAnalyser{
    "kernel-dev/understand", [](const llm::Request& request) { return builtin_understand(request.input); }};
}  // namespace

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

std::string eager_expression(const KernelProfile& p) {
  if (p.row_program) {
    // A Tier-2 forward is not one expression: the profile's PyTorch function, else the binding's
    // `reference` (the same row program in PyTorch operations).
    if (!p.row_program->pytorch_reference.empty()) return p.row_program->pytorch_reference;
    return "__import__('liger_kernels.ops." + p.op_name + "', fromlist=['reference']).reference(" +
           (p.inputs.empty() ? std::string("x") : p.inputs.front().name) + ")";
  }
  const std::string prefix = "PyTorch eager baseline: ";
  for (const auto& note : p.notes)
    if (note.rfind(prefix, 0) == 0) return note.substr(prefix.size());
  return p.forward ? p.forward->expression : std::string{};
}

fs::path build_dir_for(const fs::path& tree_root) {
  if (const char* env = std::getenv("LIGER_BUILD_DIR"); env && *env) {
    fs::path dir = env;
    return dir.is_absolute() ? dir : tree_root / dir;
  }
  return tree_root / "build";
}

// ------------------------------------------------------------------------------ Understand
namespace {

StageResult understand(StageContext& ctx) {
  StageResult result;
  const UnderstandInput in = read_input(ctx);
  if (util::trim(in.text).empty()) return result.fail("kernel-dev needs a request: words, an expression or PyTorch code");
  const auto& kb = knowledge(data_dir());
  const InputKind kind = in.kind == InputKind::Auto ? detect_input_kind(in.text, kb.catalogue) : in.kind;
  ctx.progress(std::string("understanding the request (") + kind_name(kind) + ")");

  llm::Provider& provider = ctx.llm();
  llm::StructuredRequest q;
  q.kind = "kernel-dev/understand";
  q.input = {{"text", in.text}, {"kind", kind_name(kind)}, {"name", in.name}, {"data_dir", data_dir().string()}};
  q.format = llm::DocumentFormat::Yaml;
  q.validator = profile_problems;
  if (!provider.deterministic()) {
    // A real model reviews and completes what the built-in analyser decided.
    KernelProfile draft = analyse({in.text, kind, in.name}, kb);
    const fs::path prompts = data_dir() / "skills/kernel_dev/prompts";
    const std::string system = util::read_file(prompts / "understand_system.txt");
    const std::string user = substitute(util::read_file(prompts / "understand_user.txt"),
                                        {{"source_kind", kind_name(kind)},
                                         {"source_text", in.text},
                                         {"profile_yaml", profile_to_text(draft)},
                                         {"schema_yaml", util::read_file(data_dir() / "skills/kernel_dev/profile.schema.yaml")}});
    q.messages = {llm::system_message(system), llm::user_message(user)};
  } else {
    q.messages = {llm::user_message("kernel-dev/understand: " + in.text)};
  }
  llm::StructuredResult answer = llm::ask_structured(provider, q);
  KernelProfile profile = profile_from_yaml(json_to_yaml(answer.document));
  if (!in.name.empty() && profile.op_name != in.name && profile.tier == 1) {
    // The model ignored the override: keep the user's name.
    result.warn("the answer named the op '" + profile.op_name + "'; using --name '" + in.name + "'");
  }
  if (!in.modify.empty()) {
    std::error_code ec;
    if (!fs::exists(ctx.tree_root / "kernels/include/liger_kernels" / (in.modify + ".h"), ec))
      return result.fail("--modify " + in.modify + ": the library has no op of that name",
                         "(no kernels/include/liger_kernels/" + in.modify + ".h in " + ctx.tree_root.string() + ")");
    if (profile.op_name != in.modify)
      return result.fail("--modify " + in.modify + ": the request was understood as op '" + profile.op_name + "'");
  }
  ctx.profile = profile_to_yaml(profile);
  result.note(fmt::format("understood as '{}' (tier {}, {}), via {} in {} request(s)", profile.op_name, profile.tier,
                          profile.source_kind, provider.name(), answer.attempts));
  if (!profile.complete()) {
    std::string fields;
    for (const auto& [field, reason] : profile.undecided) fields += (fields.empty() ? "" : ", ") + field;
    result.warn("profile has undecided fields (" + fields + "): the run stops at the profile checkpoint",
                "decide them by editing profile.yaml (then `liger-agent approve` + `resume`) or run with an LLM provider (--llm openai|anthropic)");
  }
  return result;
}

// ------------------------------------------------------------------------------ Act
std::string failing_file_for(const std::vector<engine::Finding>& failures, const std::vector<RenderedFile>& files) {
  for (const auto& f : failures)
    for (const auto& file : files)
      if (f.detail.find(fs::path(file.path).filename().string()) != std::string::npos && !file.insert)
        return file.path + ":\n" + file.content;
  return {};
}

StageResult act(StageContext& ctx) {
  StageResult result;
  fs::create_directories(work_dir(ctx));
  const fs::path templates = data_dir() / "templates/kernel_dev";
  KernelProfile p = current_profile(ctx);
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
  if (p.tier == 3 && !p.fused_linear)  // tier3.h generates fused linear + loss ops
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

// ------------------------------------------------------------------------------ Verify
struct Check {
  std::string name;
  std::string status;  // passed | failed | not run: <reason> | measured | warning
  std::string detail;
};

int build_jobs() {
  if (const char* env = std::getenv("LIGER_BUILD_JOBS"); env && *env) return std::max(1, std::atoi(env));
  return std::max(1u, std::thread::hardware_concurrency());
}

bool kernels_enabled(const fs::path& build) {
  const std::string cache = read_or_empty(build / "CMakeCache.txt");
  if (cache.find("LIGER_BUILD_KERNELS:BOOL=OFF") != std::string::npos) return false;
  return cache.find("CMAKE_CUDA_COMPILER:") != std::string::npos || cache.find("LIGER_BUILD_KERNELS:BOOL=ON") != std::string::npos;
}

int gtest_count(const std::string& output, const std::string& tag) {
  // "[  PASSED  ] 4 tests." / "[  FAILED  ] 1 test, listed below:"
  std::smatch m;
  std::regex re("\\[  " + tag + "  \\] ([0-9]+) test");
  if (std::regex_search(output, m, re)) return std::stoi(m[1]);
  return 0;
}

std::string pct(double v) { return fmt::format("{:.1f}%", v * 100.0); }

StageResult verify(StageContext& ctx) {
  StageResult result;
  fs::create_directories(work_dir(ctx));
  KernelProfile p = current_profile(ctx);
  auto runner = current_tool_runner();
  const fs::path tree = ctx.tree_root;
  const std::string build_arg = ctx.input.value("build_dir", "");
  const fs::path build = build_arg.empty() ? build_dir_for(tree) : fs::path(build_arg);
  const bool skip_bench = ctx.input.value("skip_bench", false);
  const std::string camel = camel_case(p.op_name);
  std::vector<Check> checks;
  nlohmann::json metrics = nlohmann::json::object();
  fs::path log_dir = work_dir(ctx) / fmt::format("attempt-{}", ctx.attempt);
  fs::create_directories(log_dir);
  auto run_logged = [&](const std::string& step, const std::vector<std::string>& argv, int timeout_s,
                        const std::map<std::string, std::string>& env = {}) {
    ctx.progress(step + ": " + argv.front());
    auto r = runner->run(argv, tree, seconds(timeout_s), env);
    std::string cmd;
    for (const auto& a : argv) cmd += a + " ";
    util::write_file_atomic(log_dir / (step + ".log"), "$ " + cmd + "\n" + r.output);
    return r;
  };

  // 1. build (hard)
  bool built = false;
  bool kernels = false;
  {
    bool configured = fs::exists(build / "build.ninja") || fs::exists(build / "Makefile");
    bool ok = true;
    if (!configured) {
      std::vector<std::string> argv = {"cmake", "-S", tree.string(), "-B", build.string(), "-DCMAKE_BUILD_TYPE=Release"};
      if (runner->has_tool("ninja")) argv.insert(argv.begin() + 1, {"-G", "Ninja"});
      if (runner->has_tool("nvcc")) {
        auto nvcc = toolchain::find_executable("nvcc");
        if (nvcc) argv.push_back("-DCMAKE_CUDA_COMPILER=" + nvcc->string());
        const char* archs = std::getenv("LIGER_CUDA_ARCHS");
        argv.push_back(std::string("-DCMAKE_CUDA_ARCHITECTURES=") + (archs && *archs ? archs : "80-real;90"));
      } else {
        argv.push_back("-DLIGER_BUILD_KERNELS=OFF");
      }
      auto r = run_logged("configure", argv, 1800);
      if (!r.ok()) {
        ok = false;
        result.fail("build: cmake configure of " + build.string() + " failed", error_excerpt(r.output));
        checks.push_back({"build", "failed", "cmake configure failed"});
      }
    }
    if (ok) {
      kernels = kernels_enabled(build);
      // Only what this Verify runs: the GPU tests and the benchmark are not built on a machine
      // without a GPU (the CUDA library still is: it proves the generated kernel compiles).
      std::vector<std::string> targets = {"reference_tests"};
      if (kernels) {
        targets.insert(targets.begin(), "liger_kernels");
        if (runner->has_gpu()) {
          targets.push_back("kernel_tests");
          if (!skip_bench) targets.push_back("liger-bench");
        }
      }
      std::vector<std::string> argv = {"cmake", "--build", build.string(), "-j", std::to_string(build_jobs()), "--target"};
      argv.insert(argv.end(), targets.begin(), targets.end());
      auto r = run_logged("build", argv, 3600);
      r.output = relative_output(r.output, tree);
      if (!r.ok()) {
        result.fail("build failed (" + std::string(r.timed_out ? "timed out" : "exit " + std::to_string(r.exit_code)) + ")",
                    error_excerpt(r.output));
        checks.push_back({"build", "failed", tail_lines(error_excerpt(r.output), 3)});
      } else {
        built = true;
        std::string built_targets;
        for (const auto& t : targets) built_targets += (built_targets.empty() ? "" : ", ") + t;
        checks.push_back({"build", "passed", kernels ? built_targets
                                                     : "reference_tests (CUDA library not configured: no nvcc)"});
      }
    }
  }

  // 2. reference tests (hard)
  bool reference_passed = false;
  if (built) {
    auto r = run_logged("reference_tests", {(build / "tests/kernels/reference_tests").string(), "--gtest_filter=" + camel + "Reference.*"}, 1800);
    r.output = relative_output(r.output, tree);
    int passed = gtest_count(r.output, "PASSED"), failed = gtest_count(r.output, "FAILED");
    if (!r.ok() || failed > 0) {
      result.fail("reference tests failed for " + p.op_name, error_excerpt(r.output));
      checks.push_back({"reference tests", "failed", fmt::format("{} failed", failed)});
    } else if (passed == 0) {
      result.fail("reference tests: no test matched " + camel + "Reference.* (the generated test is not in the build?)", tail_lines(r.output));
      checks.push_back({"reference tests", "failed", "no test ran"});
    } else {
      reference_passed = true;
      checks.push_back({"reference tests", "passed", fmt::format("{} test(s)", passed)});
    }
  } else {
    checks.push_back({"reference tests", "not run: the build failed", ""});
  }

  // 3. GPU tests (hard where a GPU exists)
  const bool gpu = runner->has_gpu();
  bool gpu_tests_passed = false;
  if (!built) {
    checks.push_back({"GPU tests", "not run: the build failed", ""});
  } else if (!gpu) {
    const std::string why = kernels ? "no GPU" : "no GPU (and the CUDA library is not built: no nvcc)";
    checks.push_back({"GPU tests", "not run: " + why, ""});
    result.warn("GPU tests not run: " + why);
  } else if (!kernels) {
    checks.push_back({"GPU tests", "not run: the CUDA library is not built (no nvcc)", ""});
    result.warn("GPU tests not run: the CUDA library is not built (no nvcc)");
  } else {
    auto r = run_logged("kernel_tests", {(build / "tests/kernels/kernel_tests").string(), "--gtest_filter=*" + camel + "Gpu*"}, 3600);
    r.output = relative_output(r.output, tree);
    int passed = gtest_count(r.output, "PASSED"), failed = gtest_count(r.output, "FAILED");
    if (!r.ok() || failed > 0) {
      result.fail("GPU tests failed for " + p.op_name, error_excerpt(r.output));
      checks.push_back({"GPU tests", "failed", fmt::format("{} failed", failed)});
    } else if (passed == 0) {
      result.fail("GPU tests: no test matched *" + camel + "Gpu*", tail_lines(r.output));
      checks.push_back({"GPU tests", "failed", "no test ran"});
    } else if (r.output.find("[  SKIPPED ]") != std::string::npos) {
      checks.push_back({"GPU tests", "not run: skipped by the test binary", tail_lines(r.output, 5)});
      result.warn("GPU tests skipped by the test binary", tail_lines(r.output, 5));
    } else {
      gpu_tests_passed = true;
      checks.push_back({"GPU tests", "passed", fmt::format("{} test(s)", passed)});
    }
  }

  // 4. agreement with the PyTorch function (hard, GPU only): every output and gradient of the
  // binding against the op's PyTorch form evaluated in fp64 on the same inputs, per dtype of the
  // tolerance table. The GPU tests compare with the generated fp64 reference, which comes from the
  // same profile as the kernel; this check is the one that can catch a profile that misread the
  // request. It runs only when the reference tests passed: formulas that fail their own gradient
  // check make every kernel built from them disagree too, and a repair request carrying both would
  // bury the root cause under its consequences.
  const std::string eager = eager_expression(p);
  if (gpu_tests_passed && reference_passed && !eager.empty() && runner->has_tool("python3")) {
    std::string inputs;
    for (const auto& t : p.inputs) inputs += (inputs.empty() ? "" : ",") + t.name;
    std::string params;
    for (const auto& l : p.learnable_parameters)
      params += fmt::format("{}{}:{}:{}", params.empty() ? "" : ",", l.name, l.shape, l.value);
    std::map<std::string, nlohmann::json> by_dtype;
    for (const auto& t : p.tolerances.value_or(std::vector<ToleranceSpec>{}))
      by_dtype[t.dtype][t.applies_to] = {t.atol, t.rtol, t.max_relative_l2};
    if (by_dtype.empty()) by_dtype["bf16"] = nlohmann::json::object();
    const std::map<std::string, std::string> env = {{"LIGER_KERNELS_LIBRARY", (build / "kernels/libliger_kernels.so").string()},
                                                    {"PYTHONPATH", (tree / "kernels/python").string()}};
    std::string summary;
    bool agree_all = true, ran = false;
    for (const auto& [dtype, tol] : by_dtype) {
      const fs::path json_path = log_dir / ("agreement_" + dtype + ".json");
      std::vector<std::string> argv = {"python3", (tree / "benchmarks/kernel_dev_compare.py").string(), "--op", p.op_name,
                                       "--eager", eager, "--inputs", inputs, "--dtype", dtype, "--check-only",
                                       "--json", json_path.string()};
      if (!params.empty()) argv.insert(argv.end(), {"--params", params});
      if (!tol.empty()) argv.insert(argv.end(), {"--tolerances", tol.dump()});
      auto r = run_logged("agreement_" + dtype, argv, 900, env);
      if (r.exit_code == 3) {  // no torch / no GPU visible to torch: said, not failed
        summary += fmt::format("{}{}: not run ({})", summary.empty() ? "" : "; ", dtype, util::trim(tail_lines(r.output, 1)));
        continue;
      }
      ran = true;
      nlohmann::json rep = fs::exists(json_path) ? nlohmann::json::parse(util::read_file(json_path), nullptr, false)
                                                 : nlohmann::json();
      if (!rep.is_object()) {
        agree_all = false;
        result.fail("agreement with PyTorch (" + dtype + "): the comparison did not run", error_excerpt(r.output));
        summary += fmt::format("{}{}: error", summary.empty() ? "" : "; ", dtype);
        continue;
      }
      metrics["agreement"][dtype] = rep;
      std::string disagreements;
      for (const auto& t : rep.value("tensors", nlohmann::json::array())) {
        if (t.value("agree", true)) continue;
        disagreements += fmt::format("{}{}: max abs error {:.3e} at {} (rel {:.3e}), relative L2 {:.3e} (bound {:.1e}), {} of {} "
                                     "elements outside tolerance",
                                     disagreements.empty() ? "" : "; ", t.value("tensor", "?"), t.value("max_abs_error", 0.0),
                                     t.value("at", nlohmann::json::array()).dump(), t.value("max_rel_error", 0.0),
                                     t.value("rel_l2", 0.0), t.value("max_rel_l2", 0.0), t.value("elements_outside", 0),
                                     t.value("elements", 0));
      }
      std::string notes;
      for (const auto& line : rep.value("lines", nlohmann::json::array()))
        if (line.is_string() && line.get<std::string>().rfind("note ", 0) == 0) notes += line.get<std::string>() + "\n";
      if (!notes.empty()) result.warn("PyTorch's own result is not finite where the kernel's is (" + dtype + ")", notes);
      if (!rep.value("agree", false)) {
        agree_all = false;
        result.fail(fmt::format("{} disagrees with the PyTorch function `{}` in {} (fp64 reference)", p.op_name, eager, dtype),
                    disagreements.empty() ? error_excerpt(r.output) : disagreements);
      }
      summary += fmt::format("{}{}: {}", summary.empty() ? "" : "; ", dtype, rep.value("agree", false) ? "agree" : "DISAGREE");
    }
    checks.push_back({"agreement with PyTorch (fp64, " + eager + ")", !ran ? "not run" : agree_all ? "passed" : "failed", summary});
  } else if (!gpu_tests_passed) {
    checks.push_back({"agreement with PyTorch", "not run: GPU tests did not pass or did not run", ""});
  } else if (!reference_passed) {
    checks.push_back({"agreement with PyTorch", "not run: the reference tests failed (the formulas are wrong; the kernels implement them)", ""});
  }

  // 4b. the compile backend's pattern against the PyTorch the op came from (CPU PyTorch; no GPU).
  // An entry that does not match is inert (models keep their PyTorch): a warning. An entry that
  // would pass the wrong values or compute other values where it matches is broken: hard.
  {
    const std::string name = "compile pattern matches the source";
    const std::string entry = "kernels/python/liger_kernels/compile/generated/" + p.op_name + ".py";
    if (!fs::exists(tree / entry)) {
      const CompileEntryPlan plan = plan_compile_entry(p);
      checks.push_back({name, "not run: no compile-backend entry" + (plan.skipped.empty() ? std::string() : " (" + plan.skipped + ")"), ""});
    } else if (!runner->has_tool("python3")) {
      checks.push_back({name, "not run: python3 not found", ""});
      result.warn("compile pattern check not run: python3 not found");
    } else if (auto probe = runner->run({"python3", "-c", "import torch"}, tree, seconds(300)); !probe.ok()) {
      const std::string why = "python3 cannot import torch";
      checks.push_back({name, "not run: " + why, util::trim(tail_lines(probe.output, 1))});
      result.warn("compile pattern check not run: " + why + " (the check needs CPU PyTorch)");
    } else {
      // The PyTorch the op came from, else its forward (evaluated with the PyTorch calls models make).
      const bool from_pytorch = p.source_kind == "pytorch" && !p.source_text.empty();
      const fs::path source = log_dir / "compile_pattern_source.txt";
      util::write_file_atomic(source, from_pytorch ? p.source_text : (p.forward ? p.forward->expression : std::string{}));
      auto r = run_logged("compile_pattern",
                          {"python3", (tree / "benchmarks/compile_pattern_check.py").string(), "--op", p.op_name,
                           "--source-file", source.string()},
                          600);
      const std::string against = from_pytorch ? "the PyTorch source" : "the forward expression";
      const std::string first = util::trim(r.output.substr(0, r.output.find('\n')));
      if (r.exit_code == 0) {
        checks.push_back({name, "passed", "against " + against + ": " + first});
      } else if (r.exit_code == 3) {
        checks.push_back({name, "not run: " + util::trim(tail_lines(r.output, 1)), ""});
        result.warn("compile pattern check not run", tail_lines(r.output, 1));
      } else if (r.exit_code == 4) {
        checks.push_back({name, "failed", first});
        result.fail("the compile-backend entry " + entry + " is broken: it must not be installed", error_excerpt(r.output));
      } else {
        checks.push_back({name, "failed (warning)", first});
        result.warn("the compile backend will not find " + p.op_name + " in models written like " + against +
                        " (its entry " + entry + " does not match it); the kernel is unaffected",
                    error_excerpt(r.output));
      }
    }
  }

  // 5. benchmarks (soft, GPU only). The torch.compile comparison has its own row, so a run that
  // could not measure it says why.
  const std::string compile_check = "benchmark vs torch.compile";
  if (skip_bench) {
    checks.push_back({"benchmark", "not run: --skip-bench", ""});
    checks.push_back({compile_check, "not run: --skip-bench", ""});
  } else if (!result.ok()) {
    checks.push_back({"benchmark", "not run: hard failures above", ""});
    checks.push_back({compile_check, "not run: hard failures above", ""});
  } else if (!gpu) {
    checks.push_back({"benchmark", "not run: no GPU", ""});
    checks.push_back({compile_check, "not run: no GPU", ""});
    result.warn("benchmark not run: no GPU");
  } else if (!kernels) {
    checks.push_back({"benchmark", "not run: the CUDA library is not built (no nvcc)", ""});
    checks.push_back({compile_check, "not run: the CUDA library is not built (no nvcc)", ""});
  } else {
    const fs::path bench_json = log_dir / "bench.json";
    std::string ops = p.op_name;
    if (!p.closest_kernel.empty() && p.closest_kernel != p.op_name) ops += "," + p.closest_kernel;
    auto r = run_logged("liger-bench", {(build / "benchmarks/liger-bench").string(), "--op", ops, "--dtype", "bf16", "--json", bench_json.string()}, 1800);
    if (!r.ok() || !fs::exists(bench_json)) {
      result.warn("liger-bench failed for " + p.op_name, error_excerpt(r.output));
      checks.push_back({"benchmark (liger-bench)", "failed", tail_lines(r.output, 3)});
    } else {
      nlohmann::json bench = nlohmann::json::parse(util::read_file(bench_json), nullptr, false);
      nlohmann::json mine = nlohmann::json::object(), closest = nlohmann::json::object();
      if (bench.is_object())
        for (const auto& row : bench.value("results", nlohmann::json::array())) {
          if (!row.value("ok", false)) continue;
          auto& dst = row.value("op", "") == p.op_name ? mine : closest;
          const std::string mode = row.value("mode", "");
          // keep the largest shape per mode (the last listed)
          dst[mode] = {{"shape", row.value("shape", "")}, {"median_us", row.value("median_us", 0.0)},
                       {"copy_fraction", row.value("copy_fraction", 0.0)}, {"extra_mib", row.value("extra_mib", 0.0)}};
        }
      metrics["liger_bench"] = {{"op", mine}, {"closest", {{"name", p.closest_kernel}, {"modes", closest}}}};
      std::string line;
      for (const char* mode : {"forward", "backward", "full"}) {
        if (!mine.contains(mode)) continue;
        double f = mine[mode].value("copy_fraction", 0.0);
        line += fmt::format("{}{} {} of copy", line.empty() ? "" : ", ", mode, pct(f));
        if (closest.contains(mode)) line += fmt::format(" ({} {})", p.closest_kernel, pct(closest[mode].value("copy_fraction", 0.0)));
        if (std::string(mode) != "full" && f < 0.85 && !p.fused_linear)  // a fused linear is GEMM-bound
          result.warn(fmt::format("{} {} reaches {} of copy bandwidth (bar: 85%)", p.op_name, mode, pct(f)));
      }
      checks.push_back({"benchmark (liger-bench, bf16)", mine.empty() ? "failed" : "measured", line});
    }
    // PyTorch eager comparison through the generated binding.
    if (!runner->has_tool("python3")) {
      checks.push_back({"benchmark vs PyTorch eager", "not run: python3 not found", ""});
      checks.push_back({compile_check, "not run: python3 not found", ""});
    } else {
      const fs::path cmp_json = log_dir / "compare.json";
      std::string inputs;
      for (const auto& t : p.inputs) inputs += (inputs.empty() ? "" : ",") + t.name;
      std::string params;
      for (const auto& l : p.learnable_parameters)
        params += fmt::format("{}{}:{}:{}", params.empty() ? "" : ",", l.name, l.shape, l.value);
      std::vector<std::string> argv = {"python3", (tree / "benchmarks/kernel_dev_compare.py").string(), "--op", p.op_name,
                                       "--eager", eager, "--inputs", inputs, "--dtype", "bf16", "--json", cmp_json.string()};
      if (!params.empty()) argv.insert(argv.end(), {"--params", params});
      std::string lib = (build / "kernels/libliger_kernels.so").string();
      std::map<std::string, std::string> env = {{"LIGER_KERNELS_LIBRARY", lib},
                                                {"PYTHONPATH", (tree / "kernels/python").string()}};
      auto r = run_logged("compare_eager", argv, 1800, env);
      if (r.exit_code == 3) {
        // "not run: no CUDA device visible to torch" / "not run: torch not importable (...)"
        std::string why = util::trim(tail_lines(r.output, 1));
        if (why.rfind("not run: ", 0) == 0) why = why.substr(9);
        checks.push_back({"benchmark vs PyTorch eager", "not run: " + why, ""});
        checks.push_back({compile_check, "not run: " + why, ""});
      } else if (!r.ok() || !fs::exists(cmp_json)) {
        result.warn("PyTorch eager comparison failed", error_excerpt(r.output));
        checks.push_back({"benchmark vs PyTorch eager", "failed", tail_lines(r.output, 3)});
        checks.push_back({compile_check, "not run: the comparison script failed (see the eager row)", ""});
      } else {
        nlohmann::json cmp = nlohmann::json::parse(util::read_file(cmp_json), nullptr, false);
        metrics["eager"] = cmp;
        std::string line;
        for (const char* mode : {"forward", "backward", "full"})
          if (cmp.contains("speedup") && cmp["speedup"].contains(mode))
            line += fmt::format("{}{} {:.2f}x", line.empty() ? "" : ", ", mode, cmp["speedup"][mode].get<double>());
        if (cmp.contains("memory_saving"))
          line += fmt::format(", peak memory {:.1f}% less", cmp["memory_saving"].get<double>() * 100.0);
        // Device time (CUDA-graph replays): the same ratios without the host's per-call work.
        if (cmp.contains("speedup_device") && cmp["speedup_device"].is_object() && !cmp["speedup_device"].empty()) {
          std::string device;
          for (const char* mode : {"forward", "backward", "full"})
            if (cmp["speedup_device"].contains(mode))
              device += fmt::format("{}{} {:.2f}x", device.empty() ? "" : ", ", mode, cmp["speedup_device"][mode].get<double>());
          line += "; device time (CUDA graphs): " + device;
        }
        if (cmp.contains("speedup_vs_compile") && cmp["speedup_vs_compile"].is_object() && !cmp["speedup_vs_compile"].empty()) {
          std::string compiled;
          for (const char* mode : {"forward", "backward", "full"})
            if (cmp["speedup_vs_compile"].contains(mode))
              compiled += fmt::format("{}{} {:.2f}x", compiled.empty() ? "" : ", ", mode,
                                      cmp["speedup_vs_compile"][mode].get<double>());
          line += "; vs torch.compile: " + compiled;
        } else if (cmp.contains("torch_compile_error") && !cmp["torch_compile_error"].get<std::string>().empty()) {
          line += "; torch.compile: " + cmp["torch_compile_error"].get<std::string>();
        }
        checks.push_back({"benchmark vs PyTorch eager (" + eager + ")", "measured", line});
        // The same function under torch.compile (inductor), beside eager: speedup of ours over it.
        if (cmp.contains("speedup_vs_compile") && cmp["speedup_vs_compile"].is_object() && !cmp["speedup_vs_compile"].empty()) {
          std::string compiled;
          for (const char* mode : {"forward", "backward", "full"})
            if (cmp["speedup_vs_compile"].contains(mode))
              compiled += fmt::format("{}{} {:.2f}x", compiled.empty() ? "" : ", ", mode, cmp["speedup_vs_compile"][mode].get<double>());
          checks.push_back({compile_check, "measured", compiled});
        } else {
          const std::string why = cmp.value("torch_compile_error", std::string());
          checks.push_back({compile_check, "not run: " + (why.empty() ? std::string("torch.compile gave no timing") : why), ""});
        }
      }
    }
  }

  // verdict + report
  std::string verdict;
  if (!result.ok()) verdict = "fail";
  else if (gpu_tests_passed) verdict = "pass";
  else verdict = "unverified on GPU (build and reference tests passed; GPU tests not run)";
  std::ostringstream md;
  md << "kernel-dev Verify for `" << p.op_name << "` (attempt " << ctx.attempt << ")\n\n";
  md << "| check | result | detail |\n|---|---|---|\n";
  nlohmann::json jchecks = nlohmann::json::array();
  for (const auto& c : checks) {
    md << "| " << c.name << " | " << c.status << " | " << c.detail << " |\n";
    jchecks.push_back({{"check", c.name}, {"result", c.status}, {"detail", c.detail}});
    result.note(c.name + ": " + c.status + (c.detail.empty() ? "" : " (" + c.detail + ")"));
  }
  md << "\nverdict: **" << verdict << "**\n";
  result.note("verdict: " + verdict);
  nlohmann::json out = {{"op", p.op_name}, {"attempt", ctx.attempt}, {"build_dir", build.string()},
                        {"checks", jchecks}, {"metrics", metrics}, {"verdict", verdict}};
  util::write_file_atomic(work_dir(ctx) / "verify.md", md.str());
  util::write_file_atomic(work_dir(ctx) / "verify.json", out.dump(2) + "\n");
  return result;
}

std::string diagnose(const std::vector<engine::AttemptRecord>& attempts) {
  std::ostringstream out;
  out << "kernel-dev: " << attempts.size() << " attempt(s) failed Verify.\n";
  std::string first, last;
  for (const auto& a : attempts) {
    out << "- attempt " << a.attempt << ": ";
    std::string errors;
    for (const auto& f : a.hard) errors += (errors.empty() ? "" : "; ") + f.summary;
    out << (errors.empty() ? "no hard failure recorded" : errors) << "\n";
    for (const auto& fix : a.fixes) out << "  fix tried: " << fix << "\n";
    if (first.empty()) first = errors;
    last = errors;
  }
  if (first == last)
    out << "Diagnosis: the same failure persisted across attempts, so no fix reached its cause; with the built-in "
           "provider the regenerated code is identical each time. Inspect the failing file named above (logs under "
           "<run>/kernel-dev/attempt-N/) and correct the profile field it comes from (a formula, a tolerance), or use "
           "an LLM provider.\n";
  else
    out << "Diagnosis: the failure changed between attempts (first: " << first << "; last: " << last
        << "); the last fix moved the problem rather than removing it.\n";
  return out.str();
}

}  // namespace

namespace {

// Usage errors before a run exists: the tree, the --name/--modify values, and an input no
// decision can rescue (see input_problem).
void check_request(const nlohmann::json& arguments, const std::string& input_text, const fs::path& tree,
                   const Config& config) {
  input::require_checkout(tree, {"kernels/ops.yaml"}, "--tree");
  static const std::regex op_pattern("^[a-z][a-z0-9_]{0,63}$");
  static const std::regex given_pattern("^[A-Za-z][A-Za-z0-9_ -]{0,63}$");
  for (const char* flag : {"name", "modify"}) {
    const std::string value = arguments.value(flag, "");
    if (value.empty()) continue;
    if (!std::regex_match(value, given_pattern) || !std::regex_match(op_name_for(value), op_pattern)) {
      std::string shown = value.substr(0, 80);
      for (char& c : shown)
        if (static_cast<unsigned char>(c) < 0x20) c = '?';
      throw Error(ErrorKind::Usage,
                  std::string("--") + flag + " '" + shown + "' is not an op name (letters, digits, _ or -, giving "
                      "a snake_case name matching ^[a-z][a-z0-9_]{0,63}$)",
                  "use a short snake_case name, e.g. --" + std::string(flag) + " quick_gelu");
    }
  }
  if (const std::string modify = arguments.value("modify", ""); !modify.empty()) {
    std::error_code ec;
    if (!fs::exists(tree / "kernels/include/liger_kernels" / (op_name_for(modify) + ".h"), ec))
      throw Error(ErrorKind::Usage, "--modify " + modify + ": the library has no op of that name",
                  "no kernels/include/liger_kernels/" + op_name_for(modify) + ".h in " + tree.string() +
                      "; `liger-agent kernels` lists the ops (leave --modify out to create a new op)");
  }
  AnalysisRequest request;
  request.text = input_text;
  request.kind = parse_kind(arguments.value("kind", ""));
  if (request.text.empty()) {
    const std::string given = arguments.value("input", "");
    std::error_code ec;
    if (!given.empty() && fs::is_regular_file(given, ec)) {
      request.text = util::read_file(given);
      if (request.kind == InputKind::Auto) request.kind = InputKind::PyTorch;
    } else {
      request.text = given;
    }
  }
  if (util::trim(request.text).empty()) return;  // Understand reports an empty request
  const bool llm = config.get_string("llm.provider") != "builtin";
  if (auto problem = input_problem(request, knowledge(data_dir()), llm))
    throw Error(ErrorKind::Usage, "kernel-dev: " + problem->message, problem->hint);
}

}  // namespace

engine::Workflow make_workflow() {
  engine::Workflow w;
  w.name = "kernel-dev";
  w.description = "Create a new CUDA kernel (forward + backward) with reference, tests, benchmark, bindings and docs";
  w.profile_schema = data_dir() / "skills/kernel_dev/profile.schema.yaml";
  w.understand = understand;
  w.act = act;
  w.verify = verify;
  w.diagnose = diagnose;
  w.summarize = workflows::kernel_dev_summary;
  w.check_request = check_request;
  return w;
}

}  // namespace liger::kernel_dev
