// Harness of the shared-memory transport tests (shm_transport_test.cpp, memalloc_test.cpp): ranks
// are forked processes that build a ShmTransport through an all-gather over a MAP_SHARED page,
// report failed checks through their exit code, and must leave nothing behind: once they have
// exited, no process may still map or hold the shared memory they used (memfds.hpp).
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <set>
#include <string>
#include <vector>

#include "multirank/memfds.hpp"
#include "transports/shm/shm.hpp"

namespace nlccl::transport::test {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

inline constexpr int kMaxRanks = 8;
inline constexpr int kRounds = 8;
inline constexpr size_t kMaxBlob = 256;

/// Lives in a MAP_SHARED page created before fork: the ranks' setup exchange and test flags.
struct Shared {
  std::atomic<int> arrived[kRounds];
  char blobs[kRounds][kMaxRanks][kMaxBlob];
  std::atomic<int> flag[8];
  std::atomic<int64_t> killedAtNs;
  std::atomic<int> reaped;                  // ranks the test process has waited for
  std::atomic<uint64_t> direct[kMaxRanks];  // single-copy receives per rank, for the parent
  testing::MemfdLedger memfds;              // the shared memory the ranks mapped
};

/// The rank of this forked process (-1 in the test process), for CHILD_CHECK's message.
inline thread_local int gRank = -1;

/// In a rank's body: on failure, names the check and makes the rank exit with code 1.
#define CHILD_CHECK(cond)                                                                    \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      fprintf(stderr, "rank %d: %s:%d: check failed: %s\n", ::nlccl::transport::test::gRank, \
              __FILE__, __LINE__, #cond);                                                    \
      return 1;                                                                              \
    }                                                                                        \
  } while (0)

/// The all-gather the bootstrap provides in real use: a round-numbered board in shared memory.
inline AllGatherFn makeAllGather(Shared* sh, int rank, int nranks) {
  auto round = std::make_shared<int>(0);
  return [=](const void* mine, size_t bytes, void* all) {
    if (bytes > kMaxBlob || *round >= kRounds) return Status::InternalError;
    int r = (*round)++;
    std::memcpy(sh->blobs[r][rank], mine, bytes);
    sh->arrived[r].fetch_add(1);
    auto deadline = Clock::now() + std::chrono::seconds(10);
    while (sh->arrived[r].load() < nranks) {
      if (Clock::now() > deadline) return Status::Timeout;
      usleep(200);
    }
    for (int i = 0; i < nranks; ++i)
      std::memcpy(static_cast<char*>(all) + i * bytes, sh->blobs[r][i], bytes);
    return Status::Success;
  };
}

/// Creates this rank's transport (collective over the `nranks` ranks); null on failure.
inline std::unique_ptr<ShmTransport> makeTransport(Shared* sh, int rank, int nranks,
                                                   std::function<Status()> health = {}) {
  std::unique_ptr<ShmTransport> t;
  Status s = ShmTransport::create(rank, nranks, makeAllGather(sh, rank, nranks), milliseconds(5000),
                                  std::move(health), &t);
  if (s != Status::Success) fprintf(stderr, "rank %d: create failed: %s\n", rank, statusName(s));
  testing::recordMemfds();  // our segment and the peers' we mapped
  return t;
}

/// Drives the transport like the engine until every request is done; the first failure wins.
/// Records the shared memory mapped by then (peers' buffers read single-copy, our own).
inline Status drive(Transport& t, const std::vector<Request*>& reqs, milliseconds timeout) {
  struct Record {
    ~Record() { testing::recordMemfds(); }
  } record;
  auto deadline = Clock::now() + timeout;
  while (true) {
    uint32_t epoch = t.activityEpoch();
    Status s = t.progress();
    if (s != Status::Success) return s;
    bool all = true;
    for (Request* r : reqs) {
      if (!r->done.load(std::memory_order_acquire))
        all = false;
      else if (r->status != Status::Success)
        return r->status;
    }
    if (all) return Status::Success;
    if (Clock::now() > deadline) return Status::Timeout;
    t.waitActivity(epoch, milliseconds(10));
  }
}

