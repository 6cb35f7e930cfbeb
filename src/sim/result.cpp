// Bandwidth conventions (nccl-tests doc/PERFORMANCE.md) and the Chrome trace writer.
#include <cstdio>
#include <memory>

#include "sim/simulate.hpp"

namespace nlccl::sim {

const char* modeName(Mode m) { return m == Mode::Analytical ? "analytical" : "flow"; }

bool parseMode(const std::string& name, Mode* out) {
  if (name == "analytical") *out = Mode::Analytical;
  else if (name == "flow") *out = Mode::Flow;
  else return false;
  return true;
}

double busbwFactor(Collective c, int nranks) {
  const double p = nranks;
  switch (c) {
    case Collective::AllReduce: return 2 * (p - 1) / p;
    case Collective::AllGather:
    case Collective::ReduceScatter:
    case Collective::AllToAll:
    case Collective::AllToAllv:
    case Collective::Gather:
    case Collective::Scatter: return (p - 1) / p;
    case Collective::Broadcast:
    case Collective::Reduce:
    case Collective::SendRecv: return 1;
  }
  return 1;
}

size_t totalBytes(const plan::Request& req, size_t elemSize) {
  const size_t p = static_cast<size_t>(req.nranks);
  switch (req.collective) {
    case Collective::AllGather:
    case Collective::ReduceScatter:
    case Collective::AllToAll:
    case Collective::Gather:
    case Collective::Scatter: return req.count * p * elemSize;
    case Collective::AllToAllv:
    case Collective::SendRecv: {
      size_t n = 0;
      for (size_t v : req.matrix) n += v;
      // nccl-tests' alltoallv: S is one rank's buffer (count x nranks), as for all-to-all; with
      // a matrix, the ranks' mean (the whole matrix over p, not the whole matrix).
      return req.collective == Collective::AllToAllv ? n * elemSize / p : n * elemSize;
    }
    default: return req.count * elemSize;
  }
}

Status writeChromeTrace(const fabric::Topology& topo, const Result& r, const std::string& path,
                        std::string* error) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "w"), &std::fclose);
  if (!f) {
    if (error) *error = "cannot write trace file " + path;
    return Status::SystemError;
  }
  FILE* o = f.get();
  std::fprintf(o, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"topology\":\"%s\",\"algorithm\":"
               "\"%s\",\"collective\":\"%s\",\"ranks\":%d,\"bytes\":%zu,\"time_us\":%.6f%s},\n"
               "\"traceEvents\":[\n",
               topo.name().c_str(), r.algorithm.c_str(), collectiveName(r.collective), r.nranks,
               r.bytes, r.timeS * 1e6, r.traceTruncated ? ",\"truncated\":true" : "");
  bool first = true;
  auto sep = [&] {
    if (!first) std::fputs(",\n", o);
    first = false;
  };
  for (int rank = 0; rank < r.nranks; ++rank) {
    sep();
    std::fprintf(o, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,"
                 "\"args\":{\"name\":\"rank %d\"}}", topo.chipOfRank(rank), rank, rank);
  }
  for (const TraceEvent& e : r.trace) {
    sep();
    std::fprintf(o, "{\"ph\":\"X\",\"name\":\"%s %d->%d\",\"cat\":\"ch%d\",\"pid\":%d,\"tid\":%d,"
                 "\"ts\":%.6f,\"dur\":%.6f,\"args\":{\"bytes\":%.0f,\"step\":%d,\"loop\":%d,"
                 "\"dst\":%d}}",
                 e.reduce ? "sendReduce" : "send", e.src, e.dst, e.channel, topo.chipOfRank(e.src),
                 e.src, e.startS * 1e6, (e.endS - e.startS) * 1e6, e.bytes, e.step, e.loop, e.dst);
  }
  for (int rank = 0; rank < static_cast<int>(r.rankFinishS.size()); ++rank) {
    sep();
    std::fprintf(o, "{\"ph\":\"i\",\"name\":\"finish\",\"s\":\"t\",\"pid\":%d,\"tid\":%d,"
                 "\"ts\":%.6f}", topo.chipOfRank(rank), rank, r.rankFinishS[rank] * 1e6);
  }
  std::fputs("\n]}\n", o);
  if (std::ferror(o)) {
    if (error) *error = "error writing trace file " + path;
    return Status::SystemError;
  }
  return Status::Success;
}

}  // namespace nlccl::sim
