// A decision edited at the profile checkpoint reaches the patch plan Act applies. Understand
// records the decision values the plan was derived from (patch_plan.derived_from, read-only);
// Act compares them with decisions.<key>.value and, for each decision that differs, re-derives
// the plan items that decision governs by the rules the analysis used (patch_plan.cpp):
// a part switched off is declined with the edit as its reason, an option changes the item's
// params, and a part the analysis declined is applied again only when its item carries what the
// kernel needs. An edit the plan cannot follow (a class the source does not have, a layout the
// source fixes) is refused with the field and the fix, never ignored.
#include <algorithm>
#include <set>

#include "liger/error.h"
#include "liger/profile.h"
#include "workflows/autopatch/model_analysis.h"
#include "workflows/autopatch/workflow.h"

namespace liger::autopatch {

namespace {

// A canonical one-line text, whatever style the node was loaded with.
std::string text(const YAML::Node& n) {
  if (!n || n.IsNull()) return "null";
  if (n.IsScalar()) return n.Scalar();
  std::string out;
  if (n.IsSequence()) {
    for (const auto& x : n) out += (out.empty() ? "" : ", ") + text(x);
    return "[" + out + "]";
  }
  for (const auto& kv : n) out += (out.empty() ? "" : ", ") + kv.first.Scalar() + ": " + text(kv.second);
  return "{" + out + "}";
}

[[noreturn]] void refuse(const std::string& key, const std::string& why, const std::string& fix) {
  throw Error(ErrorKind::Usage, "profile field decisions." + key + ".value: " + why, fix);
}

bool decided(const YAML::Node& v) { return v && !v.IsNull() && !profile::is_undecided(v); }

void require_one_of(const std::string& key, const YAML::Node& v, const std::set<std::string>& allowed) {
  if (v.IsScalar() && allowed.count(v.Scalar())) return;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  refuse(key, "'" + text(v).substr(0, 60) + "' is not one of " + list,
         "give one of the values skills/autopatch/decisions.yaml lists for " + key + ", then approve again");
}

struct Plan {
  std::vector<YAML::Node> apply, declined;

  explicit Plan(const YAML::Node& plan) {
    for (const auto& it : plan["apply"]) apply.push_back(YAML::Clone(it));
    for (const auto& it : plan["declined"]) declined.push_back(YAML::Clone(it));
  }
  void store(YAML::Node plan) const {
    YAML::Node a(YAML::NodeType::Sequence), d(YAML::NodeType::Sequence);
    for (const auto& it : apply) a.push_back(it);
    for (const auto& it : declined) d.push_back(it);
    plan["apply"] = a;
    plan["declined"] = d;
  }
  static std::string kernel(const YAML::Node& it) { return it["kernel"].as<std::string>(""); }
  static std::string target(const YAML::Node& it) { return it["target"].as<std::string>(""); }
  // Moves every applied item `pick` selects to declined, with `reason`; returns how many.
  template <class Pick>
  int decline(Pick pick, const std::string& reason) {
    int n = 0;
    std::vector<YAML::Node> kept;
    for (auto& it : apply) {
      if (!pick(it)) { kept.push_back(it); continue; }
      it["reason"] = reason;
      declined.push_back(it);
      ++n;
    }
    apply.swap(kept);  // never assign YAML::Nodes: operator= writes into the node it refers to
    return n;
  }
  // Moves the first declined item `pick` selects to apply (its reason dropped); null if none.
  template <class Pick>
  YAML::Node enable(Pick pick) {
    for (std::size_t i = 0; i < declined.size(); ++i) {
      if (!pick(declined[i])) continue;
      YAML::Node it = declined[i];
      std::vector<YAML::Node> rest;
      for (std::size_t j = 0; j < declined.size(); ++j)
        if (j != i) rest.push_back(declined[j]);
      declined.swap(rest);
      it.remove("reason");
      // Where the analysis puts it: before the first applied item of a later kernel kind.
      static const std::vector<std::string> order = {"rms_norm", "layer_norm", "swiglu", "geglu", "rope",
                                                     "fused_linear_cross_entropy", "cross_entropy"};
      auto rank = [&](const YAML::Node& x) { return std::find(order.begin(), order.end(), kernel(x)) - order.begin(); };
      std::vector<YAML::Node> merged;
      bool placed = false;
      for (const auto& x : apply) {
        if (!placed && rank(x) > rank(it)) { merged.push_back(it); placed = true; }
        merged.push_back(x);
      }
      if (!placed) merged.push_back(it);
      apply.swap(merged);
      return it;
    }
    return YAML::Node();
  }
  template <class Pick>
  std::vector<YAML::Node> applied(Pick pick) {
    std::vector<YAML::Node> out;
    for (auto& it : apply)
      if (pick(it)) out.push_back(it);
    return out;
  }
};

bool is_norm(const YAML::Node& it) { return Plan::kernel(it) == "rms_norm" || Plan::kernel(it) == "layer_norm"; }
bool is_gated_mlp(const YAML::Node& it) { return Plan::kernel(it) == "swiglu" || Plan::kernel(it) == "geglu"; }

// The rule patch_plan.cpp applies to pick the reference integration.
std::pair<std::string, std::string> reference_for(const YAML::Node& values) {
  auto v = [&](const char* k) { return values[k] && values[k].IsScalar() ? values[k].Scalar() : std::string(); };
  if (!v("architecture").empty() && v("architecture") != "dense")
    return {"moe", "the decoder has mixture-of-experts layers (" + v("architecture") + ")"};
  if (v("rms_norm_offset") == "1" || v("mlp_activation") == "geglu" || v("rms_norm_casting") == "gemma")
    return {"gemma", "Gemma-family norm/MLP: (1 + weight) offset, gemma casting or GeGLU"};
  return {"llama", "dense decoder with llama-style parts"};
}

class Rederive {
 public:
  Rederive(YAML::Node doc) : doc_(doc), plan_(doc["patch_plan"]) {}

