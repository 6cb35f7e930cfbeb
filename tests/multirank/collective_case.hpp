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
  /// Empty when this rank's output is right and nothing was written past it (a canary follows
  /// the output and the input); otherwise what is wrong.
  std::string check() const;
  static constexpr size_t kCanaryBytes = 64;
  static constexpr unsigned char kCanary = 0xA5;

 private:
  CollCase c_;
  int rank_, nranks_;
  size_t es_;
  std::vector<char> send_, recv_;
  size_t outEnd_ = 0;  ///< bytes of recv_ the output (and in-place input) may use
  std::vector<size_t> sendcounts_, sdispls_, recvcounts_, rdispls_;
  void* sendPtr_ = nullptr;
  void* recvPtr_ = nullptr;
};

}  // namespace nlccl::testing
