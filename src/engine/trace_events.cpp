#include "engine/trace_events.hpp"

#include <set>
#include <string>

#include "util/trace.hpp"

namespace nlccl::engine::trace_events {

namespace {

using trace::Track;

// Thread tracks of a rank: its calls, its waits, then one per (channel, loop) for steps, since a
// channel's steps follow each other within a loop but loops overlap (pipelining).
constexpr int kCallsTid = 1;
constexpr int kWaitsTid = 2;
int stepTid(int channel, int loop) { return 100 + channel * 64 + loop; }

std::string peerList(const std::set<int>& peers) {
  std::string s = "[";
  for (int p : peers) s += (s.size() > 1 ? "," : "") + std::to_string(p);
  return s + "]";
}

}  // namespace

void collective(const CollJob& job, double startUs) {
  const plan::CompiledPlan& cp = *job.plan;
  const plan::Plan& p = cp.plan();
  std::set<int> peers;
  const auto [first, last] = cp.rankSteps(job.rank);
  for (int s = first; s < last; ++s)
    for (int x = cp.steps()[s].firstXfer; x < cp.steps()[s].firstXfer + cp.steps()[s].numXfers; ++x) {
      const plan::Transfer& t = cp.transfer(x);
      peers.insert(t.peer);
      if (t.next >= 0) peers.insert(t.next);
    }
  plan::Request req;
  req.collective = p.collective;
  req.nranks = p.nranks;
  req.count = p.count;
  req.root = p.root;
  req.matrix = {};
  const size_t es = dataTypeSize(job.dtype);
  std::string args = "\"algorithm\":\"" + p.algorithm + "\",\"nranks\":" + std::to_string(p.nranks) +
                     ",\"count\":" + std::to_string(p.count) + ",\"bytes\":" +
                     std::to_string(plan::inputCount(req, job.rank) * es) +
                     ",\"bytes_sent\":" + std::to_string(job.bytesSent) + ",\"dtype\":\"" +
                     dataTypeName(job.dtype) + "\",\"op\":\"" + redOpName(job.op) +
                     "\",\"root\":" + std::to_string(p.root) + ",\"in_place\":" +
                     (p.inPlace ? "true" : "false") + ",\"seq\":" + std::to_string(job.seq) +
                     ",\"peers\":" + peerList(peers);
  const double now = trace::nowUs();
  trace::span(job.rank, Track::Real, kCallsTid, "collectives", collectiveName(p.collective),
              "collective", startUs, now - startUs, args);
  if (job.transport->timeModel())
    trace::span(job.rank, Track::Modelled, kCallsTid, "collectives", collectiveName(p.collective),
                "collective", job.vstart * 1e6, (job.vend - job.vstart) * 1e6, args);
}

void step(const CollJob& job, int s, int loop, int loops, double startUs, bool modelled,
          double vstart, double vend) {
  const plan::CompiledPlan& cp = *job.plan;
  const plan::StepInfo& si = cp.steps()[s];
  std::string kinds, peers, name;
  size_t elems = 0;
  for (int x = si.firstXfer; x < si.firstXfer + si.numXfers; ++x) {
    const plan::Transfer& t = cp.transfer(x);
    size_t first = 0, n = 0;
    plan::CompiledPlan::slice(t.region.count, static_cast<size_t>(loop), static_cast<size_t>(loops),
                              &first, &n);
    elems += n;
    const std::string kind = plan::xferKindName(t.kind);
    kinds += std::string(kinds.empty() ? "" : ",") + "\"" + kind + "\"";
    if (name.find(kind) == std::string::npos) name += (name.empty() ? "" : "+") + kind;
    peers += (peers.empty() ? "" : ",") + std::to_string(t.peer);
  }
  if (name.empty()) name = "local";
  const std::string args = "\"step\":" + std::to_string(s - cp.rankSteps(job.rank).first) +
                           ",\"loop\":" + std::to_string(loop) + ",\"peer\":[" + peers +
                           "],\"bytes\":" + std::to_string(elems * dataTypeSize(job.dtype)) +
                           ",\"kinds\":[" + kinds + "],\"seq\":" + std::to_string(job.seq);
  const std::string thread = "channel " + std::to_string(si.channel) + " loop " + std::to_string(loop);
  const int tid = stepTid(si.channel, loop % 64);
  const double now = trace::nowUs();
  trace::span(job.rank, Track::Real, tid, thread.c_str(), name.c_str(), "step", startUs,
              now - startUs, args);
  if (modelled)
    trace::span(job.rank, Track::Modelled, tid, thread.c_str(), name.c_str(), "step", vstart * 1e6,
                (vend - vstart) * 1e6, args);
}

void wait(int rank, double startUs) {
  trace::span(rank, Track::Real, kWaitsTid, "waits", "wait", "wait", startUs,
              trace::nowUs() - startUs, "");
}

void p2p(const P2PJob& job, double startUs) {
  std::set<int> peers;
  size_t sent = 0, received = 0;
  for (const P2POp& op : job.ops) {
    peers.insert(op.peer);
    (op.isSend ? sent : received) += op.bytes;
  }
  const std::string args = "\"ops\":" + std::to_string(job.ops.size()) + ",\"bytes_sent\":" +
                           std::to_string(sent) + ",\"bytes_received\":" + std::to_string(received) +
                           ",\"peers\":" + peerList(peers);
  trace::span(job.transport->rank(), Track::Real, kCallsTid, "collectives",
              job.collectiveAlgorithm ? "alltoallv" : "sendrecv", "p2p", startUs,
              trace::nowUs() - startUs, args);
}

}  // namespace nlccl::engine::trace_events
