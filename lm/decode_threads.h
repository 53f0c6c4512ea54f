// decode_threads.h — how many CPU threads `generate` and `chat` decode with when --threads is not given.
//
// Batch-1 decoding does a matrix-vector product per weight matrix per token: on a small model each is too small to
// split (the threads' fork/join costs more than it saves), and on a busy machine a thread that has to wait for a
// core stalls every other one at the next barrier (issue 38 saw all-cores decoding fall to 9–32 tok/s where one
// thread gave 104–141). So the count grows with the model — one thread per kParametersPerThread weights, at least
// one — and is capped by the cores not already busy (the cores OpenMP may use less the 1-minute load average,
// rounded). The measurements it rests on: docs/inference.md#threads-for-generate-and-chat (bench/decode_threads.py).
//   set_num_threads(lm::decode_threads_here(model.config.parameter_count()));
#pragma once
#include <cstdint>
#include <optional>

namespace tapegrad::lm {

// Weights per decoding thread: below twice this, one thread.
inline constexpr double kParametersPerThread = 8e6;

// The rule, on its own: threads for a model of `parameters` weights on `cores` cores of which `load` are busy
// (the 1-minute load average); always in [1, cores].
int decode_threads(double parameters, int cores, double load);

// /proc/loadavg's 1-minute figure; nullopt where it cannot be read.
std::optional<double> load_average();

// The rule for this process: the cores OpenMP may use (OMP_NUM_THREADS when set, else every core) and the load
// average now (none busy where it cannot be read). With OMP_NUM_THREADS set, that count as it is: the user chose.
int decode_threads_here(double parameters);

}  // namespace tapegrad::lm
