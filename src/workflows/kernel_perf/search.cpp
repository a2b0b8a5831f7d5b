// The launch-parameter search's decisions (search.h).
#include "workflows/kernel_perf/search.h"

#include <algorithm>
#include <cmath>

namespace liger::kernel_perf {

bool idle_threads_per_row(const SearchSpace& space, const Candidate& c, long long cols, int dtype_bytes,
                          std::string* why) {
  if (space.row_vector_bytes <= 0 || cols <= 0 || dtype_bytes <= 0 || !c.count("threads_per_block")) return false;
  const int tpb = c.at("threads_per_block");
  const int rpb = c.count("rows_per_block") && c.at("rows_per_block") > 0 ? c.at("rows_per_block") : 1;
  const int vbytes = c.count("vector_bytes") && c.at("vector_bytes") > 0 ? c.at("vector_bytes") : space.row_vector_bytes;
  const long long vectors = std::max(1LL, cols * dtype_bytes / vbytes);
  const long long per_row = tpb / rpb;
  if (per_row <= vectors) return false;
  if (why)
    *why = std::to_string(per_row) + " threads per row for " + std::to_string(vectors) + " vectors of a " +
           std::to_string(cols) + "-element row";
  return true;
}

std::vector<Candidate> class_candidates(const SearchSpace& space, const std::vector<Candidate>& list,
                                        const SearchClass& cls, int dtype_bytes, std::vector<std::string>* pruned) {
  std::vector<Candidate> kept;
  std::vector<std::string> why_list;
  for (const auto& c : list) {
    std::string why;
    if (idle_threads_per_row(space, c, cls.cols, dtype_bytes, &why))
      why_list.push_back(candidate_text(c) + ": " + why);
    else
      kept.push_back(c);
  }
  if (kept.empty()) return list;
  if (pruned) pruned->insert(pruned->end(), why_list.begin(), why_list.end());
  return kept;
}

std::vector<std::string> class_survivors(std::vector<std::pair<double, std::string>> ranked, double best_spread_pct,
                                         const SearchMeasure& m, std::size_t keep) {
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  if (ranked.empty() || !std::isfinite(ranked.front().first)) return out;
  const double best = ranked.front().first;
  const double cut = best * (1 + std::max(m.early_cut_pct, 3 * best_spread_pct) / 100);
  const std::size_t n = std::min(ranked.size(), std::max(keep, (ranked.size() + 1) / 2));
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(ranked[i].first)) break;
    // The early cut never leaves fewer than `keep`: the best few are always re-measured longer.
    if (i >= keep && ranked[i].first > cut) break;
    out.push_back(ranked[i].second);
  }
  return out;
}

double class_spread(const BenchRun& run, const std::vector<std::string>& keys) {
  double s = 0;
  for (const auto& k : keys)
    if (const auto* r = run.find(k); r && r->ok) s = std::max(s, r->spread_pct);
  return s;
}

bool beats_outside_spread(const BenchRun& challenger, const BenchRun& incumbent, const std::vector<std::string>& keys) {
  const double a = class_score(challenger, keys), b = class_score(incumbent, keys);
  if (!std::isfinite(a)) return false;
  if (!std::isfinite(b)) return true;
  const double noise = std::max(class_spread(challenger, keys), class_spread(incumbent, keys));
  return a < b * (1 - noise / 100);
}

std::string case_label(const std::string& key) {
  std::string out = key;
  std::replace(out.begin(), out.end(), ' ', '/');
  return out;
}

std::string candidate_arg(const Candidate& c, const std::vector<std::string>& keys) {
  std::string text;
  for (const auto& [k, v] : c) text += (text.empty() ? "" : ",") + k + "=" + std::to_string(v);
  std::string cases;
  for (const auto& k : keys) cases += (cases.empty() ? "" : "+") + case_label(k);
  return cases.empty() ? text : text + "@" + cases;
}

BenchRun restrict_run(const BenchRun& run, const std::set<std::string>& keys) {
  BenchRun out = run;
  out.results.clear();
  for (const auto& r : run.results)
    if (keys.count(r.key())) out.results.push_back(r);
  return out;
}

}  // namespace liger::kernel_perf
