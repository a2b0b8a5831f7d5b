// kernel-perf: input parsing, the tool runner, op data, table mapping, notebooks and the
// comparison table.
#include <mustache.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <sstream>

#include "liger/error.h"
#include "liger/util.h"
#include "liger/suggest.h"
#include "workflows/kernel_perf/kernel_perf.h"

namespace liger::kernel_perf {

// ---------------------------------------------------------------- input

nlohmann::json KernelPerfInput::to_json() const {
  nlohmann::json j;
  j["op"] = op;
  j["goal"] = goal;
  j["mode"] = mode;
  j["target_gpu"] = target_gpu;
  j["target_metric"] = target_metric;
  j["max_variants"] = max_variants;
  j["profile_only"] = profile_only;
  j["start_tunables"] = start_tunables.empty() ? std::string() : candidate_text(start_tunables);
  j["dtype"] = dtype;
  j["search_min_time_ms"] = search_min_time_ms;
  j["bench_min_time_ms"] = bench_min_time_ms;
  j["jobs"] = jobs;
  j["work_dir"] = work_dir;
  return j;
}

Goal KernelPerfInput::goal_spec() const {
  Goal g;
  g.goal = goal;
  if (!mode.empty()) g.target_modes = {mode};
  return g;
}

KernelPerfInput parse_kernel_perf_input(const nlohmann::json& a) {
  KernelPerfInput in;
  auto str = [&](const char* key, std::string& out) {
    if (!a.contains(key) || a[key].is_null()) return;
    if (!a[key].is_string()) throw Error(ErrorKind::Usage, std::string("kernel-perf: '") + key + "' must be a string");
    out = util::trim(a[key].get<std::string>());
  };
  auto integer = [&](const char* key, int& out, int lo, int hi) {
    if (!a.contains(key) || a[key].is_null()) return;
    if (!a[key].is_number_integer())
      throw Error(ErrorKind::Usage, std::string("kernel-perf: '") + key + "' must be an integer");
    const long long v = a[key].get<long long>();
    if (v < lo || v > hi)
      throw Error(ErrorKind::Usage, std::string("kernel-perf: ") + key + "=" + std::to_string(v) + " out of range [" +
                                        std::to_string(lo) + ", " + std::to_string(hi) + "]");
    out = static_cast<int>(v);
  };
  if (!a.is_object()) throw Error(ErrorKind::Internal, "kernel-perf arguments are not a JSON object");
  str("op", in.op);
  if (in.op.empty() && a.contains("kernel") && a["kernel"].is_string()) in.op = a["kernel"].get<std::string>();
  if (in.op.empty()) throw Error(ErrorKind::Usage, "kernel-perf: which op? (e.g. `liger-agent kernel-perf swiglu`)");
  str("goal", in.goal);
  if (in.goal.empty()) in.goal = "balanced";
  if (in.goal != "speed" && in.goal != "memory" && in.goal != "balanced")
    throw Error(ErrorKind::Usage, "kernel-perf: --goal '" + in.goal + "' is not speed, memory or balanced");
  str("mode", in.mode);
  if (in.mode == "all" || in.mode == "general") in.mode.clear();
  if (!in.mode.empty() && in.mode != "forward" && in.mode != "backward" && in.mode != "full")
    throw Error(ErrorKind::Usage, "kernel-perf: --mode '" + in.mode + "' is not forward, backward or full");
  str("target_gpu", in.target_gpu);
  if (in.target_gpu == "auto") in.target_gpu.clear();
  if (!in.target_gpu.empty() && !parse_target_gpu(in.target_gpu))
    throw Error(ErrorKind::Usage, "kernel-perf: --target-gpu '" + in.target_gpu + "' is not understood",
                "use ampere, hopper, blackwell, sm_80, sm_90, sm_100, 9.0 or a card name (h100, a100, b200)");
  str("target_metric", in.target_metric);
  if (in.target_metric.empty()) str("target", in.target_metric);  // the CLI's --target
  if (!in.target_metric.empty()) parse_target_metric(in.target_metric);  // validates
  integer("max_variants", in.max_variants, 1, 64);
  if (!a.contains("max_variants")) integer("variants", in.max_variants, 1, 64);  // the CLI's --variants
  if (a.contains("profile_only") && a["profile_only"].is_boolean()) in.profile_only = a["profile_only"].get<bool>();
  if (a.contains("start_tunables") && !a["start_tunables"].is_null()) {
    const auto& st = a["start_tunables"];
    std::string text;
    if (st.is_string()) {
      text = st.get<std::string>();
    } else if (st.is_object()) {
      for (const auto& [k, v] : st.items()) text += k + "=" + (v.is_number() ? std::to_string(v.get<int>()) : v.get<std::string>()) + ",";
    } else if (st.is_array()) {
      for (const auto& v : st) text += v.get<std::string>() + ",";
    }
    if (util::trim(text) != "default" && !util::trim(text).empty()) {
      auto c = parse_candidate(text);
      if (!c)
        throw Error(ErrorKind::Usage, "kernel-perf: --start-tunables '" + text + "' is not field=value,...",
                    "fields: threads_per_block, rows_per_block, vector_bytes, reduction_blocks, chunk_rows, "
                    "pipeline_depth, stages");
      in.start_tunables = *c;
    }
  }
  str("dtype", in.dtype);
  str("work_dir", in.work_dir);
  integer("search_min_time_ms", in.search_min_time_ms, 1, 100000);
  integer("bench_min_time_ms", in.bench_min_time_ms, 1, 100000);
  integer("jobs", in.jobs, 0, 1024);
  return in;
}

// ---------------------------------------------------------------- runner

namespace {

class SystemRunner : public Runner {
 public:
  toolchain::ProcessResult run(const std::vector<std::string>& argv, const std::filesystem::path& cwd,
                               std::chrono::seconds timeout) override {
    toolchain::ProcessOptions o;
    o.argv = argv;
    o.cwd = cwd;
    o.timeout = timeout;
    return toolchain::run_process(o);
  }
  bool has_tool(const std::string& name) override { return toolchain::find_executable(name).has_value(); }
};

std::mutex g_runner_mutex;
std::shared_ptr<Runner> g_runner;

}  // namespace

std::shared_ptr<Runner> make_system_runner() { return std::make_shared<SystemRunner>(); }

std::shared_ptr<Runner> current_runner() {
  std::lock_guard lock(g_runner_mutex);
  if (!g_runner) g_runner = make_system_runner();
  return g_runner;
}

void set_runner_for_testing(std::shared_ptr<Runner> runner) {
  std::lock_guard lock(g_runner_mutex);
  g_runner = std::move(runner);
}

// ---------------------------------------------------------------- op data

// An op the checkout's library has (kernels/ops.yaml) but the catalogue does not, typically one
// kernel-dev generated, is not a typo: say what kernel-perf can and cannot do with it.
OpSpec load_op_spec_for_tree(const std::filesystem::path& path, const std::string& op, const std::filesystem::path& tree) {
  try {
    return load_op_spec(path, op);
  } catch (const Error& e) {
    const std::filesystem::path library = tree / "kernels/ops.yaml";
    bool in_library = false;
    try {
      if (std::filesystem::is_regular_file(library))
        for (const auto& o : YAML::LoadFile(library.string())["ops"])
          if (o["name"] && o["name"].as<std::string>() == op) in_library = true;
    } catch (const YAML::Exception&) {
    }
    if (!in_library) throw;
    throw Error(ErrorKind::Usage,
                "kernel-perf: '" + op + "' is an op of this checkout's library (kernels/ops.yaml) but has no search space in " +
                    path.string() + ", so kernel-perf cannot tune it yet",
                "kernel-perf tunes the ops its catalogue describes (where the launch table and tests live, which tunables "
                "liger-bench takes); an op kernel-dev generated keeps its launch defaults in kernels/src/" + op +
                    "/tuning.h: edit them there, or add an entry for it to the catalogue");
  }
}

OpSpec load_op_spec(const std::filesystem::path& path, const std::string& op) {
  YAML::Node doc;
  try {
    doc = YAML::LoadFile(path.string());
  } catch (const YAML::Exception& e) {
    throw Error(ErrorKind::Internal, path.string() + ": " + e.what());
  }
  const YAML::Node ops = doc["ops"];
  if (!ops || !ops[op]) {
    std::string known;
    std::vector<std::string> names;
    for (const auto& it : ops) {
      names.push_back(it.first.as<std::string>());
      known += (known.empty() ? "" : ", ") + names.back();
    }
    throw Error(ErrorKind::Usage,
                "kernel-perf: no op named '" + op + "' in the kernel library's data" + util::did_you_mean(op, names),
                "known ops: " + known + " (" + path.string() + ")");
  }
  const YAML::Node n = ops[op];
  OpSpec s;
  try {
    s.name = op;
    s.header = n["header"].as<std::string>();
    s.kernel_source = n["kernel_source"].as<std::string>();
    s.tuning = n["tuning"].as<std::string>();
    s.test_file = n["test_file"].as<std::string>("");
    s.test_filter = n["test_filter"].as<std::string>();
    s.ncu_kernel_regex = n["ncu_kernel_regex"].as<std::string>(op);
    s.default_threads = n["default_threads"].as<int>(256);
    for (const auto& f : n["snapshot"]) s.snapshot.push_back(f.as<std::string>());
    for (const auto& t : n["traits"]) s.traits.insert(t.as<std::string>());
    s.space = parse_search_space(op, n);
    if (const YAML::Node t = n["table"]) {
      s.table.present = true;
      for (const auto& it : t["arrays"]) s.table.arrays[std::stoi(it.first.as<std::string>())] = it.second.as<std::string>();
      s.table.arch_field = t["arch_field"].as<int>(-1);
      s.table.size_field = t["size_field"].as<int>(0);
      s.table.size_key = t["size_key"].as<std::string>("cols");
      for (const auto& it : t["map"]) s.table.map[it.first.as<std::string>()] = it.second.as<int>();
      s.table.derive = t["derive"].as<std::string>("");
    }
    s.code = parse_code_knobs(n["code_knobs"]);
    for (const auto& k : s.code.knobs) s.traits.insert("knob:" + k.name);
  } catch (const std::exception& e) {
    throw Error(ErrorKind::Internal, path.string() + ": op " + op + ": " + e.what());
  }
  return s;
}

long long case_size(const TableSpec& table, const std::string& shape) {
  return table.size_key == "elements" ? shape_rows(shape) * shape_cols(shape) : shape_cols(shape);
}

namespace {
std::string array_for(const TableSpec& table, int sm) {
  // The architecture's own array, else the closest lower one, else the last.
  std::string name;
  int best = -1;
  for (const auto& [arch, array] : table.arrays)
    if (arch <= sm && arch > best) {
      best = arch;
      name = array;
    }
  if (name.empty() && !table.arrays.empty()) name = table.arrays.rbegin()->second;
  return name;
}
int table_arch(const TableSpec& table, int sm) {
  int best = -1;
  for (const auto& [arch, array] : table.arrays)
    if (arch <= sm && arch > best) best = arch;
  return best < 0 && !table.arrays.empty() ? table.arrays.rbegin()->first : best;
}
}  // namespace

std::optional<std::size_t> table_row_for(const TuningFile& file, const TableSpec& table, int sm, long long size) {
  const TableArray* a = file.array(array_for(table, sm));
  if (!a) return std::nullopt;
  const int arch = table_arch(table, sm);
  std::optional<std::size_t> last;
  for (std::size_t i = 0; i < a->rows.size(); ++i) {
    const auto& f = a->rows[i].fields;
    if (table.arch_field >= 0) {
      if (static_cast<std::size_t>(table.arch_field) >= f.size()) continue;
      if (eval_field(f[table.arch_field]).value_or(-1) != arch) continue;
    }
    if (static_cast<std::size_t>(table.size_field) >= f.size()) continue;
    last = i;
    const auto bound = eval_field(f[table.size_field]);
    if (bound && size <= *bound) return i;
  }
  return last;  // beyond every bound: the last row applies
}

namespace {
int threads_per_row_for(long long nvec, int per_thread, int cap) {
  long long raw = (nvec + per_thread - 1) / per_thread;
  if (raw <= 32) {
    int p = 1;
    while (p < std::max<long long>(raw, 1)) p <<= 1;
    return p;
  }
  long long rounded = (raw + 31) / 32 * 32;
  return static_cast<int>(rounded > cap ? cap : rounded);
}
}  // namespace

bool apply_candidate_to_row(TuningFile& file, const TableSpec& table, int sm, std::size_t row, const Candidate& c,
                            long long cols, int dtype_bytes, std::string* why) {
  const std::string name = array_for(table, sm);
  const TableArray* a = file.array(name);
  if (!a || row >= a->rows.size()) {
    if (why) *why = "no table row to write";
    return false;
  }
  std::vector<std::string> values = a->rows[row].fields;
  for (const auto& [tunable, field] : table.map) {
    auto it = c.find(tunable);
    if (it == c.end()) continue;
    if (static_cast<std::size_t>(field) >= values.size()) {
      if (why) *why = "table has no field " + std::to_string(field);
      return false;
    }
    values[field] = std::to_string(it->second);
  }
  if (table.derive == "norm") {
    // Field 1 (vectors per thread) so that threads_per_row_for(nvec, vpt) == threads / rows.
    const int tpb = c.count("threads_per_block") ? c.at("threads_per_block") : 0;
    const int rpb = c.count("rows_per_block") ? c.at("rows_per_block") : 1;
    if (tpb <= 0 || rpb <= 0 || tpb % rpb) {
      if (why) *why = "norm tables need threads_per_block and rows_per_block";
      return false;
    }
    const int tx = tpb / rpb;
    const int vec = 16 / std::max(dtype_bytes, 1);
    const long long nvec = cols % vec == 0 ? cols / vec : cols;
    const int vpt = static_cast<int>(std::max<long long>(1, (nvec + tx - 1) / tx));
    if (threads_per_row_for(nvec, vpt, 512) != tx) {
      if (why)
        *why = "threads per row " + std::to_string(tx) + " is not reachable for " + std::to_string(cols) +
               " columns through vectors/thread";
      return false;
    }
    values[1] = std::to_string(vpt);
    values[2] = std::to_string(tpb);  // min_threads: rows are packed until the block has tpb threads
  }
  file.set_row(name, row, values);
  return true;
}

// ---------------------------------------------------------------- notebooks

namespace {

std::string fmt2(double v) {
  char b[64];
  std::snprintf(b, sizeof(b), "%.2f", v);
  return b;
}

kainjow::mustache::mustache load_template(const std::filesystem::path& path) {
  kainjow::mustache::mustache t(util::read_file(path));
  if (!t.is_valid()) throw Error(ErrorKind::Internal, path.string() + ": " + t.error_message());
  return t;
}

}  // namespace

std::string render_notebook(const std::filesystem::path& dir, const Notebook& nb) {
  using kainjow::mustache::data;
  auto t = load_template(dir / "notebook.md.mustache");
  data view;
  view.set("op", nb.op);
  view.set("variant", nb.variant);
  view.set("title", nb.title);
  view.set("status", nb.status);
  view.set("hypothesis", nb.hypothesis);
  view.set("change", nb.change);
  view.set("change_detail", nb.change_detail.empty() ? std::string("(see Change)") : nb.change_detail);
  view.set("expected", nb.expected);
  view.set("smoke", nb.smoke.empty() ? std::string("(pending)") : nb.smoke);
  data prior{data::type::list};
  for (const auto& [v, learning] : nb.prior) {
    data p;
    const auto sp = v.find(' ');
    p.set("variant", v.substr(0, sp));
    p.set("verdict", sp == std::string::npos ? std::string("?") : v.substr(sp + 1));
    p.set("learning", learning);
    prior.push_back(p);
  }
  view.set("prior", prior);
  data cases{data::type::list}, guards{data::type::list};
  if (nb.verdict) {
    for (const auto& c : nb.verdict->cases) {
      data d;
      d.set("key", c.key);
      d.set("base_us", fmt2(c.base_us));
      d.set("variant_us", c.outcome == "failed" ? std::string("FAILED") : fmt2(c.variant_us));
      d.set("change_pct", fmt2(c.change_pct));
      d.set("noise_pct", fmt2(c.noise_pct));
      d.set("outcome", c.outcome);
      d.set("copy", fmt2(c.variant_copy_fraction * 100));
      cases.push_back(d);
    }
    for (const auto& g : nb.verdict->guardrails) {
      data d;
      d.set("rule", g.rule);
      d.set("where", g.where);
      d.set("change_pct", fmt2(g.change_pct));
      d.set("threshold_pct", fmt2(g.threshold_pct));
      d.set("result", g.passed ? std::string("pass") : std::string("FAIL"));
      guards.push_back(d);
    }
    view.set("verdict", nb.verdict->verdict);
    view.set("verdict_summary", nb.verdict->summary);
  } else {
    const bool discarded = nb.status == "discarded", confirmed = nb.status == "confirmed the current best";
    view.set("verdict", discarded ? std::string("REJECTED") : confirmed ? std::string("NO CHANGE") : std::string("(pending)"));
    view.set("verdict_summary", discarded || confirmed ? nb.smoke : std::string());
  }
  view.set("cases", cases);
  view.set("guardrails", guards);
  data learnings{data::type::list};
  for (const auto& l : nb.learnings) learnings.push_back(data(l));
  view.set("learnings", learnings);
  return t.render(view);
}

std::vector<std::string> notebook_learnings(const std::string& md) {
  std::vector<std::string> out;
  std::istringstream in(md);
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("## ")) {
      inside = line == "## Learnings";
      continue;
    }
    if (inside && line.starts_with("- ") && line != "- (pending)") out.push_back(line.substr(2));
  }
  return out;
}

