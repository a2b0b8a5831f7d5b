// The profile of a segment reduction: built from a recognition, checked, and kept in the
// profile document's `segment` section (see segment.h).
#include "workflows/kernel_dev/segment.h"
#include "workflows/kernel_dev/family_profile.h"

#include <algorithm>
#include <set>
#include <stdexcept>

namespace liger::kernel_dev {

namespace {

const std::set<std::string>& generic_names() {
  static const std::set<std::string> names = {"f", "fn", "func", "function", "forward", "g", "h", "op", "pool",
                                              "pooling", "model", "module", "lambda", "main", "run", "compute",
                                              "reference", "ref", "baseline", "impl", "torch_impl", "segment",
                                              "reduce", "reduction", "snippet", "code"};
  return names;
}

std::string reduce_display(const std::string& reduce) {
  if (reduce == "mean") return "mean";
  if (reduce == "sum") return "sum";
  if (reduce == "max") return "max";
  return "min";
}

// The gradient text of the profile's `gradients` entry, per reduction.
std::string derivative_text(const SegmentSpec& s) {
  if (s.reduce == "sum") return "dx[r] = dy[segment(r)] (broadcast over the segment's rows)";
  if (s.reduce == "mean") return "dx[r] = dy[segment(r)] / length(segment(r))";
  return "dx[r, f] = dy[segment(r), f] where r is the segment's arg" + s.reduce +
         " row of feature f (the first such row on ties), else 0";
}

}  // namespace

std::optional<KernelProfile> analyse_segment(const AnalysisRequest& request, const KnowledgeBase& knowledge) {
  if (request.kind == InputKind::Expression) return std::nullopt;
  const SegmentRecognition r = recognise_segment(request.text);
  if (!r.matched) return std::nullopt;
  const SegmentSpec& s = r.spec;
  KernelProfile p;
  p.source_text = request.text;
  p.source_kind = r.spec.source_form == "words" ? "words" : "pytorch";
  p.resolved_from = r.resolved_from;

  std::string op;
  if (!request.name.empty()) {
    op = op_name_for(request.name);
  } else {
    std::string entry = r.entry;
    if (const auto dot = entry.find('.'); dot != std::string::npos) entry = entry.substr(0, dot);  // Class.forward
    // A generic name says only the reduction; the index form and pooled dim (which change the
    // op's signature) are added where not the default, so two requests never share a name.
    std::string generic = "segment_" + s.reduce;
    if (s.index == "lengths") generic += "_lengths";
    if (s.pooled_dim != 0)
      generic += "_dim" + (s.pooled_dim > 0 ? std::to_string(s.pooled_dim) : "_neg" + std::to_string(-s.pooled_dim));
    op = entry.empty() || generic_names().count(op_name_for(entry)) ? generic : op_name_for(entry);
  }
  set_family_identity(p, op, knowledge);
  p.display_name = "Segment " + reduce_display(s.reduce) + " pooling (" + s.index + ")";

  p.tier = 2;
  p.tier_reason = "Tier 2 (reduction): a segment " + s.reduce +
                  " over jagged rows; every output row reduces a variable-length run of input rows";
  p.closest_kernel = "rms_norm";
  p.closest_reason = "the library's row-wise kernels: one block per unit of work, 16-byte vector accesses along the "
                     "contiguous dimension, fp32 accumulation";
  const std::string index_shape = s.index == "offsets" ? "[segments + 1]" : "[segments]";
  p.inputs = {{"x", "[rows, features]", "fp32 | fp16 | bf16",
               "the rows to pool (pooled dim " + std::to_string(s.pooled_dim) + " of the source, features flattened)"},
              {s.index, index_shape, "int64 (the binding converts int32)",
               s.index == "offsets" ? "segment s is rows offsets[s] .. offsets[s+1] - 1 (non-decreasing)"
                                    : "segment s has lengths[s] rows, consecutive from row 0"}};
  p.outputs = {{"y", "[segments, features]", "same as x", "the segment " + s.reduce + " of each segment's rows"}};
  const std::string empty = s.empty_segment == "inf" ? (s.reduce == "max" ? "-inf" : "+inf") : "0";
  // Read as "y = <expression>" in the docs table: the reduction of x over each segment's rows.
  p.forward = ForwardSpec{s.reduce + " of x over the rows of segment s (per feature); empty segment: " + empty,
                          "  // generated from the profile's segment section (templates/kernel_dev/segment/kernel.cu.mustache)\n",
                          "  // generated from the profile's segment section, in fp64\n"};
  p.precision = std::vector<PrecisionNote>{
      {"segment accumulation", "fp32", "a sum over hundreds of bf16 rows in bf16 would lose all but the largest terms"},
      {s.reduce == "mean" ? "division by the length" : "store", "fp32, one rounding at the store",
       "the result is rounded once to the input dtype"}};
  SavedSpec saved;
  saved.saved = {s.index};
  if (s.reduce == "max" || s.reduce == "min") saved.saved.push_back("arg" + s.reduce);
  saved.reason = s.reduce == "max" || s.reduce == "min"
                     ? "the gradient goes to the arg" + s.reduce + " row per feature, saved as int32 [segments, features] by the forward"
                     : "the gradient of a " + s.reduce + " needs only the segment boundaries";
  p.saved_for_backward = saved;
  p.gradients = std::vector<GradientSpec>{{"x", "input", derivative_text(s), false, ""}};
  p.backward = BackwardSpec{"  // generated from the profile's segment section: " + derivative_text(s) + "\n",
                            "  // generated from the profile's segment section, in fp64\n"};
  TilingSpec t;
  t.strategy = "one block per segment; threads along the features in 16-byte vectors, thread groups along the "
               "segment's rows, fp32 partials combined in shared memory";
  t.threads_per_block = 256;
  t.vector_bytes = 16;
  t.rows_per_block = 0;
  t.grid = "x: segments";
  t.parameter_gradients = "none (no learnable parameters)";
  t.reason = "a segment is reduced inside one block (no inter-block synchronisation); many segments keep every SM busy";
  p.tiling = t;
  BenchmarkSpec b;
  b.variable = "segments";
  b.values = {s.bench_segments};
  b.fixed = {{"features", std::to_string(s.features)},
             {"rows_per_segment", std::to_string(s.bench_min_rows) + ".." + std::to_string(s.bench_max_rows) +
                                      " (uniform, fixed seed)"}};
  b.dtypes = {"bf16", "fp16", "fp32"};
  b.modes = {"forward", "backward", "full"};
  b.baselines = {"PyTorch loop over segments", "index_add_ / scatter_reduce", "torch.compile of index_add_",
                 "device copy bandwidth"};
  b.metrics = "median time, bandwidth vs copy (each tensor counted once)";
  p.benchmark = b;
  p.tolerances = std::vector<ToleranceSpec>{
      {"fp32", "outputs and input gradients", 1e-5, 1e-5, 1e-5,
       "fp32 accumulation of up to thousands of rows: a few roundings of 2^-24, growing with sqrt(rows)"},
      {"fp16", "outputs and input gradients", 1e-3, 4e-3, 2e-3, "fp16 storage, fp32 accumulation: one rounding of 2^-11 at the store"},
      {"bf16", "outputs and input gradients", 4e-3, 1.6e-2, 8e-3, "bf16 storage, fp32 accumulation: one rounding of 2^-8 at the store"}};
  p.segment = s;
  for (const auto& n : r.notes) p.notes.push_back("segment: " + n);
  if (s.empty_segment == "zero" && (s.reduce == "max" || s.reduce == "min"))
    p.notes.push_back("segment: an empty segment's " + s.reduce + " is 0 (as index_add_ / scatter_reduce into zeros; "
                      "torch.segment_reduce gives " + std::string(s.reduce == "max" ? "-inf" : "+inf") +
                      " without initial=0): edit segment.empty_segment to inf for that");
  // Verify compares with PyTorch through the binding's index_add_ / scatter_reduce form.
  p.notes.push_back("PyTorch eager baseline: __import__('liger_kernels.ops." + op +
                    "', fromlist=['reference']).reference(x, " + s.index + ")");
  if (!r.rejection.empty()) p.undecided["segment"] = r.rejection;
  return p;
}

std::vector<std::string> segment_problems(const KernelProfile& p) {
  std::vector<std::string> problems;
  if (!p.segment) return problems;
  const SegmentSpec& s = *p.segment;
  auto problem = [&](const std::string& text) { problems.push_back("segment: " + text); };
  if (p.tier != 2) problem("a segment reduction is Tier 2 (reduction); this profile is Tier " + std::to_string(p.tier));
  if (p.row_program) problem("a profile is either a row program or a segment reduction, not both: remove one section");
  static const std::set<std::string> reduces = {"sum", "mean", "max", "min"};
  if (!reduces.count(s.reduce)) problem("reduce '" + s.reduce + "' (want sum, mean, max or min)");
  if (s.index != "offsets" && s.index != "lengths") problem("index '" + s.index + "' (want offsets or lengths)");
  if (s.pooled_dim < -8 || s.pooled_dim > 8) problem("pooled_dim " + std::to_string(s.pooled_dim) + " (want -8..8)");
  if (s.features < 1 || s.features > (1 << 20)) problem("features " + std::to_string(s.features) + " (want 1..1048576)");
  if (s.index_dtype != "int64") problem("index_dtype '" + s.index_dtype + "' (the C ABI takes int64; the binding converts int32)");
  for (const auto& d : s.dtypes)
    if (d != "fp32" && d != "fp16" && d != "bf16") problem("dtype '" + d + "' (want fp32, fp16, bf16)");
  if (s.empty_segment != "zero" && s.empty_segment != "inf") problem("empty_segment '" + s.empty_segment + "' (want zero or inf)");
  if (s.empty_segment == "inf" && (s.reduce == "sum" || s.reduce == "mean"))
    problem("empty_segment inf is for max and min; an empty " + s.reduce + " is 0");
  if (s.bench_segments < 1 || s.bench_min_rows < 0 || s.bench_max_rows < std::max<long long>(1, s.bench_min_rows))
    problem("benchmark: segments >= 1 and 0 <= min_rows <= max_rows, max_rows >= 1");
  if (s.bench_segments * ((s.bench_min_rows + s.bench_max_rows) / 2 + 1) * s.features > (1LL << 32))
    problem("benchmark: about " + std::to_string(s.bench_segments * (s.bench_min_rows + s.bench_max_rows) / 2) +
            " rows x " + std::to_string(s.features) + " features is more than 2^32 elements");
  return problems;
}

YAML::Node segment_to_yaml(const KernelProfile& p) {
  YAML::Node n;
  if (write_undecided_section(p, "segment", n)) return n;
  const SegmentSpec& s = *p.segment;
  n["reduce"] = s.reduce;
  n["index"] = s.index;
  n["pooled_dim"] = s.pooled_dim;
  n["features"] = s.features;
  n["dtypes"] = s.dtypes;
  n["index_dtype"] = s.index_dtype;
  n["empty_segment"] = s.empty_segment;
  n["source_form"] = s.source_form;
  YAML::Node b;
  b["segments"] = s.bench_segments;
  b["min_rows"] = s.bench_min_rows;
  b["max_rows"] = s.bench_max_rows;
  n["benchmark"] = b;
  return n;
}

void read_segment(const YAML::Node& root, KernelProfile& p) {
  read_family_section(root, "segment", p, p.segment, [](const YAML::Node& n, SegmentSpec& s) {
    read_field(n, "reduce", s.reduce);
    read_field(n, "index", s.index);
    read_field(n, "pooled_dim", s.pooled_dim);
    read_field(n, "features", s.features);
    read_field(n, "dtypes", s.dtypes);
    read_field(n, "index_dtype", s.index_dtype);
    read_field(n, "empty_segment", s.empty_segment);
    read_field(n, "source_form", s.source_form);
    if (const YAML::Node b = n["benchmark"]; b && b.IsMap()) {
      read_field(b, "segments", s.bench_segments);
      read_field(b, "min_rows", s.bench_min_rows);
      read_field(b, "max_rows", s.bench_max_rows);
    }
  });
}

}  // namespace liger::kernel_dev