/// The int32 element `i` of message `msg` from `src` to `dst`.
inline int32_t value(int src, int dst, size_t msg, size_t i) {
  return static_cast<int32_t>(src * 1000003 + dst * 7919 + msg * 104729 + i * 13);
}

/// want[i] += acc[i] over the int32 elements of `bytes` (wrapping): what Sum on arrival yields.
inline void addInt32(char* want, const char* acc, size_t bytes) {
  for (size_t i = 0; i < bytes / 4; ++i) {
    int32_t a, b;
    std::memcpy(&a, want + i * 4, 4);
    std::memcpy(&b, acc + i * 4, 4);
    a = static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
    std::memcpy(want + i * 4, &a, 4);
  }
}

/// Sets an environment variable for the scope (the forked ranks inherit it).
struct ScopedEnv {
  std::string name;
  ScopedEnv(const char* n, const char* v) : name(n) { setenv(n, v, 1); }
  ~ScopedEnv() { unsetenv(name.c_str()); }
};

/// How runForked waits for its ranks.
struct ForkOptions {
  std::chrono::seconds limit{30};  // ranks still alive after this are killed
  /// The ranks map nlccl shared memory (a shm transport test): it is an error if they recorded
  /// none. False for transports that use none (ofi): then only nothing left behind is checked.
  bool sharedMemory = true;
};

/// A rank's body: returns its exit code (0 = success).
using RankFn = std::function<int(int rank, Shared*)>;
/// Runs in the test process while the ranks run, given their pids.
using ParentFn = std::function<void(Shared*, const std::vector<pid_t>&)>;

/// Forks `n` ranks running `fn`; returns their exit codes (-signal when killed). `parent` runs in
/// the test process meanwhile (e.g. to kill a rank). Ranks still alive after `opt.limit` are
/// killed; afterwards no process may map or hold the shared memory they recorded.
inline std::vector<int> runForked(int n, const RankFn& fn, const ParentFn& parent = {},
                                  ForkOptions opt = {}) {
  void* mem =
      mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  EXPECT_NE(mem, MAP_FAILED);
  auto* sh = new (mem) Shared();
  fflush(stdout);
  fflush(stderr);
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      gRank = r;
      testing::currentLedger() = &sh->memfds;
      int rc = fn(r, sh);
      fflush(stdout);
      fflush(stderr);
      _exit(rc);
    }
    pids.push_back(pid);
  }
  if (parent) parent(sh, pids);
  std::vector<int> codes(static_cast<size_t>(n), -1000);
  auto deadline = Clock::now() + opt.limit;
  for (int left = n; left > 0;) {
    int status = 0;
    pid_t p = waitpid(-1, &status, WNOHANG);
    if (p > 0) {
      for (int r = 0; r < n; ++r)
        if (pids[static_cast<size_t>(r)] == p)
          codes[static_cast<size_t>(r)] =
              WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
      --left;
      sh->reaped.fetch_add(1);
      continue;
    }
    if (Clock::now() > deadline) {
      ADD_FAILURE() << "ranks still running after " << opt.limit.count() << " s: killing them";
      for (pid_t q : pids) kill(q, SIGKILL);
      deadline = Clock::now() + std::chrono::hours(1);
    }
    usleep(1000);
  }
  const std::set<std::string> used = sh->memfds.all();
  munmap(mem, sizeof(Shared));
  if (opt.sharedMemory) {
    EXPECT_FALSE(used.empty()) << "the ranks recorded no shared memory: nothing was checked";
  }
  EXPECT_EQ(testing::memfdHolders(used), std::vector<std::string>{}) << "shared memory left behind";
  return codes;
}

/// The exit codes of a kill test: rank `victim` died of SIGKILL, every other rank returned 0.
inline void expectOnlyVictimKilled(const std::vector<int>& codes, int victim) {
  for (size_t r = 0; r < codes.size(); ++r) {
    if (static_cast<int>(r) == victim)
      EXPECT_EQ(codes[r], -SIGKILL);
    else
      EXPECT_EQ(codes[r], 0) << "rank " << r;
  }
}

}  // namespace nlccl::transport::test
