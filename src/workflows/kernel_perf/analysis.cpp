#include "workflows/kernel_perf/analysis.h"

#include <cxxabi.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <regex>
#include <sstream>

#include "liger/error.h"
#include "liger/util.h"

namespace liger::kernel_perf {

namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

long long to_ll(const std::string& s) { return std::strtoll(s.c_str(), nullptr, 10); }

}  // namespace

// ---------------------------------------------------------------- ptxas / cuobjdump

std::string demangle(const std::string& mangled) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status), std::free);
  if (status == 0 && out) return out.get();
  return mangled;
}

std::vector<KernelResources> parse_ptxas_log(const std::string& log) {
  static const std::regex entry_re(R"(Compiling entry function '([^']+)' for '([^']+)')");
  static const std::regex props_re(R"(Function properties for (\S+))");
  static const std::regex frame_re(
      R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex used_re(R"(Used (\d+) registers)");
  static const std::regex barriers_re(R"(used (\d+) barriers)");
  static const std::regex smem_re(R"((\d+) bytes smem)");
  static const std::regex cmem_re(R"((\d+) bytes cmem\[\d+\])");
  std::vector<KernelResources> out;
  std::map<std::string, std::size_t> by_name;
  std::string props_for;  // "Function properties for X" applies to the next frame line
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, entry_re)) {
      KernelResources k;
      k.mangled = m[1];
      k.name = demangle(k.mangled);
      k.arch = m[2];
      by_name[k.mangled] = out.size();
      out.push_back(k);
      continue;
    }
    if (std::regex_search(line, m, props_re)) {
      props_for = m[1];
      continue;
    }
    if (std::regex_search(line, m, frame_re)) {
      auto it = by_name.find(props_for);
      KernelResources* k = it != by_name.end() ? &out[it->second] : (!out.empty() ? &out.back() : nullptr);
      if (k) {
        k->stack_frame_bytes = to_ll(m[1]);
        k->spill_store_bytes = to_ll(m[2]);
        k->spill_load_bytes = to_ll(m[3]);
      }
      continue;
    }
    if (std::regex_search(line, m, used_re) && !out.empty()) {
      KernelResources& k = out.back();
      k.registers = static_cast<int>(to_ll(m[1]));
      if (std::regex_search(line, m, barriers_re)) k.barriers = static_cast<int>(to_ll(m[1]));
      if (std::regex_search(line, m, smem_re)) k.smem_bytes = to_ll(m[1]);
      k.cmem_bytes = 0;
      for (std::sregex_iterator it(line.begin(), line.end(), cmem_re), end; it != end; ++it)
        k.cmem_bytes += to_ll((*it)[1]);
    }
  }
  return out;
}

std::vector<KernelResources> parse_cuobjdump_resource_usage(const std::string& text) {
  static const std::regex fn_re(R"(Function ([^\s:]+)\s*:)");
  static const std::regex kv_re(R"(([A-Z_]+(?:\[\d+\])?):(\d+))");
  static const std::regex arch_re(R"(arch = (sm_\d+a?))");
  std::vector<KernelResources> out;
  std::string arch;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (std::regex_search(line, m, arch_re)) arch = m[1];
    if (std::regex_search(line, m, fn_re)) {
      KernelResources k;
      k.mangled = m[1];
      k.name = demangle(k.mangled);
      k.arch = arch;
      out.push_back(k);
      continue;
    }
    if (out.empty() || line.find("REG:") == std::string::npos) continue;
    KernelResources& k = out.back();
    for (std::sregex_iterator it(line.begin(), line.end(), kv_re), end; it != end; ++it) {
      const std::string key = (*it)[1];
      const long long v = to_ll((*it)[2]);
      if (key == "REG") k.registers = static_cast<int>(v);
      else if (key == "STACK") k.stack_frame_bytes = v;
      else if (key == "SHARED") k.smem_bytes = v;
      else if (key == "LOCAL") k.spill_store_bytes = v;  // local memory: spills and stack arrays
      else if (key.starts_with("CONSTANT")) k.cmem_bytes += v;
    }
  }
  return out;
}

// ---------------------------------------------------------------- architectures

std::vector<ArchLimits> parse_architectures(const YAML::Node& doc) {
  std::vector<ArchLimits> out;
  const YAML::Node list = doc["architectures"];
  if (!list || !list.IsSequence())
    throw Error(ErrorKind::Internal, "architectures.yaml: no 'architectures' list");
  for (const auto& n : list) {
    ArchLimits a;
    try {
      a.sm = n["sm"].as<int>();
      a.family = n["family"].as<std::string>("");
      a.example = n["example"].as<std::string>("");
      a.max_threads_per_sm = n["max_threads_per_sm"].as<int>(a.max_threads_per_sm);
      a.max_warps_per_sm = n["max_warps_per_sm"].as<int>(a.max_threads_per_sm / 32);
      a.max_blocks_per_sm = n["max_blocks_per_sm"].as<int>(a.max_blocks_per_sm);
      a.max_threads_per_block = n["max_threads_per_block"].as<int>(a.max_threads_per_block);
      a.registers_per_sm = n["registers_per_sm"].as<int>(a.registers_per_sm);
      a.max_registers_per_thread = n["max_registers_per_thread"].as<int>(a.max_registers_per_thread);
      a.register_alloc_unit = n["register_alloc_unit"].as<int>(a.register_alloc_unit);
      a.smem_per_sm = n["smem_per_sm"].as<long long>(a.smem_per_sm);
      a.max_smem_per_block = n["max_smem_per_block"].as<long long>(a.max_smem_per_block);
      a.smem_alloc_unit = n["smem_alloc_unit"].as<int>(a.smem_alloc_unit);
      a.smem_reserved_per_block = n["smem_reserved_per_block"].as<int>(a.smem_reserved_per_block);
      if (n["notes"])
        for (const auto& note : n["notes"]) a.notes.push_back(note.as<std::string>());
    } catch (const YAML::Exception& e) {
      throw Error(ErrorKind::Internal, std::string("architectures.yaml: bad entry: ") + e.what());
    }
    out.push_back(a);
  }
  return out;
}

