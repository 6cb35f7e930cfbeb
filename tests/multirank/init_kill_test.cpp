// A rank killed at any moment of nlcclCommInitRank (before, during and after the bootstrap
// exchange and the transport set-up) becomes RemoteError or Timeout on every survivor within the
// timeout, and leaves no shared memory mapped or open in any process (memfds.hpp: nlccl's shared
// memory has no names, so /dev/shm cannot show it). Each trial kills one rank at a delay spread
// over the length of a whole init (measured first), so the trials land in every phase.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "multirank/fork_ranks.hpp"
#include "nlccl.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kTimeoutMs = 3000;

// Exit codes of a rank: 0 all done; 10 + code init failed; 20 + code the first all-reduce
// failed; 30 + code the second (the victim never joins it) failed.
[[noreturn]] void rankMain(int n, int r, int victim, nlccl::testing::SharedId* sh) {
  nlccl::testing::currentLedger() = &sh->memfds;
  nlcclUniqueId id;
  if (nlccl::testing::shareUniqueId(sh, r, &id) != 0) _exit(3);
  nlcclConfig_t config = NLCCL_CONFIG_INITIALIZER;
  config.timeoutMs = kTimeoutMs;
  nlcclComm_t comm = nullptr;
  nlcclResult_t res = nlcclCommInitRankConfig(&comm, n, id, r, &config);
  if (res != nlcclSuccess) _exit(10 + res);
  nlccl::testing::recordMemfds();
  float x = 1, y = 0;
  res = nlcclAllReduce(&x, &y, 1, nlcclFloat, nlcclSum, comm, nullptr);
  if (res != nlcclSuccess) _exit(20 + res);
  nlccl::testing::recordMemfds();
  if (r == victim)
    for (;;) pause();  // the victim waits for its SIGKILL; the others go on without it
  // (victim < 0: nobody is killed and every rank runs both all-reduces)
  res = nlcclAllReduce(&x, &y, 1, nlcclFloat, nlcclSum, comm, nullptr);
  _exit(res == nlcclSuccess ? 0 : 30 + res);
}

struct Outcome {
  std::vector<int> status;  ///< exit code per rank (-1 killed by the test, 99 hung)
  double survivorsDoneMs = 0;  ///< from the kill to the last survivor's exit
  std::set<std::string> memfds;  ///< the shared memory the ranks recorded
};

/// Forks n ranks and SIGKILLs `victim` `delayUs` after the last fork (never when delayUs < 0).
/// Rank 0 makes the unique id (its process runs the bootstrap root) and hands it to the others
/// through memory shared before the fork, so this process starts no thread before forking. A
/// victim rank 0 is killed only once it has published the id (the delay counts from then).
Outcome trial(int n, int victim, int64_t delayUs) {
  void* mem = mmap(nullptr, sizeof(nlccl::testing::SharedId), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  auto* sh = new (mem) nlccl::testing::SharedId();
  std::fflush(nullptr);
  std::vector<pid_t> pids(n);
  for (int r = 0; r < n; ++r) {
    pids[r] = fork();
    if (pids[r] == 0) rankMain(n, r, victim, sh);
  }
  Outcome out;
  out.status.assign(n, -2);
  auto killedAt = Clock::now();
  if (delayUs >= 0) {
    while (victim == 0 && sh->state.load() == 0) usleep(100);
    usleep(static_cast<useconds_t>(delayUs));
    kill(pids[victim], SIGKILL);
    killedAt = Clock::now();
  }
  const auto deadline = Clock::now() + std::chrono::milliseconds(3 * kTimeoutMs);
  int left = n;
  while (left > 0) {
    for (int r = 0; r < n; ++r) {
      if (out.status[r] != -2) continue;
      int st = 0;
      if (waitpid(pids[r], &st, WNOHANG) != pids[r]) continue;
      out.status[r] = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
      if (r != victim)
        out.survivorsDoneMs = std::chrono::duration<double, std::milli>(Clock::now() - killedAt).count();
      --left;
    }
    if (left > 0 && Clock::now() > deadline)
      for (int r = 0; r < n; ++r)
        if (out.status[r] == -2) {
          kill(pids[r], SIGKILL);
          waitpid(pids[r], nullptr, 0);
          out.status[r] = 99;
          --left;
        }
    if (left > 0) usleep(1000);
  }
  out.memfds = sh->memfds.all();
  munmap(mem, sizeof(nlccl::testing::SharedId));
  return out;
}

bool remoteOrTimeout(int code) {
  const int c = code % 10;
  return code >= 10 && (c == nlcclRemoteError || c == nlcclTimeout);
}

void killDuringInit(int n, int trials) {
  // How long a whole init and the first all-reduce take here, with nobody killed: the kills are
  // spread over that span so that they land in every phase.
  const auto t0 = Clock::now();
  Outcome calib = trial(n, -1, -1);
  const double initUs = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  for (int r = 0; r < n; ++r) ASSERT_EQ(calib.status[r], 0) << "an unharmed run fails (rank " << r << ")";
  ASSERT_FALSE(calib.memfds.empty()) << "the ranks recorded no shared memory: nothing is checked";
  EXPECT_EQ(nlccl::testing::memfdHolders(calib.memfds), std::vector<std::string>{});
  int inInit = 0, later = 0;
  const double span = initUs;
  for (int t = 0; t < trials; ++t) {
    const int victim = t % n;
    const int64_t delay = static_cast<int64_t>(span * t / std::max(1, trials - 1));
    Outcome o = trial(n, victim, delay);
    for (int r = 0; r < n; ++r) {
      if (r == victim) continue;
      (o.status[r] < 20 ? inInit : later) += 1;
      EXPECT_TRUE(remoteOrTimeout(o.status[r]))
          << n << " ranks, rank " << victim << " killed after " << delay << " us: rank " << r
          << " exited with " << o.status[r] << " (want init/all-reduce failing with "
          << nlcclRemoteError << " or " << nlcclTimeout << ")";
    }
    EXPECT_LE(o.survivorsDoneMs, kTimeoutMs + 2000.0)
        << n << " ranks, kill after " << delay << " us: survivors took longer than the timeout";
    EXPECT_EQ(nlccl::testing::memfdHolders(o.memfds), std::vector<std::string>{})
        << "shared memory left behind (" << n << " ranks, kill after " << delay << " us)";
  }
  std::printf("%d ranks: %d trials over %.0f us; survivors failed in init %d times, later %d\n", n,
              trials, span, inInit, later);
}

#ifndef NLCCL_INIT_KILL_SWEEP
TEST(InitKill, TwoRanks) { killDuringInit(2, 5); }
TEST(InitKill, FourRanks) { killDuringInit(4, 5); }
#else
TEST(InitKillSweep, TwoRanksTenTrials) { killDuringInit(2, 10); }
TEST(InitKillSweep, FourRanksTenTrials) { killDuringInit(4, 10); }
TEST(InitKillSweep, EightRanksTenTrials) { killDuringInit(8, 10); }
#endif

}  // namespace
