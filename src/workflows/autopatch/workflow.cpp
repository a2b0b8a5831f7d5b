// autopatch stages: Understand (analyse the modeling source into the model profile, optionally an
// LLM for undecided decisions, change impact against an existing generated integration), Act
// (render the integration, its test, the registry line and the README row from templates/autopatch),
// Verify (verify.cpp: py_compile, import check, instance test, convergence tests; what cannot run on
// this machine is reported as "not run: <reason>" and the verdict is then "unverified"). The
// generated files' text is rendered in render.cpp.
//
// Generated, for module <m> (the model type unless --module names another):
//   kernels/python/liger_kernels/transformers/<m>.py            the integration
//   kernels/python/liger_kernels/transformers/<m>.autopatch.yaml  the profile it was generated from
//   kernels/python/liger_kernels/transformers/__init__.py       one `_register_module(...)` line
//   tests/python/test_autopatch_<m>.py                          instance + convergence tests
//   docs/python.md                                              one row of the supported-models table
#include <mustache.hpp>

#include <algorithm>
#include <regex>
#include <set>
#include <sstream>

#include "liger/error.h"
#include "liger/input_check.h"
#include "liger/text_escape.h"
#include "liger/llm/provider.h"
#include "liger/llm/structured.h"
#include "liger/process.h"
#include "liger/util.h"
#include "liger/workflows.h"
#include "workflows/autopatch/model_analysis.h"
#include "workflows/autopatch/workflow.h"
#include "workflows/autopatch/workflow_internal.h"
#include "workflows/summaries.h"

