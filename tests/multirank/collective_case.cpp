#include "multirank/collective_case.hpp"

#include <algorithm>

#include "common/reference.hpp"

namespace nlccl::testing {

namespace {
/// Elements rank i sends rank j in the all-to-all-v cases (zeros included on purpose).
size_t vcount(size_t base, int i, int j) { return (base + static_cast<size_t>(i * 3 + j * 5)) % 7; }
}  // namespace

CollBuffers::CollBuffers(const CollCase& c, int rank, int nranks)
    : c_(c), rank_(rank), nranks_(nranks), es_(dataTypeSize(c.dtype)) {
  const size_t p = nranks, n = c.count;
  size_t inCount = 0, outCount = 0;
  switch (c.collective) {
    case Collective::AllReduce:
    case Collective::Broadcast:
    case Collective::Reduce: inCount = outCount = n; break;
    case Collective::AllGather: inCount = n; outCount = n * p; break;
    case Collective::ReduceScatter: inCount = n * p; outCount = n; break;
    case Collective::AllToAll: inCount = outCount = n * p; break;
    case Collective::Gather: inCount = n; outCount = n * p; break;
    case Collective::Scatter: inCount = n * p; outCount = n; break;
    case Collective::AllToAllv:
      for (int j = 0; j < nranks; ++j) {
        sdispls_.push_back(inCount);
        sendcounts_.push_back(vcount(n, rank, j));
        inCount += sendcounts_.back();
        rdispls_.push_back(outCount);
        recvcounts_.push_back(vcount(n, j, rank));
        outCount += recvcounts_.back();
      }
      break;
    default: break;
  }
  // One allocation for in-place layouts, two otherwise; +1 element so that empty buffers are
  // still valid pointers. A canary follows each: nothing may write past its buffer.
  outEnd_ = (c.inPlace ? std::max(outCount, inCount) : outCount) * es_;
  recv_.assign(outEnd_ + kCanaryBytes, 0);
  std::fill(recv_.begin() + outEnd_, recv_.end(), static_cast<char>(kCanary));
  recvPtr_ = recv_.data();
  if (c.inPlace) {
    switch (c.collective) {
      case Collective::AllGather: sendPtr_ = recv_.data() + rank * n * es_; break;
      case Collective::ReduceScatter:
        sendPtr_ = recv_.data();
        recvPtr_ = recv_.data() + rank * n * es_;
        break;
      case Collective::Gather: sendPtr_ = recv_.data() + c.root * n * es_; break;
      case Collective::Scatter:
        sendPtr_ = recv_.data();
        recvPtr_ = recv_.data() + c.root * n * es_;
        break;
      default: sendPtr_ = recv_.data(); break;
    }
  } else {
    send_.assign(inCount * es_ + kCanaryBytes, static_cast<char>(kCanary));
    sendPtr_ = send_.data();
  }
  if (outEnd_ == 0) recvPtr_ = recv_.data();  // empty, yet a valid pointer (the canary's)
  // Inputs: element i of rank r's input holds value(r, i) (for in-place, written into the alias).
  if (c.collective == Collective::AllToAllv) {
    for (int j = 0; j < nranks; ++j)
      fill(c.dtype, c.op, rank, nranks, sendPtr_, sdispls_[j], sendcounts_[j], 1000 * j);
  } else if ((c.collective != Collective::Broadcast && c.collective != Collective::Scatter) ||
             rank == c.root) {
    fill(c.dtype, c.op, rank, nranks, sendPtr_, 0, inCount, 0);
  }
}

nlcclResult_t CollBuffers::issue(nlcclComm_t comm, nlcclStream_t stream) {
  auto dt = static_cast<nlcclDataType_t>(c_.dtype);
  auto op = static_cast<nlcclRedOp_t>(c_.op);
  switch (c_.collective) {
    case Collective::AllReduce: return nlcclAllReduce(sendPtr_, recvPtr_, c_.count, dt, op, comm, stream);
    case Collective::AllGather: return nlcclAllGather(sendPtr_, recvPtr_, c_.count, dt, comm, stream);
    case Collective::ReduceScatter:
      return nlcclReduceScatter(sendPtr_, recvPtr_, c_.count, dt, op, comm, stream);
    case Collective::Broadcast:
      return nlcclBroadcast(sendPtr_, recvPtr_, c_.count, dt, c_.root, comm, stream);
    case Collective::Reduce:
      return nlcclReduce(sendPtr_, recvPtr_, c_.count, dt, op, c_.root, comm, stream);
    case Collective::AllToAll: return nlcclAlltoAll(sendPtr_, recvPtr_, c_.count, dt, comm, stream);
    case Collective::Gather:
      return nlcclGather(sendPtr_, recvPtr_, c_.count, dt, c_.root, comm, stream);
    case Collective::Scatter:
      return nlcclScatter(sendPtr_, recvPtr_, c_.count, dt, c_.root, comm, stream);
    case Collective::AllToAllv:
      return nlcclAlltoAllv(sendPtr_, sendcounts_.data(), sdispls_.data(), recvPtr_,
                            recvcounts_.data(), rdispls_.data(), dt, comm, stream);
    default: return nlcclInvalidUsage;
  }
}

std::string CollBuffers::check() const {
  const size_t n = c_.count;
  const int p = nranks_;
  std::vector<double> want;
  auto expectBlock = [&](int srcRank, size_t srcBase, size_t len) {
    for (size_t i = 0; i < len; ++i)
      want.push_back(inputValue(c_.dtype, c_.op, srcRank, srcBase + i, p));
  };
  switch (c_.collective) {
    case Collective::AllReduce:
      for (size_t i = 0; i < n; ++i) want.push_back(reduceRef(c_.dtype, c_.op, p, i));
      break;
    case Collective::Reduce:
      if (rank_ != c_.root) return "";
      for (size_t i = 0; i < n; ++i) want.push_back(reduceRef(c_.dtype, c_.op, p, i));
      break;
    case Collective::ReduceScatter:
      for (size_t i = 0; i < n; ++i) want.push_back(reduceRef(c_.dtype, c_.op, p, rank_ * n + i));
      break;
    case Collective::Broadcast: expectBlock(c_.root, 0, n); break;
    case Collective::AllGather:
      for (int r = 0; r < p; ++r) expectBlock(r, 0, n);
      break;
    case Collective::AllToAll:
      for (int r = 0; r < p; ++r) expectBlock(r, static_cast<size_t>(rank_) * n, n);
      break;
    case Collective::Gather:
      if (rank_ != c_.root) return "";
      for (int r = 0; r < p; ++r) expectBlock(r, 0, n);
      break;
    case Collective::Scatter: expectBlock(c_.root, static_cast<size_t>(rank_) * n, n); break;
    case Collective::AllToAllv:
      for (int j = 0; j < p; ++j) expectBlock(j, 1000 * static_cast<size_t>(rank_), recvcounts_[j]);
      break;
    default: return "unsupported collective";
  }
  std::string err = compare(c_.dtype, recvPtr_, 0, want.size(), want);
  for (size_t i = outEnd_; i < recv_.size() && err.empty(); ++i)
    if (static_cast<unsigned char>(recv_[i]) != kCanary)
      err = "byte " + std::to_string(i - outEnd_) + " past the receive buffer was written";
  for (size_t i = send_.size() > kCanaryBytes ? send_.size() - kCanaryBytes : 0;
       i < send_.size() && !send_.empty() && err.empty(); ++i)
    if (static_cast<unsigned char>(send_[i]) != kCanary)
      err = "the canary past the send buffer was written";
  if (err.empty()) return "";
  return std::string(collectiveName(c_.collective)) + " " + dataTypeName(c_.dtype) + " " +
         redOpName(c_.op) + (c_.inPlace ? " in-place" : " out-of-place") + " rank " +
         std::to_string(rank_) + "/" + std::to_string(p) + " count " + std::to_string(n) + ": " +
         err;
}

}  // namespace nlccl::testing
