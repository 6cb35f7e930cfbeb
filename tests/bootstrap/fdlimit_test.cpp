// The root out of file descriptors: a forked child runs the root with every descriptor taken while
// connections pile up at its listener. The root must not spin (its process's CPU time stays a small
// share of the wait) and a real rank that tried to join meanwhile must join once descriptors free up.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "bootstrap/helpers.hpp"

namespace nlccl::bootstrap {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

/// What the root's process measured while it had no descriptor left.
struct FdReport {
  int64_t cpuUs = 0;   // user + system CPU time of the whole process over the window
  int64_t wallUs = 0;  // length of the window
  int fillers = 0;     // descriptors taken to reach EMFILE
  int acceptFailures = 0;
  int dropped = 0;
};

int64_t cpuMicros() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto us = [](const timeval& t) { return int64_t{t.tv_sec} * 1000000 + t.tv_usec; };
  return us(ru.ru_utime) + us(ru.ru_stime);
}

int highestFd() {
  int hi = 0;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) hi = std::max(hi, atoi(e->d_name));
    closedir(d);
  }
  return hi;
}

bool readAll(int fd, void* p, size_t n) {
  auto* b = static_cast<uint8_t*>(p);
  while (n > 0) {
    ssize_t r = read(fd, b, n);
    if (r <= 0) return false;
    b += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}
bool writeAll(int fd, const void* p, size_t n) { return write(fd, p, n) == static_cast<ssize_t>(n); }

/// The root's process: creates the id, waits for rank 0, takes every descriptor until told to give
/// them back, and reports what it measured meanwhile. Returns the exit code.
int rootProcess(int toParent, int fromParent) {
  UniqueId id;
  if (createUniqueId(&id) != Status::Success) return 1;
  if (!writeAll(toParent, &id, sizeof(id))) return 2;
  if (!test::waitFor([&] {
        RootStats s;
        return rootStats(id, &s) && s.joined >= 1;
      }))
    return 3;
  // Lower the soft limit close to what is open, then take the rest.
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  const rlimit original = rl;
  rl.rlim_cur = static_cast<rlim_t>(highestFd() + 16);
  if (setrlimit(RLIMIT_NOFILE, &rl) != 0) return 4;
  std::vector<int> fillers;
  for (;;) {
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0) break;
    fillers.push_back(fd);
  }
  if (errno != EMFILE) return 5;
  FdReport rep;
  rep.fillers = static_cast<int>(fillers.size());
  char go = 'F';
  int64_t cpu0 = cpuMicros();
  auto t0 = Clock::now();
  if (!writeAll(toParent, &go, 1)) return 6;      // "full"
  if (!readAll(fromParent, &go, 1)) return 7;     // blocks without CPU until "free"
  rep.cpuUs = cpuMicros() - cpu0;
  rep.wallUs = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
  RootStats s;
  if (rootStats(id, &s)) {
    rep.acceptFailures = s.acceptFailures;
    rep.dropped = s.dropped;
  }
  for (int fd : fillers) close(fd);
  setrlimit(RLIMIT_NOFILE, &original);
  if (!writeAll(toParent, &rep, sizeof(rep))) return 8;
  // Serve until both ranks have left, then join the root's thread (_exit skips the atexit hook).
  bool finished = test::rootFinished(id);
  shutdownAllRoots();
  return finished ? 0 : 9;
}

int reapChild(pid_t pid) {
  auto end = Clock::now() + 30s;
  int st = 0;
  while (Clock::now() < end) {
    if (waitpid(pid, &st, WNOHANG) == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    std::this_thread::sleep_for(5ms);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &st, 0);
  return 255;
}

/// A connection to the root that sends nothing (as a descriptor flood would). Non-blocking: once
/// the listener's backlog is full the kernel drops SYNs and a blocking connect would wait.
int idleConnection(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 &&
      errno != EINPROGRESS) {
    close(fd);
    fd = -1;
  }
  return fd;
}

