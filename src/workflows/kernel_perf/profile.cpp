// kernel-perf Profile (understand): the op's pieces, the architecture, the compiler resource report
// (and one per code variant), the work tree's build, the baseline v0, Nsight Compute and the
// bottleneck class with the numbers behind it.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "liger/error.h"
#include "liger/util.h"
#include "workflows/kernel_perf/kernel_perf.h"
#include "workflows/kernel_perf/stages.h"

namespace liger::kernel_perf::stages {

namespace {

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

}  // namespace

// ---------------------------------------------------------------- Profile (understand)

StageResult understand(StageContext& ctx) {
  StageResult result;
  const KernelPerfInput in = parse_kernel_perf_input(ctx.input);
  const OpSpec spec = load_op_spec_for_tree(skills_dir() / "search_spaces.yaml", in.op, ctx.tree_root);
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
  auto phase_start = Clock::now();
  auto pr = run_logged(ctx,
                       {"nvcc", "-std=c++17", "--expt-relaxed-constexpr", "-I", (ctx.tree_root / "kernels/include").string(),
                        "-I", (ctx.tree_root / "kernels/src").string(), "-arch=sm_" + std::to_string(sm), "-Xptxas", "-v",
                        "-c", (ctx.tree_root / spec.kernel_source).string(), "-o",
                        (opt_dir(ctx) / "profile" / (in.op + ".o")).string()},
                       {}, 900, ptxas_log);
  record_phase(ctx, "profile", "ptxas report (nvcc -Xptxas -v)", seconds_since(phase_start), spec.kernel_source);
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
  phase_start = Clock::now();
  profile["code_variants"] = profile_code_variants(ctx, spec, tuning_text, catalogue, *arch, sm, result);
  record_phase(ctx, "profile", "code variants' ptxas reports", seconds_since(phase_start),
               std::to_string(profile["code_variants"].size()) + " compile(s)");

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
  phase_start = Clock::now();
  copy_project(ctx.tree_root, work_dir(ctx));
  if (auto err = build_work(ctx, in, sm, opt_dir(ctx) / "profile" / "build.log"); !err.empty())
    return result.fail("the kernel library does not build", err);
  record_phase(ctx, "profile", "work tree copy and build", seconds_since(phase_start), work_dir(ctx).string());
  auto list = run_logged(ctx, {bench_exe(ctx).string(), "--list", "--op", in.op}, {}, 60, {});
  if (!list.ok() || list.output.find(in.op) == std::string::npos)
    throw Error(ErrorKind::Usage, "kernel-perf: liger-bench has no benchmark entries for '" + in.op + "'",
                "add benchmarks/bench_" + in.op + ".cpp (see benchmarks/README.md)");

  // Baseline v0.
  ctx.progress("baseline v0: liger-bench --op " + in.op + (in.start_tunables.empty() ? "" : " with " + candidate_text(in.start_tunables)));
  phase_start = Clock::now();
  const BenchRun v0 = bench(ctx, in, in.start_tunables, in.bench_min_time_ms, opt_dir(ctx) / "v0" / "bench.json");
  record_phase(ctx, "profile", "baseline v0 benchmark", seconds_since(phase_start),
               std::to_string(v0.results.size()) + " case(s) at " + std::to_string(in.bench_min_time_ms) + " ms");

  // Nsight Compute on the largest target case (never touching clocks).
  std::optional<NcuMetrics> ncu;
  const BenchCaseResult* biggest = nullptr;
  for (const auto& r : v0.results)
    if (r.ok && in_target(in.goal_spec(), r.mode) && (!biggest || r.min_bytes > biggest->min_bytes)) biggest = &r;
  phase_start = Clock::now();
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
  record_phase(ctx, "profile", "Nsight Compute", seconds_since(phase_start), profile["ncu"]["status"].as<std::string>());

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

}  // namespace liger::kernel_perf::stages
