// Executes a Plan on the fabric model (DESIGN.md 2.1 and 6): steps post all their transfers at
// once and complete when every transfer has arrived (sends: delivered), then run their local ops;
// channels run concurrently; sends and receives of a pair on a channel match in FIFO order; fused
// receive-and-send transfers forward once their receive has arrived; a pipelinable Plan is cut into
// loops, and loop k of step s starts after loop k of step s-1 and loop k-1 of step s. Sends are
// eager: a message arrives at max(data done + route latency) whether or not the receive is posted,
// and a receive posted later completes when posted.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <queue>

#include "nlccl/sim.hpp"
#include "sim/flow_network.hpp"
#include "util/log.hpp"

namespace nlccl::sim {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
using plan::XferKind;

// RecvReduceCopy (region = src op incoming) is charged exactly as a reduce on arrival: per byte
// received the receiver's HBM reads the local operand (src instead of region) and the incoming
// byte and writes the region, hbmBytesPerReducedByte in both cases; links and the sender's DMA
// see the same bytes. Only the separate local copy it replaces is gone.
using plan::reducesOnArrival;

struct StepRec {
  int rank, channel, index;
  int x0, nx;        // transfers [x0, x0 + nx)
  int prev, next;    // neighbouring steps of the channel (-1 at the ends)
  int items;         // completion items: 1 per send / receive, 2 per fused transfer
  double localS;     // local ops of the whole (unsliced) step
  int started = 0, completed = 0, pending = 0;
};

// Kept small (32 bytes): at 9,216 ranks there are millions and the simulator is memory bound.
struct XferRec {
  size_t count;
  double latency;  // route latency, < 0 until first used
  int step;
  int match;       // send side: the receiving transfer it is matched with
  int arrived;     // receive side: loops arrived
  XferKind kind;
};

class Executor {
 public:
  Executor(const fabric::Topology& topo, const plan::Plan& plan, const Options& opts)
      : topo_(topo), plan_(plan), opts_(opts), es_(dataTypeSize(opts.dtype)) {}

  Status run(Result* out, std::string* error);

 private:
  Status build(std::string* error);
  void chooseLoops();
  void setupResources();
  double sliceBytes(const XferRec& x, int k) const {
    const size_t a = x.count * static_cast<size_t>(k) / loops_;
    const size_t b = x.count * static_cast<size_t>(k + 1) / loops_;
    return static_cast<double>((b - a) * es_);
  }
  void tryStart(int s, int k, double t);
  void startStep(int s, int k, double t);
  void recvDone(int x, int k, double t);
  void itemDone(int s, double t);
  void finishStep(int s, double t);
  void startFlow(int x, int k, double t);
  void dataDone(int64_t tag, double t);
  void arrival(int x, int k, double t);

  struct Ev {
    double t;
    int type;  // 0 data done (tag), 1 arrival (x, k), 2 local ops done (step)
    int64_t a;
    int b;
    bool operator>(const Ev& o) const { return t > o.t; }
  };