  void edit(const std::string& key, const YAML::Node& was, const YAML::Node& now) {
    const std::string why = "decision " + key + " set to '" + text(now) + "' at review";
    if (key == "norm_type") norm_type(now, why);
    else if (key == "rms_norm_casting") rms_norm(key, now, why, "casting_mode");
    else if (key == "rms_norm_offset") rms_norm(key, now, why, "offset");
    else if (key == "in_place_backward") in_place(now);
    else if (key == "mlp_activation") mlp(now, why);
    else if (key == "architecture") require_one_of(key, now, {"dense", "moe", "hybrid"});  // plan_of reads it
    else if (key == "vision") require_one_of(key, now, {"true", "false"});               // the test reads it
    else if (key == "rope") rope(now, why);
    else if (key == "output_class") output_class(was, now);
    else if (key == "last_hidden_state") last_hidden_state(was, now);
    else if (key == "softcapping") softcapping(now);
    else if (key == "norm_names") norm_names(now);
  }
  void finish() { plan_.store(doc_["patch_plan"]); }

 private:
  YAML::Node doc_;
  Plan plan_;

  YAML::Node decision(const char* key) const { return doc_["decisions"][key]; }
  YAML::Node value(const char* key) const { return decision(key)["value"]; }

  void norm_type(const YAML::Node& now, const std::string& why) {
    require_one_of("norm_type", now, {"RMSNorm", "LayerNorm", "both"});
    const std::string v = now.Scalar();
    const bool rms = v != "LayerNorm", ln = v != "RMSNorm";
    // A kind the value leaves out is declined (never patched with the other kind's kernel); a kind
    // it adds needs an item the analysis could not make, so an edit that declines nothing and
    // finds no such item is refused rather than ignored.
    const int declined = plan_.decline(
        [&](const YAML::Node& it) { return Plan::kernel(it) == (rms ? "layer_norm" : "rms_norm") && (!rms || !ln); }, why);
    if (declined > 0) return;
    for (const auto& [wanted, kernel] : {std::pair{rms, "rms_norm"}, std::pair{ln, "layer_norm"}})
      if (wanted && plan_.applied([&](const YAML::Node& it) { return Plan::kernel(it) == kernel; }).empty())
        refuse("norm_type", "'" + v + "' asks for " + kernel + ", but the plan applies no " + kernel + " item",
               "the analysis found no such norm it could patch (see patch_plan.declined); to patch a class anyway, move "
               "or add its item in patch_plan.apply");
  }

  // The text model's norm class: the one decisions 2 and 3 were read from.
  std::string primary_norm() const {
    for (const char* key : {"rms_norm_casting", "rms_norm_offset"})
      if (decision(key)["details"] && decision(key)["details"]["class"]) return decision(key)["details"]["class"].as<std::string>();
    for (const auto* list : {&plan_.apply, &plan_.declined})
      for (const auto& it : *list)
        if (Plan::kernel(it) == "rms_norm") return Plan::target(it);
    return {};
  }

  void set_norm_params(YAML::Node it) const {
    const std::string offset = value("rms_norm_offset").as<std::string>("0");
    it["params"]["offset"] = std::stoi(offset);
    it["params"]["casting_mode"] = value("rms_norm_casting").as<std::string>();
    if (!it["params"]["in_place"]) {
      const YAML::Node ip = value("in_place_backward");
      it["params"]["in_place"] = decided(ip) && ip.IsScalar() && ip.Scalar() == "true";
    }
    it["params"]["init_fn"] = offset == "1" ? "zeros" : "ones";
  }

