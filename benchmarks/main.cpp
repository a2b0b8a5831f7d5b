// liger-bench: runs the registered benchmark cases (see harness.h and README.md).
//
// Exit codes: 0 every selected case ran; 1 a case failed; 2 no usable GPU; 3 bad arguments.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "harness.h"

namespace {

using liger::bench::BenchCase;
using liger::bench::Measurement;

struct Options {
  std::vector<std::string> ops, modes, dtypes, shapes;
  liger_tunables tunables{};
  bool has_tunables = false;
  // --candidate sets measured in this one process, case by case (every candidate on a case before
  // the next case, so drift hits them alike); --json-dir gets <index>.json per candidate.
  std::vector<liger_tunables> candidates;
  // Per candidate, the cases it is measured on ("mode/shape/dtype" labels after '@'); empty: every
  // selected case. A search measures a candidate only where it is still in the running.
  std::vector<std::vector<std::string>> candidate_cases;
  std::string json_dir;
  std::string csv_path, json_path, commit;
  bool list = false;
  bool copy = true;
  double copy_mib = 1024;
  liger::bench::MeasureOptions measure;
};

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, ',')) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

bool matches(const std::vector<std::string>& filter, const std::string& value) {
  if (filter.empty()) return true;
  for (const auto& f : filter) {
    if (f == value) return true;
  }
  return false;
}

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: liger-bench [options]\n"
               "  --list                     list the registered cases and exit (no GPU needed)\n"
               "  --op a,b  --mode forward,backward,full  --dtype bf16,fp16,fp32  --shape LABEL,...\n"
               "                             filters (comma-separated, exact match; default all)\n"
               "  --tunable key=value        override a liger_tunables field (repeatable): threads_per_block,\n"
               "                             rows_per_block, vector_bytes, reduction_blocks, chunk_rows,\n"
               "                             pipeline_depth, stages\n"
               "  --candidate k=v,k=v[@CASES] a tunables set to measure (repeatable; each case runs every\n"
               "                             candidate in turn, in one process); needs --json-dir. CASES:\n"
               "                             mode/shape/dtype labels joined by '+' (only those cases for\n"
               "                             this candidate); an empty k=v list is the op's own defaults\n"
               "  --json-dir DIR             with --candidate: DIR/<index>.json per candidate (as --json)\n"
               "  --csv FILE  --json FILE    also write the results there\n"
               "  --commit SHA               recorded in the JSON/CSV output\n"
               "  --min-time-ms X            timed GPU time per case (default 400)\n"
               "  --min-runs N --max-runs N  bounds on timed runs (default 20, 2000)\n"
               "  --warmup-ms X              warm-up per case (default 50)\n"
               "  --stop-spread-pct X        stop timing a case before --min-time-ms once --min-runs runs\n"
               "                             have a p10-p90 spread <= X%% of the median (default 0: off)\n"
               "  --copy-mib X               size of the copy-bandwidth probe (default 1024)\n"
               "  --no-copy                  skip the copy-bandwidth probe (%%copy column empty)\n");
}

bool parse_tunable(const std::string& text, liger_tunables& tunables) {
  auto equals = text.find('=');
  if (equals == std::string::npos) return false;
  std::string key = text.substr(0, equals);
  char* end = nullptr;
  long value = std::strtol(text.c_str() + equals + 1, &end, 10);
  if (end == text.c_str() + equals + 1 || *end != '\0') return false;
  auto v = static_cast<int32_t>(value);
  if (key == "threads_per_block") tunables.threads_per_block = v;
  else if (key == "rows_per_block") tunables.rows_per_block = v;
  else if (key == "vector_bytes") tunables.vector_bytes = v;
  else if (key == "reduction_blocks") tunables.reduction_blocks = v;
  else if (key == "chunk_rows") tunables.chunk_rows = v;
  else if (key == "pipeline_depth") tunables.pipeline_depth = v;
  else if (key == "stages") tunables.stages = v;
  else return false;
  return true;
}

