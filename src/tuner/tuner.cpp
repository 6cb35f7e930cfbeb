// The tuner: candidates, their bounds and the choice (nlccl/tuner.hpp). Every time it compares
// comes from the simulator (analytical mode for the bound, flow mode for the finalists): the
// tuner has no formulas of its own.
#include "nlccl/tuner.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "util/log.hpp"

namespace nlccl::tuner {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

bool tunesLevels(Collective c) {
  return c == Collective::AllReduce || c == Collective::AllGather ||
         c == Collective::ReduceScatter;
}

int levelsOf(const fabric::Topology& topo, const Query& q) {
  const int p = q.nranks > 0 ? q.nranks : topo.numRanks();
  const std::vector<int> g = q.groups.empty() ? topo.levelGroups(p) : q.groups;
  return std::max<int>(1, static_cast<int>(g.size()));
}

/// Level l's alternatives to ring: rhd everywhere; tree at the outermost all-reduce level.
std::vector<std::string> levelAlternatives(Collective c, int l, int levels) {
  std::vector<std::string> alts{"rhd"};
  if (c == Collective::AllReduce && l == levels - 1) alts.push_back("tree");
  return alts;
}

std::string sizeLabel(int64_t b) {
  if (b > 0 && b % (1 << 20) == 0) return std::to_string(b >> 20) + "M";
  if (b > 0 && b % 1024 == 0) return std::to_string(b >> 10) + "K";
  return std::to_string(b);
}

class Search {
 public:
  Search(const fabric::Topology& topo, const Query& q, const Options& opts, Choice* out)
      : topo_(topo), q_(q), opts_(opts), out_(out) {}

  /// Analytical run and bound of `c`, appended to the considered list; its index.
  Status consider(const Candidate& c, size_t* index, std::string* error) {
    sim::Result r;
    NLCHECK(simulateCandidate(topo_, q_, c, sim::Mode::Analytical, opts_, &r, error));
    Estimate e;
    e.candidate = c;
    e.analyticalS = r.timeS;
    e.work = r.transfers;
    const double t0 = opts_.launchOverheadS >= 0 ? opts_.launchOverheadS : topo_.launchOverheadS();
    double load = 0;
    for (const sim::LinkStat& l : r.links) {
      const double bw = topo_.links()[static_cast<size_t>(l.link)].bwBps;
      if (std::isfinite(bw) && bw > 0) load = std::max(load, l.bytes / bw);
    }
    const double dma = topo_.chip().dmaBps();
    if (std::isfinite(dma) && dma > 0) {
      // The bytes each chip's engine moves: what it sends, or what it receives where receivers copy.
      const std::vector<double>& moved =
          topo_.chip().receiverMoves() ? r.rankBytesReceived : r.rankBytesSent;
      std::vector<double> perChip(static_cast<size_t>(topo_.numChips()), 0.0);
      for (size_t rank = 0; rank < moved.size(); ++rank)
        perChip[static_cast<size_t>(topo_.chipOfRank(static_cast<int>(rank)))] += moved[rank];
      for (double b : perChip) load = std::max(load, b / dma);
    }
    e.boundS = std::max(r.timeS, t0 + load);
    e.timeS = e.boundS;
    out_->considered.push_back(std::move(e));
    *index = out_->considered.size() - 1;
    return Status::Success;
  }

  /// Flow mode for candidate i when it may beat the best so far (and fits the budget).
  Status refine(size_t i, std::string* error) {
    Estimate& e = out_->considered[i];
    if (e.boundS >= best_ * (1 - 1e-9)) return Status::Success;
    if (e.work <= opts_.flowBudget) {
      sim::Result r;
      NLCHECK(simulateCandidate(topo_, q_, e.candidate, sim::Mode::Flow, opts_, &r, error));
      e.flowS = r.timeS;
      e.timeS = r.timeS;
    }
    if (e.timeS < best_) {
      best_ = e.timeS;
      bestIndex_ = i;
    }
    return Status::Success;
  }

