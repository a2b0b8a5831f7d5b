#include "liger/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <regex>
#include <sstream>

#include "liger/error.h"
#include "liger/util.h"

namespace liger::toolchain {

namespace fs = std::filesystem;

std::optional<fs::path> find_executable(const std::string& name) {
  if (name.find('/') != std::string::npos) {
    if (::access(name.c_str(), X_OK) == 0) return fs::path(name);
    return std::nullopt;
  }
  const char* path_env = std::getenv("PATH");
  std::istringstream dirs(path_env ? path_env : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) continue;
    fs::path candidate = fs::path(dir) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return std::nullopt;
}

namespace {

struct ProgressSettings {
  std::atomic<bool> enabled{false};
  std::atomic<long long> heartbeat_ms{30000};
};
ProgressSettings& progress_settings() {
  static ProgressSettings settings;
  return settings;
}

// Shows one running child on stderr (see set_progress_reporting in the header).
class ProgressDisplay {
 public:
  ProgressDisplay(std::string label, std::chrono::steady_clock::time_point started)
      : label_(std::move(label)), started_(started), terminal_(::isatty(STDERR_FILENO) == 1) {
    const auto& s = progress_settings();
    enabled_ = s.enabled.load();
    heartbeat_ = std::chrono::milliseconds(s.heartbeat_ms.load());
    next_ = started_ + (terminal_ ? std::chrono::milliseconds(2000) : heartbeat_);
  }
  // Called from the wait loop (every 100 ms at most); `output` is everything the child wrote.
  void tick(const std::string& output) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (now < next_) return;
    const std::string line = status(output, now);
    if (terminal_) {
      std::cerr << "\r\033[K" << line << std::flush;
      next_ = now + std::chrono::seconds(1);
    } else {
      std::cerr << line << std::endl;
      next_ = now + heartbeat_;
    }
    shown_ = true;
  }
  void finish(const std::string& output, bool ok) {
    if (!enabled_ || !shown_) return;
    const std::string line = status(output, std::chrono::steady_clock::now()) + (ok ? ", done" : ", failed");
    std::cerr << (terminal_ ? "\r\033[K" : "") << line << std::endl;
  }

 private:
  std::string status(const std::string& output, std::chrono::steady_clock::time_point now) const {
    const double seconds = std::chrono::duration<double>(now - started_).count();
    // Only the tail: a build's output runs to megabytes and the count is near its end.
    const std::string count = progress_count(output.size() > 2048 ? output.substr(output.size() - 2048) : output);
    return "  ... " + label_ + ": " + format_elapsed(seconds) + (count.empty() ? "" : ", " + count);
  }

  std::string label_;
  std::chrono::steady_clock::time_point started_, next_;
  std::chrono::milliseconds heartbeat_{30000};
  bool terminal_ = false, enabled_ = false, shown_ = false;
};

}  // namespace

void set_progress_reporting(bool enabled, std::chrono::milliseconds heartbeat) {
  progress_settings().enabled = enabled;
  progress_settings().heartbeat_ms = std::max<long long>(1, heartbeat.count());
}

std::string progress_label(const std::vector<std::string>& argv) {
  if (argv.empty()) return "";
  const std::string exe = fs::path(argv.front()).filename().string();
  auto has = [&](const std::string& arg) { return std::find(argv.begin(), argv.end(), arg) != argv.end(); };
  if (exe == "cmake") {
    if (has("--build")) return "build";
    if (has("--install")) return "install";
    return "configure";
  }
  if (exe == "ninja" || exe == "make") return "build";
  if (exe == "ctest" || exe == "pytest" || exe.find("test") != std::string::npos) return "test";
  if (exe.rfind("python", 0) == 0 && argv.size() > 2 && argv[1] == "-m" && argv[2] == "pytest") return "test";
  if (exe.find("bench") != std::string::npos) return "benchmark";
  if (exe.rfind("python", 0) == 0 && argv.size() > 1) {
    const std::string script = fs::path(argv[1]).filename().string();
    if (script.find("bench") != std::string::npos || script.find("compare") != std::string::npos) return "benchmark";
  }
  return exe;
}

std::string progress_count(const std::string& output) {
  static const std::regex counter(R"(\[([0-9]+)/([0-9]+)\]|\b([0-9]+)/([0-9]+) +Test +#)");
  std::string last;
  for (std::sregex_iterator it(output.begin(), output.end(), counter), end; it != end; ++it) {
    const auto& m = *it;
    last = m[1].matched ? "[" + m[1].str() + "/" + m[2].str() + "]" : "[" + m[3].str() + "/" + m[4].str() + "]";
  }
  return last;
}

std::string format_elapsed(double seconds) {
  const long long total = static_cast<long long>(seconds < 0 ? 0 : seconds);
  char buffer[32];
  if (total < 60) std::snprintf(buffer, sizeof buffer, "%llds", total);
  else if (total < 3600) std::snprintf(buffer, sizeof buffer, "%lldm%02llds", total / 60, total % 60);
  else std::snprintf(buffer, sizeof buffer, "%lldh%02lldm", total / 3600, (total % 3600) / 60);
  return buffer;
}

