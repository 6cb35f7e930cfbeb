#include "queue.hpp"

#include <c10/util/Exception.h>

namespace nlccl_torch {

std::string nlcclFailure(nlcclComm_t comm, const char* call, nlcclResult_t r) {
  std::string msg = std::string(call) + " failed: " + nlcclGetErrorString(r);
  const char* last = nlcclGetLastError(comm);
  if (last != nullptr && *last != '\0') msg += std::string(": ") + last;
  return msg;
}

Queue::Queue(nlcclComm_t comm, int rank) : comm_(comm), rank_(rank) {
  nlcclResult_t r = nlcclStreamCreate(&stream_);
  if (r != nlcclSuccess) {
    nlcclCommDestroy(comm_);
    TORCH_CHECK(false, "nlccl_torch: ", nlcclFailure(nullptr, "nlcclStreamCreate", r));
  }
  thread_ = std::thread([this] { loop(); });
}

Queue::~Queue() { close(); }

void Queue::checkUsableLocked(const char* what) {
  TORCH_CHECK(!closed_ && !closing_, "nlccl_torch: ", what, ": the process group is shut down");
  TORCH_CHECK(!broken_, "nlccl_torch: ", what, ": the process group failed earlier (rank ", rank_,
              "): ", brokenMessage_);
}

void Queue::breakLocked(const std::string& message) {
  if (broken_) return;
  brokenMessage_ = message;
  broken_ = std::make_exception_ptr(
      std::runtime_error("nlccl_torch: rank " + std::to_string(rank_) + ": " + message));
}

void Queue::post(const c10::intrusive_ptr<WorkNlccl>& work, Launch launch, const char* what) {
  Failed failed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    checkUsableLocked(what);
    failed = flushLocked();
    if (failed.works.empty()) {
      nlcclResult_t r = launch(stream_);
      // Argument errors are found before anything is queued and leave the communicator usable.
      TORCH_CHECK(r == nlcclSuccess, "nlccl_torch: ", what, ": ", nlcclFailure(comm_, "nlccl", r));
      queued_.push_back(work);
      cv_.notify_one();
      return;
    }
  }
  failed.complete();
  std::lock_guard<std::mutex> lock(mu_);
  checkUsableLocked(what);  // raises: the group is broken
}

void Queue::postP2P(const c10::intrusive_ptr<WorkNlccl>& work, Launch launch, const char* what) {
  std::lock_guard<std::mutex> lock(mu_);
  checkUsableLocked(what);
  work->deferTo(weak_from_this());
  deferred_.push_back({work, std::move(launch), what});
}

void Queue::flush() {
  Failed failed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    failed = flushLocked();
  }
  failed.complete();
}

void Queue::Failed::complete() {
  for (auto& w : works) w->complete(error);  // may run future callbacks: called without mu_
  works.clear();
}

Queue::Failed Queue::flushLocked() {
  Failed failed;
  if (deferred_.empty()) return failed;
  std::vector<Deferred> batch = std::move(deferred_);
  deferred_.clear();
  nlcclResult_t r = broken_ ? nlcclInvalidUsage : nlcclGroupStart();
  std::string failure;
  for (size_t i = 0; i < batch.size() && r == nlcclSuccess; ++i) {
    r = batch[i].launch(stream_);
    if (r != nlcclSuccess)
      failure = std::string(batch[i].what) + ": " + nlcclFailure(comm_, "nlccl", r);
  }
  if (!broken_) {
    nlcclResult_t end = nlcclGroupEnd();  // closes the group even after a failed call
    if (r == nlcclSuccess && end != nlcclSuccess) {
      r = end;
      failure = nlcclFailure(comm_, "nlcclGroupEnd", end);
    }
  }
  for (Deferred& d : batch) d.work->issued();
  if (r == nlcclSuccess) {
    for (Deferred& d : batch) queued_.push_back(std::move(d.work));
    cv_.notify_one();
    return failed;
  }
  // Part of a group may have been issued: the ranks no longer agree on what comes next.
  breakLocked(failure);
  failed.error = broken_;
  for (Deferred& d : batch) failed.works.push_back(std::move(d.work));
  return failed;
}

void Queue::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return closing_ || !queued_.empty(); });
    if (queued_.empty()) return;  // closing, and everything completed
    const size_t n = queued_.size();
    lock.unlock();
    nlcclResult_t r = nlcclStreamSynchronize(stream_);
    std::string failure;
    if (r != nlcclSuccess) {
      nlcclResult_t async = nlcclSuccess;
      if (nlcclCommGetAsyncError(comm_, &async) == nlcclSuccess && async != nlcclSuccess) r = async;
      failure = nlcclFailure(comm_, "an operation", r);
    }
    lock.lock();
    if (r != nlcclSuccess) breakLocked(failure);
    std::exception_ptr error = broken_;  // once broken, nothing after it counts as done
    std::vector<c10::intrusive_ptr<WorkNlccl>> done(queued_.begin(), queued_.begin() + n);
    queued_.erase(queued_.begin(), queued_.begin() + n);
    lock.unlock();
    for (auto& w : done) callbacks_.post([w, error] { w->complete(error); });
    done.clear();
    lock.lock();
  }
}

void Queue::shutdown(std::shared_ptr<Queue> queue) {
  if (!queue) return;
  // The last reference to a process group may go in a future callback, on a thread the queue
  // owns and waits for: another thread then closes the queue once the callback returned.
  if (queue->thread_.get_id() == std::this_thread::get_id() || queue->callbacks_.onPoolThread())
    std::thread([q = std::move(queue)] { q->close(); }).detach();
  else
    queue->close();
}

void Queue::close() {
  Failed unissued;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_ || closing_) return;
    unissued = flushLocked();
    closing_ = true;
  }
  unissued.complete();
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  bool failed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    failed = broken_ != nullptr;
    closed_ = true;
  }
  if (failed) nlcclCommAbort(comm_);  // fails what is still queued at once
  nlcclStreamDestroy(stream_);
  if (!failed) nlcclCommDestroy(comm_);
  stream_ = nullptr;
  comm_ = nullptr;
}

}  // namespace nlccl_torch
