// `autopatch --all`: every causal-LM model type of a transformers tree through its own autopatch
// run, N at a time, then the coverage table.
//
// Each model is a separate liger-agent process with its own run root (<zoo>/runs/<type>/), so a
// model whose analysis throws, crashes or hangs becomes a row with the error instead of ending the
// command, and the runs can be resumed, inspected or repeated one by one (or on other machines).
// Without --verify a run stops at its profile checkpoint (Understand only: nothing is applied);
// with --verify it is `autopatch <type> --yes`, Verify included.
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <optional>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <iostream>
#include <mutex>
#include <regex>
#include <thread>

#include "cli/autopatch_all.h"
#include "cli/run_support.h"
#include "cli/tree.h"
#include "liger/error.h"
#include "liger/process.h"
#include "liger/util.h"
#include "workflows/autopatch/model_analysis.h"
#include "workflows/autopatch/zoo.h"

namespace liger::cli {

namespace {

namespace fs = std::filesystem;
using autopatch::zoo::Inventory;
using autopatch::zoo::Row;
using autopatch::zoo::ZooModel;

std::string read_or_empty(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) ? util::read_file(p) : std::string();
}

std::string last_line(const std::string& text) {
  std::string t = util::trim(text);
  const auto nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

// The transformers tree: --transformers, else LIGER_TRANSFORMERS_DIR or the one python imports
// (the lookup `autopatch <type>` uses), with a hint that names --transformers.
Inventory find_inventory(const AutopatchAllArgs& args) {
  if (!args.transformers.empty()) return autopatch::zoo::enumerate(args.transformers);
  autopatch::ResolveOptions ro;
  if (!args.python.empty()) ro.python = args.python;
  fs::path dir;
  try {
    dir = autopatch::find_transformers_dir(ro);
  } catch (const Error& e) {
    throw Error(e.kind(), std::string("autopatch --all: no transformers found: ") + e.what(),
                "pip install transformers (in the Python that " + ro.python +
                    " runs), or name a tree: --transformers /path/to/site-packages/transformers (or set "
                    "LIGER_TRANSFORMERS_DIR)");
  }
  std::error_code ec;
  if (!fs::is_directory(dir / "models", ec))
    throw Error(ErrorKind::Toolchain, "autopatch --all: the transformers at " + dir.string() + " has no models/ folder",
                "pass a transformers package with --transformers /path/to/site-packages/transformers");
  return autopatch::zoo::enumerate(dir);
}

// <run root>/autopatch-all-<UTC time>[-n]: the zoo's own run directory.
fs::path make_zoo_dir(GlobalOptions& options) {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &utc);
  const fs::path root = fs::absolute(run_root(options)).lexically_normal();
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec)
    throw Error(ErrorKind::Usage, "cannot create the run directory root " + root.string() + ": " + ec.message(),
                "point --run-dir at a directory you can write to");
  for (int n = 0;; ++n) {
    fs::path dir = root / ("autopatch-all-" + std::string(stamp) + (n ? "-" + std::to_string(n) : ""));
    if (fs::create_directory(dir, ec)) return dir;
    if (ec) throw Error(ErrorKind::Io, "cannot create " + dir.string() + ": " + ec.message());
  }
}

struct Job {
  fs::path self, zoo, tree, package_dir;
  const GlobalOptions* options = nullptr;
  const AutopatchAllArgs* args = nullptr;
};

std::string verdict_of(const fs::path& run_dir) {
  static const std::regex verdict(R"(verdict: \*\*([^*]+)\*\*)");
  std::smatch m;
  const std::string md = read_or_empty(run_dir / "autopatch" / "verify.md");
  return std::regex_search(md, m, verdict) ? m[1].str() : "";
}

// The run a model's own run root holds ("" when the run was never created).
fs::path find_run_dir(const fs::path& root) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec))
    if (fs::is_regular_file(e.path() / "state.json", ec)) return e.path();
  return {};
}

// One liger-agent process; its stdout (one JSON document) goes to `out_file`, so the run's log
// lines on stderr cannot mix into it.
toolchain::ProcessResult launch(const Job& job, const std::vector<std::string>& cmd, const fs::path& out_file,
                                const std::string& cuda_device, const std::string& label) {
  toolchain::ProcessOptions po;
  po.argv = {"/bin/sh", "-c", "out=$1; shift; exec \"$@\" >\"$out\"", "sh", out_file.string()};
  po.argv.insert(po.argv.end(), cmd.begin(), cmd.end());
  po.env["LIGER_TRANSFORMERS_DIR"] = job.package_dir.string();
  if (!cuda_device.empty()) po.env["CUDA_VISIBLE_DEVICES"] = cuda_device;
  // Understand reads a few files; Verify builds and trains for minutes per attempt.
  po.timeout = job.args->verify ? std::chrono::seconds(4 * 3600) : std::chrono::seconds(600);
  po.progress_label = label;
  return toolchain::run_process(po);
}

