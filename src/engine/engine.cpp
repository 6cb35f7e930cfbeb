#include "engine/engine.hpp"

#include <algorithm>
#include <cstring>
#include <optional>
#include <span>

#include "engine/step_clock.hpp"
#include "engine/trace_events.hpp"
#include "kernels/reduce.hpp"
#include "util/log.hpp"
#include "util/ranges.hpp"
#include "util/trace.hpp"

namespace nlccl::engine {

namespace {
using Clock = std::chrono::steady_clock;
using plan::Region;
using plan::XferKind;
constexpr int kMaxLoops = 64;
/// Largest message of a one-exchange step handed to Transport::exchange whole (its timeout counts
/// from the call, not from the last progress, which a message this small never needs).
constexpr size_t kExchangeMaxBytes = 64 * 1024;

/// Sends posted with Request::holdWake wake their receivers here: releaseWakes() on each of
/// `tps` when the scope ends, on every way out (an NLCHECK return too).
struct WakeRelease {
  std::span<transport::Transport* const> tps;
  ~WakeRelease() {
    for (transport::Transport* t : tps) t->releaseWakes();
  }
};
}  // namespace

/// Runs one rank's part of a compiled Plan. Every step instance (step, loop) starts when the
/// compiled form's pipelining rule allows it, posts its transfers' slices, completes when they
/// have, then runs its local ops. A step has at most one loop in flight (loop k waits for loop
/// k-1), so transfer state is kept per transfer. Virtual time, when the transport models it, is
/// the StepClock's business alone. reset() prepares a run: the per-step arrays keep their
/// storage, so running the same Plan again allocates nothing.
class CollRunner {
 public:
  CollRunner() = default;
  explicit CollRunner(CollJob& job) { reset(job); }

  void reset(CollJob& job) {
    job_ = &job;
    streamed_ = streams(job);
    reducer_.streamed = streamed_;
    if (sameAsLast(job) && model_ == nullptr && job.transport->timeModel() == nullptr) {
      // Run again as last time (a prepared collective): only the progress counters restart.
      std::fill(started_.begin(), started_.end(), 0);
      std::fill(completed_.begin(), completed_.end(), 0);
      doneSteps_ = 0;
      finished_ = false;
      job.vend = job.vstart;
      return;
    }
    held_ = job.plan;  // so no other Plan can take its address while the state above is kept
    cp_ = job.plan.get();
    rank_ = job.rank;
    dtype_ = job.dtype;
    op_ = job.op;
    sliceBytes_ = job.sliceBytes;
    tp_ = job.transport;
    first_ = cp_->rankSteps(job.rank).first;
    last_ = cp_->rankSteps(job.rank).second;
    es_ = dataTypeSize(job.dtype);
    loops_ = cp_->loops(job.sliceBytes, es_, kMaxLoops);
    reducer_ = transport::Reducer::of(job.dtype, job.op);
    reducer_.streamed = streamed_;
    model_ = job.transport->timeModel();
    started_.assign(static_cast<size_t>(last_ - first_), 0);
    completed_.assign(static_cast<size_t>(last_ - first_), 0);
    doneSteps_ = 0;
    finished_ = false;
    firstXfer_ = 0;
    if (last_ > first_) {
      firstXfer_ = cp_->steps()[first_].firstXfer;
      const plan::StepInfo& lastStep = cp_->steps()[last_ - 1];
      const size_t n = static_cast<size_t>(lastStep.firstXfer + lastStep.numXfers - firstXfer_);
      if (n > xferCap_) {
        xfers_.reset(new Xfer[n]);
        xferCap_ = n;
      }
    }
    exchange_ = oneExchange(*job.transport);
    clock_.reset();
    if (model_) clock_.emplace(*cp_, job.rank, loops_, job.vstart);
    job.vend = job.vstart;
    if (trace::enabled()) {
      traceStart_ = trace::nowUs();
      stepStart_.assign(static_cast<size_t>(last_ - first_), 0.0);
    }
  }

  bool done() const { return doneSteps_ == last_ - first_; }

  /// Whether this run is one step of one exchange that the transport does in one call.
  bool exchangeOnly() const { return exchange_; }

