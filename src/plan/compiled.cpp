#include "plan/compiled.hpp"

#include <algorithm>

#include "util/log.hpp"

namespace nlccl::plan {

namespace {

/// One end of a message in program order, keyed by (channel, src, dst) as the receiver sees it.
struct End {
  uint64_t key;
  int xfer;
  bool forward;
  bool operator<(const End& o) const { return key < o.key; }
};

}  // namespace

/// Compiles rank programs one by one into a CompiledPlan (the rules of compiled.hpp), then matches
/// their messages. Keeps no pointer into the programs unless the caller keeps the Plan alive.
class Compiler {
 public:
  Compiler(CompiledPlan* out, std::string* error) : c_(*out), p_(out->nranks_), error_(error) {}

  /// Appends rank r's steps and transfers and records their message ends. `keepPointers` stores
  /// the steps' addresses (compile(): the Plan stays alive).
  Status addRank(int r, const RankPlan& rp, bool keepPointers);
  /// Ranks not compiled get an empty step range; call once every compiled rank was added.
  void closeRanks();
  /// Matches the recorded ends in FIFO order per key (sends mapped through the symmetry).
  Status match(CompileReport* report);
  /// Copies what the compiled form keeps of a Plan's header.
  static void header(CompiledPlan* c, const Plan& plan) {
    c->collective_ = plan.collective;
    c->algorithm_ = plan.algorithm;
    c->count_ = plan.count;
    c->root_ = plan.root;
    c->pipelinable_ = plan.pipelinable;
  }

 private:
  Status fail(const std::string& msg) {
    if (error_) *error_ = msg;
    return Status::InvalidArgument;
  }
  std::string where(const StepInfo& s) const {
    return "rank " + std::to_string(s.rank) + " channel " + std::to_string(s.channel) + " step " +
           std::to_string(s.index);
  }
  std::string describe(const End& e) const;
  uint64_t key(int channel, int src, int dst) const {
    return (static_cast<uint64_t>(channel) * static_cast<uint64_t>(p_) +
            static_cast<uint64_t>(src)) *
               static_cast<uint64_t>(p_) +
           static_cast<uint64_t>(dst);
  }
  /// The key of a message from `src` to `dst` as its receiver's representative sees it.
  uint64_t sendKey(int channel, int src, int dst) const {
    const Symmetry& sym = c_.symmetry_;
    return sym.trivial() ? key(channel, src, dst)
                         : key(channel, sym.relative(src, dst), sym.rep(dst));
  }

