#include "liger/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
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
  while (true) {
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
