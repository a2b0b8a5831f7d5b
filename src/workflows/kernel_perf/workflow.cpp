// kernel-perf stages: Profile (understand), Optimize (act), Finalize (verify).
//
// Run directory layout (<run>/optimization/):
//   profile/ptxas.log, profile/ncu.csv     compiler report and Nsight Compute output
//   work/                                  a copy of the tree's CMake project (kernels, benchmarks,
//   work/build/                            tests) and its build: every variant is a drop-in
//                                          replacement built here (only the changed op recompiles);
//                                          --work-dir shares one across runs (only what differs
//                                          from the last run's tree is copied and rebuilt)
//   v0/bench.json                          the baseline
//   vN/notebook.md, vN/tuning.h,           each variant: lab notebook, the files it replaces,
//   vN/bench.json, vN/smoke.log            its smoke test and benchmark
//   search/*.json                          every measured candidate of the launch-parameter search
//   comparison.md, act.json                all variants; the winner
//   final/                                 Finalize: test log, original vs optimized, plot, report.md
#include <mustache.hpp>

#include <algorithm>
#include <limits>
#include <climits>
#include <cmath>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "engine/diff.h"
#include "liger/error.h"
#include "liger/input_check.h"
#include "liger/llm/provider.h"
#include "liger/profile.h"
#include "liger/util.h"
#include "liger/workflows.h"
#include "workflows/kernel_perf/kernel_perf.h"
#include "workflows/kernel_perf/stages.h"
#include "workflows/summaries.h"

