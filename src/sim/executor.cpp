// Executes a compiled Plan on the fabric model (DESIGN.md 2.1 and 6). Matching, slicing, the loop
// count and the pipelining rule are the compiled form's (plan/compiled.hpp); what is the
// simulator's own is time: steps post all their transfers at once and complete when every
// transfer has arrived (sends: delivered), then run their local ops (ChipEngine::localOpSeconds);
// channels run concurrently; fused receive-and-send transfers forward once their receive has
// arrived.
//
// Flow control (the transport's receive buffer): the bytes a sender has in flight to one receiver
// (on one channel) ahead of the receives it posted never exceed the pair's window
// (Topology::pairWindowBytes). A receive is posted when the receiver reaches its step (the first
// loop starts): from then on every slice of it lands in its destination. A message whose
// receive is posted goes at once; otherwise it sends what fits in the window and the rest once
// its receive is posted (a message larger than the window streams through it as the receiver
// drains it), messages waiting for room in FIFO order.
// A message arrives at its last byte's data done + route latency; a receive posted later
// completes when posted.
//
// A compiled Plan of representatives (CompiledPlan::reduced) runs on the fabric folded by its
// symmetry (quotient.hpp); per-rank and per-link results are expanded to every rank and link.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <queue>

#include "fabric/flow_network.hpp"
#include "sim/quotient.hpp"
#include "sim/simulate.hpp"
#include "util/dtype.hpp"
#include "util/log.hpp"

namespace nlccl::sim {

namespace {

using fabric::FlowNetwork;
using fabric::Use;
constexpr double kInf = std::numeric_limits<double>::infinity();
// findPassiveLinks: chip pairs beyond which the analysis is skipped (its memory grows with them).
constexpr size_t kPassivePairBudget = 4'000'000;
using plan::XferKind;

// A message the receiver reduces on arrival (Message::reduced, RecvReduceCopy included: region =
// src op incoming) charges the receiver's HBM hbmBytesPerReducedByte per byte (read the local
// operand, write the result); links and the sender's DMA see the same bytes either way.

// Per step instance state; the step's structure (rank, channel, neighbours, transfers) is the
// compiled form's. Kept small: a large run holds millions.
struct StepRec {
  double localS = 0;  // local ops of the whole (unsliced) step
  int items = 0;      // completion items: 1 per send / receive, 2 per fused transfer
  int started = 0, completed = 0, pending = 0;
};

struct XferRec {
  double latency = -1;  // route latency (sending side), < 0 until first used
  int arrived = 0;     // receiving side: loops whose data has arrived (arrivals come in order)
};

// Flow control, per message (loops are sent and posted in order) and per pair.
struct MsgRec {
  double eager = 0;   // bytes of waitLoop sent ahead of its receive
  int sent = 0;       // loops handed to the fabric whole
  int waitLoop = -1;  // the loop not yet handed whole: queued, or partly sent (eager > 0)
  int flow = -1;      // flow mode: the flow carrying them while it runs; analytical: readyT_
  int prev = -1, next = -1;  // the pair's FIFO of messages waiting for room
  bool queued = false;
};
struct PairRec {
  double unexpected = 0;  // bytes in flight ahead of posted receives
  int head = -1, tail = -1;
};

class Executor {
 public:
  Executor(const fabric::Topology& topo, const plan::CompiledPlan& cp, const Options& opts)
      : topo_(topo), cp_(cp), opts_(opts), es_(dataTypeSize(opts.dtype)),
        quotient_(topo, cp.symmetry()) {}

  Status run(Result* out, std::string* error);

