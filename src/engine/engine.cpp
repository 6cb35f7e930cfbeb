#include "engine/engine.hpp"

#include <algorithm>
#include <cstring>

#include "kernels/reduce.hpp"
#include "util/log.hpp"
#include "util/ranges.hpp"

namespace nlccl::engine {

namespace {

using Clock = std::chrono::steady_clock;
using plan::Region;
using plan::XferKind;

constexpr unsigned kMaxLoops = 64;

/// Runs one rank's Plan: channels concurrently, each channel's steps in order, every step cut into
/// `loops` proportional slices that pipeline (loop k step s after loop k step s-1 and loop k-1
/// step s).
class CollRunner {
 public:
  explicit CollRunner(CollJob& job) : job_(job), rp_(job.plan->ranks.at(job.rank)) {
    es_ = dataTypeSize(job.dtype);
    loops_ = 1;
    if (job.plan->pipelinable && job.sliceBytes > 0) {
      // The largest transfer of the whole Plan, so that every rank cuts the same slices.
      size_t maxElems = job.plan->maxTransferCount;
      size_t want = (maxElems * es_ + job.sliceBytes - 1) / job.sliceBytes;
      loops_ = static_cast<unsigned>(std::clamp<size_t>(want, 1, kMaxLoops));
    }
    reducer_.fn = kernels::reduceKernel(job.dtype, job.op);
    reducer_.elemSize = es_;
    timed_ = job.transport->modelsTime();
    state_.resize(rp_.channels.size());
    for (size_t c = 0; c < state_.size(); ++c) {
      state_[c].resize(loops_);
      if (timed_)
        for (auto& ls : state_[c]) ls.stepDone.assign(rp_.channels[c].steps.size(), job.vstart);
    }
    job.vend = job.vstart;
  }

  bool done() const {
    for (size_t c = 0; c < state_.size(); ++c)
      if (state_[c].back().step < rp_.channels[c].steps.size()) return false;
    return true;
  }

  /// Posts what may start and retires what completed; sets *progressed when anything moved.
  Status advance(bool* progressed) {
    for (size_t c = 0; c < rp_.channels.size(); ++c) {
      const auto& steps = rp_.channels[c].steps;
      auto& loops = state_[c];
      if (loops.back().step == steps.size()) continue;
      for (unsigned l = 0; l < loops_; ++l) {
        LoopState& ls = loops[l];
        while (ls.step < steps.size()) {
          const plan::Step& step = steps[ls.step];
          if (!ls.posted) {
            if (l > 0 && loops[l - 1].step <= ls.step) break;  // wait for the previous slice
            if (timed_) ls.vstart = startTime(loops, l, ls.step);
            NLCHECK(post(step, static_cast<unsigned>(c), l, ls));
            *progressed = true;
          }
          bool complete = true;
          NLCHECK(poll(step, static_cast<unsigned>(c), l, ls, &complete));
          if (!complete) break;
          runLocals(step, l);
          if (timed_) finishTime(step, l, ls);
          ++ls.step;
          ls.posted = false;
          *progressed = true;
        }
        if (ls.step < steps.size() && !ls.posted) break;  // later loops cannot pass this one
      }
    }
    if (done() && !finished_) {
      finished_ = true;
      finishAvg();
    }
    return Status::Success;
  }

  /// Peer of the first transfer still pending (for timeout messages), or -1.
  int waitingOn() const {
    for (size_t c = 0; c < state_.size(); ++c)
      for (const auto& ls : state_[c])
        if (ls.posted)
          for (size_t i = 0; i < ls.xfers.size(); ++i)
            if (!ls.xfers[i].finished) return rp_.channels[c].steps[ls.step].transfers[i].peer;
    return -1;
  }

 private:
  struct Xfer {
    transport::Request req;
    transport::Request fwd;
    bool forwarding = false;
    bool finished = false;
    bool skipped = false;  ///< empty slice: nothing posted
  };
  struct LoopState {
    size_t step = 0;
    bool posted = false;
    std::vector<Xfer> xfers;
    double vstart = 0;              ///< virtual start of the posted step
    std::vector<double> stepDone;   ///< virtual completion of each step (timed transports)
  };

  // Virtual time follows the pipelining rule: loop l's step s starts when loop l's step s-1 and
  // loop l-1's step s have completed (the simulator's rule, so the two agree).
  double startTime(const std::vector<LoopState>& loops, unsigned l, size_t s) const {
    double t = s > 0 ? loops[l].stepDone[s - 1] : job_.vstart;
    if (l > 0) t = std::max(t, loops[l - 1].stepDone[s]);
    return t;
  }