std::vector<ArchLimits> load_architectures(const fs::path& yaml_path) {
  try {
    return parse_architectures(YAML::LoadFile(yaml_path.string()));
  } catch (const YAML::Exception& e) {
    throw Error(ErrorKind::Internal, yaml_path.string() + ": " + e.what());
  }
}

const ArchLimits* find_arch(const std::vector<ArchLimits>& archs, int sm) {
  const ArchLimits* best = nullptr;
  for (const auto& a : archs) {
    if (a.sm == sm) return &a;
    if (a.sm / 10 == sm / 10 && a.sm < sm && (!best || a.sm > best->sm)) best = &a;
  }
  return best;
}

std::optional<int> parse_target_gpu(const std::string& text) {
  const std::string t = lower(util::trim(text));
  static const std::map<std::string, int> names = {
      {"ampere", 80}, {"a100", 80}, {"a10", 86}, {"a40", 86}, {"rtx3090", 86}, {"ada", 89}, {"l4", 89},
      {"l40", 89},    {"l40s", 89}, {"hopper", 90}, {"h100", 90}, {"h200", 90}, {"h800", 90},
      {"blackwell", 100}, {"b200", 100}, {"b100", 100}, {"gb200", 100}, {"rtx5090", 120}};
  if (auto it = names.find(t); it != names.end()) return it->second;
  std::smatch m;
  static const std::regex sm_re(R"(^(?:sm_?|compute_?)?(\d{2,3})a?$)");
  static const std::regex dotted_re(R"(^(\d{1,2})\.(\d)$)");
  if (std::regex_match(t, m, dotted_re)) return std::stoi(m[1]) * 10 + std::stoi(m[2]);
  if (std::regex_match(t, m, sm_re)) return std::stoi(m[1]);
  return std::nullopt;
}

std::optional<int> parse_compute_cap(const std::string& text) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    line = util::trim(line);
    if (line.empty()) continue;
    static const std::regex dotted_re(R"(^(\d{1,2})\.(\d))");
    std::smatch m;
    if (std::regex_search(line, m, dotted_re)) return std::stoi(m[1]) * 10 + std::stoi(m[2]);
  }
  return std::nullopt;
}

namespace {
long long round_up(long long v, long long unit) { return unit <= 0 ? v : (v + unit - 1) / unit * unit; }
}  // namespace

Occupancy estimate_occupancy(const ArchLimits& arch, int registers, long long smem, int threads) {
  Occupancy o;
  o.max_warps = arch.max_warps_per_sm;
  if (threads <= 0 || threads > arch.max_threads_per_block) {
    o.launchable = false;
    o.limiter = "not launchable: " + std::to_string(threads) + " threads per block (limit " +
                std::to_string(arch.max_threads_per_block) + ")";
    return o;
  }
  const int warps = static_cast<int>((threads + 31) / 32);
  const long long regs_per_warp = round_up(static_cast<long long>(std::max(registers, 1)) * 32, arch.register_alloc_unit);
  if (registers > arch.max_registers_per_thread || regs_per_warp * warps > arch.registers_per_sm) {
    o.launchable = false;
    o.limiter = "not launchable: " + std::to_string(regs_per_warp * warps) + " registers per block > " +
                std::to_string(arch.registers_per_sm);
    return o;
  }
  const long long smem_block = smem > 0 ? round_up(smem, arch.smem_alloc_unit) + arch.smem_reserved_per_block : 0;
  if (smem > arch.max_smem_per_block) {
    o.launchable = false;
    o.limiter = "not launchable: " + std::to_string(smem) + " bytes shared memory per block > " +
                std::to_string(arch.max_smem_per_block);
    return o;
  }
  o.blocks_by_registers = static_cast<int>(arch.registers_per_sm / regs_per_warp) / warps;
  o.blocks_by_smem = smem_block > 0 ? static_cast<int>(arch.smem_per_sm / smem_block) : arch.max_blocks_per_sm;
  o.blocks_by_threads = std::min(arch.max_threads_per_sm / (warps * 32), arch.max_warps_per_sm / warps);
  o.blocks_by_blocks = arch.max_blocks_per_sm;
  o.blocks_per_sm = std::min({o.blocks_by_registers, o.blocks_by_smem, o.blocks_by_threads, o.blocks_by_blocks});
  // The first limit in this order that equals the minimum is reported (the binding constraint).
  if (o.blocks_per_sm == o.blocks_by_registers && o.blocks_by_registers < o.blocks_by_threads) o.limiter = "registers";
  else if (smem_block > 0 && o.blocks_per_sm == o.blocks_by_smem && o.blocks_by_smem < o.blocks_by_threads)
    o.limiter = "shared memory";
  else if (o.blocks_per_sm == o.blocks_by_blocks && o.blocks_by_blocks < o.blocks_by_threads) o.limiter = "blocks";
  else o.limiter = "threads";
  o.active_warps = o.blocks_per_sm * warps;
  o.fraction = o.max_warps > 0 ? static_cast<double>(o.active_warps) / o.max_warps : 0;
  if (o.blocks_per_sm == 0) {
    o.launchable = false;
    o.limiter = "not launchable: no block fits an SM";
  }
  return o;
}