 private:
  Status build(std::string* error);
  void chooseLoops();
  double sliceBytes(int x, int k) const {
    return static_cast<double>(plan::CompiledPlan::sliceSize(cp_.xfers()[x].count,
                                                             static_cast<size_t>(k),
                                                             static_cast<size_t>(loops_)) *
                               es_);
  }
  /// Bytes of loop k of the message transfer x receives (the sender's count decides: in a
  /// reduced form an image's receive may count an element more or less).
  double recvSliceBytes(int x, int k) const {
    const int m = cp_.xfers()[x].recvs;
    return m < 0 ? sliceBytes(x, k) : sliceBytes(cp_.messages()[m].from, k);
  }
  int rankOf(int x) const { return cp_.steps()[cp_.xfers()[x].step].rank; }
  int linkRes(int l);
  void chipLinks();
  void findPassiveLinks();
  int chipRes(std::vector<int>& res, int chip, double capacity, bool out, double coef);
  int engineRes(int chip);  // ChipEngine::sharesEngine: the chip's one engine
  void tryStart(int s, int k, double t);
  void startStep(int s, int k, double t);
  void recvDone(int x, int k, double t);
  void itemDone(int s, double t);
  void finishStep(int s, double t);
  void ready(int x, int k, double t);
  void posted(int d, double t);
  void drain(int pair, double t);
  void unlink(int m);
  void account(int x, double bytes);
  void routeOf(int x);
  void startFlow(int x, int k, double t, double bytes, double eagerFrom = -1, double eager = 0);
  void sendEager(int m, int k, double free, double t);
  void dataDone(int64_t tag, double t);
  void arrival(int x, int k, double t);
  void expand(Result* out) const;

  struct Ev {
    double t;
    int type;  // 0 data done (tag), 1 arrival (x, k), 2 local ops done (step)
    int b;
    int64_t a;
    bool operator>(const Ev& o) const { return t > o.t; }
  };

