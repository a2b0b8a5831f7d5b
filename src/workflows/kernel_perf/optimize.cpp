// kernel-perf Optimize (act): the variants in the profile's strategy order, each with its lab
// notebook (hypothesis before it runs, verdict after), the launch-parameter search in batched
// liger-bench processes with successive halving, code variants from the tuning header's knobs,
// and LLM source variants when an endpoint is configured; the best is staged for the engine.
#include <mustache.hpp>

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "engine/diff.h"
#include "liger/error.h"
#include "liger/llm/provider.h"
#include "liger/util.h"
#include "workflows/kernel_perf/kernel_perf.h"
#include "workflows/kernel_perf/stages.h"

namespace liger::kernel_perf::stages {

namespace {

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

struct VariantRecord {
  std::string name, strategy, change, smoke = "not run", verdict = "REJECTED", summary;
  double speedup = 1, memory_change_pct = 0;
  std::string tuning;  // the tuning.h text the variant ships ("" : source variant)
  std::string source_diff;
  bool measured = false;
};

struct SearchState {
  // candidate text -> run (its last, longest measurement, holding only the cases of the classes
  // where it is still in the running)
  std::map<std::string, BenchRun> runs;
  std::map<std::string, BenchRun> dropped;  // losers of successive halving in every class (never picked)
  int batches = 0;
  std::map<std::size_t, std::string> class_winner;  // table row -> candidate text
  std::map<std::size_t, std::set<Candidate>> tried;  // table row -> every point measured or pruned there
};

// The launch shape v0 runs with: the op's own table (an empty candidate). It is measured beside
// the grid in the same process, and a row changes only when a challenger beats it outside the
// spread.
const std::string kIncumbent = candidate_text(Candidate{});

// A later run's results over an earlier one's, keeping the earlier cases the later lacks.
BenchRun merge_runs(const BenchRun& older, const BenchRun& newer) {
  BenchRun out = newer;
  for (const auto& r : older.results)
    if (!newer.find(r.key())) out.results.push_back(r);
  return out;
}

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

}  // namespace

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
  const auto build_start = Clock::now();
  if (auto err = build_work(ctx, in, sm, od / "work-build.log"); !err.empty()) return result.fail("work tree build", err);
  record_phase(ctx, "optimize", "work tree back to v0 (build)", seconds_since(build_start));
  // Kept for Finalize: the original without a rebuild.
  if (auto err = snapshot_bench(ctx, od / "v0-build"); !err.empty() && ctx.log)
    ctx.log->info("kernel-perf: no v0 snapshot ({}): Finalize rebuilds the original", err);

  std::vector<VariantRecord> history;
  std::vector<double> improvements;
  BenchRun best_run = v0;
  std::string best_name = "v0", best_tuning = original_tuning, stop = "every applicable strategy was tried";
  SearchState search;
  const auto strategies = profile_strategies(ctx.profile);
  std::size_t strategy_index = 0;
  int n = 0;
  const TuningFile original_file = TuningFile::parse(original_tuning);
  const auto classes = size_classes(spec, original_file, sm, v0, goal);
  const int dbytes = dominant_dtype_bytes(v0);
  const SearchMeasure measure;
  // The incumbent is the table's own choice only when v0 runs the table (no --start-tunables).
  const bool incumbent_is_table = in.start_tunables.empty() && spec.table.present;
  auto search_class = [&](std::size_t row) {
    return SearchClass{row, classes.at(row), largest_cols(v0, classes.at(row))};
  };

