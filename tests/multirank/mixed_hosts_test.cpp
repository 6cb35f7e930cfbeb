// One machine standing in for two hosts: 4 processes with NLCCL_HOSTID a, a, b, b and the default
// transport choice. The registry must give each pair the transport a real two-host job would get
// (shm inside a host, ofi across), hier must group ranks by host, and collectives (hierarchical
// all-reduce and all-to-all-v among them) must be right. Loopback only (FI_TCP_IFACE=lo).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "multirank/collective_case.hpp"
#include "multirank/fork_ranks.hpp"

namespace nlccl::testing {
namespace {

constexpr int kRanks = 4;

bool expectTransport(nlcclComm_t comm, int r, int peer, const char* want) {
  const char* got = nullptr;
  if (nlcclCommPeerTransport(comm, peer, &got) != nlcclSuccess || std::string(got) != want) {
    fprintf(stderr, "rank %d: peer %d goes over %s, want %s\n", r, peer, got ? got : "?", want);
    return false;
  }
  return true;
}

/// Runs `algo` for all-reduce and all-to-all-v on rank r (host a: ranks 0, 1; host b: 2, 3).
int rankMain(int r, SharedId* sh, const char* algo) {
  setenv("NLCCL_HOSTID", r < 2 ? "a" : "b", 1);
  setenv("NLCCL_ALGO", algo, 1);
  nlcclUniqueId id;
  if (shareUniqueId(sh, r, &id) != 0) return 3;
  nlcclConfig_t config = NLCCL_CONFIG_INITIALIZER;
  config.timeoutMs = 20000;
  nlcclComm_t comm = nullptr;
  if (nlcclCommInitRankConfig(&comm, kRanks, id, r, &config) != nlcclSuccess) {
    fprintf(stderr, "rank %d: init: %s\n", r, nlcclGetLastError(nullptr));
    return 2;
  }
  bool ok = true;
  const int sameHost = r ^ 1;
  for (int p = 0; p < kRanks; ++p)
    if (p != r) ok = ok && expectTransport(comm, r, p, p == sameHost ? "shm" : "ofi");
  nlcclCommStats_t st;
  st.size = sizeof st;
  ok = ok && nlcclCommGetStats(comm, &st) == nlcclSuccess && std::string(st.transport) == "shm+ofi";
  if (!ok) fprintf(stderr, "rank %d: transport %s, want shm+ofi\n", r, st.transport);
  for (Collective c : {Collective::AllReduce, Collective::AllToAllv, Collective::AllGather,
                       Collective::ReduceScatter, Collective::AllToAll})
    for (size_t count : {size_t{1}, size_t{5000}, size_t{300000}}) {
      if (!ok) break;
      CollBuffers b({c, DataType::Float32, RedOp::Sum, count, 0, false}, r, kRanks);
      nlcclResult_t res = b.issue(comm);
      std::string err = res == nlcclSuccess ? b.check() : nlcclGetLastError(comm);
      if (!err.empty()) {
        fprintf(stderr, "rank %d (%s): %s\n", r, algo, err.c_str());
        ok = false;
      }
      if (ok && nlcclCommGetStats(comm, &st) == nlcclSuccess &&
          (c == Collective::AllReduce || c == Collective::AllToAllv) &&
          std::string(algo).find("hier") != std::string::npos &&
          std::string(st.lastAlgorithm) != "hier") {
        fprintf(stderr, "rank %d: ran %s, want hier\n", r, st.lastAlgorithm);
        ok = false;
      }
    }
  nlcclCommDestroy(comm);
  return ok ? 0 : 1;
}

void mixedHosts(const char* algo) {
  setenv("FI_PROVIDER", "tcp", 1);
  setenv("FI_TCP_IFACE", "lo", 1);
  void* mem = mmap(nullptr, sizeof(SharedId), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
  auto* sh = new (mem) SharedId();
  std::fflush(nullptr);
  std::vector<pid_t> pids;
  for (int r = 0; r < kRanks; ++r) {
    pid_t pid = fork();
    if (pid == 0) _exit(rankMain(r, sh, algo));
    pids.push_back(pid);
  }
  for (int r = 0; r < kRanks; ++r) {
    int st = 0;
    waitpid(pids[r], &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "rank " << r << " (" << algo << ")";
  }
  munmap(mem, sizeof(SharedId));
  unsetenv("FI_PROVIDER");
  unsetenv("FI_TCP_IFACE");
}

TEST(MixedHosts, ShmInsideAHostOfiAcrossWithTheDefaults) { mixedHosts("ring"); }
TEST(MixedHosts, HierGroupsByHost) { mixedHosts("allreduce:hier,alltoallv:hier,alltoall:hier"); }

}  // namespace
}  // namespace nlccl::testing
