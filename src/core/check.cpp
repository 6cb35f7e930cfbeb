#include "core/check.hpp"

#include <string>

#include "algorithms/algorithms.hpp"
#include "core/comm.hpp"
#include "util/log.hpp"

namespace nlccl::core {

namespace {
/// Check messages use their own tags: bit 39 of the sequence field (collectives never reach it).
constexpr uint64_t kCheckSeqBit = uint64_t{1} << 39;

std::string describe(const CallSignature& s) {
  char buf[160];
  snprintf(buf, sizeof(buf), "%s count %llu type %s op %s root %d",
           collectiveName(static_cast<Collective>(s.collective)),
           static_cast<unsigned long long>(s.count), dataTypeName(static_cast<DataType>(s.dtype)),
           redOpName(static_cast<RedOp>(s.op)), s.root);
  return buf;
}
}  // namespace

Status checkSignatures(const std::vector<engine::CollJob>& colls,
                       const std::vector<Communicator*>& comms,
                       const std::vector<CallSignature>& sigs, std::chrono::milliseconds timeout,
                       bool* engineFailed) {
  std::vector<engine::CollJob> jobs;
  std::vector<std::vector<CallSignature>> gathered(colls.size());
  for (size_t i = 0; i < colls.size(); ++i) {
    Communicator* comm = comms[i];
    plan::Request req;
    req.collective = Collective::AllGather;
    req.nranks = comm->nranks();
    req.count = sizeof(CallSignature);
    std::shared_ptr<const plan::CompiledPlan> plan;
    NLCHECK(comm->getPlan(req, "ring", &plan));
    gathered[i].resize(comm->nranks());
    engine::CollJob j;
    j.plan = plan;
    j.rank = comm->rank();
    j.input = &sigs[i];
    j.output = gathered[i].data();
    j.dtype = DataType::Uint8;
    j.transport = colls[i].transport;
    j.seq = colls[i].seq | kCheckSeqBit;
    jobs.push_back(j);
  }
  std::vector<engine::P2PJob> none;
  Status s = engine::run(jobs, none, timeout);
  if (s != Status::Success) {
    *engineFailed = true;
    return s;
  }
  for (size_t i = 0; i < colls.size(); ++i) {
    for (int r = 0; r < comms[i]->nranks(); ++r) {
      if (gathered[i][r] == sigs[i]) continue;
      WARN("NLCCL_CHECK: rank %d called %s but rank %d called %s (call %llu on this communicator)",
           comms[i]->rank(), describe(sigs[i]).c_str(), r, describe(gathered[i][r]).c_str(),
           static_cast<unsigned long long>(colls[i].seq));
      return Status::InvalidUsage;
    }
  }
  return Status::Success;
}

}  // namespace nlccl::core
