// nlccl-sim <collective> --topology <preset|file> [--ranks N] [--algo NAME] -b MIN -e MAX -f FACTOR
//           [-d DTYPE] [--mode analytical|flow] [--trace FILE] [--json FILE] [--alpha-us A]
//           [--bw-GBps B] [--set key=value ...]
// Prints the nlccl-perf (nccl-tests) table with modelled time instead of measured time.
// nlccl-sim moe ... : MoE dispatch and combine (moe_cmd.cpp).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "moe_cmd.hpp"
#include "nlccl/sim.hpp"
#include "nlccl/topology.hpp"
#include "nlccl/tuner.hpp"
#include "util/dtype.hpp"
#include "util/size_parse.hpp"

using namespace nlccl;

namespace {

bool parseCollective(std::string name, Collective* out) {
  name.erase(std::remove(name.begin(), name.end(), '_'), name.end());
  for (Collective c : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
                       Collective::Broadcast, Collective::Reduce, Collective::AllToAll,
                       Collective::AllToAllv}) {
    if (name == collectiveName(c)) {
      *out = c;
      return true;
    }
  }
  return false;
}

bool rooted(Collective c) { return c == Collective::Broadcast || c == Collective::Reduce; }
bool reducing(Collective c) {
  return c == Collective::AllReduce || c == Collective::ReduceScatter || c == Collective::Reduce;
}

std::vector<int> parseInts(const std::string& s) {
  std::vector<int> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) v.push_back(std::stoi(item));
  return v;
}

std::vector<std::string> parseNames(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) v.push_back(item);
  return v;
}

