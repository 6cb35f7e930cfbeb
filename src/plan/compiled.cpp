#include "plan/compiled.hpp"

#include <algorithm>

namespace nlccl::plan {

namespace {

/// One end of a message in program order, keyed by (channel, src, dst).
struct End {
  uint64_t key;
  int xfer;
  bool forward;
  bool operator<(const End& o) const { return key < o.key; }
};

class Compiler {
 public:
  Compiler(const Plan& plan, std::string* error)
      : plan_(plan), p_(plan.nranks), error_(error) {}

  Status run(std::vector<StepInfo>* steps, std::vector<const Step*>* stepPtr,
             std::vector<XferInfo>* xfers, std::vector<Message>* messages,
             std::vector<int>* rankFirst, size_t* maxCount);

 private:
  Status fail(const std::string& msg) {
    if (error_) *error_ = msg;
    return Status::InvalidArgument;
  }
  std::string where(const StepInfo& s) const {
    return "rank " + std::to_string(s.rank) + " channel " + std::to_string(s.channel) + " step " +
           std::to_string(s.index);
  }
  std::string describe(const std::vector<StepInfo>& steps, const std::vector<XferInfo>& xfers,
                       const End& e) const;
  uint64_t key(int channel, int src, int dst) const {
    return (static_cast<uint64_t>(channel) * static_cast<uint64_t>(p_) +
            static_cast<uint64_t>(src)) *
               static_cast<uint64_t>(p_) +
           static_cast<uint64_t>(dst);
  }
  const Transfer& transferOf(const std::vector<StepInfo>& steps, const std::vector<XferInfo>& xfers,
                             int x) const {
    const XferInfo& xi = xfers[static_cast<size_t>(x)];
    const StepInfo& si = steps[static_cast<size_t>(xi.step)];
    return plan_.ranks[si.rank].channels[si.channel].steps[si.index].transfers[x - si.firstXfer];
  }

