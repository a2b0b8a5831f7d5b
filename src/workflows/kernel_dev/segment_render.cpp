// Act for a segment reduction: every file of the op from templates/kernel_dev/segment/ (the
// kernel, tuning, C header, fp64 reference and its tests, GPU tests, benchmark, binding, docs page)
// and the shared list templates of templates/kernel_dev/ (docs table row, Python exports).
#include <mustache.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "workflows/kernel_dev/segment.h"
#include "workflows/kernel_dev/render_family.h"

namespace liger::kernel_dev {

namespace mu = kainjow::mustache;

namespace {

std::string free_text(const std::string& text) { return family_free_text(text); }

std::string number(double v) {
  char buffer[64];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", digits, v);
    if (std::strtod(buffer, nullptr) == v) break;
  }
  return buffer;
}

mu::data context(const KernelProfile& p) {
  const SegmentSpec& s = *p.segment;
  mu::data d = family_context(p, "2", false);
  d.set("source_kind", p.source_kind);
  d.set("source_form", free_text(s.source_form));
  d.set("reduce", s.reduce);
  d.set("is_sum", mu::data(s.reduce == "sum"));
  d.set("is_mean", mu::data(s.reduce == "mean"));
  d.set("is_sum_or_mean", mu::data(s.reduce == "sum" || s.reduce == "mean"));
  const bool arg = s.reduce == "max" || s.reduce == "min";
  d.set("is_arg", mu::data(arg));
  d.set("is_max", mu::data(s.reduce == "max"));
  d.set("arg", "arg" + s.reduce);  // argmax / argmin
  d.set("index", s.index);
  d.set("is_offsets", mu::data(s.index == "offsets"));
  d.set("is_lengths", mu::data(s.index == "lengths"));
  d.set("pooled_dim", std::to_string(s.pooled_dim));
  const bool inf = arg && s.empty_segment == "inf";
  d.set("empty_text", inf ? (s.reduce == "max" ? "-inf" : "+inf") : "0");
  d.set("empty_cuda", inf ? (s.reduce == "max" ? "-INFINITY" : "INFINITY") : "0.0f");
  d.set("empty_reference", inf ? (s.reduce == "max" ? "-HUGE_VAL" : "HUGE_VAL") : "0.0");
  d.set("empty_python", inf ? (s.reduce == "max" ? "float('-inf')" : "float('inf')") : "0.0");
  d.set("empty_is_inf", mu::data(inf));
  // "better" for the arg reductions: the comparison that replaces the running extreme.
  d.set("better", s.reduce == "min" ? "<" : ">");
  d.set("identity_cuda", s.reduce == "max" ? "-INFINITY" : s.reduce == "min" ? "INFINITY" : "0.0f");
  d.set("torch_scatter", s.reduce == "max" ? "amax" : s.reduce == "min" ? "amin" : s.reduce);
  d.set("features", std::to_string(s.features));
  d.set("bench_segments", std::to_string(s.bench_segments));
  d.set("bench_min_rows", std::to_string(s.bench_min_rows));
  d.set("bench_max_rows", std::to_string(s.bench_max_rows));
  d.set("derivative", free_text(p.gradients && !p.gradients->empty() ? p.gradients->front().expression : ""));
  d.set("expression", free_text(p.forward ? p.forward->expression : "segment " + s.reduce));
  d.set("output", "y");
  d.set("inputs", mu::list{mu::object{{"name", "x"}}, mu::object{{"name", s.index}}});
  d.set("learnable", mu::list{});
  d.set("hyperparameters", mu::list{});

  require_no_row_launch_fields(p, 0, "the segment kernel");
  const int threads = p.tiling ? p.tiling->threads_per_block : 256;
  const int vector = p.tiling ? p.tiling->vector_bytes : 16;
  if (threads < 64 || threads > 1024 || threads % 32 != 0)
    throw std::invalid_argument("render: tiling.threads_per_block = " + std::to_string(threads) +
                                " is not a block the segment kernel launches (64..1024, a multiple of 32)");
  if (vector != 2 && vector != 4 && vector != 8 && vector != 16)
    throw std::invalid_argument("render: tiling.vector_bytes = " + std::to_string(vector) + " (want 16, 8, 4 or 2)");
  d.set("threads", std::to_string(threads));
  d.set("vector_bytes", std::to_string(vector));

  mu::list tolerances;
  for (const auto& t : *p.tolerances) {
    mu::object entry = family_tolerance(t, free_text(t.reason));
    entry.emplace("applies_to", t.applies_to);
    entry.emplace("atol", number(t.atol));
    entry.emplace("rtol", number(t.rtol));
    entry.emplace("reason", free_text(t.reason));
    tolerances.push_back(entry);
  }
  d.set("tolerances", tolerances);
  return d;
}

}  // namespace

std::vector<RenderedFile> render_segment(const KernelProfile& p, const std::filesystem::path& templates_dir) {
  if (!p.segment) throw std::invalid_argument("render: profile '" + p.op_name + "' has no segment section");
  require_renderable(p, segment_problems(p));
  return render_family_files(p, "segment", context(p), templates_dir);
}

}  // namespace liger::kernel_dev