  /// Whether `job` runs as the last run did and that was one exchange (exchangeOnly()): then
  /// runExchange() may follow without reset() (Runner::run's fast path).
  bool sameExchange(const CollJob& job) const { return exchange_ && sameAsLast(job); }

  /// Runs that step (exchangeOnly()): the transport's exchange, then the step's local ops.
  Status runExchange(CollJob& job, std::chrono::milliseconds timeout) {
    job_ = &job;
    // One loop: the slices are the regions. An absent half is (nullptr, 0) (transport.hpp).
    char* sp = xSend_.bytes ? base(xSend_.buffer) + xSend_.offset : nullptr;
    char* rp = xRecv_.bytes ? base(xRecv_.buffer) + xRecv_.offset : nullptr;
    transport::Reducer fused;
    const transport::Reducer* red = nullptr;
    if (xReduce_ == XReduce::Copy) {
      fused = reducer_;
      fused.src = base(xSrc_.buffer) + xSrc_.offset;
      red = &fused;
    } else if (xReduce_ == XReduce::InPlace) {
      red = &reducer_;
    }
    // Steps of local ops alone (all-to-all's own block, on a channel of its own) first: they
    // and the exchange may all start at once (oneExchange), so any order is the Plan's.
    if (exchangeLocals_)
      for (int s = first_; s < last_; ++s)
        if (s != exchangeStep_) runLocals(s, 0);
    job.bytesSent += xSend_.bytes;
    const uint64_t tag = makeCollTag(job.seq, xChannel_, 0);
    NLCHECK(job.transport->exchange(xPeer_, tag, sp, xSend_.bytes, readOnly(xSend_.buffer), rp,
                                    xRecv_.bytes, red, timeout));
    if (exchangeLocals_) runLocals(exchangeStep_, 0);
    // started_/completed_ stay 0: nothing reads them after a run that succeeded.
    doneSteps_ = last_ - first_;
    finished_ = true;
    if (job.op == RedOp::Avg) finishAvg();
    return Status::Success;
  }

  /// Posts what may start and retires what completed; sets *progressed when anything moved.
  Status advance(bool* progressed) {
    for (int s = first_; s < last_; ++s) {
      int& started = started_[s - first_];
      int& completed = completed_[s - first_];
      while (completed < loops_) {
        if (started == completed) {  // idle: may the next loop start?
          if (!cp_->mayStart(s, started, completed_.data(), first_)) break;
          NLCHECK(post(s, started));
          ++started;
          *progressed = true;
        }
        bool complete = true;
        NLCHECK(poll(s, started - 1, &complete));
        if (!complete) break;
        runLocals(s, completed);
        const double vend = clock_ ? finishTime(s, completed) : 0;
        if (trace::enabled())
          trace_events::step(*job_, s, completed, loops_, stepStart_[s - first_], clock_.has_value(),
                             clock_ ? clock_->startOf(s, completed) : 0, vend);
        if (++completed == loops_) ++doneSteps_;
        *progressed = true;
        // A step of local ops alone (a broadcast root's copy of its input, an all-gather's or
        // all-to-all's own block) takes one loop per pass. Its loops would otherwise all run
        // before the next loop of a transfer step is posted, and a peer reading those
        // transfers would wait for the whole copy instead of working beside it.
        if (cp_->steps()[s].numXfers == 0) break;
      }
    }
    if (done() && !finished_) {
      finished_ = true;
      finishAvg();
      if (trace::enabled()) trace_events::collective(*job_, traceStart_);
    }
    return Status::Success;
  }

  /// Peer of the first transfer still pending (for timeout messages), or -1.
  int waitingOn() const {
    for (int s = first_; s < last_; ++s) {
      if (started_[s - first_] == completed_[s - first_]) continue;
      const plan::StepInfo& si = cp_->steps()[s];
      for (int x = si.firstXfer; x < si.firstXfer + si.numXfers; ++x)
        if (!xfers_[x - firstXfer_].finished) return cp_->transfer(x).peer;
    }
    return -1;
  }

 private:
  struct Xfer {
    transport::Request req;
    transport::Request fwd;
    transport::Timing reqTime, fwdTime;
    bool forwarding = false;
    bool finished = false;
    bool skipped = false;  ///< empty slice: nothing posted
  };

