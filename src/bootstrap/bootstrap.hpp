// A rank's view of the bootstrap: join the ranks named by a UniqueId, then all-gather, barrier and
// broadcast small blobs among them. The topology is a star through the root server (each round is
// one message up to the root and one down), which is simple and fast enough for setup traffic; every
// wait is bounded by the timeout and a dead peer or root turns into RemoteError on every rank.
//
// Thread safety: collectives on one Bootstrap are issued by one thread at a time and in the same
// order on every rank (like NCCL's bootstrap); health(), failureWord() and the waker calls may be
// used from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/link.hpp"
#include "bootstrap/root.hpp"
#include "bootstrap/wire.hpp"
#include "bootstrap/unique_id.hpp"
#include "util/futex.hpp"
#include "util/status.hpp"

namespace nlccl::bootstrap {

class Bootstrap {
 public:
  /// Joins the bootstrap behind `id` as `rank` of `nranks` and waits until every rank has joined.
  /// `timeout` <= 0 means NLCCL_TIMEOUT_MS or 300000 ms. On Timeout the message names the ranks
  /// that did not join ("bootstrap: timed out after 2000 ms waiting for rank 3 of 4 to join").
  static Status init(const UniqueId& id, int rank, int nranks, std::chrono::milliseconds timeout,
                     std::unique_ptr<Bootstrap>* out);

  /// Gathers `bytes` from every rank into `all` (nranks * bytes, in rank order). `bytes` must be
  /// equal on every rank (InvalidUsage naming the ranks otherwise); `mine` may alias its own slot.
  Status allGather(const void* mine, size_t bytes, void* all);
  /// Returns once every rank has entered the barrier.
  Status barrier();
  /// Copies `bytes` of `buf` on rank `root` into `buf` on every rank.
  Status broadcast(void* buf, size_t bytes, int root);

  /// Forms a sub-bootstrap of the ranks that pass the same `color` (ordered by key, then rank), over
  /// the same connections (its rounds carry their own group id and sequence numbers). Collective
  /// over this bootstrap. color < 0: *out is null (the rank takes part in no sub-bootstrap).
  Status split(int color, int key, std::unique_ptr<Bootstrap>* out);
  /// The sub-bootstrap of every rank not in `excluded` (ranks of this bootstrap, valid and
  /// distinct; the caller is not among them), in their order. No exchange with the others: each
  /// survivor computes the same group, so it works after a rank died, as long as the root lives.
  Status shrink(const std::vector<int>& excluded, std::unique_ptr<Bootstrap>* out);

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  /// World rank of rank `r` of this (possibly split) bootstrap.
  int worldRank(int r) const { return worldRanks_[r]; }
  /// Host identity (hostname + boot id) that rank `r` reported when it joined.
  const std::string& peerHostIdentity(int r) const { return hosts_[r]; }
  /// True when rank `r` runs on this host (same hostname and boot id).
  bool sameHost(int r) const { return hosts_[r] == hosts_[rank_]; }
  std::chrono::milliseconds timeout() const { return std::chrono::milliseconds(timeoutMs_); }
  /// Rounds run so far (advances identically on every rank).
  uint32_t sequence() const { return seq_; }

  /// Success while every rank and the root are alive; RemoteError ("rank 3 disconnected",
  /// "bootstrap: lost the connection to the root ...") once one has gone. Sticky; cheap.
  Status health() const;
  /// A word that is 0 while healthy and nonzero after a failure: transports poll it in their wait
  /// loops (or futexWait on it, private) to stop waiting for a dead peer.
  const std::atomic<uint32_t>* failureWord() const { return link_->failureWord(); }
  /// Registers a Notifier that is notify()'d when a failure is detected, so a transport blocked in
  /// Notifier::wait wakes up and checks health(). Remove it before the Notifier is destroyed.
  void addWaker(Notifier* n) { link_->addWaker(n); }
  void removeWaker(Notifier* n) { link_->removeWaker(n); }
  /// Called once from the bootstrap's reader thread on failure. It must not destroy the Bootstrap.
  void setFailureCallback(Link::FailureCallback cb) { link_->setFailureCallback(std::move(cb)); }

  /// Drops the connection at once without goodbye: the root tells the other ranks this one is gone.
  /// Affects every sub-bootstrap sharing the connection. Later calls return InvalidUsage.
  void abort();

  /// Says goodbye to the root (so the others do not see a failure) and closes; bounded, never hangs.
  ~Bootstrap();

  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

 private:
  Bootstrap() = default;
  /// One round: contributes `data` as Gather(op, root, bytes) and returns every rank's piece.
  Status round(wire::Op op, int root, uint64_t bytes, const void* data, size_t dataBytes,
               const std::string& what, std::vector<Link::Bytes>* pieces);

  /// Keeps a root that this process hosts alive for the others: the last bootstrap of the group
  /// in this process waits (up to the timeout), after saying goodbye, until every rank has left
  /// the root, so a rank 0 that finishes first does not pull the root from under the others.
  /// Declared before link_: destroyed after it, once the goodbye is sent.
  struct RootKeeper;
  std::shared_ptr<RootKeeper> keeper_;
  std::shared_ptr<Link> link_;
  uint32_t group_ = 0;
  uint32_t seq_ = 0;
  uint32_t splits_ = 0;
  uint32_t shrinks_ = 0;
  int rank_ = 0;
  int nranks_ = 0;
  int64_t timeoutMs_ = 0;
  bool aborted_ = false;
  std::vector<int> worldRanks_;
  std::vector<std::string> hosts_;
};

}  // namespace nlccl::bootstrap
