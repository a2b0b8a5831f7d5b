// kernel-dev: Understand (analyser through the LLM layer) -> Act (render + list inserts: act.cpp) ->
// Verify (build, reference tests, GPU tests, benchmarks vs copy / eager PyTorch / closest kernel:
// verify.cpp). Here: the tool runner, profile YAML <-> JSON, the helpers the stages share
// (workflow_internal.h), Understand, the usage checks and the registration.
#include "workflows/kernel_dev/workflow.h"

#include <fmt/format.h>

#include <algorithm>
#include <mutex>
#include <regex>

#include "liger/error.h"
#include "liger/input_check.h"
#include "liger/llm/builtin.h"
#include "liger/llm/provider.h"
#include "liger/llm/structured.h"
#include "liger/profile.h"
#include "liger/util.h"
#include "liger/workflows.h"
#include "workflows/kernel_dev/workflow_internal.h"
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
// Those the stage files share are declared in workflow_internal.h.
namespace stages {

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

namespace {

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

}  // namespace

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
    if (problems.empty() && p.complete() && (p.tier == 1 || p.tier == 2 || p.fused_linear))
      render(p, data_dir() / "templates/kernel_dev");
  } catch (const std::exception& e) {
    problems.push_back(e.what());
  }
  return problems;
}

namespace {

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

}  // namespace

// The profile the later stages use: the approved profile.yaml, or the corrected one an LLM
// gave after a failed Verify (kept in <run>/kernel-dev/profile.current.yaml).
KernelProfile current_profile(const StageContext& ctx) {
  fs::path corrected = work_dir(ctx) / "profile.current.yaml";
  if (ctx.attempt > 1 && fs::is_regular_file(corrected)) return profile_from_yaml(profile::load_yaml_file(corrected));
  return profile_from_yaml(ctx.profile);
}

}  // namespace stages

// The stages and their helpers, for builtin_understand, check_request and make_workflow below.
using namespace stages;

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

// ------------------------------------------------------------------------------ Understand
namespace stages {

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

}  // namespace stages

namespace {

// Usage errors before a run exists: the tree, the --name/--modify values, and an input no
// decision can rescue (see input_problem).
void check_request(const nlohmann::json& arguments, const std::string& input_text, const fs::path& tree,
                   const Config& config) {
  input::require_checkout(tree, {"kernels/ops.yaml"}, "--tree");
  // Act adds the op to kernels/ops.yaml by editing its text: a file that does not parse (a bad
  // merge, a truncated write) would be edited into a bigger mess and the run would "complete".
  {
    const fs::path ops = tree / "kernels/ops.yaml";
    const std::string fix = "fix " + ops.string() + " (`git diff kernels/ops.yaml` shows what changed; `git checkout "
                            "kernels/ops.yaml` restores it), then run kernel-dev again";
    YAML::Node root;
    try {
      root = profile::load_yaml_file(ops);
    } catch (const Error& e) {
      throw Error(ErrorKind::Usage, std::string("kernel-dev adds the op to kernels/ops.yaml, which cannot be read: ") + e.what(), fix);
    }
    const YAML::Node list = root.IsMap() ? root["ops"] : root;
    if (!root.IsDefined() || root.IsNull() || !list || !(list.IsSequence() || list.IsNull()))
      throw Error(ErrorKind::Usage, ops.string() + " is not the op list kernel-dev adds to (expected `ops:` followed by a list of ops)", fix);
  }
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
  if (const std::string name = arguments.value("name", ""); !name.empty()) {
    if (const std::string problem = reserved_op_name_problem(op_name_for(name)); !problem.empty())
      throw Error(ErrorKind::Usage, "--name '" + name + "' gives the op name '" + op_name_for(name) + "', which " + problem,
                  "pick another --name, e.g. --name " + op_name_for(name) + "_op");
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
