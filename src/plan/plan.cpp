#include "plan/plan.hpp"

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

namespace nlccl {

const char* collectiveName(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "allreduce";
    case Collective::AllGather: return "allgather";
    case Collective::ReduceScatter: return "reducescatter";
    case Collective::Broadcast: return "broadcast";
    case Collective::Reduce: return "reduce";
    case Collective::AllToAll: return "alltoall";
    case Collective::AllToAllv: return "alltoallv";
    case Collective::SendRecv: return "sendrecv";
  }
  return "unknown";
}

}  // namespace nlccl

namespace nlccl::plan {

namespace {
size_t rowSum(const Request& req, int rank) {
  size_t s = 0;
  for (int j = 0; j < req.nranks; ++j) s += req.matrix[static_cast<size_t>(rank) * req.nranks + j];
  return s;
}
size_t colSum(const Request& req, int rank) {
  size_t s = 0;
  for (int i = 0; i < req.nranks; ++i) s += req.matrix[static_cast<size_t>(i) * req.nranks + rank];
  return s;
}
}  // namespace

size_t inputCount(const Request& req, int rank) {
  const size_t p = static_cast<size_t>(req.nranks);
  switch (req.collective) {
    case Collective::AllReduce: return req.count;
    case Collective::AllGather: return req.count;
    case Collective::ReduceScatter: return req.count * p;
    case Collective::Broadcast: return rank == req.root ? req.count : 0;
    case Collective::Reduce: return req.count;
    case Collective::AllToAll: return req.count * p;
    case Collective::AllToAllv: return rowSum(req, rank);
    case Collective::SendRecv: return req.matrix.empty() ? 0 : rowSum(req, rank);
  }
  return 0;
}

size_t outputCount(const Request& req, int rank) {
  const size_t p = static_cast<size_t>(req.nranks);
  switch (req.collective) {
    case Collective::AllReduce: return req.count;
    case Collective::AllGather: return req.count * p;
    case Collective::ReduceScatter: return req.count;
    case Collective::Broadcast: return req.count;
    case Collective::Reduce: return rank == req.root ? req.count : 0;
    case Collective::AllToAll: return req.count * p;
    case Collective::AllToAllv: return colSum(req, rank);
    case Collective::SendRecv: return req.matrix.empty() ? 0 : colSum(req, rank);
  }
  return 0;
}

InPlaceLayout inPlaceLayout(const Request& req, int rank) {
  switch (req.collective) {
    case Collective::AllGather: return {true, static_cast<size_t>(rank) * req.count};
    case Collective::ReduceScatter: return {false, static_cast<size_t>(rank) * req.count};
    default: return {true, 0};
  }
}

size_t sequentialSteps(const Plan& plan, int rank) {
  size_t best = 0;
  for (const Channel& ch : plan.ranks.at(rank).channels) {
    size_t n = 0;
    for (const Step& s : ch.steps)
      if (!s.transfers.empty()) ++n;
    best = std::max(best, n);
  }
  return best;
}

namespace {
/// Sets Transfer::sentReduced: messages of a (channel, src, dst) pair match in program order,
/// as the transports match them.
void markReducedSends(Plan* plan) {
  using Key = std::tuple<size_t, int, int>;  // channel, src, dst
  std::map<Key, std::vector<Transfer*>> sends;
  std::map<Key, std::vector<bool>> receiverReduces;
  for (size_t r = 0; r < plan->ranks.size(); ++r) {
    const int me = static_cast<int>(r);
    auto& channels = plan->ranks[r].channels;
    for (size_t c = 0; c < channels.size(); ++c)
      for (Step& s : channels[c].steps)
        for (Transfer& t : s.transfers) {
          t.sentReduced = false;
          if (receives(t.kind)) receiverReduces[{c, t.peer, me}].push_back(reducesOnArrival(t.kind));
          if (const int to = sendTarget(t); to >= 0) sends[{c, me, to}].push_back(&t);
        }
  }
  for (auto& [key, list] : sends) {
    auto it = receiverReduces.find(key);
    if (it == receiverReduces.end()) continue;  // an unmatched Plan: the verifier says so
    for (size_t i = 0; i < list.size() && i < it->second.size(); ++i)
      list[i]->sentReduced = it->second[i];
  }
}
}  // namespace

void finalize(Plan* plan) {
  size_t m = 0;
  for (const RankPlan& rp : plan->ranks)
    for (const Channel& ch : rp.channels)
      for (const Step& s : ch.steps)
        for (const Transfer& t : s.transfers) m = std::max(m, t.region.count);
  plan->maxTransferCount = m;
  markReducedSends(plan);
}

size_t elementsSent(const Plan& plan, int rank) {
  size_t n = 0;
  for (const Channel& ch : plan.ranks.at(rank).channels)
    for (const Step& s : ch.steps)
      for (const Transfer& t : s.transfers)
        if (t.kind == XferKind::Send || t.kind == XferKind::RecvReduceSend ||
            t.kind == XferKind::RecvCopySend || t.kind == XferKind::RecvReduceCopySend)
          n += t.region.count;
  return n;
}

}  // namespace nlccl::plan
