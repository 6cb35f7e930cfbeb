// Ranks as processes over shared memory: every collective at 2, 3 and 4 processes with checked
// results, communicator split, and a rank killed mid-collective; afterwards no process may still
// map or hold the job's shared memory (memfds.hpp), a check whose negative control is here too.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "multirank/collective_case.hpp"
#include "multirank/fork_ranks.hpp"

namespace nlccl::testing {

namespace {

bool reduces(Collective c) {
  return c == Collective::AllReduce || c == Collective::ReduceScatter || c == Collective::Reduce;
}

class ProcessCollectivesTest : public ::testing::TestWithParam<int> {};

TEST_P(ProcessCollectivesTest, EveryCollective) {
  const int p = GetParam();
  std::set<std::string> memfds;
  auto status = forkRanks(p, [p](int r, nlcclComm_t comm) {
    bool ok = true;
    for (Collective c : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
                         Collective::Broadcast, Collective::Reduce, Collective::AllToAll,
                         Collective::AllToAllv, Collective::Gather, Collective::Scatter}) {
      for (int ti = 0; ti < kNumDataTypes; ++ti) {
        const DataType t = static_cast<DataType>(ti);
        for (int o = 0; o < (reduces(c) ? kNumRedOps : 1); ++o) {
          for (bool inPlace : {false, true}) {
            // 1.2 MB messages cross slot boundaries of the shm FIFOs; 1 element does not.
            for (size_t count : {size_t{1}, size_t{7001}, size_t{300000}}) {
              if (count == 300000 && (t != DataType::Float32 || o != 0)) continue;
              CollCase cc{c, t, static_cast<RedOp>(o), count, p - 1, inPlace};
              CollBuffers b(cc, r, p);
              nlcclResult_t res = b.issue(comm);
              if (inPlace && c == Collective::AllToAllv) {  // not supported: rejected
                if (res == nlcclInvalidArgument) continue;
                fprintf(stderr, "rank %d: in-place all-to-all-v returned %s\n", r,
                        nlcclGetErrorString(res));
                return false;
              }
              std::string err = res == nlcclSuccess ? b.check() : nlcclGetLastError(comm);
              if (!err.empty()) {
                fprintf(stderr, "rank %d: %s\n", r, err.c_str());
                ok = false;
                return ok;
              }
            }
          }
        }
      }
    }
    return ok;
  }, 60, nullptr, &memfds);
  for (int r = 0; r < p; ++r) EXPECT_EQ(status[r], 0) << "rank " << r;
  EXPECT_FALSE(memfds.empty()) << "the ranks mapped no nlccl shared memory: nothing was checked";
  EXPECT_EQ(memfdHolders(memfds), std::vector<std::string>{}) << "shared memory left behind";
}

INSTANTIATE_TEST_SUITE_P(Shm, ProcessCollectivesTest, ::testing::Values(2, 3, 4));

TEST(ProcessTest, SplitAcrossProcesses) {
  auto status = forkRanks(4, [](int r, nlcclComm_t comm) {
    nlcclComm_t sub = nullptr;
    if (nlcclCommSplit(comm, r % 2, r, &sub, nullptr) != nlcclSuccess) return false;
    int v = r + 1, sum = 0;
    bool ok = nlcclAllReduce(&v, &sum, 1, nlcclInt, nlcclSum, sub, nullptr) == nlcclSuccess &&
              sum == (r % 2 ? 2 + 4 : 1 + 3);
    nlcclCommDestroy(sub);
    return ok;
  });
  for (int r = 0; r < 4; ++r) EXPECT_EQ(status[r], 0) << "rank " << r;
}

// 2 ranks over shm: a large all-reduce is one exchange (rd), which the model puts within a
// percent of rhd (Communicator::preferOneExchange); 3 ranks keep the model's choice.
TEST(ProcessTest, TwoRankLargeAllReduceIsOneExchange) {
  for (int n : {2, 3}) {
    auto status = forkRanks(n, [n](int r, nlcclComm_t comm) {
      const size_t count = 4u << 20;  // 16 MiB of floats
      std::vector<float> in(count, 1.0f + r), out(count, 0.0f);
      if (nlcclAllReduce(in.data(), out.data(), count, nlcclFloat, nlcclSum, comm, nullptr) !=
          nlcclSuccess)
        return false;
      const float want = n == 2 ? 3.0f : 6.0f;
      if (out[0] != want || out[count - 1] != want) return false;
      nlcclCommStats_t st = {};
      st.size = sizeof(st);
      if (nlcclCommGetStats(comm, &st) != nlcclSuccess) return false;
      if (r == 0) fprintf(stderr, "%d ranks, 16 MiB: %s\n", n, st.lastAlgorithm);
      return n == 2 ? std::string(st.lastAlgorithm) == "rd"
                    : std::string(st.lastAlgorithm) != "rd";
    });
    for (int r = 0; r < n; ++r) EXPECT_EQ(status[r], 0) << n << " ranks, rank " << r;
  }
}

// In place, rd reduces into scratch and copies the result home: the tuner counts that pass
// (Communicator::stagingCounts), so an in-place all-reduce of 16 MiB at 2 ranks is not rd, while
// a tiny one (the copy costs less than ring's second step) and an out-of-place one still are.
TEST(ProcessTest, TwoRankInPlaceAllReduceLeavesRdWhenItsStagingCopyCosts) {
  auto status = forkRanks(2, [](int r, nlcclComm_t comm) {
    struct Case {
      size_t count;
      bool inPlace;
      bool rd;
    };
    for (const Case& c : {Case{4u << 20, true, false}, Case{4u << 20, false, true},
                          Case{256, true, true}}) {
      std::vector<float> in(c.count, 1.0f + r), out(c.count, 0.0f);
      float* dst = c.inPlace ? in.data() : out.data();
      if (nlcclAllReduce(in.data(), dst, c.count, nlcclFloat, nlcclSum, comm, nullptr) !=
          nlcclSuccess)
        return false;
      if (dst[0] != 3.0f || dst[c.count - 1] != 3.0f) return false;
      nlcclCommStats_t st = {};
      st.size = sizeof(st);
      if (nlcclCommGetStats(comm, &st) != nlcclSuccess) return false;
      if (r == 0)
        fprintf(stderr, "%zu floats %s: %s\n", c.count, c.inPlace ? "in place" : "out of place",
                st.lastAlgorithm);
      if ((std::string(st.lastAlgorithm) == "rd") != c.rd) return false;
    }
    return true;
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(status[r], 0) << "rank " << r;
}

// The negative control of the leftover check: a process that outlives the job and still maps its
// shared memory (here a child that rank 1 forks) is found, by pid, until it is gone.
TEST(ProcessTest, LeftoverCheckFindsMemoryThatOutlivesTheJob) {
  auto* keeper = static_cast<std::atomic<pid_t>*>(mmap(
      nullptr, sizeof(std::atomic<pid_t>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(keeper, MAP_FAILED);
  keeper->store(0);
  std::set<std::string> memfds;
  auto status = forkRanks(2, [keeper](int r, nlcclComm_t comm) {
    float x = 1, y = 0;
    if (nlcclAllReduce(&x, &y, 1, nlcclFloat, nlcclSum, comm, nullptr) != nlcclSuccess) return false;
    if (r == 1) {
      pid_t pid = fork();
      if (pid == 0)
        for (;;) pause();  // inherits every mapping of rank 1, its peer's segment included
      keeper->store(pid);
    }
    return y == 2;
  }, 30, nullptr, &memfds);
  EXPECT_EQ(status, (std::vector<int>{0, 0}));
  const pid_t pid = keeper->load();
  ASSERT_GT(pid, 0);
  const auto held = memfdHolders(memfds);
  ASSERT_FALSE(held.empty()) << "the leftover check missed a process that maps the job's memory";
  for (const std::string& h : held)
    EXPECT_EQ(h.rfind("pid " + std::to_string(pid) + " ", 0), 0u) << h;
  kill(pid, SIGKILL);
  for (int i = 0; i < 500 && !memfdHolders(memfds).empty(); ++i) usleep(10000);
  EXPECT_EQ(memfdHolders(memfds), std::vector<std::string>{});
  munmap(keeper, sizeof(std::atomic<pid_t>));
}

// NLCCL_DEBUG_FILE with %h, %p and %r: each rank process writes its own log file, named after
// its host, pid and rank, and its lines go there.
TEST(ProcessTest, DebugFileNamesHostPidAndRank) {
  char tmpl[] = "/tmp/nlccl-debug-file-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  setenv("NLCCL_DEBUG", "INFO", 1);
  setenv("NLCCL_DEBUG_FILE", (dir + "/nlccl.%h.%p.%r.log").c_str(), 1);
  auto status = forkRanks(3, [&dir](int r, nlcclComm_t comm) {
    float x = 1, y = 0;
    if (nlcclAllReduce(&x, &y, 1, nlcclFloat, nlcclSum, comm, nullptr) != nlcclSuccess) return false;
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    const std::string path = dir + "/nlccl." + host + "." + std::to_string(getpid()) + "." +
                             std::to_string(r) + ".log";
    std::ifstream in(path);
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Lines are "host:pid:tid [rank] NLCCL INFO ...".
    const std::string prefix = std::string(host) + ":" + std::to_string(getpid()) + ":";
    if (all.find(prefix) == std::string::npos || all.find("NLCCL INFO") == std::string::npos) {
      fprintf(stderr, "rank %d: %s has no INFO lines of this process (%zu bytes)\n", r,
              path.c_str(), all.size());
      return false;
    }
    return true;
  });
  unsetenv("NLCCL_DEBUG");
  unsetenv("NLCCL_DEBUG_FILE");
  EXPECT_EQ(status, (std::vector<int>{0, 0, 0}));
  // Exactly one file per rank: nothing went to a file of an unknown rank (%r as -1).
  std::vector<std::string> files;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') files.push_back(e->d_name);
    closedir(d);
  }
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files.size(), 3u);
  for (const std::string& f : files) {
    EXPECT_EQ(f.find(".-1.log"), std::string::npos) << f << ": a file for rank -1";
    std::remove((dir + "/" + f).c_str());
  }
  rmdir(dir.c_str());
}

void killedRankBecomesAnErrorOnTheOthers(const char* transport) {
  std::set<std::string> memfds;
  nlcclConfig_t config = NLCCL_CONFIG_INITIALIZER;
  config.timeoutMs = 5000;
  config.transport = transport;
  auto status = forkRanks(
      3,
      [](int r, nlcclComm_t comm) {
        std::vector<float> buf(1 << 20, 1.0f);
        // One good collective, then rank 1 dies in the middle of the next one: it queues it on a
        // stream (so its data is moving) and is killed a moment later.
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
        // Rank 1 may finish its part before it dies (64 MiB takes less than 20 ms on a quiet
        // machine), so the survivors' first all-reduce may succeed; the second, which rank 1
        // never joins, may not.
        buf.assign(16 << 20, 1.0f);
        nlcclResult_t res = nlcclSuccess;
        for (int i = 0; i < 2 && res == nlcclSuccess; ++i)
          res = nlcclAllReduce(buf.data(), buf.data(), buf.size(), nlcclFloat, nlcclSum, comm,
                               nullptr);
        // The README's promise: a peer that dies is RemoteError (or Timeout), nothing else.
        if (res != nlcclRemoteError && res != nlcclTimeout) {
          fprintf(stderr, "rank %d: the all-reduce returned %s (%s), not RemoteError or Timeout\n",
                  r, nlcclGetErrorString(res), nlcclGetLastError(comm));
          return false;
        }
        fprintf(stderr, "rank %d got the expected error: %s (%s)\n", r, nlcclGetErrorString(res),
                nlcclGetLastError(comm));
        nlcclCommAbort(comm);
        _exit(0);
      },
      30, &config, &memfds);  // a survivor still waiting after 30 s is killed: status 99
  EXPECT_EQ(status[0], 0);
  EXPECT_EQ(status[1], 100 + SIGKILL);
  EXPECT_EQ(status[2], 0);
  EXPECT_FALSE(memfds.empty()) << "the ranks mapped no nlccl shared memory: nothing was checked";
  EXPECT_EQ(memfdHolders(memfds), std::vector<std::string>{}) << "shared memory left behind";
}

TEST(ProcessTest, KilledRankBecomesAnErrorOnTheOthers) { killedRankBecomesAnErrorOnTheOthers("shm"); }

// The neuronlink transport's shared clock must not wait for the dead rank either.
TEST(ProcessTest, KilledRankBecomesAnErrorOnTheOthersOverNeuronLink) {
  killedRankBecomesAnErrorOnTheOthers("neuronlink");
}

}  // namespace
}  // namespace nlccl::testing
