// Symbolic execution of Plans (see verifier.hpp for what is proven).
//
// A Plan (cut into L loops) becomes an event graph: each step instance (rank, channel, step, loop)
// has a start and an end node, each matched message (per loop) a node. Message nodes need the
// sender to have posted (its step started, or for a fused forward, its receive arrived) and the
// receiver to have posted; a step ends when all its messages are done, then runs its locals. A
// topological order is one legal execution; once no two unordered accesses of a rank conflict,
// every legal execution computes the same values, so executing that one order proves the Plan.
#include "plan/verifier.hpp"

#include "plan/compiled.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <sstream>
#include <tuple>
#include <vector>

namespace nlccl::plan {
namespace {

const char* bufferName(Buffer b) {
  switch (b) {
    case Buffer::Input:
      return "Input";
    case Buffer::Output:
      return "Output";
    case Buffer::Scratch:
      return "Scratch";
  }
  return "?";
}

std::string regionText(const Region& r) {
  std::ostringstream o;
  o << bufferName(r.buffer) << "[" << r.offset << ", " << r.offset + r.count << ")";
  return o.str();
}

std::string rankSetText(const uint64_t* bits, int nranks) {
  std::ostringstream o;
  o << "{";
  bool first = true;
  for (int q = 0; q < nranks; ++q)
    if (bits[q / 64] >> (q % 64) & 1) {
      o << (first ? "" : ",") << q;
      first = false;
    }
  o << "}";
  return o.str();
}

struct StepRef {
  int rank, channel, step;
};

/// An access of a step to storage (0: Input/Output, 1: Scratch) in storage coordinates.
struct Access {
  int store;
  size_t off, count;
  bool write;
  Region region;  // as written in the Plan, for messages
};

struct Msg {
  int srcStep, srcXfer;
  bool forward;  // sent by a fused transfer after its receive arrived
  int dstStep, dstXfer;
  int inMsg = -1;  // forward: the message the fused transfer receives
};

/// Symbolic contents of one storage: per element the original element index (-1: never written)
/// and the set of contributing ranks (words_ words each).
struct Mem {
  std::vector<int64_t> idx;
  std::vector<uint64_t> bits;
};

class Verifier {
 public:
  Verifier(const Plan& plan, const Request& req, size_t loops, const VerifyOptions& opts)
      : plan_(plan), req_(req), L_(std::max<size_t>(loops, 1)), opts_(opts) {}

  bool run(std::string* why) {
    bool ok = checkRequest() && checkShape() && compilePlan() && takeMessages() &&
              checkStepRaces() && checkChannelRaces() && schedule() && checkLoopHazards() &&
              execute() && checkOutput();
    if (!ok && why) *why = error_;
    return ok;
  }

 private:
  bool fail(const std::string& msg) {
    if (error_.empty()) {
      error_ = msg;
      if (L_ > 1) error_ += " [with " + std::to_string(L_) + " pipelined loops]";
    }
    return false;
  }
  std::string where(int sid, size_t k = 0) const {
    const StepRef& s = steps_[sid];
    std::ostringstream o;
    o << "rank " << s.rank << " channel " << s.channel << " step " << s.step;
    if (L_ > 1) o << " loop " << k;
    return o.str();
  }
  const Step& stepOf(int sid) const {
    const StepRef& s = steps_[sid];
    return plan_.ranks[s.rank].channels[s.channel].steps[s.step];
  }
  size_t bufferSize(int r, Buffer b) const {
    switch (b) {
      case Buffer::Input:
        return inputCount(req_, r);
      case Buffer::Output:
        return outputCount(req_, r);
      case Buffer::Scratch:
        return plan_.scratchCount;
    }
    return 0;
  }
  Access place(int r, const Region& reg, bool write) const {
    if (reg.buffer == Buffer::Scratch) return {1, reg.offset, reg.count, write, reg};
    size_t base = reg.buffer == Buffer::Input ? inBase_[r] : outBase_[r];
    return {0, base + reg.offset, reg.count, write, reg};
  }
  size_t node(int sid, size_t k, bool end) const { return 2 * (sid * L_ + k) + (end ? 1 : 0); }
  size_t msgNode(int m, size_t k) const { return 2 * steps_.size() * L_ + m * L_ + k; }

