// An architect's program: links the installed nlccl::sim and simulates a 1 MiB all-reduce on the
// 144-chip Trainium3 UltraServer model with every algorithm nlccl has for it.
#include <cstdio>
#include <string>

#include "nlccl/sim.hpp"
#include "nlccl/topology.hpp"

int main() {
  nlccl::fabric::Topology topo;
  std::string error;
  if (nlccl::fabric::Topology::load("trn3-us144", {}, &topo, &error) != nlccl::Status::Success) {
    std::fprintf(stderr, "sim_consumer: %s\n", error.c_str());
    return 1;
  }
  int ok = 0;
  for (const std::string& algo : nlccl::sim::algorithms(nlccl::Collective::AllReduce)) {
    nlccl::sim::CollectiveRun run;
    run.collective = nlccl::Collective::AllReduce;
    run.algorithm = algo;
    run.bytes = 1 << 20;
    nlccl::sim::Result r;
    if (nlccl::sim::simulateCollective(topo, run, {}, &r, &error) != nlccl::Status::Success) {
      std::fprintf(stderr, "sim_consumer: %s: %s\n", algo.c_str(), error.c_str());
      return 1;
    }
    // Every algorithm crosses the fabric at least once: 10 us of NeuronLink latency.
    if (r.nranks != 144 || !(r.timeS >= 10e-6)) return 1;
    std::printf("sim_consumer: %s all-reduce of 1 MiB on %d chips: %.1f us\n", algo.c_str(),
                r.nranks, r.timeS * 1e6);
    ++ok;
  }
  // A bad algorithm name is an error with a message, not a crash or a silent default.
  nlccl::sim::CollectiveRun bad;
  bad.algorithm = "nosuch";
  nlccl::sim::Result r;
  if (nlccl::sim::simulateCollective(topo, bad, {}, &r, &error) != nlccl::Status::InvalidArgument ||
      error.find("ring") == std::string::npos)
    return 1;
  return ok >= 3 ? 0 : 1;
}
