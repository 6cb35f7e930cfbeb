#include "bench.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
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

/// --compare-mpi: the timed iterations run in this many alternating blocks per library.
constexpr int kCompareBlocks = 4;

#define NLOK(call)                                    \
  do {                                                \
    nlcclResult_t res_ = (call);                      \
    if (res_ != nlcclSuccess) die(comm_, #call, res_); \
  } while (0)

/// A buffer from nlcclMemAlloc (shared memory peers can read), or from the heap if that fails.
class Buffer {
 public:
  explicit Buffer(size_t bytes) {
    bytes = bytes < 64 ? 64 : bytes;
    if (nlcclMemAlloc(&ptr_, bytes) == nlcclSuccess && ptr_ != nullptr) {
      shared_ = true;
    } else if (posix_memalign(&ptr_, 4096, bytes) != 0) {
      std::fprintf(stderr, "nlccl-perf: cannot allocate %zu bytes\n", bytes);
      _exit(1);
    }
  }
  ~Buffer() {
    if (shared_) nlcclMemFree(ptr_);
    else std::free(ptr_);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  char* get() const { return static_cast<char*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  bool shared_ = false;
};

class RankBench {
 public:
  RankBench(const Options& o, nlcclComm_t comm, const Launch& l) : o_(o), comm_(comm), launch_(l) {
    NLOK(nlcclCommCount(comm, &n_));
    NLOK(nlcclCommUserRank(comm, &rank_));
    NLOK(nlcclStreamCreate(&stream_));
    nlcclCommStats_t st;
    st.size = sizeof st;
    NLOK(nlcclCommGetStats(comm, &st));
    modelled_ = std::string(st.transport) == "neuronlink";
  }
  ~RankBench() { nlcclStreamDestroy(stream_); }

  int run();

 private:
  void barrier() {
    int32_t one = 1;
    NLOK(nlcclAllReduce(&one, &one, 1, nlcclInt32, nlcclSum, comm_, nullptr));
  }
  double maxDouble(double v) {
    NLOK(nlcclAllReduce(&v, &v, 1, nlcclDouble, nlcclMax, comm_, nullptr));
    return v;
  }
  /// Modelled time of this rank's last collective (simulated NeuronLink transport).
  double lastModelledUs() {
    nlcclCommStats_t st;
    st.size = sizeof st;
    NLOK(nlcclCommGetStats(comm_, &st));
    return st.lastModelledUs;
  }
  double sumDouble(double v) {
    NLOK(nlcclAllReduce(&v, &v, 1, nlcclDouble, nlcclSum, comm_, nullptr));
    return v;
  }
  int64_t sumInt(int64_t v) {
    NLOK(nlcclAllReduce(&v, &v, 1, nlcclInt64, nlcclSum, comm_, nullptr));
    return v;
  }
  void issue(const CheckCase& c, const void* send, void* recv);
  Measure measure(CheckCase c, bool inPlace);
  double timeNlccl(const CheckCase& c, const void* send, void* recv, int iters);
  double timeMpi(MpiReference* mpi, const CheckCase& c, const void* send, void* recv, int iters);
  std::vector<RankInfo> gatherRanks();

  const Options& o_;
  bool modelled_ = false;  ///< the transport reports modelled time (neuronlink)
  nlcclComm_t comm_;
  Launch launch_;
  int n_ = 0, rank_ = 0;
  nlcclStream_t stream_ = nullptr;
  std::unique_ptr<Buffer> send_, recv_;
};

void RankBench::issue(const CheckCase& c, const void* send, void* recv) {
  const Counts& k = c.counts;
  switch (c.coll) {
    case Coll::AllReduce:
      NLOK(nlcclAllReduce(send, recv, k.param, c.type, c.op, comm_, stream_));
      break;
    case Coll::AllGather:
      NLOK(nlcclAllGather(send, recv, k.param, c.type, comm_, stream_));
      break;
    case Coll::ReduceScatter:
      NLOK(nlcclReduceScatter(send, recv, k.param, c.type, c.op, comm_, stream_));
      break;
    case Coll::Broadcast:
      NLOK(nlcclBroadcast(send, recv, k.param, c.type, c.root, comm_, stream_));
      break;
    case Coll::Reduce:
      NLOK(nlcclReduce(send, recv, k.param, c.type, c.op, c.root, comm_, stream_));
      break;
    case Coll::AlltoAll:
      NLOK(nlcclAlltoAll(send, recv, k.param, c.type, comm_, stream_));
      break;
    case Coll::SendRecv:
      // As nccl-tests: send to the next rank, receive from the previous one, in one group.
      NLOK(nlcclGroupStart());
      NLOK(nlcclSend(send, k.param, c.type, (rank_ + 1) % n_, comm_, stream_));
      NLOK(nlcclRecv(recv, k.param, c.type, (rank_ - 1 + n_) % n_, comm_, stream_));
      NLOK(nlcclGroupEnd());
      break;
  }
}

/// Seconds for `iters` nlccl calls, from a barrier to the stream's completion.
double RankBench::timeNlccl(const CheckCase& c, const void* send, void* recv, int iters) {
  barrier();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    issue(c, send, recv);
    if (o_.blocking) {
      NLOK(nlcclStreamSynchronize(stream_));
      barrier();
    }
  }
  NLOK(nlcclStreamSynchronize(stream_));
  auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(t1 - t0).count();
}

/// Seconds for `iters` calls of the MPI equivalent (each blocking), from an MPI_Barrier.
double RankBench::timeMpi(MpiReference* mpi, const CheckCase& c, const void* send, void* recv,
                          int iters) {
  mpi->barrier();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    mpi->issue(c, send, recv);
    if (o_.blocking) mpi->barrier();
  }
  auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(t1 - t0).count();
}

Measure RankBench::measure(CheckCase c, bool inPlace) {
  const size_t ts = typeSize(c.type);
  const Counts& k = c.counts;
  char* send = inPlace ? recv_->get() + k.sendInPlace * rank_ * ts : send_->get();
  char* recv = inPlace ? recv_->get() + k.recvInPlace * rank_ * ts : recv_->get();

  if (o_.check) {  // time on checked inputs too, as nccl-tests does
    poison(recv_->get(), std::max(k.send, k.recv) * ts);
    fillInput(c, send);
  }
  MpiReference* mpi = inPlace || launch_.mpi == nullptr || !launch_.mpi->supports(c)
                          ? nullptr
                          : launch_.mpi;
  barrier();
  for (int i = 0; i < o_.warmup; ++i) {
    issue(c, send, recv);
    if (o_.blocking) NLOK(nlcclStreamSynchronize(stream_));
  }
  NLOK(nlcclStreamSynchronize(stream_));
  // The warm-up's last call was this collective: the communicator says which algorithm ran.
  std::string algorithm;
  if (o_.warmup > 0) {
    nlcclCommStats_t st;
    st.size = sizeof st;
    NLOK(nlcclCommGetStats(comm_, &st));
    algorithm = st.lastAlgorithm;
  }
  if (mpi != nullptr) {
    mpi->barrier();
    for (int i = 0; i < o_.warmup; ++i) mpi->issue(c, send, recv);
  }

  // With MPI to compare, the iterations run in blocks that alternate between the two libraries
  // (and which goes first), so that load from other processes hits both alike.
  const int blocks = mpi != nullptr ? std::min(o_.iters, kCompareBlocks) : 1;
  double nlSec = 0, mpiSec = 0;
  for (int b = 0; b < blocks; ++b) {
    const int iters = o_.iters / blocks + (b < o_.iters % blocks ? 1 : 0);
    if (mpi != nullptr && b % 2 == 1) mpiSec += timeMpi(mpi, c, send, recv, iters);
    nlSec += timeNlccl(c, send, recv, iters);
    if (mpi != nullptr && b % 2 == 0) mpiSec += timeMpi(mpi, c, send, recv, iters);
  }

  Measure m;
  m.algorithm = algorithm;
  if (modelled_) {
    // The collective ends when its last rank does: the max over ranks of the last iteration.
    m.modelUs = maxDouble(lastModelledUs());
    double algBytes = collAlgBytes(c.coll, k, ts, n_);
    m.modelBusBw = m.modelUs > 0 ? algBytes / 1e9 / (m.modelUs * 1e-6) * collBusFactor(c.coll, n_) : 0;
  }
  m.timeUs = sumDouble(nlSec * 1e6 / o_.iters) / n_;  // nccl-tests reports the mean over ranks
  double sec = m.timeUs * 1e-6;
  m.algBw = sec > 0 ? collAlgBytes(c.coll, k, ts, n_) / 1e9 / sec : 0;
  m.busBw = m.algBw * collBusFactor(c.coll, n_);
  if (mpi != nullptr) {
    m.mpiTimeUs = sumDouble(mpiSec * 1e6 / o_.iters) / n_;
    double mpiS = m.mpiTimeUs * 1e-6;
    m.mpiBusBw = mpiS > 0 ? m.busBw * sec / mpiS : 0;
  }

  if (o_.check) {
    barrier();  // peers may still read our buffers (single copy) until they are done too
    poison(recv_->get(), std::max(k.send, k.recv) * ts);
    fillInput(c, send);
    issue(c, send, recv);
    NLOK(nlcclStreamSynchronize(stream_));
    m.wrong = sumInt(countWrong(c, recv));
    barrier();
  }
  return m;
}

std::vector<RankInfo> RankBench::gatherRanks() {
  RankInfo me{};
  me.rank = rank_;
  me.pid = static_cast<int32_t>(getpid());
  gethostname(me.host, sizeof me.host - 1);
  std::vector<RankInfo> all(static_cast<size_t>(n_));
  NLOK(nlcclAllGather(&me, all.data(), sizeof me, nlcclUint8, comm_, nullptr));
  return all;
}

int RankBench::run() {
  std::unique_ptr<Reporter> rep;
  if (rank_ == 0) {
    rep = std::make_unique<Reporter>(o_, n_, launch_.nThreads, launch_.mode, modelled_);
    if (!rep->open()) _exit(2);
  }
  if (collHasRoot(o_.coll) && o_.root >= n_) {
    if (rank_ == 0) {
      std::fprintf(stderr, "nlccl-perf: -r: root %d is out of range (%d ranks)\n", o_.root, n_);
    }
    return 2;
  }
  std::vector<RankInfo> ranks = gatherRanks();
  if (rep) rep->header(ranks);

  send_ = std::make_unique<Buffer>(o_.maxBytes);
  recv_ = std::make_unique<Buffer>(o_.maxBytes);

  std::vector<int> roots;
  if (!collHasRoot(o_.coll)) roots = {-1};
  else if (o_.root >= 0) roots = {o_.root};
  else for (int r = 0; r < n_; ++r) roots.push_back(r);
  std::vector<nlcclRedOp_t> ops = collHasOp(o_.coll) ? o_.ops : std::vector{nlcclSum};

  int64_t wrongTests = 0;
  for (nlcclDataType_t type : o_.types) {
    const size_t ts = typeSize(type);
    for (nlcclRedOp_t op : ops) {
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
  if (rep) rep->footer();
  return wrongTests > 0 ? 1 : 0;
}

}  // namespace

int runRank(const Options& opts, nlcclComm_t comm, const Launch& launch) {
  RankBench b(opts, comm, launch);
  return b.run();
}

}  // namespace nlccl::perf
