// Ranks as processes over the ofi transport (NLCCL_TRANSPORT forced to ofi) on loopback, with the
// tcp (rxm) and shm providers: every collective and send/recv at 2 and 4 processes with checked
// results, messages split at a lowered max message size, a rank killed mid-collective, a
// provider that does not exist, and the tuner's choice over ofi.
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "multirank/collective_case.hpp"
#include "multirank/fork_ranks.hpp"

namespace nlccl::testing {

/// /dev/shm entries of these processes: libfabric's shm provider's (<pid>:<domain>:<endpoint>)
/// and any named nlccl-<pid>-... (nlccl's own segments are nameless memfds, checked with
/// memfdHolders).
std::vector<std::string> fabricShmFiles(const std::vector<pid_t>& pids) {
  std::vector<std::string> out;
  DIR* d = opendir("/dev/shm");
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    for (pid_t pid : pids)
      if (n.rfind("nlccl-" + std::to_string(pid) + "-", 0) == 0 ||
          n.rfind(std::to_string(pid) + ":", 0) == 0)
        out.push_back(n);
  }
  closedir(d);
  return out;
}

namespace {

bool reduces(Collective c) {
  return c == Collective::AllReduce || c == Collective::ReduceScatter || c == Collective::Reduce;
}

/// Sets the variables for the scope; the forked ranks inherit them.
struct Env {
  std::vector<std::string> names;
  void set(const char* n, const char* v) {
    setenv(n, v, 1);
    names.push_back(n);
  }
  ~Env() {
    for (auto& n : names) unsetenv(n.c_str());
  }
};

struct Param {
  const char* provider;  // NLCCL_OFI_PROVIDER
  int nranks;
  bool full;                  // every data type and op (slow)
  bool registration = false;  // NLCCL_OFI_FORCE_MR_LOCAL: efa's registration path
};

std::string paramName(const ::testing::TestParamInfo<Param>& info) {
  return std::string(std::string(info.param.provider) == "shm" ? "shm" : "tcp") + "_" +
         std::to_string(info.param.nranks) + "ranks" + (info.param.full ? "_full" : "") +
         (info.param.registration ? "_registered" : "");
}

nlcclConfig_t ofiConfig(int timeoutMs) {
  nlcclConfig_t config = NLCCL_CONFIG_INITIALIZER;
  config.timeoutMs = timeoutMs;
  config.transport = "ofi";
  return config;
}

/// A ring of sends and receives (to r+1, from r-1) and a message to ourselves, in one group.
std::string sendRecvRing(nlcclComm_t comm, int r, int p, size_t count) {
  std::vector<float> out(count + 1), in(count + 1, -1.0f), selfOut(count + 1), selfIn(count + 1);
  for (size_t i = 0; i < count; ++i) {
    out[i] = static_cast<float>(r * 100000 + static_cast<int>(i % 65536));
    selfOut[i] = static_cast<float>(i % 1000) + 0.5f;
  }
  const int next = (r + 1) % p, prev = (r + p - 1) % p;
  nlcclGroupStart();
  nlcclSend(out.data(), count, nlcclFloat, next, comm, nullptr);
  nlcclRecv(in.data(), count, nlcclFloat, prev, comm, nullptr);
  nlcclSend(selfOut.data(), count, nlcclFloat, r, comm, nullptr);
  nlcclRecv(selfIn.data(), count, nlcclFloat, r, comm, nullptr);
  if (nlcclGroupEnd() != nlcclSuccess) return std::string("send/recv: ") + nlcclGetLastError(comm);
  for (size_t i = 0; i < count; ++i) {
    if (in[i] != static_cast<float>(prev * 100000 + static_cast<int>(i % 65536)))
      return "send/recv: element " + std::to_string(i) + " from rank " + std::to_string(prev);
    if (selfIn[i] != selfOut[i]) return "send/recv to self: element " + std::to_string(i);
  }
  return "";
}

class OfiProcessTest : public ::testing::TestWithParam<Param> {};

TEST_P(OfiProcessTest, EveryCollectiveAndSendRecv) {
  const Param prm = GetParam();
  const int p = prm.nranks;
  Env env;
  env.set("NLCCL_OFI_PROVIDER", prm.provider);
  env.set("FI_TCP_IFACE", "lo");
  // A 64 KiB "max message": every large message is split into fragments.
  env.set("NLCCL_OFI_MAX_MSG_BYTES", "64K");
  env.set("NLCCL_SLICE_BYTES", "262144");
  if (prm.registration) {
    env.set("NLCCL_OFI_FORCE_MR_LOCAL", "1");
    env.set("NLCCL_OFI_MR_CACHE", "4");
  }
  nlcclConfig_t config = ofiConfig(20000);
  std::vector<pid_t> pids;
  std::set<std::string> memfds;
  const bool full = prm.full;
  auto status = forkRanks(
      p,
      [p, full](int r, nlcclComm_t comm) {
        std::vector<DataType> types = {DataType::Float32, DataType::Int8, DataType::Bfloat16,
                                       DataType::Int64};
        if (full) {
          types.clear();
          for (int t = 0; t < kNumDataTypes; ++t) types.push_back(static_cast<DataType>(t));
        }
        for (Collective c : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
                             Collective::Broadcast, Collective::Reduce, Collective::AllToAll,
                             Collective::AllToAllv}) {
          for (DataType t : types) {
            const int ops = reduces(c) ? (full || t == DataType::Float32 ? kNumRedOps : 1) : 1;
            for (int o = 0; o < ops; ++o) {
              for (bool inPlace : {false, true}) {
                if (inPlace && c == Collective::AllToAllv) continue;
                // 0 and 1 element, an odd count, and 1.2 MB: many 64 KiB fragments.
                for (size_t count : {size_t{0}, size_t{1}, size_t{7001}, size_t{300000}}) {
                  if (count == 300000 && !full && (t != DataType::Float32 || o > 1)) continue;
                  CollCase cc{c, t, static_cast<RedOp>(o), count, p - 1, inPlace};
                  CollBuffers b(cc, r, p);
                  nlcclResult_t res = b.issue(comm);
                  std::string err = res == nlcclSuccess ? b.check() : nlcclGetLastError(comm);
                  if (!err.empty()) {
                    fprintf(stderr, "rank %d: %s %s count %zu%s: %s\n", r, collectiveName(c),
                            dataTypeName(t), count, inPlace ? " in place" : "", err.c_str());
                    return false;
                  }
                }
              }
            }
          }
        }
        for (size_t count : {size_t{0}, size_t{1}, size_t{100003}}) {
          std::string err = sendRecvRing(comm, r, p, count);
          if (!err.empty()) {
            fprintf(stderr, "rank %d: %s\n", r, err.c_str());
            return false;
          }
        }
        return true;
      },
      full ? 600 : 90, &config, &memfds, &pids);
  for (int r = 0; r < p; ++r) EXPECT_EQ(status[r], 0) << "rank " << r;
  EXPECT_TRUE(fabricShmFiles(pids).empty()) << "libfabric shared memory left behind";
  EXPECT_EQ(memfdHolders(memfds), std::vector<std::string>{}) << "shared memory left behind";
}