int parse(int argc, char** argv, Options& options) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](std::string& out) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "liger-bench: %s needs a value\n", arg.c_str());
        return false;
      }
      out = argv[++i];
      return true;
    };
    std::string v;
    if (arg == "--help" || arg == "-h") {
      usage(stdout);
      std::exit(0);
    } else if (arg == "--list") {
      options.list = true;
    } else if (arg == "--no-copy") {
      options.copy = false;
    } else if (arg == "--op" || arg == "--mode" || arg == "--dtype" || arg == "--shape") {
      if (!value(v)) return 3;
      auto& target = arg == "--op" ? options.ops : arg == "--mode" ? options.modes : arg == "--dtype" ? options.dtypes : options.shapes;
      for (auto& part : split(v)) target.push_back(part);
    } else if (arg == "--tunable") {
      if (!value(v)) return 3;
      if (!parse_tunable(v, options.tunables)) {
        std::fprintf(stderr, "liger-bench: bad --tunable '%s' (want field=integer)\n", v.c_str());
        return 3;
      }
      options.has_tunables = true;
    } else if (arg == "--candidate") {
      if (!value(v)) return 3;
      liger_tunables t{};
      std::vector<std::string> cases;
      if (const auto at = v.find('@'); at != std::string::npos) {
        std::stringstream list(v.substr(at + 1));
        std::string label;
        while (std::getline(list, label, '+'))
          if (!label.empty()) cases.push_back(label);
        if (cases.empty()) {
          std::fprintf(stderr, "liger-bench: --candidate '%s' has '@' but no case (want @mode/shape/dtype+...)\n",
                       v.c_str());
          return 3;
        }
        v = v.substr(0, at);
      }
      for (const auto& part : split(v)) {
        if (!parse_tunable(part, t)) {
          std::fprintf(stderr, "liger-bench: bad --candidate '%s' (want field=integer,field=integer)\n", v.c_str());
          return 3;
        }
      }
      options.candidates.push_back(t);
      options.candidate_cases.push_back(cases);
    } else if (arg == "--json-dir") {
      if (!value(options.json_dir)) return 3;
    } else if (arg == "--csv") {
      if (!value(options.csv_path)) return 3;
    } else if (arg == "--json") {
      if (!value(options.json_path)) return 3;
    } else if (arg == "--commit") {
      if (!value(options.commit)) return 3;
    } else if (arg == "--min-time-ms" || arg == "--warmup-ms" || arg == "--copy-mib" || arg == "--min-runs" ||
               arg == "--max-runs" || arg == "--stop-spread-pct") {
      if (!value(v)) return 3;
      char* end = nullptr;
      double number = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end != '\0' || number < 0) {
        std::fprintf(stderr, "liger-bench: bad number for %s: '%s'\n", arg.c_str(), v.c_str());
        return 3;
      }
      if (arg == "--min-time-ms") options.measure.min_time_ms = number;
      else if (arg == "--warmup-ms") options.measure.warmup_ms = number;
      else if (arg == "--copy-mib") options.copy_mib = number;
      else if (arg == "--min-runs") options.measure.min_runs = static_cast<int>(number);
      else if (arg == "--stop-spread-pct") options.measure.stop_spread_pct = number;
      else options.measure.max_runs = std::max(1, static_cast<int>(number));
    } else {
      std::fprintf(stderr, "liger-bench: unknown argument '%s'\n", arg.c_str());
      usage(stderr);
      return 3;
    }
  }
  if (!options.candidates.empty() && (options.json_dir.empty() || options.has_tunables || !options.json_path.empty() ||
                                      !options.csv_path.empty())) {
    std::fprintf(stderr, "liger-bench: --candidate writes --json-dir DIR (one file per candidate) and does not mix with "
                         "--tunable, --json or --csv\n");
    return 3;
  }
  return 0;
}

std::string json_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buffer[8];
      std::snprintf(buffer, sizeof(buffer), "\\u%04x", c);
      out += buffer;
    } else {
      out += c;
    }
  }
  return out;
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string tunables_text(const liger_tunables* t) {
  if (!t) return "default";
  std::ostringstream out;
  const char* sep = "";
  auto add = [&](const char* name, int32_t value) {
    if (value) {
      out << sep << name << "=" << value;
      sep = " ";
    }
  };
  add("threads_per_block", t->threads_per_block);
  add("rows_per_block", t->rows_per_block);
  add("vector_bytes", t->vector_bytes);
  add("reduction_blocks", t->reduction_blocks);
  add("chunk_rows", t->chunk_rows);
  add("pipeline_depth", t->pipeline_depth);
  add("stages", t->stages);
  std::string text = out.str();
  return text.empty() ? "default" : text;
}

std::string utc_now() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

using Results = std::vector<std::pair<const BenchCase*, Measurement>>;

// "mode/shape/dtype": how --candidate names a case.
std::string case_label(const BenchCase& c) {
  return c.mode + "/" + c.shape + "/" + liger::bench::dtype_label(c.dtype);
}

