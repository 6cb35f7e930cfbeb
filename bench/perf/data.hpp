// Deterministic inputs and the expected results of each collective, computed locally on every rank.
// Inputs are small integers, chosen per type and rank count so that every partial sum or product
// is exact in the type: then any reduction order gives the same answer, and only Avg's final
// division rounds (checked to within an ulp or so of the type).
#pragma once

#include <cstddef>
#include <cstdint>

#include "options.hpp"

namespace nlccl::perf {

/// Element counts of one test of a collective (nccl-tests' getCollByteCount).
struct Counts {
  size_t send = 0;        ///< elements in the send buffer
  size_t recv = 0;        ///< elements in the receive buffer
  size_t param = 0;       ///< the count argument of the call
  size_t sendInPlace = 0;  ///< in place: send = recvbuff + sendInPlace*rank
  size_t recvInPlace = 0;  ///< in place: recv = recvbuff + recvInPlace*rank
};

/// Counts for `count` = bytes / typesize elements over `nranks` ranks.
Counts collCounts(Coll c, size_t count, int nranks);
/// algbw's byte count (per nccl-tests' *GetBw) and busbw factor.
double collAlgBytes(Coll c, const Counts& k, size_t typeSize, int nranks);
double collBusFactor(Coll c, int nranks);

/// alltoallv's uneven blocks: rank `from` sends rank `to` this many elements, for `per` elements
/// per peer on average. Every row and every column sums to per*n (so the buffers are
/// alltoall's), but blocks alternate between about 1.5 and 0.5 times `per`.
size_t a2avCount(int from, int to, size_t per, int n);
/// Where that block starts in `from`'s send buffer (blocks packed in rank order).
size_t a2avSendDispl(int from, int to, size_t per, int n);
/// Where the block from `from` starts in `to`'s receive buffer.
size_t a2avRecvDispl(int from, int to, size_t per, int n);

/// The scalar rank `rank` uses for "mulsum" (nlcclRedOpCreatePreMulSum), written as one element
/// of `type` into `out`: 1 or 2 by rank parity (1 for fp8, whose inputs leave no headroom), so
/// every product and sum stays exact.
void mulsumScalar(nlcclDataType_t type, int rank, void* out);

/// Everything one check needs.
struct CheckCase {
  Coll coll;
  nlcclDataType_t type;
  int op;  ///< nlcclRedOp_t or kMulSum; ignored when the collective does not reduce
  int root;
  int rank, nranks;
  Counts counts;
};

/// Writes rank's inputs at `send` (c.counts.send elements). Call after poisoning the output.
void fillInput(const CheckCase& c, void* send);
/// Fills `buf` with a pattern that is never a correct output.
void poison(void* buf, size_t bytes);
/// How many output elements at `recv` differ from the expected result (0 if this rank has no
/// output, e.g. a non-root rank of reduce).
int64_t countWrong(const CheckCase& c, const void* recv);

}  // namespace nlccl::perf
