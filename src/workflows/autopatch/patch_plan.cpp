// The patch plan: kernels applied and parts declined (with the reason), and the reference
// integration Act follows.
#include "workflows/autopatch/analysis_internal.h"

#include <algorithm>
#include <map>
#include <set>

namespace liger::autopatch::detail {

// The text model's norm, MLP and RoPE kernels, read from this file's decoder.
void Analyzer::plan_text_kernels() {
  const Decision& nt = d("norm_type");
  const Decision& cm = d("rms_norm_casting");
  const Decision& off = d("rms_norm_offset");
  const Decision& ip = d("in_place_backward");
  auto names_of = [&](const std::string& cls) {
    std::vector<std::string> out;
    for (const auto& na : text_norm_attrs())
      if (na.cls == cls) out.push_back(na.attr);
    return out;
  };
  // A norm whose weight exists only under a condition of its constructor (Gemma 4's
  // `if self.with_scale: self.weight = ...`, built without one for the value norm) cannot be
  // replaced class-wide: the library RMSNorm always creates and multiplies by a weight.
  auto optional_weight = [](const ClassDef* c) -> std::string {
    const FunctionDef* init = c ? c->method("__init__") : nullptr;
    if (!init || init->body.empty()) return "";
    const int base = init->body.front().depth;
    for (size_t i = 0; i < init->body.size(); ++i) {
      const Statement& st = init->body[i];
      if (st.text.rfind("self.weight=", 0) != 0 || st.depth <= base) continue;
      std::string cond = "a condition";
      for (size_t k = i; k-- > 0;)
        if (init->body[k].depth < st.depth && init->body[k].is_compound_header()) { cond = init->body[k].text; break; }
      return c->name + " creates its weight only under `" + cond + "` (line " + std::to_string(st.line) +
             "): instances built without it have no weight, and the library RMSNorm always multiplies by one, "
             "so the class is kept";
    }
    return "";
  };
  if (const NormClass* rms = primary_norm(NormKind::Rms)) {
    PatchItem it;
    it.kernel = "rms_norm";
    it.target = rms->name;
    it.attributes = names_of(rms->name);
    const std::string optional = optional_weight(rms->cls);
    if (!optional.empty()) {
      it.reason = optional;
      p.declined.push_back(it);
    } else if (cm.decided() && off.decided() && cm.value_string() != "not_applicable") {
      it.params["offset"] = off.value.as<int>();
      it.params["casting_mode"] = cm.value_string();
      it.params["in_place"] = ip.decided() ? ip.value.as<bool>() : false;
      it.params["init_fn"] = off.value.as<int>() == 1 ? "zeros" : "ones";
      p.apply.push_back(it);
    } else {
      it.reason = "the norm's arithmetic does not match the library RMSNorm: " +
                  (!cm.decided() ? cm.undecided : off.undecided);
      p.declined.push_back(it);
    }
    // Other RMSNorm classes used in the text model (e.g. a weightless qk-norm).
    std::set<std::string> others;
    for (const auto& na : text_norm_attrs())
      if (na.cls != rms->name && s.norms.count(na.cls) && s.norms.at(na.cls).kind == NormKind::Rms &&
          !s.norms.at(na.cls).gated())
        others.insert(na.cls);
    for (const auto& o : others) {
      PatchItem x;
      x.kernel = "rms_norm";
      x.target = o;
      x.attributes = names_of(o);
      RmsArith r = rms_arithmetic(*s.norms.at(o).cls);
      const std::string optional = optional_weight(s.norms.at(o).cls);
      if (!optional.empty()) {
        x.reason = optional;
        p.declined.push_back(x);
      } else if (r.casting.empty() || r.offset < 0 || !r.has_weight) {
        x.reason = o + ": " + (r.why.empty() ? "arithmetic not recognised" : r.why);
        p.declined.push_back(x);
      } else {
        x.params["offset"] = r.offset;
        x.params["casting_mode"] = r.casting;
        x.params["in_place"] = ip.decided() ? ip.value.as<bool>() : false;
        p.apply.push_back(x);
      }
    }
  }
  // Gated norms (norm(x, gate) * act(gate)) keep their own class, whatever else is patched.
  for (const auto& g : gated_norms()) {
    PatchItem x;
    x.kernel = g.nc->kind == NormKind::Layer ? "layer_norm" : "rms_norm";
    x.target = g.nc->name;
    x.attributes = g.attrs;
    x.reason = g.nc->gated_why;
    p.declined.push_back(x);
  }
  if (nt.details["layer_norm"]) {
    YAML::Node ln = nt.details["layer_norm"];
    PatchItem it;
    it.kernel = "layer_norm";
    it.target = ln["class"].as<std::string>();
    it.attributes = names_of(it.target);
    if (ln["weight_offset"].as<int>() != 0) {
      it.reason = it.target + " normalises with (weight + 1) (LayerNorm1P); the library LayerNorm has no weight offset";
      p.declined.push_back(it);
    } else if (!ln["bias"].as<bool>()) {
      it.reason = it.target + " has no bias parameter" +
                  (ln["no_bias"] ? " (" + ln["no_bias"].as<std::string>() + ")" : std::string()) +
                  "; the library LayerNorm computes y = x_hat * w + b with a bias tensor";
      p.declined.push_back(it);
    } else {
      p.apply.push_back(it);
    }
  }
  // MLP
  const Decision& mlp = d("mlp_activation");
  const Decision& arch = d("architecture");
  if (mlp.decided()) {
    std::string k = mlp.value_string();
    PatchItem it;
    it.target = mlp.details["mlp_class"].as<std::string>();
    const std::string mlp_attr = arch.details["decoder_attribute"] ? arch.details["decoder_attribute"].as<std::string>() : "mlp";
    // An MLP written inline in the decoder layer has no attribute of its own.
    if (!mlp_attr.empty()) it.attributes = {mlp_attr};
    it.params["projections"] = mlp.details["projections"];
    // The MLP decision fell back to fused 3-D experts (no dense or shared-expert MLP module): the
    // experts item below declines them; do not also apply the gated-MLP forward to that class.
    // (Or the class one level down that holds the 3-D parameters: DBRX's DbrxExpertGLU.)
    const YAML::Node experts = arch.details["experts"];
    const bool mlp_is_fused_experts =
        experts && experts["layout"] && experts["layout"].IsScalar() && experts["layout"].as<std::string>() == "fused_3d" &&
        ((experts["class"] && experts["class"].as<std::string>() == it.target) ||
         (experts["parameters_class"] && experts["parameters_class"].as<std::string>() == it.target));
    if (mlp_is_fused_experts) {
      // declined below with the experts' reason
    } else if (mlp.details["scaled"] && (k == "swiglu" || k == "fused_swiglu" || k == "geglu")) {
      it.kernel = k == "geglu" ? "geglu" : "swiglu";
      it.reason = mlp.details["scaled"].as<std::string>();
      p.declined.push_back(it);
    } else if (k == "swiglu" || k == "fused_swiglu") {
      it.kernel = "swiglu";
      if (k == "fused_swiglu") it.params["fused_gate_up"] = true;
      p.apply.push_back(it);
    } else if (k == "geglu") {
      it.kernel = "geglu";
      p.apply.push_back(it);
    } else {
      it.kernel = "swiglu";
      it.reason = mlp.notes.empty() ? "the MLP is not a gated SiLU/GELU-tanh MLP" : mlp.notes.front();
      p.declined.push_back(it);
    }
    if (arch.details["experts"] && arch.details["experts"]["layout"] &&
        arch.details["experts"]["layout"].IsScalar()) {
      std::string layout = arch.details["experts"]["layout"].as<std::string>();
      if (layout == "fused_3d") {
        PatchItem x;
        x.kernel = k == "geglu" ? "geglu" : "swiglu";
        x.target = arch.details["experts"]["class"].as<std::string>();
        x.reason = "experts are stored as fused 3-D parameter tensors and computed in a loop "
                   "or grouped GEMM; the library gated-MLP kernel replaces per-expert MLP modules";
        p.declined.push_back(x);
      } else if (layout == "module_list" && arch.details["experts"]["expert_class"] &&
                 arch.details["experts"]["expert_class"].as<std::string>() != it.target) {
        const ClassDef* ec = m.find_class(arch.details["experts"]["expert_class"].as<std::string>());
        if (ec) {
          MlpInfo ei = analyse_mlp(*ec);
          PatchItem x;
          x.target = ec->name;
          x.attributes = {"experts"};
          x.kernel = ei.kind == "geglu" ? "geglu" : "swiglu";
          if ((ei.kind == "swiglu" || ei.kind == "geglu") && ei.scaled.empty()) {
            YAML::Node pr;
            if (!ei.gate.empty()) pr["gate"] = ei.gate;
            if (!ei.up.empty()) pr["up"] = ei.up;
            if (!ei.down.empty()) pr["down"] = ei.down;
            x.params["projections"] = pr;
            p.apply.push_back(x);
          } else {
            x.reason = !ei.scaled.empty() ? ei.scaled : ei.why.empty() ? "expert MLP not recognised" : ei.why;
            p.declined.push_back(x);
          }
        }
      }
    }
  }
  // RoPE
  const Decision& rope = d("rope");
  if (rope.decided()) {
    std::string v = rope.value_string();
    PatchItem it;
    it.kernel = "rope";
    it.target = rope.details["functions"] && rope.details["functions"].size() > 0
                    ? rope.details["functions"][0].as<std::string>() : "apply_rotary_pos_emb";
    static const std::map<std::string, std::string> why = {
        {"partial", "only part of the head dim is rotated (partial_rotary_factor / rotary_dim); the library RoPE rotates the whole head dim"},
        {"interleaved", "pairs are interleaved (x[..., ::2], x[..., 1::2]); the library RoPE uses the rotate-half layout"},
        {"mrope", "multimodal M-RoPE (mrope_section splits the frequencies over t/h/w positions); no library kernel"},
        {"complex", "rotation done with complex numbers (torch.view_as_complex, Llama4 style); no library kernel"},
        {"custom", "the rotary function is not the rotate-half form; the model keeps its own"},
        {"none", "the model has no rotary embedding"}};
    if (v == "standard" && rope.details["signature_mismatch"]) {
      it.reason = "the rotate-half form, but " + rope.details["signature_mismatch"].as<std::string>() +
                  " does not take (q, k, cos, sin, ...) as liger_rotary_pos_emb, its replacement, does; the model keeps its own";
      p.declined.push_back(it);
    } else if (v == "standard") {
      if (rope.details["partial_capable"]) it.params["guard"] = "config.partial_rotary_factor == 1.0";
      p.apply.push_back(it);
    } else {
      it.reason = why.count(v) ? why.at(v) : "unsupported RoPE variant";
      if (v == "mrope" && rope.details["mrope_in"])
        it.reason += "; here " + rope.details["mrope_in"].as<std::string>() +
                     " recomposes cos/sin from the sections before " + it.target + " is called";
      p.declined.push_back(it);
    }
  }
}

void Analyzer::plan() {
  if (s.external_text) plan_external_text();
  else plan_text_kernels();
  plan_vision_parts();
  const Decision& cm = d("rms_norm_casting");
  const Decision& off = d("rms_norm_offset");
  const Decision& mlp = d("mlp_activation");
  const Decision& arch = d("architecture");
  // Loss
  const Decision& last = d("last_hidden_state");
  const Decision& cap = d("softcapping");
  if (output_cls) {
    PatchItem it;
    it.kernel = "fused_linear_cross_entropy";
    it.target = output_cls->name + ".forward";
    const HeadInfo* oh = head_of(output_cls);
    it.attributes = {oh ? oh->head_attr : std::string("lm_head")};
    // An encoder-decoder head (BART, T5, Whisper: forward(..., decoder_input_ids, ...)) builds its
    // decoder inputs from the labels; the shared forward runs a decoder-only base model.
    const FunctionDef* head_fwd = output_cls->method("forward");
    const bool seq2seq = head_fwd && std::find(head_fwd->params.begin(), head_fwd->params.end(), "decoder_input_ids") !=
                                         head_fwd->params.end();
    if (seq2seq) {
      it.reason = output_cls->name + " is an encoder-decoder head (its forward takes decoder_input_ids); the "
                  "fused-loss forward runs a decoder-only base model";
      p.declined.push_back(it);
    } else if (!last.decided()) {
      it.reason = "the path to the last hidden state is undecided: " + last.undecided;
      p.declined.push_back(it);
    } else if (last.details["logits_transforms"] && last.details["logits_transforms"].size() > 0 &&
               !last.details["logits_scale"]) {
      it.reason = "the logits are transformed before the loss (" +
                  (last.details["logits_transform_unfoldable"]
                       ? last.details["logits_transform_unfoldable"].as<std::string>()
                       : last.details["logits_transforms"][0].as<std::string>()) +
                  "); the fused loss kernel has no such option";
      p.declined.push_back(it);
      PatchItem ce;
      ce.kernel = "cross_entropy";
      ce.target = "loss function of " + output_cls->name;
      p.apply.push_back(ce);
    } else {
      if (cap.decided() && cap.value.as<bool>())
        it.params["softcap"] = "config." + cap.details["config_attribute"].as<std::string>();
      it.params["hidden_state"] = last.value_string();
      if (last.details["logits_scale"]) {
        std::string scale;
        for (const auto& x : last.details["logits_scale"])
          scale += (scale.empty() ? "" : " ") + x["op"].as<std::string>() + " " + x["factor"].as<std::string>();
        it.params["logits_scale"] = scale;
      }
      it.params["logits_to_keep"] = last.details["logits_to_keep"].as<bool>();
      p.apply.push_back(it);
    }
    plan_heads();
  }
  // Reference integration.
  bool gemma_family = (off.decided() && off.value_string() == "1") ||
                      (mlp.decided() && mlp.value_string() == "geglu") ||
                      (cm.decided() && cm.value_string() == "gemma");
  if (arch.decided() && arch.value_string() != "dense") {
    p.reference_integration = "moe";
    p.reference_reason = "the decoder has mixture-of-experts layers (" + arch.value_string() + ")";
  } else if (gemma_family) {
    p.reference_integration = "gemma";
    p.reference_reason = "Gemma-family norm/MLP: (1 + weight) offset, gemma casting or GeGLU";
  } else {
    p.reference_integration = "llama";
    p.reference_reason = "dense decoder with llama-style parts";
  }
}

// The causal-LM heads other than the output class: the integration replaces one forward (the
// output class's), so every other head is declined with that reason and what it would need.
void Analyzer::plan_heads() {
  for (const auto& h : heads) {
    if (h.cls == output_cls) continue;
    PatchItem x;
    x.kernel = "fused_linear_cross_entropy";
    x.target = h.cls->name + ".forward";
    x.attributes = {h.head_attr};
    x.reason = "the integration replaces the forward of one causal-LM head, " + output_cls->name + "; " + h.cls->name +
               " keeps its own forward and loss";
    if (!h.undecided.empty()) x.reason += " (and its path to the last hidden state is undecided: " + h.undecided + ")";
    else if (h.softcaps())
      x.reason += " (it soft-caps its logits with config." + (h.cap_attr.empty() ? std::string("<attribute>") : h.cap_attr) +
                  ", which its own forward keeps applying)";
    else if (!h.transforms.empty())
      x.reason += " (it transforms its logits: " + h.transforms.front() + ")";
    p.declined.push_back(x);
  }
  YAML::Node hs = d("output_class").details["heads"];
  if (hs)
    for (auto n : hs) {
      const std::string cls = n["class"].as<std::string>();
      bool patched = false;
      for (const auto& it : p.apply)
        if (it.kernel == "fused_linear_cross_entropy" && it.target == cls + ".forward") patched = true;
      n["status"] = patched ? "patched" : "declined";
    }
}

// Vision-tower norms and MLPs: recorded in decision 1's details and declined in the plan (the
// integration patches the text model; a vision class that is also a patched text class gets
// the same kernel, which computes the same arithmetic, and is recorded as patched).
void Analyzer::plan_vision_parts() {
  static const std::set<std::string> mlp_attrs = {"mlp", "feed_forward", "ffn", "mlp_block"};
  std::map<std::string, std::pair<std::string, std::vector<std::string>>> norms, mlps;  // class -> (owner, attrs)
  std::vector<std::string> norm_order, mlp_order;
  for (const auto& c : m.classes) {
    bool vision = contains(c.name, "Vision") || contains(c.name, "Visual") ||
                  (contains(c.name, "Siglip") && !contains(c.name, "Text"));
    if (!vision) continue;
    for (const auto& na : norm_attrs(s, c)) {
      if (!norms.count(na.cls)) { norms[na.cls].first = c.name; norm_order.push_back(na.cls); }
      auto& v = norms[na.cls].second;
      if (std::find(v.begin(), v.end(), na.attr) == v.end()) v.push_back(na.attr);
    }
    for (const auto& a : c.init_assignments()) {
      const std::string attr = a.targets.front().substr(5);
      if (!mlp_attrs.count(attr)) continue;
      for (const auto& l : local_classes_in(s, a)) {
        if (s.norms.count(l)) continue;
        if (!mlps.count(l)) { mlps[l].first = c.name; mlp_order.push_back(l); }
        mlps[l].second.push_back(attr);
      }
    }
  }
  auto applied_to = [&](const std::string& kernel_prefix, const std::string& cls) -> const PatchItem* {
    for (const auto& it : p.apply)
      if (it.target == cls && it.module.empty() && it.kernel.rfind(kernel_prefix, 0) == 0) return &it;
    return nullptr;
  };
  YAML::Node vt(YAML::NodeType::Sequence);
  for (const auto& cls : norm_order) {
    const NormClass* nc = norm_of_callee(s, cls);
    const auto& [owner, attrs] = norms[cls];
    YAML::Node n;
    n["class"] = cls;
    n["kind"] = nc && nc->kind == NormKind::Rms ? "RMSNorm" : "LayerNorm";
    n["in"] = owner;
    const PatchItem* same = applied_to(nc && nc->kind == NormKind::Rms ? "rms_norm" : "layer_norm", cls);
    n["status"] = same ? "patched" : "declined";
    vt.push_back(n);
    if (same) continue;
    PatchItem x;
    x.kernel = nc && nc->kind == NormKind::Rms ? "rms_norm" : "layer_norm";
    x.target = cls;
    x.attributes = attrs;
    x.reason = "vision tower (" + owner + "): the integration patches the text model's kernels; the vision "
               "tower keeps its own " + cls;
    p.declined.push_back(x);
  }
  if (vt.size() > 0) d("norm_type").details["vision_tower"] = vt;
  YAML::Node vm(YAML::NodeType::Sequence);
  for (const auto& cls : mlp_order) {
    const auto& [owner, attrs] = mlps[cls];
    const PatchItem* same = applied_to("swiglu", cls);
    if (!same) same = applied_to("geglu", cls);
    YAML::Node n;
    n["class"] = cls;
    n["in"] = owner;
    n["status"] = same ? "patched" : "declined";
    vm.push_back(n);
    if (same) continue;
    PatchItem x;
    x.kernel = "swiglu";
    x.target = cls;
    x.attributes = attrs;
    x.reason = "vision tower (" + owner + "): the integration patches the text model's kernels; the vision "
               "tower keeps its own " + cls;
    p.declined.push_back(x);
  }
  if (vm.size() > 0) d("mlp_activation").details["vision_tower"] = vm;
}

}  // namespace liger::autopatch::detail