  const fabric::Topology& topo_;
  const plan::CompiledPlan& cp_;
  const Options& opts_;
  size_t es_;
  Quotient quotient_;
  int loops_ = 1;
  double window_ = kInf;
  std::vector<StepRec> steps_;
  std::vector<XferRec> xfers_;
  std::vector<MsgRec> msgs_;
  std::vector<PairRec> pairs_;
  std::vector<double> readyT_;  // analytical mode: start times of partly sent messages
  std::vector<double> rankFinish_;
  std::vector<double> rankBytes_;
  std::vector<double> rankBytesIn_;  ///< by the target's representative (classes are equal)
  std::vector<double> sendStart_;  // per transfer, only when tracing
  std::priority_queue<Ev, std::vector<Ev>, std::greater<>> queue_;
  FlowNetwork net_;
  std::vector<int> linkRes_, dmaRes_, hbmRes_;  // -2: not created yet, -1: unlimited
  std::vector<double> linkBytes_, linkPeak_;    // per representative link
  std::vector<double> chipOut_, chipIn_;        // link bandwidth out of / into each chip
  std::vector<char> passiveLink_;               // per link: cannot saturate (findPassiveLinks)
  std::vector<int> routeScratch_;
  std::vector<Use> useScratch_;
  Result* out_ = nullptr;
  int lastFlow_ = -1;  // the flow startFlow started (flow mode)
  size_t events_ = 0;
  size_t flows_ = 0;
};

Status Executor::build(std::string* error) {
  const int p = cp_.nranks();
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
      steps_[s].items += plan::forwards(cp_.xfers()[x].kind) ? 2 : 1;
    // localOpSeconds is linear in the bytes, so the ops of a kind cost their total.
    steps_[s].localS = eng.localOpSeconds(static_cast<double>(si.copyElems * es_), false) +
                       eng.localOpSeconds(static_cast<double>(si.reduceElems * es_), true);
  }
  window_ = opts_.pairWindowBytes >= 0 ? opts_.pairWindowBytes : topo_.pairWindowBytes();
  if (std::isfinite(window_)) {
    msgs_.assign(cp_.messages().size(), {});
    pairs_.assign(static_cast<size_t>(cp_.pairs()), {});
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

int Executor::linkRes(int l) {
  int& r = linkRes_[static_cast<size_t>(l)];
  if (r == -2) {
    const double bw = topo_.links()[static_cast<size_t>(l)].bwBps;
    const bool passive = !passiveLink_.empty() && passiveLink_[static_cast<size_t>(l)];
    r = std::isfinite(bw) ? net_.addResource(bw, passive) : -1;
  }
  return r;
}

void Executor::chipLinks() {
  if (!chipOut_.empty()) return;
  chipOut_.assign(static_cast<size_t>(topo_.numChips()), 0.0);
  chipIn_.assign(static_cast<size_t>(topo_.numChips()), 0.0);
  for (const fabric::Link& l : topo_.links()) {
    if (l.from < topo_.numChips()) chipOut_[static_cast<size_t>(l.from)] += l.bwBps;
    if (l.to < topo_.numChips()) chipIn_[static_cast<size_t>(l.to)] += l.bwBps;
  }
}

// Links no flow of this Plan can saturate. Every byte crossing a link leaves one of the chips
// whose messages use it and enters one of the chips they go to, so its load never exceeds the
// smaller of those chips' summed link bandwidth out (in); at equality those chips' own links
// saturate with it and bind the same flows. Max-min ignores a resource that cannot saturate, so
// such a link is passive: only its load and peak are kept. In a non-blocking switch fabric that
// leaves a flow its two chips' links to share instead of every link of its route.
void Executor::findPassiveLinks() {
  chipLinks();
  std::vector<std::pair<int, int>> pairs;  // (source chip, destination chip)
  pairs.reserve(cp_.messages().size());
  for (const plan::Message& m : cp_.messages()) {
    const int a = topo_.chipOfRank(rankOf(m.from));
    const int b = topo_.chipOfRank(rankOf(m.to));
    if (a != b) pairs.emplace_back(a, b);
  }
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  if (pairs.size() > kPassivePairBudget) return;  // not worth its memory: every link binds
  std::vector<std::pair<int, int>> out, in;  // (link, chip)
  for (const auto& [a, b] : pairs) {
    routeScratch_.clear();
    topo_.routeLinks(a, b, &routeScratch_);
    for (int l : routeScratch_) {
      out.emplace_back(l, a);
      in.emplace_back(l, b);
    }
  }
  const size_t nl = topo_.links().size();
  auto sums = [nl](std::vector<std::pair<int, int>>& v, const std::vector<double>& bw) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    std::vector<double> sum(nl, 0.0);
    for (const auto& [l, c] : v) sum[static_cast<size_t>(l)] += bw[static_cast<size_t>(c)];
    return sum;
  };
  const std::vector<double> outSum = sums(out, chipOut_), inSum = sums(in, chipIn_);
  passiveLink_.assign(nl, 0);
  for (size_t l = 0; l < nl; ++l) {
    const fabric::Link& link = topo_.links()[l];
    // A chip's own links are what the passive ones rely on: they always take part.
    if (link.from < topo_.numChips() || link.to < topo_.numChips()) continue;
    passiveLink_[l] = std::min(outSum[l], inSum[l]) <= link.bwBps * (1 + 1e-12);
  }
}

// A chip's DMA (HBM) can bind only if its flows can together go faster than its engines: with
// one rank per chip every flow leaves (arrives) through one of its links, so when the links'
// bandwidths sum below the engine's capacity it never binds and is left out of the sharing (an
// exact shortcut: max-min ignores a resource that cannot saturate).
int Executor::chipRes(std::vector<int>& res, int chip, double capacity, bool out, double coef) {
  int& r = res[static_cast<size_t>(chip)];
  if (r != -2) return r;
  r = -1;
  if (!std::isfinite(capacity)) return r;
  chipLinks();  // the bandwidth of every chip's links out and in
  const double links = topo_.ranksPerChip() > 1 ? kInf
                       : out                    ? chipOut_[static_cast<size_t>(chip)]
                                                : chipIn_[static_cast<size_t>(chip)];
  if (links * coef >= capacity * (1 - 1e-12)) r = net_.addResource(capacity);
  return r;
}

// A shared engine always takes part: its sends and reductions together may bind where neither
// alone would, so chipRes' shortcut does not apply.
int Executor::engineRes(int chip) {
  int& r = dmaRes_[static_cast<size_t>(chip)];
  if (r < 0) r = net_.addResource(topo_.chip().dmaBps());
  return r;
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
    const XferKind kind = cp_.xfers()[x].kind;
    if (kind == XferKind::Send) {
      if (sliceBytes(x, k) == 0) itemDone(s, t);  // an empty slice is not sent: neither end waits
      else ready(x, k, t);
      continue;
    }
    if (k == 0) posted(x, t);  // the receive is posted when the step is reached
    if (recvSliceBytes(x, k) == 0) {
      itemDone(s, t);
      if (plan::forwards(kind)) itemDone(s, t);
      continue;
    }
    if (xfers_[x].arrived > k) recvDone(x, k, t);
  }
}

void Executor::recvDone(int x, int k, double t) {
  if (plan::forwards(cp_.xfers()[x].kind)) ready(x, k, t);
  itemDone(cp_.xfers()[x].step, t);
}

void Executor::itemDone(int s, double t) {
  StepRec& st = steps_[s];
  if (st.pending > 0 && --st.pending > 0) return;  // items == 0 falls through at once
  const double local = st.localS / loops_;
  if (local > 0) {
    queue_.push({t + local, 2, 0, s});
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

// The sender has loop k of the message transfer x sends ready: it leaves now if its receive is
// posted; otherwise, when nobody waits ahead of it, what fits in the pair's window leaves now and
// the rest waits for the receive; else it queues.
void Executor::ready(int x, int k, double t) {
  if (msgs_.empty()) {
    startFlow(x, k, t, sliceBytes(x, k));
    return;
  }
  const int m = cp_.xfers()[x].sends;
  const plan::Message& msg = cp_.messages()[m];
  MsgRec& mr = msgs_[m];
  if (steps_[cp_.xfers()[msg.to].step].started > 0) {  // its receive is posted
    mr.sent = k + 1;
    startFlow(x, k, t, sliceBytes(x, k));
    return;
  }
  mr.waitLoop = k;
  mr.eager = 0;
  PairRec& pr = pairs_[msg.pair];
  if (pr.head < 0 && pr.unexpected < window_) {
    sendEager(m, k, window_ - pr.unexpected, t);
    return;
  }
  mr.queued = true;
  mr.prev = pr.tail;
  mr.next = -1;
  if (pr.tail >= 0) msgs_[pr.tail].next = m;
  else pr.head = m;
  pr.tail = m;
}

// Loop k of message m (not posted) sends up to `free` bytes ahead of its receive.
void Executor::sendEager(int m, int k, double free, double t) {
  MsgRec& mr = msgs_[m];
  PairRec& pr = pairs_[cp_.messages()[m].pair];
  const int x = cp_.messages()[m].from;
  const double bytes = sliceBytes(x, k);
  if (bytes <= free) {  // all of it
    pr.unexpected += bytes;
    mr.sent = k + 1;
    mr.waitLoop = -1;
    startFlow(x, k, t, bytes);
    return;
  }
  pr.unexpected += free;  // the window's worth; the rest when the receive is posted
  mr.eager = free;
  if (opts_.mode == Mode::Flow) {
    startFlow(x, k, t, free);
    mr.flow = lastFlow_;
  } else {
    mr.flow = static_cast<int>(readyT_.size());  // analytical: when the eager part left
    readyT_.push_back(t);
  }
}

void Executor::unlink(int m) {
  MsgRec& mr = msgs_[m];
  PairRec& pr = pairs_[cp_.messages()[m].pair];
  (mr.prev >= 0 ? msgs_[mr.prev].next : pr.head) = mr.next;
  (mr.next >= 0 ? msgs_[mr.next].prev : pr.tail) = mr.prev;
  mr.prev = mr.next = -1;
  mr.queued = false;
}

// The receiver reaches the step of transfer d: a loop of its message waiting for the receive goes
// on (all of it, or what it had not sent yet); bytes that had left ahead of it give the pair's
// window back.
void Executor::posted(int d, double t) {
  if (msgs_.empty()) return;
  const int m = cp_.xfers()[d].recvs;
  const plan::Message& msg = cp_.messages()[m];
  MsgRec& mr = msgs_[m];
  PairRec& pr = pairs_[msg.pair];
  const int x = msg.from;
  // Loops that left whole ahead of the receive give their bytes back.
  for (int j = 0; j < mr.sent; ++j) pr.unexpected -= sliceBytes(x, j);
  pr.unexpected = std::max(0.0, pr.unexpected);
  if (mr.waitLoop >= 0) {
    const int j = mr.waitLoop;
    const double bytes = sliceBytes(x, j);
    if (mr.queued) unlink(m);
    pr.unexpected = std::max(0.0, pr.unexpected - mr.eager);
    const double rest = bytes - mr.eager;
    if (mr.eager == 0) {
      startFlow(x, j, t, bytes);
    } else if (opts_.mode == Mode::Flow) {
      if (mr.flow >= 0) {  // still sending: it just goes on
        net_.extend(mr.flow, rest, t);
        routeOf(x);
        account(x, rest);
      } else {
        startFlow(x, j, t, rest);
      }
    } else {
      startFlow(x, j, t, bytes, readyT_[static_cast<size_t>(mr.flow)], mr.eager);  // see startFlow
    }
    mr.waitLoop = -1;
    mr.eager = 0;
    mr.flow = -1;
    mr.sent = j + 1;
  } else if (mr.sent == 0) {
    return;
  }
  drain(msg.pair, t);
}

// The pair's waiting messages go, in order, while there is room in its window.
void Executor::drain(int pair, double t) {
  PairRec& pr = pairs_[pair];
  while (pr.head >= 0 && pr.unexpected < window_) {
    const int m = pr.head;
    unlink(m);
    sendEager(m, msgs_[m].waitLoop, window_ - pr.unexpected, t);
  }
}

// Starts a flow of `bytes` of loop k of the message transfer x sends (in flow mode possibly only
// the part that fits in the pair's window, or the rest of it). In analytical mode a message that
// sent `eager` bytes from `eagerFrom` on and the rest once posted (now) is timed here whole, at
// the path's uncontended rate: done at max(eagerFrom + bytes / rate, now + (bytes - eager) / rate).
void Executor::startFlow(int x, int k, double t, double bytes, double eagerFrom, double eager) {
  XferRec& xr = xfers_[x];
  const int srcChip = topo_.chipOfRank(rankOf(x));
  const int dstChip = topo_.chipOfRank(cp_.xfers()[x].target());
  routeOf(x);
  if (xr.latency < 0) {
    double lat = srcChip == dstChip ? topo_.chip().localLatencyS : 0.0;
    for (int l : routeScratch_) lat += topo_.links()[l].latencyS;
    xr.latency = lat;
  }
  if (opts_.trace) sendStart_[x] = eagerFrom >= 0 ? eagerFrom : t;
  ++flows_;
  account(x, bytes);
  useScratch_.clear();
  // Each representative link (chip) stands for its orbit; a flow counts on it `weight` times.
  for (int l : routeScratch_) {
    const int q = quotient_.link(l);
    const double w = quotient_.linkWeight(l);
    if (const int r = linkRes(q); r >= 0) {
      auto it = std::find_if(useScratch_.begin(), useScratch_.end(),
                             [r](const Use& u) { return u.res == r; });
      if (it != useScratch_.end()) it->coef += w;
      else useScratch_.push_back({r, w});
    }
  }
  const fabric::ChipEngine& eng = topo_.chip();
  const double cw = quotient_.chipWeight();
  const bool reduced = cp_.messages()[cp_.xfers()[x].sends].reduced;
  if (eng.sharesEngine()) {  // one resource per chip: the sender's sends, the receiver's reduces
    useScratch_.push_back({engineRes(quotient_.chip(srcChip)), cw});
    if (reduced) {
      const int r = engineRes(quotient_.chip(dstChip));
      const double coef = cw * eng.sharedReduceCost();
      // A representative to its own image (or a chip to itself) in flow mode: one use of both.
      // Analytical mode times each transfer alone, so the two stay separate limits there.
      if (opts_.mode == Mode::Flow && useScratch_.back().res == r)
        useScratch_.back().coef += coef;
      else
        useScratch_.push_back({r, coef});
    }
  } else {
    const int mover = eng.mover(srcChip, dstChip);
    if (const int r = chipRes(dmaRes_, quotient_.chip(mover), eng.dmaBps(), !eng.receiverMoves(),
                              1.0);
        r >= 0)
      useScratch_.push_back({r, cw});
    if (reduced) {
      const double coef = eng.hbmBytesPerReducedByte;
      if (const int r = chipRes(hbmRes_, quotient_.chip(dstChip), eng.hbmBps, false, coef); r >= 0)
        useScratch_.push_back({r, cw * coef});
    }
  }
  const int64_t tag = static_cast<int64_t>(x) * loops_ + k;
  const double cap = topo_.transferCapBps(routeScratch_);  // one port where ports do not stripe
  if (opts_.mode == Mode::Flow) {
    lastFlow_ = net_.start(t, useScratch_.data(), static_cast<int>(useScratch_.size()), bytes, tag,
                           cap);
    return;
  }
  // Analytical: the uncontended rate of the path (links, DMA, HBM, port), no sharing.
  double rate = cap;
  for (const Use& u : useScratch_) rate = std::min(rate, net_.capacity(u.res) / u.coef);
  for (int l : routeScratch_) {
    const double bw = topo_.links()[l].bwBps;
    if (std::isfinite(bw)) {
      const int q = quotient_.link(l);
      linkPeak_[q] = std::max(linkPeak_[q], std::min(1.0, rate * quotient_.linkWeight(l) / bw));
    }
  }
  double done = t + (std::isfinite(rate) ? bytes / rate : 0.0);
  if (eagerFrom >= 0 && std::isfinite(rate))
    done = std::max(eagerFrom + bytes / rate, t + (bytes - eager) / rate);
  queue_.push({done, 0, 0, tag});
}

void Executor::routeOf(int x) {
  routeScratch_.clear();
  topo_.routeLinks(topo_.chipOfRank(rankOf(x)), topo_.chipOfRank(cp_.xfers()[x].target()),
                   &routeScratch_);
}

// Bytes of transfer x on its rank and on every link of its route (routeScratch_: routeOf); a
// representative link carries them `weight` times.
void Executor::account(int x, double bytes) {
  rankBytes_[rankOf(x)] += bytes;
  rankBytesIn_[cp_.symmetry().rep(cp_.xfers()[x].target())] += bytes;
  for (int l : routeScratch_) linkBytes_[quotient_.link(l)] += bytes * quotient_.linkWeight(l);
}

void Executor::dataDone(int64_t tag, double t) {
  const int x = static_cast<int>(tag / loops_);
  const int k = static_cast<int>(tag % loops_);
  if (!msgs_.empty()) {
    MsgRec& mr = msgs_[cp_.xfers()[x].sends];
    if (mr.waitLoop == k && mr.eager > 0) {  // only what fitted in the window: the rest waits
      mr.flow = -1;
      return;
    }
  }
  queue_.push({t + xfers_[x].latency, 1, k, x});
}

void Executor::arrival(int x, int k, double t) {
  const int d = cp_.messages()[cp_.xfers()[x].sends].to;
  if (out_->trace.size() < opts_.maxTraceEvents && opts_.trace) {
    const plan::StepInfo& st = cp_.steps()[cp_.xfers()[x].step];
    out_->trace.push_back({st.rank, cp_.xfers()[x].target(), st.channel, st.index, k,
                           sendStart_[x], t, sliceBytes(x, k),
                           cp_.messages()[cp_.xfers()[x].sends].reduced});
  } else if (opts_.trace) {
    out_->traceTruncated = true;
  }
  itemDone(cp_.xfers()[x].step, t);  // sender: delivered
  xfers_[d].arrived = k + 1;
  const StepRec& rs = steps_[cp_.xfers()[d].step];
  if (rs.started == k + 1 && rs.completed == k) recvDone(d, k, t);
}

// Every rank of a class finishes when its representative does; every link of an orbit carries
// what its representative does.
void Executor::expand(Result* out) const {
  const plan::Symmetry& sym = cp_.symmetry();
  const int p = cp_.nranks();
  out->rankFinishS.resize(static_cast<size_t>(p));
  out->rankBytesSent.resize(static_cast<size_t>(p));
  out->rankBytesReceived.resize(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r) {
    const int rep = sym.rep(r);
    out->rankFinishS[static_cast<size_t>(r)] = rankFinish_[static_cast<size_t>(rep)];
    out->rankBytesSent[static_cast<size_t>(r)] = rankBytes_[static_cast<size_t>(rep)];
    out->rankBytesReceived[static_cast<size_t>(r)] = rankBytesIn_[static_cast<size_t>(rep)];
  }
  out->links.clear();
  for (size_t l = 0; l < topo_.links().size(); ++l) {
    const int q = quotient_.link(static_cast<int>(l));
    if (linkBytes_[q] <= 0) continue;
    const int res = linkRes_[q];
    const double peak = opts_.mode == Mode::Flow && res >= 0 ? std::min(1.0, net_.peakUtil(res))
                                                             : linkPeak_[q];
    out->links.push_back({static_cast<int>(l), linkBytes_[q], peak});
  }
}

Status Executor::run(Result* out, std::string* error) {
  const auto wall0 = std::chrono::steady_clock::now();
  out_ = out;
  NLCHECK(build(error));
  chooseLoops();
  linkRes_.assign(topo_.links().size(), -2);
  if (opts_.mode == Mode::Flow && !quotient_.folds()) findPassiveLinks();
  dmaRes_.assign(static_cast<size_t>(topo_.numChips()), -2);
  hbmRes_.assign(static_cast<size_t>(topo_.numChips()), -2);
  linkBytes_.assign(topo_.links().size(), 0);
  linkPeak_.assign(topo_.links().size(), 0);
  if (opts_.trace) sendStart_.assign(xfers_.size(), 0.0);
  const double t0 = opts_.launchOverheadS >= 0 ? opts_.launchOverheadS : topo_.launchOverheadS();
  rankFinish_.assign(static_cast<size_t>(cp_.nranks()), t0);
  rankBytes_.assign(static_cast<size_t>(cp_.nranks()), 0.0);
  rankBytesIn_.assign(static_cast<size_t>(cp_.nranks()), 0.0);
  for (int s = 0; s < static_cast<int>(steps_.size()); ++s)
    if (cp_.steps()[s].prev < 0) tryStart(s, 0, t0);
  std::vector<int64_t> done;
  net_.setPrecision(opts_.mode == Mode::Flow ? opts_.precision : 0);
  net_.solve(t0);
  for (;;) {
    const double tq = queue_.empty() ? kInf : queue_.top().t;
    const double tf = net_.nextFinish();
    double t = std::min(tq, tf);
    if (!std::isfinite(t)) break;
    // Everything due at time t is processed, then the network is solved once for the batch.
    // Finishes within the precision join the batch, which then happens at the last of them
    // (never past the next queued event).
    done.clear();
    if (tf <= tq) t = net_.popFinished(t, &done, tq);
    const double limit = t + std::abs(t) * 1e-12;
    for (bool more = true; more;) {
      more = false;
      if (done.empty()) net_.popFinished(t, &done);
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
      done.clear();
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
  out->algorithm = cp_.algorithm();
  out->collective = cp_.collective();
  out->nranks = cp_.nranks();
  out->loops = loops_;
  out->transfers = flows_;
  out->events = events_;
  out->solves = net_.stats().solves;
  out->simulatedRanks = static_cast<int>(cp_.symmetry().reps(cp_.nranks()).size());
  expand(out);
  out->timeS = *std::max_element(rankFinish_.begin(), rankFinish_.end());
  out->wallS = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  const fabric::FlowNetwork::Stats& ns = net_.stats();
  INFO(log::kSim, "simulated %s %s on %d ranks (%d simulated, %s): %d loops, %zu transfers, "
       "%zu events, %zu solves (%zu fillings, %zu flows re-rated, %zu retried), %.6f s modelled "
       "in %.3f s", cp_.algorithm().c_str(), collectiveName(cp_.collective()), cp_.nranks(),
       out->simulatedRanks, modeName(opts_.mode), loops_, flows_, events_, ns.solves, ns.fills,
       ns.flowsFilled, ns.retries, out->timeS, out->wallS);
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
  const size_t bytes = opts.totalBytes > 0 ? opts.totalBytes : [&] {
    plan::Request req;
    req.collective = cp.collective();
    req.nranks = cp.nranks();
    req.count = cp.count();
    return totalBytes(req, dataTypeSize(opts.dtype));
  }();
  out->bytes = bytes;
  out->algbwGBps = out->timeS > 0 ? static_cast<double>(bytes) / out->timeS / 1e9 : 0;
  out->busbwGBps = out->algbwGBps * busbwFactor(cp.collective(), cp.nranks());
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
