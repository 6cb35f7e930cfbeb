// simulateCollective: a collective by algorithm name, through the algorithm registry. A separate
// library (nlccl_sim_collective) so that nlccl_sim itself depends only on plan and fabric.
#include "algorithms/algorithms.hpp"
#include "sim/simulate.hpp"
#include "util/dtype.hpp"

namespace nlccl::sim {

plan::Request requestFor(const fabric::Topology& topo, const CollectiveRun& run, size_t elemSize) {
  plan::Request req;
  req.collective = run.collective;
  req.nranks = run.nranks > 0 ? run.nranks : topo.numRanks();
  req.root = run.root;
  const size_t elems = run.bytes / elemSize;
  switch (run.collective) {
    case Collective::AllGather:
    case Collective::ReduceScatter:
    case Collective::AllToAll:
    case Collective::Gather:
    case Collective::Scatter: req.count = elems / static_cast<size_t>(req.nranks); break;
    default: req.count = elems;
  }
  req.matrix = run.matrix;
  req.groups = run.groups.empty() ? topo.levelGroups(req.nranks) : run.groups;
  req.levelAlgorithms = run.levelAlgorithms;
  return req;
}

std::vector<std::string> algorithms(Collective c) {
  std::vector<std::string> names{algo::defaultAlgorithm(c)};
  for (const algo::Entry& e : algo::registry())
    if (e.collective == c && names.front() != e.name) names.push_back(e.name);
  return names;
}

Status simulateCollective(const fabric::Topology& topo, const CollectiveRun& run,
                          const Options& opts, Result* out, std::string* error) {
  const size_t es = dataTypeSize(opts.dtype);
  const plan::Request req = requestFor(topo, run, es);
  if (req.nranks > topo.numRanks()) {
    if (error)
      *error = std::to_string(req.nranks) + " ranks do not fit topology " + topo.name() + " (" +
               std::to_string(topo.numRanks()) + " ranks)";
    return Status::InvalidArgument;
  }
  const std::string name = run.algorithm.empty() ? algo::defaultAlgorithm(run.collective)
                                                 : run.algorithm;
  std::string err;
  std::optional<plan::Plan> plan = algo::build(req, name, &err);
  if (!plan) {
    if (error) *error = err;
    return Status::InvalidArgument;
  }
  Options o = opts;
  if (o.totalBytes == 0) o.totalBytes = totalBytes(req, es);
  return simulate(topo, *plan, o, out, error);
}

}  // namespace nlccl::sim