  const fabric::Topology& topo_;
  const plan::Plan& plan_;
  const Options& opts_;
  size_t es_;
  int loops_ = 1;
  std::vector<StepRec> steps_;
  std::vector<XferRec> xfers_;
  std::vector<double> rankFinish_;
  std::vector<double> sendStart_;  // per transfer, only when tracing
  std::priority_queue<Ev, std::vector<Ev>, std::greater<>> queue_;
  FlowNetwork net_;
  std::vector<int> linkRes_, dmaRes_, hbmRes_;
  std::vector<double> linkBytes_, linkPeak_;
  std::vector<int> routeScratch_;
  std::vector<Use> useScratch_;
  Result* out_ = nullptr;
  size_t events_ = 0;
  size_t flows_ = 0;
};

Status Executor::build(std::string* error) {
  const int p = plan_.nranks;
  if (p < 1 || static_cast<int>(plan_.ranks.size()) != p) {
    *error = "plan has no ranks or ranks.size() != nranks";
    return Status::InvalidArgument;
  }
  if (p > topo_.numRanks()) {
    *error = "plan has " + std::to_string(p) + " ranks but topology " + topo_.name() + " holds " +
             std::to_string(topo_.numRanks());
    return Status::InvalidArgument;
  }
  // FIFO matching per (channel, src, dst): list both sides in program order, sort by key
  // (stable, so program order survives) and pair them off.
  struct Side {
    uint64_t key;
    int xid;
    bool operator<(const Side& o) const { return key < o.key; }
  };
  std::vector<Side> sends, recvs;
  size_t nSteps = 0, nXfers = 0;
  for (const plan::RankPlan& rp : plan_.ranks)
    for (const plan::Channel& ch : rp.channels) {
      nSteps += ch.steps.size();
      for (const plan::Step& st : ch.steps) nXfers += st.transfers.size();
    }
  steps_.reserve(nSteps);
  xfers_.reserve(nXfers);
  sends.reserve(nXfers);
  recvs.reserve(nXfers);
  auto key = [p](int src, int dst, int ch) {
    return (static_cast<uint64_t>(ch) * p + src) * p + static_cast<uint64_t>(dst);
  };
  for (int r = 0; r < p; ++r) {
    const auto& chans = plan_.ranks[r].channels;
    for (int c = 0; c < static_cast<int>(chans.size()); ++c) {
      int prev = -1;
      for (int i = 0; i < static_cast<int>(chans[c].steps.size()); ++i) {
        const plan::Step& st = chans[c].steps[i];
        StepRec rec{r, c, i, static_cast<int>(xfers_.size()), static_cast<int>(st.transfers.size()),
                    prev, -1, 0, 0.0};
        const int sid = static_cast<int>(steps_.size());
        if (prev >= 0) steps_[prev].next = sid;
        for (const plan::Transfer& t : st.transfers) {
          const int xid = static_cast<int>(xfers_.size());
          xfers_.push_back(XferRec{t.region.count, -1.0, sid, -1, 0, t.kind});
          const int target = plan::sendTarget(t);
          if (t.kind == XferKind::Send || plan::forwards(t.kind)) {
            if (target < 0 || target >= p || target == r) {
              *error = "rank " + std::to_string(r) + " sends to invalid peer " + std::to_string(target);
              return Status::InvalidArgument;
            }
            sends.push_back({key(r, target, c), xid});
          }
          if (plan::receives(t.kind)) {
            if (t.peer < 0 || t.peer >= p || t.peer == r) {
              *error = "rank " + std::to_string(r) + " receives from invalid peer " +
                       std::to_string(t.peer);
              return Status::InvalidArgument;
            }
            recvs.push_back({key(t.peer, r, c), xid});
          }
          rec.items += plan::forwards(t.kind) ? 2 : 1;
        }
        // Local ops: HBM traffic (copy reads + writes, reduce reads two and writes one) at the
        // HBM rate, or the DMA rate, whichever binds.
        const fabric::ChipEngine& eng = topo_.chip();
        for (const plan::LocalOp& op : st.locals) {
          const double bytes = static_cast<double>(op.src.count * es_);
          const double hbm = (op.kind == plan::LocalKind::Copy ? 2.0 : 3.0) * bytes / eng.hbmBps;
          rec.localS += std::max(hbm, bytes / eng.dmaBps());
        }
        steps_.push_back(rec);
        prev = sid;
      }
    }
  }
  std::stable_sort(sends.begin(), sends.end());
  std::stable_sort(recvs.begin(), recvs.end());
  size_t i = 0, j = 0;
  while (i < sends.size() || j < recvs.size()) {
    const uint64_t k = i < sends.size() && (j >= recvs.size() || sends[i].key <= recvs[j].key)
                           ? sends[i].key
                           : recvs[j].key;
    size_t i1 = i, j1 = j;
    while (i1 < sends.size() && sends[i1].key == k) ++i1;
    while (j1 < recvs.size() && recvs[j1].key == k) ++j1;
    const int src = static_cast<int>(k / p % p), dst = static_cast<int>(k % p);
    if (i1 - i != j1 - j) {
      *error = "unmatched transfers: rank " + std::to_string(src) + " sends " +
               std::to_string(i1 - i) + " messages to rank " + std::to_string(dst) +
               " on channel " + std::to_string(k / p / p) + ", which receives " +
               std::to_string(j1 - j);
      return Status::InvalidArgument;
    }
    for (size_t m = 0; m < i1 - i; ++m) {
      XferRec& sx = xfers_[sends[i + m].xid];
      const XferRec& rx = xfers_[recvs[j + m].xid];
      if (sx.count != rx.count) {
        *error = "message " + std::to_string(m) + " from rank " + std::to_string(src) + " to " +
                 std::to_string(dst) + " sends " + std::to_string(sx.count) +
                 " elements into a receive of " + std::to_string(rx.count);
        return Status::InvalidArgument;
      }
      sx.match = recvs[j + m].xid;
    }
    i = i1;
    j = j1;
  }
  return Status::Success;
}

void Executor::chooseLoops() {
  const int64_t chunk = opts_.chunkBytes < 0 ? static_cast<int64_t>(topo_.chunkBytes())
                                             : opts_.chunkBytes;
  loops_ = 1;
  if (!plan_.pipelinable || chunk <= 0 || xfers_.empty()) return;
  size_t maxCount = 0;
  for (const XferRec& x : xfers_) maxCount = std::max(maxCount, x.count);
  const double want = std::ceil(static_cast<double>(maxCount * es_) / static_cast<double>(chunk));
  double l = std::clamp(want, 1.0, static_cast<double>(std::max(1, opts_.maxLoops)));
  const double budget = static_cast<double>(opts_.transferBudget) / static_cast<double>(xfers_.size());
  l = std::max(1.0, std::min(l, std::floor(budget)));
  loops_ = static_cast<int>(l);
}

void Executor::setupResources() {
  const auto& links = topo_.links();
  linkRes_.assign(links.size(), -1);
  for (size_t i = 0; i < links.size(); ++i)
    if (std::isfinite(links[i].bwBps)) linkRes_[i] = net_.addResource(links[i].bwBps);
  const fabric::ChipEngine& eng = topo_.chip();
  dmaRes_.assign(topo_.numChips(), -1);
  hbmRes_.assign(topo_.numChips(), -1);
  // Engines only of chips the Plan uses.
  for (int r = 0; r < plan_.nranks; ++r) {
    const int c = topo_.chipOfRank(r);
    if (dmaRes_[c] < 0 && std::isfinite(eng.dmaBps())) dmaRes_[c] = net_.addResource(eng.dmaBps());
    if (hbmRes_[c] < 0 && std::isfinite(eng.hbmBps)) hbmRes_[c] = net_.addResource(eng.hbmBps);
  }
  linkBytes_.assign(links.size(), 0);
  linkPeak_.assign(links.size(), 0);
}

void Executor::tryStart(int s, int k, double t) {
  StepRec& st = steps_[s];
  if (k >= loops_ || st.started != k || st.completed < k) return;
  if (st.prev >= 0 && steps_[st.prev].completed < k + 1) return;
  startStep(s, k, t);
}

void Executor::startStep(int s, int k, double t) {
  StepRec& st = steps_[s];
  ++events_;
  st.started = k + 1;
  st.pending = st.items;
  if (st.pending == 0) {
    itemDone(s, t);  // no transfers: straight to local ops
    return;
  }
  for (int x = st.x0; x < st.x0 + st.nx; ++x) {
    XferRec& xr = xfers_[x];
    if (xr.kind == XferKind::Send) {
      startFlow(x, k, t);
    } else if (xr.arrived > k) {
      recvDone(x, k, t);
    }
  }
}

void Executor::recvDone(int x, int k, double t) {
  XferRec& xr = xfers_[x];
  if (plan::forwards(xr.kind)) startFlow(x, k, t);
  itemDone(xr.step, t);
}

void Executor::itemDone(int s, double t) {
  StepRec& st = steps_[s];
  if (st.pending > 0 && --st.pending > 0) return;  // items == 0 falls through at once
  const double local = st.localS / loops_;
  if (local > 0) {
    queue_.push({t + local, 2, s, 0});
  } else {
    finishStep(s, t);
  }
}

void Executor::finishStep(int s, double t) {
  StepRec& st = steps_[s];
  const int k = st.completed;
  st.completed = k + 1;
  rankFinish_[st.rank] = std::max(rankFinish_[st.rank], t);
  tryStart(s, k + 1, t);
  if (st.next >= 0) tryStart(st.next, k, t);
}

void Executor::startFlow(int x, int k, double t) {
  XferRec& xr = xfers_[x];
  const XferRec& dst = xfers_[xr.match];
  const int srcChip = topo_.chipOfRank(steps_[xr.step].rank);
  const int dstChip = topo_.chipOfRank(steps_[dst.step].rank);
  routeScratch_.clear();
  topo_.routeLinks(srcChip, dstChip, &routeScratch_);
  if (xr.latency < 0) {
    double lat = srcChip == dstChip ? topo_.chip().localLatencyS : 0.0;
    for (int l : routeScratch_) lat += topo_.links()[l].latencyS;
    xr.latency = lat;
  }
  const double bytes = sliceBytes(xr, k);
  if (opts_.trace) sendStart_[x] = t;
  ++flows_;
  useScratch_.clear();
  for (int l : routeScratch_) {
    linkBytes_[l] += bytes;
    if (linkRes_[l] >= 0) useScratch_.push_back({linkRes_[l], 1.0});
  }
  if (dmaRes_[srcChip] >= 0) useScratch_.push_back({dmaRes_[srcChip], 1.0});
  if (reducesOnArrival(dst.kind) && hbmRes_[dstChip] >= 0)
    useScratch_.push_back({hbmRes_[dstChip], topo_.chip().hbmBytesPerReducedByte});
  const int64_t tag = static_cast<int64_t>(x) * loops_ + k;
  if (opts_.mode == Mode::Flow) {
    net_.start(t, useScratch_.data(), static_cast<int>(useScratch_.size()), bytes, tag);
    return;
  }
  // Analytical: the uncontended rate of the path (links, DMA, HBM), no sharing.
  double rate = kInf;
  for (const Use& u : useScratch_) rate = std::min(rate, net_.capacity(u.res) / u.coef);
  for (int l : routeScratch_)
    if (std::isfinite(topo_.links()[l].bwBps))
      linkPeak_[l] = std::max(linkPeak_[l], std::min(1.0, rate / topo_.links()[l].bwBps));
  queue_.push({t + (std::isfinite(rate) ? bytes / rate : 0.0), 0, tag, 0});
}

void Executor::dataDone(int64_t tag, double t) {
  const int x = static_cast<int>(tag / loops_);
  const int k = static_cast<int>(tag % loops_);
  queue_.push({t + xfers_[x].latency, 1, x, k});
}

void Executor::arrival(int x, int k, double t) {
  XferRec& xr = xfers_[x];
  if (out_->trace.size() < opts_.maxTraceEvents && opts_.trace) {
    const StepRec& st = steps_[xr.step];
    const XferRec& d = xfers_[xr.match];
    out_->trace.push_back({st.rank, steps_[d.step].rank, st.channel, st.index, k, sendStart_[x], t,
                           sliceBytes(xr, k), reducesOnArrival(d.kind)});
  } else if (opts_.trace) {
    out_->traceTruncated = true;
  }
  itemDone(xr.step, t);  // sender: delivered
  XferRec& d = xfers_[xr.match];
  ++d.arrived;
  const StepRec& rs = steps_[d.step];
  if (rs.started == k + 1 && rs.completed == k) recvDone(xr.match, k, t);
}

Status Executor::run(Result* out, std::string* error) {
  const auto wall0 = std::chrono::steady_clock::now();
  out_ = out;
  NLCHECK(build(error));
  chooseLoops();
  setupResources();
  if (opts_.trace) sendStart_.assign(xfers_.size(), 0.0);
  const double t0 = opts_.launchOverheadS >= 0 ? opts_.launchOverheadS : topo_.launchOverheadS();
  rankFinish_.assign(plan_.nranks, t0);
  for (int s = 0; s < static_cast<int>(steps_.size()); ++s)
    if (steps_[s].prev < 0) tryStart(s, 0, t0);
  std::vector<int64_t> done;
  net_.solve(t0);
  for (;;) {
    const double tq = queue_.empty() ? kInf : queue_.top().t;
    const double t = std::min(tq, net_.nextFinish());
    if (!std::isfinite(t)) break;
    // Everything due at time t is processed, then the network is solved once for the batch.
    const double limit = t + std::abs(t) * 1e-12;
    for (bool more = true; more;) {
      more = false;
      done.clear();
      net_.popFinished(t, &done);
      for (int64_t tag : done) {
        ++events_;
        dataDone(tag, t);
      }
      while (!queue_.empty() && queue_.top().t <= limit) {
        const Ev e = queue_.top();
        queue_.pop();
        ++events_;
        more = true;
        if (e.type == 0) dataDone(e.a, t);
        else if (e.type == 1) arrival(static_cast<int>(e.a), e.b, t);
        else finishStep(static_cast<int>(e.a), t);
      }
    }
    net_.solve(t);
  }
  for (const StepRec& st : steps_) {
    if (st.completed != loops_) {
      *error = "plan deadlocks: rank " + std::to_string(st.rank) + " channel " +
               std::to_string(st.channel) + " never completes step " + std::to_string(st.index) +
               " (loop " + std::to_string(st.completed) + " of " + std::to_string(loops_) + ")";
      return Status::InvalidArgument;
    }
  }
  out->algorithm = plan_.algorithm;
  out->collective = plan_.collective;
  out->nranks = plan_.nranks;
  out->loops = loops_;
  out->transfers = flows_;
  out->events = events_;
  out->rankFinishS = rankFinish_;
  out->timeS = *std::max_element(rankFinish_.begin(), rankFinish_.end());
  out->links.clear();
  for (size_t l = 0; l < linkBytes_.size(); ++l) {
    if (linkBytes_[l] <= 0) continue;
    const double peak = opts_.mode == Mode::Flow && linkRes_[l] >= 0
                            ? std::min(1.0, net_.peakUtil(linkRes_[l]))
                            : linkPeak_[l];
    out->links.push_back({static_cast<int>(l), linkBytes_[l], peak});
  }
  out->wallS = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  return Status::Success;
}

}  // namespace

Status simulate(const fabric::Topology& topo, const plan::Plan& plan, const Options& opts,
                Result* out, std::string* error) {
  std::string err;
  *out = Result();
  Executor ex(topo, plan, opts);
  const Status s = ex.run(out, &err);
  if (s != Status::Success) {
    if (error) *error = err;
    log::setLastError(err);
    return s;
  }
  const size_t bytes = opts.totalBytes > 0 ? opts.totalBytes : [&] {
    plan::Request req;
    req.collective = plan.collective;
    req.nranks = plan.nranks;
    req.count = plan.count;
    return totalBytes(req, dataTypeSize(opts.dtype));
  }();
  out->bytes = bytes;
  out->algbwGBps = out->timeS > 0 ? static_cast<double>(bytes) / out->timeS / 1e9 : 0;
  out->busbwGBps = out->algbwGBps * busbwFactor(plan.collective, plan.nranks);
  return Status::Success;
}

}  // namespace nlccl::sim
