// nlccl-perf: nccl-tests for nlccl. Three ways to start the processes, each holding -t x -g
// rank threads:
//   (none)    one process (nlcclCommInitAll, or nlcclCommInitRankConfig per thread with -p/-x)
//   -np N     N forked processes; the parent makes the id and hands it over a pipe
//   mpirun    the MPI processes; rank 0 makes the id and MPI_Bcast's it (and with
//             --compare-mpi, MPI's own collectives are timed beside nlccl's)
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "bench.hpp"
#include "mpi_compare.hpp"
#include "options.hpp"

#if NLCCL_PERF_WITH_MPI
#define OMPI_SKIP_MPICXX 1  // the C API only: no link against the C++ bindings
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include "shm_latency.hpp"
#endif

using namespace nlccl::perf;

namespace {

bool launchedByMpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK",
                        "MV2_COMM_WORLD_SIZE", "MPI_LOCALNRANKS"}) {
    if (std::getenv(v) != nullptr) return true;
  }
  return false;
}

/// The ranks of this process (-t x -g of them): process `proc` of `nprocs` holds ranks
/// proc*k .. proc*k+k-1 of the communicator made from `id`. Without an id (one process), the
/// ranks come from nlcclCommInitAll unless -p or -x ask each thread to make its own.
int runProcessRanks(const Options& o, int nprocs, int proc, const nlcclUniqueId* id,
                    const char* mode, MpiReference* mpi, double shmLatencyNs = -1) {
  startWatchdog(o.timeoutSec);
  const int k = o.ranksPerProcess();
  std::vector<nlcclComm_t> comms(static_cast<size_t>(k), nullptr);
  nlcclConfig_t config = NLCCL_CONFIG_INITIALIZER;
  if (o.ctaPolicy >= 0) config.CTAPolicy = o.ctaPolicy;
  nlcclUniqueId made;
  if (id == nullptr && !o.parallelInit && o.ctaPolicy < 0) {
    nlcclResult_t res = nlcclCommInitAll(comms.data(), k, nullptr);
    if (res != nlcclSuccess) die(nullptr, "nlcclCommInitAll", res);
  } else {
    if (id == nullptr) {
      nlcclResult_t res = nlcclGetUniqueId(&made);
      if (res != nlcclSuccess) die(nullptr, "nlcclGetUniqueId", res);
      id = &made;
    }
    // Each rank thread joins on its own: nlcclCommInitRankConfig is collective.
    std::vector<std::thread> init;
    for (int i = 0; i < k; ++i)
      init.emplace_back([&, i] {
        nlcclResult_t res = nlcclCommInitRankConfig(&comms[i], nprocs * k, *id, proc * k + i, &config);
        if (res != nlcclSuccess) die(nullptr, "nlcclCommInitRankConfig", res);
      });
    for (auto& t : init) t.join();
  }
  std::vector<int> rc(comms.size(), 0);
  std::vector<std::thread> threads;
  Launch l{mode, k, mpi, shmLatencyNs};
  for (size_t i = 0; i < comms.size(); ++i) {
    threads.emplace_back([&, i] { rc[i] = runRank(o, comms[i], l); });
  }
  int status = 0;
  for (size_t i = 0; i < threads.size(); ++i) {
    threads[i].join();
    status = std::max(status, rc[i]);
  }
  for (nlcclComm_t c : comms) nlcclCommDestroy(c);
  return status;
}

