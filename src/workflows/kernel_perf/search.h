// The launch-parameter search's decisions, as pure functions tested without a GPU: which grid
// points a size class can use, which candidates survive a round of successive halving, when a
// challenger beats the incumbent launch shape, and how a candidate is named to liger-bench.
//
// The search runs per size class (a table row and the target cases in it): a candidate is
// measured only on the cases of the classes where it is still in the running, so a point that
// lost one class early costs nothing there later, and a refinement around one class's winner is
// measured on that class alone.
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "workflows/kernel_perf/analysis.h"

namespace liger::kernel_perf {

// Measurement settings of the search's liger-bench processes. The final verdicts (a variant's
// benchmark, Finalize's A/B) never use these: they run the fixed-time measurement.
struct SearchMeasure {
  // Per case: the GPU is kept busy by the same process (the copy probe runs first, then one
  // case after another), so a short warm-up settles the clocks.
  int warmup_ms = 3;
  int min_runs = 20;
  // A case whose runs already have a p10-p90 spread at or below this stops before its time:
  // its median is stable, and more runs would not move a decision made outside the spread.
  double stop_spread_pct = 3.0;
  // Early cut: after a round, a candidate slower than its class's best by more than this (or
  // three times the best's spread, if larger) is dropped whatever the halving would keep.
  double early_cut_pct = 10.0;
};

struct SearchClass {
  std::size_t row = 0;
  std::vector<std::string> keys;  // target cases ("mode shape dtype") the row serves
  long long cols = 0;             // the largest row length among them (0: not a rows x cols op)
};

// Whether a candidate has more threads per row (threads_per_block / rows_per_block) than a row
// of `cols` elements has vectors (cols * dtype_bytes / vector bytes: the candidate's
// vector_bytes, else the space's row_vector_bytes). Such threads only idle. False when the
// space has no row_vector_bytes, the candidate sets no threads_per_block, or cols is unknown.
bool idle_threads_per_row(const SearchSpace& space, const Candidate& c, long long cols, int dtype_bytes,
                          std::string* why);

// The candidates of `list` a class keeps (idle-thread points pruned; when that would leave
// none, the class keeps every point: a search with nothing to measure decides nothing).
std::vector<Candidate> class_candidates(const SearchSpace& space, const std::vector<Candidate>& list,
                                        const SearchClass& cls, int dtype_bytes, std::vector<std::string>* pruned);

// One class's survivors of a halving round, from (score, candidate text) and the spread (%) of
// the best one: the best half (at least `keep`), minus those beyond the early cut. Infinite
// scores (a failed case) never survive.
std::vector<std::string> class_survivors(std::vector<std::pair<double, std::string>> ranked, double best_spread_pct,
                                         const SearchMeasure& m, std::size_t keep);

// The largest spread (%) of `keys` in a run (0 when none is there).
double class_spread(const BenchRun& run, const std::vector<std::string>& keys);

// Whether `challenger` beats `incumbent` on a class outside the spread: its class score is
// lower than the incumbent's by more than the larger spread of the two runs on those cases.
bool beats_outside_spread(const BenchRun& challenger, const BenchRun& incumbent, const std::vector<std::string>& keys);

// liger-bench's name of a case ("mode shape dtype" -> "mode/shape/dtype") and the --candidate
// argument measuring `c` on `keys` only ("k=v,k=v@mode/shape/dtype+..."; no keys: every case).
std::string case_label(const std::string& key);
std::string candidate_arg(const Candidate& c, const std::vector<std::string>& keys);

// A run with only the results of `keys` (what a candidate still stands for).
BenchRun restrict_run(const BenchRun& run, const std::set<std::string>& keys);

}  // namespace liger::kernel_perf
