// Executes a compiled Plan on the fabric model (DESIGN.md 2.1 and 6). Matching, slicing, the loop
// count and the pipelining rule are the compiled form's (plan/compiled.hpp); what is the
// simulator's own is time: steps post all their transfers at once and complete when every
// transfer has arrived (sends: delivered), then run their local ops (ChipEngine::localOpSeconds);
// channels run concurrently; fused receive-and-send transfers forward once their receive has
// arrived. Sends are eager: a message arrives at max(data done + route latency) whether or not
// the receive is posted, and a receive posted later completes when posted.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <queue>

#include "fabric/flow_network.hpp"
#include "sim/simulate.hpp"
#include "util/dtype.hpp"
#include "util/log.hpp"

namespace nlccl::sim {

namespace {

using fabric::FlowNetwork;
using fabric::Use;
constexpr double kInf = std::numeric_limits<double>::infinity();
using plan::XferKind;

// A message the receiver reduces on arrival (Message::reduced, RecvReduceCopy included: region =
// src op incoming) charges the receiver's HBM hbmBytesPerReducedByte per byte (read the local
// operand, write the result); links and the sender's DMA see the same bytes either way.

// Per step instance state; the step's structure (rank, channel, neighbours, transfers) is the
// compiled form's.
struct StepRec {
  int items = 0;       // completion items: 1 per send / receive, 2 per fused transfer
  double localS = 0;   // local ops of the whole (unsliced) step
  int started = 0, completed = 0, pending = 0;
};

// Kept small: at 9,216 ranks there are millions and the simulator is memory bound.
struct XferRec {
  double latency = -1;  // route latency (sending side), < 0 until first used
  int arrived = 0;      // receiving side: loops whose data has arrived (arrivals come in order)
};

class Executor {
 public:
  Executor(const fabric::Topology& topo, const plan::CompiledPlan& cp, const Options& opts)
      : topo_(topo), cp_(cp), plan_(cp.plan()), opts_(opts), es_(dataTypeSize(opts.dtype)) {}

  Status run(Result* out, std::string* error);

