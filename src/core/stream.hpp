// nlcclStream_t: an in-order queue of work run by its own progress thread (DESIGN.md 2.4). The
// first error a work item returns is kept and reported by synchronize() and query().
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "util/status.hpp"

namespace nlccl::core {

class Stream {
 public:
  Stream();
  ~Stream();  ///< waits for queued work, then stops the thread
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  void enqueue(std::function<Status()> work);
  /// Blocks until the queue is empty; returns (and clears) the first error met.
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
  std::deque<std::function<Status()>> queue_;
  size_t running_ = 0;
  bool stop_ = false;
  Status error_ = Status::Success;
  std::thread thread_;
};

}  // namespace nlccl::core