  // Successive halving per size class: every feasible point of a class (and the incumbent, so a
  // challenger is judged against it in the same process) in one process at a
  // quarter of the search time (a case stops early once its spread is small), then each class's
  // best half (minus those beyond the early cut) again at twice the time, up to the full search
  // time. A candidate is measured only on the cases of the classes it is still in; one lost
  // everywhere moves to search.dropped (recorded, never picked). Returns a one-line account.
  auto measure_candidates = [&](const std::map<std::size_t, std::vector<Candidate>>& per_row, const std::string& tag,
                                bool with_incumbent) {
    const auto start = Clock::now();
    const bool bwd = std::any_of(v0.results.begin(), v0.results.end(), [](const auto& r) { return r.mode != "forward"; });
    std::map<std::size_t, std::vector<Candidate>> live;
    int pruned_count = 0;
    for (const auto& [row, list] : per_row) {
      std::vector<Candidate> feasible;
      for (const auto& c : list) {
        std::string why;
        search.tried[row].insert(c);
        if (!candidate_feasible(spec.space, c, arch, ctx.profile["compiler_resources"]["max_registers"].as<int>(0),
                                ctx.profile["compiler_resources"]["max_smem_bytes"].as<long long>(0), bwd, &why)) {
          if (ctx.log) ctx.log->info("kernel-perf: pruned {}: {}", candidate_text(c), why);
          ++pruned_count;
          continue;
        }
        feasible.push_back(c);
      }
      std::vector<std::string> pruned;
      live[row] = class_candidates(spec.space, feasible, search_class(row), dbytes, &pruned);
      pruned_count += static_cast<int>(pruned.size());
      if (ctx.log)
        for (const auto& p : pruned) ctx.log->info("kernel-perf: pruned for row {}: {}", row, p);
      if (with_incumbent && incumbent_is_table && !live[row].empty()) live[row].push_back(Candidate{});
    }
    int time_ms = std::max(10, in.search_min_time_ms / 4), processes = 0;
    long measurements = 0;
    for (int round = 1;; ++round) {
      signals::throw_if_interrupted();
      std::map<std::string, BatchEntry> entries;
      for (const auto& [row, list] : live)
        for (const auto& c : list) {
          auto& e = entries[candidate_text(c)];
          e.candidate = c;
          e.keys.insert(e.keys.end(), classes.at(row).begin(), classes.at(row).end());
        }
      if (entries.empty()) break;
      std::vector<BatchEntry> batch;
      for (auto& [text, e] : entries) {
        measurements += static_cast<long>(e.keys.size());
        batch.push_back(e);
      }
      ctx.progress(tag + ": round " + std::to_string(round) + ", " + std::to_string(batch.size()) +
                   " candidate(s) in one liger-bench process, up to " + std::to_string(time_ms) + " ms per case");
      const fs::path dir = od / "search" / (std::to_string(search.batches++) + "-" + std::to_string(round));
      std::map<std::string, BenchRun> measured;
      ++processes;
      try {
        measured = bench_batch(ctx, in, batch, time_ms, measure, dir);
      } catch (const Error& e) {
        if (ctx.log) ctx.log->warn("kernel-perf: {} round {} failed: {}", tag, round, e.what());
        break;
      }
      const bool last = time_ms >= in.search_min_time_ms;
      std::map<std::size_t, std::vector<Candidate>> next;
      std::size_t kept = 0;
      for (const auto& [row, list] : live) {
        if (last) break;
        const auto& keys = classes.at(row);
        std::vector<std::pair<double, std::string>> ranked;
        for (const auto& c : list) {
          const std::string text = candidate_text(c);
          if (text == kIncumbent) continue;  // the reference: re-measured every round, never ranked out
          ranked.push_back({measured.count(text) ? class_score(measured[text], keys) : INFINITY, text});
        }
        std::stable_sort(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
        const double spread = ranked.empty() || !measured.count(ranked.front().second)
                                  ? 0
                                  : class_spread(measured[ranked.front().second], keys);
        const auto survivors = class_survivors(ranked, spread, measure, 2);
        if (survivors.empty()) continue;  // every point failed here: the incumbent alone decides nothing more
        const std::set<std::string> keep(survivors.begin(), survivors.end());
        for (const auto& c : list)
          if (keep.count(candidate_text(c)) || candidate_text(c) == kIncumbent) next[row].push_back(c);
        kept += next[row].size();
      }
      // Every candidate now stands for the classes it is still in (all it was measured on, after
      // the last round).
      for (const auto& [text, e] : entries) {
        if (!measured.count(text)) continue;
        std::set<std::string> alive;
        for (const auto& [row, list] : last ? live : next)
          for (const auto& c : list)
            if (candidate_text(c) == text) alive.insert(classes.at(row).begin(), classes.at(row).end());
        const BenchRun run = search.runs.count(text) ? merge_runs(search.runs[text], measured[text]) : measured[text];
        if (alive.empty()) {
          search.dropped[text] = run;
          search.runs.erase(text);
        } else {
          search.runs[text] = last ? run : restrict_run(run, alive);
        }
      }
      if (last) break;
      std::size_t before = 0;
      for (const auto& [row, list] : live) before += list.size();
      if (kept == before && time_ms * 2 < in.search_min_time_ms) {
        time_ms = in.search_min_time_ms;  // nothing to drop: measure the rest once at full time
      } else {
        time_ms = std::min(in.search_min_time_ms, time_ms * 2);
      }
      live = next;
    }
    const double secs = seconds_since(start);
    const std::string account = std::to_string(processes) + " liger-bench process(es), " + std::to_string(measurements) +
                                " candidate-case measurements, " + std::to_string(pruned_count) + " point(s) pruned";
    record_phase(ctx, "optimize", tag, secs, account);
    return tag + fmt(" %.1f s", secs) + " (" + account + ")";
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
      // A launch shape replaces the row's own only when it is faster outside the spread.
      if (search.class_winner.count(row) && search.class_winner[row] != kIncumbent && search.runs.count(kIncumbent) &&
          !beats_outside_spread(search.runs[search.class_winner[row]], search.runs[kIncumbent], keys))
        search.class_winner[row] = kIncumbent;
    }
  };
  // Per class, the untried neighbours of its winner (none around the incumbent: the table's own
  // rows are not a point of the grid).
  auto neighbours = [&](const SearchSpace& space) {
    std::map<std::size_t, std::vector<Candidate>> out;
    for (const auto& [row, text] : search.class_winner) {
      if (text == kIncumbent) continue;
      auto list = refine_around(space, *parse_candidate(text), search.tried[row]);
      if (!list.empty()) out[row] = list;
    }
    return out;
  };
  std::vector<std::string> search_account;

