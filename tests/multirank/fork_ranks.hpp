// Runs ranks as forked processes: the parent makes the unique id (so the bootstrap root lives in
// the parent), each child joins with nlcclCommInitRank, runs `body` and exits with its result.
#pragma once

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "multirank/memfds.hpp"
#include "nlccl.h"

namespace nlccl::testing {

/// Exit code of a child whose body returned `ok`.
inline int childExit(bool ok) { return ok ? 0 : 1; }

/// The unique id handed from rank 0 to the other ranks through memory shared before the fork.
struct SharedId {
  std::atomic<int> state{0};  ///< 0 pending, 1 ready, 2 rank 0 failed
  nlcclUniqueId id;
  MemfdLedger memfds;  ///< the nlccl shared memory the ranks mapped (memfds.hpp)
};

/// Rank 0's id for every rank: rank 0 makes it (its process runs the bootstrap root, as an MPI
/// job's rank 0 would), the others wait for it. -1 when rank 0 could not make one.
inline int shareUniqueId(SharedId* sh, int rank, nlcclUniqueId* out) {
  if (rank == 0) {
    const bool ok = nlcclGetUniqueId(&sh->id) == nlcclSuccess;
    if (!ok) fprintf(stderr, "nlcclGetUniqueId: %s\n", nlcclGetLastError(nullptr));
    sh->state.store(ok ? 1 : 2);
  }
  while (sh->state.load() == 0) usleep(200);
  if (sh->state.load() != 1) return -1;
  *out = sh->id;
  return 0;
}

/// Forks `n` ranks; returns the exit status of each (0 = success). `body` returns true on
/// success. Children that run longer than `limitSec` are killed (status 99). The test process
/// starts no thread before it forks (rank 0's process makes the unique id), so the children are
/// safe under AddressSanitizer too. `memfds` receives the nlccl shared memory the ranks mapped
/// (recorded after init and after `body`; a body may call recordMemfds() itself): once all have
/// exited, memfdHolders(*memfds) must be empty. `childPids` receives the ranks' process ids.
inline std::vector<int> forkRanks(int n, const std::function<bool(int rank, nlcclComm_t comm)>& body,
                                  int limitSec = 60, nlcclConfig_t* config = nullptr,
                                  std::set<std::string>* memfds = nullptr,
                                  std::vector<pid_t>* childPids = nullptr) {
  std::vector<int> status(n, -1);
  void* mem = mmap(nullptr, sizeof(SharedId), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
  if (mem == MAP_FAILED) return status;
  auto* sh = new (mem) SharedId();
  std::fflush(nullptr);
  std::vector<pid_t> pids(n);
  for (int r = 0; r < n; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      currentLedger() = &sh->memfds;
      nlcclUniqueId id;
      if (shareUniqueId(sh, r, &id) != 0) _exit(3);
      nlcclComm_t comm = nullptr;
      nlcclResult_t res = nlcclCommInitRankConfig(&comm, n, id, r, config);
      if (res != nlcclSuccess) {
        fprintf(stderr, "rank %d: init: %s\n", r, nlcclGetLastError(nullptr));
        _exit(2);
      }
      recordMemfds();
      bool ok = body(r, comm);
      recordMemfds();
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
  if (memfds) *memfds = sh->memfds.all();
  munmap(mem, sizeof(SharedId));
  return status;
}

}  // namespace nlccl::testing