  CompiledPlan& c_;
  int p_;
  std::string* error_;
  std::vector<End> sends_, recvs_;
  int nextRank_ = 0;  // rankFirst_ is filled up to here
};

std::string Compiler::describe(const End& e) const {
  const XferInfo& t = c_.xfers_[static_cast<size_t>(e.xfer)];
  const StepInfo& s = c_.steps_[static_cast<size_t>(t.step)];
  std::string what = e.forward ? "forwarding to rank " + std::to_string(t.next)
                               : std::string(receives(t.kind) ? "from" : "to") + " rank " +
                                     std::to_string(t.peer);
  return where(s) + " transfer " + std::to_string(e.xfer - s.firstXfer) + " (" +
         xferKindName(t.kind) + " " + what + ", " + std::to_string(t.count) + " elements)";
}

Status Compiler::addRank(int r, const RankPlan& rp, bool keepPointers) {
  auto& rankFirst = c_.rankFirst_;
  while (nextRank_ <= r) rankFirst[static_cast<size_t>(nextRank_++)] = static_cast<int>(c_.steps_.size());
  const auto& chans = rp.channels;
  for (int ch = 0; ch < static_cast<int>(chans.size()); ++ch) {
    int prev = -1;
    for (int i = 0; i < static_cast<int>(chans[ch].steps.size()); ++i) {
      const Step& st = chans[ch].steps[i];
      const int sid = static_cast<int>(c_.steps_.size());
      StepInfo info{r, ch, i, prev, -1, static_cast<int>(c_.xfers_.size()),
                    static_cast<int>(st.transfers.size())};
      for (const LocalOp& op : st.locals)
        (op.kind == LocalKind::Reduce ? info.reduceElems : info.copyElems) += op.src.count;
      for (const Transfer& t : st.transfers) info.numSends += t.kind == XferKind::Send;
      if (prev >= 0) c_.steps_[static_cast<size_t>(prev)].next = sid;
      c_.steps_.push_back(info);
      if (keepPointers) c_.stepPtr_.push_back(&st);
      for (size_t x = 0; x < st.transfers.size(); ++x) {
        const Transfer& t = st.transfers[x];
        const std::string what = " transfer " + std::to_string(x) + " (" + xferKindName(t.kind) + ")";
        if (t.peer < 0 || t.peer >= p_ || t.peer == r)
          return fail(where(info) + ":" + what + " has peer " + std::to_string(t.peer));
        if (forwards(t.kind) && (t.next < 0 || t.next >= p_ || t.next == r))
          return fail(where(info) + ":" + what + " forwards to " + std::to_string(t.next));
        const int xid = static_cast<int>(c_.xfers_.size());
        XferInfo xi;
        xi.count = t.region.count;
        xi.step = sid;
        xi.peer = t.peer;
        xi.next = forwards(t.kind) ? t.next : -1;
        xi.kind = t.kind;
        c_.xfers_.push_back(xi);
        c_.maxTransferCount_ = std::max(c_.maxTransferCount_, t.region.count);
        if (t.kind == XferKind::Send) sends_.push_back({sendKey(ch, r, t.peer), xid, false});
        else recvs_.push_back({key(ch, t.peer, r), xid, false});
      }
      if (st.transfers.size() == 2) {  // an exchange pair (XferInfo::paired)?
        const Transfer& a = st.transfers[0];
        const Transfer& b = st.transfers[1];
        if (a.kind == XferKind::Send && b.kind == XferKind::RecvReduceCopy && a.peer == b.peer &&
            a.region == b.src && !(b.region == b.src)) {
          c_.xfers_[static_cast<size_t>(info.firstXfer)].paired = info.firstXfer + 1;
          c_.xfers_[static_cast<size_t>(info.firstXfer) + 1].paired = info.firstXfer;
        }
      }
      // Forwards follow the step's plain sends; two to one rank need receives from one peer.
      for (size_t x = 0; x < st.transfers.size(); ++x) {
        const Transfer& t = st.transfers[x];
        if (!forwards(t.kind)) continue;
        for (size_t y = 0; y < x; ++y) {
          const Transfer& u = st.transfers[y];
          if (forwards(u.kind) && u.next == t.next && u.peer != t.peer)
            return fail(where(info) + ": transfers " + std::to_string(y) + " and " +
                        std::to_string(x) + " both forward to rank " + std::to_string(t.next) +
                        " what they receive from ranks " + std::to_string(u.peer) + " and " +
                        std::to_string(t.peer) + ": their order is not defined");
        }
        sends_.push_back({sendKey(ch, r, t.next), info.firstXfer + static_cast<int>(x), true});
      }
      prev = sid;
    }
  }
  return Status::Success;
}

void Compiler::closeRanks() {
  while (nextRank_ <= p_) c_.rankFirst_[static_cast<size_t>(nextRank_++)] = static_cast<int>(c_.steps_.size());
}

Status Compiler::match(CompileReport* report) {
  // Stable: ends of one key keep their program order (a sender's distinct keys map to distinct
  // keys under the symmetry, so its FIFO order survives the mapping).
  std::stable_sort(sends_.begin(), sends_.end());
  std::stable_sort(recvs_.begin(), recvs_.end());
  const bool tolerant = !c_.symmetry_.trivial();
  auto& messages = c_.messages_;
  messages.reserve(std::min(sends_.size(), recvs_.size()));
  size_t i = 0, j = 0;
  while (i < sends_.size() || j < recvs_.size()) {
    const uint64_t k = i < sends_.size() && (j >= recvs_.size() || sends_[i].key <= recvs_[j].key)
                           ? sends_[i].key
                           : recvs_[j].key;
    size_t i1 = i, j1 = j;
    while (i1 < sends_.size() && sends_[i1].key == k) ++i1;
    while (j1 < recvs_.size() && recvs_[j1].key == k) ++j1;
    const uint64_t pp = static_cast<uint64_t>(p_);
    const int src = static_cast<int>(k / pp % pp), dst = static_cast<int>(k % pp);
    const int ch = static_cast<int>(k / pp / pp);
    const int pair = c_.pairs_++;
    for (size_t m = 0; m < std::min(i1 - i, j1 - j); ++m) {
      const End& s = sends_[i + m];
      const End& r = recvs_[j + m];
      const XferInfo& st = c_.xfers_[static_cast<size_t>(s.xfer)];
      XferInfo& rt = c_.xfers_[static_cast<size_t>(r.xfer)];
      if (st.count != rt.count) {
        if (!tolerant)
          return fail(describe(s) + " is matched (FIFO) by " + describe(r) + ": sizes differ");
        if (report) {
          ++report->countMismatches;
          report->maxCountDifference = std::max(
              report->maxCountDifference, st.count > rt.count ? st.count - rt.count : rt.count - st.count);
        }
      }
      const int id = static_cast<int>(messages.size());
      messages.push_back({s.xfer, r.xfer, pair, s.forward, reducesOnArrival(rt.kind)});
      c_.xfers_[static_cast<size_t>(s.xfer)].sends = id;
      rt.recvs = id;
    }
    const std::string seen = tolerant ? " (as rank " + std::to_string(dst) + "'s class sees it)" : "";
    const std::string pairText = " (rank " + std::to_string(src) + " posts " +
                                 std::to_string(i1 - i) + " sends to rank " + std::to_string(dst) +
                                 " on channel " + std::to_string(ch) + ", rank " +
                                 std::to_string(dst) + " posts " + std::to_string(j1 - j) +
                                 " receives from it)" + seen;
    if (i1 - i > j1 - j)
      return fail("unmatched transfers: " + describe(sends_[i + (j1 - j)]) +
                  " has no matching receive" + pairText);
    if (j1 - j > i1 - i)
      return fail("unmatched transfers: " + describe(recvs_[j + (i1 - i)]) +
                  " has no matching send" + pairText);
    i = i1;
    j = j1;
  }
  sends_ = {};
  recvs_ = {};
  return Status::Success;
}

Status CompiledPlan::compile(std::shared_ptr<const Plan> plan,
                             std::shared_ptr<const CompiledPlan>* out, std::string* error) {
  auto c = std::make_shared<CompiledPlan>();
  c->plan_ = std::move(plan);
  const Plan& pl = *c->plan_;
  const int p = pl.nranks;
  if (p < 1 || static_cast<int>(pl.ranks.size()) != p) {
    if (error)
      *error = "plan is for " + std::to_string(p) + " ranks with " +
               std::to_string(pl.ranks.size()) + " programs";
    return Status::InvalidArgument;
  }
  if (!pl.built.empty()) {
    if (error) *error = "plan is partial (built for some ranks only): use compileRanks";
    return Status::InvalidArgument;
  }
  c->nranks_ = p;
  Compiler::header(c.get(), pl);
  size_t nSteps = 0, nXfers = 0;
  for (const RankPlan& rp : pl.ranks)
    for (const Channel& ch : rp.channels) {
      nSteps += ch.steps.size();
      for (const Step& st : ch.steps) nXfers += st.transfers.size();
    }
  c->steps_.reserve(nSteps);
  c->stepPtr_.reserve(nSteps);
  c->xfers_.reserve(nXfers);
  c->rankFirst_.assign(static_cast<size_t>(p) + 1, 0);
  Compiler comp(c.get(), error);
  for (int r = 0; r < p; ++r) NLCHECK(comp.addRank(r, pl.ranks[static_cast<size_t>(r)], true));
  comp.closeRanks();
  NLCHECK(comp.match(nullptr));  // a malformed Plan: the caller decides how to report it
  *out = std::move(c);
  return Status::Success;
}

Status CompiledPlan::compileRanks(int nranks, const Symmetry& sym, const RankBuilder& build,
                                  size_t batch, std::shared_ptr<const CompiledPlan>* out,
                                  std::string* error, CompileReport* report) {
  if (nranks < 1) {
    if (error) *error = "plan is for " + std::to_string(nranks) + " ranks";
    return Status::InvalidArgument;
  }
  auto c = std::make_shared<CompiledPlan>();
  c->nranks_ = nranks;
  c->symmetry_ = sym;
  c->rankFirst_.assign(static_cast<size_t>(nranks) + 1, 0);
  const std::vector<int> ranks = sym.reps(nranks);
  Compiler comp(c.get(), error);
  batch = std::max<size_t>(batch, 1);
  for (size_t b = 0; b < ranks.size(); b += batch) {
    const std::vector<int> these(ranks.begin() + static_cast<ptrdiff_t>(b),
                                 ranks.begin() + static_cast<ptrdiff_t>(std::min(ranks.size(), b + batch)));
    Plan part;
    NLCHECK(build(these, &part, error));
    if (part.nranks != nranks || static_cast<int>(part.ranks.size()) != nranks) {
      if (error) *error = "builder returned a plan for " + std::to_string(part.nranks) + " ranks";
      return Status::InvalidArgument;
    }
    if (b == 0) Compiler::header(c.get(), part);
    else if (part.pipelinable != c->pipelinable_) {
      if (error) *error = "builder returned plans that disagree on pipelining";
      return Status::InvalidArgument;
    }
    for (int r : these) NLCHECK(comp.addRank(r, part.ranks[static_cast<size_t>(r)], false));
  }
  comp.closeRanks();
  NLCHECK(comp.match(report));
  c->steps_.shrink_to_fit();
  c->xfers_.shrink_to_fit();
  *out = std::move(c);
  return Status::Success;
}

Status compile(Plan plan, std::shared_ptr<const CompiledPlan>* out, std::string* error) {
  return CompiledPlan::compile(std::make_shared<const Plan>(std::move(plan)), out, error);
}

int CompiledPlan::loops(size_t sliceBytes, size_t elemSize, int maxLoops) const {
  if (!pipelinable_ || sliceBytes == 0 || maxLoops <= 1) return 1;
  const size_t want = (maxTransferCount_ * elemSize + sliceBytes - 1) / sliceBytes;
  return static_cast<int>(std::clamp<size_t>(want, 1, static_cast<size_t>(maxLoops)));
}

size_t CompiledPlan::messagesSent(int rank) const {
  size_t n = 0;
  auto [a, b] = rankSteps(rank);
  for (int s = a; s < b; ++s)
    for (int x = steps_[s].firstXfer; x < steps_[s].firstXfer + steps_[s].numXfers; ++x)
      if (xfers_[x].sends >= 0) ++n;
  return n;
}

}  // namespace nlccl::plan
