// Act's text: the integration module, its test, the registry line and the README row, rendered
// from templates/autopatch with the approved profile (see workflow_internal.h).
#include <algorithm>
#include <functional>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "liger/error.h"
#include "liger/text_escape.h"
#include "liger/util.h"
#include "workflows/autopatch/model_analysis.h"
#include "workflows/autopatch/workflow_internal.h"

namespace liger::autopatch::wf {


Plan plan_of(const YAML::Node& doc) {
  Plan pl;
  pl.model_type = doc["model_type"].as<std::string>();
  pl.module = doc["generation"]["module"].as<std::string>();
  const std::string modeling_file = fs::path(doc["source"]["modeling"].as<std::string>()).stem().string();
  // Installed transformers: transformers.models.<dir>.modeling_<x>; a path: the same package by
  // convention (the generated code targets the installed library).
  std::string dir = modeling_file.rfind("modeling_", 0) == 0 ? modeling_file.substr(9) : pl.model_type;
  if (doc["source"]["resolved_from"] && doc["source"]["resolved_from"].as<std::string>("").rfind("transformers", 0) == 0)
    dir = fs::path(doc["source"]["modeling"].as<std::string>()).parent_path().filename().string();
  pl.modeling = "transformers.models." + dir + "." + modeling_file;
  const YAML::Node d = doc["decisions"];
  auto decided = [&](const char* k) { return d[k] && d[k]["value"] && !(d[k]["value"].IsMap() && d[k]["value"]["undecided"]); };
  if (!decided("output_class")) throw Error(ErrorKind::Usage, "autopatch: decision output_class is undecided");
  pl.causal_lm = d["output_class"]["value"].as<std::string>();
  // The output class may take its logits from another head (Llama4ForConditionalGeneration from
  // Llama4ForCausalLM): the analysis then planned the fused loss on that head's forward, which is
  // the class patched and tested.
  if (const YAML::Node ph = d["output_class"]["details"] ? d["output_class"]["details"]["patched_head"] : YAML::Node();
      ph && ph.IsScalar())
    for (const char* list : {"apply", "declined"})
      for (const auto& it : doc["patch_plan"][list])
        if (it["target"] && it["target"].as<std::string>("") == ph.Scalar() + ".forward") pl.causal_lm = ph.Scalar();
  if (d["output_class"]["details"] && d["output_class"]["details"]["base_model_attribute"])
    pl.base_attr = d["output_class"]["details"]["base_model_attribute"].as<std::string>();
  if (d["output_class"]["details"] && d["output_class"]["details"]["lm_head"] && d["output_class"]["details"]["lm_head"].IsScalar())
    pl.lm_head = d["output_class"]["details"]["lm_head"].as<std::string>();
  if (decided("softcapping") && d["softcapping"]["value"].as<bool>() && d["softcapping"]["details"] &&
      d["softcapping"]["details"]["config_attribute"])
    pl.softcap_attr = d["softcapping"]["details"]["config_attribute"].as<std::string>();
  // The fused loss's scalar logit factors: the applied item's params.logits_scale ("/ config.x * 0.5"),
  // which the reviewer may edit like any param (the analysis wrote it from decision 10).
  for (const auto& it : doc["patch_plan"]["apply"]) {
    if (it["kernel"].as<std::string>("") != "fused_linear_cross_entropy" || !it["params"] || !it["params"]["logits_scale"])
      continue;
    static const std::regex path(R"(^[A-Za-z_]\w{0,127}(\.[A-Za-z_]\w{0,127}){0,3}$)");
    const std::string field = "patch_plan.apply[fused_linear_cross_entropy].params.logits_scale";
    const std::string text = it["params"]["logits_scale"].as<std::string>("");
    std::istringstream words(text);
    std::string op, factor;
    while (words >> op) {
      if (op != "*" && op != "/")
        throw Error(ErrorKind::Usage, "profile field " + field + ": '" + op.substr(0, 20) + "' is not '*' or '/' in '" +
                                          text.substr(0, 80) + "'",
                    "write the factors as '<op> <factor>' pairs, e.g. '/ config.logits_scaling' or '* logit_scale * 0.5', "
                    "then approve again");
      if (!(words >> factor) || (!std::regex_match(factor, path) && !is_logit_factor_literal(factor)))
        throw Error(ErrorKind::Usage,
                    "profile field " + field + ": after '" + op + "' comes no attribute path from the head (config.x, "
                    "logit_scale, model.multiplier) or number in '" + text.substr(0, 80) + "'",
                    "write the factors as '<op> <factor>' pairs, e.g. '/ config.logits_scaling', then approve again");
      pl.logits_scale.emplace_back(op, factor);
    }
  }
  // Decision values are open in the schema (each decision has its own shape); the ones that
  // become Python names are checked here, naming the profile field.
  static const std::regex identifier("^[A-Za-z_][A-Za-z0-9_]{0,127}$");
  for (const auto& [field, value] : {std::pair<const char*, const std::string*>{"decisions.output_class.value", &pl.causal_lm},
                                     {"decisions.output_class.details.base_model_attribute", &pl.base_attr},
                                     {"decisions.output_class.details.lm_head", &pl.lm_head},
                                     {"decisions.softcapping.details.config_attribute", &pl.softcap_attr}}) {
    if (!value->empty() && !std::regex_match(*value, identifier))
      throw Error(ErrorKind::Usage,
                  std::string("profile field ") + field + " is not a Python name (pattern ^[A-Za-z_][A-Za-z0-9_]{0,127}$): '" +
                      value->substr(0, 60) + "'",
                  "edit the run's profile.yaml to give the class or attribute name, then approve again");
  }
  pl.moe = decided("architecture") && d["architecture"]["value"].as<std::string>() != "dense";
  pl.vision = decided("vision") && d["vision"]["value"].IsScalar() && d["vision"]["value"].as<std::string>() == "true";
  pl.reference = doc["reference_integration"]["name"].as<std::string>("llama");
  std::set<std::string> filter;
  for (const auto& k : doc["generation"]["kernels_filter"]) filter.insert(k.as<std::string>());
  pl.apply = YAML::Node(YAML::NodeType::Sequence);
  pl.declined = YAML::Node(YAML::NodeType::Sequence);
  for (const auto& it : doc["patch_plan"]["declined"]) pl.declined.push_back(YAML::Clone(it));
  for (const auto& it : doc["patch_plan"]["apply"]) {
    const std::string k = it["kernel"].as<std::string>();
    if (!filter.empty() && !filter.count(k)) {
      YAML::Node x = YAML::Clone(it);
      x["reason"] = "left out by --kernels";
      pl.declined.push_back(x);
    } else {
      pl.apply.push_back(YAML::Clone(it));
    }
  }
  return pl;
}

// " (logits scaled / config.logits_scaling, folded into the hidden state)" or "".
static std::string scale_note(const Plan& pl) {
  if (pl.logits_scale.empty()) return "";
  std::string s;
  for (const auto& [op, factor] : pl.logits_scale) s += " " + op + " " + factor;
  return " (logits scaled" + s + ", folded into the hidden state)";
}

bool applies(const Plan& pl, const std::string& kernel) {
  for (const auto& it : pl.apply)
    if (it["kernel"].as<std::string>() == kernel) return true;
  return false;
}

// What a plan item records beyond its kernel and target, for the docstring line: an applied
// item's note and source file; a declined item's module, attributes and params as well, so the
// reviewer reads what moving it to apply would patch.
std::string item_record(const YAML::Node& it, bool declined) {
  std::string out;
  if (declined && it["module"]) out += "; module " + it["module"].as<std::string>();
  if (declined && it["attributes"] && it["attributes"].size() > 0) out += "; attributes " + emit(it["attributes"]);
  if (declined && it["params"] && it["params"].size() > 0) out += "; params " + emit(it["params"]);
  if (!declined && it["reason"]) out += "; " + it["reason"].as<std::string>();
  if (it["source"]) out += " (read from " + it["source"].as<std::string>() + ")";
  return util::escape_code_text(out);  // inside the docstring: no quote may close it
}

std::string module_text(const YAML::Node& doc, const Plan& pl, const std::string& sidecar) {
  data view;
  view.set("module", pl.module);
  view.set("model_type", pl.model_type);
  view.set("title", title_of(pl.module));
  view.set("origin", "generated by liger-agent autopatch from " + fs::path(doc["source"]["modeling"].as<std::string>()).filename().string());
  view.set("modeling", pl.modeling);
  view.set("causal_lm", pl.causal_lm);
  view.set("base_attr", pl.base_attr);
  view.set("lm_head", pl.lm_head);
  view.set("sidecar", fs::path(sidecar).filename().string());
  view.set("reference", pl.reference);
  view.set("reference_reason", doc["reference_integration"]["reason"].as<std::string>(""));
  {
    std::string digest;
    for (const auto& key : decision_keys()) {
      const YAML::Node v = doc["decisions"][key]["value"];
      if (v.IsScalar()) digest += (digest.empty() ? "" : " ") + key + "=" + v.as<std::string>();
    }
    view.set("decisions_digest", digest);
  }
  view.set("output_module", "transformers.modeling_outputs");
  view.set("output_class", pl.moe ? "MoeCausalLMOutputWithPast" : "CausalLMOutputWithPast");
  if (pl.moe) view.set("moe", data(true));
  // A Python literal (a string or None), rendered whole: a section around a quoted value left a
  // blank line after it in the rendered SPEC.
  view.set("softcap_value", pl.softcap_attr.empty() ? std::string("None") : "\"" + pl.softcap_attr + "\"");
  if (!pl.logits_scale.empty()) {
    std::string list;
    for (const auto& [op, factor] : pl.logits_scale) list += (list.empty() ? "" : ", ") + ("(\"" + op + "\", \"" + factor + "\")");
    view.set("logits_scale", "[" + list + "]");
  }

  data norms(data::type::list), layer_norms(data::type::list), mlps(data::type::list), applied_lines(data::type::list),
      declined_lines(data::type::list), declined(data::type::list);
  std::string rope_fn = "None", rope_module = "None";
  std::vector<std::string> norm_switch, mlp_switch;
  // Values the integration uses as Python names or literals: the schema keeps `target` to one
  // line of text (a loss item's target describes it); where it is a class or a function, and
  // for the norm's params, the value must be that kind of token.
  static const std::regex python_name("^[A-Za-z_][A-Za-z0-9_]{0,127}$");
  static const std::regex number("^[-+]?[0-9]+(\\.[0-9]*)?([eE][-+]?[0-9]+)?$");
  auto require = [](const std::regex& rule, const std::string& value, const std::string& field, const char* what) {
    if (!std::regex_match(value, rule))
      throw Error(ErrorKind::Usage, "profile field " + field + " is not " + what + ": '" + value.substr(0, 60) + "'",
                  "edit the run's profile.yaml to give " + std::string(what) + ", then approve again");
  };
  std::size_t index = 0;
  for (const auto& it : pl.apply) {
    const std::string k = it["kernel"].as<std::string>(), target = it["target"].as<std::string>();
    const std::string field = "patch_plan.apply[" + std::to_string(index++) + "]";
    // The docstring is the plan as reviewed: the item's own record (where it was read, its note) too.
    const std::string record = item_record(it, false);
    auto add_applied = [&](const std::string& line) { applied_lines.push_back(line + record); };
    // A norm may be torch's own class used directly (`nn.LayerNorm`): patched on instances only.
    static const std::regex norm_name("^(?:(?:torch\\.)?nn\\.)?[A-Za-z_][A-Za-z0-9_]{0,127}$");
    if (k == "rms_norm" || k == "layer_norm")
      require(norm_name, target, field + ".target", "a Python class name (or nn.<Class>)");
    else if (k == "swiglu" || k == "geglu" || k == "rope")
      require(python_name, target, field + ".target", "a Python class or function name");
    std::vector<std::string> attrs;
    if (it["attributes"])
      for (const auto& a : it["attributes"]) attrs.push_back(a.as<std::string>());
    const YAML::Node prm = it["params"];
    for (const char* key : {"casting_mode", "init_fn"})
      if (prm && prm[key]) require(python_name, prm[key].as<std::string>(), field + ".params." + key, "a name");
    if (prm && prm["offset"]) require(number, prm["offset"].as<std::string>(), field + ".params.offset", "a number");
    // A class defined in another modeling module (the text model of a multimodal wrapper): the
    // Patcher patches it there.
    const std::string module_kv = it["module"] ? ", \"module\": " + py_str(it["module"].as<std::string>()) : std::string();
    if (k == "rms_norm") {
      data n;
      n.set("module_kv", module_kv);
      n.set("cls", target);
      n.set("attrs", py_list(attrs));
      n.set("offset", prm["offset"] ? prm["offset"].as<std::string>() : "0");
      n.set("casting_mode", prm["casting_mode"] ? prm["casting_mode"].as<std::string>() : "llama");
      n.set("in_place", prm["in_place"] && prm["in_place"].as<bool>() ? "True" : "False");
      n.set("init_fn", prm["init_fn"] ? prm["init_fn"].as<std::string>() : "ones");
      norms.push_back(n);
      add_applied(target + " -> LigerRMSNorm (offset " + n.get("offset")->string_value() + ", casting " +
                              n.get("casting_mode")->string_value() + ", in_place " + n.get("in_place")->string_value() + ")");
    } else if (k == "layer_norm") {
      data n;
      n.set("module_kv", module_kv);
      n.set("cls", target);
      n.set("attrs", py_list(attrs));
      layer_norms.push_back(n);
      add_applied(target + " -> LigerLayerNorm");
    } else if (k == "swiglu" || k == "geglu") {
      data n;
      n.set("module_kv", module_kv);
      n.set("cls", target);
      n.set("kind", k);
      std::string proj;
      const YAML::Node pr = prm["projections"];
      auto get = [&](const char* key, const char* dflt) { return pr && pr[key] ? pr[key].as<std::string>() : std::string(dflt); };
      if (pr && pr["gate_up"]) proj = "\"gate_up\": " + py_str(get("gate_up", "gate_up_proj")) + ", \"down\": " + py_str(get("down", "down_proj"));
      else
        proj = "\"gate\": " + py_str(get("gate", "gate_proj")) + ", \"up\": " + py_str(get("up", "up_proj")) +
               ", \"down\": " + py_str(get("down", "down_proj"));
      n.set("projections", proj);
      mlps.push_back(n);
      add_applied(target + ".forward -> the fused " + (k == "swiglu" ? std::string("SwiGLU") : "GeGLU") +
                              " kernel (projections kept)");
    } else if (k == "rope") {
      rope_fn = py_str(target);
      if (it["module"]) rope_module = py_str(it["module"].as<std::string>());
      add_applied(target + " -> liger_rotary_pos_emb (rotate-half)");
    } else if (k == "fused_linear_cross_entropy") {
      add_applied(pl.causal_lm + ".forward -> the fused linear cross-entropy forward" +
                              (pl.softcap_attr.empty() ? std::string() : " (soft-capping config." + pl.softcap_attr + ")") +
                              scale_note(pl));
    } else if (k == "cross_entropy") {
      add_applied("transformers' fixed_cross_entropy -> the liger cross-entropy kernel (cross_entropy=True)");
    }
  }
  for (const auto& it : pl.declined) {
    const std::string k = it["kernel"].as<std::string>(), target = it["target"].as<std::string>();
    const std::string reason = it["reason"] ? it["reason"].as<std::string>() : "";
    declined_lines.push_back(k + " (" + target + "): " + reason + item_record(it, true));
    data n;
    n.set("kernel", k);
    n.set("target", target);
    n.set("reason_repr", py_str(reason));
    declined.push_back(n);
  }
  view.set("norms", norms);
  view.set("layer_norms", layer_norms);
  view.set("mlps", mlps);
  view.set("rope_fn", rope_fn);
  view.set("rope_module", rope_module);
  view.set("applied_lines", applied_lines);
  view.set("declined_lines", declined_lines);
  view.set("declined", declined);

  // The apply function's switches: only kernels the plan applies.
  data params(data::type::list);
  auto param = [&](const std::string& name, bool dflt) {
    data p;
    p.set("name", name);
    p.set("default", dflt ? "True" : "False");
    params.push_back(p);
  };
  const bool flce = applies(pl, "fused_linear_cross_entropy");
  const bool ce = flce || applies(pl, "cross_entropy");
  if (applies(pl, "rope")) { param("rope", true); view.set("has_rope", data(true)); }
  if (ce) { param("cross_entropy", !flce); view.set("has_ce", data(true)); }
  if (flce) { param("fused_linear_cross_entropy", true); view.set("has_flce", data(true)); }
  for (const char* k : {"rms_norm", "layer_norm"})
    if (applies(pl, k)) { param(k, true); norm_switch.push_back(std::string("(\"") + k + "\", " + k + "),"); }
  for (const char* k : {"swiglu", "geglu"})
    if (applies(pl, k)) { param(k, true); mlp_switch.push_back(std::string("(\"") + k + "\", " + k + "),"); }
  view.set("params", params);
  auto join = [](const std::vector<std::string>& v) { std::string s; for (const auto& x : v) s += (s.empty() ? "" : " ") + x; return s; };
  view.set("norm_switches", join(norm_switch));
  view.set("mlp_switches", join(mlp_switch));
  return render("integration.py.mustache", view);
}

std::string test_text(const YAML::Node& doc, const Plan& pl, bool registered) {
  data view;
  if (registered) view.set("registered", data(true));
  view.set("module", pl.module);
  view.set("model_type", pl.model_type);
  view.set("title", title_of(pl.module));
  view.set("modeling", pl.modeling);
  view.set("causal_lm", pl.causal_lm);
  const YAML::Node mm = doc["mini_model"];
  view.set("config_class", mm["config_class"] ? mm["config_class"].as<std::string>() : "AutoConfig");
  // The mini config as a Python dict literal (JSON is valid Python for these values, bar bools/None).
  nlohmann::json attrs = nlohmann::json::object();
  std::function<nlohmann::json(const YAML::Node&)> conv = [&](const YAML::Node& n) -> nlohmann::json {
    if (n.IsMap()) {
      nlohmann::json o = nlohmann::json::object();
      for (const auto& kv : n) o[kv.first.as<std::string>()] = conv(kv.second);
      return o;
    }
    if (n.IsSequence()) {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& x : n) a.push_back(conv(x));
      return a;
    }
    if (n.IsNull()) return nullptr;
    const std::string s = n.as<std::string>();
    try {
      size_t pos = 0;
      long long v = std::stoll(s, &pos);
      if (pos == s.size()) return v;
    } catch (...) {
    }
    try {
      size_t pos = 0;
      double v = std::stod(s, &pos);
      if (pos == s.size()) return v;
    } catch (...) {
    }
    if (s == "true" || s == "false") return s == "true";
    return s;
  };
  if (mm["attributes"]) attrs = conv(mm["attributes"]);
  view.set("mini_config_repr", py_str(attrs.dump()));
  nlohmann::json derivations = nlohmann::json::array();
  if (mm["derivations"])
    for (const auto& d : mm["derivations"]) derivations.push_back(d.as<std::string>());
  view.set("derivations_repr", py_str(derivations.dump()));
  data kinds(data::type::list);
  for (const auto& it : pl.apply) {
    const std::string k = it["kernel"].as<std::string>();
    if (k == "rms_norm" || k == "layer_norm" || k == "swiglu" || k == "geglu") {
      data n;
      n.set("kernel", k);
      n.set("cls", it["target"].as<std::string>());
      n.set("class_module", it["module"] ? it["module"].as<std::string>() : pl.modeling);
      kinds.push_back(n);
    }
  }
  view.set("patched_classes", kinds);
  if (applies(pl, "fused_linear_cross_entropy")) view.set("has_flce", data(true));
  view.set("has_flce_py", applies(pl, "fused_linear_cross_entropy") ? "True" : "False");
  if (applies(pl, "rope")) view.set("has_rope", data(true));
  if (pl.vision) view.set("vision", data(true));
  if (pl.moe) view.set("moe", data(true));
  // The convergence tolerances are chosen per model family, the reference integration (llama /
  // gemma / moe): bf16 MoE parameters get a looser relative-norm bound (see the template).
  view.set("reference", pl.reference);
  return render("test.py.mustache", view);
}

