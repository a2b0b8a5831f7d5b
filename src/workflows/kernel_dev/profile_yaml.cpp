// The kernel profile as YAML: what Understand writes for the maintainer to review and edit, and
// how an edited profile is read back (every reviewer-editable field drives the generated code).
#include <sstream>
#include <stdexcept>

#include "workflows/kernel_dev/profile.h"
#include "workflows/kernel_dev/input_split.h"
#include "workflows/kernel_dev/segment.h"
#include "workflows/kernel_dev/tier3.h"

namespace liger::kernel_dev {

// ============================================================================================
// YAML

namespace {

YAML::Node undecided_node(const std::string& reason) {
  YAML::Node n;
  n["undecided"] = reason;
  return n;
}

// `with_samples`: the inputs of an op whose tests draw them (Tier 1) carry inputs[].sample.
YAML::Node tensors_node(const std::vector<TensorSpec>& tensors, bool with_samples = false) {
  YAML::Node list(YAML::NodeType::Sequence);
  for (const auto& t : tensors) {
    YAML::Node n;
    n["name"] = t.name;
    n["shape"] = t.shape;
    n["dtype"] = t.dtype;
    n["description"] = t.description;
    if (with_samples) n["sample"] = t.sample.empty() ? "normal" : t.sample;
    if (!t.split.empty()) n["split"] = t.split;
    list.push_back(n);
  }
  return list;
}

YAML::Node params_node(const std::vector<ParameterSpec>& params, bool learnable) {
  YAML::Node list(YAML::NodeType::Sequence);
  for (const auto& p : params) {
    YAML::Node n;
    n["name"] = p.name;
    n["shape"] = p.shape;
    n[learnable ? "init" : "default"] = p.value;
    n["description"] = p.description;
    list.push_back(n);
  }
  return list;
}

template <typename T, typename Fn>
void put(YAML::Node& root, const KernelProfile& p, const char* key, const std::optional<T>& value, Fn&& build) {
  auto u = p.undecided.find(key);
  if (u != p.undecided.end()) {
    root[key] = undecided_node(u->second);
  } else if (value) {
    root[key] = build(*value);
  } else {
    root[key] = undecided_node("not analysed");
  }
}

std::string str(const YAML::Node& n, const char* key) { return n[key] ? n[key].as<std::string>() : ""; }

bool undecided_in(const YAML::Node& n, const char* key, KernelProfile& p) {
  if (n[key] && n[key].IsMap() && n[key]["undecided"]) {
    p.undecided[key] = n[key]["undecided"].as<std::string>();
    return true;
  }
  return false;
}

std::vector<TensorSpec> tensors_from(const YAML::Node& n) {
  std::vector<TensorSpec> out;
  if (!n || !n.IsSequence()) return out;
  for (const auto& t : n)
    out.push_back({str(t, "name"), str(t, "shape"), str(t, "dtype"), str(t, "description"), str(t, "sample"), str(t, "split")});
  return out;
}

std::vector<ParameterSpec> params_from(const YAML::Node& n, bool learnable) {
  std::vector<ParameterSpec> out;
  if (!n || !n.IsSequence()) return out;
  for (const auto& t : n) {
    ParameterSpec p;
    p.name = str(t, "name");
    p.learnable = learnable;
    p.shape = str(t, "shape");
    const char* key = learnable ? "init" : "default";
    p.value = t[key] ? t[key].as<double>() : 0.0;
    p.description = str(t, "description");
    out.push_back(p);
  }
  return out;
}

std::vector<std::string> strings_from(const YAML::Node& n) {
  std::vector<std::string> out;
  if (n && n.IsSequence())
    for (const auto& s : n) out.push_back(s.as<std::string>());
  return out;
}

}  // namespace

YAML::Node profile_to_yaml(const KernelProfile& p) {
  YAML::Node root;
  YAML::Node identity;
  identity["op_name"] = p.op_name;
  identity["display_name"] = p.display_name;
  identity["c_prefix"] = p.c_prefix;
  identity["cpp_namespace"] = p.cpp_namespace;
  identity["python_functional"] = p.python_functional;
  identity["python_module"] = p.python_module;
  identity["python_function"] = p.python_function;
  root["identity"] = identity;
  YAML::Node source;
  source["kind"] = p.source_kind;
  source["text"] = p.source_text;
  if (!p.source_entry.empty()) source["entry"] = p.source_entry;
  source["resolved_from"] = p.resolved_from;
  root["source"] = source;
  if (p.undecided.count("tier")) {
    root["tier"] = undecided_node(p.undecided.at("tier"));
  } else {
    YAML::Node tier;
    tier["value"] = p.tier;
    tier["reason"] = p.tier_reason;
    root["tier"] = tier;
  }
  if (p.undecided.count("closest_kernel")) {
    root["closest_kernel"] = undecided_node(p.undecided.at("closest_kernel"));
  } else {
    YAML::Node closest;
    closest["name"] = p.closest_kernel;
    closest["reason"] = p.closest_reason;
    root["closest_kernel"] = closest;
  }
  // Tier-1 and Tier-2 (row) tests draw each input from its inputs[].sample; segment and fused-loss
  // tests draw normal inputs.
  const bool sampled = p.tier == 1 || (p.tier == 2 && !p.segment);
  root["inputs"] = p.undecided.count("inputs") ? undecided_node(p.undecided.at("inputs")) : tensors_node(p.inputs, sampled);
  root["outputs"] = p.undecided.count("outputs") ? undecided_node(p.undecided.at("outputs")) : tensors_node(p.outputs);
  root["learnable_parameters"] = p.undecided.count("learnable_parameters")
                                     ? undecided_node(p.undecided.at("learnable_parameters"))
                                     : params_node(p.learnable_parameters, true);
  root["module_parameters"] = params_node(p.module_parameters, false);
  put(root, p, "forward", p.forward, [](const ForwardSpec& f) {
    YAML::Node n;
    n["expression"] = f.expression;
    n["cuda"] = f.cuda;
    n["reference"] = f.reference;
    return n;
  });
  put(root, p, "precision", p.precision, [](const std::vector<PrecisionNote>& notes) {
    YAML::Node list(YAML::NodeType::Sequence);
    for (const auto& note : notes) {
      YAML::Node n;
      n["operation"] = note.operation;
      n["requirement"] = note.requirement;
      n["reason"] = note.reason;
      list.push_back(n);
    }
    return list;
  });
  put(root, p, "saved_for_backward", p.saved_for_backward, [](const SavedSpec& s) {
    YAML::Node n;
    n["saved"] = s.saved;
    n["recomputed"] = s.recomputed;
    n["reason"] = s.reason;
    return n;
  });
  put(root, p, "gradients", p.gradients, [](const std::vector<GradientSpec>& gradients) {
    YAML::Node list(YAML::NodeType::Sequence);
    for (const auto& g : gradients) {
      YAML::Node n;
      n["wrt"] = g.wrt;
      n["kind"] = g.kind;
      n["derivative"] = g.expression;
      n["reduction"] = g.reduction;
      if (g.reduction) n["reduction_note"] = g.reduction_note;
      list.push_back(n);
    }
    return list;
  });
  put(root, p, "backward", p.backward, [](const BackwardSpec& b) {
    YAML::Node n;
    n["cuda"] = b.cuda;
    n["reference"] = b.reference;
    return n;
  });
  put(root, p, "tiling", p.tiling, [](const TilingSpec& t) {
    YAML::Node n;
    n["strategy"] = t.strategy;
    n["threads_per_block"] = t.threads_per_block;
    n["vector_bytes"] = t.vector_bytes;
    n["rows_per_block"] = t.rows_per_block;
    if (t.backward_threads_per_block) n["backward_threads_per_block"] = t.backward_threads_per_block;
    if (t.backward_rows_per_block) n["backward_rows_per_block"] = t.backward_rows_per_block;
    n["grid"] = t.grid;
    n["parameter_gradients"] = t.parameter_gradients;
    n["reason"] = t.reason;
    return n;
  });
  put(root, p, "benchmark", p.benchmark, [](const BenchmarkSpec& b) {
    YAML::Node n;
    n["variable"] = b.variable;
    n["values"] = b.values;
    YAML::Node fixed;
    for (const auto& [k, v] : b.fixed) fixed[k] = v;
    n["fixed"] = fixed;
    n["dtypes"] = b.dtypes;
    n["modes"] = b.modes;
    n["baselines"] = b.baselines;
    n["metrics"] = b.metrics;
    return n;
  });
  put(root, p, "tolerances", p.tolerances, [](const std::vector<ToleranceSpec>& tolerances) {
    YAML::Node list(YAML::NodeType::Sequence);
    for (const auto& t : tolerances) {
      YAML::Node n;
      n["dtype"] = t.dtype;
      n["applies_to"] = t.applies_to;
      n["atol"] = t.atol;
      n["rtol"] = t.rtol;
      n["max_relative_l2"] = t.max_relative_l2;
      n["reason"] = t.reason;
      list.push_back(n);
    }
    return list;
  });
  // Only Tier-2 documents carry a row program, so Tier-1 profiles read exactly as before.
  if (p.undecided.count("row_program")) {
    root["row_program"] = undecided_node(p.undecided.at("row_program"));
  } else if (p.row_program) {
    const RowProgramSpec& r = *p.row_program;
    auto reductions = [](const std::vector<RowReduction>& list) {
      YAML::Node out(YAML::NodeType::Sequence);
      for (const auto& red : list) {
        YAML::Node n;
        n["name"] = red.name;
        n["op"] = red.op;
        n["expression"] = red.expression;
        out.push_back(n);
      }
      return out;
    };
    YAML::Node n, forward, backward;
    forward["reductions"] = reductions(r.forward_reductions);
    forward["output"] = r.output;
    backward["uses"] = r.backward_uses;
    backward["reductions"] = reductions(r.backward_reductions);
    backward["grad_input"] = r.grad_input;
    auto gradients = [](const std::vector<RowParamGradient>& list) {
      YAML::Node grads(YAML::NodeType::Sequence);
      for (const auto& g : list) {
        YAML::Node item;
        item["name"] = g.name;
        item["expression"] = g.expression;
        grads.push_back(item);
      }
      return grads;
    };
    if (!r.param_gradients.empty()) backward["param_gradients"] = gradients(r.param_gradients);
    if (!r.input_gradients.empty()) backward["input_gradients"] = gradients(r.input_gradients);
    n["forward"] = forward;
    n["backward"] = backward;
    if (!r.pytorch_reference.empty()) n["pytorch_reference"] = r.pytorch_reference;
    root["row_program"] = n;
  }
  if (p.segment) root["segment"] = segment_to_yaml(p);  // segment.cpp
  if (p.fused_linear) root["fused_linear"] = fused_linear_to_yaml(p);  // tier3_profile.cpp
  root["notes"] = YAML::Node(YAML::NodeType::Sequence);
  for (const auto& n : p.notes) root["notes"].push_back(n);
  return root;
}

KernelProfile profile_from_yaml(const YAML::Node& root) {
  KernelProfile p;
  try {
    if (!root.IsMap()) throw std::runtime_error("the profile is not a YAML mapping");
    const YAML::Node& id = root["identity"];
    if (!id) throw std::runtime_error("missing 'identity'");
    p.op_name = str(id, "op_name");
    if (p.op_name.empty()) throw std::runtime_error("identity.op_name is empty");
    if (const std::string problem = reserved_op_name_problem(p.op_name); !problem.empty())
      throw std::runtime_error("identity.op_name '" + p.op_name + "' " + problem + "; add a word, e.g. " + p.op_name + "_op");
    p.display_name = str(id, "display_name");
    p.c_prefix = str(id, "c_prefix");
    p.cpp_namespace = str(id, "cpp_namespace");
    p.python_functional = str(id, "python_functional");
    p.python_module = str(id, "python_module");
    p.python_function = str(id, "python_function");
    p.source_kind = str(root["source"], "kind");
    p.source_text = str(root["source"], "text");
    p.source_entry = str(root["source"], "entry");
    p.resolved_from = str(root["source"], "resolved_from");
    if (!undecided_in(root, "tier", p)) {
      p.tier = root["tier"]["value"].as<int>();
      p.tier_reason = str(root["tier"], "reason");
    }
    if (!undecided_in(root, "closest_kernel", p)) {
      p.closest_kernel = str(root["closest_kernel"], "name");
      p.closest_reason = str(root["closest_kernel"], "reason");
    }
    if (!undecided_in(root, "inputs", p)) p.inputs = tensors_from(root["inputs"]);
    for (const auto& in : p.inputs)
      if (!in.sample.empty() && in.sample != "normal" && p.tier != 1 && !(p.tier == 2 && !root["segment"]))
        throw std::runtime_error("inputs[].sample '" + in.sample + "' of input '" + in.name +
                                 "': only Tier-1 and Tier-2 row tests draw their inputs from a chosen distribution; the "
                                 "segment and fused-loss tests draw normal inputs (remove the field or set it to normal)");
    if (!undecided_in(root, "outputs", p)) p.outputs = tensors_from(root["outputs"]);
    if (has_split_inputs(p)) {
      if (p.tier != 1 || root["row_program"] || root["segment"])
        throw std::runtime_error("inputs[].split: only a Tier-1 (element-wise) op takes inputs as parts of one argument; "
                                 "remove the field and pass the parts as inputs");
      call_arguments(p);  // throws when the parts do not make whole arguments
    }
    if (!undecided_in(root, "learnable_parameters", p)) p.learnable_parameters = params_from(root["learnable_parameters"], true);
    p.module_parameters = params_from(root["module_parameters"], false);
    if (!undecided_in(root, "forward", p) && root["forward"])
      p.forward = ForwardSpec{str(root["forward"], "expression"), str(root["forward"], "cuda"), str(root["forward"], "reference")};
    if (!undecided_in(root, "precision", p) && root["precision"]) {
      std::vector<PrecisionNote> notes;
      for (const auto& n : root["precision"]) notes.push_back({str(n, "operation"), str(n, "requirement"), str(n, "reason")});
      p.precision = notes;
    }
    if (!undecided_in(root, "saved_for_backward", p) && root["saved_for_backward"]) {
      const auto& s = root["saved_for_backward"];
      p.saved_for_backward = SavedSpec{strings_from(s["saved"]), strings_from(s["recomputed"]), str(s, "reason")};
    }
    if (!undecided_in(root, "gradients", p) && root["gradients"]) {
      std::vector<GradientSpec> gradients;
      for (const auto& n : root["gradients"])
        gradients.push_back({str(n, "wrt"), str(n, "kind"), str(n, "derivative"), n["reduction"] && n["reduction"].as<bool>(),
                             str(n, "reduction_note")});
      p.gradients = gradients;
    }
    if (!undecided_in(root, "backward", p) && root["backward"])
      p.backward = BackwardSpec{str(root["backward"], "cuda"), str(root["backward"], "reference")};
    if (!undecided_in(root, "tiling", p) && root["tiling"]) {
      const auto& t = root["tiling"];
      TilingSpec spec;
      spec.strategy = str(t, "strategy");
      spec.threads_per_block = t["threads_per_block"].as<int>();
      spec.vector_bytes = t["vector_bytes"].as<int>();
      spec.rows_per_block = t["rows_per_block"] ? t["rows_per_block"].as<int>() : 0;
      spec.backward_threads_per_block = t["backward_threads_per_block"] ? t["backward_threads_per_block"].as<int>() : 0;
      spec.backward_rows_per_block = t["backward_rows_per_block"] ? t["backward_rows_per_block"].as<int>() : 0;
      spec.grid = str(t, "grid");
      spec.parameter_gradients = str(t, "parameter_gradients");
      spec.reason = str(t, "reason");
      p.tiling = spec;
    }
    if (!undecided_in(root, "benchmark", p) && root["benchmark"]) {
      const auto& b = root["benchmark"];
      BenchmarkSpec spec;
      spec.variable = str(b, "variable");
      for (const auto& v : b["values"]) spec.values.push_back(v.as<long long>());
      if (b["fixed"])
        for (const auto& kv : b["fixed"]) spec.fixed[kv.first.as<std::string>()] = kv.second.as<std::string>();
      spec.dtypes = strings_from(b["dtypes"]);
      spec.modes = strings_from(b["modes"]);
      spec.baselines = strings_from(b["baselines"]);
      spec.metrics = str(b, "metrics");
      p.benchmark = spec;
    }
    if (!undecided_in(root, "tolerances", p) && root["tolerances"]) {
      std::vector<ToleranceSpec> tolerances;
      for (const auto& n : root["tolerances"])
        tolerances.push_back({str(n, "dtype"), str(n, "applies_to"), n["atol"].as<double>(), n["rtol"].as<double>(),
                              n["max_relative_l2"].as<double>(), str(n, "reason")});
      p.tolerances = tolerances;
    }
    if (!undecided_in(root, "row_program", p) && root["row_program"] && !root["row_program"].IsNull()) {
      const auto& r = root["row_program"];
      auto reductions = [](const YAML::Node& list) {
        std::vector<RowReduction> out;
        if (list && list.IsSequence())
          for (const auto& n : list) out.push_back({str(n, "name"), str(n, "op"), str(n, "expression")});
        return out;
      };
      RowProgramSpec spec;
      spec.forward_reductions = reductions(r["forward"]["reductions"]);
      spec.output = str(r["forward"], "output");
      spec.backward_uses = strings_from(r["backward"]["uses"]);
      spec.backward_reductions = reductions(r["backward"]["reductions"]);
      spec.grad_input = str(r["backward"], "grad_input");
      auto gradients = [&](const char* key) {
        std::vector<RowParamGradient> list;
        if (r["backward"][key] && r["backward"][key].IsSequence())
          for (const auto& g : r["backward"][key]) list.push_back({str(g, "name"), str(g, "expression")});
        return list;
      };
      spec.param_gradients = gradients("param_gradients");
      spec.input_gradients = gradients("input_gradients");
      spec.pytorch_reference = str(r, "pytorch_reference");
      p.row_program = spec;
    }
    read_segment(root, p);  // segment.cpp
    read_fused_linear(root, p);  // tier3_profile.cpp
    p.notes = strings_from(root["notes"]);
  } catch (const YAML::Exception& error) {
    throw std::runtime_error("kernel profile: " + std::string(error.what()));
  }
  return p;
}

std::string profile_to_text(const KernelProfile& profile) {
  YAML::Emitter out;
  out.SetIndent(2);
  out << profile_to_yaml(profile);
  return std::string("# kernel-dev profile for '") + profile.op_name + "' (review it: the generated code follows it)\n" +
         out.c_str() + "\n";
}

}  // namespace liger::kernel_dev
