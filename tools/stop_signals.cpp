// stop_signals.cpp — the stop-request flag (see stop_signals.h).
#include "tools/stop_signals.h"

#include <csignal>

namespace tapegrad::cli {

namespace {

volatile std::sig_atomic_t g_stop = 0;

extern "C" void on_stop_signal(int sig) {
  g_stop = sig;
  std::signal(sig, SIG_DFL);  // a second Ctrl-C ends the process now
}

}  // namespace

void install_stop_signals() {
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGXFSZ, SIG_IGN);
}

int stop_signal() { return g_stop; }

}  // namespace tapegrad::cli
