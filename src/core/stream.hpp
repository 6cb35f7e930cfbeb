// nlcclStream_t: an in-order queue of work run by its own progress thread (DESIGN.md 2.4). The
// first error a work item returns is kept and reported by synchronize() and query(). A fatal one
// (the communicator is broken: system, internal, remote, timeout) is sticky: every later
// synchronize() and query() reports it again, until every communicator that work used has been
// aborted or destroyed, and it is reported at least once even when that happened first (work
// failed by nlcclCommAbort). Other errors are reported once.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "util/status.hpp"

namespace nlccl::core {

class Stream {
 public:
  Stream();
  ~Stream();  ///< waits for queued work, then stops the thread
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  /// `owners` are the lives of the communicators the work uses (Communicator::life()).
  void enqueue(std::function<Status()> work, std::vector<std::shared_ptr<const std::atomic<bool>>> owners);
  /// Blocks until the queue is empty; returns the first error met (clearing it unless sticky).
  Status synchronize();
  /// Success when idle, InProgress while work is queued, or the first error met (not cleared).
  Status query();

 private:
  void loop();
  /// Spins up to `limit` until `ready()` holds (cheap checks on atomics), so that back-to-back
  /// calls do not each pay a futex sleep and wake-up; the caller then blocks as usual.
  template <typename F>
  static bool spinFor(F ready, std::chrono::microseconds limit);

  std::atomic<uint64_t> submitted_{0};  ///< items ever enqueued
  std::atomic<uint64_t> finished_{0};   ///< items ever finished
  std::mutex mu_;
  std::condition_variable cv_;      // work arrived or stop
  std::condition_variable idleCv_;  // queue drained
  struct Item {
    std::function<Status()> work;
    std::vector<std::shared_ptr<const std::atomic<bool>>> owners;
  };
  /// The error to report now (under mu_): clears a sticky one whose communicators are all gone.
  Status currentError();
  std::deque<Item> queue_;
  std::vector<std::shared_ptr<const std::atomic<bool>>> errorOwners_;  ///< of a sticky error
  bool errorReported_ = false;  ///< error_ was returned by synchronize() or query()
  size_t running_ = 0;
  bool stop_ = false;
  Status error_ = Status::Success;
  std::thread thread_;
};

}  // namespace nlccl::core