int max_launchable_threads(const ArchLimits& arch, int registers, long long smem) {
  for (int t = arch.max_threads_per_block; t >= 32; t -= 32)
    if (estimate_occupancy(arch, registers, smem, t).launchable) return t;
  return 0;
}

// ---------------------------------------------------------------- ncu

namespace {

std::vector<std::string> split_csv_line(const std::string& line) {
  std::vector<std::string> cells;
  std::string cur;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cur += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      cells.push_back(cur);
      cur.clear();
    } else if (c != '\r') {
      cur += c;
    }
  }
  cells.push_back(cur);
  return cells;
}

std::optional<double> parse_number(std::string text) {
  std::erase(text, ',');
  text = util::trim(text);
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0') return std::nullopt;
  return v;
}

}  // namespace

NcuMetrics parse_ncu_csv(const std::string& text) {
  NcuMetrics out;
  std::istringstream lines(text);
  std::vector<std::string> header;
  int col_id = -1, col_kernel = -1, col_name = -1, col_value = -1;
  std::map<std::string, std::vector<double>> values;
  std::set<std::string> launches;
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("==")) continue;  // ==PROF== lines
    auto cells = split_csv_line(line);
    if (header.empty()) {
      if (std::find(cells.begin(), cells.end(), "Metric Name") == cells.end()) continue;
      header = cells;
      for (int i = 0; i < static_cast<int>(cells.size()); ++i) {
        if (cells[i] == "ID") col_id = i;
        else if (cells[i] == "Kernel Name") col_kernel = i;
        else if (cells[i] == "Metric Name") col_name = i;
        else if (cells[i] == "Metric Value") col_value = i;
      }
      continue;
    }
    if (col_name < 0 || col_value < 0 || static_cast<int>(cells.size()) <= std::max(col_name, col_value)) continue;
    const auto v = parse_number(cells[col_value]);
    if (!v) continue;
    values[cells[col_name]].push_back(*v);
    if (col_id >= 0 && col_id < static_cast<int>(cells.size())) launches.insert(cells[col_id]);
    if (col_kernel >= 0 && col_kernel < static_cast<int>(cells.size())) out.kernel_names.insert(cells[col_kernel]);
  }
  out.kernels = static_cast<int>(launches.size());
  for (const auto& [name, list] : values) {
    double sum = 0, mx = list.front();
    for (double v : list) {
      sum += v;
      mx = std::max(mx, v);
    }
    out.mean[name] = sum / static_cast<double>(list.size());
    out.max[name] = mx;
  }
  return out;
}

std::map<std::string, double> NcuMetrics::rule_metrics() const {
  std::map<std::string, double> m;
  auto take = [&](const char* metric, const char* as) {
    if (auto it = mean.find(metric); it != mean.end()) m[as] = it->second;
  };
  take("dram__throughput.avg.pct_of_peak_sustained_elapsed", "dram_pct");
  take("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed", "memory_pct");
  take("sm__throughput.avg.pct_of_peak_sustained_elapsed", "sm_pct");
  take("sm__warps_active.avg.pct_of_peak_sustained_active", "achieved_occupancy_pct");
  take("sm__maximum_warps_per_active_cycle_pct", "theoretical_occupancy_pct");
  take("launch__registers_per_thread", "ncu_registers");
  // Local-memory instructions (spills; also any stack arrays) per 100 executed instructions.
  auto ld = mean.find("smsp__sass_inst_executed_op_local_ld.sum");
  auto st = mean.find("smsp__sass_inst_executed_op_local_st.sum");
  auto all = mean.find("smsp__inst_executed.sum");
  if (ld != mean.end() && st != mean.end() && all != mean.end() && all->second > 0)
    m["ncu_spill_pct"] = 100.0 * (ld->second + st->second) / all->second;
  return m;
}

const std::vector<std::string>& stall_reasons() {
  static const std::vector<std::string> r = {"long_scoreboard", "short_scoreboard", "barrier",      "lg_throttle",
                                             "mio_throttle",    "math_pipe_throttle", "wait",       "not_selected",
                                             "no_instruction",  "membar",           "drain"};
  return r;
}

namespace {
std::string stall_metric(const std::string& reason) {
  return "smsp__average_warps_issue_stalled_" + reason + "_per_issue_active.ratio";
}
}  // namespace

std::string stall_metrics_csv() {
  std::string out;
  for (const auto& r : stall_reasons()) out += (out.empty() ? "" : ",") + stall_metric(r);
  return out;
}

std::vector<std::pair<std::string, double>> top_stalls(const NcuMetrics& m, std::size_t n) {
  std::vector<std::pair<std::string, double>> out;
  for (const auto& r : stall_reasons())
    if (auto it = m.mean.find(stall_metric(r)); it != m.mean.end() && it->second > 0) out.push_back({r, it->second});
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (out.size() > n) out.resize(n);
  return out;
}

