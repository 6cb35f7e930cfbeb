// Runs ranks as forked processes: the parent makes the unique id (so the bootstrap root lives in
// the parent), each child joins with nlcclCommInitRank, runs `body` and exits with its result.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "nlccl.h"

namespace nlccl::testing {

/// Exit code of a child whose body returned `ok`.
inline int childExit(bool ok) { return ok ? 0 : 1; }

/// Forks `n` ranks; returns the exit status of each (0 = success). `body` returns true on
/// success. Children that run longer than `limitSec` are killed (status 99).
inline std::vector<int> forkRanks(int n, const std::function<bool(int rank, nlcclComm_t comm)>& body,
                                  int limitSec = 60, nlcclConfig_t* config = nullptr,
                                  std::vector<pid_t>* childPids = nullptr) {
  nlcclUniqueId id;
  std::vector<int> status(n, -1);
  if (nlcclGetUniqueId(&id) != nlcclSuccess) {
    fprintf(stderr, "nlcclGetUniqueId: %s\n", nlcclGetLastError(nullptr));
    return status;
  }
  std::fflush(nullptr);
  std::vector<pid_t> pids(n);
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      nlcclComm_t comm = nullptr;
      nlcclResult_t res = nlcclCommInitRankConfig(&comm, n, id, r, config);
      if (res != nlcclSuccess) {
        fprintf(stderr, "rank %d: init: %s\n", r, nlcclGetLastError(nullptr));
        _exit(2);
      }
      bool ok = body(r, comm);
      nlcclCommDestroy(comm);
      std::fflush(nullptr);
      _exit(childExit(ok));
    }
    pids[r] = pid;
  }
  if (childPids) *childPids = pids;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(limitSec);
  int left = n;
  while (left > 0) {
    for (int r = 0; r < n; ++r) {
      if (status[r] != -1) continue;
      int st = 0;
      pid_t got = waitpid(pids[r], &st, WNOHANG);
      if (got == pids[r]) {
        status[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 100 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
        --left;
      }
    }
    if (left > 0 && std::chrono::steady_clock::now() > deadline) {
      for (int r = 0; r < n; ++r)
        if (status[r] == -1) {
          kill(pids[r], SIGKILL);
          waitpid(pids[r], nullptr, 0);
          status[r] = 99;
          --left;
        }
    }
    if (left > 0) usleep(2000);
  }
  return status;
}

/// Names of the shared-memory segments in /dev/shm made by the given processes (the shm transport
/// names them /nlccl-<pid>-...); other tests running at the same time have their own pids.
std::vector<std::string> nlcclShmSegments(const std::vector<pid_t>& pids);

}  // namespace nlccl::testing