INSTANTIATE_TEST_SUITE_P(Ofi, OfiProcessTest,
                         ::testing::Values(Param{"tcp;ofi_rxm", 2, false},
                                           Param{"tcp;ofi_rxm", 4, false},
                                           Param{"shm", 2, false}, Param{"shm", 4, false},
                                           Param{"tcp;ofi_rxm", 3, false, true}),
                         paramName);
// Every data type and op: the slow sweep.
INSTANTIATE_TEST_SUITE_P(OfiFull, OfiProcessTest,
                         ::testing::Values(Param{"tcp;ofi_rxm", 2, true},
                                           Param{"tcp;ofi_rxm", 4, true}, Param{"shm", 3, true}),
                         paramName);

// A rank SIGKILLed while its all-reduce is moving data: the others fail (RemoteError or Timeout)
// within the timeout, and nothing is left in /dev/shm. Over tcp: libfabric's shm provider can
// hang a sender to a killed peer (docs/ofi.md).
TEST(OfiProcessFailure, KilledRankBecomesAnErrorOnTheOthers) {
  Env env;
  env.set("NLCCL_OFI_PROVIDER", "tcp;ofi_rxm");
  env.set("FI_TCP_IFACE", "lo");
  std::vector<pid_t> pids;
  std::set<std::string> memfds;
  nlcclConfig_t config = ofiConfig(5000);
  auto status = forkRanks(
      3,
      [](int r, nlcclComm_t comm) {
        std::vector<float> buf(1 << 20, 1.0f);
        if (nlcclAllReduce(buf.data(), buf.data(), buf.size(), nlcclFloat, nlcclSum, comm,
                           nullptr) != nlcclSuccess)
          return false;
        if (r == 1) {
          nlcclStream_t s;
          nlcclStreamCreate(&s);
          std::vector<float> big(16 << 20, 1.0f);
          nlcclAllReduce(big.data(), big.data(), big.size(), nlcclFloat, nlcclSum, comm, s);
          usleep(20000);
          raise(SIGKILL);
        }
        buf.assign(16 << 20, 1.0f);
        nlcclResult_t res = nlcclAllReduce(buf.data(), buf.data(), buf.size(), nlcclFloat,
                                           nlcclSum, comm, nullptr);
        if (res != nlcclRemoteError && res != nlcclTimeout) return false;
        fprintf(stderr, "rank %d got the expected error: %s (%s)\n", r, nlcclGetErrorString(res),
                nlcclGetLastError(comm));
        nlcclCommAbort(comm);
        _exit(0);
      },
      30, &config, &memfds, &pids);  // a survivor still waiting after 30 s is killed: status 99
  EXPECT_EQ(status[0], 0);
  EXPECT_EQ(status[1], 100 + SIGKILL);
  EXPECT_EQ(status[2], 0);
  EXPECT_TRUE(fabricShmFiles(pids).empty()) << "libfabric shared memory left behind";
  EXPECT_EQ(memfdHolders(memfds), std::vector<std::string>{}) << "shared memory left behind";
}