// ---------------------------------------------------------------- liger-bench JSON

const BenchCaseResult* BenchRun::find(const std::string& key) const {
  for (const auto& r : results)
    if (r.key() == key) return &r;
  return nullptr;
}

BenchRun parse_bench_json(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::Toolchain, std::string("liger-bench JSON does not parse: ") + e.what());
  }
  if (!j.is_object() || !j.contains("results") || !j["results"].is_array())
    throw Error(ErrorKind::Toolchain, "liger-bench JSON has no 'results' array");
  BenchRun run;
  run.device = j.value("device", "");
  run.sm_arch = j.value("sm_arch", 0);
  run.sm_count = j.value("sm_count", 0);
  run.copy_gbps = j.value("copy_gbps", 0.0);
  run.tunables = j.value("tunables", "default");
  for (const auto& r : j["results"]) {
    BenchCaseResult c;
    c.op = r.value("op", "");
    c.mode = r.value("mode", "");
    c.shape = r.value("shape", "");
    c.dtype = r.value("dtype", "");
    c.ok = r.value("ok", false);
    c.runs = r.value("runs", 0);
    c.median_us = r.value("median_us", 0.0);
    c.min_us = r.value("min_us", 0.0);
    c.p10_us = r.value("p10_us", 0.0);
    c.p90_us = r.value("p90_us", 0.0);
    c.mean_us = r.value("mean_us", 0.0);
    c.spread_pct = r.value("spread_pct", 0.0);
    c.min_bytes = r.value("min_bytes", 0.0);
    c.gbps = r.value("gbps", 0.0);
    c.copy_fraction = r.value("copy_fraction", 0.0);
    c.flops = r.value("flops", 0.0);
    c.tflops = r.value("tflops", 0.0);
    c.extra_mib = r.value("extra_mib", 0.0);
    c.message = r.value("message", "");
    if (c.op.empty() || c.mode.empty() || c.shape.empty())
      throw Error(ErrorKind::Toolchain, "liger-bench JSON: a result lacks op/mode/shape");
    run.results.push_back(c);
  }
  return run;
}

long long shape_rows(const std::string& shape) {
  static const std::regex re(R"(^(\d+)x(\d+))");
  std::smatch m;
  return std::regex_search(shape, m, re) ? std::stoll(m[1]) : 0;
}
long long shape_cols(const std::string& shape) {
  static const std::regex re(R"(^(\d+)x(\d+))");
  std::smatch m;
  return std::regex_search(shape, m, re) ? std::stoll(m[2]) : 0;
}

// ---------------------------------------------------------------- classification

std::vector<ClassRule> parse_class_rules(const YAML::Node& rules) {
  std::vector<ClassRule> out;
  if (!rules || !rules.IsSequence()) throw Error(ErrorKind::Internal, "strategies.yaml: 'classification' is not a list");
  static const std::regex cond_re(R"(^\s*([a-z_]+)\s*(<=|>=|<|>)\s*([-0-9.eE]+)\s*$)");
  for (const auto& r : rules) {
    ClassRule rule;
    rule.bottleneck = r["class"].as<std::string>();
    rule.reason = r["reason"].as<std::string>("");
    if (r["when"])
      for (const auto& c : r["when"]) {
        std::smatch m;
        const std::string text = c.as<std::string>();
        if (!std::regex_match(text, m, cond_re))
          throw Error(ErrorKind::Internal, "strategies.yaml: bad condition '" + text + "' (want: metric op number)");
        rule.all.push_back({m[1], m[2], std::stod(m[3])});
      }
    out.push_back(rule);
  }
  return out;
}

Classification classify(const std::vector<ClassRule>& rules, const std::map<std::string, double>& metrics) {
  for (const auto& rule : rules) {
    bool ok = true;
    std::string text;
    for (const auto& c : rule.all) {
      auto it = metrics.find(c.metric);
      if (it == metrics.end()) {
        ok = false;
        break;
      }
      const double v = it->second;
      const bool holds = c.op == "<" ? v < c.value : c.op == "<=" ? v <= c.value : c.op == ">" ? v > c.value : v >= c.value;
      if (!holds) {
        ok = false;
        break;
      }
      char buf[160];
      std::snprintf(buf, sizeof(buf), "%s%s = %.3g %s %g", text.empty() ? "" : ", ", c.metric.c_str(), v, c.op.c_str(),
                    c.value);
      text += buf;
    }
    if (ok) return {rule.bottleneck, rule.reason, text.empty() ? "fallback" : text};
  }
  return {"balanced", "no rule matched", "none"};
}

std::string overall_class(const std::vector<std::string>& per_case) {
  static const std::vector<std::string> order = {"register-bound", "memory-bound", "compute-bound", "latency-bound",
                                                 "balanced"};
  std::string best = "balanced";
  long best_count = 0;
  for (const auto& c : order) {
    const long n = std::count(per_case.begin(), per_case.end(), c);
    if (n > best_count) {
      best = c;
      best_count = n;
    }
  }
  return best;
}

// ---------------------------------------------------------------- strategies