  bool checkRequest();
  bool compilePlan();
  bool checkShape();
  bool checkRegion(int sid, const std::string& what, const Region& reg, bool write);
  bool takeMessages();
  bool checkStepRaces();
  bool checkChannelRaces();
  bool schedule();
  bool checkLoopHazards();
  bool execute();
  bool moveValues(int dstRank, const Access& dst, int srcRank, const Access& src, size_t k,
                  bool reduce, int sid, const std::string& item);
  bool checkInitialized(int rank, const Access& a, size_t k, int sid, const std::string& item);
  bool checkOutput();
  void expected(int r, size_t e, int64_t* idx, std::vector<uint64_t>* bits) const;

  const Plan& plan_;
  const Request& req_;
  size_t L_;
  VerifyOptions opts_;
  int p_ = 0;
  size_t words_ = 1;
  std::string error_;
  std::shared_ptr<const CompiledPlan> compiled_;

  std::vector<StepRef> steps_;
  std::vector<std::vector<int>> stepBase_;           // [rank][channel] -> first step id
  std::vector<std::vector<Access>> access_;          // [sid] transfers' then locals' accesses
  std::vector<size_t> nXferAccess_;                  // [sid] how many of access_ are transfers
  std::vector<std::vector<int>> accessXfer_;         // [sid][i] the transfer of access i
  std::vector<std::vector<int>> recvMsg_, sendMsg_;  // [sid][xfer] -> message id or -1
  std::vector<Msg> msgs_;
  std::vector<size_t> inBase_, outBase_, mainSize_;
  std::vector<size_t> order_;               // a topological order of all nodes
  std::vector<std::vector<uint64_t>> anc_;  // [node] step instances whose end precedes it
  bool ancValid_ = false;
  std::vector<std::array<Mem, 2>> mem_;  // [rank][store]
};

bool Verifier::checkRegion(int sid, const std::string& what, const Region& reg, bool write) {
  int r = steps_[sid].rank;
  size_t size = bufferSize(r, reg.buffer);
  if (reg.count > 0 && (reg.offset > size || reg.count > size - reg.offset))
    return fail(where(sid) + ": " + what + " region " + regionText(reg) + " exceeds " +
                bufferName(reg.buffer) + " of " + std::to_string(size) + " elements");
  if (write && reg.buffer == Buffer::Input && !req_.inPlace && opts_.forbidInputWrites &&
      reg.count > 0)
    return fail(where(sid) + ": " + what + " writes " + regionText(reg) +
                ", the user's send buffer (request is not in place)");
  return true;
}

bool Verifier::checkRequest() {
  p_ = req_.nranks;
  if (p_ < 1) return fail("request has nranks " + std::to_string(p_));
  if (plan_.nranks != p_ || static_cast<int>(plan_.ranks.size()) != p_)
    return fail("plan is for " + std::to_string(plan_.nranks) + " ranks with " +
                std::to_string(plan_.ranks.size()) + " programs, request has " +
                std::to_string(p_));
  if (plan_.collective != req_.collective)
    return fail(std::string("plan implements ") + collectiveName(plan_.collective) +
                ", request is " + collectiveName(req_.collective));
  bool vee = req_.collective == Collective::AllToAllv || req_.collective == Collective::SendRecv;
  if (vee && req_.matrix.size() != static_cast<size_t>(p_) * p_ &&
      !(req_.collective == Collective::SendRecv && req_.matrix.empty()))
    return fail("request matrix has " + std::to_string(req_.matrix.size()) + " entries, need " +
                std::to_string(p_ * p_));
  if ((req_.collective == Collective::Broadcast || req_.collective == Collective::Reduce ||
       req_.collective == Collective::Gather || req_.collective == Collective::Scatter) &&
      (req_.root < 0 || req_.root >= p_))
    return fail("request root " + std::to_string(req_.root) + " out of range");
  words_ = (p_ + 63) / 64;
  return true;
}

bool Verifier::compilePlan() {
  // The Plan is the caller's: the compiled form borrows it for the verifier's lifetime.
  std::shared_ptr<const Plan> borrowed(&plan_, [](const Plan*) {});
  std::string why;
  if (CompiledPlan::compile(borrowed, &compiled_, &why) != Status::Success) return fail(why);
  return true;
}

bool Verifier::checkShape() {
  // Storage layout per rank: Input and Output share storage 0 (aliased when in place).
  inBase_.assign(p_, 0);
  outBase_.assign(p_, 0);
  mainSize_.assign(p_, 0);
  for (int r = 0; r < p_; ++r) {
    size_t in = inputCount(req_, r), out = outputCount(req_, r);
    if (!req_.inPlace) {
      outBase_[r] = in;
      mainSize_[r] = in + out;
    } else {
      InPlaceLayout lay = inPlaceLayout(req_, r);
      if (lay.inputInsideOutput) {
        inBase_[r] = lay.offset;
        mainSize_[r] = std::max(out, lay.offset + in);
      } else {
        outBase_[r] = lay.offset;
        mainSize_[r] = std::max(in, lay.offset + out);
      }
    }
  }

  // Steps in the compiled form's id order (rank, channel, step), so its ids index steps_.
  stepBase_.assign(p_, {});
  for (int r = 0; r < p_; ++r) {
    const RankPlan& rp = plan_.ranks[r];
    for (size_t c = 0; c < rp.channels.size(); ++c) {
      stepBase_[r].push_back(static_cast<int>(steps_.size()));
      for (size_t s = 0; s < rp.channels[c].steps.size(); ++s)
        steps_.push_back({r, static_cast<int>(c), static_cast<int>(s)});
    }
  }
  access_.assign(steps_.size(), {});
  nXferAccess_.assign(steps_.size(), 0);
  accessXfer_.assign(steps_.size(), {});
  for (size_t sid = 0; sid < steps_.size(); ++sid) {
    int r = steps_[sid].rank;
    const Step& st = stepOf(static_cast<int>(sid));
    for (size_t x = 0; x < st.transfers.size(); ++x) {
      const Transfer& t = st.transfers[x];
      std::string what = "transfer " + std::to_string(x) + " (" + xferKindName(t.kind) + ")";
      if (!checkRegion(sid, what, t.region, receives(t.kind))) return false;
      access_[sid].push_back(place(r, t.region, receives(t.kind)));
      accessXfer_[sid].push_back(static_cast<int>(x));
      if (readsSrc(t.kind)) {
        // The local operand is read while the message lands: an access of the step like the
        // region's write. It may be the region itself (a plain reduce on arrival), nothing else
        // that overlaps it.
        if (t.src.count != t.region.count)
          return fail(where(sid) + ": " + what + " reduces " + regionText(t.src) + " into " +
                      regionText(t.region) + " (sizes differ)");
        if (!checkRegion(sid, what + " source", t.src, false)) return false;
        Access a = place(r, t.src, false);
        const Access& b = access_[sid].back();
        bool same = a.store == b.store && a.off == b.off;
        bool overlap = a.store == b.store && a.off < b.off + b.count && b.off < a.off + a.count;
        if (overlap && !same)
          return fail(where(sid) + ": " + what + " has overlapping source " + regionText(t.src) +
                      " and destination " + regionText(t.region));
        access_[sid].push_back(a);
        accessXfer_[sid].push_back(static_cast<int>(x));
      }
    }
    nXferAccess_[sid] = access_[sid].size();
    for (size_t l = 0; l < st.locals.size(); ++l) {
      const LocalOp& op = st.locals[l];
      std::string what = "local " + std::to_string(l);
      if (op.src.count != op.dst.count)
        return fail(where(sid) + ": " + what + " moves " + regionText(op.src) + " to " +
                    regionText(op.dst) + " (sizes differ)");
      if (!checkRegion(sid, what, op.src, false) || !checkRegion(sid, what, op.dst, true))
        return false;
      Access a = place(r, op.src, false), b = place(r, op.dst, true);
      bool same = a.store == b.store && a.off == b.off;
      bool overlap = a.store == b.store && a.off < b.off + b.count && b.off < a.off + a.count;
      if (overlap && !(same && op.kind == LocalKind::Copy))
        return fail(where(sid) + ": " + what + " has overlapping source " + regionText(op.src) +
                    " and destination " + regionText(op.dst));
      access_[sid].push_back(a);
      access_[sid].push_back(b);
    }
  }
  return true;
}

bool Verifier::takeMessages() {
  // Matching is the compiled form's (compiled.hpp); the verifier only indexes it by step.
  recvMsg_.assign(steps_.size(), {});
  sendMsg_.assign(steps_.size(), {});
  const auto& xf = compiled_->xfers();
  for (size_t i = 0; i < steps_.size(); ++i) {
    const StepInfo& si = compiled_->steps()[i];
    recvMsg_[i].resize(static_cast<size_t>(si.numXfers));
    sendMsg_[i].resize(static_cast<size_t>(si.numXfers));
    for (int x = 0; x < si.numXfers; ++x) {
      recvMsg_[i][x] = xf[si.firstXfer + x].recvs;
      sendMsg_[i][x] = xf[si.firstXfer + x].sends;
    }
  }
  for (const Message& m : compiled_->messages()) {
    const int from = xf[m.from].step, to = xf[m.to].step;
    msgs_.push_back({from, m.from - compiled_->steps()[from].firstXfer, m.forward, to,
                     m.to - compiled_->steps()[to].firstXfer, m.forward ? xf[m.from].recvs : -1});
  }
  return true;
}

bool overlaps(const Access& a, const Access& b) {
  return a.store == b.store && a.count > 0 && b.count > 0 && a.off < b.off + b.count &&
         b.off < a.off + a.count;
}

bool Verifier::checkStepRaces() {
  for (size_t sid = 0; sid < steps_.size(); ++sid)
    for (size_t i = 0; i < nXferAccess_[sid]; ++i)
      for (size_t j = i + 1; j < nXferAccess_[sid]; ++j) {
        const Access &a = access_[sid][i], &b = access_[sid][j];
        const int xi = accessXfer_[sid][i], xj = accessXfer_[sid][j];
        if (xi == xj) continue;  // a transfer's own source and destination (checked in shape)
        if ((a.write || b.write) && overlaps(a, b))
          return fail(where(static_cast<int>(sid)) + ": transfers " + std::to_string(xi) + " and " +
                      std::to_string(xj) + " run concurrently on overlapping " +
                      regionText(a.region) + " and " + regionText(b.region) + " (data race)");
      }
  return true;
}

bool Verifier::checkChannelRaces() {
  struct Item {
    const Access* a;
    int sid;
  };
  for (int r = 0; r < p_; ++r) {
    if (stepBase_[r].size() < 2) continue;
    std::vector<Item> items;
    for (size_t sid = 0; sid < steps_.size(); ++sid)
      if (steps_[sid].rank == r)
        for (const Access& a : access_[sid])
          if (a.count > 0) items.push_back({&a, static_cast<int>(sid)});
    std::sort(items.begin(), items.end(), [](const Item& x, const Item& y) {
      return std::tie(x.a->store, x.a->off) < std::tie(y.a->store, y.a->off);
    });
    for (size_t i = 0; i < items.size(); ++i)
      for (size_t j = i + 1; j < items.size() && overlaps(*items[i].a, *items[j].a); ++j) {
        const Item &x = items[i], &y = items[j];
        if (steps_[x.sid].channel != steps_[y.sid].channel && (x.a->write || y.a->write))
          return fail(where(x.sid) + " and " + where(y.sid) + " run concurrently on overlapping " +
                      regionText(x.a->region) + " and " + regionText(y.a->region) +
                      " (data race between channels)");
      }
  }
  return true;
}

bool Verifier::schedule() {
  const size_t ni = steps_.size() * L_, nodes = 2 * ni + msgs_.size() * L_;
  std::vector<std::vector<uint32_t>> succ(nodes);
  std::vector<uint32_t> indeg(nodes, 0);
  auto edge = [&](size_t u, size_t v) {
    succ[u].push_back(static_cast<uint32_t>(v));
    ++indeg[v];
  };
  for (size_t sid = 0; sid < steps_.size(); ++sid)
    for (size_t k = 0; k < L_; ++k) {
      const int s = static_cast<int>(sid);
      std::pair<int, int> pred[2];
      for (int i = 0, n = compiled_->predecessors(s, static_cast<int>(k), pred); i < n; ++i)
        edge(node(pred[i].first, pred[i].second, true), node(s, k, false));
      edge(node(s, k, false), node(s, k, true));
    }
  for (size_t m = 0; m < msgs_.size(); ++m)
    for (size_t k = 0; k < L_; ++k) {
      const Msg& g = msgs_[m];
      size_t me = msgNode(static_cast<int>(m), k);
      // An empty slice is not sent (compiled.hpp): neither end waits for the other.
      const size_t count = stepOf(g.srcStep).transfers[g.srcXfer].region.count;
      if (CompiledPlan::sliceSize(count, k, L_) > 0) {
        edge(g.forward ? msgNode(g.inMsg, k) : node(g.srcStep, k, false), me);
        edge(node(g.dstStep, k, false), me);
      }
      edge(me, node(g.srcStep, k, true));
      edge(me, node(g.dstStep, k, true));
    }
  const size_t words = (ni + 63) / 64;
  ancValid_ = L_ > 1 && nodes * words <= (size_t{1} << 23);
  std::vector<uint64_t> anc(ancValid_ ? nodes * words : 0);
  order_.clear();
  order_.reserve(nodes);
  for (size_t u = 0; u < nodes; ++u)
    if (indeg[u] == 0) order_.push_back(u);
  for (size_t h = 0; h < order_.size(); ++h) {
    size_t u = order_[h];
    for (uint32_t v : succ[u]) {
      if (ancValid_) {
        for (size_t w = 0; w < words; ++w) anc[v * words + w] |= anc[u * words + w];
        if (u < 2 * ni && (u & 1)) anc[v * words + u / 2 / 64] |= uint64_t{1} << (u / 2 % 64);
      }
      if (--indeg[v] == 0) order_.push_back(v);
    }
  }
  if (ancValid_) {
    // Keep only what the hazard check needs: the ancestors of start nodes.
    anc_.assign(ni, {});
    for (size_t i = 0; i < ni; ++i)
      anc_[i].assign(anc.begin() + 2 * i * words, anc.begin() + (2 * i + 1) * words);
  }
  if (order_.size() == nodes) return true;

  std::vector<char> done(nodes, 0);
  for (size_t u : order_) done[u] = 1;
  std::string msg = "deadlock: no rank can progress;";
  int shown = 0;
  for (int r = 0; r < p_ && shown < 4; ++r)
    for (size_t c = 0; c < stepBase_[r].size() && shown < 4; ++c) {
      size_t nsteps = plan_.ranks[r].channels[c].steps.size();
      for (size_t s = 0; s < nsteps; ++s) {
        int sid = stepBase_[r][c] + static_cast<int>(s);
        size_t k = 0;
        while (k < L_ && done[node(sid, k, true)]) ++k;
        if (k == L_) continue;
        msg += " " + where(sid, k) + " waits for";
        const Step& st = stepOf(sid);
        for (size_t x = 0; x < st.transfers.size(); ++x) {
          const Transfer& t = st.transfers[x];
          int rm = recvMsg_[sid][x], sm = sendMsg_[sid][x];
          if (rm >= 0 && !done[msgNode(rm, k)])
            msg +=
                " (" + std::string(xferKindName(t.kind)) + " from rank " + std::to_string(t.peer) + ")";
          if (sm >= 0 && !done[msgNode(sm, k)])
            msg += std::string(" (") + (forwards(t.kind) ? "forward" : "send") + " to rank " +
                   std::to_string(forwards(t.kind) ? t.next : t.peer) + ")";
        }
        if (!done[node(sid, k, false)]) msg += " its previous step";
        msg += ";";
        ++shown;
        break;
      }
    }
  return fail(msg);
}

bool Verifier::checkLoopHazards() {
  if (L_ == 1) return true;
  auto sliced = [&](const Access& a, size_t k) {
    Access b = a;
    size_t first;
    CompiledPlan::slice(a.count, k, L_, &first, &b.count);
    b.off += first;
    b.region.offset += first;
    b.region.count = b.count;
    return b;
  };
  auto ordered = [&](int sa, size_t ka, int sb, size_t kb) {
    if (!ancValid_) return false;
    size_t ia = sa * L_ + ka, ib = sb * L_ + kb;
    return (anc_[ib][ia / 64] >> (ia % 64) & 1) || (anc_[ia][ib / 64] >> (ib % 64) & 1);
  };
  for (int r = 0; r < p_; ++r)
    for (size_t c = 0; c < stepBase_[r].size(); ++c) {
      int base = stepBase_[r][c];
      int nsteps = static_cast<int>(plan_.ranks[r].channels[c].steps.size());
      // Loop k step s and loop k2 < k step s2 > s are not ordered by the pipelining rule.
      for (int s = 0; s < nsteps; ++s)
        for (int s2 = s + 1; s2 < nsteps; ++s2)
          for (size_t k = 1; k < L_; ++k)
            for (size_t k2 = 0; k2 < k; ++k2)
              for (const Access& a0 : access_[base + s])
                for (const Access& b0 : access_[base + s2]) {
                  if (!a0.write && !b0.write) continue;
                  Access a = sliced(a0, k), b = sliced(b0, k2);
                  if (!overlaps(a, b) || ordered(base + s, k, base + s2, k2)) continue;
                  return fail(where(base + s, k) + " and " + where(base + s2, k2) +
                              " are not ordered but touch overlapping " + regionText(a.region) +
                              " and " + regionText(b.region) + " (pipelining hazard)");
                }
    }
  return true;
}

bool Verifier::moveValues(int dstRank, const Access& dst0, int srcRank, const Access& src0,
                          size_t k, bool reduce, int sid, const std::string& item) {
  size_t first, n;
  CompiledPlan::slice(dst0.count, k, L_, &first, &n);
  const size_t d0 = dst0.off + first, s0 = src0.off + first;
  Mem& dm = mem_[dstRank][dst0.store];
  const Mem& sm = mem_[srcRank][src0.store];
  const size_t w = words_;
  auto elem = [&](size_t i) {
    return std::string(bufferName(dst0.region.buffer)) + "[" +
           std::to_string(dst0.region.offset + first + i) + "]";
  };
  for (size_t i = 0; i < n; ++i) {
    const size_t d = d0 + i, s = s0 + i;
    if (&dm == &sm && d == s) continue;  // an identical copy (in-place aliasing) is a no-op
    if (!reduce) {
      dm.idx[d] = sm.idx[s];
      std::copy_n(&sm.bits[s * w], w, &dm.bits[d * w]);
      continue;
    }
    if (dm.idx[d] < 0 || sm.idx[s] < 0)
      return fail(where(sid, k) + ": " + item + " reduces uninitialized data into " + elem(i) +
                  (dm.idx[d] < 0 ? " (destination never written)" : " (source never written)"));
    if (dm.idx[d] != sm.idx[s])
      return fail(where(sid, k) + ": " + item + " combines element " + std::to_string(sm.idx[s]) +
                  " with element " + std::to_string(dm.idx[d]) + " in " + elem(i));
    for (size_t x = 0; x < w; ++x) {
      uint64_t both = dm.bits[d * w + x] & sm.bits[s * w + x];
      if (both)
        return fail(where(sid, k) + ": " + item + " counts the contribution of rank " +
                    std::to_string(x * 64 + __builtin_ctzll(both)) + " twice in " + elem(i) +
                    " (element " + std::to_string(dm.idx[d]) + ")");
      dm.bits[d * w + x] |= sm.bits[s * w + x];
    }
  }
  return true;
}

bool Verifier::checkInitialized(int rank, const Access& a, size_t k, int sid,
                                const std::string& item) {
  size_t first, n;
  CompiledPlan::slice(a.count, k, L_, &first, &n);
  const Mem& m = mem_[rank][a.store];
  for (size_t i = 0; i < n; ++i)
    if (m.idx[a.off + first + i] < 0)
      return fail(where(sid, k) + ": " + item + " reduces uninitialized data from its source " +
                  bufferName(a.region.buffer) + "[" + std::to_string(a.region.offset + first + i) +
                  "] (source never written)");
  return true;
}

bool Verifier::execute() {
  mem_.assign(p_, {});
  for (int r = 0; r < p_; ++r) {
    mem_[r][0].idx.assign(mainSize_[r], -1);
    mem_[r][0].bits.assign(mainSize_[r] * words_, 0);
    mem_[r][1].idx.assign(plan_.scratchCount, -1);
    mem_[r][1].bits.assign(plan_.scratchCount * words_, 0);
    for (size_t i = 0, n = inputCount(req_, r); i < n; ++i) {
      mem_[r][0].idx[inBase_[r] + i] = static_cast<int64_t>(i);
      mem_[r][0].bits[(inBase_[r] + i) * words_ + r / 64] |= uint64_t{1} << (r % 64);
    }
  }
  const size_t ni = steps_.size() * L_;
  for (size_t u : order_) {
    if (u >= 2 * ni) {  // a message: the receiver's region takes the sender's
      const Msg& g = msgs_[(u - 2 * ni) / L_];
      size_t k = (u - 2 * ni) % L_;
      const Transfer& st = stepOf(g.srcStep).transfers[g.srcXfer];
      const Transfer& rt = stepOf(g.dstStep).transfers[g.dstXfer];
      int sr = steps_[g.srcStep].rank, rr = steps_[g.dstStep].rank;
      std::string item = "transfer " + std::to_string(g.dstXfer) + " (" + xferKindName(rt.kind) +
                         " from rank " + std::to_string(sr) + ")";
      // region = src op incoming: the local source lands first (it must hold data), then the
      // incoming values are reduced into it as on any reduce on arrival.
      if (readsSrc(rt.kind) &&
          (!checkInitialized(rr, place(rr, rt.src, false), k, g.dstStep, item) ||
           !moveValues(rr, place(rr, rt.region, true), rr, place(rr, rt.src, false), k, false,
                       g.dstStep, item)))
        return false;
      if (!moveValues(rr, place(rr, rt.region, true), sr, place(sr, st.region, false), k,
                      reducesOnArrival(rt.kind), g.dstStep, item))
        return false;
    } else if (u & 1) {  // a step's end: its locals, in order
      int sid = static_cast<int>(u / 2 / L_);
      size_t k = u / 2 % L_;
      int r = steps_[sid].rank;
      const Step& st = stepOf(sid);
      for (size_t l = 0; l < st.locals.size(); ++l) {
        const LocalOp& op = st.locals[l];
        std::string item =
            "local " + std::to_string(l) + (op.kind == LocalKind::Copy ? " (copy)" : " (reduce)");
        if (!moveValues(r, place(r, op.dst, true), r, place(r, op.src, false), k,
                        op.kind == LocalKind::Reduce, sid, item))
          return false;
      }
    }
  }
  return true;
}

void Verifier::expected(int r, size_t e, int64_t* idx, std::vector<uint64_t>* bits) const {
  std::fill(bits->begin(), bits->end(), 0);
  auto all = [&] {
    for (int q = 0; q < p_; ++q) (*bits)[q / 64] |= uint64_t{1} << (q % 64);
  };
  auto one = [&](int q) { (*bits)[q / 64] |= uint64_t{1} << (q % 64); };
  const size_t c = req_.count, p = static_cast<size_t>(p_);
  switch (req_.collective) {
    case Collective::AllReduce:
    case Collective::Reduce:
      *idx = static_cast<int64_t>(e);
      all();
      return;
    case Collective::AllGather:
      *idx = static_cast<int64_t>(e % c);
      one(static_cast<int>(e / c));
      return;
    case Collective::ReduceScatter:
      *idx = static_cast<int64_t>(r * c + e);
      all();
      return;
    case Collective::Broadcast:
      *idx = static_cast<int64_t>(e);
      one(req_.root);
      return;
    case Collective::AllToAll:
      *idx = static_cast<int64_t>(r * c + e % c);
      one(static_cast<int>(e / c));
      return;
    case Collective::Gather:  // the root's Output block j is rank j's Input
      *idx = static_cast<int64_t>(e % c);
      one(static_cast<int>(e / c));
      return;
    case Collective::Scatter:  // rank r's Output is block r of the root's Input
      *idx = static_cast<int64_t>(r * c + e);
      one(req_.root);
      return;
    case Collective::AllToAllv:
    case Collective::SendRecv: {
      // Output block j (rank j's data for r) starts at the sum of column r above row j.
      size_t start = 0;
      for (size_t j = 0; j < p; ++j) {
        size_t n = req_.matrix[j * p + r];
        if (e < start + n) {
          size_t rowOff = 0;
          for (int t = 0; t < r; ++t) rowOff += req_.matrix[j * p + t];
          *idx = static_cast<int64_t>(rowOff + e - start);
          one(static_cast<int>(j));
          return;
        }
        start += n;
      }
      *idx = -2;
      return;
    }
  }
}

bool Verifier::checkOutput() {
  std::vector<uint64_t> want(words_);
  for (int r = 0; r < p_; ++r) {
    const Mem& m = mem_[r][0];
    for (size_t e = 0, n = outputCount(req_, r); e < n; ++e) {
      int64_t wantIdx = -2;
      expected(r, e, &wantIdx, &want);
      const size_t at = outBase_[r] + e;
      const uint64_t* have = &m.bits[at * words_];
      bool same = m.idx[at] == wantIdx && std::equal(want.begin(), want.end(), have);
      if (same) continue;
      std::string head =
          "after the last step, rank " + std::to_string(r) + " Output[" + std::to_string(e) + "] ";
      std::string wantText =
          "element " + std::to_string(wantIdx) + " of ranks " + rankSetText(want.data(), p_);
      if (m.idx[at] < 0) return fail(head + "was never written (expected " + wantText + ")");
      if (m.idx[at] != wantIdx)
        return fail(head + "holds element " + std::to_string(m.idx[at]) + " of ranks " +
                    rankSetText(have, p_) + ", expected " + wantText);
      for (size_t x = 0; x < words_; ++x) {
        if (uint64_t miss = want[x] & ~have[x])
          return fail(head + "lacks the contribution of rank " +
                      std::to_string(x * 64 + __builtin_ctzll(miss)) + " (holds " +
                      rankSetText(have, p_) + ", expected " + wantText + ")");
        if (uint64_t extra = have[x] & ~want[x])
          return fail(head + "holds an unexpected contribution of rank " +
                      std::to_string(x * 64 + __builtin_ctzll(extra)) + " (expected " + wantText +
                      ")");
      }
    }
  }
  return true;
}

}  // namespace

bool verifyLoops(const Plan& plan, const Request& req, size_t loops, std::string* why,
                 const VerifyOptions& opts) {
  return Verifier(plan, req, loops, opts).run(why);
}

bool verify(const Plan& plan, const Request& req, const VerifyOptions& opts, std::string* why) {
  if (!verifyLoops(plan, req, 1, why, opts)) return false;
  if (!opts.checkPipelined || !plan.pipelinable) return true;
  for (size_t loops : {2, 3})
    if (!verifyLoops(plan, req, loops, why, opts)) {
      if (why) *why = "plan is marked pipelinable, but " + *why;
      return false;
    }
  return true;
}

bool verify(const Plan& plan, const Request& req, std::string* why) {
  return verify(plan, req, VerifyOptions{}, why);
}

}  // namespace nlccl::plan