 private:
  Status build(std::string* error);
  void chooseLoops();
  void setupResources();
  double sliceBytes(int x, int k) const {
    return static_cast<double>(plan::CompiledPlan::sliceSize(cp_.transfer(x).region.count,
                                                             static_cast<size_t>(k),
                                                             static_cast<size_t>(loops_)) *
                               es_);
  }
  int rankOf(int x) const { return cp_.steps()[cp_.xfers()[x].step].rank; }
  /// The receiving transfer of the message transfer x sends.
  int receiverOf(int x) const { return cp_.messages()[cp_.xfers()[x].sends].to; }
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
  const plan::CompiledPlan& cp_;
  const plan::Plan& plan_;
  const Options& opts_;
  size_t es_;
  int loops_ = 1;
  std::vector<StepRec> steps_;
  std::vector<XferRec> xfers_;
  std::vector<double> rankFinish_;
  std::vector<double> rankBytes_;
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
  if (p > topo_.numRanks()) {
    *error = "plan has " + std::to_string(p) + " ranks but topology " + topo_.name() + " holds " +
             std::to_string(topo_.numRanks());
    return Status::InvalidArgument;
  }
  steps_.assign(cp_.steps().size(), {});
  xfers_.assign(cp_.xfers().size(), {});
  const fabric::ChipEngine& eng = topo_.chip();
  for (size_t s = 0; s < steps_.size(); ++s) {
    const plan::StepInfo& si = cp_.steps()[s];
    for (int x = si.firstXfer; x < si.firstXfer + si.numXfers; ++x)
      steps_[s].items += plan::forwards(cp_.transfer(x).kind) ? 2 : 1;
    for (const plan::LocalOp& op : cp_.step(static_cast<int>(s)).locals)
      steps_[s].localS += eng.localOpSeconds(static_cast<double>(op.src.count * es_),
                                             op.kind == plan::LocalKind::Reduce);
  }
  return Status::Success;
}

void Executor::chooseLoops() {
  const int64_t chunk = opts_.chunkBytes < 0 ? static_cast<int64_t>(topo_.chunkBytes())
                                             : opts_.chunkBytes;
  // The simulator's own cap: no more simulated transfers than its budget.
  const size_t budget = xfers_.empty() ? 1 : opts_.transferBudget / xfers_.size();
  const int cap = static_cast<int>(std::max<size_t>(
      1, std::min<size_t>(budget, static_cast<size_t>(std::max(1, opts_.maxLoops)))));
  loops_ = cp_.loops(chunk > 0 ? static_cast<size_t>(chunk) : 0, es_, cap);
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
  if (k >= loops_ || st.started != k) return;
  // The compiled form's pipelining rule, read off the steps' completed counts.
  std::pair<int, int> pred[2];
  for (int i = 0, n = cp_.predecessors(s, k, pred); i < n; ++i)
    if (steps_[pred[i].first].completed <= pred[i].second) return;
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
  const plan::StepInfo& si = cp_.steps()[s];
  for (int x = si.firstXfer; x < si.firstXfer + si.numXfers; ++x) {
    const XferKind kind = cp_.transfer(x).kind;
    if (sliceBytes(x, k) == 0) {  // an empty slice is not sent: neither end waits
      itemDone(s, t);
      if (plan::forwards(kind)) itemDone(s, t);
    } else if (kind == XferKind::Send) {
      startFlow(x, k, t);
    } else if (xfers_[x].arrived > k) {
      recvDone(x, k, t);
    }
  }
}

void Executor::recvDone(int x, int k, double t) {
  if (plan::forwards(cp_.transfer(x).kind)) startFlow(x, k, t);
  itemDone(cp_.xfers()[x].step, t);
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
  const plan::StepInfo& si = cp_.steps()[s];
  rankFinish_[si.rank] = std::max(rankFinish_[si.rank], t);
  tryStart(s, k + 1, t);
  if (si.next >= 0) tryStart(si.next, k, t);
}

void Executor::startFlow(int x, int k, double t) {
  XferRec& xr = xfers_[x];
  const int dst = receiverOf(x);
  const int srcChip = topo_.chipOfRank(rankOf(x));
  const int dstChip = topo_.chipOfRank(rankOf(dst));
  routeScratch_.clear();
  topo_.routeLinks(srcChip, dstChip, &routeScratch_);
  if (xr.latency < 0) {
    double lat = srcChip == dstChip ? topo_.chip().localLatencyS : 0.0;
    for (int l : routeScratch_) lat += topo_.links()[l].latencyS;
    xr.latency = lat;
  }
  const double bytes = sliceBytes(x, k);
  if (opts_.trace) sendStart_[x] = t;
  ++flows_;
  rankBytes_[rankOf(x)] += bytes;
  useScratch_.clear();
  for (int l : routeScratch_) {
    linkBytes_[l] += bytes;
    if (linkRes_[l] >= 0) useScratch_.push_back({linkRes_[l], 1.0});
  }
  if (dmaRes_[srcChip] >= 0) useScratch_.push_back({dmaRes_[srcChip], 1.0});
  if (cp_.messages()[cp_.xfers()[x].sends].reduced && hbmRes_[dstChip] >= 0)
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
  const int d = receiverOf(x);
  if (out_->trace.size() < opts_.maxTraceEvents && opts_.trace) {
    const plan::StepInfo& st = cp_.steps()[cp_.xfers()[x].step];
    out_->trace.push_back({st.rank, rankOf(d), st.channel, st.index, k, sendStart_[x], t,
                           sliceBytes(x, k), cp_.messages()[cp_.xfers()[x].sends].reduced});
  } else if (opts_.trace) {
    out_->traceTruncated = true;
  }
  itemDone(cp_.xfers()[x].step, t);  // sender: delivered
  xfers_[d].arrived = k + 1;
  const StepRec& rs = steps_[cp_.xfers()[d].step];
  if (rs.started == k + 1 && rs.completed == k) recvDone(d, k, t);
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
  rankBytes_.assign(plan_.nranks, 0.0);
  for (int s = 0; s < static_cast<int>(steps_.size()); ++s)
    if (cp_.steps()[s].prev < 0) tryStart(s, 0, t0);
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
  for (size_t s = 0; s < steps_.size(); ++s) {
    const StepRec& st = steps_[s];
    const plan::StepInfo& si = cp_.steps()[s];
    if (st.completed != loops_) {
      *error = "plan deadlocks: rank " + std::to_string(si.rank) + " channel " +
               std::to_string(si.channel) + " never completes step " + std::to_string(si.index) +
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
  out->rankBytesSent = rankBytes_;
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
  INFO(log::kSim, "simulated %s %s on %d ranks (%s): %d loops, %zu transfers, %zu events, %.6f s "
       "modelled in %.3f s", plan_.algorithm.c_str(), collectiveName(plan_.collective),
       plan_.nranks, modeName(opts_.mode), loops_, flows_, events_, out->timeS, out->wallS);
  return Status::Success;
}

}  // namespace

Status simulate(const fabric::Topology& topo, const plan::CompiledPlan& cp, const Options& opts,
                Result* out, std::string* error) {
  std::string err;
  *out = Result();
  Executor ex(topo, cp, opts);
  const Status s = ex.run(out, &err);
  if (s != Status::Success) {
    if (error) *error = err;
    return s;
  }
  const plan::Plan& plan = cp.plan();
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

Status simulate(const fabric::Topology& topo, const plan::Plan& plan, const Options& opts,
                Result* out, std::string* error) {
  std::shared_ptr<const plan::CompiledPlan> cp;
  std::shared_ptr<const plan::Plan> borrowed(&plan, [](const plan::Plan*) {});
  NLCHECK(plan::CompiledPlan::compile(borrowed, &cp, error));
  return simulate(topo, *cp, opts, out, error);
}

}  // namespace nlccl::sim
