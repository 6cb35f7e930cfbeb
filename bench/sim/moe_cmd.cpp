// nlccl-sim moe: an MoE layer's dispatch and combine all-to-all-v on the fabric model.
//   nlccl-sim moe [--topology T] --tokens N --hidden H [--dtype bf16] --topk K --experts E
//     [--placement contiguous|round-robin|FILE] [--dist uniform|zipf:S|hot:F[:N]|FILE]
//     [--capacity-factor C] [--routing sample|expected] [--seed S] [--algo direct|hier|hier-across|auto]
//     [--groups 144,64] [--json FILE] [--heatmap FILE.png] [--trace FILE] [--links N]
// Prints per phase: time, the cut lower bound, efficiency, imbalance, dropped tokens, bytes and
// the most loaded links (docs/fabric.md, "MoE studies").
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "moe_cmd.hpp"
#include "nlccl/moe.hpp"
#include "nlccl/moe_study.hpp"
#include "util/dtype.hpp"

extern char** environ;

namespace nlccl::simtool {
namespace {

using nlohmann::json;

std::vector<int> parseGroups(const std::string& s) {
  std::vector<int> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) v.push_back(std::stoi(item));
  return v;
}

/// The matrix summed into at most 144 x 144 blocks of ranks (a person reads that at a glance).
json blockMatrix(const moe::Routing& rt, bool combine, int* blockOut) {
  const int p = rt.ranks, block = (p + 143) / 144, nb = (p + block - 1) / block;
  std::vector<double> m(static_cast<size_t>(nb) * nb, 0.0);
  for (int i = 0; i < p; ++i)
    for (int j = 0; j < p; ++j)
      m[static_cast<size_t>(i / block) * nb + j / block] +=
          static_cast<double>(combine ? rt.combineBytes(i, j) : rt.dispatchBytes(i, j));
  json rows = json::array();
  for (int a = 0; a < nb; ++a)
    rows.push_back(std::vector<double>(m.begin() + static_cast<long>(a) * nb,
                                       m.begin() + static_cast<long>(a + 1) * nb));
  *blockOut = block;
  return rows;
}

/// Mean utilisation (bytes / (bandwidth x phase time)) of every chip's links into and out of
/// each level it attaches to, per block of chips, and the most loaded links by name.
json linkUtilisation(const fabric::Topology& topo, const moe::PhaseResult& ph, int block,
                     int topLinks) {
  const int nb = (topo.numChips() + block - 1) / block;
  const auto& links = topo.links();
  std::map<std::string, std::vector<double>> fam;
  std::vector<double> count(static_cast<size_t>(nb), 0);
  for (int c = 0; c < topo.numChips(); ++c) count[c / block] += 1;
  for (const sim::LinkStat& ls : ph.sim.links) {
    const fabric::Link& l = links[static_cast<size_t>(ls.link)];
    const bool up = l.from < topo.numChips(), down = l.to < topo.numChips();
    if (!(up || down) || l.level < 0 || ph.timeS <= 0) continue;
    const std::string name = topo.levels()[static_cast<size_t>(l.level)].name + (up ? " out" : " in");
    auto& v = fam[name];
    if (v.empty()) v.assign(static_cast<size_t>(nb), 0.0);
    v[(up ? l.from : l.to) / block] += ls.bytes / (l.bwBps * ph.timeS);
  }
  json rows = json::array();
  for (auto& [name, v] : fam) {
    for (int b = 0; b < nb; ++b) v[b] /= count[b];
    rows.push_back({{"name", name}, {"util", v}});
  }
  auto sorted = ph.sim.links;
  std::sort(sorted.begin(), sorted.end(), [&](auto& a, auto& b) {  // by bytes over bandwidth
    return a.bytes / links[a.link].bwBps > b.bytes / links[b.link].bwBps;
  });
  json top = json::array();
  for (int i = 0; i < topLinks && i < static_cast<int>(sorted.size()); ++i)
    top.push_back({{"link", topo.linkName(sorted[i].link)}, {"bytes", sorted[i].bytes},
                   {"peak_util", sorted[i].peakUtil},
                   {"mean_util", ph.timeS > 0 ? sorted[i].bytes /
                                                    (links[sorted[i].link].bwBps * ph.timeS)
                                              : 0.0}});
  return {{"families", rows}, {"top", top}};
}

std::string heatmapScript(const char* argv0) {
  // Installed beside nlccl-sim, or in the source tree this binary was built from.
  std::string self = argv0;
  const size_t slash = self.rfind('/');
  const std::string beside = (slash == std::string::npos ? "." : self.substr(0, slash)) +
                             "/nlccl-moe-heatmap";
  if (access(beside.c_str(), R_OK) == 0) return beside;
  return NLCCL_MOE_HEATMAP_SCRIPT;
}

int runHeatmap(const std::string& script, const std::string& data, const std::string& png) {
  const char* py = access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
  std::vector<std::string> args{py, script, data, png};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawnp(&pid, py, nullptr, nullptr, argv.data(), environ) != 0) return 127;
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

void printPhase(const fabric::Topology& topo, const moe::PhaseResult& ph, int links) {
  const moe::PhaseStats& s = ph.stats;
  std::printf("  %-9s %-9s %11.2f %11.2f %7.3f %9.3f %15llu %15llu  %s\n", ph.phase.c_str(),
              ph.algorithm.c_str(), ph.timeS * 1e6, s.boundS * 1e6, ph.efficiency, s.imbalance,
              static_cast<unsigned long long>(s.bytes),
              static_cast<unsigned long long>(s.fabricBytes), s.boundAt.c_str());
  if (ph.candidates.size() > 1) {
    std::printf("#   auto (the fastest of those simulated):");
    for (auto& [n, t] : ph.candidates)
      if (t < 0) std::printf(" %s over the message budget (not simulated);", n.c_str());
      else std::printf(" %s %.2f us;", n.c_str(), t * 1e6);
    std::printf("\n");
  }
  auto sorted = ph.sim.links;
  const auto& all = topo.links();
  std::sort(sorted.begin(), sorted.end(), [&](auto& a, auto& b) {  // by bytes over bandwidth
    return a.bytes / all[a.link].bwBps > b.bytes / all[b.link].bwBps;
  });
  for (int i = 0; i < links && i < static_cast<int>(sorted.size()); ++i) {
    const double bw = topo.links()[sorted[i].link].bwBps;
    std::printf("#   link %-28s %15.0f B  mean %5.3f  peak %5.3f\n",
                topo.linkName(sorted[i].link).c_str(), sorted[i].bytes,
                ph.timeS > 0 ? sorted[i].bytes / (bw * ph.timeS) : 0.0, sorted[i].peakUtil);
  }
}

}  // namespace

