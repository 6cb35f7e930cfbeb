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

  explicit Owner(bool freeIt) {
    int p[2];
    if (pipe(p) != 0 || pipe(done) != 0) return;
    pid = fork();
    if (pid == 0) {
      void* mem = nullptr;
      AllocationRef r;
      if (nlccl::shmem::memAlloc(kBytes, &mem) != Status::Success ||
          !nlccl::shmem::findAllocation(mem, kBytes, &r))
        _exit(1);
      std::memset(mem, 0x5a, 4096);
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
