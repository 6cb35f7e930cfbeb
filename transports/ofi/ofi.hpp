// libfabric transport: ranks on any hosts, over FI_EP_RDM endpoints with tagged messages
// (DESIGN.md section 5; docs/ofi.md for users). efa on AWS, tcp (rxm) or shm elsewhere.
//
// Protocol (ofi_wire.hpp has the formats). Every message, whatever its nlccl tag, starts with a
// control message to its peer:
// - Eager (at most NLCCL_OFI_EAGER_BYTES): header and data in one control message. The sender
//   sends the data from the caller's buffer as the message's second part (fi_tsendv; from 4 KiB,
//   where the provider takes unregistered buffers), or copies it in behind the header (smaller
//   payloads, and providers with FI_MR_LOCAL such as efa); the send completes when the provider
//   completes that message, not before: with manual progress (tcp, shm) a message the provider
//   has not finished sending moves only while this rank keeps calling it, and a rank whose
//   collective is done may be busy elsewhere (in MPI, say) for a long time. The receiver copies
//   (or reduces) it out of its control buffer, or keeps a copy when no receive is posted yet.
// - Rendezvous (larger): Rts(tag, bytes, msgId). Once the receive is matched, the receiver posts
//   tagged receives for the fragments it grants and sends Cts(msgId, range, first data id); the
//   sender then sends each fragment with that tag. Fragments go straight into the destination, or
//   into registered bounce chunks that are reduced into it when the receive has a Reducer. Grants
//   are bounded (bytes per message, bounce chunks, the provider's rx queue), fragments are at most
//   the provider's max_msg_size (or NLCCL_OFI_MAX_MSG_BYTES; unset, 512 KiB over tcp and 8 MiB
//   elsewhere: defaultFragBytes), so data never arrives unexpected.
// - Grant ahead of the Rts: a rendezvous-sized receive posted before its Rts arrived (and the
//   first one posted for its (peer, tag)) posts its first fragments at once and sends a Grant:
//   a Cts naming (tag, the receiver's next expected seq) instead of the sender's msgId, since
//   messages of one (peer, tag) match in seq order, so it is for the sender's first message with
//   that tag and a seq at least that. The sender sends the data as soon as it has both the Grant
//   and the send (whichever comes second), without waiting for a round trip after its Rts; the
//   Rts still goes (it is sequenced), and its receiver, finding the receive already granted,
//   only grants what is left. A Grant whose message turns out to be of another size is answered
//   with empty fragments, so the receive's posted buffers are consumed before it fails. Grants
//   hold at most half the bounce chunks and a quarter of the rx queue, so Rts-driven grants
//   (whose senders are waiting) always find room.
// Tagged rendezvous rather than RMA: the provider moves large tagged messages zero-copy itself
// (rxm reads them with RMA over tcp, efa with its own read protocol), and the one remote-access
// key would be ours to manage per user buffer.
//
// Control messages go into NLCCL_OFI_CREDITS + 4 buffers the receiver posts per peer (the peer's
// rank is in the libfabric tag). A sender spends one credit per Eager, Rts or Cts; the receiver
// returns credits with its own control messages or, once half are owed, in a Credit message that
// needs none (at most two are in flight: two extra buffers). So a fast sender never has more
// control messages in flight than the receiver has buffers posted. A peer that something waits
// for and that has been silent for a second gets a Ping (answered by a Pong; one of each in
// flight: the other two buffers): sending it is how a peer whose process died shows up when no
// other operation is posted towards it, as an error completion (efa) or as a send the provider
// cannot post for seconds because it cannot connect (rxm over tcp: connection refused). Not over
// libfabric's shm provider: it reports nothing for a dead peer, and a send to a peer killed while
// holding its region's lock spins on that lock for ever (libfabric 1.17), so the transport sends
// nothing it does not have to; the health callback (the bootstrap) finds such deaths. Eager and Rts carry
// a sequence number per direction and are handled in that order: with it, messages with the same
// (peer, tag) match in posting order even where the provider does not order delivery.
// Peers are set up on first use (a send or a receive): a peer nobody talks to costs nothing, and
// messages sent before the receiver set the peer up wait in the provider, at most a credit's worth.
//
// Waiting: waitActivity polls briefly, yields, then blocks on the completion queue's wait object
// (FI_WAIT_FD: fi_trywait, then poll on it and on an eventfd that wake() and abort() write) or,
// without one, sleeps in short steps. A completion queue with a wait object costs every send and
// completion a signal through a socket pair and makes tcp progress with epoll (about 0.8 us per
// send, 1.5 us per 8-byte exchange here), so small jobs (NLCCL_OFI_WAIT=auto: up to 16 ranks,
// few connections to poll, and no more ranks than this machine has CPUs, so none need to share
// one) open it without one and sleep; others block on it. shm and efa offer none. Each block lasts at most ~50 ms, so
// progress() keeps polling the health callback (the bootstrap, which knows when a rank died).
// Failure: an error completion for an operation to a peer marks it gone; that is an error
// (RemoteError) once anything still needs the peer, as in the shm transport. Destroy waits (up to
// the timeout) until the provider has completed every send that carries data, so a rank that
// exits right after its last send does not take that data with it, then closes everything;
// abort closes everything at once, so no posted receive can write into user memory afterwards.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "transports/ofi/ofi_mr_cache.hpp"
#include "transports/ofi/ofi_wire.hpp"
#include "transports/transport.hpp"