bool readAll(int fd, void* buf, size_t n) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool writeAll(int fd, const void* buf, size_t n) {
  const char* p = static_cast<const char*>(buf);
  while (n > 0) {
    ssize_t r = write(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

int childRank(const Options& o, int rank, int fd) {
  nlcclUniqueId id;
  if (!readAll(fd, &id, sizeof id)) {
    std::fprintf(stderr, "nlccl-perf: rank %d: no unique id from the parent\n", rank);
    return 1;
  }
  close(fd);
  return runProcessRanks(o, o.np, rank, &id, "fork", nullptr);
}

/// Forks the ranks before any nlccl call in this process (no library threads are copied), then
/// makes the id here; this process keeps the bootstrap listener alive until all ranks exit.
int runForked(const Options& o) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids;
  std::vector<int> fds;
  for (int r = 0; r < o.np; ++r) {
    int p[2];
    if (pipe(p) != 0) {
      std::perror("nlccl-perf: pipe");
      return 1;
    }
    pid_t pid = fork();
    if (pid < 0) {
      std::perror("nlccl-perf: fork");
      for (pid_t c : pids) kill(c, SIGKILL);
      return 1;
    }
    if (pid == 0) {
      close(p[1]);
      for (int fd : fds) close(fd);
      int status = childRank(o, r, p[0]);
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(status);
    }
    close(p[0]);
    pids.push_back(pid);
    fds.push_back(p[1]);
  }
  nlcclUniqueId id;
  nlcclResult_t res = nlcclGetUniqueId(&id);
  if (res != nlcclSuccess) {
    std::fprintf(stderr, "nlccl-perf: nlcclGetUniqueId failed: %s: %s\n",
                 nlcclGetErrorString(res), nlcclGetLastError(nullptr));
  }
  for (int fd : fds) {
    // On failure the children read EOF and exit.
    if (res == nlcclSuccess) writeAll(fd, &id, sizeof id);
    close(fd);
  }
  // Wait for the ranks. Once one fails, the others get a grace period to fail on their own
  // (through the library's peer checks) before this parent ends them.
  int status = res == nlcclSuccess ? 0 : 1;
  size_t left = pids.size();
  std::chrono::steady_clock::time_point deadline{};
  bool failing = false;
  while (left > 0) {
    int ws = 0;
    pid_t done = waitpid(-1, &ws, failing ? WNOHANG : 0);
    if (done < 0 && errno == EINTR) continue;
    if (done < 0) break;
    if (done == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        for (size_t i = 0; i < pids.size(); ++i) {
          if (pids[i] > 0) {
            std::fprintf(stderr, "nlccl-perf: ending rank %zu (pid %d) after a failed rank\n",
                         i, static_cast<int>(pids[i]));
            kill(pids[i], SIGKILL);
          }
        }
        failing = false;  // now block until they are reaped
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      continue;
    }
    for (size_t i = 0; i < pids.size(); ++i) {
      if (pids[i] != done) continue;
      pids[i] = -1;
      --left;
      int code = WIFEXITED(ws) ? WEXITSTATUS(ws) : 1;
      if (WIFSIGNALED(ws)) {
        std::fprintf(stderr, "nlccl-perf: rank %zu died of signal %d\n", i, WTERMSIG(ws));
      }
      if (code != 0 && status == 0 && !failing && left > 0) {
        failing = true;
        deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      }
      status = std::max(status, code);
    }
  }
  return status;
}

#if NLCCL_PERF_WITH_MPI
int runMpi(int* argc, char*** argv, const Options& o) {
  MPI_Init(argc, argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  nlcclUniqueId id;
  int ok = 1;
  if (rank == 0) {
    nlcclResult_t res = nlcclGetUniqueId(&id);
    if (res != nlcclSuccess) {
      std::fprintf(stderr, "nlccl-perf: nlcclGetUniqueId failed: %s: %s\n",
                   nlcclGetErrorString(res), nlcclGetLastError(nullptr));
      ok = 0;
    }
  }
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!ok) {
    MPI_Finalize();
    return 1;
  }
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  std::unique_ptr<MpiReference> mpi;
  if (o.compareMpi) mpi = makeMpiReference();
  const double latency = shmLatencyNs(MPI_COMM_WORLD);  // before any rank spins in nlccl
  int status = runProcessRanks(o, size, rank, &id, "mpi", mpi.get(), latency);
  // Again after the table: a VM moves its cores between states within seconds, so a launch
  // whose two figures differ straddled a change.
  const double after = shmLatencyNs(MPI_COMM_WORLD);
  if (rank == 0 && latency >= 0 && after >= 0)
    std::printf("# Shared-memory latency after the run, ranks 0 <-> 1: %.0f ns one way\n", after);
  // Every rank has the same status (wrong counts are summed over ranks), so mpirun's is right.
  MPI_Finalize();
  return status;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  Options o;
  bool exitNow = false;
  int rc = parseOptions(argc, argv, &o, &exitNow);
  if (rc != 0 || exitNow) return rc;

  if (o.compareMpi && o.ranksPerProcess() > 1) {
    std::fprintf(stderr, "nlccl-perf: --compare-mpi: needs one rank per process (not -t or -g "
                         "above 1): MPI's ranks are the processes\n");
    return 2;
  }
  if (o.compareMpi) {
#if NLCCL_PERF_WITH_MPI
    if (!launchedByMpi()) {
      std::fprintf(stderr,
                   "nlccl-perf: --compare-mpi: needs a launch by mpirun (one rank per process); "
                   "not with -np or -t\n");
      return 2;
    }
#else
    std::fprintf(stderr,
                 "nlccl-perf: --compare-mpi: this nlccl-perf was built without MPI "
                 "(NLCCL_WITH_MPI=OFF)\n");
    return 2;
#endif
  }
  if (launchedByMpi()) {
#if NLCCL_PERF_WITH_MPI
    if (o.np > 0) {
      std::fprintf(stderr, "nlccl-perf: -np: not allowed under mpirun (mpirun makes the "
                           "processes)\n");
      return 2;
    }
    return runMpi(&argc, &argv, o);
#else
    std::fprintf(stderr,
                 "nlccl-perf: launched by MPI but built without MPI: each process runs alone\n");
#endif
  }
  if (o.np > 0) return runForked(o);
  return runProcessRanks(o, 1, 0, nullptr, "threads", nullptr);
}
