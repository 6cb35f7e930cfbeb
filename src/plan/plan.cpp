#include "plan/plan.hpp"

#include <algorithm>

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

void finalize(Plan* plan) {
  size_t m = 0;
  for (const RankPlan& rp : plan->ranks)
    for (const Channel& ch : rp.channels)
      for (const Step& s : ch.steps)
        for (const Transfer& t : s.transfers) m = std::max(m, t.region.count);
  plan->maxTransferCount = m;
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