std::vector<Strategy> parse_strategies(const YAML::Node& doc) {
  std::vector<Strategy> out;
  const YAML::Node list = doc["strategies"];
  if (!list || !list.IsSequence()) throw Error(ErrorKind::Internal, "strategies.yaml: no 'strategies' list");
  for (const auto& n : list) {
    Strategy s;
    s.id = n["id"].as<std::string>();
    s.name = n["name"].as<std::string>(s.id);
    s.kind = n["kind"].as<std::string>("llm_code");
    if (n["applies_to"])
      for (const auto& a : n["applies_to"]) s.applies_to.push_back(a.as<std::string>());
    if (n["preconditions"])
      for (const auto& p : n["preconditions"]) s.preconditions.push_back(p.as<std::string>());
    s.changes = n["changes"].as<std::string>("");
    s.expected = n["expected"].as<std::string>("");
    if (n["knobs"])
      for (const auto& k : n["knobs"]) s.knobs[k.first.as<std::string>()] = k.second.as<int>();
    if (s.kind == "code_variant" && s.knobs.empty())
      throw Error(ErrorKind::Internal, "strategies.yaml: code_variant strategy '" + s.id + "' sets no knobs");
    out.push_back(s);
  }
  return out;
}

std::vector<Strategy> strategy_order(const std::vector<Strategy>& all, const std::string& bottleneck,
                                     const std::set<std::string>& traits) {
  std::vector<Strategy> out;
  auto applies = [&](const Strategy& s) {
    const bool cls = std::find(s.applies_to.begin(), s.applies_to.end(), "any") != s.applies_to.end() ||
                     std::find(s.applies_to.begin(), s.applies_to.end(), bottleneck) != s.applies_to.end();
    if (!cls) return false;
    for (const auto& p : s.preconditions)
      if (!traits.count(p)) return false;
    return true;
  };
  for (const auto& s : all)
    if (s.kind == "tunable_search" && applies(s)) out.push_back(s);
  for (const auto& s : all)
    if (s.kind != "tunable_search" && applies(s)) out.push_back(s);
  return out;
}

// ---------------------------------------------------------------- search space

std::string candidate_text(const Candidate& c) {
  std::string out;
  for (const auto& [k, v] : c) out += (out.empty() ? "" : " ") + k + "=" + std::to_string(v);
  return out.empty() ? "default" : out;
}

std::optional<Candidate> parse_candidate(const std::string& text) {
  Candidate c;
  std::string t = text;
  std::replace(t.begin(), t.end(), ',', ' ');
  std::istringstream in(t);
  static const std::set<std::string> fields = {"threads_per_block", "rows_per_block", "vector_bytes",
                                               "reduction_blocks", "chunk_rows", "pipeline_depth",
                                               "stages"};
  for (std::string item; in >> item;) {
    const auto eq = item.find('=');
    if (eq == std::string::npos) return std::nullopt;
    const std::string key = item.substr(0, eq);
    if (!fields.count(key)) return std::nullopt;
    char* end = nullptr;
    const long v = std::strtol(item.c_str() + eq + 1, &end, 10);
    if (end == item.c_str() + eq + 1 || *end != '\0' || v < 0) return std::nullopt;
    c[key] = static_cast<int>(v);
  }
  return c;
}

SearchSpace parse_search_space(const std::string& op, const YAML::Node& node) {
  SearchSpace s;
  s.op = op;
  if (!node || !node["tunables"]) return s;
  for (const auto& it : node["tunables"]) {
    TunableDim d;
    d.name = it.first.as<std::string>();
    const YAML::Node v = it.second;
    for (const auto& x : v["coarse"]) d.coarse.push_back(x.as<int>());
    d.multiple_of = v["multiple_of"].as<int>(1);
    d.min = v["min"].as<int>(d.coarse.empty() ? 1 : *std::min_element(d.coarse.begin(), d.coarse.end()));
    d.max = v["max"].as<int>(d.coarse.empty() ? 1 : *std::max_element(d.coarse.begin(), d.coarse.end()));
    d.power_of_two = v["power_of_two"].as<bool>(false);
    std::sort(d.coarse.begin(), d.coarse.end());
    s.dims.push_back(d);
  }
  s.max_threads_backward = node["max_threads_backward"].as<int>(0);
  s.rows_divide_threads = node["rows_divide_threads"].as<bool>(false);
  s.row_vector_bytes = node["row_vector_bytes"].as<int>(0);
  return s;
}

std::vector<Candidate> coarse_grid(const SearchSpace& space) {
  std::vector<Candidate> out(1);
  for (const auto& d : space.dims) {
    std::vector<Candidate> next;
    for (const auto& c : out)
      for (int v : d.coarse) {
        Candidate n = c;
        n[d.name] = v;
        next.push_back(n);
      }
    out = std::move(next);
  }
  if (out.size() == 1 && out[0].empty()) out.clear();
  return out;
}

std::vector<Candidate> refine_around(const SearchSpace& space, const Candidate& best, const std::set<Candidate>& tried) {
  std::vector<Candidate> out;
  std::set<Candidate> seen = tried;
  for (const auto& d : space.dims) {
    auto it = best.find(d.name);
    if (it == best.end() || d.power_of_two) continue;
    const int v = it->second;
    // The coarse neighbours of v, and the geometric midpoints towards them.
    std::vector<int> values = d.coarse;
    auto pos = std::lower_bound(values.begin(), values.end(), v);
    std::vector<int> neighbours;
    if (pos != values.begin()) neighbours.push_back(*std::prev(pos));
    auto after = pos != values.end() && *pos == v ? std::next(pos) : pos;
    if (after != values.end()) neighbours.push_back(*after);
    for (int n : neighbours) {
      const double mid = std::sqrt(static_cast<double>(v) * n);
      int r = static_cast<int>(std::lround(mid / d.multiple_of)) * d.multiple_of;
      if (r == v || r == n || r < d.min || r > d.max || r <= 0) continue;
      Candidate c = best;
      c[d.name] = r;
      if (seen.insert(c).second) out.push_back(c);
    }
  }
  return out;
}

