// The process group's way onto nlccl: one communicator and one nlccl stream. Callers queue
// operations on the stream in call order (so every rank issues them in the same order), and a
// completion thread synchronizes the stream and completes their Work objects.
//
// Completion: nlcclStreamSynchronize waits until the stream is idle, so the thread notes how many
// operations were queued, synchronizes, and completes those, on the Callbacks pool (an
// operation may therefore be reported complete a little after it finished, never before). The
// first error fails every operation not yet completed and every later call: nlccl's asynchronous
// errors (a dead peer, a timeout) are fatal for the communicator.
//
// Sends and receives: each one waits in the queue, and the run of them is issued as one
// nlcclGroupStart/End group when something needs it: any other operation (queued after them),
// a wait / isCompleted / getFuture on one of them, or closing. So a send posted before the
// matching receive, a batch_isend_irecv ring or a pairwise exchange never deadlocks.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "callbacks.hpp"
#include "nlccl.h"
#include "work.hpp"

namespace nlccl_torch {

class Queue : public std::enable_shared_from_this<Queue> {
 public:
  /// The nlccl calls of one operation, issued on `stream`.
  using Launch = std::function<nlcclResult_t(nlcclStream_t stream)>;

  /// Takes ownership of `comm`; creates the stream and starts the completion thread.
  Queue(nlcclComm_t comm, int rank);
  ~Queue();

  /// Queues `launch` now (after any deferred sends and receives). Raises a RuntimeError naming
  /// `what` when nlccl rejects the call or when the group failed earlier.
  void post(const c10::intrusive_ptr<WorkNlccl>& work, Launch launch, const char* what);
  /// Defers a send or receive (see above).
  void postP2P(const c10::intrusive_ptr<WorkNlccl>& work, Launch launch, const char* what);
  /// Issues the deferred sends and receives as one group.
  void flush();
  /// Issues what is deferred, waits for every queued operation, then frees the stream and the
  /// communicator (aborting it when an operation failed, which returns promptly). Safe to call
  /// from any thread, the completion thread (a future callback) included.
  static void shutdown(std::shared_ptr<Queue> queue);

  nlcclComm_t comm() const { return comm_; }

 private:
  struct Deferred {
    c10::intrusive_ptr<WorkNlccl> work;
    Launch launch;
    const char* what;
  };

  void close();
  /// Works that failed to issue, completed (with `error`) once mu_ is released.
  struct Failed {
    std::vector<c10::intrusive_ptr<WorkNlccl>> works;
    std::exception_ptr error;
    void complete();
  };
  Failed flushLocked();
  void checkUsableLocked(const char* what);
  /// Records the first failure; later calls raise it.
  void breakLocked(const std::string& message);
  void loop();

  nlcclComm_t comm_;
  nlcclStream_t stream_ = nullptr;
  const int rank_;
  std::mutex mu_;  // held while issuing, so that calls reach the stream in call order
  std::condition_variable cv_;
  std::deque<c10::intrusive_ptr<WorkNlccl>> queued_;  // on the stream, not yet completed
  std::vector<Deferred> deferred_;
  std::string brokenMessage_;
  std::exception_ptr broken_;
  bool closing_ = false;
  bool closed_ = false;
  std::thread thread_;
  Callbacks callbacks_;  // destroyed first: its tasks may still flush this queue
};

/// "nlcclAllReduce failed: <nlccl's description>: <last error message>".
std::string nlcclFailure(nlcclComm_t comm, const char* call, nlcclResult_t r);

}  // namespace nlccl_torch