std::string notebook_verdict(const std::string& md) {
  std::istringstream in(md);
  bool next = false;
  for (std::string line; std::getline(in, line);) {
    if (next && !line.empty()) return line.substr(0, line.find(':'));
    next = line == "## Verdict";
  }
  return "";
}

std::string render_comparison(const std::filesystem::path& dir, const ComparisonInfo& info) {
  using kainjow::mustache::data;
  auto t = load_template(dir / "comparison.md.mustache");
  data view;
  view.set("op", info.op);
  view.set("goal", info.goal);
  view.set("modes", info.modes);
  view.set("device", info.device);
  view.set("sm", std::to_string(info.sm));
  view.set("start", info.start);
  view.set("winner", info.winner);
  view.set("stop_reason", info.stop_reason);
  data rows{data::type::list};
  for (const auto& v : info.variants) {
    data d;
    d.set("variant", v.variant);
    d.set("strategy", v.strategy);
    d.set("change", v.change);
    d.set("smoke", v.smoke);
    d.set("verdict", v.verdict);
    char b[32];
    std::snprintf(b, sizeof(b), "%.3fx", v.speedup);
    d.set("speedup", std::isnan(v.speedup) ? std::string("n/a") : std::string(b));
    d.set("memory", fmt2(v.memory_change_pct));
    d.set("summary", v.summary);
    rows.push_back(d);
  }
  view.set("variants", rows);
  return t.render(view);
}

}  // namespace liger::kernel_perf
