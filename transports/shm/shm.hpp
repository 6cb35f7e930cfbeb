// Shared-memory transport: ranks are processes on one host (DESIGN.md section 5).
//
// Every rank owns one shared-memory segment (nameless: see shm_segment.hpp) holding its doorbell
// and one FIFO of fixed-size slots per sending peer. A message is cut into slot-sized fragments, each
// with a (tag, total bytes, offset) header; the sender copies fragments in, the receiver copies or
// reduces them straight out of the slot into the destination. Messages to one peer enter its FIFO
// in posting order.
//
// Unexpected messages: a message at a FIFO's head with no posted receive stays in its slots (the
// sender waits for space: back-pressure, no extra copy) as long as no other receive from that peer
// is posted. Once one is, the receive's data may be queued behind it, so fragments without a
// receive are copied into a per-peer unexpected queue until the FIFO reaches a matching one (a
// lone fragment at the head stays put: the sender still has slots-1 free). So, whatever order the
// engine posts in, a posted receive always gets its data, and the unexpected queue holds at most
// what the sender has sent ahead of the receives that are waiting for later data.
//
// LL (small messages): a send of at most NLCCL_SHM_LL_BYTES goes instead as one record in the
// pair's LL FIFO (shm_segment.hpp: every cache line carries 56 bytes and its own flag, the first
// one the message's head), so the receiver, polling the line at its FIFO's tail, gets a small
// message in one line transfer per line; nothing else is published and no doorbell rung unless
// the receiver sleeps (wakeIfSleeping). The receiver frees lines by advancing `llTail`, which the sender reads only
// when the FIFO looks full; it rings the sender only if the sender said it waits for space.
// Order: each pair numbers its messages (`seq`, given as they leave the send queue) across both
// FIFOs, and the receiver takes them in that order, so same-tag messages still match in posting
// order whichever FIFO carried them.
//
// Single copy: a send of at least NLCCL_SHM_SINGLE_COPY_BYTES whose buffer lies wholly inside
// one nlcclMemAlloc allocation (shm_memory.hpp) puts a descriptor in one slot instead of the data.
// The receiver maps the sender's allocation (once per (peer, allocation), through
// /proc/<pid>/fd), copies or reduces straight from it into the destination, then bumps the FIFO's
// `acked` counter; the sender's request completes only then, since its buffer is read until
// that moment. Acks come in FIFO order (a descriptor leaves the FIFO only once its data has been
// read), so one counter per FIFO is enough. A descriptor without a receive is moved to the
// unexpected queue (its data copied out, then acked) when a receive waits behind it, or when it
// has waited at the head for kDirectGrace: a sender may be waiting for that send to complete
// before it sends what the receiver waits for, which eager sends never made it do.
//
// Split exchanges: the two ranks of a recursive-doubling round each send their vector and reduce
// the other's into their output. When both ranks' sends and outputs lie in nlcclMemAlloc memory
// (and the message is at least NLCCL_SHM_SPLIT_BYTES), each rank instead reduces half of the
// message straight from the peer's send and stores it both in its own output and, through a
// writable mapping, in the peer's: half the reduction each, and no pass of the peer's half through
// the cache. The descriptors say so (kDirectSplit); a rank splits only when both its own send and
// the peer's were offered, so the two decide alike. A request of the pair completes only once its
// half is in place: the receive when this rank's half is, the send on the peer's ack.
//
// Waiting: waitActivity spins briefly, yields, then sleeps on the segment's futex word; peers ring
// it when they write a slot for us or free a slot we wrote. Failure: progress() checks the peers'
// processes every ~50 ms (kill(pid, 0), zombie state and start time in /proc) and the health
// callback. A peer that died or aborted is an error (RemoteError on every pending operation) as
// soon as anything still needs it; one that exited after its last send is not (its data is here).
//
// Tuning (read at create, per rank; each segment records its own geometry):
//   NLCCL_SHM_SLOT_BYTES  payload bytes per slot (default 512K; K/M suffixes; rounded to 4 KiB)
//   NLCCL_SHM_SLOTS       slots per FIFO (default 8, at least 2)
//   NLCCL_SHM_SINGLE_COPY_BYTES  smallest single-copy send (default 64K; 0 disables)
//   NLCCL_SHM_SINGLE_COPY_INPUT_BYTES  the same for a send the sender never writes during its
//                         collective (Request::readOnlySource: an out-of-place Input; default 16K)
//   NLCCL_SHM_SPLIT_BYTES smallest exchange pair (transport.hpp, Request::pairTarget) split
//                         between its two ranks (default 64K; 0 disables): both ranks' sends and
//                         targets single-copy, each reduces half and stores it in both targets
//   NLCCL_SHM_LL_BYTES    largest LL send (default 128; 0 disables; at most 64K)
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <cstring>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <unordered_map>

