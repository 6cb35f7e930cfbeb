// The parts of nccl.h nlccl added for NCCL parity, checked on one rank of a communicator whose
// ranks all run the same function at once (threads over loopback, or forked processes over
// shm): gather, scatter, bcast, PreMulSum, buffer registration and windows, the local index.
// Each returns "" when this rank saw the right results, else what was wrong.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/reduce.hpp"
#include "multirank/collective_case.hpp"
#include "nlccl.h"

namespace nlccl::testing {

inline std::string failed(const char* what, nlcclComm_t comm, nlcclResult_t res) {
  return std::string(what) + ": " + nlcclGetErrorString(res) + ": " + nlcclGetLastError(comm);
}

/// Gather and scatter (every type at root p-1, float at every root, in and out of place, counts
/// across shm slot boundaries) and bcast at every root.
inline std::string checkRooted(int r, int p, nlcclComm_t comm) {
  for (Collective c : {Collective::Gather, Collective::Scatter})
    for (int root = 0; root < p; ++root)
      for (int t = 0; t < kNumDataTypes; ++t) {
        if (root != p - 1 && static_cast<DataType>(t) != DataType::Float32) continue;
        for (bool inPlace : {false, true})
          for (size_t count : {size_t{0}, size_t{1}, size_t{1001}, size_t{150000}}) {
            if (count == 150000 && static_cast<DataType>(t) != DataType::Float32) continue;
            CollCase cc{c, static_cast<DataType>(t), RedOp::Sum, count, root, inPlace};
            CollBuffers b(cc, r, p);
            nlcclResult_t res = b.issue(comm);
            if (res != nlcclSuccess) return failed(collectiveName(c), comm, res);
            std::string err = b.check();
            if (!err.empty()) return err + " root " + std::to_string(root);
          }
      }
  for (int root = 0; root < p; ++root) {
    std::vector<int32_t> buf(5000);
    for (size_t i = 0; i < buf.size(); ++i)
      buf[i] = r == root ? static_cast<int32_t>(root * 100000 + i) : -1;
    nlcclResult_t res = nlcclBcast(buf.data(), buf.size(), nlcclInt32, root, comm, nullptr);
    if (res != nlcclSuccess) return failed("nlcclBcast", comm, res);
    for (size_t i = 0; i < buf.size(); ++i)
      if (buf[i] != static_cast<int32_t>(root * 100000 + i))
        return "nlcclBcast root " + std::to_string(root) + ": element " + std::to_string(i) +
               " is " + std::to_string(buf[i]);
  }
  return "";
}

/// Rank r's input element i and scalar for the PreMulSum cases: small integers, so that every
/// product and sum is exact in every type used.
inline double preMulInput(int r, size_t i) { return static_cast<double>((i * 7 + r * 3) % 5); }
inline double preMulScalar(DataType t, int r) {
  return isFloating(t) ? (r % 2 ? 0.5 : 2.0) : static_cast<double>(r + 1);
}

/// PreMulSum with all-reduce, reduce and reduce-scatter, in int32, uint8, float, double, half and
/// bf16; a nlcclScalarDevice scalar is read when the call runs, a HostImmediate one at creation.
inline std::string checkPreMulSum(int r, int p, nlcclComm_t comm) {
  const size_t n = 777;
  for (DataType t : {DataType::Int32, DataType::Uint8, DataType::Float32, DataType::Float64,
                     DataType::Float16, DataType::Bfloat16}) {
    const auto dt = static_cast<nlcclDataType_t>(t);
    const size_t es = dataTypeSize(t);
    for (nlcclScalarResidence_t residence : {nlcclScalarHostImmediate, nlcclScalarDevice}) {
      uint64_t scalar = 0;
      // Device: created with a wrong scalar that is corrected before the call runs.
      kernels::storeFromDouble(t, &scalar, 0,
                               residence == nlcclScalarDevice ? 3.0 : preMulScalar(t, r));
      nlcclRedOp_t op;
      nlcclResult_t res = nlcclRedOpCreatePreMulSum(&op, &scalar, dt, residence, comm);
      if (res != nlcclSuccess) return failed("nlcclRedOpCreatePreMulSum", comm, res);
      if (static_cast<int>(op) < nlcclNumOps) return "the new operator has a built-in value";
      // HostImmediate: changing it now must not matter; Device: this is the value used.
      kernels::storeFromDouble(t, &scalar, 0,
                               residence == nlcclScalarDevice ? preMulScalar(t, r) : 3.0);
      for (Collective c : {Collective::AllReduce, Collective::Reduce, Collective::ReduceScatter}) {
        for (bool inPlace : {false, true}) {
          const size_t inCount = c == Collective::ReduceScatter ? n * p : n;
          std::vector<char> send(inCount * es), recv(inCount * es);
          for (size_t i = 0; i < inCount; ++i)
            kernels::storeFromDouble(t, send.data(), i, preMulInput(r, i));
          if (inPlace) recv = send;
          const void* sb = inPlace ? recv.data() : send.data();
          void* rb = recv.data();
          const int root = p - 1;
          if (c == Collective::AllReduce) {
            res = nlcclAllReduce(sb, rb, n, dt, op, comm, nullptr);
          } else if (c == Collective::Reduce) {
            res = nlcclReduce(sb, rb, n, dt, op, root, comm, nullptr);
          } else {
            if (inPlace) rb = recv.data() + static_cast<size_t>(r) * n * es;
            res = nlcclReduceScatter(sb, rb, n, dt, op, comm, nullptr);
          }
          if (res != nlcclSuccess) return failed(collectiveName(c), comm, res);
          if (c == Collective::Reduce && r != root) continue;
          const size_t base = c == Collective::ReduceScatter ? static_cast<size_t>(r) * n : 0;
          for (size_t i = 0; i < n; ++i) {
            double want = 0;
            for (int q = 0; q < p; ++q) want += preMulInput(q, base + i) * preMulScalar(t, q);
            if (t == DataType::Uint8) want = static_cast<double>(static_cast<uint8_t>(want));
            double got = kernels::loadAsDouble(t, rb, i);
            if (got != want)
              return std::string("PreMulSum ") + collectiveName(c) + " " + dataTypeName(t) +
                     (residence == nlcclScalarDevice ? " device" : " immediate") +
                     (inPlace ? " in-place" : "") + ": element " + std::to_string(i) + " is " +
                     std::to_string(got) + ", expected " + std::to_string(want);
          }
        }
      }
      res = nlcclRedOpDestroy(op, comm);
      if (res != nlcclSuccess) return failed("nlcclRedOpDestroy", comm, res);
      if (nlcclRedOpDestroy(op, comm) != nlcclInvalidArgument)
        return "destroying an operator twice was accepted";
    }
  }
  return "";
}

/// Registered buffers and symmetric windows carry collectives; handles are checked.
inline std::string checkRegistration(int r, int p, nlcclComm_t comm) {
  const size_t n = 300000;  // large enough for the single-copy path of nlcclMemAlloc buffers
  for (bool memAlloc : {false, true}) {
    void *send = nullptr, *recv = nullptr;
    std::vector<float> sv, rv;
    if (memAlloc) {
      if (nlcclMemAlloc(&send, n * 4) != nlcclSuccess || nlcclMemAlloc(&recv, n * p * 4) != nlcclSuccess)
        return "nlcclMemAlloc failed";
    } else {
      sv.resize(n);
      rv.resize(n * p);
      send = sv.data();
      recv = rv.data();
    }
    for (size_t i = 0; i < n; ++i) static_cast<float*>(send)[i] = static_cast<float>(r * 10 + i % 9);
    void *hs = nullptr, *hr = nullptr;
    nlcclResult_t res = nlcclCommRegister(comm, send, n * 4, &hs);
    if (res == nlcclSuccess) res = nlcclCommRegister(comm, recv, n * p * 4, &hr);
    if (res != nlcclSuccess) return failed("nlcclCommRegister", comm, res);
    nlcclWindow_t win = nullptr;
    res = nlcclCommWindowRegister(comm, recv, n * p * 4, &win, NLCCL_WIN_COLL_SYMMETRIC);
    if (res != nlcclSuccess) return failed("nlcclCommWindowRegister", comm, res);
    void* user = nullptr;
    if (nlcclWinGetUserPtr(comm, win, &user) != nlcclSuccess || user != recv)
      return "nlcclWinGetUserPtr does not give the registered buffer";
    res = nlcclAllGather(send, recv, n, nlcclFloat, comm, nullptr);
    if (res != nlcclSuccess) return failed("nlcclAllGather on registered buffers", comm, res);
    for (int q = 0; q < p; ++q)
      for (size_t i = 0; i < n; i += 997)
        if (static_cast<float*>(recv)[q * n + i] != static_cast<float>(q * 10 + i % 9))
          return "all-gather on registered buffers: wrong element " + std::to_string(q * n + i);
    if (nlcclCommWindowDeregister(comm, win) != nlcclSuccess ||
        nlcclCommDeregister(comm, hs) != nlcclSuccess ||
        nlcclCommDeregister(comm, hr) != nlcclSuccess)
      return "deregistration failed";
    if (nlcclCommDeregister(comm, hs) != nlcclInvalidArgument ||
        nlcclCommWindowDeregister(comm, win) != nlcclInvalidArgument)
      return "a handle was deregistered twice without an error";
    if (memAlloc) {
      nlcclMemFree(send);
      nlcclMemFree(recv);
    }
  }
  return "";
}

/// The local index is the rank's position among the ranks of its host (all on this host here).
inline std::string checkLocalIndex(int r, nlcclComm_t comm) {
  int dev = -1;
  nlcclResult_t res = nlcclCommCuDevice(comm, &dev);
  if (res != nlcclSuccess) return failed("nlcclCommCuDevice", comm, res);
  return dev == r ? "" : "nlcclCommCuDevice gave " + std::to_string(dev);
}

/// Every check above, in order.
inline std::string checkParity(int r, int p, nlcclComm_t comm) {
  for (auto f : {checkRooted, checkPreMulSum, checkRegistration}) {
    std::string err = f(r, p, comm);
    if (!err.empty()) return err;
  }
  return checkLocalIndex(r, comm);
}

/// After `comm` lost (or left out) the ranks in `excluded`, the survivors' new communicator
/// `shrunk` has them in order and computes an all-reduce and a gather.
inline std::string checkShrunk(int r, int p, const std::vector<int>& excluded, nlcclComm_t shrunk) {
  int want = 0;
  for (int q = 0; q < r; ++q)
    want += std::find(excluded.begin(), excluded.end(), q) == excluded.end();
  const int n = p - static_cast<int>(excluded.size());
  int rank = -1, count = -1;
  nlcclCommUserRank(shrunk, &rank);
  nlcclCommCount(shrunk, &count);
  if (rank != want || count != n)
    return "shrunk communicator: rank " + std::to_string(rank) + " of " + std::to_string(count) +
           ", expected " + std::to_string(want) + " of " + std::to_string(n);
  std::vector<int64_t> v(100000, r + 1);
  nlcclResult_t res = nlcclAllReduce(v.data(), v.data(), v.size(), nlcclInt64, nlcclSum, shrunk,
                                     nullptr);
  if (res != nlcclSuccess) return failed("all-reduce on the shrunk communicator", shrunk, res);
  int64_t sum = 0;
  for (int q = 0; q < p; ++q)
    if (std::find(excluded.begin(), excluded.end(), q) == excluded.end()) sum += q + 1;
  for (int64_t x : v)
    if (x != sum) return "all-reduce on the shrunk communicator gave " + std::to_string(x);
  return checkRooted(rank, n, shrunk);
}

}  // namespace nlccl::testing