bool candidate_feasible(const SearchSpace& space, const Candidate& c, const ArchLimits& arch, int max_registers,
                        long long max_smem, bool has_backward, std::string* why) {
  auto fail = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  const auto tpb = c.count("threads_per_block") ? c.at("threads_per_block") : 0;
  const auto rpb = c.count("rows_per_block") ? c.at("rows_per_block") : 0;
  if (tpb) {
    if (tpb % 32 != 0) return fail("threads_per_block=" + std::to_string(tpb) + " is not a multiple of 32");
    if (tpb > arch.max_threads_per_block)
      return fail("threads_per_block=" + std::to_string(tpb) + " > " + std::to_string(arch.max_threads_per_block) +
                  " (sm_" + std::to_string(arch.sm) + ")");
    if (max_registers > 0) {
      const Occupancy o = estimate_occupancy(arch, max_registers, max_smem, tpb);
      if (!o.launchable)
        return fail("threads_per_block=" + std::to_string(tpb) + " with " + std::to_string(max_registers) +
                    " registers/thread: " + o.limiter);
    }
    if (has_backward && space.max_threads_backward > 0 && tpb > space.max_threads_backward)
      return fail("threads_per_block=" + std::to_string(tpb) + " > the backward's limit of " +
                  std::to_string(space.max_threads_backward));
  }
  if (space.rows_divide_threads && tpb && rpb) {
    if (tpb % rpb != 0) return fail("rows_per_block=" + std::to_string(rpb) + " does not divide threads_per_block");
    const int tx = tpb / rpb;
    const bool tx_ok = (tx <= 32 && (tx & (tx - 1)) == 0) || (tx > 32 && tx % 32 == 0);
    if (!tx_ok) return fail("threads per row " + std::to_string(tx) + " is neither a power of two <= 32 nor a multiple of 32");
  }
  return true;
}

// ---------------------------------------------------------------- verdicts

bool in_target(const Goal& goal, const std::string& mode) {
  return goal.target_modes.empty() || goal.target_modes.count(mode) > 0;
}

double geomean(const std::vector<double>& values) {
  if (values.empty()) return 1;
  double s = 0;
  for (double v : values) s += std::log(std::max(v, 1e-12));
  return std::exp(s / static_cast<double>(values.size()));
}

namespace {
// extra_mib is measured in 2 MiB driver pages: a change under one page is noise.
constexpr double kMemoryNoiseMiB = 2.0;
}