namespace nlccl::transport {

namespace ofi {
struct Fabric;  // the libfabric objects (ofi_setup.cpp)
}  // namespace ofi

class OfiTransport final : public Transport {
 public:
  /// Exchanges `bytes` from every rank: all[r * bytes ...] receives rank r's blob.

  /// Tunables, read from the environment once per create (ofi_setup.cpp, optionsFromEnv).
  struct Options {
    std::string provider;        ///< NLCCL_OFI_PROVIDER, else empty
    std::string fiProvider;      ///< FI_PROVIDER (libfabric's own filter), else empty
    size_t eagerBytes = 0;       ///< NLCCL_OFI_EAGER_BYTES (0: defaultEagerBytes)
    int credits = 0;             ///< NLCCL_OFI_CREDITS
    size_t maxMsgBytes = 0;      ///< NLCCL_OFI_MAX_MSG_BYTES (0: the provider's max_msg_size)
    size_t mrCacheEntries = 0;   ///< NLCCL_OFI_MR_CACHE
    bool forceMrLocal = false;   ///< NLCCL_OFI_FORCE_MR_LOCAL (tests: register as efa needs)
    enum class Wait { Auto, Fd, Poll } wait = Wait::Auto;  ///< NLCCL_OFI_WAIT
  };

  /// Collective: every rank of the group calls it. Opens a libfabric endpoint (provider from
  /// NLCCL_OFI_PROVIDER, else FI_PROVIDER's choice, else efa, else tcp;ofi_rxm), exchanges
  /// endpoint names through `allGather` and inserts them into the address vector. A provider that
  /// is missing or refuses is InvalidUsage naming it. `health` (may be empty) is polled from
  /// progress() every ~50 ms; a non-success result fails all operations with that status.
  static Status create(int rank, int nranks, const AllGatherFn& allGather,
                       std::chrono::milliseconds timeout, std::function<Status()> health,
                       std::unique_ptr<OfiTransport>* out);
  ~OfiTransport() override;

  const char* name() const override { return "ofi"; }
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  Status postSend(int peer, uint64_t tag, const void* buf, size_t bytes, Request* req) override;
  Status postRecv(int peer, uint64_t tag, void* buf, size_t bytes, const Reducer* reducer,
                  Request* req) override;
  Status progress() override;
  uint32_t activityEpoch() override;
  void waitActivity(uint32_t seen, std::chrono::nanoseconds timeout) override;
  void abort(Status why) override;
  void wake(int rank) override;