#include "util/ring_queue.hpp"
#include "util/shared_memory.hpp"
#include "transports/shm/shm_segment.hpp"
#include "transports/transport.hpp"

namespace nlccl::transport {

namespace shm {
/// Process-wide counters of single-copy messages (for tests and statistics).
struct SingleCopyCounters {
  std::atomic<uint64_t> sent{0};      ///< descriptors sent instead of data
  std::atomic<uint64_t> received{0};  ///< descriptors delivered straight into a receive
  std::atomic<uint64_t> bytes{0};     ///< bytes moved by those receives
  std::atomic<uint64_t> unexpected{0};  ///< descriptors copied out to the unexpected queue
  std::atomic<uint64_t> split{0};  ///< exchange pairs' messages split (this rank's halves done)
};
SingleCopyCounters& singleCopyCounters();

}  // namespace shm

class ShmTransport final : public Transport {
 public:

  /// Collective: every rank of the group calls it. Creates this rank's segment (nameless memory,
  /// so nothing can be left in /dev/shm), exchanges where the segments are through `allGather`,
  /// maps every peer's segment and waits (up to `timeout`) until every peer has mapped this
  /// rank's. `health` (may be empty) is polled from progress() every ~50 ms;
  /// a non-success result fails all operations with that status.
  static Status create(int rank, int nranks, const AllGatherFn& allGather,
                       std::chrono::milliseconds timeout, std::function<Status()> health,
                       std::unique_ptr<ShmTransport>* out);
  /// The same, serving only `peers` (ranks on this host; the relation must be symmetric: every
  /// rank of the group calls it, and rank q is in p's list exactly when p is in q's). Messages to
  /// and from other ranks are refused. Sends to itself always work.
  static Status create(int rank, int nranks, std::vector<int> peers, const AllGatherFn& allGather,
                       std::chrono::milliseconds timeout, std::function<Status()> health,
                       std::unique_ptr<ShmTransport>* out);
  ~ShmTransport() override;

  const char* name() const override { return "shm"; }
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  Status postSend(int peer, uint64_t tag, const void* buf, size_t bytes, Request* req) override;
  Status postRecv(int peer, uint64_t tag, void* buf, size_t bytes, const Reducer* reducer,
                  Request* req) override;
  bool exchanges() const override { return true; }
  Status exchange(int peer, uint64_t tag, const void* send, size_t sendBytes, bool sendReadOnly,
                  void* recv, size_t recvBytes, const Reducer* reducer,
                  std::chrono::milliseconds timeout) override;
  Status progress() override;
  uint32_t activityEpoch() override;
  void waitActivity(uint32_t seen, std::chrono::nanoseconds timeout) override;
  void abort(Status why) override;
  void wake(int rank) override;
  void releaseWakes() override;

  /// Times this rank's doorbell has been rung (its futex word; for tests).
  uint32_t doorbellRings() const { return own_.header()->epoch.load(std::memory_order_acquire); }
  /// Payload bytes per slot and slots per FIFO of this rank's incoming FIFOs.
  uint64_t slotBytes() const { return own_.slotBytes(); }
  uint32_t slots() const { return own_.slots(); }
  /// Smallest send that goes single-copy when its buffer is shareable (0: never).
  uint64_t singleCopyBytes() const { return singleCopyBytes_; }
  /// The same for a send whose Request::readOnlySource is set (at most singleCopyBytes()).
  uint64_t singleCopyInputBytes() const { return singleCopyInputBytes_; }