/// Forks `n` ranks that only initialise over ofi; each returns whether init failed with
/// InvalidUsage and a message naming `name`. As forkRanks does, rank 0's process makes the
/// unique id, so the test process starts no bootstrap thread before it forks (a child forked
/// while that thread held an allocator lock could hang under AddressSanitizer), and a rank that
/// outlives 60 s is killed rather than waited for.
void expectInitRefused(int n, const char* name) {
  void* mem = mmap(nullptr, sizeof(SharedId), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* sh = new (mem) SharedId();
  std::fflush(nullptr);
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      nlcclUniqueId id;
      if (shareUniqueId(sh, r, &id) != 0) _exit(3);
      nlcclConfig_t config = ofiConfig(10000);
      nlcclComm_t comm = nullptr;
      nlcclResult_t res = nlcclCommInitRankConfig(&comm, n, id, r, &config);
      const char* msg = nlcclGetLastError(nullptr);
      bool ok = res == nlcclInvalidUsage && strstr(msg, name) != nullptr;
      if (!ok) fprintf(stderr, "rank %d: init returned %d: %s\n", r, res, msg);
      std::fflush(nullptr);
      _exit(ok ? 0 : 1);
    }
    pids.push_back(pid);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (int r = 0; r < n; ++r) {
    int st = 0;
    while (waitpid(pids[r], &st, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pids[r], SIGKILL);
        waitpid(pids[r], &st, 0);
        break;
      }
      usleep(2000);
    }
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "rank " << r << " status " << st;
  }
  munmap(mem, sizeof(SharedId));
}

TEST(OfiProcessFailure, FiProviderNonexistentIsInvalidUsage) {
  Env env;
  env.set("FI_PROVIDER", "nonexistent");
  expectInitRefused(2, "'nonexistent' (FI_PROVIDER)");
}

TEST(OfiProcessFailure, NlcclOfiProviderNonexistentIsInvalidUsage) {
  Env env;
  env.set("NLCCL_OFI_PROVIDER", "nonexistent");
  expectInitRefused(2, "'nonexistent' (NLCCL_OFI_PROVIDER)");
}

// The tuner knows its ranks talk over ofi (tuner::hostFabric's ofiInsideHosts): a 2 MiB
// all-reduce takes a reduce-scatter + all-gather algorithm, not rd (which a host over shm takes:
// there reduction on arrival is modelled free), and an 8-byte one stays on rd.
TEST(OfiProcessTuner, LargeAllReduceAvoidsRecursiveDoubling) {
  Env env;
  env.set("NLCCL_OFI_PROVIDER", "tcp;ofi_rxm");
  env.set("FI_TCP_IFACE", "lo");
  nlcclConfig_t config = ofiConfig(20000);
  auto status = forkRanks(
      2,
      [](int r, nlcclComm_t comm) {
        auto algorithmOf = [&](size_t count, std::string* algo) {
          std::vector<float> in(count, 1.0f + r), out(count, 0.0f);
          if (nlcclAllReduce(in.data(), out.data(), count, nlcclFloat, nlcclSum, comm,
                             nullptr) != nlcclSuccess || out[count - 1] != 3.0f)
            return false;
          nlcclCommStats_t st = {};
          st.size = sizeof(st);
          if (nlcclCommGetStats(comm, &st) != nlcclSuccess) return false;
          *algo = st.lastAlgorithm;
          return true;
        };
        std::string large, small;
        if (!algorithmOf(512 << 10, &large) || !algorithmOf(2, &small)) return false;
        if (r == 0) fprintf(stderr, "2 MiB: %s, 8 B: %s\n", large.c_str(), small.c_str());
        return (large == "ring" || large == "rhd") && small == "rd";
      },
      60, &config);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(status[r], 0) << "rank " << r;
}

}  // namespace
}  // namespace nlccl::testing