  /// The libfabric provider in use ("tcp;ofi_rxm", "shm", "efa").
  const std::string& provider() const { return providerName_; }
  size_t eagerBytes() const { return eagerBytes_; }
  size_t fragBytes() const { return fragBytes_; }
  int credits() const { return credits_; }
  /// True when waits end blocked on the completion queue's descriptor (FI_WAIT_FD), false when
  /// they poll with short sleeps (NLCCL_OFI_WAIT, or a provider without one).
  bool blocksOnFd() const;
  /// NLCCL_OFI_WAIT=auto's choice for a job of `nranks`: true polls (at most 16 ranks, and no
  /// more than this machine has CPUs), false blocks on the descriptor.
  static bool pollByDefault(int nranks);
  /// Largest rendezvous fragment for `provider` before its max_msg_size: 512 KiB over tcp (see
  /// ofi_setup.cpp) unless the user set NLCCL_OFI_MAX_MSG_BYTES (`explicitLimit`), else 8 MiB.
  static size_t defaultFragBytes(const std::string& provider, bool explicitLimit);
  /// Largest eager message for `provider` when NLCCL_OFI_EAGER_BYTES is unset or 0, in a job of
  /// `nranks` with `credits` per peer: over tcp 512 KiB, halved (to 64 KiB at least) until
  /// control buffers for every peer fit in 128 MiB (see ofi_setup.cpp); else 64 KiB.
  static size_t defaultEagerBytes(const std::string& provider, int nranks, int credits);
  /// Registrations held (0 unless the provider, or NLCCL_OFI_FORCE_MR_LOCAL, asks for them).
  size_t registrations() const;
  /// Peers that have been set up (sent to or received from at least once).
  int activePeers() const;
  /// Grants this rank sent ahead of an Rts (receives posted before their message announced itself).
  uint64_t earlyGrants() const;
  /// Eager messages sent from the caller's buffer (header and payload as two parts), not copied.
  uint64_t gatheredSends() const;

 private:
  enum class OpKind : uint8_t { CtrlRecv, CtrlSend, DataRecv, DataSend };
  struct SendOp;
  struct RndvRecv;
  /// One operation posted to libfabric. `fiContext` must come first: it is the fi_context2 the
  /// provider may use (FI_CONTEXT / FI_CONTEXT2), and the completion hands back its address.
  struct Op {
    void* fiContext[8];
    OpKind kind = OpKind::CtrlRecv;
    int peer = -1;
    char* buf = nullptr;
    size_t bytes = 0;
    void* desc = nullptr;
    bool critical = false;      // CtrlSend: carries data a peer needs (not just credits)
    SendOp* send = nullptr;     // DataSend
    RndvRecv* recv = nullptr;   // DataRecv
    size_t offset = 0;          // DataRecv: where the fragment goes in the message
    int bounce = -1;            // DataRecv: bounce chunk, or -1 when straight into the buffer
    uint64_t tag = 0;           // DataSend: retried with the same tag
    bool pre = false;           // DataRecv: posted by a Grant (counted in preRx_, preBounce_)
    Request* req = nullptr;     // CtrlSend of an Eager message: the user's send
  };
  struct RecvOp {
    uint64_t tag;
    char* buf;
    size_t bytes;
    Reducer reducer;
    bool reduce;
    Request* req;
    RndvRecv* pre = nullptr;  // granted ahead of its Rts (in recvs_ already)
  };
  struct SendOp {  // a rendezvous send: waits for grants, completes when every fragment has
    uint64_t tag;
    uint64_t msgId;
    const char* buf;
    size_t bytes;
    Request* req;
    size_t done = 0;  // bytes whose fragment send completed
    uint64_t seq = 0;        // the Rts's sequence number (matches Grants)
    size_t grantedTo = 0;    // bytes granted so far: grants come in order, from offset 0
    bool preMatched = false; // a Grant was taken for it
    void* desc = nullptr;
    ofi::MrCache::Entry* mr = nullptr;
  };
  struct RndvRecv {  // a matched rendezvous receive
    int peer;
    uint64_t msgId;
    RecvOp r;
    size_t granted = 0;
    size_t arrived = 0;
    bool matched = true;     // false while granted ahead of an Rts that has not been handled
    Status status = Status::Success;  // InvalidUsage: the sender's message has another size
    void* desc = nullptr;
    ofi::MrCache::Entry* mr = nullptr;
  };
  struct Unexpected {  // arrived before its receive: eager data (copied) or an Rts
    uint64_t tag;
    size_t bytes;
    bool rts;
    uint64_t msgId;
    std::unique_ptr<char[]> data;
  };
  struct Outgoing {  // a credited control message waiting for a credit (or queue space)
    ofi::CtrlHeader h;
    const char* payload;  // Eager: the user's data, copied when sent
    Request* req;         // Eager: completed once copied
  };
  struct Peer {
    uint64_t addr = 0;  // fi_addr_t
    bool active = false;
    bool gone = false;  // an operation to it failed: its endpoint is closed
    std::vector<Op*> ctrlRecvs;
    int credits = 0;
    uint32_t toReturn = 0;
    int creditMsgs = 0;  // Credit messages of ours still posted (at most two)
    std::deque<Outgoing> outq;
    uint64_t nextSeq = 1;
    uint64_t expectSeq = 1;
    std::map<uint64_t, Op*> early;  // sequenced control messages that overtook an earlier one
    std::deque<RecvOp> posted;
    std::deque<Unexpected> unexpected;
    uint64_t nextMsgId = 1;
    std::unordered_map<uint64_t, std::unique_ptr<SendOp>> sends;  // rendezvous, by msgId
    std::deque<RndvRecv*> granting;  // matched receives with bytes not yet granted
    std::deque<ofi::CtrlHeader> grants;  // Grants that came before their send was posted
    // (seq, tag) of the last Eager messages sent: a Grant for one of them is a size mismatch.
    // The receiver can be at most `credits` sequenced messages behind what was sent before its
    // Grant (when control messages arrive in order), so the last kEagerLog cover every Grant.
    std::deque<std::pair<uint64_t, uint64_t>> eagerLog;
    int recvsActive = 0;             // matched rendezvous receives still arriving
    int eagerInFlight = 0;           // Eager messages posted, not completed by the provider
    uint64_t nextDataId = 1;
    bool creditPending = false;      // a Credit message could not be posted yet
    bool pingOut = false;            // a Ping of ours is posted and not answered yet
    bool pingTrying = false;         // a Ping of ours could not be posted yet
    bool pongOwed = false;           // the peer pinged us
    std::chrono::steady_clock::time_point lastHeard;  // last arrival from the peer
    std::chrono::steady_clock::time_point pingSince;  // when pingTrying began
  };

