#include "core/group.hpp"

#include <algorithm>
#include <map>
#include <vector>

#include "util/log.hpp"

namespace nlccl::core {

namespace {
struct Pending {
  Stream* stream;
  std::shared_ptr<Work> work;
};
__attribute__((tls_model("initial-exec"))) thread_local int tDepth = 0;  // read every call
thread_local std::vector<Pending> tPending;

/// A general Work queued on a stream: ptr[0] = a std::shared_ptr<Work> of its own.
Status runWork(StreamItem& item, Lives* owners) {
  Work* work = static_cast<std::shared_ptr<Work>*>(item.ptr[0])->get();
  const Status s = work->execute();
  if (isFatal(s))
    for (Communicator* c : work->comms) owners->push_back(c->life());
  return s;
}

Status launch(std::shared_ptr<Work> work, Stream* stream) {
  if (stream == nullptr) return work->execute();
  StreamItem item;
  item.run = runWork;
  item.release = [](StreamItem& it) { delete static_cast<std::shared_ptr<Work>*>(it.ptr[0]); };
  item.ptr[0] = new std::shared_ptr<Work>(std::move(work));
  stream->enqueue(item);
  return Status::Success;
}
}  // namespace

void groupStart() { ++tDepth; }
int groupDepth() { return tDepth; }

Status groupEnd() {
  if (tDepth == 0) {
    WARN("nlcclGroupEnd called without a matching nlcclGroupStart");
    return Status::InvalidUsage;
  }
  if (--tDepth > 0) return Status::Success;
  std::vector<Pending> pending = std::move(tPending);
  tPending.clear();
  // One Work per stream: everything on one stream (or inline) is driven together.
  std::vector<Pending> merged;
  for (Pending& p : pending) {
    Pending* into = nullptr;
    for (Pending& m : merged)
      if (m.stream == p.stream) into = &m;
    if (into == nullptr) merged.push_back(std::move(p));
    else into->work->merge(std::move(*p.work));
  }
  // Queue stream work before running inline work: the inline part may wait for it.
  std::stable_partition(merged.begin(), merged.end(),
                        [](const Pending& m) { return m.stream != nullptr; });
  Status first = Status::Success;
  for (Pending& m : merged) {
    Status s = launch(m.work, m.stream);
    if (s != Status::Success && first == Status::Success) first = s;
  }
  return first;
}

Status groupSimulateEnd(double* seconds) {
  *seconds = 0;
  if (tDepth == 0) {
    WARN("nlcclGroupSimulateEnd called without a matching nlcclGroupStart");
    return Status::InvalidUsage;
  }
  if (--tDepth > 0) return Status::Success;
  std::vector<Pending> pending = std::move(tPending);
  tPending.clear();
  std::map<Communicator*, double> perComm;
  for (const Pending& p : pending)
    for (size_t i = 0; i < p.work->predictions.size() && i < p.work->collComms.size(); ++i) {
      double t = 0;
      NLCHECK(p.work->collComms[i]->predict(p.work->predictions[i], &t));
      perComm[p.work->collComms[i]] += t;
    }
  for (const auto& [comm, t] : perComm) *seconds = std::max(*seconds, t);
  return Status::Success;
}

Status submit(std::shared_ptr<Work> work, Stream* stream) {
  // A call made after nlcclCommRevoke is a usage error; work queued before an abort or revoke
  // fails with RemoteError when it comes up (Work::execute).
  for (Communicator* c : work->comms)
    if (c->aborted()) {
      WARN("rank %d: the communicator was revoked: it takes no new work", c->rank());
      return Status::InvalidUsage;
    }
  if (tDepth > 0) {
    tPending.push_back({stream, std::move(work)});
    return Status::Success;
  }
  return launch(std::move(work), stream);
}

}  // namespace nlccl::core
