// One error type for the whole agent. Code throws liger::Error; main() has the single catch
// that prints it and turns it into the process exit code. The kind decides the exit code and
// whether the failure is recoverable (a retry or another attempt may help) or fatal.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

namespace liger {

// Process exit codes. Stable: CI jobs and scripts key on them (documented in README.md).
enum class ExitCode : int {
  Success = 0,
  Failure = 1,             // anything that went wrong and is not one of the below
  Usage = 2,               // bad flags, bad arguments, bad profile/config given by the user
  AwaitingApproval = 3,    // stopped at a checkpoint without a TTY and without --yes
  VerificationFailed = 4,  // Verify ran and found hard failures (after the attempt limit)
  Rejected = 5,            // a maintainer rejected the run at a checkpoint
  Interrupted = 130,       // SIGINT/SIGTERM; the run can be resumed
};

enum class ErrorKind {
  Usage,               // the user can fix the input: flags, profile, config
  Config,              // configuration file or environment is invalid
  Io,                  // filesystem, process spawn
  Toolchain,           // compiler/cmake/GPU missing or failing
  Llm,                 // provider transport or answer problems
  Network,             // HTTP transport failures (recoverable by retry)
  Verification,        // Verify found hard failures
  AwaitingApproval,    // not an error: the run is parked at a checkpoint
  Rejected,            // the run was rejected
  Interrupted,         // signal received
  Internal,            // a bug in liger-agent
  Failure,             // an operation or run failed for a reason the message explains (exit 1)
};

class Error : public std::runtime_error {
 public:
  // `hint` tells the user how to fix it; it is printed on its own line after the message.
  Error(ErrorKind kind, std::string message, std::string hint = {}, bool recoverable = false)
      : std::runtime_error(std::move(message)),
        kind_(kind),
        hint_(std::move(hint)),
        recoverable_(recoverable) {}

  ErrorKind kind() const noexcept { return kind_; }
  const std::string& hint() const noexcept { return hint_; }
  bool recoverable() const noexcept { return recoverable_; }

  ExitCode exit_code() const noexcept {
    switch (kind_) {
      case ErrorKind::Usage:
      case ErrorKind::Config: return ExitCode::Usage;
      case ErrorKind::AwaitingApproval: return ExitCode::AwaitingApproval;
      case ErrorKind::Verification: return ExitCode::VerificationFailed;
      case ErrorKind::Rejected: return ExitCode::Rejected;
      case ErrorKind::Interrupted: return ExitCode::Interrupted;
      default: return ExitCode::Failure;
    }
  }

 private:
  ErrorKind kind_;
  std::string hint_;
  bool recoverable_;
};

inline const char* to_string(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::Usage: return "usage";
    case ErrorKind::Config: return "config";
    case ErrorKind::Io: return "io";
    case ErrorKind::Toolchain: return "toolchain";
    case ErrorKind::Llm: return "llm";
    case ErrorKind::Network: return "network";
    case ErrorKind::Verification: return "verification";
    case ErrorKind::AwaitingApproval: return "awaiting-approval";
    case ErrorKind::Rejected: return "rejected";
    case ErrorKind::Interrupted: return "interrupted";
    case ErrorKind::Internal: return "internal";
    case ErrorKind::Failure: return "failure";
  }
  return "unknown";
}

}  // namespace liger