namespace liger::autopatch {

using namespace wf;

namespace {

using kainjow::mustache::mustache;

// ---------------------------------------------------------------- input

struct Input {
  std::string model;       // path or model type
  std::string module;      // python module name
  std::string model_type;  // override
  bool modify = false;
  std::vector<std::string> kernels;  // restrict to these; empty: all the plan applies
  std::string python = "python3";
};

Input parse_input(const nlohmann::json& j) {
  Input in;
  in.model = j.value("model", std::string());
  if (in.model.empty()) throw Error(ErrorKind::Usage, "autopatch: no model given");
  in.module = j.value("module", std::string());
  in.model_type = j.value("model_type", std::string());
  in.modify = j.value("modify", false);
  if (j.contains("kernels")) {
    if (j["kernels"].is_string()) in.kernels = split_csv(j["kernels"].get<std::string>());
    else
      for (const auto& k : j["kernels"]) in.kernels.push_back(k.get<std::string>());
  }
  in.python = j.value("python", std::string("python3"));
  return in;
}

std::string sanitize_module(std::string s) {
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

// ---------------------------------------------------------------- change impact

// Compares the decisions, patch plan and mini model of two profiles (the recorded one of an
// existing integration, and the new analysis).
YAML::Node change_impact(const YAML::Node& old_doc, const YAML::Node& now) {
  YAML::Node ci;
  YAML::Node changed(YAML::NodeType::Sequence);
  auto value_text = [](const YAML::Node& doc, const std::string& key) -> std::string {
    if (!doc["decisions"] || !doc["decisions"][key] || !doc["decisions"][key]["value"]) return "(absent)";
    return emit(doc["decisions"][key]["value"]);
  };
  for (const auto& key : decision_keys()) {
    const std::string a = value_text(old_doc, key);
    const std::string b = value_text(now, key);
    if (a != b) {
      YAML::Node c;
      c["decision"] = key;
      c["was"] = a;
      c["now"] = b;
      changed.push_back(c);
    }
  }
  ci["decisions_changed"] = changed;
  auto items = [](const YAML::Node& plan, const char* which) {
    std::set<std::string> s;
    if (plan && plan[which])
      for (const auto& it : plan[which]) s.insert(it["kernel"].as<std::string>() + ":" + it["target"].as<std::string>());
    return s;
  };
  auto node_text = [](const YAML::Node& n) { return n ? emit(n) : std::string("(absent)"); };
  YAML::Node plan_changes(YAML::NodeType::Sequence);
  for (const char* which : {"apply", "declined"}) {
    auto a = items(old_doc["patch_plan"], which), b = items(now["patch_plan"], which);
    for (const auto& x : b)
      if (!a.count(x)) plan_changes.push_back(std::string(which) + " + " + x);
    for (const auto& x : a)
      if (!b.count(x)) plan_changes.push_back(std::string(which) + " - " + x);
  }
  // Params of applied items (offset, casting mode, in_place, softcap...).
  if (old_doc["patch_plan"] && now["patch_plan"])
    for (const auto& it : now["patch_plan"]["apply"])
      for (const auto& ot : old_doc["patch_plan"]["apply"])
        if (ot["kernel"].as<std::string>() == it["kernel"].as<std::string>() &&
            ot["target"].as<std::string>() == it["target"].as<std::string>() &&
            node_text(ot["params"]) != node_text(it["params"]))
          plan_changes.push_back("params of " + it["kernel"].as<std::string>() + ":" + it["target"].as<std::string>() +
                                 ": " + node_text(ot["params"]) + " -> " + node_text(it["params"]));
  ci["patch_plan_changed"] = plan_changes;
  const bool mini_changed = node_text(old_doc["mini_model"]) != node_text(now["mini_model"]);
  ci["mini_model_changed"] = mini_changed;
  const bool module_changed = changed.size() > 0 || plan_changes.size() > 0;
  YAML::Node regen(YAML::NodeType::Sequence);
  if (module_changed) regen.push_back("integration");
  if (module_changed || mini_changed) regen.push_back("test");
  ci["regenerate"] = regen;
  ci["summary"] = (module_changed || mini_changed)
                      ? std::to_string(changed.size()) + " decision(s) and " + std::to_string(plan_changes.size()) +
                            " plan item(s) changed" + (mini_changed ? ", mini model changed" : "")
                      : std::string("no change: the existing integration matches the source");
  return ci;
}

// ---------------------------------------------------------------- LLM for undecided decisions

llm::ProviderConfig provider_config(const Config* config) {
  llm::ProviderConfig out;
  if (!config) return out;
  out.kind = llm::parse_provider_kind(config->get_string("llm.provider"));
  out.base_url = config->get_string("llm.base_url");
  out.model = config->get_string("llm.model");
  out.api_key_env = config->get_string("llm.api_key_env");
  return out;
}

void fill_with_llm(StageContext& ctx, YAML::Node& doc, const ModelProfile& p, StageResult& result) {
  const auto undecided = p.undecided();
  if (undecided.empty()) return;
  const auto pc = provider_config(ctx.config);
  if (pc.kind == llm::ProviderKind::Builtin) {
    result.note("undecided (the built-in provider cannot decide them; edit the profile or use --llm): " +
                [&] { std::string s; for (const auto& k : undecided) s += (s.empty() ? "" : ", ") + k; return s; }());
    return;
  }
  ctx.progress("asking " + pc.model + " about " + std::to_string(undecided.size()) + " undecided decision(s)");
  std::string excerpts;
  {
    std::istringstream src(read_or_empty(p.source.modeling));
    int n = 0;
    for (std::string line; std::getline(src, line);) {
      ++n;
      if (excerpts.size() > 60000) break;
      excerpts += p.source.modeling.filename().string() + ":" + std::to_string(n) + ": " + line + "\n";
    }
  }
  data view;
  view.set("decisions_yaml", read_or_empty(skills_dir() / "decisions.yaml"));
  YAML::Emitter e;
  e << doc;
  view.set("profile_yaml", std::string(e.c_str()));
  view.set("excerpts", excerpts);
  mustache t(util::read_file(skills_dir() / "prompts" / "decide.md"));
  llm::StructuredRequest req;
  req.messages.push_back(llm::user_message(t.render(view)));
  req.kind = "autopatch.decide";
  req.format = llm::DocumentFormat::Yaml;
  auto answer = llm::ask_structured(ctx.llm(), req);  // recorded in the run's cassette and usage ledger
  for (const auto& key : undecided) {
    if (!answer.document.contains(key)) continue;
    const auto& a = answer.document[key];
    if (llm::is_undecided(a) || !a.contains("value")) continue;
    YAML::Node dn = doc["decisions"][key];
    dn["value"] = YAML::Load(a["value"].dump());
    dn["confidence"] = a.value("confidence", 0.5);
    YAML::Node evs(YAML::NodeType::Sequence);
    if (a.contains("evidence"))
      for (const auto& ev : a["evidence"]) evs.push_back(YAML::Load(ev.dump()));
    dn["evidence"] = evs;
    dn["notes"].push_back("decided by " + pc.model + " (LLM); the patch plan for this part was computed before and keeps it declined");
    result.note("decision " + key + " filled by the LLM");
  }
  YAML::Node und(YAML::NodeType::Sequence);
  for (const auto& key : decision_keys())
    if (doc["decisions"][key]["value"].IsMap() && doc["decisions"][key]["value"]["undecided"]) und.push_back(key);
  doc["undecided"] = und;
}

// ---------------------------------------------------------------- Understand

StageResult understand(StageContext& ctx) {
  StageResult result;
  const Input in = parse_input(ctx.input);
  ResolveOptions ro;
  ro.python = in.python;
  ctx.progress("resolving " + in.model);
  ModelSource src = resolve_model_input(in.model, ro);
  if (!in.model_type.empty()) src.model_type = in.model_type;
  ctx.progress("analysing " + src.modeling.string());
  ModelProfile p = analyse_model(src);
  YAML::Node doc = p.to_yaml();
  fill_with_llm(ctx, doc, p, result);
  // What the plan was derived from (after the LLM, whose answers keep their parts declined): Act
  // re-derives the items of any decision edited at the checkpoint (plan_edits.cpp).
  doc["patch_plan"]["derived_from"] = decision_values(doc["decisions"]);

  const std::string module = sanitize_module(in.module.empty() ? src.model_type : in.module);
  const std::string rel = std::string(kPkg) + "/" + module + ".py";
  const std::string sidecar = std::string(kPkg) + "/" + module + ".autopatch.yaml";
  const std::string existing = read_or_empty(ctx.tree_root / rel);
  YAML::Node gen;
  gen["module"] = module;
  gen["integration"] = rel;
  gen["profile_sidecar"] = sidecar;
  gen["test"] = "tests/python/test_autopatch_" + module + ".py";
  gen["registry"] = std::string(kPkg) + "/__init__.py";
  gen["readme"] = "docs/python.md";
  gen["kernels_filter"] = YAML::Node(YAML::NodeType::Sequence);
  for (const auto& k : in.kernels) gen["kernels_filter"].push_back(k);
  if (!existing.empty() && existing.find("# autopatch-profile:") == std::string::npos)
    throw Error(ErrorKind::Usage,
                "autopatch: " + rel + " exists and is a hand-written integration (no autopatch profile header)",
                "generate beside it with --module " + module + "_autopatch, or pick another model");
  if (!existing.empty()) {
    const std::string old_profile = read_or_empty(ctx.tree_root / sidecar);
    if (old_profile.empty())
      throw Error(ErrorKind::Usage, "autopatch: " + rel + " was generated but its recorded profile " + sidecar + " is missing",
                  "restore the sidecar, or delete the integration and generate it afresh");
    gen["mode"] = "modify";
    doc["change_impact"] = change_impact(YAML::Load(old_profile), doc);
    result.note("modify mode: " + doc["change_impact"]["summary"].as<std::string>());
  } else {
    if (in.modify)
      throw Error(ErrorKind::Usage, "autopatch --modify: no existing integration at " + rel,
                  "run without --modify to generate it");
    gen["mode"] = "create";
  }
  doc["generation"] = gen;
  for (const auto& w : p.warnings) result.warn(w);
  // Flagged (soft) so the report names every part kept as the model has it, and why.
  for (const auto& d : p.declined) result.warn("declined on purpose: " + d.kernel + " (" + d.target + ")", d.reason);
  for (const auto& k : in.kernels)
    if (!p.applied(k)) result.warn("--kernels names '" + k + "', which the patch plan does not apply");
  result.note("reference integration: " + p.reference_integration + " (" + p.reference_reason + ")");
  ctx.profile = doc;
  return result;
}

// ---------------------------------------------------------------- Act

// The repair for a mini model that did not build on CPU: the fixes Verify read from the test's
// diagnosis, accumulated over the attempts (run_dir/autopatch/mini_config_fixes.yaml), applied to
// the mini configuration the test is rendered with. Without a fix the attempt is refused rather
// than repeated unchanged.
YAML::Node repaired_profile(StageContext& ctx, StageResult& result, bool* changed) {
  YAML::Node doc = YAML::Clone(ctx.profile);
  *changed = false;
  const fs::path store = ctx.run_dir / "autopatch" / "mini_config_fixes.yaml";
  YAML::Node fixes = fs::exists(store) ? YAML::LoadFile(store.string()) : YAML::Node(YAML::NodeType::Map);
  bool build_failed = false;
  size_t before = fixes.size();
  for (const auto& f : ctx.previous_failures) {
    build_failed |= (f.summary + f.detail).find("MINI-CONFIG-BUILD") != std::string::npos;
    for (const auto& kv : parse_mini_config_fixes(f.detail)) fixes[kv.first.as<std::string>()] = kv.second.as<std::string>();
  }
  if (build_failed && fixes.size() == before)
    throw Error(ErrorKind::Verification,
                "autopatch: the mini model does not build on CPU and the diagnosis names no field to change, so "
                "another attempt would repeat it: " + ctx.previous_failures.front().summary,
                "read the instance test log in <run>/autopatch/, fix mini_model.attributes in the profile, then resume");
  if (fixes.size() == 0) return doc;
  doc = apply_mini_config_fixes(doc, fixes);
  for (const auto& kv : fixes)
    result.note("mini config repaired from the CPU build diagnosis: " + kv.first.as<std::string>() + " = " +
                kv.second.as<std::string>());
  fs::create_directories(store.parent_path());
  YAML::Emitter e;
  e << fixes;
  util::write_file_atomic(store, std::string(e.c_str()) + "\n");
  *changed = true;
  return doc;
}

StageResult act(StageContext& ctx) {
  StageResult result;
  bool mini_repaired = false;
  std::vector<std::string> edited;
  const YAML::Node doc = apply_decision_edits(repaired_profile(ctx, result, &mini_repaired), &edited);
  for (const auto& key : edited)
    result.note("decision " + key + " was edited at review: the patch plan follows it");
  const Plan pl = plan_of(doc);
  const YAML::Node gen = doc["generation"];
  const std::string rel = gen["integration"].as<std::string>();
  const std::string sidecar = gen["profile_sidecar"].as<std::string>();
  const std::string test_rel = gen["test"].as<std::string>();
  if (!ctx.previous_failures.empty())
    result.note("attempt " + std::to_string(ctx.attempt) + " after: " + ctx.previous_failures.front().summary +
                " (generation is deterministic: the files are re-rendered from the approved profile; edit the profile to change them)");

  const bool hand_written_owner = fs::exists(ctx.tree_root / kPkg / (pl.model_type + ".py")) && pl.module != pl.model_type &&
                                  read_or_empty(ctx.tree_root / kPkg / (pl.model_type + ".py")).find("# autopatch-profile:") == std::string::npos;
  bool regen_module = true, regen_test = true;
  if (gen["mode"].as<std::string>("create") == "modify" && doc["change_impact"]) {
    regen_module = regen_test = false;
    for (const auto& r : doc["change_impact"]["regenerate"]) {
      if (r.as<std::string>() == "integration") regen_module = true;
      if (r.as<std::string>() == "test") regen_test = true;
    }
    if (!fs::exists(ctx.tree_root / test_rel)) regen_test = true;
    // change_impact compared the analysis with the recorded profile; an edit at review is a change too.
    if (!edited.empty()) regen_module = regen_test = true;
  }
  regen_test |= mini_repaired;
  if (regen_module) {
    ctx.staging->write(rel, module_text(doc, pl, sidecar));
    YAML::Node side;
    side["generated_by"] = "liger-agent autopatch";
    side["generated_at"] = util::now_iso8601();
    side["model_type"] = doc["model_type"];
    side["source"] = doc["source"];
    side["decisions"] = doc["decisions"];
    side["patch_plan"] = doc["patch_plan"];
    side["reference_integration"] = doc["reference_integration"];
    side["mini_model"] = doc["mini_model"];
    side["kernels_filter"] = gen["kernels_filter"];
    YAML::Emitter e;
    e << side;
    ctx.staging->write(sidecar, "# The model profile " + fs::path(rel).filename().string() +
                                    " was generated from (autopatch --modify compares against it).\n" + e.c_str() + "\n");
    result.note("rendered " + rel + " (" + std::to_string(pl.apply.size()) + " patch item(s), " +
                std::to_string(pl.declined.size()) + " declined)");
  } else {
    result.note("integration unchanged (change impact: " + doc["change_impact"]["summary"].as<std::string>() + ")");
  }
  if (regen_test) {
    ctx.staging->write(test_rel, test_text(doc, pl, !hand_written_owner));
    result.note("rendered " + test_rel);
  }
  // Registry line (only when the module serves the model type; a module generated beside a
  // hand-written integration is not registered over it).
  const std::string init_rel = gen["registry"].as<std::string>();
  const std::string init_text = read_or_empty(ctx.tree_root / init_rel);
  if (init_text.empty()) throw Error(ErrorKind::Usage, "autopatch: " + init_rel + " not found in " + ctx.tree_root.string());
  if (hand_written_owner) {
    result.note("registry line skipped: model type '" + pl.model_type + "' is served by the hand-written " + pl.model_type + ".py");
  } else {
    const std::string updated = insert_sorted(init_text, kRegistryBegin, kRegistryEnd, registry_line(pl.model_type, pl.module), "_register_module(");
    if (updated != init_text) {
      ctx.staging->write(init_rel, updated);
      result.note("registered '" + pl.model_type + "' in " + init_rel);
    }
  }
  const std::string docs_rel = gen["readme"].as<std::string>();
  const std::string docs_text = read_or_empty(ctx.tree_root / docs_rel);
  if (docs_text.find(kDocsBegin) != std::string::npos) {
    const std::string updated = insert_sorted(docs_text, kDocsBegin, kDocsEnd, docs_row(doc, pl), "| `");
    if (updated != docs_text) ctx.staging->write(docs_rel, updated);
  } else {
    result.warn(docs_rel + " has no supported-models table (" + std::string(kDocsBegin) + "): README row not written");
  }
  return result;
}

std::string diagnose(const std::vector<engine::AttemptRecord>& attempts) {
  std::string out =
      "autopatch: the generated integration failed verification on every attempt. Generation is deterministic from "
      "the profile, so a persisting failure points at a profile decision (edit it and resume) or a transformers "
      "version the templates do not know.";
  for (const auto& a : attempts)
    for (const auto& h : a.hard) out += "\n- attempt " + std::to_string(a.attempt) + ": " + h.summary;
  return out;
}

}  // namespace

// Exposed for tests.
YAML::Node compute_change_impact(const YAML::Node& old_doc, const YAML::Node& now) { return change_impact(old_doc, now); }
std::string insert_registry_line(const std::string& init_text, const std::string& model_type, const std::string& module) {
  return insert_sorted(init_text, kRegistryBegin, kRegistryEnd, registry_line(model_type, module), "_register_module(");
}
std::string classify_pytest_failure(const std::string& message) { return classify_failure(message, ""); }

namespace {

// Usage errors before a run exists: a tree that is not a checkout, an unknown --kernels name, a
// --module that is no Python identifier.
void check_request(const nlohmann::json& arguments, const std::string&, const fs::path& tree, const Config&) {
  input::require_checkout(tree, {kPkg}, "--tree");
  const Input in = parse_input(arguments);
  static const std::set<std::string> known = {"rms_norm", "layer_norm", "rope", "swiglu",
                                              "geglu", "fused_linear_cross_entropy", "cross_entropy"};
  for (const auto& kernel : in.kernels)
    if (!known.count(kernel))
      throw Error(ErrorKind::Usage, "--kernels: unknown kernel '" + kernel + "'",
                  "choose from rms_norm, layer_norm, rope, swiglu, geglu, fused_linear_cross_entropy, cross_entropy");
  static const std::regex identifier("^[A-Za-z_][A-Za-z0-9_]{0,63}$");
  if (!in.module.empty() && !std::regex_match(in.module, identifier))
    throw Error(ErrorKind::Usage, "--module '" + in.module.substr(0, 80) + "' is not a Python module name",
                "use letters, digits and _ (not starting with a digit), e.g. --module llama_autopatch");
}

}  // namespace

engine::Workflow make_workflow() {
  engine::Workflow w;
  w.name = "autopatch";
  w.description = "patch a HuggingFace model with the bundled kernels: integration, registry, tests, README row";
  w.profile_schema = skills_dir() / "profile.schema.yaml";
  w.understand = understand;
  w.act = act;
  w.verify = verify;
  w.diagnose = diagnose;
  w.summarize = workflows::autopatch_summary;
  w.check_request = check_request;
  return w;
}

}  // namespace liger::autopatch

namespace liger::workflows {
void register_autopatch_workflow(engine::WorkflowRegistry& registry) { registry.add(autopatch::make_workflow()); }
}  // namespace liger::workflows
