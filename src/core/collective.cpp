#include "core/collective.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <optional>
#include <sstream>

#include "algorithms/algorithms.hpp"
#include "core/group.hpp"
#include "core/prepared.hpp"
#include "util/params.hpp"
#include "core/work.hpp"
#include "util/log.hpp"
#include "util/ranges.hpp"

namespace nlccl::core {

namespace {

/// Group sizes and level algorithms for `hier`: NLCCL_HIER_GROUPS ("4x2", innermost first), else
/// the ranks per host; NLCCL_HIER_ALGOS ("ring,rhd", innermost first), else ring.
Status hierShape(const Communicator& comm, plan::Request* req) {
  const int nranks = comm.nranks();
  std::vector<int>* groups = &req->groups;
  std::string algos = paramHierAlgos().value;
  req->levelAlgorithms.clear();
  std::stringstream as(algos);
  for (std::string a; std::getline(as, a, ',');) {
    if (a != "ring" && a != "rhd" && a != "tree") {
      WARN("NLCCL_HIER_ALGOS=%s: '%s' is not a level algorithm (valid: ring, rhd, tree)",
           algos.c_str(), a.c_str());
      return Status::InvalidArgument;
    }
    req->levelAlgorithms.push_back(a);
  }
  std::string spec = paramHierGroups().value;
  *groups = comm.hostGroups();
  if (spec.empty()) return Status::Success;
  groups->clear();
  std::stringstream ss(spec);
  std::string tok;
  long product = 1;
  while (std::getline(ss, tok, 'x')) {
    int g = atoi(tok.c_str());
    if (g <= 0) {
      WARN("NLCCL_HIER_GROUPS=%s: '%s' is not a positive group size", spec.c_str(), tok.c_str());
      return Status::InvalidArgument;
    }
    groups->push_back(g);
    product *= g;
  }
  if (product != nranks) {
    WARN("NLCCL_HIER_GROUPS=%s: group sizes multiply to %ld, not to the %d ranks", spec.c_str(),
         product, nranks);
    return Status::InvalidArgument;
  }
  return Status::Success;
}

/// True when a call's count is per rank (nccl-tests' S is count x nranks elements).
bool perRankCount(Collective c) {
  return c == Collective::AllGather || c == Collective::ReduceScatter ||
         c == Collective::AllToAll || c == Collective::Gather || c == Collective::Scatter;
}

/// The tuner's choice for `a` (NLCCL_ALGO / the config left it at auto): the algorithm, hier's
/// levels and their algorithms, and the slice (-1: the configured one).
Status tuned(Communicator* comm, const CollArgs& a, plan::Request* req, std::string* algo,
             int64_t* slice) {
  const size_t es = dataTypeSize(a.dtype);
  const size_t bytes =
      a.count * es * (perRankCount(a.collective) ? static_cast<size_t>(comm->nranks()) : 1);
  tuner::Choice choice;
  NLCHECK(comm->tune(a.collective, bytes, a.root, a.dtype, req->inPlace, &choice));
  *algo = choice.best.algorithm;
  *slice = choice.best.sliceBytes;
  if (*algo == "hier") {
    req->groups = choice.groups;
    req->levelAlgorithms = choice.best.levelAlgorithms;
  }
  return Status::Success;
}

/// The algorithm of a call of `a`: the configured one (hier with its shape), or the tuner's.
Status choose(Communicator* comm, const CollArgs& a, plan::Request* req, std::string* algo,
              int64_t* slice) {
  *algo = comm->algorithmFor(a.collective);
  *slice = -1;
  if (*algo == algo::kAuto) return tuned(comm, a, req, algo, slice);
  if (*algo == "hier") return hierShape(*comm, req);
  return Status::Success;
}

/// True when block j starts where blocks 0..j-1 end (the Plan's packed layout).
bool packed(const size_t* counts, const size_t* displs, int p) {
  size_t at = 0;
  for (int j = 0; j < p; ++j) {
    if (displs[j] != at) return false;
    at += counts[j];
  }
  return true;
}

/// NLCCL_CHECK's record of an all-to-all-v: the signature and both count vectors.
CallCheck allToAllvCheck(Communicator* comm, uint64_t seq, const CollArgs& a,
                         const std::string& algo) {
  const int p = comm->nranks();
  CallCheck c;
  c.comm = comm;
  c.seq = seq;
  c.sig.collective = static_cast<int32_t>(Collective::AllToAllv);
  c.sig.dtype = static_cast<int32_t>(a.dtype);
  c.sig.algorithmHash = std::hash<std::string>{}(algo);
  c.counts.assign(a.sendcounts, a.sendcounts + p);
  c.counts.insert(c.counts.end(), a.recvcounts, a.recvcounts + p);
  return c;
}

/// All-to-all-v through a Plan (any algorithm but direct): the Plan needs every rank's counts, so
/// the Work first all-gathers the count rows, then builds the Plan; blocks are packed into scratch
/// when the user's displacements are not already packed.
Status allToAllvPlanned(Communicator* comm, const CollArgs& a, Stream* stream,
                        const std::string& algo) {
  const int p = comm->nranks(), me = comm->rank();
  const size_t es = dataTypeSize(a.dtype);
  plan::Request shape;
  NLCHECK(hierShape(*comm, &shape));  // may reject NLCCL_HIER_*: before any state changes
  auto work = std::make_shared<Work>();
  work->addComm(comm);
  // Counts gathered as uint64 rows of 2p: rank i's sendcounts, then its recvcounts. Every rank
  // then sees the whole matrix and what each rank expects, so a mismatch is found (and
  // reported) alike on every rank instead of only on the rank that expects other counts.
  auto row = std::make_shared<std::vector<uint64_t>>(a.sendcounts, a.sendcounts + p);
  row->insert(row->end(), a.recvcounts, a.recvcounts + p);
  auto rows = std::make_shared<std::vector<uint64_t>>(static_cast<size_t>(p) * 2 * p);
  plan::Request countsReq;
  countsReq.collective = Collective::AllGather;
  countsReq.nranks = p;
  countsReq.count = static_cast<size_t>(2 * p);
  engine::CollJob pre;
  NLCHECK(comm->getPlan(countsReq, "ring", &pre.plan));
  pre.rank = me;
  pre.input = row->data();
  pre.output = rows->data();
  pre.dtype = DataType::Uint64;
  pre.transport = comm->transport();
  pre.seq = comm->nextCollSeq();
  work->preColls.push_back(pre);
  const uint64_t seq = comm->nextCollSeq();
  std::vector<size_t> sc(a.sendcounts, a.sendcounts + p), sd(a.sdispls, a.sdispls + p),
      rc(a.recvcounts, a.recvcounts + p), rd(a.rdispls, a.rdispls + p);
  const char* send = static_cast<const char*>(a.send);
  char* recv = static_cast<char*>(a.recv);
  work->prepare.push_back([=](Work& w) -> Status {
    (void)row;  // owned here until the counts have been gathered
    plan::Request req;
    req.collective = Collective::AllToAllv;
    req.nranks = p;
    req.groups = shape.groups;
    req.levelAlgorithms = shape.levelAlgorithms;
    const size_t up = static_cast<size_t>(p);
    req.matrix.resize(up * up);
    for (size_t i = 0; i < up; ++i)
      for (size_t j = 0; j < up; ++j) {
        const uint64_t sent = (*rows)[i * 2 * up + j], expected = (*rows)[j * 2 * up + up + i];
        if (sent != expected) {
          WARN("nlcclAlltoAllv: rank %zu sends rank %zu %llu elements but rank %zu expects %llu "
               "from it (seen from rank %d)",
               i, j, static_cast<unsigned long long>(sent), j,
               static_cast<unsigned long long>(expected), me);
          return Status::InvalidUsage;
        }
        req.matrix[i * up + j] = sent;
      }
    std::shared_ptr<const plan::CompiledPlan> plan;
    NLCHECK(comm->getPlan(req, algo, &plan));
    size_t inTotal = 0, outTotal = 0;
    for (int j = 0; j < p; ++j) {
      inTotal += sc[j];
      outTotal += rc[j];
    }
    engine::CollJob job;
    job.plan = plan;
    job.rank = me;
    job.dtype = a.dtype;
    job.transport = comm->transport();
    job.seq = seq;
    job.input = send;
    job.output = recv;
    if (!packed(sc.data(), sd.data(), p)) {
      w.scratch.push_back(comm->leaseScratch(inTotal * es + 1));
      char* in = w.scratch.back().get();
      size_t at = 0;
      for (int j = 0; j < p; at += sc[j++]) std::memcpy(in + at * es, send + sd[j] * es, sc[j] * es);
      job.input = in;
    }
    if (!packed(rc.data(), rd.data(), p)) {
      w.scratch.push_back(comm->leaseScratch(outTotal * es + 1));
      char* out = w.scratch.back().get();
      job.output = out;
      w.finish.push_back([=] {
        size_t at = 0;
        for (int j = 0; j < p; at += rc[j++])
          std::memcpy(recv + rd[j] * es, out + at * es, rc[j] * es);
      });
    }
    w.scratch.push_back(comm->leaseScratch(plan->plan().scratchCount * es + 1));
    job.scratch = w.scratch.back().get();
    w.colls.push_back(job);
    w.collComms.push_back(comm);
    w.collScratch.push_back(0);  // leased above: this runs inside execute()
    if (comm->config().check) w.checks.push_back(allToAllvCheck(comm, seq, a, algo));
    return Status::Success;
  });
  return submit(std::move(work), stream);
}

/// True when a receive block overlaps a send block (the blocks of each buffer may interleave
/// with the other's, as long as no byte is in both).
bool blocksOverlap(const CollArgs& a, int p, size_t es) {
  std::vector<std::pair<uintptr_t, uintptr_t>> sends, recvs;
  const auto s0 = reinterpret_cast<uintptr_t>(a.send), r0 = reinterpret_cast<uintptr_t>(a.recv);
  for (int j = 0; j < p; ++j) {
    if (a.sendcounts[j] > 0) sends.push_back({s0 + a.sdispls[j] * es, s0 + (a.sdispls[j] + a.sendcounts[j]) * es});
    if (a.recvcounts[j] > 0) recvs.push_back({r0 + a.rdispls[j] * es, r0 + (a.rdispls[j] + a.recvcounts[j]) * es});
  }
  std::sort(sends.begin(), sends.end());
  std::sort(recvs.begin(), recvs.end());
  for (size_t i = 0, k = 0; i < sends.size() && k < recvs.size();) {
    if (sends[i].first < recvs[k].second && recvs[k].first < sends[i].second) return true;
    (sends[i].second <= recvs[k].second ? i : k) += 1;
  }
  return false;
}

Status allToAllv(Communicator* comm, const CollArgs& a, Stream* stream) {
  const size_t es = dataTypeSize(a.dtype);
  const int p = comm->nranks(), me = comm->rank();
  // Every check this rank can make alone comes first: a rejected call changes no state.
  if (a.send == a.recv && a.send != nullptr) {
    WARN("nlcclAlltoAllv: sendbuff and recvbuff are the same buffer; in-place all-to-all-v is not "
         "supported");
    return Status::InvalidArgument;
  }
  if (a.sendcounts[me] != a.recvcounts[me]) {
    WARN("nlcclAlltoAllv: rank %d sends itself %zu elements but expects %zu", me, a.sendcounts[me],
         a.recvcounts[me]);
    return Status::InvalidArgument;
  }
  if (blocksOverlap(a, p, es)) {
    WARN("nlcclAlltoAllv: a block of recvbuff (recvcounts/rdispls) overlaps a block of sendbuff "
         "(sendcounts/sdispls)");
    return Status::InvalidArgument;
  }
  std::string algo = comm->algorithmFor(Collective::AllToAllv);
  // The matrix is known only after the counts are exchanged: auto is direct here.
  if (algo == algo::kAuto) algo = "direct";
  if (algo != "direct") return allToAllvPlanned(comm, a, stream, algo);
  auto work = std::make_shared<Work>();
  work->addComm(comm);
  const uint64_t seq = comm->nextCollSeq();
  const uint64_t tag = engine::makeCollTag(seq, 0, 0);
  engine::P2PJob job;
  job.transport = comm->transport();
  job.collectiveAlgorithm = "direct";
  const char* send = static_cast<const char*>(a.send);
  char* recv = static_cast<char*>(a.recv);
  // Rotated order (peer me+s, me-s) so that no receiver is the first target of everyone.
  for (int s = 1; s < p; ++s) {
    int to = (me + s) % p, from = (me - s + p) % p;
    if (a.recvcounts[from] > 0)
      job.ops.push_back({false, from, recv + a.rdispls[from] * es, a.recvcounts[from] * es, tag});
    if (a.sendcounts[to] > 0)
      job.ops.push_back({true, to, const_cast<char*>(send) + a.sdispls[to] * es,
                         a.sendcounts[to] * es, tag});
  }
  size_t selfBytes = a.sendcounts[me] * es;
  const char* selfSrc = send + a.sdispls[me] * es;
  char* selfDst = recv + a.rdispls[me] * es;
  work->localCopies.push_back([=] {
    if (selfBytes) std::memmove(selfDst, selfSrc, selfBytes);
  });
  work->p2ps.push_back(std::move(job));
  if (comm->config().check) work->checks.push_back(allToAllvCheck(comm, seq, a, algo));
  return submit(std::move(work), stream);
}

}  // namespace

Status inPlaceLayout(const Communicator& comm, const CollArgs& a, bool* inPlace) {
  const size_t es = dataTypeSize(a.dtype);
  const size_t r = static_cast<size_t>(comm.rank());
  const char* send = static_cast<const char*>(a.send);
  const char* recv = static_cast<const char*>(a.recv);
  const size_t inBytes =
      plan::inputCount(a.collective, comm.nranks(), a.count, a.root, comm.rank()) * es;
  const size_t outBytes =
      plan::outputCount(a.collective, comm.nranks(), a.count, a.root, comm.rank()) * es;
  // Rooted layouts only matter at the root (elsewhere one of the buffers is not used).
  const uintptr_t s = reinterpret_cast<uintptr_t>(send), v = reinterpret_cast<uintptr_t>(recv);
  const uintptr_t rootOff = static_cast<uintptr_t>(a.root) * a.count * es;
  const bool isRoot = comm.rank() == a.root;
  switch (a.collective) {
    case Collective::AllGather: *inPlace = send == recv + r * a.count * es; break;
    case Collective::ReduceScatter: *inPlace = recv == send + r * a.count * es; break;
    case Collective::Gather: *inPlace = isRoot && send && recv && s == v + rootOff; break;
    case Collective::Scatter: *inPlace = isRoot && send && recv && v == s + rootOff; break;
    default: *inPlace = send == recv && send != nullptr; break;
  }
  if (!*inPlace && rangesOverlap(send, inBytes, recv, outBytes)) {
    WARN("%s: sendbuff and recvbuff overlap but are not in place (NCCL's in-place layout is %s)",
         collectiveName(a.collective),
         a.collective == Collective::AllGather       ? "sendbuff == recvbuff + rank*sendcount"
         : a.collective == Collective::ReduceScatter ? "recvbuff == sendbuff + rank*recvcount"
         : a.collective == Collective::Gather        ? "sendbuff == recvbuff + root*count"
         : a.collective == Collective::Scatter       ? "recvbuff == sendbuff + root*count"
                                                     : "sendbuff == recvbuff");
    return Status::InvalidArgument;
  }
  return Status::Success;
}

namespace {

/// Builds, compiles and publishes the prepared collective of `key` (the first call of it).
/// *out is nullptr when the communicator's table is full (the caller takes the general path).
Status prepare(Communicator* comm, const PreparedKey& key, const char* algo, int64_t slice,
               Prepared** out) {
  plan::Request req;
  req.collective = key.collective;
  req.nranks = comm->nranks();
  req.count = key.count;
  req.root = key.root;
  req.inPlace = key.inPlace;
  std::shared_ptr<const plan::CompiledPlan> plan;
  NLCHECK(comm->getPlan(req, algo, &plan));
  auto e = std::make_unique<Prepared>();
  e->key = key;
  e->plan = std::move(plan);
  e->algorithm = algo::find(algo, key.collective)->name;
  e->sliceBytes = slice;
  e->scratchBytes = e->plan->plan().scratchCount * dataTypeSize(key.dtype);
  *out = comm->prepared().insert(std::move(e));
  return Status::Success;
}

/// This rank's share of the host's streaming-store threshold: the ranks of a host share its
/// last-level cache (hostGroups()[0] ranks per host; all of them when the groups are not even).
size_t streamShare(const Communicator& comm) {
  const size_t host = comm.config().streamStoreBytes;
  const auto& g = comm.hostGroups();
  const int local = g.empty() ? comm.nranks() : g[0];
  return host == 0 ? 0 : std::max<size_t>(1, host / static_cast<size_t>(std::max(1, local)));
}

/// Runs `job` of `p` on `runner` and records the outcome on the communicator.
Status runJob(Communicator* comm, Prepared* p, engine::Runner* runner, engine::CollJob& job,
              const void* send, void* recv, char* scratch, uint64_t seq) {
  if (!job.plan) {  // the parts that never change, once per job
    job.plan = p->plan;
    job.rank = comm->rank();
    job.dtype = p->key.dtype;
    job.op = p->key.op;
    job.transport = comm->transport();
    job.sliceBytes = p->sliceBytes >= 0 ? static_cast<size_t>(p->sliceBytes)
                                        : comm->config().sliceBytes;
    job.streamStoreBytes = streamShare(*comm);
  }
  job.input = send;
  job.output = recv;
  job.scratch = scratch;
  job.seq = seq;
  const Status s = runner->run(job, comm->config().timeout);
  if (s == Status::Success) {
    comm->recordCollective(p->algorithm, job.vcall, job.vend, job.bytesSent);
  } else {  // the engine has aborted the transport: the communicator is done
    comm->setLastError(log::lastError());
    comm->setAsyncError(s);
  }
  return s;
}

/// runPrepared() while another thread runs the same prepared collective on this communicator:
/// a runner, job and scratch of its own.
Status runSpare(Communicator* comm, Prepared* p, const void* send, void* recv, uint64_t seq) {
  engine::Runner runner;
  engine::CollJob job;
  std::shared_ptr<char> lease;
  if (p->scratchBytes > 0) lease = comm->leaseScratch(p->scratchBytes);
  return runJob(comm, p, &runner, job, send, recv, lease.get(), seq);
}

/// Runs a prepared collective to completion in the calling thread: no allocation and no lock
/// once it has run before (unless another thread runs the same one on this communicator at the
/// same moment: then a fresh runner serves this call). Errors are recorded on the communicator
/// as Work::execute records them.
Status runPrepared(Communicator* comm, Prepared* p, const void* send, void* recv, uint64_t seq) {
  if (comm->aborted()) {  // queued before the abort: it fails as the running work did
    WARN("rank %d: communicator was aborted", comm->rank());
    comm->setLastError(log::lastError());
    return Status::RemoteError;
  }
  if (Status e = comm->asyncError(); e != Status::Success) {
    WARN("rank %d: communicator has failed earlier (%s)", comm->rank(), statusName(e));
    comm->setLastError(log::lastError());
    return e;
  }
  if (p->busy.exchange(true, std::memory_order_acquire)) return runSpare(comm, p, send, recv, seq);
  char* scratch = p->keptScratch();
  std::shared_ptr<char> lease;
  if (p->scratchBytes > 0 && scratch == nullptr) {
    lease = comm->leaseScratch(p->scratchBytes);
    scratch = lease.get();
  }
  // The owner reuses the entry's runner and job (no reference count to bump per call).
  const Status s = runJob(comm, p, &p->runner, p->job, send, recv, scratch, seq);
  p->busy.store(false, std::memory_order_release);
  return s;
}

/// A prepared collective queued on a stream: ptr = {comm, prepared, send, recv}, value = seq.
Status runQueuedPrepared(StreamItem& item, Lives* owners) {
  auto* comm = static_cast<Communicator*>(item.ptr[0]);
  const Status s = runPrepared(comm, static_cast<Prepared*>(item.ptr[1]), item.ptr[2],
                               item.ptr[3], item.value);
  if (isFatal(s)) owners->push_back(comm->life());
  comm->removePending();  // the last touch of comm: destroy may free it from here on
  return s;
}

/// The Plan request of a call (choose() adds hier's shape).
plan::Request requestOf(const Communicator& comm, const CollArgs& a, bool inPlace) {
  plan::Request req;
  req.collective = a.collective;
  req.nranks = comm.nranks();
  req.count = a.count;
  req.root = a.root;
  req.inPlace = inPlace;
  return req;
}

/// The tuner's choice for a call: its Request (hier's shape included), algorithm and slice.
struct Choice {
  plan::Request req;
  std::string algo;
  int64_t slice = -1;
};
Status prepareAndRun(Communicator* comm, const CollArgs& a, bool inPlace, const PreparedKey& key,
                     Stream* stream);
Status generalCollective(Communicator* comm, const CollArgs& a, bool inPlace, Stream* stream,
                         Choice* chosen);

}  // namespace

Status collective(Communicator* comm, const CollArgs& a, Stream* stream) {
  if (a.collective == Collective::AllToAllv) return allToAllv(comm, a, stream);
  if (emptyCallEnds(*comm, a)) {  // (its buffers hold no bytes, so they cannot overlap)
    if (comm->aborted()) {
      WARN("rank %d: the communicator was revoked: it takes no new work", comm->rank());
      return Status::InvalidUsage;
    }
    return comm->asyncError();
  }
  bool inPlace = false;
  NLCHECK(inPlaceLayout(*comm, a, &inPlace));
  // The hot path: a prepared collective, run inline or queued as one fixed-size stream item; the
  // algorithm (the tuner's, with `auto`) is chosen once, when it is prepared. Calls that need more
  // than a Plan (PreMulSum's scaling, NLCCL_CHECK, a group, hier's shape) take the general path.
  if (a.extras == nullptr && !comm->config().check && groupDepth() == 0) {
    const PreparedKey key{a.collective, a.dtype, a.op, inPlace, a.root, a.count};
    Prepared* p = comm->prepared().find(key);
    if (p == nullptr) return prepareAndRun(comm, a, inPlace, key, stream);
    if (comm->aborted()) {  // as submit(): a revoked communicator takes no new work
      WARN("rank %d: the communicator was revoked: it takes no new work", comm->rank());
      return Status::InvalidUsage;
    }
    INFO(log::kColl, "%s: rank %d of %d, count %zu, %s, %s, root %d, %s, algorithm %s%s",
         collectiveName(a.collective), comm->rank(), comm->nranks(), a.count,
         dataTypeName(a.dtype), redOpName(a.op), a.root, inPlace ? "in place" : "out of place",
         p->algorithm, stream ? ", on a stream" : "");
    const uint64_t seq = comm->nextCollSeq();
    // Without a stream the call runs here, inside the API's hold of the communicator.
    if (stream == nullptr) return runPrepared(comm, p, a.send, a.recv, seq);
    // The item holds a pending count until it has run (runQueuedPrepared drops it).
    if (a.heldByCaller != nullptr && *a.heldByCaller) {
      *a.heldByCaller = false;  // the caller's, handed over: one atomic less per call
    } else {
      comm->addPending();
    }
    StreamItem item;
    item.run = runQueuedPrepared;
    item.ptr[0] = comm;
    item.ptr[1] = p;
    item.ptr[2] = const_cast<void*>(a.send);
    item.ptr[3] = a.recv;
    item.value = seq;
    stream->enqueue(item);
    return Status::Success;
  }

  return generalCollective(comm, a, inPlace, stream, nullptr);
}

namespace {

/// The first call of a prepared key: chooses the algorithm, prepares it (hier excepted: its
/// shape is re-read per call), and runs it as collective() runs prepared ones.
Status prepareAndRun(Communicator* comm, const CollArgs& a, bool inPlace, const PreparedKey& key,
                     Stream* stream) {
  Choice c;
  c.req = requestOf(*comm, a, inPlace);
  NLCHECK(choose(comm, a, &c.req, &c.algo, &c.slice));
  Prepared* p = nullptr;
  if (c.algo != "hier") NLCHECK(prepare(comm, key, c.algo.c_str(), c.slice, &p));
  if (p != nullptr) return collective(comm, a, stream);  // now found
  return generalCollective(comm, a, inPlace, stream, &c);
}

/// Everything but the prepared path: a Work of one collective; `chosen` when the algorithm was.
Status generalCollective(Communicator* comm, const CollArgs& a, bool inPlace, Stream* stream,
                         Choice* chosen) {
  const size_t es = dataTypeSize(a.dtype);
  Choice own;
  Choice& c = chosen ? *chosen : own;
  plan::Request& req = c.req;
  std::string& algo = c.algo;
  int64_t& slice = c.slice;
  if (!chosen) {
    req = requestOf(*comm, a, inPlace);
    NLCHECK(choose(comm, a, &req, &algo, &slice));
  }
  std::shared_ptr<const plan::CompiledPlan> plan;
  NLCHECK(comm->getPlan(req, algo, &plan));

  INFO(log::kColl, "%s: rank %d of %d, count %zu, %s, %s, root %d, %s, algorithm %s%s",
       collectiveName(a.collective), comm->rank(), comm->nranks(), a.count,
       dataTypeName(a.dtype), redOpName(a.op), a.root, inPlace ? "in place" : "out of place",
       algo.c_str(), stream ? ", on a stream" : "");
  auto work = std::make_shared<Work>();
  work->addComm(comm);
  if (a.extras != nullptr) {
    work->localCopies.push_back(a.extras->prepareInput);
    work->scratch.push_back(a.extras->keepAlive);
  }
  engine::CollJob job;
  job.plan = plan;
  job.rank = comm->rank();
  job.input = a.send;
  job.output = a.recv;
  work->collScratch.push_back(plan->plan().scratchCount * es);  // leased when the work runs
  job.dtype = a.dtype;
  job.op = a.op;
  job.transport = comm->transport();
  job.seq = comm->nextCollSeq();
  job.sliceBytes = slice >= 0 ? static_cast<size_t>(slice) : comm->config().sliceBytes;
  job.streamStoreBytes = streamShare(*comm);
  PredictCall predict;
  predict.collective = a.collective;
  predict.bytes = a.count * es * (perRankCount(a.collective) ? static_cast<size_t>(comm->nranks()) : 1);
  predict.root = a.root;
  predict.dtype = a.dtype;
  predict.candidate.algorithm = algo;
  predict.candidate.levelAlgorithms = req.levelAlgorithms;
  predict.candidate.sliceBytes = static_cast<int64_t>(job.sliceBytes);
  // hier without groups runs one level (algorithms/hier.cpp): say so, or the simulator would
  // take the fabric's levels.
  predict.groups = req.groups.empty() && algo == "hier" ? std::vector<int>{comm->nranks()}
                                                        : req.groups;
  work->predictions.push_back(std::move(predict));
  work->colls.push_back(std::move(job));
  work->collComms.push_back(comm);
  if (comm->config().check) {
    CallCheck check;
    check.comm = comm;
    check.seq = work->colls.back().seq;
    check.sig.collective = static_cast<int32_t>(a.collective);
    check.sig.dtype = static_cast<int32_t>(a.dtype);
    check.sig.op = static_cast<int32_t>(a.op);
    check.sig.root = a.root;
    check.sig.count = a.count;
    check.sig.algorithmHash = std::hash<std::string>{}(algo);
    work->checks.push_back(std::move(check));
  }
  return submit(std::move(work), stream);
}

}  // namespace

Status pointToPoint(Communicator* comm, bool isSend, void* buf, size_t count, DataType dtype,
                    int peer, Stream* stream) {
  auto work = std::make_shared<Work>();
  work->addComm(comm);
  engine::P2PJob job;
  job.transport = comm->transport();
  uint64_t n = isSend ? comm->nextSendTag(peer) : comm->nextRecvTag(peer);
  INFO(log::kP2P, "%s: rank %d %s rank %d, %zu x %s, message %llu of the pair, over %s",
       isSend ? "send" : "recv", comm->rank(), isSend ? "to" : "from", peer, count,
       dataTypeName(dtype), static_cast<unsigned long long>(n),
       comm->transport()->peerTransport(peer));
  job.ops.push_back({isSend, peer, buf, count * dataTypeSize(dtype), engine::makeP2PTag(n)});
  work->p2ps.push_back(std::move(job));
  return submit(std::move(work), stream);
}

}  // namespace nlccl::core
