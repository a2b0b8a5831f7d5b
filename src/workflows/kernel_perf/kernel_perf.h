// The kernel-perf workflow (SPEC section 7): Profile (understand) -> Optimize (act) -> Finalize
// (verify) on one op of the bundled kernel library.
//
// The CLI records the arguments as JSON (see parse_kernel_perf_input for the keys) and the stages
// read them back. Every external tool (nvcc, nvidia-smi, ncu, cmake, liger-bench, kernel_tests,
// gnuplot, python3) runs through a Runner so tests feed recorded outputs.
#pragma once

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "liger/process.h"
#include "liger/workflow.h"
#include "workflows/kernel_perf/analysis.h"
#include "workflows/kernel_perf/code_variants.h"
#include "workflows/kernel_perf/tuning_table.h"

namespace liger::kernel_perf {

// ---------------------------------------------------------------- input
struct KernelPerfInput {
  std::string op;
  std::string goal = "balanced";            // speed | memory | balanced
  std::string mode;                         // forward | backward | full | "" (all)
  std::string target_gpu;                   // "" auto-detect
  std::string target_metric;                // "" none
  int max_variants = 8;
  bool profile_only = false;
  Candidate start_tunables;                 // v0 baseline overrides (empty: the tuned table)
  std::string dtype;                        // liger-bench --dtype filter ("" all)
  int search_min_time_ms = 100;             // per case during the tunable search
  int bench_min_time_ms = 400;              // per case for v0, variants and the final comparison
  int jobs = 0;                             // build parallelism (0: hardware threads)
  std::string work_dir;                     // shared work tree (builds reused across runs); "": the run's

  nlohmann::json to_json() const;
  Goal goal_spec() const;
};

// Reads the run arguments. Keys: op (required), goal, mode, target_gpu, target_metric,
// max_variants, profile_only, start_tunables ("a=1,b=2" or an object), dtype,
// search_min_time_ms, bench_min_time_ms, jobs. Throws liger::Error (Usage) naming the bad key.
KernelPerfInput parse_kernel_perf_input(const nlohmann::json& arguments);

// ---------------------------------------------------------------- tools
class Runner {
 public:
  virtual ~Runner() = default;
  virtual toolchain::ProcessResult run(const std::vector<std::string>& argv, const std::filesystem::path& cwd,
                                       std::chrono::seconds timeout) = 0;
  virtual bool has_tool(const std::string& name) = 0;
};
std::shared_ptr<Runner> make_system_runner();
// The runner the stages use (the system one unless a test installed another).
std::shared_ptr<Runner> current_runner();
void set_runner_for_testing(std::shared_ptr<Runner> runner);

// ---------------------------------------------------------------- op data (skills/kernel_perf/search_spaces.yaml)
struct TableSpec {
  std::map<int, std::string> arrays;  // sm -> array name
  int arch_field = -1;
  int size_field = 0;
  std::string size_key = "cols";      // elements | cols
  std::map<std::string, int> map;     // tunable -> field
  std::string derive;                 // "" | norm
  bool present = false;
};
struct OpSpec {
  std::string name, header, kernel_source, tuning, test_file, test_filter, ncu_kernel_regex;
  std::vector<std::string> snapshot;
  int default_threads = 256;
  std::set<std::string> traits;
  SearchSpace space;
  TableSpec table;
  CodeKnobSpec code;  // compile-time code strategies (absent: none)
};
// Throws Usage listing the known ops when `op` is not in the data.
OpSpec load_op_spec(const std::filesystem::path& search_spaces_yaml, const std::string& op);
// As load_op_spec; an op that the checkout's kernels/ops.yaml lists but the catalogue lacks (one
// kernel-dev generated) is a usage error that says so, not "no op named".
OpSpec load_op_spec_for_tree(const std::filesystem::path& search_spaces_yaml, const std::string& op,
                             const std::filesystem::path& tree);

// Size of a benchmark case for the table's size key (rows*cols or cols of "RxC").
long long case_size(const TableSpec& table, const std::string& shape);
// The index (in the array's row order) of the table row a size falls into for architecture sm.
std::optional<std::size_t> table_row_for(const TuningFile& file, const TableSpec& table, int sm, long long size);
// Writes a candidate into the row a size class maps to; returns false (with why) when the
// candidate cannot be expressed in the table. `dtype_bytes` and `size` serve the norm derivation.
bool apply_candidate_to_row(TuningFile& file, const TableSpec& table, int sm, std::size_t row, const Candidate& c,
                            long long cols, int dtype_bytes, std::string* why);

// ---------------------------------------------------------------- notebooks
struct NotebookCase {
  std::string key, base_us, variant_us, change_pct, noise_pct, outcome, copy;
};
struct Notebook {
  std::string op, variant, title, status;  // status: planned | measured | discarded
  std::string hypothesis, change, change_detail, expected, smoke;
  std::vector<std::pair<std::string, std::string>> prior;  // (variant + verdict, learning)
  std::optional<Verdict> verdict;
  std::vector<std::string> learnings;
};
std::string render_notebook(const std::filesystem::path& templates_dir, const Notebook& notebook);
// The learnings bullet list and verdict line of a rendered notebook (what the next variant reads).
std::vector<std::string> notebook_learnings(const std::string& markdown);
std::string notebook_verdict(const std::string& markdown);

struct VariantSummary {
  std::string variant, strategy, change, smoke, verdict, summary;
  double speedup = 1, memory_change_pct = 0;
};
struct ComparisonInfo {
  std::string op, goal, modes, device, start, winner, stop_reason;
  int sm = 0;
  std::vector<VariantSummary> variants;
};
std::string render_comparison(const std::filesystem::path& templates_dir, const ComparisonInfo& info);

// ---------------------------------------------------------------- the workflow
engine::Workflow make_workflow();

}  // namespace liger::kernel_perf
