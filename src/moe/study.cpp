// MoE phases on the fabric model (nlccl/moe_study.hpp): the cut lower bound of a traffic matrix
// and the simulated dispatch / combine all-to-all-v.
#include <algorithm>
#include <cmath>

#include "moe/rng.hpp"
#include "nlccl/moe_study.hpp"

namespace nlccl::moe {
namespace {

using fabric::Level;
using fabric::LevelKind;

/// Bandwidth one chip has out of (or into) a unit of level `u` (-1: the chip itself): its own
/// ports into every higher level it attaches to, plus its share of the unit's uplink when the
/// level above hangs off the unit's switch.
double chipCutBps(const fabric::Topology& topo, int u) {
  const auto& lv = topo.levels();
  double bw = 0;
  for (int L = u + 1; L < static_cast<int>(lv.size()); ++L) {
    const Level& l = lv[L];
    if (l.kind == LevelKind::Switch) {
      if (l.attachChip || L == u + 1) bw += l.bwBps;
    } else if (l.kind == LevelKind::Direct) {
      bw += l.bwBps * std::max(1, l.size - 1);
    } else {
      bw += l.bwBps * 2.0 * static_cast<double>(std::max<size_t>(1, l.dims.size()));
    }
  }
  return bw;
}

std::string unitName(const fabric::Topology& topo, int u) {
  return u < 0 ? std::string("chip") : topo.levels()[u].name;
}

DataType typeOfSize(int bytes) {
  switch (bytes) {
    case 2: return DataType::Bfloat16;
    case 4: return DataType::Float32;
    case 8: return DataType::Float64;
    default: return DataType::Uint8;
  }
}

/// hier-across: `topo` reloaded with rank a on the chip of local index a / X in group a % X
/// (groups {Y, X} become {X, Y}), and the phase's matrix in those labels.
Status acrossFirst(const fabric::Topology& topo, const Routing& rt, bool combine, size_t es,
                   const StudyOptions& opts, const std::vector<int>& groups,
                   fabric::Topology* relabelled, std::vector<size_t>* matrix, std::string* error) {
  const int p = rt.ranks;
  if (opts.topologySpec.empty() || groups.size() != 2 || topo.ranksPerChip() != 1 ||
      p != topo.numChips()) {
    if (error)
      *error = "hier-across needs the topology spec, two groups and one rank per chip on every "
               "chip";
    return Status::InvalidArgument;
  }
  const int Y = groups[0], X = groups[1];
  std::vector<int> chipOf(static_cast<size_t>(p));
  std::string list = "rank_to_chip=[";
  for (int a = 0; a < p; ++a) {
    chipOf[a] = topo.chipOfRank((a % X) * Y + a / X);
    list += (a ? "," : "") + std::to_string(chipOf[a]);
  }
  list += "]";
  std::vector<std::string> ov = opts.overrides;
  ov.push_back(list);
  NLCCL_MOE_CHECK(fabric::Topology::load(opts.topologySpec, ov, relabelled, error));
  std::vector<int> rankOfChip(static_cast<size_t>(topo.numChips()), -1);
  for (int r = 0; r < p; ++r) rankOfChip[topo.chipOfRank(r)] = r;
  const size_t perToken = static_cast<size_t>(rt.tokenBytes) / es;
  matrix->assign(static_cast<size_t>(p) * p, 0);
  for (int a = 0; a < p; ++a) {
    const int i = rankOfChip[chipOf[a]];
    for (int b = 0; b < p; ++b) {
      const int j = rankOfChip[chipOf[b]];
      const size_t t = combine ? rt.tokens[static_cast<size_t>(j) * p + i]
                               : rt.tokens[static_cast<size_t>(i) * p + j];
      (*matrix)[static_cast<size_t>(a) * p + b] = t * perToken;
    }
  }
  return Status::Success;
}

}  // namespace

PhaseStats phaseStats(const fabric::Topology& topo, const Routing& rt, bool combine,
                      double launchS) {
  PhaseStats st;
  const int p = rt.ranks;
  const int nl = static_cast<int>(topo.levels().size());
  // units[u + 1][chip]: the chip's unit at level u (u = -1: the chip), for the cuts below the top.
  std::vector<int64_t> span(static_cast<size_t>(nl) + 1);
  for (int u = -1; u < nl; ++u) span[u + 1] = topo.span(u);
  std::vector<int> chip(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r) chip[r] = topo.chipOfRank(r);
  std::vector<std::vector<double>> out(static_cast<size_t>(nl)), in(static_cast<size_t>(nl));
  for (int u = -1; u < nl - 1; ++u) {
    const size_t units = static_cast<size_t>((topo.numChips() + span[u + 1] - 1) / span[u + 1]);
    out[u + 1].assign(units, 0.0);
    in[u + 1].assign(units, 0.0);
  }
  std::vector<uint64_t> row(static_cast<size_t>(p)), col(row.size()), rowAll(row.size()),
      colAll(row.size());
  std::vector<char> levelUsed(static_cast<size_t>(nl), 0);
  // unit[(u + 1) * p + r]: rank r's unit at level u, so a pair's lowest common level is found by
  // comparing integers (no division per pair: 85 M pairs at 9,216 ranks).
  std::vector<int> unit(static_cast<size_t>(nl + 1) * p);
  for (int u = -1; u < nl; ++u)
    for (int r = 0; r < p; ++r)
      unit[static_cast<size_t>(u + 1) * p + r] = static_cast<int>(chip[r] / span[u + 1]);
  auto unitOf = [&](int u, int r) { return unit[static_cast<size_t>(u + 1) * p + r]; };
  // Rows of the dispatch matrix in memory order; combine swaps source and destination.
  for (int a = 0; a < p; ++a) {
    const uint32_t* tok = &rt.tokens[static_cast<size_t>(a) * p];
    for (int c = 0; c < p; ++c) {
      if (tok[c] == 0) continue;
      const uint64_t b = static_cast<uint64_t>(tok[c]) * static_cast<uint64_t>(rt.tokenBytes);
      const int i = combine ? c : a, j = combine ? a : c;
      st.bytes += b;
      rowAll[i] += b;
      colAll[j] += b;
      if (chip[i] == chip[j]) continue;
      st.fabricBytes += b;
      row[i] += b;
      col[j] += b;
      int top = 0;  // lowest level whose unit holds both chips
      while (top < nl && unitOf(top, i) != unitOf(top, j)) ++top;
      levelUsed[std::min(top, nl - 1)] = 1;
      for (int u = -1; u < top && u < nl - 1; ++u) {
        out[u + 1][static_cast<size_t>(unitOf(u, i))] += static_cast<double>(b);
        in[u + 1][static_cast<size_t>(unitOf(u, j))] += static_cast<double>(b);
      }
    }
  }
  st.maxRowBytes = p ? *std::max_element(row.begin(), row.end()) : 0;
  st.maxColBytes = p ? *std::max_element(col.begin(), col.end()) : 0;
  uint64_t peak = 0;
  for (int r = 0; r < p; ++r) peak = std::max({peak, rowAll[r], colAll[r]});
  st.imbalance = st.bytes ? static_cast<double>(peak) * p / static_cast<double>(st.bytes) : 0;
  for (int u = -1; u < nl - 1; ++u) {
    double cap = chipCutBps(topo, u) * static_cast<double>(span[u + 1]);
    cap = std::min(cap, topo.chip().dmaBps() * static_cast<double>(span[u + 1]));
    if (!(cap > 0)) continue;
    for (int dir = 0; dir < 2; ++dir) {
      const auto& v = dir ? in[u + 1] : out[u + 1];
      const auto it = std::max_element(v.begin(), v.end());
      if (it == v.end() || *it / cap <= st.transferBoundS) continue;
      st.transferBoundS = *it / cap;
      st.boundAt = unitName(topo, u) + " " + std::to_string(it - v.begin()) +
                   (dir ? " ingress" : " egress");
    }
  }
  // The nearest route class that carries data: a chip and the first chip of the next unit of
  // the level (a neighbour on a torus).
  double alpha = fabric::kInfinite;
  for (int l = 0; l < nl; ++l) {
    if (!levelUsed[l] || span[l] >= topo.numChips()) continue;
    alpha = std::min(alpha, topo.route(0, static_cast<int>(span[l])).latencyS);
  }
  if (alpha == fabric::kInfinite) alpha = 0;
  const double launch = launchS >= 0 ? launchS : topo.launchOverheadS();
  st.boundS = (st.bytes ? launch : 0) + (st.fabricBytes ? alpha : 0) + st.transferBoundS;
  return st;
}

std::vector<int> studyGroups(const fabric::Topology& topo, int nranks) {
  const auto& lv = topo.levels();
  const int nl = static_cast<int>(lv.size());
  if (nl >= 2 && lv[nl - 1].kind == LevelKind::Switch && lv[nl - 1].attachChip &&
      lv[nl - 1].bwBps < lv[nl - 2].bwBps) {
    const int64_t inner = topo.span(nl - 2) * topo.ranksPerChip();
    if (inner > 1 && inner < nranks && nranks % inner == 0)
      return {static_cast<int>(inner), static_cast<int>(nranks / inner)};
  }
  return topo.levelGroups(nranks);
}

Status simulatePhase(const fabric::Topology& topo, const Routing& rt, bool combine,
                     const StudyOptions& opts, PhaseResult* out, std::string* error) {
  PhaseResult res;
  res.phase = combine ? "combine" : "dispatch";
  sim::Options so = opts.sim;
  so.dtype = typeOfSize(static_cast<int>(rt.tokenBytes % 8 == 0   ? 8
                                         : rt.tokenBytes % 4 == 0 ? 4
                                         : rt.tokenBytes % 2 == 0 ? 2
                                                                  : 1));
  const size_t es = dataTypeSize(so.dtype);
  res.stats = phaseStats(topo, rt, combine, so.launchOverheadS >= 0 ? so.launchOverheadS : -1);
  std::vector<std::string> names;
  if (opts.algorithm == "auto") {
    names = {"direct", "hier"};
    if (!opts.topologySpec.empty() && topo.ranksPerChip() == 1 && rt.ranks == topo.numChips() &&
        (opts.groups.empty() ? studyGroups(topo, rt.ranks) : opts.groups).size() == 2)
      names.push_back("hier-across");
  } else {
    names = {opts.algorithm};
  }
  sim::CollectiveRun run;
  run.collective = Collective::AllToAllv;
  run.nranks = rt.ranks;
  bool have = false;
  for (const std::string& name : names) {
    if (opts.algorithm == "auto" && name == "direct") {
      size_t messages = 0;
      for (int i = 0; i < rt.ranks; ++i)
        for (int j = 0; j < rt.ranks; ++j)
          messages += i != j && rt.tokens[static_cast<size_t>(i) * rt.ranks + j] != 0;
      if (messages > opts.directMessageBudget) {
        res.candidates.emplace_back(name, -1.0);
        continue;
      }
    }
    const bool across = name == "hier-across";
    run.algorithm = across ? "hier" : name;
    const std::vector<int> groups = opts.groups.empty() ? studyGroups(topo, rt.ranks) : opts.groups;
    run.groups = name == "hier" ? groups : std::vector<int>{};
    sim::Result r;
    if (across) {
      fabric::Topology relabelled;
      NLCCL_MOE_CHECK(acrossFirst(topo, rt, combine, es, opts, groups, &relabelled, &run.matrix,
                                  error));
      run.groups = {groups[1], groups[0]};
      NLCCL_MOE_CHECK(sim::simulateCollective(relabelled, run, so, &r, error));
      r.algorithm = name;
    } else {
      run.matrix = rt.matrix(combine, es);
      NLCCL_MOE_CHECK(sim::simulateCollective(topo, run, so, &r, error));
    }
    run.matrix = {};
    res.candidates.emplace_back(name, r.timeS);
    if (!have || r.timeS < res.timeS) {
      res.timeS = r.timeS;
      res.algorithm = name;
      res.sim = std::move(r);
      have = true;
    }
  }
  res.efficiency = res.timeS > 0 ? res.stats.boundS / res.timeS : 0;
  *out = std::move(res);
  return Status::Success;
}

}  // namespace nlccl::moe