 private:
  struct SendOp {
    uint64_t tag;
    const char* buf;
    size_t bytes;
    size_t sent;
    bool started;  // a zero-byte message still takes one fragment
    Request* req;
    bool direct = false;  // single copy: `alloc` says where `buf` lies
    shmem::AllocationRef alloc;
    bool split = false;  // an exchange pair's send, offered for a split: `target` as `alloc`
    shmem::AllocationRef target;
  };
  struct InFlight {  // a direct send waiting for the receiver's ack
    uint64_t seq;    // 1-based count of direct sends to this peer
    Request* req;
  };
  struct Mapped {  // a peer's allocation, mapped for single-copy reads (and split writes)
    shmem::RemoteMapping map;
    uint64_t lastUse = 0;
    bool writable = false;
  };
  struct RecvOp {
    uint64_t tag;
    char* buf;
    size_t bytes;
    Reducer reducer;
    bool reduce;
    Request* req;
    bool split = false;  // an exchange pair's receive whose send was offered for a split
  };
  struct Unexpected {
    uint64_t tag;
    size_t total;
    size_t have;  // bytes received so far (fragments arrive in order)
    bool complete;
    std::unique_ptr<char[]> data;
  };
  enum class Target { None, Recv, Unexpected, Discard };
  enum class Gone { No, Died, Aborted };
  struct Peer {
    shm::Segment seg;  // the peer's segment: we write our fragments into its FIFO from us
    pid_t pid = 0;
    uint64_t startTime = 0;
    Gone gone = Gone::No;
    RingQueue<SendOp> sends;
    RingQueue<RecvOp> posted;
    RingQueue<Unexpected> unexpected;  // the in-progress one, if any, is the back
    Target cur = Target::None;          // where the message at our FIFO's head goes
    RecvOp curRecv{};
    uint64_t curTag = 0;
    size_t curTotal = 0;
    size_t curNext = 0;  // next expected fragment offset
    uint64_t tailSeen = 0;  // the tail of our FIFO in the peer's segment, as last read (pump)
    // Order across the two FIFOs (see "Order" above).
    uint32_t sendSeq = 0;  // the number of our next message to the peer
    uint32_t recvSeq = 0;  // the number of the next message from the peer we take
    // LL FIFO: sending side (in the peer's segment) and receiving side (in ours).
    uint64_t llHead = 0;      // lines we have written into the peer's LL FIFO
    uint64_t llTailSeen = 0;  // its llTail as last read
    uint64_t llTail = 0;      // lines of our LL FIFO from the peer we have consumed
    bool wakeHeld = false;    // an LL record to the peer waits for releaseWakes to wake it
    // Single copy, sending side.
    RingQueue<InFlight> inflight;
    uint64_t directPosted = 0;
    // Single copy, receiving side.
    std::unordered_map<uint64_t, Mapped> maps;
    uint64_t mapClock = 0;
    uint64_t stallIndex = ~uint64_t{0};  // FIFO index of a descriptor waiting at the head
    std::chrono::steady_clock::time_point stallSince;
    int stallSeen = 0;
  };