// Inserts `line` into the sorted block between begin/end markers (idempotent).
std::string insert_sorted(const std::string& text, const std::string& begin, const std::string& end,
                          const std::string& line, const std::string& key_prefix) {
  const auto b = text.find(begin);
  const auto e = text.find(end);
  if (b == std::string::npos || e == std::string::npos || e < b)
    throw Error(ErrorKind::Usage, "autopatch: markers '" + begin + "' / '" + end + "' not found",
                "the registry/README block autopatch extends is missing; restore it");
  const auto body_start = text.find('\n', b) + 1;
  std::vector<std::string> lines;
  std::istringstream in(text.substr(body_start, e - body_start));
  for (std::string l; std::getline(in, l);)
    if (!util::trim(l).empty()) lines.push_back(l);
  auto is_key = [&](const std::string& l) { return l.rfind(key_prefix, 0) == 0; };
  // The key: the first quoted (or back-ticked) token after the prefix.
  auto key_of = [&](const std::string& l) {
    const auto start = key_prefix.size();
    const auto stop = l.find_first_of("\"`", start + 1);
    return l.substr(start, stop == std::string::npos ? std::string::npos : stop - start);
  };
  bool replaced = false;
  for (auto& l : lines)
    if (is_key(l) && key_of(l) == key_of(line)) { l = line; replaced = true; }
  if (!replaced) lines.push_back(line);
  std::stable_sort(lines.begin(), lines.end(), [&](const std::string& a, const std::string& b2) {
    const bool ka = is_key(a), kb = is_key(b2);
    if (ka != kb) return !ka;  // comments / the table head first
    return ka && key_of(a) < key_of(b2);
  });
  std::string body;
  for (const auto& l : lines) body += l + "\n";
  return text.substr(0, body_start) + body + text.substr(e);
}

std::string registry_line(const std::string& model_type, const std::string& module) {
  return "_register_module(" + py_str(model_type) + ", " + py_str(module) + ")";
}

std::string docs_row(const YAML::Node& doc, const Plan& pl) {
  std::string applied, declined;
  for (const auto& it : pl.apply) applied += (applied.empty() ? "" : ", ") + it["kernel"].as<std::string>();
  for (const auto& it : pl.declined)
    declined += (declined.empty() ? "" : "; ") + it["kernel"].as<std::string>() + " (" + it["target"].as<std::string>() + ")";
  (void)doc;
  return "| `" + pl.model_type + "` | `liger_kernels.transformers." + pl.module + "` | " + applied + " | " +
         (declined.empty() ? "-" : declined) + " | autopatch (" + pl.reference + " reference) |";
}

}  // namespace liger::autopatch::wf