  char* base(plan::Buffer b) const {
    switch (b) {
      case plan::Buffer::Input: return static_cast<char*>(const_cast<void*>(job_->input));
      case plan::Buffer::Output: return static_cast<char*>(job_->output);
      case plan::Buffer::Scratch: return static_cast<char*>(job_->scratch);
    }
    return nullptr;
  }
  std::pair<char*, size_t> slice(const Region& r, int loop) const {
    size_t first = 0, n = 0;
    plan::CompiledPlan::slice(r.count, static_cast<size_t>(loop), static_cast<size_t>(loops_),
                              &first, &n);
    return {base(r.buffer) + (r.offset + first) * es_, n * es_};
  }
  /// Whether `job` has what reset() derived its state from last time (untraced).
  bool sameAsLast(const CollJob& job) const {
    return cp_ != nullptr && cp_ == job.plan.get() && job.transport == tp_ &&
           job.rank == rank_ && job.dtype == dtype_ && job.op == op_ &&
           job.sliceBytes == sliceBytes_ && !trace::enabled();
  }
  /// Whether a send from `b` is from memory this collective never writes: Input, out of place
  /// (in place it aliases Output; the verifier forbids writes to Input otherwise).
  bool readOnly(plan::Buffer b) const { return b == plan::Buffer::Input && !cp_->plan().inPlace; }
  uint64_t tag(int s, int loop) const {
    return makeCollTag(job_->seq, static_cast<unsigned>(cp_->steps()[s].channel),
                       static_cast<unsigned>(loop));
  }
  /// The transport's Request for a post, with virtual time attached when there is a model.
  transport::Request* prepare(transport::Request& r, transport::Timing& t, double start,
                              bool remoteReduces) {
    r.reset();
    if (model_) {
      t = {start, start, remoteReduces};
      r.timing = &t;
    }
    return &r;
  }

  Status post(int s, int loop) {
    if (trace::enabled()) stepStart_[s - first_] = trace::nowUs();
    const plan::StepInfo& si = cp_->steps()[s];
    const double start = clock_ ? clock_->startOf(s, loop) : 0;
    transport::Transport* const tp = job_->transport;
    // A step of several sends (the root of a direct broadcast, an all-to-all) wakes their
    // receivers at once, after the last (Request::holdWake).
    const bool hold = si.numSends > 1;
    const WakeRelease release{{&tp, hold ? 1u : 0u}};
    for (int xi = si.firstXfer; xi < si.firstXfer + si.numXfers; ++xi) {
      const plan::Transfer& t = cp_->transfer(xi);
      auto [ptr, bytes] = slice(t.region, loop);
      Xfer& x = xfers_[xi - firstXfer_];
      x.forwarding = false;
      x.finished = x.skipped = bytes == 0;  // both ends compute the same empty slice
      if (x.skipped) continue;
      const int sent = cp_->xfers()[xi].sends;
      const bool reduced = sent >= 0 && cp_->messages()[sent].reduced;
      transport::Request* req = prepare(x.req, x.reqTime, start, t.kind == XferKind::Send && reduced);
      switch (t.kind) {
        case XferKind::Send:
          job_->bytesSent += bytes;
          req->readOnlySource = readOnly(t.region.buffer);
          req->holdWake = hold;
          if (const int pr = cp_->xfers()[xi].paired; pr >= 0)  // its receive is posted next
            req->pairTarget = slice(cp_->transfer(pr).region, loop).first;
          NLCHECK(tp->postSend(t.peer, tag(s, loop), ptr, bytes, req));
          break;
        case XferKind::Recv:
        case XferKind::RecvCopySend:
          req->streamed = streamed_;
          NLCHECK(tp->postRecv(t.peer, tag(s, loop), ptr, bytes, nullptr, req));
          break;
        case XferKind::RecvReduce:
        case XferKind::RecvReduceSend:
          NLCHECK(tp->postRecv(t.peer, tag(s, loop), ptr, bytes, &reducer_, req));
          break;
        case XferKind::RecvReduceCopy:
        case XferKind::RecvReduceCopySend: {
          // region = src op incoming; src is sliced like the region (same count), and the
          // transport copies the Reducer, so a stack copy is enough.
          transport::Reducer fused = reducer_;
          fused.src = slice(t.src, loop).first;
          if (const int pr = cp_->xfers()[xi].paired; pr >= 0)
            req->pairSend = &xfers_[pr - firstXfer_].req;
          NLCHECK(tp->postRecv(t.peer, tag(s, loop), ptr, bytes, &fused, req));
          break;
        }
      }
    }
    return Status::Success;
  }