  /// Considers every candidate, then refines them in order of bound until none can win.
  Status round(const std::vector<Candidate>& cands, std::vector<size_t>* indices,
               std::string* error) {
    std::vector<size_t> idx;
    for (const Candidate& c : cands) {
      size_t i = 0;
      NLCHECK(consider(c, &i, error));
      idx.push_back(i);
    }
    std::vector<size_t> order = idx;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return out_->considered[a].boundS < out_->considered[b].boundS;
    });
    for (size_t i : order) {
      if (out_->considered[i].boundS >= best_) break;
      NLCHECK(refine(i, error));
    }
    if (indices) *indices = std::move(idx);
    return Status::Success;
  }

  double timeOf(size_t i) const { return out_->considered[i].timeS; }
  size_t bestIndex() const { return bestIndex_; }

 private:
  const fabric::Topology& topo_;
  const Query& q_;
  const Options& opts_;
  Choice* out_;
  double best_ = kInf;
  size_t bestIndex_ = 0;
};

}  // namespace

std::string Candidate::label() const {
  std::string s = algorithm;
  if (!levelAlgorithms.empty()) {
    s += "(";
    for (size_t i = 0; i < levelAlgorithms.size(); ++i)
      s += (i ? "," : "") + levelAlgorithms[i];
    s += ")";
  }
  if (sliceBytes >= 0) s += "/slice=" + sizeLabel(sliceBytes);
  return s;
}

