// Traces of real runs (NLCCL_TRACE_FILE): Chrome trace-event JSON, one file per rank (the name
// may hold %h, %p and %r), that Perfetto and chrome://tracing load. Timestamps are the monotonic
// clock in microseconds, the same for every process of a host, so the files of one host line up.
// Off by default, and then costing one predictable branch on a cached flag per hook.
#pragma once

#include <atomic>
#include <string>

namespace nlccl::trace {

namespace detail {
/// 1 on, 0 off, -1 not read yet.
extern std::atomic<int> gState;
bool readState();
}  // namespace detail

/// True when NLCCL_TRACE_FILE is set. The common (off) case is one load and one branch.
inline bool enabled() {
  const int s = detail::gState.load(std::memory_order_relaxed);
  if (__builtin_expect(s == 0, 1)) return false;
  return s > 0 || detail::readState();
}

/// Microseconds on the monotonic clock (CLOCK_MONOTONIC: shared by the processes of a host).
double nowUs();

/// Process tracks: each rank's real timeline, and its modelled one (the neuronlink transport's
/// virtual time, in modelled microseconds from the start of the run).
enum class Track { Real, Modelled };

/// Records one complete event ("X") of `rank` on thread track `tid` (named `thread` the first
/// time), with `args` a JSON object's body (`"peer":1,"bytes":64`, or "").
void span(int rank, Track track, int tid, const char* thread, const char* name, const char* cat,
          double startUs, double durUs, const std::string& args);

/// Writes what is buffered to the files (also at exit and when a communicator is destroyed).
void flush();

/// Rereads NLCCL_TRACE_FILE (tests; nlcclResetDebugInit). Flushes and closes the files first.
void reset();

}  // namespace nlccl::trace
