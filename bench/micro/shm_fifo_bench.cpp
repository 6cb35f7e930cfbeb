// Throughput of the shared-memory transport's slot FIFO: rank 0 (the benchmark thread) streams
// messages to rank 1 (a helper thread with receives always posted). Both ranks live in this
// process, but the data goes through the same POSIX shm segments, slots and futexes as between
// processes. Tune the FIFO with NLCCL_SHM_SLOT_BYTES / NLCCL_SHM_SLOTS. BM_ShmSingleCopyStream
// sends from an nlcclMemAlloc-style buffer instead, so messages of at least
// NLCCL_SHM_SINGLE_COPY_BYTES (default 64K) go single-copy (the receiver reads the sender's buffer).
#include <benchmark/benchmark.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "transports/shm/shm.hpp"
#include "util/shared_memory.hpp"

namespace {

using nlccl::Status;
using nlccl::transport::Request;
using nlccl::transport::ShmTransport;
using std::chrono::milliseconds;

/// Two transports connected through a thread-local all-gather board.
struct Pair {
  std::unique_ptr<ShmTransport> t[2];
  Pair() {
    std::vector<char> board;
    std::barrier sync(2);
    auto run = [&](int rank) {
      auto gather = [&](const void* mine, size_t bytes, void* all) {
        if (rank == 0) board.assign(2 * bytes, 0);
        sync.arrive_and_wait();
        std::memcpy(board.data() + rank * bytes, mine, bytes);
        sync.arrive_and_wait();
        std::memcpy(all, board.data(), 2 * bytes);
        sync.arrive_and_wait();
        return Status::Success;
      };
      ShmTransport::create(rank, 2, gather, milliseconds(10000), {}, &t[rank]);
    };
    std::thread other(run, 1);
    run(0);
    other.join();
  }
};

Status drive(ShmTransport& t, Request& r) {
  while (!r.done.load(std::memory_order_acquire)) {
    uint32_t e = t.activityEpoch();
    if (Status s = t.progress(); s != Status::Success) return s;
    if (r.done.load(std::memory_order_acquire)) break;
    t.waitActivity(e, milliseconds(10));
  }
  return r.status;
}

void stream(benchmark::State& state, bool shareable) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  Pair pair;
  if (!pair.t[0] || !pair.t[1]) {
    state.SkipWithError("ShmTransport::create failed");
    return;
  }
  std::atomic<int64_t> sent{0};
  std::atomic<bool> stop{false};
  std::atomic<int64_t> received{0};
  std::thread receiver([&] {
    std::vector<char> dst(bytes);
    ShmTransport& t = *pair.t[1];
    while (true) {
      int64_t n = received.load();
      while (n == sent.load()) {
        if (stop.load()) return;
        std::this_thread::yield();
      }
      Request r;
      t.postRecv(0, static_cast<uint64_t>(n), dst.data(), bytes, nullptr, &r);
      if (drive(t, r) != Status::Success) return;
      received.store(n + 1);
    }
  });
  std::vector<char> heap;
  char* src = nullptr;
  if (shareable) {
    void* p = nullptr;
    if (nlccl::shmem::memAlloc(bytes, &p) != Status::Success) {
      state.SkipWithError("memAlloc failed");
      stop.store(true);
      receiver.join();
      return;
    }
    src = static_cast<char*>(p);
  } else {
    heap.resize(bytes);
    src = heap.data();
  }
  std::memset(src, 1, bytes);
  ShmTransport& t = *pair.t[0];
  for (auto _ : state) {
    Request r;
    int64_t n = sent.load();
    t.postSend(1, static_cast<uint64_t>(n), src, bytes, &r);
    sent.store(n + 1);
    if (drive(t, r) != Status::Success) {
      state.SkipWithError("send failed");
      break;
    }
  }
  // The last messages may still sit in the slots: count them in by waiting for the receiver.
  while (received.load() < sent.load()) {
    t.progress();
    std::this_thread::yield();
  }
  stop.store(true);
  receiver.join();
  if (shareable) nlccl::shmem::memFree(src);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}

void BM_ShmFifoStream(benchmark::State& state) { stream(state, false); }
void BM_ShmSingleCopyStream(benchmark::State& state) { stream(state, true); }

BENCHMARK(BM_ShmFifoStream)
    ->Arg(8)
    ->Arg(64 << 10)
    ->Arg(1 << 20)
    ->Arg(16 << 20)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ShmSingleCopyStream)
    ->Arg(64 << 10)
    ->Arg(1 << 20)
    ->Arg(16 << 20)
    ->Arg(256 << 20)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
