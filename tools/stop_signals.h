// stop_signals.h — Ctrl-C / SIGTERM as a stop request: the first one sets a flag the training loop
// polls after each step (it then writes a checkpoint and the tool exits 130 / 143); a second one
// ends the process at once (the default action). SIGXFSZ (file size limit) is ignored, so a write
// past RLIMIT_FSIZE fails with EFBIG — an error the checkpoint writer reports — instead of killing
// the process mid-write.
#pragma once

namespace tapegrad::cli {

void install_stop_signals();
// 0 while no stop was requested, else the signal number (SIGINT = 2, SIGTERM = 15).
int stop_signal();

}  // namespace tapegrad::cli
