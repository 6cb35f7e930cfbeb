#include "core/work.hpp"

#include <algorithm>

#include "algorithms/algorithms.hpp"
#include "util/log.hpp"

namespace nlccl::core {

namespace {
/// The registry's (static) spelling of a Plan's algorithm, for the communicator's statistics.
const char* staticName(const plan::Plan& p) {
  const algo::Entry* e = algo::find(p.algorithm, p.collective);
  return e ? e->name : "other";
}
}  // namespace

Work::~Work() {
  for (Communicator* c : pendingOn) c->removePending();
}

void Work::addComm(Communicator* c) {
  c->addPending();
  pendingOn.push_back(c);
  if (std::find(comms.begin(), comms.end(), c) == comms.end()) comms.push_back(c);
}

void Work::merge(Work&& o) {
  auto move = [](auto& dst, auto& src) {
    for (auto& x : src) dst.push_back(std::move(x));
  };
  move(colls, o.colls);
  move(predictions, o.predictions);
  move(collComms, o.collComms);
  move(checks, o.checks);
  move(collScratch, o.collScratch);
  move(localCopies, o.localCopies);
  move(preColls, o.preColls);
  move(prepare, o.prepare);
  move(finish, o.finish);
  move(scratch, o.scratch);
  // Point-to-point ops of one communicator form one job: they are all posted together anyway.
  for (auto& j : o.p2ps) {
    auto it = std::find_if(p2ps.begin(), p2ps.end(),
                           [&](const engine::P2PJob& k) { return k.transport == j.transport; });
    if (it == p2ps.end()) p2ps.push_back(std::move(j));
    else move(it->ops, j.ops);
  }
  for (Communicator* c : o.comms)
    if (std::find(comms.begin(), comms.end(), c) == comms.end()) comms.push_back(c);
  move(pendingOn, o.pendingOn);
  o.pendingOn.clear();
}

Status Work::execute() {
  for (Communicator* c : comms) {
    if (c->aborted()) {  // queued before the abort: it fails as the running work did
      WARN("rank %d: communicator was aborted", c->rank());
      return Status::RemoteError;
    }
    if (c->asyncError() != Status::Success) {
      WARN("rank %d: communicator has failed earlier (%s)", c->rank(), statusName(c->asyncError()));
      return c->asyncError();
    }
  }
  for (size_t i = 0; i < colls.size(); ++i)
    if (collScratch[i] > 0) {
      scratch.push_back(collComms[i]->leaseScratch(collScratch[i]));
      colls[i].scratch = scratch.back().get();
    }
  for (auto& copy : localCopies) copy();
  std::chrono::milliseconds timeout = std::chrono::milliseconds::max();
  for (Communicator* c : comms) timeout = std::min(timeout, c->config().timeout);
  // Any failure inside the engine has aborted the transports: the communicators are then done.
  bool engineFailed = false;
  auto runEngine = [&](std::vector<engine::CollJob>& c, std::vector<engine::P2PJob>& p) {
    Status r = engine::run(c, p, timeout);
    engineFailed = engineFailed || r != Status::Success;
    return r;
  };
  Status s = Status::Success;
  if (!preColls.empty()) {
    std::vector<engine::P2PJob> none;
    s = runEngine(preColls, none);
    for (size_t i = 0; i < prepare.size() && s == Status::Success; ++i) s = prepare[i](*this);
  }
  if (s == Status::Success && !checks.empty()) s = checkCalls(checks, timeout, &engineFailed);
  if (s == Status::Success) s = runEngine(colls, p2ps);
  if (s == Status::Success) {
    for (auto& f : finish) f();
    for (size_t i = 0; i < colls.size(); ++i)
      collComms[i]->recordCollective(staticName(colls[i].plan->plan()), colls[i].vcall,
                                     colls[i].vend, colls[i].bytesSent);
    for (const engine::P2PJob& j : p2ps) {
      if (j.collectiveAlgorithm == nullptr) continue;
      for (Communicator* c : comms)
        if (c->transport() == j.transport)
          c->recordCollective(j.collectiveAlgorithm, j.vcall, j.vend, j.bytesSent);
    }
  }
  if (s != Status::Success) {
    std::string msg = log::lastError();
    for (Communicator* c : comms) {
      c->setLastError(msg);
      if (isFatal(s) || engineFailed) c->setAsyncError(s);
    }
  }
  return s;
}

}  // namespace nlccl::core