  void rms_norm(const std::string& key, const YAML::Node& now, const std::string& why, const char* param) {
    if (key == "rms_norm_casting") require_one_of(key, now, {"llama", "gemma", "none", "not_applicable"});
    else require_one_of(key, now, {"0", "1", "not_applicable"});
    if (now.Scalar() == "not_applicable") {
      plan_.decline([](const YAML::Node& it) { return Plan::kernel(it) == "rms_norm"; }, why);
      return;
    }
    const std::string cls = primary_norm();
    auto primary = [&](const YAML::Node& it) { return Plan::kernel(it) == "rms_norm" && Plan::target(it) == cls; };
    const auto on = plan_.applied(primary);
    for (auto it : on) {
      if (std::string(param) == "offset") {
        it["params"]["offset"] = std::stoi(now.Scalar());
        it["params"]["init_fn"] = now.Scalar() == "1" ? "zeros" : "ones";
      } else {
        it["params"]["casting_mode"] = now.Scalar();
      }
    }
    if (!on.empty()) return;
    const YAML::Node cast = value("rms_norm_casting"), off = value("rms_norm_offset");
    const bool both = decided(cast) && decided(off) && cast.IsScalar() && off.IsScalar() &&
                      cast.Scalar() != "not_applicable" && off.Scalar() != "not_applicable";
    if (cls.empty() || !both)
      refuse(key, "the plan has no RMSNorm item this value could apply to" +
                      std::string(cls.empty() ? " (the text model has no RMSNorm class)" : " until rms_norm_casting and rms_norm_offset are both decided"),
             cls.empty() ? "set it back to not_applicable" : "decide both values, then approve again");
    YAML::Node it = plan_.enable(primary);
    if (!it) refuse(key, "the plan has no item for " + cls, "add an rms_norm item for " + cls + " to patch_plan.apply");
    set_norm_params(it);
  }

  void in_place(const YAML::Node& now) {
    require_one_of("in_place_backward", now, {"true", "false"});
    const auto norms = plan_.applied([](const YAML::Node& it) { return Plan::kernel(it) == "rms_norm"; });
    if (norms.empty())
      refuse("in_place_backward", "the plan applies no RMSNorm, so there is no backward to run in place",
             "set it back, or apply an rms_norm item in patch_plan.apply");
    for (auto it : norms) it["params"]["in_place"] = now.Scalar() == "true";
  }

  void mlp(const YAML::Node& now, const std::string& why) {
    require_one_of("mlp_activation", now, {"swiglu", "geglu", "fused_swiglu", "other"});
    const std::string v = now.Scalar();
    if (v == "other") {
      plan_.decline(is_gated_mlp, why);
      return;
    }
    const YAML::Node details = decision("mlp_activation")["details"];
    const std::string cls = details && details["mlp_class"] ? details["mlp_class"].as<std::string>() : std::string();
    auto main = [&](const YAML::Node& it) { return is_gated_mlp(it) && Plan::target(it) == cls; };
    if (plan_.applied(main).empty()) {
      YAML::Node it = plan_.enable([&](const YAML::Node& x) { return main(x) && x["params"] && x["params"]["projections"]; });
      if (!it)
        refuse("mlp_activation", "the plan has no gated-MLP item to apply '" + v + "' to",
               "the analysis found no gated MLP class with its projections; add the item to patch_plan.apply");
    }
    for (auto it : plan_.applied(is_gated_mlp)) {
      const YAML::Node pr = it["params"]["projections"];
      const bool fused = pr && pr["gate_up"];
      if (Plan::target(it) == cls && fused != (v == "fused_swiglu"))
        refuse("mlp_activation", "'" + v + "' does not match the MLP's projections (" + text(pr) + ")",
               "one gate_up projection (fused_swiglu) or separate gate/up projections is read from the source; choose "
               "the activation only (swiglu or geglu for separate projections)");
      it["kernel"] = v == "geglu" ? "geglu" : "swiglu";
    }
  }

  void rope(const YAML::Node& now, const std::string& why) {
    require_one_of("rope", now, {"standard", "partial", "interleaved", "mrope", "complex", "custom", "none"});
    auto is_rope = [](const YAML::Node& it) { return Plan::kernel(it) == "rope"; };
    if (now.Scalar() == "standard") {
      if (plan_.applied(is_rope).empty() && !plan_.enable(is_rope))
        refuse("rope", "the plan has no rotary function to patch", "set it back to what the analysis found");
      return;
    }
    const std::string reason = why + ": only the standard (rotate-half) RoPE is patched";
    plan_.decline(is_rope, reason);
    for (auto& it : plan_.declined)
      if (is_rope(it)) it["reason"] = reason;
  }

