#include "util/process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace nlccl {

bool readProcStat(pid_t pid, char* state, uint64_t* startTime) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[1024];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  const char* p = strrchr(buf, ')');  // the command name may contain spaces and parentheses
  if (!p) return false;
  ++p;
  // Field 3 is the state, field 22 the start time in clock ticks since boot.
  char st = 0;
  unsigned long long start = 0;
  int fields = sscanf(p,
                      " %c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
                      "%*s %llu",
                      &st, &start);
  if (fields != 2) return false;
  *state = st;
  *startTime = start;
  return true;
}

bool processDead(pid_t pid, uint64_t startTime) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  char st = 0;
  uint64_t start = 0;
  if (!readProcStat(pid, &st, &start)) return false;  // no /proc: kill() is all we have
  if (st == 'Z' || st == 'X') return true;            // killed, not yet reaped
  return startTime != 0 && start != startTime;        // the pid was reused
}


}  // namespace nlccl
