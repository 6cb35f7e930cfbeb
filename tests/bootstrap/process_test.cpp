// Ranks as forked processes: a full bootstrap, a SIGKILLed rank, and a dead root.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "bootstrap/helpers.hpp"

namespace nlccl::bootstrap {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

/// Waits for `pid` up to `limit`, then kills it. Returns its exit code (or 128 + signal).
int reap(pid_t pid, std::chrono::milliseconds limit = 20s) {
  auto end = Clock::now() + limit;
  int st = 0;
  while (Clock::now() < end) {
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    std::this_thread::sleep_for(5ms);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &st, 0);
  return 255;
}

/// Forks a child that runs `fn` and exits with its result (never returns into gtest).
template <typename Fn>
pid_t forkRank(Fn fn) {
  fflush(nullptr);
  pid_t pid = fork();
  if (pid == 0) _exit(fn());
  return pid;
}

/// Forks `n` ranks before the root's thread exists, then creates the root and hands each rank
/// the id through a pipe. A child forked while another thread of the parent holds a lock (the
/// root thread's OpenSSL locks in HMAC/RAND_bytes during an earlier rank's handshake) inherits
/// it locked forever and deadlocks in its own handshake.
template <typename Fn>
std::vector<pid_t> forkRanksThenRoot(int n, UniqueId* id, Fn fn) {
  int p[2];
  if (pipe(p) != 0) return {};
  std::vector<pid_t> pids;
  for (int r = 0; r < n; ++r) {
    pids.push_back(forkRank([&, r]() -> int {
      close(p[1]);
      UniqueId got;
      if (read(p[0], &got, sizeof(got)) != static_cast<ssize_t>(sizeof(got))) return 100;
      return fn(r, got);
    }));
  }
  close(p[0]);
  if (createUniqueId(id) == Status::Success)
    for (int r = 0; r < n; ++r)
      if (write(p[1], id, sizeof(*id)) != static_cast<ssize_t>(sizeof(*id))) break;
  close(p[1]);  // on failure the ranks read EOF and exit 100
  return pids;
}

TEST(BootstrapProcess, ForkedRanksFormABootstrap) {
  UniqueId id;
  const int n = 4;
  auto pids = forkRanksThenRoot(n, &id, [&](int r, const UniqueId& id) -> int {
      std::unique_ptr<Bootstrap> b;
      if (Bootstrap::init(id, r, n, 10s, &b) != Status::Success) return 1;
      int64_t mine = getpid(), all[n];
      if (b->allGather(&mine, sizeof(mine), all) != Status::Success) return 2;
      for (int i = 0; i < n; ++i)
        if (all[i] <= 0 || (i == r && all[i] != getpid())) return 3;
      if (b->barrier() != Status::Success) return 4;
      int64_t v = r == 2 ? 777 : 0;
      if (b->broadcast(&v, sizeof(v), 2) != Status::Success || v != 777) return 5;
      return b->health() == Status::Success ? 0 : 6;
  });
  ASSERT_EQ(pids.size(), static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) EXPECT_EQ(reap(pids[r]), 0) << "rank " << r;
  EXPECT_TRUE(test::rootFinished(id));
}

TEST(BootstrapProcess, KilledRankTurnsOthersRemoteError) {
  UniqueId id;
  const int n = 4, victim = 3;
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  auto pids = forkRanksThenRoot(n, &id, [&](int r, const UniqueId& id) -> int {
      close(pipefd[0]);
      std::unique_ptr<Bootstrap> b;
      if (Bootstrap::init(id, r, n, 10s, &b) != Status::Success) return 1;
      if (r == victim) {
        for (;;) pause();  // wait to be SIGKILLed
      }
      // Block on a Notifier, as a transport waiting for the peer would.
      Notifier note;
      b->addWaker(&note);
      auto end = Clock::now() + 10s;
      while (b->failureWord()->load() == 0 && Clock::now() < end) {
        uint32_t e = note.epoch();
        if (b->failureWord()->load() != 0) break;
        note.wait(e, 200ms);
      }
      b->removeWaker(&note);
      int64_t seen = std::chrono::duration_cast<std::chrono::microseconds>(
                         Clock::now().time_since_epoch()).count();
      if (write(pipefd[1], &seen, sizeof(seen)) != sizeof(seen)) return 2;
      if (b->health() != Status::RemoteError) return 3;
      if (log::lastError().find("rank 3 disconnected") == std::string::npos) return 4;
      return 0;
  });
  close(pipefd[1]);
  ASSERT_EQ(pids.size(), static_cast<size_t>(n));
  ASSERT_TRUE(test::waitFor([&] {
    RootStats s;
    return rootStats(id, &s) && s.joined == n;
  }));
  std::this_thread::sleep_for(50ms);  // let the survivors reach their wait
  int64_t killedAt = std::chrono::duration_cast<std::chrono::microseconds>(
                         Clock::now().time_since_epoch()).count();
  kill(pids[victim], SIGKILL);
  for (int r = 0; r < n; ++r) {
    int code = reap(pids[r]);
    if (r == victim) {
      EXPECT_EQ(code, 128 + SIGKILL);
    } else {
      EXPECT_EQ(code, 0) << "rank " << r;
    }
  }
  int64_t seen;
  int64_t worst = 0;
  int reports = 0;
  while (read(pipefd[0], &seen, sizeof(seen)) == sizeof(seen)) {
    worst = std::max(worst, seen - killedAt);
    ++reports;
  }
  close(pipefd[0]);
  EXPECT_EQ(reports, n - 1);
  // Reported, not asserted (tests do not assert timing): the detection latency after SIGKILL.
  RecordProperty("detect_us", static_cast<int>(worst));
  printf("[ info ] survivors saw the dead rank %.3f ms after SIGKILL\n", worst / 1000.0);
  EXPECT_TRUE(test::rootFinished(id));
}

TEST(BootstrapProcess, DeadRootTurnsEveryRankRemoteError) {
  int idpipe[2];
  ASSERT_EQ(pipe(idpipe), 0);
  // The root lives in a child process that is killed once the ranks have joined.
  pid_t rootPid = forkRank([&]() -> int {
    UniqueId id;
    if (createUniqueId(&id) != Status::Success) return 1;
    if (write(idpipe[1], &id, sizeof(id)) != sizeof(id)) return 2;
    for (;;) pause();
  });
  UniqueId id;
  ASSERT_EQ(read(idpipe[0], &id, sizeof(id)), static_cast<ssize_t>(sizeof(id)));
  close(idpipe[0]);
  close(idpipe[1]);
  std::atomic<int> joined{0};
  std::thread killer([&] {
    test::waitFor([&] { return joined.load() == 2; });
    kill(rootPid, SIGKILL);
  });
  auto res = test::runRanks(id, 2, {0, 1}, 10s, [&](Bootstrap& b) -> Status {
    joined++;
    test::waitFor([&] { return b.health() != Status::Success; });
    return b.health();
  });
  killer.join();
  EXPECT_EQ(reap(rootPid), 128 + SIGKILL);
  for (auto& r : res) {
    EXPECT_EQ(r.status, Status::RemoteError);
    EXPECT_NE(r.error.find("lost the connection to the root"), std::string::npos) << r.error;
  }
}

}  // namespace
}  // namespace nlccl::bootstrap
