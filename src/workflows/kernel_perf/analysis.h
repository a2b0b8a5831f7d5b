// kernel-perf analysers: everything the Profile/Optimize/Finalize stages decide from tool output,
// as pure functions so they are tested on recorded logs without a GPU.
//
//   ptxas / cuobjdump resource report -> KernelResources      (parse_ptxas_log, parse_cuobjdump_...)
//   architecture limits (skills data)  -> estimate_occupancy  (the CUDA occupancy-calculator rules)
//   ncu --csv                          -> NcuMetrics
//   liger-bench --json                 -> BenchRun
//   metrics + rules (skills data)      -> classify             (memory/compute/latency-bound, balanced)
//   strategies (skills data)           -> strategy_order
//   search space (skills data)         -> coarse_grid, refine_around, prune_candidate
//   baseline vs variant runs           -> judge (per-size results, guardrails, verdict)
//   variant history                    -> stop_reason
#pragma once

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace liger::kernel_perf {

namespace fs = std::filesystem;

// ---------------------------------------------------------------- compiler resource report
struct KernelResources {
  std::string mangled;
  std::string name;  // demangled
  std::string arch;  // "sm_90"
  int registers = 0;
  int barriers = 0;
  long long stack_frame_bytes = 0;
  long long spill_store_bytes = 0;
  long long spill_load_bytes = 0;
  long long smem_bytes = 0;  // static shared memory per block
  long long cmem_bytes = 0;  // sum over constant banks
  bool spills() const { return spill_store_bytes > 0 || spill_load_bytes > 0; }
};

std::string demangle(const std::string& mangled);
// `nvcc -Xptxas -v` output (stderr). Every "Compiling entry function" block becomes one entry.
std::vector<KernelResources> parse_ptxas_log(const std::string& log);
// `cuobjdump --dump-resource-usage <lib>`: "Function <mangled>:\n REG:26 STACK:0 SHARED:2112 ...".
std::vector<KernelResources> parse_cuobjdump_resource_usage(const std::string& text);

// ---------------------------------------------------------------- architectures and occupancy
struct ArchLimits {
  int sm = 0;                  // 80, 86, 89, 90, 100, 120
  std::string family;          // ampere | ada | hopper | blackwell
  std::string example;         // "H100"
  int max_threads_per_sm = 2048;
  int max_warps_per_sm = 64;
  int max_blocks_per_sm = 32;
  int max_threads_per_block = 1024;
  int registers_per_sm = 65536;
  int max_registers_per_thread = 255;
  int register_alloc_unit = 256;     // registers, per warp
  long long smem_per_sm = 233472;    // bytes usable by blocks
  long long max_smem_per_block = 232448;
  int smem_alloc_unit = 128;
  int smem_reserved_per_block = 1024;
  std::vector<std::string> notes;    // facts the strategies and the report quote
};

// Throws liger::Error (Internal) when the data file is malformed.
std::vector<ArchLimits> load_architectures(const fs::path& yaml_path);
std::vector<ArchLimits> parse_architectures(const YAML::Node& doc);
// Exact match, else the closest lower entry of the same major version, else nullptr.
const ArchLimits* find_arch(const std::vector<ArchLimits>& archs, int sm);
// "ampere" -> 80, "hopper" -> 90, "blackwell" -> 100, "sm_90"/"sm90"/"9.0"/"90"/"h100"/"a100" -> sm.
std::optional<int> parse_target_gpu(const std::string& text);
// nvidia-smi --query-gpu=compute_cap --format=csv,noheader: "9.0" -> 90 (first GPU).
std::optional<int> parse_compute_cap(const std::string& text);

struct Occupancy {
  bool launchable = true;
  std::string limiter;  // registers | shared memory | threads | blocks | warps | not launchable: why
  int blocks_per_sm = 0;
  int active_warps = 0;
  int max_warps = 0;
  double fraction = 0;  // active_warps / max_warps
  int blocks_by_registers = 0, blocks_by_smem = 0, blocks_by_threads = 0, blocks_by_blocks = 0;
};
Occupancy estimate_occupancy(const ArchLimits& arch, int registers_per_thread, long long smem_per_block,
                             int threads_per_block);
// The largest multiple of 32 threads a block of this kernel can have on this architecture.
int max_launchable_threads(const ArchLimits& arch, int registers_per_thread, long long smem_per_block);

// ---------------------------------------------------------------- Nsight Compute
struct NcuMetrics {
  int kernels = 0;                        // kernel launches profiled
  std::map<std::string, double> mean;     // metric name -> mean over launches
  std::map<std::string, double> max;
  std::set<std::string> kernel_names;
  // Friendly names used by the classification rules (percent values).
  std::map<std::string, double> rule_metrics() const;
};
// `ncu --csv --metrics ...` output (one row per metric per launch); tolerates the "==PROF=="
// lines before the header and thousands separators in values.
NcuMetrics parse_ncu_csv(const std::string& text);
// Stall reasons asked of Nsight Compute (smsp__average_warps_issue_stalled_<reason>_per_issue_active:
// warps stalled for that reason per issued instruction) and the `--metrics` list of them.
const std::vector<std::string>& stall_reasons();
std::string stall_metrics_csv();
// The n largest stall reasons of a run, largest first, as (reason, warps per issue).
std::vector<std::pair<std::string, double>> top_stalls(const NcuMetrics& m, std::size_t n);

// ---------------------------------------------------------------- liger-bench --json
struct BenchCaseResult {
  std::string op, mode, shape, dtype;
  bool ok = false;
  int runs = 0;
  double median_us = 0, min_us = 0, p10_us = 0, p90_us = 0, mean_us = 0, spread_pct = 0;
  double min_bytes = 0, gbps = 0, copy_fraction = 0, flops = 0, tflops = 0, extra_mib = 0;
  std::string message;
  std::string key() const { return mode + " " + shape + " " + dtype; }
};

struct BenchRun {
  std::string device;
  int sm_arch = 0, sm_count = 0;
  double copy_gbps = 0;
  std::string tunables;
  std::vector<BenchCaseResult> results;
  const BenchCaseResult* find(const std::string& key) const;
};
// Throws liger::Error (Toolchain) naming the problem when the JSON is not liger-bench's.
BenchRun parse_bench_json(const std::string& text);
// Rows by (mode, rows x cols) from a "RxC[_suffix]" shape label; 0 when not of that form.
long long shape_rows(const std::string& shape);
long long shape_cols(const std::string& shape);

// ---------------------------------------------------------------- bottleneck classification
struct Condition {
  std::string metric;  // copy_fraction, tflops_fraction, dram_pct, sm_pct, achieved_occupancy_pct, occupancy, median_us
  std::string op;      // < <= > >=
  double value = 0;
};
struct ClassRule {
  std::string bottleneck;  // memory-bound | compute-bound | latency-bound | balanced
  std::vector<Condition> all;
  std::string reason;
};
std::vector<ClassRule> parse_class_rules(const YAML::Node& rules);
struct Classification {
  std::string bottleneck;
  std::string reason;
  std::string rule;  // the matching rule as text
};
// First rule whose every condition holds wins; a condition on a metric that is absent is false.
// A rule with no conditions matches always (the fallback).
Classification classify(const std::vector<ClassRule>& rules, const std::map<std::string, double>& metrics);
// The class most cases have (ties: the order register, memory, compute, latency, balanced).
std::string overall_class(const std::vector<std::string>& per_case);

// ---------------------------------------------------------------- strategies
struct Strategy {
  std::string id, name, kind;  // kind: tunable_search | split_size_class | neighbour_search | code_variant | llm_code
  std::vector<std::string> applies_to;     // bottleneck classes, or "any"
  std::vector<std::string> preconditions;  // op traits that must hold ("table", "row_wise", ...)
  std::string changes;
  std::string expected;
  std::map<std::string, int> knobs;  // code_variant: knob values set over the current best's
};
std::vector<Strategy> parse_strategies(const YAML::Node& doc);
// Parameter tuning first; then the strategies that apply to `bottleneck` whose preconditions the
// op's traits meet, in catalogue order.
std::vector<Strategy> strategy_order(const std::vector<Strategy>& all, const std::string& bottleneck,
                                     const std::set<std::string>& traits);

// ---------------------------------------------------------------- search space
using Candidate = std::map<std::string, int>;  // tunable -> value (liger-bench --tunable)
std::string candidate_text(const Candidate& c);        // "threads_per_block=256 vector_bytes=16"
std::optional<Candidate> parse_candidate(const std::string& text);  // "a=1,b=2" or "a=1 b=2"

struct TunableDim {
  std::string name;
  std::vector<int> coarse;
  int multiple_of = 1;
  int min = 1, max = 1 << 30;
  bool power_of_two = false;
};
struct SearchSpace {
  std::string op;
  std::vector<TunableDim> dims;
  int max_threads_backward = 0;  // 0: no limit beyond the architecture's
  bool rows_divide_threads = false;
  int row_vector_bytes = 0;  // > 0: a row is read in vectors of this many bytes (unless vector_bytes
                             // is a tunable): more threads per row than vectors only idle
};
SearchSpace parse_search_space(const std::string& op, const YAML::Node& node);
std::vector<Candidate> coarse_grid(const SearchSpace& space);
// Neighbours of `best` one step finer than the coarse grid in each dimension (geometric
// midpoints, rounded to the dimension's granularity), minus what was already tried.
std::vector<Candidate> refine_around(const SearchSpace& space, const Candidate& best, const std::set<Candidate>& tried);
// Resource-limit pruning: false (with the reason) when the candidate cannot launch on `arch`
// given the op's largest register count and shared memory per block.
bool candidate_feasible(const SearchSpace& space, const Candidate& candidate, const ArchLimits& arch,
                        int max_registers, long long max_smem, bool has_backward, std::string* why);

// ---------------------------------------------------------------- verdicts and guardrails
struct Goal {
  std::string goal = "balanced";          // speed | memory | balanced
  std::set<std::string> target_modes;     // empty: every mode
};

struct CaseComparison {
  std::string key, mode, shape, dtype;
  double base_us = 0, variant_us = 0;
  double change_pct = 0;    // (variant - base) / base, percent; negative is faster
  double noise_pct = 0;     // the larger spread of the two runs
  std::string outcome;      // faster | slower | same | failed
  double base_mib = 0, variant_mib = 0;
  double variant_copy_fraction = 0;
};
struct GuardrailCheck {
  std::string rule;     // what was checked
  std::string where;    // the case
  double change_pct = 0;
  double threshold_pct = 0;
  bool passed = true;
};
struct Verdict {
  std::string verdict;  // ACCEPTED | REJECTED | MIXED
  std::string summary;
  double geomean_speedup = 1;   // base/variant over target cases (> 1 is faster)
  double memory_change_pct = 0; // total extra MiB change over target cases
  std::vector<CaseComparison> cases;
  std::vector<GuardrailCheck> guardrails;
};
// Compares `variant` with `base` (same cases). Speedups count only outside the run-to-run spread
// of the two runs. Guardrails: a non-target metric > 5% worse at any size, or one pass > 10%
// slower while the other improves -> REJECTED; improvements at every changed size -> ACCEPTED;
// improvements and (within-guardrail) regressions -> MIXED; nothing improved -> REJECTED.
Verdict judge(const BenchRun& base, const BenchRun& variant, const Goal& goal);
bool in_target(const Goal& goal, const std::string& mode);

// ---------------------------------------------------------------- search speed and wins that hold
// Geometric mean of the median times of `keys` in `run` (INFINITY when one is missing or failed).
double class_score(const BenchRun& run, const std::vector<std::string>& keys);
// Successive halving over candidates measured in one round (candidate text -> run): for every
// size class (its case keys), the best half (rounded up, at least `keep` and never more than
// there are) by class_score survive; the result is the union over classes, so a candidate that
// wins one class only is kept.
std::set<std::string> halving_survivors(const std::map<std::string, BenchRun>& round,
                                        const std::vector<std::vector<std::string>>& classes, std::size_t keep);
// A baseline (A) and a variant (B) measured in alternating fresh processes, A B A B ...
struct InterleavedCase {
  std::string key, mode;
  double a_median_us = 0, b_median_us = 0;  // medians over the rounds of each side's median
  double a_min_us = 0, a_max_us = 0, b_min_us = 0, b_max_us = 0;  // ranges over the rounds
  double change_pct = 0;   // (b - a) / a of the medians
  std::string outcome;     // faster | slower | same (the ranges overlap) | failed
};
struct Interleaved {
  int rounds = 0;
  std::vector<InterleavedCase> cases;
  double geomean_speedup = 1;  // a/b over target cases, a case inside the spread counting as 1
  bool holds = false;          // some target case faster outside the spread, none slower
  std::string summary;
};
Interleaved judge_interleaved(const std::vector<BenchRun>& a, const std::vector<BenchRun>& b, const Goal& goal);

// ---------------------------------------------------------------- target metric and stop rules
struct TargetMetric {
  std::string mode;   // "" any
  std::string shape;  // "" any (then the geometric mean over the target cases)
  std::string kind;   // time_us | copy_fraction | gbps | speedup (geo-mean vs v0)
  double value = 0;
  std::string text;
};
// "forward@4096x4096<300us", "forward<0.3ms", "full>=85%copy", "<120us", "1.3x", "900GB/s".
// Throws Usage.
TargetMetric parse_target_metric(const std::string& text);
bool target_met(const TargetMetric& target, const BenchRun& run, const Goal& goal, const BenchRun* baseline = nullptr);

struct StopInput {
  int variants_done = 0;
  int budget = 8;
  std::vector<double> improvements_pct;  // per variant: improvement over the best before it (%)
  bool target_met = false;
};
// Why to stop, or nullopt to go on.
std::optional<std::string> stop_reason(const StopInput& input);

double geomean(const std::vector<double>& values);

}  // namespace liger::kernel_perf