/// True once the root has closed or reset `fd` (without consuming anything).
bool closedByPeer(int fd) {
  char c;
  ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/// Enough idle connections to overflow the listener's backlog (somaxconn), within our own limit.
int floodSize() {
  int somaxconn = 4096;
  if (FILE* f = fopen("/proc/sys/net/core/somaxconn", "r")) {
    if (fscanf(f, "%d", &somaxconn) != 1) somaxconn = 4096;
    fclose(f);
  }
  rlimit rl{};
  getrlimit(RLIMIT_NOFILE, &rl);
  rlim_t want = static_cast<rlim_t>(somaxconn) + 256;
  if (rl.rlim_cur < want && rl.rlim_max >= want) {
    rl.rlim_cur = want;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  getrlimit(RLIMIT_NOFILE, &rl);
  return static_cast<int>(std::min<rlim_t>(rl.rlim_cur - 128, static_cast<rlim_t>(somaxconn) + 64));
}

TEST(BootstrapFdLimit, RootOutOfDescriptorsDoesNotSpinAndARankJoinsOnceTheyFree) {
  int up[2], down[2];
  ASSERT_EQ(pipe(up), 0);
  ASSERT_EQ(pipe(down), 0);
  fflush(nullptr);
  pid_t pid = fork();  // before any thread of this process starts
  if (pid == 0) {
    close(up[0]);
    close(down[1]);
    _exit(rootProcess(up[1], down[0]));
  }
  close(up[1]);
  close(down[0]);
  UniqueId id;
  ASSERT_TRUE(readAll(up[0], &id, sizeof(id)));
  Endpoint ep;
  ASSERT_EQ(decodeUniqueId(id, &ep), Status::Success);

  // Rank 0 joins while the root has descriptors; rank 1 tries while it has none.
  auto body = [](Bootstrap& b) -> Status {
    int32_t mine = 40 + b.rank(), all[2];
    NLCHECK(b.allGather(&mine, sizeof(mine), all));
    return all[0] == 40 && all[1] == 41 ? b.barrier() : Status::InternalError;
  };
  std::vector<test::RankOutcome> r0, r1;
  std::thread t0([&] { r0 = test::runRanks(id, 2, {0}, 30s, body); });
  char go = 0;
  ASSERT_TRUE(readAll(up[0], &go, 1));  // the root is out of descriptors now
  std::vector<int> flood;
  const int floodWanted = floodSize();
  for (int i = 0; i < floodWanted; ++i) {
    int fd = idleConnection(ep.port);
    if (fd >= 0) flood.push_back(fd);
  }
  Clock::time_point joinedAt;
  std::thread t1([&] {
    r1 = test::runRanks(id, 2, {1}, 30s, body);
    joinedAt = Clock::now();
  });
  std::this_thread::sleep_for(1500ms);  // the window over which the root's CPU time is measured
  // Out of descriptors, the root turns queued connections away rather than leaving them in a
  // backlog that overflows (the kernel then drops SYNs and their retransmits delay a rank by
  // seconds). Some may still be in SYN retransmit; most must have been closed by now.
  size_t turnedAway = 0;
  for (int fd : flood) turnedAway += closedByPeer(fd);
  auto freedAt = Clock::now();
  ASSERT_TRUE(writeAll(down[1], "G", 1));
  FdReport rep;
  ASSERT_TRUE(readAll(up[0], &rep, sizeof(rep)));
  t1.join();
  t0.join();
  for (int fd : flood) close(fd);
  EXPECT_EQ(reapChild(pid), 0);
  close(up[0]);
  close(down[1]);

  ASSERT_EQ(r0.size(), 1u);
  ASSERT_EQ(r1.size(), 1u);
  EXPECT_EQ(r0[0].status, Status::Success) << r0[0].error;
  EXPECT_EQ(r1[0].status, Status::Success) << r1[0].error;
  double cpuShare = double(rep.cpuUs) / double(std::max<int64_t>(rep.wallUs, 1));
  double joinMs = std::chrono::duration<double, std::milli>(joinedAt - freedAt).count();
  printf("[ info ] %zu idle connections (%zu turned away); %d descriptors taken; root CPU %.1f ms over %.1f ms (%.0f%%); %d failed accepts, "
         "%d dropped; rank 1 joined %.1f ms after descriptors freed\n",
         flood.size(), turnedAway, rep.fillers, rep.cpuUs / 1000.0, rep.wallUs / 1000.0, 100 * cpuShare, rep.acceptFailures,
         rep.dropped, joinMs);
  RecordProperty("root_cpu_percent", static_cast<int>(100 * cpuShare));
  RecordProperty("join_after_free_ms", static_cast<int>(joinMs));
  // A spinning accept loop burns a whole core (~100%); backing off costs next to nothing. The bound
  // is far from both, so machine speed does not decide it.
  EXPECT_LT(cpuShare, 0.25) << "the root spun while out of descriptors";
  EXPECT_GE(turnedAway, flood.size() / 2) << "queued connections were left waiting in the backlog";
  // Generous: the rank must not wait for TCP's SYN back-off (the 13 s of the bug report).
  EXPECT_LT(joinMs, 5000.0) << "rank 1 joined late";
}

}  // namespace
}  // namespace nlccl::bootstrap