std::vector<Candidate> baseCandidates(const fabric::Topology& topo, const Query& q) {
  std::vector<Candidate> out;
  // hier over one level is the flat algorithm with every block staged through Scratch, and it
  // runs on the library's general path (no prepared call): never worth choosing, though a flat
  // family missing a schedule once made it win the model (hier(rhd) reduce-scatter at 4 ranks).
  const bool oneLevel = levelsOf(topo, q) <= 1;
  for (const std::string& name : sim::algorithms(q.collective)) {
    if (name == "hier" && oneLevel) continue;
    Candidate c;
    c.algorithm = name;
    if (name == "hier" && tunesLevels(q.collective))
      c.levelAlgorithms.assign(static_cast<size_t>(levelsOf(topo, q)), "ring");
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<Candidate> allCandidates(const fabric::Topology& topo, const Query& q) {
  std::vector<Candidate> out = baseCandidates(topo, q);
  const int levels = levelsOf(topo, q);
  std::vector<Candidate> more;
  for (const Candidate& c : out) {
    if (c.algorithm != "hier" || c.levelAlgorithms.empty()) continue;
    // Every combination of level algorithms (choose() walks them one level at a time).
    std::vector<std::vector<std::string>> combos{{}};
    for (int l = 0; l < levels; ++l) {
      std::vector<std::string> opts{"ring"};
      for (const std::string& a : levelAlternatives(q.collective, l, levels)) opts.push_back(a);
      std::vector<std::vector<std::string>> next;
      for (const auto& prefix : combos)
        for (const std::string& a : opts) {
          next.push_back(prefix);
          next.back().push_back(a);
        }
      combos = std::move(next);
    }
    for (const auto& levelAlgos : combos) {
      if (levelAlgos == c.levelAlgorithms) continue;
      Candidate h = c;
      h.levelAlgorithms = levelAlgos;
      more.push_back(std::move(h));
    }
  }
  out.insert(out.end(), more.begin(), more.end());
  const int64_t chunk = static_cast<int64_t>(topo.chunkBytes());
  if (chunk > 0 && q.bytes > static_cast<size_t>(chunk)) {
    const size_t n = out.size();
    for (size_t i = 0; i < n; ++i)
      for (int64_t s : {chunk / 4, chunk * 4}) {
        Candidate v = out[i];
        v.sliceBytes = s;
        out.push_back(std::move(v));
      }
  }
  return out;
}

Status simulateCandidate(const fabric::Topology& topo, const Query& q, const Candidate& c,
                         sim::Mode mode, const Options& opts, sim::Result* out,
                         std::string* error) {
  sim::CollectiveRun run;
  run.collective = q.collective;
  run.algorithm = c.algorithm;
  run.nranks = q.nranks;
  run.bytes = q.bytes;
  run.root = q.root;
  run.inPlace = q.inPlace;
  run.groups = q.groups;
  run.levelAlgorithms = c.levelAlgorithms;
  sim::Options o;
  o.mode = mode;
  o.dtype = q.dtype;
  o.chunkBytes = c.sliceBytes;
  o.reduce = opts.reduce;
  o.launchOverheadS = opts.launchOverheadS;
  return sim::simulateCollective(topo, run, o, out, error);
}

Status choose(const fabric::Topology& topo, const Query& q, const Options& opts, Choice* out,
              std::string* error) {
  *out = Choice();
  Search search(topo, q, opts, out);
  const std::vector<Candidate> base = baseCandidates(topo, q);
  if (base.empty()) {
    if (error) *error = std::string("no algorithm implements ") + collectiveName(q.collective);
    return Status::InvalidArgument;
  }
  std::vector<size_t> idx;
  NLCHECK(search.round(base, &idx, error));
  // hier: each level's algorithm in turn, the others fixed at the best found so far.
  std::vector<Candidate> finalists = base;
  for (size_t b = 0; b < base.size(); ++b) {
    if (base[b].algorithm != "hier" || base[b].levelAlgorithms.empty()) continue;
    size_t cur = idx[b];
    const int levels = static_cast<int>(base[b].levelAlgorithms.size());
    for (int l = 0; l < levels; ++l) {
      std::vector<Candidate> alts;
      for (const std::string& a : levelAlternatives(q.collective, l, levels)) {
        Candidate c = out->considered[cur].candidate;
        c.levelAlgorithms[static_cast<size_t>(l)] = a;
        alts.push_back(std::move(c));
      }
      std::vector<size_t> got;
      NLCHECK(search.round(alts, &got, error));
      for (size_t i : got)
        if (search.timeOf(i) < search.timeOf(cur)) cur = i;
    }
    finalists[b] = out->considered[cur].candidate;
  }
  // The slice: a quarter and four times the fabric's, for every algorithm (hier with its best
  // levels); bounds prune most of them.
  const int64_t chunk = static_cast<int64_t>(topo.chunkBytes());
  if (opts.tuneSlice && chunk > 0 && q.bytes > static_cast<size_t>(chunk)) {
    std::vector<Candidate> alts;
    for (const Candidate& f : finalists)
      for (int64_t s : {chunk / 4, chunk * 4}) {
        Candidate c = f;
        c.sliceBytes = s;
        alts.push_back(std::move(c));
      }
    NLCHECK(search.round(alts, nullptr, error));
  }
  const Estimate& best = out->considered[search.bestIndex()];
  out->best = best.candidate;
  const int p = q.nranks > 0 ? q.nranks : topo.numRanks();
  out->groups = q.groups.empty() ? topo.levelGroups(p) : q.groups;
  out->predictedS = best.timeS;
  if (log::enabled(log::Level::Info, log::kTune)) {
    for (const Estimate& e : out->considered)
      INFO(log::kTune, "%s %zu B on %d ranks of %s: %-24s analytical %.2f us, bound %.2f us, "
           "flow %s", collectiveName(q.collective), q.bytes,
           q.nranks > 0 ? q.nranks : topo.numRanks(), topo.name().c_str(),
           e.candidate.label().c_str(), e.analyticalS * 1e6, e.boundS * 1e6,
           e.flowS >= 0 ? (std::to_string(e.flowS * 1e6) + " us").c_str() : "not run");
    INFO(log::kTune, "%s %zu B%s on %s: chose %s, %.2f us predicted",
         collectiveName(q.collective), q.bytes, q.inPlace ? " in place" : "", topo.name().c_str(),
         best.candidate.label().c_str(), best.timeS * 1e6);
  }
  return Status::Success;
}

}  // namespace nlccl::tuner