  void output_class(const YAML::Node& was, const YAML::Node& now) {
    if (!now.IsScalar() || now.Scalar().empty())
      refuse("output_class", "not a class name", "give the causal-LM class whose forward the fused loss replaces");
    // plan_of reads the class; the loss items name its forward.
    const std::string old_forward = (was.IsScalar() ? was.Scalar() : std::string()) + ".forward";
    for (auto* list : {&plan_.apply, &plan_.declined})
      for (auto& it : *list)
        if (Plan::target(it) == old_forward) it["target"] = now.Scalar() + ".forward";
  }

  // Read-only unless undecided (schema): deciding it applies the fused loss the analysis declined
  // for want of the path.
  void last_hidden_state(const YAML::Node& was, const YAML::Node& now) {
    if (decided(was) || !decided(now)) return;
    const std::string cls = value("output_class").as<std::string>("");
    YAML::Node it = plan_.enable([&](const YAML::Node& x) {
      return Plan::kernel(x) == "fused_linear_cross_entropy" && Plan::target(x) == cls + ".forward";
    });
    if (it) it["params"]["hidden_state"] = text(now);
  }

  void softcapping(const YAML::Node& now) {
    require_one_of("softcapping", now, {"true", "false"});
    const YAML::Node details = decision("softcapping")["details"];
    if (now.Scalar() == "true" && !(details && details["config_attribute"]))
      refuse("softcapping", "true, but the analysis recorded no config attribute holding the cap",
             "soft-capping is read from the output class's forward; set it back to false");
    for (auto it : plan_.applied([](const YAML::Node& x) { return Plan::kernel(x) == "fused_linear_cross_entropy"; })) {
      if (now.Scalar() == "true") it["params"]["softcap"] = "config." + details["config_attribute"].as<std::string>();
      else if (it["params"]) it["params"].remove("softcap");
    }
  }

  // The norm items' instance attributes follow the edited lists.
  void norm_names(const YAML::Node& now) {
    const YAML::Node classes = decision("norm_names")["details"]["classes"];
    if (!now.IsMap() || !classes || !classes.IsMap())
      refuse("norm_names", "expected {decoder: [...], attention: [...], final: name} over the attributes the source assigns",
             "set it back to what the analysis found, then edit the lists");
    std::vector<std::string> attrs;
    for (const char* group : {"decoder", "attention"})
      if (now[group])
        for (const auto& a : now[group]) attrs.push_back(a.as<std::string>());
    if (now["final"] && now["final"].IsScalar() && !now["final"].Scalar().empty()) attrs.push_back(now["final"].Scalar());
    for (const auto& a : attrs)
      if (!classes[a])
        refuse("norm_names", "'" + a + "' is not a norm attribute the source assigns (details.classes lists them)",
               "remove it, or name one of the attributes in decisions.norm_names.details.classes");
    for (auto* list : {&plan_.apply, &plan_.declined})
      for (auto& it : *list) {
        if (!is_norm(it) || it["module"]) continue;
        bool known = false;
        for (const auto& kv : classes) known |= kv.second.as<std::string>("") == Plan::target(it);
        if (!known) continue;  // a vision-tower or attention norm the lists do not name
        YAML::Node list(YAML::NodeType::Sequence);
        for (const auto& a : attrs)
          if (classes[a].as<std::string>("") == Plan::target(it)) list.push_back(a);
        it["attributes"] = list;
      }
  }
};

}  // namespace

YAML::Node decision_values(const YAML::Node& decisions) {
  YAML::Node out(YAML::NodeType::Map);
  for (const auto& key : decision_keys())
    if (decisions && decisions[key]) out[key] = YAML::Clone(decisions[key]["value"]);
  return out;
}

YAML::Node apply_decision_edits(const YAML::Node& profile, std::vector<std::string>* edited) {
  YAML::Node doc = YAML::Clone(profile);
  const YAML::Node was = doc["patch_plan"] ? doc["patch_plan"]["derived_from"] : YAML::Node();
  if (!was || !was.IsMap()) return doc;  // a profile from before derived_from, or built by hand
  Rederive r(doc);
  std::vector<std::string> keys;
  for (const auto& key : decision_keys()) {
    const YAML::Node now = doc["decisions"][key] ? doc["decisions"][key]["value"] : YAML::Node();
    if (text(was[key]) == text(now)) continue;
    r.edit(key, was[key], now);
    keys.push_back(key);
  }
  if (keys.empty()) return doc;
  r.finish();
  // The reference integration follows the decisions, unless the reviewer chose it too.
  const auto before = reference_for(was), after = reference_for(decision_values(doc["decisions"]));
  if (doc["reference_integration"]["name"].as<std::string>("") == before.first && before != after) {
    doc["reference_integration"]["name"] = after.first;
    doc["reference_integration"]["reason"] = after.second;
  }
  doc["patch_plan"]["derived_from"] = decision_values(doc["decisions"]);
  if (edited) *edited = keys;
  return doc;
}

}  // namespace liger::autopatch
