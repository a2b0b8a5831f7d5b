// kernel-perf Finalize (verify): the applied winner's full test suite, original vs optimized from
// their own builds, the A/B interleaved re-measurement, PyTorch comparison, plot and report.
#include <mustache.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>

#include "engine/diff.h"
#include "liger/error.h"
#include "liger/util.h"
#include "workflows/kernel_perf/stages.h"

namespace liger::kernel_perf::stages {

namespace {

using std::chrono::seconds;

// ---------------------------------------------------------------- Finalize (verify)

constexpr int kInterleavedRounds = 5;

// The winner against the original in alternating fresh processes (A B A B ..., `rounds` each),
// from the two snapshots; the verdict counts a case only when the rounds' ranges do not overlap.
std::optional<Interleaved> interleaved_rounds(StageContext& ctx, const KernelPerfInput& in, const fs::path& dir,
                                              const fs::path& original, const fs::path& optimized, const Candidate& start,
                                              const Candidate& opt_tunables, int rounds, std::string* why_not) {
  for (const auto& snap : {original, optimized})
    if (!loads_own_library(snap, why_not)) return std::nullopt;
  std::vector<BenchRun> a, b;
  const int ms = std::max(50, in.bench_min_time_ms / 4);
  for (int i = 0; i < rounds; ++i) {
    for (const char* side : {"original", "optimized"}) {
      signals::throw_if_interrupted();
      const bool orig = std::string(side) == "original";
      ctx.progress(std::string("A/B round ") + std::to_string(i + 1) + "/" + std::to_string(rounds) + ": " + side);
      const fs::path snap = orig ? original : optimized;
      const fs::path json = dir / (std::string(orig ? "A" : "B") + std::to_string(i) + ".json");
      std::vector<std::string> argv = {"env", "LD_LIBRARY_PATH=" + snap.string(), (snap / "liger-bench").string(), "--op",
                                       in.op, "--json", json.string(), "--min-time-ms", std::to_string(ms), "--no-copy"};
      if (!in.dtype.empty()) argv.insert(argv.end(), {"--dtype", in.dtype});
      // Only target cases count in the verdict (judge_interleaved): a run for one pass re-measures
      // that pass alone; the other passes' guardrails were judged on the full benchmarks.
      if (!in.mode.empty()) argv.insert(argv.end(), {"--mode", in.mode});
      for (const auto& [k, v] : orig ? start : opt_tunables) argv.insert(argv.end(), {"--tunable", k + "=" + std::to_string(v)});
      auto r = run_logged(ctx, argv, {}, 900, json.string() + ".log");
      if ((r.exit_code != 0 && r.exit_code != 1) || !fs::exists(json)) {
        *why_not = std::string("liger-bench (") + side + ") failed in round " + std::to_string(i + 1) + ": " + tail(r.output, 300);
        return std::nullopt;
      }
      (orig ? a : b).push_back(parse_bench_json(util::read_file(json)));
    }
  }
  return judge_interleaved(a, b, in.goal_spec());
}

std::string interleaved_markdown(const Interleaved& v) {
  std::string md = "## Wins that hold: A/B interleaved re-measurement\n" + v.summary +
                   ". A = original, B = optimized, each round a fresh process of its own build.\n\n"
                   "| case | A median us (min-max) | B median us (min-max) | change | outcome |\n|---|---:|---:|---:|---|\n";
  for (const auto& c : v.cases)
    md += "| " + c.key + " | " + fmt("%.2f", c.a_median_us) + " (" + fmt("%.2f", c.a_min_us) + "-" + fmt("%.2f", c.a_max_us) +
          ") | " + fmt("%.2f", c.b_median_us) + " (" + fmt("%.2f", c.b_min_us) + "-" + fmt("%.2f", c.b_max_us) + ") | " +
          fmt("%+.1f%%", c.change_pct) + " | " + c.outcome + " |\n";
  return md;
}

}  // namespace

std::string render_report(const StageContext& ctx, const KernelPerfInput& in, const OpSpec& spec, const BenchRun* orig,
                          const BenchRun* opt, const std::string& tests, const std::string& diff,
                          const std::string& plot, const std::string& torch_status, const std::string& winner,
                          const std::string& stop) {
  using kainjow::mustache::data;
  kainjow::mustache::mustache t(util::read_file(templates_dir() / "report.md.mustache"));
  data view;
  const YAML::Node& p = ctx.profile;
  view.set("op", in.op);
  view.set("goal", in.goal);
  view.set("modes", in.mode.empty() ? std::string("forward, backward, full") : in.mode);
  view.set("target_metric", in.target_metric.empty() ? std::string("none") : in.target_metric);
  view.set("device", orig ? orig->device : std::string("(no GPU run)"));
  view.set("sm", std::to_string(p["architecture"]["sm"].as<int>(0)));
  view.set("copy_gbps", orig ? fmt("%.1f", orig->copy_gbps) : std::string("n/a"));
  view.set("bottleneck", p["bottleneck"]["class"].as<std::string>("unknown"));
  view.set("bottleneck_reason", p["bottleneck"]["evidence"].as<std::string>(""));
  int variants = 0;
  if (fs::exists(opt_dir(ctx) / "act.json"))
    variants = static_cast<int>(nlohmann::json::parse(util::read_file(opt_dir(ctx) / "act.json")).value("variants", nlohmann::json::array()).size());
  view.set("variant_count", std::to_string(variants));
  view.set("winner", winner);
  view.set("stop_reason", stop);
  view.set("test_filter", spec.test_filter);
  view.set("tests", tests);
  data rows{data::type::list};
  std::vector<double> speedups;
  if (orig && opt)
    for (const auto& o : orig->results) {
      data d;
      d.set("key", o.key());
      const auto* n = opt->find(o.key());
      d.set("orig", o.ok ? fmt("%.2f", o.median_us) : std::string("FAILED"));
      d.set("opt", n && n->ok ? fmt("%.2f", n->median_us) : std::string("FAILED"));
      const double sp = n && n->ok && o.ok && n->median_us > 0 ? o.median_us / n->median_us : 0;
      if (sp > 0 && in_target(in.goal_spec(), o.mode)) speedups.push_back(sp);
      d.set("speedup", sp > 0 ? fmt("%.3fx", sp) : std::string("-"));
      d.set("orig_copy", fmt("%.1f", o.copy_fraction * 100));
      d.set("opt_copy", n ? fmt("%.1f", n->copy_fraction * 100) : std::string("-"));
      d.set("torch", std::string("see below"));
      rows.push_back(d);
    }
  view.set("rows", rows);
  view.set("geomean", speedups.empty() ? std::string("n/a") : fmt("%.3fx", geomean(speedups)));
  view.set("torch_status", torch_status);
  view.set("plot", plot);
  view.set("default_threads", std::to_string(p["compiler_resources"]["default_threads"].as<int>(0)));
  data kernels{data::type::list};
  for (const auto& k : p["compiler_resources"]["kernels"]) {
    data d;
    d.set("name", k["name"].as<std::string>());
    d.set("registers", std::to_string(k["registers"].as<int>()));
    d.set("spills", std::to_string(k["spill_stores_bytes"].as<long long>()) + "/" + std::to_string(k["spill_loads_bytes"].as<long long>()));
    d.set("smem", std::to_string(k["smem_bytes"].as<long long>()));
    d.set("occupancy", fmt("%.0f%%", k["occupancy_at_default_threads"].as<double>() * 100));
    kernels.push_back(d);
  }
  view.set("kernels", kernels);
  data code_rows{data::type::list};
  std::string shown_kernel = "none";
  for (const auto& v : p["code_variants"]) {
    data d;
    shown_kernel = v["kernel"].as<std::string>("");
    d.set("variant", v["variant"].as<std::string>());
    d.set("knobs", v["knobs"].as<std::string>());
    const bool ok = v["compiled"].as<bool>(false);
    d.set("registers", ok ? std::to_string(v["registers"].as<int>()) : std::string("does not compile"));
    d.set("spills", ok ? std::to_string(v["spill_bytes"].as<long long>()) : std::string("-"));
    d.set("occupancy", ok ? fmt("%.0f%%", v["occupancy_at_default_threads"].as<double>() * 100) : std::string("-"));
    code_rows.push_back(d);
  }
  view.set("variants", code_rows);
  view.set("has_variants", p["code_variants"].size() > 0);
  view.set("variant_kernel", shown_kernel);
  view.set("bottleneck", p["bottleneck"]["class"].as<std::string>("unknown") + " (" +
                             p["bottleneck"]["evidence"].as<std::string>("") + ")");
  view.set("diff", diff.empty() ? std::string("(nothing applied)") : diff);
  return t.render(view);
}

StageResult verify(StageContext& ctx) {
  StageResult result;
  const KernelPerfInput in = parse_kernel_perf_input(ctx.input);
  const OpSpec spec = load_op_spec(skills_dir() / "search_spaces.yaml", in.op);
  const fs::path fd = opt_dir(ctx) / "final";
  fs::create_directories(fd);
  if (ctx.profile["profile_only"].as<bool>(false) || !ctx.profile["baseline"]) {
    write(fd / "report.md", render_report(ctx, in, spec, nullptr, nullptr, "not run (--profile-only)", "", "not drawn",
                                          "not run", "none (--profile-only)", "--profile-only"));
    result.note("profile-only report: " + (fd / "report.md").string());
    return result;
  }
  const int sm = ctx.profile["architecture"]["sm"].as<int>();
  const nlohmann::json state = nlohmann::json::parse(util::read_file(opt_dir(ctx) / "act.json"));
  const std::string winner = state.value("winner", "");
  const std::string stop = state.value("stop_reason", "");
  const std::string original_tuning = util::read_file(ctx.input_dir / "snapshot" / spec.tuning);
  const std::string applied = read_or_empty(ctx.tree_root / spec.tuning);
  const std::string diff = engine::unified_diff(original_tuning, applied, "a/" + spec.tuning, "b/" + spec.tuning);
  const Candidate start = in.start_tunables;

  // Hard gate: the op's full GPU test suite with what was applied.
  std::string tests = "not run (nothing applied)";
  // The work tree holds Optimize's last variant: bring it to the tree as applied.
  if (fs::exists(ctx.tree_root / spec.kernel_source))
    write(work_dir(ctx) / spec.kernel_source, util::read_file(ctx.tree_root / spec.kernel_source));
  write(work_dir(ctx) / spec.tuning, applied);
  auto phase_start = Clock::now();
  if (auto err = build_work(ctx, in, sm, fd / "build-applied.log"); !err.empty()) return result.fail("the applied winner does not build", err);
  record_phase(ctx, "finalize", "build of what was applied", seconds_since(phase_start));
  phase_start = Clock::now();
  std::string summary;
  const bool passed = run_tests(ctx, spec, fd / "tests.log", &summary);
  record_phase(ctx, "finalize", "the op's full test suite", seconds_since(phase_start), summary);
  tests = (passed ? "passed: " : "FAILED: ") + summary;
  if (!passed) {
    write(fd / "report.md", render_report(ctx, in, spec, nullptr, nullptr, tests, diff, "not drawn", "not run", winner,
                                          stop + "; the op's test suite failed with the winner, which is reverted"));
    return result.fail("the op's test suite failed with " + (winner.empty() ? std::string("the tree") : winner) + " applied (reverted)",
                       tail(read_or_empty(fd / "tests.log"), 2000));
  }

  // Original vs optimized, each from its own build of the work tree.
  const fs::path abab = fd / "abab";
  std::string abab_status = winner.empty() ? "not run: no winner" : "";
  if (abab_status.empty())
    if (auto err = snapshot_bench(ctx, abab / "optimized"); !err.empty()) abab_status = "not run: " + err;
  ctx.progress("re-benchmarking the optimized library");
  phase_start = Clock::now();
  const BenchRun opt = bench(ctx, in, winner.empty() ? start : Candidate{}, in.bench_min_time_ms, fd / "optimized.json");
  record_phase(ctx, "finalize", "optimized benchmark", seconds_since(phase_start));
  phase_start = Clock::now();

  // PyTorch baseline, against the optimized build (before the work tree is rebuilt as the original:
  // the library the Python binding loads is that build's).
  std::string torch_status = "not run: python3 not found";
  auto runner = current_runner();
  if (runner->has_tool("python3")) {
    auto probe = runner->run({"python3", "-c", "import torch,sys; sys.exit(0 if torch.cuda.is_available() else 3)"}, {}, seconds(120));
    if (!probe.ok()) {
      torch_status = "not run: python3 has no CUDA-enabled torch";
    } else {
      auto r = run_logged(ctx,
                          {"env", "LIGER_KERNELS_LIBRARY=" + (build_dir(ctx) / "kernels" / "libliger_kernels.so").string(), "python3",
                           (work_dir(ctx) / "benchmarks" / "compare_torch.py").string(), "--ops", in.op, "--out",
                           (fd / "torch").string()},
                          work_dir(ctx), 1200, fd / "torch.log");
      torch_status = r.ok() ? "PyTorch eager / torch.compile vs liger: final/torch.md" : "compare_torch.py failed (final/torch.log)";
    }
  }

  record_phase(ctx, "finalize", "PyTorch comparison", seconds_since(phase_start), torch_status);
  phase_start = Clock::now();
  // The original: Optimize's snapshot of the v0 build when it loads its own library (no rebuild),
  // else rebuilt in the work tree.
  const fs::path v0_build = opt_dir(ctx) / "v0-build";
  std::string why_rebuilt;
  const bool from_v0_snapshot = fs::exists(v0_build / "liger-bench") && loads_own_library(v0_build, &why_rebuilt);
  fs::path original_snapshot = v0_build;
  ctx.progress("re-benchmarking the original library");
  std::optional<BenchRun> orig_run;
  if (from_v0_snapshot) {
    orig_run = bench(ctx, in, start, in.bench_min_time_ms, fd / "original.json", false, v0_build);
  } else {
    if (ctx.log) ctx.log->info("kernel-perf: rebuilding the original ({})", why_rebuilt.empty() ? "no v0 snapshot" : why_rebuilt);
    write(work_dir(ctx) / spec.tuning, original_tuning);
    if (auto err = build_work(ctx, in, sm, fd / "build-original.log"); !err.empty()) return result.fail("the original does not rebuild", err);
    orig_run = bench(ctx, in, start, in.bench_min_time_ms, fd / "original.json");
    original_snapshot = abab / "original";
    if (abab_status.empty())
      if (auto err = snapshot_bench(ctx, original_snapshot); !err.empty()) abab_status = "not run: " + err;
    write(work_dir(ctx) / spec.tuning, applied);
  }
  const BenchRun& orig = *orig_run;
  record_phase(ctx, "finalize", "original benchmark", seconds_since(phase_start),
               from_v0_snapshot ? "from the v0 snapshot" : "rebuilt");

  // Wins that hold: the winner only counts where alternating fresh processes agree.
  std::optional<Interleaved> held;
  if (abab_status.empty()) {
    phase_start = Clock::now();
    std::string why;
    held = interleaved_rounds(ctx, in, abab, original_snapshot, abab / "optimized", start, Candidate{}, kInterleavedRounds,
                              &why);
    abab_status = held ? held->summary : "not run: " + why;
    if (held) write(fd / "interleaved.md", interleaved_markdown(*held));
    if (held && !held->holds) result.warn("the winner's gain does not hold on interleaved re-measurement", held->summary);
    record_phase(ctx, "finalize", "A/B interleaved re-measurement", seconds_since(phase_start),
                 std::to_string(kInterleavedRounds) + " rounds x 2 processes");
  }

  // Plot.
  std::string plot = "not drawn: gnuplot not found";
  {
    std::ostringstream tsv;
    for (const auto& o : orig.results) {
      const auto* n = opt.find(o.key());
      if (!o.ok || !n || !n->ok) continue;
      std::string label = o.key();
      std::replace(label.begin(), label.end(), ' ', '_');
      tsv << label << "\t" << o.median_us << "\t" << n->median_us << "\n";
    }
    write(fd / "plot.tsv", tsv.str());
    kainjow::mustache::mustache t(util::read_file(templates_dir() / "plot.gp.mustache"));
    kainjow::mustache::data view;
    view.set("png", (fd / "comparison.png").string());
    view.set("op", in.op);
    view.set("device", orig.device);
    view.set("data", (fd / "plot.tsv").string());
    view.set("has_torch", false);
    write(fd / "plot.gp", t.render(view));
    if (runner->has_tool("gnuplot")) {
      auto r = run_logged(ctx, {"gnuplot", (fd / "plot.gp").string()}, fd, 120, fd / "gnuplot.log");
      plot = r.ok() ? "final/comparison.png" : "gnuplot failed (final/gnuplot.log)";
    }
  }
  std::string report = render_report(ctx, in, spec, &orig, &opt, tests, diff, plot, torch_status,
                                     winner.empty() ? "none (no variant improved outside the spread)" : winner, stop);
  report += "\n" + (held ? interleaved_markdown(*held) : "## Wins that hold: A/B interleaved re-measurement\n" + abab_status + "\n");
  // The whole run's phases (Profile, Optimize and Finalize so far): where the next run's time goes.
  if (const std::string t = timings_markdown(ctx); !t.empty()) report += "\n## Where the time went\n\n" + t;
  write(fd / "report.md", report);
  const Verdict v = judge(orig, opt, in.goal_spec());
  if (!winner.empty() && v.verdict == "REJECTED")
    result.warn("the final re-benchmark does not confirm the winner's gain", v.summary);
  result.note(fmt("original vs optimized: %.3fx geo-mean; report ", v.geomean_speedup) + (fd / "report.md").string());
  result.note("A/B interleaved: " + abab_status + (held ? (held->holds ? " -> the win holds" : " -> the win does not hold") : ""));
  return result;
}

}  // namespace liger::kernel_perf::stages
