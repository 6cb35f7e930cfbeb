#include "core/comm.hpp"

#include "kernels/stream_store.hpp"

#include <sched.h>

#include <algorithm>
#include <thread>

#include "algorithms/algorithms.hpp"
#include "algorithms/selection.hpp"
#include "tuner/host_fabric.hpp"
#include <bit>
#include "util/params.hpp"
#include "util/trace.hpp"
#include "util/log.hpp"

namespace nlccl::core {

CommConfig defaultConfig() {
  CommConfig c;
  c.timeout = std::chrono::milliseconds(paramTimeoutMs().value);
  c.transport = paramTransport().value;
  c.topology = paramTopology().value;
  c.algorithm = paramAlgo().value;
  c.sliceBytes = static_cast<size_t>(paramSliceBytes().value);
  const auto stream = paramStreamStoreBytes();
  c.streamStoreBytes = stream.set && stream.ok ? static_cast<size_t>(stream.value)
                                               : kernels::lastLevelCacheBytes();
  c.check = paramCheck().value != 0;
  return c;
}

Communicator::Communicator(int rank, int nranks, std::unique_ptr<transport::Transport> transport,
                           std::shared_ptr<Rendezvous> rendezvous, CommConfig config)
    : rank_(rank),
      nranks_(nranks),
      transport_(std::move(transport)),
      rendezvous_(std::move(rendezvous)),
      config_(std::move(config)),
      sendCount_(nranks, 0),
      recvCount_(nranks, 0) {
  emptyCallsEnd_ = !config_.check && !(transport_ && transport_->timeModel() != nullptr);
}

Communicator::~Communicator() {
  magic_ = 0;
  alive_->store(false);
  if (trace::enabled()) trace::flush();  // processes that end with _exit keep their traces
}

Status Communicator::setAlgorithms(const std::string& spec) {
  algo::Selection chosen;
  std::string error;
  if (algo::parseSelection(spec, &chosen, &error) != Status::Success) {
    WARN("algorithm choice '%s': %s", spec.c_str(), error.c_str());
    return Status::InvalidArgument;
  }
  selection_ = std::move(chosen);
  return Status::Success;
}

std::string Communicator::algorithmFor(Collective c) const {
  return selection_.nameFor(c);
}

Status Communicator::tunerFabric(const fabric::Topology** out) {
  // tuneMu_ held by the caller.
  if (!fabric_) {
    auto topo = std::make_unique<fabric::Topology>();
    std::string error;
    Status s = Status::InvalidArgument;
    if (transport_ && transport_->timeModel() != nullptr) {
      // The modelled fabric, sliced as this library slices.
      const std::string spec = config_.topology.empty() ? "trn3-us144" : config_.topology;
      s = fabric::Topology::load(spec, {"chunk_bytes=" + std::to_string(config_.sliceBytes)},
                                 topo.get(), &error);
      if (s == Status::Success && topo->numRanks() < nranks_) {
        error = "the " + std::to_string(nranks_) + " ranks do not fit " + spec;
        s = Status::InvalidArgument;
      }
    }
    if (s != Status::Success) {
      if (!error.empty()) INFO(log::kTune, "tuner: %s; modelling the host instead", error.c_str());
      // Every pair over ofi (NLCCL_TRANSPORT=ofi): ranks of one host talk through it too.
      const bool ofiInside = transport_ && std::string(transport_->name()) == "ofi";
      s = tuner::hostFabric(nranks_, hostGroups_, config_.sliceBytes, ofiInside, topo.get(),
                            &error);
    }
    if (s != Status::Success) {
      WARN("tuner: cannot build the fabric of this communicator: %s", error.c_str());
      return s;
    }
    INFO(log::kTune, "tuner: rank %d of %d models fabric %s (%d ranks)", rank_, nranks_,
         topo->name().c_str(), topo->numRanks());
    fabric_ = std::move(topo);
  }
  *out = fabric_.get();
  return Status::Success;
}

/// Two ranks over shm: an all-reduce by rd is one exchange of the whole vector, by rhd or ring
/// two exchanges of half. The host model moves the same bytes for both and puts them within a
/// percent or two of each other; measured here, rd is 20-37% faster at 8-32 MiB and as fast
/// above (docs/shm-performance.md). Each rank copies a block of its input into the peer's slots
/// while it reduces the peer's copy of the same block into its output, so the input is read
/// from memory once; the two steps of the others each read another half (and the second one
/// the output the first wrote). So within kOneExchangeMargin of the best the choice is rd, out
/// of place only: in place rd reduces into scratch and copies the result home, a pass more.
void Communicator::preferOneExchange(Collective c, size_t bytes, tuner::Choice* choice) {
  constexpr double kOneExchangeMargin = 0.05;
  if (c != Collective::AllReduce || choice->best.algorithm == "rd") return;
  const tuner::Estimate* rd = nullptr;
  for (const tuner::Estimate& e : choice->considered)
    if (e.candidate.algorithm == "rd" && e.candidate.levelAlgorithms.empty() &&
        (rd == nullptr || e.timeS < rd->timeS))
      rd = &e;
  if (rd == nullptr || rd->timeS > choice->predictedS * (1 + kOneExchangeMargin)) return;
  INFO(log::kTune, "allreduce %zu B on 2 ranks over shm: rd (%.2f us predicted) instead of %s "
       "(%.2f us): one exchange", bytes, rd->timeS * 1e6, choice->best.label().c_str(),
       choice->predictedS * 1e6);
  choice->best = rd->candidate;
  choice->predictedS = rd->timeS;
}

/// In place, an algorithm that stages through scratch (rd) copies its result home: a pass over
/// memory the model charges when asked in place (tuner::Query::inPlace). All-reduce only: in
/// place is then the same question on every rank (sendbuff == recvbuff), while a rooted
/// collective is in place at its root alone, and the ranks must still agree. At 2 ranks over
/// shm the model moves in place from rd to ring at 16 KiB, where measurements put it too
/// (docs/shm-performance.md).
bool Communicator::stagingCounts(Collective c, bool inPlace) const {
  return inPlace && c == Collective::AllReduce;
}

Status Communicator::tune(Collective c, size_t bytes, int root, DataType dtype, bool inPlace,
                          tuner::Choice* out) {
  std::lock_guard<std::mutex> lock(tuneMu_);
  inPlace = stagingCounts(c, inPlace);
  const auto key = std::make_tuple(c, root, inPlace, static_cast<int>(std::bit_width(bytes)));
  auto it = tuned_.find(key);
  if (it != tuned_.end()) {
    *out = it->second;
    return Status::Success;
  }
  const fabric::Topology* topo = nullptr;
  NLCHECK(tunerFabric(&topo));
  tuner::Query q;
  q.collective = c;
  q.bytes = bytes;
  q.nranks = nranks_;
  q.root = root;
  q.dtype = dtype;
  q.inPlace = inPlace;
  std::string error;
  tuner::Choice choice;
  if (tuner::choose(*topo, q, {}, &choice, &error) != Status::Success) {
    WARN("tuner: %s of %zu bytes: %s", collectiveName(c), bytes, error.c_str());
    return Status::InternalError;
  }
  if (!inPlace && nranks_ == 2 && transport_ && std::string(transport_->name()) == "shm")
    preferOneExchange(c, bytes, &choice);
  tuned_.emplace(key, choice);
  *out = std::move(choice);
  return Status::Success;
}

Status Communicator::predict(const PredictCall& call, double* seconds) {
  std::lock_guard<std::mutex> lock(tuneMu_);
  const fabric::Topology* topo = nullptr;
  NLCHECK(tunerFabric(&topo));
  tuner::Query q;
  q.collective = call.collective;
  q.bytes = call.bytes;
  q.nranks = nranks_;
  q.root = call.root;
  q.dtype = call.dtype;
  q.groups = call.groups;
  sim::Result r;
  std::string error;
  if (tuner::simulateCandidate(*topo, q, call.candidate, sim::Mode::Analytical, {}, &r, &error) !=
      Status::Success) {
    WARN("nlcclGroupSimulateEnd: %s of %zu bytes with %s: %s", collectiveName(call.collective),
         call.bytes, call.candidate.label().c_str(), error.c_str());
    return Status::InternalError;
  }
  *seconds = r.timeS;
  return Status::Success;
}

Status Communicator::getPlan(const plan::Request& req, const std::string& algo,
                             std::shared_ptr<const plan::CompiledPlan>* out) {
  PlanKey key{req.collective, algo,       req.nranks,    req.root, req.count,
               req.inPlace,    req.groups, req.levelAlgorithms};
  bool cacheable = req.matrix.empty();
  if (cacheable) {
    std::lock_guard<std::mutex> lock(planMu_);
    auto it = plans_.find(key);
    if (it != plans_.end()) {
      *out = it->second;
      return Status::Success;
    }
  }
  std::string error;
  auto built = algo::build(req, algo, &error);
  if (!built) {
    WARN("%s", error.c_str());
    return Status::InvalidArgument;
  }
  std::shared_ptr<const plan::CompiledPlan> p;
  if (plan::compile(std::move(*built), &p, &error) != Status::Success) {
    WARN("%s plan of %s for %d ranks is malformed: %s", algo.c_str(),
         collectiveName(req.collective), req.nranks, error.c_str());
    return Status::InternalError;
  }
  if (cacheable) {
    std::lock_guard<std::mutex> lock(planMu_);
    plans_.emplace(std::move(key), p);
  }
  *out = std::move(p);
  return Status::Success;
}

uint64_t Communicator::nextSendTag(int peer) {
  std::lock_guard<std::mutex> lock(p2pMu_);
  return sendCount_[peer]++;
}

uint64_t Communicator::nextRecvTag(int peer) {
  std::lock_guard<std::mutex> lock(p2pMu_);
  return recvCount_[peer]++;
}

void Communicator::recordCollective(const char* algorithm, double vstart, double vend,
                                    uint64_t bytes) {
  lastModelledS_.store(vend - vstart, std::memory_order_relaxed);
  clockS_.store(modelledClock(), std::memory_order_relaxed);
  lastBytesSent_.store(bytes, std::memory_order_relaxed);
  lastAlgorithm_.store(algorithm, std::memory_order_relaxed);
  collectives_.fetch_add(1, std::memory_order_release);
}

double Communicator::modelledClock() const {
  const transport::TimeModel* model = transport_ ? transport_->timeModel() : nullptr;
  return model ? model->clock() : 0;
}

CommStats Communicator::stats() const {
  CommStats st;
  st.collectives = collectives_.load(std::memory_order_acquire);
  st.lastModelledS = lastModelledS_.load(std::memory_order_relaxed);
  st.clockS = clockS_.load(std::memory_order_relaxed);
  st.lastBytesSent = lastBytesSent_.load(std::memory_order_relaxed);
  st.lastAlgorithm = lastAlgorithm_.load(std::memory_order_relaxed);
  return st;
}

void Communicator::setLastError(const std::string& msg) {
  std::lock_guard<std::mutex> lock(errMu_);
  lastError_ = msg;
}

std::string Communicator::lastError() const {
  std::lock_guard<std::mutex> lock(errMu_);
  return lastError_;
}

void Communicator::setAsyncError(Status s) {
  int expected = 0;
  asyncError_.compare_exchange_strong(expected, static_cast<int>(s));
}

void Communicator::addPending() { pendingWork_.fetch_add(1); }

void Communicator::removePending() {
  // One atomic: the decrement is the last touch of *this (waitIdle may free the communicator as
  // soon as it sees 0), so nothing may follow it; waitIdle polls instead of being woken.
  pendingWork_.fetch_sub(1, std::memory_order_acq_rel);
}

void Communicator::waitIdle() {
  // Teardown and finalize only: spin a little (the last call is usually about to leave), then
  // sleep in growing steps up to kMaxNap, so that a long queue costs no CPU meanwhile.
  constexpr auto kMaxNap = std::chrono::microseconds(500);
  auto nap = std::chrono::microseconds(5);
  for (int i = 0; pendingWork_.load(std::memory_order_acquire) != 0; ++i) {
    if (i < 64) {
      sched_yield();
      continue;
    }
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, kMaxNap);
  }
}

void Communicator::abort() {
  if (aborted_.exchange(true)) return;
  alive_->store(false);
  setAsyncError(Status::RemoteError);
  if (transport_) transport_->abort(Status::RemoteError);
}

}  // namespace nlccl::core
