// MoE all-to-all study on the fabric model, through the public C++ API (nlccl/moe.hpp,
// nlccl/moe_study.hpp): one table over routing skew (zipf s), top-k and algorithm on a set of
// topologies. Run by examples/moe_study/run.sh, which also runs the same generated counts for
// real (nlccl-perf alltoallv --moe over shm, 4 processes, results checked).
//
//   moe_study [--topologies trn3-us144,cluster:trn3-us144x8] [--skews 0,0.5,1,1.5] [--topk 1,2,8]
//             [--tokens 2048] [--hidden 4096] [--experts-per-rank 2] [--cf 0] [--seed 1]
//             [--direct-budget 200000] [--json FILE]
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "nlccl/moe.hpp"
#include "nlccl/moe_study.hpp"

using namespace nlccl;

namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) v.push_back(item);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::string topologies = "trn3-us144,cluster:trn3-us144x8", skews = "0,0.5,1,1.5",
              topks = "1,2,8", jsonPath;
  long long tokens = 2048, hidden = 4096, seed = 1;
  int expertsPerRank = 2;
  double cf = 0;
  size_t directBudget = 200'000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--topologies") topologies = v;
    else if (a == "--skews") skews = v;
    else if (a == "--topk") topks = v;
    else if (a == "--tokens") tokens = std::atoll(v.c_str());
    else if (a == "--hidden") hidden = std::atoll(v.c_str());
    else if (a == "--experts-per-rank") expertsPerRank = std::atoi(v.c_str());
    else if (a == "--cf") cf = std::atof(v.c_str());
    else if (a == "--seed") seed = std::atoll(v.c_str());
    else if (a == "--direct-budget") directBudget = std::strtoull(v.c_str(), nullptr, 10);
    else if (a == "--json") jsonPath = v;
    else {
      std::fprintf(stderr, "moe_study: unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  std::printf("# MoE dispatch + combine, flow mode: %lld tokens/rank x hidden %lld x bf16, %d "
              "experts per rank (contiguous), capacity factor %g, routing sampled (seed %lld)\n",
              tokens, hidden, expertsPerRank, cf, seed);
  std::printf("# time and bound in us; eff = bound / time; imb = largest rank load / mean; "
              "direct is not simulated (-) above %zu messages; hier-across (across groups "
              "first) needs two levels of groups\n", directBudget);
  std::printf("| %-24s | %4s | %2s | %-11s | %11s | %11s | %11s | %5s | %5s | %5s | %8s |\n",
              "topology", "s", "k", "algo", "dispatch", "combine", "bound", "eff.d", "eff.c",
              "imb", "dropped");
  std::printf("|%s|\n", std::string(124, '-').c_str());
  std::string json = "[\n";
  bool firstRecord = true;
  for (const std::string& t : split(topologies)) {
    fabric::Topology topo;
    std::string err;
    if (fabric::Topology::load(t, {}, &topo, &err) != Status::Success) {
      std::fprintf(stderr, "moe_study: %s\n", err.c_str());
      return 2;
    }
    for (const std::string& s : split(skews)) {
      for (const std::string& k : split(topks)) {
        moe::RoutingSpec spec;
        spec.ranks = topo.numRanks();
        spec.tokensPerRank = tokens;
        spec.hidden = hidden;
        spec.bytesPerElement = 2;
        spec.topk = std::atoi(k.c_str());
        spec.experts = expertsPerRank * spec.ranks;
        spec.capacityFactor = cf;
        spec.seed = static_cast<uint64_t>(seed);
        if (moe::parseDistribution(std::atof(s.c_str()) == 0 ? "uniform" : "zipf:" + s,
                                   &spec.dist, &err) != Status::Success) {
          std::fprintf(stderr, "moe_study: %s\n", err.c_str());
          return 2;
        }
        moe::Routing rt;
        if (moe::generateRouting(spec, &rt, &err) != Status::Success) {
          std::fprintf(stderr, "moe_study: %s\n", err.c_str());
          return 2;
        }
        size_t messages = 0;
        for (int i = 0; i < rt.ranks; ++i)
          for (int j = 0; j < rt.ranks; ++j)
            messages += i != j && rt.tokens[static_cast<size_t>(i) * rt.ranks + j] != 0;
        const bool twoLevels = moe::studyGroups(topo, rt.ranks).size() == 2;
        for (const char* algo : {"direct", "hier", "hier-across"}) {
          moe::PhaseResult ph[2];
          const bool skip = (std::string(algo) == "direct" && messages > directBudget) ||
                            (std::string(algo) == "hier-across" && !twoLevels);
          for (int c = 0; c < 2 && !skip; ++c) {
            moe::StudyOptions o;
            o.algorithm = algo;
            o.topologySpec = t;
            if (moe::simulatePhase(topo, rt, c == 1, o, &ph[c], &err) != Status::Success) {
              std::fprintf(stderr, "moe_study: %s\n", err.c_str());
              return 1;
            }
          }
          if (skip) {
            std::printf("| %-24s | %4s | %2s | %-11s | %11s | %11s | %11s | %5s | %5s | %5s | %8s |\n",
                        t.c_str(), s.c_str(), k.c_str(), algo, "-", "-", "-", "-", "-", "-", "-");
            std::fflush(stdout);
            continue;
          }
          std::printf("| %-24s | %4s | %2s | %-11s | %11.1f | %11.1f | %11.1f | %5.2f | %5.2f | "
                      "%5.2f | %8lld |\n", t.c_str(), s.c_str(), k.c_str(), algo,
                      ph[0].timeS * 1e6, ph[1].timeS * 1e6, ph[0].stats.boundS * 1e6,
                      ph[0].efficiency, ph[1].efficiency, ph[0].stats.imbalance,
                      static_cast<long long>(rt.droppedAssignments));
          std::fflush(stdout);
          char rec[512];
          std::snprintf(rec, sizeof rec,
                        "%s  {\"topology\": \"%s\", \"s\": %s, \"topk\": %s, \"algorithm\": \"%s\", "
                        "\"dispatch_us\": %.3f, \"combine_us\": %.3f, \"bound_us\": %.3f, "
                        "\"imbalance\": %.4f, \"dropped_tokens\": %lld}",
                        firstRecord ? "" : ",\n", t.c_str(), s.c_str(), k.c_str(), algo,
                        ph[0].timeS * 1e6, ph[1].timeS * 1e6, ph[0].stats.boundS * 1e6,
                        ph[0].stats.imbalance, static_cast<long long>(rt.droppedAssignments));
          json += rec;
          firstRecord = false;
        }
      }
    }
  }
  if (!jsonPath.empty()) std::ofstream(jsonPath) << json << "\n]\n";
  return 0;
}