// An all-to-all-v matrix until the MoE routing generator exists: every rank sends `perRank`
// elements, split over the destinations by weight w_j: uniform, or zipf(s) (w = 1 / rank^s,
// ranks shuffled with `seed`, the same hot destinations for every source, as hot experts are).
bool skewMatrix(const std::string& skew, int p, size_t perRank, unsigned seed,
                std::vector<size_t>* m) {
  std::vector<double> w(static_cast<size_t>(p), 1.0);
  if (skew.rfind("zipf:", 0) == 0) {
    const double s = std::atof(skew.c_str() + 5);
    std::vector<int> order(static_cast<size_t>(p));
    for (int j = 0; j < p; ++j) order[j] = j;
    std::mt19937 rng(seed);
    std::shuffle(order.begin(), order.end(), rng);
    for (int k = 0; k < p; ++k) w[order[k]] = 1.0 / std::pow(k + 1.0, s);
  } else if (skew != "uniform") {
    return false;
  }
  double sum = 0;
  for (double x : w) sum += x;
  m->assign(static_cast<size_t>(p) * p, 0);
  for (int i = 0; i < p; ++i) {
    size_t given = 0;
    for (int j = 0; j < p; ++j) {
      const size_t v = static_cast<size_t>(static_cast<double>(perRank) * w[j] / sum);
      (*m)[static_cast<size_t>(i) * p + j] = v;
      given += v;
    }
    (*m)[static_cast<size_t>(i) * p + i] += perRank - given;  // rounding stays home
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "moe")
    return simtool::moeMain(argc - 1, argv + 1, argv[0]);
  CLI::App app{"nlccl-sim: modelled collective performance on a fabric topology"};
  std::string collName, topoSpec = "trn3-us144", algoName = "auto", minS = "8", maxS = "128M", dtypeName = "float",
              opName = "sum", modeName = "flow", tracePath, jsonPath, groupsArg, levelAlgosArg;
  int ranks = 0, root = 0, factor = 2, ranksPerChip = 0, maxLoops = 64;
  double alphaUs = -1, bwGBps = -1, launchUs = -1;
  double precision = 0;
  int64_t chunkBytes = -1;
  std::vector<std::string> sets;
  bool dumpTopology = false, listPresets = false, verbose = false, fullRanks = false;
  bool inPlace = false;
  double windowBytes = -1;
  int showLinks = 0;
  app.add_option("collective", collName,
                 "allreduce, allgather, reducescatter, broadcast, reduce, alltoall, alltoallv "
                 "(nlccl-sim moe --help: MoE dispatch and combine)");
  app.add_option("-t,--topology", topoSpec,
                 "preset (trn3-us144, trn3-us144-pcie, trn3-us64, trn2-us64, nvl72), flat:<p>, "
                 "cluster:<preset>x<N> or a JSON file")
      ->capture_default_str();
  app.add_option("-n,--ranks", ranks, "ranks (default: every rank of the topology)");
  app.add_option("-a,--algo", algoName,
                 "auto (the tuner chooses per size), ring, tree, rhd, hier, direct, pairwise, bruck")
      ->capture_default_str();
  app.add_option("-b,--minbytes", minS, "smallest size S (K/M/G suffixes)")->capture_default_str();
  app.add_option("-e,--maxbytes", maxS, "largest size S")->capture_default_str();
  app.add_option("-f,--stepfactor", factor, "size multiplier")->capture_default_str();
  app.add_option("-d,--datatype", dtypeName, "element type")->capture_default_str();
  app.add_option("-o,--op", opName, "reduction operator (printed; does not change the model)")
      ->capture_default_str();
  app.add_option("-r,--root", root, "root of broadcast/reduce")->capture_default_str();
  app.add_option("--mode", modeName, "analytical or flow")->capture_default_str();
  app.add_option("--precision", precision,
                 "flow: relative precision of finish times (0: exact; 1e-2: fewer re-solves)")
      ->check(CLI::Range(0.0, 0.5))
      ->capture_default_str();
  app.add_option("--trace", tracePath, "Chrome trace-event JSON of the largest size");
  app.add_option("--json", jsonPath, "one JSON record per size");
  app.add_option("--alpha-us", alphaUs, "flat only: alpha (end-to-end start-up of a message), us");
  app.add_option("--bw-GBps", bwGBps, "flat only: port bandwidth per direction, 10^9 B/s");
  app.add_option("--set", sets, "override a topology figure: dotted.key=value (repeatable)");
  app.add_option("--chunk-bytes", chunkBytes,
                 "slice size for pipelined Plans (default: the topology's; 0: no slicing)");
  app.add_option("--max-loops", maxLoops, "cap on slices")->capture_default_str();
  app.add_option("--launch-overhead-us", launchUs, "per-collective launch overhead");
  app.add_option("--ranks-per-chip", ranksPerChip, "ranks sharing one chip (1, 2, 4, 8)");
  app.add_option("--groups", groupsArg, "hier: group sizes innermost first, e.g. 4,18,2");
  app.add_option("--level-algos", levelAlgosArg, "hier: algorithm per level, e.g. ring,rhd");
  app.add_option("--links", showLinks, "print the N most loaded links of the largest size");
  std::string skew = "uniform";
  unsigned seed = 1;
  app.add_option("--skew", skew,
                 "alltoallv: destination weights, uniform or zipf:S (every rank sends S bytes)")
      ->capture_default_str();
  app.add_option("--seed", seed, "alltoallv: shuffle of the zipf ranks")->capture_default_str();
  app.add_flag("--all-ranks", fullRanks,
               "simulate every rank (no reduced form on representatives of symmetric classes)");
  app.add_option("--window-bytes", windowBytes,
                 "bytes in flight per pair ahead of posted receives (default: the topology's)");
  app.add_flag("--in-place", inPlace,
               "NCCL's in-place layout: staging copies through scratch count");
  app.add_flag("-v,--verbose", verbose, "print simulation wall time and events per size");
  app.add_flag("--dump-topology", dumpTopology, "print the resolved topology JSON and exit");
  app.add_flag("--list-presets", listPresets, "list compiled-in presets and exit");
  CLI11_PARSE(app, argc, argv);

  if (listPresets) {
    for (const std::string& n : fabric::Topology::presetNames()) std::printf("%s\n", n.c_str());
    std::printf("flat:<p>\ncluster:<preset>x<N>\n");
    return 0;
  }
  const bool flat = topoSpec.rfind("flat:", 0) == 0;
  if ((alphaUs >= 0 || bwGBps >= 0) && !flat) {
    std::fprintf(stderr, "nlccl-sim: --alpha-us/--bw-GBps apply to flat:<p> topologies; use --set "
                         "for others\n");
    return 2;
  }
  if (alphaUs >= 0) sets.insert(sets.begin(), "levels.0.latency_us=" + std::to_string(alphaUs));
  if (bwGBps > 0) sets.insert(sets.begin(), "levels.0.bw_GBps=" + std::to_string(bwGBps));
  if (ranksPerChip > 0) sets.push_back("ranks_per_chip=" + std::to_string(ranksPerChip));
  std::string err;
  if (dumpTopology) {
    std::string text;
    if (fabric::Topology::resolveJsonText(topoSpec, sets, &text, &err) != Status::Success) {
      std::fprintf(stderr, "nlccl-sim: %s\n", err.c_str());
      return 2;
    }
    std::printf("%s\n", text.c_str());
    return 0;
  }
  Collective coll;
  if (!parseCollective(collName, &coll)) {
    std::fprintf(stderr, "nlccl-sim: unknown collective '%s' (allreduce, allgather, "
                         "reducescatter, broadcast, reduce, alltoall, alltoallv)\n",
                 collName.c_str());
    return 2;
  }
  fabric::Topology topo;
  if (fabric::Topology::load(topoSpec, sets, &topo, &err) != Status::Success) {
    std::fprintf(stderr, "nlccl-sim: %s\n", err.c_str());
    return 2;
  }
  sim::Options opts;
  if (!parseDataType(dtypeName.c_str(), &opts.dtype)) {
    std::fprintf(stderr, "nlccl-sim: unknown datatype '%s'\n", dtypeName.c_str());
    return 2;
  }
  RedOp op;
  if (!parseRedOp(opName.c_str(), &op)) {
    std::fprintf(stderr, "nlccl-sim: unknown op '%s'\n", opName.c_str());
    return 2;
  }
  if (!sim::parseMode(modeName, &opts.mode)) {
    std::fprintf(stderr, "nlccl-sim: --mode must be analytical or flow\n");
    return 2;
  }
  uint64_t minBytes = 0, maxBytes = 0;
  auto sizeFlag = [](const char* flag, const std::string& text, uint64_t* value) {
    std::string why;
    if (util::parseSize(text, value, &why)) return true;
    std::fprintf(stderr, "nlccl-sim: %s '%s': %s\n", flag, text.c_str(), why.c_str());
    return false;
  };
  if (!sizeFlag("-b", minS, &minBytes) || !sizeFlag("-e", maxS, &maxBytes)) return 2;
  if (minBytes > maxBytes || factor < 2) {
    std::fprintf(stderr, "nlccl-sim: bad -b/-e/-f\n");
    return 2;
  }
  opts.chunkBytes = chunkBytes;
  opts.maxLoops = maxLoops;
  opts.launchOverheadS = launchUs >= 0 ? launchUs * 1e-6 : -1;
  opts.reduce = !fullRanks;
  opts.pairWindowBytes = windowBytes;
  opts.precision = precision;
  sim::CollectiveRun run;
  run.collective = coll;
  const std::vector<std::string> valid = sim::algorithms(coll);  // the default first
  const bool autoAlgo = algoName.empty() || algoName == "auto";
  run.algorithm = autoAlgo ? "auto" : algoName;
  run.nranks = ranks > 0 ? ranks : topo.numRanks();
  run.root = root;
  run.inPlace = inPlace;
  if (!groupsArg.empty()) run.groups = parseInts(groupsArg);
  if (!levelAlgosArg.empty()) run.levelAlgorithms = parseNames(levelAlgosArg);
  if (run.nranks > topo.numRanks() || (rooted(coll) && (root < 0 || root >= run.nranks))) {
    std::fprintf(stderr, "nlccl-sim: %d ranks (root %d) do not fit %s (%d ranks)\n", run.nranks,
                 root, topo.name().c_str(), topo.numRanks());
    return 2;
  }
  if (!autoAlgo && std::find(valid.begin(), valid.end(), run.algorithm) == valid.end()) {
    std::string names;
    for (const std::string& v : valid) names += (names.empty() ? "" : ", ") + v;
    std::fprintf(stderr, "nlccl-sim: algorithm '%s' does not implement %s; valid: %s\n",
                 run.algorithm.c_str(), collectiveName(coll), names.c_str());
    return 2;
  }
  const size_t es = dataTypeSize(opts.dtype);
  const size_t unit = es * ((coll == Collective::AllGather || coll == Collective::ReduceScatter ||
                             coll == Collective::AllToAll || coll == Collective::AllToAllv)
                                ? run.nranks
                                : 1);

  std::printf("# nlccl-sim: %s, algorithm %s, topology %s (%d chips, %d ranks, %d per chip), "
              "mode %s\n", collectiveName(coll), run.algorithm.c_str(), topo.name().c_str(),
              topo.numChips(), run.nranks, topo.ranksPerChip(), sim::modeName(opts.mode));
  if (run.algorithm == "hier" || autoAlgo) {
    const auto g = run.groups.empty() ? topo.levelGroups(run.nranks) : run.groups;
    std::string s;
    for (int x : g) s += (s.empty() ? "" : "x") + std::to_string(x);
    std::printf("# hier groups (innermost first): %s\n", s.c_str());
  }
  std::printf("# time is modelled; GB/s = 10^9 B/s; busbw factors as nccl-tests\n#\n");
  std::printf("#                                                   modelled\n");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %9s  %7s  %7s  %6s\n", "size", "count", "type", "redop",
              "root", "time", "algbw", "busbw", "#wrong");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %9s  %7s  %7s  %6s\n", "(B)", "(elements)", "", "", "",
              "(us)", "(GB/s)", "(GB/s)", "");
  nlohmann::json records = nlohmann::json::array();
  double busSum = 0;
  int nSizes = 0;
  sim::Result last;
  std::vector<size_t> sizes;
  for (size_t s = minBytes; s <= maxBytes; s *= static_cast<size_t>(factor)) {
    sizes.push_back(s);
    if (s == 0) break;
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    const size_t bytes = sizes[i] / unit * unit;
    run.bytes = bytes;
    if (coll == Collective::AllToAllv &&
        !skewMatrix(skew, run.nranks, bytes / es, seed, &run.matrix)) {
      std::fprintf(stderr, "nlccl-sim: --skew must be uniform or zipf:S\n");
      return 2;
    }
    sim::Options o = opts;
    o.trace = !tracePath.empty() && i + 1 == sizes.size();
    sim::CollectiveRun chosen = run;
    std::string label = run.algorithm;
    if (autoAlgo) {  // the tuner's choice for this size, then simulated as asked
      tuner::Query q;
      q.collective = coll;
      q.bytes = bytes;
      q.nranks = run.nranks;
      q.root = root;
      q.inPlace = inPlace;
      q.dtype = opts.dtype;
      q.groups = run.groups;
      tuner::Options to;
      to.reduce = opts.reduce;
      to.launchOverheadS = opts.launchOverheadS;
      tuner::Choice choice;
      if (coll == Collective::AllToAllv) {
        choice.best.algorithm = "direct";  // the matrix, not its size, decides: not tuned
      } else if (tuner::choose(topo, q, to, &choice, &err) != Status::Success) {
        std::fprintf(stderr, "nlccl-sim: tuner: %s\n", err.c_str());
        return 1;
      }
      chosen.algorithm = choice.best.algorithm;
      chosen.levelAlgorithms = choice.best.levelAlgorithms;
      if (choice.best.sliceBytes >= 0) o.chunkBytes = choice.best.sliceBytes;
      label = choice.best.label();
      std::printf("#   auto: %s\n", label.c_str());
    }
    sim::Result r;
    if (sim::simulateCollective(topo, chosen, o, &r, &err) != Status::Success) {
      std::fprintf(stderr, "nlccl-sim: %s\n", err.c_str());
      return 1;
    }
    std::printf("  %10zu  %12zu  %8s  %6s  %6d  %9.2f  %7.2f  %7.2f  %6s\n", bytes, bytes / es,
                dataTypeName(opts.dtype), reducing(coll) ? redOpName(op) : "none",
                rooted(coll) ? root : -1, r.timeS * 1e6, r.algbwGBps, r.busbwGBps, "N/A");
    if (verbose)
      std::printf("#   loops %d, transfers %zu, events %zu, ranks simulated %d of %d%s, wall %.3f s "
                  "(%.3g events/s)\n", r.loops, r.transfers, r.events, r.simulatedRanks,
                  run.nranks, r.countMismatches ? " (blocks uneven by <= 1 element)" : "", r.wallS,
                  r.wallS > 0 ? r.events / r.wallS : 0.0);
    busSum += r.busbwGBps;
    ++nSizes;
    records.push_back({{"collective", collectiveName(coll)},
                       {"algorithm", autoAlgo ? label : r.algorithm}, {"auto", autoAlgo},
                       {"topology", topo.name()}, {"mode", sim::modeName(opts.mode)},
                       {"ranks", run.nranks}, {"ranks_per_chip", topo.ranksPerChip()},
                       {"bytes", bytes}, {"count", bytes / es}, {"type", dataTypeName(opts.dtype)},
                       {"redop", redOpName(op)}, {"root", rooted(coll) ? root : -1},
                       {"time_us", r.timeS * 1e6}, {"algbw_GBps", r.algbwGBps},
                       {"busbw_GBps", r.busbwGBps}, {"loops", r.loops},
                       {"transfers", r.transfers}, {"events", r.events},
                       {"simulated_ranks", r.simulatedRanks},
                       {"count_mismatches", r.countMismatches}, {"wall_s", r.wallS}});
    if (i + 1 == sizes.size()) last = std::move(r);
    run.matrix = {};
  }
  std::printf("# Out of bounds values : 0 OK\n");
  std::printf("# Avg bus bandwidth    : %g\n#\n", nSizes ? busSum / nSizes : 0.0);
  if (showLinks > 0) {
    auto links = last.links;
    std::sort(links.begin(), links.end(), [](auto& a, auto& b) { return a.bytes > b.bytes; });
    std::printf("# most loaded links (largest size): bytes, peak utilisation\n");
    for (int i = 0; i < showLinks && i < static_cast<int>(links.size()); ++i)
      std::printf("#   %-28s %14.0f  %5.3f\n", topo.linkName(links[i].link).c_str(),
                  links[i].bytes, links[i].peakUtil);
  }
  if (!jsonPath.empty()) {
    std::ofstream out(jsonPath);
    out << records.dump(2) << "\n";
    if (!out) {
      std::fprintf(stderr, "nlccl-sim: cannot write %s\n", jsonPath.c_str());
      return 1;
    }
  }
  if (!tracePath.empty() && sim::writeChromeTrace(topo, last, tracePath, &err) != Status::Success) {
    std::fprintf(stderr, "nlccl-sim: %s\n", err.c_str());
    return 1;
  }
  return 0;
}