  void finishTime(const plan::Step& step, unsigned loop, LoopState& ls) {
    double t = ls.vstart;
    for (const Xfer& x : ls.xfers) {
      if (x.skipped) continue;
      t = std::max(t, x.req.vdone);
      if (x.forwarding) t = std::max(t, x.fwd.vdone);
    }
    for (const plan::LocalOp& op : step.locals)
      t += job_.transport->localOpTime(slice(op.src, loop).second,
                                       op.kind == plan::LocalKind::Reduce);
    ls.stepDone[ls.step] = t;
    job_.vend = std::max(job_.vend, t);
  }

  char* base(plan::Buffer b) const {
    switch (b) {
      case plan::Buffer::Input: return static_cast<char*>(const_cast<void*>(job_.input));
      case plan::Buffer::Output: return static_cast<char*>(job_.output);
      case plan::Buffer::Scratch: return static_cast<char*>(job_.scratch);
    }
    return nullptr;
  }
  // Slice `loop` of region r: [offset + count*k/L, offset + count*(k+1)/L).
  std::pair<char*, size_t> slice(const Region& r, unsigned loop) const {
    size_t a = r.count * loop / loops_, b = r.count * (loop + 1) / loops_;
    return {base(r.buffer) + (r.offset + a) * es_, (b - a) * es_};
  }

  Status post(const plan::Step& step, unsigned channel, unsigned loop, LoopState& ls) {
    ls.xfers = std::vector<Xfer>(step.transfers.size());
    ls.posted = true;
    uint64_t tag = makeCollTag(job_.seq, channel, loop);
    auto* tp = job_.transport;
    for (size_t i = 0; i < step.transfers.size(); ++i) {
      const plan::Transfer& t = step.transfers[i];
      auto [ptr, bytes] = slice(t.region, loop);
      Xfer& x = ls.xfers[i];
      if (bytes == 0) {  // both ends compute the same empty slice: nothing to match
        x.finished = x.skipped = true;
        continue;
      }
      x.req.vstart = ls.vstart;
      x.req.remoteReduces = t.kind == XferKind::Send && t.sentReduced;
      if (t.kind == XferKind::Send) job_.bytesSent += bytes;
      switch (t.kind) {
        case XferKind::Send: NLCHECK(tp->postSend(t.peer, tag, ptr, bytes, &x.req)); break;
        case XferKind::Recv:
        case XferKind::RecvCopySend:
          NLCHECK(tp->postRecv(t.peer, tag, ptr, bytes, nullptr, &x.req));
          break;
        case XferKind::RecvReduce:
        case XferKind::RecvReduceSend:
          NLCHECK(tp->postRecv(t.peer, tag, ptr, bytes, &reducer_, &x.req));
          break;
        case XferKind::RecvReduceCopy:
        case XferKind::RecvReduceCopySend: {
          // region = src op incoming; src is sliced like the region (same count), and the
          // transport copies the Reducer, so a stack copy is enough.
          transport::Reducer fused = reducer_;
          fused.src = slice(t.src, loop).first;
          NLCHECK(tp->postRecv(t.peer, tag, ptr, bytes, &fused, &x.req));
          break;
        }
      }
    }
    return Status::Success;
  }

  Status poll(const plan::Step& step, unsigned channel, unsigned loop, LoopState& ls, bool* complete) {
    for (size_t i = 0; i < ls.xfers.size(); ++i) {
      Xfer& x = ls.xfers[i];
      if (x.finished) continue;
      transport::Request& r = x.forwarding ? x.fwd : x.req;
      if (!r.done.load(std::memory_order_acquire)) {
        *complete = false;
        continue;
      }
      if (r.status != Status::Success) return r.status;
      const plan::Transfer& t = step.transfers[i];
      if (!x.forwarding && plan::forwards(t.kind)) {
        auto [ptr, bytes] = slice(t.region, loop);
        x.forwarding = true;
        x.fwd.vstart = x.req.vdone;
        x.fwd.remoteReduces = t.sentReduced;
        job_.bytesSent += bytes;
        NLCHECK(job_.transport->postSend(t.next, makeCollTag(job_.seq, channel, loop), ptr,
                                         bytes, &x.fwd));
        *complete = false;
        continue;
      }
      x.finished = true;
    }
    return Status::Success;
  }