Verdict judge(const BenchRun& base, const BenchRun& variant, const Goal& goal) {
  Verdict v;
  std::vector<double> speedups;
  double base_mem = 0, var_mem = 0;
  int faster = 0, slower = 0, failed = 0;
  std::map<std::string, std::pair<int, int>> per_pass;  // mode -> (faster, slower beyond 10%)
  for (const auto& b : base.results) {
    if (!b.ok) continue;
    CaseComparison c;
    c.key = b.key();
    c.mode = b.mode;
    c.shape = b.shape;
    c.dtype = b.dtype;
    c.base_us = b.median_us;
    c.base_mib = b.extra_mib;
    const BenchCaseResult* r = variant.find(b.key());
    if (!r || !r->ok) {
      c.outcome = "failed";
      ++failed;
      v.cases.push_back(c);
      continue;
    }
    c.variant_us = r->median_us;
    c.variant_mib = r->extra_mib;
    c.variant_copy_fraction = r->copy_fraction;
    c.change_pct = b.median_us > 0 ? (r->median_us - b.median_us) / b.median_us * 100.0 : 0;
    c.noise_pct = std::max(b.spread_pct, r->spread_pct);
    c.outcome = c.change_pct < -c.noise_pct ? "faster" : c.change_pct > c.noise_pct ? "slower" : "same";
    const bool target = in_target(goal, b.mode);
    if (target) {
      speedups.push_back(r->median_us > 0 ? b.median_us / r->median_us : 1);
      base_mem += b.extra_mib;
      var_mem += r->extra_mib;
    }
    if (goal.goal != "memory" && target) {
      if (c.outcome == "faster") ++faster;
      if (c.outcome == "slower") ++slower;
    }
    if (c.outcome == "faster") per_pass[b.mode].first++;
    if (c.outcome == "slower" && c.change_pct > 10.0) per_pass[b.mode].second++;

    // Guardrail: a non-target metric > 5% worse at any size.
    if (goal.goal == "speed") {
      const double d = c.variant_mib - c.base_mib;
      const double pct = c.base_mib > 0 ? d / c.base_mib * 100 : (d > kMemoryNoiseMiB ? 100.0 : 0.0);
      GuardrailCheck g{"memory (non-target) not > 5% worse", c.key, pct, 5.0, !(pct > 5.0 && d > kMemoryNoiseMiB)};
      v.guardrails.push_back(g);
    } else if (goal.goal == "memory") {
      const bool worse = c.change_pct > 5.0 && c.outcome == "slower";
      v.guardrails.push_back({"time (non-target) not > 5% worse", c.key, c.change_pct, 5.0, !worse});
      const double d = c.variant_mib - c.base_mib;
      if (target) {
        if (d < -kMemoryNoiseMiB) ++faster;
        else if (d > kMemoryNoiseMiB) ++slower;
      }
    } else {  // balanced: neither time nor memory may get > 5% worse anywhere
      const bool worse_time = c.change_pct > 5.0 && c.outcome == "slower";
      v.guardrails.push_back({"time not > 5% worse at any size", c.key, c.change_pct, 5.0, !worse_time});
      const double d = c.variant_mib - c.base_mib;
      const double pct = c.base_mib > 0 ? d / c.base_mib * 100 : (d > kMemoryNoiseMiB ? 100.0 : 0.0);
      v.guardrails.push_back({"memory not > 5% worse at any size", c.key, pct, 5.0, !(pct > 5.0 && d > kMemoryNoiseMiB)});
    }
    // Non-target passes (when the goal names some) must not get > 5% slower either.
    if (!target && goal.goal != "memory") {
      const bool worse = c.change_pct > 5.0 && c.outcome == "slower";
      v.guardrails.push_back({"non-target pass not > 5% slower", c.key, c.change_pct, 5.0, !worse});
    }
    v.cases.push_back(c);
  }
  // Cross-pass guardrail: one pass > 10% slower at some size while the other pass improves.
  for (const auto& [mode, counts] : per_pass) {
    if (counts.second == 0) continue;
    bool other_improves = false;
    for (const auto& [m2, c2] : per_pass)
      if (m2 != mode && c2.first > 0) other_improves = true;
    double worst = 0;
    std::string where;
    for (const auto& c : v.cases)
      if (c.mode == mode && c.change_pct > worst) {
        worst = c.change_pct;
        where = c.key;
      }
    v.guardrails.push_back({"no pass > 10% slower to help another", where, worst, 10.0, !other_improves});
  }
  v.geomean_speedup = geomean(speedups);
  v.memory_change_pct = base_mem > 0 ? (var_mem - base_mem) / base_mem * 100 : 0;
  const bool guard_ok = std::all_of(v.guardrails.begin(), v.guardrails.end(), [](const auto& g) { return g.passed; });
  char buf[256];
  if (failed > 0) {
    v.verdict = "REJECTED";
    std::snprintf(buf, sizeof(buf), "%d case(s) failed to run", failed);
  } else if (!guard_ok) {
    v.verdict = "REJECTED";
    std::snprintf(buf, sizeof(buf), "guardrail violated (geo-mean speedup %.3fx)", v.geomean_speedup);
  } else if (faster == 0) {
    v.verdict = "REJECTED";
    std::snprintf(buf, sizeof(buf), "no improvement outside the run-to-run spread (geo-mean %.3fx)", v.geomean_speedup);
  } else if (slower > 0) {
    v.verdict = "MIXED";
    std::snprintf(buf, sizeof(buf), "%d size(s) better, %d worse (within guardrails); geo-mean %.3fx", faster, slower,
                  v.geomean_speedup);
  } else {
    v.verdict = "ACCEPTED";
    std::snprintf(buf, sizeof(buf), "%d size(s) better outside the spread, none worse; geo-mean %.3fx", faster,
                  v.geomean_speedup);
  }
  v.summary = buf;
  return v;
}

// ---------------------------------------------------------------- target metric, stop rules

TargetMetric parse_target_metric(const std::string& text) {
  static const std::regex time_re(R"(^\s*([a-z]*)\s*(?:@\s*([A-Za-z0-9_x]+))?\s*<\s*([0-9.]+)\s*(us|ms)\s*$)");
  static const std::regex copy_re(R"(^\s*([a-z]*)\s*(?:@\s*([A-Za-z0-9_x]+))?\s*>=?\s*([0-9.]+)\s*%\s*copy\s*$)");
  static const std::regex speedup_re(R"(^\s*([a-z]*)\s*(?:@\s*([A-Za-z0-9_x]+))?\s*>?=?\s*([0-9.]+)\s*x\s*$)");
  static const std::regex gbps_re(R"(^\s*([a-z]*)\s*(?:@\s*([A-Za-z0-9_x]+))?\s*>?=?\s*([0-9.]+)\s*GB/s\s*$)");
  TargetMetric t;
  t.text = text;
  std::smatch m;
  if (std::regex_match(text, m, speedup_re)) {
    t.mode = m[1];
    t.shape = m[2];
    t.kind = "speedup";
    t.value = std::stod(m[3]);
  } else if (std::regex_match(text, m, gbps_re)) {
    t.mode = m[1];
    t.shape = m[2];
    t.kind = "gbps";
    t.value = std::stod(m[3]);
  } else if (std::regex_match(text, m, time_re)) {
    t.mode = m[1];
    t.shape = m[2];
    t.kind = "time_us";
    t.value = std::stod(m[3]) * (m[4] == "ms" ? 1000.0 : 1.0);
  } else if (std::regex_match(text, m, copy_re)) {
    t.mode = m[1];
    t.shape = m[2];
    t.kind = "copy_fraction";
    t.value = std::stod(m[3]) / 100.0;
  } else {
    throw Error(ErrorKind::Usage, "--target-metric '" + text + "' is not understood",
                "use e.g. 'forward@4096x4096<300us', 'forward<0.3ms', 'full>=85%copy', '1.3x' or '900GB/s'");
  }
  if (!t.mode.empty() && t.mode != "forward" && t.mode != "backward" && t.mode != "full")
    throw Error(ErrorKind::Usage, "--target-metric: mode '" + t.mode + "' is not forward, backward or full");
  return t;
}

