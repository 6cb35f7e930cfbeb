#include "core/check.hpp"

#include <cstdio>
#include <string>

#include "core/comm.hpp"
#include "engine/engine.hpp"
#include "util/log.hpp"

namespace nlccl::core {

namespace {
/// Check messages use their own tags: bit 39 of the sequence field (collectives never reach it),
/// and bit 38 for the count vectors of all-to-all-v.
constexpr uint64_t kCheckSeqBit = uint64_t{1} << 39;
constexpr uint64_t kCountsSeqBit = uint64_t{1} << 38;

std::string describe(const CallSignature& s) {
  char buf[160];
  snprintf(buf, sizeof(buf), "%s count %llu type %s op %s root %d",
           collectiveName(static_cast<Collective>(s.collective)),
           static_cast<unsigned long long>(s.count), dataTypeName(static_cast<DataType>(s.dtype)),
           redOpName(static_cast<RedOp>(s.op)), s.root);
  return buf;
}

/// An all-gather of `bytes` per rank on `comm`, as an engine job.
Status gatherJob(Communicator* comm, const void* mine, void* all, size_t bytes, uint64_t seq,
                 engine::CollJob* out) {
  plan::Request req;
  req.collective = Collective::AllGather;
  req.nranks = comm->nranks();
  req.count = bytes;
  NLCHECK(comm->getPlan(req, "ring", &out->plan));
  out->rank = comm->rank();
  out->input = mine;
  out->output = all;
  out->dtype = DataType::Uint8;
  out->transport = comm->transport();
  out->seq = seq;
  return Status::Success;
}

/// The rank whose signature differs from the one most ranks hold (ties: the lowest rank's), or
/// -1 when all agree. Every rank computes the same answer.
int oddRank(const std::vector<CallSignature>& all, CallSignature* common) {
  size_t best = 0, bestVotes = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    size_t votes = 0;
    for (const CallSignature& s : all) votes += s == all[i];
    if (votes > bestVotes) best = i, bestVotes = votes;
  }
  *common = all[best];
  for (size_t i = 0; i < all.size(); ++i)
    if (!(all[i] == all[best])) return static_cast<int>(i);
  return -1;
}
}  // namespace

Status checkCalls(const std::vector<CallCheck>& checks, std::chrono::milliseconds timeout,
                  bool* engineFailed) {
  std::vector<engine::CollJob> jobs;
  std::vector<std::vector<CallSignature>> sigs(checks.size());
  std::vector<std::vector<uint64_t>> counts(checks.size());
  for (size_t i = 0; i < checks.size(); ++i) {
    const CallCheck& c = checks[i];
    const int p = c.comm->nranks();
    sigs[i].resize(static_cast<size_t>(p));
    engine::CollJob j;
    NLCHECK(gatherJob(c.comm, &c.sig, sigs[i].data(), sizeof(CallSignature), c.seq | kCheckSeqBit,
                      &j));
    jobs.push_back(std::move(j));
    if (c.counts.empty()) continue;
    counts[i].resize(static_cast<size_t>(p) * c.counts.size());
    engine::CollJob k;
    NLCHECK(gatherJob(c.comm, c.counts.data(), counts[i].data(), c.counts.size() * sizeof(uint64_t),
                      c.seq | kCheckSeqBit | kCountsSeqBit, &k));
    jobs.push_back(std::move(k));
  }
  std::vector<engine::P2PJob> none;
  Status s = engine::run(jobs, none, timeout);
  if (s != Status::Success) {
    *engineFailed = true;
    return s;
  }
  for (size_t i = 0; i < checks.size(); ++i) {
    const CallCheck& c = checks[i];
    CallSignature common;
    const int odd = oddRank(sigs[i], &common);
    if (odd >= 0) {
      WARN("NLCCL_CHECK: rank %d called %s but the others called %s (call %llu on this "
           "communicator; seen from rank %d)",
           odd, describe(sigs[i][odd]).c_str(), describe(common).c_str(),
           static_cast<unsigned long long>(c.seq), c.comm->rank());
      return Status::InvalidUsage;
    }
    if (c.counts.empty()) continue;
    // counts[r] = rank r's sendcounts (p) then its recvcounts (p).
    const size_t p = static_cast<size_t>(c.comm->nranks());
    for (size_t from = 0; from < p; ++from)
      for (size_t to = 0; to < p; ++to) {
        const uint64_t sent = counts[i][from * 2 * p + to];
        const uint64_t expected = counts[i][to * 2 * p + p + from];
        if (sent == expected) continue;
        WARN("NLCCL_CHECK: nlcclAlltoAllv: rank %zu sends rank %zu %llu elements but rank %zu "
             "expects %llu from it (call %llu; seen from rank %d)",
             from, to, static_cast<unsigned long long>(sent), to,
             static_cast<unsigned long long>(expected), static_cast<unsigned long long>(c.seq),
             c.comm->rank());
        return Status::InvalidUsage;
      }
  }
  return Status::Success;
}

}  // namespace nlccl::core