ProcessResult run_process(const ProcessOptions& options) {
  if (options.argv.empty()) throw Error(ErrorKind::Internal, "run_process called without a command");
  auto executable = find_executable(options.argv[0]);
  if (!executable) {
    throw Error(ErrorKind::Io, "command '" + options.argv[0] + "' not found on PATH",
                "install it or put it on PATH");
  }

  int pipe_fds[2] = {-1, -1};
  if (!options.inherit_stdio && ::pipe2(pipe_fds, O_CLOEXEC) != 0)
    throw Error(ErrorKind::Io, std::string("cannot create a pipe: ") + std::strerror(errno));

  const auto started = std::chrono::steady_clock::now();
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) throw Error(ErrorKind::Io, std::string("cannot fork: ") + std::strerror(errno));
  if (pid == 0) {
    // An interactive tool must stay in the terminal's foreground group; anything else gets its
    // own group so a timeout can kill the tool together with its children.
    if (!options.inherit_stdio) {
      ::setpgid(0, 0);
      ::dup2(pipe_fds[1], STDOUT_FILENO);
      ::dup2(pipe_fds[1], STDERR_FILENO);
      int null_fd = ::open("/dev/null", O_RDONLY);
      if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
    }
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    // A SIGKILLed agent cannot stop its tools: the kernel does, so a resumed run never races a
    // build the dead process left running in the same build directory.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) _exit(127);  // the parent died before prctl took effect
    if (!options.cwd.empty() && ::chdir(options.cwd.c_str()) != 0) _exit(127);
    for (const auto& [key, value] : options.env) ::setenv(key.c_str(), value.c_str(), 1);
    std::vector<char*> argv;
    for (const auto& arg : options.argv) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    ::execv(executable->c_str(), argv.data());
    _exit(127);
  }

  ProcessResult result;
  if (!options.inherit_stdio) ::close(pipe_fds[1]);
  const auto deadline = started + options.timeout;
  bool stopping = false;
  std::chrono::steady_clock::time_point kill_at;
  auto stop = [&] {
    if (stopping) return;
    stopping = true;
    ::kill(options.inherit_stdio ? pid : -pid, SIGTERM);
    kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  };

  bool reading = !options.inherit_stdio;
  int status = 0;
  ProgressDisplay progress(options.progress_label.empty() ? progress_label(options.argv) : options.progress_label,
                           started);
  while (true) {
    if (!options.inherit_stdio) progress.tick(result.output);
    if (reading) {
      pollfd pfd{pipe_fds[0], POLLIN, 0};
      int ready = ::poll(&pfd, 1, 100);
      if (ready > 0) {
        char buffer[4096];
        ssize_t n = ::read(pipe_fds[0], buffer, sizeof buffer);
        if (n > 0) {
          result.output.append(buffer, static_cast<std::size_t>(n));
          continue;
        }
        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) reading = false;
      }
    } else {
      pid_t done = ::waitpid(pid, &status, WNOHANG);
      if (done == pid) break;
      ::usleep(50 * 1000);
    }
    const auto now = std::chrono::steady_clock::now();
    if (options.timeout.count() > 0 && now > deadline && !stopping) {
      result.timed_out = true;
      stop();
    }
    if (signals::interrupted() && !stopping && !options.inherit_stdio) {
      result.interrupted = true;
      stop();
    }
    if (stopping && now > kill_at) ::kill(options.inherit_stdio ? pid : -pid, SIGKILL);
  }
  if (!options.inherit_stdio) ::close(pipe_fds[0]);

  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  progress.finish(result.output, result.ok());
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

GpuInfo detect_gpu() {
  GpuInfo info;
  auto quick = [](std::vector<std::string> argv) {
    ProcessOptions options;
    options.argv = std::move(argv);
    options.timeout = std::chrono::seconds(10);
    return run_process(options);
  };
  std::optional<fs::path> nvcc = find_executable("nvcc");
  if (!nvcc && ::access("/usr/local/cuda/bin/nvcc", X_OK) == 0) nvcc = fs::path("/usr/local/cuda/bin/nvcc");
  if (nvcc) {
    info.nvcc_found = true;
    auto result = quick({nvcc->string(), "--version"});
    std::smatch match;
    if (std::regex_search(result.output, match, std::regex(R"(release ([0-9]+\.[0-9]+))")))
      info.nvcc_version = match[1];
  }
  if (find_executable("nvidia-smi")) {
    auto result = quick({"nvidia-smi", "-L"});
    if (result.ok()) {
      std::istringstream lines(result.output);
      for (std::string line; std::getline(lines, line);)
        if (line.rfind("GPU ", 0) == 0) info.gpus.push_back(util::trim(line));
      info.gpu_found = !info.gpus.empty();
    }
  }
  return info;
}

}  // namespace liger::toolchain
