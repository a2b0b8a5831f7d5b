// The profile of a fused linear + loss (Tier 3): built from a recognition, checked, and kept in
// the profile document's `fused_linear` section (see tier3.h).
#include <cmath>
#include <set>
#include <stdexcept>

#include "workflows/kernel_dev/tier3.h"
#include "workflows/kernel_dev/family_profile.h"

namespace liger::kernel_dev {

namespace {

const std::set<std::string>& generic_names() {
  static const std::set<std::string> names = {"f", "fn", "func", "function", "forward", "g", "h", "op", "loss",
                                              "loss_fn", "compute_loss", "model", "module", "lambda", "main", "run",
                                              "compute", "reference", "ref", "baseline", "impl", "torch_impl", "head",
                                              "lm_head", "criterion", "snippet", "code", "step", "distill", "kd"};
  return names;
}

bool distill(const FusedLinearSpec& s) { return s.loss != "cross_entropy"; }

std::string fmt_number(double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%g", v);
  return buffer;
}

// The loss in words and formulas (the profile's forward and gradient entries, the docs).
std::string unscaled_loss_formula(const FusedLinearSpec& s);
std::string loss_formula(const FusedLinearSpec& s) {
  const std::string loss = unscaled_loss_formula(s);
  return s.loss_scale != 1.0 ? loss + "; times loss_scale " + fmt_number(s.loss_scale) + " (applied by the Python entry)" : loss;
}

std::string unscaled_loss_formula(const FusedLinearSpec& s) {
  if (s.loss == "cross_entropy") {
    std::string z = s.softcap > 0 ? "z = " + fmt_number(s.softcap) + " * tanh(logits / " + fmt_number(s.softcap) + ")" : "z = logits";
    std::string row = "loss_r = lse - " + std::string(s.label_smoothing > 0 ? "(1 - eps) * z[target] - eps * mean_j z[j] (eps = " + fmt_number(s.label_smoothing) + ")" : "z[target]");
    if (s.z_loss > 0) row += " + " + fmt_number(s.z_loss) + " * lse^2";
    return z + ", lse = logsumexp(z); " + row + " (0 for target == " + std::to_string(s.ignore_index) + "); " +
           (s.reduction == "mean" ? "mean over the counted rows" : "sum over the rows");
  }
  const std::string t = s.temperature != 1.0 ? " / " + fmt_number(s.temperature) : "";
  std::string base = "p = softmax(x @ weight.T" + t + "), q = softmax(teacher_x @ teacher_weight.T" + t + "); ";
  if (s.loss == "kl_div") base += "loss_r = sum_j q_j (log q_j - log p_j)";
  else
    base += "m = " + fmt_number(s.beta) + " * p + " + fmt_number(1 - s.beta) + " * q; loss_r = " + fmt_number(s.beta) +
            " * KL(q, m) + " + fmt_number(1 - s.beta) + " * KL(p, m), KL(a, b) = sum_j a_j log(a_j / b_j)";
  return base + "; " + (s.reduction == "sum" ? "sum over the rows" : s.reduction == "batchmean" ? "sum / rows" : "sum / (rows * vocab)");
}

std::string gradient_formula(const FusedLinearSpec& s) {
  if (s.loss == "cross_entropy") {
    std::string g = "dz_j = softmax(z)_j - (" + std::string(s.label_smoothing > 0 ? "(1 - eps) * [j == target] + eps / vocab" : "[j == target]") + ")";
    if (s.z_loss > 0) g += " + 2 * " + fmt_number(s.z_loss) + " * lse * softmax(z)_j";
    if (s.softcap > 0) g += "; dlogits_j = dz_j * (1 - tanh(logits_j / " + fmt_number(s.softcap) + ")^2)";
    else g += "; dlogits_j = dz_j";
    return g + " (times the reduction's scale); grad_x = dlogits @ weight, grad_weight = dlogits^T @ x";
  }
  const std::string t = s.temperature != 1.0 ? " / " + fmt_number(s.temperature) : "";
  if (s.loss == "kl_div") return "dlogits_j = (p_j - q_j)" + t + " (times the reduction's scale); grad_x = dlogits @ weight, grad_weight = dlogits^T @ x";
  return "g_j = (1 - beta) (log p_j - log m_j) - beta (beta q_j + (1 - beta) p_j) / m_j; dlogits_j = p_j (g_j - sum_k p_k g_k)" + t +
         " (times the reduction's scale); grad_x = dlogits @ weight, grad_weight = dlogits^T @ x";
}

}  // namespace

std::optional<KernelProfile> analyse_fused_linear(const AnalysisRequest& request, const KnowledgeBase& knowledge) {
  if (request.kind == InputKind::Expression) return std::nullopt;
  const FusedLinearRecognition r = recognise_fused_linear(request.text);
  if (!r.matched) return std::nullopt;
  const FusedLinearSpec& s = r.spec;
  KernelProfile p;
  p.source_text = request.text;
  p.source_kind = s.source_form == "words" ? "words" : "pytorch";
  p.resolved_from = r.resolved_from;

  std::string op;
  const std::string short_loss = s.loss == "cross_entropy" ? "ce" : s.loss == "kl_div" ? "kl" : "jsd";
  if (!request.name.empty()) {
    op = op_name_for(request.name);
  } else {
    // A generic name says the loss and the options that change the formulas, so requests that
    // differ in them never share a name (and never collide with the library's hand-written
    // fused_linear_cross_entropy).
    std::string generic = "fused_linear_" + short_loss;
    if (s.loss == "cross_entropy") {
      if (s.label_smoothing > 0) generic += "_ls";
      if (s.z_loss > 0) generic += "_zloss";
      if (s.softcap > 0) generic += "_softcap";
      if (s.reduction == "sum") generic += "_sum";
    } else {
      if (s.temperature != 1.0) generic += "_temp";
      if (s.reduction != "batchmean") generic += "_" + s.reduction;
    }
    std::string entry = r.entry;
    op = entry.empty() || generic_names().count(op_name_for(entry)) ? generic : op_name_for(entry);
  }
  set_family_identity(p, op, knowledge);
  p.display_name = "Fused linear + " + std::string(s.loss == "cross_entropy" ? "cross-entropy" : s.loss == "kl_div" ? "KL divergence" : "JSD") +
                   " (chunked, logits never materialised)";

  p.tier = 3;
  p.tier_reason = "Tier 3 (fused): a loss over logits = x @ weight.T; the [rows, vocab] logits are produced, reduced and "
                  "differentiated chunk by chunk between cuBLAS GEMMs";
  p.closest_kernel = "fused_linear_cross_entropy";
  p.closest_reason = "the library's hand-written chunked LM-head loss: the same GEMM / row kernel / GEMM structure";
  p.inputs = {{"x", "[rows, hidden]", "fp32 | fp16 | bf16", "the hidden states (student for distillation)"},
              {"weight", "[vocab, hidden]", "same as x", "the output projection (LM head)"}};
  if (distill(s)) {
    p.inputs.push_back({"teacher_x", "[rows, teacher_hidden]", "same as x", "the teacher's hidden states (no gradient)"});
    p.inputs.push_back({"teacher_weight", "[vocab, teacher_hidden]", "same as x", "the teacher's projection (no gradient)"});
  } else {
    p.inputs.push_back({"target", "[rows]", "int64", "class indices; ignore_index rows count nowhere"});
  }
  p.outputs = {{"loss", "[]", "fp32", "the reduced loss"}};
  p.forward = ForwardSpec{loss_formula(s), "  // generated from the profile's fused_linear section\n",
                          "  // generated from the profile's fused_linear section, in fp64\n"};
  p.precision = std::vector<PrecisionNote>{
      {"GEMMs", "fp32 accumulation (CUBLAS_COMPUTE_32F), logits stored in the input dtype", "as x @ w.T in PyTorch"},
      {"row loss and gradient", "fp32", "logsumexp over a 100k-wide row in bf16 would lose the target's probability"},
      {"grad_weight over chunks", s.grad_weight_accumulator == "fp32" ? "fp32 accumulator" : "input dtype, cuBLAS beta = 1",
       "edit fused_linear.grad_weight_accumulator: fp32 costs vocab * hidden * 4 bytes of workspace"}};
  SavedSpec saved;
  saved.saved = {"grad_x", "grad_weight"};
  saved.reason = "the gradients are computed in the forward (chunk by chunk, while the chunk's logits exist); the backward "
                 "multiplies them by the upstream gradient";
  p.saved_for_backward = saved;
  p.gradients = std::vector<GradientSpec>{{"x", "input", gradient_formula(s), false, ""},
                                          {"weight", "input", gradient_formula(s), true, "summed over the rows (one GEMM per chunk)"}};
  p.backward = BackwardSpec{"  // generated from the profile's fused_linear section: " + gradient_formula(s) + "\n",
                            "  // generated from the profile's fused_linear section, in fp64\n"};
  TilingSpec t;
  t.strategy = "rows in chunks of chunk_rows: cuBLAS GEMM for the chunk's logits, one block per row for the loss and "
               "its gradient (written over the logits), cuBLAS GEMMs for grad_x and grad_weight";
  t.threads_per_block = 1024;
  t.vector_bytes = 16;
  t.rows_per_block = 1;
  t.grid = "x: the chunk's rows";
  t.parameter_gradients = "grad_weight += dlogits^T @ x_chunk per chunk (cuBLAS)";
  t.reason = "a vocabulary-wide row needs a whole block; the GEMMs dominate the time";
  p.tiling = t;
  BenchmarkSpec b;
  b.variable = "tokens";
  b.values = {s.bench_tokens};
  b.fixed = {{"hidden", std::to_string(s.bench_hidden)}, {"vocab", std::to_string(s.bench_vocab)}};
  b.dtypes = {"bf16"};
  b.modes = {"full"};
  b.baselines = {"the GEMMs alone (same shapes and chunks)", "unfused PyTorch (logits materialised)"};
  b.metrics = "median time vs the GEMMs alone; peak memory vs unfused";
  p.benchmark = b;
  p.tolerances = std::vector<ToleranceSpec>{
      {"fp32", "outputs and input gradients", 1e-5, 1e-3, 1e-4,
       "fp32 GEMMs whose grad_x sums run over the whole vocabulary (tens of thousands of terms) and fast exp/log "
       "intrinsics (a few ulp): ten times the library's fp32 row, as its own fused linear cross-entropy tests"},
      {"fp16", "outputs and input gradients", 2e-3, 2e-2, 5e-3, "logits stored in fp16 (2^-11 relative) before the row kernel"},
      {"bf16", "outputs and input gradients", 1.6e-2, 6e-2, 2e-2,
       "logits and dlogits stored in bf16 (2^-8 relative); grad_weight rounded once per chunk"}};
  p.fused_linear = s;
  for (const auto& n : r.notes) p.notes.push_back("fused_linear: " + n);
  p.notes.push_back("PyTorch eager baseline: __import__('liger_kernels.ops." + op + "', fromlist=['reference']).reference(" +
                    std::string(distill(s) ? "x, weight, teacher_x, teacher_weight" : "x, weight, target") + ")");
  if (!r.rejection.empty()) p.undecided["fused_linear"] = r.rejection;
  return p;
}

std::vector<std::string> fused_linear_problems(const KernelProfile& p) {
  std::vector<std::string> problems;
  if (!p.fused_linear) return problems;
  const FusedLinearSpec& s = *p.fused_linear;
  auto problem = [&](const std::string& text) { problems.push_back("fused_linear: " + text); };
  if (p.tier != 3) problem("a fused linear + loss is Tier 3 (fused); this profile is Tier " + std::to_string(p.tier));
  if (p.row_program || p.segment) problem("a profile is one of row_program, segment or fused_linear: remove the others");
  if (s.loss != "cross_entropy" && s.loss != "kl_div" && s.loss != "jsd")
    problem("loss '" + s.loss + "' (supported: cross_entropy, kl_div, jsd)");
  if (s.loss == "cross_entropy") {
    if (s.reduction != "mean" && s.reduction != "sum") problem("reduction '" + s.reduction + "' (cross_entropy: mean or sum)");
    if (!(s.label_smoothing >= 0 && s.label_smoothing <= 1)) problem("label_smoothing " + fmt_number(s.label_smoothing) + " (want 0..1)");
    if (!(s.z_loss >= 0 && std::isfinite(s.z_loss))) problem("z_loss " + fmt_number(s.z_loss) + " (want >= 0)");
    if (!(s.softcap >= 0 && std::isfinite(s.softcap))) problem("softcap " + fmt_number(s.softcap) + " (want > 0, or 0 for none)");
  } else {
    if (s.reduction != "batchmean" && s.reduction != "sum" && s.reduction != "mean")
      problem("reduction '" + s.reduction + "' (" + s.loss + ": batchmean, mean or sum)");
    if (!(s.temperature > 0 && std::isfinite(s.temperature))) problem("temperature " + fmt_number(s.temperature) + " (want > 0)");
    if (s.loss == "jsd" && !(s.beta >= 0 && s.beta <= 1)) problem("beta " + fmt_number(s.beta) + " (want 0..1)");
  }
  if (!(s.loss_scale > 0 && std::isfinite(s.loss_scale))) problem("loss_scale " + fmt_number(s.loss_scale) + " (want > 0)");
  if (s.chunk_rows < 0 || s.chunk_rows > 65536) problem("chunk_rows " + std::to_string(s.chunk_rows) + " (want 1..65536, or 0 for the rule)");
  if (s.grad_weight_accumulator != "input" && s.grad_weight_accumulator != "fp32")
    problem("grad_weight_accumulator '" + s.grad_weight_accumulator + "' (want input or fp32)");
  for (const auto& d : s.dtypes)
    if (d != "fp32" && d != "fp16" && d != "bf16") problem("dtype '" + d + "' (want fp32, fp16, bf16)");
  if (s.bench_tokens < 1 || s.bench_hidden < 1 || s.bench_vocab < 2) problem("benchmark: tokens, hidden >= 1 and vocab >= 2");
  return problems;
}

YAML::Node fused_linear_to_yaml(const KernelProfile& p) {
  YAML::Node n;
  if (write_undecided_section(p, "fused_linear", n)) return n;
  const FusedLinearSpec& s = *p.fused_linear;
  n["loss"] = s.loss;
  if (s.loss == "cross_entropy") {
    n["ignore_index"] = s.ignore_index;
    n["label_smoothing"] = s.label_smoothing;
    n["z_loss"] = s.z_loss;
    n["softcap"] = s.softcap;
  } else {
    n["temperature"] = s.temperature;
    if (s.loss == "jsd") n["beta"] = s.beta;
  }
  n["reduction"] = s.reduction;
  if (s.loss_scale != 1.0) n["loss_scale"] = s.loss_scale;
  n["chunk_rows"] = s.chunk_rows;
  n["grad_weight_accumulator"] = s.grad_weight_accumulator;
  n["dtypes"] = s.dtypes;
  n["source_form"] = s.source_form;
  YAML::Node b;
  b["tokens"] = s.bench_tokens;
  b["hidden"] = s.bench_hidden;
  b["vocab"] = s.bench_vocab;
  n["benchmark"] = b;
  return n;
}

void read_fused_linear(const YAML::Node& root, KernelProfile& p) {
  read_family_section(root, "fused_linear", p, p.fused_linear, [](const YAML::Node& n, FusedLinearSpec& s) {
    read_field(n, "loss", s.loss);
    read_field(n, "ignore_index", s.ignore_index);
    read_field(n, "label_smoothing", s.label_smoothing);
    read_field(n, "z_loss", s.z_loss);
    read_field(n, "softcap", s.softcap);
    read_field(n, "temperature", s.temperature);
    read_field(n, "beta", s.beta);
    read_field(n, "loss_scale", s.loss_scale);
    s.reduction = n["reduction"] ? n["reduction"].as<std::string>() : (s.loss == "cross_entropy" ? "mean" : "batchmean");
    read_field(n, "chunk_rows", s.chunk_rows);
    read_field(n, "grad_weight_accumulator", s.grad_weight_accumulator);
    read_field(n, "dtypes", s.dtypes);
    read_field(n, "source_form", s.source_form);
    if (const YAML::Node b = n["benchmark"]; b && b.IsMap()) {
      read_field(b, "tokens", s.bench_tokens);
      read_field(b, "hidden", s.bench_hidden);
      read_field(b, "vocab", s.bench_vocab);
    }
  });
}

}  // namespace liger::kernel_dev