// "<module>_autopatch" when the checkout holds a hand-written integration named after the model
// type (no "# autopatch-profile:" header), nullopt otherwise.
std::optional<std::string> hand_written_sibling(const fs::path& tree, const std::string& type) {
  std::string module = type;
  for (char& c : module)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  const fs::path file = tree / "kernels/python/liger_kernels/transformers" / (module + ".py");
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return std::nullopt;
  const std::string text = util::read_file(file);
  if (text.find("# autopatch-profile:") != std::string::npos) return std::nullopt;
  return module + "_autopatch";
}

// One model in its own run root (<zoo>/runs/<type>/).
Row run_model(const Job& job, const ZooModel& model, const std::string& cuda_device) {
  Row row;
  row.model = model.type;
  row.heads = model.heads;
  const fs::path logs = job.zoo / "logs";
  const fs::path out_file = logs / (model.type + ".json");
  const fs::path log_file = logs / (model.type + ".log");
  const fs::path root = job.zoo / "runs" / model.type;
  row.log = log_file.string();
  std::vector<std::string> globals = {job.self.string(), "--json", "-q", "--run-dir", root.string()};
  if (!job.options->config_file.empty()) globals.insert(globals.end(), {"--config", job.options->config_file});
  if (!job.options->llm.empty()) globals.insert(globals.end(), {"--llm", job.options->llm});
  if (job.args->verify) globals.push_back("--yes");
  std::vector<std::string> cmd = globals;
  cmd.insert(cmd.end(), {"autopatch", model.type, "--tree", job.tree.string()});
  if (!job.args->python.empty()) cmd.insert(cmd.end(), {"--python", job.args->python});
  if (!job.args->kernels.empty()) cmd.insert(cmd.end(), {"--kernels", job.args->kernels});
  // A hand-written integration of the same name is the maintainers' code: a single run refuses to
  // touch it, and the zoo must still analyse the model, so its run generates beside it.
  if (const auto module = hand_written_sibling(job.tree, model.type)) cmd.insert(cmd.end(), {"--module", *module});

  toolchain::ProcessResult r;
  std::string log;
  nlohmann::json doc;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::hours(24);
  for (bool first = true;; first = false) {
    try {
      r = launch(job, cmd, out_file, cuda_device, "autopatch " + model.type);
    } catch (const std::exception& e) {
      row.error = std::string("could not start the run: ") + e.what();
      return row;
    }
    log += (first ? "" : "\n--- resumed ---\n") + r.output;
    util::write_file_atomic(log_file, log);
    if (r.timed_out || r.interrupted || r.signal != 0) {
      row.error = r.timed_out ? "the run timed out"
                  : r.interrupted ? std::string("interrupted")
                                  : "the run crashed (signal " + std::to_string(r.signal) + ")";
      if (!r.output.empty()) row.error += ": " + last_line(r.output);
      return row;
    }
    try {
      doc = nlohmann::json::parse(read_or_empty(out_file));
    } catch (const std::exception&) {
      row.error = "the run printed no result (exit " + std::to_string(r.exit_code) + ")" +
                  (r.output.empty() ? std::string() : ": " + last_line(r.output));
      return row;
    }
    // With --verify every run applies into the same checkout: the registry and docs/python.md are
    // shared, so a run whose apply finds another run's lock waits for it and resumes (Understand
    // still runs in parallel; Act and Verify take turns).
    const std::string message = doc.contains("error") ? doc["error"].value("message", std::string()) : "";
    const fs::path parked = find_run_dir(root);
    if (!job.args->verify || message.find("holds the apply lock") == std::string::npos || parked.empty() ||
        std::chrono::steady_clock::now() > deadline || signals::interrupted())
      break;
    for (int i = 0; i < 20 && !signals::interrupted(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    cmd = globals;
    cmd.insert(cmd.end(), {"resume", parked.filename().string()});
  }

  const std::string error = doc.contains("error") ? doc["error"].value("message", std::string("failed")) : "";
  fs::path run_dir = doc.value("run_dir", std::string());
  if (run_dir.empty()) run_dir = find_run_dir(root);
  row.run_dir = run_dir.string();
  YAML::Node profile;
  std::error_code ec;
  if (!run_dir.empty() && fs::is_regular_file(run_dir / "profile.yaml", ec)) {
    try {
      profile = YAML::LoadFile((run_dir / "profile.yaml").string());
    } catch (const std::exception& e) {
      row.error = "the run's profile.yaml is not readable: " + std::string(e.what());
      return row;
    }
  }
  if (!profile || !profile["decisions"]) {
    // No profile: the analysis itself failed (or the run never started).
    row.error = error.empty() ? "the run wrote no profile.yaml (" + doc.value("status", std::string("?")) + ")" : error;
    if (job.args->verify) row.verified = "not run (analysis failed)";
    return row;
  }
  Row analysed = autopatch::zoo::row_from_profile(model.type, profile);
  analysed.heads = model.heads;  // the file's classes, whatever the analysis made of them
  analysed.run_dir = row.run_dir;
  analysed.log = row.log;
  if (!job.args->verify) {
    if (!error.empty()) analysed.error = error;  // Understand-only runs stop at the profile: nothing else can fail
    return analysed;
  }
  const std::string status = doc.value("status", std::string());
  const std::string verdict = verdict_of(run_dir);
  if (!verdict.empty()) analysed.verified = verdict;
  else if (!error.empty()) analysed.verified = "failed before Verify: " + error;
  else if (status == "awaiting_approval")
    analysed.verified = "not run (stopped at the " + doc.value("pending_checkpoint", std::string("profile")) +
                        " checkpoint" + (analysed.undecided.empty() ? "" : ": undecided decisions") + ")";
  else analysed.verified = "not run (" + (status.empty() ? std::string("no verdict") : status) + ")";
  return analysed;
}

// [n/N] lines as models finish; while they run, a status line rewritten every second on a
// terminal, or a heartbeat every 30 s in a log (the convention of toolchain::run_process).
class ZooProgress {
 public:
  ZooProgress(std::size_t total, bool enabled)
      : total_(total), enabled_(enabled), terminal_(::isatty(STDERR_FILENO) == 1),
        started_(std::chrono::steady_clock::now()) {}

  void started(const std::string& model) {
    std::lock_guard lock(mutex_);
    running_.push_back(model);
  }
  void finished(const Row& row) {
    std::lock_guard lock(mutex_);
    running_.erase(std::remove(running_.begin(), running_.end(), row.model), running_.end());
    ++done_;
    if (!enabled_) return;
    std::string what;
    if (!row.error.empty()) what = "error: " + row.error.substr(0, 160);
    else
      what = std::to_string(row.decided) + "/" + std::to_string(row.total) + " decided, " +
             std::to_string(row.patched.size()) + " patched, " + std::to_string(row.declined.size()) + " declined" +
             (row.verified == "not run" ? "" : ", " + row.verified);
    std::cerr << (terminal_ ? "\r\033[K" : "") << "[" << done_ << "/" << total_ << "] " << row.model << ": " << what
              << std::endl;
  }
  void tick() {
    if (!enabled_) return;
    std::lock_guard lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    if (now < next_) return;
    const std::string line = status(now);
    if (terminal_) {
      std::cerr << "\r\033[K" << line << std::flush;
      next_ = now + std::chrono::seconds(1);
    } else {
      if (next_ != std::chrono::steady_clock::time_point{}) std::cerr << line << std::endl;
      next_ = now + std::chrono::seconds(30);
    }
  }
  void end() {
    if (enabled_ && terminal_) std::cerr << "\r\033[K" << std::flush;
  }

 private:
  std::string status(std::chrono::steady_clock::time_point now) const {
    std::string running;
    for (std::size_t i = 0; i < running_.size() && i < 4; ++i) running += (i ? ", " : "") + running_[i];
    if (running_.size() > 4) running += ", ...";
    return "  ... autopatch --all: " + toolchain::format_elapsed(std::chrono::duration<double>(now - started_).count()) +
           " [" + std::to_string(done_) + "/" + std::to_string(total_) + "]" +
           (running.empty() ? "" : ", running " + running);
  }

  std::mutex mutex_;
  std::size_t total_, done_ = 0;
  bool enabled_, terminal_;
  std::chrono::steady_clock::time_point started_, next_{};
  std::vector<std::string> running_;
};

}  // namespace

int run_autopatch_all(GlobalOptions& options, const AutopatchAllArgs& args) {
  if (args.jobs < 1 || args.jobs > 256)
    throw Error(ErrorKind::Usage, "--jobs " + std::to_string(args.jobs) + " is out of range",
                "pass a number of parallel runs from 1 to 256, e.g. --jobs 16");
  const fs::path tree = resolve_tree(args.tree, "autopatch");
  if (!args.out.empty()) {
    std::error_code ec;
    const fs::path out = fs::absolute(args.out);
    if (fs::exists(out, ec) && !fs::is_directory(out, ec))
      throw Error(ErrorKind::Usage, "--out " + args.out + " is a file, not a directory",
                  "name a directory for models.md and models.json (it is created when missing)");
  }
  const Inventory inventory = find_inventory(args);
  if (inventory.causal.empty())
    throw Error(ErrorKind::Usage, "no model of " + inventory.models_dir.string() + " defines a *ForCausalLM or *ForConditionalGeneration class",
                "pass the transformers package directory (or its models/ folder) with --transformers");

  const fs::path zoo = make_zoo_dir(options);
  fs::create_directories(zoo / "logs");
  fs::create_directories(zoo / "runs");
  Job job;
  job.self = fs::read_symlink("/proc/self/exe");
  job.zoo = zoo;
  job.tree = tree;
  job.package_dir = inventory.package_dir;
  job.options = &options;
  job.args = &args;

  // With --verify each run trains on a GPU: spread the job slots over the machine's GPUs unless
  // the user chose the devices.
  std::vector<std::string> devices;
  if (args.verify && !std::getenv("CUDA_VISIBLE_DEVICES")) {
    const auto gpu = toolchain::detect_gpu();
    if (gpu.gpus.size() > 1)
      for (std::size_t i = 0; i < gpu.gpus.size(); ++i) devices.push_back(std::to_string(i));
  }

  const auto& models = inventory.causal;
  std::vector<Row> rows(models.size());
  const bool show = !options.quiet;
  ZooProgress progress(models.size(), show);
  if (show)
    std::cerr << "autopatch --all: " << models.size() << " models of " << inventory.models_dir.string() << ", "
              << args.jobs << " at a time" << (args.verify ? ", with Verify" : ", Understand only") << "; runs in "
              << zoo.string() << std::endl;
  std::atomic<std::size_t> next{0};
  std::atomic<int> running{0};
  std::mutex done_mutex;
  std::condition_variable done_cv;
  const int workers = std::min<int>(args.jobs, static_cast<int>(models.size()));
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    ++running;
    threads.emplace_back([&, w] {
      const std::string device = devices.empty() ? "" : devices[static_cast<std::size_t>(w) % devices.size()];
      for (std::size_t i; !signals::interrupted() && (i = next++) < models.size();) {
        progress.started(models[i].type);
        try {
          rows[i] = run_model(job, models[i], device);
        } catch (const std::exception& e) {
          rows[i].model = models[i].type;
          rows[i].error = e.what();
        }
        progress.finished(rows[i]);
      }
      {
        std::lock_guard lock(done_mutex);
        --running;
      }
      done_cv.notify_all();
    });
  }
  {
    std::unique_lock lock(done_mutex);
    while (running > 0) {
      done_cv.wait_for(lock, std::chrono::milliseconds(200));
      lock.unlock();
      progress.tick();
      lock.lock();
    }
  }
  for (auto& t : threads) t.join();
  progress.end();
  if (signals::interrupted())
    throw Error(ErrorKind::Interrupted, "autopatch --all interrupted; no table was written",
                "the finished runs are in " + (zoo / "runs").string() + "; run the command again for the table");

  autopatch::zoo::TableMeta meta;
  meta.date = util::now_iso8601();
  meta.transformers_version = inventory.transformers_version;
  meta.transformers_dir = inventory.package_dir.string();
  meta.agent_version = LIGER_AGENT_VERSION;
  meta.agent_commit = git_commit();
  meta.verify = args.verify;
  const fs::path out = args.out.empty() ? zoo : fs::absolute(args.out).lexically_normal();
  fs::create_directories(out);
  const fs::path md = out / "models.md", js = out / "models.json";
  // Each file whole or not at all: written beside, then renamed.
  util::write_file_atomic(md, autopatch::zoo::render_markdown(rows, inventory, meta));
  util::write_file_atomic(js, autopatch::zoo::render_json(rows, inventory, meta).dump(2) + "\n");
  const std::string summary = autopatch::zoo::summary_line(rows, inventory, args.verify);
  if (options.json) {
    print_json({{"ok", true},
                {"models_md", md.string()},
                {"models_json", js.string()},
                {"runs", (zoo / "runs").string()},
                {"summary", summary}});
  } else {
    std::cout << summary << "\ncoverage table: " << md.string() << "\n                " << js.string()
              << "\nruns: " << (zoo / "runs").string() << std::endl;
  }
  return 0;
}

}  // namespace liger::cli