bool target_met(const TargetMetric& target, const BenchRun& run, const Goal& goal, const BenchRun* baseline) {
  std::vector<double> values;
  for (const auto& r : run.results) {
    if (!r.ok) continue;
    if (!target.mode.empty() ? r.mode != target.mode : !in_target(goal, r.mode)) continue;
    if (!target.shape.empty() && r.shape != target.shape) continue;
    if (target.kind == "speedup") {
      const BenchCaseResult* b = baseline ? baseline->find(r.key()) : nullptr;
      if (!b || !b->ok || r.median_us <= 0) continue;
      values.push_back(b->median_us / r.median_us);
    } else {
      values.push_back(target.kind == "time_us" ? r.median_us : target.kind == "gbps" ? r.gbps : r.copy_fraction);
    }
  }
  if (values.empty()) return false;
  if (target.kind == "speedup") return geomean(values) >= target.value;
  if (target.kind == "time_us") return std::all_of(values.begin(), values.end(), [&](double v) { return v < target.value; });
  return std::all_of(values.begin(), values.end(), [&](double v) { return v >= target.value; });
}

std::optional<std::string> stop_reason(const StopInput& in) {
  if (in.target_met) return "the target metric is met";
  if (in.variants_done >= in.budget)
    return "the variant budget (" + std::to_string(in.budget) + ") is spent";
  const auto& imp = in.improvements_pct;
  if (imp.size() >= 2 && imp[imp.size() - 1] < 1.0 && imp[imp.size() - 2] < 1.0)
    return "two variants in a row improved < 1%";
  return std::nullopt;
}

// ---------------------------------------------------------------- search speed and wins that hold

double class_score(const BenchRun& run, const std::vector<std::string>& keys) {
  std::vector<double> t;
  for (const auto& k : keys) {
    const BenchCaseResult* r = run.find(k);
    if (!r || !r->ok) return INFINITY;
    t.push_back(r->median_us);
  }
  return geomean(t);
}

std::set<std::string> halving_survivors(const std::map<std::string, BenchRun>& round,
                                        const std::vector<std::vector<std::string>>& classes, std::size_t keep) {
  std::set<std::string> out;
  for (const auto& keys : classes) {
    std::vector<std::pair<double, std::string>> ranked;
    for (const auto& [text, run] : round) ranked.push_back({class_score(run, keys), text});
    std::stable_sort(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    const std::size_t n = std::min(ranked.size(), std::max(keep, (ranked.size() + 1) / 2));
    for (std::size_t i = 0; i < n; ++i)
      if (std::isfinite(ranked[i].first)) out.insert(ranked[i].second);
  }
  return out;
}

namespace {
double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
}  // namespace

Interleaved judge_interleaved(const std::vector<BenchRun>& a, const std::vector<BenchRun>& b, const Goal& goal) {
  Interleaved out;
  out.rounds = static_cast<int>(std::min(a.size(), b.size()));
  if (out.rounds == 0) {
    out.summary = "no interleaved rounds";
    return out;
  }
  std::vector<double> speedups;
  int faster = 0, slower = 0;
  for (const auto& first : a[0].results) {
    InterleavedCase c;
    c.key = first.key();
    c.mode = first.mode;
    std::vector<double> av, bv;
    for (int r = 0; r < out.rounds; ++r) {
      const auto* x = a[r].find(c.key);
      const auto* y = b[r].find(c.key);
      if (x && x->ok) av.push_back(x->median_us);
      if (y && y->ok) bv.push_back(y->median_us);
    }
    if (static_cast<int>(av.size()) < out.rounds || static_cast<int>(bv.size()) < out.rounds) {
      c.outcome = "failed";
      out.cases.push_back(c);
      continue;
    }
    c.a_median_us = median_of(av);
    c.b_median_us = median_of(bv);
    c.a_min_us = *std::min_element(av.begin(), av.end());
    c.a_max_us = *std::max_element(av.begin(), av.end());
    c.b_min_us = *std::min_element(bv.begin(), bv.end());
    c.b_max_us = *std::max_element(bv.begin(), bv.end());
    c.change_pct = (c.b_median_us - c.a_median_us) / c.a_median_us * 100;
    // Counted only outside the spread: every B round beats every A round, or the reverse.
    c.outcome = c.b_max_us < c.a_min_us ? "faster" : c.b_min_us > c.a_max_us ? "slower" : "same";
    if (in_target(goal, c.mode)) {
      speedups.push_back(c.outcome == "same" ? 1.0 : c.a_median_us / c.b_median_us);
      faster += c.outcome == "faster";
      slower += c.outcome == "slower";
    }
    out.cases.push_back(c);
  }
  out.geomean_speedup = speedups.empty() ? 1.0 : geomean(speedups);
  out.holds = faster > 0 && slower == 0;
  char buf[200];
  std::snprintf(buf, sizeof(buf), "%d rounds A/B interleaved: %d target case(s) faster and %d slower outside the spread; "
                "%.3fx geo-mean (cases inside the spread count 1.0)", out.rounds, faster, slower, out.geomean_speedup);
  out.summary = buf;
  return out;
}

}  // namespace liger::kernel_perf