  Status poll(int s, int loop, bool* complete) {
    const plan::StepInfo& si = cp_->steps()[s];
    for (int xi = si.firstXfer; xi < si.firstXfer + si.numXfers; ++xi) {
      Xfer& x = xfers_[xi - firstXfer_];
      if (x.finished) continue;
      transport::Request& r = x.forwarding ? x.fwd : x.req;
      if (!r.done.load(std::memory_order_acquire)) {
        *complete = false;
        continue;
      }
      if (r.status != Status::Success) return r.status;
      const plan::Transfer& t = cp_->transfer(xi);
      if (!x.forwarding && plan::forwards(t.kind)) {  // received: now send it on
        auto [ptr, bytes] = slice(t.region, loop);
        x.forwarding = true;
        const bool reduced = cp_->messages()[cp_->xfers()[xi].sends].reduced;
        transport::Request* fwd = prepare(x.fwd, x.fwdTime, x.reqTime.done, reduced);
        job_->bytesSent += bytes;
        NLCHECK(job_->transport->postSend(t.next, tag(s, loop), ptr, bytes, fwd));
        *complete = false;
        continue;
      }
      x.finished = true;
    }
    return Status::Success;
  }

  double finishTime(int s, int loop) {
    const plan::StepInfo& si = cp_->steps()[s];
    double t = clock_->startOf(s, loop);
    for (int xi = si.firstXfer; xi < si.firstXfer + si.numXfers; ++xi) {
      const Xfer& x = xfers_[xi - firstXfer_];
      if (x.skipped) continue;
      t = std::max(t, x.reqTime.done);
      if (x.forwarding) t = std::max(t, x.fwdTime.done);
    }
    for (const plan::LocalOp& op : cp_->step(s).locals)
      t += model_->localOpTime(slice(op.src, loop).second, op.kind == plan::LocalKind::Reduce);
    clock_->complete(s, loop, t);
    job_->vend = std::max(job_->vend, t);
    return t;
  }

  void runLocals(int s, int loop) {
    for (const plan::LocalOp& op : cp_->step(s).locals) {
      auto [src, n] = slice(op.src, loop);
      auto [dst, m] = slice(op.dst, loop);
      if (n == 0 || src == dst) continue;
      const bool apart = dst + n <= src || src + n <= dst;
      if (op.kind == plan::LocalKind::Copy && streamed_ && apart) kernels::streamCopy(dst, src, n);
      else if (op.kind == plan::LocalKind::Copy) std::memmove(dst, src, n);
      else reducer_.fn(dst, src, n / es_);
    }
  }

