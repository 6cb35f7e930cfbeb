#include "shm_latency.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <new>

namespace nlccl::perf {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kRuns = 3;
constexpr int64_t kTrips = 20000;                     ///< per run, at most
constexpr auto kRunTime = std::chrono::milliseconds(20);  ///< per run, at most (shared cores)
constexpr auto kGiveUp = std::chrono::seconds(2);         ///< a peer that stopped answering

struct alignas(64) Probe {
  std::atomic<int64_t> ball{0};  ///< odd: rank 0 served; even: rank 1 returned it
  char pad[56];
  std::atomic<int> stop{0};  ///< 1: done, 2: abandoned (the peer stopped answering)
};

/// Spins until `ball` reads `want` (false if the probe stopped or `giveUp` passed); yields now
/// and then, so that ranks sharing a core still get through (slowly: that is the figure then).
bool await(Probe* p, int64_t want, Clock::time_point giveUp) {
  for (uint32_t spins = 1;; ++spins) {
    if (p->ball.load(std::memory_order_acquire) == want) return true;
    if ((spins & 1023) == 0) {
      if (p->stop.load(std::memory_order_relaxed) != 0) return false;
      if (Clock::now() > giveUp) {
        p->stop.store(2, std::memory_order_relaxed);
        return false;
      }
      sched_yield();
    }
  }
}

}  // namespace

double shmLatencyNs(MPI_Comm world) {
  int worldRank = 0;
  MPI_Comm_rank(world, &worldRank);
  MPI_Comm node;
  MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int rank = 0, size = 1;
  MPI_Comm_rank(node, &rank);
  MPI_Comm_size(node, &size);
  // Only world rank 0's host measures; the others' "node 0" is another host's.
  int measures = worldRank == 0 ? 1 : 0;
  MPI_Bcast(&measures, 1, MPI_INT, 0, node);
  double result = -1;
  if (measures && size >= 2) {
    void* base = nullptr;
    MPI_Win win;
    MPI_Win_allocate_shared(rank == 0 ? static_cast<MPI_Aint>(sizeof(Probe)) : 0, 1,
                            MPI_INFO_NULL, node, &base, &win);
    MPI_Aint bytes = 0;
    int unit = 0;
    MPI_Win_shared_query(win, 0, &bytes, &unit, &base);
    Probe* p = rank == 0 ? new (base) Probe : static_cast<Probe*>(base);
    MPI_Barrier(node);
    if (rank == 0) {
      double runs[kRuns];
      bool ok = true;
      int64_t k = 0;
      const auto giveUp = Clock::now() + kGiveUp;
      for (int r = 0; r < kRuns && ok; ++r) {
        const auto start = Clock::now();
        int64_t trips = 0;
        while (ok && trips < kTrips && (trips % 256 != 0 || Clock::now() - start < kRunTime)) {
          p->ball.store(2 * k + 1, std::memory_order_release);
          ok = await(p, 2 * k + 2, giveUp);
          ++k;
          ++trips;
        }
        runs[r] = std::chrono::duration<double, std::nano>(Clock::now() - start).count() /
                  (2.0 * static_cast<double>(trips));
      }
      if (ok) {
        std::sort(runs, runs + kRuns);
        result = runs[kRuns / 2];
      }
      p->stop.store(ok ? 1 : 2, std::memory_order_relaxed);
    } else if (rank == 1) {
      const auto giveUp = Clock::now() + kGiveUp;
      for (int64_t k = 0; await(p, 2 * k + 1, giveUp); ++k)
        p->ball.store(2 * k + 2, std::memory_order_release);
    } else {
      while (p->stop.load(std::memory_order_relaxed) == 0) usleep(1000);  // off the cores
    }
    MPI_Barrier(node);
    MPI_Win_free(&win);
  }
  MPI_Comm_free(&node);
  MPI_Bcast(&result, 1, MPI_DOUBLE, 0, world);
  return result;
}

}  // namespace nlccl::perf