int moeMain(int argc, char** argv, const char* argv0) {
  CLI::App app{"nlccl-sim moe: MoE dispatch and combine all-to-all-v on a fabric topology"};
  std::string topoSpec = "trn3-us144", dtypeName = "bf16", placementArg = "contiguous",
              distArg = "uniform", routingArg = "sample", algo = "auto", groupsArg, jsonPath,
              heatmapPath, tracePath, modeName = "flow";
  int ranks = 0, links = 5;
  double launchUs = -1;
  double precision = 0;
  size_t budget = 2'000'000;
  // The two phases are independent simulations: one thread each when there are two CPUs.
  int jobs = std::thread::hardware_concurrency() >= 2 ? 2 : 1;
  moe::RoutingSpec spec;
  std::vector<std::string> sets;
  bool verbose = false;
  app.add_option("-t,--topology", topoSpec, "preset, flat:<p>, cluster:<preset>x<N> or a file")
      ->capture_default_str();
  app.add_option("-n,--ranks", ranks, "ranks (default: every rank of the topology)");
  app.add_option("--tokens", spec.tokensPerRank, "tokens per rank")->required();
  app.add_option("--hidden", spec.hidden, "hidden size (elements per token)")->required();
  app.add_option("-d,--dtype", dtypeName, "element type (bf16, half, float, fp8e4m3, ...)")
      ->capture_default_str();
  app.add_option("-k,--topk", spec.topk, "experts per token")->capture_default_str();
  app.add_option("-E,--experts", spec.experts, "experts (default: one per rank)");
  app.add_option("--placement", placementArg, "contiguous, round-robin, or a file of ranks")
      ->capture_default_str();
  app.add_option("--dist", distArg, "uniform, zipf:S, hot:F[:N], or a CSV of per-expert loads")
      ->capture_default_str();
  app.add_option("--capacity-factor", spec.capacityFactor, "C; 0: no capacity")
      ->capture_default_str();
  app.add_option("--routing", routingArg, "sample (a router's draws) or expected (no noise)")
      ->capture_default_str();
  app.add_option("--seed", spec.seed, "seed of the routing")->capture_default_str();
  app.add_option("-a,--algo", algo,
                 "direct, hier, hier-across (DeepSeek's order: across groups first) or auto "
                 "(the fastest, each simulated); A,B: dispatch with A, combine with B")
      ->capture_default_str();
  app.add_option("--groups", groupsArg, "hier: group sizes innermost first, e.g. 144,64");
  app.add_option("--direct-budget", budget, "auto: simulate direct only up to this many messages")
      ->capture_default_str();
  app.add_option("--mode", modeName, "flow or analytical")->capture_default_str();
  app.add_option("--precision", precision,
                 "flow: relative precision of finish times (0: exact; 1e-2: fewer re-solves)")
      ->check(CLI::Range(0.0, 0.5))
      ->capture_default_str();
  app.add_option("-j,--jobs", jobs, "threads: 2 simulates dispatch and combine at once")
      ->check(CLI::Range(1, 2))
      ->capture_default_str();
  app.add_option("--set", sets, "override a topology figure: dotted.key=value (repeatable)");
  app.add_option("--launch-overhead-us", launchUs, "per-collective launch overhead");
  app.add_option("--links", links, "most loaded links to print per phase")->capture_default_str();
  app.add_option("--json", jsonPath, "write the results as JSON");
  app.add_option("--heatmap", heatmapPath, "PNG of the traffic matrices and link utilisation");
  app.add_option("--trace", tracePath, "Chrome trace of the dispatch phase");
  app.add_flag("-v,--verbose", verbose, "wall time and events per phase");
  CLI11_PARSE(app, argc, argv);

  auto wall0 = std::chrono::steady_clock::now();
  std::string err;
  fabric::Topology topo;
  if (fabric::Topology::load(topoSpec, sets, &topo, &err) != Status::Success) {
    std::fprintf(stderr, "nlccl-sim moe: %s\n", err.c_str());
    return 2;
  }
  DataType dt;
  if (!parseDataType(dtypeName.c_str(), &dt)) {
    std::fprintf(stderr, "nlccl-sim moe: unknown dtype '%s'\n", dtypeName.c_str());
    return 2;
  }
  spec.bytesPerElement = static_cast<int>(dataTypeSize(dt));
  spec.ranks = ranks > 0 ? ranks : topo.numRanks();
  if (spec.ranks > topo.numRanks()) {
    std::fprintf(stderr, "nlccl-sim moe: %d ranks do not fit %s (%d)\n", spec.ranks,
                 topo.name().c_str(), topo.numRanks());
    return 2;
  }
  if (spec.experts == 0) spec.experts = spec.ranks;
  if (routingArg == "sample") spec.sampling = moe::Sampling::Random;
  else if (routingArg == "expected") spec.sampling = moe::Sampling::Expected;
  else {
    std::fprintf(stderr, "nlccl-sim moe: --routing must be sample or expected\n");
    return 2;
  }
  // --algo A or A,B: dispatch with A, combine with B.
  std::string phaseAlgo[2] = {algo, algo};
  if (const size_t comma = algo.find(','); comma != std::string::npos) {
    phaseAlgo[0] = algo.substr(0, comma);
    phaseAlgo[1] = algo.substr(comma + 1);
  }
  for (const std::string& a : phaseAlgo)
    if (a != "direct" && a != "hier" && a != "hier-across" && a != "auto") {
      std::fprintf(stderr, "nlccl-sim moe: --algo must be direct, hier, hier-across or auto, or "
                           "two of them (dispatch,combine)\n");
      return 2;
    }
  if (moe::parsePlacement(placementArg, &spec.placement, &spec.expertRank, &err) != Status::Success ||
      moe::parseDistribution(distArg, &spec.dist, &err) != Status::Success) {
    std::fprintf(stderr, "nlccl-sim moe: %s\n", err.c_str());
    return 2;
  }
  moe::Routing rt;
  if (moe::generateRouting(spec, &rt, &err) != Status::Success) {
    std::fprintf(stderr, "nlccl-sim moe: %s\n", err.c_str());
    return 2;
  }
  const double genS =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  moe::StudyOptions so;
  so.algorithm = algo;
  so.topologySpec = topoSpec;
  so.overrides = sets;
  if (!groupsArg.empty()) so.groups = parseGroups(groupsArg);
  so.directMessageBudget = budget;
  so.sim.launchOverheadS = launchUs >= 0 ? launchUs * 1e-6 : -1;
  so.sim.precision = precision;
  if (!sim::parseMode(modeName, &so.sim.mode)) {
    std::fprintf(stderr, "nlccl-sim moe: --mode must be flow or analytical\n");
    return 2;
  }
  moe::PhaseResult phases[2];
  Status phaseStatus[2];
  std::string phaseErr[2];
  auto simulate = [&](int c) {
    moe::StudyOptions o = so;
    o.algorithm = phaseAlgo[c];
    o.sim.trace = c == 0 && !tracePath.empty();
    phaseStatus[c] = moe::simulatePhase(topo, rt, c == 1, o, &phases[c], &phaseErr[c]);
  };
  if (jobs >= 2) {  // combine beside dispatch (they share only read-only inputs)
    std::thread combine(simulate, 1);
    simulate(0);
    combine.join();
  } else {
    simulate(0);
    simulate(1);
  }
  for (int c = 0; c < 2; ++c)
    if (phaseStatus[c] != Status::Success) {
      std::fprintf(stderr, "nlccl-sim moe: %s: %s\n", c ? "combine" : "dispatch",
                   phaseErr[c].c_str());
      return 1;
    }
  std::printf("# nlccl-sim moe: topology %s (%d chips, %d ranks), mode %s\n", topo.name().c_str(),
              topo.numChips(), spec.ranks, sim::modeName(so.sim.mode));
  std::printf("# %lld tokens/rank x hidden %lld x %s = %lld B/token; top-%d of %d experts, "
              "placement %s, dist %s, routing %s, seed %llu\n",
              static_cast<long long>(spec.tokensPerRank), static_cast<long long>(spec.hidden),
              dataTypeName(dt), static_cast<long long>(rt.tokenBytes), spec.topk, spec.experts,
              placementArg.c_str(), moe::distributionName(spec.dist).c_str(), routingArg.c_str(),
              static_cast<unsigned long long>(spec.seed));
  if (rt.capacity >= 0)
    std::printf("# capacity factor %g: C = %lld tokens per rank and expert\n", spec.capacityFactor,
                static_cast<long long>(rt.capacity));
  std::printf("# token-expert choices %lld, dropped tokens (choices over capacity) %lld (%.3f%%), "
              "tokens left with no expert %lld, copies saved by deduplication %lld\n",
              static_cast<long long>(rt.assignments), static_cast<long long>(rt.droppedAssignments),
              rt.assignments ? 100.0 * rt.droppedAssignments / rt.assignments : 0.0,
              static_cast<long long>(rt.droppedTokens), static_cast<long long>(rt.dedupSaved));
  std::printf("# bound = launch overhead + nearest latency + max over cuts (chips, units of each "
              "level) of bytes across / cut bandwidth; efficiency = bound / time\n");
  std::printf("# %-9s %-9s %11s %11s %7s %9s %15s %15s  %s\n", "phase", "algorithm", "time(us)",
              "bound(us)", "effic.", "imbalance", "bytes", "fabric bytes", "bound at");
  for (const auto& ph : phases) printPhase(topo, ph, links);
  const double total = phases[0].timeS + phases[1].timeS;
  std::printf("# dispatch + combine: %.2f us\n", total * 1e6);
  const double wallS =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  if (verbose)
    for (const auto& ph : phases)
      std::printf("#   %s: transfers %zu, events %zu, wall %.3f s (routing %.3f s, total %.3f s)\n",
                  ph.phase.c_str(), ph.sim.transfers, ph.sim.events, ph.sim.wallS, genS, wallS);

  json j;
  if (!jsonPath.empty() || !heatmapPath.empty()) {
    j = {{"topology", topo.name()},     {"ranks", spec.ranks},
         {"tokens", spec.tokensPerRank}, {"hidden", spec.hidden},
         {"dtype", dataTypeName(dt)},    {"topk", spec.topk},
         {"experts", spec.experts},      {"placement", placementArg},
         {"dist", moe::distributionName(spec.dist)}, {"routing", routingArg},
         {"capacity_factor", spec.capacityFactor},   {"capacity", rt.capacity},
         {"seed", spec.seed},            {"mode", sim::modeName(so.sim.mode)},
         {"dispatch_us", phases[0].timeS * 1e6},     {"combine_us", phases[1].timeS * 1e6},
         {"dropped_tokens", rt.droppedAssignments},  {"tokens_without_expert", rt.droppedTokens},
         {"dedup_saved", rt.dedupSaved},             {"wall_s", wallS}};
    for (const auto& ph : phases) {
      j["bound_us"][ph.phase] = ph.stats.boundS * 1e6;
      j["efficiency"][ph.phase] = ph.efficiency;
      j["imbalance"][ph.phase] = ph.stats.imbalance;
      j["bytes"][ph.phase] = ph.stats.bytes;
      j["fabric_bytes"][ph.phase] = ph.stats.fabricBytes;
      j["algorithm"][ph.phase] = ph.algorithm;
      j["bound_at"][ph.phase] = ph.stats.boundAt;
      for (auto& [n, t] : ph.candidates) j["candidates_us"][ph.phase][n] = t < 0 ? -1 : t * 1e6;
    }
  }
  if (!jsonPath.empty()) {
    std::ofstream out(jsonPath);
    out << j.dump(2) << "\n";
    if (!out) {
      std::fprintf(stderr, "nlccl-sim moe: cannot write %s\n", jsonPath.c_str());
      return 1;
    }
  }
  if (!tracePath.empty() &&
      sim::writeChromeTrace(topo, phases[0].sim, tracePath, &err) != Status::Success) {
    std::fprintf(stderr, "nlccl-sim moe: %s\n", err.c_str());
    return 1;
  }
  if (!heatmapPath.empty()) {
    json h = j;
    for (int c = 0; c < 2; ++c) {
      int block = 1;
      h["phases"][phases[c].phase]["matrix"] = blockMatrix(rt, c == 1, &block);
      h["phases"][phases[c].phase]["block"] = block;
      h["phases"][phases[c].phase]["links"] = linkUtilisation(topo, phases[c], block, links);
    }
    const std::string data = heatmapPath + ".json";
    std::ofstream(data) << h.dump() << "\n";
    const int rc = runHeatmap(heatmapScript(argv0), data, heatmapPath);
    if (rc != 0) {
      std::fprintf(stderr, "nlccl-sim moe: the heat map script failed (exit %d); its input is "
                           "%s\n", rc, data.c_str());
      return rc == 3 ? 3 : 1;
    }
    std::printf("# heat map: %s (data %s)\n", heatmapPath.c_str(), data.c_str());
  }
  return 0;
}

}  // namespace nlccl::simtool