  /// One loop, one step of a send and a receive (that forwards nothing) with the same peer, or
  /// of one of the two, non-empty and small, untimed and untraced, over a transport with its own
  /// exchange(); any other steps hold local ops alone, and every step may start at once (no
  /// step waits for another). Notes the step, its local ops, and its halves in bytes
  /// (runExchange reads them).
  bool oneExchange(transport::Transport& tp) {
    if (last_ <= first_ || loops_ != 1 || model_ != nullptr || trace::enabled() ||
        !tp.exchanges())
      return false;
    exchangeStep_ = -1;
    exchangeLocals_ = false;
    for (int s = first_; s < last_; ++s) {
      if (!cp_->mayStart(s, 0, completed_.data(), first_)) return false;  // all still 0 here
      exchangeLocals_ = exchangeLocals_ || !cp_->step(s).locals.empty();
      if (cp_->steps()[s].numXfers == 0) continue;
      if (exchangeStep_ >= 0) return false;
      exchangeStep_ = s;
    }
    if (exchangeStep_ < 0) return false;
    const plan::StepInfo& si = cp_->steps()[exchangeStep_];
    if (si.numXfers > 2) return false;
    int sendX = -1, recvX = -1;  // the step's transfers (-1: absent)
    for (int x = si.firstXfer; x < si.firstXfer + si.numXfers; ++x) {
      const plan::Transfer& t = cp_->transfer(x);
      int& slot = t.kind == XferKind::Send ? sendX : recvX;
      const bool kindOk = t.kind == XferKind::Send || t.kind == XferKind::Recv ||
                          t.kind == XferKind::RecvReduce || t.kind == XferKind::RecvReduceCopy;
      // Empty transfers are skipped, not sent (post()): those stay with the general path.
      if (!kindOk || slot >= 0 || t.region.count == 0 || t.region.count * es_ > kExchangeMaxBytes)
        return false;
      slot = x;
    }
    if (sendX >= 0 && recvX >= 0 && cp_->transfer(sendX).peer != cp_->transfer(recvX).peer)
      return false;
    // What runExchange needs, in bytes from its buffer's base.
    const auto place = [&](const Region& r) {
      return XRegion{r.buffer, r.offset * es_, r.count * es_};
    };
    xSend_ = xRecv_ = xSrc_ = XRegion{};
    xReduce_ = XReduce::None;
    if (sendX >= 0) {
      const plan::Transfer& send = cp_->transfer(sendX);
      xSend_ = place(send.region);
      xPeer_ = send.peer;
    }
    if (recvX >= 0) {
      const plan::Transfer& recv = cp_->transfer(recvX);
      xRecv_ = place(recv.region);
      xPeer_ = recv.peer;
      if (recv.kind == XferKind::RecvReduceCopy) {
        xSrc_ = place(recv.src);
        xReduce_ = XReduce::Copy;
      } else if (recv.kind == XferKind::RecvReduce) {
        xReduce_ = XReduce::InPlace;
      }
    }
    xChannel_ = static_cast<unsigned>(cp_->steps()[exchangeStep_].channel);
    return true;
  }

  void finishAvg() {
    if (job_->op != RedOp::Avg) return;
    const plan::Plan& p = cp_->plan();
    if (p.collective != Collective::AllReduce && p.collective != Collective::ReduceScatter &&
        p.collective != Collective::Reduce)
      return;
    plan::Request req;
    req.collective = p.collective;
    req.nranks = p.nranks;
    req.count = p.count;
    req.root = p.root;
    size_t n = plan::outputCount(req, job_->rank);
    if (n > 0) kernels::divideByCount(job_->dtype, job_->output, n, p.nranks);
  }

  CollJob* job_ = nullptr;
  const plan::CompiledPlan* cp_ = nullptr;
  // What reset() derived its state from (a run with the same ones reuses it).
  std::shared_ptr<const plan::CompiledPlan> held_;
  int rank_ = -1;
  DataType dtype_ = DataType::Float32;
  RedOp op_ = RedOp::Sum;
  size_t sliceBytes_ = 0;
  transport::Transport* tp_ = nullptr;
  int first_ = 0, last_ = 0;  ///< this rank's step ids
  int firstXfer_ = 0;      ///< its first transfer id (xfers_ is indexed from it)
  size_t es_ = 1;
  int loops_ = 1;
  transport::TimeModel* model_ = nullptr;
  std::optional<StepClock> clock_;
  transport::Reducer reducer_;
  bool streamed_ = false;  ///< copies and out-of-place reductions use streaming stores

