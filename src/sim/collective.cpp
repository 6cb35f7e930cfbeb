// simulateCollective: a collective by algorithm name, through the algorithm registry. A separate
// library (nlccl_sim_collective) so that nlccl_sim itself depends only on plan and fabric.
#include "algorithms/algorithms.hpp"
#include "sim/quotient.hpp"
#include "sim/simulate.hpp"
#include "util/log.hpp"
#include "util/dtype.hpp"

namespace nlccl::sim {

plan::Request requestFor(const fabric::Topology& topo, const CollectiveRun& run, size_t elemSize) {
  plan::Request req;
  req.collective = run.collective;
  req.nranks = run.nranks > 0 ? run.nranks : topo.numRanks();
  req.root = run.root;
  req.inPlace = run.inPlace;
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
  plan::Request req = requestFor(topo, run, es);
  if (req.nranks > topo.numRanks()) {
    if (error)
      *error = std::to_string(req.nranks) + " ranks do not fit topology " + topo.name() + " (" +
               std::to_string(topo.numRanks()) + " ranks)";
    return Status::InvalidArgument;
  }
  const std::string name = run.algorithm.empty() ? algo::defaultAlgorithm(run.collective)
                                                 : run.algorithm;
  std::string err;
  if (algo::find(name, req.collective) == nullptr) {
    algo::build(req, name, &err);  // for its message, which lists the valid names
    if (error) *error = err;
    return Status::InvalidArgument;
  }
  // Programs are built a batch of ranks at a time and compiled at once, so no whole Plan is
  // held; a symmetric collective builds only its representatives.
  const plan::Symmetry sym = opts.reduce ? fabricSymmetry(topo, algo::symmetryOf(req, name),
                                                          req.nranks)
                                         : plan::Symmetry{};
  Options o = opts;
  if (o.totalBytes == 0) o.totalBytes = totalBytes(req, es);
  const int nranks = req.nranks;
  // The builder's request, moved (an all-to-all-v matrix is p^2 entries), reused batch by batch.
  plan::Request part = std::move(req);
  auto builder = [&](const std::vector<int>& ranks, plan::Plan* plan, std::string* e) {
    part.onlyRanks = ranks;
    std::optional<plan::Plan> built = algo::build(part, name, e);
    if (!built) return Status::InvalidArgument;
    *plan = std::move(*built);
    return Status::Success;
  };
  constexpr size_t kBatch = 32;
  std::shared_ptr<const plan::CompiledPlan> cp;
  plan::CompileReport report;
  Status s = plan::CompiledPlan::compileRanks(nranks, sym, builder, kBatch, &cp, &err, &report);
  if (s != Status::Success && !sym.trivial()) {
    // Not symmetric after all (blocks so small that some are empty on some ranks only): every
    // rank, then (the Plan is small at such sizes).
    INFO(log::kSim, "no reduced form for %s %s (%s): simulating every rank", name.c_str(),
         collectiveName(part.collective), err.c_str());
    report = {};
    s = plan::CompiledPlan::compileRanks(nranks, {}, builder, kBatch, &cp, &err, &report);
  }
  if (s != Status::Success) {
    if (error) *error = err;
    return s;
  }
  if (simulate(topo, *cp, o, out, &err) != Status::Success) {
    if (sym.trivial()) {
      if (error) *error = err;
      return Status::InvalidArgument;
    }
    // The representatives' form can stall where blocks are empty on some ranks only (an rhd
    // all-reduce of 2 elements on 64 ranks): every rank, then.
    INFO(log::kSim, "reduced form of %s %s failed (%s): simulating every rank", name.c_str(),
         collectiveName(part.collective), err.c_str());
    report = {};
    NLCHECK(plan::CompiledPlan::compileRanks(nranks, {}, builder, kBatch, &cp, error, &report));
    NLCHECK(simulate(topo, *cp, o, out, error));
  }
  out->countMismatches = report.countMismatches;
  out->maxCountDifference = report.maxCountDifference;
  return Status::Success;
}

}  // namespace nlccl::sim
