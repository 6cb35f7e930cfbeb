#include "bench.hpp"
#include "moe_pattern.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "data.hpp"
#include "report.hpp"

namespace nlccl::perf {

void die(nlcclComm_t comm, const char* what, nlcclResult_t res) {
  int rank = -1;
  if (comm != nullptr) nlcclCommUserRank(comm, &rank);
  std::fprintf(stderr, "nlccl-perf: rank %d: %s failed: %s: %s\n", rank, what,
               nlcclGetErrorString(res), nlcclGetLastError(comm));
  std::fflush(stdout);
  std::fflush(stderr);
  _exit(1);  // other threads may be inside nlccl; do not run destructors under them
}

namespace {

using Clock = std::chrono::steady_clock;

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

std::atomic<int64_t> gTestStartNs{0};

/// --compare-mpi: the timed iterations run in this many alternating blocks per library.
constexpr int kCompareBlocks = 4;

#define NLOK(call)                                    \
  do {                                                \
    nlcclResult_t res_ = (call);                      \
    if (res_ != nlcclSuccess) die(comm_, #call, res_); \
  } while (0)

/// A buffer from nlcclMemAlloc (shared memory peers can read), or from the heap if that fails;
/// with -u it is used from `unalign` elements past its start.
class Buffer {
 public:
  explicit Buffer(size_t bytes) : bytes_(bytes < 64 ? 64 : bytes) {
    if (nlcclMemAlloc(&ptr_, bytes_) == nlcclSuccess && ptr_ != nullptr) {
      shared_ = true;
    } else if (posix_memalign(&ptr_, 4096, bytes_) != 0) {
      std::fprintf(stderr, "nlccl-perf: cannot allocate %zu bytes\n", bytes_);
      _exit(1);
    }
    // Touch every page once, as nccl-tests clears its buffers at allocation: otherwise nlccl's
    // first calls of a size pay the page faults (the kernel's page allocation) of each new range
    // of the output, and Open MPI, timed after it on the same buffers, none.
    std::memset(ptr_, 0, bytes_);
  }
  ~Buffer() {
    if (shared_) nlcclMemFree(ptr_);
    else std::free(ptr_);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  char* get() const { return static_cast<char*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_;
  bool shared_ = false;
};

/// nccl-tests' per-iteration statistics of `times` (seconds; the first `skip` left out).
IterStats statsOf(const std::vector<double>& times, int skip) {
  std::vector<double> t(times.begin() + std::min<size_t>(skip, times.size()), times.end());
  IterStats s;
  if (t.empty()) return s;
  std::sort(t.begin(), t.end());
  const int n = static_cast<int>(t.size());
  auto pct = [&](int p) { return t[std::min(n - 1, (n * p + 99) / 100 - 1)]; };
  s.min = t.front() * 1e6;
  s.max = t.back() * 1e6;
  s.p50 = t[n / 2] * 1e6;
  s.p95 = pct(95) * 1e6;
  s.p99 = pct(99) * 1e6;
  double sum = 0;
  for (double x : t) sum += x;
  const double avg = sum / n;
  double var = 0;
  for (double x : t) var += (x - avg) * (x - avg);
  s.avg = avg * 1e6;
  s.stdev = std::sqrt(var / n) * 1e6;
  s.cvPct = avg > 0 ? s.stdev / s.avg * 100 : 0;
  return s;
}

/// Buffers and counts of one call (alltoallv's per-peer arrays included).
struct CallArgs {
  const void* send;
  void* recv;
  nlcclRedOp_t op;
  std::vector<size_t> sendcounts, sdispls, recvcounts, rdispls;
};

class RankBench {
 public:
  RankBench(const Options& o, nlcclComm_t comm, const Launch& l) : o_(o), comm_(comm), launch_(l) {
    NLOK(nlcclCommCount(comm, &n_));
    NLOK(nlcclCommUserRank(comm, &rank_));
    // -Z 1: stream_ stays NULL, so every call blocks until done (synchronizing it is a no-op).
    if (!o.nullStream) NLOK(nlcclStreamCreate(&stream_));
    nlcclCommStats_t st;
    st.size = sizeof st;
    NLOK(nlcclCommGetStats(comm, &st));
    modelled_ = std::string(st.transport) == "neuronlink";
  }
  ~RankBench() {
    unregister();
    if (stream_) nlcclStreamDestroy(stream_);
  }

  int run();

 private:
  void barrier() {
    int32_t one = 1;
    NLOK(nlcclAllReduce(&one, &one, 1, nlcclInt32, nlcclSum, comm_, nullptr));
  }
  double reduceDouble(double v, nlcclRedOp_t op) {
    NLOK(nlcclAllReduce(&v, &v, 1, nlcclDouble, op, comm_, nullptr));
    return v;
  }
  /// -a: the time every rank reports: rank 0's, the mean, the min or the max over ranks.
  double aggregate(double v) {
    switch (o_.average) {
      case 0: return reduceDouble(rank_ == 0 ? v : 0.0, nlcclSum);
      case 2: return reduceDouble(v, nlcclMin);
      case 3: return reduceDouble(v, nlcclMax);
      default: return reduceDouble(v, nlcclSum) / n_;
    }
  }
  /// Modelled time of this rank's last collective (simulated NeuronLink transport).
  double lastModelledUs() {
    nlcclCommStats_t st;
    st.size = sizeof st;
    NLOK(nlcclCommGetStats(comm_, &st));
    return st.lastModelledUs;
  }
  int64_t sumInt(int64_t v) {
    NLOK(nlcclAllReduce(&v, &v, 1, nlcclInt64, nlcclSum, comm_, nullptr));
    return v;
  }
  void issue(const CheckCase& c, const CallArgs& a);
  CallArgs argsFor(const CheckCase& c, bool inPlace, nlcclRedOp_t op);
  Measure measure(CheckCase c, bool inPlace);
  /// Points sendBase_/recvBase_ at `type`'s first element used (-u); returns its size.
  size_t useType(nlcclDataType_t type) {
    const size_t ts = typeSize(type);
    sendBase_ = send_->get() + o_.unalign * ts;
    recvBase_ = recv_->get() + o_.unalign * ts;
    return ts;
  }
  void warmUp(const CheckCase& c, const CallArgs& a, MpiReference* mpi);
  void warmUpSweep(const CheckCase& smallest, const CheckCase& largest);
  double timeNlccl(const CheckCase& c, const CallArgs& a, int iters, std::vector<double>* each);
  double timeMpi(MpiReference* mpi, const CheckCase& c, const CallArgs& a, int iters);
  void perIteration(const std::vector<double>& mine, Measure* m);
  std::vector<RankInfo> gatherRanks();
  void registerBuffers();
  void unregister();

  const Options& o_;
  bool modelled_ = false;  ///< the transport reports modelled time (neuronlink)
  nlcclComm_t comm_;
  Launch launch_;
  int n_ = 0, rank_ = 0;
  nlcclStream_t stream_ = nullptr;
  std::unique_ptr<Buffer> send_, recv_;
  char* sendBase_ = nullptr;  ///< -u: the buffers' first byte used
  char* recvBase_ = nullptr;
  std::vector<void*> handles_;
  std::vector<nlcclWindow_t> windows_;
};

void RankBench::issue(const CheckCase& c, const CallArgs& a) {
  const Counts& k = c.counts;
  const void* send = a.send;
  void* recv = a.recv;
  switch (c.coll) {
    case Coll::AllReduce:
      NLOK(nlcclAllReduce(send, recv, k.param, c.type, a.op, comm_, stream_));
      break;
    case Coll::AllGather:
      NLOK(nlcclAllGather(send, recv, k.param, c.type, comm_, stream_));
      break;
    case Coll::ReduceScatter:
      NLOK(nlcclReduceScatter(send, recv, k.param, c.type, a.op, comm_, stream_));
      break;
    case Coll::Broadcast:
      NLOK(nlcclBroadcast(send, recv, k.param, c.type, c.root, comm_, stream_));
      break;
    case Coll::Reduce:
      NLOK(nlcclReduce(send, recv, k.param, c.type, a.op, c.root, comm_, stream_));
      break;
    case Coll::AlltoAll:
      NLOK(nlcclAlltoAll(send, recv, k.param, c.type, comm_, stream_));
      break;
    case Coll::AlltoAllv:
      NLOK(nlcclAlltoAllv(send, a.sendcounts.data(), a.sdispls.data(), recv, a.recvcounts.data(),
                          a.rdispls.data(), c.type, comm_, stream_));
      break;
    case Coll::Gather:
      NLOK(nlcclGather(send, recv, k.param, c.type, c.root, comm_, stream_));
      break;
    case Coll::Scatter:
      NLOK(nlcclScatter(send, recv, k.param, c.type, c.root, comm_, stream_));
      break;
    case Coll::SendRecv:
      // As nccl-tests: send to the next rank, receive from the previous one, in one group.
      NLOK(nlcclGroupStart());
      NLOK(nlcclSend(send, k.param, c.type, (rank_ + 1) % n_, comm_, stream_));
      NLOK(nlcclRecv(recv, k.param, c.type, (rank_ - 1 + n_) % n_, comm_, stream_));
      NLOK(nlcclGroupEnd());
      break;
    case Coll::HyperCube: {
      // nccl-tests' hypercube all-gather: this rank's block into place, then at dimension `mask`
      // exchange everything gathered so far with rank^mask. The block's copy is a send to self,
      // so that it runs in stream order like the rest.
      const size_t block = k.param * typeSize(c.type);
      char* r = static_cast<char*>(recv);
      if (r + rank_ * block != send) {
        NLOK(nlcclGroupStart());
        NLOK(nlcclSend(send, k.param, c.type, rank_, comm_, stream_));
        NLOK(nlcclRecv(r + rank_ * block, k.param, c.type, rank_, comm_, stream_));
        NLOK(nlcclGroupEnd());
      }
      for (int mask = 1; mask < n_; mask <<= 1) {
        const int s = rank_ & ~(mask - 1), from = s ^ mask;
        NLOK(nlcclGroupStart());
        NLOK(nlcclSend(r + s * block, k.param * mask, c.type, rank_ ^ mask, comm_, stream_));
        NLOK(nlcclRecv(r + from * block, k.param * mask, c.type, rank_ ^ mask, comm_, stream_));
        NLOK(nlcclGroupEnd());
      }
      break;
    }
  }
}

CallArgs RankBench::argsFor(const CheckCase& c, bool inPlace, nlcclRedOp_t op) {
  const size_t ts = typeSize(c.type);
  const Counts& k = c.counts;
  CallArgs a;
  a.send = inPlace ? recvBase_ + k.sendInPlace * rank_ * ts : sendBase_;
  a.recv = inPlace ? recvBase_ + k.recvInPlace * rank_ * ts : recvBase_;
  a.op = op;
  if (c.coll == Coll::AlltoAllv) {
    a.send = sendBase_;  // NCCL has no in-place all-to-all-v: both halves run out of place
    a.recv = recvBase_;
    for (int j = 0; j < n_; ++j) {
      a.sendcounts.push_back(a2avCount(rank_, j, k.param, n_));
      a.sdispls.push_back(a2avSendDispl(rank_, j, k.param, n_));
      a.recvcounts.push_back(a2avCount(j, rank_, k.param, n_));
      a.rdispls.push_back(a2avRecvDispl(j, rank_, k.param, n_));
    }
  }
  return a;
}

/// Seconds for `iters` iterations (each `-m` calls in one group), from a barrier to the
/// stream's completion. With `each` (-I), every iteration is synchronized and timed alone.
double RankBench::timeNlccl(const CheckCase& c, const CallArgs& a, int iters,
                            std::vector<double>* each) {
  barrier();
  auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) {
    // Only -I reads the clock per iteration (timeMpi does not, and a read costs ~25 ns here).
    const auto ti = each ? Clock::now() : Clock::time_point{};
    if (o_.aggIters > 1) NLOK(nlcclGroupStart());
    for (int m = 0; m < o_.aggIters; ++m) issue(c, a);
    if (o_.aggIters > 1) NLOK(nlcclGroupEnd());
    if (o_.blocking || each) NLOK(nlcclStreamSynchronize(stream_));
    if (o_.blocking == 1) barrier();
    if (each)  // per call, as the time column is
      each->push_back(std::chrono::duration<double>(Clock::now() - ti).count() / o_.aggIters);
  }
  NLOK(nlcclStreamSynchronize(stream_));
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// Seconds for `iters` calls of the MPI equivalent (each blocking), from an MPI_Barrier.
double RankBench::timeMpi(MpiReference* mpi, const CheckCase& c, const CallArgs& a, int iters) {
  mpi->barrier();
  auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) {
    for (int m = 0; m < o_.aggIters; ++m) mpi->issue(c, a.send, a.recv);
    if (o_.blocking == 1) mpi->barrier();
  }
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// -I: every rank's iteration times to every rank; rows per process (the max over its ranks),
/// and per iteration the max over rows, as nccl-tests reports them.
void RankBench::perIteration(const std::vector<double>& mine, Measure* m) {
  const size_t it = mine.size();
  std::vector<double> all(it * static_cast<size_t>(n_));
  NLOK(nlcclAllGather(mine.data(), all.data(), it, nlcclDouble, comm_, nullptr));
  const int per = std::max(1, launch_.ranksPerProcess);
  const int procs = (n_ + per - 1) / per;
  m->processTimesUs.assign(static_cast<size_t>(procs), std::vector<double>(it, 0.0));
  m->timesUs.assign(it, 0.0);
  std::vector<double> maxSec(it, 0.0);
  for (int r = 0; r < n_; ++r)
    for (size_t i = 0; i < it; ++i) {
      const double t = all[static_cast<size_t>(r) * it + i];
      double& row = m->processTimesUs[static_cast<size_t>(r / per)][i];
      row = std::max(row, t * 1e6);
      maxSec[i] = std::max(maxSec[i], t);
    }
  for (size_t i = 0; i < it; ++i) m->timesUs[i] = maxSec[i] * 1e6;
  m->perIter = true;
  m->stats = statsOf(maxSec, o_.perIterSkip);
}

/// -w calls of the case by nlccl, then by MPI when it is compared.
void RankBench::warmUp(const CheckCase& c, const CallArgs& a, MpiReference* mpi) {
  barrier();
  for (int i = 0; i < o_.warmup; ++i) {
    issue(c, a);
    if (o_.blocking) NLOK(nlcclStreamSynchronize(stream_));
  }
  NLOK(nlcclStreamSynchronize(stream_));
  if (mpi != nullptr) {
    mpi->barrier();
    for (int i = 0; i < o_.warmup; ++i) mpi->issue(c, a.send, a.recv);
  }
}

/// Before the first size, as nccl-tests does: a warm-up at the largest size, then at the
/// smallest, out of place, for both libraries. Without it the first size of a sweep paid what
/// only the first calls of a process pay (both libraries' first large calls, and, on
/// oversubscribed cores, the scheduler settling the ranks: a 4-rank 8-byte broadcast as the
/// first size ran 1.5-2.4x slower than as the second), and nlccl, timed first, paid most of it.
void RankBench::warmUpSweep(const CheckCase& smallest, const CheckCase& largest) {
  if (o_.warmup <= 0) return;
  for (const CheckCase* c : {&largest, &smallest}) {
    const CallArgs a = argsFor(*c, false, static_cast<nlcclRedOp_t>(nlcclSum));
    MpiReference* mpi =
        launch_.mpi != nullptr && launch_.mpi->supports(*c) ? launch_.mpi : nullptr;
    warmUp(*c, a, mpi);
  }
}

Measure RankBench::measure(CheckCase c, bool inPlace) {
  stampTest(true);
  const size_t ts = typeSize(c.type);
  const Counts& k = c.counts;
  // mulsum: a PreMulSum operator for this case, each rank with its own scalar.
  nlcclRedOp_t op = static_cast<nlcclRedOp_t>(c.op == kMulSum ? nlcclSum : c.op);
  if (collHasOp(c.coll) && c.op == kMulSum) {
    uint64_t scalar = 0;
    mulsumScalar(c.type, rank_, &scalar);
    NLOK(nlcclRedOpCreatePreMulSum(&op, &scalar, c.type, nlcclScalarHostImmediate, comm_));
  }
  const CallArgs a = argsFor(c, inPlace, op);
  const size_t span = std::max(k.send, k.recv) * ts;

  if (o_.check) {  // time on checked inputs too, as nccl-tests does
    poison(recvBase_, span);
    fillInput(c, const_cast<void*>(a.send));
  }
  MpiReference* mpi = inPlace || launch_.mpi == nullptr || !launch_.mpi->supports(c)
                          ? nullptr
                          : launch_.mpi;
  warmUp(c, a, mpi);
  // The warm-up's last call was this collective: the communicator says which algorithm ran.
  std::string algorithm;
  if (o_.warmup > 0) {
    nlcclCommStats_t st;
    st.size = sizeof st;
    NLOK(nlcclCommGetStats(comm_, &st));
    algorithm = st.lastAlgorithm;
  }

  // With MPI to compare, the iterations run in blocks that alternate between the two libraries
  // (and which goes first), so that load from other processes hits both alike.
  const int blocks = mpi != nullptr ? std::min(o_.iters, kCompareBlocks) : 1;
  double nlSec = 0, mpiSec = 0;
  std::vector<double> each;
  for (int b = 0; b < blocks; ++b) {
    const int iters = o_.iters / blocks + (b < o_.iters % blocks ? 1 : 0);
    if (mpi != nullptr && b % 2 == 1) mpiSec += timeMpi(mpi, c, a, iters);
    nlSec += timeNlccl(c, a, iters, o_.perIter ? &each : nullptr);
    if (mpi != nullptr && b % 2 == 0) mpiSec += timeMpi(mpi, c, a, iters);
  }

  Measure m;
  m.algorithm = algorithm;
  const double algBytes = collAlgBytes(c.coll, k, ts, n_);
  if (modelled_) {
    // The collective ends when its last rank does: the max over ranks of the last iteration.
    m.modelUs = reduceDouble(lastModelledUs(), nlcclMax);
    m.modelBusBw = m.modelUs > 0 ? algBytes / 1e9 / (m.modelUs * 1e-6) * collBusFactor(c.coll, n_) : 0;
  }
  const double calls = static_cast<double>(o_.iters) * o_.aggIters;
  m.timeUs = aggregate(nlSec * 1e6 / calls);
  double sec = m.timeUs * 1e-6;
  m.algBw = sec > 0 ? algBytes / 1e9 / sec : 0;
  m.busBw = m.algBw * collBusFactor(c.coll, n_);
  if (mpi != nullptr) {
    m.mpiTimeUs = aggregate(mpiSec * 1e6 / calls);
    double mpiS = m.mpiTimeUs * 1e-6;
    m.mpiBusBw = mpiS > 0 ? m.busBw * sec / mpiS : 0;
  }
  if (o_.perIter) perIteration(each, &m);

  if (o_.check) {
    int64_t wrong = 0;
    for (int i = 0; i < o_.check; ++i) {
      barrier();  // peers may still read our buffers (single copy) until they are done too
      poison(recvBase_, span);
      fillInput(c, const_cast<void*>(a.send));
      issue(c, a);
      NLOK(nlcclStreamSynchronize(stream_));
      // Test hook (--corrupt-result R): rank R spoils its first output element, so that a test
      // can see #wrong count it.
      if (rank_ == o_.corruptRank && k.recv > 0) static_cast<char*>(a.recv)[0] ^= 0x5a;
      wrong += countWrong(c, a.recv);
    }
    m.wrong = sumInt(wrong);
    barrier();
  }
  if (collHasOp(c.coll) && c.op == kMulSum) NLOK(nlcclRedOpDestroy(op, comm_));
  stampTest(false);
  return m;
}

std::vector<RankInfo> RankBench::gatherRanks() {
  RankInfo me{};
  me.rank = rank_;
  me.pid = static_cast<int32_t>(getpid());
  NLOK(nlcclCommCuDevice(comm_, &me.device));
  gethostname(me.host, sizeof me.host - 1);
  // How many peers each transport carries, in order of first appearance: "shm 3, ofi 4".
  std::vector<std::pair<std::string, int>> used;
  for (int p = 0; p < n_; ++p) {
    if (p == rank_) continue;
    const char* t = nullptr;
    NLOK(nlcclCommPeerTransport(comm_, p, &t));
    auto it = std::find_if(used.begin(), used.end(), [&](const auto& u) { return u.first == t; });
    if (it == used.end()) used.push_back({t, 1});
    else ++it->second;
  }
  std::string peers;
  for (const auto& [t, k] : used) peers += (peers.empty() ? "" : ", ") + t + " " + std::to_string(k);
  std::snprintf(me.peers, sizeof me.peers, "%s", peers.empty() ? "none" : peers.c_str());
  std::vector<RankInfo> all(static_cast<size_t>(n_));
  NLOK(nlcclAllGather(&me, all.data(), sizeof me, nlcclUint8, comm_, nullptr));
  return all;
}

void RankBench::registerBuffers() {
  for (Buffer* b : {send_.get(), recv_.get()}) {
    if (o_.registerMode == 1) {
      void* h = nullptr;
      NLOK(nlcclCommRegister(comm_, b->get(), b->bytes(), &h));
      handles_.push_back(h);
    } else if (o_.registerMode == 2) {
      nlcclWindow_t w = nullptr;
      NLOK(nlcclCommWindowRegister(comm_, b->get(), b->bytes(), &w, NLCCL_WIN_COLL_SYMMETRIC));
      windows_.push_back(w);
    }
  }
}

void RankBench::unregister() {
  for (void* h : handles_) nlcclCommDeregister(comm_, h);
  for (nlcclWindow_t w : windows_) nlcclCommWindowDeregister(comm_, w);
  handles_.clear();
  windows_.clear();
}

int RankBench::run() {
  std::unique_ptr<Reporter> rep;
  if (rank_ == 0) {
    rep = std::make_unique<Reporter>(o_, n_, launch_.mode, modelled_);
    rep->shmLatency(launch_.shmLatencyNs);
    if (!rep->open()) _exit(2);
  }
  if (collHasRoot(o_.coll) && o_.root >= n_) {
    if (rank_ == 0)
      std::fprintf(stderr, "nlccl-perf: -r: root %d is out of range (%d ranks)\n", o_.root, n_);
    return 2;
  }
  std::vector<RankInfo> ranks = gatherRanks();
  if (rep) rep->header(ranks);

  const size_t pad = o_.unalign * 8;  // -u: room to start `unalign` elements of any type late
  // --moe: a hot receiver's (or busy sender's) buffer holds more than the mean S.
  const size_t bufBytes = moeActive() ? std::max(o_.maxBytes, moeBufferBytes(o_.maxBytes, n_))
                                      : o_.maxBytes;
  send_ = std::make_unique<Buffer>(bufBytes + pad);
  recv_ = std::make_unique<Buffer>(bufBytes + pad);
  registerBuffers();

  if (o_.coll == Coll::HyperCube && (n_ & (n_ - 1)) != 0) {
    if (rep) std::printf("nRanks %d is not a power of 2, skipping\n", n_);
    if (rep) rep->footer();
    return 0;
  }

  std::vector<int> roots;
  if (!collHasRoot(o_.coll)) roots = {-1};
  else if (o_.root >= 0) roots = {o_.root};
  else for (int r = 0; r < n_; ++r) roots.push_back(r);
  std::vector<int> ops = collHasOp(o_.coll) ? o_.ops : std::vector<int>{nlcclSum};

  {
    const nlcclDataType_t type = o_.types.front();
    const size_t ts = useType(type);
    const int root = roots.front() < 0 ? 0 : roots.front();
    auto at = [&](size_t size) {
      return CheckCase{o_.coll, type, nlcclSum, root, rank_, n_,
                       collCounts(o_.coll, size / ts, n_)};
    };
    warmUpSweep(at(o_.minBytes), at(o_.maxBytes));
  }
  int64_t wrongTests = 0;
  for (int cycle = 0; o_.cycles == 0 || cycle < o_.cycles; ++cycle) {
    for (nlcclDataType_t type : o_.types) {
      const size_t ts = useType(type);
      for (int op : ops) {
        const char* opStr = collHasOp(o_.coll) ? opName(op) : "none";
        for (int root : roots) {
          for (size_t size = o_.minBytes; size <= o_.maxBytes;
               size = o_.stepFactor > 1 ? size * o_.stepFactor : size + o_.stepBytes) {
            CheckCase c{o_.coll, type, op, root < 0 ? 0 : root, rank_, n_,
                        collCounts(o_.coll, size / ts, n_)};
            Measure oop = measure(c, false);
            Measure ip = measure(c, true);
            wrongTests += (oop.wrong > 0) + (ip.wrong > 0);
            if (rep) {
              rep->row(std::max(c.counts.send, c.counts.recv) * ts, c.counts.param, type, opStr,
                       root, oop, ip);
            }
            if (size == 0 && o_.stepFactor > 1) break;
            if (o_.stepFactor <= 1 && o_.stepBytes == 0) break;
          }
        }
      }
    }
  }
  uint64_t scratch = 0;
  nlcclCommMemStats(comm_, nlcclStatGpuMemTotal, &scratch);
  const double mem = reduceDouble(static_cast<double>(send_->bytes() + recv_->bytes()), nlcclMax);
  const double scr = reduceDouble(static_cast<double>(scratch), nlcclMax);
  if (rep) {
    if (o_.memReport) rep->memory(mem, scr);
    rep->footer();
  }
  return wrongTests > 0 ? 1 : 0;
}

}  // namespace

void startWatchdog(int seconds) {
  if (seconds <= 0) return;
  std::thread([seconds] {
    const int64_t limit = int64_t{seconds} * 1000000000;
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const int64_t start = gTestStartNs.load();
      if (start != 0 && nowNs() - start > limit) {
        char host[256] = {};
        gethostname(host, sizeof host - 1);
        std::printf("%s: Test timeout (%ds)\n", host, seconds);
        std::fflush(stdout);
        _exit(1);
      }
    }
  }).detach();
}

void stampTest(bool starting) { gTestStartNs.store(starting ? nowNs() : 0); }

int runRank(const Options& opts, nlcclComm_t comm, const Launch& launch) {
  RankBench b(opts, comm, launch);
  return b.run();
}

}  // namespace nlccl::perf