  /// Whether this rank's input and output add up to job.streamStoreBytes (in place: once).
  static bool streams(const CollJob& job) {
    if (job.streamStoreBytes == 0 || !job.plan) return false;
    const plan::CompiledPlan& p = *job.plan;
    const size_t in = plan::inputCount(p.collective(), p.nranks(), p.count(), p.root(), job.rank);
    const size_t out = plan::outputCount(p.collective(), p.nranks(), p.count(), p.root(), job.rank);
    const size_t bytes = ((job.input != job.output ? in : 0) + out) * dataTypeSize(job.dtype);
    return bytes >= job.streamStoreBytes;
  }
  std::vector<int> started_, completed_;  ///< loops of each step posted / completed
  std::unique_ptr<Xfer[]> xfers_;
  size_t xferCap_ = 0;
  int doneSteps_ = 0;
  bool finished_ = false;
  bool exchange_ = false;  ///< oneExchange() of the Plan in hand
  /// The exchange's halves (oneExchange): a region in bytes; bytes 0 for an absent half.
  struct XRegion {
    plan::Buffer buffer = plan::Buffer::Input;
    size_t offset = 0;
    size_t bytes = 0;
  };
  enum class XReduce { None, InPlace, Copy };  ///< Recv, RecvReduce, RecvReduceCopy (from xSrc_)
  XRegion xSend_, xRecv_, xSrc_;
  XReduce xReduce_ = XReduce::None;
  int xPeer_ = -1;
  unsigned xChannel_ = 0;
  bool exchangeLocals_ = false;  ///< some step of the exchange's run has local ops
  int exchangeStep_ = 0;                     ///< its step of one or two transfers, when it holds
  double traceStart_ = 0;           ///< NLCCL_TRACE_FILE: when the job started
  std::vector<double> stepStart_;   ///< and when each step's loop in flight was posted
};

namespace {

/// Everything a batch has posted to transports: it outlives runUntilDone so that a failed batch
/// can abort the transports while the Requests they point to still exist.
struct Batch {
  std::vector<CollRunner> runners;
  std::vector<transport::Request> p2pReqs;
  std::vector<transport::Timing> p2pTimes;  ///< p2pReqs' virtual times (timed transports only)
  std::vector<transport::Transport*> transports;
  std::vector<std::unique_ptr<char[]>> staging;  ///< copies of sends that overlap a receive
};


/// Where a send reads from: its buffer, or a copy taken now when a receive of the same batch
/// writes over it (in-place send/recv pairs, as nccl-tests' sendrecv issues them).
const void* sendSource(const P2POp& send, const std::vector<P2PJob>& p2ps, Batch& batch) {
  for (const P2PJob& j : p2ps)
    for (const P2POp& r : j.ops)
      if (!r.isSend && rangesOverlap(send.buf, send.bytes, r.buf, r.bytes)) {
        batch.staging.push_back(std::unique_ptr<char[]>(new char[send.bytes]));
        std::memcpy(batch.staging.back().get(), send.buf, send.bytes);
        return batch.staging.back().get();
      }
  return send.buf;
}

/// Moves each modelling transport's clock to the end of its rank's work in this batch.
void advanceClocks(const std::vector<CollJob>& colls, const std::vector<P2PJob>& p2ps,
                   const std::vector<transport::Timing>& p2pTimes,
                   const std::vector<transport::Transport*>& transports) {
  for (transport::Transport* t : transports) {
    transport::TimeModel* m = t->timeModel();
    if (m == nullptr) continue;
    double end = m->clock();
    for (const CollJob& j : colls)
      if (j.transport == t) end = std::max(end, j.vend);
    size_t i = 0;  // timings were made job by job, op by op
    for (const P2PJob& j : p2ps)
      for (size_t k = 0; k < j.ops.size(); ++k, ++i)
        if (j.transport == t) end = std::max(end, p2pTimes[i].done);
    m->setClock(end);
  }
}

Status runUntilDone(std::vector<CollJob>& colls, std::vector<P2PJob>& p2ps,
                    std::chrono::milliseconds timeout, Batch& batch) {
  auto& runners = batch.runners;
  auto& transports = batch.transports;
  const double traceStart = trace::enabled() ? trace::nowUs() : 0;
  runners.reserve(colls.size());
  auto addTransport = [&](transport::Transport* t) {
    if (std::find(transports.begin(), transports.end(), t) == transports.end())
      transports.push_back(t);
  };
  for (CollJob& j : colls) {
    j.bytesSent = 0;
    const transport::TimeModel* m = j.transport->timeModel();
    j.vcall = m ? m->clock() : 0;
    j.vstart = m ? j.vcall + m->launchOverhead() : 0;
    runners.emplace_back(j);
    addTransport(j.transport);
  }

  // Point-to-point: post every receive and send at once; their order cannot deadlock.
  size_t nP2P = 0;
  for (const P2PJob& j : p2ps) nP2P += j.ops.size();
  auto& p2pReqs = batch.p2pReqs;
  p2pReqs = std::vector<transport::Request>(nP2P);
  batch.p2pTimes.assign(nP2P, {});
  std::vector<std::pair<const P2PJob*, const P2POp*>> p2pOps;
  p2pOps.reserve(nP2P);
  // Staging copies are taken before anything is posted: a receive may land at once.
  std::vector<const void*> sources;
  size_t p2pSends = 0;
  for (P2PJob& j : p2ps) {
    addTransport(j.transport);
    for (const P2POp& op : j.ops) {
      sources.push_back(op.isSend ? sendSource(op, p2ps, batch) : nullptr);
      p2pSends += op.isSend;
    }
  }
  // Several sends wake their receivers once all are posted (Request::holdWake), as a step's do.
  const bool hold = p2pSends > 1;
  {
    // `transports` is complete here: the span stays valid.
    const WakeRelease release{hold ? std::span<transport::Transport* const>(transports)
                                   : std::span<transport::Transport* const>()};
    for (P2PJob& j : p2ps) {
      const transport::TimeModel* m = j.transport->timeModel();
      j.vcall = m ? m->clock() : 0;
      // A collective made of grouped sends and receives pays the launch overhead as one does.
      j.vstart = j.vend = m ? j.vcall + (j.collectiveAlgorithm ? m->launchOverhead() : 0.0) : 0;
      j.bytesSent = 0;
      for (const P2POp& op : j.ops) {
        size_t i = p2pOps.size();
        transport::Request* r = &p2pReqs[i];
        if (m) {
          batch.p2pTimes[i] = {j.vstart, j.vstart, false};
          r->timing = &batch.p2pTimes[i];
        }
        if (op.isSend) j.bytesSent += op.bytes;
        p2pOps.emplace_back(&j, &op);
        r->holdWake = hold && op.isSend;
        if (op.isSend) NLCHECK(j.transport->postSend(op.peer, op.tag, sources[i], op.bytes, r));
        else NLCHECK(j.transport->postRecv(op.peer, op.tag, op.buf, op.bytes, nullptr, r));
      }
    }
  }

  // One blocking wait covers all transports only when they share an activity domain.
  bool oneDomain = true;
  for (auto* t : transports)
    if (t->activityDomain() != transports.front()->activityDomain()) oneDomain = false;

  auto deadline = Clock::now() + timeout;
  while (true) {
    uint32_t epoch = transports.empty() ? 0 : transports.front()->activityEpoch();
    for (auto* t : transports) NLCHECK(t->progress());
    bool progressed = false;
    bool allDone = true;
    for (CollRunner& r : runners) {
      NLCHECK(r.advance(&progressed));
      allDone = allDone && r.done();
    }
    for (size_t i = 0; i < p2pReqs.size(); ++i) {
      if (!p2pReqs[i].done.load(std::memory_order_acquire)) {
        allDone = false;
        continue;
      }
      if (p2pReqs[i].status != Status::Success) return p2pReqs[i].status;
    }
    if (allDone) {
      size_t i = 0;  // requests were made job by job, op by op
      for (P2PJob& j : p2ps)
        for (size_t k = 0; k < j.ops.size(); ++k, ++i)
          j.vend = std::max(j.vend, batch.p2pTimes[i].done);
      advanceClocks(colls, p2ps, batch.p2pTimes, transports);
      if (trace::enabled())
        for (const P2PJob& j : p2ps) trace_events::p2p(j, traceStart);
      return Status::Success;
    }
    auto now = Clock::now();
    if (progressed) {
      deadline = now + timeout;
      continue;
    }
    if (now >= deadline) {
      int peer = -1;
      for (CollRunner& r : runners)
        if (peer < 0) peer = r.waitingOn();
      for (size_t i = 0; i < p2pReqs.size() && peer < 0; ++i)
        if (!p2pReqs[i].done.load()) peer = p2pOps[i].second->peer;
      WARN("rank %d: no progress for %lld ms, waiting on peer %d", transports.front()->rank(),
           static_cast<long long>(timeout.count()), peer);
      return Status::Timeout;
    }
    auto slice = oneDomain ? std::chrono::nanoseconds(deadline - now)
                           : std::chrono::nanoseconds(std::chrono::milliseconds(1));
    const double waitStart = trace::enabled() ? trace::nowUs() : 0;
    transports.front()->waitActivity(epoch, std::min<std::chrono::nanoseconds>(
                                                slice, std::chrono::milliseconds(100)));
    if (trace::enabled()) trace_events::wait(transports.front()->rank(), waitStart);
  }
}

}  // namespace

Runner::Runner() : impl_(std::make_unique<CollRunner>()) {}
Runner::~Runner() = default;

Status Runner::run(CollJob& job, std::chrono::milliseconds timeout) {
  transport::Transport* tp = job.transport;
  job.bytesSent = 0;
  CollRunner& r = *impl_;
  if (r.sameExchange(job)) {  // as last time, one exchange: untimed, so no clock to read
    job.vcall = job.vstart = job.vend = 0;
    const Status s = r.runExchange(job, timeout);
    if (s != Status::Success) tp->abort(s);  // as fail() below
    return s;
  }
  const transport::TimeModel* m = tp->timeModel();
  job.vcall = m ? m->clock() : 0;
  job.vstart = m ? job.vcall + m->launchOverhead() : 0;
  r.reset(job);
  auto fail = [&](Status s) {
    tp->abort(s);  // operations still posted point into the runner
    return s;
  };
  if (r.exchangeOnly()) {
    if (Status s = r.runExchange(job, timeout); s != Status::Success) return fail(s);
    return Status::Success;  // untimed: no model clock to move
  }
  // The deadline is set when a pass makes no progress (timeout after the last pass that did),
  // but the first wait after progress is a short one that needs no clock (the peer's data mostly
  // comes within it; a read costs ~25 ns in a guest): a small collective completes without
  // reading the clock at all, and the timeout runs at most kFirstWait late.
  constexpr auto kFirstWait = std::chrono::milliseconds(1);
  auto wait = [&](uint32_t epoch, std::chrono::nanoseconds limit) {
    const double waitStart = trace::enabled() ? trace::nowUs() : 0;
    tp->waitActivity(epoch, limit);
    if (trace::enabled()) trace_events::wait(tp->rank(), waitStart);
  };
  Clock::time_point deadline{};
  bool haveDeadline = false, waited = false;
  while (true) {
    const uint32_t epoch = tp->activityEpoch();
    bool progressed = false;
    if (Status s = r.advance(&progressed); s != Status::Success) return fail(s);
    if (!r.done()) {
      if (Status s = tp->progress(); s != Status::Success) return fail(s);
      if (Status s = r.advance(&progressed); s != Status::Success) return fail(s);
    }
    if (r.done()) break;
    if (progressed) {
      haveDeadline = waited = false;
      continue;
    }
    if (!waited) {
      waited = true;
      wait(epoch, std::min<std::chrono::nanoseconds>(timeout, kFirstWait));
      continue;
    }
    const auto now = Clock::now();
    if (!haveDeadline) {
      deadline = now + timeout;
      haveDeadline = true;
    }
    if (now >= deadline) {
      WARN("rank %d: no progress for %lld ms, waiting on peer %d", tp->rank(),
           static_cast<long long>(timeout.count()), r.waitingOn());
      return fail(Status::Timeout);
    }
    wait(epoch, std::min<std::chrono::nanoseconds>(deadline - now, std::chrono::milliseconds(100)));
  }
  if (transport::TimeModel* model = tp->timeModel())
    model->setClock(std::max(model->clock(), job.vend));
  return Status::Success;
}

Status run(std::vector<CollJob>& colls, std::vector<P2PJob>& p2ps,
           std::chrono::milliseconds timeout) {
  Batch batch;
  Status s = runUntilDone(colls, p2ps, timeout, batch);
  if (s != Status::Success) {
    // Operations still posted point into `batch`: fail them all now, on every rank of the
    // affected transports, before it goes away.
    for (CollJob& j : colls) batch.transports.push_back(j.transport);
    for (P2PJob& j : p2ps) batch.transports.push_back(j.transport);
    for (auto* t : batch.transports) t->abort(s);
  }
  return s;
}

}  // namespace nlccl::engine