  const Plan& plan_;
  int p_;
  std::string* error_;
};

std::string Compiler::describe(const std::vector<StepInfo>& steps,
                               const std::vector<XferInfo>& xfers, const End& e) const {
  const Transfer& t = transferOf(steps, xfers, e.xfer);
  const StepInfo& s = steps[xfers[e.xfer].step];
  std::string what = e.forward ? "forwarding to rank " + std::to_string(t.next)
                               : std::string(receives(t.kind) ? "from" : "to") + " rank " +
                                     std::to_string(t.peer);
  return where(s) + " transfer " + std::to_string(e.xfer - s.firstXfer) + " (" +
         xferKindName(t.kind) + " " + what + ", " + std::to_string(t.region.count) + " elements)";
}

Status Compiler::run(std::vector<StepInfo>* steps, std::vector<const Step*>* stepPtr,
                     std::vector<XferInfo>* xfers, std::vector<Message>* messages,
                     std::vector<int>* rankFirst, size_t* maxCount) {
  if (p_ < 1 || static_cast<int>(plan_.ranks.size()) != p_)
    return fail("plan is for " + std::to_string(p_) + " ranks with " +
                std::to_string(plan_.ranks.size()) + " programs");
  size_t nSteps = 0, nXfers = 0;
  for (const RankPlan& rp : plan_.ranks)
    for (const Channel& ch : rp.channels) {
      nSteps += ch.steps.size();
      for (const Step& st : ch.steps) nXfers += st.transfers.size();
    }
  steps->reserve(nSteps);
  stepPtr->reserve(nSteps);
  xfers->reserve(nXfers);
  rankFirst->assign(static_cast<size_t>(p_) + 1, 0);
  std::vector<End> sends, recvs;
  sends.reserve(nXfers);
  recvs.reserve(nXfers);
  *maxCount = 0;
  for (int r = 0; r < p_; ++r) {
    (*rankFirst)[static_cast<size_t>(r)] = static_cast<int>(steps->size());
    const auto& chans = plan_.ranks[static_cast<size_t>(r)].channels;
    for (int c = 0; c < static_cast<int>(chans.size()); ++c) {
      int prev = -1;
      for (int i = 0; i < static_cast<int>(chans[c].steps.size()); ++i) {
        const Step& st = chans[c].steps[i];
        const int sid = static_cast<int>(steps->size());
        StepInfo info{r, c, i, prev, -1, static_cast<int>(xfers->size()),
                      static_cast<int>(st.transfers.size())};
        if (prev >= 0) (*steps)[static_cast<size_t>(prev)].next = sid;
        steps->push_back(info);
        stepPtr->push_back(&st);
        for (size_t x = 0; x < st.transfers.size(); ++x) {
          const Transfer& t = st.transfers[x];
          const std::string what = " transfer " + std::to_string(x) + " (" + xferKindName(t.kind) + ")";
          if (t.peer < 0 || t.peer >= p_ || t.peer == r)
            return fail(where(info) + ":" + what + " has peer " + std::to_string(t.peer));
          if (forwards(t.kind) && (t.next < 0 || t.next >= p_ || t.next == r))
            return fail(where(info) + ":" + what + " forwards to " + std::to_string(t.next));
          const int xid = static_cast<int>(xfers->size());
          xfers->push_back({sid, -1, -1});
          *maxCount = std::max(*maxCount, t.region.count);
          if (t.kind == XferKind::Send) sends.push_back({key(c, r, t.peer), xid, false});
          else recvs.push_back({key(c, t.peer, r), xid, false});
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
          sends.push_back({key(c, r, t.next), info.firstXfer + static_cast<int>(x), true});
        }
        prev = sid;
      }
    }
  }
  (*rankFirst)[static_cast<size_t>(p_)] = static_cast<int>(steps->size());

  std::stable_sort(sends.begin(), sends.end());
  std::stable_sort(recvs.begin(), recvs.end());
  messages->reserve(std::min(sends.size(), recvs.size()));
  size_t i = 0, j = 0;
  while (i < sends.size() || j < recvs.size()) {
    const uint64_t k = i < sends.size() && (j >= recvs.size() || sends[i].key <= recvs[j].key)
                           ? sends[i].key
                           : recvs[j].key;
    size_t i1 = i, j1 = j;
    while (i1 < sends.size() && sends[i1].key == k) ++i1;
    while (j1 < recvs.size() && recvs[j1].key == k) ++j1;
    const uint64_t pp = static_cast<uint64_t>(p_);
    const int src = static_cast<int>(k / pp % pp), dst = static_cast<int>(k % pp);
    const int ch = static_cast<int>(k / pp / pp);
    for (size_t m = 0; m < std::min(i1 - i, j1 - j); ++m) {
      const End& s = sends[i + m];
      const End& r = recvs[j + m];
      const Transfer& st = transferOf(*steps, *xfers, s.xfer);
      const Transfer& rt = transferOf(*steps, *xfers, r.xfer);
      if (st.region.count != rt.region.count)
        return fail(describe(*steps, *xfers, s) + " is matched (FIFO) by " +
                    describe(*steps, *xfers, r) + ": sizes differ");
      const int id = static_cast<int>(messages->size());
      messages->push_back({s.xfer, r.xfer, s.forward, reducesOnArrival(rt.kind)});
      (*xfers)[static_cast<size_t>(s.xfer)].sends = id;
      (*xfers)[static_cast<size_t>(r.xfer)].recvs = id;
    }
    const std::string pair = " (rank " + std::to_string(src) + " posts " +
                             std::to_string(i1 - i) + " sends to rank " + std::to_string(dst) +
                             " on channel " + std::to_string(ch) + ", rank " +
                             std::to_string(dst) + " posts " + std::to_string(j1 - j) +
                             " receives from it)";
    if (i1 - i > j1 - j)
      return fail("unmatched transfers: " + describe(*steps, *xfers, sends[i + (j1 - j)]) +
                  " has no matching receive" + pair);
    if (j1 - j > i1 - i)
      return fail("unmatched transfers: " + describe(*steps, *xfers, recvs[j + (i1 - i)]) +
                  " has no matching send" + pair);
    i = i1;
    j = j1;
  }
  return Status::Success;
}

}  // namespace

Status CompiledPlan::compile(std::shared_ptr<const Plan> plan,
                             std::shared_ptr<const CompiledPlan>* out, std::string* error) {
  auto c = std::make_shared<CompiledPlan>();
  c->plan_ = std::move(plan);
  Compiler comp(*c->plan_, error);
  const Status s = comp.run(&c->steps_, &c->stepPtr_, &c->xfers_, &c->messages_, &c->rankFirst_,
                            &c->maxTransferCount_);
  if (s != Status::Success) return s;  // a malformed Plan: the caller decides how to report it
  *out = std::move(c);
  return Status::Success;
}

Status compile(Plan plan, std::shared_ptr<const CompiledPlan>* out, std::string* error) {
  return CompiledPlan::compile(std::make_shared<const Plan>(std::move(plan)), out, error);
}

int CompiledPlan::loops(size_t sliceBytes, size_t elemSize, int maxLoops) const {
  if (!plan_->pipelinable || sliceBytes == 0 || maxLoops <= 1) return 1;
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