  OfiTransport(int rank, int nranks, std::chrono::milliseconds timeout,
               std::function<Status()> health);
  // ---- setup and teardown (ofi_setup.cpp) ----
  Status setup(const AllGatherFn& allGather, const Options& opt);
  Status unlinkShmRegion(const AllGatherFn& allGather, const uint8_t* name, size_t len);
  Status activate(int peer);  // posts the peer's control buffers on first use
  void closeFabric();         // closes every libfabric object; posted operations are dropped
  void linger();              // destroy: waits until data-carrying sends have completed
  Op* newOp(OpKind kind, int peer);
  void freeOp(Op* op);
  Status newCtrlSendOp(int peer, Op** out);
  // ---- matching (ofi.cpp) ----
  void finish(Request* req, Status s);
  void deliver(const RecvOp& r, size_t offset, const char* src, size_t bytes);
  void matchSelf();
  Status onCtrl(Op* op, size_t len);
  Status onSequenced(Peer& p, int src, Op* op);
  Status startRndv(Peer& p, int src, const RecvOp& r, uint64_t msgId);
  Status sizeMismatch(Peer& p, int src, const RecvOp& r, size_t sent, bool rts, uint64_t msgId);
  Status repostCtrl(Op* op);
  // ---- control sends, rendezvous and data (ofi_rndv.cpp) ----
  void markGone(int peer, const char* what, int rc);
  Status pumpCtrl(int peer);
  Status sendFree(int peer, ofi::MsgType type);  // Credit, Ping, Pong: no credit needed
  Status takeBounce(char** chunk);
  Status grant(int peer);
  Status postFrags(int peer, RndvRecv& r, bool pre, bool* stalled);
  Status pregrant(Peer& p, int peer, RecvOp* r);
  Status matchPregranted(Peer& p, int src, const RecvOp& r, const ofi::CtrlHeader& h);
  void finishRndv(RndvRecv& r);
  Status onCts(int src, const ofi::CtrlHeader& h);
  Status onGrant(int src, const ofi::CtrlHeader& h);
  Status takeGrant(int src, SendOp* s, bool eager, uint64_t tag);
  Status applyGrant(int src, SendOp* s, const ofi::CtrlHeader& h);
  Status sendFrags(int src, SendOp& s, const ofi::CtrlHeader& h);
  Status retryTx();
  Status onDataRecv(Op* op, size_t len);
  Status onDataSend(Op* op);
  // ---- progress and failure (ofi_progress.cpp) ----
  Status progressLocked();
  Status pumpAll();
  Status pollCq(int* handled);
  Status onError();
  Status checkPeers(bool health);
  bool needs(const Peer& p) const;
  uint32_t creditThreshold() const { return static_cast<uint32_t>((credits_ + 1) / 2); }
  void failAll(Status why);
  Status fail(Status why);  // failAll + closeFabric; returns why
  void bump();
  void signalWaiters();
  void logState() const;