namespace liger::kernel_perf {

namespace {

using namespace stages;
using std::chrono::seconds;

// ---------------------------------------------------------------- profile helpers

// Whether a ptxas kernel serves a benchmark case: the pass in its name (forward / backward; a
// full case runs both) and the case's activation dtype.
bool kernel_serves(const KernelResources& k, const BenchCaseResult& r) {
  if (r.mode != "full" && k.name.find(r.mode) == std::string::npos) return false;
  const bool bf16 = k.name.find("__nv_bfloat16") != std::string::npos, fp16 = k.name.find("__half") != std::string::npos;
  if (r.dtype == "bf16") return bf16;
  if (r.dtype == "fp16") return fp16;
  if (r.dtype == "fp32") return !bf16 && !fp16;
  return true;
}

std::map<std::string, double> case_metrics(const BenchCaseResult& r, double occupancy, const NcuMetrics* ncu,
                                           const std::vector<KernelResources>& kernels) {
  std::map<std::string, double> m;
  m["copy_fraction"] = r.copy_fraction;
  m["median_us"] = r.median_us;
  if (occupancy > 0) m["occupancy"] = occupancy;
  // The worst instantiation of the case's pass and dtype (the one the largest rows use).
  bool any = false;
  double spill = 0, regs = 0;
  for (const auto& k : kernels)
    if (kernel_serves(k, r)) {
      any = true;
      spill = std::max(spill, static_cast<double>(k.spill_store_bytes + k.spill_load_bytes));
      regs = std::max(regs, static_cast<double>(k.registers));
    }
  if (any) {
    m["spill_bytes"] = spill;
    m["registers"] = regs;
  }
  if (ncu)
    for (const auto& [k, v] : ncu->rule_metrics()) m[k] = v;
  return m;
}

YAML::Node strategies_node(const std::vector<Strategy>& order) {
  YAML::Node list(YAML::NodeType::Sequence);
  for (const auto& s : order) {
    YAML::Node n;
    n["id"] = s.id;
    n["name"] = s.name;
    n["kind"] = s.kind;
    n["changes"] = s.changes;
    n["expected"] = s.expected;
    for (const auto& [k, v] : s.knobs) n["knobs"][k] = v;
    list.push_back(n);
  }
  return list;
}

// The op's code variants (search_spaces.yaml code_knobs x the catalogue's code_variant
// strategies), each compiled as one instantiation with -Xptxas -v: what a variant would do to
// registers and spills is known before anything is built or benchmarked, and the notebooks
// quote it as the prediction. The "current" entry is the tuning header as it is.
YAML::Node profile_code_variants(StageContext& ctx, const OpSpec& spec, const std::string& tuning_text,
                                 const std::vector<Strategy>& catalogue, const ArchLimits& arch, int sm,
                                 StageResult& result) {
  YAML::Node list(YAML::NodeType::Sequence);
  if (!spec.code.present) return list;
  const auto current = read_knobs(spec.code, tuning_text);
  if (!current) {
    result.warn("the tuning header has no `using " + spec.code.alias + " = " + spec.code.tmpl +
                "<...>;` line: code variants are off for this run");
    return list;
  }
  for (const auto& [label, setting] : variant_settings(spec.code, *current, catalogue)) {
    const fs::path dir = opt_dir(ctx) / "profile" / "variants" / label;
    const fs::path cu =
        write_variant_unit(spec.code, spec.tuning, render_knobs(spec.code, tuning_text, setting), dir);
    ctx.progress("compiling code variant " + label + " (" + knob_text(spec.code, setting) + ")");
    auto r = run_logged(ctx, variant_compile_argv(ctx.tree_root, dir, cu, dir / "variant.o", sm), {}, 600,
                        dir / "ptxas.log");
    YAML::Node n;
    n["variant"] = label;
    n["knobs"] = knob_text(spec.code, setting);
    n["line"] = "using " + spec.code.alias + " = " + spec.code.tmpl + "<" + [&] {
      std::string a;
      for (const auto& k : spec.code.knobs) a += (a.empty() ? "" : ", ") + std::to_string(setting.at(k.name));
      return a;
    }() + ">;";
    n["kernel"] = spec.code.kernel;
    const auto kernels = parse_ptxas_log(r.output);
    const KernelResources* shown = variant_kernel(kernels, spec.code);
    if (!r.ok() || !shown) {
      n["compiled"] = false;
      n["error"] = tail(r.output, 400);
      if (label == "current") result.warn("the op's code-variant instantiation does not compile", tail(r.output, 600));
    } else {
      const KernelResources& k = *shown;
      n["kernel"] = k.name;
      const Occupancy o = estimate_occupancy(arch, k.registers, k.smem_bytes, spec.default_threads);
      n["compiled"] = true;
      n["registers"] = k.registers;
      n["spill_bytes"] = k.spill_store_bytes + k.spill_load_bytes;
      n["stack_frame_bytes"] = k.stack_frame_bytes;
      n["occupancy_at_default_threads"] = o.launchable ? o.fraction : 0.0;
    }
    list.push_back(n);
  }
  return list;
}

constexpr long long kRegisterBoundSpillBytes = 128;

// The compile-time diagnosis of --profile-only (no benchmark): the op's representative
// instantiation spills >= 128 bytes -> register-bound, with the numbers; else unknown.
std::pair<std::string, std::string> compiler_diagnosis(const YAML::Node& variants) {
  for (const auto& v : variants) {
    if (v["variant"].as<std::string>() != "current" || !v["compiled"].as<bool>(false)) continue;
    // The same bar as strategies.yaml's ptxas rule: a few bytes (a stack slot) are not a limit.
    const long long spill = v["spill_bytes"].as<long long>(0);
    if (spill >= kRegisterBoundSpillBytes)
      return {"register-bound", "ptxas: " + v["kernel"].as<std::string>() + " (" + v["knobs"].as<std::string>() + ") uses " +
                                    std::to_string(v["registers"].as<int>()) + " registers and spills " +
                                    std::to_string(spill) + " bytes per thread (stores + loads; stack frame " +
                                    std::to_string(v["stack_frame_bytes"].as<long long>(0)) + " bytes)"};
  }
  return {"unknown", "--profile-only: no benchmark, so no achieved bandwidth to classify (and the op's code-variant "
                     "instantiation spills less than 128 bytes)"};
}

// The prediction a code variant's notebook states: the compiler's registers / spills for the
// current and the new knob setting, from the profile's per-variant report.
std::string predicted_resources(const YAML::Node& profile, const std::string& from, const std::string& to) {
  const YAML::Node* a = nullptr;
  const YAML::Node* b = nullptr;
  std::vector<YAML::Node> entries;
  for (const auto& v : profile["code_variants"]) entries.push_back(v);
  for (const auto& v : entries) {
    if (v["knobs"].as<std::string>("") == from && !a) a = &v;
    if (v["knobs"].as<std::string>("") == to && !b) b = &v;
  }
  auto text = [](const YAML::Node& v) {
    if (!v["compiled"].as<bool>(false)) return std::string("does not compile");
    return std::to_string(v["registers"].as<int>()) + " registers, " + std::to_string(v["spill_bytes"].as<long long>()) +
           " bytes spilled, occupancy estimate " + fmt("%.0f%%", 100 * v["occupancy_at_default_threads"].as<double>(0));
  };
  if (!a || !b) return "Prediction: no compiler report for this setting (the profile compiled the catalogue's settings from v0's header).";
  return "Prediction (ptxas, " + (*a)["kernel"].as<std::string>() + "): " + text(*a) + " -> " + text(*b) +
         "; the benchmark decides whether that is faster.";
}

// ---------------------------------------------------------------- Profile (understand)

StageResult understand(StageContext& ctx) {
  StageResult result;
  const KernelPerfInput in = parse_kernel_perf_input(ctx.input);
  const OpSpec spec = load_op_spec(skills_dir() / "search_spaces.yaml", in.op);
  auto runner = current_runner();

  // Pre-flight: the op's pieces exist in the tree.
  std::string missing;
  for (const auto& [what, rel] : std::vector<std::pair<std::string, std::string>>{
           {"header", spec.header}, {"kernel source", spec.kernel_source}, {"tuning table", spec.tuning},
           {"GPU tests", spec.test_file}}) {
    if (!rel.empty() && !fs::exists(ctx.tree_root / rel)) missing += "\n  - " + what + ": " + rel;
  }
  if (!missing.empty())
    throw Error(ErrorKind::Usage, "kernel-perf: op '" + in.op + "' is incomplete in " + ctx.tree_root.string() + ":" + missing,
                "kernel-perf optimises an existing library op; create it first (liger-agent kernel-dev)");
  {
    const std::string tests = util::read_file(ctx.tree_root / spec.test_file);
    const std::string suite = spec.test_filter.substr(0, spec.test_filter.find('.'));
    const std::string name = suite.substr(suite.find_last_of("/*") == std::string::npos ? 0 : suite.find_last_of("/*") + 1);
    if (tests.find(name) == std::string::npos && tests.find("GLU_SUITE") == std::string::npos)
      throw Error(ErrorKind::Usage, "kernel-perf: the test filter '" + spec.test_filter + "' matches no suite in " + spec.test_file,
                  "fix test_filter in skills/kernel_perf/search_spaces.yaml");
  }
  const TuningFile tuning = TuningFile::parse(util::read_file(ctx.tree_root / spec.tuning));

  // Snapshot.
  const fs::path snapshot = ctx.input_dir / "snapshot";
  for (const auto& rel : spec.snapshot) {
    if (!fs::exists(ctx.tree_root / rel)) continue;
    fs::create_directories((snapshot / rel).parent_path());
    fs::copy_file(ctx.tree_root / rel, snapshot / rel, fs::copy_options::overwrite_existing);
  }

  // Architecture.
  int sm = 0;
  std::string arch_source;
  bool gpu = false;
  if (runner->has_tool("nvidia-smi")) {
    auto r = runner->run({"nvidia-smi", "--query-gpu=compute_cap,name", "--format=csv,noheader"}, {}, seconds(60));
    if (r.ok()) {
      if (auto cap = parse_compute_cap(r.output)) {
        gpu = true;
        sm = *cap;
        arch_source = "nvidia-smi: " + util::trim(r.output.substr(0, r.output.find('\n')));
      }
    }
  }
  if (!in.target_gpu.empty()) {
    sm = *parse_target_gpu(in.target_gpu);
    arch_source = "--target-gpu " + in.target_gpu + (gpu ? " (the GPU present reports " + arch_source + ")" : "");
  }
  if (!gpu && !in.profile_only)
    throw Error(ErrorKind::Toolchain, "kernel-perf: no NVIDIA GPU found (nvidia-smi reports none)",
                "run it on a machine with a GPU, or pass --profile-only for the compiler resource report alone");
  if (sm == 0) {
    sm = 90;
    arch_source = "default sm_90 (no GPU and no --target-gpu)";
    result.warn("no GPU and no --target-gpu: the compiler report is for sm_90");
  }
  const auto archs = load_architectures(skills_dir() / "architectures.yaml");
  const ArchLimits* arch = find_arch(archs, sm);
  if (!arch) throw Error(ErrorKind::Usage, "kernel-perf: sm_" + std::to_string(sm) + " is not in architectures.yaml",
                         "supported: Ampere 8.x, Hopper 9.0, Blackwell 10.x/12.x");

  // Compiler resource report.
  ctx.progress("compiling " + spec.kernel_source + " with -Xptxas -v for sm_" + std::to_string(sm));
  if (!runner->has_tool("nvcc"))
    throw Error(ErrorKind::Toolchain, "kernel-perf: nvcc not found on PATH", "install the CUDA toolkit (nvcc) or add it to PATH");
  const fs::path ptxas_log = opt_dir(ctx) / "profile" / "ptxas.log";
  fs::create_directories(ptxas_log.parent_path());  // nvcc writes the object there
  auto pr = run_logged(ctx,
                       {"nvcc", "-std=c++17", "--expt-relaxed-constexpr", "-I", (ctx.tree_root / "kernels/include").string(),
                        "-I", (ctx.tree_root / "kernels/src").string(), "-arch=sm_" + std::to_string(sm), "-Xptxas", "-v",
                        "-c", (ctx.tree_root / spec.kernel_source).string(), "-o",
                        (opt_dir(ctx) / "profile" / (in.op + ".o")).string()},
                       {}, 900, ptxas_log);
  if (!pr.ok()) return result.fail("nvcc could not compile " + spec.kernel_source, tail(pr.output));
  const auto kernels = parse_ptxas_log(pr.output);
  if (kernels.empty()) result.warn("ptxas reported no kernel functions for " + spec.kernel_source);
  YAML::Node res;
  res["tool"] = "nvcc -Xptxas -v (" + (opt_dir(ctx) / "profile" / "ptxas.log").string() + ")";
  res["kernels"] = YAML::Node(YAML::NodeType::Sequence);
  int max_regs = 0;
  long long max_smem = 0;
  double min_occ = 1;
  for (const auto& k : kernels) {
    const Occupancy o = estimate_occupancy(*arch, k.registers, k.smem_bytes, spec.default_threads);
    YAML::Node n;
    n["name"] = k.name;
    n["registers"] = k.registers;
    n["spill_stores_bytes"] = k.spill_store_bytes;
    n["spill_loads_bytes"] = k.spill_load_bytes;
    n["stack_frame_bytes"] = k.stack_frame_bytes;
    n["smem_bytes"] = k.smem_bytes;
    n["cmem_bytes"] = k.cmem_bytes;
    n["occupancy_at_default_threads"] = o.launchable ? o.fraction : 0.0;
    n["occupancy_limiter"] = o.limiter;
    n["max_threads_per_block"] = max_launchable_threads(*arch, k.registers, k.smem_bytes);
    res["kernels"].push_back(n);
    max_regs = std::max(max_regs, k.registers);
    max_smem = std::max(max_smem, k.smem_bytes);
    if (o.launchable) min_occ = std::min(min_occ, o.fraction);
    if (k.spills()) result.warn("kernel " + k.name + " spills registers (" + std::to_string(k.spill_store_bytes) + " bytes)");
  }
  res["default_threads"] = spec.default_threads;
  res["max_registers"] = max_regs;
  res["max_smem_bytes"] = max_smem;

  YAML::Node profile;
  profile["op"] = in.op;
  profile["goal"] = in.goal;
  profile["target_modes"] = YAML::Node(YAML::NodeType::Sequence);
  for (const char* m : {"forward", "backward", "full"})
    if (in.mode.empty() || in.mode == m) profile["target_modes"].push_back(m);
  profile["target_metric"] = in.target_metric;
  profile["max_variants"] = in.max_variants;
  profile["profile_only"] = in.profile_only;
  profile["start_tunables"] = in.start_tunables.empty() ? "default" : candidate_text(in.start_tunables);
  profile["files"]["header"] = spec.header;
  profile["files"]["kernel_source"] = spec.kernel_source;
  profile["files"]["tuning"] = spec.tuning;
  profile["files"]["test_filter"] = spec.test_filter;
  profile["files"]["snapshot_dir"] = snapshot.string();
  profile["files"]["tuning_arrays"] = YAML::Node(YAML::NodeType::Sequence);
  for (const auto& a : tuning.arrays()) profile["files"]["tuning_arrays"].push_back(a.name + " (" + std::to_string(a.rows.size()) + " rows)");
  profile["architecture"]["sm"] = sm;
  profile["architecture"]["family"] = arch->family;
  profile["architecture"]["source"] = arch_source;
  profile["architecture"]["notes"] = YAML::Node(YAML::NodeType::Sequence);
  for (const auto& n : arch->notes) profile["architecture"]["notes"].push_back(n);
  profile["compiler_resources"] = res;

  const YAML::Node strategies_doc = YAML::LoadFile((skills_dir() / "strategies.yaml").string());
  const auto rules = parse_class_rules(strategies_doc["classification"]);
  const auto catalogue = parse_strategies(strategies_doc);
  const std::string tuning_text = util::read_file(ctx.tree_root / spec.tuning);
  profile["code_variants"] = profile_code_variants(ctx, spec, tuning_text, catalogue, *arch, sm, result);

  if (in.profile_only || !gpu) {
    profile["ncu"]["status"] = "not run (--profile-only)";
    const auto [cls, evidence] = compiler_diagnosis(profile["code_variants"]);
    profile["bottleneck"]["class"] = cls;
    profile["bottleneck"]["evidence"] = evidence;
    profile["strategy_order"] = strategies_node(strategy_order(catalogue, cls == "unknown" ? "balanced" : cls, spec.traits));
    ctx.profile = profile;
    result.note("profile-only: compiler report for " + std::to_string(kernels.size()) + " kernel(s) on sm_" + std::to_string(sm));
    return result;
  }

  // Build the work tree and check the op's benchmark entries.
  ctx.progress("building liger-bench and kernel_tests for sm_" + std::to_string(sm) + " in the run's work tree");
  copy_project(ctx.tree_root, work_dir(ctx));
  if (auto err = build_work(ctx, in, sm, opt_dir(ctx) / "profile" / "build.log"); !err.empty())
    return result.fail("the kernel library does not build", err);
  auto list = run_logged(ctx, {bench_exe(ctx).string(), "--list", "--op", in.op}, {}, 60, {});
  if (!list.ok() || list.output.find(in.op) == std::string::npos)
    throw Error(ErrorKind::Usage, "kernel-perf: liger-bench has no benchmark entries for '" + in.op + "'",
                "add benchmarks/bench_" + in.op + ".cpp (see benchmarks/README.md)");

  // Baseline v0.
  ctx.progress("baseline v0: liger-bench --op " + in.op + (in.start_tunables.empty() ? "" : " with " + candidate_text(in.start_tunables)));
  const BenchRun v0 = bench(ctx, in, in.start_tunables, in.bench_min_time_ms, opt_dir(ctx) / "v0" / "bench.json");

  // Nsight Compute on the largest target case (never touching clocks).
  std::optional<NcuMetrics> ncu;
  const BenchCaseResult* biggest = nullptr;
  for (const auto& r : v0.results)
    if (r.ok && in_target(in.goal_spec(), r.mode) && (!biggest || r.min_bytes > biggest->min_bytes)) biggest = &r;
  if (runner->has_tool("ncu") && biggest) {
    ctx.progress("Nsight Compute on " + biggest->key());
    const std::string basic =
        "dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__throughput.avg.pct_of_peak_sustained_elapsed,"
        "sm__warps_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum";
    const std::string full = basic +
                             ",launch__registers_per_thread,launch__occupancy_limit_registers,"
                             "sm__maximum_warps_per_active_cycle_pct,smsp__inst_executed.sum,"
                             "smsp__sass_inst_executed_op_local_ld.sum,smsp__sass_inst_executed_op_local_st.sum," +
                             stall_metrics_csv();
    auto ncu_argv = [&](const std::string& metrics) {
      std::vector<std::string> argv = {"ncu", "--clock-control", "none", "--csv", "--kernel-name-base", "function",
                                       "-k", "regex:" + spec.ncu_kernel_regex, "--metrics", metrics,
                                       "-c", "20", bench_exe(ctx).string(), "--op", in.op, "--mode", biggest->mode, "--shape",
                                       biggest->shape, "--dtype", biggest->dtype, "--min-runs", "1", "--max-runs", "2",
                                       "--min-time-ms", "0", "--warmup-ms", "0", "--no-copy"};
      for (const auto& [k, v] : in.start_tunables) argv.insert(argv.end(), {"--tunable", k + "=" + std::to_string(v)});
      return argv;
    };
    auto r = run_logged(ctx, ncu_argv(full), {}, 600, opt_dir(ctx) / "profile" / "ncu.log");
    // An Nsight Compute that lacks one of the register / local-memory / stall metrics refuses
    // the whole list: the throughput metrics alone still classify.
    if (!r.ok() || parse_ncu_csv(r.output).kernels == 0)
      r = run_logged(ctx, ncu_argv(basic), {}, 600, opt_dir(ctx) / "profile" / "ncu-basic.log");
    NcuMetrics m = parse_ncu_csv(r.output);
    if (r.ok() && m.kernels > 0) {
      ncu = m;
      profile["ncu"]["status"] = "ran on " + biggest->key() + " (" + std::to_string(m.kernels) + " launches)";
      for (const auto& [k, v] : m.rule_metrics()) profile["ncu"][k] = v;
      for (const auto& [reason, v] : top_stalls(m, 3)) profile["ncu"]["top_stalls"][reason] = v;
    } else {
      profile["ncu"]["status"] = "ncu did not produce metrics (exit " + std::to_string(r.exit_code) + "; see profile/ncu.log)";
      result.warn("Nsight Compute produced no metrics", tail(r.output, 600));
    }
  } else {
    profile["ncu"]["status"] = "ncu not found on PATH";
  }

  // Baseline table and classification.
  YAML::Node base;
  base["device"] = v0.device;
  base["copy_gbps"] = v0.copy_gbps;
  base["tunables"] = v0.tunables;
  base["bench_json"] = (opt_dir(ctx) / "v0" / "bench.json").string();
  base["cases"] = YAML::Node(YAML::NodeType::Sequence);
  std::vector<std::string> classes;
  for (const auto& r : v0.results) {
    YAML::Node c;
    c["case"] = r.key();
    c["ok"] = r.ok;
    if (!r.ok) {
      c["message"] = r.message;
      base["cases"].push_back(c);
      continue;
    }
    c["median_us"] = r.median_us;
    c["spread_pct"] = r.spread_pct;
    c["gbps"] = r.gbps;
    c["copy_fraction"] = r.copy_fraction;
    if (r.tflops > 0) c["tflops"] = r.tflops;
    c["extra_mib"] = r.extra_mib;
    const bool use_ncu = ncu && biggest && r.key() == biggest->key();
    const Classification cls = classify(rules, case_metrics(r, min_occ, use_ncu ? &*ncu : nullptr, kernels));
    c["class"] = cls.bottleneck;
    c["evidence"] = cls.rule + ": " + cls.reason;
    if (in_target(in.goal_spec(), r.mode)) classes.push_back(cls.bottleneck);
    base["cases"].push_back(c);
  }
  profile["baseline"] = base;
  const std::string overall = overall_class(classes);
  int count = static_cast<int>(std::count(classes.begin(), classes.end(), overall));
  profile["bottleneck"]["class"] = overall;
  // The numbers behind the class: the largest target case of that class, and Nsight Compute's.
  std::string example;
  double example_bytes = -1;
  for (const auto& c : base["cases"]) {
    const BenchCaseResult* r = v0.find(c["case"].as<std::string>());
    if (!r || !r->ok || !in_target(in.goal_spec(), r->mode) || c["class"].as<std::string>() != overall) continue;
    if (r->min_bytes > example_bytes) {
      example_bytes = r->min_bytes;
      example = r->key() + ": " + c["evidence"].as<std::string>();
    }
  }
  std::string ncu_text;
  if (ncu) {
    const auto m = ncu->rule_metrics();
    for (const char* k : {"ncu_registers", "achieved_occupancy_pct", "dram_pct", "sm_pct", "ncu_spill_pct"})
      if (m.count(k)) ncu_text += (ncu_text.empty() ? "" : ", ") + std::string(k) + " = " + fmt("%.3g", m.at(k));
    std::string stalls;
    for (const auto& [reason, v] : top_stalls(*ncu, 3)) stalls += (stalls.empty() ? "" : ", ") + reason + " " + fmt("%.2f", v);
    if (!stalls.empty()) ncu_text += "; top stalls (warps per issue): " + stalls;
    ncu_text = "; Nsight Compute on " + biggest->key() + ": " + ncu_text;
  }
  profile["bottleneck"]["evidence"] = std::to_string(count) + " of " + std::to_string(classes.size()) +
                                      " target cases classify as " + overall +
                                      (example.empty() ? std::string() : "; e.g. " + example) + ncu_text +
                                      " (every case under baseline.cases)";
  profile["strategy_order"] = strategies_node(strategy_order(catalogue, overall, spec.traits));
  ctx.profile = profile;
  result.note("v0 measured: " + std::to_string(v0.results.size()) + " cases; bottleneck " + overall);
  return result;
}

// ---------------------------------------------------------------- Optimize (act)

struct VariantRecord {
  std::string name, strategy, change, smoke = "not run", verdict = "REJECTED", summary;
  double speedup = 1, memory_change_pct = 0;
  std::string tuning;  // the tuning.h text the variant ships ("" : source variant)
  std::string source_diff;
  bool measured = false;
};

struct SearchState {
  std::map<std::string, BenchRun> runs;  // candidate text -> run (its last, longest measurement)
  std::map<std::string, BenchRun> dropped;  // losers of successive halving (never picked)
  int batches = 0;
  std::map<std::size_t, std::string> class_winner;  // table row -> candidate text
};

// Classes: table row index -> the v0 cases in it (target modes only).
std::map<std::size_t, std::vector<std::string>> size_classes(const OpSpec& spec, const TuningFile& file, int sm,
                                                              const BenchRun& v0, const Goal& goal) {
  std::map<std::size_t, std::vector<std::string>> out;
  for (const auto& r : v0.results) {
    if (!r.ok || !in_target(goal, r.mode)) continue;
    std::size_t row = 0;
    if (spec.table.present)
      if (auto i = table_row_for(file, spec.table, sm, case_size(spec.table, r.shape))) row = *i;
    out[row].push_back(r.key());
  }
  return out;
}


int dominant_dtype_bytes(const BenchRun& run) {
  int b16 = 0, f32 = 0;
  for (const auto& r : run.results) (r.dtype == "fp32" ? f32 : b16)++;
  return f32 > b16 ? 4 : 2;
}

long long largest_cols(const BenchRun& run, const std::vector<std::string>& keys) {
  long long c = 0;
  for (const auto& k : keys)
    if (const auto* r = run.find(k)) c = std::max(c, shape_cols(r->shape));
  return c;
}

std::vector<Strategy> profile_strategies(const YAML::Node& profile) {
  std::vector<Strategy> out;
  for (const auto& n : profile["strategy_order"]) {
    Strategy s;
    s.id = n["id"].as<std::string>("");
    s.name = n["name"].as<std::string>(s.id);
    s.kind = n["kind"].as<std::string>("");
    s.changes = n["changes"].as<std::string>("");
    s.expected = n["expected"].as<std::string>("");
    if (n["knobs"])
      for (const auto& k : n["knobs"]) s.knobs[k.first.as<std::string>()] = k.second.as<int>();
    out.push_back(s);
  }
  return out;
}

llm::ProviderConfig provider_config(const Config* config) {
  llm::ProviderConfig out;
  if (!config) return out;
  out.kind = llm::parse_provider_kind(config->get_string("llm.provider"));
  out.base_url = config->get_string("llm.base_url");
  out.model = config->get_string("llm.model");
  out.api_key_env = config->get_string("llm.api_key_env");
  return out;
}

StageResult act(StageContext& ctx) {
  StageResult result;
  const KernelPerfInput in = parse_kernel_perf_input(ctx.input);
  if (ctx.profile["profile_only"].as<bool>(false) || !ctx.profile["baseline"]) {
    result.note("profile-only run: no variants");
    return result;
  }
  const OpSpec spec = load_op_spec(skills_dir() / "search_spaces.yaml", in.op);
  const int sm = ctx.profile["architecture"]["sm"].as<int>();
  const auto archs = load_architectures(skills_dir() / "architectures.yaml");
  const ArchLimits& arch = *find_arch(archs, sm);
  const Goal goal = in.goal_spec();
  const fs::path od = opt_dir(ctx);
  const std::string original_tuning = util::read_file(ctx.input_dir / "snapshot" / spec.tuning);
  const std::string original_source = read_or_empty(ctx.input_dir / "snapshot" / spec.kernel_source);
  const BenchRun v0 = parse_bench_json(util::read_file(od / "v0" / "bench.json"));
  std::optional<TargetMetric> target;
  if (!in.target_metric.empty()) target = parse_target_metric(in.target_metric);

  // A later attempt (the winner failed the full test suite in Finalize): pick the next best.
  nlohmann::json state = nlohmann::json::object();
  if (fs::exists(od / "act.json")) state = nlohmann::json::parse(util::read_file(od / "act.json"));
  if (ctx.attempt > 1 && state.contains("variants")) {
    std::set<std::string> excluded;
    for (const auto& e : state.value("excluded", nlohmann::json::array())) excluded.insert(e.get<std::string>());
    if (state.contains("winner") && !state["winner"].get<std::string>().empty()) excluded.insert(state["winner"].get<std::string>());
    std::string next;
    double best = 1;
    for (const auto& v : state["variants"])
      // Unbenchmarked variants (discarded, NO CHANGE) carry a null speed-up and are never picked.
      if (!excluded.count(v["name"]) && v["verdict"] != "REJECTED" && v["verdict"] != "NO CHANGE" &&
          v["speedup"].is_number() && v["speedup"].get<double>() > best) {
        best = v["speedup"].get<double>();
        next = v["name"];
      }
    state["excluded"] = std::vector<std::string>(excluded.begin(), excluded.end());
    state["winner"] = next;
    write(od / "act.json", state.dump(2));
    if (next.empty()) {
      result.note("the winner failed the op's test suite; no other variant improved: nothing is applied");
      return result;
    }
    ctx.staging->write(spec.tuning, util::read_file(od / next / "tuning.h"));
    result.note("the previous winner failed the test suite; staged the next best variant " + next);
    return result;
  }

  auto restore_work = [&] {
    write(work_dir(ctx) / spec.tuning, original_tuning);
    if (!original_source.empty()) write(work_dir(ctx) / spec.kernel_source, original_source);
  };
  restore_work();
  if (auto err = build_work(ctx, in, sm, od / "work-build.log"); !err.empty()) return result.fail("work tree build", err);
  // Kept for Finalize: the original without a rebuild.
  if (auto err = snapshot_bench(ctx, od / "v0-build"); !err.empty() && ctx.log)
    ctx.log->info("kernel-perf: no v0 snapshot ({}): Finalize rebuilds the original", err);

  std::vector<VariantRecord> history;
  std::vector<double> improvements;
  BenchRun best_run = v0;
  std::string best_name = "v0", best_tuning = original_tuning, stop = "every applicable strategy was tried";
  SearchState search;
  std::set<Candidate> tried;
  const auto strategies = profile_strategies(ctx.profile);
  std::size_t strategy_index = 0;
  int n = 0;
  const TuningFile original_file = TuningFile::parse(original_tuning);
  const auto classes = size_classes(spec, original_file, sm, v0, goal);
  const int dbytes = dominant_dtype_bytes(v0);

  // Successive halving: every feasible candidate in one process at a quarter of the search time,
  // then the best half of each size class again at twice the time, up to the full search time;
  // the losers' runs move to search.dropped (recorded, never picked).
  std::vector<std::vector<std::string>> class_keys;
  for (const auto& [row, keys] : classes) class_keys.push_back(keys);
  auto measure_candidates = [&](const std::vector<Candidate>& list, const std::string& tag) {
    const bool bwd = std::any_of(v0.results.begin(), v0.results.end(), [](const auto& r) { return r.mode != "forward"; });
    std::vector<Candidate> live;
    for (const auto& c : list) {
      std::string why;
      tried.insert(c);
      if (!candidate_feasible(spec.space, c, arch, ctx.profile["compiler_resources"]["max_registers"].as<int>(0),
                              ctx.profile["compiler_resources"]["max_smem_bytes"].as<long long>(0), bwd, &why)) {
        if (ctx.log) ctx.log->info("kernel-perf: pruned {}: {}", candidate_text(c), why);
        continue;
      }
      live.push_back(c);
    }
    int time_ms = std::max(10, in.search_min_time_ms / 4);
    for (int round = 1; !live.empty(); ++round) {
      signals::throw_if_interrupted();
      ctx.progress(tag + ": round " + std::to_string(round) + ", " + std::to_string(live.size()) +
                   " candidate(s) in one liger-bench process at " + std::to_string(time_ms) + " ms per case");
      const fs::path dir = od / "search" / (std::to_string(search.batches++) + "-" + std::to_string(round));
      std::map<std::string, BenchRun> measured;
      try {
        measured = bench_batch(ctx, in, live, time_ms, dir);
      } catch (const Error& e) {
        if (ctx.log) ctx.log->warn("kernel-perf: {} round {} failed: {}", tag, round, e.what());
        break;
      }
      for (const auto& [text, run] : measured) search.runs[text] = run;
      if (time_ms >= in.search_min_time_ms) break;
      const auto keep = halving_survivors(measured, class_keys, 2);
      std::vector<Candidate> next;
      for (const auto& c : live) {
        const std::string text = candidate_text(c);
        if (keep.count(text)) {
          next.push_back(c);
        } else if (search.runs.count(text)) {
          search.dropped[text] = search.runs[text];
          search.runs.erase(text);
        }
      }
      if (next.size() == live.size() && time_ms * 2 < in.search_min_time_ms) {
        time_ms = in.search_min_time_ms;  // nothing to drop: measure the rest once at full time
      } else {
        time_ms = std::min(in.search_min_time_ms, time_ms * 2);
      }
      live = next;
    }
  };
  auto pick_class_winners = [&]() {
    for (const auto& [row, keys] : classes) {
      double best = INFINITY;
      for (const auto& [text, run] : search.runs) {
        const double s = class_score(run, keys);
        if (s < best) {
          best = s;
          search.class_winner[row] = text;
        }
      }
    }
  };
  auto tuning_from_winners = [&](std::string* change, std::string* why_not) -> std::string {
    TuningFile f = TuningFile::parse(original_tuning);
    for (const auto& [row, text] : search.class_winner) {
      const auto c = parse_candidate(text);
      std::string why;
      if (!spec.table.present) {
        *why_not = "the op's table does not hold launch shapes (no mapping in search_spaces.yaml)";
        return "";
      }
      if (!c || !apply_candidate_to_row(f, spec.table, sm, row, *c, largest_cols(v0, classes.at(row)), dbytes, &why)) {
        *change += "row " + std::to_string(row) + ": " + text + " not expressible (" + why + "); ";
        continue;
      }
      *change += "row " + std::to_string(row) + " <- " + text + "; ";
    }
    return f.emit();
  };

  auto prior_notebooks = [&]() {
    std::vector<std::pair<std::string, std::string>> prior;
    for (const auto& h : history) {
      const std::string md = read_or_empty(od / h.name / "notebook.md");
      const auto l = notebook_learnings(md);
      prior.push_back({h.name + " " + notebook_verdict(md), l.empty() ? h.summary : l.front()});
    }
    return prior;
  };

  while (strategy_index < strategies.size()) {
    if (auto why = stop_reason({n, in.max_variants, improvements, target && target_met(*target, best_run, goal, &v0)})) {
      stop = *why;
      break;
    }
    const Strategy s = strategies[strategy_index];
    VariantRecord rec;
    rec.name = "v" + std::to_string(n + 1);
    rec.strategy = s.name;
    Notebook nb;
    nb.op = in.op;
    nb.variant = rec.name;
    nb.title = s.name;
    nb.status = "planned";
    nb.prior = prior_notebooks();
    nb.expected = s.expected;
    std::string tuning_text, why_not;
    // A finer search that lands on the current best rows has nothing new to build or benchmark:
    // re-measuring an identical table would only report run-to-run noise as a verdict.
    bool confirms_best = false;

    if (s.kind == "tunable_search") {
      ++strategy_index;
      nb.hypothesis = "The launch shape chosen for each size class is not the fastest on sm_" + std::to_string(sm) +
                      " (v0 runs with " + v0.tunables + "); a measured search over " + std::to_string(spec.space.dims.size()) +
                      " tunables finds a better one per class.";
      write(od / rec.name / "notebook.md", render_notebook(templates_dir(), nb));
      measure_candidates(coarse_grid(spec.space), "coarse grid");
      pick_class_winners();
      std::vector<Candidate> refine;
      for (const auto& [row, text] : search.class_winner)
        for (const auto& c : refine_around(spec.space, *parse_candidate(text), tried)) refine.push_back(c);
      measure_candidates(refine, "refine");
      pick_class_winners();
      tuning_text = tuning_from_winners(&rec.change, &why_not);
    } else if (s.kind == "split_size_class") {
      ++strategy_index;
      // A class whose sizes prefer different candidates (outside the spread) gets its own row.
      TuningFile f = TuningFile::parse(best_tuning);
      std::string change;
      for (const auto& [row, keys] : classes) {
        if (!search.class_winner.count(row) || keys.size() < 2) continue;
        const std::string winner = search.class_winner[row];
        long long smallest = LLONG_MAX;
        for (const auto& k : keys) smallest = std::min(smallest, case_size(spec.table, v0.find(k)->shape));
        std::vector<std::string> small_keys;
        for (const auto& k : keys)
          if (case_size(spec.table, v0.find(k)->shape) == smallest) small_keys.push_back(k);
        if (small_keys.size() == keys.size()) continue;
        std::string small_best;
        double sb = INFINITY;
        for (const auto& [text, run] : search.runs)
          if (double sc = class_score(run, small_keys); sc < sb) {
            sb = sc;
            small_best = text;
          }
        const double sw = search.runs.count(winner) ? class_score(search.runs[winner], small_keys) : INFINITY;
        double noise = 0;
        for (const auto& k : small_keys)
          if (const auto* r = v0.find(k)) noise = std::max(noise, r->spread_pct);
        if (small_best.empty() || small_best == winner || sb >= sw * (1 - noise / 100)) continue;
        const auto* a = f.array(spec.table.arrays.rbegin()->second);
        auto cur = table_row_for(f, spec.table, sm, smallest);
        if (!a || !cur) continue;
        f.insert_row_after(a->name, *cur, a->rows[*cur].fields);
        f.set_field(a->name, *cur, spec.table.size_field, std::to_string(smallest));
        std::string why;
        if (!apply_candidate_to_row(f, spec.table, sm, *cur, *parse_candidate(small_best), shape_cols(v0.find(small_keys[0])->shape),
                                    dbytes, &why))
          continue;
        change += "new row (size <= " + std::to_string(smallest) + ") <- " + small_best + "; ";
      }
      if (change.empty()) continue;  // not applicable: no notebook, no variant
      rec.change = change;
      nb.hypothesis = "Sizes sharing a table row prefer different launch shapes; giving the smaller size its own row "
                      "improves it without touching the others.";
      tuning_text = f.emit();
    } else if (s.kind == "neighbour_search") {
      ++strategy_index;
      if (!spec.table.present || search.class_winner.empty()) continue;
      SearchSpace finer = spec.space;
      for (auto& d : finer.dims) {
        std::set<int> values(d.coarse.begin(), d.coarse.end());
        for (const auto& c : tried)
          if (c.count(d.name)) values.insert(c.at(d.name));
        d.coarse.assign(values.begin(), values.end());
      }
      std::vector<Candidate> more;
      for (const auto& [row, text] : search.class_winner)
        for (const auto& c : refine_around(finer, *parse_candidate(text), tried)) more.push_back(c);
      if (more.empty()) continue;
      nb.hypothesis = "A finer step around the current best launch shapes (" + std::to_string(more.size()) +
                      " untried neighbours) finds a small further gain.";
      write(od / rec.name / "notebook.md", render_notebook(templates_dir(), nb));
      measure_candidates(more, "neighbour search");
      pick_class_winners();
      tuning_text = tuning_from_winners(&rec.change, &why_not);
      if (tuning_text == best_tuning) {
        rec.change += "(same table as the current best)";
        confirms_best = true;
      }
    } else if (s.kind == "code_variant") {
      ++strategy_index;
      if (!spec.code.present) continue;
      const auto cur = read_knobs(spec.code, best_tuning);
      if (!cur) continue;  // the profile warned: the alias line is missing
      KnobSetting next = *cur;
      for (const auto& [k, v] : s.knobs) next[k] = v;
      if (next == *cur || next.size() != cur->size()) continue;  // already so, or a knob the op lacks
      try {
        tuning_text = render_knobs(spec.code, best_tuning, s.knobs);
      } catch (const Error& e) {
        result.warn("code variant '" + s.name + "' not rendered", e.what());
        continue;
      }
      rec.change = spec.code.alias + ": " + knob_text(spec.code, *cur) + " -> " + knob_text(spec.code, next);
      nb.hypothesis = "The profile classifies the op as " + ctx.profile["bottleneck"]["class"].as<std::string>("unknown") +
                      " (" + ctx.profile["bottleneck"]["evidence"].as<std::string>("") + "); " + s.changes + ".";
      nb.expected = s.expected + ". " + predicted_resources(ctx.profile, knob_text(spec.code, *cur), knob_text(spec.code, next));
    } else if (s.kind == "llm_code") {
      ++strategy_index;
      const auto pc = provider_config(ctx.config);
      if (pc.kind == llm::ProviderKind::Builtin) {
        result.note("strategy '" + s.name + "' skipped: source changes need an LLM endpoint (--llm openai|anthropic)");
        continue;
      }
      // The LLM path: prompt with the profile, every prior notebook and the source; apply its diff.
      std::string notebooks;
      for (const auto& h : history) notebooks += "\n---\n" + read_or_empty(od / h.name / "notebook.md");
      kainjow::mustache::mustache t(util::read_file(skills_dir() / "prompts" / "optimize.md"));
      kainjow::mustache::data view;
      view.set("op", in.op);
      view.set("arch", "sm_" + std::to_string(sm));
      view.set("goal", in.goal);
      view.set("bottleneck", ctx.profile["bottleneck"]["class"].as<std::string>());
      view.set("bottleneck_reason", ctx.profile["bottleneck"]["evidence"].as<std::string>());
      view.set("strategy", s.name);
      view.set("changes", s.changes);
      view.set("notebooks", notebooks);
      view.set("source_path", spec.kernel_source);
      view.set("source", original_source);
      const std::string prompt = t.render(view);
      write(od / rec.name / "prompt.md", prompt);
      std::string answer;
      try {
        auto provider = llm::make_provider(pc);
        llm::Request req;
        req.messages.push_back(llm::user_message(prompt));
        req.kind = "kernel-perf/optimize";
        answer = provider->complete(req).text;
      } catch (const Error& e) {
        result.warn("LLM request for '" + s.name + "' failed", e.what());
        continue;
      }
      write(od / rec.name / "answer.md", answer);
      static const std::regex diff_re(R"(```(?:diff|patch)?\n([\s\S]*?)```)");
      std::smatch m;
      rec.source_diff = std::regex_search(answer, m, diff_re) ? std::string(m[1]) : answer;
      write(od / rec.name / "change.diff", rec.source_diff);
      rec.change = "source diff from " + provider_config(ctx.config).model + " (change.diff)";
      nb.hypothesis = s.changes + " (LLM proposal; see change.diff)";
      tuning_text = best_tuning;
    } else {
      ++strategy_index;
      continue;
    }

    ++n;
    nb.change = rec.change.empty() ? why_not : rec.change;
    nb.change_detail = rec.source_diff.empty() ? engine::unified_diff(best_tuning, tuning_text, "a/" + spec.tuning, "b/" + spec.tuning)
                                               : rec.source_diff;
    if (nb.change_detail.empty()) nb.change_detail = "(no change to the table: the search kept the current rows)";
    rec.tuning = tuning_text;
    write(od / rec.name / "tuning.h", tuning_text.empty() ? original_tuning : tuning_text);
    write(od / rec.name / "notebook.md", render_notebook(templates_dir(), nb));  // before it runs

    if (confirms_best) {
      improvements.push_back(0.0);
      nb.status = "confirmed the current best";
      rec.verdict = "NO CHANGE";
      rec.speedup = std::numeric_limits<double>::quiet_NaN();  // not benchmarked: shown as n/a
      rec.summary = "the finer search kept " + best_name + "'s rows: nothing new to build or benchmark";
      nb.smoke = rec.smoke = "not needed (same table as " + best_name + ")";
      nb.learnings.push_back("every untried neighbour was measured in the search and none beat " + best_name +
                             "'s launch shapes: the coarse winner is a local optimum of this grid");
      write(od / rec.name / "notebook.md", render_notebook(templates_dir(), nb));
      history.push_back(rec);
      continue;
    }
    // Realise: write the variant into the work tree, rebuild, smoke test, benchmark.
    bool ok = !tuning_text.empty();
    std::string smoke = tuning_text.empty() ? "not built: " + why_not : "";
    if (ok) {
      // The work tree keeps the last variant built (the next one or Finalize writes over it; the
      // writes skip identical bytes, so a winner that was built last is not rebuilt). Only an
      // earlier variant's patch of the source is undone first.
      if (!original_source.empty()) write(work_dir(ctx) / spec.kernel_source, original_source);
      write(work_dir(ctx) / spec.tuning, tuning_text);
      if (!rec.source_diff.empty()) {
        auto p = run_logged(ctx, {"patch", "-p1", "-d", work_dir(ctx).string(), "-i", (od / rec.name / "change.diff").string()},
                            {}, 60, od / rec.name / "patch.log");
        if (!p.ok()) {
          ok = false;
          smoke = "the diff does not apply (patch.log)";
        }
      }
    }
    if (ok) {
      if (auto err = build_work(ctx, in, sm, od / rec.name / "build.log"); !err.empty()) {
        ok = false;
        smoke = "does not build: " + tail(err, 300);
      }
    }
    if (ok) {
      std::string summary;
      ok = run_tests(ctx, spec, od / rec.name / "smoke.log", &summary);
      smoke = (ok ? "passed (" : "FAILED (") + summary + ")";
    }
    rec.smoke = smoke;
    nb.smoke = smoke;
    if (ok) {
      const BenchRun run = bench(ctx, in, {}, in.bench_min_time_ms, od / rec.name / "bench.json");
      const Verdict v = judge(v0, run, goal);
      const Verdict vs_best = judge(best_run, run, goal);
      rec.measured = true;
      rec.verdict = v.verdict;
      rec.summary = v.summary;
      rec.speedup = v.geomean_speedup;
      rec.memory_change_pct = v.memory_change_pct;
      const double improvement = (vs_best.geomean_speedup - 1) * 100;
      improvements.push_back(v.verdict == "REJECTED" ? 0.0 : improvement);
      nb.status = "measured";
      nb.verdict = v;
      nb.learnings.push_back(rec.change.empty() ? "no change" : rec.change);
      nb.learnings.push_back(fmt("geo-mean %.3fx vs v0", v.geomean_speedup) + fmt(", %.2f%% vs the best before it", improvement) +
                             " (" + best_name + ")");
      for (const auto& c : v.cases)
        if (c.outcome == "slower") nb.learnings.push_back(c.key + " got slower (" + fmt("%.1f%%", c.change_pct) + ")");
      if (v.verdict != "REJECTED" && vs_best.geomean_speedup > 1 && vs_best.verdict != "REJECTED") {
        best_run = run;
        best_name = rec.name;
        best_tuning = tuning_text;
        nb.learnings.push_back("new best: " + rec.name);
      } else {
        nb.learnings.push_back("kept " + best_name + " as the best");
      }
    } else {
      improvements.push_back(0.0);
      nb.status = "discarded";
      rec.verdict = "REJECTED";
      rec.speedup = std::numeric_limits<double>::quiet_NaN();  // not benchmarked: shown as n/a
      rec.summary = "discarded: " + smoke;
      nb.learnings.push_back("discarded before benchmarking: " + smoke);
    }
    write(od / rec.name / "notebook.md", render_notebook(templates_dir(), nb));  // after it ran
    history.push_back(rec);
  }
  if (auto why = stop_reason({n, in.max_variants, improvements, target && target_met(*target, best_run, goal, &v0)})) stop = *why;

  ComparisonInfo info;
  info.op = in.op;
  info.goal = in.goal;
  info.modes = in.mode.empty() ? "forward, backward, full" : in.mode;
  info.device = v0.device;
  info.sm = sm;
  info.start = v0.tunables;
  info.winner = best_name == "v0" ? "none (v0 stays: no variant improved outside the spread)" : best_name;
  info.stop_reason = stop;
  nlohmann::json variants = nlohmann::json::array();
  for (const auto& h : history) {
    info.variants.push_back({h.name, h.strategy, h.change, h.smoke, h.verdict, h.summary, h.speedup, h.memory_change_pct});
    variants.push_back({{"name", h.name}, {"strategy", h.strategy}, {"verdict", h.verdict}, {"speedup", h.speedup},
                        {"summary", h.summary}, {"measured", h.measured}});
  }
  write(od / "comparison.md", render_comparison(templates_dir(), info));
  state = {{"variants", variants}, {"winner", best_name == "v0" ? "" : best_name}, {"stop_reason", stop}, {"excluded", nlohmann::json::array()}};
  write(od / "act.json", state.dump(2));
  if (best_name != "v0" && best_tuning != original_tuning) {
    ctx.staging->write(spec.tuning, best_tuning);
    result.note("winner " + best_name + " staged as " + spec.tuning + fmt(" (%.3fx geo-mean vs v0)", best_run.results.empty() ? 1.0 : judge(v0, best_run, goal).geomean_speedup));
  } else {
    result.note(best_name == "v0" ? "no variant improved on v0 outside the run-to-run spread; nothing to apply"
                                  : "the winner keeps the tuning table unchanged; nothing to apply");
  }
  result.note(std::to_string(history.size()) + " variant(s); stopped: " + stop);
  return result;
}

std::string diagnose(const std::vector<engine::AttemptRecord>& attempts) {
  std::string out = "kernel-perf: every applied winner failed the op's test suite; the tree is unchanged.";
  for (const auto& a : attempts)
    for (const auto& h : a.hard) out += "\n- attempt " + std::to_string(a.attempt) + ": " + h.summary;
  return out;
}

}  // namespace

engine::Workflow make_workflow() {
  engine::Workflow w;
  w.name = "kernel-perf";
  w.description = "make an existing library kernel faster: profile, variants with lab notebooks, guarded winner";
  w.profile_schema = skills_dir() / "profile.schema.yaml";
  w.understand = understand;
  w.act = act;
  w.verify = verify;
  w.diagnose = diagnose;
  w.summarize = workflows::kernel_perf_summary;
  // The kernel's sources are read from and its tuning applied to the tree.
  w.check_request = [](const nlohmann::json&, const std::string&, const fs::path& tree, const Config&) {
    input::require_checkout(tree, {"kernels/ops.yaml", "kernels/src"}, "--tree");
  };
  return w;
}

}  // namespace liger::kernel_perf
