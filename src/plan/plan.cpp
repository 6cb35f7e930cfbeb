#include "plan/plan.hpp"

#include <algorithm>
#include <vector>

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
  if (req.collective == Collective::AllToAllv) return rowSum(req, rank);
  if (req.collective == Collective::SendRecv) return req.matrix.empty() ? 0 : rowSum(req, rank);
  return inputCount(req.collective, req.nranks, req.count, req.root, rank);
}

size_t outputCount(const Request& req, int rank) {
  if (req.collective == Collective::AllToAllv) return colSum(req, rank);
  if (req.collective == Collective::SendRecv) return req.matrix.empty() ? 0 : colSum(req, rank);
  return outputCount(req.collective, req.nranks, req.count, req.root, rank);
}

InPlaceLayout inPlaceLayout(const Request& req, int rank) {
  switch (req.collective) {
    case Collective::AllGather: return {true, static_cast<size_t>(rank) * req.count};
    case Collective::ReduceScatter: return {false, static_cast<size_t>(rank) * req.count};
    // NCCL's rooted layouts: the root's own block is in place (other ranks' layout is moot).
    case Collective::Gather: return {true, static_cast<size_t>(req.root) * req.count};
    case Collective::Scatter: return {false, static_cast<size_t>(req.root) * req.count};
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

const char* xferKindName(XferKind k) {
  switch (k) {
    case XferKind::Send: return "send";
    case XferKind::Recv: return "recv";
    case XferKind::RecvReduce: return "recvReduce";
    case XferKind::RecvReduceSend: return "recvReduceSend";
    case XferKind::RecvCopySend: return "recvCopySend";
    case XferKind::RecvReduceCopy: return "recvReduceCopy";
    case XferKind::RecvReduceCopySend: return "recvReduceCopySend";
  }
  return "?";
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