  // The winners applied to the current best (not the start table): an accepted code variant's
  // knobs and the accepted rows stay; a row whose winner is the incumbent keeps the best's row.
  auto tuning_from_winners = [&](std::string* change, std::string* why_not) -> std::string {
    TuningFile f = TuningFile::parse(best_tuning);
    for (const auto& [row, text] : search.class_winner) {
      if (text == kIncumbent) {
        *change += "row " + std::to_string(row) + " kept (nothing beat the current best's launch shape outside the spread); ";
        continue;
      }
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
      if (!spec.table.present) {
        // Nothing the search finds could be written back: measuring it would only cost time.
        result.note("strategy '" + s.name + "' skipped: " + in.op +
                    "'s tuning header holds no launch-shape table (no table mapping in search_spaces.yaml)");
        continue;
      }
      nb.hypothesis = "The launch shape chosen for each size class is not the fastest on sm_" + std::to_string(sm) +
                      " (v0 runs with " + v0.tunables + "); a measured search over " + std::to_string(spec.space.dims.size()) +
                      " tunables finds a better one per class.";
      write(od / rec.name / "notebook.md", render_notebook(templates_dir(), nb));
      std::map<std::size_t, std::vector<Candidate>> grid;
      for (const auto& [row, keys] : classes) grid[row] = coarse_grid(spec.space);
      search_account.push_back(measure_candidates(grid, rec.name + " search: coarse grid", true));
      pick_class_winners();
      if (const auto refine = neighbours(spec.space); !refine.empty()) {
        search_account.push_back(measure_candidates(refine, rec.name + " search: refine", true));
        pick_class_winners();
      }
      tuning_text = tuning_from_winners(&rec.change, &why_not);
      if (!tuning_text.empty() && tuning_text == best_tuning) {
        rec.change += "(same table as " + best_name + ")";
        confirms_best = true;
      }
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
          if (double sc = class_score(run, small_keys); sc < sb && text != kIncumbent) {
            sb = sc;
            small_best = text;
          }
        const double sw = search.runs.count(winner) ? class_score(search.runs[winner], small_keys) : INFINITY;
        double noise = 0;
        for (const auto& k : small_keys)
          if (const auto* r = v0.find(k)) noise = std::max(noise, r->spread_pct);
        if (small_best.empty() || small_best == winner || winner == kIncumbent || sb >= sw * (1 - noise / 100)) continue;
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
        for (const auto& [row, tried] : search.tried)
          for (const auto& c : tried)
            if (c.count(d.name)) values.insert(c.at(d.name));
        d.coarse.assign(values.begin(), values.end());
      }
      auto more = neighbours(finer);
      if (more.empty()) continue;
      std::size_t count = 0;
      for (const auto& [row, list] : more) count += list.size();
      // When the search's winners are the current best (an accepted earlier variant), a row the
      // finer search cannot improve keeps that winner, never the start table's row: the winners
      // are re-measured in the same process as their neighbours and the incumbent, so each row
      // is judged within one process.
      const auto accepted = search.class_winner;
      std::string unused_change, unused_why;
      const bool winners_are_best = tuning_from_winners(&unused_change, &unused_why) == best_tuning;
      if (winners_are_best)
        for (const auto& [row, text] : accepted)
          if (text != kIncumbent && more.count(row))
            if (const auto c = parse_candidate(text)) more[row].push_back(*c);
      nb.hypothesis = "A finer step around the current best launch shapes (" + std::to_string(count) +
                      " untried neighbours) finds a small further gain.";
      write(od / rec.name / "notebook.md", render_notebook(templates_dir(), nb));
      search_account.push_back(measure_candidates(more, rec.name + " neighbour search", true));
      pick_class_winners();
      if (winners_are_best)
        for (const auto& [row, text] : accepted)
          if (text != kIncumbent && search.class_winner[row] == kIncumbent) search.class_winner[row] = text;
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
      const bool first_search = s.kind == "tunable_search";
      rec.summary = (first_search ? "the search kept " : "the finer search kept ") + best_name +
                    "'s rows: nothing new to build or benchmark";
      nb.smoke = rec.smoke = "not needed (same table as " + best_name + ")";
      nb.learnings.push_back(first_search ? "no launch shape beat the table's own outside the spread in any size class: "
                                            "the tuned rows stand"
                                          : "every untried neighbour was measured in the search and none beat " +
                                                best_name + "'s launch shapes: the coarse winner is a local optimum of this grid");
      for (const auto& a : search_account) nb.learnings.push_back("time: " + a);
      search_account.clear();
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
    std::string timing;
    auto timed = [&](const std::string& phase, auto&& body) {
      const auto start = Clock::now();
      body();
      const double secs = seconds_since(start);
      record_phase(ctx, "optimize", rec.name + " " + phase, secs);
      timing += (timing.empty() ? "" : ", ") + phase + fmt(" %.1f s", secs);
    };
    if (ok) {
      timed("build", [&] {
        if (auto err = build_work(ctx, in, sm, od / rec.name / "build.log"); !err.empty()) {
          ok = false;
          smoke = "does not build: " + tail(err, 300);
        }
      });
    }
    if (ok) {
      timed("smoke test", [&] {
        std::string summary;
        ok = run_tests(ctx, spec, od / rec.name / "smoke.log", &summary);
        smoke = (ok ? "passed (" : "FAILED (") + summary + ")";
      });
    }
    rec.smoke = smoke;
    nb.smoke = smoke;
    if (ok) {
      BenchRun run;
      timed("benchmark", [&] { run = bench(ctx, in, {}, in.bench_min_time_ms, od / rec.name / "bench.json"); });
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
    // Where this variant's time went (the search's processes first): what the next run can cut.
    for (const auto& a : search_account) nb.learnings.push_back("time: " + a);
    search_account.clear();
    if (!timing.empty()) nb.learnings.push_back("time: " + timing);
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
  if (const std::string t = timings_markdown(ctx); !t.empty()) write(od / "timings.md", "# Where the time went\n\n" + t);
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

}  // namespace liger::kernel_perf::stages
