// Mapping another process's allocation (RemoteMapping::open): whose failure it is when that
// fails. The owner's (RemoteError) when it no longer holds the allocation: it exited, or it freed
// it and lives on (a rank whose init failed frees its shm segment, then rank 0 waits for the
// others to leave its bootstrap root: the InitKill flake). Ours (SystemError) when this process
// is out of descriptors. Each owner is a forked child that hands its allocation over a pipe.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "util/shared_memory.hpp"

namespace {

using nlccl::Status;
using nlccl::shmem::AllocationRef;
using nlccl::shmem::RemoteMapping;

constexpr size_t kBytes = 8192;

/// A forked process owning one allocation (its first page filled with 0x5a). With `freeIt` it
/// frees the allocation after handing it over and then lives on until killed.
struct Owner {
  pid_t pid = -1;
  AllocationRef ref;
  int done[2] = {-1, -1};  // the child writes one byte once it has freed the allocation

  explicit Owner(bool freeIt, size_t bytes = kBytes) {
    int p[2];
    if (pipe(p) != 0 || pipe(done) != 0) return;
    pid = fork();
    if (pid == 0) {
      void* mem = nullptr;
      AllocationRef r;
      if (nlccl::shmem::memAlloc(bytes, &mem) != Status::Success ||
          !nlccl::shmem::findAllocation(mem, bytes, &r))
        _exit(1);
      std::memset(mem, 0x5a, bytes > kBytes ? bytes : 4096);
      if (write(p[1], &r, sizeof r) != static_cast<ssize_t>(sizeof r)) _exit(1);
      if (freeIt) {
        nlccl::shmem::memFree(mem);
        char c = 1;
        if (write(done[1], &c, 1) != 1) _exit(1);
      }
      for (;;) pause();
    }
    close(p[1]);
    if (read(p[0], &ref, sizeof ref) != static_cast<ssize_t>(sizeof ref)) ref.fd = -1;
    close(p[0]);
    if (freeIt) {
      char c;
      if (read(done[0], &c, 1) != 1) ref.fd = -1;
    }
  }
  void kill() {
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    pid = -1;
  }
  ~Owner() {
    kill();
    for (int fd : done)
      if (fd >= 0) close(fd);
  }
};

TEST(RemoteMapping, MapsALiveOwnersAllocation) {
  Owner o(false);
  ASSERT_GT(o.pid, 0);
  ASSERT_GE(o.ref.fd, 0);
  RemoteMapping m;
  ASSERT_EQ(RemoteMapping::open(o.pid, o.ref.fd, o.ref.id, o.ref.size, &m), Status::Success);
  EXPECT_EQ(m.size(), o.ref.size);
  EXPECT_EQ(m.data()[0], 0x5a);
  EXPECT_EQ(m.data()[4095], 0x5a);
}

long minorFaults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

/// Sums one byte of each page in [from, to) pages, so that every page is read. Not instrumented:
/// under ASan or TSan the shadow of the pages would fault in too, and be counted.
__attribute__((no_sanitize("address", "thread"))) int readPages(const RemoteMapping& m,
                                                                size_t from, size_t to) {
  int sum = 0;
  for (size_t i = from; i < to; ++i) sum += static_cast<volatile const char*>(m.data())[i * 4096];
  return sum;
}

// A single-copy source is often a small part of a large allocation: mapping it fills no page
// tables, populate() fills those of the range asked for (and remembers it), so the transfer that
// reads it then takes no page fault.
TEST(RemoteMapping, PopulateFillsTheRangeAskedForAndNoMore) {
  constexpr size_t kPages = 512;  // 2 MiB: fault-around maps 16 pages a fault at most
  Owner o(false, kPages * 4096);
  ASSERT_GT(o.pid, 0);
  ASSERT_GE(o.ref.fd, 0);
  RemoteMapping m;
  ASSERT_EQ(RemoteMapping::open(o.pid, o.ref.fd, o.ref.id, o.ref.size, &m), Status::Success);
  m.populate(100, kPages / 2 * 4096 - 200);  // the first half, by a range inside it
  long before = minorFaults();
  EXPECT_EQ(readPages(m, 0, kPages / 2), 0x5a * static_cast<int>(kPages / 2));
  EXPECT_LE(minorFaults() - before, 1);  // the range asked for: already in the page tables
  before = minorFaults();
  EXPECT_EQ(readPages(m, kPages / 2, kPages), 0x5a * static_cast<int>(kPages / 2));
  // The rest was not populated by the mapping (a fault per page, or per fault-around block).
  EXPECT_GE(minorFaults() - before, static_cast<long>(kPages / 2 / 16));
  m.populate(0, 4096);  // inside what is done: no call, nothing changes
  EXPECT_EQ(m.data()[0], 0x5a);
}

TEST(RemoteMapping, OwnerThatExitedIsRemoteError) {
  Owner o(false);
  ASSERT_GE(o.ref.fd, 0);
  const pid_t gone = o.pid;
  o.kill();  // killed and reaped: the pid names no process now
  RemoteMapping m;
  EXPECT_EQ(RemoteMapping::open(gone, o.ref.fd, o.ref.id, o.ref.size, &m, true),
            Status::RemoteError);
}

TEST(RemoteMapping, OwnerThatFreedItAndLivesOnIsRemoteError) {
  Owner o(true);
  ASSERT_GE(o.ref.fd, 0);
  ASSERT_EQ(::kill(o.pid, 0), 0) << "the owner must still be alive";
  RemoteMapping m;
  EXPECT_EQ(RemoteMapping::open(o.pid, o.ref.fd, o.ref.id, o.ref.size, &m, true),
            Status::RemoteError);
}

TEST(RemoteMapping, DescriptorNowNamingAnotherFileIsRemoteError) {
  // The owner freed the allocation and the number went to another file: the ids never repeat.
  void* mem = nullptr;
  AllocationRef r;
  ASSERT_EQ(nlccl::shmem::memAlloc(kBytes, &mem), Status::Success);
  ASSERT_TRUE(nlccl::shmem::findAllocation(mem, kBytes, &r));
  ASSERT_EQ(nlccl::shmem::memFree(mem), Status::Success);
  const int other = open("/dev/null", O_RDWR | O_CLOEXEC);
  ASSERT_EQ(other, r.fd) << "the lowest free number should be the freed allocation's";
  RemoteMapping m;
  EXPECT_EQ(RemoteMapping::open(getpid(), r.fd, r.id, r.size, &m), Status::RemoteError);
  close(other);
}

TEST(RemoteMapping, OutOfDescriptorsStaysSystemError) {
  // Negative control: the owner is alive and holds the allocation; we cannot open a descriptor.
  Owner o(false);
  ASSERT_GE(o.ref.fd, 0);
  const pid_t child = fork();
  if (child == 0) {
    const int lowest = open("/dev/null", O_RDONLY);  // the lowest free number: a limit there
    if (lowest < 0) _exit(3);                          // makes the next open fail
    close(lowest);
    rlimit lim;
    getrlimit(RLIMIT_NOFILE, &lim);
    lim.rlim_cur = static_cast<rlim_t>(lowest);
    if (setrlimit(RLIMIT_NOFILE, &lim) != 0) _exit(3);
    RemoteMapping m;
    const Status s = RemoteMapping::open(o.pid, o.ref.fd, o.ref.id, o.ref.size, &m);
    _exit(s == Status::SystemError ? 0 : s == Status::RemoteError ? 1 : 2);
  }
  ASSERT_GT(child, 0);
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << "1: RemoteError, 2: another status, 3: setrlimit failed";
}

}  // namespace