  void runLocals(const plan::Step& step, unsigned loop) {
    for (const plan::LocalOp& op : step.locals) {
      auto [src, n] = slice(op.src, loop);
      auto [dst, m] = slice(op.dst, loop);
      if (n == 0 || src == dst) continue;
      if (op.kind == plan::LocalKind::Copy) std::memmove(dst, src, n);
      else reducer_.fn(dst, src, n / es_);
    }
  }

  void finishAvg() {
    if (job_.op != RedOp::Avg) return;
    const plan::Plan& p = *job_.plan;
    if (p.collective != Collective::AllReduce && p.collective != Collective::ReduceScatter &&
        p.collective != Collective::Reduce)
      return;
    plan::Request req;
    req.collective = p.collective;
    req.nranks = p.nranks;
    req.count = p.count;
    req.root = p.root;
    size_t n = plan::outputCount(req, job_.rank);
    if (n > 0) kernels::divideByCount(job_.dtype, job_.output, n, p.nranks);
  }

  CollJob& job_;
  const plan::RankPlan& rp_;
  size_t es_ = 1;
  unsigned loops_ = 1;
  bool timed_ = false;
  transport::Reducer reducer_;
  std::vector<std::vector<LoopState>> state_;
  bool finished_ = false;
};

}  // namespace

namespace {

/// Everything a batch has posted to transports: it outlives runUntilDone so that a failed batch
/// can abort the transports while the Requests they point to still exist.
struct Batch {
  std::vector<CollRunner> runners;
  std::vector<transport::Request> p2pReqs;
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
void advanceClocks(const std::vector<CollJob>& colls,
                   const std::vector<std::pair<const P2PJob*, const P2POp*>>& p2pOps,
                   const std::vector<transport::Request>& p2pReqs,
                   const std::vector<transport::Transport*>& transports) {
  for (transport::Transport* t : transports) {
    if (!t->modelsTime()) continue;
    double end = t->clock();
    for (const CollJob& j : colls)
      if (j.transport == t) end = std::max(end, j.vend);
    for (size_t i = 0; i < p2pOps.size(); ++i)
      if (p2pOps[i].first->transport == t) end = std::max(end, p2pReqs[i].vdone);
    t->setClock(end);
  }
}

Status runUntilDone(std::vector<CollJob>& colls, std::vector<P2PJob>& p2ps,
                    std::chrono::milliseconds timeout, Batch& batch) {
  auto& runners = batch.runners;
  auto& transports = batch.transports;
  runners.reserve(colls.size());
  auto addTransport = [&](transport::Transport* t) {
    if (std::find(transports.begin(), transports.end(), t) == transports.end())
      transports.push_back(t);
  };
  for (CollJob& j : colls) {
    j.bytesSent = 0;
    j.vstart = j.transport->modelsTime() ? j.transport->clock() + j.transport->launchOverhead() : 0;
    runners.emplace_back(j);
    addTransport(j.transport);
  }

  // Point-to-point: post every receive and send at once; their order cannot deadlock.
  size_t nP2P = 0;
  for (const P2PJob& j : p2ps) nP2P += j.ops.size();
  auto& p2pReqs = batch.p2pReqs;
  p2pReqs = std::vector<transport::Request>(nP2P);
  std::vector<std::pair<const P2PJob*, const P2POp*>> p2pOps;
  p2pOps.reserve(nP2P);
  // Staging copies are taken before anything is posted: a receive may land at once.
  std::vector<const void*> sources;
  for (P2PJob& j : p2ps)
    for (const P2POp& op : j.ops) sources.push_back(op.isSend ? sendSource(op, p2ps, batch) : nullptr);
  for (P2PJob& j : p2ps) {
    addTransport(j.transport);
    j.vstart = j.vend = j.transport->clock();
    j.bytesSent = 0;
    for (const P2POp& op : j.ops) {
      size_t i = p2pOps.size();
      transport::Request* r = &p2pReqs[i];
      r->vstart = j.vstart;
      if (op.isSend) j.bytesSent += op.bytes;
      p2pOps.emplace_back(&j, &op);
      if (op.isSend) NLCHECK(j.transport->postSend(op.peer, op.tag, sources[i], op.bytes, r));
      else NLCHECK(j.transport->postRecv(op.peer, op.tag, op.buf, op.bytes, nullptr, r));
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
        for (size_t k = 0; k < j.ops.size(); ++k, ++i) j.vend = std::max(j.vend, p2pReqs[i].vdone);
      advanceClocks(colls, p2pOps, p2pReqs, transports);
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
    transports.front()->waitActivity(epoch, std::min<std::chrono::nanoseconds>(
                                                slice, std::chrono::milliseconds(100)));
  }
}

}  // namespace

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
