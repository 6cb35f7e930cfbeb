// One collective call on one rank with checked results: buffers laid out as the C API expects (in
// place or not), inputs from reference.hpp, expected outputs computed for every rank.
#pragma once

#include <string>
#include <vector>

#include "nlccl.h"
#include "util/dtype.hpp"
#include "plan/plan.hpp"

namespace nlccl::testing {

struct CollCase {
  Collective collective = Collective::AllReduce;
  DataType dtype = DataType::Float32;
  RedOp op = RedOp::Sum;
  size_t count = 0;
  int root = 0;
  bool inPlace = false;
};

/// Per-rank buffers of a case.
class CollBuffers {
 public:
  CollBuffers(const CollCase& c, int rank, int nranks);
  /// Issues the collective on `comm` (NULL stream unless given).
  nlcclResult_t issue(nlcclComm_t comm, nlcclStream_t stream = nullptr);
  /// Empty when this rank's output is right; otherwise what is wrong.
  std::string check() const;

 private:
  CollCase c_;
  int rank_, nranks_;
  size_t es_;
  std::vector<char> send_, recv_;
  std::vector<size_t> sendcounts_, sdispls_, recvcounts_, rdispls_;
  void* sendPtr_ = nullptr;
  void* recvPtr_ = nullptr;
};

}  // namespace nlccl::testing