void write_json(const std::string& path, const liger::bench::DeviceInfo& device, const std::string& date,
                const std::string& commit, double copy_gbps, const liger_tunables* tunables, const Results& results) {
  std::ofstream json(path);
  json.precision(10);
  json << "{\n  \"device\": \"" << json_escape(device.name) << "\",\n  \"sm_arch\": " << device.sm_arch
       << ",\n  \"sm_count\": " << device.sm_count << ",\n  \"l2_bytes\": " << device.l2_bytes
       << ",\n  \"date\": \"" << date << "\",\n  \"commit\": \"" << json_escape(commit)
       << "\",\n  \"copy_gbps\": " << copy_gbps << ",\n  \"tunables\": \"" << json_escape(tunables_text(tunables))
       << "\",\n  \"results\": [";
  const char* sep = "\n";
  for (const auto& [c, m] : results) {
    json << sep << "    {\"op\": \"" << json_escape(c->op) << "\", \"mode\": \"" << json_escape(c->mode)
         << "\", \"shape\": \"" << json_escape(c->shape) << "\", \"dtype\": \"" << liger::bench::dtype_label(c->dtype)
         << "\", \"ok\": " << (m.ok ? "true" : "false") << ", \"runs\": " << m.runs
         << ", \"input_sets\": " << m.input_sets << ", \"set_mib\": " << m.set_mib
         << ", \"median_us\": " << m.median_us << ", \"min_us\": " << m.min_us << ", \"p10_us\": " << m.p10_us
         << ", \"p90_us\": " << m.p90_us << ", \"mean_us\": " << m.mean_us << ", \"spread_pct\": " << m.spread_pct
         << ", \"min_bytes\": " << c->min_bytes << ", \"gbps\": " << m.gbps
         << ", \"copy_fraction\": " << m.copy_fraction << ", \"flops\": " << c->flops << ", \"tflops\": " << m.tflops
         << ", \"extra_mib\": " << m.extra_mib << ", \"note\": \"" << json_escape(c->note)
         << "\", \"message\": \"" << json_escape(m.error) << "\"}";
    sep = ",\n";
  }
  json << "\n  ]\n}\n";
  if (!json) std::fprintf(stderr, "liger-bench: could not write %s\n", path.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (int code = parse(argc, argv, options); code != 0) return code;

  std::vector<BenchCase> selected;
  for (auto& bench_case : liger::bench::all_cases()) {
    if (matches(options.ops, bench_case.op) && matches(options.modes, bench_case.mode) &&
        matches(options.dtypes, liger::bench::dtype_label(bench_case.dtype)) &&
        matches(options.shapes, bench_case.shape))
      selected.push_back(std::move(bench_case));
  }
  if (options.list) {
    for (const auto& c : selected) {
      std::printf("%-22s %-9s %-24s %-5s min_bytes=%.0f%s%s\n", c.op.c_str(), c.mode.c_str(), c.shape.c_str(),
                  liger::bench::dtype_label(c.dtype), c.min_bytes, c.note.empty() ? "" : "  # ", c.note.c_str());
    }
    return 0;
  }
  if (selected.empty()) {
    std::fprintf(stderr, "liger-bench: no registered case matches the filters (try --list)\n");
    return 3;
  }

  liger::bench::DeviceInfo device;
  std::string error;
  if (!liger::bench::query_device(device, error)) {
    std::fprintf(stderr, "liger-bench: cannot benchmark: %s. Run it on a machine with an NVIDIA GPU.\n",
                 error.c_str());
    return 2;
  }
  const liger_tunables* tunables = options.has_tunables ? &options.tunables : nullptr;

  double copy_gbps = 0;
  if (options.copy) {
    copy_gbps = liger::bench::measure_copy_bandwidth(static_cast<std::size_t>(options.copy_mib * 1024 * 1024), error);
    if (copy_gbps <= 0) std::fprintf(stderr, "liger-bench: %s\n", error.c_str());
  }
  std::printf("# device: %s (sm_%d, %d SMs, L2 %.1f MiB, %.1f GiB)\n", device.name.c_str(), device.sm_arch,
              device.sm_count, device.l2_bytes / 1048576.0, device.total_memory / 1073741824.0);
  std::printf("# copy bandwidth (cudaMemcpyAsync D2D %.0f MiB, read+write): %.1f GB/s\n", options.copy_mib, copy_gbps);
  std::printf("# tunables: %s; date %s%s%s\n", tunables_text(tunables).c_str(), utc_now().c_str(),
              options.commit.empty() ? "" : "; commit ", options.commit.c_str());
  std::printf("%-20s %-8s %-22s %-5s %6s %4s %11s %11s %11s %7s %9s %6s %8s %9s\n", "op", "mode", "shape", "dtype",
              "runs", "sets", "median_us", "min_us", "p90_us", "spread%", "GB/s", "%copy", "TFLOP/s", "extra_MiB");
  std::fflush(stdout);

  if (!options.candidates.empty()) {
    // A case label a candidate names must be a selected case: a typo would silently measure nothing.
    for (std::size_t k = 0; k < options.candidates.size(); ++k)
      for (const auto& label : options.candidate_cases[k]) {
        bool known = false;
        for (const auto& c : selected) known = known || case_label(c) == label;
        if (!known) {
          std::fprintf(stderr, "liger-bench: --candidate %zu names case '%s', which no selected case has (labels are "
                               "mode/shape/dtype; see --list)\n", k, label.c_str());
          return 3;
        }
      }
    std::vector<Results> per(options.candidates.size());
    int failures = 0;
    for (const auto& bench_case : selected) {
      for (std::size_t k = 0; k < options.candidates.size(); ++k) {
        if (!options.candidate_cases[k].empty() &&
            !matches(options.candidate_cases[k], case_label(bench_case)))
          continue;
        Measurement m = liger::bench::measure_case(bench_case, device, options.measure, &options.candidates[k]);
        if (m.ok && copy_gbps > 0) m.copy_fraction = m.gbps / copy_gbps;
        if (!m.ok) ++failures;
        std::printf("%-20s %-8s %-22s %-5s %-40s %s %11.2f us\n", bench_case.op.c_str(), bench_case.mode.c_str(),
                    bench_case.shape.c_str(), liger::bench::dtype_label(bench_case.dtype),
                    tunables_text(&options.candidates[k]).c_str(), m.ok ? "ok" : "FAILED", m.median_us);
        std::fflush(stdout);
        per[k].emplace_back(&bench_case, m);
      }
    }
    const std::string date = utc_now();
    for (std::size_t k = 0; k < options.candidates.size(); ++k)
      write_json(options.json_dir + "/" + std::to_string(k) + ".json", device, date, options.commit, copy_gbps,
                 &options.candidates[k], per[k]);
    return failures > 0 ? 1 : 0;
  }

  Results results;
  int failures = 0;
  for (const auto& bench_case : selected) {
    Measurement m = liger::bench::measure_case(bench_case, device, options.measure, tunables);
    if (m.ok && copy_gbps > 0) m.copy_fraction = m.gbps / copy_gbps;
    if (m.ok) {
      std::printf("%-20s %-8s %-22s %-5s %6d %4d %11.2f %11.2f %11.2f %7.2f %9.1f %6.1f %8.2f %9.1f%s%s\n",
                  bench_case.op.c_str(), bench_case.mode.c_str(), bench_case.shape.c_str(),
                  liger::bench::dtype_label(bench_case.dtype), m.runs, m.input_sets, m.median_us, m.min_us, m.p90_us,
                  m.spread_pct, m.gbps, m.copy_fraction * 100, m.tflops, m.extra_mib, m.error.empty() ? "" : "  ",
                  m.error.c_str());
    } else {
      ++failures;
      std::printf("%-20s %-8s %-22s %-5s FAILED: %s\n", bench_case.op.c_str(), bench_case.mode.c_str(),
                  bench_case.shape.c_str(), liger::bench::dtype_label(bench_case.dtype), m.error.c_str());
    }
    std::fflush(stdout);
    results.emplace_back(&bench_case, m);
  }

  std::string date = utc_now();
  if (!options.csv_path.empty()) {
    std::ofstream csv(options.csv_path);
    csv << "op,mode,shape,dtype,ok,runs,input_sets,set_mib,median_us,min_us,p10_us,p90_us,mean_us,spread_pct,"
           "min_bytes,gbps,copy_gbps,copy_fraction,flops,tflops,extra_mib,tunables,device,sm_arch,date,commit,note\n";
    for (const auto& [c, m] : results) {
      csv << csv_field(c->op) << ',' << c->mode << ',' << csv_field(c->shape) << ','
          << liger::bench::dtype_label(c->dtype) << ',' << (m.ok ? 1 : 0) << ',' << m.runs << ',' << m.input_sets << ','
          << m.set_mib << ',' << m.median_us << ',' << m.min_us << ',' << m.p10_us << ',' << m.p90_us << ','
          << m.mean_us << ',' << m.spread_pct << ',' << c->min_bytes << ',' << m.gbps << ',' << copy_gbps << ','
          << m.copy_fraction << ',' << c->flops << ',' << m.tflops << ',' << m.extra_mib << ','
          << csv_field(tunables_text(tunables)) << ',' << csv_field(device.name) << ',' << device.sm_arch << ','
          << date << ',' << options.commit << ',' << csv_field(m.error.empty() ? c->note : m.error) << '\n';
    }
    if (!csv) std::fprintf(stderr, "liger-bench: could not write %s\n", options.csv_path.c_str());
  }
  if (!options.json_path.empty())
    write_json(options.json_path, device, date, options.commit, copy_gbps, tunables, results);
  return failures > 0 ? 1 : 0;
}