  ShmTransport(int rank, int nranks, std::chrono::milliseconds timeout,
               std::function<Status()> health);
  Status setup(const AllGatherFn& allGather);
  // postSend and postRecv with mu_ held (exchange posts both under one lock).
  Status sendLocked(int peer, uint64_t tag, const void* buf, size_t bytes, Request* req);
  Status recvLocked(int peer, uint64_t tag, void* buf, size_t bytes, const Reducer* reducer,
                    Request* req);
  Status drain(int src);  // consumes arrived fragments from `src`
  Status pump(int dst);   // writes queued fragments for `dst`
  /// Largest send to `p` that goes as an LL record: ours, and at most an eighth of its FIFO.
  uint64_t llMax(const Peer& p) const {
    return std::min<uint64_t>(llBytes_, (p.seg.llLines() / 8) * shm::LLLine::kData);
  }
  /// Writes `op` (at most llMax) as one LL record for `p`; false when the FIFO is full.
  bool pumpLL(Peer& p, const SendOp& op);
  /// Consumes LL records from `src` while they are next in order; *moved: it consumed any.
  Status drainLL(int src, bool* moved);
  /// *n = the lines of the whole record at line `t` of `src`'s LL FIFO, 0 when none is there
  /// yet; *h its head. InternalError for a corrupt one.
  Status llRecordAt(int src, uint64_t t, shm::LLHead* h, uint64_t* n) const;
  /// Takes the record at `t` (its lines `n`, head `h`): into `r` (completed), or with no
  /// receive into the unexpected queue; frees its lines (llFreed tells a waiting sender).
  void llConsume(int src, uint64_t t, uint64_t n, const shm::LLHead& h, const RecvOp* r);
  void llFreed(int src);
  /// A receive with nothing else pending from `src`: takes its message straight from the head
  /// of the LL FIFO when that is the one, next in order (no posting, no drain). False otherwise
  /// (*s: a corrupt record).
  bool takeLLHead(int src, const RecvOp& r, Status* s);
  Status drainSlots(int src);  // consumes slot fragments from `src` while they are next
  /// Whether `src`'s LL FIFO holds a whole record drainLL has not looked at (any thread).
  bool llNew(int src) const;
  /// Over the peers: the line drainLL has looked up to, plus one while a whole record waits
  /// there. It only grows (drain looks past a record, of at least one line, only once it is
  /// whole), and grows whenever a record arrives where drain looks next.
  uint32_t llProgress() const;
  /// Whether a whole record waits at the head of `src`'s LL FIFO (its first and last lines are
  /// valid; the sender writes the first last). Any thread may ask.
  bool llReady(int src) const {
    return llWholeAt(src, own_.ring(src)->llTail.load(std::memory_order_relaxed));
  }
  /// Whether a whole record starts at line `t` of `src`'s LL FIFO (its first and last lines
  /// carry their flags).
  bool llWholeAt(int src, uint64_t t) const;
  void deliver(const RecvOp& r, size_t offset, const char* src, size_t bytes);
  /// Removes the first receive posted on `p` (messages from `src`) for a message (tag, total)
  /// into *out. Returns false when none is posted. A receive of another size is completed with
  /// InvalidUsage (logged) and *mismatch set.
  bool takePosted(Peer& p, int src, uint64_t tag, uint64_t total, RecvOp* out, bool* mismatch);
  // Consumes the direct message at the head of `src`'s FIFO (header `h`) if it can go now;
  // *consumed tells whether it did (acked). Errors are fatal for the transport.
  Status drainDirect(int src, const shm::SlotHeader& h, const char* payload, uint64_t tail,
                     uint64_t head, bool* consumed);
  /// `bytes` of `src`'s memory at `at`, mapped (writable when asked: a split's target).
  Status mapDirect(int src, const shm::AllocRange& at, uint64_t bytes, bool writable, char** data);
  /// The split of an exchange pair (shm_segment.hpp, kDirectSplit): this rank's half of the
  /// message of descriptor `d` (`bytes`), reduced into `r` and stored at the peer's target.
  Status splitDeliver(int src, const shm::DirectDescriptor& d, uint64_t bytes, const RecvOp& r);
  void reapAcks(int dst);  // completes direct sends the receiver has acked
  void matchSelf();
  Status checkPeers();      // health callback; marks dead peers
  Status checkGone(int p);  // RemoteError if a gone peer is still needed
  void failAll(Status why);
  bool serves(int peer) const {
    return peer == rank_ || std::binary_search(served_.begin(), served_.end(), peer);
  }

  int rank_;
  int nranks_;
  std::chrono::milliseconds timeout_;
  std::function<Status()> health_;
  uint64_t singleCopyBytes_ = 0;
  uint64_t singleCopyInputBytes_ = 0;
  uint64_t splitBytes_ = 0;  ///< smallest exchange pair split (0: never)
  uint64_t llBytes_ = 0;  ///< largest LL send (0: none)
  /// Per rank: the LL line index past the records drainLL has looked at (waits watch it).
  std::unique_ptr<std::atomic<uint64_t>[]> llLook_;
  std::unique_ptr<char[]> llStage_;  ///< an LL record's data, gathered (kLLMaxBytes)
  uint32_t yieldEvery_ = 64;  ///< waits yield every check when this host's ranks outnumber CPUs
  shm::Segment own_;
  std::vector<Peer> peers_;   ///< indexed by rank; only those in served_ are mapped
  std::vector<int> served_;   ///< the peers this transport serves (not this rank)
  RingQueue<SendOp> selfSends_;  // messages to ourselves match locally
  RingQueue<RecvOp> selfRecvs_;
  std::mutex mu_;
  /// Peers whose wake-ups wait for releaseWakes (Request::holdWake; at most one entry each, so
  /// the capacity reserved at setup is never exceeded).
  std::vector<int> heldWakes_;
  Status failed_ = Status::Success;
  std::chrono::steady_clock::time_point nextCheck_;
  uint32_t progressCalls_ = 0;             ///< under mu_
  std::atomic<bool> checkSoon_{true};      ///< set by a wait that blocks (any thread)
};

}  // namespace nlccl::transport
