#include "util/shared_memory.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <random>

#include "util/log.hpp"
#include "util/process.hpp"

namespace nlccl::shmem {

namespace {

struct Entry {
  size_t size;
  int fd;
  uint64_t id;
};

/// ptr range -> allocation; function-local statics so that use from static constructors works.
struct Registry {
  std::mutex mu;
  std::map<uintptr_t, Entry> byBase;
  uint64_t next = 0;
  uint64_t salt = 0;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: frees may come from atexit handlers
  return *r;
}

size_t pageSize() {
  static const size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return p;
}

// The token the receiver looks for in the target of /proc/<pid>/fd/<fd>.
void tokenFor(uint64_t id, char* buf, size_t n) {
  snprintf(buf, n, "nlccl-mem-%016" PRIx64, id);
}

// memfd when the kernel has it; otherwise a POSIX shm object unlinked at once (a kill between the
// two calls is the only moment a name exists).
int createObject(uint64_t id) {
  char name[64];
  tokenFor(id, name, sizeof name);
  int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd >= 0 || errno != ENOSYS) return fd;
  char path[80];
  snprintf(path, sizeof path, "/%s-%d", name, static_cast<int>(getpid()));
  fd = shm_open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd >= 0) shm_unlink(path);
  return fd;
}

// Whether process `pid` still holds the allocation named `token` at descriptor `fd`, asked after
// opening /proc/<pid>/fd/<fd> failed: No when the process is gone (or dying: it closes its
// descriptors before it shows as a zombie) or the descriptor is closed or names something else
// now; Unknown when this process may not look (/proc hides it, or no /proc).
enum class Held { Yes, No, Unknown };
Held ownerHolds(pid_t pid, int fd, const char* token) {
  if (processDead(pid, 0)) return Held::No;
  char link[64], target[256];
  snprintf(link, sizeof link, "/proc/%d/fd/%d", static_cast<int>(pid), fd);
  const ssize_t n = readlink(link, target, sizeof target - 1);
  if (n > 0) {
    target[n] = '\0';
    return strstr(target, token) ? Held::Yes : Held::No;
  }
  if (errno != ENOENT) return Held::Unknown;
  // The process is alive (or just reaped): its descriptor table shows no `fd`, or /proc cannot
  // show the process at all.
  char dir[64];
  snprintf(dir, sizeof dir, "/proc/%d/fd", static_cast<int>(pid));
  struct stat st;
  if (stat(dir, &st) == 0) return Held::No;
  return kill(pid, 0) != 0 && errno == ESRCH ? Held::No : Held::Unknown;
}

// Errors that say this process is short of something, whatever the owner does.
bool localShortage(int err) { return err == EMFILE || err == ENFILE || err == ENOMEM; }

}  // namespace

Status memAlloc(size_t size, void** ptr, bool reserve) {
  const size_t page = pageSize();
  if (size == 0 || size > SIZE_MAX - page) return Status::InvalidArgument;
  size_t bytes = (size + page - 1) / page * page;
  Registry& reg = registry();
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(reg.mu);
    if (reg.salt == 0) {
      std::random_device rd;
      reg.salt = (uint64_t{rd()} << 32) | 1;  // the low bits count
    }
    id = reg.salt + (reg.next++ << 1);
  }
  int fd = createObject(id);
  if (fd < 0) {
    WARN("nlcclMemAlloc: cannot create a shared memory object: %s", strerror(errno));
    return Status::SystemError;
  }
  // 0600 whatever the umask or the memfd default, and sealed against shrinking: a peer that maps
  // it can then never fault on a page that went away.
  if (fchmod(fd, 0600) != 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    WARN("nlcclMemAlloc: cannot size a shared memory object to %zu bytes: %s", bytes,
         strerror(errno));
    close(fd);
    return Status::SystemError;
  }
  if (reserve) {
    const int rc = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
    if (rc != 0) {
      WARN("shared memory: cannot reserve %zu bytes: %s", bytes, strerror(rc));
      close(fd);
      return Status::SystemError;
    }
  }
  fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);  // EINVAL on shm_open: fine
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    WARN("nlcclMemAlloc: cannot map %zu bytes of shared memory: %s", bytes, strerror(errno));
    close(fd);
    return Status::SystemError;
  }
  {
    std::lock_guard<std::mutex> lock(reg.mu);
    reg.byBase[reinterpret_cast<uintptr_t>(p)] = Entry{bytes, fd, id};
  }
  *ptr = p;
  return Status::Success;
}

Status memFree(void* ptr) {
  Registry& reg = registry();
  Entry e;
  {
    std::lock_guard<std::mutex> lock(reg.mu);
    auto it = reg.byBase.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == reg.byBase.end()) return Status::InvalidArgument;
    e = it->second;
    reg.byBase.erase(it);
  }
  munmap(ptr, e.size);
  close(e.fd);
  return Status::Success;
}

