// Act for a fused linear + loss (Tier 3): every file of the op from templates/kernel_dev/fused_linear/
// (kernel, tuning, C header, fp64 reference and its tests, GPU tests, benchmark, binding, docs
// page) and the shared list templates of templates/kernel_dev/ (docs table row, Python exports).
#include <mustache.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "workflows/kernel_dev/tier3.h"
#include "workflows/kernel_dev/render_family.h"

namespace liger::kernel_dev {

namespace mu = kainjow::mustache;

namespace {

// One line that cannot close a comment, docstring, Markdown cell or string literal.
std::string free_text(const std::string& text) { return family_free_text(text, true); }

// The shortest decimal that reads back as v.
std::string shortest(double v) {
  char buffer[64];
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15) {  // 30.0, not 3e+01
    std::snprintf(buffer, sizeof(buffer), "%.1f", v);
    return buffer;
  }
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", digits, v);
    if (std::strtod(buffer, nullptr) == v) break;
  }
  std::string s = buffer;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // a floating literal in C++ and Python
  return s;
}

// The profile's decimal as a float literal (the compiler rounds it once, as the profile reads it).
std::string c_float(double v) { return shortest(v) + "f"; }

mu::data context(const KernelProfile& p) {
  const FusedLinearSpec& s = *p.fused_linear;
  const bool ce = s.loss == "cross_entropy";
  mu::data d = family_context(p, "3", true);
  d.set("formula", free_text(p.forward ? p.forward->expression : s.loss));
  d.set("gradient", free_text(p.gradients && !p.gradients->empty() ? p.gradients->front().expression : ""));
  d.set("loss", s.loss);
  d.set("is_ce", mu::data(ce));
  d.set("distill", mu::data(!ce));
  d.set("is_kl", mu::data(s.loss == "kl_div"));
  d.set("is_jsd", mu::data(s.loss == "jsd"));
  d.set("ignore_index", std::to_string(s.ignore_index) + (s.ignore_index < -2147483647LL ? "LL" : ""));
  d.set("label_smoothing_f", c_float(s.label_smoothing));
  d.set("label_smoothing_d", shortest(s.label_smoothing));
  d.set("label_smoothing_py", shortest(s.label_smoothing));
  d.set("z_loss_f", c_float(s.z_loss));
  d.set("z_loss_d", shortest(s.z_loss));
  d.set("z_loss_py", shortest(s.z_loss));
  d.set("has_zloss", mu::data(s.z_loss > 0));
  d.set("has_softcap", mu::data(s.softcap > 0));
  d.set("softcap_f", c_float(s.softcap));
  d.set("softcap_d", shortest(s.softcap));
  d.set("inv_softcap_f", c_float(s.softcap > 0 ? 1.0 / s.softcap : 0.0));
  d.set("softcap_py", shortest(s.softcap));
  d.set("inv_temperature_f", c_float(1.0 / s.temperature));
  d.set("temperature_d", shortest(s.temperature));
  d.set("temperature_py", shortest(s.temperature));
  d.set("loss_scale_py", shortest(s.loss_scale));
  d.set("has_loss_scale", mu::data(s.loss_scale != 1.0));
  d.set("beta_f", c_float(s.beta));
  d.set("beta_d", shortest(s.beta));
  d.set("beta_py", shortest(s.beta));
  d.set("reduction", s.reduction);
  const int code = ce ? (s.reduction == "sum" ? 1 : 0) : (s.reduction == "sum" ? 1 : s.reduction == "batchmean" ? 2 : 3);
  d.set("reduction_code", std::to_string(code));
  d.set("reduction_mean", mu::data(s.reduction == "mean"));
  d.set("reduction_sum", mu::data(s.reduction == "sum"));
  d.set("reduction_batchmean", mu::data(s.reduction == "batchmean"));
  const bool fp32 = s.grad_weight_accumulator == "fp32";
  d.set("fp32_accumulator", mu::data(fp32));
  d.set("accumulator_text", fp32 ? "in an fp32 accumulator in the workspace, converted once at the end"
                                 : "in the weight's dtype, cuBLAS beta = 1 after the first chunk");
  d.set("chunk_rows", std::to_string(s.chunk_rows));
  d.set("chunk_text", s.chunk_rows > 0 ? "the profile's " + std::to_string(s.chunk_rows)
                                       : std::string("by default about 4 * rows * hidden logits per chunk, a power of two in 16..4096"));
  d.set("bench_tokens", std::to_string(s.bench_tokens));
  d.set("bench_hidden", std::to_string(s.bench_hidden));
  d.set("bench_vocab", std::to_string(s.bench_vocab));
  require_no_row_launch_fields(p, 1, "the fused-linear kernel");
  const int threads = p.tiling ? p.tiling->threads_per_block : 1024;
  if (threads < 32 || threads > 1024 || threads % 32 != 0)
    throw std::invalid_argument("render: tiling.threads_per_block = " + std::to_string(threads) +
                                " is not a block the row kernel launches (32..1024, a multiple of 32)");
  d.set("threads", std::to_string(threads));
  const int vector = p.tiling ? p.tiling->vector_bytes : 16;
  if (vector != 2 && vector != 4 && vector != 8 && vector != 16)
    throw std::invalid_argument("render: tiling.vector_bytes = " + std::to_string(vector) + " (want 16, 8, 4 or 2)");
  d.set("vector_bytes", std::to_string(vector));
  // The shared list templates (docs table row, exports).
  d.set("output", "loss");
  d.set("expression", free_text(p.forward ? p.forward->expression : s.loss));
  mu::list inputs;
  for (const auto& t : p.inputs) inputs.push_back(mu::object{{"name", t.name}});
  d.set("inputs", inputs);
  d.set("learnable", mu::list{});
  d.set("hyperparameters", mu::list{});

  mu::list tolerances;
  for (const auto& t : *p.tolerances) tolerances.push_back(family_tolerance(t, free_text(t.reason)));
  d.set("tolerances", tolerances);
  return d;
}

}  // namespace

std::vector<RenderedFile> render_fused_linear(const KernelProfile& p, const std::filesystem::path& templates_dir) {
  if (!p.fused_linear) throw std::invalid_argument("render: profile '" + p.op_name + "' has no fused_linear section");
  require_renderable(p, fused_linear_problems(p));
  return render_family_files(p, "fused_linear", context(p), templates_dir);
}

}  // namespace liger::kernel_dev