  int rank_;
  int nranks_;
  std::chrono::milliseconds timeout_;
  std::function<Status()> health_;
  std::string providerName_;
  size_t eagerBytes_ = 0;
  size_t ctrlBytes_ = 0;     // header + eager payload
  // Eager payloads of at least this many bytes go out from the sender's buffer as the second
  // part of a two-part send (fi_tsendv) instead of being copied behind the header; SIZE_MAX when
  // the provider needs registered buffers (FI_MR_LOCAL) or sends one part at a time.
  size_t gatherFromBytes_ = SIZE_MAX;
  size_t fragBytes_ = 0;     // largest fragment of a rendezvous message
  size_t bounceBytes_ = 0;   // bounce chunk (reduce on arrival)
  size_t grantWindow_ = 0;   // granted, not yet arrived bytes per message
  int credits_ = 0;
  size_t txCap_ = 0, rxCap_ = 0;
  size_t txPosted_ = 0, rxPosted_ = 0;
  size_t criticalTx_ = 0;    // posted control and data sends that carry data
  size_t preRx_ = 0;         // data receives posted by Grants (at most rxCap_ / 4)
  size_t preBounce_ = 0;     // bounce chunks they hold (at most kBounceChunks / 2)
  uint64_t grantsSent_ = 0;
  uint64_t gatheredSends_ = 0;
  uint64_t rndvRecvs_ = 0;   // rendezvous receives matched or granted ahead (for the log)
  ofi::TagLayout tags_;
  std::unique_ptr<ofi::Fabric> fab_;
  std::unique_ptr<ofi::MrCache> mr_;
  std::unique_ptr<Peer[]> peers_;
  std::vector<int> active_;  // peers set up, in order of first use
  std::deque<Op*> pendingTx_;  // data fragments the provider had no room for yet
  std::deque<Op*> pendingRx_;  // control receives the provider had no room for yet
  std::unordered_set<Op*> eagerOps_;  // posted Eager messages: their sends complete with them
  // Owned memory: control and bounce buffers (registered once), operations.
  std::vector<std::unique_ptr<char[]>> slabs_;
  std::vector<std::unique_ptr<Op[]>> opBlocks_;
  std::vector<Op*> freeOps_;
  std::vector<Op*> freeCtrlSends_;  // CtrlSend ops with their buffers
  std::vector<char*> bounceFree_;
  bool bounceReady_ = false;
  void* bounceDesc_ = nullptr;
  std::unordered_map<RndvRecv*, std::unique_ptr<RndvRecv>> recvs_;  // matched rendezvous receives
  int goneCount_ = 0;
  bool lingering_ = false;  // in the destructor: the health callback may dangle
  bool probePeers_ = true;  // Ping silent peers (not over shm: see setup)
  // Sends and receives to ourselves match locally.
  struct SelfSend {
    uint64_t tag;
    const char* buf;
    size_t bytes;
    Request* req;
  };
  std::deque<SelfSend> selfSends_;
  std::deque<RecvOp> selfRecvs_;

  mutable std::mutex mu_;
  Status failed_ = Status::Success;
  std::atomic<uint32_t> epoch_{0};
  int eventFd_ = -1;
  std::chrono::steady_clock::time_point nextCheck_;
};

}  // namespace nlccl::transport