bool findAllocation(const void* ptr, size_t bytes, AllocationRef* out) {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  auto it = reg.byBase.upper_bound(p);
  if (it == reg.byBase.begin()) return false;
  --it;
  const uintptr_t base = it->first;
  const Entry& e = it->second;
  if (p - base > e.size || bytes > e.size - (p - base)) return false;
  *out = AllocationRef{e.id, e.fd, p - base, e.size};
  return true;
}

RemoteMapping& RemoteMapping::operator=(RemoteMapping&& o) noexcept {
  if (this != &o) {
    unmap();
    base_ = o.base_;
    size_ = o.size_;
    popLo_ = o.popLo_;
    popHi_ = o.popHi_;
    o.base_ = nullptr;
    o.size_ = 0;
    o.popLo_ = o.popHi_ = 0;
  }
  return *this;
}

void RemoteMapping::unmap() {
  if (base_) munmap(base_, size_);
  base_ = nullptr;
  size_ = 0;
  popLo_ = popHi_ = 0;
}

void RemoteMapping::populate(uint64_t offset, uint64_t bytes) {
  if (!base_ || bytes == 0 || offset >= size_) return;
  const uint64_t page = pageSize();
  const uint64_t lo = offset / page * page;
  const uint64_t end = offset + std::min(bytes, size_ - offset);
  const uint64_t hi = std::min<uint64_t>(size_, (end + page - 1) / page * page);
  if (popHi_ == popLo_) popLo_ = popHi_ = lo;   // nothing yet: an empty interval at lo
  if (lo >= popLo_ && hi <= popHi_) return;     // the usual case: done before
  // One interval, grown to cover both: the pages between two ranges read are filled too, once.
  const uint64_t nlo = std::min(lo, popLo_), nhi = std::max(hi, popHi_);
#ifdef MADV_POPULATE_READ
  auto fill = [&](uint64_t a, uint64_t b) {
    if (b > a) madvise(base_ + a, b - a, MADV_POPULATE_READ);  // best effort: faults otherwise
  };
  fill(nlo, popLo_);
  fill(popHi_, nhi);
#endif
  popLo_ = nlo;
  popHi_ = nhi;
}

Status RemoteMapping::open(pid_t pid, int fd, uint64_t id, uint64_t size, RemoteMapping* out,
                           bool writable) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/fd/%d", static_cast<int>(pid), fd);
  char token[64];
  tokenFor(id, token, sizeof token);
  int mine = ::open(path, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
  if (mine < 0) {
    const int err = errno;
    // The owner's failure when it no longer holds the buffer: it died, or it gave up and freed
    // it (a rank whose set-up failed frees its segment and may live on, e.g. waiting for the
    // others to leave its bootstrap root). Ours when we are short of descriptors or memory, or
    // may not open another process's descriptors.
    if (!localShortage(err) && ownerHolds(pid, fd, token) == Held::No) {
      WARN("shm: process %d no longer holds its shared buffer %s (%s: %s): it exited or freed it",
           static_cast<int>(pid), token, path, strerror(err));
      return Status::RemoteError;
    }
    WARN("shm: cannot open process %d's shared buffer (%s): %s", static_cast<int>(pid), path,
         strerror(err));
    return Status::SystemError;
  }
  // Check what we opened, not what the path named a moment earlier.
  char self[64], target[256] = {};
  snprintf(self, sizeof self, "/proc/self/fd/%d", mine);
  ssize_t n = readlink(self, target, sizeof target - 1);
  if (n > 0 && !strstr(target, token)) {
    // The ids never repeat: the owner closed the buffer and the number went to another file.
    WARN("shm: %s is no longer process %d's shared buffer %s: it exited or freed it", path,
         static_cast<int>(pid), token);
    close(mine);
    return Status::RemoteError;
  }
  struct stat st;
  if (n <= 0 || fstat(mine, &st) != 0 || static_cast<uint64_t>(st.st_size) < size) {
    WARN("shm: %s is not process %d's shared buffer %s of %" PRIu64 " bytes", path,
         static_cast<int>(pid), token, size);
    close(mine);
    return Status::SystemError;
  }
  // Not populated here: a single-copy source is often a small part of a large allocation
  // (populating a 256 MiB one took 6 ms here, paid by the first calls that read from it);
  // populate() fills in the part a transfer reads.
  void* p = mmap(nullptr, size, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, mine,
                 0);
  int err = errno;
  close(mine);
  if (p == MAP_FAILED) {
    WARN("shm: cannot map process %d's shared buffer (%" PRIu64 " bytes): %s",
         static_cast<int>(pid), size, strerror(err));
    return Status::SystemError;
  }
  out->unmap();
  out->base_ = static_cast<char*>(p);
  out->size_ = size;
  return Status::Success;
}

}  // namespace nlccl::shmem
