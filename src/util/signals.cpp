#include <csignal>

#include "liger/error.h"
#include "liger/util.h"

namespace liger::signals {

namespace {
volatile std::sig_atomic_t g_interrupted = 0;

extern "C" void on_terminate_signal(int) { g_interrupted = 1; }
}  // namespace

void install_handlers() {
  struct sigaction action {};
  action.sa_handler = on_terminate_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;  // no SA_RESTART: a prompt blocked in read() must wake up
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

bool interrupted() { return g_interrupted != 0; }

void throw_if_interrupted() {
  if (interrupted()) {
    throw Error(ErrorKind::Interrupted, "interrupted by a signal",
                "the run's state is saved; continue it with `liger-agent resume <run>`");
  }
}

void reset_for_testing() { g_interrupted = 0; }
void simulate_interrupt_for_testing() { g_interrupted = 1; }

}  // namespace liger::signals
